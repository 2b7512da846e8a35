//! `jitterscope tune`: the audit's run-time fixes as a measured experiment.
//!
//! The plan is the audit's findings made into steps (`system::tune`), most severe first;
//! with `--trace`, a traced baseline block reorders them by the share of the lost time
//! the cause each one targets takes, and every step records that share before and after.
//! Each step that applies now is judged in interleaved blocks, baseline then step, `pairs`
//! times, so that drift in the host falls on both sides; the blocks are short noise runs
//! and the CPU rests between them, so that with a safety net removed (RT throttling) no
//! real-time spinner holds a CPU for long. A kept step stays applied and the later
//! steps build on it; at the end everything is reverted, last first, and read back
//! (unless `--keep`). Every write is journaled under /run before it is made.

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, bail};

use crate::cli::{TuneArgs, TuneMetric, TuneProbe};
use crate::engine::cpu::{CpuPlan, CpuUniverse};
use crate::engine::run::{RunOutcome, RunPlan};
use crate::engine::sched::{Policy, SchedRequest};
use crate::probes::noise::{self, NoiseConfig, NoiseEntry};
use crate::probes::timer::{self, NoBreakHook, TimerConfig, TimerEntry};
use crate::report::{ProbeEntry, ResultFile};
use crate::stats::causes::Attribution;
use crate::system::audit::{AuditReport, FindingId};
use crate::system::tune::apply::{self, Applied, ApplyError};
use crate::system::tune::experiment::{self, ALPHA, Decision};
use crate::system::tune::record::{Block, Metric, Stair, StepRun, TuneEntry, Value, stair};
use crate::system::tune::sequential::{self, Design, Order};
use crate::system::tune::share::{self, share_of};
use crate::system::tune::timing::{self, Timing};
use crate::system::tune::{Class, Step, plan};

use super::Ending;
use super::output::Warnings;
use super::pipeline::{Ctx, Measure, Measured, RunSettings, execute, plan_cpus};
use super::tracing;

/// The longest block a real-time spinner may run: far inside the kernel's soft-lockup
/// (20 s) and RCU stall (21 s) warnings, with RT throttling off.
pub const MAX_BLOCK: Duration = Duration::from_secs(2);

