//! `jitterscope selftest`: the tool checks itself on this host, in about 20 s, and exits 1
//! if any check fails.
//!
//! The checks, each a row of a pass/fail table:
//! - **counter**: the TSC is invariant, agrees across the two CPUs used (the pingpong
//!   bound), and its frequency agrees with the kernel's (ppm);
//! - **noise detection**: a SCHED_FIFO thread of our own (`js-holder`) holds the measured
//!   CPU for a known time at a known period; `noise` must find ≥ 99 % of the holds, matched
//!   one by one by timestamp, and the median gap must exceed the hold by no more than the
//!   platform's overhead, measured first with empty holds;
//! - **timer detection**: the same holds against `timer`: each hold that covers a
//!   deadline must show as a late wake-up at the hold's end;
//! - **safety**: no thread of ours outlives the checks, and nothing stays real-time.
//!
//! Holds are short and sparse (at most 5 % duty, a few seconds in all) and never outlive
//! the command: the holder checks the stop flag before every hold and has a deadline of
//! its own. The environment variable `JITTERSCOPE_SELFTEST_FAULT=skip-every-other-gap`
//! breaks the detector on purpose (every other gap the loop saw is dropped before
//! matching): the tests use it to show that the check fails when it must.

use std::io::Write;
use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Context;
use serde::{Deserialize, Serialize};

use crate::engine::clock::{ClockInfo, Counter, Scale};
use crate::engine::cpu::{CpuList, CpuPlan, CpuUniverse};
use crate::engine::inject::{self, Injection, Schedule};
use crate::engine::run::RunPlan;
use crate::engine::sched::{self, Policy, SchedRequest};
use crate::engine::tsc_sync;
use crate::probes::noise::{self, NoiseConfig};
use crate::probes::timer::{self, NoBreakHook, TimerConfig};

use super::Ending;
use crate::cli::SelftestArgs;

/// The environment variable that breaks the detector on purpose, for the tests.
pub const FAULT_ENV: &str = "JITTERSCOPE_SELFTEST_FAULT";

/// The name the holding thread runs under (its comm), so that a trace can name it.
pub const HOLDER_NAME: &str = "js-holder";

/// Found at least this share of the holds.
const FOUND_SHARE: f64 = 0.99;

/// How a check ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    Pass,
    Fail,
    /// It could not run here (not root, one CPU, …); says nothing about the tool.
    Skipped,
}

/// One row of the table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Check {
    pub name: String,
    pub outcome: Outcome,
    /// What was measured, with units.
    pub figures: String,
}

impl Check {
    fn new(name: &str, outcome: Outcome, figures: String) -> Check {
        Check {
            name: name.into(),
            outcome,
            figures,
        }
    }
}

/// Where the checks run.
struct Place {
    measured: usize,
    housekeeping: usize,
    clock: ClockInfo,
}

/// How long each phase measures.
#[derive(Debug, Clone, Copy)]
struct Lengths {
    overhead: Duration,
    holds: Duration,
}

impl Lengths {
    fn of(args: &SelftestArgs) -> Lengths {
        match args.quick {
            true => Lengths {
                overhead: Duration::from_millis(300),
                holds: Duration::from_secs(1),
            },
            false => Lengths {
                overhead: Duration::from_millis(700),
                holds: Duration::from_secs(3),
            },
        }
    }
}

