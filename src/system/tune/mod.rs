//! Everything that changes a host setting: `tune`'s steps.
//!
//! A step is one audit finding's fix, made concrete: the files it writes and the values
//! it writes there (or a PM QoS request held open), and its class on this host: it
//! applies now, it does not apply (with the kernel's own answer: the errno a managed
//! IRQ's affinity write gets, a missing file), it is boot-time only (the command-line fragment), or it needs another
//! kernel build. The plan comes from the audit so that `tune` tries exactly what `audit`
//! prints, and nothing else.
//!
//! Writes go through [`journal`]: the old value is recorded and synced before the new
//! one is written, so a crash or SIGKILL leaves a journal that `tune --restore` reverts.
//! [`apply::Applied`] holds what is applied and reverts it on drop.

pub mod apply;
pub mod experiment;
pub mod export;
pub mod journal;
pub mod record;
pub mod root_domain;
pub mod sequential;
pub mod share;
pub mod thread;
pub mod timing;

use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::engine::errno;
use crate::system::audit::{AuditReport, Effect, Finding, FindingId, Remedy, Severity};
use crate::system::cgroup::{CgroupError, Cgroups};

/// Where a step stands on this host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "class", rename_all = "kebab-case")]
pub enum Class {
    /// It can be applied now, at run time.
    Applies,
    /// Every file it writes already holds its value.
    AlreadyDone,
    /// Not here: the kernel's own answer (a managed IRQ's errno, a missing file).
    NotApplicable { answer: String },
    /// Only at boot: the kernel command-line fragment, printed, never written.
    BootOnly { fragment: String },
    /// This kernel lacks the build option; the fragment works on a kernel that has it.
    NeedsKernel {
        config: Vec<String>,
        fragment: String,
    },
    /// It would apply here, but tune does not apply it yet: the commands, printed.
    ByHand { how: String },
}

impl Class {
    pub fn label(&self) -> &'static str {
        match self {
            Class::Applies => "applies now",
            Class::AlreadyDone => "already done",
            Class::NotApplicable { .. } => "not applicable",
            Class::BootOnly { .. } => "boot-time only",
            Class::NeedsKernel { .. } => "needs another kernel",
            Class::ByHand { .. } => "by hand (tune does not apply it)",
        }
    }

    /// The detail after the label: the kernel's answer, the fragment, the build option.
    pub fn detail(&self) -> String {
        match self {
            Class::Applies | Class::AlreadyDone => String::new(),
            Class::NotApplicable { answer } => answer.clone(),
            Class::BootOnly { fragment } => fragment.clone(),
            Class::ByHand { how } => how.clone(),
            Class::NeedsKernel { config, fragment } => {
                format!("{} then {fragment}", config.join(" "))
            }
        }
    }
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.detail() {
            d if d.is_empty() => f.write_str(self.label()),
            d => write!(f, "{}: {d}", self.label()),
        }
    }
}

/// One change to the host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Change {
    /// Write `value` to `path` (an absolute path on the host; below `--root` in a tree).
    Write { path: String, value: String },
    /// Hold /dev/cpu_dma_latency open with `value_us`: the request lapses when the file
    /// closes, so it reverts itself, even after SIGKILL.
    PmQos { value_us: i32 },
    /// Move kernel thread `pid` to `cpus` (sched_setaffinity); its old mask is journaled
    /// with its start time, so a restore never moves a thread that reuses the pid.
    /// `comm` is the thread's name, which an export needs: a pid lasts one boot.
    Affinity {
        pid: u32,
        #[serde(default)]
        comm: String,
        cpus: String,
    },
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Change::Write { path, value } => write!(f, "{path} = {value}"),
            Change::PmQos { value_us } => {
                write!(f, "/dev/cpu_dma_latency held open at {value_us} µs")
            }
            Change::Affinity { pid, comm, cpus } => {
                write!(f, "{comm} (pid {pid}) allowed CPUs = {cpus}")
            }
        }
    }
}

/// One step of the plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Step {
    /// The audit finding whose fix this is (`sham` for the step that changes nothing).
    pub id: String,
    pub severity: Severity,
    /// What the audit saw.
    pub seen: String,
    pub changes: Vec<Change>,
    #[serde(flatten)]
    pub class: Class,
    /// The step removes a safety net (RT throttling): while it is applied no real-time
    /// spinner may hold a CPU for long, and the CPU rests between blocks.
    pub removes_safety_net: bool,
}

