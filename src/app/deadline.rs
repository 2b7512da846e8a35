//! `--policy deadline` for timer and noise: the flags made into SCHED_DEADLINE's three
//! parameters (checked in one line each), refused before the run when the kernel would
//! refuse them (the degradation a short runtime brings is the pipeline's preamble's).

use anyhow::bail;

use crate::cli::{DeadlineArgs, RunArgs};
use crate::engine::deadline::Deadline;
use crate::engine::sched::{self, Policy, SchedRequest};

use super::pipeline::RunSettings;

/// What the command knows of its period: the timer's interval and distance, or noise's
/// `--period`.
pub struct Periods {
    /// The first thread's period.
    pub period_ns: Option<u64>,
    /// Added to each next thread's period and deadline.
    pub step_ns: u64,
    /// The runtime when `--runtime` is absent: None makes it required.
    pub default_runtime: Option<fn(u64) -> u64>,
}

/// The run's settings from the shared flags, with SCHED_DEADLINE when asked for.
/// `extra` names the command's own deadline-only flags that were given.
pub fn settings(
    run: &RunArgs,
    dl: &DeadlineArgs,
    periods: Periods,
    extra: &[&str],
) -> anyhow::Result<RunSettings> {
    let Some(Policy::Deadline(_)) = run.policy else {
        let given = [
            ("--runtime", dl.runtime.is_some()),
            ("--deadline", dl.deadline.is_some()),
        ];
        let flags = given.iter().filter(|(_, on)| *on).map(|(f, _)| *f);
        if let Some(flag) = flags.chain(extra.iter().copied()).next() {
            bail!("{flag} is a SCHED_DEADLINE parameter: add --policy deadline");
        }
        return RunSettings::from_args(run);
    };
    if let Some(p) = run.priority {
        bail!("-p/--priority {p}: SCHED_DEADLINE has no priority (it runs above every FIFO task)");
    }
    let Some(period_ns) = periods.period_ns else {
        bail!("--policy deadline needs --runtime and --period, e.g. --runtime 500us --period 1ms");
    };
    let deadline_ns = dl.deadline.unwrap_or(period_ns);
    let runtime_ns = match (dl.runtime, periods.default_runtime) {
        (Some(r), _) => r,
        (None, Some(f)) => f(deadline_ns),
        (None, None) => bail!(
            "--policy deadline needs --runtime and --period, e.g. --runtime 500us --period 1ms"
        ),
    };
    let d = Deadline {
        runtime_ns,
        deadline_ns,
        period_ns,
        step_ns: periods.step_ns,
    };
    d.check().map_err(anyhow::Error::msg)?;
    let req = SchedRequest {
        policy: Policy::Deadline(d),
        priority: 0,
    };
    // A deadline run at SCHED_OTHER would measure something else: refused, it stops here.
    if let Err(why) = sched::preflight(req) {
        bail!("--policy deadline ({d}) refused: {why}");
    }
    let plain = RunArgs {
        policy: None,
        ..run.clone()
    };
    Ok(RunSettings {
        sched: req,
        ..RunSettings::from_args(&plain)?
    })
}
