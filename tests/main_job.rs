//! Issue 7, items 1 and 3: the main job completes, prints a verdict, writes both files,
//! and a second run compares with the first; as non-root it still works, degraded and
//! labelled.

use std::path::{Path, PathBuf};

use jitterscope::probes::noise::NoiseEntry;
use jitterscope::probes::pingpong::PingpongEntry;
use jitterscope::probes::timer::TimerEntry;
use jitterscope::report::ResultFile;

use crate::util::{self, jitterscope, measuring, skip};

/// The .json and .html the job wrote into `dir`, and nothing else.
fn written(dir: &Path) -> (PathBuf, PathBuf) {
    let files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 2, "one result and one page: {files:?}");
    let with = |ext: &str| {
        files
            .iter()
            .find(|f| f.extension().is_some_and(|e| e == ext))
            .cloned()
            .unwrap_or_else(|| panic!("no .{ext} in {files:?}"))
    };
    let (json, html) = (with("json"), with("html"));
    assert_eq!(json.file_stem(), html.file_stem());
    assert!(
        json.file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("jitterscope-")
    );
    (json, html)
}

fn check_result(json: &Path) -> ResultFile {
    let r = ResultFile::read(json).expect("the saved result reads back");
    let kinds =
        |f: fn(&jitterscope::report::ProbeEntry) -> bool| r.probes.iter().filter(|e| f(e)).count();
    assert!(
        kinds(|e| e.get::<NoiseEntry>().is_some()) >= 1,
        "noise entries"
    );
    assert!(
        kinds(|e| e.get::<TimerEntry>().is_some()) >= 1,
        "timer entries"
    );
    assert_eq!(
        kinds(|e| e.get::<PingpongEntry>().is_some()),
        2,
        "futex and spin"
    );
    assert!(r.host.audit.is_some(), "the audit is stored");
    assert_eq!(r.run.command_line[1], "run");
    issue15_the_verdict_names_each_figures_policy(&r);
    r
}

/// Issue 15: every figure the verdict quotes names the policy it was measured at, as its
/// entry recorded it (the timer also its slack), so a SCHED_OTHER figure is never read as
/// a real-time one.
fn issue15_the_verdict_names_each_figures_policy(r: &ResultFile) {
    use jitterscope::engine::sched::Policy;
    let words = |t: &jitterscope::probes::record::ThreadRecord| match t.policy {
        Policy::Other => "SCHED_OTHER".to_string(),
        Policy::Fifo => format!("SCHED_FIFO {}", t.priority),
        Policy::Rr => format!("SCHED_RR {}", t.priority),
        Policy::Deadline(d) => format!("SCHED_DEADLINE {d}"),
    };
    let v = r.verdict.as_ref().expect("the verdict is stored");
    let line = |needle: &str| {
        (v.lines.iter())
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no verdict line with {needle:?}: {:?}", v.lines))
            .clone()
    };
    let noise = line("% of its time to");
    assert!(
        r.entries::<NoiseEntry>()
            .any(|e| noise.contains(&format!("(noise loop at {})", words(&e.thread)))),
        "{noise}"
    );
    let timer = line("A timer thread");
    let t = (r.entries::<TimerEntry>())
        .find(|t| timer.contains(&format!("on CPU {} (", t.cpu)))
        .expect("the quoted timer entry");
    assert!(timer.contains(&words(&t.thread)), "{timer}");
    // The slack as the kernel read it back: 1 ns as set, or 0 where the kernel gives
    // real-time threads none.
    let slack = t.config.timer_slack_ns.expect("the slack is recorded");
    assert!(slack <= 1, "slack {slack} ns");
    assert!(
        timer.contains(&format!("timer slack {slack} ns")),
        "{timer}"
    );
    if r.run.privileges.root {
        // As root, as cyclictest is run.
        assert!(timer.contains("(SCHED_FIFO 90, "), "{timer}");
    }
    for p in r.entries::<PingpongEntry>() {
        let l = line(&format!("A {} round trip", p.mechanism));
        assert!(l.contains(&format!("({})", words(&p.thread_a))), "{l}");
    }
}

