//! Issue 13: attribution measured from kernel trace events, checked against ground truth.
//! These need root and tracefs (mounted for the test if need be); without them they say
//! why they skip. Each holds the measuring lock.

use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use jitterscope::engine::clock::ClockInfo;
use jitterscope::engine::cpu::CpuList;
use jitterscope::probes::noise::{self, NoiseConfig};
use jitterscope::report::ResultFile;
use jitterscope::trace::reader;
use jitterscope::trace::session::TraceSession;

use crate::injector::{Schedule, inject};
use crate::util::{
    fifo_available, fifo1_plan, is_root, measuring, our_instances, skip, stderr_lines, two_cpus,
};
use jitterscope::app::selftest::{background_of, judge_holds};
use jitterscope::app::tracing::attribute_noise_entry;
use jitterscope::engine::inject::{enough_held, held_within};

/// Root, SCHED_FIFO and two CPUs, or the reason to skip.
fn can_trace(test: &str) -> Option<(usize, usize)> {
    if !is_root() {
        skip(test, "tracefs instances need root");
        return None;
    }
    if fifo_available().is_err() {
        skip(test, "needs SCHED_FIFO");
        return None;
    }
    let cpus = two_cpus();
    if cpus.is_none() {
        skip(test, "needs two usable CPUs");
    }
    cpus
}

/// The tracefs mounts in the mount table, and the global settings we must not touch.
fn tracing_state() -> (Vec<String>, Vec<(String, String)>) {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
    let tracefs: Vec<String> = mounts
        .lines()
        .filter(|l| l.contains(" tracefs "))
        .map(str::to_string)
        .collect();
    let root = jitterscope::trace::tracefs_root();
    let settings = [
        "current_tracer",
        "trace_clock",
        "tracing_on",
        "set_event",
        "buffer_size_kb",
    ]
    .iter()
    .map(|f| {
        let v = root
            .as_ref()
            .and_then(|r| std::fs::read_to_string(r.join(f)).ok())
            .unwrap_or_default();
        (f.to_string(), v)
    })
    .collect();
    (tracefs, settings)
}

/// Task truth: a SCHED_FIFO thread of its own name holds the measured CPU 1.5 ms every
/// ~15 ms while the noise loop runs under a trace. Matched one by one by timestamp, the
/// holds' gaps name the holder as their top cause, with its time within 5 % + 5 µs of its
/// own CPU time, above the background that holds of nothing measure first on this host
/// (issue 22: judged against the host, not a constant), at a miss rate of at most 1 %:
/// the misses the binomial bound allows over the ~130 holds (issue 36: not a share that
/// one stray miss breaks, retried until lucky). Holds the kernel preempted the holder
/// through, and holds whose time attribution left unaccounted for lack of a task switch
/// in the trace, are set aside, counted; at most one in ten may be. Every hold lies in
/// one gap of the loop's own log (issue 36: the loop lost ~1 in 130 beside builds).
#[test]
fn issue13_task_truth_the_holder_is_named_with_its_time() {
    let test = "issue13_task_truth";
    let Some(cpus) = can_trace(test) else {
        return;
    };
    let _m = measuring();
    let (named, holds) = task_truth_attempt(cpus);
    assert!(holds >= 90, "{holds} holds");
    let (ok, words) = jitterscope::stats::misses::judge(holds - named, holds, 0.01);
    eprintln!("{test}: holds not named with their time: {words}");
    assert!(ok, "holds not named with their time: {words}");
}

/// One run: (holds named with their time, holds judged).
fn task_truth_attempt(cpus: (usize, usize)) -> (usize, usize) {
    let (clock, _) = ClockInfo::detect();
    let scale = clock.scale;
    let ms = Duration::from_millis;
    let (empty, empty_gaps, _) = traced_holds(cpus, &clock, ms(2), Duration::ZERO, ms(700));
    let mut background = background_of(&empty, &empty_gaps, "js-holder", scale);
    background.sort_unstable();
    let bg99 = background[background.len() * 99 / 100].max(0) as u64;
    let period = Duration::from_micros(15_013);
    let (inside, gaps, preempted) = traced_holds(cpus, &clock, period, ms(1) + ms(1) / 2, ms(2000));
    let j = judge_holds(&inside, &gaps, "js-holder", scale, bg99);
    if preempted > 0 {
        eprintln!("{preempted} holds set aside: the kernel preempted the holder");
    }
    // Issue 50: holds set aside by their cause (a switch the kernel did not record, steal)
    // count against the tenth as the unseen do.
    let aside = j.unseen + j.unrecorded + j.stolen;
    assert!(
        enough_held(j.holds, preempted + aside),
        "too few holds held and seen: {} judged, {preempted} preempted, {aside} set aside",
        j.holds,
    );
    eprintln!(
        "{} holds judged, {} named with their time, {} unseen, {} unrecorded, {} steal; \
         background p99 {bg99} ns over {} empty holds; misses: {:?}",
        j.holds,
        j.named,
        j.unseen,
        j.unrecorded,
        j.stolen,
        background.len(),
        &j.misses[..j.misses.len().min(5)]
    );
    (j.named, j.holds)
}

