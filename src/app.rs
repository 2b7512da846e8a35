//! The command layer: turns parsed arguments into validated configs, runs the probe,
//! prints, saves, and says how the run ended. Warnings go to stderr once each; the table
//! (or the JSON) goes to stdout.

use std::io::Write;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, SystemTime};

use anyhow::{Context, bail};

use std::io::IsTerminal;
use std::path::Path;

use crate::cli::{NoiseArgs, RunArgs, SaveArgs, TimerArgs};
use crate::degraded::Degraded;
use crate::engine::clock::ClockInfo;
use crate::engine::cpu::{CpuList, CpuPlan, CpuUniverse};
use crate::engine::pmqos::{self, DmaLatencyGuard};
use crate::engine::run::{RunOutcome, RunPlan};
use crate::engine::sched::{self, Policy, SchedRequest};
use crate::probes::noise::{self, NoiseConfig};
use crate::probes::timer::{self, BreakRecord, LiveSnapshot, SleepMode, TimerConfig};
use crate::report::result::{Privileges, RunCpus};
use crate::report::{ProbeEntry, ResultFile, RunInfo};
use crate::system::HostInfo;
use crate::trace::{BreakTracer, TraceAction};

pub mod audit;
pub mod c2c;
pub mod compare;
pub mod main_job;
pub mod pingpong;
pub mod ptp;
pub mod queue;
pub mod report;
pub mod syscalls;
pub mod work;

/// How a command ended, for the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// Ran to completion (exit 0).
    Completed,
    /// Stopped early by a signal; what was measured was printed and saved (exit 130).
    Interrupted,
    /// A limit the user set was crossed (`timer --stop-above`); what was measured was
    /// printed and saved (exit 1).
    LimitExceeded,
}

/// The policy and priority the flags ask for.
pub fn sched_request(args: &RunArgs) -> anyhow::Result<SchedRequest> {
    let policy = match (args.policy, args.priority) {
        (Some(p), _) => p,
        (None, Some(_)) => Policy::Fifo,
        (None, None) => Policy::Other,
    };
    match (policy, args.priority) {
        (Policy::Other, Some(p)) => {
            bail!("-p/--priority {p} needs --policy fifo or rr; SCHED_OTHER has no priority")
        }
        (Policy::Other, None) => Ok(SchedRequest::OTHER),
        (p, prio) => Ok(SchedRequest {
            policy: p,
            priority: prio.unwrap_or(1),
        }),
    }
}

/// The CPUs to measure and the coordinator's, from the flags.
pub fn cpu_plan(args: &RunArgs, universe: &CpuUniverse) -> anyhow::Result<CpuPlan> {
    plan_cpus(args.cpus.as_deref(), args.housekeeping, universe)
}

/// The plan from `-a` and `--housekeeping` as given.
pub fn plan_cpus(
    cpus: Option<&str>,
    housekeeping: Option<usize>,
    universe: &CpuUniverse,
) -> anyhow::Result<CpuPlan> {
    let requested = match cpus {
        Some(text) => Some((text, CpuList::parse_strict(text).map_err(with_flag)?)),
        None => None,
    };
    CpuPlan::choose(universe, requested, housekeeping).map_err(with_flag)
}

fn with_flag(e: crate::engine::cpu::CpuListError) -> anyhow::Error {
    anyhow::anyhow!("-a/--cpus: {e}")
}

/// Below this interval a real-time timer thread barely sleeps, and one on every CPU could
/// starve the kernel's own work as a spinner would.
pub const TIMER_HOG_INTERVAL_NS: u64 = 100_000;

/// How a probe's measuring threads use their CPUs, for the safety check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuUse {
    /// Busy the whole run (noise).
    Spin,
    /// Asleep between wake-ups `interval_ns` apart (timer).
    Sleep { interval_ns: u64 },
}

impl CpuUse {
    /// Whether a real-time thread doing this can starve its CPU.
    fn hogs(self) -> bool {
        match self {
            CpuUse::Spin => true,
            CpuUse::Sleep { interval_ns } => interval_ns < TIMER_HOG_INTERVAL_NS,
        }
    }
}

