//! Issue 3, items 2 and 3: the timer probe against a known disturbance.
//!
//! A SCHED_FIFO 2 injector on the measured CPU holds it for a known time while the timer
//! thread (SCHED_FIFO 1) sleeps there. A deadline that falls inside a hold cannot be met
//! before the hold ends, so the deadlines that must come out late are known exactly, and
//! each is looked for among the wake-ups the probe logged, by its deadline.

use std::sync::Barrier;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use jitterscope::engine::clock::ClockInfo;
use jitterscope::engine::cpu::{CpuList, CpuPlan};
use jitterscope::engine::run::RunPlan;
use jitterscope::engine::sched::Policy;
use jitterscope::probes::timer::{self, TimerConfig, TimerRun};
use jitterscope::trace::{BreakTracer, TraceAction};

use crate::injector::{Injection, Schedule, inject};
use crate::util::{fifo_available, fifo1_plan, measuring, skip, two_cpus};

const INTERVAL_NS: u64 = 1_000_000;

/// Runs the timer by `plan` while the injector follows `schedule`.
fn run_with_injector(
    cfg: &TimerConfig,
    plan: &RunPlan,
    schedule: Schedule,
    tracer: &BreakTracer,
) -> (TimerRun, Vec<Injection>) {
    let (clock, _) = ClockInfo::detect();
    // As `timer` does by default (and cyclictest): idle CPUs stay out of deep states, so
    // that a wake-up from idle is not the host's (on this guest an idle vCPU has been seen
    // to wake milliseconds late). Withdrawn when dropped; without root, left alone.
    let dev = std::path::Path::new(jitterscope::engine::pmqos::DEVICE);
    let _dma = jitterscope::engine::pmqos::DmaLatencyGuard::set(dev, 0).ok();
    let stop_injector = AtomicBool::new(false);
    let ready = Barrier::new(2);
    std::thread::scope(|s| {
        let injector = s.spawn(|| inject(schedule, &ready, &stop_injector, &clock));
        ready.wait();
        let never = AtomicBool::new(false);
        let run = timer::run(cfg, plan, &clock, &never, tracer, None).unwrap();
        stop_injector.store(true, std::sync::atomic::Ordering::Relaxed);
        (run, injector.join().unwrap())
    })
}

fn preconditions(name: &str) -> Option<(usize, usize)> {
    let Some(cpus) = two_cpus() else {
        skip(
            name,
            "needs two CPUs: one measured, one for the coordinator",
        );
        return None;
    };
    if let Err(why) = fifo_available() {
        skip(name, &format!("SCHED_FIFO is not available: {why}"));
        return None;
    }
    Some(cpus)
}

/// Item 2: 300 µs holds every 10007 µs, the timer at 1000 µs for 2 s.
#[test]
fn holds_of_300us_show_up_as_late_wakeups() {
    let name = "timer ground truth: 300 µs every 10007 µs";
    let Some(cpus) = preconditions(name) else {
        return;
    };
    let _m = measuring();
    // A VM host's busy spell can stop the injector's vCPU mid-hold, or the timer's: up to
    // three printed attempts, as the other ground-truth tests allow.
    let mut failures = Vec::new();
    for _ in 0..3 {
        match holds_attempt(name, cpus) {
            Ok(()) => return,
            Err(why) => {
                eprintln!("{name}: attempt failed: {why}");
                failures.push(why);
            }
        }
    }
    panic!("{name}: three attempts failed: {failures:#?}");
}

/// `Err` with the reason when a check fails.
macro_rules! check {
    ($cond:expr, $($fmt:tt)+) => {
        let ok: bool = $cond;
        if !ok {
            return Err(format!($($fmt)+));
        }
    };
}

