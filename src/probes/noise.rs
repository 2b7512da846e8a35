//! OS noise by counter polling: the job of osjitter, oslat, sysjitter and hiccups.
//!
//! A pinned thread reads the counter back to back. A step above the threshold is an
//! interruption; its duration is the step minus the loop's own minimum period (the part
//! of the step the loop itself would have taken). Steps below the threshold only update
//! the minimum and the iteration count, so the loop stays a handful of instructions
//! around the counter read.
//!
//! The loop's period distribution (its detection resolution) is sampled, one step in
//! 1024, because counting every step into a histogram would slow the very loop it
//! describes (measured here: the median step doubled, 10 ns to 20 ns).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::engine::clock::{self, ClockInfo, Scale};
use crate::engine::run::{self, RunError, RunOutcome, RunPlan, Window, Worker};
use crate::engine::sched::{Policy, SchedRequest, ThreadCounters};
use crate::probes::deadline_gaps::Throttle;
use crate::probes::record::event_out;
pub use crate::probes::record::{EventLogRecord, HistogramRecord, ThreadRecord};
use crate::stats::events::{EventOut, GapProducer, GapRing};
use crate::stats::series;
use crate::stats::{
    Event, EventLog, IntervalSeries, Largest, LatencyHistogram, SeriesOut, Summary,
};

/// The default threshold. Loop jitter from cache and TLB misses, the SMT sibling and
/// frequency changes stays in the tens to hundreds of ns; the shortest real interruption
/// (an interrupt's entry and exit) costs about a µs even on bare metal. 1 µs separates
/// the two and is what the result records.
pub const DEFAULT_THRESHOLD_NS: u64 = 1_000;
/// Default number of largest events kept per CPU.
pub const DEFAULT_LARGEST: usize = 64;
/// Default warm-up.
pub const DEFAULT_WARMUP: Duration = Duration::from_millis(100);

/// A validated configuration of the noise probe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoiseConfig {
    pub threshold_ns: u64,
    pub warmup: Duration,
    pub largest: usize,
    /// Keep every interruption with its timestamp, up to this many per CPU (0: none).
    pub event_log: usize,
}

impl Default for NoiseConfig {
    fn default() -> Self {
        NoiseConfig {
            threshold_ns: DEFAULT_THRESHOLD_NS,
            warmup: DEFAULT_WARMUP,
            largest: DEFAULT_LARGEST,
            event_log: 0,
        }
    }
}

/// A noise configuration that cannot be measured.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoiseConfigError {
    /// The threshold is 0 or longer than an hour.
    #[error("threshold {0} ns: expected from 1 ns to one hour")]
    Threshold(u64),
    /// The warm-up is longer than a minute.
    #[error("warm-up {0:?}: expected at most 60s")]
    Warmup(Duration),
    /// Too many largest events, or too long an event log, to keep in fixed memory.
    #[error("{what} {n}: expected at most {max}")]
    TooMany {
        what: &'static str,
        n: usize,
        max: usize,
    },
}

impl NoiseConfig {
    /// Checks what the flags' parsers check, for configs built in code (the main job).
    pub fn validate(&self) -> Result<(), NoiseConfigError> {
        if !(1..=3_600_000_000_000).contains(&self.threshold_ns) {
            return Err(NoiseConfigError::Threshold(self.threshold_ns));
        }
        if self.warmup > Duration::from_secs(60) {
            return Err(NoiseConfigError::Warmup(self.warmup));
        }
        let limits = [
            ("largest events", self.largest, 10_000),
            ("event log", self.event_log, 10_000_000),
        ];
        match limits.into_iter().find(|(_, n, max)| n > max) {
            Some((what, n, max)) => Err(NoiseConfigError::TooMany { what, n, max }),
            None => Ok(()),
        }
    }
}

/// The loop's own period: the detection resolution.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct LoopPeriod {
    /// Shortest step seen during the run.
    pub min_ns: f64,
    /// Median step, from one step in 1024 sampled during the run.
    pub median_ns: f64,
    /// Mean uninterrupted step over the run: (runtime − interrupted) / iterations.
    pub mean_ns: f64,
}

