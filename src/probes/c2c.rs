//! Core-to-core latency: how long a cache line takes to travel between two CPUs, for
//! every pair of the selected CPUs (the job of c2clat).
//!
//! For each pair, two pinned threads bounce cache lines. Thread A (on the lower CPU)
//! times samples of N round trips with the TSC; a sample's value is its time over 2N, an
//! estimate of one one-way hand-off in ns. Per pair the entry keeps the min and the
//! median of those values, and their full histogram. A round trip is symmetric (A → B →
//! A), so each unordered pair is measured once and stands for both cells of the matrix.
//!
//! Two modes:
//! - `load` (default): two lines, one per direction, each on its own 128-byte-aligned
//!   slot. A stores sequence n on the first; B spins reading it until it sees n, then
//!   stores n on the second; A spins reading that until it sees n. Each poll is a plain
//!   load that hits the poller's own shared copy until the writer's store invalidates
//!   it, so a hand-off costs the writer's invalidation and then the poller's re-read:
//!   what a flag or a sequence number read by another thread pays.
//! - `cas`: one shared line. A does compare_exchange(2k → 2k+1) in a retry loop, B does
//!   compare_exchange(2k+1 → 2k+2). Every poll, failed ones included, is then a
//!   write-intent access that takes the line in exclusive state, so both threads pull
//!   the line back and forth all the time and each hand-off moves it once: what a lock or
//!   a CAS-based queue pays. It can come out lower than `load` (one transfer per hand-off
//!   instead of an invalidation and a re-read) or higher (the pollers steal the line from
//!   each other), depending on the machine.
//!
//! The spin loops use no `pause`: on recent Intel cores it takes about 140 cycles and
//! would add itself to every hand-off. Each thread first spins for the preheat time, so
//! that its core runs at full clock when the pair starts. Every wait gives up when the run
//! is stopped or the pair's deadline passes, so neither thread can hang on a peer that
//! has gone.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use crossbeam_utils::CachePadded;
use serde::{Deserialize, Serialize};

use crate::engine::clock::{self, ClockInfo, Scale};
use crate::engine::cpu::{CpuList, CpuPlan};
use crate::engine::run::{self, RunError, RunOutcome, RunPlan, ThreadSpec, Window, Worker};
use crate::engine::sched::{MlockGuard, SchedRequest, ThreadCounters};
use crate::engine::topology::{CpuPlace, Locality, Topology};
pub use crate::probes::record::{HistogramRecord, ThreadRecord};
use crate::stats::{LatencyHistogram, Summary};

/// Default samples per pair.
pub const DEFAULT_SAMPLES: u32 = 300;
/// Default round trips per sample.
pub const DEFAULT_ROUND_TRIPS: u32 = 100;
/// Default preheat.
pub const DEFAULT_PREHEAT: Duration = Duration::from_millis(50);
/// A round trip that takes longer than this on average means a thread was kept off its
/// CPU; the pair's deadline allows this much per round trip (plus `DEADLINE_SLACK`).
const ROUND_TRIP_BOUND_NS: u64 = 10_000;
/// Headroom on every pair's deadline, for thread start-up and the first scheduling.
const DEADLINE_SLACK: Duration = Duration::from_secs(1);
/// A spin-wait looks at the stop flag and the deadline once in this many polls: often
/// enough to stop within microseconds, rarely enough that the poll stays a bare load.
const CHECK_EVERY: u32 = 256;

/// How the line is bounced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Two lines, one per direction; pollers load, the owner stores.
    Load,
    /// One shared line, every access a compare-and-swap.
    Cas,
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Mode::Load => "load/store on two lines",
            Mode::Cas => "compare-and-swap on one line",
        })
    }
}

/// A validated configuration of the c2c probe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct C2cConfig {
    pub mode: Mode,
    /// Samples per pair, at least 1.
    pub samples: u32,
    /// Round trips per sample, at least 1.
    pub round_trips: u32,
    /// How long each thread spins on its CPU before the pair is measured.
    pub preheat: Duration,
}

impl Default for C2cConfig {
    fn default() -> Self {
        C2cConfig {
            mode: Mode::Load,
            samples: DEFAULT_SAMPLES,
            round_trips: DEFAULT_ROUND_TRIPS,
            preheat: DEFAULT_PREHEAT,
        }
    }
}

/// Why a configuration was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum C2cConfigError {
    /// `--samples 0`.
    #[error("--samples must be at least 1")]
    NoSamples,
    /// `--round-trips 0`.
    #[error("-n/--round-trips must be at least 1")]
    NoRoundTrips,
}

