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

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};

use crate::engine::clock::Scale;
use crate::stats::causes::Attribution;
use crate::stats::histogram::LatencyHistogram;

use super::attribute::{Context, Gap, MeasurerKind, Naming, Tally, Throttle};
use super::event::{Event, Kind, Names, Task};

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

/// Where a watched thread is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Asleep,
    /// Woken at `at` (a tick) for `cpu`, at the kernel's priority `prio`: of two woken
    /// for an idle CPU, the higher runs first.
    Woken {
        at: u64,
        cpu: usize,
        prio: i32,
    },
    /// Switched out while runnable at `at` on `cpu`.
    Preempted {
        at: u64,
        cpu: usize,
    },
    /// Running on `cpu`; `guessed` holds the wake-up and the guessed start of a run that
    /// began with no switch recorded, until a switch confirms or corrects it.
    Running {
        cpu: usize,
        guessed: Option<(u64, u64)>,
    },
}

struct Thread {
    figures: ThreadFigures,
    phase: Phase,
    last_cpu: Option<usize>,
    /// The priority last seen.
    prio: Option<i32>,
    /// When it was switched out asleep, and the state it slept in.
    slept: Option<(u64, i64)>,
    /// The stamp of its last event.
    last_ts: u64,
}

/// A wake-up delay that ended: (thread, the CPU that ran it, [wake-up, start), ns).
type Delay = (u32, usize, Gap, u64);

#[derive(Debug, Default, Clone, Copy)]
struct Cpu {
    /// The task running, as far as the events tell.
    current: Option<Task>,
    /// `current` is a task woken for this CPU while idle, not yet seen running: with no
    /// switch out of idle recorded, a higher-priority thread woken after it runs first.
    waiting: bool,
    /// Open interrupt contexts, and when the outermost opened.
    depth: u32,
    since: u64,
}

/// The walk over the merged stream: only open state (each CPU's task and interrupt
/// depth, each thread's phase and figures), so a run of any length fits.
struct Walk {
    watched: Watched,
    scale: Scale,
    threshold_ns: u64,
    threads: BTreeMap<u32, Thread>,
    cpus: HashMap<usize, Cpu>,
    /// Delays at or above the threshold, in the order they ended, until taken.
    ended: Vec<Delay>,
    /// Significant digits of the threads' histograms.
    sigfig: u8,
    /// Stretches preempted while runnable are attributed too, not only wake-up delays.
    split_preempted: bool,
    /// The stamp of the event being walked.
    now: u64,
}

impl Walk {
    fn new(watched: Watched, scale: Scale, threshold_ns: u64) -> Walk {
        Walk {
            watched,
            scale,
            threshold_ns,
            threads: BTreeMap::new(),
            cpus: HashMap::new(),
            ended: Vec::new(),
            sigfig: crate::stats::histogram::SIGFIG,
            split_preempted: true,
            now: 0,
        }
    }

    /// The watched thread `t` names (an event's task, with its comm and priority then),
    /// a change of its priority noted.
    fn thread(&mut self, t: &Task, names: &Names) -> &mut Thread {
        let (sigfig, now) = (self.sigfig, self.now);
        let name = names.get(t.comm);
        let th = self.threads.entry(t.pid).or_insert_with(|| Thread {
            figures: ThreadFigures::new(t.pid, name.to_string(), sigfig),
            phase: Phase::Asleep,
            last_cpu: None,
            prio: None,
            slept: None,
            last_ts: now,
        });
        if th.figures.comm != name {
            th.figures.comm = name.to_string();
        }
        th.last_ts = now;
        match th.prio {
            None => th.figures.prio = Some(t.prio),
            Some(p) if p != t.prio => {
                th.figures.prio_changes_total += 1;
                if th.figures.prio_changes.len() < PRIO_CHANGES_KEPT {
                    // Ticks until the watcher's finish makes them ns since the start.
                    th.figures.prio_changes.push((now, t.prio));
                }
            }
            Some(_) => {}
        }
        th.prio = Some(t.prio);
        th
    }

    /// A wake-up delay from `at` to `start` on `cpu`.
    fn record_delay(&mut self, tid: u32, cpu: usize, at: u64, start: u64) {
        let ns = self.scale.to_ns(start.saturating_sub(at));
        let threshold = self.threshold_ns;
        let Some(th) = self.threads.get_mut(&tid) else {
            return;
        };
        th.figures.wakeup.record(ns);
        if ns >= threshold && start > at {
            let gap = Gap {
                start: at,
                end: start,
            };
            self.ended.push((tid, cpu, gap, ns));
        }
    }

    /// A stretch preempted while runnable, from its switch out at `at` to `end` on
    /// `cpu`, attributed as a delay when at or above the threshold: a throttle that held
    /// it (its group's CFS quota, RT throttling) is seen only there, as it was switched
    /// out runnable. One that ran again on another CPU is not: what ran on the CPU it
    /// left after it left was not its delay.
    fn preempted_delay(&mut self, tid: u32, cpu: usize, at: u64, end: u64) {
        let ns = self.scale.to_ns(end.saturating_sub(at));
        if self.split_preempted && ns >= self.threshold_ns && end > at {
            self.ended.push((tid, cpu, Gap { start: at, end }, ns));
        }
    }

    /// The thread starts a run on `cpu` (a switch to it, or a guess).
    fn starts_on(th: &mut Thread, cpu: usize) {
        if th.last_cpu.is_some_and(|c| c != cpu) {
            th.figures.migrations += 1;
        }
        th.last_cpu = Some(cpu);
    }

    fn step(&mut self, names: &Names, cpu: usize, e: &Event) {
        self.now = e.ts;
        match e.kind {
            Kind::Wakeup {
                task, target_cpu, ..
            } if self.watched.wants(&task, names) => {
                let (scale, sigfig) = (self.scale, self.sigfig);
                let th = self.thread(&task, names);
                // A wake-up of a thread still on its CPU, or already runnable, changes
                // nothing: it waits for no CPU.
                if matches!(th.phase, Phase::Asleep) {
                    if let Some((since, state)) = th.slept.take() {
                        th.figures.blocked[sleep_state(state)]
                            .get_or_insert_with(|| LatencyHistogram::with_sigfig(sigfig))
                            .record(scale.to_ns(e.ts.saturating_sub(since)));
                    }
                    let target = usize::try_from(target_cpu).unwrap_or(cpu);
                    th.phase = Phase::Woken {
                        at: e.ts,
                        cpu: target,
                        prio: task.prio,
                    };
                }
            }
            // Another task woken for an idle CPU runs there next, switch recorded or not
            // (of two woken, the higher priority): a watched thread woken after it, at
            // no higher priority, waits for a switch, not for a guess.
            Kind::Wakeup {
                task, target_cpu, ..
            } => {
                let target = usize::try_from(target_cpu).unwrap_or(cpu);
                let c = self.cpus.entry(target).or_default();
                let first = match c.current {
                    None => true,
                    Some(t) => t.pid == 0 || (c.waiting && task.prio < t.prio),
                };
                if first {
                    c.current = Some(task);
                    c.waiting = true;
                }
            }
            Kind::Switch {
                prev,
                prev_state,
                next,
            } => self.switch(names, cpu, e.ts, prev, prev_state, next),
            // The interrupt that woke a thread ends before the thread runs: closed first,
            // it is not the thread's time.
            _ => {
                self.interrupts(cpu, e);
                self.guess_start(cpu, e.ts);
            }
        }
    }

