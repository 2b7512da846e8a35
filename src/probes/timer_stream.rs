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
//!
//! When the wake-ups are to be attributed (`monitor --trace`), each interval also logs
//! every wake-up later than `log_above_ns`: where its deadline fell on the counter (the
//! TSC, the trace's clock) and how late it came. The log is preallocated with the
//! interval; a wake-up that finds it full is counted as dropped. That costs a late
//! wake-up one counter read and one store, and a wake-up on time one comparison.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use crossbeam_utils::CachePadded;
use crossbeam_utils::atomic::AtomicCell;
use rustix::time::{ClockId, Timespec};

use crate::engine::clock::{self, ClockInfo, Scale};
use crate::engine::run::{self, Monitor, RunError, RunOutcome, RunPlan, Worker};
use crate::stats::LatencyHistogram;
use crate::stats::events::{Event, EventLog};

/// How many late limits a thread counts exactly.
pub const MAX_LIMITS: usize = 4;
/// One handoff a second: the finest interval the coordinator (the 10 s maximum, the
/// interval log) can see.
pub const HANDOFF_NS: u64 = 1_000_000_000;
/// How many late wake-ups one interval logs when asked to: two seconds' worth at the
/// default 1 ms interval, so that even an interval that a late handoff stretched to two
/// seconds keeps every wake-up of a CPU that is late all the time.
pub const LATE_LOG_CAPACITY: usize = 2048;

/// A validated configuration of the continuous timer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamConfig {
    pub interval_ns: u64,
    /// Wake-ups later than each of these are counted, exactly (ascending, at most
    /// `MAX_LIMITS`).
    pub late_limits_ns: Vec<u64>,
    /// How often a thread hands its interval over [`HANDOFF_NS`; shorter in tests].
    pub handoff_ns: u64,
    /// Log each wake-up later than this (deadline on the counter, lateness) for
    /// attribution; `None` logs nothing.
    pub log_above_ns: Option<u64>,
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
            log_above_ns: None,
        })
    }

    /// How many late wake-ups each interval can log.
    pub fn late_log_capacity(&self) -> usize {
        match self.log_above_ns {
            Some(_) => LATE_LOG_CAPACITY,
            None => 0,
        }
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
    /// The wake-ups later than the configuration's `log_above_ns`, in time order: each
    /// at the counter's value when it woke (`start_ticks`), with its lateness (ns); those
    /// beyond its capacity are counted as dropped. Read it with `late_wakeups`, which
    /// works out the deadlines: the loop does no arithmetic for them.
    pub late_log: EventLog,
}

impl IntervalData {
    pub fn new() -> IntervalData {
        IntervalData::with_late_log(0)
    }

    /// An interval whose late-wake-up log holds `capacity` entries, allocated now.
    pub fn with_late_log(capacity: usize) -> IntervalData {
        IntervalData {
            hist: LatencyHistogram::new(),
            late: [0; MAX_LIMITS],
            overruns: 0,
            start_ns: 0,
            end_ns: 0,
            late_log: EventLog::new(capacity),
        }
    }

    /// Empties it for reuse (on the coordinator: touches the whole histogram).
    pub fn clear(&mut self) {
        self.hist.clear();
        self.late = [0; MAX_LIMITS];
        self.overruns = 0;
        self.start_ns = 0;
        self.end_ns = 0;
        self.late_log.clear();
    }

    #[inline]
    fn record(&mut self, lat: u64, limits: &[u64; MAX_LIMITS]) {
        self.hist.record(lat);
        for (n, &l) in self.late.iter_mut().zip(limits) {
            *n += (lat > l) as u64;
        }
    }

    /// Logs a late wake-up seen at counter value `tsc`, `lat` ns after its deadline. A
    /// store into the preallocated log, or a count when it is full.
    #[inline]
    fn log_late(&mut self, lat: u64, tsc: u64) {
        self.late_log.push(Event {
            start_ticks: tsc,
            duration_ns: lat,
        });
    }

    /// The logged late wake-ups, in time order: (deadline, wake-up) on the counter, and
    /// the lateness in ns.
    pub fn late_wakeups(&self, scale: Scale) -> impl Iterator<Item = (u64, u64, u64)> + '_ {
        (self.late_log.events().iter()).map(move |e| {
            let deadline = e.start_ticks.saturating_sub(scale.to_ticks(e.duration_ns));
            (deadline, e.start_ticks, e.duration_ns)
        })
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
    /// The measuring thread's id, set before its loop (0 until then): attribution does
    /// not count the thread's own time as a cause.
    tid: AtomicU32,
}

