//! What a CPU's gaps were made of, as measured from kernel trace events: the data the
//! result stores per entry (`attribution`). `trace::attribute` computes it; this module
//! only holds it, so that probes' entries can carry it without knowing about tracing.

use serde::{Deserialize, Serialize};

/// The name of the cause a cgroup's CFS quota makes ("CFS quota: cpu.max 30000 100000 of
/// /jsq"): `trace::attribute` names the row with it, and the views find the row's group
/// in the run's `cpu.stat` by it, so that the two never drift apart.
pub fn quota_label(setting: &str, group: &str) -> String {
    format!("CFS quota: {setting} of {group}")
}

/// The kind of a cause.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CauseKind {
    /// A hard IRQ handler, by number and name.
    Irq,
    /// A softirq, by vector (TIMER, NET_RX, RCU, …).
    Softirq,
    /// An interrupt vector without an IRQ number: the local timer (the tick), a
    /// reschedule or function-call IPI, irq_work, …
    Vector,
    Nmi,
    /// Another task ran on the CPU (comm:pid, its policy; a kworker with its work).
    Task,
    /// The kernel took the CPU from a runnable real-time measurer: RT throttling
    /// (`kernel.sched_rt_runtime_us`) or, on 6.12+, the fair server. The tasks that ran
    /// meanwhile (idle among them) are listed under it, not as causes of their own.
    Throttling,
    /// The part no event covers: entry and exit overhead and, on a VM, the hypervisor;
    /// on bare metal, SMIs and the hardware.
    Unaccounted,
    /// A task's time the trace cannot place because the kernel recorded no sched_switch
    /// there: another task switched out than the one the trace had running (issue 50:
    /// a second reader of the kernel's buffer lacked the same switches). Which of the two
    /// ran is unknown, so the time is given to neither, but said as such, not unaccounted.
    Unrecorded,
}

impl CauseKind {
    /// As the result file and the monitor's `kind` label name it.
    pub fn as_str(self) -> &'static str {
        match self {
            CauseKind::Irq => "irq",
            CauseKind::Softirq => "softirq",
            CauseKind::Vector => "vector",
            CauseKind::Nmi => "nmi",
            CauseKind::Task => "task",
            CauseKind::Throttling => "throttling",
            CauseKind::Unaccounted => "unaccounted",
            CauseKind::Unrecorded => "unrecorded",
        }
    }
}

/// One row of a CPU's cause table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CauseRow {
    pub kind: CauseKind,
    /// "irq 36 virtio1-req.0", "softirq RCU", "vector local_timer",
    /// "task kworker/1:1:57 (SCHED_OTHER nice 0) vmstat_update", "unaccounted".
    pub cause: String,
    /// Gaps it took time in.
    pub gaps: u64,
    /// Times it ran inside those gaps (one interrupt, one time slice): a long gap can
    /// hold several ticks.
    #[serde(default)]
    pub occurrences: u64,
    /// Gaps in which it took more time than any other cause (`watch`: "the hog was the
    /// main cause of 98 % of the delays"); absent in results from before it was counted.
    #[serde(default)]
    pub largest_in: u64,
    pub total_ns: u64,
    /// Of the interrupted time of every attributed gap; the rows add up to 100.
    pub share_pct: f64,
    /// Its time per gap it appears in.
    pub median_ns: u64,
    pub max_ns: u64,
    /// The interval its gaps recur at, when most of them recur at one.
    pub period_ns: Option<u64>,
    /// What ran inside its windows, most time first: the tasks (and idle) that ran
    /// while the throttle held the measurer off. Empty for other causes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tasks: Vec<TaskTime>,
}

/// A task that ran inside a cause's windows, and its time there (gaps' time only).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskTime {
    /// Named as causes are: "idle (swapper/1)", "task python3:812 (SCHED_OTHER nice 0)".
    pub task: String,
    pub total_ns: u64,
}

/// One part of a gap.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Part {
    pub kind: CauseKind,
    pub cause: String,
    /// From the gap's start.
    pub offset_ns: u64,
    pub duration_ns: u64,
}