impl Step {
    /// A short name: the finding id.
    pub fn name(&self) -> String {
        self.id.clone()
    }

    /// A step that changes no setting: what a step without effect is judged to be.
    pub fn sham() -> Step {
        Step {
            id: "sham".into(),
            severity: Severity::Info,
            seen: "changes nothing".into(),
            changes: Vec::new(),
            class: Class::Applies,
            removes_safety_net: false,
        }
    }
}

/// The path of `abs` below `root`.
pub fn under(root: &Path, abs: &str) -> PathBuf {
    root.join(abs.trim_start_matches('/'))
}

/// A file's value as it would be written back: trimmed, and for a kernel choice list
/// (`always [madvise] never`) the chosen word.
pub fn normalize(text: &str) -> String {
    let t = text.trim();
    if let (Some(a), Some(b)) = (t.find('['), t.find(']'))
        && a < b
    {
        return t[a + 1..b].to_string();
    }
    t.to_string()
}

/// Whether a file that reads `now` already holds `wanted`. Masks compare as numbers
/// ("01" and "1"); CPU lists as lists ("0" and "0").
fn holds(now: &str, wanted: &str) -> bool {
    let now = normalize(now);
    if now == wanted {
        return true;
    }
    match (
        u64::from_str_radix(&now, 16),
        u64::from_str_radix(wanted, 16),
    ) {
        (Ok(a), Ok(b)) if now.len() > 1 || wanted.len() > 1 => a == b && !now.contains('-'),
        _ => false,
    }
}

/// Findings whose fix is to keep the CPU out of deep idle states: PM QoS, held open.
const PM_QOS_FINDINGS: &[FindingId] = &[
    FindingId::IdleHaltpoll,
    FindingId::IdleStatesDeep,
    FindingId::IdleStatesShallow,
];

/// The plan for the audit's findings on the tree under `root`, most severe first (the
/// order the audit's severities give when no trace attributes the causes). Findings
/// without a fix of any kind, and those only a person or the hypervisor's host can
/// change, are not steps.
pub fn plan(report: &AuditReport, root: &Path) -> Vec<Step> {
    let mut steps: Vec<Step> = report
        .findings
        .iter()
        .filter(|f| f.severity > Severity::Ok)
        .filter_map(|f| step_of(f, report, root))
        .collect();
    // Stable: the audit's own order within a severity.
    steps.sort_by_key(|s| std::cmp::Reverse(s.severity));
    steps
}

fn step_of(f: &Finding, report: &AuditReport, root: &Path) -> Option<Step> {
    let mut changes = Vec::new();
    let (mut boot, mut build) = (None, None);
    for r in &f.remedies {
        match r {
            Remedy::Runtime { effects, .. } => {
                for e in effects {
                    match e {
                        Effect::Write { path, value } => changes.push(Change::Write {
                            path: path.clone(),
                            value: value.clone(),
                        }),
                        Effect::Affinity { pid, cpus } => changes.push(Change::Affinity {
                            pid: *pid,
                            comm: thread::comm(root, *pid),
                            cpus: cpus.to_string(),
                        }),
                    }
                }
            }
            Remedy::Boot { options, .. } => boot = Some(options.join(" ")),
            Remedy::KernelBuild {
                config, options, ..
            } => build = Some((config.clone(), options.join(" "))),
            Remedy::Host { .. } | Remedy::Manual { .. } => {}
        }
    }
    if f.id == FindingId::IrqManagedOnMeasured {
        // The audit gives no run-time fix (there is none): the step is the write the
        // kernel refuses, so that its answer is what the plan shows.
        changes = irq_numbers(&f.value)
            .into_iter()
            .map(|n| Change::Write {
                path: format!("/proc/irq/{n}/smp_affinity_list"),
                value: report.housekeeping.to_string(),
            })
            .collect();
    }
    if f.id == FindingId::CpufreqNone {
        return Some(no_cpufreq(f, report, root));
    }
    if f.id == FindingId::CpusetPartitionNone {
        return Some(cpuset_partition(f, report, root));
    }
    if PM_QOS_FINDINGS.contains(&f.id) {
        changes.push(Change::PmQos { value_us: 0 });
    }
    let refused = movable_threads(&mut changes, root);
    let mut seen = f.value.clone();
    if !refused.is_empty() {
        seen = format!("{seen}; refused: {}", refused.join(", "));
    }
    let class = if !changes.is_empty() {
        classify_runtime(f, &changes, root)
    } else if !refused.is_empty() {
        Class::NotApplicable {
            answer: refused.join("; "),
        }
    } else if let Some((config, fragment)) = build {
        Class::NeedsKernel { config, fragment }
    } else if let Some(fragment) = boot {
        Class::BootOnly { fragment }
    } else {
        return None;
    };
    Some(Step {
        id: f.id.to_string(),
        severity: f.severity,
        seen,
        removes_safety_net: f.id == FindingId::RtThrottlingOn,
        changes,
        class,
    })
}

