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
    let out = jitterscope(&["selftest", "-o", saved.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    eprintln!("{text}");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{text}\n{:?}",
        stderr_lines(&out)
    );
    for check in ["counter", "noise detection", "timer detection", "safety"] {
        assert!(
            text.lines()
                .any(|l| l.contains(check) && l.trim_start().starts_with("pass")),
            "{check}: {text}"
        );
    }
    assert!(text.contains("all checks passed"));
    let record: jitterscope::app::selftest::SelftestRecord =
        serde_json::from_str(&std::fs::read_to_string(&saved).unwrap()).unwrap();
    assert_eq!(record.checks.len(), 4);
    assert!(!record.host.kernel_release.is_empty());
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
