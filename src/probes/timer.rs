//! Timer wake-up latency: cyclictest's job.
//!
//! Each measuring thread sleeps to an absolute deadline with `clock_nanosleep` on
//! CLOCK_MONOTONIC (or CLOCK_REALTIME), reads that clock on wake-up, and records
//! `now − deadline`. The deadline then advances by the thread's interval; a wake-up more
//! than a whole interval late skips the deadlines already past, counting each as an
//! overrun. Thread n sleeps for `interval + n × distance`, as in cyclictest, so that the
//! threads do not all wake at once unless asked to (`aligned`).
//!
//! A stalled thread makes no wake-ups while it is stalled, so the raw histogram never
//! sees the wake-ups the stall delayed ("coordinated omission"). A second histogram adds
//! them back with HdrHistogram's expected-interval correction, one value per skipped
//! deadline (the latency it would have had: the late wake-up's time minus that
//! deadline); both are reported.
//!
//! Threads may share a live view of their figures with the coordinator (count, min, last,
//! sum, max): each writes its own cache line after a wake-up, the coordinator reads it a
//! few times a second.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use crossbeam_utils::CachePadded;
use rustix::time::{ClockId, Timespec};
use serde::{Deserialize, Serialize};

use crate::engine::clock::{self, ClockInfo, Scale};
use crate::engine::run::{self, Monitor, RunError, RunOutcome, RunPlan, Window, Worker};
use crate::engine::sched::{Policy, SchedRequest, ThreadCounters};
use crate::probes::record::{EventLogRecord, HistogramRecord, ThreadRecord, event_out};
use crate::stats::events::{EventOut, GapProducer, GapRing};
use crate::stats::series;
use crate::stats::{
    Event, EventLog, IntervalSeries, Largest, LatencyHistogram, SeriesOut, Summary,
};

/// cyclictest's defaults: a 1000 µs interval, each next thread 500 µs slower.
pub const DEFAULT_INTERVAL_US: u64 = 1000;
pub const DEFAULT_DISTANCE_US: u64 = 500;
/// The longest interval: a stop request waits for the next wake-up, at most this long.
pub const MAX_INTERVAL_US: u64 = 1_000_000;
/// cyclictest's --spike-nodes default.
pub const DEFAULT_SPIKE_CAPACITY: usize = 1024;
/// The default timer slack of the measuring threads: 1 ns, the least the kernel takes.
pub const DEFAULT_TIMER_SLACK_NS: u64 = 1;
/// The widest 1-µs histogram, in buckets (8 bytes each, per thread).
pub const MAX_HISTOGRAM_US: usize = 1_000_000;

/// The clock the threads sleep on and read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TimerClock {
    Monotonic,
    Realtime,
}

impl TimerClock {
    fn id(self) -> ClockId {
        match self {
            TimerClock::Monotonic => ClockId::Monotonic,
            TimerClock::Realtime => ClockId::Realtime,
        }
    }

    /// The run's common start instant on this clock.
    fn start_of(self, w: &Window) -> u64 {
        match self {
            TimerClock::Monotonic => w.start_monotonic_ns,
            TimerClock::Realtime => w.start_realtime_ns,
        }
    }
}

impl std::fmt::Display for TimerClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TimerClock::Monotonic => "CLOCK_MONOTONIC",
            TimerClock::Realtime => "CLOCK_REALTIME",
        })
    }
}

/// Absolute deadlines (cyclictest's default) or relative sleeps (`-r`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SleepMode {
    Absolute,
    Relative,
}

/// A validated configuration of the timer probe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimerConfig {
    pub interval_ns: u64,
    /// Each next thread's interval is this much longer. 0 aligns the threads: all start
    /// from the run's common start, so with equal intervals they wake together.
    pub distance_ns: u64,
    pub clock: TimerClock,
    pub mode: SleepMode,
    /// Stop each thread after this many wake-ups.
    pub loops: Option<u64>,
    /// Run the loop this long first and discard its samples.
    pub warmup: Duration,
    /// Stop every thread at the first wake-up later than this.
    pub stop_above_ns: Option<u64>,
    /// Keep every wake-up later than this, with its timestamp.
    pub spikes_above_ns: Option<u64>,
    pub spike_capacity: usize,
    /// Keep a cyclictest-style histogram of this many 1-µs buckets.
    pub histogram_us: Option<usize>,
    /// How many of the largest latencies to keep, with their timestamps.
    pub largest: usize,
    /// What /dev/cpu_dma_latency held for the run (None: not set by us).
    pub dma_latency_us: Option<i32>,
    /// Each thread's timer slack in ns (None: keep the kernel's, 50 µs for SCHED_OTHER).
    /// A sleeping thread wakes up to this much late on purpose: a latency-sensitive
    /// thread sets it to 1 ns, as cyclictest's threads effectively get at SCHED_FIFO.
    pub timer_slack_ns: Option<u64>,
    /// Under SCHED_DEADLINE: busy this long after each wake-up, as a deadline job's work.
    pub work_ns: u64,
}

