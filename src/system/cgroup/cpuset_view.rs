//! Who else may run on the CPUs of a process's cpuset group: the groups beside each level
//! of its chain (a root's children) and the groups above it that hold tasks of their own.
//! `Sharers::read` reads them once (it walks sibling directories and, on v1, the
//! `/proc/PID/stat` of every task an ancestor holds: thousands in a v1 root);
//! `CpusetView::of` judges measured CPUs against that reading without reading anything.

use std::path::Path;

use super::{Chain, child_levels};
use crate::engine::cpu::CpuList;

/// A group above the process's own that holds tasks of its own (not kernel threads).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TasksAbove {
    pub path: String,
    pub dir: String,
    pub tasks: usize,
    /// Its effective CPUs.
    pub cpus: CpuList,
}

/// The groups that may share a chain's CPUs, as read once.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sharers {
    /// The groups beside each level (a root's children), with their effective CPUs.
    pub beside: Vec<(String, CpuList)>,
    pub above: Vec<TasksAbove>,
}

impl Sharers {
    /// Reads them below `root` (`/` for the live host).
    pub fn read(root: &Path, chain: &Chain) -> Sharers {
        Sharers {
            beside: sibling_cpusets(root, chain),
            above: ancestors_with_tasks(root, chain),
        }
    }
}

/// The effective cpusets of the groups beside each level of `chain` (siblings of every
/// level below the top; for a chain of the root alone, its children), by group path: the
/// groups whose tasks may share this group's CPUs. Read from the tree under `root`.
pub fn sibling_cpusets(root: &Path, chain: &Chain) -> Vec<(String, CpuList)> {
    let cpus = |l: super::Level| Some((l.path, l.cpuset?.effective?));
    if let [top] = chain.levels.as_slice() {
        let children = child_levels(root, chain.version, &top.path, &top.dir);
        return children.into_iter().filter_map(cpus).collect();
    }
    let mut out = Vec::new();
    for pair in chain.levels.windows(2) {
        let (parent, own) = (&pair[0], &pair[1]);
        let beside = child_levels(root, chain.version, &parent.path, &parent.dir);
        out.extend(
            (beside.into_iter())
                .filter(|l| l.path != own.path)
                .filter_map(cpus),
        );
    }
    out
}

/// The groups above the process's own that hold tasks of their own (not kernel threads,
/// which keep to their CPUs): v1 leaves most of the system in the root, and those tasks
/// may run on every CPU of the root's cpuset.
fn ancestors_with_tasks(root: &Path, chain: &Chain) -> Vec<TasksAbove> {
    let above = &chain.levels[..chain.levels.len().saturating_sub(1)];
    (above.iter())
        .filter_map(|l| {
            let dir = root.join(l.dir.trim_start_matches('/'));
            let procs = std::fs::read_to_string(dir.join("cgroup.procs")).ok()?;
            let tasks = (procs.lines())
                .filter(|pid| !is_kernel_thread(root, pid.trim()))
                .count();
            let cpus = l.cpuset.as_ref()?.effective.clone()?;
            (tasks > 0).then(|| TasksAbove {
                path: l.path.clone(),
                dir: l.dir.clone(),
                tasks,
                cpus,
            })
        })
        .collect()
}

/// PF_KTHREAD in /proc/PID/stat's flags (the 9th field); a task gone is not counted.
fn is_kernel_thread(root: &Path, pid: &str) -> bool {
    const PF_KTHREAD: u64 = 0x0020_0000;
    let Ok(stat) = std::fs::read_to_string(root.join("proc").join(pid).join("stat")) else {
        return true;
    };
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().nth(6)?.parse::<u64>().ok())
        .is_some_and(|flags| flags & PF_KTHREAD != 0)
}

/// Which measured CPUs are the group's alone, and which other groups also hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CpusetView {
    /// The group's path.
    pub group: String,
    pub exclusive: CpuList,
    /// Measured CPUs other groups' cpusets hold too.
    pub shared: CpuList,
    /// The other groups (path and the measured CPUs they hold), at most a few named.
    pub others: Vec<(String, CpuList)>,
    /// v1 `cpu_exclusive`, v2 partition type, where set.
    pub flag: Option<String>,
    /// The groups above that hold tasks of their own on measured CPUs: (directory, its
    /// effective CPUs).
    pub tasks_above: Vec<(String, CpuList)>,
}

