//! `jitterscope pingpong`: picks the pair of CPUs, checks their counters agree, runs each
//! mechanism in turn, and prints one table comparing them.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::{Context, bail};

use crate::cli::{MAX_DURATION, PingpongArgs};
use crate::engine::cpu::{CpuList, CpuPlan, CpuUniverse};
use crate::engine::run::{RunOutcome, RunPlan};
use crate::engine::topology::Topology;
use crate::engine::tsc_sync::{self, SkewBound};
use crate::probes::pingpong::{self, Mechanism, PingpongConfig};
use crate::report::{ProbeEntry, ResultFile};

use super::Ending;
use super::cpuset::Cpuset;
use super::output::{Warnings, clock_line, interrupted_mark};
use super::pipeline::{Ctx, Measure, Measured, RunSettings, execute, plan_cpus};

/// Each mechanism's default measuring time, after its warm-up.
pub const DEFAULT_PER_MECHANISM: Duration = Duration::from_secs(1);

/// A pingpong run, described.
pub struct PingpongCommand {
    pub settings: RunSettings,
    pub mechanisms: Vec<Mechanism>,
    pub pause_ns: u64,
    pub warmup: Duration,
    pub count: Option<u64>,
    /// Set by `place`, for the header.
    pair: Option<(usize, usize)>,
    skew: Option<SkewBound>,
}

impl PingpongCommand {
    pub fn new(
        settings: RunSettings,
        mechanisms: Vec<Mechanism>,
        pause_ns: u64,
        warmup: Duration,
        count: Option<u64>,
    ) -> anyhow::Result<PingpongCommand> {
        if mechanisms.is_empty() {
            bail!("--mech: no mechanism to measure");
        }
        Ok(PingpongCommand {
            settings,
            mechanisms,
            pause_ns,
            warmup,
            count,
            pair: None,
            skew: None,
        })
    }

    pub fn from_args(args: &PingpongArgs) -> anyhow::Result<PingpongCommand> {
        let settings = RunSettings::from_args(&args.run)?;
        let mechanisms =
            Mechanism::parse_list(&args.mech).map_err(|e| anyhow::anyhow!("--mech: {e}"))?;
        PingpongCommand::new(settings, mechanisms, args.pause, args.warmup, args.count)
    }

    /// Each mechanism's measuring time: `-D`, or until `-l` round trips are done.
    fn per_mechanism(&self) -> Duration {
        match (self.settings.duration, self.count) {
            (Some(d), _) => d,
            (None, Some(_)) => MAX_DURATION,
            (None, None) => DEFAULT_PER_MECHANISM,
        }
    }
}

/// `jitterscope pingpong`.
pub fn run(args: &PingpongArgs, argv: &[String], stop: &AtomicBool) -> anyhow::Result<Ending> {
    let mut cmd = PingpongCommand::from_args(args)?;
    Ok(execute(&mut cmd, argv, stop, &Warnings::stderr())?.1)
}

impl Measure for PingpongCommand {
    fn settings(&self) -> &RunSettings {
        &self.settings
    }

    /// The pair; every other usable CPU is the coordinator's.
    fn place(&mut self, universe: &CpuUniverse, cpuset: &Cpuset) -> anyhow::Result<CpuPlan> {
        let s = &self.settings;
        let (a, b, _) = choose_pair(s.cpus.as_deref(), s.housekeeping, universe, cpuset)?;
        let pair = CpuList::from_cpus(vec![a, b]);
        Ok(CpuPlan {
            housekeeping: universe.housekeeping_for(&pair),
            measured: pair,
        })
    }

    fn check(&self, cpus: &CpuPlan) -> anyhow::Result<()> {
        let req = self.settings.sched;
        let one_cpu = cpus.measured.len() == 1;
        if one_cpu && req.policy.is_realtime() && self.mechanisms.iter().any(|m| m.spins()) {
            bail!(
                "spin and spin-pause on one CPU at {req} would never hand it over: the \
                 waiting thread spins and its peer can never run. Leave them out of --mech, \
                 use two CPUs, or run at --policy other"
            );
        }
        Ok(())
    }

