//! Real-time kernel threads on the measured CPUs (issue 48). On PREEMPT_RT (or with
//! `threadirqs`) each device IRQ's handler runs in a thread (`irq/N-name`, SCHED_FIFO 50),
//! and the timer and RCU softirqs in `ktimers/N` and `rcuc/N` (FIFO 1): each preempts a
//! measuring thread of its priority or lower on the CPUs it may run on. They are named
//! with their priority (`/proc/PID/stat` fields 18 and 19) and allowed CPUs, and with what
//! moves them: an IRQ thread follows its IRQ's affinity, a per-CPU thread stays (its
//! work is the CPU's own: fewer timers, rcu_nocbs), another one takes taskset.

use super::housekeeping::{PF_NO_SETAFFINITY, kthread_info};
use super::{Area, Finding, FindingId as Id, Host, Measuring, Severity, finding, process_comms};
use crate::engine::cpu::CpuList;
use crate::system::finding_id::Check;

/// Threads named in the finding's value at most; the rest are counted.
const SHOWN: usize = 12;

/// "CPU 1", "CPUs 0-1".
fn cpu_words(cpus: &CpuList) -> String {
    match cpus.len() {
        1 => format!("CPU {cpus}"),
        _ => format!("CPUs {cpus}"),
    }
}

/// What moves a real-time kernel thread off the measured CPUs.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Moves {
    /// Its IRQ's affinity: the thread follows its IRQ.
    WithIrq(u32),
    /// Nothing: bound to its CPU (or refusing taskset), its work is that CPU's.
    PerCpu,
    /// taskset.
    Taskset(u32),
}

/// One real-time kernel thread that may run on a measured CPU.
#[derive(Debug, Clone, PartialEq, Eq)]
struct RtThread {
    comm: String,
    pid: u32,
    /// Its policy's name (SCHED_FIFO or SCHED_RR, as ps shows them: FIFO, RR) and its
    /// real-time priority, 1–99.
    policy: &'static str,
    prio: u8,
    allowed: CpuList,
    moves: Moves,
}

impl RtThread {
    fn words(&self) -> String {
        let how = match self.moves {
            Moves::WithIrq(n) => format!("follows IRQ {n}"),
            Moves::PerCpu => "per-CPU".into(),
            Moves::Taskset(_) => "movable".into(),
        };
        format!(
            "{} ({}: {} {}, {}; {how})",
            self.comm,
            self.pid,
            self.policy,
            self.prio,
            cpu_words(&self.allowed)
        )
    }
}

pub(super) fn rt_threads(h: &Host) -> Vec<Finding> {
    if !threads_interrupts(h) {
        return Vec::new();
    }
    let procs = match process_comms(h) {
        Ok(p) => p,
        Err(e) => return vec![e.finding(Area::Housekeeping, Check::RtThreads)],
    };
    let mut found: Vec<RtThread> = (procs.iter())
        .filter_map(|(pid, comm)| rt_thread(h, pid, comm))
        .filter(|t| !t.allowed.intersect(&h.measured).is_empty())
        .filter(|t| outranks(t.prio, h.measuring))
        .collect();
    // Highest priority first, then by name.
    found.sort_by(|a, b| b.prio.cmp(&a.prio).then_with(|| a.comm.cmp(&b.comm)));
    vec![judge(h, &found)]
}

/// Whether this kernel runs IRQ handlers in threads: PREEMPT_RT, or `threadirqs`.
fn threads_interrupts(h: &Host) -> bool {
    preempt_rt(h) || h.cmdline().get("threadirqs").is_some()
}

/// Whether the audited kernel is PREEMPT_RT (`/sys/kernel/realtime`, else its version).
pub(super) fn preempt_rt(h: &Host) -> bool {
    let realtime = h.read("/sys/kernel/realtime").ok();
    let version = h.read("/proc/version").unwrap_or_default();
    crate::system::preempt_rt_source(realtime.as_deref(), &version).is_some()
}

/// Whether a thread at real-time priority `prio` preempts the measuring threads (or, not
/// told how they run, a SCHED_OTHER one: all of them do).
fn outranks(prio: u8, measuring: Measuring) -> bool {
    match measuring {
        Measuring::Unknown | Measuring::Other => true,
        Measuring::RealTime(p) => prio >= p,
        Measuring::Deadline => false,
    }
}

