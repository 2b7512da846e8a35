//! Issue 6, item 3: `compare` marks a CPU with injected noise worse, does not call two
//! quiet runs different (or says how they spread), flags host differences, and refuses
//! bad input with one line.

use std::path::Path;

use std::sync::Barrier;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use jitterscope::engine::clock::ClockInfo;
use jitterscope::probes::noise::NoiseEntry;
use jitterscope::probes::timer::TimerEntry;

use crate::injector::{Schedule, inject};
use crate::util::{self, jitterscope, measuring, run_ok, skip};

/// Runs the binary, which must succeed; its stdout.
/// A 2 s noise run on `cpu`, saved to `path`.
fn noise_run(cpu: usize, path: &Path) {
    let cpu = cpu.to_string();
    run_ok(&[
        "noise",
        "-a",
        &cpu,
        "-D",
        "2s",
        "-q",
        "-o",
        path.to_str().unwrap(),
    ]);
}

/// The CSV rows of `compare A B`, as (probe, key, run, verdict, basis).
fn verdicts(a: &Path, b: &Path) -> Vec<(String, String, String, String, String)> {
    let text = run_ok(&[
        "compare",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--label",
        "A",
        "--label",
        "B",
        "--format",
        "csv",
    ]);
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let (probe, key, run, verdict) = (col("probe"), col("key"), col("run"), col("verdict"));
    lines
        .map(|l| {
            // The basis is the last field and may be quoted; the others never are.
            let f: Vec<&str> = l.splitn(header.len(), ',').collect();
            let basis = f[header.len() - 1].to_string();
            (
                f[probe].into(),
                f[key].into(),
                f[run].into(),
                f[verdict].into(),
                basis,
            )
        })
        .collect()
}

fn noise_verdict(
    rows: &[(String, String, String, String, String)],
    cpu: usize,
) -> (String, String) {
    let key = format!("cpu{cpu}");
    rows.iter()
        .find(|r| r.0 == "noise" && r.1 == key && r.2 == "B")
        .map(|r| (r.3.clone(), r.4.clone()))
        .expect("a judged noise row for the CPU")
}

#[test]
fn injected_noise_is_worse() {
    let test = "injected_noise_is_worse";
    if let Err(why) = util::fifo_available() {
        return skip(test, &format!("the injector needs SCHED_FIFO: {why}"));
    }
    let Some((cpu, _)) = util::two_cpus() else {
        return skip(test, "needs two CPUs, one of them left for housekeeping");
    };
    let _lock = measuring();
    // This host has phases of heavy noise, with multi-ms stalls in most intervals, that
    // can hide the injection's worst gap: three printed attempts.
    let mut seen = Vec::new();
    for attempt in 1..=3 {
        let (worse, better) = injected_attempt(cpu);
        eprintln!("attempt {attempt}: {}: {}", worse.0, worse.1);
        if worse.0 == "worse" && better.0 == "better" {
            return;
        }
        seen.push((worse, better));
    }
    panic!("the injected run was not judged worse (and the reverse better): {seen:#?}");
}

/// A quiet run and one with 150 µs of every ms taken by a SCHED_FIFO 2 thread, both at
/// SCHED_FIFO 1 so that ordinary tasks do not count; the verdict on each against the
/// other.
fn injected_attempt(cpu: usize) -> ((String, String), (String, String)) {
    let dir = tempfile::tempdir().unwrap();
    let (quiet, loud) = (dir.path().join("quiet.json"), dir.path().join("loud.json"));
    let fifo_run = |path: &Path| {
        let c = cpu.to_string();
        run_ok(&[
            "noise",
            "-a",
            &c,
            "-p",
            "1",
            "-D",
            "2s",
            "-q",
            "-o",
            path.to_str().unwrap(),
        ]);
    };
    fifo_run(&quiet);
    let (clock, _) = ClockInfo::detect();
    let (ready, stop) = (Barrier::new(2), AtomicBool::new(false));
    std::thread::scope(|s| {
        let injector = s.spawn(|| {
            let schedule = Schedule {
                cpu,
                priority: 2,
                period: Duration::from_millis(1),
                busy: Duration::from_micros(150),
                run_for: Duration::from_secs(4),
                count: usize::MAX,
            };
            inject(schedule, &ready, &stop, &clock)
        });
        ready.wait();
        fifo_run(&loud);
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        assert!(injector.join().unwrap().len() > 1000, "the injector ran");
    });
    (
        noise_verdict(&verdicts(&quiet, &loud), cpu),
        noise_verdict(&verdicts(&loud, &quiet), cpu),
    )
}

#[test]
fn two_quiet_runs_are_not_different() {
    let Some((cpu, _)) = util::two_cpus() else {
        return skip("two_quiet_runs_are_not_different", "needs two CPUs");
    };
    let _lock = measuring();
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.json"), dir.path().join("b.json"));
    // This host is a shared VM with phases of heavy noise: a phase change between two
    // runs is a real difference, and the verdict may say so. Three printed attempts; one
    // pair judged alike shows the verdict does not cry wolf on quiet runs.
    let mut seen = Vec::new();
    for attempt in 1..=3 {
        noise_run(cpu, &a);
        noise_run(cpu, &b);
        let (verdict, basis) = noise_verdict(&verdicts(&a, &b), cpu);
        eprintln!("attempt {attempt}: {verdict}: {basis}");
        // The basis always states the figures and p the verdict rests on.
        assert!(
            basis.contains("p = ") && basis.contains("per 62.5 ms"),
            "{basis}"
        );
        if verdict == "no clear difference" {
            return;
        }
        seen.push(format!("{verdict}: {basis}"));
    }
    panic!("three pairs of quiet runs were all judged different: {seen:#?}");
}