/// `jitterscope selftest`.
pub fn run(args: &SelftestArgs, stop: &AtomicBool) -> anyhow::Result<Ending> {
    let len = Lengths::of(args);
    let (clock, _) = ClockInfo::detect();
    let universe = CpuUniverse::detect().context("cannot read the system's CPUs")?;
    let usable = universe.usable();
    let place = match usable.cpus() {
        [.., hk, m] => Some(Place {
            measured: *m,
            housekeeping: *hk,
            clock: clock.clone(),
        }),
        _ => None,
    };
    let fault = std::env::var(FAULT_ENV).ok();
    let threads_before = thread_count();
    let mut checks = vec![counter_check(&clock, place.as_ref())];
    let realtime = sched::preflight(holder_sched());
    match (&place, &realtime) {
        (Some(p), Ok(())) => {
            checks.push(noise_check(p, len, stop, fault.as_deref()));
            checks.push(timer_check(p, len, stop));
        }
        (None, _) => {
            let why = "needs two usable CPUs: one measured, one for the holder's coordinator";
            checks.push(Check::new("noise detection", Outcome::Skipped, why.into()));
            checks.push(Check::new("timer detection", Outcome::Skipped, why.into()));
        }
        (_, Err(reason)) => {
            let why = format!("the holder needs SCHED_FIFO: {reason}");
            checks.push(Check::new("noise detection", Outcome::Skipped, why.clone()));
            checks.push(Check::new("timer detection", Outcome::Skipped, why));
        }
    }
    checks.push(safety_check(threads_before));
    if let Some(path) = &args.output {
        save(path, &clock, &universe, &checks)?;
    }
    print_table(&checks);
    let interrupted = stop.load(Ordering::Relaxed);
    Ok(match checks.iter().any(|c| c.outcome == Outcome::Fail) {
        _ if interrupted => Ending::Interrupted,
        true => Ending::LimitExceeded,
        false => Ending::Completed,
    })
}

fn holder_sched() -> SchedRequest {
    SchedRequest {
        policy: Policy::Fifo,
        priority: 2,
    }
}

fn measuring_sched() -> SchedRequest {
    SchedRequest {
        policy: Policy::Fifo,
        priority: 1,
    }
}

/// The TSC: invariant, the same across the two CPUs, and at the kernel's frequency.
fn counter_check(clock: &ClockInfo, place: Option<&Place>) -> Check {
    let mut problems = Vec::new();
    let mut figures = Vec::new();
    if clock.counter != Counter::Tsc {
        problems.push("the loops read CLOCK_MONOTONIC, not the TSC".to_string());
    }
    if !clock.invariant {
        problems.push("the TSC is not invariant".to_string());
    }
    let worst_ppm = clock
        .cross_checks
        .iter()
        .map(|c| c.diff_ppm.abs())
        .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
    match worst_ppm {
        Some(ppm) => {
            figures.push(format!(
                "frequency {:.3} MHz, off the kernel's by ≤ {ppm:.1} ppm",
                clock.frequency_hz / 1e6
            ));
            if ppm > 500.0 {
                problems.push(format!(
                    "the frequency differs from the kernel's by {ppm:.0} ppm"
                ));
            }
        }
        None => figures.push(format!(
            "frequency {:.3} MHz, no second source to check it",
            clock.frequency_hz / 1e6
        )),
    }
    if let Some(p) = place {
        let req = sched::preflight(measuring_sched())
            .map(|()| measuring_sched())
            .unwrap_or(SchedRequest::OTHER);
        match tsc_sync::measure(
            p.measured,
            p.housekeeping,
            tsc_sync::DEFAULT_ROUNDS,
            req,
            clock.scale,
        ) {
            Some(s) if s.consistent => figures.push(format!(
                "CPUs {} and {} agree within {} ns",
                p.housekeeping, p.measured, s.bound_ns
            )),
            Some(s) => problems.push(format!(
                "CPUs {} and {} differ by at least {} ns",
                p.housekeeping, p.measured, s.bound_ns
            )),
            None => figures.push("the cross-CPU check could not run".into()),
        }
    }
    let outcome = match problems.is_empty() {
        true => Outcome::Pass,
        false => Outcome::Fail,
    };
    figures.extend(problems);
    Check::new("counter", outcome, figures.join("; "))
}

/// Runs `measure` on the measured CPU while the holder holds it as `schedule` says;
/// returns what `measure` gave and the holds, or why the holder could not run.
fn with_holder<T: Send>(
    p: &Place,
    period: Duration,
    busy: Duration,
    window: Duration,
    measure: impl FnOnce() -> T + Send,
) -> Result<(T, Vec<Injection>), String> {
    let schedule = Schedule {
        cpu: p.measured,
        priority: holder_sched().priority,
        period,
        busy,
        // The holder's own deadline: it never outlives the measurement by much.
        run_for: window + Duration::from_secs(2),
        count: usize::MAX,
    };
    let done = AtomicBool::new(false);
    let ready = Barrier::new(2);
    std::thread::scope(|s| {
        let holder = std::thread::Builder::new()
            .name(HOLDER_NAME.into())
            // It stops when the measurement ends, which a stop of the command ends.
            .spawn_scoped(s, || inject::inject(schedule, &ready, &done, &p.clock))
            .map_err(|e| format!("cannot start the holder: {e}"))?;
        ready.wait();
        let out = measure();
        done.store(true, Ordering::Relaxed);
        let holds = holder
            .join()
            .map_err(|_| "the holder panicked".to_string())?
            .map_err(|e| e.to_string())?;
        Ok((out, holds))
    })
}

