//! A root domain of its own for each measured CPU, made for a SCHED_DEADLINE run, as
//! rt-tests' cyclicdeadline makes one: while admission control is on, the kernel admits
//! a deadline thread only with an affinity spanning its root domain, and a measuring
//! thread is pinned to one CPU, so each measured CPU needs a root domain of that CPU
//! alone.
//!
//! On cgroup v1 the cpuset hierarchy's root gets `cpuset.sched_load_balance` 0 and one
//! child per measured CPU holding it alone (`cpuset.cpu_exclusive` 1, load-balanced): the
//! kernel builds a root domain of each balanced cpuset, and the CPUs left over go into
//! one more child (balanced, not exclusive) so that they stay one load-balanced domain.
//! No task moves: v1's root cpuset keeps every CPU, and tasks keep their affinity.
//!
//! On cgroup v2 each measured CPU becomes a partition (`cpuset.cpus.partition` root) in
//! a threaded child of the root cgroup, which each measuring thread joins before it is
//! pinned (`engine::sched::place`): a partition's CPUs leave every other cgroup, so
//! the rest of the host keeps off them while it lasts. A threaded child takes threads of
//! the root cgroup's processes only, so the process must be in the root cgroup. The
//! partition is `root`, not `isolated`: an isolated partition's CPUs go without sched
//! domains and join the default root domain together, which is no root domain of one
//! CPU's own. Kernels before 6.2 set every task's allowed CPUs to its cpuset's when a
//! partition comes and goes, so a task pinned by its user (`taskset -c 1`) came back
//! allowed every CPU (seen on Debian 12's 6.1 in the lab); there every thread whose
//! allowed CPUs are narrower than the root's is journaled first and set back after
//! (6.2 keeps what a user asked for itself).
//!
//! Every change goes through `tune`'s journal (synced before it is made), and `Drop`
//! reverts them: a SIGKILL leaves the journal, which `tune --restore` reverts, or the
//! next deadline run does when it lists nothing but a root domain. Where the host forbids
//! a root domain (a group beside ours that holds a measured CPU, such as podman's
//! `libpod_parent`; cpuset not mounted; a container's view), [`Blocked`] names why.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::apply::{self, Applied, ApplyError};
use super::journal::{self, JournalError};
use super::under;
use crate::engine::cpu::CpuList;
use crate::engine::errno::answer;
use crate::system::cgroup::{Cgroups, Chain, Version};

/// The journal's step name for every change a root domain makes.
pub const STEP: &str = journal::ROOT_DOMAIN_STEP;

/// Why no root domain can be made here, each naming what blocks it.
#[derive(Debug, thiserror::Error)]
pub enum Blocked {
    /// A group beside ours holds a measured CPU: an exclusive cpuset (or a partition)
    /// shares no CPU with a sibling, and a load-balanced one would merge its CPUs into
    /// the same root domain.
    #[error(
        "the cpuset {group} in {mount} holds CPU {shared} too ({what}), and a root \
         domain's cpuset may share no CPU with a group beside it: stop what uses {group}"
    )]
    Overlap {
        mount: String,
        group: String,
        shared: CpuList,
        what: String,
    },
    #[error(
        "cpuset is not mounted (no cgroup v1 cpuset hierarchy in /proc/self/mountinfo, and \
         cgroup v2 {why}); jitterscope does not mount one for a run: `mount -t cgroup -o \
         cpuset cpuset /sys/fs/cgroup/cpuset` does, as root"
    )]
    NotMounted { why: String },
    /// The hierarchy is seen from below its root (a container, a cgroup namespace).
    #[error(
        "the cpuset hierarchy at {mount} is seen from {top} only (a container or a cgroup \
         namespace), and a root domain is made at its real root"
    )]
    NotFromRoot { mount: String, top: String },
    /// cgroup v2: the process is below the root cgroup, so its threads cannot join a
    /// threaded child of the root.
    #[error(
        "cgroup v2: this process is in the cgroup {group}, and only threads of the root \
         cgroup's processes can join a partition below the root; run it from the root \
         cgroup (`echo $$ > {mount}/cgroup.procs` in its shell first)"
    )]
    Below { mount: String, group: String },
    /// The kernel refused a write, or a partition came out invalid: its own answer.
    #[error("{path}: {answer}")]
    Refused { path: String, answer: String },
    /// Another run holds the journal now.
    #[error(
        "another jitterscope run (pid {pid}: tune, or a deadline run's root domain) is \
         changing this host now"
    )]
    Busy { pid: u32 },
    #[error(transparent)]
    Journal(#[from] JournalError),
}

