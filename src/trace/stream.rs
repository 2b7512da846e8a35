//! Attribution as the gaps come (issues 22 and 29): a reader on a housekeeping CPU follows
//! the trace of some measured CPUs (`reader::Follower`), takes each CPU's gaps as its
//! measuring thread hands them over, and attributes each once it has settled (ended long
//! enough ago that every event inside it has been read) into a running tally
//! (`attribute::Tally`). Nothing is kept per gap: memory holds the gaps waiting to settle
//! and the events they need, whatever the run's length.
//!
//! What a window keeps: the events from the oldest waiting gap on, and those a gap still
//! under way may need (no one hands it over before it ends, and a throttled loop waits
//! 50 ms, longer than a gap takes to settle): from the measurer's last known run, the end
//! of its last gap, or a timer thread's last sleep, at most 2 s back. A timer's gaps run
//! from a deadline the thread slept to, so its lane also keeps an interval's events
//! before them, for what ran at the deadline.
//!
//! A gap that overlaps a span whose events were lost (a page the kernel flagged, an event
//! pushed out of a full window) or that began before what its window still held is not
//! attributed: it is counted (`in_lost_spans`, in the result's `unattributed_gaps`),
//! never named after the events around the hole.
//!
//! I/O-free but for the follower's reads, so a replay of recorded pages runs the very same
//! code (`bench/trace_replay.rs`).

use std::collections::{HashMap, VecDeque};
use std::io::Read;

use crate::engine::clock::Scale;
use crate::stats::LatencyHistogram;
use crate::stats::causes::Attribution;

use super::attribute::{Context, Gap, MeasurerKind, Naming, Tally, Throttle};
use super::event::{Event, Kind, Names};
use super::reader::{EventWindow, Follower};

/// How many of each CPU's largest gaps are broken down.
pub const TOP: usize = 10;
/// How far back a window keeps events for a gap that may be under way: a loop on a CPU
/// with no tick runs for seconds without a gap, and must not hold its window open; a gap
/// held off longer (RT throttling's windows are 50 ms, a CFS period at most 1 s) is
/// counted unattributed.
pub const MAX_AWAY_NS: u64 = 2_000_000_000;
/// How long an NMI's handler may run, ns: an NMI is stamped when it ends, so one that
/// began inside a gap may be stamped after it (a perf NMI takes a few µs).
const NMI_NS: u64 = 100_000;
/// Wake-ups seen before a running p99 is trusted; until then (or for a second) they wait.
pub const WARM_WAKEUPS: u64 = 1_000;
/// Task names a streaming reader interns before it starts its names afresh with those
/// its windows hold, well under a follower's [`super::reader::MAX_NAMES`]: its windows
/// hold a fraction of a second of events, which name few, and on a host that builds all
/// day every compiler thread has a name of its own.
pub const STREAM_NAMES: usize = 1_024;

/// The memory all of a run's streaming readers hold at most for their CPUs (issue 35):
/// the gap queues and the coincidence count's held starts (fixed, per CPU), each lane's
/// tally and waiting gaps, and each window's events. A reader that falls behind a busy
/// host pushes its oldest events out and counts them lost rather than hold them (a
/// replay of 192 CPUs at 120 times a guest's rate held 689 MB before the bound), and a
/// window gives up to its lane's tally what the tally grows by (a tally of 59 causes
/// took 190 KiB: 36 MB over 192 CPUs, outside the bound until then).
pub const BUDGET_BYTES: usize = 64 << 20;
/// What of [`BUDGET_BYTES`] is left to the allocator, not shared out: its chunk headers
/// and the freed memory it keeps. Shared out whole, 192 CPUs' readers under overload held
/// 65–66 MiB of heap at their peak and grew the process's private memory by 67–69 MiB.
pub const SLACK_BYTES: usize = BUDGET_BYTES / 16;
/// Each CPU's window holds at least this many events whatever the CPU count (80 KiB at
/// 40 bytes), nearly three times the 90 ms of events its waiting gaps need at 20 000 gaps
/// a second (8 200 events a second at the mix issue 35 measured). At 4 096 the floor, not
/// the budget, bounded 192 CPUs' windows, and what the tallies and the coincidence count
/// held came on top (a replay a queue behind held 66 MiB at its peak). The floor comes
/// first past about 280 CPUs, or sooner when the tallies name many causes (each up to
/// about 190 KiB at [`super::attribute::MAX_CAUSES`] causes).
pub const FLOOR_EVENTS: usize = 2_048;
/// Gaps a lane holds waiting to settle, at most, before a budget is set
/// ([`Lane::bound_pending`]). Past it the oldest are dropped, counted unattributed.
pub const PENDING_GAPS: usize = 2_048;

/// One CPU's share of [`BUDGET_BYTES`]: the events its window holds and the gaps its
/// lane holds, once the queues the measuring threads fill (fixed, per CPU) are counted.
/// These are where it starts: each pass the lane splits their bytes, less its tally's,
/// by the mix of events and gaps it has seen ([`Lane::caps`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    pub window_events: usize,
    pub pending_gaps: usize,
}

/// What a window's event and a waiting gap take.
const EVENT_BYTES: usize = std::mem::size_of::<Event>();
const GAP_BYTES: usize = std::mem::size_of::<(Gap, u64)>();

impl Budget {
    /// The bytes its window's events and its waiting gaps take at most, its tally
    /// included: what its lane splits by the mix ([`Lane::caps`]).
    pub fn lane_bytes(&self) -> usize {
        self.window_events * EVENT_BYTES + self.pending_gaps * GAP_BYTES
    }

    /// The share of each of `cpus` CPUs whose gap queue takes `queue_bytes`, its window
    /// at most `max_events` (what a window needs on a quiet host) and at least
    /// [`FLOOR_EVENTS`].
    pub fn for_cpus(cpus: usize, queue_bytes: usize, max_events: usize) -> Budget {
        let fixed = cpus.max(1) * queue_bytes;
        let per_cpu = (BUDGET_BYTES - SLACK_BYTES).saturating_sub(fixed) / cpus.max(1);
        // Two events a gap to start with (a holder's gap has its start and its end), so
        // that a reader held off its CPU loses gaps only where its window loses their
        // events: a fixed 2 048 shed 12 872 of 18 616 gaps of a 10 kHz holder beside a
        // build, with 644 events lost. The lane then follows the mix it sees.
        let per_event = EVENT_BYTES + GAP_BYTES / 2;
        let events = (per_cpu / per_event).min(max_events).max(FLOOR_EVENTS);
        Budget {
            window_events: events,
            pending_gaps: events / 2,
        }
    }
}

/// Which of the gaps handed over are attributed.
#[derive(Debug)]
pub enum Pick {
    /// Every one (a noise loop's gaps).
    All,
    /// Those of at least this many ns (`timer --trace-above`).
    AtLeast(u64),
    /// Those at or above the p99 of every gap handed over so far (`timer --trace`: the
    /// run's p99 is not known until it ends, and nothing is kept per wake-up until then).
    RunningP99 {
        seen: Box<LatencyHistogram>,
        /// The lowest and highest floor applied, ns.
        floors: Option<(u64, u64)>,
    },
}

