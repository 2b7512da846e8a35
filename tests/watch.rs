//! Issue 25: `jitterscope watch` against ground truth. A thread of this test sleeps to
//! absolute deadlines and records how late it ran; a SCHED_FIFO hog of a known name holds
//! its CPU 300 µs every 10 ms. `watch --tid` must name the hog as the main cause of the
//! delays the hog made, and see them as long as the thread did. Needs root, SCHED_FIFO,
//! two CPUs and tracefs; holds the measuring lock.

use std::process::Command;
use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use jitterscope::engine::clock::{self, ClockInfo};
use jitterscope::report::ResultFile;
use jitterscope::stats::misses;
use rustix::time::{ClockId, Timespec};

use crate::injector::{Schedule, inject};
use crate::util::{
    assert_bad_input, bin, fifo_available, is_root, measuring, our_instances, skip, tracefs_usable,
    two_cpus,
};

/// The hog's hold and period.
const HOLD: Duration = Duration::from_micros(300);
const HOG_PERIOD: Duration = Duration::from_millis(10);
/// The sleeper's period: not a divisor of the hog's, so that its deadlines fall at every
/// point of the holds in turn and the delays spread over 0–300 µs.
const SLEEP_NS: u64 = 1_030_000;

/// At SCHED_FIFO 5, sleeps to deadlines `SLEEP_NS` apart on `cpu` until `stop`, keeping each lateness
/// (deadline on CLOCK_MONOTONIC, and deadline to running, ns) while `recording`, for
/// the deadlines it slept to.
fn sleeper(
    cpu: usize,
    tid: std::sync::mpsc::Sender<u32>,
    recording: &AtomicBool,
    stop: &AtomicBool,
) -> Vec<(u64, u64)> {
    become_sleeper(cpu);
    tid.send(rustix::thread::gettid().as_raw_nonzero().get() as u32)
        .unwrap();
    sleep_to_deadlines(recording, stop)
}

/// Makes this thread the sleeper: SCHED_FIFO 5, pinned to `cpu`, timer slack 1 ns.
fn become_sleeper(cpu: usize) {
    use jitterscope::engine::sched::{Policy, SchedRequest, pin_to, set_policy};
    // Real-time below the hog: only the hog (and the kernel) can hold it off, not the
    // builds and tests that share this machine.
    set_policy(SchedRequest {
        policy: Policy::Fifo,
        priority: 5,
    })
    .expect("SCHED_FIFO");
    pin_to(cpu).expect("pinned");
    // The default 50 µs of slack would move the timer itself, which no run-queue delay
    // shows.
    let _ = jitterscope::engine::calls::set_timer_slack(1);
}

/// The sleeper's loop: see `sleeper`.
fn sleep_to_deadlines(recording: &AtomicBool, stop: &AtomicBool) -> Vec<(u64, u64)> {
    let mut late = Vec::new();
    let mut next = clock::monotonic_ns();
    let mut ran = next;
    while !stop.load(Ordering::Relaxed) {
        next += SLEEP_NS;
        let ts = Timespec {
            tv_sec: (next / 1_000_000_000) as i64,
            tv_nsec: (next % 1_000_000_000) as i64,
        };
        let _ = rustix::thread::clock_nanosleep_absolute(ClockId::Monotonic, &ts);
        // A deadline already past when the last wake-up ran was no sleep, so no
        // wake-up: a catch-up, left out.
        let slept = next > ran;
        ran = clock::monotonic_ns();
        if recording.load(Ordering::Relaxed) && slept {
            late.push((next, ran.saturating_sub(next)));
        }
    }
    late
}

/// The value at quantile `q` of sorted `v`.
fn at(v: &[u64], q: f64) -> u64 {
    v[((v.len() - 1) as f64 * q).round() as usize]
}

/// Root, SCHED_FIFO, two CPUs and tracefs: the measured CPU and the housekeeping one.
pub(crate) fn can_watch(test: &str) -> Option<(usize, usize)> {
    if !is_root() {
        skip(test, "tracefs instances need root");
        return None;
    }
    if fifo_available().is_err() {
        skip(test, "the hog and the sleeper need SCHED_FIFO");
        return None;
    }
    let Some(cpus) = two_cpus() else {
        skip(test, "needs two usable CPUs");
        return None;
    };
    if !tracefs_usable() {
        skip(test, "tracefs cannot be mounted here");
        return None;
    }
    Some(cpus)
}

/// Runs the sleeper and the hog on `cpu` while `during` runs; what the sleeper saw
/// while `during` had `recording` set, the hog's holds, and what `during` returned.
pub(crate) fn with_sleeper_and_hog<T: Send>(
    cpu: usize,
    during: impl FnOnce(u32, &AtomicBool) -> T + Send,
) -> (
    Vec<(u64, u64)>,
    Vec<jitterscope::engine::inject::Injection>,
    T,
) {
    let clock = ClockInfo::detect().0;
    let (stop, recording) = (AtomicBool::new(false), AtomicBool::new(false));
    let ready = Barrier::new(2);
    std::thread::scope(|s| {
        let (tx, rx) = std::sync::mpsc::channel();
        let sleeper = std::thread::Builder::new()
            .name("js-sleeper".into())
            .spawn_scoped(s, || sleeper(cpu, tx, &recording, &stop))
            .unwrap();
        let tid = rx.recv().unwrap();
        let (ready, stop_ref, clock) = (&ready, &stop, &clock);
        let schedule = Schedule {
            cpu,
            priority: 10,
            period: HOG_PERIOD,
            busy: HOLD,
            run_for: Duration::from_secs(8),
            count: usize::MAX,
        };
        let hog = std::thread::Builder::new()
            .name("js-hog".into())
            .spawn_scoped(s, move || inject(schedule, ready, stop_ref, clock))
            .unwrap();
        ready.wait();
        let out = during(tid, &recording);
        recording.store(false, Ordering::Relaxed);
        stop.store(true, Ordering::Relaxed);
        (sleeper.join().unwrap(), hog.join().unwrap(), out)
    })
}

