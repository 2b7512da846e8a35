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
//! of the thread's delays, and the worst few as timelines.
//!
//! Some kernels record no `sched_switch` out of idle (6.18 in a KVM guest: none is ever
//! seen): a thread woken for an idle CPU starts running with no event saying so. Then
//! the first event on that CPU after its wake-up (the exit of the interrupt that woke
//! it, the IPI that told the CPU) is taken as its start, and counted as guessed; a
//! switch to it that comes later on that CPU, before it stops, corrects the guess. A
//! thread that stops before any such event had its start unseen: its delay is not
//! recorded, only counted.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::engine::clock::Scale;
use crate::stats::causes::Attribution;
use crate::stats::histogram::LatencyHistogram;

use super::attribute::{Context, Gap, Naming, Tally, Throttle};
use super::event::{Event, Kind, Names, Task};

/// Which threads are watched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Watched {
    /// These thread ids (a process's threads, as its `/proc/PID/task` listed them over
    /// the run).
    Tids(HashSet<u32>),
    /// Every task whose name (comm, at most 15 bytes) is this, new processes included.
    Comm(String),
}

impl Watched {
    fn wants(&self, t: &Task, names: &Names) -> bool {
        match self {
            Watched::Tids(set) => set.contains(&t.pid),
            Watched::Comm(c) => t.pid != 0 && names.get(t.comm) == c,
        }
    }
}

/// A `sched_switch`'s `prev_state` says the task could still run: no sleep bit among
/// the kernel's reported states (the low byte). A preempted task reports 0, or
/// TASK_REPORT_MAX (0x100, "R+") on kernels that mark preemption.
pub fn still_runnable(prev_state: i64) -> bool {
    prev_state & 0xff == 0
}

/// How the figures are made.
pub struct Settings<'a> {
    pub scale: Scale,
    /// Wake-up delays at or above this are attributed.
    pub threshold_ns: u64,
    /// How many of each thread's worst delays are kept as timelines.
    pub top: usize,
    /// Work and hrtimer functions' names by address.
    pub symbols: &'a HashMap<u64, String>,
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
    /// Its delays at or above the threshold, split by what ran instead.
    pub attribution: Option<Attribution>,
}

impl ThreadFigures {
    fn new(tid: u32, comm: String) -> ThreadFigures {
        ThreadFigures {
            tid,
            comm,
            wakeup: LatencyHistogram::new(),
            preempted: None,
            irq: None,
            runs: 0,
            migrations: 0,
            involuntary: 0,
            starts_guessed: 0,
            starts_unseen: 0,
            attribution: None,
        }
    }
}

/// Where a watched thread is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Asleep,
    /// Woken at `at` (a tick) for `cpu`.
    Woken {
        at: u64,
        cpu: usize,
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
    /// Delays at or above the threshold: (CPU, [wake-up, start), ns).
    delays: Vec<(usize, Gap, u64)>,
}

#[derive(Debug, Default, Clone, Copy)]
struct Cpu {
    /// The task running, as far as the events tell.
    current: Option<Task>,
    /// Open interrupt contexts, and when the outermost opened.
    depth: u32,
    since: u64,
}

/// The walk over the merged stream.
struct Walk<'a> {
    watched: &'a Watched,
    names: &'a Names,
    scale: Scale,
    threshold_ns: u64,
    threads: BTreeMap<u32, Thread>,
    cpus: HashMap<usize, Cpu>,
}

