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
use std::time::{Duration, Instant};

use anyhow::bail;

use crate::cli::PtpArgs;
use crate::engine::cpu::{CpuPlan, CpuUniverse};
use crate::engine::run::RunOutcome;
use crate::engine::sched;
use crate::probes::ptp::{self, Device, PtpConfig, PtpEntry, Target, errno_name};
use crate::report::{ProbeEntry, ResultFile};

use super::Ending;
use super::cpuset::Cpuset;
use super::output::{Warnings, clock_line};
use super::pipeline::{CpuUse, Ctx, Measure, Measured, RunSettings, execute, one_cpu_plan};

/// The variable that replaces `/dev` as the directory searched for `ptp<N>`.
pub const DEV_DIR_ENV: &str = "JITTERSCOPE_DEV_DIR";

/// A ptp run, described.
pub struct PtpCommand {
    pub settings: RunSettings,
    pub cfg: PtpConfig,
    devices: Vec<Device>,
    /// A device was named: one that is no clock is bad input, not a warning.
    named: bool,
}

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
    let mut cmd = PtpCommand {
        settings: RunSettings {
            mlock: false,
            save: args.save.clone(),
            ..RunSettings::quiet()
        },
        cfg: PtpConfig {
            samples: args.samples,
        },
        devices,
        named: target != Target::All,
    };
    Ok(execute(&mut cmd, argv, stop, &Warnings::stderr())?.1)
}

impl Measure for PtpCommand {
    fn settings(&self) -> &RunSettings {
        &self.settings
    }

    /// The TSC stamps around each call must come from one CPU: the first a measuring
    /// command would take.
    fn place(&mut self, universe: &CpuUniverse, cpuset: &Cpuset) -> anyhow::Result<CpuPlan> {
        one_cpu_plan(&self.settings, universe, cpuset, "ptp")
    }

    /// It only sleeps in ioctls.
    fn cpu_use(&self) -> CpuUse {
        CpuUse::Sleep {
            interval_ns: u64::MAX,
        }
    }

    /// A device that turns out to be no clock gets its one line alone.
    fn announces_late(&self) -> bool {
        true
    }

    fn measure(&mut self, ctx: &mut Ctx<'_>) -> anyhow::Result<Measured> {
        let started = Instant::now();
        let pin = ctx
            .cpus
            .measured
            .first()
            .map(|cpu| (cpu, sched::pin_to(cpu)));
        let entries = measure_all(&self.devices, &self.cfg, ctx, self.named)?;
        match pin {
            Some((cpu, Err(e))) => ctx.note(format!(
                "could not pin to CPU {cpu} ({e}): a call's cost may span a migration"
            )),
            None => ctx.note("no CPU to pin to: a call's cost may span a migration".into()),
            Some((_, Ok(()))) => {}
        }
        let mut outcome = RunOutcome::none();
        outcome.interrupted = ctx.stop.load(Ordering::Relaxed);
        outcome.elapsed = started.elapsed();
        Ok(Measured {
            entries: entries
                .into_iter()
                .map(|e| ProbeEntry::Ptp(Box::new(e)))
                .collect(),
            outcome,
            // A run is -n samples of each method on each device: no duration was asked.
            requested: Duration::ZERO,
            mlock: false,
            actual: None,
            limit_exceeded: false,
        })
    }

    fn text(&self, r: &ResultFile) -> String {
        format!(
            "{}\n{}",
            header(r, &self.cfg),
            crate::report::views::ptp::ptp_table(r)
        )
    }
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

/// Measures every device. A named device that cannot be opened, or that refuses every
/// method, is an error; among discovered ones it is a warning, unless none is left.
fn measure_all(
    devices: &[Device],
    cfg: &PtpConfig,
    ctx: &mut Ctx<'_>,
    named: bool,
) -> anyhow::Result<Vec<PtpEntry>> {
    let mut entries = Vec::new();
    let mut first_error = None;
    for dev in devices {
        match ptp::measure(dev, cfg, ctx.host.clock.scale, ctx.stop) {
            Ok(e) if e.answered_nothing() && named => bail!("{}", not_a_clock(&e)),
            Ok(e) => {
                if e.answered_nothing() {
                    ctx.note(not_a_clock(&e));
                }
                entries.push(e);
            }
            Err(e) if named => return Err(e.into()),
            Err(e) => {
                ctx.note(e.to_string());
                first_error.get_or_insert(e);
            }
        }
    }
    match (entries.is_empty(), first_error) {
        (true, Some(e)) => bail!("no PTP clock could be read: {e}"),
        _ => Ok(entries),
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
        clock_line(r),
    )
}