/// Ground truth, delay by delay: the sleeper's wake-ups that fell inside a hold of the
/// hog, as the trace saw them (wake-up to running) and as the sleeper did (deadline to
/// running). Its other delays are the shared machine's (builds on CPU 1, kernel sections
/// that do not yield) and are no ground truth.
#[test]
fn issue25_the_delays_a_hog_made_are_the_hogs_and_as_long_as_the_thread_saw() {
    use jitterscope::trace::attribute::{self, Context, Gap, MeasurerKind, Naming, Throttle};
    use jitterscope::trace::reader;
    use jitterscope::trace::session::TraceSession;
    use jitterscope::trace::watch::{Watched, wakeup_delays};
    let test = "issue25_the_delays_a_hog_made_are_the_hogs_and_as_long_as_the_thread_saw";
    let _m = measuring();
    let Some((cpu, hk)) = can_watch(test) else {
        return;
    };
    let clock = ClockInfo::detect().0;
    let online = jitterscope::engine::cpu::CpuUniverse::detect()
        .unwrap()
        .online;
    let mut session = TraceSession::start_with(&online, 4096, &["sched:sched_wakeup_new"])
        .expect("a trace session");
    let done = AtomicBool::new(false);
    let (late, holds, (tid, collected, window)) = with_sleeper_and_hog(cpu, |tid, recording| {
        std::thread::scope(|s| {
            let reader = s.spawn(|| {
                let _ = jitterscope::engine::sched::pin_to(hk);
                reader::collect(&session, &done)
            });
            let from = clock::now();
            recording.store(true, Ordering::Relaxed);
            std::thread::sleep(Duration::from_secs(3));
            recording.store(false, Ordering::Relaxed);
            let to = clock::now();
            done.store(true, Ordering::Relaxed);
            (tid, reader.join().unwrap().expect("the trace"), (from, to))
        })
    });
    session.close();
    let name = session
        .dir
        .file_name()
        .unwrap()
        .to_string_lossy()
        .to_string();
    assert!(!our_instances().contains(&name), "the instance was removed");
    let scale = clock.scale;
    let watched = Watched::Tids([tid].into_iter().collect());
    let mut all = wakeup_delays(
        &collected.per_cpu,
        &collected.decoder.names,
        &watched,
        scale,
    );
    let delays = all.remove(&tid).unwrap_or_default();
    let (held, preempted) =
        jitterscope::engine::inject::held_within(holds, window.0, window.1, scale);
    assert!(
        held.len() > 200,
        "{} holds, {preempted} preempted",
        held.len()
    );
    let floor = HOLD.as_nanos() as u64 / 2;
    let in_hold_mono =
        |t: u64| (held.iter()).any(|h| h.start_monotonic_ns <= t && t < h.end_monotonic_ns);
    // The delays the program saw above D/2 whose deadline fell inside a hold. One within
    // 20 µs of D/2 may fall on either side of it by the two clocks: left out.
    let mine: Vec<(u64, u64)> = (late.iter())
        .filter(|&&(deadline, l)| l >= floor + 20_000 && in_hold_mono(deadline))
        .copied()
        .collect();
    // Matched one by one: the traced wake-up delay that ended when the program ran (the
    // holds tie the counter to CLOCK_MONOTONIC; the program's period is 1.03 ms).
    // A hold's two clocks are read a moment apart, and an interrupt between them moves
    // one pair by µs: the median offset of the holds within 50 ms of `t` ties them.
    let offsets: Vec<(u64, i128)> = (held.iter())
        .map(|h| {
            (
                h.start,
                h.start_monotonic_ns as i128 - scale.to_ns(h.start) as i128,
            )
        })
        .collect();
    let near = scale.to_ticks(50_000_000);
    let to_mono = |t: u64| {
        let mut o: Vec<i128> = (offsets.iter())
            .filter(|(at, _)| at.abs_diff(t) <= near)
            .map(|(_, o)| *o)
            .collect();
        o.sort_unstable();
        let o = o.get(o.len() / 2).copied().unwrap_or(offsets[0].1);
        (scale.to_ns(t) as i128 + o) as u64
    };
    // Each as (the program's lateness less its timer's way, the gap, the traced delay).
    // The program's clock counts from the deadline, a wake-up delay from the wake-up: the
    // way between is the timer's (its interrupt, the wake-up), ~10 µs on these guests,
    // and the trace's wake-up event measures it delay by delay.
    let pairs: Vec<(u64, Gap, u64)> = (mine.iter())
        .filter_map(|&(deadline, l)| {
            let ran = deadline + l;
            let d =
                (delays.iter()).find(|d| d.0 == cpu && to_mono(d.1.end).abs_diff(ran) <= 50_000)?;
            let timer = to_mono(d.1.start).saturating_sub(deadline);
            Some((l.saturating_sub(timer), d.1, d.2))
        })
        .collect();
    eprintln!(
        "{test}: the program saw {} delays over {} µs in holds, {} matched in the trace; \
         {} events, {} lost",
        mine.len(),
        floor / 1000,
        pairs.len(),
        collected.read.values().sum::<u64>(),
        collected.lost.values().sum::<u64>()
    );
    assert!(
        mine.len() >= 30,
        "the program saw {} hog delays",
        mine.len()
    );
    // Each share below is judged by the misses its rate allows over the samples there
    // are (stats::misses), not by a fixed share that one stray sample breaks.
    let (ok, words) = misses::judge(mine.len() - pairs.len(), mine.len(), 0.10);
    eprintln!("{test}: hog delays without a traced wake-up delay: {words}");
    assert!(
        ok,
        "the trace has no wake-up delay for some of the program's hog delays: {words}"
    );
    // Delay by delay within 5 % and 5 µs, and so at p50 and p99.
    let agrees = |&&(l, _, d): &&(u64, Gap, u64)| l.abs_diff(d) <= l / 20 + 5_000;
    let off: Vec<i64> = (pairs.iter())
        .filter(|p| !agrees(p))
        .map(|&(l, _, d)| l as i64 - d as i64)
        .collect();
    // The trace's delay ends at the switch that ran the thread; the program reads its
    // clock after its way back to user space, which a stall of the vCPU (no guest event
    // shows one) lengthens by tens of µs now and then: 26–45 µs in 6 of 45 delays on an
    // AMD guest beside three builds, with no event between the switch and the clock read.
    // A trace that cut delays short would show at p50 too; one longer than the thread saw
    // is the tool's alone. So: the trace longer at most 1 %, the program longer at most
    // 10 % (the rate this test allows the host's other doings), p50 both ways.
    // What the trace holds around a delay, on every CPU, for the record.
    let dump = |g: Gap| {
        for (c, evs) in &collected.per_cpu {
            for e in evs
                .iter()
                .filter(|e| e.ts + scale.to_ticks(300_000) >= g.start && e.ts <= g.end)
            {
                let rel = e.ts as i64 - g.start as i64;
                eprintln!(
                    "  cpu {c} {:+} ns {:?}",
                    scale.to_ns(rel.unsigned_abs()) as i64 * rel.signum(),
                    e.kind
                );
            }
        }
    };
    for &(l, g, d) in pairs.iter().filter(|p| !agrees(p)) {
        eprintln!("{test}: program {l} ns past its timer, trace {d} ns; the events:");
        dump(g);
    }
    // Never longer in the trace than the program saw (by more than the tolerance).
    let trace_longer = off.iter().filter(|&&o| o < 0).count();
    let (ok, words) = misses::judge(trace_longer, pairs.len(), 0.01);
    eprintln!("{test}: pairs the trace made longer: {words}");
    assert!(
        ok,
        "the trace made delays longer than the program saw: {words}; {off:?} ns"
    );
    let (ok, words) = misses::judge(off.len() - trace_longer, pairs.len(), 0.10);
    eprintln!("{test}: pairs the program saw longer: {words}");
    assert!(ok, "pairs disagree: {words}; program − trace: {off:?} ns");
    let quantiles = |f: fn(&(u64, Gap, u64)) -> u64| {
        let mut v: Vec<u64> = pairs.iter().map(f).collect();
        v.sort_unstable();
        (at(&v, 0.5), at(&v, 0.99))
    };
    let (m50, m99) = quantiles(|p| p.0);
    let (s50, s99) = quantiles(|p| p.2);
    for (q, m, s) in [(50, m50, s50), (99, m99, s99)] {
        eprintln!("{test}: p{q} program {m} ns past its timer, watch {s} ns");
        // At p99 one stall on the way back may be the program's largest: one side.
        let tol = m / 20 + 5_000;
        let cut_short = q == 50 && m > s + tol;
        assert!(
            s <= m + tol && !cut_short,
            "p{q}: the program saw {m} ns past its timer, the trace {s} ns"
        );
    }
    // The hog is the top cause of each matched delay whose wake-up fell inside a hold
    // (one that woke after the hold, its timer late, is not the hog's).
    let in_hold = |t: u64| held.iter().any(|h| h.start <= t && t < h.end);
    let gaps: Vec<(Gap, u64)> = (pairs.iter())
        .filter(|p| in_hold(p.1.start))
        .map(|&(_, g, d)| (g, d))
        .collect();
    let (ok, words) = misses::judge(pairs.len() - gaps.len(), pairs.len(), 0.10);
    eprintln!("{test}: matched delays that woke outside a hold: {words}");
    assert!(ok, "matched delays woke outside a hold: {words}");
    let symbols = std::collections::HashMap::new();
    let cx = Context {
        names: &collected.decoder.names,
        symbols: &symbols,
        scale,
        run_start: 0,
        measurer: tid,
        top: 5,
        measurer_kind: MeasurerKind::Sleeps,
        naming: Naming::Full,
        throttle: &Throttle::default(),
        // The sleeper sleeps.
    };
    let events = &collected.per_cpu[&cpu];
    let mains: Vec<String> = (gaps.iter())
        .map(|g| {
            let a = attribute::attribute(std::slice::from_ref(g), events, &cx);
            let main = a.causes.iter().max_by_key(|c| c.largest_in);
            let main = main.map(|c| c.cause.clone()).unwrap_or_default();
            if !main.starts_with("task js-hog:") {
                eprintln!("{test}: a hog delay named {main}; the events:");
                dump(g.0);
            }
            main
        })
        .collect();
    // Issue 50: a delay whose hog switch the kernel did not record is named so, its
    // real cause, and set aside (at most one in ten), not left "unaccounted".
    let unrecorded = (mains.iter())
        .filter(|m| m.as_str() == attribute::UNRECORDED)
        .count();
    let others: Vec<&String> = (mains.iter())
        .filter(|m| !m.starts_with("task js-hog:") && m.as_str() != attribute::UNRECORDED)
        .collect();
    eprintln!(
        "{test}: the hog is the top cause of {} of {}, a switch the kernel did not record \
         of {unrecorded}; the others: {others:?}",
        gaps.len() - others.len() - unrecorded,
        gaps.len()
    );
    let (ok, words) = misses::judge(unrecorded, gaps.len(), 0.10);
    assert!(ok, "too many delays lack the kernel's switch: {words}");
    let judged = gaps.len() - unrecorded;
    let (ok, words) = misses::judge(others.len(), judged, 0.01);
    eprintln!("{test}: delays whose top cause is not the hog: {words}");
    assert!(ok, "the hog is not the top cause: {words}: {others:?}");
}

