//! Timer wake-up latency without end: `timer`'s loop for `monitor`, handing each second's
//! figures to the coordinator instead of keeping one histogram for the whole run.
//!
//! Each measuring thread sleeps to absolute deadlines on CLOCK_MONOTONIC, reads the clock
//! on wake-up and records `now − deadline` into the interval it is filling: an
//! HdrHistogram, exact counters of wake-ups above each late limit, and the overruns (the
//! deadlines a wake-up more than a whole interval late skipped). At every handoff
//! boundary (one second on CLOCK_MONOTONIC) it swaps the full interval for an empty one.
//!
//! The handoff is lock-free and allocates nothing: two preallocated intervals per thread
//! travel through two one-slot atomic cells, `ready` (thread → coordinator) and `spare`
//! (coordinator → thread). The coordinator puts a spare back only after it has taken the
//! ready one, so when the thread finds a spare the ready cell is empty. A coordinator that
//! has not come round yet leaves no spare: the thread then keeps filling the same
//! interval (two seconds in one) and counts the late handoff, rather than wait, drop data
//! or allocate. The hot loop's only syscall is the sleep (the clock read is the vDSO's).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crossbeam_utils::CachePadded;
use crossbeam_utils::atomic::AtomicCell;
use rustix::time::{ClockId, Timespec};

use crate::engine::clock::ClockInfo;
use crate::engine::run::{self, Monitor, RunError, RunOutcome, RunPlan, Worker};
use crate::stats::LatencyHistogram;

/// How many late limits a thread counts exactly.
pub const MAX_LIMITS: usize = 4;
/// One handoff a second: the finest interval the coordinator (the 10 s maximum, the
/// interval log) can see.
pub const HANDOFF_NS: u64 = 1_000_000_000;

/// A validated configuration of the continuous timer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamConfig {
    pub interval_ns: u64,
    /// Wake-ups later than each of these are counted, exactly (ascending, at most
    /// `MAX_LIMITS`).
    pub late_limits_ns: Vec<u64>,
    /// How often a thread hands its interval over [`HANDOFF_NS`; shorter in tests].
    pub handoff_ns: u64,
}

/// A continuous-timer configuration that cannot be measured.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StreamConfigError {
    #[error("interval {0} ns: expected from 10 µs to 1 s")]
    Interval(u64),
    #[error("{0} late limits: expected from 1 to {MAX_LIMITS}")]
    Limits(usize),
    #[error("late limit {0} ns: expected above 0 and at most 1 hour")]
    Limit(u64),
}

impl StreamConfig {
    /// Checks and normalises (sorts, dedups) the limits.
    pub fn new(interval_ns: u64, mut late_limits_ns: Vec<u64>) -> Result<Self, StreamConfigError> {
        if !(10_000..=1_000_000_000).contains(&interval_ns) {
            return Err(StreamConfigError::Interval(interval_ns));
        }
        late_limits_ns.sort_unstable();
        late_limits_ns.dedup();
        if late_limits_ns.is_empty() || late_limits_ns.len() > MAX_LIMITS {
            return Err(StreamConfigError::Limits(late_limits_ns.len()));
        }
        if let Some(&l) = (late_limits_ns.iter()).find(|&&l| l == 0 || l > 3_600_000_000_000) {
            return Err(StreamConfigError::Limit(l));
        }
        Ok(StreamConfig {
            interval_ns,
            late_limits_ns,
            handoff_ns: HANDOFF_NS,
        })
    }

    /// The limits as the hot loop reads them: unused slots never match.
    fn limits(&self) -> [u64; MAX_LIMITS] {
        let mut l = [u64::MAX; MAX_LIMITS];
        l[..self.late_limits_ns.len()].copy_from_slice(&self.late_limits_ns);
        l
    }
}

/// What one thread saw during one interval. Allocated before the run, reused forever.
#[derive(Debug, Clone)]
pub struct IntervalData {
    pub hist: LatencyHistogram,
    /// Wake-ups later than each limit (same order as the configuration's limits).
    pub late: [u64; MAX_LIMITS],
    /// Deadlines skipped by wake-ups more than a whole interval late.
    pub overruns: u64,
    /// The interval on CLOCK_MONOTONIC, ns.
    pub start_ns: u64,
    pub end_ns: u64,
}

impl IntervalData {
    pub fn new() -> IntervalData {
        IntervalData {
            hist: LatencyHistogram::new(),
            late: [0; MAX_LIMITS],
            overruns: 0,
            start_ns: 0,
            end_ns: 0,
        }
    }