impl Default for TimerConfig {
    fn default() -> Self {
        TimerConfig {
            interval_ns: DEFAULT_INTERVAL_US * 1000,
            distance_ns: DEFAULT_DISTANCE_US * 1000,
            clock: TimerClock::Monotonic,
            mode: SleepMode::Absolute,
            loops: None,
            warmup: Duration::ZERO,
            stop_above_ns: None,
            spikes_above_ns: None,
            spike_capacity: DEFAULT_SPIKE_CAPACITY,
            histogram_us: None,
            largest: crate::probes::noise::DEFAULT_LARGEST,
            dma_latency_us: None,
            timer_slack_ns: Some(DEFAULT_TIMER_SLACK_NS),
            work_ns: 0,
        }
    }
}

/// A timer configuration that cannot be measured.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimerConfigError {
    /// The interval is under 1 µs or over 1 s.
    #[error("interval {0} ns: expected from 1 µs to 1 s")]
    Interval(u64),
    /// `threads` threads would make the last one sleep over 1 s between wake-ups.
    #[error(
        "the last of {threads} threads would sleep {slowest_ns} ns between wake-ups \
         (interval + {} × distance), over the 1 s limit that keeps a stop prompt: lower \
         the distance or the interval, align the threads, or measure fewer CPUs",
        threads - 1
    )]
    SlowestThread { threads: usize, slowest_ns: u64 },
    /// A count that must be at least 1 is 0, or one over its limit.
    #[error("{what} {n}: expected from 1 to {max}")]
    Count {
        what: &'static str,
        n: u64,
        max: u64,
    },
    /// The warm-up is longer than a minute.
    #[error("warm-up {0:?}: expected at most 60s")]
    Warmup(Duration),
}

impl TimerConfig {
    /// The interval of the `index`-th thread.
    pub fn interval_of(&self, index: usize) -> u64 {
        self.interval_ns + index as u64 * self.distance_ns
    }

    /// Checks the settings for `threads` threads: what the flags' parsers check, and
    /// that no thread sleeps longer than a stop may wait.
    pub fn validate(&self, threads: usize) -> Result<(), TimerConfigError> {
        let max = MAX_INTERVAL_US * 1000;
        if !(1000..=max).contains(&self.interval_ns) {
            return Err(TimerConfigError::Interval(self.interval_ns));
        }
        let slowest = self.interval_of(threads.saturating_sub(1));
        if slowest > max {
            return Err(TimerConfigError::SlowestThread {
                threads,
                slowest_ns: slowest,
            });
        }
        if self.warmup > Duration::from_secs(60) {
            return Err(TimerConfigError::Warmup(self.warmup));
        }
        let counts = [
            ("loops", self.loops.unwrap_or(1), u64::MAX),
            ("spike capacity", self.spike_capacity as u64, 10_000_000),
            (
                "histogram buckets",
                self.histogram_us.unwrap_or(1) as u64,
                MAX_HISTOGRAM_US as u64,
            ),
        ];
        match counts.into_iter().find(|(_, n, max)| *n == 0 || n > max) {
            Some((what, n, max)) => Err(TimerConfigError::Count { what, n, max }),
            None => Ok(()),
        }
    }
}

/// One thread's figures so far, as the live display reads them.
#[derive(Debug, Default)]
pub struct LiveCell {
    count: AtomicU64,
    min: AtomicU64,
    last: AtomicU64,
    sum: AtomicU64,
    max: AtomicU64,
    overruns: AtomicU64,
    /// The policy the thread really runs at, set once before the run starts.
    sched: OnceLock<SchedRequest>,
}

/// A consistent-enough reading of one thread's live figures, in ns.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LiveSnapshot {
    pub cpu: usize,
    pub index: usize,
    pub interval_ns: u64,
    pub count: u64,
    pub min_ns: Option<u64>,
    pub last_ns: Option<u64>,
    pub avg_ns: Option<f64>,
    pub max_ns: Option<u64>,
    pub overruns: u64,
    /// The policy the thread really runs at, once it has said.
    pub sched: Option<SchedRequest>,
}

impl LiveCell {
    /// After a wake-up: the thread's figures so far.
    fn publish(&self, hist: &LatencyHistogram, last_ns: u64, overruns: u64) {
        let r = Ordering::Relaxed;
        self.count.store(hist.count(), r);
        self.min.store(hist.min_ns().unwrap_or(0), r);
        self.last.store(last_ns, r);
        self.sum.store(hist.sum_ns(), r);
        self.max.store(hist.max_ns().unwrap_or(0), r);
        self.overruns.store(overruns, r);
    }

    fn snapshot(&self, cpu: usize, index: usize, interval_ns: u64) -> LiveSnapshot {
        let count = self.count.load(Ordering::Relaxed);
        let some = |v: u64| (count > 0).then_some(v);
        LiveSnapshot {
            cpu,
            index,
            interval_ns,
            count,
            min_ns: some(self.min.load(Ordering::Relaxed)),
            last_ns: some(self.last.load(Ordering::Relaxed)),
            avg_ns: some(self.sum.load(Ordering::Relaxed)).map(|s| s as f64 / count as f64),
            max_ns: some(self.max.load(Ordering::Relaxed)),
            overruns: self.overruns.load(Ordering::Relaxed),
            sched: self.sched.get().copied(),
        }
    }
}

