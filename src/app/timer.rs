//! `jitterscope timer`: cyclictest's loop on each measured CPU, with /dev/cpu_dma_latency
//! held for the run, cyclictest's live lines on a terminal, and its breaktrace.

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::{Context, bail};

use crate::cli::{DEFAULT_DURATION, MAX_DURATION, TimerArgs, TimerEngine, TimerSlack};
use crate::degraded::Degraded;
use crate::engine::cpu::CpuPlan;
use crate::engine::deadline::MIN_RUNTIME_NS;
use crate::engine::pmqos::{self, DmaLatencyGuard};
use crate::engine::run::RunPlan;
use crate::engine::sched::{Policy, SchedRequest};
use crate::probes::timer::{self, BreakRecord, LiveSnapshot, SleepMode, TimerConfig, TimerEntry};
use crate::probes::timer::{BreakAction, TimerConfigError};
use crate::report::{ProbeEntry, ResultFile};
use crate::trace::BreakTracer;
use crate::trace::stream::{Lane, Pick};

use super::Ending;
use super::output::{Warnings, clock_line, interrupted_mark};
use super::pipeline::{CpuUse, Ctx, Measure, Measured, RunSettings, execute};
use super::tracing;

/// What /dev/cpu_dma_latency should hold while measuring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DmaLatency {
    /// Write this many µs and withdraw it when the run ends (cyclictest's default 0).
    Hold(i32),
    /// Leave it alone.
    LeaveAlone,
}

/// A timer run, described.
pub struct TimerCommand {
    pub settings: RunSettings,
    pub cfg: TimerConfig,
    pub priospread: bool,
    pub dma: DmaLatency,
    /// The value /dev/cpu_dma_latency held before the run, once set.
    dma_before: Option<i32>,
    /// Attribute the late wake-ups to kernel trace events (`--trace`), those at or
    /// above this (None: each thread's p99).
    pub trace: Option<Option<u64>>,
    /// What measures (`--engine`): the loop, the kernel's timerlat tracer, or both.
    pub engine: TimerEngine,
    /// The policy timerlat's kernel threads are set to: `-p`/`--policy` when given.
    pub timerlat_sched: Option<SchedRequest>,
}

impl TimerCommand {
    /// A checked command. The number of threads is only known once the CPUs are placed,
    /// so `check` validates the config again for them.
    pub fn new(
        settings: RunSettings,
        cfg: TimerConfig,
        priospread: bool,
        dma: DmaLatency,
    ) -> anyhow::Result<TimerCommand> {
        if priospread && matches!(settings.sched.policy, Policy::Deadline(_)) {
            bail!("--priospread: SCHED_DEADLINE threads have no priority");
        }
        if priospread && !settings.sched.policy.is_realtime() {
            bail!("--priospread needs a real-time policy: add -p PRIO or --policy fifo|rr");
        }
        if let Some(d) = settings.duration
            && d.as_nanos() < cfg.interval_ns as u128
        {
            bail!(
                "-D {} is shorter than the {} µs interval: no wake-up would be measured",
                humantime::format_duration(d),
                cfg.interval_ns as f64 / 1e3
            );
        }
        cfg.validate(1)?;
        if settings.gates.iter().any(|g| !g.is_time()) {
            bail!("--fail-above: timer's figures are latencies; lost and rate are noise's");
        }
        Ok(TimerCommand {
            settings,
            cfg,
            priospread,
            dma,
            dma_before: None,
            trace: None,
            engine: TimerEngine::Nanosleep,
            timerlat_sched: None,
        })
    }