/// `jitterscope tune`.
pub fn run(args: &TuneArgs, argv: &[String], stop: &AtomicBool) -> anyhow::Result<Ending> {
    let root = args.root.clone().unwrap_or_else(|| PathBuf::from("/"));
    if !root.is_dir() {
        bail!("--root {}: no such directory", root.display());
    }
    let live = root == Path::new("/");
    let is_root = rustix::process::geteuid().is_root();
    if args.restore {
        if !is_root && live {
            bail!("tune --restore writes host settings and needs root: run it with sudo");
        }
        return restore(&root);
    }
    // A recorded tree may be planned without root: nothing is written there.
    let tree_plan = args.dry_run && !live;
    if !is_root && !tree_plan {
        bail!(
            "tune changes host settings (sysctls, /sys, IRQ affinity) and needs root: \
             run it with sudo (or --dry-run --root DIR on a recorded tree)"
        );
    }
    // Checked before anything changes: a run whose export cannot be written is wasted.
    if let Some(dir) = &args.export {
        if args.dry_run {
            bail!(
                "--export {}: a dry run keeps nothing; --export writes what a run kept",
                dir.display()
            );
        }
        std::fs::create_dir_all(dir)
            .with_context(|| format!("--export {}: cannot create it", dir.display()))?;
    }
    let sched = tune_sched(args)?;
    if sched.policy.is_realtime() && args.block > MAX_BLOCK {
        bail!(
            "--block {:?}: at most 2s, so that a real-time spinner never holds a CPU longer \
             (a step may turn RT throttling off)",
            args.block
        );
    }
    let chosen = args.metric.map(metric_of);
    // The run's metric, which each step's own default may replace (`step_metric`).
    let metric = chosen.unwrap_or(Metric::Lost);
    let probe = probe_of(args.probe, args.block, metric)?;
    if args.trace && args.probe != TuneProbe::Noise {
        bail!("--trace attributes noise gaps: use it with --probe noise");
    }
    let universe = CpuUniverse::detect().context("cannot read the system's CPUs")?;
    let cpuset = super::cpuset::Cpuset::read();
    let cpus = plan_cpus(args.cpus.as_deref(), args.housekeeping, &universe, &cpuset)?;
    let online = super::audit::online_cpus(&root)?;
    let report = AuditReport::of(&root, cpus.measured.clone(), &online);
    let mut steps = plan(&report, &root);
    if live {
        ask_the_kernel(&mut steps, &root);
        probe_cannot_feel(&mut steps, sched);
    }
    if !args.step.is_empty() {
        if let Some(bad) = args
            .step
            .iter()
            .find(|s| *s != "sham" && s.parse::<FindingId>().is_err())
        {
            bail!("--step {bad}: not an audit finding id (see `jitterscope audit`)");
        }
        steps.retain(|s| args.step.contains(&s.id));
    }
    if args.sham || args.step.iter().any(|s| s == "sham") {
        steps.push(Step::sham());
    }
    let out = std::io::stdout();
    let quiet = args.save.quiet || args.save.json.as_ref().is_some_and(Option::is_none);
    let design = Design::of(args.blocks as usize, ALPHA);
    let cap = sched.policy.is_realtime().then_some(MAX_BLOCK);
    let timings: Vec<Option<Timing>> = (steps.iter())
        .map(|s| {
            (s.class == Class::Applies)
                .then(|| step_timing(s, &root, &cpus, args.block, probe.warmup(), cap))
        })
        .collect();
    let plan_text = plan_table(&steps, &timings, &cpus, args, &design, chosen, probe.name());
    if !quiet || args.dry_run {
        let _ = out.lock().write_all(plan_text.as_bytes());
    }
    if args.dry_run {
        return Ok(Ending::Completed);
    }
    let runnable = steps.iter().filter(|s| s.class == Class::Applies).count();
    if runnable == 0 {
        println!("nothing to try: no step applies now on this host");
        // The boot-only steps are exported all the same: they are what is left to do.
        if let Some(dir) = &args.export {
            let entry = TuneEntry {
                probe: probe.name().into(),
                metric,
                block_ns: args.block.as_nanos() as u64,
                pairs: args.blocks,
                max_pairs: design.max_pairs() as u32,
                rest_ns: args.rest.as_nanos() as u64,
                alpha: ALPHA,
                steps: steps.into_iter().map(StepRun::unmeasured).collect(),
                staircase: Vec::new(),
                restored: Vec::new(),
                kept_applied: false,
            };
            export(dir, &entry, &argv.join(" "))?;
        }
        return Ok(Ending::Completed);
    }
    if !args.yes && !confirm(runnable)? {
        println!("nothing changed");
        return Ok(Ending::Completed);
    }
    let mut cmd = TuneCommand {
        settings: RunSettings {
            cpus: args.cpus.clone(),
            housekeeping: args.housekeeping,
            sched,
            duration: Some(args.block),
            mlock: true,
            force: false,
            save: args.save.clone(),
            gates: Vec::new(),
            whole_result: false,
        },
        root,
        steps,
        probe,
        trace: args.trace,
        metric,
        chosen,
        pairs: args.blocks,
        design,
        cap,
        block: args.block,
        rest: args.rest,
        keep: args.keep,
        entry: None,
        undo: Vec::new(),
    };
    let ending = execute(&mut cmd, argv, stop, &Warnings::stderr())?.1;
    if let (Some(dir), Some(t), Ending::Completed) = (&args.export, &cmd.entry, &ending) {
        export(dir, t, &argv.join(" "))?;
    }
    Ok(ending)
}