fn plan(p: &Place, duration: Duration) -> RunPlan {
    RunPlan {
        cpus: CpuPlan {
            measured: CpuList::from_cpus(vec![p.measured]),
            housekeeping: CpuList::from_cpus(vec![p.housekeeping]),
        },
        sched: measuring_sched(),
        mlock: true,
        duration,
        priospread: false,
        setup_timeout: Duration::from_secs(10),
    }
}

/// What matching holds against gaps found.
#[derive(Debug, Clone, PartialEq)]
pub struct Matched {
    pub holds: usize,
    pub found: usize,
    /// For each found hold, the gap's duration minus the hold's, in ns (can be < 0).
    pub excess_ns: Vec<i64>,
}

impl Matched {
    fn share(&self) -> f64 {
        match self.holds {
            0 => 0.0,
            n => self.found as f64 / n as f64,
        }
    }

    fn median_excess(&self) -> Option<i64> {
        let mut v = self.excess_ns.clone();
        v.sort_unstable();
        v.get(v.len() / 2).copied()
    }
}

/// Matches each hold to the gap (start tick, end tick) that contains it, within `tol`
/// ticks. Gaps must be sorted by start. Pure: tested on made-up lists.
pub fn match_holds(holds: &[Injection], gaps: &[(u64, u64)], tol: u64, scale: Scale) -> Matched {
    let mut excess_ns = Vec::new();
    for h in holds {
        // The last gap that starts before the hold does is the only candidate.
        let idx = gaps.partition_point(|g| g.0 <= h.start + tol);
        if let Some(&(start, end)) = idx.checked_sub(1).map(|i| &gaps[i])
            && end + tol >= h.end
        {
            let gap = scale.to_ns(end - start) as i64;
            excess_ns.push(gap - scale.to_ns(h.end - h.start) as i64);
        }
    }
    Matched {
        holds: holds.len(),
        found: excess_ns.len(),
        excess_ns,
    }
}

/// Gaps of a noise run as (start, end) ticks, minus every other one under the fault.
fn noise_gaps(run: &noise::NoiseRun, scale: Scale, fault: Option<&str>) -> Vec<(u64, u64)> {
    let Some(log) = run.entries.first().and_then(|e| e.events.as_ref()) else {
        return Vec::new();
    };
    let gaps = log
        .start_tsc
        .iter()
        .zip(&log.duration_ns)
        .map(|(&s, &d)| (s, s + scale.to_ticks(d)));
    match fault {
        Some("skip-every-other-gap") => gaps.step_by(2).collect(),
        _ => gaps.collect(),
    }
}

/// One noise phase with holds of `busy`: what matching found.
fn noise_phase(
    p: &Place,
    busy: Duration,
    window: Duration,
    stop: &AtomicBool,
    fault: Option<&str>,
) -> Result<Matched, String> {
    let cfg = NoiseConfig {
        event_log: 100_000,
        ..NoiseConfig::default()
    };
    let plan = plan(p, window);
    let period = Duration::from_micros(9_973);
    let (run, holds) = with_holder(p, period, busy, window, || {
        noise::run(&cfg, &plan, &p.clock, stop)
    })?;
    let run = run.map_err(|e| format!("the noise run failed: {e}"))?;
    let w = run.outcome.window.ok_or("the noise run never started")?;
    let inside: Vec<Injection> = (holds.into_iter())
        .filter(|h| h.start >= w.start && h.end <= w.deadline)
        .collect();
    let gaps = noise_gaps(&run, p.clock.scale, fault);
    // The loop's minimum step is subtracted from each gap; 200 ns covers it.
    Ok(match_holds(
        &inside,
        &gaps,
        p.clock.scale.to_ticks(200),
        p.clock.scale,
    ))
}