/// The governor step where there is no cpufreq driver (a guest; a kernel without one):
/// not applicable, with the kernel's answer to opening the governor's file.
fn no_cpufreq(f: &Finding, report: &AuditReport, root: &Path) -> Step {
    let cpu = report.measured.first().unwrap_or(0);
    let path = format!("/sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor");
    let why = match std::fs::metadata(under(root, &path)) {
        Err(e) => format!("{path}: {}", errno::answer(&e)),
        Ok(_) => format!("{path} exists but the audit found no cpufreq directory"),
    };
    Step {
        id: f.id.to_string(),
        severity: f.severity,
        seen: f.value.clone(),
        changes: Vec::new(),
        class: Class::NotApplicable {
            answer: format!("no cpufreq: {why}"),
        },
        removes_safety_net: false,
    }
}

/// The cpuset partition step: a child cgroup of cgroup v2 holding the measured CPUs as
/// an `isolated` partition. Not applicable without cgroup v2 or its cpuset controller
/// (bound to cgroup v1 on a hybrid host), with the file that says so. Where it would
/// apply, tune leaves it to the reader: the probe itself would have to run inside the
/// partition (its CPUs leave every other cgroup), which tune's probes do not yet do.
fn cpuset_partition(f: &Finding, report: &AuditReport, root: &Path) -> Step {
    let class = match cgroup2_with_cpuset(root) {
        Err(answer) => Class::NotApplicable { answer },
        Ok(mnt) => Class::ByHand {
            how: format!(
                "echo +cpuset > {mnt}/cgroup.subtree_control; mkdir {mnt}/jitterscope; \
                 echo {m} > {mnt}/jitterscope/cpuset.cpus; echo isolated > \
                 {mnt}/jitterscope/cpuset.cpus.partition; cat \
                 {mnt}/jitterscope/cpuset.cpus.partition (reads 'isolated', else the kernel \
                 says why); then run the measured program in that cgroup",
                m = report.measured
            ),
        },
    };
    Step {
        id: f.id.to_string(),
        severity: f.severity,
        seen: f.value.clone(),
        changes: Vec::new(),
        class,
        removes_safety_net: false,
    }
}

/// The cgroup v2 mount point, where its controllers include cpuset; else why not.
fn cgroup2_with_cpuset(root: &Path) -> Result<String, String> {
    let cg = Cgroups::read(root, None).map_err(|CgroupError::Read { path, source }| {
        let path = path.strip_prefix(root).unwrap_or(&path);
        format!("/{}: {}", path.display(), errno::answer(&source))
    })?;
    let unified = (cg.unified())
        .ok_or("no cgroup2 line in /proc/self/mountinfo: cgroup v2 is not mounted")?;
    if !unified.has("cpuset") {
        return Err(format!(
            "{}/cgroup.controllers reads '{}': no cpuset controller (it is bound to cgroup v1)",
            unified.mount,
            unified.controllers.join(" ")
        ));
    }
    Ok(unified.mount.clone())
}

/// Drops from `changes` the threads the kernel refuses to move, and returns its
/// answers: a per-CPU kthread's EINVAL, an exited thread's ENOENT.
fn movable_threads(changes: &mut Vec<Change>, root: &Path) -> Vec<String> {
    let mut refused = Vec::new();
    changes.retain(|c| match c {
        Change::Affinity { pid, .. } => match thread::refusal(root, *pid) {
            Some(answer) => {
                refused.push(answer);
                false
            }
            None => true,
        },
        _ => true,
    });
    refused
}

