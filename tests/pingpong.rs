//! Issue 4: `jitterscope pingpong`. The order every engineer expects (spin below futex),
//! the TSC check's bound and the one-way figures it validates, the same CPU twice, and
//! no mechanism that can hang: each is interrupted mid-run, and counted runs end alone.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use jitterscope::probes::pingpong::{Mechanism, OneWayBasis, PingpongEntry};
use jitterscope::report::{ProbeEntry, ResultFile};
use rustix::process::{Pid, Signal, kill_process};

use crate::util::{assert_bad_input, bin, jitterscope, measuring, skip, two_cpus};

/// Runs pingpong with `args` plus `-o`, and returns its entries.
fn run(args: &[&str]) -> Vec<PingpongEntry> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pp.json");
    let mut all = vec!["pingpong", "-q", "-o", path.to_str().unwrap()];
    all.extend_from_slice(args);
    let out = jitterscope(&all);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = ResultFile::read(&path).expect("a result file");
    r.probes
        .iter()
        .filter_map(ProbeEntry::get::<PingpongEntry>)
        .cloned()
        .collect()
}

fn entry(entries: &[PingpongEntry], m: Mechanism) -> &PingpongEntry {
    entries.iter().find(|e| e.mechanism == m).expect("measured")
}

fn pair() -> Option<String> {
    two_cpus().map(|(a, b)| format!("{b},{a}"))
}

fn median(d: &jitterscope::stats::Summary) -> u64 {
    d.p50_ns.expect("a median")
}

#[test]
fn spin_is_faster_than_futex_across_two_cpus() {
    let Some(cpus) = pair() else {
        return skip(
            "spin_is_faster_than_futex_across_two_cpus",
            "needs two CPUs",
        );
    };
    let _m = measuring();
    let e = run(&["-a", &cpus, "--mech", "spin,futex,pipe", "-D", "0.5s"]);
    let (spin, futex, pipe) = (
        entry(&e, Mechanism::Spin),
        entry(&e, Mechanism::Futex),
        entry(&e, Mechanism::Pipe),
    );
    eprintln!(
        "round-trip medians: spin {} ns, futex {} ns, pipe {} ns",
        median(&spin.rtt.summary),
        median(&futex.rtt.summary),
        median(&pipe.rtt.summary)
    );
    for x in [spin, futex, pipe] {
        assert!(
            x.round_trips > 100,
            "{}: {} round trips",
            x.mechanism,
            x.round_trips
        );
        assert_eq!(x.rtt.summary.count, x.round_trips);
        assert_eq!(
            x.one_way.summary.count,
            2 * x.round_trips,
            "both directions"
        );
    }
    // The robust part of spin < futex < pipe: a store seen by a spinning load beats any
    // trip through the kernel's wake-up path.
    assert!(median(&spin.rtt.summary) < median(&futex.rtt.summary));
}

#[test]
fn the_tsc_check_bounds_the_skew_and_decides_what_one_way_shows() {
    let Some(cpus) = pair() else {
        return skip("the_tsc_check_bounds_the_skew_...", "needs two CPUs");
    };
    let _m = measuring();
    // The check's rounds need both threads on their CPUs at once. A loaded host can keep
    // them apart until the check's 500 ms run out: CI once saw 61 of 5 000 rounds, every
    // one spanning a switch, and a 4 ms bound. The bound was true, but it is no test of
    // the check: up to three printed attempts, each judged once most rounds ran.
    let full = jitterscope::engine::tsc_sync::DEFAULT_ROUNDS;
    let mut starved = Vec::new();
    let e = loop {
        let e = run(&["-a", &cpus, "--mech", "spin,futex", "-l", "3000"]);
        let skew = e[0].tsc_skew;
        eprintln!("skew: {skew:?}");
        if skew.rounds * 2 >= full {
            break e;
        }
        starved.push(format!(
            "{} of {full} rounds, bound {} ns",
            skew.rounds, skew.bound_ns
        ));
        assert!(
            starved.len() < 3,
            "the check was starved in three attempts: {starved:?}"
        );
    };
    let skew = e[0].tsc_skew;
    assert!(skew.rounds > 0, "the check ran");
    assert!(skew.offset_lo_ns <= skew.offset_hi_ns);
    // One host with an invariant TSC: the interval holds 0 and is about a round trip wide.
    assert!(skew.consistent, "{skew:?}");
    assert!(skew.bound_ns > 0 && skew.bound_ns < 100_000, "{skew:?}");
    for x in &e {
        assert_eq!(x.tsc_skew, skew, "one check for the pair");
        let basis = match x.one_way_valid {
            true => OneWayBasis::Tsc,
            false => OneWayBasis::RttHalf,
        };
        assert_eq!(x.one_way_basis, basis);
    }
    // Concrete outcomes, not the rule again. The check cannot resolve an offset finer
    // than its own cache-line round trip, so a spinning hand-off (one line transfer) is
    // never a tenth of it: spin's one-way is always the round trip halved. A futex
    // wake-up costs µs, far above a sub-µs bound: its one-way comes from the counters.
    let spin = entry(&e, Mechanism::Spin);
    assert_eq!(spin.one_way_basis, OneWayBasis::RttHalf, "{spin:?}");
    let futex = entry(&e, Mechanism::Futex);
    eprintln!(
        "futex one-way median {} ns, bound {} ns",
        median(&futex.one_way.summary),
        skew.bound_ns
    );
    // (A futex wake-up takes 3 µs or more even on bare metal.)
    if skew.bound_ns < 300 {
        assert_eq!(futex.one_way_basis, OneWayBasis::Tsc);
    }
}

