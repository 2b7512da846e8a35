//! The tick on a nohz_full CPU, and the kernel that threads its interrupts (issue 48).
//!
//! A nohz_full CPU running one task stops its tick; what still comes is the residual
//! tick (for the next timer due there, at most a second apart where the kernel caps the
//! wait), which no tick setting removes, or a tick kept on by a
//! dependency the trace's `timer:tick_stop` names (a second runnable task, RCU, …), whose
//! fix is that dependency's, not nohz_full. Attribution names each tick row by what the
//! event said (`trace::attribute::TickMode`); here a plain tick row on a nohz_full CPU
//! that recurs a second or more apart is the residual tick by its period, and a tick
//! found only from the gaps' timing is said to be inferred, never named as seen.

use super::{Cause, Split, duration_words};
use crate::report::ResultFile;
use crate::stats::causes::CauseRow;
use crate::trace::attribute::KEPT;
use crate::trace::event::TICK_DEPENDENCIES;

/// A tick row this far apart or more on a nohz_full CPU is the residual tick.
const RESIDUAL_PERIOD_NS: u64 = 500_000_000;

/// The coarse cause of a traced row on a CPU that is (`nohz`) nohz_full or not.
pub(super) fn row_cause(c: &CauseRow, nohz: bool) -> Cause {
    match Cause::of_row(c.kind, &c.cause) {
        Cause::Tick if nohz && c.period_ns.is_some_and(|p| p >= RESIDUAL_PERIOD_NS) => {
            Cause::ResidualTick
        }
        cause => cause,
    }
}

/// The dependencies that kept the tick on, from the rows of the ticks they kept
/// ("… (tick kept on: SCHED and RCU: …)"), each once.
pub(super) fn kept_by<'a>(rows: impl Iterator<Item = &'a CauseRow>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for r in rows {
        let Some((_, rest)) = r.cause.split_once(&format!("({KEPT} ")) else {
            continue;
        };
        let names = rest.split([':', ')']).next().unwrap_or("");
        for n in names
            .split([',', ' '])
            .filter(|n| !n.is_empty() && *n != "and")
        {
            if !out.iter().any(|o| o == n) {
                out.push(n.to_string());
            }
        }
    }
    out
}

/// What a dependency means for the CPU, in words.
fn meaning(name: &str) -> &str {
    match name {
        "SCHED" => "more than one task was runnable there (the other task's row is what to move)",
        "RCU" | "RCU_EXP" => "RCU needed the CPU for a grace period",
        n => (TICK_DEPENDENCIES.iter())
            .find(|d| d.1 == n)
            .map_or("a dependency this version does not know", |d| d.2),
    }
}

/// The sentence's middle for a tick on a nohz_full CPU (`s.nohz`), or for the residual
/// tick and a tick kept on; `None` for any other cause. `tick` is the period and HZ found.
pub(super) fn words(
    cause: Cause,
    tick: Option<(u64, u32)>,
    s: &Split,
    share: &str,
    (is, its): (&str, &str),
) -> Option<String> {
    let every = |what: &str| match tick {
        Some((p, hz)) => format!("every {} {what} (HZ={hz})", duration_words(p)),
        None => what.to_string(),
    };
    Some(match cause {
        Cause::ResidualTick => format!(
            "{is} interrupted by the residual tick, {share} % of {its} lost time: nohz_full \
             had stopped the tick (timer:tick_stop said so), and it still comes for the next \
             timer due on this CPU, at most a second apart where the kernel caps the wait; no \
             tick setting removes it, the timers' own rows (TIMER softirq) say whose"
        ),
        Cause::TickKept => {
            let deps = match s.kept_by.as_slice() {
                [] => "a dependency".to_string(),
                d => d.join(" and "),
            };
            let why: Vec<&str> = s.kept_by.iter().map(|d| meaning(d)).collect();
            format!(
                "{is} interrupted by the tick, kept running on a nohz_full CPU by {deps} \
                 (timer:tick_stop's dependency: {}), {share} % of {its} lost time; its fix is \
                 that dependency's, not nohz_full",
                why.join("; ")
            )
        }
        Cause::Tick if s.nohz && !s.measured => format!(
            "{is} interrupted {}, inferred from the gaps' timing, not seen: on a nohz_full \
             CPU the tick runs only while something keeps it on (a second runnable task, \
             RCU, a POSIX CPU timer), which a trace names (timer:tick_stop), {share} % of \
             {its} lost time",
            every("at the tick's period")
        ),
        Cause::Tick if s.nohz => format!(
            "{is} interrupted {} on a nohz_full CPU, where no timer:tick_stop event said why \
             it ran, {share} % of {its} lost time",
            every("by the tick")
        ),
        _ => return None,
    })
}

