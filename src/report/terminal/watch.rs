//! `watch` in the result file (its top-level `watch` section) and on the terminal: per
//! watched thread, its wake-up delays, preemption and IRQ time with their histograms,
//! and what ran instead during its delays above the threshold.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::probes::record::HistogramRecord;
use crate::stats::causes::{Attribution, CauseRow};
use crate::stats::histogram::{LatencyHistogram, Summary};
use crate::system::audit::Finding;
use crate::system::counters::GroupStatDelta;
use crate::trace::event::policy_words;
use crate::trace::watch::{SLEEP_STATES, ThreadFigures};

use super::group::{self, Cell, Grouping, Member, num, text};
use super::table::{Layout, Tab, core, hidden_note, reset_hidden, us, wide, wrap};
use crate::engine::cpu::CpuList;
use crate::report::ResultFile;

/// The `watch` section: what was watched, how, and each thread's figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WatchRecord {
    /// "pid 1234", "tid 1234,1240", "comm nginx".
    pub target: String,
    /// Wake-up delays at or above this are attributed.
    pub threshold_ns: u64,
    /// How the run ended: "duration", "interrupted", "process ended", "threads ended".
    pub ended: String,
    /// How the figures were made, and what the kernel filtered, in words.
    pub method: String,
    pub filtering: String,
    /// Trace events read on all CPUs, and lost (overwritten before they were read, or
    /// beyond what is kept): delays while events were lost may be missing or misread.
    pub events_read: u64,
    pub events_lost: u64,
    /// Of `events_lost`: overwritten or dropped by the kernel before the reader came (its
    /// per-CPU buffers' `overrun` and `dropped events`), and dropped by jitterscope
    /// itself (a window or a delay's tail past its bound, or a restart on too many
    /// names). The first says the reader was too slow, the second that its bounds were
    /// too small; absent in results from before they were told apart.
    #[serde(default)]
    pub events_lost_kernel: u64,
    #[serde(default)]
    pub events_lost_reader: u64,
    /// jitterscope's own CPU time over the run (user + system, all its threads).
    pub tool_cpu_ns: u64,
    /// The CPUs each task among the causes was allowed at the end (its pid, the
    /// kernel's list "1" or "0-3"), for those still alive: isolation does not move a task
    /// whose affinity holds it on the watched CPUs, so no isolation fix is named for it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub task_cpus: BTreeMap<u32, String>,
    /// One per thread seen, by thread id.
    pub threads: Vec<WatchedThread>,
    /// The CFS quotas over the watched cgroup (it and its ancestors that set one), each
    /// with what its `cpu.stat` counted over the trace: set beside the delays named
    /// after it. Absent for a process or a name, and in results from before.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub quotas: Vec<GroupStatDelta>,
    /// The counter's ticks (the trace's clock) when the trace began and when it stopped
    /// recording: to set other counts, taken on the same clock, beside the figures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traced_ticks: Option<[u64; 2]>,
}

/// One watched thread.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WatchedThread {
    pub tid: u32,
    pub comm: String,
    /// Wake-up to running (run-queue latency).
    pub wakeup: Summary,
    pub wakeup_histogram: HistogramRecord,
    /// Each time runnable but preempted, until it ran again.
    pub preempted: Summary,
    pub preempted_histogram: HistogramRecord,
    /// Each interrupt context (IRQ, softirq, vector, NMI) while it ran.
    pub irq: Summary,
    pub irq_histogram: HistogramRecord,
    pub runs: u64,
    pub migrations: u64,
    pub involuntary_switches: u64,
    /// Delays whose start was taken from the first event on an idle CPU (no switch out
    /// of idle recorded), and wake-ups whose start no event dated (not in `wakeup`).
    pub starts_guessed: u64,
    pub starts_unseen: u64,
    /// Preempted stretches whose end no switch recorded (it ran again out of idle):
    /// not in `preempted`, attributed up to its next switch out.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub preempted_ends_unseen: u64,
    /// Its policy and priority as the trace first showed them (from the kernel's
    /// priority: "real-time 10", "SCHED_OTHER nice 0"), each change after it (a
    /// priority-inheritance boost is one; the first 16 of `priority_changes_total`), and
    /// its policy as the kernel gave it at the end ("SCHED_FIFO 10"; absent once ended).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub priority_changes: Vec<PriorityChange>,
    #[serde(default)]
    pub priority_changes_total: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_at_end: Option<String>,
    /// Off-CPU (blocked) time, from each switch out asleep to the wake-up, by the state
    /// it slept in; absent in results from before it was kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocked: Vec<BlockedTime>,
    /// Its delays at or above the threshold, split by what ran instead on that CPU;
    /// absent when none was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attribution: Option<Attribution>,
}

/// A watched thread's blocked time in one sleep state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BlockedTime {
    /// "S" (interruptible), "D" (uninterruptible, idle kernel threads included) or
    /// "other" (stopped, traced, parked).
    pub state: String,
    pub summary: Summary,
    pub histogram: HistogramRecord,
}

/// A watched thread's priority changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PriorityChange {
    /// Since the run began.
    pub at_ns: u64,
    /// The new one, in words.
    pub priority: String,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn summary_and_record(h: Option<&LatencyHistogram>, keep: bool) -> (Summary, HistogramRecord) {
    match h {
        Some(h) if keep => (h.summary(), HistogramRecord::from_hist(h)),
        Some(h) => (h.summary(), HistogramRecord::omitted()),
        None => (Summary::default(), HistogramRecord::omitted()),
    }
}