#[test]
fn the_same_cpu_twice_measures_a_context_switch() {
    let Some((cpu, _)) = two_cpus() else {
        return skip(
            "the_same_cpu_twice_measures_a_context_switch",
            "needs two CPUs",
        );
    };
    let _m = measuring();
    let cpus = format!("{cpu},{cpu}");
    let e = run(&["-a", &cpus, "--mech", "futex,pipe", "-l", "2000"]);
    for x in &e {
        assert_eq!((x.cpu_a, x.cpu_b), (cpu, cpu));
        assert_eq!(x.round_trips, 2000);
        // One counter: one-way figures stand without an agreement check.
        assert!(x.one_way_valid, "{}", x.mechanism);
        assert_eq!(x.tsc_skew.bound_ns, 0);
        // Every message puts its receiver to sleep and wakes it: a switch each way.
        let switches = x.thread_a.voluntary_switches + x.thread_b.voluntary_switches;
        assert!(
            switches >= 2 * 2000,
            "{}: {switches} voluntary switches for 2000 round trips",
            x.mechanism
        );
    }
}

#[test]
fn counted_runs_of_every_mechanism_end_by_themselves() {
    let Some(cpus) = pair() else {
        return skip(
            "counted_runs_of_every_mechanism_end_by_themselves",
            "needs two CPUs",
        );
    };
    let _m = measuring();
    let t0 = Instant::now();
    let e = run(&["-a", &cpus, "--mech", "all", "-l", "500", "--warmup", "0"]);
    assert!(t0.elapsed() < Duration::from_secs(30), "{:?}", t0.elapsed());
    assert_eq!(e.len(), Mechanism::ALL.len());
    for x in &e {
        assert_eq!(x.round_trips, 500, "{}", x.mechanism);
        assert!(x.rtt.summary.min_ns.unwrap() > 0, "{}", x.mechanism);
    }
}

/// Starts a 30 s run of one mechanism, interrupts it, and checks it ended at once with
/// what it had measured saved.
fn interrupt_one(cpus: &str, m: Mechanism) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pp.json");
    let mut child = Command::new(bin())
        .args([
            "pingpong",
            "-q",
            "-D",
            "30s",
            "--mech",
            m.name(),
            "-a",
            cpus,
            "-o",
        ])
        .arg(&path)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Past the warm-up even with a build beside the test (400 ms was not, in CI).
    std::thread::sleep(Duration::from_millis(1200));
    kill_process(Pid::from_child(&child), Signal::INT).unwrap();
    let sent = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if sent.elapsed() > Duration::from_secs(5) {
            let _ = child.kill();
            panic!("{m}: still running 5 s after SIGINT");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(status.code(), Some(130), "{m}");
    assert!(
        sent.elapsed() < Duration::from_secs(2),
        "{m}: {:?}",
        sent.elapsed()
    );
    let r = ResultFile::read(&path).expect("saved");
    assert!(r.run.interrupted, "{m}");
    let e = r.probes[0]
        .get::<PingpongEntry>()
        .expect("a pingpong entry");
    assert_eq!(e.mechanism, m);
    assert!(e.round_trips > 0, "{m}: measured before the signal");
}

#[test]
fn every_mechanism_can_be_interrupted_mid_run() {
    let Some(cpus) = pair() else {
        return skip(
            "every_mechanism_can_be_interrupted_mid_run",
            "needs two CPUs",
        );
    };
    let _m = measuring();
    for m in Mechanism::ALL {
        interrupt_one(&cpus, m);
    }
    // On one CPU a blocked receiver and its sender take turns: interrupt those too.
    let (cpu, _) = two_cpus().unwrap();
    for m in [Mechanism::Mutex, Mechanism::Pipe, Mechanism::Signal] {
        interrupt_one(&format!("{cpu},{cpu}"), m);
    }
}

#[test]
fn bad_pingpong_input_is_one_line_and_exit_2() {
    // Short runs of the binary, but not beside a measuring test.
    let _m = measuring();
    assert_bad_input(&[
        &["pingpong", "-a", "0,1,2"],
        &["pingpong", "-a", "0"],
        &["pingpong", "-a", "0,4096"],
        &["pingpong", "-a", "0-1,1"],
        &["pingpong", "--mech", "carrier-pigeon"],
        &["pingpong", "--mech", "spin,spin"],
        &["pingpong", "--pause", "-1"],
        &["pingpong", "-l", "0"],
        // Spinning on one CPU at a real-time policy could never hand the CPU over.
        &["pingpong", "-a", "0,0", "-p", "10", "--mech", "spin"],
    ]);
}
