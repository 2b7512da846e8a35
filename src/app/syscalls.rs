//! `jitterscope syscalls`: each call's cost on one pinned CPU, one table.

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::Context;

use crate::cli::SyscallsArgs;
use crate::engine::cpu::{CpuPlan, CpuUniverse};
use crate::engine::run::RunPlan;
use crate::probes::syscalls::{self, Call, SyscallEntry, SyscallsConfig};
use crate::report::{ProbeEntry, ResultFile};

use super::Ending;
use super::cpuset::Cpuset;
use super::output::{Warnings, clock_line, interrupted_mark};
use super::pipeline::{Ctx, Measure, Measured, RunSettings, execute, one_cpu_plan};

/// Each call's default measuring time.
pub const DEFAULT_PER_CALL: Duration = Duration::from_millis(200);

/// A syscalls run, described.
pub struct SyscallsCommand {
    pub settings: RunSettings,
    pub cfg: SyscallsConfig,
}

impl SyscallsCommand {
    pub fn from_args(args: &SyscallsArgs) -> anyhow::Result<SyscallsCommand> {
        let calls = match &args.only {
            Some(text) => Call::parse_list(text).map_err(|e| anyhow::anyhow!("--only: {e}"))?,
            None => Call::ALL.to_vec(),
        };
        let settings = RunSettings::from_args(&args.run)?;
        let cfg = SyscallsConfig {
            calls,
            per_call: settings.duration.unwrap_or(DEFAULT_PER_CALL),
            batch: args.batch,
        };
        Ok(SyscallsCommand { settings, cfg })
    }
}

/// `jitterscope syscalls`.
pub fn run(args: &SyscallsArgs, argv: &[String], stop: &AtomicBool) -> anyhow::Result<Ending> {
    if args.list {
        for c in Call::ALL {
            println!("{:<32} {}", c.name(), c.describe());
        }
        return Ok(Ending::Completed);
    }
    let mut cmd = SyscallsCommand::from_args(args)?;
    Ok(execute(&mut cmd, argv, stop, &Warnings::stderr())?.1)
}

impl Measure for SyscallsCommand {
    fn settings(&self) -> &RunSettings {
        &self.settings
    }

    fn place(&mut self, universe: &CpuUniverse, cpuset: &Cpuset) -> anyhow::Result<CpuPlan> {
        one_cpu_plan(&self.settings, universe, cpuset, "syscalls")
    }

    fn measure(&mut self, ctx: &mut Ctx<'_>) -> anyhow::Result<Measured> {
        let plan = RunPlan {
            cpus: ctx.cpus.clone(),
            sched: ctx.sched,
            mlock: self.settings.mlock,
            duration: self.cfg.per_call * self.cfg.calls.len() as u32,
            priospread: false,
            setup_timeout: Duration::from_secs(10),
        };
        let run = syscalls::run(&self.cfg, &plan, &ctx.host.clock, ctx.stop)
            .context("the syscalls run failed")?;
        Ok(Measured::of_plan(
            run.entries,
            ProbeEntry::Syscalls,
            run.outcome,
            &plan,
        ))
    }

    fn text(&self, r: &ResultFile) -> String {
        format!(
            "{}\n{}",
            header(r, &self.cfg, self.settings.sched),
            crate::report::views::syscalls::syscalls_table(r)
        )
    }
}

fn header(
    r: &ResultFile,
    cfg: &SyscallsConfig,
    asked: crate::engine::sched::SchedRequest,
) -> String {
    let interrupted = interrupted_mark(r);
    let first = r.entries::<SyscallEntry>().next();
    let policy = super::output::result_policy(r, asked);
    let overhead = first.map_or(0.0, |e| e.overhead_ns);
    format!(
        "syscalls: CPU {} for {:.3} s{interrupted}, {} ms per call, policy {policy}\n\
         each sample times a batch of calls between fenced TSC reads; the timing's own \
         {overhead:.1} ns is subtracted, then the batch divided\n{}",
        r.run.cpus.measured,
        r.run.actual_duration_ns as f64 / 1e9,
        cfg.per_call.as_millis(),
        clock_line(r),
    )
}