    /// On an idle CPU, the first event after a watched thread's wake-up for it starts
    /// the thread (no switch out of idle is recorded on some kernels).
    fn guess_start(&mut self, cpu: usize, ts: u64) {
        let c = *self.cpus.entry(cpu).or_default();
        // Running, or woken to run before any watched thread of no higher priority.
        let ahead = |prio: i32| match c.current {
            Some(t) if t.pid != 0 => !c.waiting || t.prio <= prio,
            _ => false,
        };
        // Of the woken, the highest priority first, then the earliest: it would run first.
        let woken = (self.threads.iter())
            .filter_map(|(&tid, th)| match th.phase {
                Phase::Woken { at, cpu: w, prio } if w == cpu && at < ts => Some((prio, at, tid)),
                _ => None,
            })
            .min();
        let Some((prio, at, tid)) = woken else { return };
        if ahead(prio) {
            return;
        }
        let Some(th) = self.threads.get_mut(&tid) else {
            return;
        };
        Self::starts_on(th, cpu);
        th.phase = Phase::Running {
            cpu,
            guessed: Some((at, ts)),
        };
        let task = Task {
            pid: tid,
            comm: 0,
            prio,
        };
        let c = self.cpus.entry(cpu).or_default();
        c.current = Some(task);
        c.waiting = false;
    }

    /// Interrupt contexts on `cpu`: their time counts against a watched thread running
    /// there.
    fn interrupts(&mut self, cpu: usize, e: &Event) {
        let c = self.cpus.entry(cpu).or_default();
        let running = c.current.map(|t| t.pid);
        let mut took = None;
        match e.kind {
            Kind::IrqEntry { .. } | Kind::SoftirqEntry { .. } | Kind::VectorEntry { .. } => {
                if c.depth == 0 {
                    c.since = e.ts;
                }
                c.depth += 1;
            }
            // An exit whose entry came before the trace began closes nothing.
            Kind::IrqExit { .. } | Kind::SoftirqExit { .. } | Kind::VectorExit { .. }
                if c.depth > 0 =>
            {
                c.depth -= 1;
                if c.depth == 0 {
                    took = Some(self.scale.to_ns(e.ts.saturating_sub(c.since)));
                }
            }
            // Stamped at its end; inside another context it is part of that one.
            Kind::Nmi { delta_ns, .. } if c.depth == 0 => took = Some(delta_ns),
            _ => {}
        }
        let (Some(ns), Some(tid)) = (took, running) else {
            return;
        };
        let sigfig = self.sigfig;
        if let Some(th) = self.threads.get_mut(&tid)
            && matches!(th.phase, Phase::Running { cpu: r, .. } if r == cpu)
        {
            th.figures
                .irq
                .get_or_insert_with(|| LatencyHistogram::with_sigfig(sigfig))
                .record(ns);
        }
    }

    fn switch(
        &mut self,
        names: &Names,
        cpu: usize,
        ts: u64,
        prev: Task,
        prev_state: i64,
        next: Task,
    ) {
        // Interrupt contexts end before a switch: one still open lost its exit.
        let c = self.cpus.entry(cpu).or_default();
        c.depth = 0;
        c.current = Some(next);
        c.waiting = false;
        if self.watched.wants(&prev, names) {
            self.switched_out(names, cpu, ts, prev, prev_state);
        }
        if self.watched.wants(&next, names) {
            self.switched_in(names, cpu, ts, next);
        }
    }

    fn switched_out(&mut self, names: &Names, cpu: usize, ts: u64, prev: Task, prev_state: i64) {
        let th = self.thread(&prev, names);
        match th.phase {
            Phase::Running {
                guessed: Some((at, start)),
                ..
            } => {
                th.figures.starts_guessed += 1;
                self.record_delay(prev.pid, cpu, at, start);
            }
            // Woken, and now stopping: it ran with no event to date its start.
            Phase::Woken { .. } => th.figures.starts_unseen += 1,
            // Preempted, and now stopping where it was preempted: its run began with no
            // switch recorded (out of idle, which some kernels never record, as when
            // its throttled group is refilled on an idle CPU). Attributed up to this
            // switch, an upper bound of its end: the throttle's part ends at the refill
            // the trace shows; left out of the preempted histogram, counted.
            Phase::Preempted { at, cpu: out } if out == cpu => {
                th.figures.preempted_ends_unseen += 1;
                self.preempted_delay(prev.pid, cpu, at, ts);
            }
            _ => {}
        }
        let th = self.thread(&prev, names);
        if !matches!(th.phase, Phase::Running { .. }) {
            Self::starts_on(th, cpu);
        }
        th.figures.runs += 1;
        th.phase = match still_runnable(prev_state) {
            true => {
                th.figures.involuntary += 1;
                Phase::Preempted { at: ts, cpu }
            }
            false => {
                th.slept = Some((ts, prev_state));
                Phase::Asleep
            }
        };
    }

    fn switched_in(&mut self, names: &Names, cpu: usize, ts: u64, next: Task) {
        let (scale, sigfig) = (self.scale, self.sigfig);
        let th = self.thread(&next, names);
        match th.phase {
            Phase::Woken { at, .. } => {
                Self::starts_on(th, cpu);
                th.phase = Phase::Running { cpu, guessed: None };
                self.record_delay(next.pid, cpu, at, ts);
            }
            // The guess was wrong: it ran only now.
            Phase::Running {
                cpu: r,
                guessed: Some((at, _)),
            } if r == cpu => {
                th.phase = Phase::Running { cpu, guessed: None };
                self.record_delay(next.pid, cpu, at, ts);
            }
            Phase::Preempted { at, cpu: out } => {
                Self::starts_on(th, cpu);
                let ns = scale.to_ns(ts.saturating_sub(at));
                th.figures
                    .preempted
                    .get_or_insert_with(|| LatencyHistogram::with_sigfig(sigfig))
                    .record(ns);
                th.phase = Phase::Running { cpu, guessed: None };
                if out == cpu {
                    self.preempted_delay(next.pid, cpu, at, ts);
                }
            }
            // Its wake-up came before the trace began, or was lost.
            _ => {
                Self::starts_on(th, cpu);
                th.phase = Phase::Running { cpu, guessed: None };
            }
        }
    }

    /// A guessed start still open when the trace ends is recorded.
    fn finish(&mut self) {
        let open: Vec<(u32, usize, u64, u64)> = (self.threads.iter())
            .filter_map(|(&tid, th)| match th.phase {
                Phase::Running {
                    cpu,
                    guessed: Some((at, start)),
                } => Some((tid, cpu, at, start)),
                _ => None,
            })
            .collect();
        for (tid, cpu, at, start) in open {
            if let Some(th) = self.threads.get_mut(&tid) {
                th.figures.starts_guessed += 1;
            }
            self.record_delay(tid, cpu, at, start);
        }
    }
}

/// Events kept per CPU for the delays still open (48 bytes each, 6 MiB a CPU): past it
/// the oldest are dropped and counted as lost.
pub const TAIL_CAP: usize = 131_072;
/// Events walked between settlings within one batch.
const SETTLE_EVERY: usize = 8192;
/// A wake-up open longer than this keeps no events for itself: one whose switch-in was
/// lost would otherwise hold every CPU's events to the cap.
const HORIZON_NS: u64 = 2_000_000_000;