/// Refuses real-time threads that hog their CPUs (spinners, or timers that barely sleep)
/// when they leave the coordinator no CPU of its own (every CPU this process may use is
/// measured), unless forced: they could starve it, and the kernel's per-CPU work, for the
/// whole run. Threads that sleep may take every CPU, as cyclictest's `-S -p 90` does.
/// `cpu_flags` names the options that place the threads, for the fix the error gives.
pub fn check_safety(
    req: SchedRequest,
    plan: &CpuPlan,
    universe: &CpuUniverse,
    force: bool,
    usage: CpuUse,
    cpu_flags: &str,
) -> anyhow::Result<()> {
    if req.policy.is_realtime() && plan.coordinator_shares() && usage.hogs() && !force {
        let (what, fix) = match usage {
            CpuUse::Spin => ("spinners".to_string(), ""),
            CpuUse::Sleep { interval_ns } => (
                format!("timer threads at {} µs", interval_ns as f64 / 1e3),
                ", use -i 100 or more",
            ),
        };
        bail!(
            "refusing to run {req} {what} on every CPU this process may use ({}): none \
             would be left for housekeeping. Leave a CPU free ({cpu_flags}){fix}, or pass \
             --force",
            universe.usable()
        );
    }
    Ok(())
}

/// Everything known before measuring: what to print as warnings and store as degraded.
struct Preamble {
    host: HostInfo,
    degraded: Vec<Degraded>,
    warnings: Vec<String>,
}

fn preamble(req: SchedRequest, plan: &CpuPlan, universe: &CpuUniverse) -> Preamble {
    let (clock, problems) = ClockInfo::detect();
    let host = HostInfo::collect(clock, universe.online.clone()).audited(&plan.measured);
    let mut degraded: Vec<Degraded> = problems.iter().map(Degraded::from_clock).collect();
    if let Err(reason) = sched::preflight(req) {
        degraded.push(Degraded::SchedRefused {
            requested: req,
            reason,
        });
    }
    if let Some(h) = &host.virtualization {
        degraded.push(Degraded::VirtualMachine {
            hypervisor: h.clone(),
        });
    }
    if plan.coordinator_shares() {
        degraded.push(Degraded::CoordinatorShares);
    }
    let mut warnings = Vec::new();
    if req.policy.is_realtime() && host.sched_rt_runtime_us == Some(-1) {
        warnings.push(
            "sched_rt_runtime_us is -1: real-time throttling is off, so a spinning \
             real-time thread gives nothing back to its CPU until the run ends"
                .to_string(),
        );
    }
    Preamble {
        host,
        degraded,
        warnings,
    }
}

/// Set by the main job while its steps run: it prints their warnings once, merged,
/// rather than each step repeating the host's.
static WARNINGS_HELD: AtomicBool = AtomicBool::new(false);

/// One warning line on stderr; a closed stderr is no reason to panic.
fn warn(msg: &str) {
    if !WARNINGS_HELD.load(std::sync::atomic::Ordering::Relaxed) {
        let _ = writeln!(std::io::stderr(), "jitterscope: warning: {msg}");
    }
}

/// A warning printed now and kept for the result's `run.warnings`.
fn note(warnings: &mut Vec<String>, w: String) {
    warn(&w);
    warnings.push(w);
}

/// What every measuring command sets up before measuring.
struct Setup {
    universe: CpuUniverse,
    req: SchedRequest,
    cpus: CpuPlan,
    start_time: SystemTime,
}

fn setup(args: &RunArgs) -> anyhow::Result<Setup> {
    let universe = CpuUniverse::detect().context("cannot read the system's CPUs")?;
    let req = sched_request(args)?;
    let cpus = cpu_plan(args, &universe)?;
    Ok(Setup {
        universe,
        req,
        cpus,
        start_time: SystemTime::now(),
    })
}

/// The one CPU a single-thread probe runs on: `-a CPU`, or the first CPU the default
/// plan would measure; the coordinator keeps to the others.
fn one_cpu_setup(args: &RunArgs, command: &str) -> anyhow::Result<Setup> {
    let universe = CpuUniverse::detect().context("cannot read the system's CPUs")?;
    let req = sched_request(args)?;
    let cpu = match &args.cpus {
        Some(text) => {
            let list = universe
                .parse_user_list(text)
                .map_err(|e| anyhow::anyhow!("-a/--cpus: {e}"))?;
            match list.cpus() {
                [c] => *c,
                _ => bail!("-a/--cpus: {command} runs on one CPU, got '{text}'"),
            }
        }
        None => cpu_plan(args, &universe)?
            .measured
            .first()
            .context("no usable CPU")?,
    };
    let measured = CpuList::from_cpus(vec![cpu]);
    let cpus = CpuPlan {
        housekeeping: universe.usable().without(&measured),
        measured,
    };
    Ok(Setup {
        universe,
        req,
        cpus,
        start_time: SystemTime::now(),
    })
}