impl Walk<'_> {
    fn thread(&mut self, t: &Task) -> &mut Thread {
        let comm = self.names.get(t.comm).to_string();
        let th = self.threads.entry(t.pid).or_insert_with(|| Thread {
            figures: ThreadFigures::new(t.pid, comm.clone()),
            phase: Phase::Asleep,
            last_cpu: None,
            delays: Vec::new(),
        });
        th.figures.comm = comm;
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
            th.delays.push((
                cpu,
                Gap {
                    start: at,
                    end: start,
                },
                ns,
            ));
        }
    }

    /// The thread starts a run on `cpu` (a switch to it, or a guess).
    fn starts_on(th: &mut Thread, cpu: usize) {
        if th.last_cpu.is_some_and(|c| c != cpu) {
            th.figures.migrations += 1;
        }
        th.last_cpu = Some(cpu);
    }

    fn step(&mut self, cpu: usize, e: &Event) {
        match e.kind {
            Kind::Wakeup {
                task, target_cpu, ..
            } if self.watched.wants(&task, self.names) => {
                let th = self.thread(&task);
                // A wake-up of a thread still on its CPU, or already runnable, changes
                // nothing: it waits for no CPU.
                if matches!(th.phase, Phase::Asleep) {
                    let target = usize::try_from(target_cpu).unwrap_or(cpu);
                    th.phase = Phase::Woken {
                        at: e.ts,
                        cpu: target,
                    };
                }
            }
            // Another task woken for an idle CPU runs there next, switch recorded or not:
            // a watched thread woken after it waits for a switch, not for a guess.
            Kind::Wakeup {
                task, target_cpu, ..
            } => {
                let target = usize::try_from(target_cpu).unwrap_or(cpu);
                let c = self.cpus.entry(target).or_default();
                if c.current.is_none_or(|t| t.pid == 0) {
                    c.current = Some(task);
                }
            }
            Kind::Switch {
                prev,
                prev_state,
                next,
            } => self.switch(cpu, e.ts, prev, prev_state, next),
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
        let c = self.cpus.entry(cpu).or_default();
        if c.current.is_some_and(|t| t.pid != 0) {
            return;
        }
        // The earliest woken first: it would run first.
        let woken = (self.threads.iter())
            .filter_map(|(&tid, th)| match th.phase {
                Phase::Woken { at, cpu: w } if w == cpu && at < ts => Some((at, tid)),
                _ => None,
            })
            .min();
        let Some((at, tid)) = woken else { return };
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
            prio: 0,
        };
        self.cpus.entry(cpu).or_default().current = Some(task);
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
        if let Some(th) = self.threads.get_mut(&tid)
            && matches!(th.phase, Phase::Running { cpu: r, .. } if r == cpu)
        {
            th.figures
                .irq
                .get_or_insert_with(LatencyHistogram::new)
                .record(ns);
        }
    }

    fn switch(&mut self, cpu: usize, ts: u64, prev: Task, prev_state: i64, next: Task) {
        // Interrupt contexts end before a switch: one still open lost its exit.
        let c = self.cpus.entry(cpu).or_default();
        c.depth = 0;
        c.current = Some(next);
        if self.watched.wants(&prev, self.names) {
            self.switched_out(cpu, ts, prev, prev_state);
        }
        if self.watched.wants(&next, self.names) {
            self.switched_in(cpu, ts, next);
        }
    }

    fn switched_out(&mut self, cpu: usize, ts: u64, prev: Task, prev_state: i64) {
        let th = self.thread(&prev);
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
            _ => {}
        }
        let th = self.thread(&prev);
        if !matches!(th.phase, Phase::Running { .. }) {
            Self::starts_on(th, cpu);
        }
        th.figures.runs += 1;
        th.phase = match still_runnable(prev_state) {
            true => {
                th.figures.involuntary += 1;
                Phase::Preempted { at: ts, cpu }
            }
            false => Phase::Asleep,
        };
    }

    fn switched_in(&mut self, cpu: usize, ts: u64, next: Task) {
        let scale = self.scale;
        let th = self.thread(&next);
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
            Phase::Preempted { at, .. } => {
                Self::starts_on(th, cpu);
                th.figures
                    .preempted
                    .get_or_insert_with(LatencyHistogram::new)
                    .record(scale.to_ns(ts.saturating_sub(at)));
                th.phase = Phase::Running { cpu, guessed: None };
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

/// The walk over every CPU's events, merged in time order.
fn walk<'a>(
    per_cpu: &BTreeMap<usize, Vec<Event>>,
    names: &'a Names,
    watched: &'a Watched,
    scale: Scale,
    threshold_ns: u64,
) -> Walk<'a> {
    let mut merged: Vec<(u64, usize, &Event)> = (per_cpu.iter())
        .flat_map(|(&cpu, evs)| evs.iter().map(move |e| (e.ts, cpu, e)))
        .collect();
    // Stable: events of one CPU at one stamp keep their order.
    merged.sort_by_key(|&(ts, cpu, _)| (ts, cpu));
    let mut w = Walk {
        watched,
        names,
        scale,
        threshold_ns,
        threads: BTreeMap::new(),
        cpus: HashMap::new(),
    };
    for (_, cpu, e) in merged {
        w.step(cpu, e);
    }
    w.finish();
    w
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
    let w = walk(per_cpu, names, watched, scale, 0);
    (w.threads.into_iter())
        .map(|(tid, th)| (tid, th.delays))
        .collect()
}

