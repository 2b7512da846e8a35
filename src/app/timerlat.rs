//! `timer --engine timerlat|both`: the kernel's timerlat tracer as timer's engine. Its
//! entries sit beside the loop's in the same result; a host that cannot run it (no such
//! tracer, not root, tracefs refused) gets one line saying why, and the loop runs.

use crate::cli::{TimerArgs, TimerEngine};
use crate::engine::run::RunOutcome;
use crate::engine::sched::{Policy, SchedRequest};
use crate::probes::timerlat::TimerlatEntry;
use crate::report::{ProbeEntry, ResultFile};
use crate::trace::tracer::timerlat_run::{self, TimerlatPlan};

use super::pipeline::{Ctx, Measured, RunSettings};

/// Refuses what timerlat cannot do, in one line: a period it does not take, and (alone)
/// the loop's own options.
pub fn check_args(args: &TimerArgs, settings: &RunSettings) -> anyhow::Result<()> {
    if args.engine == TimerEngine::Nanosleep {
        return Ok(());
    }
    if let Some(why) = timerlat_run::period_refusal(args.interval) {
        anyhow::bail!("--engine {}: {why}", engine_name(args.engine));
    }
    if args.engine == TimerEngine::Both {
        return Ok(());
    }
    let loop_only = [
        (args.trace, "--trace"),
        (args.stop_above.is_some(), "--stop-above"),
        (args.spikes.is_some(), "--spikes"),
        (args.histogram.is_some(), "--histogram"),
        (args.loops.is_some(), "--loops"),
        (args.priospread, "--priospread"),
        (args.work.is_some(), "--work"),
        (
            matches!(settings.sched.policy, Policy::Deadline(_)),
            "--policy deadline",
        ),
    ];
    match loop_only.iter().find(|(set, _)| *set) {
        Some((_, flag)) => anyhow::bail!(
            "--engine timerlat: {flag} is the nanosleep loop's (timerlat's thread is the \
             kernel's); use --engine both or nanosleep"
        ),
        None => Ok(()),
    }
}

fn engine_name(e: TimerEngine) -> &'static str {
    match e {
        TimerEngine::Nanosleep => "nanosleep",
        TimerEngine::Timerlat => "timerlat",
        TimerEngine::Both => "both",
    }
}

/// How timerlat runs: beside or instead of the loop, its period, and the policy its
/// kernel threads are set to (`None`: the kernel's).
pub struct How {
    pub engine: TimerEngine,
    pub period_ns: u64,
    pub sched: Option<SchedRequest>,
}

/// Runs timerlat on the measured CPUs as `how` says for `duration` (the caller holds
/// /dev/cpu_dma_latency); `None`, with one line said and kept in the result's warnings,
/// when this host cannot.
pub fn measure(how: &How, duration: std::time::Duration, ctx: &mut Ctx<'_>) -> Option<Measured> {
    let (engine, period_ns) = (how.engine, how.period_ns);
    let plan = TimerlatPlan {
        cpus: &ctx.cpus.measured,
        reader_cpu: ctx.cpus.housekeeping.first(),
        period_ns,
        duration,
        histograms: ctx.keep,
        sched: how.sched,
    };
    let run = match timerlat_run::run(&plan, ctx.stop) {
        Ok(run) => run,
        Err(e) => {
            let then = match engine {
                TimerEngine::Both => "the nanosleep loop's figures stand alone",
                _ => "the nanosleep loop runs instead",
            };
            ctx.note(format!("timer: timerlat cannot run here: {e}; {then}"));
            return None;
        }
    };
    for n in run.notes {
        ctx.note(format!("timerlat: {n}"));
    }
    if !run.stopped.restored {
        let off: Vec<String> = (run.stopped.readbacks.iter())
            .filter(|r| !r.ok)
            .map(|r| format!("{} reads {}", r.path, r.now))
            .collect();
        ctx.note(format!(
            "timerlat: a tracer setting did not read back as before: {}",
            off.join("; ")
        ));
    }
    let mut entries = run.entries;
    for e in &mut entries {
        e.duration_ns = run.elapsed.as_nanos() as u64;
    }
    Some(Measured {
        entries: (entries.into_iter())
            .map(|e| ProbeEntry::Timerlat(Box::new(e)))
            .collect(),
        outcome: RunOutcome {
            workers: Vec::new(),
            window: None,
            interrupted: run.interrupted,
            elapsed: run.elapsed,
            mlock_error: None,
        },
        requested: duration,
        mlock: false,
        actual: Some(run.elapsed),
        limit_exceeded: false,
    })
}