/// The first wake-up above `--stop-above`, as the thread that saw it reported it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BreakRecord {
    pub cpu: usize,
    pub thread_index: usize,
    pub value_ns: u64,
    /// When the thread woke, in ns since the run's start.
    pub at_ns: u64,
    /// When the thread woke, on the timer's clock (ns).
    pub clock_ns: u64,
    /// When the thread woke, on the counter.
    pub tsc: u64,
    /// Which wake-up of that thread it was (1 is the first).
    pub wakeup: u64,
    /// How long after this wake-up the last thread had stopped.
    pub all_stopped_within_ns: Option<u64>,
    pub trace: BreakAction,
}

/// What freezing the kernel trace did when a wake-up crossed the stop limit
/// (cyclictest's breaktrace).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BreakAction {
    /// tracefs is not mounted: nothing to freeze.
    NoTracefs,
    /// A marker line was written and tracing was turned off.
    MarkedAndStopped,
    /// The tracefs files could not be opened or written.
    Failed,
}

/// What the thread whose wake-up crossed the stop limit calls, once. The probe knows
/// nothing of tracefs: the command layer hands in the tracer. It runs on a measuring
/// thread at the moment of the spike, so it must be cheap (files opened beforehand).
pub trait BreakHook: Sync {
    fn fire(&self, line: &str) -> BreakAction;
}

/// No trace to freeze.
pub struct NoBreakHook;

impl BreakHook for NoBreakHook {
    fn fire(&self, _line: &str) -> BreakAction {
        BreakAction::NoTracefs
    }
}

/// What the threads share: live cells, the first wake-up past the stop limit, the hook.
struct Shared<'a> {
    live: Vec<CachePadded<LiveCell>>,
    show_live: bool,
    brk: OnceLock<BreakRecord>,
    tracer: &'a dyn BreakHook,
    stream: Option<Stream<'a>>,
}

/// cyclictest-style 1-µs buckets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BucketHistogram {
    pub bucket_ns: u64,
    pub buckets: usize,
    /// Non-empty buckets as `[bucket index (µs), count]` pairs, in order.
    pub counts: Vec<[u64; 2]>,
    /// Wake-ups beyond the last bucket.
    pub overflows: u64,
}

/// The corrected histogram, labelled with how it was corrected.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CorrectedRecord {
    /// `skipped-deadlines`: HdrHistogram's expected-interval correction for coordinated
    /// omission, adding one value per deadline a late wake-up skipped.
    pub method: String,
    pub expected_interval_ns: u64,
    pub summary: Summary,
    pub histogram: HistogramRecord,
}

/// The timer probe's configuration as recorded, for one thread.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimerConfigRecord {
    /// This thread's interval.
    pub interval_ns: u64,
    pub base_interval_ns: u64,
    pub distance_ns: u64,
    pub aligned: bool,
    pub clock: TimerClock,
    pub mode: SleepMode,
    pub loops: Option<u64>,
    pub warmup_ns: u64,
    pub stop_above_ns: Option<u64>,
    pub spikes_above_ns: Option<u64>,
    pub histogram_us: Option<usize>,
    pub largest: usize,
    pub policy: Policy,
    pub priority: u8,
    pub dma_latency_us: Option<i32>,
    /// The thread's timer slack while measuring, in ns, as read back from the kernel
    /// (absent in results written before it was recorded, or when it could not be read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timer_slack_ns: Option<u64>,
}

/// One thread's timer result: the probe's entry in the result file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimerEntry {
    pub cpu: usize,
    pub thread_index: usize,
    pub config: TimerConfigRecord,
    pub thread: ThreadRecord,
    /// From the run's start to this thread's last wake-up.
    pub runtime_ns: u64,
    pub wakeups: u64,
    /// Deadlines skipped because a wake-up came more than a whole interval late.
    pub overruns: u64,
    /// Wake-up latency, as measured.
    pub summary: Summary,
    pub histogram: HistogramRecord,
    /// Wake-up latency with the wake-ups that stalls hid added back.
    pub corrected: CorrectedRecord,
    /// Per-interval wake-up count and latest wake-up.
    pub series: SeriesOut,
    /// The largest latencies, largest first: start is the deadline, duration the latency.
    pub largest: Vec<EventOut>,
    /// Every wake-up above `spikes_above_ns`, when asked for.
    pub spikes: Option<EventLogRecord>,
    pub histogram_1us: Option<BucketHistogram>,
    /// Set on the entry of the thread whose wake-up stopped the run.
    pub stopped_run: Option<BreakRecord>,
    /// Under SCHED_DEADLINE: the parameters the thread ran with and its jobs' overruns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<DeadlineRecord>,
    /// What made the late wake-ups late, from kernel trace events (`--trace`): each
    /// wake-up's deadline to its waking, split by cause; absent without a trace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attribution: Option<crate::stats::causes::Attribution>,
}

