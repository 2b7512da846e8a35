//! The flags' value parsers: strict, and each message names what was wrong and what is
//! accepted.

use std::time::Duration;

use crate::engine::sched::Policy;
use crate::probes::timer::TimerClock;

/// The longest busy pause between samples or round trips: the pause is busy-waited
/// without looking at the stop flag, so it must stay short.
pub const MAX_PAUSE_NS: u64 = 10_000_000;

pub(super) fn parse_pause(s: &str) -> Result<u64, String> {
    match is_zero(s) {
        true => Ok(0),
        false => match parse_threshold(s)? {
            ns if ns > MAX_PAUSE_NS => Err(format!("pause '{s}' is longer than 10ms")),
            ns => Ok(ns),
        },
    }
}

/// The longest calibrated loop: calibration times it a few thousand times.
pub const MAX_LOOP_NS: u64 = 10_000_000;

pub(super) fn parse_loop_ns(s: &str) -> Result<u64, String> {
    match parse_threshold(s)? {
        ns if ns > MAX_LOOP_NS => Err(format!("'{s}' is longer than 10ms")),
        ns => Ok(ns),
    }
}

pub(super) fn parse_ring_size(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        // 64-byte slots: the largest ring is 64 MiB, all of it touched and locked.
        Ok(n) if n.is_power_of_two() && (2..=1 << 20).contains(&n) => Ok(n),
        _ => Err(format!(
            "expected a power of two from 2 to 1048576, got '{s}'"
        )),
    }
}

pub(super) fn parse_policy(s: &str) -> Result<Policy, String> {
    s.parse()
}

pub(super) fn parse_clock(s: &str) -> Result<TimerClock, String> {
    match s {
        "monotonic" => Ok(TimerClock::Monotonic),
        "realtime" => Ok(TimerClock::Realtime),
        _ => Err(format!(
            "unknown clock '{s}'; expected monotonic or realtime"
        )),
    }
}

/// The longest accepted run: 30 days (the engine's bound on any run).
pub use crate::engine::run::MAX_DURATION;

/// A duration with a unit (`500ms`, `10s`, `5m`, `2h`, `1h30m`), or bare seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let bad = || format!("expected a positive duration such as 500ms, 10s, 5m or 2h, got '{s}'");
    let t = s.trim();
    // Bare seconds (`10`, `1e9`), or one unit (`1.5ms`, `2h`) as every time flag reads
    // it, else humantime's compounds (`1h30m`).
    let ns =
        (t.parse::<f64>().ok().map(|secs| secs * 1e9)).or_else(|| crate::units::time_ns(t, None));
    let d = match ns {
        Some(ns) if ns > 0.0 => match Duration::try_from_secs_f64(ns / 1e9) {
            Ok(d) => d,
            Err(_) => return Err(format!("'{s}' is longer than the 30-day limit")),
        },
        Some(_) => return Err(bad()),
        None => humantime::parse_duration(t).map_err(|_| bad())?,
    };
    if d.is_zero() {
        return Err(bad());
    }
    if d > MAX_DURATION {
        return Err(format!("'{s}' is longer than the 30-day limit"));
    }
    Ok(d)
}

pub(super) fn parse_warmup(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d > Duration::from_secs(60) {
        return Err(format!("warm-up '{s}' is longer than 60s"));
    }
    Ok(d)
}

/// A time in ns: a bare number is ns; units ns, us, µs, ms, s are accepted.
pub fn parse_threshold(s: &str) -> Result<u64, String> {
    parse_time(s, 1.0, "1000 (ns), 500ns, 2us or 1ms")
}

/// noise's threshold: a bare number is µs (oslat's and rtla's -T), with a floor of
/// 100 ns, below which the loop's own jitter would count as interruptions.
pub(super) fn parse_noise_threshold(s: &str) -> Result<u64, String> {
    match parse_us(s)? {
        ns if ns < 100 => Err(format!(
            "threshold '{s}' is below 100 ns: the loop's own jitter would count as interruptions"
        )),
        ns => Ok(ns),
    }
}

/// A time in ns from a bare number of µs (cyclictest's unit) or one with a unit.
pub fn parse_us(s: &str) -> Result<u64, String> {
    parse_time(s, 1e3, "100 (µs), 250us, 1.5ms or 800ns")
}