/// Follows a trace as it is read: events go in window by window, in time order, and
/// only open state stays: each CPU's task, each thread's phase and figures, a streaming
/// attribution per thread (bounded by its causes), and each CPU's tail of events back
/// to the last switch before the oldest open wake-up, which is what attributing that
/// delay needs. Memory is flat over the length of a run.
pub struct Watcher {
    walk: Walk,
    settings: Settings,
    /// Each CPU's events since the last switch before the oldest open delay.
    tails: BTreeMap<usize, VecDeque<Event>>,
    tallies: BTreeMap<u32, Tally>,
    /// Delays at or above the threshold whose CPU's events are not all fed yet.
    pending: Vec<Delay>,
    /// Events dropped from a full tail: delays then may be misread.
    pub evicted: u64,
    /// How causes are named: in full for one run, stably for counters (`streaming`).
    naming: Naming,
    /// The last `until` fed.
    until: u64,
}

impl Watcher {
    pub fn new(watched: Watched, settings: Settings) -> Watcher {
        Watcher {
            walk: Walk::new(watched, settings.scale, settings.threshold_ns),
            settings,
            tails: BTreeMap::new(),
            tallies: BTreeMap::new(),
            pending: Vec::new(),
            evicted: 0,
            naming: Naming::Full,
            until: 0,
        }
    }

    /// For a run without end read by `drain` (`monitor --watch-comm`): causes named
    /// without pids or policies (`Naming::Stable`, so that a counter keeps one series
    /// while kworkers come and go), no worst-delay timelines, and histograms of 2
    /// significant digits (37 KiB a thread rather than 260: they are only folded into
    /// 1-2-5 buckets). Only wake-up delays are split: its counters are of late wake-ups
    /// (preempted time has its own).
    pub fn streaming(mut self) -> Watcher {
        self.naming = Naming::Stable;
        self.settings.top = 0;
        self.walk.sigfig = 2;
        self.walk.split_preempted = false;
        self
    }

    /// Threads followed now (open state).
    pub fn threads(&self) -> usize {
        self.walk.threads.len()
    }

    /// Hands every thread's figures since the last drain to `visit`, its delays at or
    /// above the threshold attributed as `finish` gives them, then starts them afresh,
    /// keeping their histograms. Nothing is lost between two drains: a delay still
    /// open is counted by the drain after the one it ends before.
    ///
    /// A thread asleep with no event for `idle_ns` (of trace time) is then dropped from
    /// the open state, its last figures handed over: threads that end (or sleep long)
    /// hold no memory, so a process that starts threads without end keeps it flat. One
    /// that wakes again is followed afresh; only a migration across its sleep is missed.
    /// The number of threads dropped.
    pub fn drain(&mut self, idle_ns: u64, mut visit: impl FnMut(&ThreadFigures)) -> usize {
        let (scale, threshold_ns) = (self.settings.scale, self.settings.threshold_ns);
        let cutoff = self.until.saturating_sub(scale.to_ticks(idle_ns));
        let waiting: HashSet<u32> = self.pending.iter().map(|d| d.0).collect();
        let mut gone = Vec::new();
        for (&tid, th) in &mut self.walk.threads {
            let f = &mut th.figures;
            f.attribution = self.tallies.remove(&tid).map(|t| {
                let mut a = t.finish(scale);
                a.method = method(threshold_ns);
                a
            });
            visit(f);
            f.reset();
            if th.phase == Phase::Asleep && th.last_ts < cutoff && !waiting.contains(&tid) {
                gone.push(tid);
            }
        }
        for tid in &gone {
            self.walk.threads.remove(tid);
        }
        // A tally only for a thread not followed (none expected) is not kept either.
        self.tallies.clear();
        gone.len()
    }

    /// The threads to watch from now on, in place of those before: a process's threads
    /// as listed again, or a cgroup's, which a task that moves out leaves.
    pub fn watch_tids(&mut self, tids: impl IntoIterator<Item = u32>) {
        if let Watched::Tids(set) | Watched::Comms(_, set) = &mut self.walk.watched {
            set.clear();
            set.extend(tids);
        }
    }

    /// Names causes as `Naming::StableWithPids` does (after `streaming`).
    pub fn with_pids(mut self) -> Watcher {
        self.naming = Naming::StableWithPids;
        self
    }

    /// Drops every event held and each CPU's task (the reader started afresh with new
    /// names for them), counting the events as lost.
    pub fn forget_events(&mut self) {
        self.evicted += self.tails.values().map(|t| t.len() as u64).sum::<u64>();
        self.tails.clear();
        self.walk.cpus.clear();
    }

    /// Takes every CPU's events stamped before `until` (each CPU's in time order, later
    /// than any fed before, none at or after `until`): walks them merged in time order,
    /// attributes the delays that ended before `until`, and forgets the events no open
    /// delay needs.
    pub fn feed(
        &mut self,
        per_cpu: &BTreeMap<usize, Vec<Event>>,
        until: u64,
        names: &Names,
        symbols: &HashMap<u64, String>,
    ) {
        let mut merged: Vec<(u64, usize, &Event)> = (per_cpu.iter())
            .flat_map(|(&cpu, evs)| evs.iter().map(move |e| (e.ts, cpu, e)))
            .collect();
        // Stable: events of one CPU at one stamp keep their order.
        merged.sort_by_key(|&(ts, cpu, _)| (ts, cpu));
        for (i, &(ts, cpu, e)) in merged.iter().enumerate() {
            // A reader that fell behind brings a large batch: settling on the way keeps
            // the tails to what open delays need rather than to the batch. Every event
            // before this one is in, so the delays that ended before it can be settled.
            if i > 0 && i % SETTLE_EVERY == 0 {
                self.settle(ts, names, symbols);
            }
            self.walk.step(names, cpu, e);
            let tail = self.tails.entry(cpu).or_default();
            if tail.len() >= TAIL_CAP {
                tail.pop_front();
                self.evicted += 1;
            }
            tail.push_back(*e);
        }
        self.settle(until, names, symbols);
        self.until = self.until.max(until);
    }

    /// Attributes the delays whose events are all in (those that ended before
    /// `until`), then trims the tails to what the open ones need.
    fn settle(&mut self, until: u64, names: &Names, symbols: &HashMap<u64, String>) {
        self.pending.append(&mut self.walk.ended);
        let (ready, wait): (Vec<Delay>, Vec<Delay>) =
            self.pending.drain(..).partition(|d| d.2.end < until);
        self.pending = wait;
        for (tid, cpu, gap, ns) in ready {
            self.attribute(tid, cpu, gap, ns, names, symbols);
        }
        let horizon = until.saturating_sub(self.settings.scale.to_ticks(HORIZON_NS));
        let need = self.oldest_open().unwrap_or(until).min(until).max(horizon);
        for tail in self.tails.values_mut() {
            let at = tail.partition_point(|e| e.ts < need);
            let from = (tail.range(..at))
                .rposition(|e| matches!(e.kind, Kind::Switch { .. }))
                .unwrap_or(at);
            tail.drain(..from);
        }
    }