/// A deadline thread's jobs: each wake-up is a job that reads the clock, busies itself
/// `work_ns`, and reads the clock again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeadlineRecord {
    pub runtime_ns: u64,
    pub deadline_ns: u64,
    pub period_ns: u64,
    pub work_ns: u64,
    /// Jobs that took longer than the runtime from waking to done: throttled by the
    /// scheduler, or (with the runtime enforced at the tick) owing it.
    pub over_runtime: u64,
    /// Jobs done later than their period's start plus the deadline.
    pub past_deadline: u64,
}

/// The whole probe's outcome.
pub struct TimerRun {
    pub entries: Vec<TimerEntry>,
    pub outcome: RunOutcome<()>,
}

impl TimerRun {
    /// The wake-up that crossed `--stop-above`, if one stopped the run.
    pub fn stopped_by(&self) -> Option<BreakRecord> {
        self.entries.iter().find_map(|e| e.stopped_run)
    }
}

/// Everything one thread records into; preallocated and owned by it.
struct Recorder {
    interval_ns: u64,
    ticks_per_ns: f64,
    start_tsc: u64,
    hist: LatencyHistogram,
    /// The wake-ups stalls hid: one value per skipped deadline. Only stalls write here,
    /// so a wake-up on time costs one histogram record, not two.
    hidden: LatencyHistogram,
    series: IntervalSeries,
    largest: Largest,
    spike_ns: u64,
    spikes: EventLog,
    buckets: Vec<u64>,
    overflows: u64,
    over_runtime: u64,
    past_deadline: u64,
}

impl Recorder {
    fn new(cfg: &TimerConfig, interval_ns: u64, scale: Scale) -> Recorder {
        Recorder {
            interval_ns,
            ticks_per_ns: scale.hz() / 1e9,
            start_tsc: 0,
            hist: LatencyHistogram::new(),
            hidden: LatencyHistogram::new(),
            series: IntervalSeries::new(
                series::CAPACITY,
                series::FIRST_INTERVAL_NS,
                scale.to_ticks(series::FIRST_INTERVAL_NS),
            ),
            largest: Largest::new(cfg.largest),
            spike_ns: cfg.spikes_above_ns.unwrap_or(u64::MAX),
            spikes: EventLog::new(cfg.spikes_above_ns.map_or(0, |_| cfg.spike_capacity)),
            buckets: vec![0; cfg.histogram_us.unwrap_or(0)],
            overflows: 0,
            over_runtime: 0,
            past_deadline: 0,
        }
    }

    /// Deadlines skipped because a wake-up came a whole interval late or more.
    fn overruns(&self) -> u64 {
        self.hidden.count()
    }

    /// A wake-up `lat` ns late skipped the deadlines since, `due` of them inside the
    /// run: each would have been that much less late.
    #[cold]
    fn skipped(&mut self, lat: u64, due: u64) {
        self.hidden.record_skipped(lat, self.interval_ns, due);
    }

    /// The latencies measured plus those the stalls hid.
    fn corrected(&self) -> LatencyHistogram {
        let mut all = self.hist.clone();
        all.add(&self.hidden);
        all
    }

    /// Records one wake-up `lat` ns late, seen at counter value `tsc`: from its deadline
    /// to its waking on the counter, as returned.
    #[inline]
    fn sample(&mut self, lat: u64, tsc: u64) -> Event {
        self.hist.record(lat);
        // The event spans the deadline to the wake-up, on the counter's timebase.
        let late_ticks = (lat as f64 * self.ticks_per_ns) as u64;
        let event = Event {
            start_ticks: tsc.saturating_sub(late_ticks),
            duration_ns: lat,
        };
        self.largest.offer(event);
        if lat > self.spike_ns {
            self.spikes.push(event);
        }
        self.series
            .record(event.start_ticks.saturating_sub(self.start_tsc), lat);
        if !self.buckets.is_empty() {
            match self.buckets.get_mut((lat / 1000) as usize) {
                Some(b) => *b += 1,
                None => self.overflows += 1,
            }
        }
        event
    }

    /// Runs every recording path once and forgets it, so that code and data are resident
    /// before the first real wake-up.
    fn prime(&mut self) {
        // At the run's start stamp (offset 0 in the series), not the counter's absolute
        // value, which would merge the series' intervals many times over.
        self.sample(2 * self.interval_ns + 1, self.start_tsc);
        self.skipped(2 * self.interval_ns + 1, u64::MAX);
        self.spikes.push(Event::default());
        self.hist.clear();
        self.hidden.clear();
        self.series.clear();
        self.largest.clear();
        self.spikes.clear();
        self.buckets.fill(0);
        self.overflows = 0;
        (self.over_runtime, self.past_deadline) = (0, 0);
    }

