//! `jitterscope queue`: places the producer, the accumulator and the journaller on CPUs,
//! turns the flags into a validated `QueueConfig`, runs the probe, and prints and saves
//! the result. Every check on the input comes before the first warning is printed, so
//! bad input costs one line on stderr and nothing else.
//!
//! Placement: the lowest housekeeping CPU (or `--housekeeping`) is kept for housekeeping,
//! and the roles take the other CPUs (a tuned host's isolated ones among them) in the order producer, accumulator, journaller. With too
//! few of those the producer joins the housekeeping CPU (the coordinator then shares
//! it); with still too few the journaller is left out, unless it was asked for.

use std::collections::VecDeque;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::{Context, bail};

use crate::cli::QueueArgs;
use crate::engine::cpu::{CpuList, CpuPlan, CpuUniverse};
use crate::engine::run::ThreadSpec;
use crate::engine::sched::{Policy, SchedRequest};
use crate::probes::queue::{self, QueueConfig, QueueEntry, QueueError, Role};
use crate::report::{ProbeEntry, ResultFile};

use super::Ending;
use super::cpuset::Cpuset;
use super::output::{Warnings, clock_line};
use super::pipeline::{Ctx, Measure, Measured, RunSettings, execute};

/// The roles' CPUs, and what the placement has to say about them.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Placement {
    producer: usize,
    accumulator: usize,
    journaller: Option<usize>,
    /// Where the coordinator may run (the roles' CPUs are taken out later).
    housekeeping: CpuList,
    /// Warnings to print once the input is known to be good.
    notes: Vec<String>,
}

/// What the flags ask of the placement.
#[derive(Debug, Clone, Copy, Default)]
struct Wanted {
    producer: Option<usize>,
    accumulator: Option<usize>,
    journaller: Option<usize>,
    /// A journaller at all (not `--no-journal`).
    journal: bool,
    /// `--journal PATH`: leaving the journaller out is no option.
    journal_required: bool,
    housekeeping: Option<usize>,
}

/// A queue run, described: the roles are placed, and the config checked, with the
/// other placements, before anything is printed.
pub struct QueueCommand {
    pub settings: RunSettings,
    args: QueueArgs,
    /// Set by `place`.
    placed: Option<(QueueConfig, Placement)>,
}

impl QueueCommand {
    pub fn from_args(args: &QueueArgs) -> anyhow::Result<QueueCommand> {
        check_flags(args)?;
        Ok(QueueCommand {
            settings: RunSettings::from_args(&args.run)?,
            args: args.clone(),
            placed: None,
        })
    }

    fn placed(&self) -> anyhow::Result<&(QueueConfig, Placement)> {
        self.placed
            .as_ref()
            .context("queue: measured before its roles were placed")
    }
}

/// `jitterscope queue`.
pub fn run(args: &QueueArgs, argv: &[String], stop: &AtomicBool) -> anyhow::Result<Ending> {
    let mut cmd = QueueCommand::from_args(args)?;
    Ok(execute(&mut cmd, argv, stop, &Warnings::stderr())?.1)
}

impl Measure for QueueCommand {
    fn settings(&self) -> &RunSettings {
        &self.settings
    }

    fn place(&mut self, universe: &CpuUniverse, _: &Cpuset) -> anyhow::Result<CpuPlan> {
        let placement = place(universe, &wanted(&self.args))?;
        let cfg = config(&self.args, self.settings.sched, &placement, universe)?;
        let cpus = cfg.plan(placement.housekeeping.clone(), true).cpus;
        self.placed = Some((cfg, placement));
        Ok(cpus)
    }

    /// The most demanding role's policy.
    fn sched(&self) -> SchedRequest {
        self.placed
            .as_ref()
            .map_or(self.settings.sched, |(cfg, _)| most_demanding(cfg))
    }

    fn check(&self, _cpus: &CpuPlan) -> anyhow::Result<()> {
        refuse_realtime_sharing(&self.placed()?.0, self.settings.force)
    }