    pub fn from_args(args: &TimerArgs) -> anyhow::Result<TimerCommand> {
        let cfg = TimerConfig {
            interval_ns: args.interval,
            distance_ns: if args.aligned { 0 } else { args.distance },
            clock: args.clock,
            mode: match args.relative {
                true => SleepMode::Relative,
                false => SleepMode::Absolute,
            },
            loops: args.loops,
            warmup: args.warmup,
            stop_above_ns: args.stop_above,
            spikes_above_ns: args.spikes,
            spike_capacity: args.spike_nodes,
            histogram_us: args.histogram,
            largest: args.top,
            dma_latency_us: None,
            timer_slack_ns: match args.timer_slack {
                TimerSlack::Ns(ns) => Some(ns),
                TimerSlack::KernelDefault => None,
            },
            work_ns: args.work.unwrap_or(0),
        };
        let dma = match args.no_dma_latency {
            true => DmaLatency::LeaveAlone,
            false => DmaLatency::Hold(args.dma_latency),
        };
        let periods = super::deadline::Periods {
            period_ns: Some(cfg.interval_ns),
            step_ns: cfg.distance_ns,
            default_runtime: Some(|deadline| (deadline / 10).max(MIN_RUNTIME_NS)),
        };
        let extra: &[&str] = match args.work {
            Some(_) => &["--work"],
            None => &[],
        };
        let settings = RunSettings {
            gates: args.fail_above.clone(),
            ..super::deadline::settings(&args.run, &args.deadline, periods, extra)?
        };
        let mut cmd = TimerCommand::new(settings, cfg, args.priospread, dma)?;
        if args.trace {
            cmd.trace = Some(args.trace_above);
        }
        cmd.engine = args.engine;
        // As asked, but never SCHED_DEADLINE (the loop's only, with --engine both).
        let asked = args.run.priority.is_some() || args.run.policy.is_some();
        let deadline = matches!(cmd.settings.sched.policy, Policy::Deadline(_));
        cmd.timerlat_sched = (asked && !deadline).then_some(cmd.settings.sched);
        super::timerlat::check_args(args, &cmd.settings)?;
        Ok(cmd)
    }

    /// How long the runner's window is: `-D`; with `-l` alone until the loops are done,
    /// within the longest accepted run.
    fn duration(&self) -> Duration {
        match (self.settings.duration, self.cfg.loops) {
            (Some(d), _) => d,
            (None, Some(_)) => MAX_DURATION,
            (None, None) => DEFAULT_DURATION,
        }
    }
}

/// `jitterscope timer`.
pub fn run(args: &TimerArgs, argv: &[String], stop: &AtomicBool) -> anyhow::Result<Ending> {
    let mut cmd = TimerCommand::from_args(args)?;
    Ok(execute(&mut cmd, argv, stop, &Warnings::stderr())?.1)
}

impl Measure for TimerCommand {
    fn settings(&self) -> &RunSettings {
        &self.settings
    }

    fn cpu_use(&self) -> CpuUse {
        CpuUse::Sleep {
            interval_ns: self.cfg.interval_ns,
        }
    }

    /// Thread n sleeps interval + n × distance; a stop waits for each thread's next
    /// wake-up, so no thread may sleep longer than the 1 s an interval may be.
    fn check(&self, cpus: &CpuPlan) -> anyhow::Result<()> {
        let n = cpus.measured.len();
        self.cfg.validate(n).map_err(|e| match e {
            TimerConfigError::SlowestThread { slowest_ns, .. } => anyhow::anyhow!(
                "the last of {n} threads would sleep {} µs between wake-ups (-i + {} × -d), \
                 over the 1 s limit that keeps a stop prompt: lower -d or -i, use --aligned, \
                 or measure fewer CPUs",
                slowest_ns as f64 / 1e3,
                n - 1
            ),
            e => e.into(),
        })
    }

    fn measure(&mut self, ctx: &mut Ctx<'_>) -> anyhow::Result<Measured> {
        match self.engine {
            TimerEngine::Nanosleep => self.measure_loop(ctx),
            TimerEngine::Timerlat => match self.measure_timerlat(ctx) {
                Some(m) => Ok(m),
                None => self.measure_loop(ctx),
            },
            TimerEngine::Both => {
                let looped = self.measure_loop(ctx)?;
                if looped.outcome.interrupted || looped.limit_exceeded {
                    return Ok(looped);
                }
                Ok(match self.measure_timerlat(ctx) {
                    Some(tl) => super::timerlat::after_loop(looped, tl),
                    None => looped,
                })
            }
        }
    }

    fn text(&self, r: &ResultFile) -> String {
        let mut text = String::new();
        if r.entries::<TimerEntry>().next().is_some() {
            text.push_str(&self.loop_text(r));
        }
        if r.entries::<crate::probes::timerlat::TimerlatEntry>()
            .next()
            .is_some()
        {
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(&super::timerlat::text(r, &self.dma_words()));
        }
        text
    }
}

