//! What a watch is asked (which threads, how the figures are made) and what it gives
//! back for each thread: the types the walk, the watcher and callers share.

use std::collections::BTreeSet;

use rustc_hash::FxHashSet;

use crate::engine::clock::Scale;
use crate::stats::causes::Attribution;
use crate::stats::histogram::LatencyHistogram;
use crate::trace::attribute::Throttle;
use crate::trace::event::{Names, Task};

/// Which threads are watched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Watched {
    /// These thread ids (a process's threads, as its `/proc/PID/task` listed them over
    /// the run).
    Tids(FxHashSet<u32>),
    /// Every task whose name (comm, at most 15 bytes) is this, new processes included.
    Comm(String),
    /// Every task whose name is one of these, and these thread ids (`monitor
    /// --watch-comm a,b` and the threads of `--watch-cgroup`'s groups).
    Comms(BTreeSet<String>, FxHashSet<u32>),
}

impl Watched {
    pub(super) fn wants(&self, t: &Task, names: &Names) -> bool {
        self.wants_by(t.pid, || names.get(t.comm))
    }

    /// Thread `pid` named `comm`, which is looked up only where names matter.
    pub(super) fn wants_by<'a>(&self, pid: u32, comm: impl FnOnce() -> &'a str) -> bool {
        match self {
            Watched::Tids(set) => set.contains(&pid),
            Watched::Comm(c) => pid != 0 && comm() == c,
            Watched::Comms(set, tids) => pid != 0 && (tids.contains(&pid) || set.contains(comm())),
        }
    }
}

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
pub(super) fn sleep_state(state: i32) -> usize {
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
    pub(super) fn reset(&mut self) {
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