/// The command end to end: a thread watched by --tid for 2 s, saved, its instance
/// removed, the hog named among what delayed it.
#[test]
fn issue25_watch_saves_the_threads_figures_and_names_the_hog() {
    let test = "issue25_watch_saves_the_threads_figures_and_names_the_hog";
    let _m = measuring();
    let Some((cpu, hk)) = can_watch(test) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("watch.json");
    let (_, _, (status, pid)) = with_sleeper_and_hog(cpu, |tid, _| {
        let out = Command::new(bin())
            .args([
                "watch",
                "--tid",
                &tid.to_string(),
                "-D",
                "2s",
                "-T",
                "150us",
            ])
            .args(["--housekeeping", &hk.to_string(), "-q"])
            .arg(format!("--json={}", json.display()))
            .spawn()
            .expect("the binary runs");
        let pid = out.id();
        (out.wait_with_output().unwrap().status, pid)
    });
    assert_eq!(status.code(), Some(0));
    assert!(!our_instances().contains(&format!("jitterscope-{pid}")));
    let r = ResultFile::read(&json).expect("the result");
    let w = r.watch.expect("a watch section");
    assert_eq!(w.threads.len(), 1, "one thread watched");
    let th = &w.threads[0];
    assert_eq!(th.comm, "js-sleeper");
    let expected = 2_000_000_000 / SLEEP_NS;
    assert!(
        th.wakeup.count + th.starts_unseen >= expected * 8 / 10,
        "{} wake-ups in 2 s, {} undated",
        th.wakeup.count,
        th.starts_unseen
    );
    assert!(w.events_read > 0 && w.tool_cpu_ns > 0);
    let a = th.attribution.as_ref().expect("delays over 150 µs");
    let hog = a
        .causes
        .iter()
        .find(|c| c.cause.starts_with("task js-hog:"));
    assert!(hog.is_some_and(|h| h.largest_in > 0), "{:?}", a.causes);
}