    fn measure(&mut self, ctx: &mut Ctx<'_>) -> anyhow::Result<Measured> {
        // The pair in the order asked for (the plan's list is sorted).
        let s = &self.settings;
        let (a, b, why) = choose_pair(s.cpus.as_deref(), s.housekeeping, ctx.universe, ctx.cpuset)?;
        if let Some(why) = why {
            ctx.note(why);
        }
        let cfg = PingpongConfig {
            cpu_a: a,
            cpu_b: b,
            mechanisms: self.mechanisms.clone(),
            pause_ns: self.pause_ns,
            warmup: self.warmup,
            count: self.count,
        };
        if cfg.mechanisms.contains(&Mechanism::Signal) {
            make_stray_signals_harmless()?;
        }
        let req = ctx.sched;
        let skew = tsc_sync::measure(a, b, tsc_sync::DEFAULT_ROUNDS, req, ctx.host.clock.scale)
            .unwrap_or_else(|| SkewBound::unknown(a, b));
        let per_mechanism = self.per_mechanism();
        let plan = RunPlan {
            cpus: ctx.cpus.clone(),
            sched: req,
            mlock: self.settings.mlock,
            duration: per_mechanism,
            priospread: false,
            setup_timeout: Duration::from_secs(10),
        };
        let run = pingpong::run(&cfg, &plan, &ctx.host.clock, skew, ctx.stop)
            .context("the pingpong run failed")?;
        let mut outcome = RunOutcome::none();
        outcome.interrupted = ctx.stop.load(std::sync::atomic::Ordering::Relaxed);
        run.outcomes.into_iter().for_each(|o| outcome.absorb(o));
        self.pair = Some((a, b));
        self.skew = Some(skew);
        Ok(Measured {
            entries: run
                .entries
                .into_iter()
                .map(|e| ProbeEntry::Pingpong(Box::new(e)))
                .collect(),
            outcome,
            // The requested duration covers every mechanism with its warm-up.
            requested: (per_mechanism + cfg.warmup)
                .checked_mul(cfg.mechanisms.len() as u32)
                .unwrap_or(MAX_DURATION),
            mlock: plan.mlock,
            actual: None,
            limit_exceeded: false,
        })
    }

    fn text(&self, r: &ResultFile) -> String {
        format!(
            "{}\n{}",
            self.header(r),
            crate::report::views::pingpong::pingpong_table(r)
        )
    }
}

/// `-a A,B` (A may equal B), or two CPUs of the default measured set (a tuned host's
/// isolated CPUs), or, with too few, the one measured CPU beside the lowest other CPU a
/// default plan spans (the coordinator then shares one), with why where the host set CPUs
/// apart or has one CPU.
fn choose_pair(
    text: Option<&str>,
    housekeeping: Option<usize>,
    universe: &CpuUniverse,
    cpuset: &Cpuset,
) -> anyhow::Result<(usize, usize, Option<String>)> {
    let Some(text) = text else {
        // --housekeeping keeps its CPU out of the default pair.
        let default = plan_cpus(None, housekeeping, universe, cpuset)?;
        let measured = default.measured.cpus();
        if let [x, y, ..] = measured {
            return Ok((*x, *y, None));
        }
        let others = universe.default_cpus().without(&default.measured);
        let tuned = !universe.tuned.cpus.is_empty();
        return Ok(match (measured, others.first()) {
            ([m], Some(o)) => {
                let why = tuned.then(|| {
                    format!(
                        "pingpong pairs CPU {m} with CPU {o}: the host set apart one CPU \
                         ({}), and a pair needs two; -a A,B names both",
                        universe.tuned.cpus
                    )
                });
                (o.min(*m), o.max(*m), why)
            }
            ([m], None) => {
                let why = format!(
                    "pingpong runs both threads on CPU {m}, the one usable CPU: a context \
                     switch, not a crossing between CPUs"
                );
                (*m, *m, Some(why))
            }
            _ => bail!("no usable CPU"),
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
    Ok((cpu(x)?, cpu(y)?, None))
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

impl PingpongCommand {
    fn header(&self, r: &ResultFile) -> String {
        let (a, b) = self.pair.unwrap_or_default();
        let skew = self.skew.unwrap_or_else(|| SkewBound::unknown(a, b));
        let locality = Topology::detect(&CpuList::from_cpus(vec![a, b])).locality(a, b);
        // Both threads, and a refusal, as the result records them.
        let policy = super::output::result_policy(r, self.settings.sched);
        format!(
            "pingpong: CPU {a} ⇄ CPU {b} ({locality}) for {:.3} s{}, pause {} ns, \
             warm-up {} ms per mechanism, policy {policy}\n{}\n{}",
            r.run.actual_duration_ns as f64 / 1e9,
            interrupted_mark(r),
            self.pause_ns,
            self.warmup.as_millis(),
            skew_line(&skew),
            clock_line(r),
        )
    }
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