/// A gap and what it was made of, in time order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GapBreakdown {
    /// Since the run's start, and on the counter.
    pub start_ns: u64,
    pub start_tsc: u64,
    pub duration_ns: u64,
    pub parts: Vec<Part>,
}

/// A CPU's attribution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attribution {
    /// How it was measured, in words.
    pub method: String,
    /// Gaps attributed, and their interrupted time.
    pub gaps: u64,
    pub interrupted_ns: u64,
    /// Largest total first; the unaccounted row is among them.
    pub causes: Vec<CauseRow>,
    /// The largest gaps, each broken down.
    pub top: Vec<GapBreakdown>,
    /// Gaps that began within `coincidence_window_ns` of a gap on another measured CPU:
    /// the signature of an SMI, a hypervisor stall, stop_machine or a TLB shootdown.
    pub coincident_gaps: u64,
    pub coincidence_window_ns: u64,
    /// Gaps not attributed: those the queue to the trace reader dropped, those that
    /// overlapped a span whose events were lost, and those that began before what the
    /// reader still held (under way longer than it keeps events); never named after
    /// the events around them.
    pub unattributed_gaps: u64,
    /// Trace events read on this CPU, and lost (overwritten before they were read, or
    /// beyond what is kept): gaps while events were lost may show more unaccounted time.
    pub events_read: u64,
    pub events_lost: u64,
    /// What tracing itself adds to the gaps it describes (issue 22): each event is
    /// written while the CPU is away from the loop, so a traced gap reads longer than
    /// the same gap untraced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_cost: Option<TraceCost>,
    /// What the streaming reader could hold for this CPU (issue 35); absent from a
    /// batch attribution and from files written before the reader was bounded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reader_budget: Option<ReaderBudget>,
}

/// The memory bound a streaming reader worked under: past it the oldest events and
/// waiting gaps were dropped (counted in `events_lost` and `unattributed_gaps`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReaderBudget {
    /// All the run's readers' windows and queues, bytes.
    pub total_bytes: u64,
    /// This CPU's share: the events its window held at most, and the gaps waiting to
    /// settle.
    pub window_events: u64,
    pub pending_gaps: u64,
}

#[cfg(test)]
impl CauseRow {
    /// A test's row: `total_ns` over `gaps` gaps (one occurrence each), the largest part
    /// of `largest_in` of them, and nothing else measured.
    pub fn made_up(
        kind: CauseKind,
        cause: &str,
        gaps: u64,
        largest_in: u64,
        total_ns: u64,
    ) -> CauseRow {
        CauseRow {
            kind,
            cause: cause.into(),
            gaps,
            occurrences: gaps,
            largest_in,
            total_ns,
            share_pct: 0.0,
            median_ns: 0,
            max_ns: 0,
            period_ns: None,
            tasks: Vec::new(),
        }
    }
}

#[cfg(test)]
impl Attribution {
    /// A test's attribution: `causes` over `gaps` gaps that lost `interrupted_ns`, and
    /// nothing else measured.
    pub fn of_causes(causes: Vec<CauseRow>, gaps: u64, interrupted_ns: u64) -> Attribution {
        Attribution {
            method: String::new(),
            gaps,
            interrupted_ns,
            causes,
            top: Vec::new(),
            coincident_gaps: 0,
            coincidence_window_ns: 0,
            unattributed_gaps: 0,
            events_read: 0,
            events_lost: 0,
            trace_cost: None,
            reader_budget: None,
        }
    }
}

/// Tracing's own cost inside the gaps, measured from the trace itself.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TraceCost {
    /// The shortest spacing of two successive events on the CPU: no event is written
    /// faster, so it bounds one event's cost from above and is close to it (ns).
    pub event_ns: u64,
    /// Events recorded inside the gaps, on average per gap.
    pub events_per_gap: f64,
    /// Their product: about how much of an average traced gap is the trace's own (ns).
    pub per_gap_ns: f64,
}

impl Attribution {
    /// The row of a kind of cause with the most time, if any.
    pub fn top_of(&self, kind: CauseKind) -> Option<&CauseRow> {
        self.causes.iter().find(|c| c.kind == kind)
    }
}