impl C2cConfig {
    /// Checks what the command line's own parsing cannot (a library caller's values).
    pub fn validate(&self) -> Result<(), C2cConfigError> {
        match (self.samples, self.round_trips) {
            (0, _) => Err(C2cConfigError::NoSamples),
            (_, 0) => Err(C2cConfigError::NoRoundTrips),
            _ => Ok(()),
        }
    }

    /// The longest one pair may take: preheat, every round trip at the generous bound,
    /// and the slack. Workers return as soon as they are done; this only ends a pair whose
    /// thread was kept off its CPU.
    pub fn pair_limit(&self) -> Duration {
        let trips = self.samples as u64 * self.round_trips as u64;
        self.preheat
            + Duration::from_nanos(trips.saturating_mul(ROUND_TRIP_BOUND_NS))
            + DEADLINE_SLACK
    }
}

/// The c2c probe's configuration as recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct C2cConfigRecord {
    pub mode: Mode,
    /// Samples asked for per pair.
    pub samples: u32,
    pub round_trips: u32,
    pub preheat_ns: u64,
    pub policy: crate::engine::sched::Policy,
    pub priority: u8,
}

/// One CPU pair's result: the probe's entry in the result file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct C2cEntry {
    /// The CPU of thread A, which times the samples (the lower of the two).
    pub cpu_a: usize,
    /// The CPU of thread B, which answers.
    pub cpu_b: usize,
    pub locality: Locality,
    pub place_a: CpuPlace,
    pub place_b: CpuPlace,
    pub config: C2cConfigRecord,
    pub thread_a: ThreadRecord,
    pub thread_b: ThreadRecord,
    /// Samples measured: fewer than `config.samples` when the run was interrupted or the
    /// pair hit its time limit.
    pub samples: u64,
    /// The smallest sample, as a one-way time (sample time / 2N); null without samples.
    pub min_ns: Option<f64>,
    /// The median sample, as a one-way time.
    pub median_ns: Option<f64>,
    /// Distribution of the per-sample one-way times, each rounded to whole ns.
    pub summary: Summary,
    pub histogram: HistogramRecord,
}

/// The whole probe's outcome.
pub struct C2cRun {
    pub entries: Vec<C2cEntry>,
    /// Every pair's run, merged: workers of every pair, the first pair's window, the
    /// summed elapsed time, interrupted if any pair was.
    pub outcome: RunOutcome<()>,
    /// Pairs that were due but not started because the run was stopped.
    pub pairs_skipped: usize,
}

/// Every unordered pair of distinct CPUs in `cpus`, lower CPU first, in CPU order.
pub fn pairs(cpus: &CpuList) -> Vec<(usize, usize)> {
    let c = cpus.cpus();
    (0..c.len())
        .flat_map(|i| (i + 1..c.len()).map(move |j| (c[i], c[j])))
        .collect()
}

