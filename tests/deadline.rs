//! `--policy deadline` (issue 37): refusals in one line with exit 2, a deadline miss
//! injected with --work counted as an overrun, noise's throttled half named as the
//! deadline's own, and a known hold inside the runtime found as noise. The measuring tests
//! turn admission control off for their run and restore it (as root a run would make a
//! root domain otherwise: tests/root_domain.rs), so that the figures judged here come
//! from one setup.

use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::deadline_watch::{self, HoldSignal, Look, Span};
use crate::util::{
    as_nobody, assert_bad_input, fifo1_plan, is_root, jitterscope, json_result, measuring,
    nobody_cannot_reach, skip, stderr_lines, two_cpus,
};
use jitterscope::engine::clock::{ClockInfo, Scale};
use jitterscope::engine::deadline::Deadline;
use jitterscope::engine::inject::{self, Holder, Injection, Schedule};
use jitterscope::engine::run::{RunPlan, Window};
use jitterscope::engine::sched::{Policy, SchedRequest};
use jitterscope::probes::noise::{self, NoiseConfig, NoiseEntry};
use jitterscope::probes::timer::TimerEntry;
use jitterscope::stats::misses;

const RT_RUNTIME: &str = "/proc/sys/kernel/sched_rt_runtime_us";

/// Admission control off while it lives (sched_rt_runtime_us -1), the old value back on
/// drop.
struct AdmissionOff(String);

impl AdmissionOff {
    fn new(test: &str) -> Option<AdmissionOff> {
        if !is_root() {
            skip(
                test,
                "needs root for SCHED_DEADLINE and sched_rt_runtime_us",
            );
            return None;
        }
        let Some(_) = two_cpus() else {
            skip(test, "needs a housekeeping CPU beside the measured one");
            return None;
        };
        let old = std::fs::read_to_string(RT_RUNTIME).ok()?;
        if let Err(e) = std::fs::write(RT_RUNTIME, "-1") {
            skip(test, &format!("cannot write {RT_RUNTIME}: {e}"));
            return None;
        }
        Some(AdmissionOff(old.trim().to_string()))
    }
}

impl Drop for AdmissionOff {
    fn drop(&mut self) {
        let _ = std::fs::write(RT_RUNTIME, &self.0);
    }
}

fn cpu() -> String {
    two_cpus().map_or(0, |c| c.0).to_string()
}

#[test]
fn issue37_deadline_parameters_and_misuse_are_one_line_and_exit_2() {
    assert_bad_input(&[
        &[
            "timer",
            "--policy",
            "deadline",
            "-i",
            "1000",
            "--runtime",
            "2ms",
            "-D",
            "1s",
        ],
        &[
            "timer",
            "--policy",
            "deadline",
            "--deadline",
            "2ms",
            "-D",
            "1s",
        ],
        &["timer", "--runtime", "100us", "-D", "1s"],
        &["timer", "--work", "100us", "-D", "1s"],
        &["timer", "--policy", "deadline", "-p", "5", "-D", "1s"],
        &["timer", "--policy", "deadline", "--priospread", "-D", "1s"],
        &[
            "noise",
            "--policy",
            "deadline",
            "--runtime",
            "500us",
            "-D",
            "1s",
        ],
        &["noise", "--period", "1ms", "-D", "1s"],
        &["pingpong", "--policy", "deadline", "-D", "1s"],
        &["timer", "--policy", "dl", "-D", "1s"],
    ]);
    let out = jitterscope(&["timer", "--policy", "deadline", "--runtime", "2ms"]);
    let lines = stderr_lines(&out);
    assert!(
        lines[0].contains("runtime ≤ deadline ≤ period"),
        "{lines:?}"
    );
}