/// Whether `perf sched record` records here, or why not: tried once, briefly.
fn perf_can_record(dir: &std::path::Path) -> Result<(), String> {
    let out = Command::new("perf")
        .args(["sched", "record", "-o"])
        .arg(dir.join("probe.data"))
        .args(["--", "true"])
        .output()
        .map_err(|e| format!("no perf to run ({e}); scripts/test installs linux-perf"))?;
    if out.status.success() {
        return Ok(());
    }
    let err = String::from_utf8_lossy(&out.stderr);
    let last = err.lines().rfind(|l| !l.trim().is_empty()).unwrap_or("");
    Err(format!(
        "`perf sched record` cannot record on this kernel ({}): {last}",
        out.status
    ))
}

/// A task's row of `perf sched latency -p`: (its delays, their mean and their maximum,
/// ns). A row reads `  comm:tid  | 1.2 ms | 1456 | avg: 0.045 ms | max: 0.301 ms | …`.
fn perf_latency_row(text: &str, tid: u32) -> Option<(u64, u64, u64)> {
    text.lines().find_map(|line| {
        let f: Vec<&str> = line.split('|').map(str::trim).collect();
        let (_, pid) = f.first()?.rsplit_once(':')?;
        if pid.parse::<u32>().ok()? != tid {
            return None;
        }
        let ms = |field: &str, key: &str| -> Option<u64> {
            let v = field.strip_prefix(key)?.strip_suffix("ms")?.trim();
            Some((v.parse::<f64>().ok()? * 1e6).round() as u64)
        };
        Some((
            f.get(2)?.parse().ok()?,
            ms(f.get(3)?, "avg:")?,
            ms(f.get(4)?, "max:")?,
        ))
    })
}

