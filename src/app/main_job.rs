//! `jitterscope run`, and a bare `jitterscope`: the audit, then `noise`, `timer` and a
//! short `pingpong` (futex and spin), one merged result, a verdict in plain words, and the
//! result file and HTML page saved as `jitterscope-HOST-TIME.json` and `.html`.
//!
//! Each step is the real command, run with its flags built here and parsed by the same
//! parser, so the main job measures exactly what the commands do. A step that cannot run
//! (pingpong's spinners refused at a real-time priority, say) is noted and skipped; a
//! stop (Ctrl-C) ends the current step, skips the rest, and still saves and judges what
//! was measured.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Parser;

use crate::cli::{Cli, Command, MainArgs};
use crate::engine::cpu::CpuUniverse;
use crate::engine::sched;
use crate::probes::noise::NoiseEntry;
use crate::probes::timer::TimerEntry;
use crate::report::{ResultFile, html, verdict};

use super::{Ending, WARNINGS_HELD};

/// Interruptions kept with their start times per CPU, for the verdict's split into
/// causes: at this VM's usual 1 000 to 3 000 a second, several seconds of them.
const EVENT_LOG: &str = "10000";

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

    /// The command line this step runs.
    fn argv(self, args: &MainArgs) -> Vec<String> {
        let secs = |d: Duration| format!("{}ms", d.as_millis());
        let mut v: Vec<String> = match self {
            Step::Noise(d) => vec![
                "noise".into(),
                "-D".into(),
                secs(d),
                "--event-log".into(),
                EVENT_LOG.into(),
            ],
            Step::Timer(d) => vec!["timer".into(), "-D".into(), secs(d)],
            Step::Pingpong(d) => vec![
                "pingpong".into(),
                "--mech".into(),
                "futex,spin".into(),
                "-D".into(),
                secs(d),
            ],
        };
        v.insert(0, "jitterscope".into());
        v.push("-q".into());
        let cpus = match self {
            Step::Pingpong(_) => args.cpus.as_deref().and_then(first_two),
            _ => args.cpus.clone(),
        };
        if let Some(c) = cpus {
            v.extend(["-a".into(), c]);
        }
        if let Some(p) = args.priority {
            v.extend(["-p".into(), p.to_string()]);
        }
        if args.force {
            v.push("--force".into());
        }
        v
    }

    fn measure(self, args: &MainArgs, stop: &AtomicBool) -> anyhow::Result<ResultFile> {
        // Rather than measure a pair outside the CPUs the user named.
        if let (Step::Pingpong(_), Some(list)) = (self, &args.cpus)
            && first_two(list).is_none()
        {
            anyhow::bail!("pingpong needs two CPUs in -a {list}");
        }
        let argv = self.argv(args);
        let cli = Cli::try_parse_from(&argv).map_err(|e| {
            anyhow::anyhow!(
                "{}",
                e.to_string()
                    .lines()
                    .next()
                    .unwrap_or("bad option")
                    .trim_start_matches("error: ")
            )
        })?;
        let (result, _) = match cli.command {
            Some(Command::Noise(a)) => super::noise_result(&a, &argv, stop)?,
            Some(Command::Timer(a)) => super::timer_result(&a, &argv, stop)?,
            Some(Command::Pingpong(a)) => super::pingpong::result(&a, &argv, stop)?,
            _ => unreachable!("the steps build only these commands"),
        };
        Ok(result)
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
    let out_dir = args.out_dir.clone().unwrap_or_else(|| PathBuf::from("."));
    check_writable(&out_dir)?;
    if let Some(t) = args.step_time.filter(|t| *t < MIN_STEP) {
        anyhow::bail!(
            "--step-time {}: each step needs at least {} ms",
            humantime::format_duration(t),
            MIN_STEP.as_millis()
        );
    }
    let steps = Step::plan(args);
    let housekeeping = housekeeping_cpu(args)?;
    let progress = Progress::new(&steps, housekeeping.is_none());
    let (results, skipped) = std::thread::scope(|s| {
        // However the steps end, even by a panic, the display thread must stop, or the
        // scope would wait for it forever.
        let _done = Done(&progress.done);
        let _display = s.spawn(|| progress.display(housekeeping, stop));
        let _held = HeldWarnings::hold();
        run_steps(&steps, args, stop, &progress)
    });
    let Some(mut merged) = merge(results?, argv, skipped) else {
        anyhow::bail!("nothing was measured");
    };
    // A stop between steps ends no step early, but the job was still cut short.
    merged.run.interrupted |= stop.load(Ordering::Relaxed);
    for d in &merged.run.degraded {
        super::warn(&d.message);
    }
    for w in &merged.run.warnings {
        super::warn(w);
    }
    let v = verdict::verdict(&merged);
    let tables = super::report::probe_tables(&merged);
    super::report::write_stdout(&format!("{tables}\n{}", verdict::text(&v)))?;
    let (json, page) = save(&merged, &v, &out_dir)?;
    let saved = match page {
        Ok(page) => format!("Saved {} and {}", json.display(), page.display()),
        Err(e) => {
            super::warn(&format!("the HTML page was not written: {e:#}"));
            format!("Saved {}", json.display())
        }
    };
    super::report::write_stdout(&format!("\n{saved}\n"))?;
    Ok(super::ending(merged.run.interrupted))
}