impl TimerCommand {
    /// /dev/cpu_dma_latency held for a run: dropping the guard (or the process ending
    /// any way at all) withdraws the request.
    fn hold_dma(&mut self, ctx: &mut Ctx<'_>) -> Option<DmaLatencyGuard> {
        let dma_guard = match self.dma {
            DmaLatency::LeaveAlone => None,
            DmaLatency::Hold(us) => match DmaLatencyGuard::set(Path::new(pmqos::DEVICE), us) {
                Ok(g) => Some(g),
                Err(e) => {
                    ctx.degrade(Degraded::DmaLatencyNotSet {
                        reason: e.to_string(),
                    });
                    None
                }
            },
        };
        self.cfg.dma_latency_us = dma_guard.as_ref().map(|g| g.value_us);
        self.dma_before = dma_guard.as_ref().and_then(|g| g.previous_us);
        dma_guard
    }

    /// The kernel's timerlat tracer's run, /dev/cpu_dma_latency held as for the loop.
    fn measure_timerlat(&mut self, ctx: &mut Ctx<'_>) -> Option<Measured> {
        let _dma = self.hold_dma(ctx);
        let duration = self.settings.duration.unwrap_or(DEFAULT_DURATION);
        let how = super::timerlat::How {
            engine: self.engine,
            period_ns: self.cfg.interval_ns,
            sched: self.timerlat_sched,
        };
        super::timerlat::measure(&how, duration, ctx)
    }

