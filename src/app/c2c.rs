//! `jitterscope c2c`: the core-to-core latency matrix over the selected CPUs.
//!
//! Unlike noise, c2c measures every CPU by default, one pair at a time: only the pair's
//! two CPUs spin, so the coordinator sits on any CPU outside the pair, and shares one only
//! on a machine with two usable CPUs. The run's length is set by the samples, the round
//! trips and the preheat, so `-D` is refused rather than silently ignored.

use std::io::{IsTerminal, Write};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::{Context, bail};

use crate::cli::C2cArgs;
use crate::engine::cpu::{CpuList, CpuPlan, CpuUniverse};
use crate::engine::run::RunPlan;
use crate::engine::topology::Topology;
use crate::probes::c2c::{self, C2cConfig, C2cEntry, Mode};
use crate::report::{ProbeEntry, ResultFile};

use super::Ending;
use super::cpuset::Cpuset;
use super::output::{Warnings, clock_line};
use super::pipeline::{Ctx, Measure, Measured, RunSettings, execute, plan_cpus};

/// How long a pair's two threads may take to start and reach the gate.
const SETUP_TIMEOUT: Duration = Duration::from_secs(10);

/// A c2c run, described.
pub struct C2cCommand {
    pub settings: RunSettings,
    pub cfg: C2cConfig,
    /// Order the tables by locality.
    pub group: bool,
    /// Known once measured, for the header.
    pairs: usize,
    skipped: usize,
    /// Why the default matrix is not the isolated CPUs alone, said when measuring.
    note: Option<String>,
}

impl C2cCommand {
    pub fn new(settings: RunSettings, cfg: C2cConfig, group: bool) -> anyhow::Result<C2cCommand> {
        if settings.duration.is_some() {
            bail!(
                "-D/--duration does not apply to c2c: its length follows from -s/--samples, \
                 -n/--round-trips and --preheat"
            );
        }
        cfg.validate()?;
        Ok(C2cCommand {
            settings,
            cfg,
            group,
            pairs: 0,
            skipped: 0,
            note: None,
        })
    }

    pub fn from_args(args: &C2cArgs) -> anyhow::Result<C2cCommand> {
        let cfg = C2cConfig {
            mode: if args.cas { Mode::Cas } else { Mode::Load },
            samples: args.samples,
            round_trips: args.round_trips,
            preheat: args.preheat,
        };
        C2cCommand::new(RunSettings::from_args(&args.run)?, cfg, args.group)
    }
}

/// `jitterscope c2c`.
pub fn run(args: &C2cArgs, argv: &[String], stop: &AtomicBool) -> anyhow::Result<Ending> {
    let mut cmd = C2cCommand::from_args(args)?;
    Ok(execute(&mut cmd, argv, stop, &Warnings::stderr())?.1)
}

impl C2cCommand {
    /// The CPUs a tuned host set apart, when there are two to pair; else every CPU a
    /// default plan spans, saying why on a tuned host.
    fn default_matrix(&mut self, universe: &CpuUniverse) -> CpuList {
        let apart = universe.tuned.cpus.intersect(&universe.usable());
        if apart.len() >= 2 {
            return apart;
        }
        let all = universe.default_cpus();
        if !apart.is_empty() {
            self.note = Some(format!(
                "c2c pairs every CPU ({all}): the host set apart one CPU ({apart}), and a pair \
                 needs two; -a names the CPUs to pair"
            ));
        }
        all
    }
}

impl Measure for C2cCommand {
    fn settings(&self) -> &RunSettings {
        &self.settings
    }

    /// Every usable CPU by default. With `--housekeeping` (and no `-a`) that CPU is left
    /// out of the matrix for the coordinator. With every usable CPU measured, the
    /// coordinator's set is all of them: each pair's coordinator then runs on the CPUs
    /// outside that pair.
    fn place(&mut self, universe: &CpuUniverse, cpuset: &Cpuset) -> anyhow::Result<CpuPlan> {
        let default = match (&self.settings.cpus, self.settings.housekeeping) {
            (None, None) => Some(self.default_matrix(universe)),
            _ => None,
        };
        let s = &self.settings;
        let mut cpus = match (&s.cpus, s.housekeeping) {
            (None, None) => CpuPlan {
                measured: default.unwrap_or_default(),
                housekeeping: CpuList::default(),
            },
            _ => plan_cpus(s.cpus.as_deref(), s.housekeeping, universe, cpuset)?,
        };
        if cpus.measured.len() < 2 {
            bail!(
                "c2c needs at least 2 CPUs to pair, got {} ({}); pass -a with two or more \
                 CPUs (usable here: {})",
                cpus.measured.len(),
                cpus.measured,
                universe.usable()
            );
        }
        cpus.housekeeping = coordinator_cpus(&cpus, &universe.default_cpus(), s.housekeeping);
        Ok(cpus)
    }