/// How many times `tid` began a run, in `perf script`'s text of a record, with no
/// wake-up of it since it last stopped: starts whose delay perf cannot know, as it lost
/// the wake-up (a switch out while runnable, `R`, is waiting, no stop).
fn perf_blind_starts(script: &str, tid: u32) -> u64 {
    let (pid, next, prev) = (
        format!(" pid={tid} "),
        format!("next_pid={tid} "),
        format!("prev_pid={tid} "),
    );
    // None before its first event; then whether it waits to run (woken, or preempted).
    let mut waiting: Option<bool> = None;
    let mut blind = 0;
    for line in script.lines() {
        if line.contains("sched:sched_wakeup:") && line.contains(&pid) {
            waiting = Some(true);
        } else if line.contains("sched:sched_switch:") {
            if let Some(at) = line.find(&prev) {
                let state = line[at..].split_whitespace().nth(2).unwrap_or("");
                waiting = Some(state.starts_with("prev_state=R"));
            }
            if line.contains(&next) {
                blind += u64::from(waiting == Some(false));
                waiting = Some(false);
            }
        }
    }
    blind
}

#[test]
fn perf_latency_rows_are_read() {
    let text = "  Task                  |   Runtime ms  | Switches | Avg delay ms    | Max delay ms    |\n  \
                js-sleeper:4242       |      9.182 ms |     1453 | avg:   0.041 ms | max:   0.305 ms | max start: 1.0 s | max end: 1.3 s\n  \
                cargo:(5)             |     20.271 ms |       17 | avg:   0.675 ms | max:   2.704 ms |";
    assert_eq!(perf_latency_row(text, 4242), Some((1453, 41_000, 305_000)));
    assert_eq!(perf_latency_row(text, 5), None);
    let script = "\
        a 9 [001] 1.0: sched:sched_switch: prev_comm=a prev_pid=9 prev_prio=120 prev_state=R ==> next_comm=s next_pid=42 next_prio=94
        s 42 [001] 1.1: sched:sched_switch: prev_comm=s prev_pid=42 prev_prio=94 prev_state=S ==> next_comm=a next_pid=9 next_prio=120
        a 9 [001] 1.2: sched:sched_wakeup: comm=s pid=42 prio=94 target_cpu=001
        a 9 [001] 1.3: sched:sched_switch: prev_comm=a prev_pid=9 prev_prio=120 prev_state=R ==> next_comm=s next_pid=42 next_prio=94
        s 42 [001] 1.4: sched:sched_switch: prev_comm=s prev_pid=42 prev_prio=94 prev_state=R+ ==> next_comm=h next_pid=7 next_prio=90
        h 7 [001] 1.5: sched:sched_switch: prev_comm=h prev_pid=7 prev_prio=90 prev_state=S ==> next_comm=s next_pid=42 next_prio=94
        s 42 [001] 1.6: sched:sched_switch: prev_comm=s prev_pid=42 prev_prio=94 prev_state=S ==> next_comm=b next_pid=75 next_prio=120
        h 7 [001] 1.7: sched:sched_switch: prev_comm=h prev_pid=7 prev_prio=90 prev_state=S ==> next_comm=s next_pid=42 next_prio=94
    ";
    assert_eq!(perf_blind_starts(script, 42), 1, "the last start, unwoken");
}

/// Waits until the watch run `pid` records the scheduler's switches and wake-ups: its
/// instance has both enabled (a new instance records from the start).
fn wait_for_sched_events(pid: u32) {
    let root = jitterscope::trace::tracefs_root().expect("tracefs");
    let events = root
        .join("instances")
        .join(format!("jitterscope-{pid}"))
        .join("events/sched");
    let on = |e: &str| {
        std::fs::read_to_string(events.join(e).join("enable")).is_ok_and(|t| t.trim() == "1")
    };
    let start = std::time::Instant::now();
    while !(on("sched_switch") && on("sched_wakeup")) {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "watch never began"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Ends the workload of `issue25_watch_agrees_with_perf_sched_latency` however its
/// scope is left: a failed assertion must not leave a thread waiting forever.
struct Release<'a> {
    go: Option<std::sync::mpsc::Sender<()>>,
    park: Option<std::sync::mpsc::Sender<()>>,
    /// The sleeper's loop, and the hog and the spinner.
    stop: &'a AtomicBool,
    quit: &'a AtomicBool,
}

impl Drop for Release<'_> {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.quit.store(true, Ordering::Relaxed);
        self.go.take();
        self.park.take();
    }
}

