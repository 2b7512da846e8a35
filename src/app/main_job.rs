//! `jitterscope run`, and a bare `jitterscope`: the audit, then `noise`, `timer` and a
//! short `pingpong` (futex and spin), one merged result, a verdict in plain words, and the
//! result file and HTML page saved as `jitterscope-HOST-TIME.json` and `.html`.
//!
//! Each step is the real command, built here with the same checked constructors the
//! command line uses and run through the same pipeline, so the main job measures exactly
//! what the commands do. A step that cannot run
//! (pingpong's spinners refused at a real-time priority, say) is noted and skipped; a
//! stop (Ctrl-C) ends the current step, skips the rest, and still saves and judges what
//! was measured.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;

use crate::cli::MainArgs;
use crate::engine::cpu::CpuUniverse;
use crate::engine::sched::{self, Policy, SchedRequest};
use crate::probes::noise::{NoiseConfig, NoiseEntry};
use crate::probes::pingpong::{self, Mechanism};
use crate::probes::timer::{TimerConfig, TimerEntry};
use crate::report::{ResultFile, terminal::verdict};

use super::Ending;
use super::noise::NoiseCommand;
use super::output::{Warnings, warn, write_page};
use super::pingpong::PingpongCommand;
use super::pipeline::{Measure, RunSettings, execute, gate, plan_cpus, sched_request};
use super::timer::{DmaLatency, TimerCommand};

/// Interruptions kept with their start times per CPU when the noise step is not traced,
/// for the verdict's split into causes inferred from their timing: at this VM's usual
/// 1 000 to 3 000 a second, several seconds of them. A traced step measures the causes
/// of every gap as it goes and keeps none.
const EVENT_LOG: usize = 10_000;

/// The timer step's priority when `-p` is not given (cyclictest's usual `-p 90`).
const TIMER_PRIORITY: u8 = 90;

/// The steps and how long each measures.
#[derive(Debug, Clone, Copy)]
enum Step {
    Noise(Duration),
    Timer(Duration),
    Pingpong(Duration),
}

impl Step {
    fn plan(args: &MainArgs) -> [Step; 3] {
        let s = Duration::from_secs;
        match (args.step_time, args.quick) {
            (Some(d), _) => [Step::Noise(d), Step::Timer(d), Step::Pingpong(d / 2)],
            (None, false) => [Step::Noise(s(12)), Step::Timer(s(10)), Step::Pingpong(s(3))],
            (None, true) => [Step::Noise(s(4)), Step::Timer(s(3)), Step::Pingpong(s(1))],
        }
    }