impl From<ApplyError> for Blocked {
    fn from(e: ApplyError) -> Blocked {
        match e {
            ApplyError::Refused { path, answer } => Blocked::Refused { path, answer },
            ApplyError::Journal(j) => Blocked::Journal(j),
        }
    }
}

/// What a run's root domain was, as the result records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// The cpuset hierarchy's version.
    pub cgroup: Version,
    /// Where it is mounted: `/sys/fs/cgroup/cpuset`.
    pub mount: String,
    /// The groups made, one per measured CPU, by path below the mount.
    pub groups: Vec<String>,
    pub cpus: CpuList,
    /// The host's own files changed beside the groups: "cpuset.sched_load_balance of /
    /// 1 → 0".
    pub changed: Vec<String>,
    /// Every change reverted and read back as before.
    pub removed: bool,
    /// What did not read back, when not removed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left: Vec<String>,
}

impl fmt::Display for Record {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = (self.groups.iter())
            .map(|g| g.trim_start_matches('/'))
            .collect();
        let plural = if names.len() > 1 { "s" } else { "" };
        let what = match self.cgroup {
            Version::V1 => format!("cpuset{plural} {}", names.join(", ")),
            Version::V2 => format!("cgroup v2 partition{plural} {}", names.join(", ")),
        };
        let cpus = cpu_words(&self.cpus);
        let mut how = match self.cgroup {
            Version::V1 => vec!["cpu_exclusive".to_string()],
            Version::V2 => vec![format!(
                "the measuring thread{plural} joined; other tasks kept off {cpus}"
            )],
        };
        how.extend(self.changed.iter().cloned());
        write!(
            f,
            "root domain: {what} with {cpus} ({}), made for the run and ",
            how.join("; ")
        )?;
        match self.removed {
            true => f.write_str("removed"),
            false => write!(
                f,
                "NOT removed ({}): `jitterscope tune --restore` retries",
                self.left.join("; ")
            ),
        }
    }
}

/// "CPU 1", "CPUs 1-3".
pub fn cpu_words(cpus: &CpuList) -> String {
    match cpus.len() {
        1 => format!("CPU {cpus}"),
        _ => format!("CPUs {cpus}"),
    }
}

/// How the root domain is made on this host: the groups and the writes, planned from
/// what the tree under the root shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub version: Version,
    /// The hierarchy's mount point (absolute on the host).
    pub mount: String,
    /// One group per measured CPU: the CPU and the group's directory.
    pub groups: Vec<(usize, String)>,
    /// v1: the group that keeps the CPUs left over one load-balanced domain.
    pub rest: Option<(String, CpuList)>,
    /// v1: the root's `cpuset.sched_load_balance` goes from 1 to 0.
    pub unbalance: bool,
    /// v1: the memory nodes each group gets (the root's).
    pub mems: String,
    /// v2: cpuset is to be enabled in the root's `cgroup.subtree_control`.
    pub enable: bool,
}

/// Reads a file of the tree, trimmed.
fn read(root: &Path, path: &str) -> Result<String, Blocked> {
    std::fs::read_to_string(under(root, path))
        .map(|t| t.trim().to_string())
        .map_err(|e| Blocked::Refused {
            path: path.to_string(),
            answer: answer(&e),
        })
}

