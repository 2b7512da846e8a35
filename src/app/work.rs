//! `jitterscope work`: times one action on one pinned CPU, run by run, optionally beside
//! its null-loop baseline.

use std::net::{SocketAddr, SocketAddrV4, ToSocketAddrs};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::{Context, bail};

use crate::cli::{MAX_DURATION, WorkArgs};
use crate::engine::cpu::{CpuPlan, CpuUniverse};
use crate::engine::run::RunPlan;
use crate::probes::work::{self, Action, WorkConfig, WorkEntry};
use crate::report::{ProbeEntry, ResultFile};

use super::Ending;
use super::cpuset::Cpuset;
use super::output::{Warnings, clock_line, interrupted_mark};
use super::pipeline::{Ctx, Measure, Measured, RunSettings, execute, one_cpu_plan};

/// The port multicast goes to when --dest names none.
pub const DEFAULT_MULTICAST_PORT: u16 = 9999;

/// A work run, described.
pub struct WorkCommand {
    pub settings: RunSettings,
    pub cfg: WorkConfig,
}

impl WorkCommand {
    pub fn from_args(args: &WorkArgs) -> anyhow::Result<WorkCommand> {
        Ok(WorkCommand {
            cfg: config(args)?,
            settings: RunSettings::from_args(&args.run)?,
        })
    }
}

/// `jitterscope work`.
pub fn run(args: &WorkArgs, argv: &[String], stop: &AtomicBool) -> anyhow::Result<Ending> {
    let mut cmd = WorkCommand::from_args(args)?;
    Ok(execute(&mut cmd, argv, stop, &Warnings::stderr())?.1)
}

impl Measure for WorkCommand {
    fn settings(&self) -> &RunSettings {
        &self.settings
    }

    fn place(&mut self, universe: &CpuUniverse, cpuset: &Cpuset) -> anyhow::Result<CpuPlan> {
        one_cpu_plan(&self.settings, universe, cpuset, "work")
    }

    fn measure(&mut self, ctx: &mut Ctx<'_>) -> anyhow::Result<Measured> {
        let plan = RunPlan {
            cpus: ctx.cpus.clone(),
            sched: ctx.sched,
            mlock: self.settings.mlock,
            // The runs end when their samples are done; the window only bounds them.
            duration: self.settings.duration.unwrap_or(MAX_DURATION),
            priospread: false,
            setup_timeout: Duration::from_secs(10),
        };
        let sink_cpus = ctx.cpus.housekeeping.clone();
        let run = work::run(&self.cfg, &plan, &ctx.host.clock, &sink_cpus, ctx.stop)
            .context("the work run failed")?;
        Ok(Measured {
            requested: self.settings.duration.unwrap_or_default(),
            ..Measured::of_plan(run.entries, ProbeEntry::Work, run.outcome, &plan)
        })
    }

    fn text(&self, r: &ResultFile) -> String {
        format!(
            "{}\n{}",
            header(r, &self.cfg, self.settings.sched),
            crate::report::views::work::work_table(r)
        )
    }
}

/// The validated configuration, from the flags.
fn config(args: &WorkArgs) -> anyhow::Result<WorkConfig> {
    let action = Action::parse(&args.action).map_err(|e| anyhow::anyhow!("--action: {e}"))?;
    if args.ns.is_some() && !matches!(action, Action::Loop(_)) {
        bail!("--ns calibrates a loop: use it with --action loop:N (N is then ignored)");
    }
    let udp = matches!(action, Action::UdpSend(_));
    if !udp && (args.dest.is_some() || args.multicast.is_some() || args.interface.is_some()) {
        bail!("--dest, --multicast and --interface apply to --action udp-send:SIZE only");
    }
    if args.interface.is_some() && args.multicast.is_none() {
        bail!("--interface picks the interface multicast leaves from: add --multicast GROUP");
    }
    let dest = match (&args.dest, args.multicast) {
        (_, Some(group)) if !group.is_multicast() => {
            bail!("--multicast {group} is not a multicast group (224.0.0.0/4)")
        }
        (Some(d), Some(group)) => Some(SocketAddr::V4(SocketAddrV4::new(group, port_of(d)?))),
        (None, Some(group)) => Some(SocketAddr::V4(SocketAddrV4::new(
            group,
            DEFAULT_MULTICAST_PORT,
        ))),
        (Some(d), None) => Some(resolve(d)?),
        (None, None) => None,
    };
    Ok(WorkConfig {
        action,
        loop_ns: args.ns,
        samples: args.samples,
        runs: args.runs,
        warmup: args.warmup,
        pause_ns: args.pause,
        baseline: args.baseline,
        udp_dest: dest,
        multicast_if: args.interface,
        ttl: args.ttl,
    })
}

fn resolve(d: &str) -> anyhow::Result<SocketAddr> {
    d.to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .with_context(|| format!("--dest '{d}' is not an ADDR:PORT such as 127.0.0.1:9000"))
}

fn port_of(d: &str) -> anyhow::Result<u16> {
    Ok(resolve(d)?.port())
}

fn header(r: &ResultFile, cfg: &WorkConfig, asked: crate::engine::sched::SchedRequest) -> String {
    let interrupted = interrupted_mark(r);
    let first = r.entries::<WorkEntry>().next();
    let policy = super::output::result_policy(r, asked);
    let timing = first.map_or(String::new(), |e| {
        format!(
            "each sample includes the timing's own {:.1} ns (two fenced TSC reads); one \
                 rdtsc costs {:.1} ns, one clock_gettime(MONOTONIC) {:.1} ns, one loop \
                 iteration {:.2} ns",
            e.timing.overhead_ns,
            e.timing.rdtsc_ns,
            e.timing.clock_gettime_ns,
            e.timing.loop_iteration_ns
        )
    });
    let action = match (&cfg.action, first) {
        (Action::Loop(_), Some(e)) if cfg.loop_ns.is_some() => format!(
            "loop:{} (calibrated to {} ns)",
            e.loop_iterations.unwrap_or(0),
            cfg.loop_ns.unwrap_or(0)
        ),
        (a, _) => a.to_string(),
    };
    format!(
        "work: {action} on CPU {} for {:.3} s{interrupted}, {} samples × {} runs, pause {} ns, \
         policy {policy}{}\n{timing}\n{}",
        r.run.cpus.measured,
        r.run.actual_duration_ns as f64 / 1e9,
        cfg.samples,
        cfg.runs,
        cfg.pause_ns,
        if cfg.baseline {
            ", each run beside a null loop of the same mean"
        } else {
            ""
        },
        clock_line(r),
    )
}