    fn name(self) -> &'static str {
        match self {
            Step::Noise(_) => "noise",
            Step::Timer(_) => "timer",
            Step::Pingpong(_) => "pingpong futex,spin",
        }
    }

    /// Wall time, pingpong measuring two mechanisms.
    fn length(self) -> Duration {
        match self {
            Step::Noise(d) | Step::Timer(d) => d,
            Step::Pingpong(d) => 2 * d,
        }
    }

    /// The settings this step runs with: SCHED_OTHER, or FIFO at `-p`; the CPUs of `-a`
    /// (pingpong: its first two); nothing printed or saved by the step itself.
    fn settings(self, args: &MainArgs) -> anyhow::Result<RunSettings> {
        let cpus = match self {
            Step::Pingpong(_) => match &args.cpus {
                // Rather than measure a pair outside the CPUs the user named.
                Some(list) => Some(
                    first_two(list)
                        .with_context(|| format!("pingpong needs two CPUs in -a {list}"))?,
                ),
                None => None,
            },
            _ => args.cpus.clone(),
        };
        Ok(RunSettings {
            cpus,
            housekeeping: args.housekeeping,
            sched: self.sched(args)?,
            duration: Some(self.measuring_time()),
            force: args.force,
            // The verdict and the merged file read each step's result whole.
            whole_result: true,
            ..RunSettings::quiet()
        })
    }

    /// SCHED_FIFO at `-p` for every step; otherwise SCHED_OTHER, except the timer, which
    /// runs at SCHED_FIFO 90 wherever that is allowed, as cyclictest is always run: it
    /// sleeps between wake-ups, so it cannot starve its CPU, and at SCHED_OTHER its
    /// figures would mostly measure the scheduler's fairness rather than the host.
    fn sched(self, args: &MainArgs) -> anyhow::Result<SchedRequest> {
        let asked = sched_request(None, args.priority)?;
        let timer = SchedRequest {
            policy: Policy::Fifo,
            priority: TIMER_PRIORITY,
        };
        Ok(match self {
            Step::Timer(_) if args.priority.is_none() && sched::preflight(timer).is_ok() => timer,
            _ => asked,
        })
    }

    /// What each step measures for (pingpong: per mechanism).
    fn measuring_time(self) -> Duration {
        match self {
            Step::Noise(d) | Step::Timer(d) | Step::Pingpong(d) => d,
        }
    }

    /// The step's command, built and checked as the command line would be.
    fn command(self, args: &MainArgs) -> anyhow::Result<Box<dyn Measure>> {
        let settings = self.settings(args)?;
        Ok(match self {
            Step::Noise(_) => {
                // As root, the causes are measured from kernel trace events; without
                // root (or a trace) they are inferred from an event log, and the verdict
                // says so.
                let root = rustix::process::geteuid().is_root();
                Box::new(match root && !args.no_trace {
                    true => NoiseCommand::new(settings, NoiseConfig::default())?
                        .traced_else_logged(EVENT_LOG),
                    false => NoiseCommand::new(
                        settings,
                        NoiseConfig {
                            event_log: EVENT_LOG,
                            ..NoiseConfig::default()
                        },
                    )?,
                })
            }
            Step::Timer(_) => Box::new(TimerCommand::new(
                settings,
                TimerConfig::default(),
                false,
                DmaLatency::Hold(0),
            )?),
            Step::Pingpong(_) => Box::new(PingpongCommand::new(
                settings,
                vec![Mechanism::Futex, Mechanism::Spin],
                pingpong::DEFAULT_PAUSE_NS,
                pingpong::DEFAULT_WARMUP,
                None,
            )?),
        })
    }

    fn measure(
        self,
        args: &MainArgs,
        argv: &[String],
        stop: &AtomicBool,
    ) -> anyhow::Result<ResultFile> {
        let mut cmd = self.command(args)?;
        Ok(execute(cmd.as_mut(), argv, stop, &Warnings::held())?.0)
    }
}

/// "1-3" → "1,2": pingpong's pair from the measured CPUs, when there are two.
fn first_two(list: &str) -> Option<String> {
    let cpus = crate::engine::cpu::CpuList::parse_strict(list).ok()?;
    match cpus.cpus() {
        [a, b, ..] => Some(format!("{a},{b}")),
        _ => None,
    }
}

/// `jitterscope run`.
pub fn run(args: &MainArgs, argv: &[String], stop: &AtomicBool) -> anyhow::Result<Ending> {
    if let Some(t) = args.step_time.filter(|t| *t < MIN_STEP) {
        anyhow::bail!(
            "--step-time {}: each step needs at least {} ms",
            humantime::format_duration(t),
            MIN_STEP.as_millis()
        );
    }
    let steps = Step::plan(args);
    let housekeeping = housekeeping_cpu(args)?;
    // Only once the input is known good: bad input leaves no new directory behind.
    let out_dir = args.out_dir.clone().unwrap_or_else(|| PathBuf::from("."));
    make_out_dir(&out_dir)?;
    check_writable(&out_dir)?;
    for named in Destinations::named(args) {
        let dir = named.parent().filter(|d| !d.as_os_str().is_empty());
        check_writable(dir.unwrap_or(Path::new(".")))?;
    }
    let progress = Progress::new(&steps, housekeeping.is_none());
    let (results, skipped) = std::thread::scope(|s| {
        // However the steps end, even by a panic, the display thread must stop, or the
        // scope would wait for it forever.
        let _done = Done(&progress.done);
        let _display = s.spawn(|| progress.display(housekeeping, stop));
        run_steps(&steps, args, argv, stop, &progress)
    });
    let Some(mut merged) = merge(results?, argv, skipped) else {
        anyhow::bail!("nothing was measured");
    };
    // A stop between steps ends no step early, but the job was still cut short.
    merged.run.interrupted |= stop.load(Ordering::Relaxed);
    for d in &merged.run.degraded {
        warn(&degraded_line(d));
    }
    for w in &merged.run.warnings {
        warn(w);
    }
    let v = verdict::verdict(&merged);
    // Stored, so that `report` shows the verdict this run printed.
    merged.verdict = Some(v.clone());
    let to = Destinations::of(args, &merged, &out_dir);
    let page = save(&merged, &to)?;
    let saved = match page {
        Ok(()) => format!("Saved {} and {}", to.json.display(), to.page.display()),
        Err(e) => {
            warn(&format!("the HTML page was not written: {e:#}"));
            format!("Saved {}", to.json.display())
        }
    };
    if args.save.json_on_stdout() {
        super::report::write_stdout(&format!("{}\n", merged.to_json()))?;
    } else if !args.save.quiet {
        let layout = crate::report::terminal::table::Layout::terminal(args.save.wide)
            .per_cpu(args.save.per_cpu);
        let (tables, v) =
            layout.scoped(|| (super::report::probe_tables(&merged), verdict::text(&v)));
        super::report::write_stdout(&format!("{tables}\n{v}\n{saved}\n"))?;
    }
    Ok(
        match (merged.run.interrupted, gate(&merged, &args.fail_above)) {
            (true, _) => Ending::Interrupted,
            (false, end) => end,
        },
    )
}

