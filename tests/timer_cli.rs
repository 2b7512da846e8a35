//! Issue 3, items 4 and 5, through the binary: exit codes, the 1-µs histogram, -l, the
//! live display, and /dev/cpu_dma_latency restored on every way a run ends.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use jitterscope::engine::pmqos;
use jitterscope::report::{ProbeEntry, ResultFile};
use rustix::process::{Pid, Signal, kill_process};

use crate::util::{as_nobody, bin, is_root, jitterscope, measuring, nobody_cannot_reach, skip};

fn timer_entries(r: &ResultFile) -> Vec<&jitterscope::probes::timer::TimerEntry> {
    r.probes
        .iter()
        .map(|p| match p {
            ProbeEntry::Timer(t) => &**t,
            _ => panic!("a timer run holds timer entries only"),
        })
        .collect()
}

#[test]
fn loops_alone_end_the_run_when_done() {
    let _m = measuring();
    let t0 = Instant::now();
    let out = jitterscope(&[
        "timer",
        "-l",
        "40",
        "-i",
        "200",
        "--json",
        "--no-dma-latency",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    let text = String::from_utf8_lossy(&out.stdout);
    let r = ResultFile::parse(&text).unwrap();
    // A probe from a newer version is skipped, not fatal, as the format doc promises.
    let mut newer: serde_json::Value = serde_json::from_str(&text).unwrap();
    newer["probes"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({"probe": "from-the-future", "cpu": 0}));
    let read = ResultFile::parse(&newer.to_string()).unwrap();
    assert!(matches!(read.probes.last(), Some(ProbeEntry::Unknown)));
    for e in timer_entries(&r) {
        assert_eq!(e.wakeups, 40, "cpu {}", e.cpu);
        assert_eq!(e.summary.count, 40);
        assert_eq!(e.config.loops, Some(40));
        // Thread n sleeps interval + n × distance.
        assert_eq!(
            e.config.interval_ns,
            200_000 + e.thread_index as u64 * 500_000
        );
    }
}

#[test]
fn histogram_is_cyclictests_layout_and_adds_up() {
    let _m = measuring();
    let out = jitterscope(&[
        "timer",
        "-D",
        "300ms",
        "--histogram",
        "50",
        "--no-dma-latency",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    let start = text.find("# Histogram").expect("histogram printed");
    let mut total = 0;
    let mut totals_line = None;
    let mut overflows_line = None;
    for line in text[start..].lines().skip(1) {
        if let Some(rest) = line.strip_prefix("# Total: ") {
            totals_line = Some(rest.to_string());
        } else if line.starts_with("# Overflows") {
            overflows_line = Some(line.rsplit(": ").next().unwrap().to_string());
        } else if !line.starts_with('#') && !line.is_empty() {
            let cells: Vec<u64> = line
                .split_whitespace()
                .map(|c| c.parse().unwrap())
                .collect();
            assert!(cells[0] < 50, "bucket {} beyond 50 µs", cells[0]);
            total += cells[1..].iter().sum::<u64>();
        }
    }
    let wakeups: u64 = totals_line
        .unwrap()
        .split_whitespace()
        .map(|c| c.parse::<u64>().unwrap())
        .sum();
    let overflows: u64 = overflows_line
        .unwrap()
        .split_whitespace()
        .map(|c| c.parse::<u64>().unwrap())
        .sum();
    assert!(wakeups > 0);
    assert_eq!(
        total + overflows,
        wakeups,
        "buckets and overflows hold every wake-up"
    );
}

#[test]
fn stop_above_exits_1_and_says_where() {
    let _m = measuring();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.json");
    // Every wake-up is later than 1 ns, so the first one stops the run.
    let out = Command::new(bin())
        .args([
            "timer",
            "-D",
            "5s",
            "--stop-above",
            "1ns",
            "-q",
            "--no-dma-latency",
            "-o",
        ])
        .arg(&path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("jitterscope: stopped: CPU"), "{stderr}");
    let r = ResultFile::read(&path).unwrap();
    assert!(!r.run.interrupted, "a limit is not a signal");
    assert!(r.run.actual_duration_ns < 1_000_000_000);
    let stopped: Vec<_> = timer_entries(&r)
        .into_iter()
        .filter_map(|e| e.stopped_run)
        .collect();
    assert_eq!(stopped.len(), 1, "exactly one thread stopped the run");
    assert_eq!(stopped[0].wakeup, 1);
}

#[test]
fn the_live_display_draws_on_a_terminal() {
    const NAME: &str = "the_live_display_draws_on_a_terminal";
    if Command::new("script").arg("--version").output().is_err() {
        return skip(
            NAME,
            "script (util-linux) is not installed to provide a terminal",
        );
    }
    let _m = measuring();
    let cmd = format!("{} timer -D 900ms --no-dma-latency", bin().display());
    let out = Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let lines = text.matches("Avg:").count();
    let threads = text.matches("\x1b[2KCPU").count() / lines.max(1);
    let draws = lines / threads.max(1);
    let moves_up = text.matches("A\x1b[2KCPU").count();
    // At most 4 refreshes a second: 3 in 0.9 s, plus the final one.
    assert!((2..=5).contains(&draws), "{draws} draws in 0.9 s: {text}");
    assert_eq!(
        moves_up,
        draws - 1,
        "each redraw overwrites the last: {text}"
    );
    for unit in ["Min:", "Act:", "Max:", " µs"] {
        assert!(text.contains(unit), "{unit} missing: {text}");
    }
    // Piped, the same run prints no live lines at all.
    let piped = jitterscope(&["timer", "-D", "600ms", "--no-dma-latency"]);
    assert!(!String::from_utf8_lossy(&piped.stderr).contains("Avg:"));
}

/// Item 4: SIGINT prints the summary and saves the file, exit 130.
#[test]
fn sigint_prints_the_summary_and_saves() {
    let _m = measuring();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.json");
    let child = Command::new(bin())
        .args(["timer", "-D", "30s", "--no-dma-latency", "-o"])
        .arg(&path)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(800));
    let sent = Instant::now();
    kill_process(Pid::from_child(&child), Signal::INT).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(sent.elapsed() < Duration::from_secs(3));
    assert_eq!(out.status.code(), Some(130));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("(interrupted)") && text.contains("p99.9 (µs)"),
        "{text}"
    );
    let r = ResultFile::read(&path).unwrap();
    assert!(r.run.interrupted);
    for e in timer_entries(&r) {
        assert!(e.wakeups > 100, "cpu {}: {} wake-ups", e.cpu, e.wakeups);
    }
}

/// Item 4: unprivileged, `-p 90` runs at SCHED_OTHER with a warning, where cyclictest
/// refuses to run at all.
#[test]
fn unprivileged_runs_at_other_with_a_warning() {
    const NAME: &str = "unprivileged_runs_at_other_with_a_warning";
    let Some(mut nobody) = as_nobody(NAME) else {
        return;
    };
    let _m = measuring();
    let out = nobody
        .args(["timer", "-p", "90", "-D", "300ms", "--json"])
        .output()
        .unwrap();
    if nobody_cannot_reach(NAME, &out) {
        return;
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(
        stderr.matches("SCHED_FIFO 90 was refused").count(),
        1,
        "{stderr}"
    );
    let r = ResultFile::parse(&String::from_utf8_lossy(&out.stdout)).unwrap();
    let kinds: Vec<&str> = r.run.degraded.iter().map(|d| d.kind.as_str()).collect();
    assert!(kinds.contains(&"sched-refused"), "{kinds:?}");
    // /dev/cpu_dma_latency is root's: not set, and said so.
    if std::path::Path::new(pmqos::DEVICE).exists() {
        assert!(kinds.contains(&"dma-latency-not-set"), "{kinds:?}");
    }
    for e in timer_entries(&r) {
        assert_eq!(e.thread.policy, jitterscope::engine::sched::Policy::Other);
        assert!(e.wakeups > 50);
        assert_eq!(e.config.dma_latency_us, None);
    }
}

/// How a dma-latency run is ended.
#[derive(Debug, Clone, Copy)]
enum End {
    Normally,
    Signal(Signal),
}

/// Item 5: /dev/cpu_dma_latency holds our value during the run, and its old value after.
fn dma_latency_is_restored(end: End) {
    let name = format!("dma_latency_is_restored ({end:?})");
    let device = std::path::Path::new(pmqos::DEVICE);
    if !device.exists() {
        return skip(&name, "this kernel has no /dev/cpu_dma_latency");
    }
    if !is_root() {
        return skip(&name, "/dev/cpu_dma_latency is writable by root only");
    }
    let _m = measuring();
    let before = pmqos::read(device).unwrap();
    // A value no one else is likely to hold, so that seeing it proves it is ours.
    let ours = if before == 7 { 8 } else { 7 };
    let duration = match end {
        End::Normally => "1500ms",
        End::Signal(_) => "30s",
    };
    let mut child = Command::new(bin())
        .args([
            "timer",
            "-q",
            "-D",
            duration,
            "--dma-latency",
            &ours.to_string(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    let mut during = before;
    while t0.elapsed() < Duration::from_secs(1) && during != ours {
        std::thread::sleep(Duration::from_millis(20));
        during = pmqos::read(device).unwrap();
    }
    assert_eq!(
        during, ours,
        "the run's request is in force while it measures"
    );
    if let End::Signal(sig) = end {
        kill_process(Pid::from_child(&child), sig).unwrap();
    }
    let status = child.wait().unwrap();
    let expected = match end {
        End::Normally => 0,
        End::Signal(_) => 130,
    };
    assert_eq!(status.code(), Some(expected));
    assert_eq!(
        pmqos::read(device).unwrap(),
        before,
        "restored after {end:?}"
    );
}

#[test]
fn dma_latency_is_restored_after_a_normal_run() {
    dma_latency_is_restored(End::Normally);
}

#[test]
fn dma_latency_is_restored_after_sigint() {
    dma_latency_is_restored(End::Signal(Signal::INT));
}

#[test]
fn dma_latency_is_restored_after_sigterm() {
    dma_latency_is_restored(End::Signal(Signal::TERM));
}

#[test]
fn spikes_are_bounded_and_count_what_they_drop() {
    let _m = measuring();
    // Every wake-up is later than 1 ns: all are spikes, and only 10 fit.
    let args = [
        "timer",
        "-D",
        "300ms",
        "--spikes",
        "1ns",
        "--spike-nodes",
        "10",
    ];
    let out = jitterscope(&[&args[..], &["--json", "--no-dma-latency"]].concat());
    assert_eq!(out.status.code(), Some(0));
    let r = ResultFile::parse(&String::from_utf8_lossy(&out.stdout)).unwrap();
    for e in timer_entries(&r) {
        let s = e.spikes.as_ref().expect("spikes asked for");
        assert_eq!((s.capacity, s.duration_ns.len()), (10, 10));
        assert_eq!(s.dropped, e.wakeups - 10, "cpu {}", e.cpu);
        // In order, each a deadline of this thread: a whole number of intervals in.
        assert!(s.start_ns.windows(2).all(|w| w[0] < w[1]));
        let i = e.config.interval_ns;
        for &at in &s.start_ns {
            let off = (at + i / 2) % i;
            assert!(
                off.abs_diff(i / 2) < 20_000,
                "deadline at {at} ns, interval {i}"
            );
        }
    }
    let text = jitterscope(&[&args[..], &["--no-dma-latency"]].concat());
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("Spikes above 0.001 µs on CPU") && text.contains("10 kept"),
        "{text}"
    );
}

/// The options that change how threads sleep, each checked in its result.
#[test]
fn sleep_modes_clocks_warmup_and_priorities_do_what_they_say() {
    let _m = measuring();
    let run = |extra: &[&str]| -> ResultFile {
        let base = [
            "timer",
            "-D",
            "400ms",
            "-i",
            "1000",
            "--json",
            "--no-dma-latency",
        ];
        let out = jitterscope(&[&base[..], extra].concat());
        assert_eq!(
            out.status.code(),
            Some(0),
            "{extra:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        ResultFile::parse(&String::from_utf8_lossy(&out.stdout)).unwrap()
    };
    // Relative sleeps skip no deadline, so nothing is added back.
    for e in timer_entries(&run(&["--relative"])) {
        assert_eq!(
            e.config.mode,
            jitterscope::probes::timer::SleepMode::Relative
        );
        assert_eq!(e.overruns, 0);
        assert_eq!(e.corrected.summary, e.summary);
        assert!(e.wakeups > 100 && e.wakeups <= 400, "{}", e.wakeups);
    }
    // CLOCK_REALTIME keeps the same schedule: one wake-up per interval.
    for e in timer_entries(&run(&["--clock", "realtime"])) {
        assert_eq!(
            e.config.clock,
            jitterscope::probes::timer::TimerClock::Realtime
        );
        assert_eq!(
            e.wakeups + e.overruns,
            400 / (e.config.interval_ns / 1_000_000)
        );
    }
    // The warm-up runs before the window: the window's count is unchanged.
    let t0 = Instant::now();
    for e in timer_entries(&run(&["--warmup", "300ms"])) {
        assert_eq!(e.config.warmup_ns, 300_000_000);
        assert_eq!(
            e.wakeups + e.overruns,
            400 / (e.config.interval_ns / 1_000_000)
        );
    }
    assert!(t0.elapsed() >= Duration::from_millis(700));
    let usable = jitterscope::engine::cpu::CpuUniverse::detect()
        .unwrap()
        .usable();
    if usable.len() < 2 {
        return skip("priospread and aligned", "need two CPUs");
    }
    let two = format!("{},{}", usable.cpus()[0], usable.cpus()[1]);
    // --priospread: each next thread one priority lower, as it really ran.
    if is_root() {
        for e in timer_entries(&run(&["-a", &two, "-p", "50", "--priospread"])) {
            assert_eq!(e.thread.priority as usize, 50 - e.thread_index);
            assert_eq!(e.config.priority, e.thread.priority);
        }
    }
    // --aligned: the same interval, and deadlines on the same instants.
    let r = run(&["-a", &two, "--aligned", "--top", "1000"]);
    let entries = timer_entries(&r);
    assert!(
        entries
            .iter()
            .all(|e| e.config.interval_ns == 1_000_000 && e.config.distance_ns == 0)
    );
    // Each deadline's phase in the interval, against the phase of all of them: the
    // deadlines are on CLOCK_MONOTONIC and the events placed on the counter from the
    // window's (counter, clock) pair, so a pair read across a preemption, or NTP slewing
    // the clock, shifts every phase alike; and a thread preempted between its clock read
    // and its counter read (it runs at SCHED_OTHER here) places that one deadline late
    // (20.8 µs once beside a build). Threads apart would differ by their distance: the
    // second's deadlines at every other half interval.
    // A time's place in the interval, in [-500 µs, 500 µs).
    let phase = |ns: i64| (ns + 500_000).rem_euclid(1_000_000) - 500_000;
    let mut phases: Vec<i64> = (entries.iter())
        .flat_map(|e| (e.largest.iter()).map(|ev| phase(ev.start_ns as i64)))
        .collect();
    phases.sort_unstable();
    let median = phases[phases.len() / 2];
    for e in &entries {
        let offs: Vec<i64> = (e.largest.iter())
            .map(|ev| phase(ev.start_ns as i64 - median))
            .collect();
        let near = offs.iter().filter(|o| o.abs() < 20_000).count();
        assert!(
            near * 10 >= offs.len() * 9,
            "cpu {}: {near} of {} deadlines within 20 µs of the median phase {median} ns; \
             the others' offsets (ns): {:?}",
            e.cpu,
            offs.len(),
            (offs.iter())
                .filter(|o| o.abs() >= 20_000)
                .take(20)
                .collect::<Vec<_>>()
        );
    }
}

/// Real-time timer threads on every CPU sleep, at the start gate too: the run takes its
/// duration and almost no CPU time (spinning at the gate starved the coordinator).
#[test]
fn realtime_threads_on_every_cpu_do_not_spin() {
    const NAME: &str = "realtime_threads_on_every_cpu_do_not_spin";
    if !is_root() {
        return skip(NAME, "SCHED_FIFO needs root here");
    }
    let _m = measuring();
    let all = jitterscope::engine::cpu::CpuUniverse::detect()
        .unwrap()
        .usable()
        .to_string();
    let cpu_time = || {
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: getrusage writes into the zeroed struct we own.
        unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) };
        let t = |tv: libc::timeval| Duration::new(tv.tv_sec as u64, tv.tv_usec as u32 * 1000);
        t(ru.ru_utime) + t(ru.ru_stime)
    };
    let before = cpu_time();
    let t0 = Instant::now();
    let out = jitterscope(&[
        "timer",
        "-a",
        &all,
        "-p",
        "90",
        "-D",
        "1s",
        "-q",
        "--no-dma-latency",
    ]);
    let wall = t0.elapsed();
    let used = cpu_time() - before;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("{NAME}: wall {wall:?}, CPU {used:?}");
    assert!(wall < Duration::from_millis(1800), "wall {wall:?}");
    assert!(
        used < Duration::from_millis(400),
        "CPU time {used:?} for a 1 s sleeping run"
    );
}

/// Issue 15: the threads' timer slack is set (1 ns by default), read back, recorded and
/// shown; `--timer-slack default` keeps the kernel's (50 µs for SCHED_OTHER threads, or
/// whatever this process inherited), and a bad value is refused.
#[test]
fn timer_slack_is_set_recorded_and_shown_issue_15() {
    let _m = measuring();
    let run = |extra: &[&str]| {
        let mut args = vec![
            "timer",
            "-l",
            "20",
            "-i",
            "500",
            "--no-dma-latency",
            "-a",
            "0",
        ];
        args.extend_from_slice(extra);
        let out = jitterscope(&args);
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let parsed = |extra: &[&str]| {
        let mut a = extra.to_vec();
        a.push("--json");
        ResultFile::parse(&run(&a)).unwrap()
    };
    let ours = parsed(&[]);
    for e in timer_entries(&ours) {
        assert_eq!(e.config.timer_slack_ns, Some(1), "cpu {}", e.cpu);
    }
    assert!(run(&[]).contains("timer slack 1 ns"));
    let inherited = rustix::thread::current_timer_slack().unwrap();
    let kernels = parsed(&["--timer-slack", "default"]);
    for e in timer_entries(&kernels) {
        assert_eq!(e.config.timer_slack_ns, Some(inherited), "cpu {}", e.cpu);
    }
    let shown = run(&["--timer-slack", "20us"]);
    assert!(shown.contains("timer slack 20 µs"), "{shown}");
    crate::util::assert_bad_input(&[&["timer", "--timer-slack", "soon"]]);
}