/// Issue 25, done-when 2: against perf. `perf sched record -a` (perf_event tracepoints)
/// and `watch --tid` (its own tracefs instance) record one run of the sleeper and the
/// hog at once; the sleeper's maximum and mean delay agree with `perf sched latency`'s
/// within 2 % + 10 µs. Like with like:
///
/// - The window: the sleeper waits, blocked, until both record, sleeps to its deadlines
///   for 1.5 s, and blocks again before either stops: both see all of its wake-ups.
///   That both counted the same delays (to 1 %: see below) is checked before their
///   figures are.
/// - Idle: this guest records no switch out of idle (nor out of its agent's threads).
///   perf then counts no delay (the wake-up never meets a switch in); watch dates the
///   start by the CPU's next event (guessed). A fair spinner on the CPU keeps it from
///   idling, so every start of the sleeper is a recorded switch.
/// - Preemption: perf counts a task switched out runnable as waiting from then on (a
///   delay of its own; 6.1 reads only `R`, not the `R+` of a preemption in the kernel),
///   watch keeps it apart (`preempted`). The hog runs at the sleeper's priority, so it
///   never preempts it; should the kernel (a stopper thread), perf's count says which it
///   did, and the figures are compared on the same footing.
/// - The wake-up: perf 6.1 reads `sched_wakeup` only (see below), as watch does; a later
///   perf dates it by `sched_waking`, earlier in the same `try_to_wake_up` on the
///   sleeper's own CPU (its timer's interrupt), a µs or so.
#[test]
fn issue25_watch_agrees_with_perf_sched_latency() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    use std::sync::mpsc;
    let test = "issue25_watch_agrees_with_perf_sched_latency";
    let _m = measuring();
    let Some((cpu, hk)) = can_watch(test) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    if let Err(why) = perf_can_record(dir.path()) {
        skip(test, &why);
        return;
    }
    let data = dir.path().join("perf.data");
    let json = dir.path().join("watch.json");
    let clock = ClockInfo::detect().0;
    let (stop, quit, never) = (
        AtomicBool::new(false),
        AtomicBool::new(false),
        AtomicBool::new(false),
    );
    let ready = Barrier::new(2);
    let (tid, watched, perf) = std::thread::scope(|s| {
        let (go_tx, go_rx) = mpsc::channel::<()>();
        let (park_tx, park_rx) = mpsc::channel::<()>();
        let (tid_tx, tid_rx) = mpsc::channel();
        let (done_tx, done_rx) = mpsc::channel();
        let release = Release {
            go: Some(go_tx),
            park: Some(park_tx),
            stop: &stop,
            quit: &quit,
        };
        let quit = &quit;
        let named = |name: &str| std::thread::Builder::new().name(name.into());
        let spinner = named("js-spinner").spawn_scoped(s, move || {
            let _ = jitterscope::engine::sched::pin_to(cpu);
            let _ = rustix::process::setpriority_process(None, 19);
            while !quit.load(Ordering::Relaxed) {
                std::hint::spin_loop();
            }
        });
        let (stop, never) = (&stop, &never);
        let sleeper = named("js-sleeper").spawn_scoped(s, move || {
            become_sleeper(cpu);
            tid_tx
                .send(rustix::thread::gettid().as_raw_nonzero().get() as u32)
                .unwrap();
            if go_rx.recv().is_ok() {
                sleep_to_deadlines(never, stop);
            }
            let _ = done_tx.send(());
            let _ = park_rx.recv();
        });
        let tid: u32 = tid_rx.recv().unwrap();
        let schedule = Schedule {
            cpu,
            // The sleeper's: it waits for a hold, but is never preempted by one.
            priority: 5,
            period: HOG_PERIOD,
            busy: HOLD,
            run_for: Duration::from_secs(30),
            count: usize::MAX,
        };
        let (ready, clock) = (&ready, &clock);
        let hog = named("js-hog").spawn_scoped(s, move || inject(schedule, ready, quit, clock));
        let _threads = (spinner.unwrap(), sleeper.unwrap(), hog.unwrap());
        ready.wait();
        // perf records every CPU from before its workload runs. It records
        // `sched_waking` where the kernel has it, which 6.1's `sched latency` does not
        // read (fixed later, 4453deacf446): without `sched_wakeup` too it sees no
        // wake-up, only waits after preemption.
        let mut perf = Child(
            Command::new("perf")
                .args(["sched", "record", "-a", "-e", "sched:sched_wakeup", "-o"])
                .arg(&data)
                .args(["--", "sh", "-c", "echo recording; read _; exit 0"])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(std::fs::File::create(dir.path().join("perf.err")).unwrap())
                .spawn()
                .expect("perf runs"),
        );
        let mut line = String::new();
        let _ = BufReader::new(perf.0.stdout.take().unwrap()).read_line(&mut line);
        assert_eq!(line.trim(), "recording", "perf's workload began");
        let mut watch = Child(
            Command::new(bin())
                .args(["watch", "--tid", &tid.to_string()])
                .args(["--housekeeping", &hk.to_string(), "-q"])
                .arg(format!("--json={}", json.display()))
                .spawn()
                .expect("the binary runs"),
        );
        wait_for_sched_events(watch.0.id());
        let _ = release.go.as_ref().unwrap().send(());
        std::thread::sleep(Duration::from_millis(1500));
        stop.store(true, Ordering::Relaxed);
        done_rx.recv().unwrap();
        // Time for the sleeper to block again, its last switch out recorded by both.
        std::thread::sleep(Duration::from_millis(100));
        let pid = rustix::process::Pid::from_raw(watch.0.id() as i32).unwrap();
        rustix::process::kill_process(pid, rustix::process::Signal::INT).unwrap();
        let watched = watch.0.wait().unwrap();
        // Its workload's `read` ends, and perf with it (perf exits with its status).
        perf.0.stdin.take();
        let perf = perf.0.wait().unwrap();
        drop(release);
        (tid, watched, perf)
    });
    let perf_err = std::fs::read_to_string(dir.path().join("perf.err")).unwrap_or_default();
    assert!(perf.success(), "perf sched record: {perf}: {perf_err}");
    assert_eq!(watched.code(), Some(0), "watch, stopped by SIGINT");
    let latency = Command::new("perf")
        .args(["sched", "latency", "-p", "-i"])
        .arg(&data)
        .output()
        .expect("perf runs");
    let table = String::from_utf8_lossy(&latency.stdout);
    let Some((perf_n, perf_mean, perf_max)) = perf_latency_row(&table, tid) else {
        panic!(
            "no row for {tid} in perf sched latency: {}\n{table}{}",
            latency.status,
            String::from_utf8_lossy(&latency.stderr)
        );
    };
    let w = ResultFile::read(&json).expect("the result").watch.unwrap();
    let th = (w.threads.iter())
        .find(|t| t.tid == tid)
        .expect("the sleeper in watch's result");
    let (wake, pre) = (&th.wakeup, &th.preempted);
    eprintln!(
        "{test}: perf: {perf_n} delays, mean {perf_mean} ns, max {perf_max} ns; watch: {} \
         wake-ups, mean {:.0} ns, max {} ns; {} preempted, max {} ns; {} guessed, {} \
         unseen; {} of {} events lost",
        wake.count,
        wake.mean_ns.unwrap_or(0.0),
        wake.max_ns.unwrap_or(0),
        pre.count,
        pre.max_ns.unwrap_or(0),
        th.starts_guessed,
        th.starts_unseen,
        w.events_lost,
        w.events_read
    );
    assert!(
        wake.count >= 500,
        "{} wake-ups in 1.5 s of 1.03 ms sleeps",
        wake.count
    );
    // Starts whose wake-up perf lost: this guest loses some events in some contexts
    // (its idle task's, its agent's threads'), and not always the same in perf as in
    // tracefs. watch may hold a delay for each; perf holds none.
    let script = Command::new("perf")
        .args(["script", "-i"])
        .arg(&data)
        .output()
        .expect("perf runs");
    let blind = perf_blind_starts(&String::from_utf8_lossy(&script.stdout), tid);
    // What perf counted says which of watch's figures are its: the wake-ups alone, or
    // with the waits after preemption (each a delay to perf).
    let both = wake.count + pre.count;
    let (n, what, mean, max) = match perf_n.abs_diff(wake.count) <= perf_n.abs_diff(both) {
        true => (
            wake.count,
            "wake-ups",
            wake.mean_ns.unwrap_or(0.0),
            wake.max_ns.unwrap_or(0),
        ),
        false => (
            both,
            "wake-ups and preemptions",
            (wake.sum_ns + pre.sum_ns) as f64 / both as f64,
            wake.max_ns.max(pre.max_ns).unwrap_or(0),
        ),
    };
    let within =
        |watch: f64, perf: u64| (watch - perf as f64).abs() <= perf as f64 * 0.02 + 10_000.0;
    // watch's worst delays, the largest first.
    let top: Vec<u64> = (th.attribution.iter())
        .flat_map(|a| a.top.iter().map(|g| g.duration_ns))
        .collect();
    eprintln!(
        "{test}: on {perf_n} and {n} {what} ({blind} starts perf has no wake-up for): max \
         perf {:.1} µs, watch {:.1} µs; mean perf {:.1} µs, watch {:.1} µs; watch's worst \
         {top:?} ns",
        perf_max as f64 / 1e3,
        max as f64 / 1e3,
        perf_mean as f64 / 1e3,
        mean / 1e3
    );
    // watch's worst may be one whose wake-up perf lost: then perf's worst is among
    // watch's next worst.
    let max_agrees = within(max as f64, perf_max)
        || (blind > 0 && max > perf_max && top.iter().any(|&d| within(d as f64, perf_max)));
    let slack = 3.max(n / 100);
    let verdict = match () {
        // More than 1 % beyond what perf lost is two different runs.
        _ if n > perf_n + blind + slack || perf_n > n + slack => Err(format!(
            "perf counted {perf_n} delays ({blind} starts without a wake-up); watch {} \
             wake-ups and {} preemptions ({} guessed, {} unseen, {} events lost): the two did \
             not see the same run",
            wake.count, pre.count, th.starts_guessed, th.starts_unseen, w.events_lost
        )),
        _ if !max_agrees => Err(format!("max: perf {perf_max} ns, watch {max} ns")),
        _ if !within(mean, perf_mean) => {
            Err(format!("mean: perf {perf_mean} ns, watch {mean:.0} ns"))
        }
        _ => Ok(()),
    };
    if let Err(e) = verdict {
        // Both records, for a look: `perf sched latency -p -i`, `perf script -i`.
        let kept = dir.keep();
        panic!("{e}; perf.data and watch.json kept in {}", kept.display());
    }
}