    /// The earliest wake-up of a delay not yet attributed.
    fn oldest_open(&self) -> Option<u64> {
        let phases = self.walk.threads.values().filter_map(|th| match th.phase {
            Phase::Woken { at, .. } => Some(at),
            Phase::Running {
                guessed: Some((at, _)),
                ..
            } => Some(at),
            // Its stretch is attributed when it runs again: its switch out is needed.
            Phase::Preempted { at, .. } if self.walk.split_preempted => Some(at),
            _ => None,
        });
        phases.chain(self.pending.iter().map(|d| d.2.start)).min()
    }

    /// One delay split by what ran on its CPU instead: that CPU's events from the last
    /// switch before it (which says who held the CPU) to its end.
    fn attribute(
        &mut self,
        tid: u32,
        cpu: usize,
        gap: Gap,
        ns: u64,
        names: &Names,
        symbols: &HashMap<u64, String>,
    ) {
        let s = &self.settings;
        let cx = Context {
            names,
            symbols,
            scale: s.scale,
            run_start: s.run_start,
            // Its own time is no cause.
            measurer: tid,
            top: s.top,
            // Nothing is known to run at a wake-up: whatever ran then is the delay's.
            measurer_kind: MeasurerKind::Sleeps,
            naming: self.naming,
            throttle: &s.throttle,
        };
        let evs: &[Event] = match self.tails.get_mut(&cpu) {
            Some(t) => t.make_contiguous(),
            None => &[],
        };
        let at = evs.partition_point(|e| e.ts < gap.start);
        let from = (evs[..at].iter())
            .rposition(|e| matches!(e.kind, Kind::Switch { .. }))
            .unwrap_or(0);
        let to = evs.partition_point(|e| e.ts <= gap.end).max(from);
        let tally = self.tallies.entry(tid).or_insert_with(|| Tally::new(s.top));
        tally.add(&[(gap, ns)], &evs[from..to], &cx);
    }

    /// The figures of every thread seen, by thread id, once the trace has ended: a
    /// guessed start still open is recorded, and every delay left is attributed.
    pub fn finish(mut self, names: &Names, symbols: &HashMap<u64, String>) -> Vec<ThreadFigures> {
        self.walk.finish();
        self.settle(u64::MAX, names, symbols);
        let s = self.settings;
        let mut tallies = self.tallies;
        (self.walk.threads.into_iter())
            .map(|(tid, th)| {
                let mut f = th.figures;
                for (at, _) in &mut f.prio_changes {
                    *at = s.scale.to_ns(at.saturating_sub(s.run_start));
                }
                f.attribution = tallies.remove(&tid).map(|t| {
                    let mut a = t.finish(s.scale);
                    a.method = method(s.threshold_ns);
                    a
                });
                f
            })
            .collect()
    }
}

