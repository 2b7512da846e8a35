//! Issue 4: `jitterscope queue`, perf-workshop's producer → ring → accumulator and
//! journaller, against what it must show.
//!
//! 1. The accumulator's inter-message median is the configured interval.
//! 2. A known hold on the accumulator's CPU (the ground-truth injector, SCHED_FIFO 2)
//!    shows up in its transit times: the largest is at least the hold, and holds the
//!    producer published into come out as transits of at least the hold less one interval.
//! 3. It never hangs: `-l N` ends by itself with exactly N measured messages per consumer,
//!    and SIGINT mid-run exits 130 with the result saved and marked interrupted.

use std::process::{Command, Stdio};
use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use jitterscope::engine::clock::ClockInfo;
use jitterscope::engine::cpu::CpuList;
use jitterscope::engine::inject::held_within;
use jitterscope::engine::run::ThreadSpec;
use jitterscope::engine::sched::{Policy, SchedRequest};
use jitterscope::probes::queue::{self, QueueConfig, QueueEntry, Role};
use jitterscope::report::{ProbeEntry, ResultFile};
use rustix::process::{Pid, Signal, kill_process};

use crate::injector::{Schedule, inject};
use crate::util::{
    bin, fifo_available, is_root, jitterscope, measuring, skip, stderr_lines, two_cpus,
};

fn entries(r: &ResultFile) -> Vec<&QueueEntry> {
    (r.probes.iter())
        .map(|p| match p {
            ProbeEntry::Queue(q) => q.as_ref(),
            other => panic!("a queue run holds queue entries only, got {other:?}"),
        })
        .collect()
}

/// Runs the binary with `args` plus `-q -o FILE` and reads the result back.
fn run_saved(args: &[&str], tmpdir: &std::path::Path) -> (std::process::Output, ResultFile) {
    let out_path = tmpdir.join("run.json");
    let out = Command::new(bin())
        .arg("queue")
        .args(args)
        .args(["-q", "-o"])
        .arg(&out_path)
        .env("TMPDIR", tmpdir)
        .output()
        .expect("the binary runs");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{args:?}: {:?}",
        stderr_lines(&out)
    );
    (out, ResultFile::read(&out_path).expect("a result file"))
}

/// Item 1: at -i 20 for 1 s the accumulator sees a message every 20 µs (its median
/// inter-message time within 10 %). The accumulator runs at SCHED_FIFO 1 where it may,
/// so that other tasks on a busy machine do not make it read in batches.
#[test]
fn inter_message_median_is_the_interval() {
    let _m = measuring();
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec![
        "-i",
        "20",
        "-D",
        "1s",
        "--warmup-count",
        "2000",
        "--no-journal",
    ];
    if fifo_available().is_ok() {
        args.extend(["--accumulator-priority", "1", "--force"]);
    }
    let (_, r) = run_saved(&args, dir.path());
    let e = entries(&r);
    assert_eq!(e.len(), 1);
    let acc = e[0];
    assert_eq!(acc.role, Role::Accumulator);
    let p50 = acc.inter_message.summary.p50_ns.unwrap();
    eprintln!(
        "inter-message p50 {p50} ns over {} messages; producer late {} of {}",
        acc.messages, acc.producer.late, acc.producer.published
    );
    assert!(
        (18_000..=22_000).contains(&p50),
        "median inter-message {p50} ns for a 20 µs interval"
    );
    // 1 s at 20 µs: 50 000 messages, fewer only by the time the producer (SCHED_OTHER,
    // beside whatever else runs on its CPU) was kept from publishing.
    let p = &acc.producer;
    assert!(acc.messages <= 50_000, "{}", acc.messages);
    assert_eq!(acc.messages, p.published);
    assert!(p.late > 0 || acc.messages == 50_000, "{p:?}");
    assert_eq!(r.run.requested_duration_ns, 1_000_000_000);
    assert!(!r.run.interrupted);
}

/// Item 2: 200 µs holds every 10007 µs at SCHED_FIFO 2 on the accumulator's CPU. The
/// message published first in a hold waits for its end: a transit of at least the hold
/// less one interval, and over ~100 holds one lands within a fraction of a µs of the
/// hold's start, so the largest transit is at least the hold.
#[test]
fn holds_on_the_accumulators_cpu_show_up_as_transit_times() {
    const TEST: &str = "holds_on_the_accumulators_cpu_show_up_as_transit_times";
    let _m = measuring();
    if !is_root() {
        return skip(TEST, "needs root for the SCHED_FIFO injector");
    }
    if let Err(why) = fifo_available() {
        return skip(TEST, &format!("SCHED_FIFO is not available: {why}"));
    }
    let Some(cpus) = two_cpus() else {
        return skip(
            TEST,
            "needs two CPUs: one for the producer, one for the accumulator",
        );
    };
    // The ground truth is the injector's holds. A stall of the VM's host can take whole
    // periods from it (CI once saw a 384 ms one: 58 holds inside the second, not ~96):
    // then there was too little truth to judge by, which is the host's doing, so up to
    // three printed attempts. A check of the probe against holds that did happen fails
    // at once.
    let mut spoiled = Vec::new();
    for _ in 0..3 {
        match holds_attempt(cpus) {
            Ok(()) => return,
            Err(why) => {
                eprintln!("{TEST}: attempt spoiled: {why}");
                spoiled.push(why);
            }
        }
    }
    panic!("{TEST}: three attempts had too few holds: {spoiled:#?}");
}