/// Without CAP_SYS_NICE the kernel refuses SCHED_DEADLINE (no rlimit grants it): said
/// in one line with the fix, exit 2, no run at SCHED_OTHER in its place.
#[test]
fn issue37_deadline_without_cap_sys_nice_is_refused_in_one_line() {
    let test = "issue37_deadline_without_cap_sys_nice_is_refused_in_one_line";
    let Some(mut cmd) = as_nobody(test) else {
        return;
    };
    let out = cmd
        .args(["timer", "--policy", "deadline", "-D", "1s", "--no-mlock"])
        .output()
        .unwrap();
    if nobody_cannot_reach(test, &out) {
        return;
    }
    let lines = stderr_lines(&out);
    assert_eq!(out.status.code(), Some(2), "{lines:?}");
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].starts_with("jitterscope: "), "{lines:?}");
    assert!(lines[0].contains("CAP_SYS_NICE"), "{lines:?}");
    assert!(out.stdout.is_empty());
}

/// With admission control on, a thread pinned to one CPU of a multi-CPU root domain is
/// refused, and a user who holds CAP_SYS_NICE but is not root cannot make the root domain
/// (root's runs make one: tests/root_domain.rs): one line naming both fixes, exit 2. User
/// 65534 is given CAP_SYS_NICE as an ambient capability.
#[test]
fn issue37_a_pinned_deadline_thread_refused_by_admission_control_says_the_fixes() {
    let test = "issue37_a_pinned_deadline_thread_refused_by_admission_control_says_the_fixes";
    // Held so that no test here turns admission control off meanwhile.
    let _m = measuring();
    let admission = std::fs::read_to_string(RT_RUNTIME).unwrap_or_default();
    if !is_root() || two_cpus().is_none() || admission.trim() == "-1" {
        skip(test, "needs root, two CPUs and admission control on");
        return;
    }
    let out = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .args(["--inh-caps=+sys_nice", "--ambient-caps=+sys_nice"])
        .arg(crate::util::bin())
        .args([
            "timer",
            "--policy",
            "deadline",
            "-a",
            &cpu(),
            "-D",
            "1s",
            "--no-mlock",
        ])
        .output();
    let Ok(out) = out else {
        skip(test, "setpriv (util-linux) is not installed");
        return;
    };
    if nobody_cannot_reach(test, &out) {
        return;
    }
    let lines = stderr_lines(&out);
    if out.status.code() == Some(0) {
        skip(
            test,
            "the CPU has a root domain of its own here (an exclusive cpuset)",
        );
        return;
    }
    assert_eq!(out.status.code(), Some(2), "{lines:?}");
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].contains("EPERM with CAP_SYS_NICE"), "{lines:?}");
    assert!(lines[0].contains("root domain"), "{lines:?}");
    assert!(lines[0].contains("sched_rt_runtime_us=-1"), "{lines:?}");
}

/// A cgroup v1 `cpu` group with no real-time runtime (`cpu.rt_runtime_us` 0) refuses
/// SCHED_FIFO even to root, which the run says (a degraded run, as issue 30 made it). The
/// kernel's RT group bandwidth does not govern SCHED_DEADLINE: from inside the same group
/// a deadline timer runs as deadline (admission control off, as the measuring tests run
/// it) and its header says so. So a child group is no refusal of its own for deadline.
#[test]
fn issue37_a_child_group_that_refuses_fifo_still_runs_deadline() {
    let test = "issue37_a_child_group_that_refuses_fifo_still_runs_deadline";
    let _m = measuring();
    let mount = std::path::Path::new("/sys/fs/cgroup/cpu");
    if !is_root() || !mount.join("cpu.rt_runtime_us").exists() {
        skip(
            test,
            "needs root and cgroup v1 cpu with RT group scheduling",
        );
        return;
    }
    let group = RtLessGroup(mount.join(format!("jsq-issue37-{}", std::process::id())));
    if let Err(e) = std::fs::create_dir(&group.0) {
        skip(test, &format!("cannot make a cpu group: {e}"));
        return;
    }
    let policy_ran = |args: &[&str]| {
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg("echo $$ > \"$0\"/tasks && exec \"$@\"")
            .arg(&group.0)
            .arg(crate::util::bin())
            .args(args)
            .args(["-a", &cpu(), "-D", "300ms", "--json"])
            .output()
            .expect("sh runs");
        assert_eq!(out.status.code(), Some(0), "{:?}", stderr_lines(&out));
        let r: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
        r["probes"][0]["thread"].clone()
    };
    let fifo = policy_ran(&["timer", "-p", "1"]);
    assert!(
        fifo["sched_refused"]
            .as_str()
            .is_some_and(|w| w.contains("rt_runtime_us")),
        "FIFO refused in the group, said: {fifo}"
    );
    let Some(_off) = AdmissionOff::new(test) else {
        return;
    };
    let deadline = policy_ran(&["timer", "--policy", "deadline", "--runtime", "100us"]);
    assert!(deadline["sched_refused"].is_null(), "{deadline}");
    assert_eq!(
        deadline["policy"]["deadline"]["runtime_ns"], 100_000,
        "ran as deadline: {deadline}"
    );
}

