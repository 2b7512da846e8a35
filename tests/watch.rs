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
/// (deadline on CLOCK_MONOTONIC, and deadline to running, ns) while `recording`.
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
    while !stop.load(Ordering::Relaxed) {
        next += SLEEP_NS;
        let ts = Timespec {
            tv_sec: (next / 1_000_000_000) as i64,
            tv_nsec: (next % 1_000_000_000) as i64,
        };
        let _ = rustix::thread::clock_nanosleep_absolute(ClockId::Monotonic, &ts);
        let ran = clock::monotonic_ns();
        if recording.load(Ordering::Relaxed) {
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
fn can_watch(test: &str) -> Option<(usize, usize)> {
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
fn with_sleeper_and_hog<T: Send>(
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
    // A delay within 20 µs of the floor may fall on either side of it by the thread's
    // clock (which adds its way out of the sleep) and by the trace's: counted by neither.
    let clear = |l: u64| l >= floor && l.abs_diff(floor) > 20_000;
    // The trace's delays that began inside a hold, and the sleeper's deadlines that did.
    let in_hold = |t: u64| held.iter().any(|h| h.start <= t && t < h.end);
    let gaps: Vec<(Gap, u64)> = (delays.iter())
        .filter(|d| d.0 == cpu && clear(d.2) && in_hold(d.1.start))
        .map(|d| (d.1, d.2))
        .collect();
    let in_hold_mono =
        |t: u64| (held.iter()).any(|h| h.start_monotonic_ns <= t && t < h.end_monotonic_ns);
    let mine: Vec<(u64, u64)> = (late.iter())
        .filter(|(deadline, l)| clear(*l) && in_hold_mono(*deadline))
        .copied()
        .collect();
    eprintln!(
        "{test}: {} delays over {} µs inside holds in the trace, {} by the thread's clock; \
         {} events, {} lost",
        gaps.len(),
        floor / 1000,
        mine.len(),
        collected.read.values().sum::<u64>(),
        collected.lost.values().sum::<u64>()
    );
    assert!(
        mine.len() >= 30,
        "the sleeper saw {} hog delays",
        mine.len()
    );
    // Delay by delay: each of the thread's hog delays against the traced wake-up delay
    // that ended when the thread ran (the holds tie the counter to CLOCK_MONOTONIC).
    // Comparing the two sets' quantiles instead failed whenever one delay near a hold's
    // edge fell in one set and not the other.
    let to_mono = |t: u64| {
        let h = (held.iter()).min_by_key(|h| h.start.abs_diff(t)).unwrap();
        if t >= h.start {
            h.start_monotonic_ns + scale.to_ns(t - h.start)
        } else {
            h.start_monotonic_ns
                .saturating_sub(scale.to_ns(h.start - t))
        }
    };
    let traced: Vec<(u64, u64)> = (delays.iter())
        .filter(|d| d.0 == cpu)
        .map(|d| (to_mono(d.1.end), d.2))
        .collect();
    let pairs: Vec<(u64, u64)> = (mine.iter())
        .filter_map(|&(deadline, l)| {
            let ran = deadline + l;
            // The thread reads its clock just after it runs; its period is 1.03 ms.
            let d = (traced.iter()).find(|(end, _)| end.abs_diff(ran) <= 50_000)?;
            Some((l, d.1))
        })
        .collect();
    assert!(
        pairs.len() * 10 >= mine.len() * 9,
        "the trace saw a wake-up delay for {} of the thread's {} hog delays",
        pairs.len(),
        mine.len()
    );
    // The thread's clock adds the timer's way from deadline to wake-up (and any stall
    // of the vCPU on it): the two agree within 20 µs and a twentieth, for all but one
    // in ten (a stall is real, and not the trace's to see).
    let off: Vec<u64> = pairs.iter().map(|&(l, d)| l.abs_diff(d)).collect();
    let agree = (pairs.iter()).filter(|&&(l, d)| l.abs_diff(d) <= l / 20 + 20_000);
    let mut sorted = off.clone();
    sorted.sort_unstable();
    eprintln!(
        "{test}: {} pairs; thread − trace p50 {} ns, p90 {} ns, max {} ns",
        pairs.len(),
        at(&sorted, 0.5),
        at(&sorted, 0.9),
        at(&sorted, 1.0)
    );
    assert!(
        agree.count() * 10 >= pairs.len() * 9,
        "the thread and the trace disagree by {:?} ns",
        sorted
    );
    // The timer's way alone is what the thread sees when nothing holds it: its lateness
    // outside the holds, measured beside (about 10 µs on these guests).
    let mut free: Vec<u64> = (late.iter())
        .filter(|(deadline, _)| !in_hold_mono(*deadline))
        .map(|(_, l)| *l)
        .collect();
    free.sort_unstable();
    let timer = at(&free, 0.5);
    assert!(
        at(&sorted, 0.5) <= timer + 5_000,
        "the thread and the trace disagree by {sorted:?} ns, its timer alone {timer} ns"
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
    // Gap by gap: where a hold covers most of a delay, the hog is its main cause. The
    // rest of a delay is the machine's (the fair server lends a waiting build task up to
    // 50 ms/s even under SCHED_FIFO), and a delay mostly not the hog's may name it.
    let held_of = |g: &Gap| -> u64 {
        (held.iter())
            .map(|h| h.end.min(g.end).saturating_sub(h.start.max(g.start)))
            .sum()
    };
    let mostly_held: Vec<(Gap, u64)> = (gaps.iter())
        .filter(|(g, _)| held_of(g) * 2 >= g.end - g.start)
        .copied()
        .collect();
    let events = &collected.per_cpu[&cpu];
    let named: Vec<String> = (mostly_held.iter())
        .map(|g| {
            let a = attribute::attribute(std::slice::from_ref(g), events, &cx);
            let main = a.causes.iter().max_by_key(|c| c.largest_in);
            main.map(|c| c.cause.clone()).unwrap_or_default()
        })
        .collect();
    let others: Vec<&String> = named
        .iter()
        .filter(|c| !c.starts_with("task js-hog:"))
        .collect();
    eprintln!(
        "{test}: {} of {} delays mostly inside a hold; named otherwise: {others:?}",
        mostly_held.len(),
        gaps.len()
    );
    assert!(
        mostly_held.len() * 10 >= gaps.len() * 9,
        "{} of {} delays were mostly inside a hold",
        mostly_held.len(),
        gaps.len()
    );
    assert!(
        others.is_empty(),
        "delays the hog held named otherwise: {others:?}"
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
