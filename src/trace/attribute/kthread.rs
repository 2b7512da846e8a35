//! Kernel threads that run interrupt work, named by the work they run (issue 48). On
//! PREEMPT_RT every device IRQ's handler runs in a thread (`irq/N-name`, SCHED_FIFO 50),
//! the timer softirqs in `ktimers/N` and the RCU softirq's work in `rcuc/N` (both FIFO
//! 1), and what softirqs are left in `ksoftirqd/N`; `threadirqs` does the same for IRQs
//! on any kernel. A reader who sees "task ktimers/1:30" reads another task to move away;
//! it is the CPU's own timer work, whose fix is fewer timers, and an IRQ thread's is its
//! IRQ's affinity (the thread follows its IRQ).

use crate::stats::causes::{CauseKind, CauseRow, GapBreakdown};

/// The work a kernel thread runs, from its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Work<'a> {
    /// A device IRQ's threaded handler: `irq/24-virtio0-` runs IRQ 24 (its name cut to
    /// the 15 characters of a task's name).
    Irq { irq: u32, name: &'a str },
    /// `ktimers/N`: the TIMER and HRTIMER softirqs (PREEMPT_RT).
    Timers,
    /// `rcuc/N`: the RCU softirq's work, in a thread (PREEMPT_RT, or
    /// `rcutree.use_softirq=0`).
    Rcu,
    /// `ksoftirqd/N`: the softirqs no other thread took.
    Softirqs,
}

impl Work<'_> {
    /// The work `comm` runs, if it is such a thread.
    pub(super) fn of(comm: &str) -> Option<Work<'_>> {
        let per_cpu = |prefix: &str| {
            comm.strip_prefix(prefix)
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        };
        if let Some((irq, name)) = comm.strip_prefix("irq/").and_then(|r| r.split_once('-'))
            && let Ok(irq) = irq.parse()
        {
            return Some(Work::Irq { irq, name });
        }
        match () {
            _ if per_cpu("ktimers/") => Some(Work::Timers),
            _ if per_cpu("rcuc/") => Some(Work::Rcu),
            _ if per_cpu("ksoftirqd/") => Some(Work::Softirqs),
            _ => None,
        }
    }

    /// The kind of cause it is: the IRQ's, or a softirq's.
    pub(super) fn kind(self) -> CauseKind {
        match self {
            Work::Irq { .. } => CauseKind::Irq,
            _ => CauseKind::Softirq,
        }
    }

    /// Its cause's name: the work, then the thread that ran it (`thread`: its name, and
    /// where the naming keeps it, its policy), as `irq 24 virtio0-input.0 (its thread
    /// irq/24-virtio0-, real-time 50)`.
    pub(super) fn label(self, thread: &str) -> String {
        match self {
            Work::Irq { irq, name } => format!("irq {irq} {name} (its thread {thread})"),
            Work::Timers => format!("softirqs TIMER and HRTIMER (their thread {thread})"),
            Work::Rcu => format!("softirq RCU (its thread {thread})"),
            Work::Softirqs => format!("softirqs (their thread {thread})"),
        }
    }
}

/// A task's name cut to the kernel's 15 characters (TASK_COMM_LEN less its NUL).
const COMM_MAX: usize = 15;