/// The class of a step that writes files: a missing file is not applicable, with the
/// kernel's answer to opening it; a managed IRQ is not. Its errno differs by kernel
/// (EIO, EPERM), so only the live host's own file can say it (`apply::probe`); a
/// recorded tree says the write is refused and names none.
fn classify_runtime(f: &Finding, changes: &[Change], root: &Path) -> Class {
    let mut all_done = true;
    for c in changes {
        let (now, wanted) = match c {
            Change::PmQos { .. } if root != Path::new("/") => {
                return Class::NotApplicable {
                    answer: "a PM QoS request needs the live host's /dev/cpu_dma_latency".into(),
                };
            }
            Change::PmQos { .. } => {
                all_done = false;
                continue;
            }
            Change::Write { path, value } => (
                std::fs::read_to_string(under(root, path)).map_err(|e| format!("{path}: {e}")),
                value,
            ),
            Change::Affinity { pid, cpus, .. } => (
                thread::allowed(root, *pid).map_err(|e| format!("pid {pid}: {e}")),
                cpus,
            ),
        };
        match now {
            Ok(now) => all_done &= holds(&now, wanted) || thread::same(&now, wanted),
            Err(answer) => return Class::NotApplicable { answer },
        }
    }
    if f.id == FindingId::IrqManagedOnMeasured {
        return Class::NotApplicable {
            answer: "kernel-managed IRQ: the kernel refuses writes to its smp_affinity_list \
                     (a recorded tree cannot say with which errno; the live host's plan does)"
                .into(),
        };
    }
    if all_done {
        Class::AlreadyDone
    } else {
        Class::Applies
    }
}

/// The `tune` command that would try `f`'s fix, where a tune step applies it at run time:
/// a run-time remedy (files written, kernel threads moved), or a PM QoS request. Audit and verdict end
/// such a fix with it, so that the reader can measure whether it helps before keeping it.
pub fn try_it(f: &Finding) -> Option<String> {
    let writes = f.remedies.iter().any(|r| match r {
        Remedy::Runtime { effects, .. } => {
            // Both effects are steps: a file written, a kernel thread moved.
            !effects.is_empty()
        }
        _ => false,
    });
    // A managed IRQ has no run-time fix: its step only shows the kernel's refusal.
    let runtime = (writes || PM_QOS_FINDINGS.contains(&f.id))
        && f.id != FindingId::IrqManagedOnMeasured
        && f.severity > Severity::Ok;
    runtime.then(|| format!("jitterscope tune --step {}", f.id))
}