/// One run against the injector: `Err` when the host kept the injector from making
/// enough holds to judge by; a failed check of the probe panics.
fn holds_attempt((acc_cpu, producer_cpu): (usize, usize)) -> Result<(), String> {
    let (clock, _) = ClockInfo::detect();
    let fifo1 = SchedRequest {
        policy: Policy::Fifo,
        priority: 1,
    };
    let producer = ThreadSpec {
        cpu: producer_cpu,
        sched: SchedRequest::OTHER,
    };
    let accumulator = ThreadSpec {
        cpu: acc_cpu,
        sched: fifo1,
    };
    let mut cfg = QueueConfig::new(producer, accumulator);
    (cfg.interval_ns, cfg.warmup) = (10_000, 2_000);
    cfg.duration = Some(Duration::from_secs(1));
    let plan = cfg.plan(CpuList::from_cpus(vec![producer_cpu]), true);
    let (busy, period) = (Duration::from_micros(200), Duration::from_micros(10_007));
    let stop_injector = AtomicBool::new(false);
    let ready = Barrier::new(2);
    let (run, holds) = std::thread::scope(|s| {
        let injector = s.spawn(|| {
            let schedule = Schedule {
                cpu: acc_cpu,
                priority: 2,
                period,
                busy,
                run_for: cfg.window() + Duration::from_secs(5),
                count: usize::MAX,
            };
            inject(schedule, &ready, &stop_injector, &clock)
        });
        ready.wait();
        let run = queue::run(&cfg, &plan, &clock, &AtomicBool::new(false)).unwrap();
        stop_injector.store(true, Ordering::Relaxed);
        (run, injector.join().unwrap())
    });
    let acc = &run.entries[0];
    assert_eq!(acc.thread.policy, Policy::Fifo);
    // Holds well inside the measured second: after the warm-up, away from both ends.
    let window = run.outcome.window.expect("the run started");
    let ticks = |ms: u64| clock.scale.to_ticks(ms * 1_000_000);
    let from = window.start + ticks(20 + 20);
    let to = window.start + ticks(20 + 1_000 - 20);
    let (held, preempted) = held_within(holds, from, to, clock.scale);
    let inside = held.len();
    let hist = jitterscope::stats::LatencyHistogram::decode_base64(&acc.transit.histogram.data)
        .expect("the stored histogram decodes");
    let at_least = busy.as_nanos() as u64 - cfg.interval_ns;
    let long: u64 = (hist.iter_recorded())
        .filter(|v| v.value_iterated_to() >= at_least)
        .map(|v| v.count_at_value())
        .sum();
    let max = acc.transit.summary.max_ns.unwrap();
    eprintln!(
        "{inside} holds inside; {long} transits ≥ {} µs; max {:.1} µs; p50 {:.2} µs; \
         producer late {} of {}",
        at_least / 1000,
        max as f64 / 1e3,
        acc.transit.summary.p50_ns.unwrap() as f64 / 1e3,
        acc.producer.late,
        acc.producer.published
    );
    if inside < 80 {
        return Err(format!(
            "{inside} holds inside the measured second ({preempted} preempted), max \
             transit {:.1} µs",
            max as f64 / 1e3
        ));
    }
    // The producer runs SCHED_OTHER beside whatever else the machine runs, and publishes
    // only while it is on its CPU (a late one starts a new schedule): its share of the
    // CPU is what it published of a message every interval, and it publishes into about
    // that share of the holds.
    let p = &acc.producer;
    let share = p.published as f64 * cfg.interval_ns as f64 / p.measured_ns.max(1) as f64;
    let expected = share.min(1.0) * inside as f64;
    eprintln!(
        "producer on its CPU {:.0} % of the time: {p:?}",
        share * 100.0
    );
    assert!(
        long as f64 >= expected / 2.0,
        "{long} transits ≥ {at_least} ns for {inside} holds, {expected:.0} expected"
    );
    // Over enough holds published into, one message lands within a fraction of a µs
    // of a hold's start and waits all of it.
    let floor = if expected >= 40.0 {
        busy.as_nanos() as u64
    } else {
        at_least
    };
    assert!(
        max >= floor,
        "transit max {max} ns under {floor} ns ({expected:.0} holds published into)"
    );
    Ok(())
}