fn method(threshold_ns: u64) -> String {
    format!(
        "kernel trace events on the TSC (x86-tsc): each wake-up delay at or above {} µs, \
         from the thread's wake-up to the switch that ran it, and each stretch preempted \
         while runnable as long, from its switch out to its switch in on the same CPU, \
         split by what ran on that CPU instead; a CFS quota or RT throttling is named where \
         the trace shows it held the thread off (switched out runnable, until the refill \
         or while idle or lower priorities ran)",
        threshold_ns as f64 / 1e3
    )
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
mod tests {
    use super::*;
    use crate::stats::causes::CauseKind;
    use crate::trace::attribute::CfsQuota;

    /// 1 tick = 1 ns.
    fn scale() -> Scale {
        Scale::from_hz(1e9)
    }

    struct Trace {
        names: Names,
        per_cpu: BTreeMap<usize, Vec<Event>>,
    }

    impl Trace {
        fn new() -> Trace {
            Trace {
                names: Names::default(),
                per_cpu: BTreeMap::new(),
            }
        }

        fn task(&mut self, comm: &str, pid: u32, prio: i32) -> Task {
            Task {
                pid,
                comm: self.names.intern(comm),
                prio,
            }
        }

        fn at(&mut self, cpu: usize, ts: u64, kind: Kind) {
            self.per_cpu
                .entry(cpu)
                .or_default()
                .push(Event { ts, kind });
        }

        fn wake(&mut self, cpu: usize, ts: u64, task: Task, target: usize) {
            let kind = Kind::Wakeup {
                task,
                target_cpu: target as i32,
                waker_pid: 0,
            };
            self.at(cpu, ts, kind);
        }

        fn switch(&mut self, cpu: usize, ts: u64, prev: Task, state: i64, next: Task) {
            let kind = Kind::Switch {
                prev,
                prev_state: state,
                next,
            };
            self.at(cpu, ts, kind);
        }

        fn run(&self, watched: &Watched, threshold_ns: u64) -> Vec<ThreadFigures> {
            let symbols = HashMap::new();
            let s = Settings {
                scale: scale(),
                threshold_ns,
                top: 5,
                throttle: Throttle::default(),
                run_start: 0,
            };
            watch(&self.per_cpu, &self.names, watched, &s, &symbols)
        }
    }

    fn tids(t: &[u32]) -> Watched {
        Watched::Tids(t.iter().copied().collect())
    }

    /// The app woken while a real-time hog holds the CPU waits for it; the delay is the
    /// hog's, with an IRQ inside it that is its own cause.
    #[test]
    fn a_delay_is_split_into_what_ran_instead() {
        let mut t = Trace::new();
        let app = t.task("app", 10, 120);
        let hog = t.task("hog", 20, 49);
        let idle = t.task("swapper/1", 0, 120);
        t.switch(1, 1_000, idle, 0, hog);
        t.wake(1, 2_000, app, 1);
        let name = t.names.intern("eth0");
        t.at(1, 50_000, Kind::IrqEntry { irq: 30, name });
        t.at(1, 60_000, Kind::IrqExit { irq: 30 });
        t.switch(1, 302_000, hog, 1, app);
        t.switch(1, 305_000, app, 1, idle);
        let f = t.run(&tids(&[10]), 10_000);
        assert_eq!(f.len(), 1);
        let a = &f[0];
        assert_eq!(a.wakeup.count(), 1);
        assert_eq!(a.wakeup.max_ns(), Some(300_000), "wake-up to switch-in");
        assert_eq!((a.runs, a.involuntary, a.migrations), (1, 0, 0));
        let attr = a.attribution.as_ref().expect("one delay over 10 µs");
        assert_eq!(attr.gaps, 1);
        let row = |k| attr.causes.iter().find(|r| r.kind == k).unwrap();
        assert!(row(CauseKind::Task).cause.starts_with("task hog:20"));
        assert_eq!(row(CauseKind::Task).total_ns, 290_000);
        assert_eq!(row(CauseKind::Task).largest_in, 1);
        assert_eq!(row(CauseKind::Irq).total_ns, 10_000);
        assert_eq!(row(CauseKind::Irq).largest_in, 0);
        assert_eq!(attr.top.len(), 1);
    }

    /// Issue 36: the hog's switch in was not recorded (a loaded guest's kernel drops a
    /// few): the thread slept, a kworker ran, the hog woke, then the thread, and 164 µs
    /// later the hog was switched out for it. The delay is the hog's, named from its
    /// switch out, not left unaccounted as the kworker's unknown time.
    #[test]
    fn issue36_a_hog_whose_switch_in_was_lost_is_named_from_its_switch_out() {
        let mut t = Trace::new();
        let app = t.task("app", 10, 94);
        let hog = t.task("hog", 20, 89);
        let kworker = t.task("kworker/1:1", 30, 120);
        let name = t.names.intern("local_timer");
        t.switch(1, 1_000, app, 1, kworker);
        t.at(1, 2_000, Kind::VectorEntry { name });
        t.wake(1, 2_010, hog, 1);
        t.at(1, 2_030, Kind::VectorExit { name });
        t.at(1, 9_000, Kind::VectorEntry { name });
        t.wake(1, 9_010, app, 1);
        t.at(1, 9_020, Kind::VectorExit { name });
        t.switch(1, 173_010, hog, 1, app);
        let f = t.run(&tids(&[10]), 10_000);
        let a = &f[0];
        assert_eq!(a.wakeup.max_ns(), Some(164_000), "wake-up to switch-in");
        let attr = a.attribution.as_ref().expect("one delay over 10 µs");
        let main = (attr.causes.iter()).find(|r| r.largest_in == 1).unwrap();
        assert_eq!(main.cause, "task hog:20 (real-time 10)");
        assert_eq!(main.total_ns, 164_000 - 10);
    }

    /// Preempted (switched out runnable) and back: preempted time, an involuntary
    /// switch, a migration when it comes back elsewhere, and IRQ time while it ran.
    #[test]
    fn preemption_migration_and_irq_time_are_counted() {
        let mut t = Trace::new();
        let app = t.task("app", 10, 120);
        let other = t.task("other", 30, 120);
        let idle0 = t.task("swapper/0", 0, 120);
        t.switch(0, 100, idle0, 0, other);
        t.wake(0, 1_000, app, 1);
        t.switch(1, 1_500, idle0, 0, app);
        t.at(1, 2_000, Kind::VectorEntry { name: 0 });
        t.at(1, 2_700, Kind::VectorExit { name: 0 });
        // Preempted ("R+": TASK_REPORT_MAX), then back on CPU 0.
        t.switch(1, 5_000, app, 0x100, other);
        t.switch(0, 9_000, other, 1, app);
        t.switch(0, 10_000, app, 1, idle0);
        let f = t.run(&tids(&[10]), 10_000);
        let a = &f[0];
        assert_eq!(a.wakeup.max_ns(), Some(500));
        assert!(a.attribution.is_none(), "no delay over 10 µs");
        assert_eq!(a.preempted.as_ref().unwrap().max_ns(), Some(4_000));
        assert_eq!((a.runs, a.involuntary, a.migrations), (2, 1, 1));
        assert_eq!(a.irq.as_ref().unwrap().sum_ns(), 700);
    }

    /// No switch out of idle recorded: the exit of the interrupt that woke the thread
    /// starts it (guessed); a later switch to it corrects the guess.
    #[test]
    fn a_start_from_idle_is_guessed_and_corrected() {
        let mut t = Trace::new();
        let app = t.task("app", 10, 120);
        let idle = t.task("swapper/1", 0, 120);
        let name = t.names.intern("local_timer");
        t.switch(1, 100, app, 1, idle);
        t.at(1, 1_000, Kind::VectorEntry { name });
        t.wake(1, 1_200, app, 1);
        t.at(1, 1_500, Kind::VectorExit { name });
        t.switch(1, 4_000, app, 1, idle);
        // Woken again, but another task got there first (its switch-in unrecorded).
        t.at(1, 10_000, Kind::VectorEntry { name });
        t.wake(1, 10_200, app, 1);
        t.at(1, 10_500, Kind::VectorExit { name });
        let hog = t.task("hog", 20, 120);
        t.switch(1, 30_200, hog, 1, app);
        t.switch(1, 31_000, app, 1, idle);
        let f = t.run(&tids(&[10]), 1_000_000);
        let a = &f[0];
        assert_eq!(a.wakeup.count(), 2);
        assert_eq!(a.wakeup.min_ns(), Some(300), "woken at 1200, ran at 1500");
        assert_eq!(a.wakeup.max_ns(), Some(20_000), "corrected by the switch");
        assert_eq!(a.starts_guessed, 1);
        assert_eq!(a.runs, 3, "the first switch out was a run too");
        assert!(
            a.irq.is_none(),
            "the interrupts that woke it are not its time"
        );
    }

    /// A task woken for an idle CPU before the app runs there first (no switch out of
    /// idle recorded): the app waits for the switch, and the interrupts meanwhile are
    /// not its time.
    #[test]
    fn a_task_woken_first_on_an_idle_cpu_runs_first() {
        let mut t = Trace::new();
        let app = t.task("app", 10, 120);
        let hog = t.task("hog", 20, 49);
        let idle = t.task("swapper/1", 0, 120);
        let name = t.names.intern("local_timer");
        t.switch(1, 100, app, 1, idle);
        t.wake(1, 1_000, hog, 1);
        t.wake(1, 50_000, app, 1);
        t.at(1, 50_100, Kind::VectorEntry { name });
        t.at(1, 50_300, Kind::VectorExit { name });
        t.switch(1, 301_000, hog, 1, app);
        t.switch(1, 302_000, app, 1, idle);
        let f = t.run(&tids(&[10]), 10_000);
        let a = &f[0];
        assert_eq!(a.wakeup.max_ns(), Some(251_000));
        assert_eq!(a.starts_guessed, 0);
        assert!(a.irq.is_none(), "the hog's interrupts are not the app's");
        let attr = a.attribution.as_ref().unwrap();
        assert!(
            attr.causes[0].cause.starts_with("task hog:20"),
            "{:?}",
            attr.causes
        );
        assert_eq!(attr.causes[0].largest_in, 1);
    }

    /// The other way round (issue 25's bench: a real-time sleeper beside `stress-ng
    /// --switch`): a normal task woken for an idle CPU, then the real-time app woken for
    /// it. The app runs first; the exit of the interrupt that woke it dates its start.
    #[test]
    fn a_higher_priority_thread_woken_later_runs_first() {
        let mut t = Trace::new();
        let app = t.task("app", 10, 98);
        let other = t.task("switcher", 20, 120);
        let idle = t.task("swapper/1", 0, 120);
        let name = t.names.intern("local_timer");
        t.switch(1, 100, app, 1, idle);
        t.wake(1, 1_000, other, 1);
        t.at(1, 19_000, Kind::VectorEntry { name });
        t.wake(1, 20_000, app, 1);
        t.at(1, 34_000, Kind::VectorExit { name });
        t.switch(1, 48_000, app, 1, other);
        let f = t.run(&tids(&[10]), 10_000);
        let a = &f[0];
        assert_eq!((a.starts_guessed, a.starts_unseen), (1, 0));
        assert_eq!(
            a.wakeup.max_ns(),
            Some(14_000),
            "wake-up to the interrupt's exit"
        );
        // Not when the app is of no higher priority: then the other runs first.
        let mut t = Trace::new();
        let app = t.task("app", 10, 120);
        let other = t.task("switcher", 20, 100);
        let idle = t.task("swapper/1", 0, 120);
        let name = t.names.intern("local_timer");
        t.switch(1, 100, app, 1, idle);
        t.wake(1, 1_000, other, 1);
        t.wake(1, 20_000, app, 1);
        t.at(1, 34_000, Kind::VectorExit { name });
        t.switch(1, 48_000, other, 1, app);
        t.switch(1, 50_000, app, 1, idle);
        let a = &t.run(&tids(&[10]), 10_000)[0];
        assert_eq!(a.starts_guessed, 0);
        assert_eq!(a.wakeup.max_ns(), Some(28_000), "waited for the switch");
    }

    /// Off-CPU time, from the switch out asleep to the wake-up, by the state it slept in.
    #[test]
    fn blocked_time_is_split_by_the_state_it_slept_in() {
        let mut t = Trace::new();
        let app = t.task("app", 10, 120);
        let idle = t.task("swapper/1", 0, 120);
        t.switch(1, 1_000, idle, 0, app);
        t.switch(1, 2_000, app, 1, idle); // S
        t.wake(1, 1_002_000, app, 1);
        t.switch(1, 1_003_000, idle, 0, app);
        t.switch(1, 1_004_000, app, 2, idle); // D
        t.wake(1, 1_054_000, app, 1);
        t.switch(1, 1_055_000, idle, 0, app);
        t.switch(1, 1_056_000, app, 0x100, idle); // preempted: not blocked
        t.switch(1, 1_058_000, idle, 0, app);
        let a = &t.run(&tids(&[10]), 10_000)[0];
        let [s, d, other] = &a.blocked;
        assert_eq!(
            s.as_ref().map(|h| (h.count(), h.max_ns())),
            Some((1, Some(1_000_000)))
        );
        assert_eq!(
            d.as_ref().map(|h| (h.count(), h.max_ns())),
            Some((1, Some(50_000)))
        );
        assert!(other.is_none());
    }

    /// The priority first seen, and a change (a boost, a chrt) when an event shows it.
    #[test]
    fn a_priority_change_is_noted_when_seen() {
        let mut t = Trace::new();
        let app = t.task("app", 10, 120);
        let boosted = t.task("app", 10, 89);
        let idle = t.task("swapper/1", 0, 120);
        t.switch(1, 1_000, idle, 0, app);
        t.switch(1, 2_000, app, 1, idle);
        t.wake(1, 3_000_000, boosted, 1);
        t.switch(1, 3_001_000, idle, 0, boosted);
        t.switch(1, 3_002_000, boosted, 1, idle);
        let a = &t.run(&tids(&[10]), 10_000)[0];
        assert_eq!(a.prio, Some(120));
        assert_eq!(a.prio_changes_total, 1);
        // Ticks are ns in these traces, and the run began at 0.
        assert_eq!(a.prio_changes, vec![(3_000_000, 89)]);
    }

    /// A woken thread that switches out with no event before: its start is unseen.
    #[test]
    fn a_start_with_no_event_is_counted_not_guessed() {
        let mut t = Trace::new();
        let app = t.task("app", 10, 120);
        let idle = t.task("swapper/1", 0, 120);
        t.switch(1, 100, app, 1, idle);
        t.wake(0, 1_000, app, 1);
        t.switch(1, 4_000, app, 1, idle);
        let f = t.run(&tids(&[10]), 10_000);
        assert_eq!(f[0].wakeup.count(), 0);
        assert_eq!(f[0].starts_unseen, 1);
    }

    /// `--comm` follows every task of that name, and only those.
    #[test]
    fn comm_matches_every_task_of_the_name() {
        let mut t = Trace::new();
        let a = t.task("worker", 10, 120);
        let b = t.task("worker", 11, 120);
        let c = t.task("other", 12, 120);
        let busy = t.task("busy", 20, 120);
        t.switch(1, 0, c, 1, busy);
        for (i, task) in [a, b, c].into_iter().enumerate() {
            let ts = 1_000 + i as u64 * 100_000;
            t.wake(1, ts, task, 1);
            t.switch(1, ts + 50_000, busy, 0x100, task);
            t.switch(1, ts + 60_000, task, 1, busy);
        }
        let f = t.run(&Watched::Comm("worker".into()), 10_000);
        let seen: Vec<u32> = f.iter().map(|x| x.tid).collect();
        assert_eq!(seen, vec![10, 11]);
        for x in &f {
            assert_eq!(x.wakeup.max_ns(), Some(50_000));
            let attr = x.attribution.as_ref().unwrap();
            assert!(attr.causes[0].cause.starts_with("task busy:20"));
        }
    }

    /// A busy made-up trace on two CPUs: delays behind a hog with IRQs inside, starts
    /// from idle guessed, preemptions and migrations, 200 times over.
    fn busy_trace() -> Trace {
        let mut t = Trace::new();
        let app = t.task("app", 10, 120);
        let app2 = t.task("app", 11, 120);
        let hog = t.task("hog", 20, 49);
        let other = t.task("other", 30, 120);
        let idle0 = t.task("swapper/0", 0, 120);
        let idle1 = t.task("swapper/1", 0, 120);
        let eth = t.names.intern("eth0");
        let timer = t.names.intern("local_timer");
        for i in 0..200u64 {
            let b = i * 1_000_000;
            let late = 5_000 + (i * 7_919) % 300_000;
            t.switch(1, b + 100, idle1, 0, hog);
            t.wake(1, b + 2_000, app, 1);
            t.at(1, b + 3_000, Kind::IrqEntry { irq: 30, name: eth });
            t.at(1, b + 3_000 + late / 10, Kind::IrqExit { irq: 30 });
            t.switch(1, b + 2_000 + late, hog, 1, app);
            t.switch(1, b + 10_000 + late, app, 1, idle1);
            // On CPU 0: a start from idle, guessed; every third run preempted and
            // finished on CPU 1.
            t.at(0, b + 500_000, Kind::VectorEntry { name: timer });
            t.wake(0, b + 500_200, app2, 0);
            t.at(
                0,
                b + 500_900 + (i % 4) * 5_000,
                Kind::VectorExit { name: timer },
            );
            if i % 3 == 0 {
                t.switch(0, b + 520_000, app2, 0, other);
                t.switch(1, b + 560_000, idle1, 0, app2);
                t.switch(1, b + 570_000, app2, 1, idle1);
                t.switch(0, b + 580_000, other, 1, idle0);
            } else {
                t.switch(0, b + 530_000, app2, 1, idle0);
            }
        }
        t
    }

    fn settings() -> Settings {
        Settings {
            scale: scale(),
            threshold_ns: 10_000,
            top: 5,
            throttle: Throttle::default(),
            run_start: 0,
        }
    }

    /// What a thread's figures say, for comparing two runs.
    fn seen(f: &ThreadFigures) -> String {
        let sum = |h: &Option<LatencyHistogram>| h.as_ref().map(|h| h.summary());
        format!(
            "{} {} {:?} {:?} {:?} {} {} {} {} {} {:?}",
            f.tid,
            f.comm,
            f.wakeup.summary(),
            sum(&f.preempted),
            sum(&f.irq),
            f.runs,
            f.migrations,
            f.involuntary,
            f.starts_guessed,
            f.starts_unseen,
            f.attribution
        )
    }

    /// Fed window by window (cut inside delays, inside interrupts and between a guess
    /// and its switch), the watcher gives what it gives fed all at once, and keeps only
    /// the events the open delays need.
    #[test]
    fn windows_give_the_figures_the_whole_trace_gives() {
        let t = busy_trace();
        let symbols = HashMap::new();
        let watched = Watched::Comm("app".into());
        let whole = watch(&t.per_cpu, &t.names, &watched, &settings(), &symbols);
        assert_eq!(whole.len(), 2);
        assert!(whole.iter().all(|f| f.attribution.is_some()));
        for step in [333_333u64, 1_000_000, 7_777_777] {
            let mut w = Watcher::new(watched.clone(), settings());
            let mut most = 0;
            for from in (0..200_000_000u64).step_by(step as usize) {
                let until = from + step;
                let window: BTreeMap<usize, Vec<Event>> = (t.per_cpu.iter())
                    .map(|(&c, evs)| {
                        let part = evs.iter().filter(|e| from <= e.ts && e.ts < until);
                        (c, part.copied().collect())
                    })
                    .collect();
                w.feed(&window, until, &t.names, &symbols);
                most = most.max(w.tails.values().map(VecDeque::len).max().unwrap_or(0));
            }
            let got = w.finish(&t.names, &symbols);
            assert_eq!(got.len(), whole.len());
            for (a, b) in got.iter().zip(&whole) {
                assert_eq!(seen(a), seen(b), "windows of {step} ticks");
            }
            // A CPU's events of about one period (6 a period), not of the run (1 800).
            assert!(most <= 40, "{most} events held with windows of {step}");
        }
    }

    /// A reader that fell behind feeds one batch of more events than a tail holds
    /// (issue 25: 540 000 events a second on a CPU under `stress-ng --switch`): the
    /// batch is settled on the way, so nothing is dropped and the delay inside it is
    /// still split.
    #[test]
    fn a_batch_larger_than_a_tail_loses_nothing() {
        let mut t = Trace::new();
        let (a, b) = (t.task("ping", 30, 120), t.task("pong", 31, 120));
        let app = t.task("app", 10, 98);
        let n = TAIL_CAP as u64 * 2;
        for i in 0..n {
            let (prev, next) = if i % 2 == 0 { (a, b) } else { (b, a) };
            t.switch(0, 1_000 + i * 1_000, prev, 1, next);
        }
        // Late in the batch, the app waits 50 µs behind ping on CPU 1.
        let late = 1_000 + (n - 100) * 1_000;
        t.switch(1, late - 1_000, app, 1, a);
        t.switch(1, late - 500, app, 1, a);
        t.wake(1, late, app, 1);
        t.switch(1, late + 50_000, a, 1, app);
        let symbols = HashMap::new();
        let mut w = Watcher::new(Watched::Comm("app".into()), settings());
        w.feed(&t.per_cpu, u64::MAX, &t.names, &symbols);
        assert_eq!(w.evicted, 0, "nothing dropped");
        assert!(w.tails.values().all(|t| t.len() < SETTLE_EVERY * 2));
        let f = w.finish(&t.names, &symbols);
        let attr = f[0].attribution.as_ref().expect("the 50 µs delay");
        assert_eq!(attr.gaps, 1);
        assert!(attr.causes[0].cause.starts_with("task ping:30"), "{attr:?}");
    }

    /// Drained after every window (issue 25, `monitor --watch-comm`), the figures added
    /// up over the drains are those of one run to the end: every wake-up, preemption,
    /// run, migration and involuntary switch counted once, and each cause's time and
    /// main-cause count too.
    #[test]
    fn drains_add_up_to_the_whole_run() {
        let t = busy_trace();
        let symbols = HashMap::new();
        let watched = Watched::Comm("app".into());
        let whole = watch(&t.per_cpu, &t.names, &watched, &settings(), &symbols);
        let mut w = Watcher::new(watched, settings());
        #[derive(Default, Debug, PartialEq)]
        struct Sums {
            wakeups: u64,
            wakeup_ns: u64,
            preempted_ns: u64,
            irq_ns: u64,
            counts: (u64, u64, u64),
            gaps: u64,
            causes: BTreeMap<(CauseKind, String), (u64, u64, u64)>,
        }
        let mut sums: BTreeMap<u32, Sums> = BTreeMap::new();
        let mut add = |f: &ThreadFigures| {
            let s = sums.entry(f.tid).or_default();
            s.wakeups += f.wakeup.count();
            s.wakeup_ns += f.wakeup.sum_ns();
            s.preempted_ns += f.preempted.as_ref().map_or(0, |h| h.sum_ns());
            s.irq_ns += f.irq.as_ref().map_or(0, |h| h.sum_ns());
            s.counts.0 += f.runs;
            s.counts.1 += f.migrations;
            s.counts.2 += f.involuntary;
            if let Some(a) = &f.attribution {
                s.gaps += a.gaps;
                for r in &a.causes {
                    let c = s.causes.entry((r.kind, r.cause.clone())).or_default();
                    (c.0, c.1, c.2) = (c.0 + r.gaps, c.1 + r.largest_in, c.2 + r.total_ns);
                }
            }
        };
        let step = 2_500_000u64;
        for from in (0..200_000_000u64).step_by(step as usize) {
            let until = from + step;
            let window: BTreeMap<usize, Vec<Event>> = (t.per_cpu.iter())
                .map(|(&c, evs)| {
                    let part = evs.iter().filter(|e| from <= e.ts && e.ts < until);
                    (c, part.copied().collect())
                })
                .collect();
            w.feed(&window, until, &t.names, &symbols);
            // A long idle time: no thread is dropped, so the migrations stay counted.
            w.drain(u64::MAX, &mut add);
        }
        // What the last window left open.
        w.feed(&BTreeMap::new(), u64::MAX, &t.names, &symbols);
        w.drain(u64::MAX, &mut add);
        let mut want: BTreeMap<u32, Sums> = BTreeMap::new();
        for f in &whole {
            add_whole(&mut want, f);
        }
        fn add_whole(m: &mut BTreeMap<u32, Sums>, f: &ThreadFigures) {
            let s = m.entry(f.tid).or_default();
            s.wakeups = f.wakeup.count();
            s.wakeup_ns = f.wakeup.sum_ns();
            s.preempted_ns = f.preempted.as_ref().map_or(0, |h| h.sum_ns());
            s.irq_ns = f.irq.as_ref().map_or(0, |h| h.sum_ns());
            s.counts = (f.runs, f.migrations, f.involuntary);
            if let Some(a) = &f.attribution {
                s.gaps = a.gaps;
                for r in &a.causes {
                    s.causes.insert(
                        (r.kind, r.cause.clone()),
                        (r.gaps, r.largest_in, r.total_ns),
                    );
                }
            }
        }
        assert_eq!(sums, want);
        assert!(want.values().all(|s| s.gaps > 0 && s.wakeups >= 200));
    }

    /// A process that starts a thread for every request (a new tid each time, one name):
    /// drained with an idle time, the threads that ended are dropped from the open
    /// state, so it stays at the threads alive in a window however many come and go;
    /// every thread's wake-up is still handed over once.
    #[test]
    fn threads_that_end_are_dropped_after_their_last_drain() {
        let mut t = Trace::new();
        let busy = t.task("busy", 20, 120);
        let idle = t.task("swapper/1", 0, 120);
        t.switch(1, 0, idle, 0, busy);
        let n = 2_000u64;
        for i in 0..n {
            let w = t.task("worker", 1_000 + i as u32, 120);
            let ts = 1_000 + i * 100_000;
            t.wake(1, ts, w, 1);
            t.switch(1, ts + 20_000, busy, 0x100, w);
            // Exits: switched out dead (TASK_DEAD, 0x80), never seen again.
            t.switch(1, ts + 30_000, w, 0x80, busy);
        }
        let symbols = HashMap::new();
        let mut w = Watcher::new(Watched::Comm("worker".into()), settings()).streaming();
        let (mut handed, mut most, mut delays) = (0u64, 0usize, 0u64);
        let step = 1_000_000u64;
        for from in (0..n * 100_000 + step).step_by(step as usize) {
            let until = from + step;
            let window: BTreeMap<usize, Vec<Event>> = (t.per_cpu.iter())
                .map(|(&c, evs)| {
                    let part = evs.iter().filter(|e| from <= e.ts && e.ts < until);
                    (c, part.copied().collect())
                })
                .collect();
            w.feed(&window, until, &t.names, &symbols);
            most = most.max(w.threads());
            w.drain(2_000_000, |f| {
                handed += f.wakeup.count();
                delays += f.attribution.as_ref().map_or(0, |a| a.gaps);
                if let Some(a) = &f.attribution {
                    // Named for a fleet: no pid.
                    assert_eq!(a.causes[0].cause, "task busy", "{:?}", a.causes);
                }
            });
        }
        assert_eq!(handed, n, "every wake-up handed over once");
        assert_eq!(delays, n, "every 20 µs delay attributed once");
        // 10 threads a window, kept for 2 ms of idle time: about 30 at most.
        assert!(most <= 40, "{most} threads held at once");
        assert!(w.threads() <= 40, "{} threads held at the end", w.threads());
    }

    /// Issue 34: a watched thread in a group with a CFS quota, preempted at 10 µs
    /// ("R+", `preempted` in the kernel, as 6.18's throttle switches it out) and run
    /// again at 80 µs on the same CPU, while `other` ran there; the refill's timer fires
    /// there at 60 µs when `refill`, in the timer's vector (59.9–60.5 µs). What `other`
    /// ran until the refill is the quota's (49.9 µs), the vector its own, the rest
    /// `other`'s. `end_seen` false: no switch in is recorded (out of idle),
    /// and the thread is next seen going to sleep at 90 µs.
    fn quota_trace(state: i64, refill: bool, end_seen: bool) -> ThreadFigures {
        let mut t = Trace::new();
        let app = t.task("app", 10, 120);
        let other = t.task("other", 30, 120);
        t.switch(1, 1_000, other, 1, app);
        t.switch(1, 10_000, app, state, other);
        if refill {
            // As the kernel runs it: inside the local timer's vector.
            let name = t.names.intern("local_timer");
            t.at(1, 59_900, Kind::VectorEntry { name });
            t.at(1, 60_000, Kind::HrtimerEntry { function: 0xcf5 });
            t.at(1, 60_400, Kind::HrtimerExit);
            t.at(1, 60_500, Kind::VectorExit { name });
        }
        if end_seen {
            t.switch(1, 80_000, other, 0, app);
        }
        t.switch(1, 90_000, app, 1, other);
        let symbols = HashMap::from([(0xcf5, "sched_cfs_period_timer".to_string())]);
        let mut s = settings();
        s.throttle.cfs_quota = Some(CfsQuota {
            setting: "cpu.max 30000 100000".into(),
            group: "/pod/ctr".into(),
        });
        watch(&t.per_cpu, &t.names, &tids(&[10]), &s, &symbols).remove(0)
    }

    fn quota_ns(f: &ThreadFigures) -> u64 {
        let label = crate::stats::causes::quota_label("cpu.max 30000 100000", "/pod/ctr");
        let rows = f.attribution.iter().flat_map(|a| &a.causes);
        let quota = rows.filter(|r| r.kind == CauseKind::Throttling);
        quota
            .inspect(|r| assert_eq!(r.cause, label))
            .map(|r| r.total_ns)
            .sum()
    }

    #[test]
    fn issue34_a_throttled_preemption_is_named_the_quota_until_the_refill() {
        let f = quota_trace(0x100, true, true);
        assert_eq!(f.preempted.as_ref().unwrap().max_ns(), Some(70_000));
        let a = f
            .attribution
            .as_ref()
            .expect("the 70 µs stretch attributed");
        assert_eq!(a.gaps, 1);
        assert_eq!(quota_ns(&f), 49_900);
        let other = (a.causes.iter()).find(|r| r.cause.starts_with("task other:30"));
        assert_eq!(other.map(|r| r.total_ns), Some(19_500));
    }

    /// No refill on the CPU, or a preemption at a return to user ("R"): time-sharing,
    /// not the quota.
    #[test]
    fn issue34_a_preemption_without_the_refill_is_not_the_quota() {
        for (state, refill) in [(0x100, false), (0, true)] {
            let f = quota_trace(state, refill, true);
            assert!(f.attribution.is_some(), "the 70 µs stretch attributed");
            assert_eq!(quota_ns(&f), 0, "state {state:#x}, refill {refill}");
        }
    }

    /// Run again with no switch recorded: the stretch is attributed up to the thread's
    /// next switch out (the quota's part still ends at the refill), counted, and kept
    /// out of the preempted histogram.
    #[test]
    fn issue34_a_throttled_stretch_whose_end_is_unseen_is_still_named() {
        let f = quota_trace(0x100, true, false);
        assert_eq!(f.preempted_ends_unseen, 1);
        assert!(f.preempted.is_none());
        assert_eq!(quota_ns(&f), 49_900);
    }

    /// Issue 34: a real-time watched thread preempted while runnable, and a SCHED_OTHER
    /// task run in its place on its CPU: RT throttling, named with its group's
    /// bandwidth beside the kernel's.
    #[test]
    fn issue34_a_real_time_thread_held_off_is_named_its_groups_rt_throttling() {
        let mut t = Trace::new();
        let app = t.task("app", 10, 94);
        let other = t.task("other", 30, 120);
        t.switch(1, 1_000, other, 0, app);
        t.switch(1, 10_000, app, 0, other);
        t.switch(1, 80_000, other, 0, app);
        t.switch(1, 90_000, app, 1, other);
        let mut s = settings();
        s.throttle.rt = Some((950_000, 1_000_000));
        s.throttle.rt_group = Some(CfsQuota {
            setting: "cpu.rt_runtime_us 30000, cpu.rt_period_us 100000".into(),
            group: "/pod/ctr".into(),
        });
        let f = watch(&t.per_cpu, &t.names, &tids(&[10]), &s, &HashMap::new()).remove(0);
        let a = f
            .attribution
            .as_ref()
            .expect("the 70 µs stretch attributed");
        let row = (a.causes.iter()).find(|r| r.kind == CauseKind::Throttling);
        assert_eq!(
            row.map(|r| (r.cause.as_str(), r.total_ns)),
            Some((
                "real-time throttling (cpu.rt_runtime_us 30000, cpu.rt_period_us 100000 of \
                 /pod/ctr; kernel.sched_rt_runtime_us = 950000 of 1000000)",
                70_000
            ))
        );
    }

    #[test]
    fn names_longer_than_the_kernel_keeps_are_refused() {
        assert!(comm_of("worker").is_ok());
        assert!(comm_of("").is_err());
        let e = comm_of("a-very-long-thread-name").unwrap_err();
        assert!(e.contains("'a-very-long-thr'"), "{e}");
        assert!(still_runnable(0) && still_runnable(0x100) && !still_runnable(1));
    }
}
