//! The command layer: turns parsed arguments into validated configs, runs the probe,
//! prints, saves, and says how the run ended. Warnings go to stderr once each; the table
//! (or the JSON) goes to stdout.

use std::io::Write;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, SystemTime};

use anyhow::{Context, bail};

use crate::cli::{NoiseArgs, RunArgs};
use crate::degraded::Degraded;
use crate::engine::clock::ClockInfo;
use crate::engine::cpu::{CpuList, CpuPlan, CpuUniverse};
use crate::engine::run::RunPlan;
use crate::engine::sched::{self, Policy, SchedRequest};
use crate::probes::noise::{self, NoiseConfig};
use crate::report::result::{Privileges, RunCpus};
use crate::report::{ProbeEntry, ResultFile, RunInfo, SCHEMA};
use crate::system::HostInfo;

/// How a command ended, for the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// Ran to completion (exit 0).
    Completed,
    /// Stopped early by a signal; what was measured was printed and saved (exit 130).
    Interrupted,
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
    let requested = match &args.cpus {
        Some(text) => Some((
            text.as_str(),
            CpuList::parse_strict(text).map_err(with_flag)?,
        )),
        None => None,
    };
    CpuPlan::choose(universe, requested, args.housekeeping).map_err(with_flag)
}

fn with_flag(e: crate::engine::cpu::CpuListError) -> anyhow::Error {
    anyhow::anyhow!("-a/--cpus: {e}")
}

/// Refuses real-time spinners that leave the coordinator no CPU of its own (every CPU
/// this process may use is measured) unless forced: they could starve it, and the
/// kernel's per-CPU work, for the whole run.
pub fn check_safety(
    req: SchedRequest,
    plan: &CpuPlan,
    universe: &CpuUniverse,
    force: bool,
) -> anyhow::Result<()> {
    if req.policy.is_realtime() && plan.coordinator_shares() && !force {
        bail!(
            "refusing to run {req} spinners on every CPU this process may use ({}): none \
             would be left for housekeeping. Leave a CPU out of -a, or pass --force",
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
    let host = HostInfo::collect(clock, universe.online.clone());
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

/// One warning line on stderr; a closed stderr is no reason to panic.
fn warn(msg: &str) {
    let _ = writeln!(std::io::stderr(), "jitterscope: warning: {msg}");
}

/// `jitterscope noise`.
pub fn noise(args: &NoiseArgs, argv: &[String], stop: &AtomicBool) -> anyhow::Result<Ending> {
    let universe = CpuUniverse::detect().context("cannot read the system's CPUs")?;
    let req = sched_request(&args.run)?;
    let cpus = cpu_plan(&args.run, &universe)?;
    check_safety(req, &cpus, &universe, args.run.force)?;
    let cfg = NoiseConfig {
        threshold_ns: args.threshold,
        warmup: args.warmup,
        largest: args.top,
        event_log: args.event_log,
    };
    let start_time = SystemTime::now();
    let Preamble {
        host,
        mut degraded,
        warnings,
    } = preamble(req, &cpus, &universe);
    for d in &degraded {
        warn(&d.to_string());
    }
    for w in &warnings {
        warn(w);
    }
    let plan = RunPlan {
        cpus: cpus.clone(),
        sched: req,
        mlock: !args.run.no_mlock,
        duration: args.run.duration,
        priospread: false,
        setup_timeout: args.warmup + Duration::from_secs(10),
    };
    let run = noise::run(&cfg, &plan, &host.clock, stop).context("the noise run failed")?;

    // Late degradations: only known once the threads ran.
    if let Some(e) = &run.outcome.mlock_error {
        let d = Degraded::MlockFailed {
            reason: e.to_string(),
        };
        warn(&d.to_string());
        degraded.push(d);
    }
    let already_refused = degraded
        .iter()
        .any(|d| matches!(d, Degraded::SchedRefused { .. }));
    let late_refusal = run
        .outcome
        .workers
        .iter()
        .find_map(|w| w.sched_refused.clone());
    if let Some(reason) = late_refusal.filter(|_| !already_refused) {
        let d = Degraded::SchedRefused {
            requested: req,
            reason,
        };
        warn(&d.to_string());
        degraded.push(d);
    }

    let euid = rustix::process::geteuid();
    let result = ResultFile {
        schema: SCHEMA.to_string(),
        host,
        run: RunInfo {
            tool_version: env!("CARGO_PKG_VERSION").to_string(),
            command_line: argv.to_vec(),
            start_time: humantime::format_rfc3339_seconds(start_time).to_string(),
            requested_duration_ns: args.run.duration.as_nanos() as u64,
            actual_duration_ns: run.outcome.elapsed.as_nanos() as u64,
            interrupted: run.outcome.interrupted,
            privileges: Privileges {
                euid: euid.as_raw(),
                root: euid.is_root(),
                memory_locked: plan.mlock && run.outcome.mlock_error.is_none(),
            },
            cpus: RunCpus {
                measured: cpus.measured.clone(),
                housekeeping: cpus.housekeeping.clone(),
            },
            degraded: degraded.iter().map(Degraded::to_record).collect(),
            warnings,
            peak_rss_kib: sched::peak_rss_kib(),
        },
        probes: run.entries.into_iter().map(ProbeEntry::Noise).collect(),
    };
    emit(&result, &args.run, || noise_header(&result, &cfg, req))?;
    Ok(if result.run.interrupted {
        Ending::Interrupted
    } else {
        Ending::Completed
    })
}

/// Saves, then prints (table or JSON): a terminal that went away (SIGHUP, EIO) must not
/// cost the saved result.
fn emit(result: &ResultFile, args: &RunArgs, header: impl Fn() -> String) -> anyhow::Result<()> {
    if let Some(path) = &args.output {
        result.write_atomic(path)?;
    }
    let mut out = std::io::stdout().lock();
    let printed = if args.json {
        writeln!(out, "{}", result.to_json())
    } else if !args.quiet {
        write!(
            out,
            "{}\n{}",
            header(),
            crate::report::table::noise_tables(result)
        )
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

fn noise_header(r: &ResultFile, cfg: &NoiseConfig, req: SchedRequest) -> String {
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
    let interrupted = if r.run.interrupted {
        " (interrupted)"
    } else {
        ""
    };
    format!(
        "noise: CPUs {} for {:.3} s{interrupted}, threshold {} ns, {req}\n\
         clock: {} at {:.3} MHz ({source}{}{})\n",
        r.run.cpus.measured,
        r.run.actual_duration_ns as f64 / 1e9,
        cfg.threshold_ns,
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn args(extra: &[&str]) -> RunArgs {
        let mut v = vec!["jitterscope", "noise"];
        v.extend_from_slice(extra);
        match crate::cli::Cli::parse_from(v).command {
            Some(crate::cli::Command::Noise(a)) => a.run,
            None => unreachable!(),
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
        assert!(check_safety(fifo, &all, &u, false).is_err());
        assert!(check_safety(fifo, &all, &u, true).is_ok());
        assert!(check_safety(SchedRequest::OTHER, &all, &u, false).is_ok());
        let one = cpu_plan(&args(&["-a", "1"]), &u).unwrap();
        assert!(check_safety(fifo, &one, &u, false).is_ok());
    }
}