/// The shortest step: below it pingpong's half would not warm up and measure.
const MIN_STEP: Duration = Duration::from_millis(200);

/// Creates `--out-dir` and its parents when missing, as most tools do with an output
/// directory; one clear error when it cannot be.
fn make_out_dir(dir: &Path) -> anyhow::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    if dir.exists() {
        anyhow::bail!("--out-dir {}: not a directory", dir.display());
    }
    std::fs::create_dir_all(dir)
        .with_context(|| format!("--out-dir {}: cannot create it", dir.display()))
}

/// Fails before 30 s of measuring, not after, when the files cannot be saved.
fn check_writable(dir: &Path) -> anyhow::Result<()> {
    if !dir.is_dir() {
        anyhow::bail!("--out-dir {}: no such directory", dir.display());
    }
    let probe = dir.join(format!(".jitterscope-write-test-{}", std::process::id()));
    std::fs::write(&probe, b"")
        .with_context(|| format!("--out-dir {}: cannot write there", dir.display()))?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// Sets the flag when dropped.
struct Done<'a>(&'a AtomicBool);

impl Drop for Done<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// The audit line, then each step; a failed first step fails the job (nothing to judge),
/// a later one is noted and skipped.
fn run_steps(
    steps: &[Step],
    args: &MainArgs,
    argv: &[String],
    stop: &AtomicBool,
    progress: &Progress,
) -> (anyhow::Result<Vec<StepResult>>, Vec<String>) {
    let mut results = Vec::new();
    let mut skipped = Vec::new();
    for (i, &step) in steps.iter().enumerate() {
        if stop.load(Ordering::Relaxed) {
            skipped.push(format!("{} was not run: the job was stopped", step.name()));
            continue;
        }
        progress.begin(i);
        match step.measure(args, argv, stop) {
            Ok(r) => {
                progress.offer(&r);
                results.push((step.name(), r));
            }
            Err(e) if i == 0 => return (Err(e), skipped),
            Err(e) => skipped.push(format!("{} was skipped: {e:#}", step.name())),
        }
    }
    (Ok(results), skipped)
}

/// The CPU the progress display runs on: the lowest usable CPU that is not measured.
/// Checking `-a` here also refuses a bad list before anything is shown.
fn housekeeping_cpu(args: &MainArgs) -> anyhow::Result<Option<usize>> {
    let universe = CpuUniverse::detect().context("cannot read the system's CPUs")?;
    let cpuset = super::cpuset::Cpuset::read();
    let plan = plan_cpus(args.cpus.as_deref(), args.housekeeping, &universe, &cpuset)?;
    Ok(plan.housekeeping.first())
}

// ---------------------------------------------------------------------------------------
// Progress

/// What the display shows: the step, the time left, the worst figure so far. Written by
/// the coordinator between steps, read by the display thread; neither is a measuring
/// thread, so the lock costs the measurement nothing.
struct Progress {
    lengths: Vec<(String, Duration)>,
    state: Mutex<ProgressState>,
    done: AtomicBool,
    /// No housekeeping CPU to draw from: the coordinator prints one line per step, and
    /// no display thread wakes up on a measured CPU.
    inline: AtomicBool,
}