/// A cgroup made for one test, its tasks moved back to the root and it removed on drop.
struct RtLessGroup(std::path::PathBuf);

impl Drop for RtLessGroup {
    fn drop(&mut self) {
        crate::util::remove_cpu_group(&self.0, std::path::Path::new("/sys/fs/cgroup/cpu"));
    }
}

fn deadline_timer(work: &str) -> TimerEntry {
    let r = json_result(&[
        "timer",
        "--policy",
        "deadline",
        "--runtime",
        "100us",
        "-i",
        "1000",
        "--work",
        work,
        "-a",
        &cpu(),
        "-D",
        "1s",
    ]);
    let e = r
        .entries::<TimerEntry>()
        .next()
        .expect("one timer entry")
        .clone();
    assert!(
        r.run.degraded.iter().any(|d| d.kind == "deadline-at-tick")
            || std::fs::read_to_string("/sys/kernel/debug/sched/features").is_ok()
    );
    e
}

/// Ground truth: 300 µs of work each period against a 100 µs runtime overruns it in every
/// job; 10 µs of work overruns it only when the background stretches a job tenfold, as
/// the control run shows.
#[test]
fn issue37_timer_counts_an_injected_deadline_overrun() {
    let test = "issue37_timer_counts_an_injected_deadline_overrun";
    let _m = measuring();
    let Some(_off) = AdmissionOff::new(test) else {
        return;
    };
    let control = deadline_timer("10us");
    let over = deadline_timer("300us");
    let (c, o) = (control.deadline.unwrap(), over.deadline.unwrap());
    assert_eq!(over.thread.policy.to_string(), "deadline");
    assert_eq!((o.runtime_ns, o.work_ns), (100_000, 300_000));
    assert!(over.wakeups > 50, "{} jobs", over.wakeups);
    assert_eq!(
        o.over_runtime, over.wakeups,
        "every 300 µs job overran 100 µs"
    );
    assert!(
        c.over_runtime * 10 <= control.wakeups,
        "control: {} of {} 10 µs jobs overran",
        c.over_runtime,
        control.wakeups
    );
}

/// Runtime 500 µs of each 1 ms: about half the run is withheld, and none of it is counted
/// as interruptions.
#[test]
fn issue37_noise_names_the_throttled_half_as_the_deadlines_own() {
    let test = "issue37_noise_names_the_throttled_half_as_the_deadlines_own";
    let _m = measuring();
    let Some(_off) = AdmissionOff::new(test) else {
        return;
    };
    let r = json_result(&[
        "noise",
        "--policy",
        "deadline",
        "--runtime",
        "500us",
        "--period",
        "1ms",
        "-a",
        &cpu(),
        "-D",
        "1s",
    ]);
    let e: &NoiseEntry = r.entries::<NoiseEntry>().next().expect("one noise entry");
    let d = e.deadline.expect("the deadline's own gaps are recorded");
    let share = d.throttled_ns as f64 / e.runtime_ns as f64;
    assert!(
        (0.35..=0.65).contains(&share),
        "throttled {share:.3} of the run"
    );
    assert!(d.throttled > 10, "{} throttled stretches", d.throttled);
    assert!(
        e.interrupted_ns * 4 < d.throttled_ns,
        "interrupted {} ns against {} ns throttled: the throttling was counted as noise",
        e.interrupted_ns,
        d.throttled_ns
    );
}