/// `--export DIR`: writes the kept steps' files and says what each is for.
fn export(dir: &Path, t: &TuneEntry, command: &str) -> anyhow::Result<()> {
    let files = crate::system::tune::export::files(t, command);
    if files.is_empty() {
        println!(
            "nothing exported to {}: no step was kept and none is boot-only",
            dir.display()
        );
        return Ok(());
    }
    for f in &files {
        let path = dir.join(f.path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
        std::fs::write(&path, &f.text)
            .with_context(|| format!("cannot write {}", path.display()))?;
        if f.executable {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
        }
    }
    println!(
        "exported to {}: {} (see README.txt there)",
        dir.display(),
        files.iter().map(|f| f.path).collect::<Vec<_>>().join(", ")
    );
    Ok(())
}

/// SCHED_FIFO 1 unless asked otherwise: the measured thread of a latency-critical
/// program is a real-time one, and RT throttling only shows for such a thread.
fn tune_sched(args: &TuneArgs) -> anyhow::Result<SchedRequest> {
    let policy = args.policy.unwrap_or(Policy::Fifo);
    super::pipeline::sched_request(Some(policy), args.priority)
}

/// A step's blocks: a whole number of its cause's periods after a lead-in of one, the
/// two within `cap` (with the probe's warm-up, which a block always had beside it).
fn step_timing(
    step: &Step,
    root: &Path,
    cpus: &CpuPlan,
    block: Duration,
    warmup: Duration,
    cap: Option<Duration>,
) -> Timing {
    let cpu = cpus.measured.first().unwrap_or(0);
    let (period, source) = timing::cause_period(&step.id, &step.seen, root, cpu);
    timing::align(block, period, &source, warmup, cap.map(|c| c + warmup))
}

/// What measures each block. The timer's /dev/cpu_dma_latency is left alone: holding it
/// would hide what the PM QoS steps change.
#[derive(Debug, Clone)]
enum BlockProbe {
    Noise(NoiseConfig),
    Timer(TimerConfig),
}

impl BlockProbe {
    fn name(&self) -> &'static str {
        match self {
            BlockProbe::Noise(_) => "noise",
            BlockProbe::Timer(_) => "timer",
        }
    }

    fn warmup(&self) -> Duration {
        match self {
            BlockProbe::Noise(c) => c.warmup,
            BlockProbe::Timer(c) => c.warmup,
        }
    }

    /// The probe with a lead-in as its warm-up: the thread runs it before measuring.
    fn leading_in(&self, lead_in: Duration) -> BlockProbe {
        match self {
            BlockProbe::Noise(c) => BlockProbe::Noise(NoiseConfig {
                warmup: lead_in,
                ..c.clone()
            }),
            BlockProbe::Timer(c) => BlockProbe::Timer(TimerConfig {
                warmup: lead_in,
                ..c.clone()
            }),
        }
    }
}

/// The probe, checked against the block and the metric: a timer block must hold enough
/// wake-ups for the metric to be more than the block's max.
fn probe_of(p: TuneProbe, block: Duration, metric: Metric) -> anyhow::Result<BlockProbe> {
    match p {
        TuneProbe::Noise => Ok(BlockProbe::Noise(NoiseConfig::default())),
        TuneProbe::Timer => {
            let cfg = TimerConfig {
                distance_ns: 0,
                ..TimerConfig::default()
            };
            let wakeups = block.as_nanos() / cfg.interval_ns as u128;
            let needed = match metric {
                Metric::P999 => 1000,
                Metric::P99 => 100,
                Metric::Lost | Metric::Max => 10,
            };
            if wakeups < needed {
                bail!(
                    "--block {}: with --probe timer a block holds {wakeups} wake-ups (one every \
                     {} µs), too few for {} (needs {needed}); lengthen --block",
                    humantime::format_duration(block),
                    cfg.interval_ns / 1000,
                    metric.name()
                );
            }
            Ok(BlockProbe::Timer(cfg))
        }
    }
}

/// What a step is judged on: `--metric`, else what its cause moves. RT throttling's and
/// the fair server's window is one gap of period − runtime (50 ms of 1 s): it sets the
/// block's largest gap, while in the lost time per second a crowded host's other losses
/// (its IRQs, the fair server lending waiting tasks time) blur it.
fn step_metric(chosen: Option<Metric>, step: &Step) -> Metric {
    let windowed = [FindingId::RtThrottlingOn, FindingId::FairServerOn];
    match chosen {
        Some(m) => m,
        None if windowed.iter().any(|id| *id == step.id.as_str()) => Metric::Max,
        None => Metric::Lost,
    }
}

fn metric_of(m: TuneMetric) -> Metric {
    match m {
        TuneMetric::Lost => Metric::Lost,
        TuneMetric::P99 => Metric::P99,
        TuneMetric::P999 => Metric::P999,
        TuneMetric::Max => Metric::Max,
    }
}

