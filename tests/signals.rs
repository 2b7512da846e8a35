//! Issue 2, item 6: SIGINT and SIGTERM at any moment end the run cleanly: the summary is
//! printed, the result file is complete and says `interrupted: true`, and the exit code
//! is 130.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use jitterscope::report::{ProbeEntry, ResultFile};
use rustix::process::{Pid, Signal, kill_process};

use crate::util::{bin, measuring};

fn spawn(out: &std::path::Path) -> Child {
    Command::new(bin())
        .args(["noise", "-D", "30s", "-q", "-o"])
        .arg(out)
        .args(["--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn")
}

/// Sends `sig` after `after`, then waits (bounded) for the process to end.
fn interrupt(child: Child, sig: Signal, after: Duration) -> (std::process::Output, Duration) {
    std::thread::sleep(after);
    let pid = Pid::from_child(&child);
    let sent = Instant::now();
    kill_process(pid, sig).expect("kill");
    let out = child.wait_with_output().expect("wait");
    (out, sent.elapsed())
}

fn check(sig: Signal, after: Duration, expect_measured: bool) {
    let _m = measuring();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.json");
    let (out, took) = interrupt(spawn(&path), sig, after);
    assert_eq!(
        out.status.code(),
        Some(130),
        "{sig:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        took < Duration::from_secs(3),
        "{sig:?} took {took:?} to stop a 30 s run"
    );

    // The whole result went to stdout and to the file, and both say interrupted.
    let printed = ResultFile::parse(&String::from_utf8_lossy(&out.stdout)).expect("stdout JSON");
    let saved = ResultFile::read(&path).expect("a complete result file");
    assert_eq!(printed, saved);
    assert!(saved.run.interrupted);
    assert!(saved.run.actual_duration_ns < saved.run.requested_duration_ns);
    assert!(
        !saved.probes.is_empty(),
        "one entry per measured CPU, even when cut short"
    );
    if expect_measured {
        assert!(
            saved.run.actual_duration_ns > 100_000_000,
            "{}",
            saved.run.actual_duration_ns
        );
        for p in &saved.probes {
            let ProbeEntry::Noise(n) = p else {
                panic!("a noise run holds noise entries only")
            };
            assert!(
                n.runtime_ns > 100_000_000 && n.iterations > 0,
                "cpu {} measured",
                n.cpu
            );
        }
    }
}

#[test]
fn sigint_mid_run_prints_and_saves() {
    check(Signal::INT, Duration::from_millis(1200), true);
}

#[test]
fn sigterm_mid_run_prints_and_saves() {
    check(Signal::TERM, Duration::from_millis(1200), true);
}

#[test]
fn sigterm_during_setup_still_saves() {
    check(Signal::TERM, Duration::from_millis(30), false);
}

#[test]
fn the_table_is_printed_on_interrupt() {
    let _m = measuring();
    let child = Command::new(bin())
        .args(["noise", "-D", "30s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (out, _) = interrupt(child, Signal::INT, Duration::from_millis(800));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(130));
    assert!(stdout.contains("(interrupted)"), "{stdout}");
    assert!(stdout.contains("Interruption durations"), "{stdout}");
    assert!(stdout.contains("p99 (µs)"), "{stdout}");
}