/// The hold: 100 µs every 1.37 ms, a period that is a multiple of neither the loop's 1 ms
/// nor the 4 ms tick, so that the holds sweep every phase of the loop's runtime and its
/// throttled stretches. Under tick enforcement a loop runs on past its runtime until the
/// next tick or preemption: only a hold in the first (at most 500 µs) of a run after a
/// replenishment is inside the runtime, about 2 % of holds every 3.7 ms (6 of 358 in a
/// run). Holds this often are themselves the preemptions that throttle the loop, so about
/// a quarter land inside (250-275 of ~1 000 in 1.5 s).
const HOLD_NS: u64 = 100_000;
const HOLD_PERIOD_NS: u64 = 1_370_000;
/// From the hold's end to the loop running again: the injector's log and sleep and the
/// switch back, with room for a vCPU's stall (gaps here end 26-45 µs after the hold in a
/// debug build).
const SWITCH_BACK_NS: u64 = 50_000;
/// A hold inside the runtime that holds one of the loop's period starts cannot be told
/// from a throttle that ended there: the loop sees the same gap. Under tick enforcement
/// the kernel throttles an overrun loop at a tick and, its timer's time being past,
/// replenishes it at once with a deadline periods on; the holder, kept waiting by the
/// loop's older deadline, then runs first, at the tick's phase, and in some runs that
/// phase lies just before a period start for every such hold (87-124 of ~220 missed in 4
/// of 22 runs). Those holds are set aside, said, and not judged.
const STRADDLE: Span = Span {
    period: 1_000_000,
    holder_relative: 150_000,
    before: 50_000,
    after: SWITCH_BACK_NS,
};
/// The share of the holds judged that still meet a period start: one that began in a
/// throttled stretch and was replenished before the watcher's read (the splitter rightly
/// counts it from the period start on), or one that met a period start the splitter
/// predicts a little off after relearning the phase: a hold and its wake-up (about 120
/// µs) of each 1 ms period.
const STRADDLE_SHARE: f64 = 0.12;

fn deadline(runtime_ns: u64, deadline_ns: u64, period_ns: u64) -> Deadline {
    Deadline {
        runtime_ns,
        deadline_ns,
        period_ns,
        step_ns: 0,
    }
}

/// A noise run at SCHED_DEADLINE (500 µs of each 1 ms) with the injector holding its CPU
/// as a deadline thread: each hold with whether the loop was inside its runtime at it.
fn deadline_noise_with_holds(
    cpus: (usize, usize),
    clock: &ClockInfo,
) -> (NoiseEntry, Window, Vec<(Injection, Look)>) {
    let run_for = Duration::from_millis(1500);
    let plan = RunPlan {
        sched: SchedRequest {
            policy: Policy::Deadline(deadline(500_000, 1_000_000, 1_000_000)),
            priority: 0,
        },
        ..fifo1_plan(cpus, run_for)
    };
    let cfg = NoiseConfig {
        event_log: 100_000,
        ..NoiseConfig::default()
    };
    // Its deadline, 150 µs off, comes before the loop's, which is at least 500 µs off
    // while the loop is inside its 500 µs runtime. Its period is shorter than the holds':
    // a constrained deadline thread that wakes before its period's end is throttled to it
    // (the kernel's dl_check_constrained_dl), and then the hold came apart from its timer's
    // interrupt, during the loop's bookkeeping for the interrupt's gap, where a debug build
    // of the loop does not see it.
    let holder = Holder::Deadline(deadline(150_000, 150_000, 1_000_000));
    let schedule = Schedule {
        cpu: cpus.0,
        priority: 0,
        period: Duration::from_nanos(HOLD_PERIOD_NS),
        busy: Duration::from_nanos(HOLD_NS),
        run_for: run_for + Duration::from_secs(5),
        count: usize::MAX,
    };
    let (ready, stop) = (Barrier::new(2), AtomicBool::new(false));
    let signal = HoldSignal::default();
    let (run, holds, looks) = std::thread::scope(|s| {
        let injector = s.spawn(|| {
            let begin = &mut || signal.begin();
            inject::inject_as(schedule, holder, &ready, &stop, clock, begin)
        });
        let watcher = s.spawn(|| deadline_watch::follow(cpus.1, &signal, &stop));
        ready.wait();
        let run = noise::run(&cfg, &plan, clock, &AtomicBool::new(false));
        stop.store(true, Ordering::Relaxed);
        (run, injector.join().unwrap(), watcher.join().unwrap())
    });
    let holds = holds.expect("the injector is a deadline thread on its CPU");
    let run = run.expect("the deadline loop ran");
    let window = run.outcome.window.expect("the run started");
    let placed = holds.into_iter().zip(looks);
    let known = placed.filter_map(|(h, look)| look?.inside(&h).and(Some((h, look?))));
    (run.entries[0].clone(), window, known.collect())
}