    /// The nanosleep loop's run.
    fn measure_loop(&mut self, ctx: &mut Ctx<'_>) -> anyhow::Result<Measured> {
        let dma_guard = self.hold_dma(ctx);
        let tracefs = self
            .cfg
            .stop_above_ns
            .and_then(|_| crate::trace::tracefs_root());
        let tracer = BreakTracer::open(tracefs.as_deref());
        let plan = RunPlan {
            cpus: ctx.cpus.clone(),
            sched: ctx.sched,
            mlock: self.settings.mlock,
            duration: self.duration(),
            priospread: self.priospread,
            setup_timeout: self.cfg.warmup + Duration::from_secs(10),
        };
        let mut live = LiveDisplay::default();
        let mut draw = |snaps: &[LiveSnapshot]| live.draw(snaps);
        let show_live = !self.settings.save.quiet && std::io::stderr().is_terminal();
        let on_tick = show_live.then_some((LIVE_EVERY, &mut draw as timer::OnTick<'_>));
        let (cfg, clock, stop) = (&self.cfg, &ctx.host.clock, ctx.stop);
        let scale = clock.scale;
        // Traced, each thread hands its wake-ups to a reader as they happen, which
        // attributes the late ones as they settle (`trace::stream::Pick`).
        let (traced, rings) = match self.trace.and_then(|_| tracing::start_streamed(ctx)) {
            Some((t, rings)) => (Some(t), rings),
            None => (None, Vec::new()),
        };
        // `--trace-above`'s floor; none: the running p99.
        let above = self.trace.flatten();
        let stream = traced.as_ref().map(|_| timer::Stream {
            rings: &rings,
            above_ns: above.unwrap_or(0),
        });
        let run_it = || timer::run_streaming(cfg, &plan, clock, stop, &tracer, on_tick, stream);
        let (run, streamed) = match traced {
            Some(traced) => {
                let lane = |i: usize, cpu: usize, throttle| {
                    let pick = match above {
                        Some(ns) => Pick::AtLeast(ns),
                        None => Pick::running_p99(),
                    };
                    Lane::timer(cpu, throttle, scale.to_ticks(cfg.interval_of(i)), pick)
                };
                tracing::stream_timer(ctx, traced, &rings, lane, scale, run_it)
            }
            None => (run_it(), None),
        };
        let mut run = run.context("the timer run failed")?;
        if let (Some(s), Some(w)) = (streamed, run.outcome.window) {
            for (i, out) in s.per_cpu.into_iter().enumerate() {
                if let Some(e) = run.entries.iter_mut().find(|e| e.thread_index == i) {
                    e.attribution = Some(out.attribution(scale, w.start));
                }
            }
        }
        let stopped_by = run.stopped_by();
        drop(dma_guard);
        if let Some(b) = &stopped_by {
            say_stopped(b, self.cfg.stop_above_ns.unwrap_or(0), tracefs.as_deref());
        }
        Ok(Measured {
            limit_exceeded: stopped_by.is_some(),
            ..Measured::of_plan(run.entries, ProbeEntry::Timer, run.outcome, &plan)
        })
    }

    fn loop_text(&self, r: &ResultFile) -> String {
        let mut text = self.header(r);
        text.push('\n');
        text.push_str(&crate::report::views::timer::timer_text(r));
        text.push_str(&deadline_lines(r));
        if self.cfg.spikes_above_ns.is_some() {
            text.push('\n');
            text.push_str(&crate::report::views::timer::timer_spikes(r));
        }
        if self.cfg.histogram_us.is_some() {
            text.push('\n');
            text.push_str(&crate::report::views::timer::timer_buckets(r));
        }
        text
    }
}

/// Under SCHED_DEADLINE, one line per thread: its jobs' overruns.
fn deadline_lines(r: &ResultFile) -> String {
    let us = |ns: u64| ns as f64 / 1e3;
    let mut out = String::new();
    for e in r.entries::<TimerEntry>() {
        let Some(d) = &e.deadline else { continue };
        out.push_str(&format!(
            "deadline CPU {}: {} jobs of {} µs work: {} over the {} µs runtime, {} past the \
             {} µs deadline\n",
            e.cpu,
            e.wakeups,
            us(d.work_ns),
            d.over_runtime,
            us(d.runtime_ns),
            d.past_deadline,
            us(d.deadline_ns),
        ));
    }
    out
}

impl TimerCommand {
    /// What /dev/cpu_dma_latency held, in words.
    fn dma_words(&self) -> String {
        match (self.cfg.dma_latency_us, self.dma_before) {
            (Some(v), Some(b)) => {
                format!("/dev/cpu_dma_latency set to {v} µs for the run (was {b} µs)")
            }
            (Some(v), None) => format!("/dev/cpu_dma_latency set to {v} µs for the run"),
            (None, _) => "/dev/cpu_dma_latency left alone".to_string(),
        }
    }

    fn header(&self, r: &ResultFile) -> String {
        let cfg = &self.cfg;
        let threads = r.run.cpus.measured.len();
        let spread = match cfg.distance_ns {
            _ if threads < 2 => String::new(),
            0 => ", aligned".to_string(),
            d => format!(" (+{} µs per thread)", d as f64 / 1e3),
        };
        let mode = match cfg.mode {
            SleepMode::Absolute => "absolute deadlines",
            SleepMode::Relative => "relative sleeps",
        };
        let dma = self.dma_words();
        let secs = match self.engine {
            TimerEngine::Both => super::timerlat::loop_secs(r),
            _ => r.run.actual_duration_ns as f64 / 1e9,
        };
        let what = match self.engine {
            TimerEngine::Nanosleep => "timer",
            _ => "timer (nanosleep loop)",
        };
        format!(
            "{what}: CPUs {} for {secs:.3} s{}, interval {} µs{spread}, {} {mode}\n\
             {}, {}; {dma}\n{}{}",
            super::output::measured_cpus(r),
            interrupted_mark(r),
            cfg.interval_ns as f64 / 1e3,
            cfg.clock,
            super::output::result_policy(r, self.settings.sched),
            slack_words(r),
            clock_line(r),
            super::output::root_domain_line(r),
        )
    }
}

/// The timer slack the threads measured with, as read back: "timer slack 1 ns".
fn slack_words(r: &ResultFile) -> String {
    let slacks: Vec<u64> = (r.entries::<TimerEntry>())
        .filter_map(|t| t.config.timer_slack_ns)
        .collect();
    match (slacks.iter().min(), slacks.iter().max()) {
        (Some(lo), Some(hi)) if lo == hi => format!("timer slack {}", ns_words(*lo)),
        (Some(lo), Some(hi)) => format!("timer slack {} to {}", ns_words(*lo), ns_words(*hi)),
        _ => "timer slack not known".to_string(),
    }
}

fn ns_words(ns: u64) -> String {
    match ns {
        ns if ns >= 1000 && ns % 1000 == 0 => format!("{} µs", ns / 1000),
        ns => format!("{ns} ns"),
    }
}

/// How often the live display refreshes: at most 4 times a second.
const LIVE_EVERY: Duration = Duration::from_millis(250);

/// cyclictest's in-place per-thread lines, on stderr, drawn by the coordinator.
#[derive(Default)]
struct LiveDisplay {
    /// Lines drawn last time, to move back over.
    drawn: usize,
}

impl LiveDisplay {
    /// Draws every thread's line, over the previous ones.
    fn draw(&mut self, snaps: &[LiveSnapshot]) {
        let mut text = String::new();
        if self.drawn > 0 {
            text.push_str(&format!("\x1b[{}A", self.drawn));
        }
        for snap in snaps {
            text.push_str("\x1b[2K");
            text.push_str(&crate::report::views::timer::live_line(snap));
            text.push('\n');
        }
        self.drawn = snaps.len();
        let _ = std::io::stderr().lock().write_all(text.as_bytes());
    }
}

/// One line on stderr saying which wake-up stopped the run, and what became of the trace.
fn say_stopped(b: &BreakRecord, limit_ns: u64, tracefs: Option<&Path>) {
    let trace = match (b.trace, tracefs) {
        (BreakAction::MarkedAndStopped, Some(root)) => format!(
            "trace marked and stopped in {0}; re-enable with: echo 1 > {0}/tracing_on",
            root.display()
        ),
        (BreakAction::Failed, Some(root)) => {
            format!("could not mark or stop the trace in {}", root.display())
        }
        (BreakAction::NoTracefs, _) | (_, None) => {
            "tracefs is not mounted, so no trace was frozen".to_string()
        }
    };
    let within = b.all_stopped_within_ns.map_or(String::new(), |ns| {
        format!(", every thread stopped within {:.1} µs", ns as f64 / 1e3)
    });
    let _ = writeln!(
        std::io::stderr(),
        "jitterscope: stopped: CPU {} (thread {}) woke {:.2} µs late, above the {:.2} µs \
         limit, {:.6} s into the run (wake-up {}){within}; {trace}",
        b.cpu,
        b.thread_index,
        b.value_ns as f64 / 1e3,
        limit_ns as f64 / 1e3,
        b.at_ns as f64 / 1e9,
        b.wakeup,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser;

    /// The main job builds its steps from the configs' defaults: they must be what a bare
    /// command line gives.
    #[test]
    fn command_line_defaults_are_the_configs_defaults() {
        let Some(Command::Timer(a)) = Cli::parse_from(["jitterscope", "timer"]).command else {
            panic!("timer parses");
        };
        let cmd = TimerCommand::from_args(&a).unwrap();
        assert_eq!(cmd.cfg, TimerConfig::default());
        assert_eq!(cmd.dma, DmaLatency::Hold(0));
        assert!(!cmd.priospread);
        let Some(Command::Pingpong(p)) = Cli::parse_from(["jitterscope", "pingpong"]).command
        else {
            panic!("pingpong parses");
        };
        assert_eq!(p.pause, crate::probes::pingpong::DEFAULT_PAUSE_NS);
        assert_eq!(p.warmup, crate::probes::pingpong::DEFAULT_WARMUP);
        let n = super::super::noise::NoiseCommand::from_args(&crate::cli::NoiseArgs::default());
        assert_eq!(n.unwrap().cfg, crate::probes::noise::NoiseConfig::default());
    }

    #[test]
    fn bad_configs_are_refused_by_the_constructor() {
        let s = RunSettings::quiet();
        let cfg = |interval_ns| TimerConfig {
            interval_ns,
            ..TimerConfig::default()
        };
        assert!(TimerCommand::new(s.clone(), cfg(500), false, DmaLatency::LeaveAlone).is_err());
        assert!(
            TimerCommand::new(s.clone(), cfg(2_000_000_000), false, DmaLatency::LeaveAlone)
                .is_err()
        );
        // --priospread without a real-time policy.
        assert!(
            TimerCommand::new(s.clone(), cfg(1_000_000), true, DmaLatency::LeaveAlone).is_err()
        );
        assert!(TimerCommand::new(s, cfg(1_000_000), false, DmaLatency::LeaveAlone).is_ok());
        let zero = crate::probes::noise::NoiseConfig {
            threshold_ns: 0,
            ..Default::default()
        };
        assert!(super::super::noise::NoiseCommand::new(RunSettings::quiet(), zero).is_err());
    }
}