/// The noise probe's configuration as recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NoiseConfigRecord {
    pub threshold_ns: u64,
    pub warmup_ns: u64,
    pub largest: usize,
    pub event_log: usize,
    pub policy: crate::engine::sched::Policy,
    pub priority: u8,
}

/// One CPU's noise result: the probe's entry in the result file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NoiseEntry {
    pub cpu: usize,
    pub config: NoiseConfigRecord,
    pub thread: ThreadRecord,
    /// The CPU's measuring window.
    pub runtime_ns: u64,
    pub iterations: u64,
    pub loop_period: LoopPeriod,
    pub interruptions: u64,
    pub rate_per_s: f64,
    pub interrupted_ns: u64,
    /// interrupted_ns as a percentage of runtime_ns (under SCHED_DEADLINE, of runtime_ns
    /// less the deadline's own throttled time).
    pub interrupted_pct: f64,
    /// Distribution of interruption durations.
    pub summary: Summary,
    pub histogram: HistogramRecord,
    pub series: SeriesOut,
    /// The largest interruptions, largest first.
    pub largest: Vec<EventOut>,
    pub events: Option<EventLogRecord>,
    /// What the gaps were made of, from kernel trace events (`--trace`); absent
    /// without a trace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attribution: Option<crate::stats::causes::Attribution>,
    /// Under SCHED_DEADLINE: the time the scheduler withheld between runtimes, kept out
    /// of the interruptions (interrupted_pct is of the time left to the loop).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<DeadlineGaps>,
}

/// A deadline loop's own gaps (probes::deadline_gaps).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeadlineGaps {
    pub runtime_ns: u64,
    pub deadline_ns: u64,
    pub period_ns: u64,
    /// Throttled stretches, from the runtime's end to the next period's start.
    pub throttled: u64,
    pub throttled_ns: u64,
}

/// Everything one worker hands back.
struct CpuMeasurement {
    window: Option<Window>,
    stats: LoopStats,
    /// Median loop step in ticks, sampled during the run.
    median_step: u64,
    hist: LatencyHistogram,
    series: IntervalSeries,
    largest: Largest,
    log: EventLog,
    counters: ThreadCounters,
    throttle: Option<Throttle>,
}

/// The whole probe's outcome.
pub struct NoiseRun {
    pub entries: Vec<NoiseEntry>,
    pub outcome: RunOutcome<()>,
}

/// Runs the noise probe on every measured CPU of `plan`.
pub fn run(
    cfg: &NoiseConfig,
    plan: &RunPlan,
    clock: &ClockInfo,
    stop: &AtomicBool,
) -> Result<NoiseRun, RunError> {
    run_with(cfg, plan, clock, stop, Histograms::Encoded)
}

/// What the entries carry of each CPU's histogram, once it is summarized.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Histograms {
    /// Encoded in full, for a result that is saved or printed.
    Encoded,
    /// Left out (`HistogramRecord::omitted`): nothing reads more than the summary.
    Omitted,
}

/// `run`, choosing what becomes of the histograms.
pub fn run_with(
    cfg: &NoiseConfig,
    plan: &RunPlan,
    clock: &ClockInfo,
    stop: &AtomicBool,
    histograms: Histograms,
) -> Result<NoiseRun, RunError> {
    run_streaming(cfg, plan, clock, stop, histograms, &[])
}

/// `run_with`, handing each measured CPU's gaps, as they happen, to the ring of its
/// index in `rings` (where there is one) for a reader to consume during the run.
pub fn run_streaming(
    cfg: &NoiseConfig,
    plan: &RunPlan,
    clock: &ClockInfo,
    stop: &AtomicBool,
    histograms: Histograms,
    rings: &[GapRing],
) -> Result<NoiseRun, RunError> {
    let scale = clock.scale;
    let outcome = run::run(plan, scale, stop, |w| measure(w, cfg, rings.get(w.index)))?;
    let entries = (outcome.workers.iter())
        .map(|w| to_entry(cfg, plan.sched, scale, w, histograms))
        .collect();
    let outcome = outcome.without_values();
    Ok(NoiseRun { entries, outcome })
}