    fn cpu_flags(&self) -> &'static str {
        "--producer-cpu, --accumulator-cpu, --journaller-cpu, --no-journal, or a priority \
         for some roles only, such as --accumulator-priority"
    }

    fn measure(&mut self, ctx: &mut Ctx<'_>) -> anyhow::Result<Measured> {
        let (cfg, placement) = self.placed()?;
        for w in &placement.notes {
            ctx.note(w.clone());
        }
        let plan = cfg.plan(placement.housekeeping.clone(), self.settings.mlock);
        let run =
            queue::run(cfg, &plan, &ctx.host.clock, ctx.stop).context("the queue run failed")?;
        for w in after_run_warnings(cfg, &run) {
            ctx.note(w);
        }
        Ok(Measured {
            // The runner's window is only a bound (warm-up, measuring and draining, with
            // room to spare): what was asked for and what was measured are the producer's.
            requested: cfg.nominal_measure(),
            actual: Some(Duration::from_nanos(run.producer.measured_ns)),
            entries: run
                .entries
                .into_iter()
                .map(|e| ProbeEntry::Queue(Box::new(e)))
                .collect(),
            outcome: run.outcome,
            mlock: plan.mlock,
            limit_exceeded: false,
        })
    }

    fn text(&self, r: &ResultFile) -> String {
        let header = self.placed.as_ref().map(|(cfg, _)| header(r, cfg));
        format!(
            "{}\n{}",
            header.unwrap_or_default(),
            crate::report::views::queue::queue_tables(r)
        )
    }
}

/// Flags that make no sense for queue or together.
fn check_flags(args: &QueueArgs) -> anyhow::Result<()> {
    if args.run.cpus.is_some() {
        bail!(
            "-a/--cpus is not used by queue: place its roles with --producer-cpu, \
             --accumulator-cpu and --journaller-cpu"
        );
    }
    if args.no_journal && args.journaller_cpu.is_some() {
        bail!("--journaller-cpu places the journaller, which --no-journal leaves out");
    }
    if args.no_journal && args.journaller_priority.is_some() {
        bail!(
            "--journaller-priority sets the journaller's priority, which --no-journal leaves out"
        );
    }
    Ok(())
}

fn wanted(args: &QueueArgs) -> Wanted {
    Wanted {
        producer: args.producer_cpu,
        accumulator: args.accumulator_cpu,
        journaller: args.journaller_cpu,
        journal: !args.no_journal,
        journal_required: args.journal.is_some(),
        housekeeping: args.run.housekeeping,
    }
}

/// Checks one role's CPU against the system, naming the flag.
fn check_cpu(universe: &CpuUniverse, flag: &str, cpu: usize) -> anyhow::Result<usize> {
    if cpu > universe.max_cpu {
        bail!(
            "{flag} {cpu}: CPU {cpu} is out of range (this system has CPUs 0-{})",
            universe.max_cpu
        );
    }
    if !universe.online.contains(cpu) {
        bail!(
            "{flag} {cpu}: CPU {cpu} is not online (online CPUs: {})",
            universe.online
        );
    }
    let text = cpu.to_string();
    (universe.validate(&text, &CpuList::from_cpus(vec![cpu])))
        .map_err(|e| anyhow::anyhow!("{flag} {cpu}: {e}"))?;
    Ok(cpu)
}

/// The roles' CPUs: the ones asked for, then the free ones in order (see the module's
/// opening paragraph).
fn place(universe: &CpuUniverse, want: &Wanted) -> anyhow::Result<Placement> {
    let check = |flag: &str, cpu: Option<usize>| -> anyhow::Result<Option<usize>> {
        cpu.map(|c| check_cpu(universe, flag, c)).transpose()
    };
    let mut producer = check("--producer-cpu", want.producer)?;
    let mut accumulator = check("--accumulator-cpu", want.accumulator)?;
    let mut journaller = check("--journaller-cpu", want.journaller)?;
    let hk_asked = check("--housekeeping", want.housekeeping)?;
    // The CPUs a default plan spans: the mask, and those a tuned host set apart.
    let usable = universe.default_cpus();
    let Some(hk) = hk_asked.or(universe.housekeeping_pool().first()) else {
        bail!("this process may use no online CPU; check taskset or the cgroup's cpuset");
    };
    let taken = CpuList::from_cpus(
        [producer, accumulator, journaller, Some(hk)]
            .into_iter()
            .flatten()
            .collect(),
    );
    let mut free: VecDeque<usize> = usable.without(&taken).cpus().iter().copied().collect();
    let unplaced = [
        producer.is_none(),
        accumulator.is_none(),
        want.journal && journaller.is_none(),
    ];
    if free.len() < unplaced.iter().filter(|u| **u).count() && producer.is_none() {
        producer = Some(hk);
    }
    let mut notes = Vec::new();
    if producer.is_none() {
        producer = Some(free.pop_front().unwrap_or(hk));
    }
    // Out of free CPUs, the accumulator is needed all the same: beside the journaller if
    // that was placed (the producer's schedule is the stimulus, best left alone), else on
    // the housekeeping CPU.
    if accumulator.is_none() {
        accumulator = Some(free.pop_front().or(journaller).unwrap_or(hk));
    }
    if want.journal && journaller.is_none() {
        journaller = free.pop_front();
        if journaller.is_none() {
            if want.journal_required {
                bail!(
                    "--journal needs a CPU for the journaller and none is free ({} usable for \
                     3 roles): place it with --journaller-cpu N (it then shares that CPU)",
                    usable.len()
                );
            }
            notes.push(format!(
                "the journaller is off: {} usable CPU(s) for 3 busy roles; place it with \
                 --journaller-cpu N (it then time-slices with the role there), or pass \
                 --no-journal",
                usable.len()
            ));
        }
    }
    let (producer, accumulator) = (producer.unwrap_or(hk), accumulator.unwrap_or(hk));
    notes.extend(sharing_notes(producer, accumulator, journaller));
    Ok(Placement {
        producer,
        accumulator,
        journaller,
        housekeeping: match hk_asked {
            Some(h) => CpuList::from_cpus(vec![h]),
            None => usable,
        },
        notes,
    })
}

