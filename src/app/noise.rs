//! `jitterscope noise`: a spinning, pinned thread per measured CPU; the pipeline does the
//! rest.

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::Context;

use crate::cli::{DEFAULT_DURATION, NoiseArgs};
use crate::engine::run::RunPlan;
use crate::probes::noise::{self, NoiseConfig};
use crate::report::{ProbeEntry, ResultFile};
use crate::stats::events::GapRing;

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
}

/// Gaps kept with their timestamps per CPU when tracing and no `--event-log` was given:
/// attribution needs every gap's place on the counter.
pub const TRACE_EVENT_LOG: usize = 200_000;

impl NoiseCommand {
    /// A checked command.
    pub fn new(settings: RunSettings, cfg: NoiseConfig) -> anyhow::Result<NoiseCommand> {
        cfg.validate()?;
        Ok(NoiseCommand {
            settings,
            cfg,
            trace: false,
        })
    }

    /// The same, with gaps attributed to kernel trace events.
    pub fn traced(mut self) -> NoiseCommand {
        self.trace = true;
        if self.cfg.event_log == 0 {
            self.cfg.event_log = TRACE_EVENT_LOG;
        }
        self
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
        let rings: Vec<GapRing> = match self.trace {
            true => (ctx.cpus.measured.cpus().iter())
                .map(|_| GapRing::new(tracing::STREAM_GAPS))
                .collect(),
            false => Vec::new(),
        };
        let run = || noise::run_streaming(&self.cfg, &plan, clock, stop, histograms, &rings);
        let (run, streamed) = match self.trace {
            true => tracing::traced_stream(ctx, &rings, clock.scale, run),
            false => (run(), None),
        };
        let mut run = run.context("the noise run failed")?;
        if let (Some(s), Some(w)) = (streamed, run.outcome.window) {
            tracing::attach_streamed(&mut run.entries, s, clock.scale, w.start);
        }
        Ok(Measured::of_plan(
            run.entries,
            ProbeEntry::Noise,
            run.outcome,
            &plan,
        ))
    }

    fn text(&self, r: &ResultFile) -> String {
        format!(
            "noise: CPUs {} for {:.3} s{}, threshold {} ns, {}{}\n{}\n{}",
            r.run.cpus.measured,
            r.run.actual_duration_ns as f64 / 1e9,
            interrupted_mark(r),
            self.cfg.threshold_ns,
            super::output::result_policy(r, self.settings.sched),
            if self.trace { ", traced" } else { "" },
            clock_line(r),
            crate::report::views::noise::noise_text(r),
        )
    }
}
