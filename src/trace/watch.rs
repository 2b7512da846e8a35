//! `watch`: attribution pointed at someone else's threads. Pure: the decoded events of
//! every traced CPU in, per-thread figures out, no I/O, so it is tested on made-up lists.
//!
//! The events of all CPUs are walked as one stream in time order (a thread migrates),
//! following each watched thread through four states: asleep, woken (a `sched_wakeup`
//! or `sched_wakeup_new` of it: runnable, waiting for a CPU), running (a `sched_switch`
//! to it), and preempted (switched out while still runnable). From them come, per
//! thread: the wake-up delay (run-queue latency: from its wake-up to the switch that
//! runs it), the time runnable but preempted, the time interrupt contexts took while it
//! ran, its runs, migrations (a run on another CPU than the last) and involuntary
//! switches.
//!
//! Each wake-up delay above the threshold is then a "gap" on the CPU that ran the
//! thread, attributed as a timer's late wake-ups are (`trace::attribute`, with nothing
//! known to run at the gap's start): what ran on that CPU instead, net, summed over all
//! of the thread's delays, and the worst few as timelines. So is each stretch preempted
//! while runnable, from its switch out to its switch in on the same CPU: a throttle
//! (its group's CFS quota, RT throttling) shows only there, as the thread switched out
//! runnable, and attribution names it from the settings in `Settings::throttle`.
//!
//! Some kernels record no `sched_switch` out of idle (6.18 in a KVM guest: none is ever
//! seen): a thread woken for an idle CPU starts running with no event saying so. Then
//! the first event on that CPU after its wake-up (the exit of the interrupt that woke
//! it, the IPI that told the CPU) is taken as its start, and counted as guessed; a
//! switch to it that comes later on that CPU, before it stops, corrects the guess. A
//! thread that stops before any such event had its start unseen: its delay is not
//! recorded, only counted.
//!
//! In parts: this file holds what callers see (what is watched, the settings, each
//! thread's figures, the one-shot `watch` and `wakeup_delays`); `walk` the state of each
//! thread and CPU as the merged stream goes by; `watcher` the streaming `Watcher` that
//! feeds it window by window, keeps each CPU's tail of events and attributes the delays.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use crate::engine::clock::Scale;
use crate::stats::causes::Attribution;
use crate::stats::histogram::LatencyHistogram;

use super::attribute::{Gap, Throttle};
use super::event::{Event, Names, Task};

mod walk;
mod watcher;

use walk::Walk;
pub use watcher::{TAIL_CAP, Watcher};

/// Which threads are watched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Watched {
    /// These thread ids (a process's threads, as its `/proc/PID/task` listed them over
    /// the run).
    Tids(HashSet<u32>),
    /// Every task whose name (comm, at most 15 bytes) is this, new processes included.
    Comm(String),
    /// Every task whose name is one of these, and these thread ids (`monitor
    /// --watch-comm a,b` and the threads of `--watch-cgroup`'s groups).
    Comms(BTreeSet<String>, HashSet<u32>),
}

impl Watched {
    fn wants(&self, t: &Task, names: &Names) -> bool {
        match self {
            Watched::Tids(set) => set.contains(&t.pid),
            Watched::Comm(c) => t.pid != 0 && names.get(t.comm) == c,
            Watched::Comms(set, tids) => {
                t.pid != 0 && (tids.contains(&t.pid) || set.contains(names.get(t.comm)))
            }
        }
    }
}

pub use super::event::still_runnable;

/// How the figures are made.
#[derive(Debug, Clone)]
pub struct Settings {
    pub scale: Scale,
    /// Wake-up delays at or above this are attributed.
    pub threshold_ns: u64,
    /// How many of each thread's worst delays are kept as timelines.
    pub top: usize,
    pub throttle: Throttle,
    /// The run's first tick, for the timelines' start times.
    pub run_start: u64,
}

/// One thread's figures.
#[derive(Debug)]
pub struct ThreadFigures {
    pub tid: u32,
    /// Its name when last seen.
    pub comm: String,
    /// Wake-up to running, in ns.
    pub wakeup: LatencyHistogram,
    /// Each time runnable but preempted, switch out to switch in, in ns; allocated at
    /// the first (a histogram is about 260 KiB).
    pub preempted: Option<LatencyHistogram>,
    /// Each interrupt context (IRQ, softirq, vector, NMI, nested ones once) while it ran,
    /// in ns; allocated at the first.
    pub irq: Option<LatencyHistogram>,
    /// Times it was switched out (each run's end).
    pub runs: u64,
    /// Runs on another CPU than its previous one.
    pub migrations: u64,
    /// Switched out while still runnable.
    pub involuntary: u64,
    /// Wake-up delays whose start was taken from the first event on an idle CPU.
    pub starts_guessed: u64,
    /// Wake-ups whose run began with no event to date it (not in `wakeup`).
    pub starts_unseen: u64,
    /// Preempted stretches whose end (its switch in) was not recorded: not in
    /// `preempted`; attributed up to its next switch out.
    pub preempted_ends_unseen: u64,
    /// The kernel's priority first seen (0–99 real-time, 100–139 normal, −1 deadline),
    /// and each change after it: (ns since the run began, the new one), the first
    /// `PRIO_CHANGES_KEPT` of `prio_changes_total`. A priority-inheritance boost is one.
    pub prio: Option<i32>,
    pub prio_changes: Vec<(u64, i32)>,
    pub prio_changes_total: u64,
    /// Off-CPU (blocked) time, switch out asleep to its wake-up, in ns, by the state it
    /// slept in (`SLEEP_STATES`); each allocated at its first.
    pub blocked: [Option<LatencyHistogram>; 3],
    /// Its delays at or above the threshold, split by what ran instead.
    pub attribution: Option<Attribution>,
}

