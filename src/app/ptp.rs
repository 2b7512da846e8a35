//! `jitterscope ptp`: finds the PTP clocks asked for (every /dev/ptp*, one device, or a
//! network interface's PHC), reads each by every method the kernel offers, and prints one
//! table of what works, the PHC − system offset, the read window and the cost.
//!
//! A host without PTP clocks is not an error: one line says so and the exit is 0. A
//! device or interface that was named but is missing, has no PHC, or is no PTP clock at
//! all, is bad input (exit 2). The environment variable `JITTERSCOPE_DEV_DIR` replaces
//! `/dev` as the directory searched for `ptp<N>` (for tests, and for hosts whose device
//! nodes live elsewhere); a device named by path is used as given.

use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Instant, SystemTime};

use anyhow::{Context, bail};

use crate::cli::PtpArgs;
use crate::degraded::Degraded;
use crate::engine::clock::{ClockInfo, ClockProblem};
use crate::engine::cpu::{CpuList, CpuPlan, CpuUniverse};
use crate::engine::sched;
use crate::probes::ptp::{self, Device, PtpConfig, PtpEntry, Target, errno_name};
use crate::report::result::{Privileges, RunCpus};
use crate::report::{ProbeEntry, ResultFile, RunInfo};
use crate::system::HostInfo;

use super::Ending;

/// The variable that replaces `/dev` as the directory searched for `ptp<N>`.
pub const DEV_DIR_ENV: &str = "JITTERSCOPE_DEV_DIR";

/// `jitterscope ptp`.
pub fn run(args: &PtpArgs, argv: &[String], stop: &AtomicBool) -> anyhow::Result<Ending> {
    let dir = dev_dir();
    let target = Target::parse(args.device.as_deref());
    let devices = ptp::resolve(&target, &dir)?;
    if devices.is_empty() {
        say(&format!(
            "no PTP clock devices ({}/ptp*) on this host; nothing to measure",
            dir.display()
        ));
        return Ok(Ending::Completed);
    }
    let start_time = SystemTime::now();
    let started = Instant::now();
    let (clock, problems) = ClockInfo::detect();
    let universe = CpuUniverse::detect().context("cannot read the system's CPUs")?;
    // ptp measures no CPU: the audit is about the CPUs a measuring command would take.
    let measured = CpuPlan::choose(&universe, None, None)
        .map(|p| p.measured)
        .unwrap_or_default();
    let host = HostInfo::collect(clock, universe.online.clone()).audited(&measured);
    let cfg = PtpConfig {
        samples: args.samples,
    };
    let named = target != Target::All;
    // The TSC stamps around each call must come from one CPU: the first a measuring
    // command would take.
    let pin = measured
        .first()
        .map(|cpu| (cpu, crate::engine::sched::pin_to(cpu)));
    let (entries, mut warnings) = measure_all(&devices, &cfg, &host, stop, named)?;
    match pin {
        Some((cpu, Err(e))) => super::note(
            &mut warnings,
            format!("could not pin to CPU {cpu} ({e}): a call's cost may span a migration"),
        ),
        None => super::note(
            &mut warnings,
            "no CPU to pin to: a call's cost may span a migration".into(),
        ),
        Some((_, Ok(()))) => {}
    }
    // Only now: a device that turned out to be bad input gets its one line alone.
    let degraded = degradations(&host, &problems);
    for d in &degraded {
        super::warn(&d.to_string());
    }
    let interrupted = stop.load(Ordering::Relaxed);
    let info = run_info(argv, start_time, started, interrupted, &degraded, warnings);
    let probes = entries
        .into_iter()
        .map(|e| ProbeEntry::Ptp(Box::new(e)))
        .collect();
    let result = ResultFile::new(host, info, probes);
    super::emit(&result, &args.save, || {
        format!(
            "{}\n{}",
            header(&result, &cfg),
            crate::report::views::ptp::ptp_table(&result)
        )
    })?;
    Ok(super::ending(interrupted))
}