/// A warning for each pair of roles on one CPU: busy-spinning threads time-slice there.
fn sharing_notes(producer: usize, accumulator: usize, journaller: Option<usize>) -> Vec<String> {
    let roles = [
        ("producer", Some(producer)),
        ("accumulator", Some(accumulator)),
        ("journaller", journaller),
    ];
    let mut notes = Vec::new();
    for (i, (a, ca)) in roles.iter().enumerate() {
        for (b, cb) in &roles[i + 1..] {
            if let (Some(x), Some(y)) = (ca, cb)
                && x == y
            {
                notes.push(format!(
                    "the {a} and the {b} share CPU {x}: two busy-spinning threads on one CPU \
                     time-slice, so the figures include each one's turns"
                ));
            }
        }
    }
    notes
}

/// Two busy-spinning roles on one CPU time-slice only at SCHED_OTHER. With a real-time
/// one among them, the other never runs again (or, at equal real-time priority, neither
/// lets go): refused unless forced.
fn refuse_realtime_sharing(cfg: &QueueConfig, force: bool) -> anyhow::Result<()> {
    let roles = [
        ("producer", Some(cfg.producer)),
        ("accumulator", Some(cfg.accumulator)),
        ("journaller", cfg.journaller),
    ];
    for (i, (a, ta)) in roles.iter().enumerate() {
        for (b, tb) in &roles[i + 1..] {
            if let (Some(x), Some(y)) = (ta, tb)
                && x.cpu == y.cpu
                && (x.sched.policy.is_realtime() || y.sched.policy.is_realtime())
                && !force
            {
                bail!(
                    "the {a} ({}) and the {b} ({}) would share CPU {}: a busy-spinning \
                     real-time thread never lets the other run there. Put them on CPUs of \
                     their own, run both at --policy other, or pass --force",
                    x.sched,
                    y.sched,
                    x.cpu
                );
            }
        }
    }
    Ok(())
}

/// One role's policy: `-p/--policy`, or its own priority, which implies SCHED_FIFO when
/// the common policy is not real-time.
fn role_sched(base: SchedRequest, priority: Option<u8>) -> SchedRequest {
    match priority {
        None => base,
        Some(p) => SchedRequest {
            policy: match base.policy.is_realtime() {
                true => base.policy,
                false => Policy::Fifo,
            },
            priority: p,
        },
    }
}

/// The most demanding of the roles' policies, for the safety check and the preamble.
fn most_demanding(cfg: &QueueConfig) -> SchedRequest {
    (cfg.threads().into_iter().map(|t| t.sched))
        .max_by_key(|r| (r.policy.is_realtime(), r.priority))
        .unwrap_or(SchedRequest::OTHER)
}