/// The preamble, with its warnings printed.
fn announce(s: &Setup) -> Preamble {
    let p = preamble(s.req, &s.cpus, &s.universe);
    for d in &p.degraded {
        warn(&d.to_string());
    }
    for w in &p.warnings {
        warn(w);
    }
    p
}

/// Degradations only known once the threads ran: mlockall's failure, and a policy the
/// pre-flight check allowed but a thread was refused.
fn late_degradations<T>(outcome: &RunOutcome<T>, req: SchedRequest, degraded: &mut Vec<Degraded>) {
    if let Some(e) = &outcome.mlock_error {
        let d = Degraded::MlockFailed {
            reason: e.to_string(),
        };
        warn(&d.to_string());
        degraded.push(d);
    }
    let already_refused = degraded
        .iter()
        .any(|d| matches!(d, Degraded::SchedRefused { .. }));
    let late_refusal = outcome.workers.iter().find_map(|w| w.sched_refused.clone());
    if let Some(reason) = late_refusal.filter(|_| !already_refused) {
        let d = Degraded::SchedRefused {
            requested: req,
            reason,
        };
        warn(&d.to_string());
        degraded.push(d);
    }
}

/// `run` in the result file.
/// The degradations known before the run are completed here with those only the run
/// could show (`late_degradations`), so that no command can leave them out.
fn run_info<T>(
    s: &Setup,
    argv: &[String],
    plan: &RunPlan,
    outcome: &RunOutcome<T>,
    mut degraded: Vec<Degraded>,
    warnings: Vec<String>,
) -> RunInfo {
    late_degradations(outcome, s.req, &mut degraded);
    let euid = rustix::process::geteuid();
    RunInfo {
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        command_line: argv.to_vec(),
        start_time: humantime::format_rfc3339_seconds(s.start_time).to_string(),
        requested_duration_ns: plan.duration.as_nanos() as u64,
        actual_duration_ns: outcome.elapsed.as_nanos() as u64,
        interrupted: outcome.interrupted,
        privileges: Privileges {
            euid: euid.as_raw(),
            root: euid.is_root(),
            memory_locked: plan.mlock && outcome.mlock_error.is_none(),
        },
        cpus: RunCpus {
            measured: s.cpus.measured.clone(),
            housekeeping: s.cpus.housekeeping.clone(),
        },
        degraded: degraded.iter().map(Degraded::to_record).collect(),
        warnings,
        peak_rss_kib: sched::peak_rss_kib(),
    }
}

fn ending(interrupted: bool) -> Ending {
    match interrupted {
        true => Ending::Interrupted,
        false => Ending::Completed,
    }
}

/// `jitterscope noise`.
pub fn noise(args: &NoiseArgs, argv: &[String], stop: &AtomicBool) -> anyhow::Result<Ending> {
    Ok(noise_result(args, argv, stop)?.1)
}

/// `noise`, printed and saved as its flags ask, and its result (for the main job).
pub(crate) fn noise_result(
    args: &NoiseArgs,
    argv: &[String],
    stop: &AtomicBool,
) -> anyhow::Result<(ResultFile, Ending)> {
    let s = setup(&args.run)?;
    check_safety(
        s.req,
        &s.cpus,
        &s.universe,
        args.run.force,
        CpuUse::Spin,
        "-a",
    )?;
    let cfg = NoiseConfig {
        threshold_ns: args.threshold,
        warmup: args.warmup,
        largest: args.top,
        event_log: args.event_log,
    };
    let Preamble {
        host,
        degraded,
        warnings,
    } = announce(&s);
    let plan = RunPlan {
        cpus: s.cpus.clone(),
        sched: s.req,
        mlock: !args.run.no_mlock,
        duration: args.run.duration_or_default(),
        priospread: false,
        setup_timeout: args.warmup + Duration::from_secs(10),
    };
    let run = noise::run(&cfg, &plan, &host.clock, stop).context("the noise run failed")?;
    let info = run_info(&s, argv, &plan, &run.outcome, degraded, warnings);
    let entries = run.entries.into_iter();
    let probes = entries.map(|e| ProbeEntry::Noise(Box::new(e))).collect();
    let result = ResultFile::new(host, info, probes);
    emit(&result, &args.run.save, || {
        format!(
            "{}\n{}",
            noise_header(&result, &cfg, s.req),
            crate::report::views::noise::noise_tables(&result)
        )
    })?;
    let end = ending(result.run.interrupted);
    Ok((result, end))
}