/// noise finds ≥ 99 % of 200 µs holds, one by one, and the median gap exceeds the hold by
/// no more than the overhead that empty holds show.
fn noise_check(p: &Place, len: Lengths, stop: &AtomicBool, fault: Option<&str>) -> Check {
    let name = "noise detection";
    let overhead = noise_phase(p, Duration::ZERO, len.overhead, stop, None);
    let held = noise_phase(p, Duration::from_micros(200), len.holds, stop, fault);
    let (o, m) = match (overhead, held) {
        (Ok(o), Ok(m)) => (o, m),
        (Err(e), _) | (_, Err(e)) => return Check::new(name, Outcome::Fail, e),
    };
    // An empty hold's whole gap is the overhead: the wake-up and two switches.
    let mut empty: Vec<i64> = o.excess_ns.clone();
    empty.sort_unstable();
    let o99 = empty.get(empty.len() * 99 / 100).copied().unwrap_or(0);
    let o50 = o.median_excess().unwrap_or(0);
    let excess = m.median_excess().unwrap_or(i64::MAX);
    let found_ok = m.holds > 0 && m.share() >= FOUND_SHARE;
    let excess_ok = (0..=o99.max(2_000)).contains(&excess);
    let figures = format!(
        "{} of {} holds of 200 µs found ({:.1} %); median gap − hold {:.1} µs; overhead of an \
         empty hold p50 {:.1} µs, p99 {:.1} µs",
        m.found,
        m.holds,
        m.share() * 100.0,
        excess as f64 / 1e3,
        o50 as f64 / 1e3,
        o99 as f64 / 1e3
    );
    let outcome = match found_ok && excess_ok {
        true => Outcome::Pass,
        false => Outcome::Fail,
    };
    Check::new(name, outcome, figures)
}

/// timer sees each 500 µs hold as a late wake-up at the hold's end.
fn timer_check(p: &Place, len: Lengths, stop: &AtomicBool) -> Check {
    let name = "timer detection";
    let busy = Duration::from_micros(500);
    let window = len.holds;
    let cfg = TimerConfig {
        interval_ns: 200_000,
        spikes_above_ns: Some(busy.as_nanos() as u64 / 2),
        spike_capacity: 10_000,
        ..TimerConfig::default()
    };
    let plan = plan(p, window);
    let period = Duration::from_micros(9_973);
    let got = with_holder(p, period, busy, window, || {
        timer::run(&cfg, &plan, &p.clock, stop, &NoBreakHook, None)
    });
    let (run, holds) = match got {
        Ok((Ok(run), holds)) => (run, holds),
        Ok((Err(e), _)) => {
            return Check::new(name, Outcome::Fail, format!("the timer run failed: {e}"));
        }
        Err(e) => return Check::new(name, Outcome::Fail, e),
    };
    let Some(w) = run.outcome.window else {
        return Check::new(name, Outcome::Fail, "the timer run never started".into());
    };
    let entry = &run.entries[0];
    let Some(spikes) = &entry.spikes else {
        return Check::new(name, Outcome::Fail, "no spikes were recorded".into());
    };
    let scale = p.clock.scale;
    // A spike spans its deadline to its wake-up: it must contain the hold's end.
    let late: Vec<(u64, u64)> = (spikes.start_tsc.iter().zip(&spikes.duration_ns))
        .map(|(&s, &d)| (s, s + scale.to_ticks(d)))
        .collect();
    // Holds that cover a deadline (every one, with a 200 µs interval) and end in the window.
    let inside: Vec<Injection> = (holds.into_iter())
        .filter(|h| h.start >= w.start && h.end + scale.to_ticks(1_000_000) <= w.deadline)
        .collect();
    let mut found = 0;
    let mut after_ns = Vec::new();
    for h in &inside {
        // The wake-up the hold delayed: its deadline passed before the hold ended (perhaps
        // before the hold began, when something else delayed it first), and it came after.
        // Of those, the first to wake; it must come within 1 ms of the hold's end.
        let hit = (late.iter())
            .filter(|(dl, wake)| *dl <= h.end && *wake >= h.end)
            .map(|(_, wake)| *wake)
            .min()
            .filter(|wake| scale.to_ns(wake - h.end) <= 1_000_000);
        if let Some(wake) = hit {
            found += 1;
            after_ns.push(scale.to_ns(wake - h.end));
        }
    }
    after_ns.sort_unstable();
    let median_after = after_ns
        .get(after_ns.len() / 2)
        .copied()
        .unwrap_or(u64::MAX);
    let undisturbed_p99 = entry.summary.p90_ns.unwrap_or(0);
    let share = found as f64 / inside.len().max(1) as f64;
    let figures = format!(
        "{found} of {} holds of 500 µs seen as late wake-ups ({:.1} %); median wake-up {:.1} µs \
         after the hold ended; wake-up latency p90 {:.1} µs",
        inside.len(),
        share * 100.0,
        median_after as f64 / 1e3,
        undisturbed_p99 as f64 / 1e3,
    );
    let ok = !inside.is_empty()
        && share >= FOUND_SHARE
        && median_after <= undisturbed_p99.max(20_000) + 20_000;
    Check::new(
        name,
        if ok { Outcome::Pass } else { Outcome::Fail },
        figures,
    )
}

