//! The walk over the merged stream of every traced CPU's events: each watched thread's
//! phase (asleep, woken, running, preempted) and figures, each CPU's task and interrupt
//! depth, and the delays that ended, until the watcher takes them.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;

use crate::engine::clock::Scale;
use crate::stats::histogram::LatencyHistogram;

use super::figures::{PRIO_CHANGES_KEPT, ThreadFigures, Watched, sleep_state};
use crate::trace::attribute::Gap;
use crate::trace::event::still_runnable;
use crate::trace::event::{Event, Kind, Names, Task};

/// Where a watched thread is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
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

pub(super) struct Thread {
    pub(super) figures: ThreadFigures,
    pub(super) phase: Phase,
    last_cpu: Option<usize>,
    /// The priority last seen.
    prio: Option<i32>,
    /// When it was switched out asleep, and the state it slept in.
    slept: Option<(u64, i32)>,
    /// The stamp of its last event.
    pub(super) last_ts: u64,
}

/// A wake-up delay that ended: (thread, the CPU that ran it, [wake-up, start), ns).
pub(super) type Delay = (u32, usize, Gap, u64);

#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Cpu {
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
pub(super) struct Walk {
    pub(super) watched: Watched,
    scale: Scale,
    threshold_ns: u64,
    pub(super) threads: BTreeMap<u32, Thread>,
    pub(super) cpus: FxHashMap<usize, Cpu>,
    /// Delays at or above the threshold, in the order they ended, until taken.
    pub(super) ended: Vec<Delay>,
    /// The threads put in `Phase::Woken`, some of which may have left it since: a
    /// CPU's event looks for a woken thread to start among these, not among every
    /// thread followed (issue 34: ten containers' threads, each scanned at every
    /// interrupt on every CPU).
    woken: Vec<u32>,
    /// Significant digits of the threads' histograms.
    pub(super) sigfig: u8,
    /// Stretches preempted while runnable are attributed too, not only wake-up delays.
    pub(super) split_preempted: bool,
    /// The stamp of the event being walked.
    now: u64,
}

impl Walk {
    pub(super) fn new(watched: Watched, scale: Scale, threshold_ns: u64) -> Walk {
        Walk {
            watched,
            scale,
            threshold_ns,
            threads: BTreeMap::new(),
            cpus: FxHashMap::default(),
            ended: Vec::new(),
            woken: Vec::new(),
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

    pub(super) fn step(&mut self, names: &Names, cpu: usize, e: &Event) {
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
                    if !self.woken.contains(&task.pid) {
                        self.woken.push(task.pid);
                    }
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
        // Those no longer woken leave the list.
        let threads = &self.threads;
        let phase = |tid: &u32| threads.get(tid).map(|th| th.phase);
        (self.woken).retain(|tid| matches!(phase(tid), Some(Phase::Woken { .. })));
        // Of the woken, the highest priority first, then the earliest: it would run first.
        let woken = (self.woken.iter())
            .filter_map(|tid| match phase(tid)? {
                Phase::Woken { at, cpu: w, prio } if w == cpu && at < ts => Some((prio, at, *tid)),
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
        prev_state: i32,
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

    fn switched_out(&mut self, names: &Names, cpu: usize, ts: u64, prev: Task, prev_state: i32) {
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

    /// Threads no longer watched (ended, or moved out of a watched cgroup) have their
    /// open phase closed, their figures kept. Their last events may go unseen: the
    /// listing that leaves them out is read before events up to `SETTLE` older are fed.
    /// A wake-up left open would never end, and would hold every CPU's events back to it
    /// until the tails overflow.
    pub(super) fn close_unwatched(&mut self) {
        for (&tid, th) in &mut self.threads {
            let open = !matches!(th.phase, Phase::Asleep);
            if open && !self.watched.wants_by(tid, || &th.figures.comm) {
                th.phase = Phase::Asleep;
                th.slept = None;
            }
        }
    }

    /// A guessed start still open when the trace ends is recorded.
    pub(super) fn finish(&mut self) {
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