pub(super) fn parse_interval(s: &str) -> Result<u64, String> {
    let ns = parse_us(s)?;
    let max = crate::probes::timer::MAX_INTERVAL_US * 1000;
    match ns {
        ns if ns > max => Err(format!("interval '{s}' is longer than 1 s")),
        ns if ns < 1000 => Err(format!("interval '{s}' is shorter than 1 µs")),
        ns => Ok(ns),
    }
}

/// Whether `s` is zero, bare or with any unit (`0`, `0us`, `0.0 ms`).
pub(super) fn is_zero(s: &str) -> bool {
    time_ns(s, 1.0) == Some(0.0)
}

pub(super) fn parse_distance(s: &str) -> Result<u64, String> {
    match is_zero(s) {
        true => Ok(0),
        false => parse_interval(s).map_err(|e| e.replace("interval", "distance")),
    }
}

pub(super) fn parse_timer_warmup(s: &str) -> Result<Duration, String> {
    match is_zero(s) {
        true => Ok(Duration::ZERO),
        false => parse_warmup(s),
    }
}

pub(super) fn parse_dma_latency(s: &str) -> Result<i32, String> {
    match s.parse::<i32>() {
        Ok(v) if v >= 0 => Ok(v),
        _ => Err(format!(
            "expected a whole number of µs from 0 to 2147483647, got '{s}'"
        )),
    }
}

/// `--timer-slack`: a time in ns, or the kernel's default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimerSlack {
    Ns(u64),
    KernelDefault,
}

pub(super) fn parse_timer_slack(s: &str) -> Result<TimerSlack, String> {
    match s {
        "default" => Ok(TimerSlack::KernelDefault),
        _ => parse_threshold(s)
            .map(TimerSlack::Ns)
            .map_err(|e| format!("{e}, or 'default' for the kernel's")),
    }
}

pub(super) fn parse_spike_nodes(s: &str) -> Result<usize, String> {
    parse_count(s, 1, 10_000_000, "a count")
}

pub(super) fn parse_histogram_us(s: &str) -> Result<usize, String> {
    let max = crate::probes::timer::MAX_HISTOGRAM_US;
    parse_count(s, 1, max, "a bucket count (µs)")
}

/// A whole number from `lo` to `hi`; the message names it as `what`.
pub(super) fn parse_count(s: &str, lo: usize, hi: usize, what: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if (lo..=hi).contains(&n) => Ok(n),
        _ => Err(format!("expected {what} from {lo} to {hi}, got '{s}'")),
    }
}

/// A number with an optional unit as ns (see `units::time_ns`); a bare number is in
/// units of `bare` ns.
pub(super) fn time_ns(s: &str, bare: f64) -> Option<f64> {
    crate::units::time_ns(s, Some(bare))
}

/// A positive time in ns, at most an hour; a bare number is in units of `bare` ns.
pub(super) fn parse_time(s: &str, bare: f64, examples: &str) -> Result<u64, String> {
    let bad = || format!("expected a positive time such as {examples}, got '{s}'");
    let ns = time_ns(s, bare).ok_or_else(bad)?;
    if !ns.is_finite() || ns < 1.0 {
        return Err(bad());
    }
    if ns > 3.6e12 {
        return Err(format!("'{s}' is longer than one hour"));
    }
    Ok(ns as u64)
}

pub(super) fn parse_top(s: &str) -> Result<usize, String> {
    parse_count(s, 0, 10_000, "a count")
}

pub(super) fn parse_event_log(s: &str) -> Result<usize, String> {
    parse_count(s, 0, 10_000_000, "a count (16 bytes each per CPU)")
}

/// A list of times in ns, as `--late-above` gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsList(pub Vec<u64>);

pub(super) fn parse_us_list(s: &str) -> Result<UsList, String> {
    let items: Result<Vec<u64>, String> = s.split(',').map(parse_us).collect();
    let items = items?;
    match items.len() {
        1..=4 => Ok(UsList(items)),
        n => Err(format!(
            "expected 1 to 4 comma-separated times, got {n} in '{s}'"
        )),
    }
}