/// On a PREEMPT_RT kernel, one sentence saying so: its interrupts run in threads, and
/// the causes name those threads by the work they run.
pub(super) fn preempt_rt_line(r: &ResultFile) -> Option<String> {
    let from = r.host.preempt_rt()?;
    Some(format!(
        "The kernel is PREEMPT_RT ({from}): its device IRQs, timer softirqs and RCU work \
         run in threads (irq/N-name, ktimers/N, rcuc/N), named here by the work they run."
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::causes::CauseKind;

    fn tick_row(cause: &str, period_ns: Option<u64>) -> CauseRow {
        CauseRow {
            period_ns,
            ..CauseRow::made_up(CauseKind::Vector, cause, 5, 5, 50_000)
        }
    }

    /// Issue 48: a tick row is the residual tick or one kept on as the trace named it;
    /// a plain one on a nohz_full CPU a second apart is the residual tick by its period,
    /// and anywhere else, or at HZ, the tick.
    #[test]
    fn issue48_tick_rows_are_what_the_trace_said_they_were() {
        let residual = tick_row(
            "vector local_timer: tick_sched_timer (residual tick: nohz_full stopped the tick)",
            None,
        );
        assert_eq!(row_cause(&residual, true), Cause::ResidualTick);
        let kept = tick_row(
            "vector local_timer: tick_sched_timer (tick kept on: SCHED and RCU: more than one \
             task was runnable; RCU needed the CPU)",
            Some(4_000_000),
        );
        assert_eq!(row_cause(&kept, true), Cause::TickKept);
        assert_eq!(kept_by([&kept, &kept].into_iter()), ["SCHED", "RCU"]);
        let stable = tick_row(
            "vector local_timer: tick_sched_timer (tick kept on: SCHED)",
            None,
        );
        assert_eq!(kept_by([&stable].into_iter()), ["SCHED"]);
        let plain = |p| tick_row("vector local_timer: tick_sched_timer", p);
        assert_eq!(
            row_cause(&plain(Some(1_040_000_000)), true),
            Cause::ResidualTick
        );
        assert_eq!(row_cause(&plain(Some(1_040_000_000)), false), Cause::Tick);
        assert_eq!(row_cause(&plain(Some(4_000_000)), true), Cause::Tick);
    }

    /// Issue 48: on a nohz_full CPU the verdict never names "the tick (HZ=…)" as seen
    /// when only the gaps' timing showed a train at its period; the residual tick and a
    /// tick kept on are named as what they are.
    #[test]
    fn issue48_a_nohz_full_cpus_tick_is_never_named_as_seen_unless_traced() {
        let on = |nohz, measured| Split {
            tick_ns: 900,
            other_ns: 100,
            tick: Some((4_000_000, 250)),
            nohz,
            measured,
            ..Split::default()
        };
        let inferred = words(
            Cause::Tick,
            Some((4_000_000, 250)),
            &on(true, false),
            "90",
            ("is", "its"),
        )
        .unwrap();
        assert!(
            inferred.contains("inferred from the gaps' timing, not seen"),
            "{inferred}"
        );
        assert!(!inferred.contains("the timer tick"), "{inferred}");
        let traced = words(
            Cause::Tick,
            Some((4_000_000, 250)),
            &on(true, true),
            "90",
            ("is", "its"),
        )
        .unwrap();
        assert!(
            traced.contains("no timer:tick_stop event said why"),
            "{traced}"
        );
        // Not nohz_full: the verdict's usual words.
        assert_eq!(
            words(
                Cause::Tick,
                Some((4_000_000, 250)),
                &on(false, false),
                "90",
                ("is", "its")
            ),
            None
        );
        let kept = Split {
            kept_ns: 900,
            kept_by: vec!["SCHED".into()],
            nohz: true,
            measured: true,
            ..Split::default()
        };
        let w = words(Cause::TickKept, None, &kept, "90", ("is", "its")).unwrap();
        assert!(
            w.contains("kept running on a nohz_full CPU by SCHED"),
            "{w}"
        );
        assert!(w.contains("more than one task was runnable"), "{w}");
        let r = words(Cause::ResidualTick, None, &kept, "90", ("is", "its")).unwrap();
        assert!(
            r.contains("residual tick") && r.contains("no tick setting removes it"),
            "{r}"
        );
    }
}