#[test]
fn a_run_against_itself_is_the_same_everywhere() {
    // The frozen fixture's pingpong futex and spin: nothing is measured.
    let dir = tempfile::tempdir().unwrap();
    let path = util::frozen_part(&dir.path().join("pp.json"), &["pingpong"]);
    let rows = verdicts(&path, &path);
    assert_eq!(
        rows.len(),
        8,
        "2 mechanisms × (rtt, one-way) × 2 runs: {rows:?}"
    );
    // The fixture's spin one-way figure is unconfirmed: it alone is never judged.
    let judged: Vec<&str> = rows
        .iter()
        .filter(|r| r.2 == "B")
        .map(|r| r.3.as_str())
        .collect();
    let not_judged = judged.iter().filter(|v| **v == "not judged").count();
    assert_eq!(not_judged, 1, "{rows:?}");
    for r in rows.iter().filter(|r| r.2 == "B" && r.3 != "not judged") {
        assert_eq!(r.3, "no clear difference", "{r:?}");
    }
    // A copy from another host is flagged at the top of the table.
    let text = std::fs::read_to_string(&path).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["host"]["hostname"] = "elsewhere".into();
    let other = dir.path().join("other.json");
    std::fs::write(&other, v.to_string()).unwrap();
    let out = jitterscope(&["compare", path.to_str().unwrap(), other.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0));
    // Under the runs, said a line each.
    let note = stdout.lines().find(|l| l.starts_with("note: "));
    assert!(
        note.is_some_and(|n| n.contains("host differs") && n.contains("elsewhere")),
        "{stdout}"
    );
    assert!(stdout.contains("How verdicts are judged"), "{stdout}");
}

#[test]
fn compare_refuses_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let good = util::frozen_part(&dir.path().join("good.json"), &["noise"]);
    let text = std::fs::read_to_string(&good).unwrap();
    let truncated = dir.path().join("truncated.json");
    std::fs::write(&truncated, &text[..text.len() / 2]).unwrap();
    let (g, t) = (good.to_str().unwrap(), truncated.to_str().unwrap());
    let missing = dir.path().join("missing.json");
    let m = missing.to_str().unwrap();
    util::assert_bad_input(&[
        &["compare", g, m],
        &["compare", g, t],
        &["compare", g, g, "--label", "only-one"],
        &["compare", g, g, "--label", "", "--label", "b"],
        &[
            "compare", g, g, g, "--label", "a", "--label", "a", "--label", "a.2",
        ],
        &["compare", g, g, "--format", "svg"],
    ]);
    // One file is a usage error: clap's own message, exit 2.
    assert_eq!(jitterscope(&["compare", g]).status.code(), Some(2));
}

/// The series compare tests on: 62.5 ms intervals from the start, for noise and for the
/// timer (whose priming sample once left 4 s intervals behind).
#[test]
fn short_runs_have_fine_series() {
    let Some((cpu, _)) = util::two_cpus() else {
        return skip("short_runs_have_fine_series", "needs two CPUs");
    };
    let _lock = measuring();
    let c = cpu.to_string();
    let noise = util::json_result(&["noise", "-a", &c, "-D", "1s"]);
    let timer = util::json_result(&["timer", "-a", &c, "-D", "1s", "--no-dma-latency"]);
    let series = noise
        .probes
        .iter()
        .filter_map(|e| e.get::<NoiseEntry>().map(|n| &n.series))
        .chain(
            timer
                .probes
                .iter()
                .filter_map(|e| e.get::<TimerEntry>().map(|t| &t.series)),
        );
    let mut n = 0;
    for s in series {
        assert_eq!(s.interval_ns, 62_500_000);
        // 1 s of them; the timer's last wake-up may land just past the second.
        assert!((16..=17).contains(&s.max_ns.len()), "{}", s.max_ns.len());
        n += 1;
    }
    assert_eq!(n, 2);
}

/// Issue 36: `compare` of two main-job results fits its terminal. Under dated 31-character
/// names (which every row repeated, 56 lines of 109–137 columns at 100) the runs are said
/// once above the tables, by a letter, and the tables' words are cut with "…" to fit:
/// at COLUMNS=100 and 80 no line is wider.
#[test]
fn issue36_compare_of_two_quick_runs_fits_100_and_80_columns() {
    let dir = tempfile::tempdir().unwrap();
    let names = [
        "20261128-085901-run-quick-host-a",
        "20261128-085911-run-quick-host-b",
    ];
    let paths: Vec<String> = (names.iter().zip(["a", "b"]))
        .map(|(name, fixture)| {
            let path = dir.path().join(format!("{name}.json"));
            std::fs::write(&path, util::gunzipped(&format!("quick/{fixture}.json.gz"))).unwrap();
            path.display().to_string()
        })
        .collect();
    for width in [100, 80] {
        let out = std::process::Command::new(util::bin())
            .args(["compare", &paths[0], &paths[1]])
            .env("COLUMNS", width.to_string())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        crate::util::assert_fits(&text, width);
        // Each name once, in the runs above the tables; the rows say A and B.
        for (name, path) in names.iter().zip(&paths) {
            assert_eq!(text.matches(name).count(), 1, "{width}: {name}: {text}");
            assert!(text.lines().any(|l| l.trim_end().ends_with(path.as_str())));
        }
        assert!(text.starts_with("Runs (A the baseline):\n  A  "), "{text}");
        let causes = text
            .lines()
            .skip_while(|l| !l.starts_with("noise cpu1: causes"));
        assert!(causes.clone().any(|l| l.contains('…')), "{width}: {text}");
    }
}