/// On the live host, a managed IRQ's class is the kernel's own answer to a write of the
/// value its file already holds (which changes nothing where the write is accepted).
fn ask_the_kernel(steps: &mut [Step], root: &Path) {
    for s in steps.iter_mut() {
        if s.id != FindingId::IrqManagedOnMeasured.to_string() {
            continue;
        }
        let answers: Vec<String> = s
            .changes
            .iter()
            .filter_map(|c| match c {
                crate::system::tune::Change::Write { path, .. } => apply::probe(root, path),
                _ => None,
            })
            .collect();
        s.class = match answers.first() {
            Some(a) => Class::NotApplicable { answer: a.clone() },
            None => Class::Applies,
        };
    }
}

/// Which of the probe's scheduling classes a step's effect reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Feels {
    /// Real-time threads alone (SCHED_FIFO, SCHED_RR).
    Realtime,
    /// Fair-class threads alone (SCHED_OTHER).
    Normal,
}

/// Steps whose effect only one class of thread feels, with what each does.
const FELT_BY: &[(FindingId, Feels, &str)] = &[
    (
        FindingId::RtThrottlingOn,
        Feels::Realtime,
        "RT throttling only stops real-time threads",
    ),
    (
        FindingId::FairServerOn,
        Feels::Realtime,
        "the fair server only takes time from real-time threads",
    ),
    (
        FindingId::CfsQuota,
        Feels::Normal,
        "a CFS quota throttles only SCHED_OTHER threads",
    ),
];

/// A step the probe's class cannot feel is not applicable: a real-time step when the
/// probe cannot be real-time (SCHED_OTHER asked for, or SCHED_FIFO refused here, say in a
/// cgroup without real-time runtime), a fair-class step when it is. Judging it would
/// spend its blocks on a difference that cannot be.
fn probe_cannot_feel(steps: &mut [Step], sched: SchedRequest) {
    let (probe, why) = if !sched.policy.is_realtime() {
        let why = format!("the probe runs at {sched} (--policy {})", sched.policy);
        (Feels::Normal, why)
    } else {
        match crate::engine::sched::preflight(sched) {
            Ok(()) => {
                let why = format!("the probe runs at {sched} (--policy other measures it)");
                (Feels::Realtime, why)
            }
            Err(reason) => {
                let why = format!(
                    "the probe cannot be real-time here: {sched} was refused ({})",
                    crate::degraded::refusal_reason(reason)
                );
                (Feels::Normal, why)
            }
        }
    };
    for s in steps.iter_mut().filter(|s| s.class == Class::Applies) {
        let felt = FELT_BY.iter().find(|(id, _, _)| *id == s.id.as_str());
        if let Some((_, needs, what)) = felt
            && *needs != probe
        {
            s.class = Class::NotApplicable {
                answer: format!("{what}, and {why}"),
            };
        }
    }
}

/// Asks once, on the terminal, before the first change.
fn confirm(runnable: usize) -> anyhow::Result<bool> {
    if !std::io::stdin().is_terminal() {
        bail!(
            "tune changes host settings and asks first, but stdin is not a terminal: pass \
             --yes to go ahead, or --dry-run to see the plan"
        );
    }
    eprint!(
        "Apply {runnable} step(s) one at a time, judge each, and restore every setting at \
         the end? [y/N] "
    );
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    Ok(matches!(line.trim(), "y" | "Y" | "yes"))
}

/// `tune --restore`.
fn restore(root: &Path) -> anyhow::Result<Ending> {
    if let Some(Some(pid)) = crate::system::tune::journal::state(root) {
        bail!("a tune run (pid {pid}) is running: it restores its own changes; stop it first");
    }
    match apply::restore_stale(root)? {
        None => {
            println!(
                "nothing to restore: no journal at {}",
                crate::system::tune::journal::path(root).display()
            );
            Ok(Ending::Completed)
        }
        Some(back) => {
            for r in &back {
                let mark = if r.ok { "ok" } else { "MISMATCH" };
                println!(
                    "restored {} = {} (reads {}) {mark}",
                    r.path, r.expected, r.now
                );
            }
            if back.iter().all(|r| r.ok) {
                println!("{} setting(s) restored; the journal is removed", back.len());
                Ok(Ending::Completed)
            } else {
                bail!("some settings did not read back as before; the journal is kept")
            }
        }
    }
}

