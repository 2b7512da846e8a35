//! `jitterscope pingpong`: picks the pair of CPUs, checks their counters agree, runs each
//! mechanism in turn, and prints one table comparing them.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, SystemTime};

use anyhow::{Context, bail};

use crate::cli::PingpongArgs;
use crate::engine::cpu::{CpuList, CpuPlan, CpuUniverse};
use crate::engine::run::{RunOutcome, RunPlan};
use crate::engine::topology::Topology;
use crate::engine::tsc_sync::{self, SkewBound};
use crate::probes::pingpong::{self, Mechanism, PingpongConfig, PingpongEntry};
use crate::report::{ProbeEntry, ResultFile};

use super::{CpuUse, Ending, Preamble, Setup};

/// Each mechanism's default measuring time, after its warm-up.
pub const DEFAULT_PER_MECHANISM: Duration = Duration::from_secs(1);

/// `jitterscope pingpong`.
pub fn run(args: &PingpongArgs, argv: &[String], stop: &AtomicBool) -> anyhow::Result<Ending> {
    Ok(result(args, argv, stop)?.1)
}

/// `pingpong`, printed and saved as its flags ask, and its result (for the main job).
pub(super) fn result(
    args: &PingpongArgs,
    argv: &[String],
    stop: &AtomicBool,
) -> anyhow::Result<(ResultFile, Ending)> {
    let universe = CpuUniverse::detect().context("cannot read the system's CPUs")?;
    let req = super::sched_request(&args.run)?;
    let mechanisms =
        Mechanism::parse_list(&args.mech).map_err(|e| anyhow::anyhow!("--mech: {e}"))?;
    let (a, b) = choose_pair(args.run.cpus.as_deref(), args.run.housekeeping, &universe)?;
    let pair = CpuList::from_cpus(vec![a, b]);
    let cpus = CpuPlan {
        housekeeping: universe.usable().without(&pair),
        measured: pair,
    };
    // Every mechanism busy-waits its pause, and the spinning ones their whole run.
    super::check_safety(req, &cpus, &universe, args.run.force, CpuUse::Spin, "-a")?;
    if a == b && req.policy.is_realtime() && mechanisms.iter().any(|m| m.spins()) {
        bail!(
            "spin and spin-pause on one CPU at {req} would never hand it over: the waiting \
             thread spins and its peer can never run. Leave them out of --mech, use two \
             CPUs, or run at --policy other"
        );
    }
    let per_mechanism = match (args.run.duration, args.count) {
        (Some(d), _) => d,
        (None, Some(_)) => crate::cli::MAX_DURATION,
        (None, None) => DEFAULT_PER_MECHANISM,
    };
    let cfg = PingpongConfig {
        cpu_a: a,
        cpu_b: b,
        mechanisms,
        pause_ns: args.pause,
        warmup: args.warmup,
        count: args.count,
    };
    let setup = Setup {
        universe,
        req,
        cpus,
        start_time: SystemTime::now(),
    };
    let Preamble {
        host,
        degraded,
        warnings,
    } = super::announce(&setup);
    if cfg.mechanisms.contains(&Mechanism::Signal) {
        make_stray_signals_harmless()?;
    }
    let skew = tsc_sync::measure(a, b, tsc_sync::DEFAULT_ROUNDS, req, host.clock.scale)
        .unwrap_or_else(|| SkewBound::unknown(a, b));
    let plan = RunPlan {
        cpus: setup.cpus.clone(),
        sched: req,
        mlock: !args.run.no_mlock,
        duration: per_mechanism,
        priospread: false,
        setup_timeout: Duration::from_secs(10),
    };
    let run =
        pingpong::run(&cfg, &plan, &host.clock, skew, stop).context("the pingpong run failed")?;
    let mut outcome = RunOutcome::none();
    outcome.interrupted = stop.load(std::sync::atomic::Ordering::Relaxed);
    run.outcomes.into_iter().for_each(|o| outcome.absorb(o));
    // The result's requested duration covers every mechanism with its warm-up.
    let total = RunPlan {
        duration: (per_mechanism + cfg.warmup)
            .checked_mul(cfg.mechanisms.len() as u32)
            .unwrap_or(crate::cli::MAX_DURATION),
        ..plan
    };
    let info = super::run_info(&setup, argv, &total, &outcome, degraded, warnings);
    let probes = run.entries.into_iter();
    let probes = probes.map(|e| ProbeEntry::Pingpong(Box::new(e))).collect();
    let result = ResultFile::new(host, info, probes);
    let place = Topology::detect(&CpuList::from_cpus(vec![a, b])).locality(a, b);
    super::emit(&result, &args.run.save, || {
        format!(
            "{}\n{}",
            header(&result, &cfg, &skew, &place.to_string()),
            crate::report::views::pingpong::pingpong_table(&result)
        )
    })?;
    let end = super::ending(result.run.interrupted);
    Ok((result, end))
}

