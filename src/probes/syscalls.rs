//! The cost of single calls: syscalls, vDSO clock reads, counter reads, a sleep of 0:
//! osjitter's bench_syscalls, with distributions instead of a mean.
//!
//! Each sample times a batch of K calls between two fenced counter reads, subtracts the
//! timing's own cost (the median of empty timed sections, measured first) and divides by
//! K. K is chosen per call so that a batch takes about a µs (at most 64): a call of a few
//! ns timed alone would be mostly the fences around it. `--batch 1` times every call on
//! its own. Whether a clock read went through the vDSO is not assumed: a read cheaper
//! than the invalid syscall (the bare kernel entry and exit, measured alongside) cannot
//! have entered the kernel.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::engine::calls;
use crate::engine::clock::{self, ClockInfo, Scale};
use crate::engine::ipc::PthreadCond;
use crate::engine::run::{self, RunError, RunOutcome, RunPlan, ThreadSpec, Worker};
use crate::engine::sched::ThreadCounters;
use crate::probes::record::{HistogramRecord, ThreadRecord};
use crate::stats::{LatencyHistogram, Summary};

/// A batch aims to take about this long.
const BATCH_TARGET_NS: u64 = 1_000;
const MAX_BATCH: u32 = 64;
/// Empty timed sections used to measure the timing's own cost.
const OVERHEAD_SAMPLES: usize = 2_001;

/// One call that can be timed. Stored in results under the name `--only` takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum Call {
    /// Nothing: what the batch loop costs after the timing is subtracted.
    Empty,
    Rdtsc,
    Rdtscp,
    LfenceRdtsc,
    Getppid,
    Getuid,
    CloseBadFd,
    InvalidSyscall,
    SchedYield,
    ClockRealtime,
    ClockMonotonic,
    ClockMonotonicRaw,
    ClockTai,
    ClockBoottime,
    ClockRealtimeCoarse,
    ClockMonotonicCoarse,
    /// CLOCK_MONOTONIC as a real syscall: what the vDSO saves.
    ClockMonotonicSyscall,
    Nanosleep0,
    /// nanosleep(0) with the thread's timer slack at 1 ns.
    Nanosleep0Slack1,
    /// pthread_cond_signal with nobody waiting.
    CondSignalNoWaiter,
}

/// How a call reaches what it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Via {
    /// An instruction, no call at all.
    Instruction,
    /// A library call that stays in user space.
    Library,
    /// The vDSO: a clock read that never entered the kernel (cheaper than the invalid
    /// syscall, measured in the same run).
    Vdso,
    /// A syscall.
    Syscall,
    /// Not decided: the invalid syscall was not measured for comparison.
    Unknown,
}