impl Pick {
    /// The running p99 pick, empty.
    pub fn running_p99() -> Pick {
        Pick::RunningP99 {
            seen: Box::new(LatencyHistogram::new()),
            floors: None,
        }
    }
}

/// One measured CPU's gaps on their way to its tally.
#[derive(Debug)]
pub struct Lane {
    pub cpu: usize,
    /// The measuring thread: its own time is no cause (0 until it has said).
    pub measurer: u32,
    pub throttle: Throttle,
    /// A noise loop spins; a timer thread sleeps.
    kind: MeasurerKind,
    /// Events kept before a waiting gap's start, in ticks.
    margin: u64,
    pick: Pick,
    pending: VecDeque<(Gap, u64)>,
    tally: Tally,
    /// The latest end of a gap handed over: the measurer ran there, so no gap still
    /// under way began before it.
    running_at: u64,
    /// Gaps handed over, and those that overlapped a span with events lost.
    pub offered: u64,
    pub in_lost_spans: u64,
    /// Gaps held waiting at most, and those dropped past it (the oldest, unattributed).
    max_pending: usize,
    /// The bytes its window's events, its waiting gaps and its tally may hold together
    /// ([`Budget::lane_bytes`]); none until bounded (the window keeps the cap it was made
    /// with).
    share: Option<usize>,
    /// Gaps put in `pending`, all passes: with the events its window read, the mix that
    /// splits the share.
    queued: u64,
    pub shed: u64,
    /// Events handed to the tally, all passes (a pass walks each about once).
    pub walked: u64,
}

impl Lane {
    /// A noise loop's lane: every gap, each beginning with the loop running.
    pub fn noise(cpu: usize, throttle: Throttle) -> Lane {
        Lane::new(cpu, throttle, MeasurerKind::Spins, 0, Pick::All)
    }

    /// A timer thread's lane: gaps from a deadline to the wake-up, keeping `interval`
    /// ticks of events before each for what ran at the deadline.
    pub fn timer(cpu: usize, throttle: Throttle, interval: u64, pick: Pick) -> Lane {
        Lane::new(cpu, throttle, MeasurerKind::Sleeps, interval, pick)
    }

    /// The lane breaking down its `top` largest gaps rather than [`TOP`]: `selftest`
    /// judges every hold's gap as the commands break them down.
    pub fn keeping(mut self, top: usize) -> Lane {
        self.tally = Tally::new(top);
        self
    }

    fn new(cpu: usize, throttle: Throttle, kind: MeasurerKind, margin: u64, pick: Pick) -> Lane {
        Lane {
            cpu,
            measurer: 0,
            throttle,
            kind,
            margin,
            pick,
            pending: VecDeque::new(),
            tally: Tally::new(TOP),
            running_at: 0,
            offered: 0,
            in_lost_spans: 0,
            max_pending: PENDING_GAPS,
            share: None,
            queued: 0,
            shed: 0,
            walked: 0,
        }
    }

    /// A gap, handed over in start order once it ended, with its interrupted time (ns).
    pub fn offer(&mut self, gap: Gap, ns: u64) {
        self.offered += 1;
        self.running_at = self.running_at.max(gap.end);
        match &mut self.pick {
            Pick::AtLeast(floor) if ns < *floor => return,
            Pick::RunningP99 { seen, .. } => seen.record(ns),
            _ => {}
        }
        if self.pending.len() >= self.max_pending {
            self.pending.pop_front();
            self.shed += 1;
        }
        // Grown by hand to at most its bound: doubling would take it to the next power
        // of two, past its share of the budget.
        let len = self.pending.len();
        if len == self.pending.capacity() {
            let room = self.max_pending.saturating_sub(len).max(1);
            self.pending.reserve_exact(len.max(16).min(room));
        }
        self.pending.push_back((gap, ns));
        self.queued += 1;
    }

    /// Holds at most `n` gaps waiting to settle (its share of the budget).
    pub fn bound_pending(&mut self, n: usize) {
        self.max_pending = n.max(1);
    }

    /// As `bound_pending`, from now on: past it the oldest waiting are dropped, counted
    /// unattributed, and the memory of a bound much larger given back.
    fn rebound_pending(&mut self, n: usize) {
        self.bound_pending(n);
        let over = self.pending.len().saturating_sub(self.max_pending);
        self.pending.drain(..over);
        self.shed += over as u64;
        if self.pending.capacity() > self.max_pending + self.max_pending / 4 {
            self.pending.shrink_to(self.max_pending);
        }
    }

    /// Holds its CPU's share of the budget: its window, waiting gaps and tally together
    /// at most [`Budget::lane_bytes`], split as [`Lane::caps`] says; until it has read
    /// anything, `b.pending_gaps` gaps waiting.
    pub fn bound(&mut self, b: Budget) {
        self.bound_pending(b.pending_gaps);
        self.share = Some(b.lane_bytes());
    }

    /// The events its window may hold and the gaps it may hold waiting, given the
    /// events its window has `read`: its share less what its tally holds, split so that
    /// both hold the same span of time at the mix seen so far (issue 35: a fixed two
    /// events a gap shed a tenth of the gaps of a host that has fewer events than gaps,
    /// most gaps holding none). At least [`FLOOR_EVENTS`] events (or the share, if
    /// smaller) and half as many gaps; `None` when unbounded.
    pub fn caps(&self, read: u64) -> Option<(usize, usize)> {
        let share = self.share?;
        let avail = share.saturating_sub(self.tally.bytes()) as u128;
        // One gap and two events as the prior: the split the budget starts from.
        let (e, g) = (read as u128 + 2, self.queued as u128 + 1);
        let per = (EVENT_BYTES as u128 * e + GAP_BYTES as u128 * g).max(1);
        let floor = FLOOR_EVENTS.min(share / EVENT_BYTES);
        let events = ((avail * e / per) as usize).max(floor);
        let gaps = ((avail * g / per) as usize).max(floor / 2);
        Some((events, gaps))
    }

    /// Gaps it may take before the oldest waiting is dropped.
    pub fn room(&self) -> usize {
        self.max_pending.saturating_sub(self.pending.len())
    }

    /// Gaps held waiting to settle.
    pub fn waiting(&self) -> usize {
        self.pending.len()
    }

    /// Where its gaps may settle when its window's buffer was left with pages unread:
    /// those that ended far enough before the newest event read that every event they
    /// need has been read. A spinning loop's gap needs an NMI stamped up to [`NMI_NS`]
    /// after its end; a sleeper's, the events up to its next switch out, so it waits
    /// `lag`, as long as a pass waits for the kernel's writing.
    pub fn settled_behind(&self, newest: u64, lag: u64, scale: Scale) -> u64 {
        let after = match self.kind {
            MeasurerKind::Spins => scale.to_ticks(NMI_NS) + 1,
            MeasurerKind::Sleeps => lag,
        };
        newest.saturating_sub(after)
    }