    /// Empties it for reuse (on the coordinator: touches the whole histogram).
    pub fn clear(&mut self) {
        self.hist.clear();
        self.late = [0; MAX_LIMITS];
        self.overruns = 0;
        self.start_ns = 0;
        self.end_ns = 0;
    }

    #[inline]
    fn record(&mut self, lat: u64, limits: &[u64; MAX_LIMITS]) {
        self.hist.record(lat);
        for (n, &l) in self.late.iter_mut().zip(limits) {
            *n += (lat > l) as u64;
        }
    }
}

impl Default for IntervalData {
    fn default() -> Self {
        Self::new()
    }
}

type Slot = AtomicCell<Option<Box<IntervalData>>>;

/// One thread's handoff cells, on their own cache line.
pub struct Handoff {
    /// The interval the thread starts a run with; it comes back here after the run.
    first: Slot,
    /// A full interval, for the coordinator to take.
    ready: Slot,
    /// An empty interval, for the thread to take at its next boundary.
    spare: Slot,
    /// Boundaries at which no spare was there (the coordinator was late): the interval
    /// then spans more than one second.
    late_handoffs: AtomicU64,
}

impl Handoff {
    /// Two intervals, allocated and touched now.
    pub fn new() -> Handoff {
        Handoff {
            first: AtomicCell::new(Some(Box::new(IntervalData::new()))),
            ready: AtomicCell::new(None),
            spare: AtomicCell::new(Some(Box::new(IntervalData::new()))),
            late_handoffs: AtomicU64::new(0),
        }
    }

    /// Takes the full interval, if the thread handed one over (coordinator side).
    pub fn take_ready(&self) -> Option<Box<IntervalData>> {
        self.ready.take()
    }

    /// Gives an emptied interval back (coordinator side), after `take_ready`.
    pub fn give_spare(&self, mut d: Box<IntervalData>) {
        d.clear();
        self.spare.store(Some(d));
    }

    /// Puts the interval a run ended with back for the next run, emptied.
    pub fn give_first(&self, mut d: Box<IntervalData>) {
        d.clear();
        self.first.store(Some(d));
    }

    pub fn late_handoffs(&self) -> u64 {
        self.late_handoffs.load(Ordering::Relaxed)
    }
}

impl Default for Handoff {
    fn default() -> Self {
        Self::new()
    }
}

/// One handoff cell per measured CPU, in CPU order.
pub fn handoffs(n: usize) -> Vec<CachePadded<Handoff>> {
    (0..n).map(|_| CachePadded::new(Handoff::new())).collect()
}

fn read_clock() -> u64 {
    let ts = rustix::time::clock_gettime(ClockId::Monotonic);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Sleeps until `deadline_ns`; signals are blocked in measuring threads, so an early
/// return can only be a spurious EINTR: sleep again.
fn sleep_until(deadline_ns: u64) {
    let ts = Timespec {
        tv_sec: (deadline_ns / 1_000_000_000) as i64,
        tv_nsec: (deadline_ns % 1_000_000_000) as i64,
    };
    while let Err(rustix::io::Errno::INTR) =
        rustix::thread::clock_nanosleep_absolute(ClockId::Monotonic, &ts)
    {}
}

/// The next boundary after `now`, on the grid `origin + k × every`.
fn next_boundary(origin: u64, now: u64, every: u64) -> u64 {
    origin + ((now.saturating_sub(origin)) / every + 1) * every
}

/// The loop, from `base` (CLOCK_MONOTONIC) until `end_ns` or `stop`. Returns the interval
/// being filled when it ended.
fn cycle(
    cfg: &StreamConfig,
    h: &Handoff,
    mut active: Box<IntervalData>,
    base: u64,
    end_ns: u64,
    stop: &AtomicBool,
) -> Box<IntervalData> {
    let interval = cfg.interval_ns;
    let limits = cfg.limits();
    let mut next = base + interval;
    let mut boundary = base + cfg.handoff_ns;
    active.start_ns = base;
    active.end_ns = base;
    while next <= end_ns && !stop.load(Ordering::Relaxed) {
        sleep_until(next);
        let now = read_clock();
        let lat = now.saturating_sub(next);
        active.record(lat, &limits);
        active.end_ns = now;
        next += interval;
        if now >= next {
            // A whole interval late or more: those deadlines are gone.
            let missed = (now - next) / interval + 1;
            active.overruns += missed;
            next += missed * interval;
        }
        if now >= boundary {
            match h.spare.take() {
                Some(mut fresh) => {
                    fresh.start_ns = now;
                    fresh.end_ns = now;
                    let full = std::mem::replace(&mut active, fresh);
                    // Empty by the handoff's rule (a spare comes only after the ready one
                    // was taken): nothing is dropped here.
                    h.ready.store(Some(full));
                }
                None => {
                    h.late_handoffs.fetch_add(1, Ordering::Relaxed);
                }
            }
            boundary = next_boundary(base, now, cfg.handoff_ns);
        }
    }
    active
}

/// Runs the continuous timer on every measured CPU of `plan` until its duration ends or
/// `stop` is set; `tick` runs on the coordinator (pinned to the housekeeping CPUs) every
/// `every`, to take the threads' intervals from `handoffs` (one per measured CPU, in CPU
/// order). Each worker's value is the interval it was filling when the run ended: the
/// last, partial one.
pub fn run(
    cfg: &StreamConfig,
    plan: &RunPlan,
    clock: &ClockInfo,
    stop: &AtomicBool,
    handoffs: &[CachePadded<Handoff>],
    tick: Monitor<'_>,
) -> Result<RunOutcome<Option<Box<IntervalData>>>, RunError> {
    assert_eq!(
        handoffs.len(),
        plan.cpus.measured.len(),
        "one handoff per CPU"
    );
    let work = |w: &Worker<'_>| {
        let h = &handoffs[w.index];
        let mut active = h.first.take()?;
        // Warm every path once (the histogram's counts were touched when allocated).
        active.record(cfg.interval_ns, &cfg.limits());
        active.clear_quick();
        let win = match w.ready_and_sleep() {
            Some(win) => win,
            None => return Some(active),
        };
        let base = win.start_monotonic_ns;
        let end_ns = base + w.scale.to_ns(win.deadline - win.start + 1);
        Some(cycle(cfg, h, active, base, end_ns, w.stop_flag()))
    };
    run::run_monitored(plan, clock.scale, stop, work, Some(tick))
}