#[derive(Default)]
struct ProgressState {
    step: Option<(usize, Instant)>,
    worst: Option<(u64, String)>,
}

impl Progress {
    fn new(steps: &[Step], inline: bool) -> Progress {
        Progress {
            inline: AtomicBool::new(inline),
            lengths: steps
                .iter()
                .map(|s| (s.name().to_string(), s.length()))
                .collect(),
            state: Mutex::new(ProgressState::default()),
            done: AtomicBool::new(false),
        }
    }

    fn begin(&self, i: usize) {
        if let Ok(mut s) = self.state.lock() {
            s.step = Some((i, Instant::now()));
        }
        if self.inline.load(Ordering::Relaxed)
            && let Some(l) = self.line()
        {
            let _ = writeln!(std::io::stderr(), "{l}");
        }
    }

    /// Takes the worst interruption or latency a finished step saw.
    fn offer(&self, r: &ResultFile) {
        let noise = (r.entries::<NoiseEntry>())
            .filter_map(|n| Some((n.summary.max_ns?, format!("noise, CPU {}", n.cpu))));
        let timer = (r.entries::<TimerEntry>())
            .filter_map(|t| Some((t.summary.max_ns?, format!("timer, CPU {}", t.cpu))));
        let worst = noise.chain(timer).max_by_key(|w| w.0);
        if let (Ok(mut s), Some(w)) = (self.state.lock(), worst)
            && s.worst.as_ref().is_none_or(|o| w.0 > o.0)
        {
            s.worst = Some(w);
        }
    }

    /// One line: `[2/4] timer · 14 s left · worst so far 1.20 ms (noise, CPU 1)`.
    fn line(&self) -> Option<String> {
        let s = self.state.lock().ok()?;
        let (i, started) = s.step?;
        let total = self.lengths.len() + 1;
        let this_left = self.lengths[i].1.saturating_sub(started.elapsed());
        let later: Duration = self.lengths[i + 1..].iter().map(|l| l.1).sum();
        let worst = match &s.worst {
            Some((ns, what)) => format!("worst so far {} ({what})", verdict::duration_words(*ns)),
            None => "worst so far: not yet known".into(),
        };
        Some(format!(
            "[{}/{total}] {} · {} s left · {worst}",
            i + 2,
            self.lengths[i].0,
            (this_left + later).as_secs()
        ))
    }

