//! The command line. clap structs live here and nowhere else: the command layer turns
//! them into validated configs, and probes never see them.
//!
//! Value parsers are strict and their messages name what was wrong and what is accepted,
//! because a mistyped flag must never become a silently different measurement.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::engine::sched::Policy;

/// Latency and jitter toolkit for tuning Linux hosts.
///
/// With no subcommand, runs `noise` for 10 s on every CPU but one housekeeping CPU and
/// prints the table.
#[derive(Debug, Parser)]
#[command(name = "jitterscope", version, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// OS noise: how long, how often and how much the system takes each CPU away from a
    /// thread that polls the TSC in a tight loop.
    Noise(NoiseArgs),
}

/// Options every measuring command shares.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// CPUs to measure, e.g. 1-3,5 [default: every online, allowed CPU but one
    /// housekeeping CPU].
    #[arg(short = 'a', long = "cpus", value_name = "LIST")]
    pub cpus: Option<String>,

    /// The CPU left unmeasured for the coordinator [default: the lowest allowed CPU].
    #[arg(long, value_name = "CPU")]
    pub housekeeping: Option<usize>,

    /// Real-time priority 1-99 of the measuring threads; implies --policy fifo.
    #[arg(short = 'p', long, value_name = "PRIO", value_parser = clap::value_parser!(u8).range(1..=99))]
    pub priority: Option<u8>,

    /// Scheduling policy of the measuring threads: other, fifo or rr [default: other, or
    /// fifo with -p]. fifo and rr without -p use priority 1.
    #[arg(long, value_name = "POLICY", value_parser = parse_policy)]
    pub policy: Option<Policy>,

    /// How long to measure: 500ms, 10s, 5m, 2h (a bare number is seconds).
    #[arg(short = 'D', long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub duration: Duration,

    /// Lock all memory with mlockall (the default).
    #[arg(short = 'm', long, overrides_with = "no_mlock")]
    pub mlock: bool,

    /// Do not lock memory (page faults may then land inside the measurement).
    #[arg(long, overrides_with = "mlock")]
    pub no_mlock: bool,

    /// Allow a real-time spinner on every online CPU, leaving none for housekeeping. This
    /// can starve the kernel's own work for the whole run.
    #[arg(long)]
    pub force: bool,

    /// Write the whole result as JSON to stdout (and no table).
    #[arg(long)]
    pub json: bool,

    /// Save the result to FILE (written atomically).
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<PathBuf>,

    /// Print no table.
    #[arg(short = 'q', long)]
    pub quiet: bool,
}

/// `jitterscope noise`.
#[derive(Debug, Clone, Args)]
pub struct NoiseArgs {
    #[command(flatten)]
    pub run: RunArgs,

    /// A step longer than this is an interruption: ns, or with a unit (500ns, 2us, 1ms).
    #[arg(short = 'T', long, value_name = "TIME", default_value = "1us",
          value_parser = parse_threshold, allow_hyphen_values = true)]
    pub threshold: u64,

    /// Spin this long before measuring, to warm caches and measure the loop's own period.
    #[arg(long, value_name = "DURATION", default_value = "100ms", value_parser = parse_warmup)]
    pub warmup: Duration,

    /// How many of the largest interruptions to keep per CPU, with their timestamps.
    #[arg(long, value_name = "K", default_value_t = crate::probes::noise::DEFAULT_LARGEST,
          value_parser = parse_top)]
    pub top: usize,

    /// Keep every interruption with its timestamp in the result, up to N per CPU (16
    /// bytes each, preallocated); later ones are counted as dropped.
    #[arg(long, value_name = "N", default_value_t = 0, value_parser = parse_event_log)]
    pub event_log: usize,
}

impl Default for NoiseArgs {
    fn default() -> Self {
        match Cli::parse_from(["jitterscope", "noise"]).command {
            Some(Command::Noise(a)) => a,
            None => unreachable!("'noise' parses to the noise command"),
        }
    }
}

fn parse_policy(s: &str) -> Result<Policy, String> {
    s.parse()
}

/// The longest accepted run: 30 days.
const MAX_DURATION: Duration = Duration::from_secs(30 * 24 * 3600);

/// A duration with a unit (`500ms`, `10s`, `5m`, `2h`, `1h30m`), or bare seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let bad = || format!("expected a positive duration such as 500ms, 10s, 5m or 2h, got '{s}'");
    let t = s.trim();
    let d = match t.parse::<f64>() {
        Ok(secs) if secs > 0.0 => Duration::try_from_secs_f64(secs).map_err(|_| bad())?,
        Ok(_) => return Err(bad()),
        Err(_) => humantime::parse_duration(t).map_err(|_| bad())?,
    };
    if d.is_zero() {
        return Err(bad());
    }
    if d > MAX_DURATION {
        return Err(format!("'{s}' is longer than the 30-day limit"));
    }
    Ok(d)
}

fn parse_warmup(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d > Duration::from_secs(60) {
        return Err(format!("warm-up '{s}' is longer than 60s"));
    }
    Ok(d)
}

/// A time in ns: a bare number is ns; units ns, us, µs, ms, s are accepted.
pub fn parse_threshold(s: &str) -> Result<u64, String> {
    let bad =
        || format!("expected a positive time such as 1000 (ns), 500ns, 2us or 1ms, got '{s}'");
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = num.parse().map_err(|_| bad())?;
    let factor = match unit.trim() {
        "" | "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        _ => return Err(bad()),
    };
    let ns = (value * factor).round();
    if !ns.is_finite() || ns < 1.0 {
        return Err(bad());
    }
    if ns > 3.6e12 {
        return Err(format!("threshold '{s}' is longer than one hour"));
    }
    Ok(ns as u64)
}

fn parse_top(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(k) if k <= 10_000 => Ok(k),
        _ => Err(format!("expected a count from 0 to 10000, got '{s}'")),
    }
}

fn parse_event_log(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if n <= 10_000_000 => Ok(n),
        _ => Err(format!(
            "expected a count from 0 to 10000000 (160 MB per CPU), got '{s}'"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("5m").unwrap(), Duration::from_secs(300));
        assert_eq!(parse_duration("2h").unwrap(), Duration::from_secs(7200));
        assert_eq!(parse_duration("3").unwrap(), Duration::from_secs(3));
        assert_eq!(parse_duration("1.5").unwrap(), Duration::from_millis(1500));
        for bad in [
            "10x", "", "-1", "0", "0s", "s", "nan", "inf", "40d", "1e20", "1e400",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad:?} must be rejected");
        }
    }

    #[test]
    fn thresholds() {
        assert_eq!(parse_threshold("1000").unwrap(), 1000);
        assert_eq!(parse_threshold("500ns").unwrap(), 500);
        assert_eq!(parse_threshold("2us").unwrap(), 2000);
        assert_eq!(parse_threshold("1.5µs").unwrap(), 1500);
        assert_eq!(parse_threshold("1ms").unwrap(), 1_000_000);
        for bad in ["-5", "0", "abc", "5 parsecs", "", "1e3", "0.1"] {
            assert!(parse_threshold(bad).is_err(), "{bad:?} must be rejected");
        }
    }

    #[test]
    fn bare_invocation_has_no_subcommand_and_noise_defaults_are_sane() {
        assert!(Cli::parse_from(["jitterscope"]).command.is_none());
        let a = NoiseArgs::default();
        assert_eq!(a.threshold, 1000);
        assert_eq!(a.run.duration, Duration::from_secs(10));
        assert!(!a.run.no_mlock);
    }
}