fn rt_thread(h: &Host, pid: &str, comm: &str) -> Option<RtThread> {
    // The stopper: its class is above every policy, and it runs only to move a task or
    // stop the machine; no priority outranks it, so it is no finding.
    if comm.starts_with("migration/") {
        return None;
    }
    let (allowed, flags) = kthread_info(h, pid)?;
    let (policy, prio) =
        crate::system::proc_stat::rt_priority(&h.read(&format!("/proc/{pid}/stat")).ok()?)?;
    let pid: u32 = pid.parse().ok()?;
    let irq = (comm.strip_prefix("irq/"))
        .and_then(|r| r.split_once('-'))
        .and_then(|(n, _)| n.parse().ok());
    let moves = match irq {
        Some(n) => Moves::WithIrq(n),
        None if allowed.len() < 2 || flags & PF_NO_SETAFFINITY != 0 => Moves::PerCpu,
        None => Moves::Taskset(pid),
    };
    Some(RtThread {
        comm: comm.to_string(),
        pid,
        policy,
        prio,
        allowed,
        moves,
    })
}

/// The measuring threads' scheduling in words, for the value.
fn measuring_words(m: Measuring) -> String {
    match m {
        Measuring::Unknown => "a SCHED_OTHER thread (the measuring policy was not given)".into(),
        Measuring::Other => "the SCHED_OTHER measuring threads".into(),
        Measuring::RealTime(p) => format!("the measuring threads' real-time priority {p}"),
        Measuring::Deadline => "the SCHED_DEADLINE measuring threads".into(),
    }
}