/// Item 3: `-l N` ends by itself, every consumer read exactly N measured messages, and the
/// temporary journal left nothing behind.
#[test]
fn a_count_ends_the_run_with_exactly_that_many_messages_per_consumer() {
    let _m = measuring();
    let dir = tempfile::tempdir().unwrap();
    let Some((other, first)) = two_cpus() else {
        return skip(
            "a_count_ends_the_run_with_exactly_that_many_messages_per_consumer",
            "needs two CPUs",
        );
    };
    let (acc, jour) = (other.to_string(), other.to_string());
    let prod = first.to_string();
    let args = [
        "-l",
        "20000",
        "--warmup-count",
        "1000",
        "--producer-cpu",
        &prod,
        "--accumulator-cpu",
        &acc,
        "--journaller-cpu",
        &jour,
    ];
    let t0 = Instant::now();
    let (out, r) = run_saved(&args, dir.path());
    let took = t0.elapsed();
    assert!(took < Duration::from_secs(10), "took {took:?}");
    let warned = stderr_lines(&out);
    assert!(
        warned.iter().any(|l| l.contains("share CPU")),
        "two busy roles on one CPU are warned about: {warned:?}"
    );
    let e = entries(&r);
    assert_eq!(e.len(), 2);
    for c in &e {
        assert_eq!(c.messages, 20_000, "{}", c.role);
        assert_eq!(c.transit.summary.count, 20_000, "{}", c.role);
        assert_eq!(c.inter_message.summary.count, 20_000, "{}", c.role);
        assert_eq!(c.producer.published, 20_000);
    }
    let j = e[1].journal.as_ref().expect("the journaller's record");
    assert_eq!((j.records, j.path.as_deref()), (21_000, None));
    assert!(!r.run.interrupted);
    assert_eq!(r.run.requested_duration_ns, 20_000 * 10_000);
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name())
        .filter(|n| n != "run.json")
        .collect();
    assert!(
        left.is_empty(),
        "the temporary journal was left behind: {left:?}"
    );
}

/// Item 3: SIGINT a second into a 30 s run: exit 130 soon after, what was measured
/// printed and saved, marked interrupted.
#[test]
fn sigint_mid_run_saves_an_interrupted_result() {
    let _m = measuring();
    // The signal must land mid-measurement. A loaded host can stretch the set-up and the
    // warm-up past the first wait (nothing published after 1.2 s, beside three builds
    // and a test suite): a run that published nothing is tried again, waiting longer.
    for wait in [1200, 3000, 8000] {
        if sigint_after(Duration::from_millis(wait)) {
            return;
        }
        eprintln!("nothing published {wait} ms in: tried again, waiting longer");
    }
    panic!("no queue run published a message before the signal");
}

/// One run interrupted after `wait`, judged; false if nothing was published by then.
fn sigint_after(wait: Duration) -> bool {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.json");
    let child = Command::new(bin())
        .args(["queue", "-D", "30s", "--json", "-o"])
        .arg(&path)
        .env("TMPDIR", dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    std::thread::sleep(wait);
    let sent = Instant::now();
    kill_process(Pid::from_child(&child), Signal::INT).expect("kill");
    let out = child.wait_with_output().expect("wait");
    let took = sent.elapsed();
    assert_eq!(out.status.code(), Some(130), "{:?}", stderr_lines(&out));
    assert!(
        took < Duration::from_secs(3),
        "SIGINT took {took:?} to stop the run"
    );
    let printed = ResultFile::parse(&String::from_utf8_lossy(&out.stdout)).expect("JSON");
    let saved = ResultFile::read(&path).expect("a complete result file");
    assert_eq!(printed, saved);
    assert!(saved.run.interrupted);
    assert!(saved.run.actual_duration_ns < saved.run.requested_duration_ns);
    if entries(&saved).iter().all(|c| c.producer.published == 0) {
        return false;
    }
    // What a consumer read is judged against what the producer (SCHED_OTHER, as busy as
    // the machine lets it be) published, not against a rate tuned on a quiet host.
    for c in entries(&saved) {
        let published = c.producer.published;
        assert!(
            c.messages > 0 && c.messages <= published && c.messages * 2 >= published,
            "{} read {} of {published} messages in ~1 s",
            c.role,
            c.messages
        );
        assert_eq!(c.transit.summary.count, c.messages);
    }
    true
}

/// Bad input: one line, exit 2, naming the flag.
#[test]
fn bad_input_is_one_line_naming_the_flag() {
    // Short runs of the binary, but not beside a measuring test.
    let _m = measuring();
    for (args, mention) in [
        (&["queue", "--ring-size", "1000"][..], "power of two"),
        (&["queue", "--producer-cpu", "99"][..], "--producer-cpu 99"),
        (&["queue", "-a", "1"][..], "-a/--cpus is not used by queue"),
        (
            &["queue", "--no-journal", "--journaller-cpu", "0"][..],
            "--journaller-cpu",
        ),
        (
            &["queue", "--journal", "/nonexistent/dir/j.bin"][..],
            "journal",
        ),
        (&["queue", "-D", "5us", "-i", "10"][..], "shorter"),
    ] {
        let out = jitterscope(args);
        let lines = stderr_lines(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {lines:?}");
        assert_eq!(lines.len(), 1, "{args:?}: {lines:?}");
        assert!(lines[0].starts_with("jitterscope: "), "{lines:?}");
        assert!(lines[0].contains(mention), "{args:?}: {lines:?}");
        assert!(out.stdout.is_empty());
    }
}