    /// The most gaps it holds waiting to settle.
    pub fn max_pending(&self) -> usize {
        self.max_pending
    }

    /// Gaps attributed so far.
    pub fn attributed(&self) -> u64 {
        self.tally.gaps()
    }

    /// Attributes the gaps that ended by `settled` (all of them when `last`) to the
    /// window's events, then forgets the events no waiting gap needs.
    pub fn settle(&mut self, w: &mut EventWindow, cx: &mut Shared<'_>, settled: u64, last: bool) {
        let mut ready = match last {
            true => self.pending.len(),
            false => self.pending.partition_point(|(g, _)| g.end <= settled),
        };
        if let Pick::RunningP99 { seen, .. } = &self.pick
            && seen.count() < WARM_WAKEUPS
            && !last
        {
            let second = cx.scale.to_ticks(1_000_000_000);
            let old = settled.saturating_sub(second);
            ready = self.pending.partition_point(|(g, _)| g.end <= old);
        }
        if ready > 0 {
            let floor = self.floor();
            let (mut kept, mut lost) = (Vec::with_capacity(ready), 0);
            for (g, ns) in self.pending.drain(..ready).filter(|(_, ns)| *ns >= floor) {
                // Events lost inside it, or forgotten from before its start (it was under
                // way longer than a window keeps): what is left would misname it.
                match w.lost_within(g.start, g.end) || g.start < w.forgotten_to() {
                    true => lost += 1,
                    false => kept.push((g, ns)),
                }
            }
            self.in_lost_spans += lost;
            if let Some(first) = kept.first().map(|g| g.0.start) {
                let events = w.events();
                let from = events.partition_point(|e| e.ts < first.saturating_sub(self.margin));
                let last = kept.iter().map(|g| g.0.end).max().unwrap_or(first);
                let events = &events[from..self.slice_end(events, last, cx.scale).max(from)];
                self.walked += events.len() as u64;
                let c = Context {
                    names: cx.names,
                    symbols: cx.known,
                    scale: cx.scale,
                    run_start: 0,
                    measurer: self.measurer,
                    top: TOP,
                    measurer_kind: self.kind,
                    naming: Naming::Full,
                    throttle: &self.throttle,
                };
                self.tally.add(&kept, events, &c);
            }
        }
        let keep = self.keep_from(w, settled, cx.scale);
        w.forget_before(keep);
        if let Some((events, gaps)) = self.caps(w.read) {
            w.set_cap(stepped(w.cap(), events));
            self.rebound_pending(gaps);
        }
    }

    /// Where a pass's events end, given its last kept gap's end: later events change no
    /// kept gap's parts (the measurer ran at its end, which closed every window), and the
    /// next pass walks them if a gap needs them, so each event is walked about once
    /// rather than at each pass until a gap settles past it. Kept past the end: an NMI
    /// stamped at its handler's end, which may have begun inside the gap; and for a
    /// thread that sleeps, up to its next switch out: a kernel that records no switch
    /// out of idle (6.18 in a KVM guest) shows its wake-up path as idle until then.
    fn slice_end(&self, events: &[Event], last: u64, scale: Scale) -> usize {
        let nmi = events.partition_point(|e| e.ts <= last.saturating_add(scale.to_ticks(NMI_NS)));
        if self.kind == MeasurerKind::Spins || self.measurer == 0 {
            return nmi;
        }
        let after = events.partition_point(|e| e.ts <= last);
        let out = events[after..]
            .iter()
            .position(|e| matches!(e.kind, Kind::Switch { prev, .. } if prev.pid == self.measurer));
        out.map_or(events.len(), |i| after + i + 1).max(nmi)
    }

    /// The floor of the pick now, ns (a running p99 noted as applied).
    fn floor(&mut self) -> u64 {
        match &mut self.pick {
            Pick::All => 0,
            Pick::AtLeast(f) => *f,
            Pick::RunningP99 { seen, floors } => {
                // The bucket's lowest value: a wake-up in the p99's own bucket is at it.
                let h = seen.inner();
                let p99 = h.lowest_equivalent(h.value_at_quantile(0.99));
                let (lo, hi) = floors.unwrap_or((p99, p99));
                *floors = Some((lo.min(p99), hi.max(p99)));
                p99
            }
        }
    }

    /// Where the window may forget up to: the oldest waiting gap's start, or where a gap
    /// still under way may have begun, less the lane's margin. No one hands a gap over
    /// before it ends, and a throttled loop waits 50 ms or more, longer than a gap takes
    /// to settle: its window must keep what followed the measurer's last known run, the
    /// end of its last gap (the switch out that opened the window may be lost; this
    /// guest's kernel loses a few), or for a thread that sleeps its last sleep, at most
    /// `MAX_AWAY_NS` back (a loop on a CPU with no tick may run for seconds without a
    /// gap).
    fn keep_from(&self, w: &mut EventWindow, settled: u64, scale: Scale) -> u64 {
        let waiting = (self.pending.front())
            .map_or(settled, |g| g.0.start)
            .min(settled);
        let recent = settled.saturating_sub(scale.to_ticks(MAX_AWAY_NS));
        // A timer hands over only its late wake-ups with --trace-above: the sleep before
        // its next deadline bounds it where no gap came for a while.
        let slept = match self.kind {
            MeasurerKind::Spins => 0,
            MeasurerKind::Sleeps => slept_at(w.events(), self.measurer).unwrap_or(0),
        };
        let ran = self.running_at.max(slept).max(recent);
        waiting.min(ran).saturating_sub(self.margin)
    }

    /// The tally of every gap attributed, its method said as the pick chose them.
    pub fn finish(self, scale: Scale, run_start: u64) -> Attribution {
        let mut a = self.tally.finish(scale);
        for b in &mut a.top {
            b.start_ns = scale.to_ns(b.start_tsc.saturating_sub(run_start));
        }
        let us = |ns: u64| ns as f64 / 1e3;
        let late = "late, from its deadline to its waking, split by what ran";
        match &self.pick {
            Pick::All => {}
            Pick::AtLeast(f) => {
                a.method = format!(
                    "kernel trace events on the counter (x86-tsc): each wake-up at or above \
                     {} µs {late}",
                    us(*f)
                )
            }
            Pick::RunningP99 { floors, .. } => {
                let range = match floors {
                    Some((lo, hi)) if lo == hi => format!("{} µs", us(*lo)),
                    Some((lo, hi)) => format!("{} to {} µs over the run", us(*lo), us(*hi)),
                    None => "none settled".into(),
                };
                a.method = format!(
                    "kernel trace events on the counter (x86-tsc): each wake-up at or above \
                     the p99 of the thread's wake-ups so far ({range}; --trace-above fixes \
                     it) {late}"
                )
            }
        }
        a.unattributed_gaps = self.in_lost_spans + self.shed;
        a
    }
}