/// No thread of ours outlives the checks; this thread is not left real-time.
fn safety_check(threads_before: Option<usize>) -> Check {
    let after = thread_count();
    let policy = Some(sched::current_policy());
    let left = match (threads_before, after) {
        (Some(b), Some(a)) if a > b => Some(a - b),
        _ => None,
    };
    let figures = format!(
        "threads before {}, after {}; this thread runs at {}",
        threads_before.map_or("?".into(), |n| n.to_string()),
        after.map_or("?".into(), |n| n.to_string()),
        policy.map_or("an unknown policy".into(), |p| p.to_string()),
    );
    let realtime_left = policy.is_some_and(|p| p.policy.is_realtime());
    let outcome = match left.is_none() && !realtime_left {
        true => Outcome::Pass,
        false => Outcome::Fail,
    };
    Check::new("safety", outcome, figures)
}

/// What a saved selftest holds: the host's facts and the checks.
#[derive(Debug, Serialize, Deserialize)]
pub struct SelftestRecord {
    /// "jitterscope-selftest/1".
    pub schema: String,
    pub tool_version: String,
    pub host: crate::system::HostInfo,
    pub checks: Vec<Check>,
}

/// Saves the checks beside the host's facts, atomically.
fn save(
    path: &std::path::Path,
    clock: &ClockInfo,
    universe: &CpuUniverse,
    checks: &[Check],
) -> anyhow::Result<()> {
    let record = SelftestRecord {
        schema: "jitterscope-selftest/1".into(),
        tool_version: env!("CARGO_PKG_VERSION").into(),
        host: crate::system::HostInfo::collect(clock.clone(), universe.online.clone()),
        checks: checks.to_vec(),
    };
    let text = serde_json::to_string_pretty(&record)?;
    crate::report::result::write_atomic(path, text.as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))
}

/// This process's threads, from /proc/self/status.
fn thread_count() -> Option<usize> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|v| v.trim().parse().ok())
}

fn print_table(checks: &[Check]) {
    let mut out = String::from("selftest\n");
    for c in checks {
        let mark = match c.outcome {
            Outcome::Pass => "pass",
            Outcome::Fail => "FAIL",
            Outcome::Skipped => "skip",
        };
        out.push_str(&format!("  {mark}  {:<16} {}\n", c.name, c.figures));
    }
    let failed: Vec<&str> = (checks.iter())
        .filter(|c| c.outcome == Outcome::Fail)
        .map(|c| c.name.as_str())
        .collect();
    out.push_str(&match failed.as_slice() {
        [] => "all checks passed\n".to_string(),
        f => format!("failed: {}\n", f.join(", ")),
    });
    let _ = std::io::stdout().lock().write_all(out.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hold(start: u64, end: u64) -> Injection {
        Injection {
            start,
            end,
            start_monotonic_ns: 0,
            end_monotonic_ns: 0,
        }
    }

    #[test]
    fn holds_match_the_gaps_that_contain_them() {
        let scale = Scale::from_hz(1e9);
        let holds = [hold(100, 200), hold(1000, 1300), hold(5000, 5100)];
        // The first inside a longer gap, the second cut short, the third missing.
        let gaps = [(90, 215), (990, 1200), (9000, 9100)];
        let m = match_holds(&holds, &gaps, 5, scale);
        assert_eq!((m.holds, m.found), (3, 1));
        assert_eq!(m.excess_ns, vec![25]);
        assert_eq!(match_holds(&holds, &[], 5, scale).found, 0);
    }
}