    /// A deadline job woken at `woke` for the period starting at `planned` (both on
    /// `id`) at counter value `tsc`: the work, then whether it overran.
    #[inline]
    fn job(&mut self, job: &Job, id: ClockId, planned: u64, woke: u64, tsc: u64) {
        let until = tsc + job.work_ticks;
        while clock::now() < until {
            std::hint::spin_loop();
        }
        let done = read_clock(id);
        self.over_runtime += u64::from(done.saturating_sub(woke) > job.runtime_ns);
        self.past_deadline += u64::from(done > planned + job.deadline_ns);
    }
}

/// A deadline thread's job: its work in counter ticks and the limits it must keep.
#[derive(Debug, Clone, Copy)]
struct Job {
    work_ticks: u64,
    runtime_ns: u64,
    deadline_ns: u64,
}

/// The sleeping loop's parameters for one thread.
struct Cycle<'a> {
    clock: TimerClock,
    mode: SleepMode,
    interval_ns: u64,
    /// Take no wake-up after this instant on the clock.
    end_ns: u64,
    loops: u64,
    stop_above_ns: u64,
    stop: &'a AtomicBool,
    live: Option<&'a LiveCell>,
    /// Under SCHED_DEADLINE, each wake-up is a job.
    job: Option<Job>,
}

/// Where a thread hands its wake-ups at or above `above_ns` as they happen (a reader
/// attributing them: `timer --trace`): one store into its own queue per wake-up.
pub struct Stream<'r> {
    /// One queue per measured CPU, in the plan's order.
    pub rings: &'r [GapRing],
    pub above_ns: u64,
}

/// One wake-up: how late, and when on the timer's clock and on the counter.
#[derive(Debug, Clone, Copy, Default)]
struct Wake {
    lat: u64,
    clock_ns: u64,
    tsc: u64,
}

/// How a loop ended.
#[derive(Debug, Clone, Copy, Default)]
struct CycleEnd {
    wakeups: u64,
    /// The clock at the last wake-up.
    last_ns: u64,
    /// The wake-up above the stop limit, if one ended the loop.
    broke: Option<Wake>,
}