/// The plan, one line a step (fits 100 columns).
fn plan_table(
    steps: &[Step],
    timings: &[Option<Timing>],
    cpus: &CpuPlan,
    args: &TuneArgs,
    design: &Design,
    chosen: Option<Metric>,
    probe: &str,
) -> String {
    let judged_on = match chosen {
        Some(m) => m.name().to_string(),
        None => "what its cause moves (below)".to_string(),
    };
    let runnable = steps.iter().filter(|s| s.class == Class::Applies).count();
    let per_step = (args.block + args.rest).as_secs_f64() * 2.0 * args.blocks as f64;
    let looks: Vec<String> = design.looks.iter().map(|n| n.to_string()).collect();
    let mut out = format!(
        "tune plan for CPUs {} (housekeeping {}): {} steps, {runnable} apply now\n\
         each judged on {} by the {probe} probe: {} baseline/step pairs, each pair's order\n\
         drawn by a coin, and up to {} pairs for a step still undecided (looks at {} pairs;\n\
         paired signed-rank test, the {} % level split among the looks)\n\
         blocks of {:.0} ms or a whole number of the step's cause's periods (below), {:.0} ms\n\
         rest between (about {:.0} s a step of {:.0} ms blocks at {} pairs)\n",
        cpus.measured,
        cpus.housekeeping,
        steps.len(),
        judged_on,
        args.blocks,
        design.max_pairs(),
        looks.join(", "),
        design.alpha * 100.0,
        args.block.as_secs_f64() * 1e3,
        args.rest.as_secs_f64() * 1e3,
        per_step,
        args.block.as_secs_f64() * 1e3,
        args.blocks,
    );
    if sequential::min_pairs(design.levels[0]) > args.blocks as usize {
        out.push_str(&format!(
            "note: {} pairs cannot keep a step at the first look (it needs {}); later \
             looks can\n",
            args.blocks,
            sequential::min_pairs(design.levels[0])
        ));
    }
    for (i, s) in steps.iter().enumerate() {
        out.push_str(&format!(
            "{:>3}  {:<30} {:<5} {}\n",
            i + 1,
            fit(&s.id, 30),
            s.severity.to_string(),
            s.class.label()
        ));
        let detail = s.class.detail();
        if matches!(s.class, Class::NotApplicable { .. }) {
            // Why not is the point of the line: said whole.
            let text = format!("       {detail}");
            out.push_str(&crate::report::terminal::table::wrap(
                &text,
                Some(99),
                "       ",
            ));
            out.push('\n');
        } else if !detail.is_empty() {
            out.push_str(&format!("       {}\n", fit(&detail, 92)));
        }
        if let Some(Some(t)) = timings.get(i) {
            out.push_str(&format!("       {}\n", fit(&t.describe(), 92)));
            if chosen.is_none() {
                let m = step_metric(chosen, s).name();
                out.push_str(&format!("       judged on {m}\n"));
            }
        }
        if s.class == Class::Applies || s.class == Class::AlreadyDone {
            let n = s.changes.len();
            for c in s.changes.iter().take(2) {
                out.push_str(&format!("       {}\n", fit(&c.to_string(), 92)));
            }
            if n > 2 {
                out.push_str(&format!("       … and {} more\n", n - 2));
            }
        }
    }
    out
}

fn fit(s: &str, w: usize) -> String {
    if s.chars().count() <= w {
        s.to_string()
    } else {
        let t: String = s.chars().take(w - 1).collect();
        format!("{t}…")
    }
}

/// A tune run, described.
struct TuneCommand {
    settings: RunSettings,
    root: PathBuf,
    steps: Vec<Step>,
    probe: BlockProbe,
    /// Trace the noise blocks: order the steps by cause share, and show it per step.
    trace: bool,
    metric: Metric,
    /// `--metric`, if given; else each step's own (`step_metric`).
    chosen: Option<Metric>,
    /// Pairs at the first look; the design's looks and levels after it.
    pairs: u32,
    design: Design,
    /// The longest a real-time probe may hold a CPU (none at SCHED_OTHER).
    cap: Option<Duration>,
    block: Duration,
    rest: Duration,
    keep: bool,
    entry: Option<TuneEntry>,
    /// What to write back to undo the kept steps (`--keep`).
    undo: Vec<String>,
}