/// Holds of `busy` every `period` while the noise loop runs `duration` under a trace of
/// its CPU: the holds the holder ran through, every gap broken down, and the holds set
/// aside as preempted. Checks that the trace leaves tracefs as it found it.
fn traced_holds(
    (cpu, hk): (usize, usize),
    clock: &ClockInfo,
    period: Duration,
    busy: Duration,
    duration: Duration,
) -> (
    Vec<jitterscope::engine::inject::Injection>,
    Vec<jitterscope::stats::causes::GapBreakdown>,
    usize,
) {
    let before = tracing_state();
    let mut session = TraceSession::start(&CpuList::from_cpus(vec![cpu]), 4096).expect("trace");
    let cfg = NoiseConfig {
        event_log: 100_000,
        ..NoiseConfig::default()
    };
    // The loop at SCHED_OTHER: a real-time spinner would be throttled (950 ms a second)
    // and the holder with it, merging holds into 50 ms stalls; the holder preempts it all
    // the same.
    let mut plan = fifo1_plan((cpu, hk), duration);
    plan.sched = jitterscope::engine::sched::SchedRequest::OTHER;
    let done = AtomicBool::new(false);
    let ready = Barrier::new(2);
    let (run, holds, collected) = std::thread::scope(|s| {
        let reader = s.spawn(|| {
            jitterscope::engine::sched::pin_to(hk).unwrap();
            reader::collect(&session, &done)
        });
        let holder = std::thread::Builder::new()
            .name("js-holder".into())
            .spawn_scoped(s, || {
                let schedule = Schedule {
                    cpu,
                    priority: 2,
                    period,
                    busy,
                    run_for: duration + Duration::from_secs(2),
                    count: usize::MAX,
                };
                inject(schedule, &ready, &done, clock)
            })
            .unwrap();
        ready.wait();
        let run = noise::run(&cfg, &plan, clock, &AtomicBool::new(false)).unwrap();
        done.store(true, Ordering::Relaxed);
        (run, holder.join().unwrap(), reader.join().unwrap().unwrap())
    });
    session.close();
    let w = run.outcome.window.unwrap();
    let e = &run.entries[0];
    let a = attribute_noise_entry(e, &collected, clock.scale, w.start, usize::MAX).unwrap();
    // Said, since a gap over events the kernel overwrote is broken down without them.
    let lost: u64 = collected.lost.values().sum();
    if lost > 0 {
        eprintln!("{lost} events lost");
    }
    let (inside, preempted) = held_within(holds, w.start, w.deadline, clock.scale);
    // Holds of nothing are judged by attribution only (`background_of`).
    let unlogged = match busy.is_zero() {
        true => Vec::new(),
        false => unlogged_holds(&inside, e, w.start, clock.scale),
    };
    assert!(
        unlogged.is_empty(),
        "holds on the loop's CPU that no gap of its log covers (µs from the window's start, \
         which ends at {} µs; the loop ran {} µs): {unlogged:?}",
        clock.scale.to_ns(w.deadline - w.start) / 1000,
        e.runtime_ns / 1000
    );
    assert!(our_instances().is_empty(), "the instance is removed");
    assert_eq!(
        tracing_state(),
        before,
        "tracefs mounts and global settings are as before"
    );
    (inside, a.top, preempted)
}

/// The holds no single gap of the loop's own log covers, as (start, end) µs from the
/// window's start. Issue 36: beside builds one in ~130 began in the loop's bookkeeping of
/// the gap before (2.6–22 µs after it ended), before its first read or after its last.
fn unlogged_holds(
    holds: &[jitterscope::engine::inject::Injection],
    e: &jitterscope::probes::noise::NoiseEntry,
    start: u64,
    scale: jitterscope::engine::clock::Scale,
) -> Vec<(f64, f64)> {
    let log = e.events.as_ref().expect("the loop's log");
    let min_step = scale.to_ticks(e.loop_period.min_ns.round() as u64);
    let tol = scale.to_ticks(200);
    let gaps: Vec<(u64, u64)> = (log.start_tsc.iter().zip(&log.duration_ns))
        .map(|(&s, &d)| (s, s + scale.to_ticks(d) + min_step))
        .collect();
    let us = |t: u64| scale.to_ns(t.saturating_sub(start)) as f64 / 1e3;
    (holds.iter())
        .filter(|h| !(gaps.iter()).any(|&(s, en)| s <= h.start + tol && en + tol >= h.end))
        .map(|h| (us(h.start), us(h.end)))
        .collect()
}