/// The states a watched thread's blocked time is split by, as `ps` letters: S
/// (interruptible: a wait it asked for: sleep, poll, a futex), D (uninterruptible: I/O,
/// some locks; an idle kernel thread's I is counted here), and any other (stopped,
/// traced, parked).
pub const SLEEP_STATES: [&str; 3] = ["S", "D", "other"];

/// Which of `SLEEP_STATES` a switch out's `prev_state` is.
fn sleep_state(state: i64) -> usize {
    match state {
        s if s & 0x1 != 0 => 0,
        // TASK_UNINTERRUPTIBLE, or TASK_REPORT_IDLE (6.x: an idle kernel thread).
        s if s & 0x82 != 0 => 1,
        _ => 2,
    }
}

/// Priority changes kept per thread: a thread boosted by every lock it waits on would
/// otherwise grow without bound.
pub const PRIO_CHANGES_KEPT: usize = 16;

impl ThreadFigures {
    /// None of anything yet; histograms of `sigfig` digits.
    pub(crate) fn new(tid: u32, comm: String, sigfig: u8) -> ThreadFigures {
        ThreadFigures {
            tid,
            comm,
            wakeup: LatencyHistogram::with_sigfig(sigfig),
            preempted: None,
            irq: None,
            runs: 0,
            migrations: 0,
            involuntary: 0,
            starts_guessed: 0,
            starts_unseen: 0,
            preempted_ends_unseen: 0,
            prio: None,
            prio_changes: Vec::new(),
            prio_changes_total: 0,
            blocked: [None, None, None],
            attribution: None,
        }
    }

    /// Starts afresh, keeping the histograms' memory (`Watcher::drain`).
    fn reset(&mut self) {
        self.wakeup.clear();
        for h in [&mut self.preempted, &mut self.irq].into_iter().flatten() {
            h.clear();
        }
        (self.runs, self.migrations, self.involuntary) = (0, 0, 0);
        (self.starts_guessed, self.starts_unseen) = (0, 0);
        self.preempted_ends_unseen = 0;
        for h in self.blocked.iter_mut().flatten() {
            h.clear();
        }
        // The priority now stays; its changes so far were handed over.
        self.prio_changes.clear();
        self.prio_changes_total = 0;
        self.attribution = None;
    }
}

/// Every wake-up delay of each watched thread, by thread id: (the CPU that ran it,
/// [wake-up, start) in ticks, ns), in time order. For checking a run against ground
/// truth delay by delay; `watch` gives the figures.
pub fn wakeup_delays(
    per_cpu: &BTreeMap<usize, Vec<Event>>,
    names: &Names,
    watched: &Watched,
    scale: Scale,
) -> BTreeMap<u32, Vec<(usize, Gap, u64)>> {
    let mut merged: Vec<(u64, usize, &Event)> = (per_cpu.iter())
        .flat_map(|(&cpu, evs)| evs.iter().map(move |e| (e.ts, cpu, e)))
        .collect();
    merged.sort_by_key(|&(ts, cpu, _)| (ts, cpu));
    let mut w = Walk::new(watched.clone(), scale, 0);
    w.split_preempted = false;
    for (_, cpu, e) in merged {
        w.step(names, cpu, e);
    }
    w.finish();
    let mut out: BTreeMap<u32, Vec<(usize, Gap, u64)>> = BTreeMap::new();
    for (tid, cpu, gap, ns) in w.ended {
        out.entry(tid).or_default().push((cpu, gap, ns));
    }
    out
}

/// Each watched thread's figures, from every traced CPU's events (each CPU's in time
/// order), by thread id: a `Watcher` fed them all at once.
pub fn watch(
    per_cpu: &BTreeMap<usize, Vec<Event>>,
    names: &Names,
    watched: &Watched,
    s: &Settings,
    symbols: &HashMap<u64, String>,
) -> Vec<ThreadFigures> {
    let mut w = Watcher::new(watched.clone(), s.clone());
    w.feed(per_cpu, u64::MAX, names, symbols);
    w.finish(names, symbols)
}

/// A task's name as the kernel keeps it: at most 15 bytes.
pub const COMM_MAX: usize = 15;

/// The comm a name would have, or why none can.
pub fn comm_of(name: &str) -> Result<String, String> {
    match name.len() {
        0 => Err("an empty name matches no task".into()),
        n if n > COMM_MAX => Err(format!(
            "'{name}' is {n} bytes; the kernel keeps task names to {COMM_MAX}: give '{}'",
            name.get(..COMM_MAX).unwrap_or(name)
        )),
        _ => Ok(name.to_string()),
    }
}

#[cfg(test)]
mod tests;