/// A cpuset file's CPU list ("" is none).
fn cpus_of(root: &Path, path: &str) -> CpuList {
    let text = std::fs::read_to_string(under(root, path)).unwrap_or_default();
    CpuList::parse_kernel(text.trim()).unwrap_or_default()
}

/// The groups directly below the hierarchy's root, by name.
fn children(root: &Path, mount: &str) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(under(root, mount)) else {
        return Vec::new();
    };
    let mut names: Vec<String> = (entries.filter_map(Result::ok))
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// The layout for `measured` on the tree under `root` (`/` for the live host), for a
/// process whose cgroups `cg` are; `pid` names the groups.
pub fn plan(root: &Path, cg: &Cgroups, measured: &CpuList, pid: u32) -> Result<Layout, Blocked> {
    let group = |cpu: usize| format!("jitterscope-dl-{pid}-cpu{cpu}");
    let in_mount = |chain: &Chain, name: &str| format!("{}/{name}", chain.mount);
    let groups = |chain: &Chain| -> Vec<(usize, String)> {
        (measured.cpus().iter())
            .map(|&c| (c, in_mount(chain, &group(c))))
            .collect()
    };
    if let Some(v1) = cg
        .chains
        .iter()
        .find(|c| c.version == Version::V1 && c.has("cpuset"))
    {
        seen_from_root(v1)?;
        let m = &v1.mount;
        overlaps(root, v1, measured, |name| {
            let dir = format!("{m}/{name}");
            let cpus = cpus_of(root, &format!("{dir}/cpuset.cpus"));
            let flag = |f: &str| read(root, &format!("{dir}/{f}")).is_ok_and(|v| v == "1");
            let what = match (
                flag("cpuset.cpu_exclusive"),
                flag("cpuset.sched_load_balance"),
            ) {
                (true, _) => "cpu_exclusive",
                (false, true) => "load-balanced",
                (false, false) => "shared",
            };
            let what = format!("CPUs {cpus}, {what}");
            (cpus, what)
        })?;
        let unbalance = read(root, &format!("{m}/cpuset.sched_load_balance"))? == "1";
        let left = cpus_of(root, &format!("{m}/cpuset.cpus")).without(measured);
        // Only where this run takes the root's balancing away: a host already
        // partitioned keeps the domains it has.
        let rest = (unbalance && !left.is_empty())
            .then(|| (in_mount(v1, &format!("jitterscope-rest-{pid}")), left));
        return Ok(Layout {
            version: Version::V1,
            mount: m.clone(),
            groups: groups(v1),
            rest,
            unbalance,
            mems: read(root, &format!("{m}/cpuset.mems"))?,
            enable: false,
        });
    }
    let Some(v2) = cg.unified() else {
        return Err(Blocked::NotMounted {
            why: "is not mounted".into(),
        });
    };
    if !v2.has("cpuset") {
        return Err(Blocked::NotMounted {
            why: format!(
                "has no cpuset in {}/cgroup.controllers ('{}')",
                v2.mount,
                v2.controllers.join(" ")
            ),
        });
    }
    seen_from_root(v2)?;
    if v2.own().path != "/" {
        return Err(Blocked::Below {
            mount: v2.mount.clone(),
            group: v2.own().path.clone(),
        });
    }
    let m = &v2.mount;
    overlaps(root, v2, measured, |name| {
        let dir = format!("{m}/{name}");
        // An empty cpuset.cpus takes the parent's and claims nothing; a partition claims
        // its effective CPUs.
        let set = cpus_of(root, &format!("{dir}/cpuset.cpus"));
        let partition = read(root, &format!("{dir}/cpuset.cpus.partition")).unwrap_or_default();
        match partition.split_whitespace().next() {
            Some("root" | "isolated") => {
                let eff = cpus_of(root, &format!("{dir}/cpuset.cpus.effective"));
                (
                    eff.clone(),
                    format!("a partition ({partition}) of CPUs {eff}"),
                )
            }
            _ => (set.clone(), format!("cpuset.cpus {set}")),
        }
    })?;
    let control = read(root, &format!("{m}/cgroup.subtree_control"))?;
    Ok(Layout {
        version: Version::V2,
        mount: m.clone(),
        groups: groups(v2),
        rest: None,
        unbalance: false,
        mems: String::new(),
        enable: !control.split_whitespace().any(|c| c == "cpuset"),
    })
}

