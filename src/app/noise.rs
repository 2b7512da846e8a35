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

/// A noise run, described.
pub struct NoiseCommand {
    pub settings: RunSettings,
    pub cfg: NoiseConfig,
}

impl NoiseCommand {
    /// A checked command.
    pub fn new(settings: RunSettings, cfg: NoiseConfig) -> anyhow::Result<NoiseCommand> {
        cfg.validate()?;
        Ok(NoiseCommand { settings, cfg })
    }

    pub fn from_args(args: &NoiseArgs) -> anyhow::Result<NoiseCommand> {
        let cfg = NoiseConfig {
            threshold_ns: args.threshold,
            warmup: args.warmup,
            largest: args.top,
            event_log: args.event_log,
        };
        let settings = RunSettings {
            gates: args.fail_above.clone(),
            ..RunSettings::from_args(&args.run)?
        };
        NoiseCommand::new(settings, cfg)
    }
}

/// `jitterscope noise`.
pub fn run(args: &NoiseArgs, argv: &[String], stop: &AtomicBool) -> anyhow::Result<Ending> {
    let mut cmd = NoiseCommand::from_args(args)?;
    Ok(execute(&mut cmd, argv, stop, &Warnings::stderr())?.1)
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
        let run = noise::run(&self.cfg, &plan, &ctx.host.clock, ctx.stop)
            .context("the noise run failed")?;
        Ok(Measured {
            entries: run
                .entries
                .into_iter()
                .map(|e| ProbeEntry::Noise(Box::new(e)))
                .collect(),
            outcome: run.outcome,
            requested: plan.duration,
            mlock: plan.mlock,
            actual: None,
            limit_exceeded: false,
        })
    }

    fn text(&self, r: &ResultFile) -> String {
        format!(
            "noise: CPUs {} for {:.3} s{}, threshold {} ns, {}\n{}\n{}",
            r.run.cpus.measured,
            r.run.actual_duration_ns as f64 / 1e9,
            interrupted_mark(r),
            self.cfg.threshold_ns,
            self.settings.sched,
            clock_line(r),
            crate::report::views::noise::noise_tables(r)
        )
    }
}