/// The IRQ numbers of an IRQ finding's value: `IRQ 36 (virtio1-req.0) ×314713` or
/// `2 IRQs: 26 (ttyS0) ×15, 31 (virtio0-stats) ×681`.
pub fn irq_numbers(value: &str) -> Vec<u32> {
    let list = match value.split_once("IRQs: ") {
        Some((_, rest)) => rest,
        None => value.strip_prefix("IRQ ").unwrap_or(value),
    };
    list.split(", ")
        .filter_map(|item| item.split_whitespace().next()?.parse().ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::cpu::CpuList;
    use crate::system::tune::thread::tests::kthread;

    /// The plan of CPU 1 (housekeeping 0) on the tree at `root`.
    fn plan_of(root: &Path) -> (AuditReport, Vec<Step>) {
        let online = CpuList::from_cpus(vec![0, 1]);
        let report = AuditReport::of(root, CpuList::from_cpus(vec![1]), &online);
        let steps = plan(&report, root);
        (report, steps)
    }

    fn step(steps: &[Step], id: FindingId) -> &Step {
        let id = id.to_string();
        steps
            .iter()
            .find(|s| s.id == id)
            .expect("the step is planned")
    }

    /// PF_KTHREAD and friends, as a movable kthread's stat shows them.
    const MOVABLE: u64 = 0x0020_8040;

    #[test]
    fn a_kthread_on_the_measured_cpus_is_moved_and_each_class_shows() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        kthread(root, 20, "khugepaged", "0-1", MOVABLE);
        let (report, steps) = plan_of(root);
        let s = step(&steps, FindingId::KthreadsOnMeasured);
        assert_eq!(s.class, Class::Applies);
        let moved = Change::Affinity {
            pid: 20,
            comm: "khugepaged".into(),
            cpus: "0".into(),
        };
        assert_eq!(s.changes, vec![moved]);
        let f = report.findings.iter().find(|f| f.id.to_string() == s.id);
        assert!(try_it(f.unwrap()).is_some());
        // The same finding, the thread since moved by hand: nothing left to do.
        thread::set(root, 20, "0").unwrap();
        let s = plan(&report, root);
        assert_eq!(
            step(&s, FindingId::KthreadsOnMeasured).class,
            Class::AlreadyDone
        );
        // A per-CPU kthread (PF_NO_SETAFFINITY): the kernel's EINVAL.
        kthread(root, 20, "khugepaged", "0-1", MOVABLE | 0x0400_0000);
        let s = plan(&report, root);
        let c = &step(&s, FindingId::KthreadsOnMeasured).class;
        assert!(
            c.to_string()
                .contains("not applicable: pid 20: the kernel answers EINVAL"),
            "{c}"
        );
        // One that has exited: the missing file.
        std::fs::remove_dir_all(root.join("proc/20")).unwrap();
        let s = plan(&report, root);
        let c = &step(&s, FindingId::KthreadsOnMeasured).class;
        assert!(c.to_string().contains("ENOENT"), "{c}");
    }

    #[test]
    fn the_governor_applies_where_cpufreq_is_and_is_not_applicable_where_not() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let (_, steps) = plan_of(root);
        let c = step(&steps, FindingId::CpufreqNone).class.to_string();
        assert!(c.starts_with("not applicable: no cpufreq: /sys/devices/system/cpu/cpu1/cpufreq/scaling_governor: ENOENT"), "{c}");
        let freq = root.join("sys/devices/system/cpu/cpu1/cpufreq");
        std::fs::create_dir_all(&freq).unwrap();
        std::fs::write(freq.join("scaling_governor"), "powersave\n").unwrap();
        std::fs::write(freq.join("scaling_driver"), "intel_pstate\n").unwrap();
        let (_, steps) = plan_of(root);
        let s = step(&steps, FindingId::GovernorNotPerformance);
        assert_eq!(s.class, Class::Applies);
        assert!(
            steps
                .iter()
                .all(|s| s.id != FindingId::CpufreqNone.to_string())
        );
    }

    #[test]
    fn the_cpuset_partition_is_left_to_the_reader_where_the_controller_is() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let class = |root: &Path| {
            let (_, steps) = plan_of(root);
            step(&steps, FindingId::CpusetPartitionNone).class.clone()
        };
        std::fs::create_dir_all(root.join("proc/self")).unwrap();
        // The isolation checks start from the command line.
        std::fs::write(root.join("proc/cmdline"), "ro quiet\n").unwrap();
        std::fs::write(root.join("proc/self/cgroup"), "0::/\n").unwrap();
        let mountinfo = root.join("proc/self/mountinfo");
        std::fs::write(&mountinfo, "22 1 0:20 / /proc rw - proc proc rw\n").unwrap();
        // Without cgroup v2 the audit has a manual fix only; the step says why not.
        let c = class(root).to_string();
        assert!(c.contains("not applicable: no cgroup2 line"), "{c}");
        // A hybrid host (as this VM): cpuset is bound to cgroup v1.
        let unified = root.join("sys/fs/cgroup/unified");
        std::fs::create_dir_all(&unified).unwrap();
        std::fs::write(
            &mountinfo,
            "41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n",
        )
        .unwrap();
        std::fs::write(unified.join("cgroup.controllers"), "\n").unwrap();
        let c = class(root).to_string();
        assert!(
            c.contains("not applicable") && c.contains("no cpuset controller"),
            "{c}"
        );
        std::fs::write(unified.join("cgroup.controllers"), "cpuset cpu io memory\n").unwrap();
        let c = class(root);
        assert!(
            matches!(&c, Class::ByHand { how } if how.contains("echo 1 > /sys/fs/cgroup/unified/jitterscope/cpuset.cpus")),
            "{c}"
        );
    }

    #[test]
    fn irq_numbers_of_both_shapes() {
        assert_eq!(irq_numbers("IRQ 36 (virtio1-req.0) ×314713"), vec![36]);
        assert_eq!(
            irq_numbers("2 IRQs: 26 (ttyS0) ×15, 31 (virtio0-stats, x) ×681"),
            vec![26, 31]
        );
    }

    #[test]
    fn values_compare_as_the_kernel_prints_them() {
        assert_eq!(normalize("always [madvise] never\n"), "madvise");
        assert_eq!(normalize(" 950000\n"), "950000");
        assert!(holds("[never] always", "never"));
        assert!(holds("01\n", "1"));
        assert!(!holds("3", "1"));
        assert!(holds("0", "0"));
        assert!(!holds("0-1", "0"));
    }
}