/// A root domain is made at the hierarchy's real root.
fn seen_from_root(chain: &Chain) -> Result<(), Blocked> {
    match chain.from_root {
        true => Ok(()),
        false => Err(Blocked::NotFromRoot {
            mount: chain.mount.clone(),
            top: chain.levels[0].path.clone(),
        }),
    }
}

/// The first group below the root whose CPUs (as `claims` reads them: the CPUs and a
/// description) hold a measured CPU.
fn overlaps(
    root: &Path,
    chain: &Chain,
    measured: &CpuList,
    claims: impl Fn(&str) -> (CpuList, String),
) -> Result<(), Blocked> {
    for name in children(root, &chain.mount) {
        let (cpus, what) = claims(&name);
        let shared = cpus.intersect(measured);
        if !shared.is_empty() {
            return Err(Blocked::Overlap {
                mount: chain.mount.clone(),
                group: format!("/{name}"),
                shared,
                what,
            });
        }
    }
    Ok(())
}

/// A root domain made for a run: reverted when finished or dropped.
pub struct RootDomain {
    applied: Option<Applied>,
    root: PathBuf,
    layout: Layout,
    cpus: CpuList,
    changed: Vec<String>,
    /// A killed run's root domain, reverted before this one was made.
    pub reverted_stale: Option<String>,
}

impl RootDomain {
    /// Makes a root domain for each of `measured` on the host under `root`, every change
    /// journaled first; on a refusal, what was made is reverted and the cause returned.
    pub fn make(root: &Path, measured: &CpuList) -> Result<RootDomain, Blocked> {
        let reverted_stale = revert_stale(root)?;
        let cg = Cgroups::read(root, None).map_err(|e| Blocked::Refused {
            path: "/proc/self/cgroup".into(),
            answer: e.to_string(),
        })?;
        let layout = plan(root, &cg, measured, std::process::id())?;
        let mut d = RootDomain {
            applied: Some(Applied::new(root)?),
            root: root.to_path_buf(),
            layout,
            cpus: measured.clone(),
            changed: Vec::new(),
            reverted_stale,
        };
        match d.layout.version {
            Version::V1 => d.make_v1()?,
            Version::V2 => d.make_v2()?,
        }
        Ok(d)
    }

    fn applied(&mut self) -> &mut Applied {
        self.applied.as_mut().expect("applied until finished")
    }

    /// Writes a file of a group this run made (its removal reverts it).
    fn set(&self, dir: &str, file: &str, value: &str) -> Result<(), Blocked> {
        let path = format!("{dir}/{file}");
        std::fs::write(under(&self.root, &path), value).map_err(|e| Blocked::Refused {
            answer: format!("writing {value}: {}", answer(&e)),
            path,
        })
    }

    fn make_v1(&mut self) -> Result<(), Blocked> {
        let l = self.layout.clone();
        for (cpu, dir) in &l.groups {
            self.applied().make_group(STEP, dir)?;
            self.set(dir, "cpuset.cpus", &cpu.to_string())?;
            self.set(dir, "cpuset.mems", &l.mems)?;
            self.set(dir, "cpuset.cpu_exclusive", "1")?;
        }
        if let Some((dir, cpus)) = &l.rest {
            self.applied().make_group(STEP, dir)?;
            self.set(dir, "cpuset.cpus", &cpus.to_string())?;
            self.set(dir, "cpuset.mems", &l.mems)?;
            let name = dir
                .strip_prefix(&l.mount)
                .unwrap_or(dir)
                .trim_start_matches('/');
            self.changed.push(format!(
                "{} kept one balanced domain in {name}",
                cpu_words(cpus)
            ));
        }
        if l.unbalance {
            let file = format!("{}/cpuset.sched_load_balance", l.mount);
            let (_, old, now) = self.applied().write(STEP, &file, "0")?;
            self.changed.push(format!(
                "the root's cpuset.sched_load_balance {old} → {now}"
            ));
        }
        Ok(())
    }