/// Root and tracefs, or why not (printed): what `watch` needs of the host.
fn can_trace(test: &str) -> bool {
    let why = match () {
        _ if !is_root() => "tracefs instances need root",
        _ if !tracefs_usable() => "tracefs cannot be mounted here",
        _ => return true,
    };
    skip(test, why);
    false
}

/// Starts 20 threads, one every 100 ms, once a line comes on stdin; prints each one's
/// thread id; every thread sleeps 1 ms at a time until stdin closes.
const THREADS_PROGRAM: &str = r#"
import sys, threading, time
stop = threading.Event()
def sleeper():
    print(threading.get_native_id(), flush=True)
    while not stop.is_set():
        time.sleep(0.001)
print(threading.get_native_id(), flush=True)
sys.stdin.readline()
for _ in range(20):
    threading.Thread(target=sleeper).start()
    time.sleep(0.1)
sys.stdin.readline()
stop.set()
"#;

/// A child process, killed when dropped (a failed assertion leaves none behind).
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Waits until the watch run `pid` has its tracefs instance: it has begun tracing.
fn wait_for_instance(pid: u32) {
    let name = format!("jitterscope-{pid}");
    let start = std::time::Instant::now();
    while !our_instances().contains(&name) {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "watch never began"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Issue 25, done-when 3: threads that come and go. A process starts 20 threads, one
/// every 100 ms, after `watch --pid` began: each is in the result, its wake-ups counted.
#[test]
fn issue25_watch_pid_follows_threads_started_after_it_began() {
    use std::io::{BufRead, BufReader, Write};
    let test = "issue25_watch_pid_follows_threads_started_after_it_began";
    let _m = measuring();
    if !can_trace(test) {
        return;
    }
    let mut child = Child(
        Command::new("python3")
            .args(["-c", THREADS_PROGRAM])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("python3 runs"),
    );
    let mut tids = BufReader::new(child.0.stdout.take().unwrap()).lines();
    let main_tid: u32 = tids.next().unwrap().unwrap().parse().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("watch.json");
    let watch = Command::new(bin())
        .args([
            "watch",
            "--pid",
            &child.0.id().to_string(),
            "-D",
            "3s",
            "-q",
        ])
        .arg(format!("--json={}", json.display()))
        .spawn()
        .expect("the binary runs");
    wait_for_instance(watch.id());
    std::thread::sleep(Duration::from_millis(300));
    let mut stdin = child.0.stdin.take().unwrap();
    writeln!(stdin).unwrap();
    let new: Vec<u32> = (0..20)
        .map(|_| tids.next().unwrap().unwrap().parse().unwrap())
        .collect();
    let out = watch.wait_with_output().unwrap();
    writeln!(stdin).unwrap();
    assert_eq!(out.status.code(), Some(0));
    let w = ResultFile::read(&json).expect("the result").watch.unwrap();
    assert_eq!(w.ended, "duration");
    let wakeups = |tid: u32| {
        let th = w.threads.iter().find(|t| t.tid == tid);
        th.map_or(0, |t| t.wakeup.count)
    };
    let counts: Vec<u64> = new.iter().map(|&t| wakeups(t)).collect();
    eprintln!(
        "{test}: {} threads in the result; main {} wake-ups, the 20 new ones {counts:?}",
        w.threads.len(),
        wakeups(main_tid)
    );
    assert!(wakeups(main_tid) > 0, "the main thread's wake-ups");
    // The last thread starts 1.9 s after the signal, 2.2 s or more into a 3 s run, and
    // sleeps 1 ms at a time: some 800 wake-ups on a quiet host, 100 on a busy one.
    assert!(counts.iter().all(|&c| c >= 100), "{new:?}: {counts:?}");
}

/// Issue 25, done-when 5: a watched process that exits mid-run ends the run, which is
/// saved and says the process ended.
#[test]
fn issue25_watch_ends_and_saves_when_the_process_ends() {
    let test = "issue25_watch_ends_and_saves_when_the_process_ends";
    let _m = measuring();
    if !can_trace(test) {
        return;
    }
    let child = Child(Command::new("sleep").arg("1").spawn().expect("sleep runs"));
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("watch.json");
    let start = std::time::Instant::now();
    let out = Command::new(bin())
        .args(["watch", "--pid", &child.0.id().to_string(), "-D", "30s"])
        .arg(format!("--json={}", json.display()))
        .output()
        .expect("the binary runs");
    let took = start.elapsed();
    let err = String::from_utf8_lossy(&out.stderr);
    eprintln!("{test}: ended after {took:?}; stderr:\n{err}");
    assert_eq!(out.status.code(), Some(0), "{err}");
    // `sleep 1` ends about 1 s in: the watch follows within a pass, not at -D. The bound
    // is far from both, since a loaded host stretches the watch's start and end (3.2 s
    // in all, beside three builds and a test suite).
    assert!(took < Duration::from_secs(15), "{took:?}");
    let r = ResultFile::read(&json).expect("the result");
    assert_eq!(r.watch.expect("a watch section").ended, "process ended");
    let said = |t: &str| t.contains("ended after") && t.contains("the watch ended with it");
    assert!(said(&err), "stderr says the process ended: {err}");
    assert!(
        r.run.warnings.iter().any(|w| said(w)),
        "{:?}",
        r.run.warnings
    );
}

#[test]
fn watch_refuses_bad_targets() {
    assert_bad_input(&[
        &["watch"],
        &["watch", "--pid", "1", "--comm", "x"],
        &["watch", "--comm", "a-very-long-thread-name"],
        &["watch", "--pid", "999999999"],
        &["watch", "--tid", "999999999"],
        &["watch", "--pid", "1", "-T", "0"],
    ]);
}