impl Call {
    pub const ALL: [Call; 20] = [
        Call::Empty,
        Call::Rdtsc,
        Call::Rdtscp,
        Call::LfenceRdtsc,
        Call::Getppid,
        Call::Getuid,
        Call::CloseBadFd,
        Call::InvalidSyscall,
        Call::SchedYield,
        Call::ClockRealtime,
        Call::ClockMonotonic,
        Call::ClockMonotonicRaw,
        Call::ClockTai,
        Call::ClockBoottime,
        Call::ClockRealtimeCoarse,
        Call::ClockMonotonicCoarse,
        Call::ClockMonotonicSyscall,
        Call::Nanosleep0,
        Call::Nanosleep0Slack1,
        Call::CondSignalNoWaiter,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Call::Empty => "empty",
            Call::Rdtsc => "rdtsc",
            Call::Rdtscp => "rdtscp",
            Call::LfenceRdtsc => "lfence-rdtsc",
            Call::Getppid => "getppid",
            Call::Getuid => "getuid",
            Call::CloseBadFd => "close-bad-fd",
            Call::InvalidSyscall => "invalid-syscall",
            Call::SchedYield => "sched_yield",
            Call::ClockRealtime => "clock_gettime-realtime",
            Call::ClockMonotonic => "clock_gettime-monotonic",
            Call::ClockMonotonicRaw => "clock_gettime-monotonic_raw",
            Call::ClockTai => "clock_gettime-tai",
            Call::ClockBoottime => "clock_gettime-boottime",
            Call::ClockRealtimeCoarse => "clock_gettime-realtime_coarse",
            Call::ClockMonotonicCoarse => "clock_gettime-monotonic_coarse",
            Call::ClockMonotonicSyscall => "clock_gettime-monotonic-syscall",
            Call::Nanosleep0 => "nanosleep-0",
            Call::Nanosleep0Slack1 => "nanosleep-0-slack-1ns",
            Call::CondSignalNoWaiter => "pthread_cond_signal",
        }
    }

    /// What it does, in a few words, for `--list`.
    pub fn describe(self) -> &'static str {
        match self {
            Call::Empty => "an empty batch: the loop itself, after the timing is subtracted",
            Call::Rdtsc => "read the TSC",
            Call::Rdtscp => "read the TSC after earlier instructions complete",
            Call::LfenceRdtsc => "lfence, then read the TSC",
            Call::Getppid => "getppid(): a syscall that does almost nothing (getpid is cached)",
            Call::Getuid => "getuid()",
            Call::CloseBadFd => "close(-1): fails with EBADF",
            Call::InvalidSyscall => "syscall 100000: ENOSYS, the kernel's entry and exit alone",
            Call::SchedYield => "sched_yield()",
            Call::ClockRealtime => "clock_gettime(CLOCK_REALTIME)",
            Call::ClockMonotonic => "clock_gettime(CLOCK_MONOTONIC)",
            Call::ClockMonotonicRaw => "clock_gettime(CLOCK_MONOTONIC_RAW)",
            Call::ClockTai => "clock_gettime(CLOCK_TAI)",
            Call::ClockBoottime => "clock_gettime(CLOCK_BOOTTIME)",
            Call::ClockRealtimeCoarse => "clock_gettime(CLOCK_REALTIME_COARSE)",
            Call::ClockMonotonicCoarse => "clock_gettime(CLOCK_MONOTONIC_COARSE)",
            Call::ClockMonotonicSyscall => {
                "clock_gettime(CLOCK_MONOTONIC) as a syscall, bypassing the vDSO"
            }
            Call::Nanosleep0 => "nanosleep(0) with the thread's default timer slack",
            Call::Nanosleep0Slack1 => "nanosleep(0) with a timer slack of 1 ns",
            Call::CondSignalNoWaiter => "pthread_cond_signal with nobody waiting",
        }
    }

    pub fn by_name(name: &str) -> Option<Call> {
        Call::ALL.into_iter().find(|c| c.name() == name)
    }

    /// Parses `--only`: names separated by commas.
    pub fn parse_list(text: &str) -> Result<Vec<Call>, String> {
        let mut out = Vec::new();
        for part in text.split(',').map(str::trim) {
            let c = Call::by_name(part).ok_or_else(|| {
                format!("unknown call '{part}'; `jitterscope syscalls --list` names them")
            })?;
            if out.contains(&c) {
                return Err(format!("'{part}' is named twice"));
            }
            out.push(c);
        }
        Ok(out)
    }

    fn clock_id(self) -> Option<libc::clockid_t> {
        Some(match self {
            Call::ClockRealtime => libc::CLOCK_REALTIME,
            Call::ClockMonotonic | Call::ClockMonotonicSyscall => libc::CLOCK_MONOTONIC,
            Call::ClockMonotonicRaw => libc::CLOCK_MONOTONIC_RAW,
            Call::ClockTai => libc::CLOCK_TAI,
            Call::ClockBoottime => libc::CLOCK_BOOTTIME,
            Call::ClockRealtimeCoarse => libc::CLOCK_REALTIME_COARSE,
            Call::ClockMonotonicCoarse => libc::CLOCK_MONOTONIC_COARSE,
            _ => return None,
        })
    }

    /// How it reaches what it does, where that is known without measuring.
    fn known_via(self) -> Option<Via> {
        match self {
            Call::Empty | Call::Rdtsc | Call::Rdtscp | Call::LfenceRdtsc => Some(Via::Instruction),
            Call::CondSignalNoWaiter => Some(Via::Library),
            c if c.clock_id().is_some() && c != Call::ClockMonotonicSyscall => None,
            _ => Some(Via::Syscall),
        }
    }

    /// Runs the call once, for `work --action syscall:NAME` (`cond` serves
    /// pthread_cond_signal).
    pub fn run_once(self, cond: &PthreadCond) {
        self.run(cond)
    }

    /// Runs the call once. Inlined into each call's own batch loop.
    #[inline(always)]
    fn run(self, cond: &PthreadCond) {
        match self {
            Call::Empty => {}
            Call::Rdtsc => {
                black_box(clock::now());
            }
            Call::Rdtscp => {
                black_box(clock::now_rdtscp());
            }
            Call::LfenceRdtsc => {
                black_box(clock::now_ordered());
            }
            Call::Getppid => {
                black_box(calls::getppid());
            }
            Call::Getuid => {
                black_box(calls::getuid());
            }
            Call::CloseBadFd => {
                black_box(calls::close_bad_fd());
            }
            Call::InvalidSyscall => {
                black_box(calls::invalid_syscall());
            }
            Call::SchedYield => {
                black_box(calls::sched_yield());
            }
            Call::ClockMonotonicSyscall => {
                black_box(calls::clock_gettime_syscall(libc::CLOCK_MONOTONIC));
            }
            Call::Nanosleep0 | Call::Nanosleep0Slack1 => {
                black_box(calls::nanosleep_zero());
            }
            Call::CondSignalNoWaiter => {
                let _ = black_box(cond.signal());
            }
            clock => {
                let id = clock.clock_id().unwrap_or(libc::CLOCK_MONOTONIC);
                black_box(calls::clock_gettime(id));
            }
        }
    }
}