#[test]
fn the_main_job_judges_saves_and_compares() {
    if util::two_cpus().is_none() {
        return skip("the_main_job_judges_saves_and_compares", "needs two CPUs");
    }
    let _lock = measuring();
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut results = Vec::new();
    for dir in [&a, &b] {
        let out = jitterscope(&[
            "run",
            "--step-time",
            "1s",
            "--out-dir",
            dir.path().to_str().unwrap(),
        ]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(stdout.contains("Verdict\n"), "{stdout}");
        // The noisiest CPU (or the only one) is named with its lost time.
        assert!(stdout.contains("% of its time to"), "{stdout}");
        assert!(
            stdout.contains("Top fixes") || stdout.contains("nothing to fix"),
            "{stdout}"
        );
        let (json, html) = written(dir.path());
        assert!(
            stdout.contains(&json.display().to_string()),
            "the saved paths are printed"
        );
        check_result(&json);
        let page = std::fs::read_to_string(&html).unwrap();
        assert!(
            page.contains("<h2>Verdict</h2>") || page.contains("Verdict</h2>"),
            "the page leads with the verdict"
        );
        assert!(page.contains("<svg"), "the page has its plots");
        results.push(json);
    }
    let out = jitterscope(&[
        "compare",
        results[0].to_str().unwrap(),
        results[1].to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for probe in ["noise", "timer", "pingpong"] {
        assert!(
            stdout.lines().any(|l| l.contains(probe)),
            "{probe} compared: {stdout}"
        );
    }
}

#[test]
fn the_main_job_runs_as_non_root_degraded_and_labelled() {
    let test = "the_main_job_runs_as_non_root_degraded_and_labelled";
    if util::two_cpus().is_none() {
        return skip(test, "needs two CPUs");
    }
    let Some(mut cmd) = util::as_nobody(test) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // The unprivileged user must be able to write there.
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let _lock = measuring();
    let out = cmd
        .args([
            "run",
            "--step-time",
            "500ms",
            "--out-dir",
            dir.path().to_str().unwrap(),
        ])
        .output()
        .unwrap();
    if util::nobody_cannot_reach(test, &out) {
        return;
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = util::stderr_lines(&out);
    assert_eq!(out.status.code(), Some(0), "{stderr:?}");
    assert!(stdout.contains("Verdict\n"), "{stdout}");
    let (json, _) = written(dir.path());
    let r = check_result(&json);
    assert!(!r.run.privileges.root);
    // The timer cannot hold /dev/cpu_dma_latency without root: degraded, and said so on
    // stderr and in the result, once.
    let dma: Vec<_> = r
        .run
        .degraded
        .iter()
        .filter(|d| d.message.contains("cpu_dma_latency"))
        .collect();
    assert_eq!(dma.len(), 1, "{:?}", r.run.degraded);
    assert_eq!(
        stderr
            .iter()
            .filter(|l| l.contains("cpu_dma_latency"))
            .count(),
        1,
        "{stderr:?}"
    );
    assert!(stdout.contains("degradation(s) apply"), "{stdout}");
    // The audit marks what it could not read rather than failing.
    let audit = r.host.audit.as_ref().unwrap();
    assert!(!audit.findings.is_empty());
}

#[test]
fn the_main_job_refuses_bad_input_before_measuring() {
    let file = tempfile::NamedTempFile::new().unwrap();
    let f = file.path().to_str().unwrap();
    // A directory under a file cannot be made, not even by root.
    let under_file = format!("{f}/dir");
    util::assert_bad_input(&[
        &["run", "--step-time", "1ms"],
        &["run", "--out-dir", &under_file],
        &["run", "--out-dir", f],
        &["run", "--quick", "--step-time", "1s"],
        &["run", "-a", "9999"],
    ]);
}

/// Issue 29: `run --out-dir NEW/sub` makes the directory (and its parent), as most tools
/// do; and a main job whose noise step was traced keeps no event log (its causes are
/// measured for every gap), while one whose trace could not be made keeps one for the
/// verdict to infer the causes from.
#[test]
fn issue29_run_makes_its_out_dir_and_keeps_no_event_log_when_traced() {
    if util::two_cpus().is_none() {
        return skip("issue29_run_out_dir", "needs two CPUs");
    }
    let _lock = measuring();
    let base = tempfile::tempdir().unwrap();
    let dir = base.path().join("new").join("sub");
    let out = jitterscope(&[
        "run",
        "--step-time",
        "400ms",
        "-q",
        "--out-dir",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{:?}", util::stderr_lines(&out));
    let (json, _) = written(&dir);
    let r = check_result(&json);
    let traced = !(r.run.degraded.iter()).any(|d| d.kind == "trace-unavailable");
    for e in r.entries::<NoiseEntry>() {
        match (util::is_root() && traced, &e.attribution) {
            (true, Some(a)) => {
                assert!(
                    e.events.is_none(),
                    "CPU {}: an event log though traced",
                    e.cpu
                );
                assert_eq!(a.gaps + a.unattributed_gaps, e.interruptions);
            }
            (true, None) => panic!("CPU {}: traced but not attributed", e.cpu),
            (false, _) => assert!(
                e.events.is_some(),
                "CPU {}: no event log to infer from",
                e.cpu
            ),
        }
    }
}