/// Measures every pair of `pairs` in turn. `plan` gives the policy, mlock, and the
/// coordinator's CPUs (each pair's coordinator uses them less the pair's own two);
/// `topo` gives each entry's places and locality; `progress(done, total)` is called after
/// each pair. Memory is locked once for the whole run, not once per pair.
pub fn run(
    cfg: &C2cConfig,
    plan: &RunPlan,
    pairs: &[(usize, usize)],
    topo: &Topology,
    clock: &ClockInfo,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<C2cRun, RunError> {
    let (_mlock, mlock_error) = match plan.mlock {
        true => match MlockGuard::lock() {
            Ok(g) => (Some(g), None),
            Err(r) => (None, Some(r.into_error(false))),
        },
        false => (None, None),
    };
    let mut total = RunOutcome::none();
    total.mlock_error = mlock_error;
    let mut entries = Vec::new();
    let mut started = 0;
    for &(a, b) in pairs {
        if stop.load(Ordering::Relaxed) {
            total.interrupted = true;
            break;
        }
        started += 1;
        let outcome = run_pair(cfg, &pair_plan(cfg, plan, a, b), clock.scale, stop)?;
        let interrupted = outcome.interrupted;
        if let Some(e) = to_entry(cfg, plan.sched, clock.scale, topo, (a, b), &outcome) {
            entries.push(e);
        }
        total.absorb(outcome.without_values());
        progress(started, pairs.len());
        if interrupted {
            break;
        }
    }
    Ok(C2cRun {
        entries,
        outcome: total,
        pairs_skipped: pairs.len() - started,
    })
}

/// One pair's plan: the two CPUs measured, the coordinator on the others, memory already
/// locked by the caller.
fn pair_plan(cfg: &C2cConfig, plan: &RunPlan, a: usize, b: usize) -> RunPlan {
    let measured = CpuList::from_cpus(vec![a, b]);
    RunPlan {
        cpus: CpuPlan {
            housekeeping: plan.cpus.housekeeping.without(&measured),
            measured,
        },
        sched: plan.sched,
        mlock: false,
        duration: cfg.pair_limit(),
        priospread: false,
        setup_timeout: plan.setup_timeout,
    }
}

/// What one side of a pair hands back.
struct Side {
    /// Thread A's sample times in ticks (B's is empty).
    ticks: Vec<u64>,
    counters: ThreadCounters,
}

/// The lines the two threads bounce, each in its own 128-byte slot so that neither shares
/// a line (or an adjacent-line prefetch pair) with the other. `cas` uses `ping` only.
#[derive(Default)]
struct Lines {
    ping: CachePadded<AtomicU64>,
    pong: CachePadded<AtomicU64>,
}

/// Runs one pair: A on `plan`'s lower CPU, B on the other.
fn run_pair(
    cfg: &C2cConfig,
    plan: &RunPlan,
    scale: Scale,
    stop: &AtomicBool,
) -> Result<RunOutcome<Side>, RunError> {
    let threads: Vec<ThreadSpec> = (plan.cpus.measured.cpus().iter())
        .map(|&cpu| ThreadSpec {
            cpu,
            sched: plan.sched,
        })
        .collect();
    let lines = Lines::default();
    // Real-time threads spinning at the gate on the coordinator's only CPUs would keep
    // it from ever opening the gate: they wait asleep instead (the preheat warms the
    // cores again).
    let nap = plan.sched.policy.is_realtime() && plan.cpus.coordinator_shares();
    run::run_threads(
        plan,
        &threads,
        scale,
        stop,
        |w| side(w, cfg, &lines, nap),
        None,
    )
}

/// One thread's whole job: allocate, wait for the start (asleep when `nap`), preheat,
/// bounce.
fn side(w: &Worker<'_>, cfg: &C2cConfig, lines: &Lines, nap: bool) -> Side {
    let is_a = w.index == 0;
    // Filled (not only reserved) now, so that no page is first touched while measuring.
    let mut ticks = vec![0u64; if is_a { cfg.samples as usize } else { 0 }];
    let before = ThreadCounters::read();
    let gate = if nap {
        w.ready_and_sleep()
    } else {
        w.ready_and_wait()
    };
    let Some(window) = gate else {
        return Side {
            ticks: Vec::new(),
            counters: ThreadCounters::default(),
        };
    };
    let stop = w.stop_flag();
    let preheat_end = window.start + w.scale.to_ticks(cfg.preheat.as_nanos() as u64);
    preheat(preheat_end.min(window.deadline), stop);
    let done = match (cfg.mode, is_a) {
        (Mode::Load, true) => load_a(lines, cfg.round_trips, &mut ticks, &window, stop),
        (Mode::Load, false) => {
            load_b(lines, total_trips(cfg), &window, stop);
            0
        }
        (Mode::Cas, true) => cas_a(lines, cfg.round_trips, &mut ticks, &window, stop),
        (Mode::Cas, false) => {
            cas_b(lines, total_trips(cfg) + 1, &window, stop);
            0
        }
    };
    ticks.truncate(done);
    Side {
        ticks,
        counters: ThreadCounters::read().since(&before),
    }
}

fn total_trips(cfg: &C2cConfig) -> u64 {
    cfg.samples as u64 * cfg.round_trips as u64
}

/// Keeps the core busy (and so at full clock) until `end` or a stop.
fn preheat(end: u64, stop: &AtomicBool) {
    while clock::now() < end && !stop.load(Ordering::Relaxed) {}
}

/// Spins until `ready()`; false when the run was stopped or `deadline` passed first.
#[inline(always)]
fn spin_until(mut ready: impl FnMut() -> bool, stop: &AtomicBool, deadline: u64) -> bool {
    let mut polls: u32 = 0;
    loop {
        if ready() {
            return true;
        }
        polls = polls.wrapping_add(1);
        if polls.is_multiple_of(CHECK_EVERY)
            && (stop.load(Ordering::Relaxed) || clock::now() > deadline)
        {
            return false;
        }
    }
}

/// Thread A in `load` mode: fills `ticks` with the time of each sample of `n` round
/// trips, back to back. Returns how many samples it completed.
fn load_a(lines: &Lines, n: u32, ticks: &mut [u64], window: &Window, stop: &AtomicBool) -> usize {
    let mut seq = 0u64;
    let mut last = clock::now_ordered();
    for (done, slot) in ticks.iter_mut().enumerate() {
        for _ in 0..n {
            seq += 1;
            lines.ping.store(seq, Ordering::Release);
            let want = seq;
            if !spin_until(
                || lines.pong.load(Ordering::Acquire) == want,
                stop,
                window.deadline,
            ) {
                return done;
            }
        }
        let now = clock::now_ordered();
        *slot = now - last;
        last = now;
    }
    ticks.len()
}

/// Thread B in `load` mode: answers `trips` sequence numbers.
fn load_b(lines: &Lines, trips: u64, window: &Window, stop: &AtomicBool) {
    for seq in 1..=trips {
        if !spin_until(
            || lines.ping.load(Ordering::Acquire) == seq,
            stop,
            window.deadline,
        ) {
            break;
        }
        lines.pong.store(seq, Ordering::Release);
    }
}

/// Swaps `from` for `from + 1` on the shared line, retrying until it holds `from`.
#[inline(always)]
fn cas_step(line: &AtomicU64, from: u64, stop: &AtomicBool, deadline: u64) -> bool {
    spin_until(
        || {
            line.compare_exchange(from, from + 1, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        },
        stop,
        deadline,
    )
}

/// Thread A in `cas` mode. Its first swap (0 → 1) starts the ball; from then on each of
/// its swaps needs one full round trip (B's swap, then its own), so the time from one
/// sample's last swap to the next's is exactly `n` round trips.
fn cas_a(lines: &Lines, n: u32, ticks: &mut [u64], window: &Window, stop: &AtomicBool) -> usize {
    let line = &*lines.ping;
    if !cas_step(line, 0, stop, window.deadline) {
        return 0;
    }
    let mut k = 0u64;
    let mut last = clock::now_ordered();
    for (done, slot) in ticks.iter_mut().enumerate() {
        for _ in 0..n {
            k += 1;
            if !cas_step(line, 2 * k, stop, window.deadline) {
                return done;
            }
        }
        let now = clock::now_ordered();
        *slot = now - last;
        last = now;
    }
    ticks.len()
}

/// Thread B in `cas` mode: answers `swaps` of A's swaps (2k+1 → 2k+2).
fn cas_b(lines: &Lines, swaps: u64, window: &Window, stop: &AtomicBool) {
    let line = &*lines.ping;
    for k in 0..swaps {
        if !cas_step(line, 2 * k + 1, stop, window.deadline) {
            break;
        }
    }
}

/// One-way times in ns from sample times in ticks: ticks → ns, over 2N.
pub fn one_way_ns(scale: Scale, ticks: &[u64], round_trips: u32) -> Vec<f64> {
    let per = 2.0 * round_trips as f64;
    ticks.iter().map(|&t| scale.to_ns(t) as f64 / per).collect()
}

pub use crate::stats::rank::median;

/// The pair's entry, or none when it was interrupted before its first sample (a pair
/// that ran out of time with no sample is kept: that is a finding).
fn to_entry(
    cfg: &C2cConfig,
    req: SchedRequest,
    scale: Scale,
    topo: &Topology,
    (a, b): (usize, usize),
    outcome: &RunOutcome<Side>,
) -> Option<C2cEntry> {
    let side_of = |cpu| outcome.workers.iter().find(|w| w.cpu == cpu);
    let (wa, wb) = (side_of(a)?, side_of(b)?);
    if wa.value.ticks.is_empty() && outcome.interrupted {
        return None;
    }
    let values = one_way_ns(scale, &wa.value.ticks, cfg.round_trips);
    let mut hist = LatencyHistogram::new();
    for v in &values {
        hist.record(v.round() as u64);
    }
    let place = |cpu| {
        topo.place(cpu)
            .cloned()
            .unwrap_or_else(|| CpuPlace::unknown(cpu))
    };
    Some(C2cEntry {
        cpu_a: a,
        cpu_b: b,
        locality: topo.locality(a, b),
        place_a: place(a),
        place_b: place(b),
        config: C2cConfigRecord {
            mode: cfg.mode,
            samples: cfg.samples,
            round_trips: cfg.round_trips,
            preheat_ns: cfg.preheat.as_nanos() as u64,
            policy: req.policy,
            priority: req.priority,
        },
        thread_a: ThreadRecord::from_worker(wa, &wa.value.counters),
        thread_b: ThreadRecord::from_worker(wb, &wb.value.counters),
        samples: values.len() as u64,
        min_ns: values.iter().copied().min_by(f64::total_cmp),
        median_ns: median(&values),
        summary: hist.summary(),
        histogram: HistogramRecord::from_hist(&hist),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::cpu::CpuUniverse;

    #[test]
    fn pairs_are_every_unordered_pair_once() {
        let p = pairs(&CpuList::parse_kernel("1,3-4").unwrap());
        assert_eq!(p, vec![(1, 3), (1, 4), (3, 4)]);
        assert!(pairs(&CpuList::from_cpus(vec![2])).is_empty());
        assert_eq!(pairs(&CpuList::parse_kernel("0-7").unwrap()).len(), 28);
    }

    #[test]
    fn one_way_is_sample_time_over_twice_the_round_trips() {
        // 1 tick = 1 ns: 2000 ticks over 10 round trips is 100 ns each way.
        assert_eq!(one_way_ns(Scale::NS, &[2000, 3000], 10), vec![100.0, 150.0]);
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn config_checks_and_limits() {
        let c = C2cConfig::default();
        assert!(c.validate().is_ok());
        let zero = C2cConfig {
            samples: 0,
            ..c.clone()
        };
        assert_eq!(zero.validate(), Err(C2cConfigError::NoSamples));
        // 30 000 round trips at 10 µs, plus 50 ms preheat and 1 s slack.
        assert_eq!(c.pair_limit(), Duration::from_millis(50 + 300 + 1000));
    }

    /// The probe itself on two real CPUs, both modes: every sample present and plausible.
    #[test]
    fn measures_a_pair_in_both_modes() {
        let u = CpuUniverse::detect().unwrap();
        let usable = u.usable();
        if usable.len() < 2 {
            eprintln!("SKIPPED measures_a_pair_in_both_modes: needs 2 CPUs");
            return;
        }
        let two = CpuList::from_cpus(usable.cpus()[..2].to_vec());
        let (clock, _) = ClockInfo::detect();
        let plan = RunPlan {
            cpus: CpuPlan {
                measured: two.clone(),
                housekeeping: usable.without(&two),
            },
            sched: SchedRequest::OTHER,
            mlock: false,
            duration: Duration::from_secs(1),
            priospread: false,
            setup_timeout: Duration::from_secs(5),
        };
        let topo = Topology::detect(&two);
        for mode in [Mode::Load, Mode::Cas] {
            let cfg = C2cConfig {
                mode,
                samples: 20,
                round_trips: 20,
                preheat: Duration::from_millis(1),
            };
            let stop = AtomicBool::new(false);
            let mut calls = 0;
            let run = run(
                &cfg,
                &plan,
                &pairs(&two),
                &topo,
                &clock,
                &stop,
                &mut |_, _| calls += 1,
            )
            .unwrap();
            assert_eq!(calls, 1);
            assert_eq!(run.entries.len(), 1, "{mode:?}");
            let e = &run.entries[0];
            assert_eq!((e.cpu_a, e.cpu_b), (two.cpus()[0], two.cpus()[1]));
            assert_eq!(e.samples, 20, "{mode:?}");
            assert_eq!(e.summary.count, 20);
            let (min, med) = (e.min_ns.unwrap(), e.median_ns.unwrap());
            assert!(
                min > 0.0 && min <= med && med < 100_000.0,
                "{mode:?} {min} {med}"
            );
        }
    }

    /// A stop request before the first pair measures nothing and says it was interrupted.
    #[test]
    fn a_stopped_run_skips_its_pairs() {
        let cpus = CpuList::from_cpus(vec![0, 1]);
        let (clock, _) = ClockInfo::detect();
        let plan = RunPlan {
            cpus: CpuPlan {
                measured: cpus.clone(),
                housekeeping: CpuList::default(),
            },
            sched: SchedRequest::OTHER,
            mlock: false,
            duration: Duration::from_secs(1),
            priospread: false,
            setup_timeout: Duration::from_secs(5),
        };
        let stop = AtomicBool::new(true);
        let topo = Topology::default();
        let run = run(
            &C2cConfig::default(),
            &plan,
            &pairs(&cpus),
            &topo,
            &clock,
            &stop,
            &mut |_, _| {},
        )
        .unwrap();
        assert!(run.entries.is_empty());
        assert!(run.outcome.interrupted);
        assert_eq!(run.pairs_skipped, 1);
    }
}
