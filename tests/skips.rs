//! Skips that count (issue 36): a skip is recorded with its test, its needs and its
//! reason (`util::skip`), and the test command's tally (`scripts/test-tally`) takes it
//! out of the passed, lists it, and under CI fails one the host could have run.

use std::path::Path;
use std::process::{Command, Output};

use crate::util::{NEEDS, needs, skip};

/// Set in the copy of the test binary the recording test runs: that copy skips.
const PROBE: &str = "JITTERSCOPE_SKIP_PROBE";

/// Ground truth for the record: this test runs itself again in a child test binary,
/// told to skip, once on the harness's one thread and once beside others; each record
/// names the test as the harness does, with its needs.
#[test]
fn issue36_a_skip_is_recorded_with_its_test_and_needs() {
    const TEST: &str = "skips::issue36_a_skip_is_recorded_with_its_test_and_needs";
    if std::env::var_os(PROBE).is_some() {
        return skip("the probe", "needs root and two CPUs");
    }
    let dir = tempfile::tempdir().unwrap();
    for threads in ["1", "2"] {
        let out = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", TEST, "--test-threads", threads])
            .env("JITTERSCOPE_SKIPS", dir.path())
            .env(PROBE, "1")
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    }
    let records = std::fs::read_to_string(dir.path().join("skips.tsv")).unwrap();
    let one = format!("{TEST}\tthe probe\troot,cpus2\tneeds root and two CPUs\n");
    assert_eq!(records, one.repeat(2));
}

/// A reason's needs are the host's offers it names, and only those; each is one the
/// tally probes the host for.
#[test]
fn issue36_a_skip_reason_names_its_needs() {
    for (why, want) in [
        (
            "tracefs instances and SCHED_FIFO need root",
            &["root", "tracefs", "fifo"][..],
        ),
        (
            "the root cpu group itself has no real-time runtime",
            &["cgroup1-cpu"],
        ),
        (
            "needs two CPUs: one measured, one for the server",
            &["cpus2"],
        ),
        ("no chromium on PATH: the page is not opened", &["chromium"]),
        ("gnuplot is not on PATH: plots.gp was not run", &["tool"]),
        (
            "tuned is not installed (needs root and apt)",
            &["root", "tool"],
        ),
        ("tune runs as root only", &["root"]),
        ("this host has no /dev/ptp*", &[]),
    ] {
        assert_eq!(needs(why), want, "{why}");
    }
    let tally = std::fs::read_to_string("scripts/test-tally").unwrap();
    for (need, _) in NEEDS {
        assert!(tally.contains(&format!("\"{need}\": ")), "{need}");
    }
}

/// One `cargo test`'s output, as the harness prints it.
const FAILING_RUN: &str = "\
running 3 tests
test a::one ... ok
test a::two ... FAILED
test a::three ... ok

failures:

---- a::two stdout ----
boom

failures:
    a::two

test result: FAILED. 2 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.01s
";

const PASSING_RUN: &str = "\
running 4 tests
test b::x ... ok
test b::y ... ok
test b::z ... ok
test b::w ... ok

test result: ok. 4 passed; 0 failed; 3 ignored; 0 measured; 0 filtered out; finished in 0.01s
";

/// `scripts/test-tally sum` over `runs` (output, exit status) and `skips`, with the
/// host offering `host`, under CI or not: its output.
fn tally(runs: &[(&str, u8)], skips: &str, host: &str, ci: bool) -> Output {
    let dir = tempfile::tempdir().unwrap();
    for (i, (log, status)) in runs.iter().enumerate() {
        let at = |ext: &str| dir.path().join(format!("run{}.{ext}", i + 1));
        std::fs::write(at("log"), log).unwrap();
        std::fs::write(at("exit"), format!("{status}\n")).unwrap();
        std::fs::write(at("cmd"), format!("cargo test run{}", i + 1)).unwrap();
    }
    std::fs::write(dir.path().join("skips.tsv"), skips).unwrap();
    std::fs::write(dir.path().join("host"), host).unwrap();
    let mut cmd = Command::new(Path::new("scripts/test-tally"));
    cmd.args(["sum"]).arg(dir.path()).env_remove("CI");
    if ci {
        cmd.env("CI", "true");
    }
    cmd.output().expect("python3 runs scripts/test-tally")
}

fn last_line(out: &Output) -> String {
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines().last().unwrap_or("").to_string()
}

/// The tally's last line counts every run, a skipped test (however many parts it
/// skipped) once and not as passed, a failed test not as skipped, and a run that broke
/// before testing as a failure; each skip is listed with its reason.
#[test]
fn issue36_the_tally_counts_skips_apart_from_the_passed() {
    let skips = "a::three\tthree\troot\tneeds root to make a group\n\
                 a::two\ttwo\t\tgnuplot is not on PATH\n\
                 b::x\tx (fish)\t\tfish is not installed\n\
                 b::x\tx (zsh)\t\tzsh is not installed\n";
    let broken = ("error[E0425]: cannot find value `x`", 101);
    let out = tally(
        &[(FAILING_RUN, 101), (PASSING_RUN, 0), broken],
        skips,
        "",
        false,
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(last_line(&out), "4 passed, 2 failed, 2 skipped", "{text}");
    assert_eq!(out.status.code(), Some(1), "{text}");
    for listed in [
        "skipped: three: needs root to make a group [needs root]",
        "skipped: x (fish): fish is not installed",
        "skipped: x (zsh): zsh is not installed",
        "FAILED: cargo test run3 (exit 101)",
    ] {
        assert!(text.lines().any(|l| l == listed), "{listed}: {text}");
    }
    // All green: exit 0, and the skips still said.
    let out = tally(
        &[(PASSING_RUN, 0)],
        "b::x\tx\tpodman\tpodman is not installed\n",
        "",
        false,
    );
    assert_eq!(last_line(&out), "3 passed, 0 failed, 1 skipped");
    assert_eq!(out.status.code(), Some(0));
}

/// Under CI a skip whose every need the host has is a failure; one that needs what the
/// host lacks, or names no need, stays a skip.
#[test]
fn issue36_under_ci_a_skip_the_host_could_run_fails() {
    let skips = "b::x\tx\troot,tracefs\ttracefs needs root\n\
                 b::y\ty\troot,podman\tpodman needs root\n\
                 b::z\tz\t\tfish is not installed\n";
    let host = "root\ntracefs\n";
    let out = tally(&[(PASSING_RUN, 0)], skips, host, true);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(last_line(&out), "1 passed, 1 failed, 2 skipped", "{text}");
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("FAILED (the host has what it needs): x: tracefs needs root"));
    // The same outside CI: skips, not failures.
    let out = tally(&[(PASSING_RUN, 0)], skips, host, false);
    assert_eq!(last_line(&out), "1 passed, 0 failed, 3 skipped");
    assert_eq!(out.status.code(), Some(0));
}