impl WatchedThread {
    /// The record of `f`; histograms encoded only when the result is `keep`t.
    pub fn from_figures(f: ThreadFigures, keep: bool) -> WatchedThread {
        let (wakeup, wakeup_histogram) = summary_and_record(Some(&f.wakeup), keep);
        let (preempted, preempted_histogram) = summary_and_record(f.preempted.as_ref(), keep);
        let (irq, irq_histogram) = summary_and_record(f.irq.as_ref(), keep);
        WatchedThread {
            tid: f.tid,
            comm: f.comm,
            wakeup,
            wakeup_histogram,
            preempted,
            preempted_histogram,
            irq,
            irq_histogram,
            runs: f.runs,
            migrations: f.migrations,
            involuntary_switches: f.involuntary,
            starts_guessed: f.starts_guessed,
            starts_unseen: f.starts_unseen,
            preempted_ends_unseen: f.preempted_ends_unseen,
            priority: f.prio.map(policy_words),
            priority_changes: (f.prio_changes.iter())
                .map(|&(at_ns, p)| PriorityChange {
                    at_ns,
                    priority: policy_words(p),
                })
                .collect(),
            priority_changes_total: f.prio_changes_total,
            // The caller asks the kernel, which a record of figures cannot.
            policy_at_end: None,
            blocked: (SLEEP_STATES.iter().zip(&f.blocked))
                .filter_map(|(state, h)| {
                    let (summary, histogram) = summary_and_record(h.as_ref(), keep);
                    h.as_ref().map(|_| BlockedTime {
                        state: state.to_string(),
                        summary,
                        histogram,
                    })
                })
                .collect(),
            attribution: f.attribution,
        }
    }
}

/// The findings of the result's own audit, not ok, whose fixes would remove cause `c`
/// of a watched thread's delays (`system::cause_fix`, the mapping the noise verdict
/// uses), worst first; `None` when the result holds no audit. Only what the audit
/// reported on the host that was watched is named: a fix printed must apply to it.
pub fn cause_findings<'a>(r: &'a ResultFile, c: &CauseRow) -> Option<Vec<&'a Finding>> {
    let audit = r.host.audit.as_ref()?;
    let all: Vec<&Finding> = audit.findings.iter().collect();
    let mut v = crate::system::cause_fix::wakeup_matching(c.kind, &c.cause, &all);
    if pinned(r, c).is_some() {
        v.retain(|f| !crate::system::cause_fix::ISOLATION.contains(&f.id));
    }
    Some(v)
}

/// The pid in a task cause's name ("task hog:812 (real-time 10)").
pub fn task_pid(cause: &str) -> Option<u32> {
    let name = cause.strip_prefix("task ")?;
    let name = name.split(" (").next()?;
    name.rsplit_once(':')?.1.parse().ok()
}

/// A task cause whose affinity (at the end of the watch) held it on the audited CPUs:
/// isolation would leave it where it is. Its CPU list, when so.
pub fn pinned<'a>(r: &'a ResultFile, c: &CauseRow) -> Option<&'a str> {
    let audit = r.host.audit.as_ref()?;
    let list = r.watch.as_ref()?.task_cpus.get(&task_pid(&c.cause)?)?;
    let cpus = CpuList::parse_kernel(list).ok()?;
    let held = !cpus.is_empty() && cpus.without(&audit.measured).is_empty();
    held.then_some(list.as_str())
}

/// What the text and the page say of a pinned task instead of an isolation fix.
pub fn pinned_note(r: &ResultFile, c: &CauseRow) -> Option<String> {
    let list = pinned(r, c)?;
    let pid = task_pid(&c.cause)?;
    let hk = (r.host.audit.as_ref())
        .map(|a| a.housekeeping.to_string())
        .unwrap_or_default();
    Some(format!(
        "its own affinity holds it on CPU {list}, where isolation would leave it: move it \
         (taskset -apc {hk} {pid}) or give the watched thread the higher priority"
    ))
}

/// A thread's blocked time in words: "S 4477 times, 4598.31 ms in all, p50 1.03 ms; D …".
pub fn blocked_words(th: &WatchedThread) -> String {
    let parts: Vec<String> = (th.blocked.iter())
        .map(|b| {
            format!(
                "{} {} times, {} ms in all, p50 {} ms",
                b.state,
                b.summary.count,
                ms(b.summary.sum_ns),
                ms(b.summary.p50_ns.unwrap_or(0))
            )
        })
        .collect();
    parts.join("; ")
}

/// A thread's policy for the tables: as the kernel gave it at the end, or as the trace
/// first showed it for one that had ended; "(+N)" when it changed N times.
pub fn policy_cell(th: &WatchedThread) -> String {
    let p = (th.policy_at_end.as_deref())
        .or(th.priority.as_deref())
        .unwrap_or("-");
    match th.priority_changes_total {
        0 => p.to_string(),
        n => format!("{p} (+{n})"),
    }
}

/// What the page and the terminal say of a result without an audit.
pub const NO_AUDIT: &str = "(no audit in this result)";

fn ms(ns: u64) -> String {
    format!("{:.2}", ns as f64 / 1e6)
}

/// The figure watched threads are grouped by: their p99 wake-up delay.
pub const WATCH_KEYS: [group::Key; 1] = [group::latency("p99 wake-up")];

/// The cause that was the largest part of most of a thread's delays.
fn main_cause(th: &WatchedThread) -> Option<&CauseRow> {
    let a = th.attribution.as_ref()?;
    a.causes.iter().max_by_key(|c| c.largest_in)
}

/// A cause as one key across threads: a task without its pid.
fn cause_key(c: &CauseRow) -> String {
    crate::report::terminal::cause_names::task_key(c.kind, &c.cause)
}

/// How the watched threads group in the current layout: each on its own with
/// `--per-thread`; else threads whose main cause and p99 agree, as `report::terminal::group` does
/// for CPUs.
pub fn grouping(w: &WatchRecord) -> Grouping {
    let members: Vec<Member> = (w.threads.iter())
        .map(|th| Member {
            cause: main_cause(th).map(cause_key),
            figures: vec![th.wakeup.p99_ns.unwrap_or(0) as f64],
        })
        .collect();
    group::in_layout(&members, &WATCH_KEYS)
}

