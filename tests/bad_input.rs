//! Issue 2, item 5: bad input exits 2 with one clear line on stderr, and never panics.

use crate::util::{jitterscope, stderr_lines};

/// Runs with `args` and checks the contract: exit 2, nothing on stdout, one line on
/// stderr starting `jitterscope: ` that contains every one of `mentions`.
fn rejects(args: &[&str], mentions: &[&str]) {
    let out = jitterscope(args);
    let lines = stderr_lines(&out);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{args:?} exit code; stderr {lines:?}"
    );
    assert!(out.stdout.is_empty(), "{args:?} printed to stdout");
    assert_eq!(
        lines.len(),
        1,
        "{args:?} must print exactly one line, got {lines:?}"
    );
    assert!(lines[0].starts_with("jitterscope: "), "{:?}", lines[0]);
    for m in mentions {
        assert!(
            lines[0].contains(m),
            "{args:?}: {:?} should mention {m:?}",
            lines[0]
        );
    }
}

#[test]
fn cpu_out_of_range() {
    rejects(&["noise", "-a", "99"], &["CPU 99"]);
}

#[test]
fn reversed_range() {
    rejects(&["noise", "-a", "3-1"], &["'3-1'", "reversed range", "1-3"]);
}

#[test]
fn empty_cpu_list() {
    rejects(&["noise", "-a", ""], &["empty CPU list", "0-3,5"]);
}

#[test]
fn duplicate_and_garbage_cpus() {
    rejects(&["noise", "-a", "0,0"], &["CPU 0", "more than once"]);
    rejects(&["noise", "-a", "zero"], &["'zero'", "not a CPU number"]);
}

#[test]
fn duration_without_a_known_unit() {
    rejects(&["noise", "-D", "10x"], &["'10x'", "500ms, 10s, 5m or 2h"]);
}

#[test]
fn priority_out_of_range() {
    rejects(&["noise", "-p", "100"], &["100", "1..=99"]);
    rejects(&["noise", "-p", "0"], &["0", "1..=99"]);
}

#[test]
fn negative_threshold() {
    rejects(&["noise", "-T", "-5"], &["'-5'", "positive time"]);
}

#[test]
fn unknown_flags_and_policies() {
    rejects(&["noise", "--bogus"], &["--bogus"]);
    rejects(
        &["noise", "--policy", "batch"],
        &["batch", "other, fifo, rr or deadline"],
    );
    rejects(
        &["noise", "-p", "5", "--policy", "other"],
        &["SCHED_OTHER has no priority"],
    );
    rejects(&["frobnicate"], &["frobnicate"]);
}

#[test]
fn housekeeping_cpu_cannot_be_measured() {
    rejects(
        &["noise", "-a", "0", "--housekeeping", "0"],
        &["--housekeeping 0"],
    );
}

#[test]
fn help_and_version_succeed() {
    let out = jitterscope(&["--help"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("noise"));
    let out = jitterscope(&["noise", "--help"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("--threshold"));
    assert_eq!(jitterscope(&["--version"]).status.code(), Some(0));
}

#[test]
fn huge_durations_are_rejected_not_panicked_on() {
    rejects(&["noise", "-D", "1e20"], &["'1e20'"]);
    rejects(&["noise", "--warmup", "1e20"], &["'1e20'"]);
    rejects(&["noise", "-D", "1e9"], &["30-day limit"]);
}

#[test]
fn realtime_spinners_on_every_usable_cpu_need_force() {
    let usable = jitterscope::engine::cpu::CpuUniverse::detect()
        .unwrap()
        .usable();
    let all = usable.to_string();
    rejects(&["noise", "-p", "1", "-a", &all], &["refusing", "--force"]);
    // Naming a measured CPU for housekeeping does not make room either.
    let first = usable.cpus()[0].to_string();
    if usable.len() == 1 {
        rejects(
            &["noise", "-p", "1", "--housekeeping", &first],
            &["refusing"],
        );
    }
}

/// Issue 3, item 4: the timer's own flags; cyclictest exits 0 on each of these.
#[test]
fn timer_rejects_bad_options_with_exit_2() {
    rejects(&["timer", "--bogus"], &["--bogus"]);
    rejects(&["timer", "-i", "0"], &["'0'", "positive time"]);
    rejects(&["timer", "-i", "0.5"], &["'0.5'", "shorter than 1 µs"]);
    rejects(&["timer", "-i", "2s"], &["'2s'", "longer than 1 s"]);
    rejects(&["timer", "-i", "fast"], &["'fast'", "100 (µs)"]);
    rejects(&["timer", "-d", "-5"], &["-5"]);
    rejects(
        &["timer", "--clock", "tai"],
        &["'tai'", "monotonic or realtime"],
    );
    rejects(&["timer", "--dma-latency", "-1"], &["'-1'", "µs"]);
    rejects(
        &["timer", "--dma-latency", "5", "--no-dma-latency"],
        &["--no-dma-latency"],
    );
    rejects(&["timer", "--relative", "--aligned"], &["--aligned"]);
    rejects(&["timer", "-l", "0"], &["0"]);
    rejects(&["timer", "--histogram", "0"], &["'0'", "bucket count"]);
    rejects(&["timer", "--stop-above", "soon"], &["'soon'"]);
    // The old cyclictest -n (removed in 2.x) is unknown here too, and says so.
    rejects(&["timer", "-n"], &["-n"]);
}

#[test]
fn realtime_timer_threads_that_barely_sleep_need_force_on_every_cpu() {
    let usable = jitterscope::engine::cpu::CpuUniverse::detect()
        .unwrap()
        .usable();
    let all = usable.to_string();
    rejects(
        &["timer", "-p", "1", "-a", &all, "-i", "50"],
        &["refusing", "--force"],
    );
}

#[test]
fn timer_rejects_settings_that_would_be_ignored_or_measure_nothing() {
    rejects(&["timer", "--priospread"], &["--priospread", "real-time"]);
    rejects(
        &["timer", "-D", "300ms", "-i", "500ms"],
        &["shorter than the 500000 µs interval"],
    );
    rejects(&["timer", "--aligned", "-d", "300"], &["--aligned"]);
    rejects(&["timer", "--spike-nodes", "5"], &["--spikes"]);
    let usable = jitterscope::engine::cpu::CpuUniverse::detect()
        .unwrap()
        .usable();
    if usable.len() >= 2 {
        // Two threads: the second would sleep 900 + 200 ms.
        let two = format!("{},{}", usable.cpus()[0], usable.cpus()[1]);
        rejects(
            &["timer", "-a", &two, "-i", "900ms", "-d", "200ms"],
            &["1100000 µs", "1 s limit"],
        );
    }
}