fn config(
    args: &QueueArgs,
    base: SchedRequest,
    p: &Placement,
    universe: &CpuUniverse,
) -> anyhow::Result<QueueConfig> {
    let spec = |cpu, prio| ThreadSpec {
        cpu,
        sched: role_sched(base, prio),
    };
    let duration = match (args.run.duration, args.count) {
        (Some(d), _) => Some(d),
        (None, Some(_)) => None,
        (None, None) => Some(crate::cli::DEFAULT_DURATION),
    };
    let journaller = p.journaller.map(|c| spec(c, args.journaller_priority));
    let cfg = QueueConfig {
        interval_ns: args.interval,
        ring_size: args.ring_size,
        warmup: args.warmup,
        count: args.count,
        duration,
        producer: spec(p.producer, args.producer_priority),
        accumulator: spec(p.accumulator, args.accumulator_priority),
        journal_path: journaller.and(args.journal.clone()),
        journaller,
        perturb: match args.perturb {
            true => universe.default_cpus(),
            false => CpuList::default(),
        },
    };
    cfg.validate()?;
    if let Some(path) = &cfg.journal_path {
        // Opened (and truncated) now, so that a bad path is one line of bad input rather
        // than a failure after the warnings; the probe opens it again for the run.
        std::fs::File::create(path).map_err(|error| QueueError::Journal {
            path: path.clone(),
            error,
        })?;
    }
    Ok(cfg)
}

/// What only the run could tell: counters that disagree, a count the bound cut short.
fn after_run_warnings(cfg: &QueueConfig, run: &queue::QueueRun) -> Vec<String> {
    let mut out = Vec::new();
    for e in &run.entries {
        match &e.tsc_skew {
            Some(s) if !s.consistent => out.push(format!(
                "the TSC of CPU {} differs from the producer's (CPU {}) by at least {} ns: \
                 the {}'s transit times are off by that much",
                e.cpu, e.producer_cpu, s.bound_ns, e.role
            )),
            None => out.push(format!(
                "the TSC offset between CPU {} and CPU {} could not be measured: the {}'s \
                 transit times assume the counters agree",
                e.producer_cpu, e.cpu, e.role
            )),
            _ => {}
        }
    }
    if let (Some(n), None) = (cfg.count, cfg.duration)
        && run.producer.published < n
        && !run.outcome.interrupted
    {
        out.push(format!(
            "the run reached its time bound before -l {n} messages: {} were published",
            run.producer.published
        ));
    }
    out
}

fn header(r: &ResultFile, cfg: &QueueConfig) -> String {
    let entries: Vec<&QueueEntry> = r.entries().collect();
    let interrupted = match r.run.interrupted {
        true => " (interrupted)",
        false => "",
    };
    let journaller = match (cfg.journaller, &cfg.journal_path) {
        (None, _) => "no journaller".to_string(),
        (Some(j), Some(p)) => format!("journaller CPU {} (journal {})", j.cpu, p.display()),
        (Some(j), None) => format!("journaller CPU {} (temporary journal)", j.cpu),
    };
    // As each thread ran (a refused real-time policy is not what ran).
    let roles = cfg.threads();
    let ran = |i: usize| {
        let e = entries.first();
        match i {
            0 => e.map(|e| &e.producer.thread),
            _ => (entries.iter())
                .find(|e| (e.role == Role::Accumulator) == (i == 1))
                .map(|e| &e.thread),
        }
    };
    let policies: Vec<String> = ["producer", "accumulator", "journaller"]
        .iter()
        .zip(&roles)
        .enumerate()
        .map(|(i, (name, t))| format!("{name} {}", super::output::policy_ran(ran(i), t.sched)))
        .collect();
    let mut text = format!(
        "queue: producer CPU {} → accumulator CPU {}, {journaller}; a message every {} µs \
         for {:.3} s{interrupted}, ring of {} slots, warm-up {} messages{}\n{}\n",
        cfg.producer.cpu,
        cfg.accumulator.cpu,
        cfg.interval_ns as f64 / 1e3,
        r.run.actual_duration_ns as f64 / 1e9,
        cfg.ring_size,
        cfg.warmup,
        match cfg.perturb.is_empty() {
            true => "",
            false => ", perturbed (3 ms busy / 30 ms asleep on every CPU)",
        },
        policies.join(", "),
    );
    for e in entries {
        text.push_str(&skew_line(e));
    }
    text.push_str(&clock_line(r));
    text
}