/// Tick truth and coverage, through the command: on this kernel (no nohz_full) the local
/// timer vector's gaps come at CONFIG_HZ, and the cause table's shares add up to 100 %.
#[test]
fn issue13_tick_truth_and_coverage_through_noise_trace() {
    use jitterscope::system::kernel::KernelConfig;
    let Some((cpu, _)) = can_trace("issue13_tick_truth") else {
        return;
    };
    let Some(hz) = KernelConfig::read(std::path::Path::new("/")).hz() else {
        return skip(
            "issue13_tick_truth",
            "no kernel config to read CONFIG_HZ from",
        );
    };
    let nohz = std::fs::read_to_string("/sys/devices/system/cpu/nohz_full").unwrap_or_default();
    if CpuList::parse_kernel(nohz.trim()).is_ok_and(|l| l.contains(cpu)) {
        return skip(
            "issue13_tick_truth",
            "the CPU is nohz_full: a busy CPU has no tick",
        );
    }
    let _m = measuring();
    let before = tracing_state();
    let r: ResultFile = crate::util::json_result(&[
        "noise",
        "--trace",
        "-D",
        "2s",
        "-a",
        &cpu.to_string(),
        "-p",
        "1",
    ]);
    let e = r
        .entries::<jitterscope::probes::noise::NoiseEntry>()
        .next()
        .unwrap();
    let a = e.attribution.as_ref().expect("attributed");
    let shares: f64 = a.causes.iter().map(|c| c.share_pct).sum();
    assert!((shares - 100.0).abs() <= 0.5, "shares add up to {shares}");
    assert_eq!(
        a.gaps + a.unattributed_gaps,
        e.interruptions,
        "every gap is counted"
    );
    // The tick is the local timer vector that ran the tick's hrtimer.
    let tick = a
        .causes
        .iter()
        .find(|c| c.cause.starts_with("vector local_timer: tick_"))
        .unwrap_or_else(|| panic!("the tick is there: {:?}", a.causes));
    // The tick's rate from its period, and its count: never above HZ (beyond 2 %), and
    // below it only by the time the CPU idled, when NO_HZ_IDLE may stop it (after the
    // fair server throttled the loop and nothing else ran). Counted over the loop's own
    // span, which its gaps cover: a loop held off its CPU across the deadline ends late,
    // its last gap whole (a FIFO 50 spinner holding it 350 ms across the end: 2.100 s,
    // 513 ticks; a CI run's 557 against the run's 2.000 s read 278.5/s).
    let secs = e.runtime_ns as f64 / 1e9;
    let count_rate = tick.occurrences as f64 / secs;
    let period = tick.period_ns.expect("the tick has a period");
    let rate = 1e9 / period as f64;
    eprintln!(
        "tick: {} times in {} gaps over {secs:.3} s ({count_rate:.1}/s), period {period} ns \
         ({rate:.1}/s), CONFIG_HZ={hz}; the run {:.3} s, its largest gap {:?} ns",
        tick.occurrences,
        tick.gaps,
        r.run.actual_duration_ns as f64 / 1e9,
        e.summary.max_ns
    );
    let hz = f64::from(hz);
    assert!((rate - hz).abs() <= hz * 0.02, "{rate}/s against HZ={hz}");
    assert!(
        (0.9 * hz..=1.02 * hz).contains(&count_rate),
        "{count_rate}/s against HZ={hz}"
    );
    assert!(our_instances().is_empty());
    assert_eq!(tracing_state(), before);
}

/// Restoration: runs killed with SIGINT, SIGTERM and SIGKILL at random moments leave no
/// instance (after SIGKILL, the next run removes it), tracefs mounted as before and the
/// global settings unchanged.
#[test]
fn issue13_killed_runs_leave_tracefs_as_it_was() {
    use rustix::process::{Pid, Signal, kill_process};
    let Some((cpu, _)) = can_trace("issue13_restoration") else {
        return;
    };
    let _m = measuring();
    let before = tracing_state();
    let bin = crate::util::bin();
    let seed = std::process::id() as u64;
    for (i, sig) in [
        Signal::INT,
        Signal::TERM,
        Signal::KILL,
        Signal::INT,
        Signal::KILL,
    ]
    .into_iter()
    .enumerate()
    {
        let mut child = std::process::Command::new(&bin)
            .args(["noise", "--trace", "-D", "5s", "-q", "-a", &cpu.to_string()])
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // A moment from 50 to 700 ms in: before, during or after the session's start.
        let ms = 50 + (seed.wrapping_mul(2654435761).wrapping_add(i as u64 * 97) % 650);
        std::thread::sleep(Duration::from_millis(ms));
        let pid = Pid::from_raw(child.id() as i32).unwrap();
        let _ = kill_process(pid, sig);
        let status = child.wait().unwrap();
        eprintln!("{sig:?} after {ms} ms: {status:?}");
    }
    // One more run, which removes what the last SIGKILL left, and says so.
    let left = our_instances();
    let out =
        crate::util::jitterscope(&["noise", "--trace", "-D", "200ms", "-a", &cpu.to_string()]);
    let said = stderr_lines(&out);
    assert_eq!(out.status.code(), Some(0), "{said:?}");
    assert!(our_instances().is_empty(), "{:?}", our_instances());
    for name in &left {
        let line = format!("removed tracefs instance {name}, left by a run that was killed");
        assert!(said.iter().any(|l| l.contains(&line)), "{said:?}");
    }
    assert_eq!(tracing_state(), before);
}