impl Handoff {
    /// Two intervals, allocated and touched now, each with a late-wake-up log of
    /// `late_log` entries.
    pub fn new(late_log: usize) -> Handoff {
        let interval = || AtomicCell::new(Some(Box::new(IntervalData::with_late_log(late_log))));
        Handoff {
            first: interval(),
            ready: AtomicCell::new(None),
            spare: interval(),
            late_handoffs: AtomicU64::new(0),
            tid: AtomicU32::new(0),
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

    /// The id of the thread measuring now (or last), 0 before one started.
    pub fn tid(&self) -> u32 {
        self.tid.load(Ordering::Relaxed)
    }
}

impl Default for Handoff {
    fn default() -> Self {
        Self::new(0)
    }
}

/// One handoff cell per measured CPU, in CPU order, with the late-wake-up logs `cfg`
/// asks for.
pub fn handoffs(n: usize, cfg: &StreamConfig) -> Vec<CachePadded<Handoff>> {
    (0..n)
        .map(|_| CachePadded::new(Handoff::new(cfg.late_log_capacity())))
        .collect()
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
    (base, end_ns): (u64, u64),
    stop: &AtomicBool,
) -> Box<IntervalData> {
    let interval = cfg.interval_ns;
    let limits = cfg.limits();
    let log_above = cfg.log_above_ns.unwrap_or(u64::MAX);
    let mut next = base + interval;
    let mut boundary = base + cfg.handoff_ns;
    active.start_ns = base;
    active.end_ns = base;
    while next <= end_ns && !stop.load(Ordering::Relaxed) {
        sleep_until(next);
        let now = read_clock();
        let lat = now.saturating_sub(next);
        active.record(lat, &limits);
        if lat > log_above {
            active.log_late(lat, clock::now());
        }
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
        h.tid.store(
            rustix::thread::gettid().as_raw_nonzero().get() as u32,
            Ordering::Relaxed,
        );
        // Warm every path once (the histogram's counts were touched when allocated).
        active.record(cfg.interval_ns, &cfg.limits());
        active.log_late(cfg.interval_ns, clock::now());
        active.clear_quick();
        let win = match w.ready_and_sleep() {
            Some(win) => win,
            None => return Some(active),
        };
        let base = win.start_monotonic_ns;
        let end_ns = base + w.scale.to_ns(win.deadline - win.start + 1);
        Some(cycle(cfg, h, active, (base, end_ns), w.stop_flag()))
    };
    run::run_monitored(plan, clock.scale, stop, work, Some(tick))
}

impl IntervalData {
    /// Forgets the warm-up sample without touching the whole histogram again.
    fn clear_quick(&mut self) {
        self.hist.clear();
        self.late = [0; MAX_LIMITS];
        self.overruns = 0;
        self.late_log.clear();
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

    /// Every wake-up above the log's limit is logged with its deadline on the counter,
    /// in time order, until the log is full; the rest are counted, not lost silently.
    #[test]
    fn late_wakeups_are_logged_with_their_deadlines_until_the_log_is_full() {
        let (info, _) = ClockInfo::detect();
        let mut c = StreamConfig::new(1_000_000, vec![1_000_000]).unwrap();
        c.log_above_ns = Some(0);
        let h = Handoff::new(8);
        let stop = AtomicBool::new(false);
        let active = h.first.take().unwrap();
        // The counter on both sides of the base: a preemption between the two reads
        // (beside a build) widens the bound on the first deadline rather than failing it.
        let (tsc0, base, tsc_after) = (clock::now(), read_clock(), clock::now());
        let d = cycle(&c, &h, active, (base, base + 20_500_000), &stop);
        let tsc1 = clock::now();
        let log: Vec<(u64, u64, u64)> = d.late_wakeups(info.scale).collect();
        let woken = d.hist.count();
        // A deadline a stall skipped is an overrun, not a wake-up.
        assert!(
            woken + d.overruns >= 15,
            "{woken} wake-ups, {} overruns",
            d.overruns
        );
        assert_eq!(log.len(), 8);
        assert_eq!(d.late_log.dropped(), woken - 8);
        // A wake-up 0 ns late is not above the limit: none here is on the ns.
        for w in log.windows(2) {
            assert!(w[0].0 < w[1].0, "{log:?}");
        }
        // The first deadline is one interval after the base, on the counter.
        let first = info.scale.to_ns(log[0].0.saturating_sub(tsc0));
        let slack = info.scale.to_ns(tsc_after - tsc0);
        assert!(
            (900_000..1_200_000 + slack).contains(&first),
            "first deadline {first} ns after the start ({slack} ns between the reads)"
        );
        assert!(log.iter().all(|e| e.0 > tsc0 && e.1 < tsc1));
    }

    #[test]
    fn a_thread_hands_over_full_intervals_and_keeps_filling_when_no_spare_came() {
        let mut c = StreamConfig::new(100_000, vec![1_000_000]).unwrap();
        c.handoff_ns = 100_000_000;
        let h = Handoff::new(0);
        let stop = AtomicBool::new(false);
        let active = h.first.take().unwrap();
        let base = read_clock();
        // 250 ms of wake-ups without a coordinator: the first boundary hands the interval
        // over (the spare is there), the second finds no spare and keeps filling.
        let end = cycle(&c, &h, active, (base, base + 250_000_000), &stop);
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