/// The noise gaps as (start, end) on the counter, and their durations in ns.
fn gaps(e: &NoiseEntry, scale: Scale) -> Vec<(u64, u64, u64)> {
    let log = e.events.as_ref().expect("event log requested");
    assert_eq!(log.dropped, 0, "event log overflowed");
    let starts = log.start_tsc.iter().zip(&log.duration_ns);
    starts
        .map(|(&s, &d)| (s, s + scale.to_ticks(d), d))
        .collect()
}

/// The gap that holds `h` (the last one starting before it does), if any holds it
/// whole and is longer than half a hold.
fn gap_of(gaps: &[(u64, u64, u64)], h: &Injection, tol: u64) -> Option<usize> {
    let idx = gaps.partition_point(|g| g.0 <= h.start + tol);
    let (_, end, dur) = *gaps.get(idx.checked_sub(1)?)?;
    (end + tol >= h.end && dur > HOLD_NS / 2).then_some(idx - 1)
}

/// Whether a found hold's gap is as long as it must be: the hold, at most plus the
/// holder's late wake-up (the loop was interrupted from its timer on) and the switch back.
fn right_length(gap_ns: u64, h: &Injection, scale: Scale) -> bool {
    let held = scale.to_ns(h.end - h.start);
    gap_ns + 200 >= held && gap_ns <= held + h.late_ns + SWITCH_BACK_NS
}