    /// Runs on the housekeeping CPU until the steps are done: redraws a terminal line
    /// every quarter second, or prints a line per step when stderr is not a terminal.
    fn display(&self, cpu: Option<usize>, stop: &AtomicBool) {
        // Off the housekeeping CPU, redrawing would wake up on a measured CPU and show
        // up as noise there: then one line per step only.
        let mut err = std::io::stderr();
        let _ = writeln!(
            err,
            "[1/{}] audit · read with the first step, stored in the result",
            self.lengths.len() + 1
        );
        if self.inline.load(Ordering::Relaxed) {
            return;
        }
        if cpu.is_none_or(|c| sched::pin_to(c).is_err()) {
            // Unpinned, it could wake up on a measured CPU: the steps print their lines.
            self.inline.store(true, Ordering::Relaxed);
            return;
        }
        let tty = std::io::stderr().is_terminal();
        let mut last_step = None;
        while !self.done.load(Ordering::Relaxed) {
            let step = self.state.lock().ok().and_then(|s| s.step.map(|x| x.0));
            match (tty, self.line()) {
                (true, Some(l)) => {
                    let _ = write!(err, "\r\x1b[K{l}");
                }
                (false, Some(l)) if step != last_step => {
                    let _ = writeln!(err, "{l}");
                }
                _ => {}
            }
            last_step = step;
            if stop.load(Ordering::Relaxed) && tty {
                let _ = write!(err, "\r\x1b[Kstopping: saving what was measured");
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        if tty {
            let _ = writeln!(err, "\r\x1b[K");
        }
    }
}

// ---------------------------------------------------------------------------------------
// The merged result, its tables and the saved files

/// A step's name and its result.
type StepResult = (&'static str, ResultFile);

/// One result from the steps': the first step's host (with its audit), every probe
/// entry, the durations summed, the warnings without repeats, and each degradation once,
/// naming the steps it applies to (all of them: none named).
fn merge(results: Vec<StepResult>, argv: &[String], skipped: Vec<String>) -> Option<ResultFile> {
    let steps = results.len();
    let mut it = results.into_iter();
    let (first_step, mut merged) = it.next()?;
    merged.run.command_line = argv.to_vec();
    for d in &mut merged.run.degraded {
        d.steps = vec![first_step.to_string()];
    }
    for (step, r) in it {
        let (m, run) = (&mut merged.run, r.run);
        m.requested_duration_ns += run.requested_duration_ns;
        m.actual_duration_ns += run.actual_duration_ns;
        m.interrupted |= run.interrupted;
        m.privileges.memory_locked &= run.privileges.memory_locked;
        m.peak_rss_kib = m.peak_rss_kib.max(run.peak_rss_kib);
        for mut d in run.degraded {
            match m.degraded.iter_mut().find(|e| e.message == d.message) {
                Some(e) => e.steps.push(step.to_string()),
                None => {
                    d.steps = vec![step.to_string()];
                    m.degraded.push(d);
                }
            }
        }
        for w in run.warnings {
            if !m.warnings.contains(&w) {
                m.warnings.push(w);
            }
        }
        merged.probes.extend(r.probes);
    }
    for d in &mut merged.run.degraded {
        if d.steps.len() == steps {
            d.steps.clear();
        }
    }
    merged.run.warnings.extend(skipped);
    Some(merged)
}

/// A degradation's warning line, naming the steps it applies to when not all.
fn degraded_line(d: &crate::degraded::DegradedRecord) -> String {
    match d.steps.as_slice() {
        [] => d.message.clone(),
        steps => format!("{} (applies to: {})", d.message, steps.join(", ")),
    }
}

/// Where the main job saves its result and page: `-o FILE` (or `--json=FILE`) and
/// `--html PATH` where given, else `jitterscope-HOST-TIME.json` and `.html` in `--out-dir`;
/// the page goes beside a named result, with `.html` for its extension.
struct Destinations {
    json: PathBuf,
    page: PathBuf,
}

impl Destinations {
    /// The paths the flags name, checked before measuring.
    fn named(args: &MainArgs) -> Vec<PathBuf> {
        let json_file = args.save.json.as_ref().and_then(Option::as_ref);
        (args.save.output.iter().chain(json_file))
            .chain(&args.save.html)
            .cloned()
            .collect()
    }

    fn of(args: &MainArgs, r: &ResultFile, dir: &Path) -> Destinations {
        let stem = format!(
            "jitterscope-{}-{}",
            match r.host.hostname.as_str() {
                "" => "host".into(),
                h => crate::report::result::figure::file_safe(h),
            },
            compact_time(&r.run.start_time)
        );
        let json_file = args.save.json.as_ref().and_then(Option::as_ref);
        let json = (args.save.output.as_ref().or(json_file)).cloned();
        let page = match (&args.save.html, &json) {
            (Some(p), _) => p.clone(),
            (None, Some(j)) => j.with_extension("html"),
            (None, None) => dir.join(format!("{stem}.html")),
        };
        Destinations {
            json: json.unwrap_or_else(|| dir.join(format!("{stem}.json"))),
            page,
        }
    }
}

/// Saves the result, then the page. A page that cannot be made is the page's failure
/// only: the result is saved first.
fn save(r: &ResultFile, to: &Destinations) -> anyhow::Result<anyhow::Result<()>> {
    r.write_atomic(&to.json)?;
    // The page leads with the stored verdict (`result_page::result_page`).
    Ok(write_page(r, Some(&to.json), &to.page, |p| {
        p.title = format!("jitterscope: {}", r.host.hostname);
    }))
}

/// `2026-11-22T23:50:12Z` → `20261122T235012Z`.
fn compact_time(rfc3339: &str) -> String {
    rfc3339
        .chars()
        .filter(|c| !matches!(c, '-' | ':'))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Review 2 of issue 29: `run --out-dir NEW` with bad input (a step too short, CPUs
    /// the host lacks) fails before it makes the directory, leaving nothing behind.
    #[test]
    fn bad_input_leaves_no_out_dir_behind() {
        let base = std::env::temp_dir().join(format!("js-outdir-{}", std::process::id()));
        let dir = base.join("new");
        let stop = AtomicBool::new(false);
        let bad = [
            MainArgs {
                step_time: Some(Duration::from_millis(10)),
                ..MainArgs::default()
            },
            MainArgs {
                cpus: Some("100000".into()),
                ..MainArgs::default()
            },
        ];
        for args in bad {
            let args = MainArgs {
                out_dir: Some(dir.clone()),
                ..args
            };
            let e = run(&args, &[], &stop).expect_err("refused");
            let made = base.exists();
            let _ = std::fs::remove_dir_all(&base);
            assert!(!made, "{e:#}: {} was made", base.display());
        }
    }

    #[test]
    fn steps_build_the_commands_they_name() {
        let args = MainArgs {
            cpus: Some("1-3".into()),
            priority: Some(5),
            quick: true,
            ..MainArgs::default()
        };
        let [noise, timer, pp] = Step::plan(&args);
        let fifo5 = SchedRequest {
            policy: Policy::Fifo,
            priority: 5,
        };
        for (step, cpus, secs) in [(noise, "1-3", 4), (timer, "1-3", 3), (pp, "1,2", 1)] {
            let s = step.settings(&args).unwrap();
            assert_eq!(s.cpus.as_deref(), Some(cpus), "{step:?}");
            assert_eq!(s.sched, fifo5);
            assert_eq!(s.duration, Some(Duration::from_secs(secs)));
            assert!(s.save.quiet && s.mlock && !s.force);
            // The verdict reads each step's result whole, though it saves nothing.
            assert!(s.keeps_result(), "{step:?}");
            assert!(step.command(&args).is_ok(), "{step:?}");
        }
        let one_cpu = MainArgs {
            cpus: Some("1".into()),
            ..args.clone()
        };
        let err = pp.command(&one_cpu).err().unwrap().to_string();
        assert!(err.contains("pingpong needs two CPUs"), "{err}");
        // Without -p only the timer goes real-time, and only where that is allowed.
        let plain = MainArgs::default();
        assert_eq!(noise.settings(&plain).unwrap().sched, SchedRequest::OTHER);
        let fifo90 = SchedRequest {
            policy: Policy::Fifo,
            priority: TIMER_PRIORITY,
        };
        let want = match sched::preflight(fifo90) {
            Ok(()) => fifo90,
            Err(_) => SchedRequest::OTHER,
        };
        assert_eq!(timer.settings(&plain).unwrap().sched, want);
    }

    /// Issue 15: a degradation names the steps it applies to, unless it applies to all.
    #[test]
    fn merged_degradations_name_their_steps() {
        let base = ResultFile::parse(include_str!("../../tests/fixtures/all-probes.json")).unwrap();
        let record = |kind: &str| crate::degraded::DegradedRecord {
            kind: kind.into(),
            message: format!("{kind} happened"),
            steps: Vec::new(),
        };
        let with = |kinds: &[&str]| {
            let mut r = base.clone();
            r.run.degraded = kinds.iter().map(|k| record(k)).collect();
            r
        };
        let merged = merge(
            vec![
                ("noise", with(&["virtual-machine"])),
                ("timer", with(&["virtual-machine"])),
                (
                    "pingpong",
                    with(&["virtual-machine", "coordinator-shares-cpu"]),
                ),
            ],
            &[],
            Vec::new(),
        )
        .unwrap();
        let d = &merged.run.degraded;
        assert_eq!(d.len(), 2);
        assert!(d[0].steps.is_empty(), "the VM applies to every step");
        assert_eq!(d[1].steps, vec!["pingpong".to_string()]);
        assert_eq!(
            degraded_line(&d[1]),
            "coordinator-shares-cpu happened (applies to: pingpong)"
        );
    }

    #[test]
    fn names_are_file_safe() {
        assert_eq!(
            crate::report::result::figure::file_safe("web 01/a"),
            "web_01_a"
        );
        assert_eq!(compact_time("2026-11-22T23:50:12Z"), "20261122T235012Z");
    }
}