/// `both`: the loop's run, then timerlat's, as one: their entries, their times added.
pub fn after_loop(looped: Measured, tl: Measured) -> Measured {
    let loop_time = looped.actual.unwrap_or(looped.outcome.elapsed);
    let tl_time = tl.actual.unwrap_or(tl.outcome.elapsed);
    let mut outcome = looped.outcome;
    outcome.interrupted |= tl.outcome.interrupted;
    outcome.elapsed = loop_time + tl_time;
    Measured {
        entries: [looped.entries, tl.entries].concat(),
        outcome,
        requested: looped.requested + tl.requested,
        mlock: looped.mlock,
        actual: Some(loop_time + tl_time),
        limit_exceeded: looped.limit_exceeded,
    }
}

/// The loop's share of a `both` run, in s: the whole less timerlat's.
pub fn loop_secs(r: &ResultFile) -> f64 {
    let tl = r.entries::<TimerlatEntry>().map(|e| e.duration_ns).max();
    r.run.actual_duration_ns.saturating_sub(tl.unwrap_or(0)) as f64 / 1e9
}

/// The header of timerlat's part and its table; `dma` says what /dev/cpu_dma_latency
/// held. After the loop's own header the clock and kernel lines are not said again.
pub fn text(r: &ResultFile, dma: &str) -> String {
    let entries: Vec<&TimerlatEntry> = r.entries().collect();
    let secs = entries.iter().map(|e| e.duration_ns).max().unwrap_or(0) as f64 / 1e9;
    let period = entries.first().map_or(0, |e| e.period_ns);
    let looped = r
        .entries::<crate::probes::timer::TimerEntry>()
        .next()
        .is_some();
    let (after, clock) = match looped {
        true => (", after the nanosleep loop", String::new()),
        false => ("", super::output::clock_line(r)),
    };
    format!(
        "timer (timerlat, the kernel's tracer){after}: CPUs {} for {secs:.3} s{}, period {} \
         µs\n{}; {dma}\n{clock}\n{}",
        super::output::measured_cpus(r),
        super::output::interrupted_mark(r),
        period as f64 / 1e3,
        threads_words(&entries),
        crate::report::views::timerlat::timerlat_tables(r),
    )
}

/// "kernel threads timerlat/1 at SCHED_FIFO 95": as they ran, where they were read.
pub fn threads_words(entries: &[&TimerlatEntry]) -> String {
    let ran: Vec<String> = (entries.iter())
        .filter_map(|e| e.thread.as_ref())
        .map(|t| format!("{} at {}", t.comm, policy_words(t.policy, t.priority)))
        .collect();
    match ran.is_empty() {
        true => "kernel threads timerlat/N (their policy not read)".to_string(),
        false => format!("kernel threads {}", ran.join(", ")),
    }
}

/// "SCHED_FIFO 95", as the loop's header names a policy.
fn policy_words(p: Policy, priority: u8) -> String {
    match p {
        Policy::Fifo => format!("SCHED_FIFO {priority}"),
        Policy::Rr => format!("SCHED_RR {priority}"),
        Policy::Deadline(_) => "SCHED_DEADLINE".to_string(),
        Policy::Other => "SCHED_OTHER".to_string(),
    }
}