impl From<Call> for String {
    fn from(c: Call) -> String {
        c.name().to_string()
    }
}

impl TryFrom<String> for Call {
    type Error = String;
    fn try_from(s: String) -> Result<Call, String> {
        Call::by_name(&s).ok_or_else(|| format!("unknown call '{s}'"))
    }
}

impl std::fmt::Display for Call {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A validated configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyscallsConfig {
    pub calls: Vec<Call>,
    /// Time spent measuring each call.
    pub per_call: Duration,
    /// Calls per sample; `None` chooses per call.
    pub batch: Option<u32>,
}

/// One call's result: the probe's entry in the result file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SyscallEntry {
    pub call: Call,
    pub via: Via,
    pub cpu: usize,
    pub thread: ThreadRecord,
    pub policy: crate::engine::sched::Policy,
    pub priority: u8,
    /// Calls per sample.
    pub batch: u32,
    pub samples: u64,
    /// The timing's own cost, subtracted from each sample before dividing by `batch`.
    pub overhead_ns: f64,
    /// Per call: each sample's (time − overhead) / batch.
    pub summary: Summary,
    pub histogram: HistogramRecord,
    /// The thread's timer slack while measuring (for the sleeps).
    pub timer_slack_ns: u64,
}

/// Everything the measuring thread hands back.
struct Measured {
    /// Each measured call with its histogram (taken from `hists`, allocated up front).
    per_call: Vec<(Call, CallResult)>,
    overhead_ticks: u64,
    counters: ThreadCounters,
}

struct CallResult {
    batch: u32,
    samples: u64,
    hist: LatencyHistogram,
    timer_slack_ns: u64,
}

/// The whole probe's outcome.
pub struct SyscallsRun {
    pub entries: Vec<SyscallEntry>,
    pub outcome: RunOutcome<()>,
}

/// Measures every configured call in turn on `plan`'s one measured CPU.
pub fn run(
    cfg: &SyscallsConfig,
    plan: &RunPlan,
    clock: &ClockInfo,
    stop: &AtomicBool,
) -> Result<SyscallsRun, RunError> {
    let cpu = plan.cpus.measured.first().unwrap_or(0);
    let thread = [ThreadSpec {
        cpu,
        sched: plan.sched,
    }];
    let mut plan = plan.clone();
    // Each call takes its time; the window is only a bound.
    plan.duration = cfg.per_call * (cfg.calls.len() as u32 + 1) + Duration::from_secs(1);
    let outcome = run::run_threads(&plan, &thread, clock.scale, stop, |w| measure(w, cfg), None)?;
    let entries = outcome
        .workers
        .iter()
        .flat_map(|w| to_entries(w, clock.scale))
        .collect();
    Ok(SyscallsRun {
        entries,
        outcome: outcome.without_values(),
    })
}

/// The measuring thread: the timing's cost first, then each call for its share of time.
fn measure(w: &Worker<'_>, cfg: &SyscallsConfig) -> Measured {
    let cond = PthreadCond::new().ok();
    let mut hists: Vec<LatencyHistogram> =
        cfg.calls.iter().map(|_| LatencyHistogram::new()).collect();
    let before = ThreadCounters::read();
    let mut per_call = Vec::with_capacity(cfg.calls.len());
    let overhead = timing_overhead();
    let Some(window) = w.ready_and_wait() else {
        return Measured {
            per_call: Vec::new(),
            overhead_ticks: overhead,
            counters: ThreadCounters::read().since(&before),
        };
    };
    let per_call_ticks = w.scale.to_ticks(cfg.per_call.as_nanos() as u64);
    for (&call, hist) in cfg.calls.iter().zip(hists.iter_mut()) {
        if w.stop_flag().load(Ordering::Relaxed) || clock::now() > window.deadline {
            break;
        }
        let Some(cond) = cond.as_ref() else { break };
        let _slack = match call {
            Call::Nanosleep0Slack1 => calls::TimerSlackGuard::set(1).ok(),
            _ => None,
        };
        let batch = cfg
            .batch
            .unwrap_or_else(|| choose_batch(call, cond, overhead, w.scale));
        let until = clock::now() + per_call_ticks;
        let samples = sample_call(call, cond, batch, overhead, until, w, hist);
        let timer_slack_ns = calls::timer_slack();
        per_call.push((call, batch, samples, timer_slack_ns));
    }
    // Paired with their histograms only now: nothing is allocated between calls.
    let per_call = per_call
        .into_iter()
        .zip(hists)
        .map(|((call, batch, samples, timer_slack_ns), hist)| {
            let r = CallResult {
                batch,
                samples,
                hist,
                timer_slack_ns,
            };
            (call, r)
        })
        .collect();
    Measured {
        per_call,
        overhead_ticks: overhead,
        counters: ThreadCounters::read().since(&before),
    }
}