impl TuneCommand {
    /// One block of the probe on the plan's CPUs, with each CPU's attribution if traced.
    fn block(&self, ctx: &mut Ctx<'_>, applied: bool, t: &Timing) -> anyhow::Result<BlockRun> {
        let plan = RunPlan {
            cpus: ctx.cpus.clone(),
            sched: ctx.sched,
            mlock: self.settings.mlock,
            duration: t.block(),
            priospread: false,
            setup_timeout: t.lead_in() + Duration::from_secs(10),
        };
        let (clock, stop) = (&ctx.host.clock, ctx.stop);
        let probe = self.probe.leading_in(t.lead_in());
        let (mut b, outcome, attrs) = match &probe {
            BlockProbe::Noise(cfg) if self.trace => {
                let h = noise::Histograms::Omitted;
                let run = tracing::run_noise_traced(ctx, cfg, 0, &plan, h)
                    .context("a traced noise block failed")?;
                let attrs = (run.entries.iter())
                    .filter_map(|e| e.attribution.clone())
                    .collect();
                (noise_block(&run.entries), run.outcome, attrs)
            }
            BlockProbe::Noise(cfg) => {
                let run = noise::run_with(cfg, &plan, clock, stop, noise::Histograms::Omitted)
                    .context("a noise block failed")?;
                (noise_block(&run.entries), run.outcome, Vec::new())
            }
            BlockProbe::Timer(cfg) => {
                let run = timer::run(cfg, &plan, clock, stop, &NoBreakHook, None)
                    .context("a timer block failed")?;
                (timer_block(&run.entries), run.outcome, Vec::new())
            }
        };
        b.applied = applied;
        Ok((b, outcome, attrs))
    }

    /// With a trace, one baseline block first: the steps go by the share of the lost
    /// time their causes take, largest first (without one, the audit's severity order).
    fn order_by_cause(&mut self, ctx: &mut Ctx<'_>) -> anyhow::Result<()> {
        let plain = timing::align(
            self.block,
            self.block,
            "the block",
            self.probe.warmup(),
            None,
        );
        let (_, _, attrs) = self.block(ctx, false, &plain)?;
        std::thread::sleep(self.rest);
        let refs: Vec<&Attribution> = attrs.iter().collect();
        share::order(&mut self.steps, |s| share_of(&s.id, &refs));
        let order: Vec<String> = (self.steps.iter())
            .filter(|s| s.class == Class::Applies)
            .map(|s| match share_of(&s.id, &refs) {
                Some(p) => format!("{} {p:.0}%", s.id),
                None => s.id.clone(),
            })
            .collect();
        eprintln!("by traced cause share: {}", order.join(", "));
        Ok(())
    }
}

/// A block's figures, how the run ended, and each traced CPU's attribution.
type BlockRun = (Block, RunOutcome<()>, Vec<Attribution>);

/// One step being judged: its run as recorded, its blocks' timing, the coin that orders
/// each pair, the pairs' values (baseline, step) and each side's traced attributions.
struct Trial {
    run: StepRun,
    timing: Timing,
    order: Order,
    pairs: Vec<(u64, u64)>,
    traced: [Vec<Attribution>; 2],
}

/// What the whole run has measured so far: the last block's outcome, the time measured.
struct Progress {
    last: Option<RunOutcome<()>>,
    measured: Duration,
}

impl TuneCommand {
    /// Pairs up to each look of the design, judged there; more while the design extends
    /// an undecided step. `None` when no look was reached (stopped, or the step refused).
    fn judge_step(
        &self,
        ctx: &mut Ctx<'_>,
        applied: &mut Applied,
        trial: &mut Trial,
        progress: &mut Progress,
    ) -> anyhow::Result<Option<experiment::Judgement>> {
        let mut judged = None;
        for (look, &n) in self.design.looks.iter().enumerate() {
            while trial.pairs.len() < n {
                if !self.pair(ctx, applied, trial, progress)? {
                    return Ok(judged);
                }
            }
            let j = sequential::judge(&trial.pairs, &self.design, look);
            let more = self.design.extend(look, &j);
            judged = Some(j);
            if !more {
                break;
            }
        }
        Ok(judged)
    }