/// A thread's name: "app:812".
fn thread_name(th: &WatchedThread) -> String {
    format!("{}:{}", th.comm, th.tid)
}

/// Each row's label: a thread's name, or a letter, the threads' name and how many
/// ("(a) app ×12"; "(b) 12 threads" when their names differ).
fn row_labels(w: &WatchRecord, g: &Grouping) -> Vec<String> {
    let mut letters = (b'a'..=b'z').map(char::from).cycle();
    (g.rows.iter())
        .map(|row| match row.members().as_slice() {
            [one] => thread_name(&w.threads[*one]),
            members => {
                let comms = group::distinct(members.iter().map(|&i| w.threads[i].comm.clone()));
                let letter = letters.next().unwrap_or('?');
                match comms.contains('/') {
                    true => format!("({letter}) {} threads", members.len()),
                    false => format!("({letter}) {comms} ×{}", members.len()),
                }
            }
        })
        .collect()
}

/// The thread ids a group holds, the first `TIDS_SAID` of them: "tids 101-112".
fn tids_words(w: &WatchRecord, members: &[usize]) -> String {
    const TIDS_SAID: usize = 16;
    let tids: Vec<usize> = (members.iter().take(TIDS_SAID))
        .map(|&i| w.threads[i].tid as usize)
        .collect();
    let more = match members.len().saturating_sub(TIDS_SAID) {
        0 => String::new(),
        n => format!(" and {n} more"),
    };
    format!("tids {}{more}", group::cpu_list(&tids).replace(',', ", "))
}

/// The terminal text of a result's `watch` section (empty without one): threads whose
/// figures and main cause agree said once as a group (`grouping`), each with
/// `--per-thread`.
pub fn watch_text(r: &ResultFile) -> String {
    let Some(w) = &r.watch else {
        return String::new();
    };
    let g = grouping(w);
    reset_hidden();
    let labels = row_labels(w, &g);
    let t = threads_table(w, &g, &labels);
    let width = Layout::current().wrap_width();
    let head = format!(
        "watch: {} for {:.3} s ({}), wake-up delay = from sched_wakeup to the switch that \
         ran the thread",
        w.target,
        r.run.actual_duration_ns as f64 / 1e9,
        w.ended,
    );
    let mut out = format!("{}\n{t}\n", wrap(&head, width, "  "));
    out.push_str(&legend(w, &g, &labels));
    if let Some(note) = hidden_note() {
        out.push_str(&wrap(&note, Layout::current().wrap_width(), ""));
        out.push('\n');
    }
    for (row, label) in g.rows.iter().zip(&labels) {
        let lines =
            blocked_lines(w, &row.members(), label) + &priority_lines(w, &row.members(), label);
        for l in lines.lines() {
            out.push_str(&wrap(l, width, "  "));
            out.push('\n');
        }
    }
    // The causes of each row's delays, as shares of their time.
    for (row, label) in g.rows.iter().zip(&labels) {
        out.push_str(&cause_lines(r, w, &row.members(), label));
    }
    let guessed: u64 = w.threads.iter().map(|t| t.starts_guessed).sum();
    let unseen: u64 = w.threads.iter().map(|t| t.starts_unseen).sum();
    let ends: u64 = w.threads.iter().map(|t| t.preempted_ends_unseen).sum();
    let ends = match ends {
        0 => String::new(),
        n => format!(
            "; {n} preempted stretches ran again with no switch recorded (out of idle): \
             attributed up to the thread's next switch out, left out of preempted"
        ),
    };
    let trace = format!(
        "trace: {} events read, {} lost{}; jitterscope used {:.3} s of CPU; {guessed} \
         starts from idle dated by the CPU's next event, {unseen} undated (left out){ends}",
        w.events_read,
        w.events_lost,
        lost_split(w),
        w.tool_cpu_ns as f64 / 1e9
    );
    out.push_str(&wrap(&trace, width, "  "));
    out.push('\n');
    out
}

/// The table of the watched threads, a row per row of `g` (labelled `labels`): wake-ups,
/// their delay, what held the thread off, and its main cause.
fn threads_table(w: &WatchRecord, g: &Grouping, labels: &[String]) -> String {
    let th_us = w.threshold_ns as f64 / 1e3;
    let cols = vec![
        wide("policy").text(),
        core("wake-ups"),
        core("p50 µs"),
        core("p99 µs"),
        core("max µs"),
        core("preempted ms"),
        core("irq ms").spare(),
        core("migr.").spare(),
        wide("invol."),
        wide("runs"),
        core(format!("main cause ≥ {th_us} µs")).text(),
    ];
    let mut t = Tab::new(&group::columns(g, core("thread").text(), cols));
    let n = |v: u64, text: String| num(v as f64, text);
    let cells: Vec<Vec<Cell>> = (w.threads.iter())
        .map(|th| {
            let cause = th.attribution.as_ref().and_then(|a| {
                let c = main_cause(th).filter(|_| a.gaps > 0)?;
                let pct = c.largest_in as f64 * 100.0 / a.gaps as f64;
                Some(num(pct, format!("{pct:.0} % {}", c.cause)))
            });
            vec![
                text(policy_cell(th)),
                n(th.wakeup.count, th.wakeup.count.to_string()),
                n(th.wakeup.p50_ns.unwrap_or(0), us(th.wakeup.p50_ns)),
                n(th.wakeup.p99_ns.unwrap_or(0), us(th.wakeup.p99_ns)),
                n(th.wakeup.max_ns.unwrap_or(0), us(th.wakeup.max_ns)),
                n(th.preempted.sum_ns, ms(th.preempted.sum_ns)),
                n(th.irq.sum_ns, ms(th.irq.sum_ns)),
                n(th.migrations, th.migrations.to_string()),
                n(th.involuntary_switches, th.involuntary_switches.to_string()),
                n(th.runs, th.runs.to_string()),
                cause.unwrap_or_else(|| text("-")),
            ]
        })
        .collect();
    for row in group::rows_labelled(g, labels, &cells) {
        t.row(row);
    }
    t.to_string()
}