/// Ground truth (issue 37, done-when 2): 100 µs holds of a deadline injector land in the
/// loop's runtime and in its throttled stretches alike (`deadline_watch` tells which). Each one inside the runtime is
/// found, once, with its length; none in a throttled stretch is counted as noise, and the
/// throttled half stays the deadline's own. The misses allowed are binomial at 3 % plus
/// the share of the loop's time the background took (a hold that lands in a background
/// gap merges with it) plus the splitter's blind spot (`STRADDLE_SHARE`).
#[test]
fn issue37_noise_under_deadline_finds_a_known_hold_inside_its_runtime() {
    let test = "issue37_noise_under_deadline_finds_a_known_hold_inside_its_runtime";
    let _m = measuring();
    let Some(_off) = AdmissionOff::new(test) else {
        return;
    };
    let cpus = two_cpus().expect("AdmissionOff checked two CPUs");
    let (clock, _) = ClockInfo::detect();
    let scale = clock.scale;
    let (e, window, holds) = deadline_noise_with_holds(cpus, &clock);
    let (held, preempted) = inject::held_within(
        holds.iter().map(|h| h.0).collect(),
        window.start,
        window.deadline,
        scale,
    );
    assert!(
        inject::enough_held(held.len(), preempted),
        "{preempted} holds preempted"
    );
    let look = |h: &Injection| holds.iter().find(|(x, _)| x == h).map(|x| x.1);
    let in_runtime = |h: &Injection| look(h).is_some_and(|l| l.inside(h) == Some(true));
    let (inside, throttled): (Vec<Injection>, Vec<Injection>) =
        held.into_iter().partition(|h| in_runtime(h));
    let straddles = |h: &Injection| look(h).is_some_and(|l| l.straddles(h, &STRADDLE));
    let (aside, inside): (Vec<Injection>, Vec<Injection>) =
        inside.into_iter().partition(|h| straddles(h));
    let gaps = gaps(&e, scale);
    let tol = scale.to_ticks(200);
    let found: Vec<Option<usize>> = inside.iter().map(|h| gap_of(&gaps, h, tol)).collect();
    let wrong = inside.iter().zip(&found).filter(|(h, g)| match g {
        Some(i) => !right_length(gaps[*i].2, h, scale),
        None => true,
    });
    let wrong = wrong.count();
    let mut hit: Vec<usize> = found.iter().flatten().copied().collect();
    hit.sort_unstable();
    hit.dedup();
    let d = e.deadline.expect("the deadline's own gaps are recorded");
    let loop_ns = e.runtime_ns - d.throttled_ns;
    let stray_ns: u64 = (0..gaps.len())
        .filter(|i| hit.binary_search(i).is_err())
        .map(|i| gaps[i].2)
        .sum();
    let rate = 0.03 + stray_ns as f64 / loop_ns as f64 + STRADDLE_SHARE;
    let (ok, words) = misses::judge(wrong, inside.len(), rate);
    eprintln!(
        "  {} holds inside the runtime ({} more set aside: they hold a period start), {} in \
         throttled stretches; {} gaps hold one; not found or of the wrong length: {words}",
        inside.len(),
        aside.len(),
        throttled.len(),
        hit.len()
    );
    assert!(
        inside.len() >= 30,
        "{} holds inside the runtime",
        inside.len()
    );
    assert!(ok, "holds inside the runtime: {words}");
    let (ok, words) = misses::judge(hit.len().abs_diff(inside.len()), inside.len(), rate);
    assert!(ok, "one gap a hold: {} gaps, {words}", hit.len());
    own_throttling_kept_apart(&e, &gaps, &throttled, tol, scale);
}

/// The holds that fell in throttled stretches are not noise (the deadline withheld the
/// CPU anyway), and the throttled time is about half the run and not counted as noise. A
/// period start that came during such a hold makes the rest of it noise (the loop was
/// kept from its runtime), so only a gap begun before the holder's timer (a throttled
/// stretch taken for noise) counts against it.
fn own_throttling_kept_apart(
    e: &NoiseEntry,
    gaps: &[(u64, u64, u64)],
    throttled: &[Injection],
    tol: u64,
    scale: Scale,
) {
    let counted = throttled.iter().filter(|h| {
        let timer = h.start - scale.to_ticks(h.late_ns);
        gap_of(gaps, h, tol).is_some_and(|i| gaps[i].0 + tol < timer)
    });
    let (ok, words) = misses::judge(counted.count(), throttled.len(), 0.03);
    eprintln!("  holds in throttled stretches counted as noise: {words}");
    assert!(throttled.len() >= 30, "{} holds throttled", throttled.len());
    assert!(ok, "holds in throttled stretches counted as noise: {words}");
    let d = e.deadline.expect("the deadline's own gaps are recorded");
    let share = d.throttled_ns as f64 / e.runtime_ns as f64;
    eprintln!(
        "  throttled {share:.3} of the run in {} stretches; interrupted {} ns",
        d.throttled, e.interrupted_ns
    );
    assert!(
        (0.35..=0.65).contains(&share),
        "throttled {share:.3} of the run"
    );
    assert!(
        e.interrupted_ns * 4 < d.throttled_ns,
        "interrupted {} ns against {} ns throttled",
        e.interrupted_ns,
        d.throttled_ns
    );
}