    /// One pair of blocks, in the coin's order, the step applied for its own block
    /// only. False when it could not be completed (stopped, or the step refused).
    fn pair(
        &self,
        ctx: &mut Ctx<'_>,
        applied: &mut Applied,
        trial: &mut Trial,
        progress: &mut Progress,
    ) -> anyhow::Result<bool> {
        let mut values = (0u64, 0u64);
        for on in trial.order.pair() {
            if ctx.stop.load(Ordering::Relaxed) {
                return Ok(false);
            }
            let mark = applied.mark();
            if on {
                match applied.apply(&trial.run.step) {
                    Ok(v) if trial.run.values.is_empty() => {
                        trial.run.values = (v.into_iter())
                            .map(|(path, before, after)| Value {
                                path,
                                before,
                                after,
                            })
                            .collect();
                    }
                    Ok(_) => {}
                    Err(ApplyError::Refused { path, answer }) => {
                        trial.run.step.class = Class::NotApplicable {
                            answer: format!("{path}: {answer}"),
                        };
                        return Ok(false);
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            let result = self.block(ctx, on, &trial.timing);
            if on {
                applied.revert_to(mark);
            }
            let (b, outcome, attrs) = result?;
            trial.traced[on as usize].extend(attrs);
            let cpus = ctx.cpus.measured.len().max(1) as u64;
            progress.measured += Duration::from_nanos(b.runtime_ns / cpus);
            progress.last = Some(outcome);
            let v = trial.run.metric.unwrap_or(self.metric).of(&b);
            if on {
                values.1 = v;
            } else {
                values.0 = v;
            }
            trial.run.blocks.push(b);
            // The CPU rests: the kernel's own work catches up, whatever was turned off.
            std::thread::sleep(self.rest);
        }
        trial.pairs.push(values);
        Ok(true)
    }
}

/// A noise block's figures: its CPUs' gaps, the worst CPU's percentiles.
fn noise_block(entries: &[NoiseEntry]) -> Block {
    let mut b = Block::default();
    let mut lost = 0u64;
    for e in entries {
        b.runtime_ns += e.runtime_ns;
        lost += e.interrupted_ns;
        b.interruptions += e.interruptions;
        worst(&mut b, &e.summary);
    }
    b.lost_ns_per_s = per_second(lost, b.runtime_ns);
    b
}

/// A timer block's figures: the wake-ups' lateness, the worst CPU's percentiles; the
/// time lost is the lateness summed.
fn timer_block(entries: &[TimerEntry]) -> Block {
    let mut b = Block::default();
    let mut late = 0u64;
    for e in entries {
        b.runtime_ns += e.runtime_ns;
        late += e.summary.sum_ns;
        b.interruptions += e.overruns;
        b.wakeups += e.wakeups;
        worst(&mut b, &e.summary);
    }
    b.lost_ns_per_s = per_second(late, b.runtime_ns);
    b
}

fn worst(b: &mut Block, s: &crate::stats::Summary) {
    b.p50_ns = b.p50_ns.max(s.p50_ns.unwrap_or(0));
    b.p99_ns = b.p99_ns.max(s.p99_ns.unwrap_or(0));
    b.p999_ns = b.p999_ns.max(s.p999_ns.unwrap_or(0));
    b.max_ns = b.max_ns.max(s.max_ns.unwrap_or(0));
}

fn per_second(ns: u64, runtime_ns: u64) -> u64 {
    (ns as f64 * 1e9 / runtime_ns.max(1) as f64).round() as u64
}

impl Measure for TuneCommand {
    fn settings(&self) -> &RunSettings {
        &self.settings
    }

    fn measure(&mut self, ctx: &mut Ctx<'_>) -> anyhow::Result<Measured> {
        let mut applied = Applied::new(&self.root)?;
        let mut runs: Vec<StepRun> = Vec::new();
        let mut stairs: Vec<Stair> = Vec::new();
        let stopped = |ctx: &Ctx<'_>| ctx.stop.load(Ordering::Relaxed);
        if self.trace {
            self.order_by_cause(ctx)?;
        }
        let steps = self.steps.clone();
        let mut progress = Progress {
            last: None,
            measured: Duration::ZERO,
        };
        for step in steps {
            if step.class != Class::Applies || stopped(ctx) {
                runs.push(StepRun::unmeasured(step));
                continue;
            }
            let timing = step_timing(
                &step,
                &self.root,
                ctx.cpus,
                self.block,
                self.probe.warmup(),
                self.cap,
            );
            let mut trial = Trial {
                run: StepRun {
                    timing: Some(timing.clone()),
                    metric: Some(step_metric(self.chosen, &step)),
                    ..StepRun::unmeasured(step.clone())
                },
                timing,
                order: Order::from_clock(),
                pairs: Vec::new(),
                traced: [Vec::new(), Vec::new()],
            };
            let judged = self.judge_step(ctx, &mut applied, &mut trial, &mut progress)?;
            let mut run = trial.run;
            let [before, after] =
                (trial.traced).map(|a| share_of(&step.id, &a.iter().collect::<Vec<_>>()));
            (run.share_before_pct, run.share_after_pct) = (before, after);
            if let Some(j) = judged {
                if stairs.is_empty() {
                    let bs: Vec<&Block> = run.blocks.iter().filter(|b| !b.applied).collect();
                    stairs.push(stair("baseline", &bs));
                }
                if j.decision == Decision::Kept {
                    // Later steps build on it.
                    if let Err(e) = applied.apply(&step) {
                        ctx.note(format!(
                            "{}: kept, but could not be applied again: {e}",
                            step.id
                        ));
                    } else {
                        let bs: Vec<&Block> = run.blocks.iter().filter(|b| b.applied).collect();
                        stairs.push(stair(&step.id, &bs));
                    }
                }
                run.judgement = Some(j);
                eprintln!("{}", step_line(&run, run.metric.unwrap_or(self.metric)));
            }
            runs.push(run);
        }
        let (last, measured) = (progress.last, progress.measured);
        let interrupted = stopped(ctx);
        let kept_applied = self.keep && !interrupted;
        let readbacks = if kept_applied {
            let rb = applied.readbacks.clone();
            self.undo = applied.keep()?;
            rb
        } else {
            applied.restore_all()?;
            applied.readbacks.clone()
        };
        if let Some(bad) = readbacks.iter().find(|r| !r.ok) {
            ctx.note(format!(
                "{} reads {} after its revert, not {}: `jitterscope tune --restore` retries",
                bad.path, bad.now, bad.expected
            ));
        }
        self.entry = Some(TuneEntry {
            probe: self.probe.name().into(),
            metric: self.metric,
            block_ns: self.block.as_nanos() as u64,
            pairs: self.pairs,
            max_pairs: self.design.max_pairs() as u32,
            rest_ns: self.rest.as_nanos() as u64,
            alpha: ALPHA,
            steps: runs,
            staircase: stairs,
            restored: readbacks,
            kept_applied,
        });
        // A stop before the first block ends is an interrupted run of nothing (exit 130,
        // its restorations saved), not an error.
        let mut outcome = match (last, interrupted) {
            (Some(o), _) => o,
            (None, true) => RunOutcome {
                workers: Vec::new(),
                window: None,
                interrupted: true,
                elapsed: Duration::ZERO,
                mlock_error: None,
            },
            (None, false) => bail!("no block was measured"),
        };
        outcome.interrupted = interrupted;
        outcome.elapsed = measured;
        Ok(Measured {
            entries: Vec::<ProbeEntry>::new(),
            outcome,
            requested: self.block * 2 * self.pairs,
            mlock: self.settings.mlock,
            actual: Some(measured),
            limit_exceeded: false,
        })
    }

    fn finish(&mut self, result: &mut ResultFile) {
        // Kept here too: `--export` writes from it after the run.
        result.tune = self.entry.clone();
    }

    fn text(&self, r: &ResultFile) -> String {
        let Some(t) = &r.tune else {
            return String::new();
        };
        let mut out = crate::report::views::tune::tune_text(t);
        if t.kept_applied {
            out.push_str("kept steps left applied (--keep); to undo them:\n");
            for command in &self.undo {
                out.push_str(&format!("  {command}\n"));
            }
        }
        out
    }
}

/// The line printed as each step is decided.
fn step_line(run: &StepRun, metric: Metric) -> String {
    let Some(j) = &run.judgement else {
        return String::new();
    };
    let v = |x: f64| crate::report::views::tune::value(x, metric);
    let share = match (run.share_before_pct, run.share_after_pct) {
        (Some(b), Some(a)) => format!("; its causes {b:.1}% → {a:.1}% of lost time"),
        _ => String::new(),
    };
    format!(
        "{:<30} {:<12} {} {} → {}, shift {} [{}, {}], {} of {} pairs better, p {:.4} \
         (level {:.4}, look {}){share}",
        fit(&run.step.id, 30),
        j.decision.as_str(),
        metric.name(),
        v(j.baseline_median),
        v(j.step_median),
        v(j.shift),
        v(j.ci_low),
        v(j.ci_high),
        j.better,
        j.pairs,
        j.p,
        j.alpha,
        j.look,
    )
}