/// The legend under the threads' table: what each group's letter stands for, then the
/// grouping's own (`group::legend_of`); nothing when nothing is grouped.
fn legend(w: &WatchRecord, g: &Grouping, labels: &[String]) -> String {
    let said: Vec<String> = (g.rows.iter().zip(labels))
        .filter(|(row, _)| row.members().len() > 1)
        .map(|(row, label)| {
            let letter = label.split(' ').next().unwrap_or_default();
            format!("{letter} is {}", tids_words(w, &row.members()))
        })
        .collect();
    group::legend_block(&group::legend_of(
        g,
        &WATCH_KEYS,
        &|i| thread_name(&w.threads[i]),
        &|i| format!("p99 {} µs", us(w.threads[i].wakeup.p99_ns)),
        "--per-thread",
        said,
    ))
}

/// A row's blocked time: a thread's in words; a group's per sleep state, lowest to
/// highest over its threads.
fn blocked_lines(w: &WatchRecord, members: &[usize], label: &str) -> String {
    if let [one] = members {
        let th = &w.threads[*one];
        return match th.blocked.is_empty() {
            true => String::new(),
            false => format!("{}: blocked {}\n", thread_name(th), blocked_words(th)),
        };
    }
    let mut parts = Vec::new();
    for state in SLEEP_STATES {
        let of: Vec<&BlockedTime> = (members.iter())
            .flat_map(|&i| w.threads[i].blocked.iter())
            .filter(|b| b.state == state)
            .collect();
        if of.is_empty() {
            continue;
        }
        let r = |f: &dyn Fn(&BlockedTime) -> u64, fmt: &dyn Fn(f64) -> String| {
            group::range(of.iter().map(|b| f(b) as f64), fmt)
        };
        parts.push(format!(
            "{state} {} times, {} ms in all, p50 {} ms",
            r(&|b| b.summary.count, &|v| format!("{v:.0}")),
            r(&|b| b.summary.sum_ns, &|v| ms(v as u64)),
            r(&|b| b.summary.p50_ns.unwrap_or(0), &|v| ms(v as u64)),
        ));
    }
    match parts.is_empty() {
        true => String::new(),
        false => format!("{label}: blocked {} each\n", parts.join("; ")),
    }
}

/// A row's priority changes: a thread's each (the first 16); for a group, how many of
/// its threads changed.
fn priority_lines(w: &WatchRecord, members: &[usize], label: &str) -> String {
    let changed: Vec<&WatchedThread> = (members.iter())
        .map(|&i| &w.threads[i])
        .filter(|t| t.priority_changes_total > 0)
        .collect();
    match (members, changed.as_slice()) {
        (_, []) => String::new(),
        ([_], [th]) => {
            let changes: Vec<String> = (th.priority_changes.iter())
                .map(|c| format!("{} at {:.3} s", c.priority, c.at_ns as f64 / 1e9))
                .collect();
            let more = th.priority_changes_total - th.priority_changes.len() as u64;
            format!(
                "{}: priority {} at first, then {}{}\n",
                thread_name(th),
                th.priority.as_deref().unwrap_or("?"),
                changes.join(", "),
                if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                }
            )
        }
        _ => format!(
            "{label}: {} of its {} threads changed priority ({} times each): --per-thread \
             shows each change\n",
            changed.len(),
            members.len(),
            group::range(
                changed.iter().map(|t| t.priority_changes_total as f64),
                |v| format!("{v:.0}")
            )
        ),
    }
}

/// The causes a row's delays were split into, as shares of their time, each with the
/// audit finding whose fix would remove it: a thread's as measured; a group's summed
/// by cause (a task's pid left out), shares lowest to highest over its threads.
fn cause_lines(r: &ResultFile, w: &WatchRecord, members: &[usize], label: &str) -> String {
    let th_us = w.threshold_ns as f64 / 1e3;
    let traced: Vec<(&WatchedThread, &Attribution)> = (members.iter())
        .filter_map(|&i| Some((&w.threads[i], w.threads[i].attribution.as_ref()?)))
        .collect();
    let Some((first, a0)) = traced.first() else {
        return String::new();
    };
    let mut out = String::new();
    // One cause across the row: its key, a row of it (for the fixes), its share on each
    // thread that saw it, and the delays it was the largest part of.
    let members: Vec<Option<&Attribution>> = traced.iter().map(|(_, a)| Some(*a)).collect();
    let causes = crate::report::terminal::cause_matrix::by_key(&members, |_, c| cause_key(c));
    let head = match traced.as_slice() {
        [_] => format!(
            "{} ({}): {} delays ≥ {th_us} µs, {:.3} ms in all; share of their time, \
             and of the delays where it was the largest part:",
            thread_name(first),
            policy_cell(first),
            a0.gaps,
            a0.interrupted_ns as f64 / 1e6
        ),
        many => format!(
            "{} ({}): {} delays ≥ {th_us} µs each, {} ms in all; share of their time \
             (lowest–highest over the threads), and of the delays where it was the largest \
             part:",
            label,
            group::distinct(many.iter().map(|(th, _)| policy_cell(th))),
            group::range(many.iter().map(|(_, a)| a.gaps as f64), |v| format!(
                "{v:.0}"
            )),
            group::range(
                many.iter().map(|(_, a)| a.interrupted_ns as f64),
                |v| format!("{:.3}", v / 1e6)
            ),
        ),
    };
    out.push_str(&wrap(&head, Layout::current().wrap_width(), "  "));
    out.push('\n');
    let unsplit: u64 = traced.iter().map(|(_, a)| a.unattributed_gaps).sum();
    if unsplit > 0 {
        out.push_str(&format!(
            "  {unsplit} more delays not split: events they needed were dropped by \
             jitterscope's bounds\n"
        ));
    }
    for x in causes.iter().take(5) {
        let c = x.row;
        let name = if traced.len() == 1 { &c.cause } else { &x.key };
        out.push_str(&format!(
            "  {:>5} %  main cause of {:>5} delays  {name}\n",
            group::range(x.share.iter().flatten().copied(), |v| format!("{v:.1}")),
            x.largest_in
        ));
        // The finding whose fix would remove it, whole (a command in it can be
        // pasted); the others that would, by id.
        if let Some(note) = pinned_note(r, c) {
            out.push_str(&format!("           pinned: {note}\n"));
        }
        if let Some([first, more @ ..]) = cause_findings(r, c).as_deref() {
            out.push_str(&fix_lines(&format!("fix: audit {}:", first.id), first));
            if !more.is_empty() {
                let ids: Vec<String> = more.iter().map(|f| f.id.to_string()).collect();
                out.push_str(&format!("           also: {}\n", ids.join(", ")));
            }
        }
    }
    // Beside a quota named as a cause, the kernel's own count of its group's throttling.
    for x in causes.iter().take(5) {
        // The time named is a thread's: said for a row of one thread only.
        let named = (traced.len() == 1).then_some(x.row.total_ns);
        let note =
            super::cause_names::quota_count_note(&x.row.cause, named, &w.quotas, "the watch", true);
        if let Some(note) = note {
            let width = Layout::current().wrap_width();
            out.push_str(&wrap(&format!("  {note}"), width, "    "));
            out.push('\n');
        }
    }
    if r.host.audit.is_none() {
        out.push_str(&format!("  fixes: {NO_AUDIT}\n"));
    }
    out
}