/// A window's cap moved to `wanted` in steps: lowered a thirty-second past it, raised
/// only once it is a sixteenth above. The split follows the mix and the tally's growth
/// by a few events a pass, and a window at its cap gives its memory back (moving what it
/// holds) each time the cap is lowered (issue 35).
fn stepped(cap: usize, wanted: usize) -> usize {
    match wanted {
        w if w < cap => w - w / 32,
        w if w > cap + cap / 16 => w,
        _ => cap,
    }
}

/// When the measurer last went to sleep (its last switch out not runnable) in `events`:
/// a thread that sleeps to a deadline does so before the deadline its next gap starts at.
fn slept_at(events: &[Event], measurer: u32) -> Option<u64> {
    if measurer == 0 {
        return None;
    }
    events.iter().rev().find_map(|e| match e.kind {
        Kind::Switch {
            prev, prev_state, ..
        } if prev.pid == measurer && !super::event::still_runnable(prev_state) => Some(e.ts),
        _ => None,
    })
}

/// What the lanes of one reader share: the names its decoder interned, the trace's
/// clock, and the kernel functions named so far.
pub struct Shared<'a> {
    pub names: &'a Names,
    pub scale: Scale,
    pub known: &'a mut HashMap<u64, String>,
}

/// A follower and the lanes of its CPUs, in the same order: one reader's share of the
/// measured CPUs.
pub struct Reader<R = std::fs::File> {
    pub follower: Follower<R>,
    pub lanes: Vec<Lane>,
    known: HashMap<u64, String>,
}

impl<R: Read> Reader<R> {
    /// `lanes` for the follower's windows, in their order.
    pub fn new(mut follower: Follower<R>, lanes: Vec<Lane>) -> Reader<R> {
        follower.set_max_names(STREAM_NAMES);
        debug_assert!(
            (follower.windows.iter().zip(&lanes)).all(|(w, l)| w.cpu == l.cpu),
            "one lane per window, in order"
        );
        Reader {
            follower,
            lanes,
            known: Default::default(),
        }
    }

    /// Drains the trace into the windows, and names the kernel functions the new events
    /// carry, all the windows' at once: kallsyms is read at most once a pass, and a read
    /// takes 75–110 ms on a 2-vCPU guest (issue 35: a reader that read it lane by lane,
    /// as each lane's gaps settled, took passes of up to 200 ms in its first second and
    /// shed gaps while it caught up).
    pub fn read(&mut self) -> std::io::Result<()> {
        self.read_within(false)
    }

    /// As `read`; when `bounded`, each window only as far as it has room for
    /// ([`Follower::pass_within`]).
    pub fn read_within(&mut self, bounded: bool) -> std::io::Result<()> {
        self.follower.pass_within(bounded)?;
        let new = std::mem::take(&mut self.follower.new_functions);
        super::symbols::name_addresses(&mut self.known, new);
        Ok(())
    }

    /// Attributes each lane's settled gaps (all of them when `last`).
    pub fn settle(&mut self, scale: Scale, settled: u64, last: bool) {
        self.settle_read(scale, settled, 0, last);
    }

    /// As `settle`; a lane whose window's buffer was left with pages unread settles
    /// only what its window has read far enough past ([`Lane::settled_behind`], `lag`
    /// for a sleeper), and not all even when `last`.
    pub fn settle_read(&mut self, scale: Scale, settled: u64, lag: u64, last: bool) {
        let Reader {
            follower,
            lanes,
            known,
            ..
        } = self;
        let mut cx = Shared {
            names: &follower.decoder.names,
            scale,
            known,
        };
        let windows = follower.windows.iter_mut().zip(&follower.behind);
        for (lane, (w, &behind)) in lanes.iter_mut().zip(windows) {
            match behind {
                false => lane.settle(w, &mut cx, settled, last),
                true => {
                    let read_to = lane.settled_behind(w.newest_ts(), lag, scale);
                    lane.settle(w, &mut cx, settled.min(read_to), false)
                }
            }
        }
    }

    /// Whether a window's buffer was left with pages unread by the last read.
    pub fn behind(&self) -> bool {
        self.follower.behind.iter().any(|&b| b)
    }

    /// Events held in the windows and gaps waiting, all lanes: what settling frees.
    pub fn holding(&self) -> usize {
        self.held() + self.lanes.iter().map(Lane::waiting).sum::<usize>()
    }