/// Steps longer than this many ticks are not loop periods; the sampler clamps them.
const PERIOD_BUCKETS: usize = 512;
/// One step in `SAMPLE_EVERY` is counted into the period histogram: enough for a stable
/// median, and rare enough that the counting does not slow the loop it describes.
const SAMPLE_EVERY: u64 = 1024;

/// A sampled histogram of the loop's own steps, in ticks.
struct PeriodSampler {
    counts: [u32; PERIOD_BUCKETS],
}

impl PeriodSampler {
    fn new() -> PeriodSampler {
        PeriodSampler {
            counts: [0; PERIOD_BUCKETS],
        }
    }

    #[inline(always)]
    fn sample(&mut self, step: u64) {
        let c = &mut self.counts[(step as usize).min(PERIOD_BUCKETS - 1)];
        *c = c.saturating_add(1);
    }

    /// The median step in ticks, ignoring steps beyond the histogram (interruptions).
    fn median_ticks(&self) -> u64 {
        let kept = &self.counts[..PERIOD_BUCKETS - 1];
        let total: u64 = kept.iter().map(|&c| c as u64).sum();
        let mut seen = 0;
        kept.iter()
            .position(|&c| {
                seen += c as u64;
                total > 0 && seen * 2 >= total
            })
            .unwrap_or(0) as u64
    }
}

/// What one pass of the loop saw.
#[derive(Debug, Clone, Copy, Default)]
struct LoopStats {
    end: u64,
    iterations: u64,
    min_step: u64,
}

/// What the hot loop writes to on an interruption. All of it is owned by the measuring
/// thread and preallocated.
struct Recorder<'r> {
    scale: Scale,
    start: u64,
    loop_min: u64,
    hist: LatencyHistogram,
    series: IntervalSeries,
    largest: Largest,
    log: EventLog,
    stream: Option<GapProducer<'r>>,
}

impl Recorder<'_> {
    /// Records a step of `step` ticks that began at `at`.
    #[inline(never)]
    #[cold]
    fn interruption(&mut self, at: u64, step: u64) {
        let ns = self.scale.to_ns(step.saturating_sub(self.loop_min));
        self.hist.record(ns);
        let event = Event {
            start_ticks: at,
            duration_ns: ns,
        };
        self.largest.offer(event);
        self.log.push(event);
        if let Some(p) = &mut self.stream {
            p.push(event);
        }
        self.series.record(at.saturating_sub(self.start), ns);
    }

    /// Runs the interruption path once and forgets it, so that its code and data are
    /// resident (and locked) before measuring rather than faulted in by the first event.
    fn prime(&mut self) {
        self.interruption(self.start, self.loop_min + 1);
        self.hist.clear();
        self.series.clear();
        self.largest.clear();
        self.log.clear();
    }
}