/// A fix under its cause: on one line with its head when it fits, else the head, then
/// the finding's remedies, each command and boot option whole on a line of its own
/// (`audit_table::fix_text`).
fn fix_lines(head: &str, f: &Finding) -> String {
    const INDENT: &str = "           ";
    let width = Layout::current().wrap_width();
    let one = format!("{INDENT}{head} {}", f.fix);
    if width.is_none_or(|w| one.chars().count() <= w) {
        return one + "\n";
    }
    let more = format!("{INDENT}  ");
    format!("{INDENT}{head}\n")
        + &crate::report::terminal::audit_table::fix_text(&f.fix, &f.remedies, width, &more)
}

/// Where the lost events went, when any were: " (N by the kernel, M by jitterscope)".
fn lost_split(w: &WatchRecord) -> String {
    if w.events_lost == 0 || w.events_lost != w.events_lost_kernel + w.events_lost_reader {
        return String::new();
    }
    format!(
        " ({} overwritten in the kernel's buffers, {} dropped by jitterscope's bounds)",
        w.events_lost_kernel, w.events_lost_reader
    )
}

/// The watch CSV's header: one row per thread (`row` = `thread`) with its figures, then
/// one per cause of its delays at or above the threshold (`row` = `cause`, naming it).
/// Units are in the names; a column that does not apply to the row is empty.
pub const WATCH_CSV_HEADER: &str = "file,tid,comm,row,wakeups,wakeup_p50_ns,wakeup_p99_ns,\
wakeup_max_ns,preempted_count,preempted_sum_ns,irq_count,irq_sum_ns,migrations,\
involuntary_switches,runs,run_events_read,run_events_lost,cause,cause_kind,delays,\
main_cause_of,cause_total_ns,cause_share_pct,cause_max_ns";

/// The rows of `report --format csv`'s watch table (file name, section), under
/// `WATCH_CSV_HEADER`; `export::watch_csv` writes them.
pub fn watch_csv_rows(watches: &[(String, &WatchRecord)]) -> Vec<Vec<String>> {
    let opt = |v: Option<u64>| v.map_or_else(String::new, |v| v.to_string());
    let mut out = Vec::new();
    for (file, w) in watches {
        for th in &w.threads {
            let who = [file.clone(), th.tid.to_string(), th.comm.clone()];
            let mut row = who.to_vec();
            row.extend([
                "thread".into(),
                th.wakeup.count.to_string(),
                opt(th.wakeup.p50_ns),
                opt(th.wakeup.p99_ns),
                opt(th.wakeup.max_ns),
                th.preempted.count.to_string(),
                th.preempted.sum_ns.to_string(),
                th.irq.count.to_string(),
                th.irq.sum_ns.to_string(),
                th.migrations.to_string(),
                th.involuntary_switches.to_string(),
                th.runs.to_string(),
                w.events_read.to_string(),
                w.events_lost.to_string(),
            ]);
            row.extend(std::iter::repeat_n(String::new(), 7));
            out.push(row);
            let causes = th.attribution.iter().flat_map(|a| a.causes.iter());
            for c in causes {
                let mut row = who.to_vec();
                row.push("cause".into());
                row.extend(std::iter::repeat_n(String::new(), 13));
                row.extend([
                    c.cause.clone(),
                    serde_json::to_string(&c.kind)
                        .unwrap_or_default()
                        .trim_matches('"')
                        .to_string(),
                    c.gaps.to_string(),
                    c.largest_in.to_string(),
                    c.total_ns.to_string(),
                    format!("{:.3}", c.share_pct),
                    c.max_ns.to_string(),
                ]);
                out.push(row);
            }
        }
    }
    out
}