    /// Events held in the windows now, all lanes.
    pub fn held(&self) -> usize {
        self.follower.windows.iter().map(EventWindow::len).sum()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::stats::causes::CauseKind;
    use crate::trace::format::{PageLayout, parse_event_format};
    use crate::trace::reader::PageQueue;
    use crate::trace::ring::{mark_missed, write_pages};

    const ME: u32 = 100;
    const MS: u64 = 1_000_000;

    pub(crate) fn switch_format() -> crate::trace::format::EventFormat {
        parse_event_format("sched:sched_switch", crate::trace::event::SWITCH_FORMAT).unwrap()
    }

    /// A sched_switch record from (comm, pid) to (comm, pid), the first still runnable.
    pub(crate) fn switch(prev: (&str, u32), next: (&str, u32)) -> Vec<u8> {
        let mut rec = vec![0u8; 64];
        rec[0..2].copy_from_slice(&7u16.to_le_bytes());
        rec[8..8 + prev.0.len()].copy_from_slice(prev.0.as_bytes());
        rec[24..28].copy_from_slice(&prev.1.to_le_bytes());
        rec[28..32].copy_from_slice(&120i32.to_le_bytes());
        rec[40..40 + next.0.len()].copy_from_slice(next.0.as_bytes());
        rec[56..60].copy_from_slice(&next.1.to_le_bytes());
        rec[60..64].copy_from_slice(&120i32.to_le_bytes());
        rec
    }

    fn pages_of(records: &[(u64, Vec<u8>)]) -> Vec<u8> {
        let r: Vec<(u64, &[u8])> = records.iter().map(|(t, d)| (*t, &d[..])).collect();
        let mut pages = write_pages(&r, 4096, &PageLayout::DEFAULT);
        assert_eq!(pages.len(), 1);
        pages.remove(0)
    }

    /// A reader of one CPU (CPU 1, measured by thread ME) on a 1 GHz counter.
    fn reader() -> Reader<PageQueue> {
        let sources = vec![(1, PageQueue::default())];
        let f =
            Follower::from_sources(sources, 4096, PageLayout::DEFAULT, &[switch_format()], 1024);
        let mut lane = Lane::noise(1, Throttle::default());
        lane.measurer = ME;
        Reader::new(f, vec![lane])
    }

    /// Issue 35: the budget's shares of 192 CPUs (windows, waiting gaps, and the fixed
    /// costs: gap queues, coincidence starts, the rest) add up to at most 64 MiB, less the
    /// allocator's slack; one CPU
    /// keeps the window it always had, and past about 290 CPUs the floor holds.
    #[test]
    fn issue35_the_budget_shares_64_mib_over_the_cpus_above_a_floor() {
        let queue = 4_096 * 16 + 5_120 * 8 + 4_096;
        let b = Budget::for_cpus(192, queue, 65_536);
        let gap = std::mem::size_of::<(Gap, u64)>();
        let per_cpu = b.window_events * std::mem::size_of::<Event>() + queue;
        assert!(
            192 * (per_cpu + b.pending_gaps * gap) <= BUDGET_BYTES - SLACK_BYTES,
            "{b:?}"
        );
        assert!(b.window_events > FLOOR_EVENTS, "{b:?}");
        assert_eq!(Budget::for_cpus(1, queue, 65_536).window_events, 65_536);
        assert_eq!(
            Budget::for_cpus(1_024, queue, 65_536).window_events,
            FLOOR_EVENTS
        );
    }

    /// Issue 35: a lane's tally counts in its CPU's share of the budget: as it names
    /// causes its window holds fewer events, never fewer than the floor.
    #[test]
    fn issue35_a_growing_tally_takes_its_bytes_from_its_windows_share() {
        let scale = Scale::from_hz(1e9);
        let mut r = reader();
        let share = FLOOR_EVENTS + 1_000;
        let budget = Budget {
            window_events: share,
            pending_gaps: share / 2,
        };
        r.lanes[0].bound(budget);
        // Before anything is read, the split is the budget's own (a gap to two events).
        assert_eq!(r.lanes[0].caps(0), Some((share, share / 2)));
        let me = ("measure-cpu1", ME);
        // 40 tasks, each taking the CPU from the loop once: 40 causes.
        for batch in 0..4u64 {
            let recs: Vec<(u64, Vec<u8>)> = (0..10u64)
                .flat_map(|k| {
                    let i = batch * 10 + k;
                    let (t, task) = (i * 10_000 + 1_000, format!("task{i}"));
                    let pid = 1_000 + i as u32;
                    [
                        (t, switch(me, (&task, pid))),
                        (t + 2_000, switch((&task, pid), me)),
                    ]
                })
                .collect();
            feed(&mut r, pages_of(&recs));
        }
        for i in 0..40u64 {
            let (g, n) = gap(i * 10_000 + 990, i * 10_000 + 3_010);
            r.lanes[0].offer(g, n);
        }
        r.settle(scale, MS, true);
        let tally = r.lanes[0].tally.bytes();
        assert_eq!(r.lanes[0].attributed(), 40);
        assert!(tally > 40 * 64, "{tally} bytes for 40 causes");
        let read = r.follower.windows[0].read;
        let (events, gaps) = r.lanes[0].caps(read).unwrap();
        let held = events * EVENT_BYTES + gaps * GAP_BYTES;
        assert!(
            held + tally <= budget.lane_bytes() && held + tally + 100 > budget.lane_bytes(),
            "{events} events and {gaps} gaps with a {tally}-byte tally"
        );
        assert_eq!(
            r.follower.windows[0].cap(),
            events,
            "the window holds to it"
        );
        assert_eq!(r.lanes[0].max_pending(), gaps, "and the lane");
        // A share the tally outgrows leaves the window its floor.
        r.lanes[0].bound(Budget {
            window_events: FLOOR_EVENTS + 10,
            pending_gaps: 1_000,
        });
        let floor = (FLOOR_EVENTS, FLOOR_EVENTS / 2);
        assert_eq!(r.lanes[0].caps(read), Some(floor));
    }

    /// Issue 35: a lane splits its share by the mix it sees, so that its window and its
    /// waiting gaps hold the same span of time: at half an event a gap (a quiet host
    /// whose gaps mostly hold none) it holds twice as many gaps as the budget's start.
    #[test]
    fn issue35_a_lane_splits_its_share_by_the_mix_it_sees() {
        let mut lane = Lane::noise(1, Throttle::default());
        let share = 40 * FLOOR_EVENTS;
        let budget = Budget {
            window_events: share,
            pending_gaps: share / 2,
        };
        lane.bound(budget);
        for i in 0..10_000u64 {
            let (g, n) = gap(i * 1_000 + 10, i * 1_000 + 500);
            lane.offer(g, n);
        }
        let (events, gaps) = lane.caps(5_000).unwrap();
        let bytes = events * EVENT_BYTES + gaps * GAP_BYTES;
        assert!(bytes <= budget.lane_bytes(), "{events} events, {gaps} gaps");
        // The same span of time: events over the events read, gaps over the gaps queued.
        let (e_span, g_span) = (events as f64 / 5_002.0, gaps as f64 / 10_001.0);
        assert!((e_span / g_span - 1.0).abs() < 0.01, "{e_span} vs {g_span}");
        assert!(gaps >= 2 * budget.pending_gaps * 9 / 10, "{gaps} gaps");
    }

    /// Issue 35: a lane holds at most its share of gaps waiting to settle: past it the
    /// oldest are dropped and counted unattributed, and the newest are attributed.
    #[test]
    fn issue35_a_lane_past_its_waiting_gaps_drops_the_oldest_unattributed() {
        let scale = Scale::from_hz(1e9);
        let mut r = reader();
        r.lanes[0].bound_pending(100);
        for i in 0..250u64 {
            let (g, n) = gap(i * 1_000 + 10, i * 1_000 + 500 + i);
            r.lanes[0].offer(g, n);
        }
        // Grown to its bound, not to the next power of two.
        assert_eq!(r.lanes[0].pending.capacity(), 100);
        r.settle(scale, 300 * MS, true);
        let lane = r.lanes.remove(0);
        assert_eq!(
            (lane.offered, lane.shed, lane.attributed()),
            (250, 150, 100)
        );
        let a = lane.finish(scale, 0);
        assert_eq!((a.gaps, a.unattributed_gaps), (100, 150));
        // The kept are the newest: the largest of them is the last.
        assert_eq!(a.top[0].duration_ns, 490 + 249, "{:?}", a.top[0]);
    }

    fn feed(r: &mut Reader<PageQueue>, page: Vec<u8>) {
        r.follower
            .sources_mut()
            .for_each(|q| q.pages.push_back(page.clone()));
        r.read().unwrap();
    }

    fn gap(start: u64, end: u64) -> (Gap, u64) {
        (Gap { start, end }, end - start)
    }

    /// Issue 29: a gap that overlaps a span whose events the kernel lost is counted
    /// unattributed, never named after the events on either side of the hole; the next
    /// gap, clear of it, is attributed as usual.
    #[test]
    fn issue29_a_gap_over_lost_events_is_counted_never_named() {
        let scale = Scale::from_hz(1e9);
        let mut r = reader();
        let me = ("measure-cpu1", ME);
        let kw = ("kworker/1:1", 57);
        let holder = ("js-holder", 7);
        feed(&mut r, pages_of(&[(1_000, switch(me, kw))]));
        // The kernel lost events before the next page: what ran from 1 000 to 5 000 is
        // not known (the kworker may have given the CPU to others).
        let mut after = pages_of(&[
            (5_000, switch(kw, me)),
            (9_000, switch(me, holder)),
            (9_500, switch(holder, me)),
        ]);
        mark_missed(&mut after, &PageLayout::DEFAULT, 12);
        feed(&mut r, after);
        let (g1, n1) = gap(990, 5_010);
        let (g2, n2) = gap(8_990, 9_510);
        r.lanes[0].offer(g1, n1);
        r.lanes[0].offer(g2, n2);
        r.settle(scale, 10 * MS, false);
        let lane = r.lanes.remove(0);
        assert_eq!((lane.attributed(), lane.in_lost_spans), (1, 1));
        let a = lane.finish(scale, 0);
        assert_eq!(a.gaps, 1);
        assert_eq!(a.unattributed_gaps, 1);
        assert!(
            a.causes.iter().all(|c| !c.cause.contains("kworker")),
            "{:?}",
            a.causes
        );
        assert!(
            a.causes[0].cause.starts_with("task js-holder:7"),
            "{:?}",
            a.causes
        );
        assert_eq!(r.follower.windows[0].missed, 12);
    }

    /// Issue 29 (the throttle window named idle on the 16-CPU host): while the loop is
    /// switched out, no one has handed its gap over yet, and one that lasts longer than
    /// a gap takes to settle (a throttled loop waits 50 ms) must find its switch out
    /// still in the window when it comes.
    #[test]
    fn issue29_a_gap_under_way_keeps_the_events_since_the_switch_out() {
        let scale = Scale::from_hz(1e9);
        let mut r = reader();
        let (me, kw) = (("measure-cpu1", ME), ("kworker/1:1", 57));
        feed(&mut r, pages_of(&[(1_000, switch(me, kw))]));
        // Passes 60 and 80 ms on, the gap still under way: nothing waits, nothing to keep
        // but what the gap under way needs.
        r.settle(scale, 60 * MS, false);
        r.settle(scale, 80 * MS, false);
        assert_eq!(r.held(), 1, "the switch out is kept");
        feed(&mut r, pages_of(&[(90 * MS, switch(kw, me))]));
        let (g, n) = gap(990, 90 * MS + 10);
        r.lanes[0].offer(g, n);
        r.settle(scale, 200 * MS, false);
        let a = r.lanes.remove(0).finish(scale, 0);
        assert_eq!(a.gaps, 1);
        assert!(
            a.causes[0].cause.starts_with("task kworker/1:1:57"),
            "{:?}",
            a.causes
        );
        assert!(a.causes[0].total_ns >= 90 * MS - 1_000);
        // Once the loop ran again (a later gap began), the window forgets.
        assert_eq!(r.held(), 0);
    }

    /// A switch event from `prev` to `next` (the first still runnable) at `ts`, their
    /// names interned in the reader's names.
    fn push_switch(r: &mut Reader<PageQueue>, ts: u64, prev: (&str, u32), next: (&str, u32)) {
        use crate::trace::event::Task;
        let names = &mut r.follower.decoder.names;
        let mut task = |(comm, pid): (&str, u32)| Task {
            pid,
            comm: names.intern(comm),
            prio: 120,
        };
        let (prev, next) = (task(prev), task(next));
        r.follower.windows[0].push(Event {
            ts,
            kind: Kind::Switch {
                prev,
                prev_state: 0,
                next,
            },
        });
    }

    /// Review 2 of issue 29: a settle pass hands the tally its events up to the last
    /// kept gap's end, not to the newest event read, so that each event is walked about
    /// once over a run, not once per pass until a gap settles past it (3.45 times for
    /// a gap a ms, a pass every 20 ms), and every gap is still named.
    #[test]
    fn a_settle_pass_walks_each_event_about_once() {
        let scale = Scale::from_hz(1e9);
        let mut r = reader();
        let (me, kw) = (("measure-cpu1", ME), ("kworker/1:1", 57));
        // 2 s of a gap a ms, 5 µs each; a pass every 20 ms settles what ended 50 ms ago.
        let (mut at, mut offered) = (MS, 0u64);
        for now in (20..=2_000).step_by(20).map(|m| m * MS) {
            while at + 5_000 < now {
                push_switch(&mut r, at, me, kw);
                push_switch(&mut r, at + 5_000, kw, me);
                let (g, n) = gap(at - 10, at + 5_010);
                r.lanes[0].offer(g, n);
                (at, offered) = (at + MS, offered + 1);
            }
            r.settle(scale, now.saturating_sub(50 * MS), false);
        }
        r.settle(scale, at, true);
        let lane = r.lanes.remove(0);
        let ratio = lane.walked as f64 / (2 * offered) as f64;
        assert!(ratio < 1.2, "{ratio:.2} walks an event");
        let a = lane.finish(scale, 0);
        assert_eq!((a.gaps, a.unattributed_gaps), (offered, 0));
        assert!(
            a.causes[0].cause.starts_with("task kworker/1:1:57"),
            "{:?}",
            a.causes
        );
        assert_eq!(a.causes[0].total_ns, 5_000 * offered);
    }

    /// A timer whose wake-up from idle has no switch recorded (6.18 in a KVM guest
    /// records none out of idle): the idle time from its wake-up to its run is its own
    /// wake-up path, known at its next switch out, after the gap: a pass that ended its
    /// events at the gap's end would name it idle.
    #[test]
    fn a_timer_s_wakeup_path_from_idle_is_its_own_though_its_switch_in_is_unrecorded() {
        use crate::trace::event::Task;
        let scale = Scale::from_hz(1e9);
        let sources = vec![(1, PageQueue::default())];
        let f =
            Follower::from_sources(sources, 4096, PageLayout::DEFAULT, &[switch_format()], 1024);
        let mut lane = Lane::timer(1, Throttle::default(), MS, Pick::All);
        lane.measurer = ME;
        let mut r = Reader::new(f, vec![lane]);
        let (me, idle) = (("timer-cpu1", ME), ("swapper/1", 0));
        push_switch(&mut r, MS, me, idle);
        let task = Task {
            pid: ME,
            comm: r.follower.decoder.names.intern("timer-cpu1"),
            prio: 120,
        };
        let kw = Task {
            pid: 57,
            comm: r.follower.decoder.names.intern("kworker/1:1"),
            prio: 120,
        };
        // Woken at its deadline, it wakes a kworker on its way, runs at 2 ms + 30 µs (no
        // switch seen), and sleeps again 1 ms on.
        for (ts, task) in [(2 * MS, task), (2 * MS + 20_000, kw)] {
            r.follower.windows[0].push(Event {
                ts,
                kind: Kind::Wakeup {
                    task,
                    target_cpu: 1,
                    waker_pid: ME,
                },
            });
        }
        push_switch(&mut r, 3 * MS, me, idle);
        let (g, n) = gap(2 * MS, 2 * MS + 30_000);
        r.lanes[0].offer(g, n);
        r.settle(scale, 60 * MS, false);
        let a = r.lanes.remove(0).finish(scale, 0);
        assert_eq!(a.gaps, 1);
        assert!(
            a.causes
                .iter()
                .all(|c| c.cause != "idle" && !c.cause.contains("swapper")),
            "{:?}",
            a.causes
        );
    }

    /// `switch`, the measurer (pid ME) at SCHED_FIFO 89 (kernel prio 10).
    fn rt_switch(prev: (&str, u32), next: (&str, u32)) -> Vec<u8> {
        let mut rec = switch(prev, next);
        for (pid, prio) in [(24..28, 28..32), (56..60, 60..64)] {
            if rec[pid] == ME.to_le_bytes() {
                rec[prio].copy_from_slice(&10i32.to_le_bytes());
            }
        }
        rec
    }

    /// Issue 29: a real-time loop's switch out was lost (this guest's kernel loses a few)
    /// and the CPU idled for 110 ms of RT throttling while the reader settled pass after
    /// pass with nothing handed over: the window keeps what followed the loop's last
    /// known run (its last gap's end), and the window is named the throttle, not
    /// "unaccounted" (what was left once the events were forgotten at each pass).
    #[test]
    fn issue29_a_throttle_window_longer_than_settling_with_its_switch_out_lost_is_named() {
        let scale = Scale::from_hz(1e9);
        let mut r = reader();
        let (me, kw, idle) = (("measure-cpu1", ME), ("kworker/1:1", 57), ("swapper/1", 0));
        // The loop's last switch in; then (its switch out to the kworker lost) the
        // kworker gives the CPU to idle while the loop is runnable.
        feed(&mut r, pages_of(&[(500, rt_switch(kw, me))]));
        let (g, n) = gap(1_000, 2_000);
        r.lanes[0].offer(g, n);
        feed(&mut r, pages_of(&[(10_500, rt_switch(kw, idle))]));
        for settled in [20, 40, 60, 80, 100] {
            r.settle(scale, settled * MS, false);
        }
        feed(&mut r, pages_of(&[(120 * MS, rt_switch(idle, me))]));
        let (g, n) = gap(9_990, 120 * MS + 10);
        r.lanes[0].offer(g, n);
        r.settle(scale, 200 * MS, false);
        let lane = r.lanes.remove(0);
        assert_eq!((lane.attributed(), lane.in_lost_spans), (2, 0));
        let a = lane.finish(scale, 0);
        let rt = a.top_of(CauseKind::Throttling).expect("the throttle named");
        assert!(
            rt.cause.starts_with("real-time throttling"),
            "{:?}",
            a.causes
        );
        assert!(rt.total_ns >= 120 * MS - 10_500, "{:?}", a.causes);
        assert_eq!(a.causes[0].cause, rt.cause, "{:?}", a.causes);
    }

    /// A gap still under way when its window had to forget its start (held off longer
    /// than `MAX_AWAY_NS`) is counted unattributed, never named after what is left.
    #[test]
    fn a_gap_whose_start_the_window_forgot_is_counted_never_named() {
        let scale = Scale::from_hz(1e9);
        let mut r = reader();
        let (me, kw) = (("measure-cpu1", ME), ("kworker/1:1", 57));
        feed(&mut r, pages_of(&[(1_000, switch(me, kw))]));
        for settled in [1_000, 2_000, 3_000] {
            r.settle(scale, settled * MS, false);
        }
        feed(&mut r, pages_of(&[(3_100 * MS, switch(kw, me))]));
        let (g, n) = gap(990, 3_100 * MS + 10);
        r.lanes[0].offer(g, n);
        r.settle(scale, 3_500 * MS, false);
        let lane = r.lanes.remove(0);
        assert_eq!((lane.attributed(), lane.in_lost_spans), (0, 1));
        assert_eq!(lane.finish(scale, 0).unattributed_gaps, 1);
    }

    /// A timer lane that hands over only its late wake-ups (`--trace-above`) keeps its
    /// window from the thread's last sleep before its next deadline (less an interval),
    /// not the 2 s a loop's may hold; a wake-up held off past settling is still named.
    #[test]
    fn a_timer_window_keeps_from_the_threads_last_sleep() {
        let scale = Scale::from_hz(1e9);
        let sources = vec![(1, PageQueue::default())];
        let f =
            Follower::from_sources(sources, 4096, PageLayout::DEFAULT, &[switch_format()], 1024);
        let mut lane = Lane::timer(1, Throttle::default(), MS, Pick::AtLeast(MS));
        lane.measurer = ME;
        let mut r = Reader::new(f, vec![lane]);
        let (me, kw, idle) = (("timer-cpu1", ME), ("kworker/1:1", 57), ("swapper/1", 0));
        let mut sleep = switch(me, idle);
        sleep[32..40].copy_from_slice(&1i64.to_le_bytes());
        feed(
            &mut r,
            pages_of(&[
                (MS, switch(kw, me)),
                (2 * MS, switch(me, kw)),
                (3 * MS, switch(kw, me)),
                (5 * MS, sleep),
                (5 * MS + 500_000, switch(idle, kw)),
            ]),
        );
        for settled in [20, 40, 60] {
            r.settle(scale, settled * MS, false);
        }
        assert_eq!(r.held(), 2, "from the sleep on");
        feed(&mut r, pages_of(&[(80 * MS, switch(kw, me))]));
        let (g, n) = gap(6 * MS, 80 * MS + 10);
        r.lanes[0].offer(g, n);
        r.settle(scale, 200 * MS, false);
        let a = r.lanes.remove(0).finish(scale, 0);
        assert_eq!((a.gaps, a.unattributed_gaps), (1, 0));
        assert!(
            a.causes[0].cause.starts_with("task kworker/1:1:57"),
            "{:?}",
            a.causes
        );
        assert!(a.causes[0].total_ns >= 74 * MS, "{:?}", a.causes);
    }

    /// A timer lane picks the wake-ups at or above the running p99, and says so.
    #[test]
    fn a_running_p99_picks_the_late_wakeups_as_they_come() {
        let scale = Scale::from_hz(1e9);
        let sources = vec![(1, PageQueue::default())];
        let f =
            Follower::from_sources(sources, 4096, PageLayout::DEFAULT, &[switch_format()], 1024);
        let lane = Lane::timer(1, Throttle::default(), MS, Pick::running_p99());
        let mut r = Reader::new(f, vec![lane]);
        // 2 000 wake-ups a ms apart, 2 µs late but every 50th, 300 µs late.
        for i in 0..2_000u64 {
            let late = if i % 50 == 49 { 300_000 } else { 2_000 };
            let start = (i + 1) * MS;
            r.lanes[0].offer(
                Gap {
                    start,
                    end: start + late,
                },
                late,
            );
        }
        r.settle(scale, 3_000 * MS, false);
        let a = r.lanes.remove(0).finish(scale, 0);
        assert_eq!(a.gaps, 40, "the 2 % above the p99");
        assert!(
            a.method.contains("p99 of the thread's wake-ups so far"),
            "{}",
            a.method
        );
    }

    /// Issue 29: a host that starts processes all day (a build: a new `task rustc:PID`
    /// every few gaps) names at most `MAX_CAUSES` causes; the least go into `other
    /// tasks`, the largest keep their names however late they come, and no time is lost.
    #[test]
    fn issue29_causes_are_bounded_and_the_largest_keep_their_names() {
        use crate::trace::attribute::{MAX_CAUSES, attribute};
        use crate::trace::event::Task;
        let mut names = Names::default();
        let me = Task {
            pid: ME,
            comm: names.intern("measure-cpu1"),
            prio: 120,
        };
        let (mut events, mut gaps) = (Vec::new(), Vec::new());
        let n = 2 * MAX_CAUSES as u64;
        for i in 0..n {
            let t = Task {
                pid: 1_000 + i as u32,
                comm: names.intern("rustc"),
                prio: 120,
            };
            // Each process holds the CPU once, the later ones longer.
            let (at, held) = (i * 100_000, 1_000 + i);
            let sw = |prev, next| Kind::Switch {
                prev,
                prev_state: 0,
                next,
            };
            events.push(Event {
                ts: at,
                kind: sw(me, t),
            });
            events.push(Event {
                ts: at + held,
                kind: sw(t, me),
            });
            gaps.push(gap(at, at + held));
        }
        let symbols = HashMap::new();
        let cx = Context {
            top: 3,
            ..Context::plain(&names, &symbols, ME)
        };
        let a = attribute(&gaps, &events, &cx);
        assert!(a.causes.len() <= MAX_CAUSES + 1, "{} rows", a.causes.len());
        let total: u64 = a.causes.iter().map(|c| c.total_ns).sum();
        assert_eq!(total, a.interrupted_ns);
        let other = a
            .causes
            .iter()
            .find(|c| c.cause == "other tasks")
            .expect("other");
        assert!(other.gaps >= n - MAX_CAUSES as u64);
        assert!(other.period_ns.is_none());
        // The largest, come last, keep their names.
        for pid in 1_000 + n - MAX_CAUSES as u64 / 2..1_000 + n {
            let name = format!("task rustc:{pid} (SCHED_OTHER nice 0)");
            assert!(a.causes.iter().any(|c| c.cause == name), "{name}");
        }
    }

    /// Names start afresh with the events a window holds, not with those it forgot but
    /// keeps at its front until that front is as long as what it holds.
    #[test]
    fn names_start_afresh_without_a_windows_forgotten_front() {
        let mut r = reader();
        r.follower.set_max_names(10);
        let me = ("measure-cpu1", ME);
        let opt = |i: u64| format!("opt {i:08x}");
        let recs: Vec<(u64, Vec<u8>)> = (0..40u64)
            .map(|i| ((i + 1) * 1_000, switch(me, (&opt(i), 1_000 + i as u32))))
            .collect();
        feed(&mut r, pages_of(&recs));
        // The first ten forgotten, thirty held: the front stays where it is.
        r.follower.windows[0].forget_before(10_500);
        assert_eq!(r.held(), 30);
        feed(&mut r, pages_of(&[(50_000, switch(me, ("opt last", 7)))]));
        let names = &r.follower.decoder.names;
        let all: Vec<&str> = (0..names.len() as u32).map(|id| names.get(id)).collect();
        assert!(all.len() <= 33, "{all:?}");
        for i in 0..10 {
            assert!(!all.contains(&opt(i).as_str()), "{} carried over", opt(i));
        }
        assert!(all.contains(&opt(10).as_str()) && all.contains(&"opt last"));
    }

    /// Issue 29: past its limit of names a reader starts afresh with only the names its
    /// windows' events use, and those events keep their names.
    #[test]
    fn issue29_names_start_afresh_with_those_the_windows_hold() {
        let scale = Scale::from_hz(1e9);
        let mut r = reader();
        r.follower.set_max_names(10);
        let me = ("measure-cpu1", ME);
        let recs: Vec<(u64, Vec<u8>)> = (0..40u64)
            .map(|i| {
                let comm = format!("opt {i:08x}");
                let t = (i + 1) * 1_000;
                match i % 2 {
                    0 => (t, switch(me, (&comm, 1_000 + i as u32))),
                    _ => (t, switch((&comm, 1_000 + i as u32), me)),
                }
            })
            .collect();
        feed(&mut r, pages_of(&recs));
        assert!(r.follower.decoder.names.len() > 40);
        // The loop ran at 38 010, the end of its gap: nothing before is needed any more.
        let (g, n) = gap(36_990, 38_010);
        r.lanes[0].offer(g, n);
        r.settle(scale, 39_500, false);
        assert_eq!(r.held(), 2, "the last switches, out of the loop and back");
        feed(&mut r, pages_of(&[(50_000, switch(me, ("opt last", 7)))]));
        let names = &r.follower.decoder.names;
        assert!(names.len() <= 5, "{} names", names.len());
        let held: Vec<String> = (r.follower.windows[0].events().iter())
            .map(|e| match e.kind {
                Kind::Switch { prev, next, .. } => {
                    let names = &r.follower.decoder.names;
                    format!("{} > {}", names.get(prev.comm), names.get(next.comm))
                }
                _ => String::new(),
            })
            .collect();
        assert_eq!(
            held,
            [
                "measure-cpu1 > opt 00000026",
                "opt 00000027 > measure-cpu1",
                "measure-cpu1 > opt last"
            ]
        );
    }

    /// Issue 29: a long gap on a busy CPU is broken down into at most `MAX_PARTS / 2`
    /// parts in time order, then the rest summed per cause, no time lost.
    #[test]
    fn issue29_a_long_gap_lists_its_first_parts_then_sums_the_rest() {
        use crate::trace::attribute::{MAX_PARTS, attribute};
        use crate::trace::event::Task;
        let mut names = Names::default();
        let task = |names: &mut Names, c: &str, pid| Task {
            pid,
            comm: names.intern(c),
            prio: 120,
        };
        let me = task(&mut names, "measure-cpu1", ME);
        let (a, b) = (task(&mut names, "rustc", 7), task(&mut names, "cc1", 8));
        let sw = |ts, prev, next| Event {
            ts,
            kind: Kind::Switch {
                prev,
                prev_state: 0,
                next,
            },
        };
        let mut events = vec![sw(1_000, me, a)];
        for i in 1..200u64 {
            let (p, n) = if i % 2 == 1 { (a, b) } else { (b, a) };
            events.push(sw(1_000 + i * 100, p, n));
        }
        events.push(sw(21_000, b, me));
        let symbols = HashMap::new();
        let cx = Context {
            top: 1,
            ..Context::plain(&names, &symbols, ME)
        };
        let at = attribute(&[gap(1_000, 21_000)], &events, &cx);
        let parts = &at.top[0].parts;
        assert_eq!(parts.len(), MAX_PARTS / 2 + 2, "{parts:?}");
        assert!(
            parts[..MAX_PARTS / 2]
                .windows(2)
                .all(|w| w[0].offset_ns < w[1].offset_ns)
        );
        assert_eq!(parts.iter().map(|p| p.duration_ns).sum::<u64>(), 20_000);
    }
}