fn read_clock(id: ClockId) -> u64 {
    let ts = rustix::time::clock_gettime(id);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn timespec(ns: u64) -> Timespec {
    Timespec {
        tv_sec: (ns / 1_000_000_000) as i64,
        tv_nsec: (ns % 1_000_000_000) as i64,
    }
}

/// Sleeps until `deadline_ns` on `id`. Signals are blocked in measuring threads, so an
/// early return can only be a spurious EINTR: sleep again.
fn sleep_until(id: ClockId, deadline_ns: u64) {
    let ts = timespec(deadline_ns);
    while let Err(rustix::io::Errno::INTR) = rustix::thread::clock_nanosleep_absolute(id, &ts) {}
}

fn sleep_for(id: ClockId, ns: u64) {
    let mut left = timespec(ns);
    while let rustix::thread::NanosleepRelativeResult::Interrupted(rest) =
        rustix::thread::clock_nanosleep_relative(id, &left)
    {
        left = rest;
    }
}

/// The measuring loop, from `base_ns` on the clock. Per wake-up: the sleep, one clock read
/// (the measurement), one counter read, then the recording, all on preallocated memory,
/// and the wake-up handed to `out` when it is at or above the stream's floor.
fn cycle(
    c: &Cycle<'_>,
    base_ns: u64,
    rec: &mut Recorder,
    mut out: Option<(&mut GapProducer<'_>, u64)>,
) -> CycleEnd {
    let id = c.clock.id();
    let mut next = base_ns + c.interval_ns;
    let mut end = CycleEnd::default();
    while next <= c.end_ns && end.wakeups < c.loops && !c.stop.load(Ordering::Relaxed) {
        let planned = match c.mode {
            SleepMode::Absolute => {
                sleep_until(id, next);
                next
            }
            SleepMode::Relative => {
                let before = read_clock(id);
                sleep_for(id, c.interval_ns);
                before + c.interval_ns
            }
        };
        let now = read_clock(id);
        let tsc = clock::now();
        let lat = now.saturating_sub(planned);
        end.wakeups += 1;
        end.last_ns = now;
        let event = rec.sample(lat, tsc);
        if let Some((p, above)) = &mut out
            && lat >= *above
        {
            p.push(event);
        }
        if let Some(job) = &c.job {
            rec.job(job, id, planned, now, tsc);
        }
        next = planned + c.interval_ns;
        if c.mode == SleepMode::Absolute && now >= next {
            // A whole interval late or more: those deadlines are gone.
            let missed = (now - next) / c.interval_ns + 1;
            // Those past the run's end were never due: not counted as skipped.
            let due = match next <= c.end_ns {
                true => (c.end_ns - next) / c.interval_ns + 1,
                false => 0,
            };
            rec.skipped(lat, due);
            next += missed * c.interval_ns;
        }
        if let Some(cell) = c.live {
            cell.publish(&rec.hist, lat, rec.overruns());
        }
        if lat > c.stop_above_ns {
            end.broke = Some(Wake {
                lat,
                clock_ns: now,
                tsc,
            });
            break;
        }
    }
    end
}

/// Everything one thread hands back.
struct ThreadMeasurement {
    window: Option<Window>,
    index: usize,
    end: CycleEnd,
    /// The clock when the thread left its loop.
    stopped_ns: u64,
    rec: Recorder,
    counters: ThreadCounters,
    /// The timer slack the thread measured with, read back (ns).
    slack_ns: Option<u64>,
}

/// Sets the calling thread's timer slack (`None` keeps the kernel's) and reads back what
/// the kernel holds, since that is what the figures were measured with.
fn apply_timer_slack(want: Option<u64>) -> Option<u64> {
    if let Some(ns) = want.and_then(std::num::NonZeroU64::new) {
        let _ = rustix::thread::set_current_timer_slack(Some(ns));
    }
    rustix::thread::current_timer_slack().ok()
}

/// One thread's whole job.
fn measure(w: &Worker<'_>, cfg: &TimerConfig, shared: &Shared<'_>) -> ThreadMeasurement {
    let interval_ns = cfg.interval_of(w.index);
    let mut rec = Recorder::new(cfg, interval_ns, w.scale);
    let slack_ns = apply_timer_slack(cfg.timer_slack_ns);
    let id = cfg.clock.id();
    let mut c = Cycle {
        clock: cfg.clock,
        mode: cfg.mode,
        interval_ns,
        end_ns: 0,
        loops: u64::MAX,
        stop_above_ns: u64::MAX,
        stop: w.stop_flag(),
        live: None,
        job: match w.sched.policy {
            Policy::Deadline(d) => Some(Job {
                work_ticks: w.scale.to_ticks(cfg.work_ns),
                runtime_ns: d.runtime_ns,
                deadline_ns: d.deadline_ns,
            }),
            _ => None,
        },
    };
    if !cfg.warmup.is_zero() {
        let base = read_clock(id);
        c.end_ns = base + cfg.warmup.as_nanos() as u64;
        rec.start_tsc = clock::now();
        cycle(&c, base, &mut rec, None);
    }
    rec.prime();
    // Only now: priming must not hand the reader a wake-up that never was.
    let tid = rustix::thread::gettid().as_raw_nonzero().get() as u32;
    let ring = shared
        .stream
        .as_ref()
        .and_then(|s| Some((s.rings.get(w.index)?, s.above_ns)));
    let mut producer = ring.map(|(r, above)| (r.producer(tid, 0), above));
    let _ = shared.live[w.index].sched.set(w.sched);
    let before = ThreadCounters::read();
    let window = w.ready_and_sleep();
    let mut end = CycleEnd::default();
    if let Some(win) = window {
        let base = cfg.clock.start_of(&win);
        rec.start_tsc = win.start;
        // One tick more than the window: the tick count was rounded down from the
        // requested ns, and the last deadline of an exact run (D / interval) belongs in it.
        c.end_ns = base + w.scale.to_ns(win.deadline - win.start + 1);
        c.loops = cfg.loops.unwrap_or(u64::MAX);
        c.stop_above_ns = cfg.stop_above_ns.unwrap_or(u64::MAX);
        c.live = shared.show_live.then(|| &*shared.live[w.index]);
        end = cycle(&c, base, &mut rec, producer.as_mut().map(|(p, a)| (p, *a)));
        if let Some(wake) = end.broke {
            stop_everyone(w, shared, cfg, wake, base, end.wakeups);
        }
    }
    let stopped_ns = read_clock(id);
    ThreadMeasurement {
        window,
        index: w.index,
        end,
        stopped_ns,
        rec,
        counters: ThreadCounters::read().since(&before),
        slack_ns,
    }
}

/// Every thread that crosses the stop limit stops the run; the first one also marks the
/// trace, stops tracing and records the break (its wake-up number `wakeup`).
fn stop_everyone(
    w: &Worker<'_>,
    shared: &Shared<'_>,
    cfg: &TimerConfig,
    wake: Wake,
    base: u64,
    wakeup: u64,
) {
    w.stop_all();
    shared.brk.get_or_init(|| {
        let line = format!(
            "jitterscope: hit latency threshold ({:.3} us > {:.3} us) on CPU {}\n",
            wake.lat as f64 / 1e3,
            cfg.stop_above_ns.unwrap_or(0) as f64 / 1e3,
            w.cpu
        );
        BreakRecord {
            cpu: w.cpu,
            thread_index: w.index,
            value_ns: wake.lat,
            at_ns: wake.clock_ns.saturating_sub(base),
            clock_ns: wake.clock_ns,
            tsc: wake.tsc,
            wakeup,
            all_stopped_within_ns: None,
            trace: shared.tracer.fire(&line),
        }
    });
}

/// A live-display callback: every thread's figures so far.
pub type OnTick<'a> = &'a mut dyn FnMut(&[LiveSnapshot]);

/// Runs the timer probe on every measured CPU of `plan`. `on_tick`, if given, runs on the
/// coordinator a few times a second with every thread's figures so far.
pub fn run(
    cfg: &TimerConfig,
    plan: &RunPlan,
    clock: &ClockInfo,
    stop: &AtomicBool,
    tracer: &dyn BreakHook,
    on_tick: Option<(Duration, OnTick<'_>)>,
) -> Result<TimerRun, RunError> {
    run_streaming(cfg, plan, clock, stop, tracer, on_tick, None)
}

/// `run`, each thread handing its wake-ups to its queue of `stream` as they happen.
pub fn run_streaming(
    cfg: &TimerConfig,
    plan: &RunPlan,
    clock: &ClockInfo,
    stop: &AtomicBool,
    tracer: &dyn BreakHook,
    on_tick: Option<(Duration, OnTick<'_>)>,
    stream: Option<Stream<'_>>,
) -> Result<TimerRun, RunError> {
    let cpus = plan.cpus.measured.cpus().to_vec();
    let shared = Shared {
        live: (0..cpus.len()).map(|_| CachePadded::default()).collect(),
        show_live: on_tick.is_some(),
        brk: OnceLock::new(),
        tracer,
        stream,
    };
    let work = |w: &Worker<'_>| measure(w, cfg, &shared);
    let outcome = match on_tick {
        Some((every, f)) => {
            let mut tick = || {
                let snaps: Vec<LiveSnapshot> = (cpus.iter().enumerate())
                    .map(|(i, &cpu)| shared.live[i].snapshot(cpu, i, cfg.interval_of(i)))
                    .collect();
                f(&snaps)
            };
            let monitor = Monitor {
                every,
                tick: &mut tick,
            };
            run::run_monitored(plan, clock.scale, stop, work, Some(monitor))?
        }
        None => run::run(plan, clock.scale, stop, work)?,
    };
    let stopped_by = shared.brk.get().map(|b| BreakRecord {
        all_stopped_within_ns: (outcome.workers.iter())
            .map(|w| w.value.stopped_ns.saturating_sub(b.clock_ns))
            .max(),
        ..*b
    });
    let entries = (outcome.workers.iter())
        .map(|w| to_entry(cfg, plan, clock.scale, w, stopped_by))
        .collect();
    Ok(TimerRun {
        entries,
        outcome: outcome.without_values(),
    })
}

fn to_entry(
    cfg: &TimerConfig,
    plan: &RunPlan,
    scale: Scale,
    w: &run::WorkerOutcome<ThreadMeasurement>,
    stopped_by: Option<BreakRecord>,
) -> TimerEntry {
    let m = &w.value;
    let (index, interval_ns) = (m.index, cfg.interval_of(m.index));
    let start = m.window.map_or(0, |win| win.start);
    let base = m.window.map_or(0, |win| cfg.clock.start_of(&win));
    let runtime_ns = match m.end.wakeups {
        0 => 0,
        _ => m.end.last_ns.saturating_sub(base),
    };
    let requested = plan.sched_for(index);
    let r = &m.rec;
    let corrected = r.corrected();
    TimerEntry {
        cpu: w.cpu,
        thread_index: index,
        config: TimerConfigRecord {
            interval_ns,
            base_interval_ns: cfg.interval_ns,
            distance_ns: cfg.distance_ns,
            aligned: cfg.distance_ns == 0,
            clock: cfg.clock,
            mode: cfg.mode,
            loops: cfg.loops,
            warmup_ns: cfg.warmup.as_nanos() as u64,
            stop_above_ns: cfg.stop_above_ns,
            spikes_above_ns: cfg.spikes_above_ns,
            histogram_us: cfg.histogram_us,
            largest: cfg.largest,
            policy: requested.policy,
            priority: requested.priority,
            dma_latency_us: cfg.dma_latency_us,
            timer_slack_ns: m.slack_ns,
        },
        thread: ThreadRecord::from_worker(w, &m.counters),
        runtime_ns,
        wakeups: m.end.wakeups,
        overruns: r.overruns(),
        summary: r.hist.summary(),
        histogram: HistogramRecord::from_hist(&r.hist),
        corrected: CorrectedRecord {
            method: "skipped-deadlines".into(),
            expected_interval_ns: interval_ns,
            summary: corrected.summary(),
            histogram: HistogramRecord::from_hist(&corrected),
        },
        series: r.series.finish(scale.to_ticks(runtime_ns).max(1)),
        largest: r
            .largest
            .sorted()
            .iter()
            .map(|e| event_out(scale, start, e))
            .collect(),
        spikes: cfg
            .spikes_above_ns
            .map(|_| EventLogRecord::from_log(&r.spikes, scale, start)),
        histogram_1us: cfg.histogram_us.map(|n| BucketHistogram {
            bucket_ns: 1000,
            buckets: n,
            counts: (r.buckets.iter().enumerate())
                .filter(|(_, c)| **c > 0)
                .map(|(i, &c)| [i as u64, c])
                .collect(),
            overflows: r.overflows,
        }),
        stopped_run: stopped_by.filter(|b| b.cpu == w.cpu),
        deadline: match w.sched.policy {
            Policy::Deadline(d) => Some(DeadlineRecord {
                runtime_ns: d.runtime_ns,
                deadline_ns: d.deadline_ns,
                period_ns: d.period_ns,
                work_ns: cfg.work_ns,
                over_runtime: r.over_runtime,
                past_deadline: r.past_deadline,
            }),
            _ => None,
        },
        attribution: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::run::tests::plan;

    #[test]
    fn intervals_grow_by_the_distance_unless_aligned() {
        let mut c = TimerConfig::default();
        assert_eq!(c.interval_of(0), 1_000_000);
        assert_eq!(c.interval_of(2), 2_000_000);
        c.distance_ns = 0;
        assert_eq!(c.interval_of(2), 1_000_000);
    }

    /// An absolute schedule at `interval` ns that began 1 ms ago, ending at `end_ns`
    /// (from `now`, the schedule's base) or after `loops` wake-ups: its base, the
    /// recorder, and what the cycle returned.
    fn late_schedule(
        interval: u64,
        end_ns: impl Fn(u64, u64) -> u64,
        loops: u64,
    ) -> (u64, Recorder, CycleEnd) {
        let cfg = TimerConfig::default();
        let mut rec = Recorder::new(&cfg, interval, Scale::from_hz(1e9));
        let stop = AtomicBool::new(false);
        let now = read_clock(ClockId::Monotonic);
        let base = now - 1_000_000;
        let c = Cycle {
            clock: TimerClock::Monotonic,
            mode: SleepMode::Absolute,
            interval_ns: interval,
            end_ns: end_ns(now, base),
            loops,
            stop_above_ns: u64::MAX,
            stop: &stop,
            live: None,
            job: None,
        };
        let end = cycle(&c, base, &mut rec, None);
        (base, rec, end)
    }

    #[test]
    fn a_late_wakeup_counts_the_deadlines_it_skipped() {
        let interval = 10_000;
        // A schedule that began 1 ms ago: the first wake-up is ~990 µs late and must skip
        // the ~98 deadlines that passed meanwhile, not take them back to back.
        let (base, rec, end) = late_schedule(interval, |now, _| now + 1_000_000_000, 5);
        assert_eq!(end.wakeups, 5);
        assert!(rec.overruns() >= 98, "overruns {}", rec.overruns());
        // Each deadline up to the last wake-up was either taken or counted as skipped.
        assert!((end.wakeups + rec.overruns() + 1) * interval > end.last_ns - base);
        assert!((end.wakeups + rec.overruns()) * interval <= end.last_ns - base);
        // The corrected histogram holds one value per skipped deadline, exactly.
        assert_eq!(rec.corrected().count(), end.wakeups + rec.overruns());
        assert_eq!(rec.hist.count(), 5);
    }

    /// A stall that runs past the run's end skipped only the deadlines inside the run:
    /// wake-ups and skipped deadlines add up to the run's length over the interval
    /// exactly (CI once counted 401 of a 400 ms run's 400 under a build beside).
    #[test]
    fn a_stall_past_the_end_counts_only_the_deadlines_before_it() {
        let interval = 10_000;
        // Began 1 ms ago and ended 500 µs ago: one late wake-up, then the end.
        let (_, rec, end) = late_schedule(interval, |_, base| base + 500_000, u64::MAX);
        assert_eq!(end.wakeups, 1);
        assert_eq!(end.wakeups + rec.overruns(), 500_000 / interval);
    }

    #[test]
    fn sleeps_are_never_early_and_loops_stop_the_run() {
        let cfg = TimerConfig {
            interval_ns: 200_000,
            loops: Some(20),
            histogram_us: Some(100),
            ..TimerConfig::default()
        };
        let (clock, _) = ClockInfo::detect();
        let tracer = NoBreakHook;
        let t0 = std::time::Instant::now();
        let out = run(
            &cfg,
            &plan(10_000),
            &clock,
            &AtomicBool::new(false),
            &tracer,
            None,
        )
        .unwrap();
        // 20 wake-ups at 200 µs (plus the distance for later threads): far less than 10 s.
        assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
        for e in &out.entries {
            // The kernel never wakes a sleeper before its deadline; an early wake-up
            // would show as 0 here.
            assert!(e.summary.min_ns > Some(0), "{:?}", e.summary.min_ns);
            assert_eq!(e.wakeups, 20);
            assert_eq!(e.summary.count, 20);
            assert!(e.runtime_ns >= 20 * e.config.interval_ns);
            let h = e.histogram_1us.as_ref().unwrap();
            let total: u64 = h.counts.iter().map(|p| p[1]).sum::<u64>() + h.overflows;
            assert_eq!(total, 20);
            assert_eq!(e.corrected.summary.count, e.wakeups + e.overruns);
        }
    }

    #[test]
    fn live_cells_report_nothing_until_a_wakeup() {
        let cell = LiveCell::default();
        let s = cell.snapshot(3, 0, 1_000_000);
        assert_eq!((s.cpu, s.count, s.min_ns, s.avg_ns), (3, 0, None, None));
        cell.count.store(2, Ordering::Relaxed);
        cell.sum.store(30, Ordering::Relaxed);
        assert_eq!(cell.snapshot(3, 0, 1_000_000).avg_ns, Some(15.0));
    }
}
