//! Issue 15, item 1: `selftest` passes on this host, and fails, naming the check, when its
//! detector is broken on purpose (every other gap dropped before matching).

use crate::util::{fifo_available, is_root, jitterscope, measuring, skip, stderr_lines, two_cpus};

fn can_run(test: &str) -> bool {
    if !is_root() || fifo_available().is_err() {
        skip(test, "the holder needs root and SCHED_FIFO");
        return false;
    }
    if two_cpus().is_none() {
        skip(test, "needs two usable CPUs");
        return false;
    }
    true
}

#[test]
fn selftest_passes_here() {
    if !can_run("selftest_passes_here") {
        return;
    }
    let _m = measuring();
    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("selftest.json");
    // Two printed attempts, as the other ground-truth tests allow: on this shared VM a
    // noisy stretch (another guest, a compile beside the tests) can spoil one; five in a
    // row passed on a quiet host (docs/guide/noise.md, "How it is checked").
    let mut out = jitterscope(&["selftest", "-o", saved.to_str().unwrap()]);
    if out.status.code() != Some(0) {
        eprintln!("attempt 1:\n{}", String::from_utf8_lossy(&out.stdout));
        out = jitterscope(&["selftest", "-o", saved.to_str().unwrap()]);
    }
    let text = String::from_utf8_lossy(&out.stdout);
    eprintln!("{text}");
    // Exit 3 (issue 22): nothing failed, but the host's background was too large to judge
    // a check by; that check says so with its figures, and says nothing about the tool.
    let code = out.status.code();
    assert!(
        code == Some(0) || code == Some(3),
        "{text}\n{:?}",
        stderr_lines(&out)
    );
    for check in ["counter", "noise detection", "timer detection", "safety"] {
        assert!(crate::util::check_judged(&text, check), "{check}: {text}");
    }
    // Tracing passes where tracefs can be used, and otherwise says why it skipped.
    match crate::util::tracefs_usable() {
        true => assert!(crate::util::check_judged(&text, "tracing"), "{text}"),
        false => {
            let tracing = text.lines().find(|l| l.contains("tracing")).unwrap();
            assert!(tracing.trim_start().starts_with("skip"), "{text}")
        }
    }
    match code {
        Some(0) => assert!(text.contains("all checks passed")),
        _ => assert!(text.contains("no check failed; could not judge")),
    }
    let record: jitterscope::app::selftest::SelftestRecord =
        serde_json::from_str(&std::fs::read_to_string(&saved).unwrap()).unwrap();
    assert_eq!(record.checks.len(), 5);
    assert!(!record.host.kernel_release.is_empty());
    // Issue 50: each hold not attributed whole is kept on the counter with its verdict,
    // and counted by it.
    let tracing = record.checks.iter().find(|c| c.name == "tracing").unwrap();
    let by = jitterscope::app::selftest::by_verdict(&tracing.holds_missed);
    assert_eq!(by, tracing.holds_missed_by_cause);
    for m in &tracing.holds_missed {
        eprintln!("a hold not attributed whole: {m:?}");
        let ticks = m.end_tsc.saturating_sub(m.start_tsc);
        assert!(ticks > 0 && m.truth_ns > 0, "{m:?}");
    }
}

#[test]
fn a_broken_detector_fails_the_selftest_by_name() {
    if !can_run("a_broken_detector_fails_the_selftest_by_name") {
        return;
    }
    let _m = measuring();
    let out = std::process::Command::new(crate::util::bin())
        .args(["selftest", "--quick"])
        .env(
            jitterscope::app::selftest::FAULT_ENV,
            "skip-every-other-gap",
        )
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    let failed = text
        .lines()
        .find(|l| l.contains("noise detection"))
        .unwrap();
    assert!(failed.trim_start().starts_with("FAIL"), "{text}");
    assert!(text.contains("failed: noise detection"), "{text}");
}

/// Issue 15: with the trace's events dropped before attributing, the holds go unnamed
/// and the tracing check fails by name.
#[test]
fn a_broken_attribution_fails_the_tracing_check_by_name() {
    let test = "a_broken_attribution_fails_the_tracing_check_by_name";
    if !can_run(test) {
        return;
    }
    // Held before tracefs is tried (as in tests/trace.rs).
    let _m = measuring();
    if !crate::util::tracefs_usable() {
        return skip(test, "tracefs cannot be used here");
    }
    let out = std::process::Command::new(crate::util::bin())
        .args(["selftest", "--quick"])
        .env(jitterscope::app::selftest::FAULT_ENV, "drop-trace-events")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    let line = text.lines().find(|l| l.contains("tracing")).unwrap();
    assert!(line.trim_start().starts_with("FAIL"), "{text}");
    assert!(line.contains("0 of "), "{text}");
    assert!(text.contains("failed: tracing"), "{text}");
}