/// `jitterscope timer`.
pub fn timer(args: &TimerArgs, argv: &[String], stop: &AtomicBool) -> anyhow::Result<Ending> {
    Ok(timer_result(args, argv, stop)?.1)
}

/// `timer`, printed and saved as its flags ask, and its result (for the main job).
pub(crate) fn timer_result(
    args: &TimerArgs,
    argv: &[String],
    stop: &AtomicBool,
) -> anyhow::Result<(ResultFile, Ending)> {
    let s = setup(&args.run)?;
    let usage = CpuUse::Sleep {
        interval_ns: args.interval,
    };
    check_safety(s.req, &s.cpus, &s.universe, args.run.force, usage, "-a")?;
    if args.priospread && !s.req.policy.is_realtime() {
        bail!("--priospread needs a real-time policy: add -p PRIO or --policy fifo|rr");
    }
    let duration = match (args.run.duration, args.loops) {
        (Some(d), _) if d.as_nanos() < args.interval as u128 => bail!(
            "-D {} is shorter than the {} µs interval: no wake-up would be measured",
            humantime::format_duration(d),
            args.interval as f64 / 1e3
        ),
        (Some(d), _) => d,
        // -l alone: run until the loops are done, within the longest accepted run.
        (None, Some(_)) => crate::cli::MAX_DURATION,
        (None, None) => crate::cli::DEFAULT_DURATION,
    };
    let mut cfg = TimerConfig {
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
    };
    check_slowest_thread(&cfg, &s.cpus)?;
    let Preamble {
        host,
        mut degraded,
        warnings,
    } = announce(&s);
    // Held for the run only: dropping it (or the process ending any way at all) withdraws
    // the request.
    let dma_guard = match args.no_dma_latency {
        true => None,
        false => match DmaLatencyGuard::set(Path::new(pmqos::DEVICE), args.dma_latency) {
            Ok(g) => Some(g),
            Err(e) => {
                let d = Degraded::DmaLatencyNotSet {
                    reason: e.to_string(),
                };
                warn(&d.to_string());
                degraded.push(d);
                None
            }
        },
    };
    cfg.dma_latency_us = dma_guard.as_ref().map(|g| g.value_us);
    let tracefs = args.stop_above.and_then(|_| crate::trace::tracefs_root());
    let tracer = BreakTracer::open(tracefs.as_deref());
    let plan = RunPlan {
        cpus: s.cpus.clone(),
        sched: s.req,
        mlock: !args.run.no_mlock,
        duration,
        priospread: args.priospread,
        setup_timeout: args.warmup + Duration::from_secs(10),
    };
    let mut live = LiveDisplay::default();
    let mut draw = |snaps: &[LiveSnapshot]| live.draw(snaps);
    let show_live = !args.run.save.quiet && std::io::stderr().is_terminal();
    let on_tick = show_live.then_some((LIVE_EVERY, &mut draw as timer::OnTick<'_>));
    let run = timer::run(&cfg, &plan, &host.clock, stop, &tracer, on_tick)
        .context("the timer run failed")?;
    let stopped_by = run.stopped_by();
    let dma_before = dma_guard.as_ref().and_then(|g| g.previous_us);
    drop(dma_guard);
    let info = run_info(&s, argv, &plan, &run.outcome, degraded, warnings);
    let entries = run.entries.into_iter();
    let probes = entries.map(|e| ProbeEntry::Timer(Box::new(e))).collect();
    let result = ResultFile::new(host, info, probes);
    if let Some(b) = &stopped_by {
        say_stopped(b, cfg.stop_above_ns.unwrap_or(0), tracefs.as_deref());
    }
    emit(&result, &args.run.save, || {
        let mut text = timer_header(&result, &cfg, s.req, dma_before);
        text.push('\n');
        text.push_str(&crate::report::views::timer::timer_tables(&result));
        if cfg.spikes_above_ns.is_some() {
            text.push('\n');
            text.push_str(&crate::report::views::timer::timer_spikes(&result));
        }
        if cfg.histogram_us.is_some() {
            text.push('\n');
            text.push_str(&crate::report::views::timer::timer_buckets(&result));
        }
        text
    })?;
    let end = match stopped_by {
        Some(_) => Ending::LimitExceeded,
        None => ending(result.run.interrupted),
    };
    Ok((result, end))
}

/// Thread n sleeps interval + n × distance; a stop waits for each thread's next wake-up,
/// so no thread may sleep longer than the 1 s an interval may be.
fn check_slowest_thread(cfg: &TimerConfig, cpus: &CpuPlan) -> anyhow::Result<()> {
    let n = cpus.measured.len();
    let slowest = cfg.interval_of(n.saturating_sub(1));
    let max = timer::MAX_INTERVAL_US * 1000;
    if slowest > max {
        bail!(
            "the last of {n} threads would sleep {} µs between wake-ups (-i + {} × -d), \
             over the 1 s limit that keeps a stop prompt: lower -d or -i, use --aligned, or \
             measure fewer CPUs",
            slowest as f64 / 1e3,
            n - 1
        );
    }
    Ok(())
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

/// Saves, then prints (`text()` or the JSON): a terminal that went away (SIGHUP, EIO)
/// must not cost the saved result.
fn emit(result: &ResultFile, to: &SaveArgs, text: impl Fn() -> String) -> anyhow::Result<()> {
    if let Some(path) = &to.output {
        result.write_atomic(path)?;
    }
    if let Some(page) = &to.html {
        write_page(result, to.output.as_deref(), page, |_| {})?;
    }
    let mut out = std::io::stdout().lock();
    let printed = if to.json {
        writeln!(out, "{}", result.to_json())
    } else if !to.quiet {
        write!(out, "{}", text())
    } else {
        Ok(())
    };
    // A closed stdout (`| head`) is not an error worth failing the run for.
    if let Err(e) = printed.and_then(|_| out.flush())
        && e.kind() != std::io::ErrorKind::BrokenPipe
    {
        return Err(e).context("cannot write to stdout");
    }
    Ok(())
}

/// The result's page at `page`, naming the saved file when there is one; `edit` may add
/// to it (the main job leads with its verdict).
fn write_page(
    result: &ResultFile,
    saved: Option<&Path>,
    page: &Path,
    edit: impl FnOnce(&mut crate::report::html::Page),
) -> anyhow::Result<()> {
    let name = saved.map_or_else(
        || Path::new("(not saved: no -o)").to_path_buf(),
        Path::to_path_buf,
    );
    let mut p = crate::report::html::result_page(&[(name, result.clone())])?;
    edit(&mut p);
    crate::report::result::write_atomic(page, crate::report::html::render(&p).as_bytes())
        .with_context(|| format!("cannot write {}", page.display()))
}

/// The clock line every header carries.
fn clock_line(r: &ResultFile) -> String {
    let c = &r.host.clock;
    let source = match c.frequency_source {
        crate::engine::clock::FrequencySource::SysfsTscFreqKhz => "sysfs tsc_freq_khz",
        crate::engine::clock::FrequencySource::PerfMmapPage => "perf_event mmap page",
        crate::engine::clock::FrequencySource::CalibratedMonotonicRaw => {
            "calibrated against CLOCK_MONOTONIC_RAW"
        }
        _ => "nominal",
    };
    let checks: Vec<String> = c
        .cross_checks
        .iter()
        .map(|x| format!("{} {:+.1} ppm", x.source, x.diff_ppm))
        .collect();
    format!(
        "clock: {} at {:.3} MHz ({source}{}{})\n",
        match c.counter {
            crate::engine::clock::Counter::Tsc => "TSC",
            crate::engine::clock::Counter::ClockMonotonic => "CLOCK_MONOTONIC",
        },
        c.frequency_hz / 1e6,
        if checks.is_empty() {
            ""
        } else {
            "; cross-checks: "
        },
        checks.join(", "),
    )
}

fn noise_header(r: &ResultFile, cfg: &NoiseConfig, req: SchedRequest) -> String {
    let interrupted = if r.run.interrupted {
        " (interrupted)"
    } else {
        ""
    };
    format!(
        "noise: CPUs {} for {:.3} s{interrupted}, threshold {} ns, {req}\n{}",
        r.run.cpus.measured,
        r.run.actual_duration_ns as f64 / 1e9,
        cfg.threshold_ns,
        clock_line(r),
    )
}

fn timer_header(
    r: &ResultFile,
    cfg: &TimerConfig,
    req: SchedRequest,
    dma_before: Option<i32>,
) -> String {
    let interrupted = if r.run.interrupted {
        " (interrupted)"
    } else {
        ""
    };
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
    let dma = match (cfg.dma_latency_us, dma_before) {
        (Some(v), Some(b)) => {
            format!("/dev/cpu_dma_latency set to {v} µs for the run (was {b} µs)")
        }
        (Some(v), None) => format!("/dev/cpu_dma_latency set to {v} µs for the run"),
        (None, _) => "/dev/cpu_dma_latency left alone".to_string(),
    };
    format!(
        "timer: CPUs {} for {:.3} s{interrupted}, interval {} µs{spread}, {} {mode}, {req}\n\
         {dma}\n{}",
        r.run.cpus.measured,
        r.run.actual_duration_ns as f64 / 1e9,
        cfg.interval_ns as f64 / 1e3,
        cfg.clock,
        clock_line(r),
    )
}

/// One line on stderr saying which wake-up stopped the run, and what became of the trace.
fn say_stopped(b: &BreakRecord, limit_ns: u64, tracefs: Option<&Path>) {
    let trace = match (b.trace, tracefs) {
        (TraceAction::MarkedAndStopped, Some(root)) => format!(
            "trace marked and stopped in {0}; re-enable with: echo 1 > {0}/tracing_on",
            root.display()
        ),
        (TraceAction::Failed, Some(root)) => {
            format!("could not mark or stop the trace in {}", root.display())
        }
        _ => "tracefs is not mounted, so no trace was frozen".to_string(),
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
    use clap::Parser;

    fn args(extra: &[&str]) -> RunArgs {
        let mut v = vec!["jitterscope", "noise"];
        v.extend_from_slice(extra);
        match crate::cli::Cli::parse_from(v).command {
            Some(crate::cli::Command::Noise(a)) => a.run,
            _ => unreachable!(),
        }
    }

    #[test]
    fn priority_implies_fifo_and_other_takes_none() {
        assert_eq!(
            sched_request(&args(&["-p", "50"])).unwrap(),
            SchedRequest {
                policy: Policy::Fifo,
                priority: 50
            }
        );
        assert_eq!(
            sched_request(&args(&["-p", "5", "--policy", "rr"])).unwrap(),
            SchedRequest {
                policy: Policy::Rr,
                priority: 5
            }
        );
        assert_eq!(
            sched_request(&args(&["--policy", "fifo"]))
                .unwrap()
                .priority,
            1
        );
        assert!(sched_request(&args(&["-p", "5", "--policy", "other"])).is_err());
        assert_eq!(sched_request(&args(&[])).unwrap(), SchedRequest::OTHER);
    }

    #[test]
    fn realtime_on_every_cpu_needs_force() {
        let u = CpuUniverse {
            online: CpuList::parse_kernel("0-1").unwrap(),
            max_cpu: 1,
            allowed: CpuList::parse_kernel("0-1").unwrap(),
        };
        let all = cpu_plan(&args(&["-a", "0-1"]), &u).unwrap();
        let fifo = SchedRequest {
            policy: Policy::Fifo,
            priority: 1,
        };
        assert!(check_safety(fifo, &all, &u, false, CpuUse::Spin, "-a").is_err());
        assert!(check_safety(fifo, &all, &u, true, CpuUse::Spin, "-a").is_ok());
        assert!(check_safety(SchedRequest::OTHER, &all, &u, false, CpuUse::Spin, "-a").is_ok());
        let one = cpu_plan(&args(&["-a", "1"]), &u).unwrap();
        assert!(check_safety(fifo, &one, &u, false, CpuUse::Spin, "-a").is_ok());
    }
}