/// The IRQ names an IRQ thread's label took from its cut name, made whole from the rows
/// of the IRQ's own handler: `irq 24 virtio0- (its thread irq/24-virtio0-, …)` beside
/// `irq 24 virtio0-input.0` becomes `irq 24 virtio0-input.0 (its thread …)`. Applied to
/// every label of an attribution, its rows, the tasks under them and the broken-down
/// gaps, so that they stay one name.
pub(super) fn complete_irq_names(causes: &mut [CauseRow], top: &mut [GapBreakdown]) {
    let handlers: Vec<(u32, String)> = (causes.iter())
        .filter(|c| c.kind == CauseKind::Irq && !c.cause.contains(" (its thread "))
        .filter_map(|c| {
            let rest = c.cause.strip_prefix("irq ")?;
            let (irq, name) = rest.split_once(' ')?;
            Some((irq.parse().ok()?, name.to_string()))
        })
        .collect();
    if handlers.is_empty() {
        return;
    }
    let whole = |label: &str| -> Option<String> {
        let rest = label.strip_prefix("irq ")?;
        let (head, thread) = rest.split_once(" (its thread ")?;
        let (irq, cut) = head.split_once(' ')?;
        let irq: u32 = irq.parse().ok()?;
        // Only a name the kernel cut: `irq/N-` and the name fill the 15 characters.
        (format!("irq/{irq}-{cut}").len() == COMM_MAX).then_some(())?;
        let mut names = handlers
            .iter()
            .filter(|(i, n)| *i == irq && n.starts_with(cut) && n.len() > cut.len());
        let name = names.next()?;
        // Two handlers of one IRQ whose names both fit: which one is not known.
        names
            .next()
            .is_none()
            .then(|| format!("irq {irq} {} (its thread {thread}", name.1))
    };
    let fix = |label: &mut String| {
        if let Some(w) = whole(label) {
            *label = w;
        }
    };
    for c in causes.iter_mut() {
        fix(&mut c.cause);
        for t in c.tasks.iter_mut() {
            fix(&mut t.task);
        }
    }
    for p in top.iter_mut().flat_map(|g| g.parts.iter_mut()) {
        fix(&mut p.cause);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_threads_are_named_by_the_work_they_run() {
        assert_eq!(
            Work::of("irq/24-virtio0-"),
            Some(Work::Irq {
                irq: 24,
                name: "virtio0-"
            })
        );
        assert_eq!(
            Work::of("irq/4-ttyS0"),
            Some(Work::Irq {
                irq: 4,
                name: "ttyS0"
            })
        );
        assert_eq!(Work::of("ktimers/1"), Some(Work::Timers));
        assert_eq!(Work::of("rcuc/12"), Some(Work::Rcu));
        assert_eq!(Work::of("ksoftirqd/0"), Some(Work::Softirqs));
        // Not per-CPU work, or not a kernel thread's name.
        for other in [
            "rcu_preempt",
            "rcuog/0",
            "rcuop/1",
            "ktimers",
            "kworker/1:1",
            "irq/x-foo",
            "irqbalance",
            "ksoftirqd/",
        ] {
            assert_eq!(Work::of(other), None, "{other}");
        }
        assert_eq!(Work::of("irq/4-ttyS0").unwrap().kind(), CauseKind::Irq);
        assert_eq!(Work::of("rcuc/1").unwrap().kind(), CauseKind::Softirq);
    }

    fn row(kind: CauseKind, cause: &str) -> CauseRow {
        CauseRow::made_up(kind, cause, 1, 0, 1_000)
    }

    /// An IRQ thread's cut name is made whole from its IRQ's own handler row, in every
    /// label; a name that was not cut, or two handlers that both fit, stay as they are.
    #[test]
    fn an_irq_threads_cut_name_is_made_whole_from_its_handler() {
        let thread = "irq 24 virtio0- (its thread irq/24-virtio0-, real-time 50)";
        let mut causes = vec![
            row(CauseKind::Irq, thread),
            row(CauseKind::Irq, "irq 24 virtio0-input.0"),
            row(
                CauseKind::Irq,
                "irq 4 ttyS0 (its thread irq/4-ttyS0, real-time 50)",
            ),
            row(CauseKind::Irq, "irq 4 ttyS0-extra"),
        ];
        let mut top = vec![GapBreakdown {
            start_ns: 0,
            start_tsc: 0,
            duration_ns: 1_000,
            parts: vec![crate::stats::causes::Part {
                kind: CauseKind::Irq,
                cause: thread.into(),
                offset_ns: 0,
                duration_ns: 1_000,
            }],
        }];
        complete_irq_names(&mut causes, &mut top);
        let whole = "irq 24 virtio0-input.0 (its thread irq/24-virtio0-, real-time 50)";
        assert_eq!(causes[0].cause, whole);
        assert_eq!(top[0].parts[0].cause, whole);
        // "irq/4-ttyS0" is 11 characters: not cut, so not the other handler's.
        assert_eq!(
            causes[2].cause,
            "irq 4 ttyS0 (its thread irq/4-ttyS0, real-time 50)"
        );
        let mut two = vec![
            row(CauseKind::Irq, thread),
            row(CauseKind::Irq, "irq 24 virtio0-input.0"),
            row(CauseKind::Irq, "irq 24 virtio0-output.0"),
        ];
        complete_irq_names(&mut two, &mut []);
        assert_eq!(two[0].cause, thread);
    }
}
