//! The streaming `Watcher`: events go in window by window, the walk follows them, and
//! each delay that ended is attributed from the tail of its CPU's events kept for it.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap, HashSet, VecDeque};

use super::figures::{Settings, ThreadFigures, Watched};
use super::walk::{Delay, Phase, Walk};
use crate::stats::causes::Attribution;
use crate::trace::attribute::{Context, Gap, MeasurerKind, Naming, Tally};
use crate::trace::event::{Event, Kind, Names};

/// Events kept per CPU for the delays still open (40 bytes each, 5 MiB a CPU): past it
/// the oldest are dropped and counted as lost.
pub const TAIL_CAP: usize = 131_072;
/// Events walked between settlings within one batch.
pub(super) const SETTLE_EVERY: usize = 8192;
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
    pub(super) tails: BTreeMap<usize, VecDeque<Event>>,
    tallies: BTreeMap<u32, Split>,
    /// Delays at or above the threshold whose CPU's events are not all fed yet.
    pending: Vec<Delay>,
    /// Events dropped from a full tail, and per CPU the stamp of the newest: a delay
    /// that began by then is left unattributed, never named from the events after the
    /// hole.
    pub evicted: u64,
    dropped_to: BTreeMap<usize, u64>,
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
            dropped_to: BTreeMap::new(),
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
            f.attribution = (self.tallies.remove(&tid)).map(|t| t.finish(scale, threshold_ns));
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
    /// as listed again, or a cgroup's, which a task that moves out leaves. A delay left
    /// open by one no longer watched is given up.
    pub fn watch_tids(&mut self, tids: impl IntoIterator<Item = u32>) {
        if let Watched::Tids(set) | Watched::Comms(_, set) = &mut self.walk.watched {
            set.clear();
            set.extend(tids);
        }
        self.walk.close_unwatched();
    }

    /// Names causes as `Naming::StableWithPids` does (after `streaming`).
    pub fn with_pids(mut self) -> Watcher {
        self.naming = Naming::StableWithPids;
        self
    }

    /// Drops every event held and each CPU's task (the reader started afresh with new
    /// names for them), counting the events as lost.
    pub fn forget_events(&mut self) {
        for (&cpu, tail) in &self.tails {
            self.evicted += tail.len() as u64;
            if let Some(e) = tail.back() {
                self.dropped_to.insert(cpu, e.ts);
            }
        }
        self.tails.clear();
        self.walk.cpus.clear();
    }

    /// Takes every CPU's events stamped before `until` (each CPU's in time order, later
    /// than any fed before, none at or after `until`): walks them merged in time order,
    /// attributes the delays that ended before `until`, and forgets the events no open
    /// delay needs.
    pub fn feed(
        &mut self,
        per_cpu: &[(usize, &[Event])],
        until: u64,
        names: &Names,
        symbols: &HashMap<u64, String>,
    ) {
        // Merged run by run, in place: collecting and sorting every event of a pass, with
        // its CPU, was a tenth of the reader's time under 10 watched containers (issue 34).
        let mut merge = Merge::new(per_cpu);
        let mut walked = 0;
        while let Some((cpu, run)) = merge.next_run(SETTLE_EVERY - walked % SETTLE_EVERY) {
            // A reader that fell behind brings a large batch: settling on the way keeps
            // the tails to what open delays need rather than to the batch. Every event
            // before this run is in, so the delays that ended before it can be settled.
            if walked > 0 && walked % SETTLE_EVERY == 0 {
                self.settle(run[0].ts, names, symbols);
            }
            walked += run.len();
            let tail = self.tails.entry(cpu).or_default();
            for e in run {
                self.walk.step(names, cpu, e);
                if tail.len() >= TAIL_CAP
                    && let Some(gone) = tail.pop_front()
                {
                    self.evicted += 1;
                    self.dropped_to.insert(cpu, gone.ts);
                }
                tail.push_back(*e);
            }
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
        let split = (self.tallies.entry(tid)).or_insert_with(|| Split::new(s.top));
        if self.dropped_to.get(&cpu).is_some_and(|&t| gap.start <= t) {
            split.unattributed += 1;
            return;
        }
        let evs: &[Event] = match self.tails.get_mut(&cpu) {
            Some(t) => t.make_contiguous(),
            None => &[],
        };
        let at = evs.partition_point(|e| e.ts < gap.start);
        let from = (evs[..at].iter())
            .rposition(|e| matches!(e.kind, Kind::Switch { .. }))
            .unwrap_or(0);
        let to = evs.partition_point(|e| e.ts <= gap.end).max(from);
        split.tally.add(&[(gap, ns)], &evs[from..to], &cx);
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
                f.attribution = (tallies.remove(&tid)).map(|t| t.finish(s.scale, s.threshold_ns));
                f
            })
            .collect()
    }
}

/// One thread's delays split by cause, and those that could not be (their events were
/// dropped).
struct Split {
    tally: Tally,
    unattributed: u64,
}

impl Split {
    fn new(top: usize) -> Split {
        Split {
            tally: Tally::new(top),
            unattributed: 0,
        }
    }

    fn finish(self, scale: crate::engine::clock::Scale, threshold_ns: u64) -> Attribution {
        let mut a = self.tally.finish(scale);
        a.method = method(threshold_ns);
        a.unattributed_gaps = self.unattributed;
        a
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

/// Several CPUs' events, each CPU's in time order, merged in time order (of events at one
/// stamp, the lower CPU's first, each CPU's in its order) a run at a time: a run is one
/// CPU's events up to the next head of another's, so the heap is touched once a run.
pub(super) struct Merge<'a> {
    per_cpu: &'a [(usize, &'a [Event])],
    /// Where each CPU's events are taken from next.
    at: Vec<usize>,
    /// Each CPU's next event as (stamp, CPU, its index in `per_cpu`), earliest first.
    heads: BinaryHeap<Reverse<(u64, usize, usize)>>,
}

impl<'a> Merge<'a> {
    pub(super) fn new(per_cpu: &'a [(usize, &'a [Event])]) -> Merge<'a> {
        let heads = (per_cpu.iter().enumerate())
            .filter_map(|(k, (cpu, evs))| Some(Reverse((evs.first()?.ts, *cpu, k))))
            .collect();
        Merge {
            per_cpu,
            at: vec![0; per_cpu.len()],
            heads,
        }
    }

    /// The next run, of at most `most` events, with its CPU.
    pub(super) fn next_run(&mut self, most: usize) -> Option<(usize, &'a [Event])> {
        let Reverse((_, cpu, k)) = self.heads.pop()?;
        let evs = &self.per_cpu[k].1[self.at[k]..];
        let next = self.heads.peek().map(|r| (r.0.0, r.0.1));
        // The head always goes; then each event before the next CPU's head.
        let n = 1
            + (evs[1..].iter())
                .take(most.max(1) - 1)
                .take_while(|e| next.is_none_or(|(ts, c)| (e.ts, cpu) < (ts, c)))
                .count();
        self.at[k] += n;
        if let Some(e) = evs.get(n) {
            self.heads.push(Reverse((e.ts, cpu, k)));
        }
        Some((cpu, &evs[..n]))
    }
}
