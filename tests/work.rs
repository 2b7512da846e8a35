//! Issue 5: `jitterscope work`. The measurement is quiet on an idle CPU, `--ns` and
//! `--baseline` calibrate by measurement, and udp-send reaches the loopback sink, every
//! datagram of it, without root.

use jitterscope::probes::work::{Role, WorkEntry};
use jitterscope::report::{ProbeEntry, ResultFile};

use crate::util::{
    as_nobody, assert_bad_input, fifo_available, json_result, measuring, nobody_cannot_reach,
    two_cpus,
};

fn entries(stdout: &[u8]) -> Vec<WorkEntry> {
    let r = ResultFile::parse(&String::from_utf8_lossy(stdout)).expect("JSON");
    r.probes
        .iter()
        .filter_map(ProbeEntry::get::<WorkEntry>)
        .cloned()
        .collect()
}

fn run(args: &[&str]) -> Vec<WorkEntry> {
    entries_of(&json_result(&[&["work"][..], args].concat()))
}

fn entries_of(r: &ResultFile) -> Vec<WorkEntry> {
    r.probes
        .iter()
        .filter_map(ProbeEntry::get::<WorkEntry>)
        .cloned()
        .collect()
}

/// The CPU the coordinator does not use, when there are two.
fn cpu() -> String {
    two_cpus().map_or("0".into(), |(c, _)| c.to_string())
}

#[test]
fn a_null_loop_is_quiet_on_an_idle_cpu() {
    let _m = measuring();
    // "On an idle CPU": at SCHED_FIFO 1 where allowed, so that no other task of this
    // machine preempts the loop; and a shared VM has busy spells of a few seconds (the
    // hypervisor's other guests), so up to eight short attempts, each printed. One quiet
    // run shows that the measurement itself adds no jitter, and one run whose body is
    // 1 µs shows the calibration works; they need not be the same run.
    let cpu = cpu();
    let mut args = vec!["work", "-a", &cpu, "--ns", "1us", "-n", "50000", "-r", "1"];
    if fifo_available().is_ok() {
        args.extend(["-p", "1"]);
    }
    let (mut quiet, mut calibrated, mut seen) = (false, false, Vec::new());
    for _ in 0..8 {
        let (rate, gap_p99) = background(&args);
        let e = entries_of(&json_result(&args));
        let s = &e[0].summary;
        let (p50, p99) = (s.p50_ns.unwrap(), s.p99_ns.unwrap());
        let body = p50 as f64 - e[0].timing.overhead_ns;
        // Judged against the host (issue 22): where the background interrupts more than
        // one sample in 200, the p99 sample is one of those, and may be longer by one of
        // the background's interruptions (a host at 17 000 a second for 2.3 µs).
        let hit = rate * p50 as f64 * 1e-9;
        let allowed = match hit >= 0.005 {
            true => 2 * p50 + gap_p99,
            false => 2 * p50,
        };
        eprintln!(
            "loop calibrated to 1 µs: p50 {p50} ns, p99 {p99} ns, body {body:.0} ns; background \
             {rate:.0} interruptions/s (a sample meets one with chance {hit:.4}), p99 \
             {gap_p99} ns: p99 allowed up to {allowed} ns"
        );
        assert_eq!(e[0].samples, 50_000);
        quiet |= p99 <= allowed;
        calibrated |= (800.0..1300.0).contains(&body);
        seen.push((p50, p99, body as u64));
        if quiet && calibrated {
            return;
        }
    }
    panic!("quiet: {quiet}, calibrated: {calibrated}; (p50, p99, body) = {seen:?}");
}

/// The background on the work loop's CPU, at its policy: `noise` for 300 ms gives the
/// interruptions a second and their p99 duration (ns).
fn background(work_args: &[&str]) -> (f64, u64) {
    let mut args = vec!["noise", "-D", "300ms"];
    let keep = |a: &&str| ["-a", "-p"].contains(a);
    for w in work_args.windows(2).filter(|w| keep(&w[0])) {
        args.extend([w[0], w[1]]);
    }
    let r = json_result(&args);
    let n = r
        .probes
        .iter()
        .find_map(ProbeEntry::get::<jitterscope::probes::noise::NoiseEntry>)
        .expect("a noise entry");
    (n.rate_per_s, n.summary.p99_ns.unwrap_or(0))
}