impl CpusetView {
    /// The view of `measured` from `chain`'s group, given who else may use its CPUs.
    pub fn of(chain: &Chain, sharers: &Sharers, measured: &CpuList) -> CpusetView {
        let own = chain.own();
        let tasks_above = (sharers.above.iter())
            .filter(|a| !a.cpus.intersect(measured).is_empty())
            .map(|a| (a.dir.clone(), a.cpus.clone()))
            .collect();
        let above = (sharers.above.iter()).map(|a| {
            (
                format!("{} (its {} tasks)", a.path, a.tasks),
                a.cpus.clone(),
            )
        });
        let others: Vec<(String, CpuList)> = (sharers.beside.iter().cloned())
            .chain(above)
            .map(|(p, c)| (p, c.intersect(measured)))
            .filter(|(_, c)| !c.is_empty())
            .collect();
        let shared = CpuList::from_cpus(
            others
                .iter()
                .flat_map(|(_, c)| c.cpus().iter().copied())
                .collect(),
        );
        let root = chain.levels.len() == 1;
        let set = own.cpuset.clone().unwrap_or_default();
        let flag = match (set.cpu_exclusive, set.partition) {
            // The root is always both: only a child's setting says something.
            _ if own.path == "/" => None,
            (Some(true), _) => Some("cpu_exclusive 1".to_string()),
            (_, Some(p)) if p != "member" => Some(format!("partition {p}")),
            _ => None,
        };
        // Every task not in a cpuset group of its own shares the root's CPUs.
        let shared = if root { measured.clone() } else { shared };
        CpusetView {
            group: own.path.clone(),
            exclusive: measured.without(&shared),
            shared,
            others,
            flag,
            tasks_above,
        }
    }

    /// "measured CPUs 2-3 exclusive to it; measured CPUs 1 shared with /system.slice on 1".
    pub fn words(&self) -> String {
        let mut parts = Vec::new();
        if self.group == "/" {
            parts.push(format!(
                "measured CPUs {} shared with every task not in a cpuset group of its own",
                self.shared
            ));
        }
        if !self.exclusive.is_empty() {
            parts.push(format!("measured CPUs {} exclusive to it", self.exclusive));
        }
        if !self.shared.is_empty() && !self.others.is_empty() {
            let named: Vec<String> = (self.others.iter().take(3))
                .map(|(p, c)| format!("{p} on {c}"))
                .collect();
            let more = match self.others.len() {
                n if n > 3 => format!(" and {} more", n - 3),
                _ => String::new(),
            };
            parts.push(format!(
                "measured CPUs {} shared with {}{more}",
                self.shared,
                named.join(", ")
            ));
        }
        if let Some(f) = &self.flag {
            parts.push(f.clone());
        }
        parts.join("; ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::system::cgroup::{Cgroups, tree};

    /// Issue 30, second review: the view was read again at every call (the plan, its
    /// housekeeping CPU, the note, each step, each scrape). The sharers are read once; a
    /// view judged later reads nothing, so a sibling gone since is still the reading's.
    #[test]
    fn issue30_a_cpuset_view_judges_the_one_reading_of_its_sharers() {
        let u = "sys/fs/cgroup";
        let t = tree(&[
            ("proc/self/cgroup", "0::/pod\n"),
            (
                "proc/self/mountinfo",
                "41 31 0:38 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
            ),
            (&format!("{u}/cgroup.controllers"), "cpuset\n"),
            (&format!("{u}/cpuset.cpus.effective"), "0-3\n"),
            (&format!("{u}/pod/cgroup.type"), "domain\n"),
            (&format!("{u}/pod/cpuset.cpus.effective"), "1-3\n"),
            (&format!("{u}/other/cpuset.cpus.effective"), "0-1\n"),
        ]);
        let cg = Cgroups::read(t.path(), None).expect("reads");
        let chain = cg.cpuset().expect("cpuset on v2");
        let sharers = Sharers::read(t.path(), chain);
        std::fs::remove_dir_all(t.path().join(u).join("other")).expect("rm");
        let measured = CpuList::from_cpus(vec![1, 2]);
        let v = CpusetView::of(chain, &sharers, &measured);
        assert_eq!(
            v.others,
            [("/other".to_string(), CpuList::from_cpus(vec![1]))]
        );
        assert_eq!(v.exclusive, CpuList::from_cpus(vec![2]));
        // The root's own chain: its children are the groups beside it.
        let top = crate::system::cgroup::Chain {
            levels: vec![chain.levels[0].clone()],
            ..chain.clone()
        };
        assert_eq!(
            sibling_cpusets(t.path(), &top),
            [("/pod".to_string(), CpuList::from_cpus(vec![1, 2, 3]))]
        );
    }
}