fn holds_attempt(name: &str, cpus: (usize, usize)) -> Result<(), String> {
    let hold = Duration::from_micros(300);
    let cfg = TimerConfig {
        interval_ns: INTERVAL_NS,
        spikes_above_ns: Some(100_000),
        spike_capacity: 100_000,
        ..TimerConfig::default()
    };
    let duration = Duration::from_secs(2);
    let schedule = Schedule {
        cpu: cpus.0,
        priority: 2,
        period: Duration::from_micros(10_007),
        busy: hold,
        run_for: duration + Duration::from_secs(5),
        count: usize::MAX,
    };
    let tracer = BreakTracer::open(None);
    let plan = fifo1_plan(cpus, duration);
    let (run, injections) = run_with_injector(&cfg, &plan, schedule, &tracer);
    let window = run.outcome.window.expect("the run started");
    let e = &run.entries[0];
    assert_eq!(e.thread.policy, Policy::Fifo);
    let base = window.start_monotonic_ns;
    let end = base + e.runtime_ns;
    let inside: Vec<&Injection> = injections
        .iter()
        .filter(|i| i.start_monotonic_ns >= base && i.end_monotonic_ns <= end)
        .collect();

    // The deadlines that must be more than 100 µs late: those inside a hold, at least
    // 100 µs before its end.
    let certain: Vec<u64> = inside
        .iter()
        .flat_map(|i| {
            let first = (i.start_monotonic_ns - base).div_ceil(INTERVAL_NS);
            let last = (i.end_monotonic_ns.saturating_sub(100_000) - base) / INTERVAL_NS;
            first..=last
        })
        .collect();
    let spikes = e.spikes.as_ref().expect("spikes were asked for");
    assert_eq!(spikes.dropped, 0);
    // Each logged wake-up starts at its deadline: which deadline it was, by index.
    let late: Vec<u64> = spikes
        .start_ns
        .iter()
        .map(|&ns| (ns + INTERVAL_NS / 2) / INTERVAL_NS)
        .collect();
    let seen = certain.iter().filter(|k| late.contains(k)).count();
    // The late wake-ups the holds explain: deadlines within an interval of one. The rest
    // are the host's own (a VM's background); they are counted and shown, not blamed on
    // the holds, so that a noisy host does not make the model look wrong.
    let near_hold = |t: u64| {
        inside.iter().any(|i| {
            t + INTERVAL_NS >= i.start_monotonic_ns - base
                && t <= i.end_monotonic_ns - base + INTERVAL_NS
        })
    };
    let from_holds = spikes.start_ns.iter().filter(|&&t| near_hold(t)).count();
    let background = spikes.start_ns.len() - from_holds;
    // The host's own late wake-ups also fall near holds, at the rate seen away from
    // them: that many are taken off before comparing with the hold model.
    let near = (0..e.wakeups)
        .filter(|&k| near_hold(k * INTERVAL_NS))
        .count();
    let away = (e.wakeups as usize).saturating_sub(near).max(1);
    let background_near = background as f64 * near as f64 / away as f64;
    let above = (from_holds as f64 - background_near).max(0.0);
    let share = above / e.wakeups as f64;
    // The estimate: a hold covers 300/1000 of a wake-up, and the wake-up is more
    // than 100 µs late when its deadline is over 100 µs before the hold's end. The
    // wake-up's own latency (its median, measured in this very run) widens that window
    // at both ends: a deadline just before the hold is preempted before it reads the
    // clock, and one just under 100 µs before the end still pays the switch back.
    let p50 = e.summary.p50_ns.unwrap() as f64;
    let window_ns = 300e3 - 100e3 + 2.0 * p50;
    let expected = inside.len() as f64 * window_ns / 1e6 / e.wakeups as f64;
    eprintln!(
        "{name}: {} holds, {} wake-ups, {from_holds} above 100 µs near a hold, less \
         {background_near:.0} the host's own rate predicts there: {:.0} ({:.2} %; expected \
         ~{:.2} %); {background} elsewhere; {} of {} certain deadlines seen late; max \
         {:.1} µs, p50 {:.1} µs",
        inside.len(),
        e.wakeups,
        above,
        share * 100.0,
        expected * 100.0,
        seen,
        certain.len(),
        e.summary.max_ns.unwrap() as f64 / 1e3,
        e.summary.p50_ns.unwrap() as f64 / 1e3,
    );
    check!(
        inside.len() >= 150,
        "injector made only {} holds",
        inside.len()
    );
    check!(
        e.summary.max_ns.unwrap() >= 250_000,
        "max {:?} ns: a 300 µs hold must delay some wake-up by 250 µs or more",
        e.summary.max_ns
    );
    check!(
        (0.5..=2.0).contains(&(share / expected)),
        "share above 100 µs {share:.4} vs expected {expected:.4}"
    );
    // Ground truth by timestamp: the deadlines a hold covered really came out late.
    // At a miss rate of at most 5 %: the misses the binomial bound allows.
    let missed = certain.len().saturating_sub(seen);
    let (ok, words) = jitterscope::stats::misses::judge(missed, certain.len(), 0.05);
    eprintln!("covered deadlines not seen late: {words}");
    check!(ok, "covered deadlines not seen late: {words}");
    Ok(())
}