/// `/dev`, or what `JITTERSCOPE_DEV_DIR` says.
fn dev_dir() -> PathBuf {
    match std::env::var_os(DEV_DIR_ENV) {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => PathBuf::from(ptp::DEFAULT_DEV_DIR),
    }
}

/// One line on stderr; a closed stderr is no reason to fail.
fn say(msg: &str) {
    let _ = writeln!(std::io::stderr(), "jitterscope: {msg}");
}

/// What may make the figures worse: the costs are timed with the TSC, and a virtual
/// machine's PHC is usually the host's clock seen through the hypervisor.
fn degradations(host: &HostInfo, problems: &[ClockProblem]) -> Vec<Degraded> {
    let mut degraded: Vec<Degraded> = problems.iter().map(Degraded::from_clock).collect();
    if let Some(h) = &host.virtualization {
        degraded.push(Degraded::VirtualMachine {
            hypervisor: h.clone(),
        });
    }
    degraded
}

/// Measures every device. A named device that cannot be opened, or that refuses every
/// method, is an error; among discovered ones it is a warning, unless none is left.
fn measure_all(
    devices: &[Device],
    cfg: &PtpConfig,
    host: &HostInfo,
    stop: &AtomicBool,
    named: bool,
) -> anyhow::Result<(Vec<PtpEntry>, Vec<String>)> {
    let mut entries = Vec::new();
    let mut warnings = Vec::new();
    let mut first_error = None;
    for dev in devices {
        match ptp::measure(dev, cfg, host.clock.scale, stop) {
            Ok(e) if e.answered_nothing() && named => bail!("{}", not_a_clock(&e)),
            Ok(e) => {
                if e.answered_nothing() {
                    super::note(&mut warnings, not_a_clock(&e));
                }
                entries.push(e);
            }
            Err(e) if named => return Err(e.into()),
            Err(e) => {
                super::note(&mut warnings, e.to_string());
                first_error.get_or_insert(e);
            }
        }
    }
    match (entries.is_empty(), first_error) {
        (true, Some(e)) => bail!("no PTP clock could be read: {e}"),
        _ => Ok((entries, warnings)),
    }
}

/// "/dev/null is not a PTP clock: …", naming each method's errno.
fn not_a_clock(e: &PtpEntry) -> String {
    let refusals: Vec<String> = e
        .methods
        .iter()
        .map(|m| {
            let errno = m.errno.map_or_else(|| "refused".into(), errno_name);
            format!("{} {errno}", m.method)
        })
        .collect();
    format!(
        "{} is not a PTP clock: it refused every way of reading one ({})",
        e.device,
        refusals.join(", ")
    )
}

/// `run` in the result file. There is no requested duration (0): a run is `-n` samples
/// of each method on each device. No CPU is chosen or pinned, so both lists are empty.
fn run_info(
    argv: &[String],
    start_time: SystemTime,
    started: Instant,
    interrupted: bool,
    degraded: &[Degraded],
    warnings: Vec<String>,
) -> RunInfo {
    let euid = rustix::process::geteuid();
    RunInfo {
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        command_line: argv.to_vec(),
        start_time: humantime::format_rfc3339_seconds(start_time).to_string(),
        requested_duration_ns: 0,
        actual_duration_ns: started.elapsed().as_nanos() as u64,
        interrupted,
        privileges: Privileges {
            euid: euid.as_raw(),
            root: euid.is_root(),
            memory_locked: false,
        },
        cpus: RunCpus {
            measured: CpuList::default(),
            housekeeping: CpuList::default(),
        },
        degraded: degraded.iter().map(Degraded::to_record).collect(),
        warnings,
        peak_rss_kib: sched::peak_rss_kib(),
    }
}

fn header(r: &ResultFile, cfg: &PtpConfig) -> String {
    let n = r.probes.len();
    let interrupted = match r.run.interrupted {
        true => " (interrupted)",
        false => "",
    };
    format!(
        "ptp: {n} device{}, {} samples per method{interrupted}; offset = PHC − \
         CLOCK_REALTIME\n{}",
        if n == 1 { "" } else { "s" },
        cfg.samples,
        super::clock_line(r),
    )
}
