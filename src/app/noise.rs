//! `jitterscope noise`: a spinning, pinned thread per measured CPU; the pipeline does the
//! rest.

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::Context;

use crate::cli::{DEFAULT_DURATION, NoiseArgs};
use crate::engine::run::RunPlan;
use crate::probes::noise::{self, NoiseConfig};
use crate::report::{ProbeEntry, ResultFile};

use super::Ending;
use super::output::{Warnings, clock_line, interrupted_mark};
use super::pipeline::{Ctx, Measure, Measured, RunSettings, execute};
use super::tracing;

/// A noise run, described.
pub struct NoiseCommand {
    pub settings: RunSettings,
    pub cfg: NoiseConfig,
    /// Attribute each gap to kernel trace events (`--trace`).
    pub trace: bool,
    /// The event log to keep when the trace cannot be made (the main job's verdict then
    /// infers the causes from the gaps' timing); 0: `cfg.event_log` either way.
    pub untraced_log: usize,
}

impl NoiseCommand {
    /// A checked command.
    pub fn new(settings: RunSettings, cfg: NoiseConfig) -> anyhow::Result<NoiseCommand> {
        cfg.validate()?;
        Ok(NoiseCommand {
            settings,
            cfg,
            trace: false,
            untraced_log: 0,
        })
    }

    /// The same, with gaps attributed to kernel trace events as they come: no gap is
    /// kept for that, so the event log is what `--event-log` asked for.
    pub fn traced(mut self) -> NoiseCommand {
        self.trace = true;
        self
    }

    /// Traced, keeping an event log of `n` only when the trace cannot be made.
    pub fn traced_else_logged(mut self, n: usize) -> NoiseCommand {
        self.trace = true;
        self.untraced_log = n;
        self
    }

    pub fn from_args(args: &NoiseArgs) -> anyhow::Result<NoiseCommand> {
        let cfg = NoiseConfig {
            threshold_ns: args.threshold,
            warmup: args.warmup,
            largest: args.top,
            event_log: args.event_log,
        };
        let periods = super::deadline::Periods {
            period_ns: args.period,
            step_ns: 0,
            default_runtime: None,
        };
        let extra: &[&str] = match args.period {
            Some(_) => &["--period"],
            None => &[],
        };
        let settings = RunSettings {
            gates: args.fail_above.clone(),
            ..super::deadline::settings(&args.run, &args.deadline, periods, extra)?
        };
        let cmd = NoiseCommand::new(settings, cfg)?;
        Ok(match args.trace {
            true => cmd.traced(),
            false => cmd,
        })
    }
}

/// `jitterscope noise`.
pub fn run(args: &NoiseArgs, argv: &[String], stop: &AtomicBool) -> anyhow::Result<Ending> {
    let mut cmd = NoiseCommand::from_args(args)?;
    Ok(execute(&mut cmd, argv, stop, &Warnings::stderr())?.1)
}

/// Whether the trace ran: some CPU's gaps were attributed. A header states what ran, and
/// `--trace` asks for a trace that may not start (no root, no tracefs) or may fail.
fn traced(r: &ResultFile) -> bool {
    r.entries::<crate::probes::noise::NoiseEntry>()
        .any(|e| e.attribution.is_some())
}

impl Measure for NoiseCommand {
    fn settings(&self) -> &RunSettings {
        &self.settings
    }

    fn measure(&mut self, ctx: &mut Ctx<'_>) -> anyhow::Result<Measured> {
        let plan = RunPlan {
            cpus: ctx.cpus.clone(),
            sched: ctx.sched,
            mlock: self.settings.mlock,
            duration: self.settings.duration.unwrap_or(DEFAULT_DURATION),
            priospread: false,
            setup_timeout: self.cfg.warmup + Duration::from_secs(10),
        };
        let (clock, stop) = (&ctx.host.clock, ctx.stop);
        let histograms = match ctx.keep {
            true => noise::Histograms::Encoded,
            false => noise::Histograms::Omitted,
        };
        // Traced, each gap goes to the reader as it happens, so that every gap of the
        // run is attributed whatever its length.
        let run = match self.trace {
            true => tracing::run_noise_traced(ctx, &self.cfg, self.untraced_log, &plan, histograms),
            false => noise::run_with(&self.cfg, &plan, clock, stop, histograms),
        };
        let run = run.context("the noise run failed")?;
        Ok(Measured::of_plan(
            run.entries,
            ProbeEntry::Noise,
            run.outcome,
            &plan,
        ))
    }

    fn text(&self, r: &ResultFile) -> String {
        format!(
            "noise: CPUs {} for {:.3} s{}, threshold {} ns, {}{}\n{}{}\n{}",
            super::output::measured_cpus(r),
            r.run.actual_duration_ns as f64 / 1e9,
            interrupted_mark(r),
            self.cfg.threshold_ns,
            super::output::result_policy(r, self.settings.sched),
            if traced(r) { ", traced" } else { "" },
            clock_line(r),
            super::output::root_domain_line(r),
            crate::report::views::noise::noise_text(r),
        ) + &deadline_lines(r)
    }
}

/// Under SCHED_DEADLINE, one line per CPU: the time the scheduler withheld between
/// runtimes, named as the deadline's own and kept out of the interruptions above.
fn deadline_lines(r: &ResultFile) -> String {
    let mut out = String::new();
    for e in r.entries::<crate::probes::noise::NoiseEntry>() {
        let Some(d) = &e.deadline else { continue };
        out.push_str(&format!(
            "deadline CPU {}: throttled {} times for {:.3} ms in all (the deadline's own: {} \
             µs runtime per {} µs period), not counted as interruptions\n",
            e.cpu,
            d.throttled,
            d.throttled_ns as f64 / 1e6,
            d.runtime_ns as f64 / 1e3,
            d.period_ns as f64 / 1e3,
        ));
    }
    out
}
