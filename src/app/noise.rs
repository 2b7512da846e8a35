//! `jitterscope noise`: a spinning, pinned thread per measured CPU; the pipeline does the
//! rest.

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::Context;

use crate::cli::{DEFAULT_DURATION, NoiseArgs, NoiseEngine};
use crate::degraded::Degraded;
use crate::engine::run::RunPlan;
use crate::probes::noise::{self, NoiseConfig};
use crate::report::{ProbeEntry, ResultFile};
use crate::trace::tracer::{hwlat::HwlatEntry, osnoise::OsnoiseEntry};

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
    /// What measures (`--engine`).
    pub engine: NoiseEngine,
    /// Check the machine with hwlat instead of measuring (`--hwlat`).
    pub hwlat: bool,
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
            engine: NoiseEngine::Tsc,
            hwlat: false,
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
        let mut cmd = NoiseCommand::new(settings, cfg)?;
        (cmd.engine, cmd.hwlat) = (args.engine, args.hwlat);
        if cmd.engine != NoiseEngine::Tsc
            && matches!(
                cmd.settings.sched.policy,
                crate::engine::sched::Policy::Deadline(_)
            )
        {
            anyhow::bail!(
                "--engine {}: the osnoise tracer runs its own kernel threads, which                  --policy deadline cannot schedule; use --engine tsc",
                engine_name(cmd.engine)
            );
        }
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

impl NoiseCommand {
    /// The TSC loop for `duration`, traced when asked.
    fn measure_tsc(&mut self, ctx: &mut Ctx<'_>, duration: Duration) -> anyhow::Result<Measured> {
        let plan = RunPlan {
            cpus: ctx.cpus.clone(),
            sched: ctx.sched,
            mlock: self.settings.mlock,
            duration,
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
}

/// The engine's name as `--engine` takes it.
pub fn engine_name(e: NoiseEngine) -> &'static str {
    match e {
        NoiseEngine::Tsc => "tsc",
        NoiseEngine::Osnoise => "osnoise",
        NoiseEngine::Both => "both",
    }
}

/// A kernel tracer's run as the pipeline takes it: no threads of ours measured.
fn tracer_measured(
    entries: Vec<ProbeEntry>,
    elapsed: Duration,
    interrupted: bool,
    requested: Duration,
) -> Measured {
    Measured {
        entries,
        outcome: crate::engine::run::RunOutcome {
            workers: Vec::new(),
            window: None,
            interrupted,
            elapsed,
            mlock_error: None,
        },
        requested,
        mlock: false,
        actual: Some(elapsed),
        limit_exceeded: false,
    }
}

/// `--hwlat`: the machine checked alone; a kernel without the tracer, or no root, is
/// one line and a failed run (nothing else runs in its place: it is a check).
fn hwlat_check(
    ctx: &mut Ctx<'_>,
    threshold_ns: u64,
    duration: Duration,
) -> anyhow::Result<Measured> {
    let thresh = super::osnoise::threshold_us(threshold_ns);
    let r = super::hwlat::run(ctx, thresh, duration)
        .context("--hwlat: the hwlat tracer could not run")?;
    let entries = r
        .entries
        .into_iter()
        .map(|e| ProbeEntry::Hwlat(Box::new(e)))
        .collect();
    Ok(tracer_measured(entries, r.elapsed, r.interrupted, duration))
}

impl Measure for NoiseCommand {
    fn settings(&self) -> &RunSettings {
        &self.settings
    }

    fn measure(&mut self, ctx: &mut Ctx<'_>) -> anyhow::Result<Measured> {
        let duration = self.settings.duration.unwrap_or(DEFAULT_DURATION);
        if self.hwlat {
            return hwlat_check(ctx, self.cfg.threshold_ns, duration);
        }
        if self.engine == NoiseEngine::Tsc {
            return self.measure_tsc(ctx, duration);
        }
        // osnoise first: where it cannot run, the TSC loop has the whole duration.
        let share = match self.engine {
            NoiseEngine::Both => duration / 2,
            _ => duration,
        };
        let os = match super::osnoise::run(ctx, self.cfg.threshold_ns, share) {
            Ok(os) => os,
            Err(why) => {
                ctx.degrade(Degraded::EngineUnavailable {
                    engine: "osnoise".into(),
                    reason: why.to_string(),
                });
                return self.measure_tsc(ctx, duration);
            }
        };
        let os_entries = os
            .entries
            .into_iter()
            .map(|e| ProbeEntry::Osnoise(Box::new(e)));
        if self.engine == NoiseEngine::Osnoise || os.interrupted {
            return Ok(tracer_measured(
                os_entries.collect(),
                os.elapsed,
                os.interrupted,
                share,
            ));
        }
        let mut m = self.measure_tsc(ctx, duration - share)?;
        m.entries.splice(0..0, os_entries);
        m.requested = duration;
        m.actual = Some(os.elapsed + m.actual.unwrap_or(m.outcome.elapsed));
        Ok(m)
    }

    fn text(&self, r: &ResultFile) -> String {
        use crate::report::views::{hwlat::hwlat_text, osnoise::osnoise_text};
        let secs = r.run.actual_duration_ns as f64 / 1e9;
        let cpus = super::output::measured_cpus(r);
        if has::<HwlatEntry>(r) {
            return format!(
                "noise --hwlat: CPUs {cpus} for {secs:.3} s{}, the hardware and firmware \
                 checked alone\n{}",
                interrupted_mark(r),
                hwlat_text(r)
            );
        }
        let osnoise = osnoise_text(r);
        if !has::<crate::probes::noise::NoiseEntry>(r) {
            let rt = r.host.preempt_rt().map(|f| format!(", PREEMPT_RT ({f})"));
            return format!(
                "noise: CPUs {cpus} for {secs:.3} s{}, engine osnoise (the kernel's \
                 tracer, its own kernel threads measuring)\nkernel: {}{}\n\n{osnoise}",
                interrupted_mark(r),
                r.host.kernel_release,
                rt.unwrap_or_default(),
            );
        }
        let engine = match (has::<OsnoiseEntry>(r), fell_back(r)) {
            (true, _) => format!(
                "engines: osnoise for {:.3} s, then the TSC loop for {:.3} s, on the same CPUs",
                tsc_start(r) as f64 / 1e9,
                (r.run.actual_duration_ns.saturating_sub(tsc_start(r))) as f64 / 1e9
            ),
            (false, true) => "engine: the TSC loop (osnoise could not run)".to_string(),
            (false, false) => "engine: the TSC loop".to_string(),
        };
        let both = match has::<OsnoiseEntry>(r) {
            true => format!("{osnoise}\n"),
            false => String::new(),
        };
        format!(
            "noise: CPUs {} for {:.3} s{}, threshold {} ns, {}{}\n{engine}\n{}{}\n{both}{}",
            cpus,
            secs,
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

/// Whether the result holds entries of the kind `T`.
fn has<T: crate::report::views::EntryView>(r: &ResultFile) -> bool {
    r.entries::<T>().next().is_some()
}

/// Whether a tracer engine was asked for and the TSC loop ran instead.
fn fell_back(r: &ResultFile) -> bool {
    r.run
        .degraded
        .iter()
        .any(|d| d.kind == "engine-unavailable")
}

/// How long the osnoise half took before the TSC loop began: the run less the loop's
/// window.
fn tsc_start(r: &ResultFile) -> u64 {
    let tsc = (r.entries::<crate::probes::noise::NoiseEntry>())
        .map(|e| e.runtime_ns)
        .max()
        .unwrap_or(0);
    r.run.actual_duration_ns.saturating_sub(tsc)
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