/// Item 3: one 2 ms hold; `stop_above` 1 ms stops the run within two intervals. Both CPUs
/// are measured (the coordinator shares one, as a timer run may), so that stopping a
/// thread that did not cross the limit is checked too.
#[test]
fn stop_above_stops_at_the_injected_hold() {
    let name = "timer --stop-above: one 2 ms hold";
    let Some(cpus) = preconditions(name) else {
        return;
    };
    let _m = measuring();
    // A stall of the host's own over 1 ms before the hold stops the run first: not the
    // probe's fault, so up to five attempts, each printed (this host has had several such
    // stalls within a second).
    let mut failures = Vec::new();
    for _ in 0..5 {
        match attempt_stop_above(cpus) {
            Ok(()) => return,
            Err(why) => {
                eprintln!("  attempt failed: {why}");
                failures.push(why);
            }
        }
    }
    panic!("{name}: every attempt failed: {failures:?}");
}

fn attempt_stop_above(cpus: (usize, usize)) -> Result<(), String> {
    // At 200 µs the first deadline inside the hold lies within its first 200 µs, so that
    // wake-up is at least 1.8 ms late whatever the hold's phase against the schedule.
    const INTERVAL_NS: u64 = 200_000;
    let cfg = TimerConfig {
        interval_ns: INTERVAL_NS,
        distance_ns: 0,
        stop_above_ns: Some(1_000_000),
        ..TimerConfig::default()
    };
    let mut plan = fifo1_plan(cpus, Duration::from_secs(5));
    plan.cpus = CpuPlan {
        measured: CpuList::from_cpus(vec![cpus.0.min(cpus.1), cpus.0.max(cpus.1)]),
        housekeeping: CpuList::from_cpus(vec![]),
    };
    // A stand-in tracefs: the marker and tracing_on are plain files here.
    let fake = tempfile::tempdir().unwrap();
    std::fs::write(fake.path().join("trace_marker"), "").unwrap();
    std::fs::write(fake.path().join("tracing_on"), "1").unwrap();
    let tracer = BreakTracer::open(Some(fake.path()));
    let schedule = Schedule {
        cpu: cpus.0,
        priority: 2,
        // Soon after the run starts: every ms before the hold is a chance for a stall of
        // the host's own over 1 ms to stop the run first.
        period: Duration::from_millis(150),
        busy: Duration::from_millis(2),
        run_for: Duration::from_secs(10),
        count: 1,
    };
    let t0 = std::time::Instant::now();
    let (run, injections) = run_with_injector(&cfg, &plan, schedule, &tracer);
    let took = t0.elapsed();
    let b = run.stopped_by().ok_or("the run was not stopped")?;
    eprintln!("  break: {b:?}; injection: {injections:?}; run took {took:?}");
    let hold = injections.first().ok_or("no hold was injected")?;
    if b.clock_ns < hold.start_monotonic_ns {
        return Err(format!(
            "a {} µs wake-up came before the hold: the host's own noise",
            b.value_ns / 1000
        ));
    }
    assert_eq!(b.cpu, cpus.0, "the break names the measured CPU");
    assert!(b.value_ns >= 1_500_000, "value {} ns", b.value_ns);
    assert!(
        b.clock_ns <= hold.end_monotonic_ns + 2 * INTERVAL_NS,
        "the late wake-up came {} µs after the hold ended",
        (b.clock_ns - hold.end_monotonic_ns) / 1000
    );
    let within = b.all_stopped_within_ns.expect("every thread stopped");
    assert_eq!(run.entries.len(), 2, "both CPUs measured");
    assert!(
        within <= 2 * INTERVAL_NS,
        "threads stopped {within} ns after"
    );
    assert!(
        took < Duration::from_secs(3),
        "the 5 s run went on: {took:?}"
    );
    assert!(run.outcome.elapsed < Duration::from_secs(2));
    for e in &run.entries {
        let expected = (e.cpu == cpus.0).then_some(b);
        assert_eq!(e.stopped_run, expected, "cpu {}", e.cpu);
    }
    assert_eq!(b.trace, TraceAction::MarkedAndStopped);
    let marker = std::fs::read_to_string(fake.path().join("trace_marker")).unwrap();
    assert!(
        marker.contains("hit latency threshold") && marker.contains(&format!("CPU {}", cpus.0)),
        "{marker}"
    );
    assert_eq!(
        std::fs::read_to_string(fake.path().join("tracing_on")).unwrap(),
        "0"
    );
    Ok(())
}
