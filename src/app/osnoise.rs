//! `noise --engine osnoise|both`: the kernel's osnoise tracer on the measured CPUs, in
//! an instance of ours, for the run's duration in whole periods.
//!
//! The period is a second (rtla's default) or half the duration when that is shorter,
//! and the runtime the whole period, so the tracer's thread, like the TSC loop, has the
//! CPU to itself; the run lasts until every CPU has given the periods that fit in the
//! duration. `tracing_thresh` is noise's `-T` in whole µs (the tracer's unit).

use std::time::Duration;

use crate::engine::cpu::CpuList;
use crate::trace::session::TraceError;
use crate::trace::tracer::instance::TracerInstance;
use crate::trace::tracer::osnoise::{EVENTS, OsnoiseConfig, OsnoiseEntry, Tally};

use super::kernel_tracer::{self, read_global};
use super::pipeline::Ctx;

/// The longest period: rtla's default.
const MAX_PERIOD: Duration = Duration::from_secs(1);
/// The shortest: a period gives one summary, and a run needs a few.
const MIN_PERIOD: Duration = Duration::from_millis(100);
/// How long past the duration the last summaries may take (a loaded or emulated guest
/// runs late).
const GRACE: Duration = Duration::from_secs(3);

/// What the engine measured.
pub struct OsnoiseRun {
    pub entries: Vec<OsnoiseEntry>,
    pub elapsed: Duration,
    pub interrupted: bool,
}

/// The period for a run of `duration`.
pub fn period_for(duration: Duration) -> Duration {
    let ms = (duration / 2).as_millis() as u64;
    Duration::from_millis(ms).clamp(MIN_PERIOD, MAX_PERIOD)
}

/// The tracer's threshold in µs for noise's `-T` in ns: rounded up, at least 1 µs.
pub fn threshold_us(threshold_ns: u64) -> u64 {
    threshold_ns.div_ceil(1000).max(1)
}

/// The global files to write, in an order the kernel accepts: it keeps runtime ≤ period
/// at every write, so the one that moves toward the other goes first.
pub fn globals(
    cpus: &CpuList,
    period_us: u64,
    old_period_us: Option<u64>,
    threshold_us: u64,
    stops: &[(&'static str, Option<String>)],
) -> Vec<(&'static str, String)> {
    let mut g = vec![("osnoise/cpus", cpus.to_string())];
    let (p, r) = (
        ("osnoise/period_us", period_us.to_string()),
        ("osnoise/runtime_us", period_us.to_string()),
    );
    match old_period_us.is_some_and(|old| period_us > old) {
        true => g.extend([p, r]),
        false => g.extend([r, p]),
    }
    g.push(("tracing_thresh", threshold_us.to_string()));
    // A stop left set by someone would end the trace at its first crossing.
    for (file, now) in stops {
        if now.as_deref().is_some_and(|v| v != "0") {
            g.push((file, "0".to_string()));
        }
    }
    g
}

/// Runs osnoise for `duration` on the measured CPUs; an error says why it could not
/// (not root, no such tracer), and nothing was changed then.
pub fn run(
    ctx: &mut Ctx<'_>,
    threshold_ns: u64,
    duration: Duration,
) -> Result<OsnoiseRun, TraceError> {
    let cpus = ctx.cpus.measured.clone();
    let period = period_for(duration);
    let period_us = period.as_micros() as u64;
    let old_period = read_global("osnoise/period_us").and_then(|v| v.parse().ok());
    let stops = [
        (
            "osnoise/stop_tracing_us",
            read_global("osnoise/stop_tracing_us"),
        ),
        (
            "osnoise/stop_tracing_total_us",
            read_global("osnoise/stop_tracing_total_us"),
        ),
    ];
    let thresh = threshold_us(threshold_ns);
    let g = globals(&cpus, period_us, old_period, thresh, &stops);
    let g: Vec<(&str, String)> = g.into_iter().collect();
    let inst = TracerInstance::start("osnoise", &cpus, &g, &EVENTS)?;
    for e in &inst.missing {
        ctx.note(format!(
            "osnoise: this kernel has no {e} event: its durations are missing"
        ));
    }
    let config = OsnoiseConfig {
        period_us,
        runtime_us: period_us,
        threshold_us: thresh,
        options: read_global("osnoise/options").unwrap_or_default(),
    };
    let wanted = (duration.as_micros() as u64 / period_us).max(1);
    let limit = duration + period * 2 + GRACE;
    let list = cpus.cpus().to_vec();
    let done = move |t: &Tally, elapsed: Duration| {
        elapsed >= limit || list.iter().all(|&c| t.periods(c) >= wanted)
    };
    let r = kernel_tracer::run(ctx, inst, Tally::new(), |t, l| t.line(l), done);
    let mut entries = r.tally.entries(cpus.cpus(), &config);
    for e in &mut entries {
        e.lost_events = (r.lost.iter())
            .find(|(c, _)| *c == e.cpu)
            .map_or(0, |(_, n)| *n);
    }
    for e in entries.iter().filter(|e| e.periods < wanted) {
        if !r.interrupted {
            ctx.note(format!(
                "osnoise: CPU {} gave {} of the {wanted} periods asked for within {:.1} s",
                e.cpu,
                e.periods,
                limit.as_secs_f64()
            ));
        }
    }
    Ok(OsnoiseRun {
        entries,
        elapsed: r.elapsed,
        interrupted: r.interrupted,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn periods_are_a_second_or_half_the_run() {
        assert_eq!(period_for(Duration::from_secs(10)), Duration::from_secs(1));
        assert_eq!(
            period_for(Duration::from_secs(1)),
            Duration::from_millis(500)
        );
        assert_eq!(
            period_for(Duration::from_millis(50)),
            Duration::from_millis(100)
        );
        assert_eq!(
            (threshold_us(1000), threshold_us(1001), threshold_us(100)),
            (1, 2, 1)
        );
    }

    /// The kernel refuses a runtime above the period and a period below the runtime (a
    /// 6.1 guest: EINVAL both): the order keeps runtime ≤ period at every write.
    #[test]
    fn runtime_and_period_are_written_in_an_order_the_kernel_takes() {
        let cpus = CpuList::parse_kernel("1").unwrap();
        let names =
            |g: Vec<(&'static str, String)>| g.into_iter().map(|(f, _)| f).collect::<Vec<_>>();
        let down = names(globals(&cpus, 500_000, Some(1_000_000), 5, &[]));
        assert_eq!(down[1..3], ["osnoise/runtime_us", "osnoise/period_us"]);
        let up = names(globals(&cpus, 1_000_000, Some(100_000), 5, &[]));
        assert_eq!(up[1..3], ["osnoise/period_us", "osnoise/runtime_us"]);
        let stops = [
            ("osnoise/stop_tracing_us", Some("0".into())),
            ("osnoise/stop_tracing_total_us", Some("30".into())),
        ];
        let g = globals(&cpus, 1_000_000, None, 5, &stops);
        assert_eq!(
            g.last().unwrap(),
            &("osnoise/stop_tracing_total_us", "0".to_string())
        );
        assert_eq!(g[0], ("osnoise/cpus", "1".to_string()));
        assert_eq!(g.len(), 5);
    }
}