/// Each watched thread's wake-up delays as a distribution `compare` matches across runs
/// by thread name: probe `watch`, key the comm (thread ids differ from run to run; a
/// name that repeats is numbered `#2`, `#3` … in thread-id order), metric `wakeup`.
pub fn wakeup_dists(w: &WatchRecord) -> Vec<crate::report::result::dist::Dist<'_>> {
    use std::borrow::Cow;
    (w.threads.iter())
        .map(|th| crate::report::result::dist::Dist {
            probe: "watch",
            key: crate::report::result::dist::tag_safe(&th.comm),
            metric: "wakeup",
            cpu: String::new(),
            summary: Cow::Borrowed(&th.wakeup),
            histogram: (th.wakeup_histogram.encoding != crate::probes::record::OMITTED)
                .then_some(Cow::Borrowed(&th.wakeup_histogram)),
            trusted: true,
            series: None,
            rate_per_s: None,
            interrupted_pct: None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::compare::{Run, Verdict, compare};
    use crate::stats::causes::CauseKind;
    use crate::system::audit::Severity;
    use crate::system::finding_id::FindingId;

    fn cause(kind: CauseKind, cause: &str, gaps: u64, total_ns: u64) -> CauseRow {
        CauseRow {
            share_pct: 50.0,
            max_ns: total_ns,
            ..CauseRow::made_up(kind, cause, gaps, gaps, total_ns)
        }
    }

    /// A thread whose wake-up delays are `delays` (ns), with these causes.
    fn thread(tid: u32, comm: &str, delays: &[u64], causes: Vec<CauseRow>) -> WatchedThread {
        let mut wakeup = LatencyHistogram::new();
        delays.iter().for_each(|&d| wakeup.record(d));
        let mut irq = LatencyHistogram::new();
        irq.record(700);
        let mut asleep = LatencyHistogram::new();
        asleep.record(1_000_000);
        asleep.record(3_000_000);
        let attribution = (!causes.is_empty()).then(|| {
            let gaps = causes.iter().map(|c| c.gaps).sum();
            let lost = causes.iter().map(|c| c.total_ns).sum();
            Attribution::of_causes(causes, gaps, lost)
        });
        let f = ThreadFigures {
            wakeup,
            irq: Some(irq),
            runs: 9,
            migrations: 2,
            involuntary: 3,
            prio: Some(98),
            prio_changes: vec![(1_500_000_000, 49)],
            prio_changes_total: 1,
            blocked: [Some(asleep), None, None],
            attribution,
            ..ThreadFigures::new(tid, comm.into(), 3)
        };
        WatchedThread::from_figures(f, true)
    }

    fn result(threads: Vec<WatchedThread>) -> ResultFile {
        let mut r =
            ResultFile::parse(include_str!("../../../tests/fixtures/all-probes.json")).unwrap();
        r.probes.clear();
        r.watch = Some(WatchRecord {
            target: "comm app".into(),
            threshold_ns: 10_000,
            ended: "duration".into(),
            method: String::new(),
            filtering: String::new(),
            events_read: 1234,
            events_lost: 5,
            events_lost_kernel: 3,
            events_lost_reader: 2,
            tool_cpu_ns: 0,
            task_cpus: BTreeMap::new(),
            threads,
            quotas: Vec::new(),
            traced_ticks: None,
        });
        r
    }

    /// One row per thread with its figures, one per cause of its delays; every row as
    /// wide as the header, the units in its names.
    /// The text says where lost events went: a slow reader and too small a bound call
    /// for different fixes.
    #[test]
    fn text_tells_kernel_losses_from_the_readers() {
        let r = result(vec![thread(10, "app", &[20_000; 10], Vec::new())]);
        // Unwrapped, so that the words are found whatever the width.
        let text =
            crate::report::terminal::table::Layout::fixed(100, true).scoped(|| watch_text(&r));
        assert!(
            text.contains(
                "5 lost (3 overwritten in the kernel's buffers, 2 dropped by jitterscope's \
                 bounds)"
            ),
            "{text}"
        );
        let mut old = r.clone();
        let w = old.watch.as_mut().unwrap();
        (w.events_lost_kernel, w.events_lost_reader) = (0, 0);
        let text = watch_text(&old);
        assert!(
            text.contains("5 lost;"),
            "an older result has no split: {text}"
        );
    }

    /// Issue 35: delays whose events the bounds dropped are said, not left out unsaid.
    #[test]
    fn issue35_delays_not_split_are_counted() {
        let causes = vec![cause(CauseKind::Task, "task hog:20", 10, 200_000)];
        let mut r = result(vec![thread(10, "app", &[20_000; 13], causes)]);
        let text = watch_text(&r);
        assert!(!text.contains("not split"), "{text}");
        let w = r.watch.as_mut().unwrap();
        w.threads[0].attribution.as_mut().unwrap().unattributed_gaps = 3;
        let text =
            crate::report::terminal::table::Layout::fixed(100, true).scoped(|| watch_text(&r));
        assert!(
            text.contains("3 more delays not split: events they needed were dropped"),
            "{text}"
        );
    }

    /// Issue 34: a quota named as a thread's cause has its group's `cpu.stat` deltas
    /// (throttled time and periods) beside it, with the time named; a result without
    /// them says nothing more.
    #[test]
    fn issue34_a_named_quota_has_its_groups_counts_beside_it() {
        let label = crate::stats::causes::quota_label("cpu.max 30000 100000", "/pod/ctr");
        let causes = vec![cause(CauseKind::Throttling, &label, 30, 891_000_000)];
        let mut r = result(vec![thread(10, "app", &[20_000; 10], causes)]);
        let text = Layout::fixed(100, true).scoped(|| watch_text(&r));
        assert!(!text.contains("cpu.stat"), "{text}");
        r.watch.as_mut().unwrap().quotas = vec![GroupStatDelta {
            group: "/pod/ctr".into(),
            version: crate::system::cgroup::Version::V2,
            quota: Some("cpu.max 30000 100000".into()),
            cfs: None,
            stat: crate::system::cgroup::CpuStat {
                nr_periods: 30,
                nr_throttled: 29,
                throttled_ns: 904_600_000,
                ..Default::default()
            },
        }];
        let text = Layout::fixed(100, true).scoped(|| watch_text(&r));
        assert!(
            text.contains(
                "cpu.stat: throttled 904.6 ms over the watch in /pod/ctr (all its CPUs' run \
                 queues; 29 of 30 periods throttled), beside the 891.0 ms named its quota here."
            ),
            "{text}"
        );
    }

    /// Issue 25: a thread's policy and priority, and changes to them.
    #[test]
    fn text_gives_each_threads_policy_and_its_changes() {
        let mut r = result(vec![thread(10, "app", &[20_000; 10], Vec::new())]);
        let text = watch_text(&r);
        assert_eq!(
            policy_cell(&r.watch.as_ref().unwrap().threads[0]),
            "real-time 1 (+1)"
        );
        assert!(
            text.contains("app:10: priority real-time 1 at first, then real-time 50 at 1.500 s"),
            "{text}"
        );
        assert!(
            text.contains("app:10: blocked S 2 times, 4.00 ms in all, p50 1.00 ms\n"),
            "blocked time by state: {text}"
        );
        let th = &mut r.watch.as_mut().unwrap().threads[0];
        th.policy_at_end = Some("SCHED_FIFO 50".into());
        assert_eq!(
            policy_cell(th),
            "SCHED_FIFO 50 (+1)",
            "the kernel's word at the end first"
        );
    }

    #[test]
    fn csv_has_a_row_per_thread_and_per_cause() {
        let causes = vec![
            cause(
                CauseKind::Task,
                "task hog:20 (SCHED_FIFO 50)",
                40,
                9_000_000,
            ),
            cause(CauseKind::Irq, "irq 30 eth0, rx", 3, 30_000),
        ];
        let r = result(vec![
            thread(10, "app", &[20_000; 100], causes),
            thread(11, "app", &[3_000], Vec::new()),
        ]);
        let w = r.watch.as_ref().unwrap();
        let csv = crate::report::export::watch_csv(&[("r.json".into(), w)]);
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines[0], WATCH_CSV_HEADER);
        assert!(lines[0].contains("wakeup_p99_ns") && lines[0].contains("cause_total_ns"));
        assert_eq!(lines.len(), 1 + 3 + 1, "{csv}");
        let width = lines[0].split(',').count();
        let p50 = w.threads[0].wakeup.p50_ns.unwrap();
        assert_eq!(
            lines[1],
            format!("r.json,10,app,thread,100,{p50},{p50},{p50},0,0,1,700,2,3,9,1234,5,,,,,,,")
        );
        assert_eq!(
            lines[2],
            "r.json,10,app,cause,,,,,,,,,,,,,,task hog:20 (SCHED_FIFO 50),task,40,40,9000000,50.000,9000000"
        );
        // Quoted: the name holds a comma.
        assert!(lines[3].ends_with(",\"irq 30 eth0, rx\",irq,3,3,30000,50.000,30000"));
        assert!(lines[4].starts_with("r.json,11,app,thread,1,"));
        for l in [lines[1], lines[2], lines[4]] {
            assert_eq!(l.split(',').count(), width, "{l}");
        }
        // In `report --format csv`, after the (empty) distributions table.
        let all = crate::report::export::csv_summary(&[("r.json".into(), r.clone())]);
        assert!(all.ends_with(&csv), "{all}");
    }

    fn finding(id: FindingId, severity: Severity, fix: &str) -> Finding {
        Finding::made_up(id, severity, fix)
    }

    /// Issue 29: 200 watched threads read in a bounded text: threads whose main cause
    /// and p99 agree said once, the one that stands out named; `--per-thread` gives each
    /// its own row and causes. Two threads stay as they were, each on its own.
    #[test]
    fn issue29_many_threads_are_grouped_and_the_outlier_named() {
        let hog = || {
            vec![cause(
                CauseKind::Task,
                "task hog:812 (real-time 10)",
                9,
                90_000,
            )]
        };
        let mut threads: Vec<WatchedThread> = (0..200)
            .map(|i| thread(1000 + i, "worker", &[20_000 + i as u64 * 10; 10], hog()))
            .collect();
        let irq = vec![cause(CauseKind::Irq, "irq 30 eth0", 3, 30_000)];
        threads[77] = thread(1077, "worker", &[900_000; 10], irq);
        let r = result(threads);
        let text = Layout::fixed(100, false).scoped(|| watch_text(&r));
        assert!(text.lines().count() <= 40, "{text}");
        // But a command pasted whole.
        let wide = |l: &&str| l.chars().count() > 100 && !l.trim().starts_with("for i in");
        assert!(!text.lines().any(|l| wide(&l)), "{text}");
        assert!(text.contains("(a) worker ×199"), "{text}");
        assert!(text.contains("worker:1077"), "the outlier is named: {text}");
        assert_eq!(text.matches("main cause of").count(), 2, "{text}");
        let each = Layout::fixed(100, false)
            .per_cpu(true)
            .scoped(|| watch_text(&r));
        for tid in 1000..1200 {
            assert!(each.contains(&format!("worker:{tid} ")), "{tid}");
        }
        assert_eq!(each.matches("main cause of").count(), 200);
        let two = result(vec![
            thread(10, "app", &[20_000; 10], hog()),
            thread(11, "app", &[20_000; 10], hog()),
        ]);
        let text = Layout::fixed(100, false).scoped(|| watch_text(&two));
        assert!(text.contains("app:10") && text.contains("app:11"), "{text}");
        assert!(!text.contains("low"), "{text}");
    }

    /// Each cause names the finding of the result's own audit whose fix would remove it,
    /// only where that audit reported it not ok; without an audit, the text says so.
    #[test]
    fn causes_name_the_fix_this_hosts_audit_reported() {
        let causes = vec![
            cause(
                CauseKind::Task,
                "task kworker/1:1:57 (SCHED_OTHER nice 0) vmstat_update",
                4,
                9_000_000,
            ),
            cause(CauseKind::Irq, "irq 30 eth0", 3, 30_000),
        ];
        let mut r = result(vec![thread(10, "app", &[20_000; 10], causes)]);
        let audit = r.host.audit.as_mut().expect("the fixture's audit");
        audit.findings = vec![
            finding(
                FindingId::StatIntervalShort,
                Severity::Warn,
                "now: sysctl -w vm.stat_interval=10",
            ),
            finding(FindingId::IrqOnMeasuredCpus, Severity::Ok, "none"),
        ];
        let t = watch_text(&r);
        assert!(
            t.contains(
                "task kworker/1:1:57 (SCHED_OTHER nice 0) vmstat_update\n           \
                 fix: audit stat-interval-short: now: sysctl -w vm.stat_interval=10\n"
            ),
            "{t}"
        );
        // The IRQ finding is ok on this host: no fix for the IRQ.
        assert_eq!(t.matches("fix: audit").count(), 1, "{t}");
        r.host.audit = None;
        let t = watch_text(&r);
        assert!(!t.contains("fix: audit"), "{t}");
        assert!(t.contains("fixes: (no audit in this result)"), "{t}");
    }

    /// Review 2 of issue 29: watch laid a fix too long for its line out by reparsing its
    /// text, and word-wrapped boot options; now each remedy is whole on a line.
    #[test]
    fn a_long_fix_keeps_its_boot_options_on_one_line() {
        use crate::system::audit::Remedy;
        let causes = vec![cause(
            CauseKind::Task,
            "task hog:20 (SCHED_OTHER nice 0)",
            4,
            9_000_000,
        )];
        let mut r = result(vec![thread(10, "app", &[20_000; 10], causes)]);
        let cpus = "1-3,5,7,9-11,13,15-47";
        let options = vec![
            format!("isolcpus=managed_irq,domain,{cpus}"),
            format!("nohz_full={cpus}"),
            format!("rcu_nocbs={cpus}"),
        ];
        let audit = r.host.audit.as_mut().expect("the fixture's audit");
        audit.findings = vec![Finding {
            remedies: vec![Remedy::Boot {
                options: options.clone(),
                how: "on the kernel command line, then reboot".into(),
            }],
            ..finding(
                FindingId::IsolatedMissing,
                Severity::Warn,
                &format!(
                    "at boot: {} (on the kernel command line, then reboot)",
                    options.join(" ")
                ),
            )
        }];
        let t = Layout::fixed(80, false).scoped(|| watch_text(&r));
        assert!(t.lines().any(|l| l.trim() == options.join(" ")), "{t}");
    }

    /// A hog whose own affinity holds it on the watched CPU gets no isolation fix
    /// (isolcpus would leave it there): a fix printed must work on this host.
    #[test]
    fn a_task_pinned_to_the_watched_cpus_gets_no_isolation_fix() {
        let causes = vec![cause(
            CauseKind::Task,
            "task hog:20 (real-time 10)",
            4,
            9_000_000,
        )];
        let mut r = result(vec![thread(10, "app", &[20_000; 10], causes)]);
        let audit = r.host.audit.as_mut().expect("the fixture's audit");
        audit.measured = CpuList::from_cpus(vec![1]);
        audit.housekeeping = CpuList::from_cpus(vec![0]);
        audit.findings = vec![finding(
            FindingId::IsolatedMissing,
            Severity::Warn,
            "at boot: isolcpus=1",
        )];
        let w = r.watch.as_mut().unwrap();
        w.task_cpus.insert(20, "0-1".into());
        let t = watch_text(&r);
        assert!(
            t.contains("fix: audit isolated-missing"),
            "free to move: {t}"
        );
        assert!(!t.contains("pinned:"), "{t}");
        r.watch.as_mut().unwrap().task_cpus.insert(20, "1".into());
        let t = watch_text(&r);
        assert!(!t.contains("isolated-missing"), "pinned: {t}");
        assert!(
            t.contains(
                "pinned: its own affinity holds it on CPU 1, where isolation would \
                        leave it: move it (taskset -apc 0 20)"
            ),
            "{t}"
        );
    }

    fn runs<'a>(results: &'a [ResultFile]) -> Vec<Run<'a>> {
        (results.iter().enumerate())
            .map(|(i, r)| Run {
                label: format!("run{i}"),
                path: format!("r{i}.json").into(),
                result: r,
            })
            .collect()
    }

    /// Two watch results are matched by thread name, whatever their thread ids: a wake-up
    /// delay three times as long is worse, the same one is no clear difference.
    #[test]
    fn compare_matches_watched_threads_by_name() {
        let spread = |base: u64| -> Vec<u64> { (0..2_000).map(|i| base + i % 997).collect() };
        let before = result(vec![thread(100, "app", &spread(20_000), Vec::new())]);
        let same = result(vec![thread(200, "app", &spread(20_000), Vec::new())]);
        let worse = result(vec![
            thread(300, "app", &spread(60_000), Vec::new()),
            thread(301, "other", &spread(1_000), Vec::new()),
        ]);
        let all = [before, same, worse];
        let c = compare(&runs(&all)).unwrap();
        let row = (c.rows.iter())
            .find(|r| r.probe == "watch" && r.key == "app" && r.metric == "wakeup")
            .expect("a watch row for app");
        assert!(
            row.figures.iter().all(Option::is_some),
            "matched in all three"
        );
        let verdict = |i: usize| row.judgements[i].as_ref().unwrap().verdict;
        assert_eq!(verdict(1), Verdict::NoClearDifference);
        assert_eq!(verdict(2), Verdict::Worse);
        let other = c.rows.iter().find(|r| r.key == "other").unwrap();
        assert!(other.figures[0].is_none() && other.figures[2].is_some());
    }
}