/// The median cost, in ticks, of an empty timed section.
fn timing_overhead() -> u64 {
    let mut v: Vec<u64> = (0..OVERHEAD_SAMPLES)
        .map(|_| {
            let t0 = clock::now_ordered();
            let t1 = clock::now_ordered();
            t1 - t0
        })
        .collect();
    v.sort_unstable();
    v[v.len() / 2]
}

/// Enough calls per sample for about `BATCH_TARGET_NS`, from the median of single calls.
fn choose_batch(call: Call, cond: &PthreadCond, overhead: u64, scale: Scale) -> u32 {
    // On the stack: this runs inside the measuring window, between calls.
    let mut v = [0u64; 65];
    for t in v.iter_mut() {
        let t0 = clock::now_ordered();
        call.run(cond);
        let t1 = clock::now_ordered();
        *t = (t1 - t0).saturating_sub(overhead);
    }
    v.sort_unstable();
    let one = scale.to_ns(v[v.len() / 2]).max(1);
    BATCH_TARGET_NS.div_ceil(one).clamp(1, MAX_BATCH as u64) as u32
}

/// Times batches of `call` until `until`: the hot loop. No allocation, no shared write.
#[inline(never)]
fn sample_call(
    call: Call,
    cond: &PthreadCond,
    batch: u32,
    overhead: u64,
    until: u64,
    w: &Worker<'_>,
    hist: &mut LatencyHistogram,
) -> u64 {
    let mut samples = 0;
    let scale = w.scale;
    loop {
        let t0 = clock::now_ordered();
        for _ in 0..batch {
            call.run(cond);
        }
        let t1 = clock::now_ordered();
        hist.record(scale.to_ns((t1 - t0).saturating_sub(overhead)) / batch as u64);
        samples += 1;
        if t1 >= until || w.stop_flag().load(Ordering::Relaxed) {
            return samples;
        }
    }
}

fn to_entries(w: &run::WorkerOutcome<Measured>, scale: Scale) -> Vec<SyscallEntry> {
    let m = &w.value;
    let invalid = m
        .per_call
        .iter()
        .find(|(c, _)| *c == Call::InvalidSyscall)
        .and_then(|(_, r)| r.hist.summary().p50_ns);
    let thread = ThreadRecord::from_worker(w, &m.counters);
    let overhead_ns = scale.to_ns(m.overhead_ticks << 20) as f64 / (1u64 << 20) as f64;
    m.per_call
        .iter()
        .map(|(call, r)| {
            let summary = r.hist.summary();
            let via = call.known_via().unwrap_or(match (summary.p50_ns, invalid) {
                (Some(c), Some(i)) if c < i => Via::Vdso,
                (Some(_), Some(_)) => Via::Syscall,
                _ => Via::Unknown,
            });
            SyscallEntry {
                call: *call,
                via,
                cpu: w.cpu,
                thread: thread.clone(),
                policy: w.sched.policy,
                priority: w.sched.priority,
                batch: r.batch,
                samples: r.samples,
                overhead_ns,
                histogram: HistogramRecord::from_hist(&r.hist),
                summary,
                timer_slack_ns: r.timer_slack_ns,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_parse_back() {
        for c in Call::ALL {
            assert_eq!(Call::by_name(c.name()), Some(c));
        }
        assert_eq!(
            Call::parse_list("getppid, rdtsc").unwrap(),
            vec![Call::Getppid, Call::Rdtsc]
        );
        assert!(Call::parse_list("getpid").unwrap_err().contains("--list"));
        assert!(Call::parse_list("rdtsc,rdtsc").is_err());
    }

    #[test]
    fn a_batch_aims_at_a_microsecond() {
        let cond = PthreadCond::new().unwrap();
        let (clock, _) = ClockInfo::detect();
        let o = timing_overhead();
        assert!(o > 0);
        // A counter read costs ns: many per batch. A sleep costs tens of µs: one.
        assert!(choose_batch(Call::Rdtsc, &cond, o, clock.scale) >= 16);
        assert_eq!(choose_batch(Call::Nanosleep0, &cond, o, clock.scale), 1);
    }
}