/// The measuring thread's whole job.
fn measure(w: &Worker<'_>, cfg: &NoiseConfig, ring: Option<&GapRing>) -> CpuMeasurement {
    let scale = w.scale;
    let mut rec = Recorder {
        scale,
        start: 0,
        loop_min: 0,
        hist: LatencyHistogram::new(),
        series: IntervalSeries::new(
            series::CAPACITY,
            series::FIRST_INTERVAL_NS,
            scale.to_ticks(series::FIRST_INTERVAL_NS),
        ),
        largest: Largest::new(cfg.largest),
        log: EventLog::new(cfg.event_log),
        stream: None,
    };
    // Warm-up: the same loop, recording nothing, to warm caches and find the loop's own
    // minimum step (subtracted from every interruption).
    let mut periods = PeriodSampler::new();
    let warm_end = clock::now() + scale.to_ticks(cfg.warmup.as_nanos() as u64);
    let warm = spin(
        clock::now(),
        warm_end,
        u64::MAX,
        u64::MAX,
        w.stop_flag(),
        &mut periods,
        &mut |_, _| {},
    );
    rec.loop_min = warm.min_step;
    rec.prime();
    // Only now: priming must not hand the reader a gap that never was.
    let tid = rustix::thread::gettid().as_raw_nonzero().get() as u32;
    rec.stream = ring.map(|r| r.producer(tid, rec.loop_min));
    periods = PeriodSampler::new();
    let threshold = scale.to_ticks(cfg.threshold_ns).max(1);
    let bookkeeping = scale.to_ticks(BOOKKEEPING_NS);
    let before = ThreadCounters::read();
    let window = w.ready_and_wait();
    let mut throttle = match w.sched.policy {
        Policy::Deadline(d) => Some(Throttle::new(&d, scale)),
        _ => None,
    };
    let stats = match (window, &mut throttle) {
        (Some(win), None) => {
            rec.start = win.start;
            spin(
                win.start,
                win.deadline,
                threshold,
                bookkeeping,
                w.stop_flag(),
                &mut periods,
                &mut |at, step| rec.interruption(at, step),
            )
        }
        (Some(win), Some(t)) => {
            rec.start = win.start;
            let mut gap = |at, step| {
                if let Some((at, step)) = t.split(at, step)
                    && step > threshold
                {
                    rec.interruption(at, step)
                }
            };
            spin(
                win.start,
                win.deadline,
                threshold,
                bookkeeping,
                w.stop_flag(),
                &mut periods,
                &mut gap,
            )
        }
        (None, _) => LoopStats::default(),
    };
    let counters = ThreadCounters::read().since(&before);
    CpuMeasurement {
        window,
        stats,
        median_step: periods.median_ticks(),
        hist: rec.hist,
        series: rec.series,
        largest: rec.largest,
        log: rec.log,
        counters,
        throttle,
    }
}

/// What the bookkeeping of one gap may take on its own, at most: its stretch counts as
/// an interruption (its own time in it) only past this. It is mostly tens of ns, but
/// after a long gap its memory is cold: in a debug build beside builds on this 2-vCPU
/// guest it took 1–5 µs, up to 90 µs, on 40 % of the gaps in half the runs (and never
/// over 1 µs in the others), with no kernel event inside. A hold shorter than this that
/// begins in it still goes unseen, as before.
const BOOKKEEPING_NS: u64 = 100_000;

/// The hot loop. Per iteration: one counter read, a subtraction, a min, a compare, the
/// sampling test, and the deadline and stop checks (a register compare and a load from a
/// line nobody writes until the end). No allocation, no syscall, no shared write.
/// `on_interruption(start, step)` runs for steps above `threshold`. It is a `dyn` call,
/// taken only on interruptions, so that warm-up and measurement execute the very same
/// machine code.
///
/// Every instant from `from` (the window's start) to the end is inside some step: the
/// first step starts at `from`, not at the first read (a loop kept off its CPU across the
/// start saw nothing of it), the stretch of the bookkeeping after a gap is checked past
/// what it may take itself (`bookkeeping` ticks, [`BOOKKEEPING_NS`]), and the stretch
/// from the last read to the stop flag's load like a step. Issue 36:
/// beside builds, a SCHED_OTHER loop logged no gap over about one 1.5 ms hold in 130 on
/// its own CPU: the holder had taken the CPU during the bookkeeping of the gap before
/// (2.6–22 µs after it ended, debug build), before the start, or between the last read
/// and the stop, and the loop restarted its step after.
#[inline(never)]
fn spin(
    from: u64,
    deadline: u64,
    threshold: u64,
    bookkeeping: u64,
    stop: &AtomicBool,
    periods: &mut PeriodSampler,
    on_interruption: &mut dyn FnMut(u64, u64),
) -> LoopStats {
    let mut prev = from;
    let mut iterations: u64 = 0;
    let mut min_step = u64::MAX;
    loop {
        let t = clock::now();
        // Saturating: a step can only go backwards if the thread left its CPU.
        let step = t.saturating_sub(prev);
        iterations += 1;
        min_step = min_step.min(step);
        if iterations.is_multiple_of(SAMPLE_EVERY) {
            periods.sample(step);
        }
        if step > threshold {
            on_interruption(prev, step);
            // The bookkeeping's own time is not counted as the next step, unless it is
            // longer than the bookkeeping could take: something took the CPU during it.
            let after = clock::now();
            prev = match after.saturating_sub(t) > threshold.max(bookkeeping) {
                true => t,
                false => after,
            };
        } else {
            prev = t;
        }
        if t >= deadline || stop.load(Ordering::Relaxed) {
            // The stop flag was read after `t`: what took the CPU in between is checked
            // like a step, if it began inside the window.
            let last = clock::now();
            let step = last.saturating_sub(prev);
            if step > threshold && prev < deadline {
                on_interruption(prev, step);
            }
            return LoopStats {
                end: last,
                iterations,
                min_step,
            };
        }
    }
}