fn judge(h: &Host, found: &[RtThread]) -> Finding {
    let why = "a real-time kernel thread at or above a measuring thread's priority preempts \
               it whenever its work comes (on PREEMPT_RT: each device IRQ's handler, the \
               timer softirqs, RCU's work)";
    if found.is_empty() {
        return finding(
            Area::Housekeeping,
            Id::RtThreadsOk,
            Severity::Ok,
            format!(
                "none may run there at or above {}",
                measuring_words(h.measuring)
            ),
        )
        .why(why);
    }
    let mut names: Vec<String> = found.iter().take(SHOWN).map(RtThread::words).collect();
    if found.len() > SHOWN {
        names.push(format!("and {} more", found.len() - SHOWN));
    }
    let movable = found.iter().any(|t| t.moves != Moves::PerCpu);
    // Only per-CPU threads: the CPU's own work, context rather than a fix to make.
    let severity = if movable {
        Severity::Warn
    } else {
        Severity::Info
    };
    let mut f = finding(
        Area::Housekeeping,
        Id::RtThreadsAbove,
        severity,
        format!(
            "at or above {}: {}",
            measuring_words(h.measuring),
            names.join(", ")
        ),
    )
    .why(why);
    let mut irqs: Vec<u32> = (found.iter())
        .filter_map(|t| match t.moves {
            Moves::WithIrq(n) => Some(n),
            _ => None,
        })
        .collect();
    irqs.dedup();
    if !irqs.is_empty() {
        let list: Vec<String> = irqs.iter().map(u32::to_string).collect();
        f = f.manual(format!(
            "IRQ threads follow their IRQ: move IRQs {} off {} (for i in {}; do echo {} > \
             /proc/irq/$i/smp_affinity_list; done, as the irq-* findings say) and each thread \
             moves with its IRQ",
            list.join(", "),
            cpu_words(&h.measured),
            list.join(" "),
            h.hk()
        ));
    }
    let pids: Vec<String> = (found.iter())
        .filter_map(|t| match t.moves {
            Moves::Taskset(p) => Some(p.to_string()),
            _ => None,
        })
        .collect();
    if !pids.is_empty() {
        f = f.manual(format!(
            "the others take taskset: for p in {}; do taskset -pc {} $p; done (kthreads-on-measured)",
            pids.join(" "),
            h.hk()
        ));
    }
    if found.iter().any(|t| t.moves == Moves::PerCpu) {
        let top = found.iter().map(|t| t.prio).max().unwrap_or(1);
        f = f.manual(format!(
            "per-CPU threads stay with their CPU, their work is its own: fewer timers there \
             (ktimers), rcu_nocbs (rcuc); or run the measured thread above them (-p {}), \
             leaving RT throttling on so that they still get their turn",
            (top + 1).min(99)
        ));
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kernel thread's /proc files: its name, priority (field 18) and allowed CPUs.
    fn thread(pid: u32, comm: &str, prio: i64, cpus: &str, flags: u64) -> Vec<(String, String)> {
        vec![
            (format!("proc/{pid}/comm"), format!("{comm}\n")),
            (
                format!("proc/{pid}/stat"),
                format!("{pid} ({comm}) S 2 0 0 0 -1 {flags} 0 0 0 0 0 3 0 0 {prio} 0 1 0 44\n"),
            ),
            (
                format!("proc/{pid}/status"),
                format!("Name:\t{comm}\nPPid:\t2\nCpus_allowed_list:\t{cpus}\n"),
            ),
        ]
    }

    fn audit(version: &str, measuring: Measuring) -> Vec<Finding> {
        let mut files = vec![("proc/version".to_string(), version.to_string())];
        files.extend(thread(102, "irq/4-ttyS0", -51, "1", 0x20_8040));
        files.extend(thread(30, "ktimers/1", -2, "1", 0x420_8040));
        files.extend(thread(29, "rcuc/1", -2, "1", 0x420_8040));
        files.extend(thread(17, "rcu_preempt", -2, "0-1", 0x20_8040));
        files.extend(thread(31, "ksoftirqd/1", 20, "1", 0x420_8040));
        files.extend(thread(66, "irq/12-i8042", -51, "0", 0x20_8040));
        files.extend(thread(28, "migration/1", -100, "1", 0x420_8040));
        let refs: Vec<(&str, &str)> = files
            .iter()
            .map(|(a, b)| (a.as_str(), b.as_str()))
            .collect();
        let t = crate::system::cgroup::tree(&refs);
        let online = CpuList::from_cpus(vec![0, 1]);
        let mut h = Host::new(t.path(), CpuList::from_cpus(vec![1]), &online);
        h.measuring = measuring;
        rt_threads(&h)
    }

    /// Issue 48, the threads Debian's PREEMPT_RT guest showed on CPU 1: under a
    /// SCHED_OTHER measurer every real-time one that may run there is named, highest
    /// first, with what moves it (the IRQ thread its IRQ, rcu_preempt taskset, the
    /// per-CPU ones nothing); the IRQ thread of CPU 0 and SCHED_OTHER ksoftirqd are not.
    /// Above FIFO 50 only the per-CPU ones are left out too; a kernel that threads no
    /// IRQs gets no finding.
    #[test]
    fn issue48_rt_threads_at_or_above_the_measurer_are_named_with_what_moves_them() {
        let rt = "Linux version 6.1.0-57-rt-amd64 #1 SMP PREEMPT_RT Debian 6.1.192-3";
        let f = audit(rt, Measuring::Other);
        assert_eq!(f.len(), 1);
        let f = &f[0];
        assert_eq!((f.id, f.severity), (Id::RtThreadsAbove, Severity::Warn));
        assert!(
            f.value.starts_with(
                "at or above the SCHED_OTHER measuring threads: irq/4-ttyS0 (102: FIFO/RR 50, \
                 CPU 1; follows IRQ 4), ktimers/1 (30: FIFO/RR 1, CPU 1; per-CPU)"
            ),
            "{}",
            f.value
        );
        assert!(
            f.value
                .contains("rcu_preempt (17: FIFO/RR 1, CPUs 0-1; movable)"),
            "{}",
            f.value
        );
        assert!(!f.value.contains("migration"), "{}", f.value);
        assert!(
            !f.value.contains("i8042") && !f.value.contains("ksoftirqd"),
            "{}",
            f.value
        );
        assert!(
            f.fix.contains("echo 0 > /proc/irq/$i/smp_affinity_list"),
            "{}",
            f.fix
        );
        assert!(f.fix.contains("taskset -pc 0 $p"), "{}", f.fix);
        assert!(f.fix.contains("-p 51"), "{}", f.fix);
        let at_50 = audit(rt, Measuring::RealTime(50));
        assert!(at_50[0].value.contains("irq/4-ttyS0") && !at_50[0].value.contains("ktimers"));
        let above = audit(rt, Measuring::RealTime(51));
        assert_eq!(
            (above[0].id, above[0].severity),
            (Id::RtThreadsOk, Severity::Ok)
        );
        assert!(
            audit(
                "Linux version 6.1.0 #1 SMP PREEMPT_DYNAMIC",
                Measuring::Other
            )
            .is_empty()
        );
    }

    #[test]
    fn a_thread_outranks_a_measurer_at_or_below_its_priority() {
        assert!(outranks(1, Measuring::Other));
        assert!(outranks(1, Measuring::Unknown));
        assert!(outranks(50, Measuring::RealTime(50)));
        assert!(!outranks(50, Measuring::RealTime(51)));
        assert!(!outranks(99, Measuring::Deadline));
    }
}