#[test]
fn each_run_is_paired_with_a_null_loop_of_its_mean() {
    let _m = measuring();
    let mut seen = Vec::new();
    // Up to three attempts, each printed: a busy spell of the VM host during one run's
    // calibration, or its samples, moves one side and not the other.
    for _ in 0..3 {
        let e = run(&[
            "-a",
            &cpu(),
            "--action",
            "memmove:4K",
            "--baseline",
            "-n",
            "100000",
            "-r",
            "2",
        ]);
        let roles: Vec<(Role, u32)> = e.iter().map(|x| (x.role, x.run)).collect();
        assert_eq!(
            roles,
            vec![
                (Role::Action, 1),
                (Role::Baseline, 1),
                (Role::Action, 2),
                (Role::Baseline, 2)
            ]
        );
        // The calibration's promise: the baseline's typical (median) sample is the
        // action's mean. Not mean against mean: one 4 ms preemption moves a mean by
        // 4 ms / samples, and the two runs are preempted at different moments.
        let mut close = true;
        for pair in e.chunks(2) {
            let a = pair[0].summary.mean_ns.unwrap();
            let b = pair[1].summary.p50_ns.unwrap() as f64;
            eprintln!(
                "memmove mean {a:.1} ns, its baseline's median {b:.1} ns ({})",
                pair[1].action
            );
            assert_eq!(pair[1].samples, pair[0].samples);
            close &= (b / a - 1.0).abs() < 0.25;
            seen.push((a, b));
        }
        if close {
            return;
        }
    }
    panic!("no attempt had every baseline within 25 % of its action: {seen:?}");
}

fn check_udp(e: &[WorkEntry], sent: u64) {
    let udp = e.iter().find_map(|x| x.udp.as_ref()).expect("a udp record");
    assert!(
        udp.loopback_sink && udp.dest.starts_with("127.0.0.1:"),
        "{udp:?}"
    );
    assert_eq!(udp.send_errors, 0);
    assert_eq!(udp.sent, sent);
    assert_eq!(udp.received, Some(sent), "every datagram reached the sink");
}

#[test]
fn udp_send_reaches_the_loopback_sink() {
    let _m = measuring();
    let e = run(&[
        "--action",
        "udp-send:256",
        "-n",
        "5000",
        "-r",
        "2",
        "--warmup-count",
        "500",
    ]);
    check_udp(&e, 2 * (5000 + 500));
}

#[test]
fn udp_send_works_without_root() {
    let Some(mut cmd) = as_nobody("udp_send_works_without_root") else {
        return;
    };
    let _m = measuring();
    let out = cmd
        .args([
            "work",
            "--json",
            "--action",
            "udp-send:64",
            "-n",
            "3000",
            "-r",
            "1",
            "--warmup-count",
            "0",
        ])
        .output()
        .unwrap();
    if nobody_cannot_reach("udp_send_works_without_root", &out) {
        return;
    }
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    check_udp(&entries(&out.stdout), 3000);
}

#[test]
fn bad_work_input_is_one_line_and_exit_2() {
    // Short runs of the binary, but not beside a measuring test.
    let _m = measuring();
    assert_bad_input(&[
        &["work", "--action", "sleep:1"],
        &["work", "--action", "loop:0"],
        &["work", "--action", "memmove:2G"],
        &["work", "--action", "syscall:getpid"],
        &["work", "--action", "memmove:4K", "--ns", "1us"],
        &["work", "--dest", "127.0.0.1:9"],
        &[
            "work",
            "--action",
            "udp-send:64",
            "--multicast",
            "10.0.0.1",
            "--interface",
            "127.0.0.1",
        ],
        &["work", "--action", "udp-send:64", "--dest", "nowhere"],
        &["work", "-a", "0,1"],
        &["work", "-n", "0"],
    ]);
}