impl IntervalData {
    /// Forgets the warm-up sample without touching the whole histogram again.
    fn clear_quick(&mut self) {
        self.hist.clear();
        self.late = [0; MAX_LIMITS];
        self.overruns = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_handoff_cells_are_lock_free() {
        assert!(
            Slot::is_lock_free(),
            "AtomicCell<Option<Box<_>>> must not lock"
        );
    }

    #[test]
    fn limits_are_checked_sorted_and_padded() {
        let c = StreamConfig::new(1_000_000, vec![1_000_000, 100_000]).unwrap();
        assert_eq!(c.late_limits_ns, vec![100_000, 1_000_000]);
        assert_eq!(c.limits(), [100_000, 1_000_000, u64::MAX, u64::MAX]);
        assert!(StreamConfig::new(1_000, vec![1]).is_err());
        assert!(StreamConfig::new(1_000_000, vec![]).is_err());
        assert!(StreamConfig::new(1_000_000, vec![0]).is_err());
        assert!(StreamConfig::new(1_000_000, vec![1, 2, 3, 4, 5]).is_err());
    }

    #[test]
    fn late_wakeups_are_counted_above_each_limit_exactly() {
        let c = StreamConfig::new(1_000_000, vec![100, 1000]).unwrap();
        let mut d = IntervalData::new();
        for v in [50, 100, 101, 1000, 1001, 5000] {
            d.record(v, &c.limits());
        }
        assert_eq!(d.late, [4, 2, 0, 0]);
        assert_eq!(d.hist.count(), 6);
    }

    #[test]
    fn a_thread_hands_over_full_intervals_and_keeps_filling_when_no_spare_came() {
        let mut c = StreamConfig::new(100_000, vec![1_000_000]).unwrap();
        c.handoff_ns = 100_000_000;
        let h = Handoff::new();
        let stop = AtomicBool::new(false);
        let active = h.first.take().unwrap();
        let base = read_clock();
        // 250 ms of wake-ups without a coordinator: the first boundary hands the interval
        // over (the spare is there), the second finds no spare and keeps filling.
        let end = cycle(&c, &h, active, base, base + 250_000_000, &stop);
        let full = h.take_ready().expect("the first interval was handed over");
        assert!(full.end_ns >= base + c.handoff_ns);
        assert!(
            full.hist.count() + full.overruns >= 1_000,
            "{}",
            full.hist.count()
        );
        assert_eq!(h.late_handoffs(), 1);
        assert_eq!(end.start_ns, full.end_ns);
        assert!(end.end_ns >= base + 2 * c.handoff_ns);
        // Every deadline up to the last wake-up was either woken for or counted as
        // skipped, once (a stall at the end may carry the last wake-up past the end).
        let accounted = full.hist.count() + end.hist.count() + full.overruns + end.overruns;
        let due = (end.end_ns - base) / c.interval_ns;
        assert_eq!(accounted, due, "deadlines accounted for vs due");
        assert!(accounted >= 2_500);
    }
}
