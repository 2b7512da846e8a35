//! `--policy deadline` for timer and noise: the flags made into SCHED_DEADLINE's three
//! parameters (checked in one line each), refused before the run when the kernel would
//! refuse them (the degradation a short runtime brings is the pipeline's preamble's).
//! Where admission control refuses the pinned thread for its root domain alone, root
//! gets a root domain of each measured CPU's own for the run ([`admit`]).

use std::path::Path;

use anyhow::bail;

use crate::cli::{DeadlineArgs, RunArgs};
use crate::engine::cpu::CpuPlan;
use crate::engine::deadline::{self, Deadline};
use crate::engine::sched::{self, Policy, SchedRequest};
use crate::system::tune::root_domain::{RootDomain, cpu_words};

use super::settings::RunSettings;

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
    // A deadline run at SCHED_OTHER would measure something else: refused, it stops here,
    // unless a root domain made once the CPUs are placed is what it lacks (`admit`).
    let last = crate::engine::cpu::current_affinity()
        .ok()
        .and_then(|c| c.cpus().last().copied());
    match sched::try_on(d, last) {
        Err(r) if !(r.root_domain && may_make_root_domain()) => {
            bail!("--policy deadline ({d}) refused: {}", r.why)
        }
        _ => {}
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

/// Whether this process may make a root domain: root (it writes cgroup files).
fn may_make_root_domain() -> bool {
    rustix::process::geteuid().is_root()
}

/// Admits a deadline run on its placed CPUs: tried on the first measured CPU as its
/// thread will be placed; refused for its root domain alone, as root, the measured CPUs
/// get a root domain each for the run, which the caller holds until the threads have
/// ended (`RootDomain::finish` reverts it and says what it was). `None` when the kernel
/// takes the thread as things are (admission control off, or the CPU has a root domain
/// of its own already). Any other refusal, or a host that forbids the root domain, is
/// one line naming why.
pub fn admit(req: SchedRequest, cpus: &CpuPlan) -> anyhow::Result<Option<RootDomain>> {
    let Policy::Deadline(d) = req.policy else {
        return Ok(None);
    };
    let first = cpus.measured.first();
    let refused = match sched::try_on(d, first) {
        Ok(()) => return Ok(None),
        Err(r) => r,
    };
    if !(refused.root_domain && may_make_root_domain()) {
        bail!("--policy deadline ({d}) refused: {}", refused.why);
    }
    let domain = RootDomain::make(Path::new("/"), &cpus.measured).map_err(|why| {
        anyhow::anyhow!(
            "--policy deadline ({d}) refused: admission control admits a pinned deadline \
             thread only in a root domain of its CPU's own, and none can be made for {} \
             here: {why}; or {}",
            cpu_words(&cpus.measured),
            deadline::ADMISSION_OFF
        )
    })?;
    if let Err(r) = sched::try_on(d, first) {
        let record = domain.finish();
        bail!(
            "--policy deadline ({d}) refused even in a root domain of its own ({record}): {}",
            r.why
        );
    }
    Ok(Some(domain))
}