/// The shortest step: below it pingpong's half would not warm up and measure.
const MIN_STEP: Duration = Duration::from_millis(200);

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
    stop: &AtomicBool,
    progress: &Progress,
) -> (anyhow::Result<Vec<ResultFile>>, Vec<String>) {
    let mut results = Vec::new();
    let mut skipped = Vec::new();
    for (i, &step) in steps.iter().enumerate() {
        if stop.load(Ordering::Relaxed) {
            skipped.push(format!("{} was not run: the job was stopped", step.name()));
            continue;
        }
        progress.begin(i);
        match step.measure(args, stop) {
            Ok(r) => {
                progress.offer(&r);
                results.push(r);
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
    let plan = super::plan_cpus(args.cpus.as_deref(), None, &universe)?;
    Ok(plan.housekeeping.first())
}

/// Holds the steps' warnings for the merged list; released however the steps end.
struct HeldWarnings;

impl HeldWarnings {
    fn hold() -> HeldWarnings {
        WARNINGS_HELD.store(true, Ordering::Relaxed);
        HeldWarnings
    }
}

impl Drop for HeldWarnings {
    fn drop(&mut self) {
        WARNINGS_HELD.store(false, Ordering::Relaxed);
    }
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

/// One result from the steps': the first step's host (with its audit), every probe
/// entry, the durations summed, and the degradations and warnings without repeats.
fn merge(results: Vec<ResultFile>, argv: &[String], skipped: Vec<String>) -> Option<ResultFile> {
    let mut it = results.into_iter();
    let mut merged = it.next()?;
    merged.run.command_line = argv.to_vec();
    for r in it {
        let (m, run) = (&mut merged.run, r.run);
        m.requested_duration_ns += run.requested_duration_ns;
        m.actual_duration_ns += run.actual_duration_ns;
        m.interrupted |= run.interrupted;
        m.privileges.memory_locked &= run.privileges.memory_locked;
        m.peak_rss_kib = m.peak_rss_kib.max(run.peak_rss_kib);
        for d in run.degraded {
            if !m.degraded.iter().any(|e| e.message == d.message) {
                m.degraded.push(d);
            }
        }
        for w in run.warnings {
            if !m.warnings.contains(&w) {
                m.warnings.push(w);
            }
        }
        merged.probes.extend(r.probes);
    }
    merged.run.warnings.extend(skipped);
    Some(merged)
}

/// Saves `jitterscope-HOST-TIME.json` and `.html` in `dir`; returns their paths. A page
/// that cannot be made is the page's failure only: the result is saved first.
fn save(
    r: &ResultFile,
    v: &verdict::Verdict,
    dir: &Path,
) -> anyhow::Result<(PathBuf, anyhow::Result<PathBuf>)> {
    let stem = format!(
        "jitterscope-{}-{}",
        match r.host.hostname.as_str() {
            "" => "host".into(),
            h => crate::report::figure::file_safe(h),
        },
        compact_time(&r.run.start_time)
    );
    let json = dir.join(format!("{stem}.json"));
    let page = dir.join(format!("{stem}.html"));
    r.write_atomic(&json)?;
    let written = super::write_page(r, Some(&json), &page, |p| {
        p.title = format!("jitterscope: {}", r.host.hostname);
        p.sections.insert(0, verdict_section(v));
    });
    Ok((json, written.map(|()| page)))
}

fn verdict_section(v: &verdict::Verdict) -> html::Section {
    let rows = v
        .fixes
        .iter()
        .enumerate()
        .map(|(i, f)| {
            vec![
                (i + 1).to_string(),
                f.fix.clone(),
                f.finding.clone(),
                verdict::share_words(f.share),
            ]
        })
        .collect();
    html::Section {
        heading: "Verdict".into(),
        text: v.lines.clone(),
        tables: vec![html::Table {
            caption: "Top fixes, ranked by the share of measured noise they would remove".into(),
            headers: ["#", "fix", "audit finding", "share"]
                .map(String::from)
                .to_vec(),
            rows,
            note: None,
        }],
        ..Default::default()
    }
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

    #[test]
    fn steps_build_the_commands_they_name() {
        let args = MainArgs {
            cpus: Some("1-3".into()),
            priority: Some(5),
            ..MainArgs::default()
        };
        let quick = MainArgs {
            quick: true,
            ..args.clone()
        };
        let [noise, timer, pp] = Step::plan(&quick);
        assert_eq!(
            noise.argv(&args).join(" "),
            "jitterscope noise -D 4000ms --event-log 10000 -q -a 1-3 -p 5"
        );
        assert_eq!(
            timer.argv(&args).join(" "),
            "jitterscope timer -D 3000ms -q -a 1-3 -p 5"
        );
        assert_eq!(
            pp.argv(&args).join(" "),
            "jitterscope pingpong --mech futex,spin -D 1000ms -q -a 1,2 -p 5"
        );
        for s in [noise, timer, pp] {
            assert!(
                Cli::try_parse_from(s.argv(&args)).is_ok(),
                "{:?}",
                s.argv(&args)
            );
        }
    }

    #[test]
    fn names_are_file_safe() {
        assert_eq!(crate::report::figure::file_safe("web 01/a"), "web_01_a");
        assert_eq!(compact_time("2026-11-22T23:50:12Z"), "20261122T235012Z");
    }
}