/// Each watched thread's figures, from every traced CPU's events (each CPU's in time
/// order), by thread id.
pub fn watch(
    per_cpu: &BTreeMap<usize, Vec<Event>>,
    names: &Names,
    watched: &Watched,
    s: &Settings<'_>,
) -> Vec<ThreadFigures> {
    let w = walk(per_cpu, names, watched, s.scale, s.threshold_ns);
    let empty = Vec::new();
    (w.threads.into_values())
        .map(|mut th| {
            if !th.delays.is_empty() {
                // Batches go to the tally in time order.
                th.delays.sort_by_key(|d| d.1.start);
                let events = |cpu: usize| per_cpu.get(&cpu).unwrap_or(&empty).as_slice();
                th.figures.attribution = Some(attribute_delays(
                    th.figures.tid,
                    &th.delays,
                    events,
                    names,
                    s,
                ));
            }
            th.figures
        })
        .collect()
}

/// A thread's delays (in time order) split by what ran on their CPUs instead: each run
/// of delays on one CPU is one batch, with that CPU's events from the last switch
/// before it (which says who held the CPU) to its end.
fn attribute_delays<'e>(
    tid: u32,
    delays: &[(usize, Gap, u64)],
    events: impl Fn(usize) -> &'e [Event],
    names: &Names,
    s: &Settings<'_>,
) -> Attribution {
    let cx = Context {
        names,
        symbols: s.symbols,
        scale: s.scale,
        run_start: s.run_start,
        // Its own time is no cause.
        measurer: tid,
        top: s.top,
        // Nothing is known to run at a wake-up: whatever ran then is the delay's.
        quiet_at_gap_start: false,
        naming: Naming::Full,
        throttle: s.throttle,
    };
    let mut tally = Tally::new(s.top);
    for batch in delays.chunk_by(|a, b| a.0 == b.0) {
        let evs = events(batch[0].0);
        let first = batch[0].1.start;
        let last = batch.iter().map(|d| d.1.end).max().unwrap_or(first);
        let at = evs.partition_point(|e| e.ts < first);
        let from = (evs[..at].iter())
            .rposition(|e| matches!(e.kind, Kind::Switch { .. }))
            .unwrap_or(0);
        let to = evs.partition_point(|e| e.ts <= last);
        let gaps: Vec<(Gap, u64)> = batch.iter().map(|&(_, g, ns)| (g, ns)).collect();
        tally.add(&gaps, &evs[from..to.max(from)], &cx);
    }
    let mut a = tally.finish(s.scale);
    a.method = format!(
        "kernel trace events on the TSC (x86-tsc): each wake-up delay at or above {} µs, \
         from the thread's wake-up to the switch that ran it, split by what ran on that \
         CPU instead",
        s.threshold_ns as f64 / 1e3
    );
    a
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
                symbols: &symbols,
                throttle: Throttle::default(),
                run_start: 0,
            };
            watch(&self.per_cpu, &self.names, watched, &s)
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

    #[test]
    fn names_longer_than_the_kernel_keeps_are_refused() {
        assert!(comm_of("worker").is_ok());
        assert!(comm_of("").is_err());
        let e = comm_of("a-very-long-thread-name").unwrap_err();
        assert!(e.contains("'a-very-long-thr'"), "{e}");
        assert!(still_runnable(0) && still_runnable(0x100) && !still_runnable(1));
    }
}