    fn make_v2(&mut self) -> Result<(), Blocked> {
        let l = self.layout.clone();
        if !keeps_user_affinity(&self.root) {
            let all = cpus_of(&self.root, &format!("{}/cpuset.cpus.effective", l.mount));
            let threads = narrowed_threads(&self.root, &all);
            for &tid in &threads {
                self.applied()
                    .keep_affinity(STEP, tid, "reset by the kernel's partition")?;
            }
            if !threads.is_empty() {
                self.changed.push(format!(
                    "the allowed CPUs of {} thread(s) narrower than the root's, which this \
                     kernel (before 6.2) resets, journaled and set back",
                    threads.len()
                ));
            }
        }
        if l.enable {
            self.applied().enable_controller(STEP, &l.mount, "cpuset")?;
            self.changed
                .push("cpuset enabled in the root's cgroup.subtree_control".into());
        }
        let mut join = Vec::new();
        for (cpu, dir) in &l.groups {
            self.applied().make_group(STEP, dir)?;
            self.set(dir, "cgroup.type", "threaded")?;
            self.set(dir, "cpuset.cpus", &cpu.to_string())?;
            self.set(dir, "cpuset.cpus.partition", "root")?;
            let path = format!("{dir}/cpuset.cpus.partition");
            let state = read(&self.root, &path)?;
            if state != "root" {
                return Err(Blocked::Refused {
                    path,
                    answer: format!("the kernel made it '{state}'"),
                });
            }
            join.push((*cpu, under(&self.root, &format!("{dir}/cgroup.threads"))));
        }
        crate::engine::sched::join_before_pin(join);
        Ok(())
    }

    /// Reverts everything, reads it back, and says what it was.
    pub fn finish(mut self) -> Record {
        self.revert()
    }

    fn revert(&mut self) -> Record {
        crate::engine::sched::join_before_pin(Vec::new());
        let mut left = Vec::new();
        if let Some(mut a) = self.applied.take() {
            let closed = a.restore_all();
            left.extend(
                (a.readbacks.iter().filter(|r| !r.ok))
                    .map(|r| format!("{} reads {}", r.path, r.now)),
            );
            if let Err(e) = closed {
                left.push(e.to_string());
            }
        }
        let mount = self.layout.mount.clone();
        Record {
            cgroup: self.layout.version,
            groups: (self.layout.groups.iter())
                .map(|(_, d)| d.strip_prefix(&mount).unwrap_or(d).to_string())
                .collect(),
            mount,
            cpus: self.cpus.clone(),
            changed: self.changed.clone(),
            removed: left.is_empty(),
            left,
        }
    }
}

impl Drop for RootDomain {
    fn drop(&mut self) {
        if self.applied.is_some() {
            self.revert();
        }
    }
}

/// Whether the kernel keeps a task's own affinity through cpuset changes (6.2 and later:
/// "sched: Always preserve the user requested cpumask"). A release it cannot read is
/// taken as older: journaling what needs none costs only the journal's lines.
fn keeps_user_affinity(root: &Path) -> bool {
    let release = std::fs::read_to_string(under(root, "/proc/sys/kernel/osrelease"));
    let release = release.unwrap_or_default();
    let mut parts = release.trim().split(['.', '-']);
    let mut next = || parts.next().and_then(|p| p.parse::<u32>().ok());
    matches!((next(), next()), (Some(major), Some(minor)) if (major, minor) >= (6, 2))
}