fn to_entry(
    cfg: &NoiseConfig,
    requested: SchedRequest,
    scale: Scale,
    w: &run::WorkerOutcome<CpuMeasurement>,
    histograms: Histograms,
) -> NoiseEntry {
    let m = &w.value;
    let start = m.window.map(|win| win.start).unwrap_or(0);
    let run_ticks = m.stats.end.saturating_sub(start);
    let runtime_ns = scale.to_ns(run_ticks);
    let summary = m.hist.summary();
    let interrupted_ns = summary.sum_ns;
    let tick_ns = scale.to_ns(1 << 20) as f64 / (1u64 << 20) as f64;
    let deadline = match (w.sched.policy, &m.throttle) {
        (Policy::Deadline(d), Some(t)) => Some(DeadlineGaps {
            runtime_ns: d.runtime_ns,
            deadline_ns: d.deadline_ns,
            period_ns: d.period_ns,
            throttled: t.count,
            throttled_ns: scale.to_ns(t.ticks),
        }),
        _ => None,
    };
    // The loop's own time: the deadline's throttling is neither noise nor loop.
    let loop_ns = runtime_ns.saturating_sub(deadline.map_or(0, |d| d.throttled_ns));
    let uninterrupted = loop_ns.saturating_sub(interrupted_ns) as f64;
    let events = (cfg.event_log > 0).then(|| EventLogRecord::from_log(&m.log, scale, start));
    let secs = runtime_ns as f64 / 1e9;
    NoiseEntry {
        cpu: w.cpu,
        config: NoiseConfigRecord {
            threshold_ns: cfg.threshold_ns,
            warmup_ns: cfg.warmup.as_nanos() as u64,
            largest: cfg.largest,
            event_log: cfg.event_log,
            policy: requested.policy,
            priority: requested.priority,
        },
        thread: ThreadRecord::from_worker(w, &m.counters),
        runtime_ns,
        iterations: m.stats.iterations,
        loop_period: LoopPeriod {
            min_ns: if m.stats.iterations == 0 {
                0.0
            } else {
                m.stats.min_step as f64 * tick_ns
            },
            median_ns: m.median_step as f64 * tick_ns,
            mean_ns: if m.stats.iterations == 0 {
                0.0
            } else {
                uninterrupted / m.stats.iterations as f64
            },
        },
        interruptions: summary.count,
        rate_per_s: if secs > 0.0 {
            summary.count as f64 / secs
        } else {
            0.0
        },
        interrupted_ns,
        interrupted_pct: if loop_ns > 0 {
            interrupted_ns as f64 * 100.0 / loop_ns as f64
        } else {
            0.0
        },
        histogram: match histograms {
            Histograms::Encoded => HistogramRecord::from_hist(&m.hist),
            Histograms::Omitted => HistogramRecord::omitted(),
        },
        series: m.series.finish(run_ticks.max(1)),
        largest: m
            .largest
            .sorted()
            .iter()
            .map(|e| event_out(scale, start, e))
            .collect(),
        events,
        attribution: None,
        deadline,
        summary,
    }
}