    fn measure(&mut self, ctx: &mut Ctx<'_>) -> anyhow::Result<Measured> {
        if let Some(note) = self.note.take() {
            ctx.note(note);
        }
        let topo = Topology::detect(&ctx.cpus.measured);
        let pairs = c2c::pairs(&ctx.cpus.measured);
        let plan = RunPlan {
            cpus: ctx.cpus.clone(),
            sched: ctx.sched,
            mlock: self.settings.mlock,
            duration: self.cfg.pair_limit() * pairs.len() as u32,
            priospread: false,
            setup_timeout: SETUP_TIMEOUT,
        };
        let shown = !self.settings.save.quiet && std::io::stderr().is_terminal();
        let mut progress = Progress::new(shown);
        let mut on_pair = |done, total| progress.draw(done, total);
        let run = c2c::run(
            &self.cfg,
            &plan,
            &pairs,
            &topo,
            &ctx.host.clock,
            ctx.stop,
            &mut on_pair,
        )
        .context("the c2c run failed")?;
        progress.clear();
        for w in short_pairs(&run.entries, run.outcome.interrupted) {
            ctx.note(w);
        }
        self.pairs = pairs.len();
        self.skipped = run.pairs_skipped;
        Ok(Measured::of_plan(
            run.entries,
            ProbeEntry::C2c,
            run.outcome,
            &plan,
        ))
    }

    /// The header, its first line wrapped to the terminal (the clock lines are laid out
    /// already), then the tables.
    fn text(&self, r: &ResultFile) -> String {
        let header = self.header(r);
        let (first, rest) = header.split_once('\n').unwrap_or((&header, ""));
        let width = crate::report::terminal::table::Layout::current().wrap_width();
        format!(
            "{}\n{rest}\n{}",
            crate::report::terminal::table::wrap(first, width, "  "),
            crate::report::views::c2c::c2c_tables(r, self.group)
        )
    }
}

/// Where the coordinators may run: the chosen housekeeping CPU, else the usable CPUs
/// outside the matrix, else (every usable CPU measured) all of them, since each pair
/// leaves the others free. Empty only when two usable CPUs are both measured.
fn coordinator_cpus(plan: &CpuPlan, usable: &CpuList, chosen: Option<usize>) -> CpuList {
    match chosen {
        Some(hk) => CpuList::from_cpus(vec![hk]).without(&plan.measured),
        None if !plan.housekeeping.is_empty() => plan.housekeeping.clone(),
        None if usable.without(&plan.measured).is_empty() && usable.len() > 2 => usable.clone(),
        None => usable.without(&plan.measured),
    }
}

/// Pairs that ran out of time: a thread was kept off its CPU, so the figure is partial.
/// Pairs that ran out of time before their samples were done.
fn short_pairs(entries: &[C2cEntry], interrupted: bool) -> Vec<String> {
    if interrupted {
        return Vec::new();
    }
    entries
        .iter()
        .filter(|e| e.samples < e.config.samples as u64)
        .map(|e| {
            format!(
                "CPUs {} and {} measured {} of {} samples before the pair's time limit: a \
                 thread was kept off its CPU (another task, or throttling)",
                e.cpu_a, e.cpu_b, e.samples, e.config.samples
            )
        })
        .collect()
}

impl C2cCommand {
    fn header(&self, r: &ResultFile) -> String {
        let (pairs, cfg) = (self.pairs, &self.cfg);
        let interrupted = match (r.run.interrupted, self.skipped) {
            (false, _) => String::new(),
            (true, 0) => " (interrupted)".to_string(),
            (true, n) => format!(" (interrupted: {n} of {pairs} pairs not measured)"),
        };
        format!(
            "c2c: CPUs {}, {pairs} pair{} in {:.3} s{interrupted}; {}; {} samples × {} \
             round trips per pair, preheat {}; {}\n{}",
            r.run.cpus.measured,
            if pairs == 1 { "" } else { "s" },
            r.run.actual_duration_ns as f64 / 1e9,
            cfg.mode,
            cfg.samples,
            cfg.round_trips,
            humantime::format_duration(cfg.preheat),
            super::output::result_policy(r, self.settings.sched),
            clock_line(r),
        )
    }
}

/// "pair 3 of 28" on stderr, redrawn in place, only on a terminal.
struct Progress {
    on: bool,
}

impl Progress {
    fn new(on: bool) -> Progress {
        Progress { on }
    }

    fn draw(&mut self, done: usize, total: usize) {
        if self.on {
            let _ = write!(std::io::stderr(), "\r\x1b[2Kc2c: pair {done} of {total}");
        }
    }

    fn clear(&mut self) {
        if self.on {
            let _ = write!(std::io::stderr(), "\r\x1b[2K");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(s: &str) -> CpuList {
        CpuList::parse_kernel(s).unwrap()
    }

    fn plan(measured: &str, housekeeping: &str) -> CpuPlan {
        CpuPlan {
            measured: list(measured),
            housekeeping: list(housekeeping),
        }
    }

    #[test]
    fn coordinators_go_outside_the_pairs() {
        // Every CPU measured on a 4-CPU machine: each pair leaves two free.
        assert_eq!(
            coordinator_cpus(&plan("0-3", ""), &list("0-3"), None),
            list("0-3")
        );
        // Two CPUs, both measured: nowhere else to go.
        assert!(coordinator_cpus(&plan("0-1", ""), &list("0-1"), None).is_empty());
        // A subset: the rest.
        assert_eq!(
            coordinator_cpus(&plan("1-2", "0,3"), &list("0-3"), None),
            list("0,3")
        );
        // A chosen housekeeping CPU.
        assert_eq!(
            coordinator_cpus(&plan("1-3", "0"), &list("0-3"), Some(0)),
            list("0")
        );
    }
}
