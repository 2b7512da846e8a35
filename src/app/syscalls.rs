//! `jitterscope syscalls`: each call's cost on one pinned CPU, one table.

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::Context;

use crate::cli::SyscallsArgs;
use crate::engine::run::RunPlan;
use crate::probes::syscalls::{self, Call, SyscallEntry, SyscallsConfig};
use crate::report::{ProbeEntry, ResultFile};

use super::{CpuUse, Ending, Preamble};

/// Each call's default measuring time.
pub const DEFAULT_PER_CALL: Duration = Duration::from_millis(200);

/// `jitterscope syscalls`.
pub fn run(args: &SyscallsArgs, argv: &[String], stop: &AtomicBool) -> anyhow::Result<Ending> {
    if args.list {
        for c in Call::ALL {
            println!("{:<32} {}", c.name(), c.describe());
        }
        return Ok(Ending::Completed);
    }
    let calls = match &args.only {
        Some(text) => Call::parse_list(text).map_err(|e| anyhow::anyhow!("--only: {e}"))?,
        None => Call::ALL.to_vec(),
    };
    let setup = super::one_cpu_setup(&args.run, "syscalls")?;
    super::check_safety(
        setup.req,
        &setup.cpus,
        &setup.universe,
        args.run.force,
        CpuUse::Spin,
        "-a",
    )?;
    let cfg = SyscallsConfig {
        calls,
        per_call: args.run.duration.unwrap_or(DEFAULT_PER_CALL),
        batch: args.batch,
    };
    let Preamble {
        host,
        degraded,
        warnings,
    } = super::announce(&setup);
    let plan = RunPlan {
        cpus: setup.cpus.clone(),
        sched: setup.req,
        mlock: !args.run.no_mlock,
        duration: cfg.per_call * cfg.calls.len() as u32,
        priospread: false,
        setup_timeout: Duration::from_secs(10),
    };
    let run = syscalls::run(&cfg, &plan, &host.clock, stop).context("the syscalls run failed")?;
    let info = super::run_info(&setup, argv, &plan, &run.outcome, degraded, warnings);
    let probes = run.entries.into_iter();
    let probes = probes.map(|e| ProbeEntry::Syscalls(Box::new(e))).collect();
    let result = ResultFile::new(host, info, probes);
    super::emit(&result, &args.run.save, || {
        format!(
            "{}\n{}",
            header(&result, &cfg),
            crate::report::views::syscalls::syscalls_table(&result)
        )
    })?;
    Ok(super::ending(result.run.interrupted))
}

fn header(r: &ResultFile, cfg: &SyscallsConfig) -> String {
    let interrupted = if r.run.interrupted {
        " (interrupted)"
    } else {
        ""
    };
    let first = r.entries::<SyscallEntry>().next();
    let (policy, overhead) = first.map_or((String::new(), 0.0), |e| {
        (
            crate::report::table::policy_cell(e.policy, e.priority),
            e.overhead_ns,
        )
    });
    format!(
        "syscalls: CPU {} for {:.3} s{interrupted}, {} ms per call, policy {policy}\n\
         each sample times a batch of calls between fenced TSC reads; the timing's own \
         {overhead:.1} ns is subtracted, then the batch divided\n{}",
        r.run.cpus.measured,
        r.run.actual_duration_ns as f64 / 1e9,
        cfg.per_call.as_millis(),
        super::clock_line(r),
    )
}
