//! `--policy deadline` (issue 37): refusals in one line with exit 2, a deadline miss
//! injected with --work counted as an overrun, and noise's throttled half named as the
//! deadline's own. The measuring tests turn admission control off for their run (the
//! kernel refuses a pinned deadline thread otherwise) and restore it.

use crate::util::{
    as_nobody, assert_bad_input, is_root, jitterscope, json_result, measuring, nobody_cannot_reach,
    skip, stderr_lines, two_cpus,
};
use jitterscope::probes::noise::NoiseEntry;
use jitterscope::probes::timer::TimerEntry;

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
/// refused: one line naming both fixes, exit 2.
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
    let out = jitterscope(&["timer", "--policy", "deadline", "-a", &cpu(), "-D", "1s"]);
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
    assert!(lines[0].contains("root domain"), "{lines:?}");
    assert!(lines[0].contains("sched_rt_runtime_us=-1"), "{lines:?}");
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