/// Review 2 of issue 29: the header states what ran. Unprivileged, `noise --trace` runs
/// untraced, and its header does not say "traced" above the untraced figures.
#[test]
fn issue29_the_noise_header_says_traced_only_when_the_trace_ran() {
    let test = "issue29_header_traced";
    let Some(mut cmd) = crate::util::as_nobody(test) else {
        return;
    };
    let _m = measuring();
    let out = cmd
        .args(["noise", "--trace", "-D", "300ms"])
        .output()
        .unwrap();
    if crate::util::nobody_cannot_reach(test, &out) {
        return;
    }
    assert_eq!(out.status.code(), Some(0), "{:?}", stderr_lines(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let header = stdout.lines().find(|l| l.starts_with("noise: ")).unwrap();
    assert!(header.contains("threshold"), "{header}");
    assert!(!header.contains("traced"), "{header}");
}

/// Unprivileged: noise --trace runs, warns once, and records trace-unavailable.
#[test]
fn issue13_without_root_the_run_goes_on_and_says_why() {
    let Some(mut cmd) = crate::util::as_nobody("issue13_unprivileged") else {
        return;
    };
    let _m = measuring();
    let out = cmd
        .args(["noise", "--trace", "-D", "300ms", "--json"])
        .output()
        .unwrap();
    if crate::util::nobody_cannot_reach("issue13_unprivileged", &out) {
        return;
    }
    assert_eq!(out.status.code(), Some(0), "{:?}", stderr_lines(&out));
    let lines = stderr_lines(&out);
    let warned = lines
        .iter()
        .filter(|l| l.contains("no kernel trace"))
        .count();
    assert_eq!(warned, 1, "{lines:?}");
    let r = ResultFile::parse(&String::from_utf8_lossy(&out.stdout)).unwrap();
    assert!(r.run.degraded.iter().any(|d| d.kind == "trace-unavailable"));
    let e = r
        .entries::<jitterscope::probes::noise::NoiseEntry>()
        .next()
        .unwrap();
    assert!(e.attribution.is_none());
}

/// Timer truth: with a hold injected on the timer's CPU, the late wake-ups' breakdown
/// names the holding thread as what held the CPU past their deadlines.
#[test]
fn issue13_timer_truth_the_holder_blocks_the_late_wakeups() {
    let Some((cpu, _)) = can_trace("issue13_timer_truth") else {
        return;
    };
    let _m = measuring();
    let (clock, _) = ClockInfo::detect();
    let done = AtomicBool::new(false);
    let ready = Barrier::new(2);
    let (out, holds) = std::thread::scope(|s| {
        let holder = std::thread::Builder::new()
            .name("js-holder".into())
            .spawn_scoped(s, || {
                let schedule = Schedule {
                    cpu,
                    priority: 2,
                    period: Duration::from_micros(20_011),
                    busy: Duration::from_micros(1_500),
                    run_for: Duration::from_secs(5),
                    count: usize::MAX,
                };
                inject(schedule, &ready, &done, &clock)
            })
            .unwrap();
        ready.wait();
        let out = crate::util::jitterscope(&[
            "timer",
            "--trace",
            "--trace-above",
            "500us",
            // Every wake-up with its stamp, for the run's span on the counter.
            "--spikes",
            "1ns",
            "--spike-nodes",
            "10000",
            "-a",
            &cpu.to_string(),
            "-p",
            "1",
            "-i",
            "1000",
            "-D",
            "1500ms",
            "--no-dma-latency",
            "--json",
        ]);
        done.store(true, Ordering::Relaxed);
        (out, holder.join().unwrap())
    });
    assert_eq!(out.status.code(), Some(0), "{:?}", stderr_lines(&out));
    let r = ResultFile::parse(&String::from_utf8_lossy(&out.stdout)).unwrap();
    let t = r
        .entries::<jitterscope::probes::timer::TimerEntry>()
        .next()
        .unwrap();
    let a = t.attribution.as_ref().expect("attributed");
    // Holds made while the timer ran (it starts a little after the holder).
    let spikes = t
        .spikes
        .as_ref()
        .expect("every wake-up kept (--spikes 1ns)");
    let start = spikes.start_tsc.first().copied().unwrap_or(0);
    let end = spikes.start_tsc.last().copied().unwrap_or(0);
    let made = (holds.iter())
        .filter(|h| h.start >= start && h.end <= end)
        .count();
    let holder = a
        .causes
        .iter()
        .find(|c| c.cause.starts_with("task js-holder:"));
    eprintln!(
        "{made} holds; the holder's row: {holder:?}; top causes: {:?}",
        a.causes
            .iter()
            .map(|c| (&c.cause, c.gaps, c.total_ns))
            .take(4)
            .collect::<Vec<_>>()
    );
    let holder = holder.expect("the holder is named");
    // Each 1.5 ms hold covers a deadline of the 1 ms timer and makes it late by most of
    // the hold: the holder is what held the CPU past it.
    assert!(made >= 40, "{made} holds");
    let missed = (made as u64).saturating_sub(holder.gaps) as usize;
    let (ok, words) = jitterscope::stats::misses::judge(missed, made, 0.2);
    eprintln!("holds the holder is not named in: {words}");
    assert!(ok, "holds the holder is not named in: {words}");
    assert!(holder.median_ns >= 400_000, "{holder:?}");
}

/// Issue 22: every gap of a traced run is attributed, not the first N the event log
/// keeps. A holder takes the CPU 20 µs every 100 µs for 2 s (about 20 000 gaps) while
/// `noise --trace` keeps a log of only 100: the cause table must still cover every gap
/// the loop counted, with shares adding up to 100 %.
#[test]
fn issue22_every_gap_of_a_traced_run_is_attributed() {
    let Some((cpu, _)) = can_trace("issue22_every_gap") else {
        return;
    };
    let _m = measuring();
    let (clock, _) = ClockInfo::detect();
    let done = AtomicBool::new(false);
    let ready = Barrier::new(2);
    let cpu_s = cpu.to_string();
    let out = std::thread::scope(|s| {
        let holder = std::thread::Builder::new().name("js-holder".into());
        let holder = holder.spawn_scoped(s, || {
            let schedule = Schedule {
                cpu,
                priority: 2,
                period: Duration::from_micros(100),
                busy: Duration::from_micros(20),
                run_for: Duration::from_secs(6),
                count: usize::MAX,
            };
            inject(schedule, &ready, &done, &clock)
        });
        let holder = holder.expect("the holder starts");
        ready.wait();
        // The loop at SCHED_FIFO 1, under the holder's 2: at the default policy a build
        // beside it takes its CPU for longer than the holder does (rustfmt 45 % of the
        // gaps' time against the holder's 33 %, beside three builds), and the holder
        // leading says nothing.
        let args = [
            "noise",
            "-a",
            &cpu_s,
            "-p",
            "1",
            "-D",
            "2s",
            "--trace",
            "--event-log",
            "100",
        ];
        let out = crate::util::jitterscope(&[&args[..], &["--json"]].concat());
        done.store(true, Ordering::Relaxed);
        holder.join().unwrap();
        out
    });
    assert_eq!(out.status.code(), Some(0), "{:?}", stderr_lines(&out));
    let r = ResultFile::parse(&String::from_utf8_lossy(&out.stdout)).unwrap();
    let n = r
        .probes
        .iter()
        .find_map(jitterscope::report::ProbeEntry::get::<jitterscope::probes::noise::NoiseEntry>)
        .unwrap();
    let a = n.attribution.as_ref().expect("attributed");
    let shares: f64 = a.causes.iter().map(|c| c.share_pct).sum();
    eprintln!(
        "{} interruptions, {} attributed, {} unattributed; shares {shares:.3} %; events \
         read {}, lost {}",
        n.interruptions, a.gaps, a.unattributed_gaps, a.events_read, a.events_lost
    );
    // About 20 000: the loop has its CPU but for the holder and the 50 ms a second the
    // kernel gives fair tasks. Ten times the log's 100 at the least.
    assert!(
        n.interruptions > 1_000,
        "the holder made {} gaps",
        n.interruptions
    );
    // Every gap is counted; those over a span whose events were lost, or dropped from
    // the queue to a reader a whole queue behind (a reader held off its CPU by a build
    // beside), are unattributed rather than named (issue 29), and only those; the run
    // says so.
    assert_eq!(
        a.gaps + a.unattributed_gaps,
        n.interruptions,
        "every gap is counted"
    );
    let behind = (r.run.warnings.iter()).any(|w| w.starts_with("the trace reader fell"));
    if a.events_lost == 0 && !behind {
        assert_eq!(a.unattributed_gaps, 0, "every gap is attributed");
        assert!(a.gaps > 1_000, "{} gaps attributed", a.gaps);
    } else {
        // A reader held off its housekeeping CPU (beside three builds and a test suite, a
        // debug build's lost 56 591 of 173 465 events) leaves most gaps over a loss: said
        // in the run, and only the gaps it could attribute are judged below.
        let said = (r.run.warnings.iter()).any(|w| w.starts_with("trace events were lost"));
        assert!(said || behind, "losses not said: {:?}", r.run.warnings);
        assert!(a.gaps > 0, "no gap attributed");
    }
    assert!((shares - 100.0).abs() <= 0.5, "{shares}");
    assert!(
        a.causes[0].cause.starts_with("task js-holder"),
        "the holder leads: {:?}",
        &a.causes[..3.min(a.causes.len())]
    );
}

/// Issue 22: a SCHED_FIFO loop that spins is throttled about 50 ms a second (RT throttling
/// or the fair server giving the CPU away); those gaps are named after the throttle, not
/// after idle or the task that happened to run.
#[test]
fn issue22_rt_throttling_is_named() {
    let test = "issue22_rt_throttling_is_named";
    let Some((_, cpu)) = can_trace(test) else {
        return;
    };
    // Held before tracefs is tried: a session another test closes may unmount it.
    let _m = measuring();
    if !crate::util::tracefs_usable() {
        return skip(test, "tracefs cannot be mounted or used here");
    }
    let r: ResultFile = crate::util::json_result(&[
        "noise",
        "--trace",
        "-D",
        "3s",
        "-a",
        &cpu.to_string(),
        "-p",
        "10",
    ]);
    let e = r
        .entries::<jitterscope::probes::noise::NoiseEntry>()
        .next()
        .unwrap();
    let a = e.attribution.as_ref().expect("attributed");
    // Throttling takes ~50 ms at a time; nothing else on a quiet CPU takes 20 ms.
    let big: Vec<_> = a
        .top
        .iter()
        .filter(|g| g.duration_ns >= 20_000_000)
        .collect();
    if big.is_empty() {
        let rt = std::fs::read_to_string("/proc/sys/kernel/sched_rt_runtime_us");
        return skip(
            test,
            &format!("no gap of 20 ms or more: nothing throttled (sched_rt_runtime_us {rt:?})"),
        );
    }
    // Some switches are never recorded on this guest (perf misses the same ones). A
    // window whose start lost the loop's switch out is still named from the first switch
    // recorded in it (issue 29); what came before that switch is unknowable and stays
    // unaccounted. That time, and only that, is left out of the judgement, counted and
    // printed; what the trace saw must be the throttle, never idle.
    use jitterscope::stats::causes::{CauseKind, Part};
    let sum = |f: &dyn Fn(&Part) -> bool| -> u64 {
        (big.iter().flat_map(|g| &g.parts))
            .filter(|p| f(p))
            .map(|p| p.duration_ns)
            .sum()
    };
    let all: u64 = big.iter().map(|g| g.duration_ns).sum();
    let blind = sum(&|p| p.kind == CauseKind::Unaccounted);
    let idle = sum(&|p| p.cause.starts_with("idle"));
    let throttled = sum(&|p| p.kind == CauseKind::Throttling);
    if blind >= 1_000_000 {
        eprintln!(
            "{test}: {} µs of the {} µs of {} gaps of 20 ms or more no event explains (events \
             lost: {}); left out",
            blind / 1000,
            all / 1000,
            big.len(),
            a.events_lost
        );
    }
    let seen = all - blind.min(all);
    assert!(
        seen > 0,
        "no event in any of the {} throttled gaps",
        big.len()
    );
    let row = a
        .top_of(jitterscope::stats::causes::CauseKind::Throttling)
        .unwrap_or_else(|| panic!("a throttling row: {:?}", a.causes));
    eprintln!(
        "{} gaps of 20 ms or more, {} µs, {} µs of it under \"{}\" (ran: {:?})",
        big.len(),
        all / 1000,
        throttled / 1000,
        row.cause,
        row.tasks
    );
    assert!(
        row.cause
            .starts_with("real-time throttling (kernel.sched_rt_runtime_us = ")
            || row.cause.starts_with("fair server ("),
        "{}",
        row.cause
    );
    assert!(!row.tasks.is_empty(), "what ran is listed");
    assert!(
        throttled as f64 >= 0.95 * seen as f64,
        "{throttled} of the {seen} ns events explain throttled: {:?}",
        big.iter().map(|g| &g.parts).collect::<Vec<_>>()
    );
    assert!(
        idle * 100 <= all,
        "{idle} of {all} ns named idle: {:?}",
        big.iter().map(|g| &g.parts).collect::<Vec<_>>()
    );
}

/// Runs `args` (a traced command, `--json` added) while a SCHED_FIFO 2 holder named
/// `js-holder` takes `cpu` for `busy` every `period`: the result, and the holds.
fn with_holds(
    cpu: usize,
    period: Duration,
    busy: Duration,
    args: &[&str],
) -> (ResultFile, Vec<jitterscope::engine::inject::Injection>) {
    let (clock, _) = ClockInfo::detect();
    let done = AtomicBool::new(false);
    let ready = Barrier::new(2);
    let (out, holds) = std::thread::scope(|s| {
        let holder = std::thread::Builder::new().name("js-holder".into());
        let holder = holder.spawn_scoped(s, || {
            let schedule = Schedule {
                cpu,
                priority: 2,
                period,
                busy,
                run_for: Duration::from_secs(10),
                count: usize::MAX,
            };
            inject(schedule, &ready, &done, &clock)
        });
        let holder = holder.expect("the holder starts");
        ready.wait();
        let out = crate::util::jitterscope(&[args, &["--json"]].concat());
        done.store(true, Ordering::Relaxed);
        (out, holder.join().unwrap())
    });
    assert_eq!(out.status.code(), Some(0), "{:?}", stderr_lines(&out));
    let r = ResultFile::parse(&String::from_utf8_lossy(&out.stdout)).unwrap();
    (r, holds)
}

/// The measuring window of an entry on the counter, from a largest event's two stamps
/// (ns since the start, and the counter) and the runtime.
fn window_of(largest: &[jitterscope::stats::events::EventOut], runtime_ns: u64) -> (u64, u64) {
    let (clock, _) = ClockInfo::detect();
    let e = largest.first().expect("a largest event");
    let start = e.start_tsc - clock.scale.to_ticks(e.start_ns);
    (start, start + clock.scale.to_ticks(runtime_ns))
}

/// Issue 29: a traced run keeps no event log unless asked, and still sees and names a
/// known hold: a SCHED_FIFO holder takes the CPU 1.5 ms every ~15 ms; its row counts a
/// gap for (nearly) each hold made inside the run, with the hold's length, and every
/// gap the loop counted is counted, and attributed unless the run says it lost events
/// or its reader fell behind (issue 36: the count alone bounded nothing).
#[test]
fn issue29_an_injected_hold_is_attributed_with_no_event_log() {
    let Some((cpu, _)) = can_trace("issue29_hold_without_event_log") else {
        return;
    };
    let _m = measuring();
    let busy = Duration::from_micros(1_500);
    let cpu_s = cpu.to_string();
    let (r, holds) = with_holds(
        cpu,
        Duration::from_micros(15_013),
        busy,
        // The loop at SCHED_FIFO 1, under the holder's 2: at the default policy a build
        // beside it kept it off its CPU for up to 14 ms at a time, one gap took several
        // holds, and the holder was named in 28 gaps for 96 holds.
        &["noise", "--trace", "-a", &cpu_s, "-p", "1", "-D", "1500ms"],
    );
    let e = r
        .entries::<jitterscope::probes::noise::NoiseEntry>()
        .next()
        .unwrap();
    assert!(e.events.is_none(), "no event log was asked for");
    assert_eq!(e.config.event_log, 0);
    let a = e.attribution.as_ref().expect("attributed");
    assert_eq!(a.gaps + a.unattributed_gaps, e.interruptions);
    let behind = (r.run.warnings.iter()).any(|w| w.starts_with("the trace reader fell"));
    if a.events_lost == 0 && !behind {
        assert_eq!(
            a.unattributed_gaps, 0,
            "no loss said, yet gaps unattributed"
        );
    }
    let (from, to) = window_of(&e.largest, e.runtime_ns);
    let made = holds
        .iter()
        .filter(|h| h.start >= from && h.end <= to)
        .count() as u64;
    let holder = a
        .causes
        .iter()
        .find(|c| c.cause.starts_with("task js-holder:"));
    eprintln!(
        "{made} holds in the run; {} gaps, {} unattributed; the holder's row: {holder:?}",
        a.gaps, a.unattributed_gaps
    );
    assert!(made >= 50, "{made} holds");
    let holder = holder.expect("the holder is named");
    // A hold the kernel preempted the holder through is no hold (at most one in ten).
    let missed = made.saturating_sub(holder.gaps) as usize;
    let (ok, words) = jitterscope::stats::misses::judge(missed, made as usize, 0.1);
    eprintln!("holds the holder is not named in: {words}");
    assert!(ok, "holds the holder is not named in: {words}");
    let ms = busy.as_nanos() as u64;
    assert!(
        (ms * 9 / 10..=ms * 13 / 10).contains(&holder.median_ns),
        "median {} ns for holds of {ms} ns",
        holder.median_ns
    );
}

/// Issue 29: a traced result holds nothing per gap: between a short and a longer run of
/// the same CPU under the same holder (a gap every 100 µs), each part of the result that
/// may fill up as a run goes on (largest events, the series, the cause rows, the broken-
/// down gaps) stays within its cap, and the rest grows by less than a byte per extra gap
/// (a per-gap list costs at least 16 bytes a gap). The capped parts themselves may grow
/// by tens of KB between the two runs on a noisy host, as the longer run meets more
/// causes and longer gaps of more parts: bounded, not per gap.
#[test]
fn issue29_a_traced_result_grows_with_no_gap_count() {
    use jitterscope::probes::noise::{DEFAULT_LARGEST, NoiseEntry};
    use jitterscope::stats::series;
    use jitterscope::trace::attribute::{MAX_CAUSES, MAX_PARTS};
    use jitterscope::trace::stream::TOP;
    let test = "issue29_a_traced_result_grows_with_no_gap_count";
    let Some((cpu, _)) = can_trace(test) else {
        return;
    };
    let _m = measuring();
    let cpu_s = cpu.to_string();
    let size = |d: &str| {
        let (r, _) = with_holds(
            cpu,
            Duration::from_micros(100),
            Duration::from_micros(20),
            &["noise", "--trace", "-a", &cpu_s, "-D", d],
        );
        let e: NoiseEntry = r.entries::<NoiseEntry>().next().unwrap().clone();
        assert!(e.events.is_none());
        let a = e
            .attribution
            .as_ref()
            .expect("a traced entry is attributed");
        assert!(
            e.largest.len() <= DEFAULT_LARGEST,
            "{} largest",
            e.largest.len()
        );
        assert!(e.series.events.len() <= series::CAPACITY);
        // Past the cap a cause folds into its kind's `other` row: at most MAX_CAUSES
        // named, and one `other` row per kind (6 kinds fold; unaccounted never does).
        let others = (a.causes.iter())
            .filter(|c| c.cause.starts_with("other "))
            .count();
        assert!(
            a.causes.len() - others <= MAX_CAUSES && others <= 6,
            "{} cause rows, {others} of them other",
            a.causes.len()
        );
        assert!(a.top.len() <= TOP, "{} broken-down gaps", a.top.len());
        for g in &a.top {
            // The first half in time order, then the rest summed per cause.
            assert!(
                g.parts.len() <= MAX_PARTS / 2 + MAX_CAUSES + 1,
                "{}",
                g.parts.len()
            );
        }
        let capped = [
            serde_json::to_string(&e.largest).unwrap().len(),
            serde_json::to_string(&e.series).unwrap().len(),
            serde_json::to_string(&e.histogram).unwrap().len(),
            serde_json::to_string(&a.causes).unwrap().len(),
            serde_json::to_string(&a.top).unwrap().len(),
        ];
        // Compact, as the parts were: the file's indentation grows with them.
        let whole = serde_json::to_string(&r).unwrap().len();
        let rest = whole - capped.iter().sum::<usize>();
        (whole as u64, rest as u64, e.interruptions, e.runtime_ns)
    };
    let (short, short_rest, short_gaps, short_ns) = size("500ms");
    let (long, long_rest, long_gaps, long_ns) = size("1500ms");
    let extra = long_gaps.saturating_sub(short_gaps);
    eprintln!(
        "{short} bytes compact ({short_rest} outside the capped parts) for {short_gaps} gaps in \
         {short_ns} ns; {long} bytes ({long_rest}) for {long_gaps} gaps in {long_ns} ns"
    );
    if extra < 2_000 {
        return skip(
            test,
            &format!("only {extra} more gaps in the longer run: no signal"),
        );
    }
    let grown = long_rest.saturating_sub(short_rest);
    assert!(
        grown < extra,
        "{grown} bytes more outside the capped parts for {extra} more gaps: something is \
         kept per gap"
    );
}

/// Issue 29: `timer --trace` hands its wake-ups to a reader as they happen and keeps
/// no wake-up list: without `--trace-above` it attributes those at or above the running
/// p99, which a 1.5 ms hold every 20 ms (about one wake-up in 13 late by most of the
/// hold) puts among the held ones: the holder is named, and the method says how they
/// were picked.
#[test]
fn issue29_timer_trace_picks_the_late_wakeups_as_they_come() {
    let Some((cpu, _)) = can_trace("issue29_timer_running_p99") else {
        return;
    };
    let _m = measuring();
    let cpu_s = cpu.to_string();
    let (r, holds) = with_holds(
        cpu,
        Duration::from_micros(20_011),
        Duration::from_micros(1_500),
        &[
            "timer",
            "--trace",
            "-a",
            &cpu_s,
            "-p",
            "1",
            "-i",
            "1000",
            "-D",
            "2s",
            "--no-dma-latency",
        ],
    );
    let t = r
        .entries::<jitterscope::probes::timer::TimerEntry>()
        .next()
        .unwrap();
    assert!(t.spikes.is_none(), "no wake-up list without --spikes");
    let a = t.attribution.as_ref().expect("attributed");
    eprintln!(
        "{} wake-ups attributed by {:?}; causes {:?}",
        a.gaps,
        a.method,
        a.causes
            .iter()
            .map(|c| (&c.cause, c.gaps, c.median_ns))
            .take(4)
            .collect::<Vec<_>>()
    );
    assert!(
        a.method.contains("p99 of the thread's wake-ups so far"),
        "{}",
        a.method
    );
    assert!(a.gaps >= 10, "{} wake-ups", a.gaps);
    assert!(
        (a.causes.iter()).any(|c| c.cause.starts_with("task js-holder:")),
        "the holder is named"
    );
    // Judged by the holds, not by the background: a wake-up a hold made late (a hold over
    // at least half its span) is the holder's, however many of the host's own late
    // wake-ups compete for the p99 (beside a build they once outnumbered the held ones
    // among those picked), at a 1 % miss rate by the binomial tail. One that a hold only
    // began, the rest of it idle (the vCPU not run: 7 of 8 so in one run here, each
    // 2.2 ms late after a 1.5 ms hold), is the host's doing, not the hold's.
    let scale = ClockInfo::detect().0.scale;
    let held: Vec<_> = (a.top.iter())
        .filter(|g| {
            let (start, span) = (g.start_tsc, scale.to_ticks(g.duration_ns));
            let over = |h: &jitterscope::engine::inject::Injection| {
                (start + span).min(h.end).saturating_sub(start.max(h.start))
            };
            holds.iter().any(|h| 2 * over(h) >= span)
        })
        .collect();
    let named = (held.iter())
        .filter(|g| top_cause(g).starts_with("task js-holder:"))
        .count();
    assert!(!held.is_empty(), "no held wake-up among those picked");
    let (ok, words) = jitterscope::stats::misses::judge(held.len() - named, held.len(), 0.01);
    assert!(
        ok,
        "{words}: held wake-ups not named after the holder; the top causes: {:?}",
        (held.iter()).map(|g| top_cause(g)).collect::<Vec<_>>()
    );
    eprintln!("held wake-ups named after the holder: {words}");
}

/// The cause that took most of a gap.
fn top_cause(g: &jitterscope::stats::causes::GapBreakdown) -> String {
    let mut by: Vec<(&str, u64)> = Vec::new();
    for p in &g.parts {
        match by.iter_mut().find(|c| c.0 == p.cause) {
            Some(c) => c.1 += p.duration_ns,
            None => by.push((&p.cause, p.duration_ns)),
        }
    }
    (by.iter().max_by_key(|c| c.1)).map_or(String::new(), |c| c.0.to_string())
}
