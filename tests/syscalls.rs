//! Issue 5: `jitterscope syscalls`. Every call is measured, the vDSO is told from a real
//! syscall by measurement, and the timer slack does what the kernel says it does.

use jitterscope::probes::syscalls::{Call, SyscallEntry, Via};
use jitterscope::report::ProbeEntry;

use crate::util::{assert_bad_input, jitterscope, json_result, measuring};

fn run(args: &[&str]) -> Vec<SyscallEntry> {
    let r = json_result(&[&["syscalls"][..], args].concat());
    r.probes
        .iter()
        .filter_map(ProbeEntry::get::<SyscallEntry>)
        .cloned()
        .collect()
}

fn median(e: &[SyscallEntry], c: Call) -> u64 {
    let x = e.iter().find(|x| x.call == c).expect("measured");
    x.summary.p50_ns.expect("a median")
}

#[test]
fn every_call_is_measured_and_the_vdso_is_found_by_measuring() {
    let _m = measuring();
    let e = run(&["-D", "40ms"]);
    assert_eq!(e.len(), Call::ALL.len());
    for x in &e {
        assert!(x.samples > 0, "{}", x.call);
        let s = &x.summary;
        assert!(s.min_ns <= s.p50_ns && s.p50_ns <= s.max_ns, "{}", x.call);
        assert!((1..=64).contains(&x.batch), "{}", x.call);
    }
    // A real syscall cannot be cheaper than entering and leaving the kernel; the vDSO
    // read must be cheaper than the same read forced through the kernel.
    for c in [Call::Getppid, Call::ClockMonotonicSyscall] {
        assert_eq!(e.iter().find(|x| x.call == c).unwrap().via, Via::Syscall);
    }
    let vdso = median(&e, Call::ClockMonotonic);
    let forced = median(&e, Call::ClockMonotonicSyscall);
    eprintln!("clock_gettime(MONOTONIC): {vdso} ns, as a syscall {forced} ns");
    assert!(vdso < forced, "{vdso} vs {forced}");
    let via = e
        .iter()
        .find(|x| x.call == Call::ClockMonotonic)
        .unwrap()
        .via;
    assert_eq!(via, Via::Vdso, "cheaper than the invalid syscall");
}

#[test]
fn a_timer_slack_of_1ns_shortens_a_sleep_of_0() {
    let _m = measuring();
    let e = run(&["-D", "100ms", "--only", "nanosleep-0,nanosleep-0-slack-1ns"]);
    let default = e.iter().find(|x| x.call == Call::Nanosleep0).unwrap();
    let one = e.iter().find(|x| x.call == Call::Nanosleep0Slack1).unwrap();
    assert_eq!(one.timer_slack_ns, 1);
    assert!(
        default.timer_slack_ns > 1,
        "SCHED_OTHER's default slack is 50 µs"
    );
    assert_eq!(
        (default.batch, one.batch),
        (1, 1),
        "sleeps are timed one by one"
    );
    // The kernel may let a sleep run its whole slack late: 50 µs against 1 ns.
    let (d, o) = (
        median(&e, Call::Nanosleep0),
        median(&e, Call::Nanosleep0Slack1),
    );
    eprintln!("nanosleep(0): {d} ns with the default slack, {o} ns with 1 ns");
    assert!(d > o, "{d} vs {o}");
}

#[test]
fn only_measures_what_it_names_in_that_order() {
    let _m = measuring();
    let e = run(&["-D", "20ms", "--only", "getppid,rdtsc", "--batch", "1"]);
    let calls: Vec<Call> = e.iter().map(|x| x.call).collect();
    assert_eq!(calls, vec![Call::Getppid, Call::Rdtsc]);
    assert!(e.iter().all(|x| x.batch == 1));
    // Without invalid-syscall to compare with, nothing is guessed.
    let e = run(&["-D", "20ms", "--only", "clock_gettime-monotonic"]);
    assert_eq!(e[0].via, Via::Unknown);
}

#[test]
fn bad_syscalls_input_is_one_line_and_exit_2() {
    // Short runs of the binary, but not beside a measuring test.
    let _m = measuring();
    assert_bad_input(&[
        &["syscalls", "--only", "getpid"],
        &["syscalls", "--only", "rdtsc,rdtsc"],
        &["syscalls", "-a", "0,1"],
        &["syscalls", "--batch", "0"],
    ]);
    let out = jitterscope(&["syscalls", "--list"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).lines().count(),
        Call::ALL.len()
    );
}