/// Every thread on the host (but this process's) whose allowed CPUs the kernel would
/// let be set and which are narrower than `all`.
fn narrowed_threads(root: &Path, all: &CpuList) -> Vec<u32> {
    let ids = |dir: PathBuf| -> Vec<u32> {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return Vec::new();
        };
        (entries.filter_map(Result::ok))
            .filter_map(|e| e.file_name().to_str()?.parse().ok())
            .collect()
    };
    let own = std::process::id();
    let mut out: Vec<u32> = (ids(under(root, "/proc")).into_iter())
        .filter(|&pid| pid != own)
        .flat_map(|pid| ids(under(root, &format!("/proc/{pid}/task"))))
        .filter(|&tid| super::thread::settable(root, tid))
        .filter(|&tid| {
            super::thread::allowed(root, tid)
                .ok()
                .and_then(|a| CpuList::parse_kernel(&a).ok())
                .is_some_and(|a| &a != all)
        })
        .collect();
    out.sort_unstable();
    out
}

/// Reverts a journal a killed deadline run left, when it lists nothing else: what it
/// reverted, in words. Another run's live journal, or a stale one of `tune`'s, refuses.
fn revert_stale(root: &Path) -> Result<Option<String>, Blocked> {
    match journal::state(root) {
        None => Ok(None),
        Some(Some(pid)) => Err(Blocked::Busy { pid }),
        Some(None) => {
            let path = journal::path(root);
            let entries = journal::read(&path)?;
            if !journal::only_root_domain(&entries) {
                let pid = entries.iter().find_map(|e| match e {
                    journal::Entry::Header { pid, .. } => Some(*pid),
                    _ => None,
                });
                return Err(JournalError::Exists {
                    path,
                    pid: pid.unwrap_or(0),
                }
                .into());
            }
            let back = apply::restore_stale(root)?.unwrap_or_default();
            let words: Vec<String> = (back.iter())
                .map(|r| format!("{} {}", r.path, r.now))
                .collect();
            if back.iter().any(|r| !r.ok) {
                return Err(Blocked::Refused {
                    path: path.display().to_string(),
                    answer: format!(
                        "a killed run's root domain did not revert: {}",
                        words.join("; ")
                    ),
                });
            }
            Ok(Some(format!(
                "reverted the root domain a killed run left: {}",
                words.join("; ")
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::system::cgroup::tree;

    const V1_MOUNTS: &str = "\
34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
    const V2_MOUNTS: &str = "30 23 0:26 / /sys/fs/cgroup rw,relatime - cgroup2 cgroup2 rw\n";

    /// A v1 host of 4 CPUs with the root cpuset balanced, and `extra` files.
    fn v1(extra: &[(&str, &str)]) -> tempfile::TempDir {
        let c = "sys/fs/cgroup/cpuset";
        let mut files = vec![
            (format!("{c}/cgroup.sane_behavior"), "0"),
            (format!("{c}/cpuset.cpus"), "0-3\n"),
            (format!("{c}/cpuset.mems"), "0\n"),
            (format!("{c}/cpuset.sched_load_balance"), "1\n"),
            (format!("{c}/cpuset.cpu_exclusive"), "1\n"),
        ];
        files.extend(extra.iter().map(|(p, t)| (format!("{c}/{p}"), *t)));
        let refs: Vec<(&str, &str)> = files.iter().map(|(p, t)| (p.as_str(), *t)).collect();
        tree(&refs)
    }

    fn plan_of(dir: &Path, member: &str, mounts: &str, cpus: &[usize]) -> Result<Layout, Blocked> {
        let cg = Cgroups::from_text(dir, None, member, mounts);
        plan(dir, &cg, &CpuList::from_cpus(cpus.to_vec()), 77)
    }

    #[test]
    fn v1_gets_a_cpuset_per_measured_cpu_and_one_for_the_rest() {
        let dir = v1(&[]);
        let l = plan_of(dir.path(), "3:cpuset:/\n0::/\n", V1_MOUNTS, &[1, 2]).unwrap();
        assert_eq!(l.version, Version::V1);
        let c = "/sys/fs/cgroup/cpuset";
        assert_eq!(
            l.groups,
            [
                (1, format!("{c}/jitterscope-dl-77-cpu1")),
                (2, format!("{c}/jitterscope-dl-77-cpu2"))
            ]
        );
        let rest = l.rest.unwrap();
        assert_eq!(
            (rest.0, rest.1.to_string()),
            (format!("{c}/jitterscope-rest-77"), "0,3".into())
        );
        assert!(l.unbalance);
        assert_eq!(l.mems, "0");
    }

    /// Where the root is not balanced already, the host's own domains stay as they are:
    /// no write to the root, no group for the rest.
    #[test]
    fn v1_already_partitioned_keeps_its_domains() {
        let dir = v1(&[]);
        let c = dir.path().join("sys/fs/cgroup/cpuset");
        std::fs::write(c.join("cpuset.sched_load_balance"), "0\n").unwrap();
        let l = plan_of(dir.path(), "3:cpuset:/\n", V1_MOUNTS, &[1]).unwrap();
        assert!(!l.unbalance);
        assert_eq!(l.rest, None);
    }

    /// podman's libpod_parent holds every CPU: it is named, with its CPUs and its kind.
    #[test]
    fn v1_a_group_beside_holding_a_measured_cpu_is_named() {
        let dir = v1(&[
            ("libpod_parent/cpuset.cpus", "0-3\n"),
            ("libpod_parent/cpuset.cpu_exclusive", "0\n"),
            ("libpod_parent/cpuset.sched_load_balance", "1\n"),
            ("empty/cpuset.cpus", "\n"),
        ]);
        let e = plan_of(dir.path(), "3:cpuset:/\n", V1_MOUNTS, &[1]).unwrap_err();
        let words = e.to_string();
        assert!(matches!(e, Blocked::Overlap { .. }), "{words}");
        assert!(
            words.starts_with(
                "the cpuset /libpod_parent in /sys/fs/cgroup/cpuset holds CPU 1 too (CPUs \
                 0-3, load-balanced)"
            ),
            "{words}"
        );
        // One that holds only the CPUs left over is no obstacle.
        std::fs::write(
            dir.path()
                .join("sys/fs/cgroup/cpuset/libpod_parent/cpuset.cpus"),
            "0,2-3",
        )
        .unwrap();
        assert!(plan_of(dir.path(), "3:cpuset:/\n", V1_MOUNTS, &[1]).is_ok());
    }

    #[test]
    fn a_container_view_is_refused() {
        let dir = v1(&[]);
        std::fs::remove_file(dir.path().join("sys/fs/cgroup/cpuset/cgroup.sane_behavior")).unwrap();
        let e = plan_of(dir.path(), "3:cpuset:/\n", V1_MOUNTS, &[1]).unwrap_err();
        assert!(matches!(e, Blocked::NotFromRoot { .. }), "{e}");
    }

    #[test]
    fn without_cpuset_anywhere_it_says_how_to_mount_it() {
        let dir = tree(&[("sys/fs/cgroup/unified/cgroup.controllers", "hugetlb\n")]);
        let mounts = "41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n";
        let e = plan_of(dir.path(), "0::/\n", mounts, &[1]).unwrap_err();
        let words = e.to_string();
        assert!(
            words
                .contains("has no cpuset in /sys/fs/cgroup/unified/cgroup.controllers ('hugetlb')")
                && words.contains("mount -t cgroup -o cpuset"),
            "{words}"
        );
    }

    fn v2(extra: &[(&str, &str)]) -> tempfile::TempDir {
        let mut files = vec![
            (
                "sys/fs/cgroup/cgroup.controllers",
                "cpuset cpu io memory pids\n",
            ),
            ("sys/fs/cgroup/cgroup.subtree_control", "cpu memory\n"),
        ];
        files.extend_from_slice(extra);
        tree(&files)
    }

    #[test]
    fn v2_gets_a_partition_per_cpu_and_cpuset_enabled_for_it() {
        let dir = v2(&[("sys/fs/cgroup/system.slice/cpuset.cpus", "\n")]);
        let l = plan_of(dir.path(), "0::/\n", V2_MOUNTS, &[1]).unwrap();
        assert_eq!(l.version, Version::V2);
        assert_eq!(
            l.groups,
            [(1, "/sys/fs/cgroup/jitterscope-dl-77-cpu1".into())]
        );
        assert!(l.enable && !l.unbalance && l.rest.is_none());
    }

    #[test]
    fn v2_a_process_below_the_root_or_a_partition_beside_is_named() {
        let dir = v2(&[]);
        let e = plan_of(
            dir.path(),
            "0::/user.slice/session-3.scope\n",
            V2_MOUNTS,
            &[1],
        );
        let words = e.unwrap_err().to_string();
        assert!(
            words.contains("in the cgroup /user.slice/session-3.scope"),
            "{words}"
        );
        let dir = v2(&[
            ("sys/fs/cgroup/rt/cpuset.cpus", "1\n"),
            ("sys/fs/cgroup/rt/cpuset.cpus.partition", "isolated\n"),
            ("sys/fs/cgroup/rt/cpuset.cpus.effective", "1\n"),
        ]);
        let e = plan_of(dir.path(), "0::/\n", V2_MOUNTS, &[1]).unwrap_err();
        let words = e.to_string();
        assert!(
            words.starts_with("the cpuset /rt in /sys/fs/cgroup holds CPU 1 too (a partition (isolated) of CPUs 1)"),
            "{words}"
        );
    }

    #[test]
    fn the_record_says_what_was_made_and_whether_it_is_gone() {
        let mut r = Record {
            cgroup: Version::V1,
            mount: "/sys/fs/cgroup/cpuset".into(),
            groups: vec!["/jitterscope-dl-77-cpu1".into()],
            cpus: CpuList::from_cpus(vec![1]),
            changed: vec!["the root's cpuset.sched_load_balance 1 → 0".into()],
            removed: true,
            left: Vec::new(),
        };
        assert_eq!(
            r.to_string(),
            "root domain: cpuset jitterscope-dl-77-cpu1 with CPU 1 (cpu_exclusive; the root's \
             cpuset.sched_load_balance 1 → 0), made for the run and removed"
        );
        r.removed = false;
        r.left = vec!["/sys/fs/cgroup/cpuset/jitterscope-dl-77-cpu1 reads present".into()];
        assert!(r.to_string().ends_with(
            "NOT removed (/sys/fs/cgroup/cpuset/jitterscope-dl-77-cpu1 reads present): \
             `jitterscope tune --restore` retries"
        ));
    }

    /// A killed run's journal lists a group made and a controller enabled: both are
    /// reverted (the group removed, `-cpuset` written) and the journal removed.
    #[test]
    fn a_killed_runs_groups_and_controller_are_reverted() {
        let dir = v2(&[]);
        let root = dir.path();
        let mut a = Applied::new(root).unwrap();
        a.enable_controller(STEP, "/sys/fs/cgroup", "cpuset")
            .unwrap();
        a.make_group(STEP, "/sys/fs/cgroup/jitterscope-dl-77-cpu1")
            .unwrap();
        assert!(root.join("sys/fs/cgroup/jitterscope-dl-77-cpu1").is_dir());
        std::mem::forget(a);
        let entries = journal::read(&journal::path(root)).unwrap();
        assert!(journal::only_root_domain(&entries));
        // The journal's writer (this process) counts as gone: the next run reverts it.
        let said = revert_stale(root).unwrap().unwrap();
        assert!(said.contains("jitterscope-dl-77-cpu1 absent"), "{said}");
        assert!(!root.join("sys/fs/cgroup/jitterscope-dl-77-cpu1").exists());
        let control = std::fs::read_to_string(root.join("sys/fs/cgroup/cgroup.subtree_control"));
        assert_eq!(
            control.unwrap(),
            "-cpuset",
            "the fake file holds what was written"
        );
        assert!(!journal::path(root).exists());
    }
}
