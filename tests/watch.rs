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
    tid.send(rustix::thread::gettid().as_raw_nonzero().get() as u32)
        .unwrap();
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
    use jitterscope::trace::attribute::{self, Context, Gap, Naming, Throttle};
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
    assert!(
        pairs.len() * 10 >= mine.len() * 9,
        "the trace has a wake-up delay for {} of the program's {} hog delays",
        pairs.len(),
        mine.len()
    );
    // Delay by delay within 5 % and 5 µs, and so at p50 and p99.
    let agrees = |&&(l, _, d): &&(u64, Gap, u64)| l.abs_diff(d) <= l / 20 + 5_000;
    let off: Vec<i64> = (pairs.iter())
        .filter(|p| !agrees(p))
        .map(|&(l, _, d)| l as i64 - d as i64)
        .collect();
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
    assert!(
        off.len() * 100 <= pairs.len(),
        "{} of {} pairs disagree, program − trace: {off:?} ns",
        off.len(),
        pairs.len()
    );
    let quantiles = |f: fn(&(u64, Gap, u64)) -> u64| {
        let mut v: Vec<u64> = pairs.iter().map(f).collect();
        v.sort_unstable();
        (at(&v, 0.5), at(&v, 0.99))
    };
    let (m50, m99) = quantiles(|p| p.0);
    let (s50, s99) = quantiles(|p| p.2);
    for (q, m, s) in [(50, m50, s50), (99, m99, s99)] {
        eprintln!("{test}: p{q} program {m} ns past its timer, watch {s} ns");
        assert!(
            m.abs_diff(s) <= m / 20 + 5_000,
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
    assert!(
        gaps.len() * 10 >= pairs.len() * 9,
        "{} of {} matched delays woke inside a hold",
        gaps.len(),
        pairs.len()
    );
    let symbols = std::collections::HashMap::new();
    let cx = Context {
        names: &collected.decoder.names,
        symbols: &symbols,
        scale,
        run_start: 0,
        measurer: tid,
        top: 5,
        quiet_at_gap_start: false,
        naming: Naming::Full,
        throttle: Throttle::default(),
    };
    let events = &collected.per_cpu[&cpu];
    let others: Vec<String> = (gaps.iter())
        .filter_map(|g| {
            let a = attribute::attribute(std::slice::from_ref(g), events, &cx);
            let main = a.causes.iter().max_by_key(|c| c.largest_in);
            let main = main.map(|c| c.cause.clone()).unwrap_or_default();
            if !main.starts_with("task js-hog:") {
                eprintln!("{test}: a hog delay named {main}; the events:");
                dump(g.0);
            }
            (!main.starts_with("task js-hog:")).then_some(main)
        })
        .collect();
    eprintln!(
        "{test}: the hog is the top cause of {} of {}; the others: {others:?}",
        gaps.len() - others.len(),
        gaps.len()
    );
    assert!(
        others.len() * 100 <= gaps.len(),
        "the hog is not the top cause of {} of {} delays: {others:?}",
        others.len(),
        gaps.len()
    );
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
        .args(["watch", "--pid", &child.0.id().to_string(), "-D", "10s"])
        .arg(format!("--json={}", json.display()))
        .output()
        .expect("the binary runs");
    let took = start.elapsed();
    let err = String::from_utf8_lossy(&out.stderr);
    eprintln!("{test}: ended after {took:?}; stderr:\n{err}");
    assert_eq!(out.status.code(), Some(0), "{err}");
    // `sleep 1` ends about 1 s in: the watch follows within a pass, not at -D.
    assert!(took < Duration::from_millis(2500), "{took:?}");
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