/// `-a A,B` (A may equal B), or two CPUs of the default measured set, or, with too few,
/// the two lowest usable CPUs (the coordinator then shares one).
fn choose_pair(
    text: Option<&str>,
    housekeeping: Option<usize>,
    universe: &CpuUniverse,
) -> anyhow::Result<(usize, usize)> {
    let usable = universe.usable();
    let Some(text) = text else {
        // --housekeeping keeps its CPU out of the default pair.
        let default = super::plan_cpus(None, housekeeping, universe)?;
        let pick = match default.measured.len() {
            2.. => default.measured.cpus().to_vec(),
            _ => usable.cpus().to_vec(),
        };
        return Ok(match pick.as_slice() {
            [x, y, ..] => (*x, *y),
            [x] => (*x, *x),
            [] => bail!("no usable CPU"),
        });
    };
    let parts: Vec<&str> = text.split(',').map(str::trim).collect();
    let [x, y] = parts.as_slice() else {
        bail!(
            "-a/--cpus: pingpong takes two CPUs as A,B (the same one twice for a context \
             switch), got '{text}'"
        );
    };
    let cpu = |s: &str| -> anyhow::Result<usize> {
        let list = universe
            .parse_user_list(s)
            .map_err(|e| anyhow::anyhow!("-a/--cpus: {e}"))?;
        match list.cpus() {
            [c] => Ok(*c),
            _ => bail!("-a/--cpus: '{s}' in '{text}' is not a single CPU; pingpong takes A,B"),
        }
    };
    Ok((cpu(x)?, cpu(y)?))
}

/// The signal mechanism sends SIGUSR1 to one thread at a time. Should one ever reach
/// another thread (its target gone at the very end of a run), a handler that does nothing
/// keeps it from killing the process.
fn make_stray_signals_harmless() -> anyhow::Result<()> {
    signal_hook::flag::register(
        crate::engine::ipc::PING_SIGNAL,
        Arc::new(AtomicBool::new(false)),
    )
    .context("cannot install a handler for SIGUSR1")?;
    Ok(())
}

fn header(r: &ResultFile, cfg: &PingpongConfig, skew: &SkewBound, locality: &str) -> String {
    let interrupted = if r.run.interrupted {
        " (interrupted)"
    } else {
        ""
    };
    let policy = r
        .probes
        .iter()
        .find_map(ProbeEntry::get::<PingpongEntry>)
        .map_or(String::new(), |e| {
            crate::report::table::policy_cell(e.thread_a.policy, e.thread_a.priority)
        });
    format!(
        "pingpong: CPU {} ⇄ CPU {} ({locality}) for {:.3} s{interrupted}, pause {} ns, \
         warm-up {} ms per mechanism, policy {policy}\n{}\n{}",
        cfg.cpu_a,
        cfg.cpu_b,
        r.run.actual_duration_ns as f64 / 1e9,
        cfg.pause_ns,
        cfg.warmup.as_millis(),
        skew_line(skew),
        super::clock_line(r),
    )
}

/// What the counter check found, in one line.
pub fn skew_line(s: &SkewBound) -> String {
    match (s.cpu_a == s.cpu_b, s.rounds, s.consistent) {
        (true, _, _) => "TSC: one CPU, one counter: one-way figures need no agreement check".into(),
        (false, 0, _) => format!(
            "TSC: the agreement check between CPU {} and CPU {} could not run; one-way \
             figures are the round trip halved",
            s.cpu_a, s.cpu_b
        ),
        (false, n, true) => format!(
            "TSC: CPU {}'s counter − CPU {}'s lies in [{}, {}] ns over {n} rounds: they \
             agree within {} ns; one-way figures are trusted where that is ≤ 10 % of them",
            s.cpu_b, s.cpu_a, s.offset_lo_ns, s.offset_hi_ns, s.bound_ns
        ),
        (false, n, false) => format!(
            "TSC: CPU {}'s counter − CPU {}'s lies in [{}, {}] ns over {n} rounds: they \
             differ by at least {} ns, so one-way figures are the round trip halved",
            s.cpu_b, s.cpu_a, s.offset_lo_ns, s.offset_hi_ns, s.bound_ns
        ),
    }
}