/// "TSC offset producer→CPU n: ≤ X ns", or why not.
fn skew_line(e: &QueueEntry) -> String {
    match &e.tsc_skew {
        _ if e.cpu == e.producer_cpu => {
            format!("TSC offset producer→CPU {}: none (the same CPU)\n", e.cpu)
        }
        Some(s) if s.consistent => format!(
            "TSC offset producer→CPU {}: ≤ {} ns ({} rounds)\n",
            e.cpu, s.bound_ns, s.rounds
        ),
        Some(s) => format!(
            "TSC offset producer→CPU {}: ≥ {} ns (the counters disagree)\n",
            e.cpu, s.bound_ns
        ),
        None => format!("TSC offset producer→CPU {}: not measured\n", e.cpu),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn universe(cpus: &str) -> CpuUniverse {
        let online = CpuList::parse_kernel(cpus).unwrap();
        CpuUniverse::of(online.clone(), online)
    }

    fn default_want() -> Wanted {
        Wanted {
            journal: true,
            ..Wanted::default()
        }
    }

    fn roles(p: &Placement) -> (usize, usize, Option<usize>) {
        (p.producer, p.accumulator, p.journaller)
    }

    #[test]
    fn roles_take_the_cpus_after_the_housekeeping_one() {
        let p = place(&universe("0-3"), &default_want()).unwrap();
        assert_eq!(roles(&p), (1, 2, Some(3)));
        assert!(p.notes.is_empty(), "{:?}", p.notes);
        // Three CPUs: the producer joins the housekeeping CPU.
        let p = place(&universe("0-2"), &default_want()).unwrap();
        assert_eq!(roles(&p), (0, 1, Some(2)));
        assert!(p.notes.is_empty(), "{:?}", p.notes);
    }

    #[test]
    fn two_cpus_leave_the_journaller_out_with_one_warning() {
        let p = place(&universe("0-1"), &default_want()).unwrap();
        assert_eq!(roles(&p), (0, 1, None));
        assert_eq!(p.notes.len(), 1, "{:?}", p.notes);
        assert!(p.notes[0].contains("--journaller-cpu"), "{}", p.notes[0]);
        let no_journal = Wanted {
            journal: false,
            ..Wanted::default()
        };
        let p = place(&universe("0-1"), &no_journal).unwrap();
        assert_eq!((roles(&p), p.notes.len()), ((0, 1, None), 0));
        // Asked for by path, it cannot silently go.
        let required = Wanted {
            journal_required: true,
            ..default_want()
        };
        let e = place(&universe("0-1"), &required).unwrap_err().to_string();
        assert!(e.contains("--journaller-cpu"), "{e}");
    }

    #[test]
    fn explicit_cpus_are_kept_and_sharing_is_warned() {
        let want = Wanted {
            journaller: Some(1),
            ..default_want()
        };
        let p = place(&universe("0-1"), &want).unwrap();
        // The consumers share, and leave the producer's schedule alone.
        assert_eq!(roles(&p), (0, 1, Some(1)));
        assert!(p.notes[0].contains("the accumulator and the journaller share CPU 1"));
        assert_eq!(p.notes.len(), 1, "{:?}", p.notes);
        assert!(p.notes[0].contains("share CPU"), "{}", p.notes[0]);
        let want = Wanted {
            producer: Some(3),
            accumulator: Some(3),
            ..default_want()
        };
        let p = place(&universe("0-3"), &want).unwrap();
        assert_eq!(roles(&p), (3, 3, Some(1)));
        assert!(p.notes[0].contains("the producer and the accumulator share CPU 3"));
        // One CPU: everything on it.
        let p = place(&universe("0"), &default_want()).unwrap();
        assert_eq!(roles(&p), (0, 0, None));
    }

    #[test]
    fn a_bad_role_cpu_names_its_flag() {
        let want = Wanted {
            producer: Some(99),
            ..default_want()
        };
        let e = place(&universe("0-1"), &want).unwrap_err().to_string();
        assert!(
            e.starts_with("--producer-cpu 99: CPU 99 is out of range"),
            "{e}"
        );
    }

    #[test]
    fn a_role_priority_implies_fifo() {
        let fifo = |priority| SchedRequest {
            policy: Policy::Fifo,
            priority,
        };
        assert_eq!(role_sched(SchedRequest::OTHER, Some(5)), fifo(5));
        assert_eq!(role_sched(SchedRequest::OTHER, None), SchedRequest::OTHER);
        let rr = SchedRequest {
            policy: Policy::Rr,
            priority: 3,
        };
        assert_eq!(role_sched(rr, Some(7)).policy, Policy::Rr);
        assert_eq!(role_sched(fifo(2), None), fifo(2));
    }
}
