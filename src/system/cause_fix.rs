//! Which audit findings' fixes would remove a measured cause of lost time: the one
//! mapping that the noise verdict (`report::terminal::verdict`), tune's step order
//! (`system::tune::share`) and watch's cause table (`report::terminal::watch`) all read.
//!
//! Two levels, one source: the verdict's coarse causes ([`Cause`]: the tick, long
//! stalls, everything else, RT throttling, the fair server, a CFS quota) each name the findings that
//! address them, most specific first; [`TARGETS`] says, per finding, which rows of a
//! traced cause table (a kind, and a word the row's name holds) its fix removes. A row of
//! a cause table belongs to one coarse cause ([`Cause::of_row`]), and its findings are that
//! cause's findings whose targets (where the table names any) match the row: a kworker's
//! row points at the workqueue findings, not at the IRQ ones that also address "other".

use crate::stats::causes::CauseKind;
use crate::system::audit::{Finding, Severity};
use crate::system::finding_id::FindingId;

/// What a cause is, and the audit findings whose fixes address it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    Tick,
    LongStall,
    Other,
    /// Measured from trace events only: the kernel's RT throttle held the loop off.
    RtThrottling,
    /// Measured from trace events only: the fair server ran normal tasks instead.
    FairServer,
    /// Measured from trace events only: a cgroup's CFS quota ran out and held the loop
    /// off (a normal-policy loop) for the rest of the period.
    CfsQuota,
    /// Measured from trace events only: the tick a nohz_full CPU keeps once its tick
    /// stopped (for the next timer due there, at most a second apart), which no tick
    /// setting removes.
    ResidualTick,
    /// Measured from trace events only: the tick on a nohz_full CPU, kept running by a
    /// dependency `timer:tick_stop` named (a second runnable task, RCU, …): its fix is
    /// that dependency's, which the other rows show (the task that ran), not nohz_full.
    TickKept,
}

impl Cause {
    /// Every cause, for tests and for walking them all.
    pub const ALL: [Cause; 8] = [
        Cause::Tick,
        Cause::LongStall,
        Cause::Other,
        Cause::RtThrottling,
        Cause::FairServer,
        Cause::CfsQuota,
        Cause::ResidualTick,
        Cause::TickKept,
    ];

    /// The findings that address this cause, most specific first (of equal severity the
    /// first listed is the fix named).
    pub fn findings(self) -> &'static [FindingId] {
        use FindingId as F;
        match self {
            // isolcpus alone leaves the tick running: only nohz_full stops it.
            Cause::Tick => &[
                F::NohzFullMissing,
                F::NohzFullPartial,
                F::NohzFullUnsupported,
                F::IsolatedNotNohzFull,
            ],
            // hypervisor-present is info (context, not a fix) and so never matched. The
            // idle-state findings are not here: noise is measured on a CPU that never
            // idles, so they cannot remove it (they matter for wake-ups: see IDLE_EXIT).
            Cause::LongStall => &[F::StealTime, F::SmtActive, F::NmiWatchdogOn],
            Cause::Other => &[
                F::IrqOnMeasuredCpus,
                F::IrqManagedOnMeasured,
                F::IsolatedMissing,
                F::IsolatedPartial,
                F::IsolcpusNotInForce,
                F::ManagedIrqNotIsolated,
                F::IrqbalanceRunning,
                F::KthreadsOnMeasured,
                F::RcuNocbsMissing,
                F::RcuNocbsPartial,
                F::NohzFullWithoutRcuNocbs,
                F::WorkqueueOnMeasured,
                F::WorkqueuesOnMeasured,
                F::WritebackOnMeasured,
                F::TimerMigrationOn,
                F::IrqAffinityIncludesMeasured,
                F::SoftWatchdogOn,
                F::StatIntervalShort,
                F::KsmRunning,
                F::DamonRunning,
            ],
            Cause::RtThrottling => &[F::RtThrottlingOn],
            Cause::FairServer => &[F::FairServerOn],
            Cause::CfsQuota => &[F::CfsQuota],
            // nohz_full is already set where these are named: no finding removes them.
            Cause::ResidualTick | Cause::TickKept => &[],
        }
    }

    /// The coarse cause a row of a traced cause table belongs to: the tick is the local
    /// timer vector running the tick's hrtimer (the residual tick, or one kept on, where
    /// the trace's tick_stop said so); what no event covered is where long stalls go; RT
    /// throttling, the fair server and a CFS quota by their rows' stable names.
    pub fn of_row(kind: CauseKind, cause: &str) -> Cause {
        use crate::trace::attribute::{KEPT, RESIDUAL};
        let tick = kind == CauseKind::Vector && cause.starts_with("vector local_timer: tick_");
        match kind {
            _ if tick && cause.contains(&format!("({RESIDUAL}")) => Cause::ResidualTick,
            _ if tick && cause.contains(&format!("({KEPT}")) => Cause::TickKept,
            _ if tick => Cause::Tick,
            CauseKind::Unaccounted => Cause::LongStall,
            CauseKind::Throttling if cause.starts_with("real-time throttling") => {
                Cause::RtThrottling
            }
            CauseKind::Throttling if cause.starts_with("fair server") => Cause::FairServer,
            CauseKind::Throttling if cause.starts_with("CFS quota") => Cause::CfsQuota,
            _ => Cause::Other,
        }
    }
}

/// Whether `f` is one to act on for `cause`: warn or bad. The fair server's finding is
/// only info (it matters only to a loop that spins), but where the trace measured it
/// taking the CPU, it is the fix.
fn needs_fixing(cause: Cause, f: &Finding) -> bool {
    matches!(f.severity, Severity::Warn | Severity::Bad)
        || (cause == Cause::FairServer && f.severity == Severity::Info)
}

/// The non-ok findings that address `cause`, bad first.
pub fn matching<'a>(cause: Cause, findings: &[&'a Finding]) -> Vec<&'a Finding> {
    let mut v: Vec<&Finding> = (findings.iter().copied())
        .filter(|f| needs_fixing(cause, f) && cause.findings().contains(&f.id))
        .collect();
    // Worst first; of equal severity, the finding most specific to the cause (the
    // findings are listed in that order: nohz_full before isolation for the tick).
    let rank = |f: &Finding| cause.findings().iter().position(|id| *id == f.id);
    v.sort_by_key(|f| (std::cmp::Reverse(f.severity), rank(f)));
    v
}

/// A row a finding's fix targets: a kind, and where given a word its cause names contain
/// ("task kworker/1:1:57 (SCHED_OTHER nice 0) vmstat_update").
pub type Target = (CauseKind, Option<&'static str>);

/// Finding → the rows of a cause table its fix removes from the CPUs it is about. A
/// finding of `Cause::Other` is listed here (a test checks it), so that a row of "other"
/// gets only the findings that remove it.
pub const TARGETS: &[(FindingId, &[Target])] = {
    use CauseKind as K;
    use FindingId as F;
    const KWORKER: &[Target] = &[(K::Task, Some("kworker"))];
    const IRQ: &[Target] = &[(K::Irq, None)];
    // Isolation keeps other tasks off the CPU; it moves no interrupt.
    const TASKS: &[Target] = &[(K::Task, None)];
    // Offloaded callbacks run in the rcuo threads elsewhere, not in the RCU softirq here.
    const RCU: &[Target] = &[(K::Softirq, Some("RCU")), (K::Task, Some("task rcu"))];
    &[
        // Either throttle: with the RT runtime unlimited, the fair server stops too. Not
        // a cgroup's CFS quota, which is no real-time setting. (The quota's row is
        // `Cause::CfsQuota`'s; tune's step order reads its target here.)
        (
            F::RtThrottlingOn,
            &[
                (K::Throttling, Some("real-time throttling")),
                (K::Throttling, Some("fair server")),
            ],
        ),
        (F::CfsQuota, &[(K::Throttling, Some("CFS quota"))]),
        (F::FairServerOn, &[(K::Throttling, Some("fair server"))]),
        (F::IrqOnMeasuredCpus, IRQ),
        (F::IrqAffinityIncludesMeasured, IRQ),
        (F::IrqQuietOnMeasured, IRQ),
        (F::IrqManagedOnMeasured, IRQ),
        (F::ManagedIrqNotIsolated, IRQ),
        // It moves IRQs back onto the CPUs they were moved off.
        (F::IrqbalanceRunning, IRQ),
        (F::IsolatedMissing, TASKS),
        (F::IsolatedPartial, TASKS),
        (F::IsolcpusNotInForce, TASKS),
        (F::RcuNocbsMissing, RCU),
        (F::RcuNocbsPartial, RCU),
        (F::NohzFullWithoutRcuNocbs, RCU),
        // Timers armed elsewhere stop being queued here: their softirq and tick work.
        (
            F::TimerMigrationOn,
            &[
                (K::Softirq, Some("TIMER")),
                (K::Vector, Some("local_timer")),
            ],
        ),
        (F::StatIntervalShort, &[(K::Task, Some("vmstat"))]),
        (F::WorkqueueOnMeasured, KWORKER),
        (F::WritebackOnMeasured, KWORKER),
        (F::WorkqueuesOnMeasured, KWORKER),
        // The audit's watched kernel threads, less the kworkers (they follow the
        // workqueue masks) and IRQ threads (their IRQ's affinity), which its step does not
        // move.
        (
            F::KthreadsOnMeasured,
            &[
                (K::Task, Some("task rcu")),
                (K::Task, Some("task kdamond")),
                (K::Task, Some("task kcompactd")),
                (K::Task, Some("task khugepaged")),
                (K::Task, Some("task ksmd")),
                (K::Task, Some("task kswapd")),
                (K::Task, Some("task khungtaskd")),
                (K::Task, Some("task oom_reaper")),
            ],
        ),
        (F::SoftWatchdogOn, &[(K::Task, Some("watchdog"))]),
        (F::DamonRunning, &[(K::Task, Some("kdamond"))]),
        (F::KsmRunning, &[(K::Task, Some("ksmd"))]),
        (F::ThpMadvise, &[(K::Task, Some("khugepaged"))]),
        (F::HungTaskOn, &[(K::Task, Some("khungtaskd"))]),
    ]
};

/// The findings whose fix is to isolate CPUs: they move the tasks the scheduler places,
/// not one whose own affinity holds it there.
pub const ISOLATION: &[FindingId] = &[
    FindingId::IsolatedMissing,
    FindingId::IsolatedPartial,
    FindingId::IsolcpusNotInForce,
];

/// The rows `id`'s fix targets (none for a finding the table does not name).
pub fn targets(id: FindingId) -> &'static [Target] {
    TARGETS
        .iter()
        .find(|(f, _)| *f == id)
        .map_or(&[], |(_, t)| *t)
}

/// Whether a row (`kind`, `cause`) is one `t` names.
pub fn hits(t: &[Target], kind: CauseKind, cause: &str) -> bool {
    t.iter()
        .any(|(k, word)| *k == kind && word.is_none_or(|w| cause.contains(w)))
}

/// What removes the time a sleeping thread's wake-up spends leaving idle: shallower idle
/// states, a haltpoll guest that polls before it halts, a PM QoS resume-latency limit.
///
/// The noise verdict leaves these out on purpose (a spinning loop's CPU never idles),
/// but `watch` measures wake-ups of threads that sleep: a thread woken for an idle CPU
/// waits, between its wake-up and its switch in, for that CPU to leave its idle state
/// (the C-state's exit latency; on a guest, a halted vCPU's VM exit and the host
/// scheduling it again), and the trace shows that time as the idle task's.
pub const IDLE_EXIT: &[FindingId] = &[
    FindingId::IdleStatesDeep,
    FindingId::IdleHaltpoll,
    FindingId::HaltpollNoPoll,
    FindingId::PmQosUnset,
];

/// The findings whose fixes would remove a row of a sleeping thread's wake-up delays
/// (`watch`), most specific first: the idle task's row is idle exit ([`IDLE_EXIT`]);
/// any other row, its coarse cause's findings that target it (all of them where the
/// cause's findings name no rows: the tick's, the long stalls').
pub fn wakeup_findings(kind: CauseKind, cause: &str) -> Vec<FindingId> {
    if kind == CauseKind::Task && cause.starts_with("idle") {
        return IDLE_EXIT.to_vec();
    }
    // The timer interrupt whose callback woke a sleeper (its own `clock_nanosleep`, as
    // a rule): the rest of it after the wake-up is the wake-up's own way, which no
    // setting removes; timer_migration moves timers armed elsewhere, not this one.
    if kind == CauseKind::Vector && cause.ends_with(": hrtimer_wakeup") {
        return Vec::new();
    }
    row_findings(kind, cause)
}

/// The findings whose fixes would remove a row of a cause table, most specific first:
/// its coarse cause's findings that target it (all of them where the cause's findings
/// name no rows: the tick's, the long stalls').
fn row_findings(kind: CauseKind, cause: &str) -> Vec<FindingId> {
    (Cause::of_row(kind, cause).findings().iter().copied())
        .filter(|id| {
            let t = targets(*id);
            t.is_empty() || hits(t, kind, cause)
        })
        .collect()
}

/// The findings of this host's audit, not ok, whose fixes would remove the row (`kind`,
/// `cause`) of a sleeping thread's wake-up delays; worst first, then most specific.
pub fn wakeup_matching<'a>(
    kind: CauseKind,
    cause: &str,
    findings: &[&'a Finding],
) -> Vec<&'a Finding> {
    ordered(kind, cause, wakeup_findings(kind, cause), findings)
}

/// The findings of this host's audit, not ok, whose fixes would remove the row (`kind`,
/// `cause`) of a spinning loop's lost time (the noise verdict's largest row: an IRQ
/// thread's row points at its IRQ's affinity, a kworker's at the workqueue masks).
pub fn row_matching<'a>(
    kind: CauseKind,
    cause: &str,
    findings: &[&'a Finding],
) -> Vec<&'a Finding> {
    ordered(kind, cause, row_findings(kind, cause), findings)
}

/// `findings` whose ids are in `ids`, not ok: those that name the row first, then worst
/// first, then as listed.
fn ordered<'a>(
    kind: CauseKind,
    cause: &str,
    ids: Vec<FindingId>,
    findings: &[&'a Finding],
) -> Vec<&'a Finding> {
    let coarse = Cause::of_row(kind, cause);
    let mut v: Vec<&Finding> = (findings.iter().copied())
        .filter(|f| needs_fixing(coarse, f) && ids.contains(&f.id))
        .collect();
    // A finding that names this row's task or vector (damon-running for kdamond) before
    // one that covers every row of its kind (isolated-missing for any task); then worst
    // first, then as listed.
    let generic =
        |f: &Finding| (targets(f.id).iter()).all(|(k, word)| *k != kind || word.is_none());
    let rank = |f: &Finding| ids.iter().position(|id| *id == f.id);
    v.sort_by_key(|f| (generic(f), std::cmp::Reverse(f.severity), rank(f)));
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finding(id: FindingId, severity: Severity) -> Finding {
        Finding::made_up(id, severity, &format!("fix {id}"))
    }

    /// Issue 30: a window a cgroup's CFS quota made points at the quota's finding, never
    /// at RT throttling's.
    #[test]
    fn issue30_a_cfs_quota_row_points_at_the_quota() {
        let row = "CFS quota: cpu.cfs_quota_us 35000, cpu.cfs_period_us 100000 of /jsq";
        assert_eq!(
            wakeup_findings(CauseKind::Throttling, row),
            vec![FindingId::CfsQuota]
        );
        let rt = "real-time throttling (kernel.sched_rt_runtime_us = 950000 of 1000000)";
        let ids = wakeup_findings(CauseKind::Throttling, rt);
        assert!(ids.contains(&FindingId::RtThrottlingOn) && !ids.contains(&FindingId::CfsQuota));
    }

    /// Every finding of "other" names the rows it removes: else a row of "other" would
    /// get it whatever the row is.
    #[test]
    fn every_finding_of_other_names_its_rows() {
        for id in Cause::Other.findings() {
            assert!(!targets(*id).is_empty(), "{id} has no targets");
        }
    }

    /// A row belongs to the verdict's cause it always did: the tick's hrtimer, the
    /// unaccounted time, the two throttles by name, the rest "other".
    #[test]
    fn rows_fall_in_the_verdicts_causes() {
        use CauseKind as K;
        let of = Cause::of_row;
        assert_eq!(
            of(K::Vector, "vector local_timer: tick_nohz_handler"),
            Cause::Tick
        );
        assert_eq!(of(K::Vector, "vector local_timer"), Cause::Other);
        assert_eq!(of(K::Unaccounted, "unaccounted"), Cause::LongStall);
        assert_eq!(
            of(K::Throttling, "real-time throttling"),
            Cause::RtThrottling
        );
        assert_eq!(
            of(
                K::Throttling,
                "fair server (fair_server runtime 50 ms of 1000 ms)"
            ),
            Cause::FairServer
        );
        assert_eq!(
            of(K::Task, "task kworker/1:1:57 (SCHED_OTHER nice 0)"),
            Cause::Other
        );
    }

    /// A CFS quota's window is its own cause, whose one fix is the quota's: never
    /// "other" (the verdict said IRQs and named irq-on-measured-cpus for it), and the
    /// quota's finding addresses nothing else.
    #[test]
    fn a_cfs_quota_row_is_its_own_cause() {
        let row = "CFS quota: cpu.cfs_quota_us 35000, cpu.cfs_period_us 100000 of /jsq";
        assert_eq!(Cause::of_row(CauseKind::Throttling, row), Cause::CfsQuota);
        assert_eq!(Cause::CfsQuota.findings(), [FindingId::CfsQuota]);
        for c in Cause::ALL.into_iter().filter(|c| *c != Cause::CfsQuota) {
            assert!(!c.findings().contains(&FindingId::CfsQuota), "{c:?}");
        }
        let f = [
            finding(FindingId::IrqOnMeasuredCpus, Severity::Bad),
            finding(FindingId::CfsQuota, Severity::Warn),
        ];
        let refs: Vec<&Finding> = f.iter().collect();
        let other: Vec<FindingId> = matching(Cause::Other, &refs).iter().map(|f| f.id).collect();
        assert_eq!(other, [FindingId::IrqOnMeasuredCpus]);
        let quota: Vec<FindingId> = (matching(Cause::CfsQuota, &refs).iter())
            .map(|f| f.id)
            .collect();
        assert_eq!(quota, [FindingId::CfsQuota]);
    }

    /// Each kind of row of a watched thread's delays gets the findings that remove it,
    /// and not another row's.
    #[test]
    fn wake_up_rows_point_at_the_findings_that_remove_them() {
        use CauseKind as K;
        use FindingId as F;
        let kworker = wakeup_findings(
            K::Task,
            "task kworker/1:1:57 (SCHED_OTHER nice 0) vmstat_update",
        );
        assert!(kworker.contains(&F::WorkqueueOnMeasured), "{kworker:?}");
        assert!(kworker.contains(&F::StatIntervalShort), "{kworker:?}");
        assert!(kworker.contains(&F::IsolatedMissing), "{kworker:?}");
        assert!(!kworker.contains(&F::IrqOnMeasuredCpus), "{kworker:?}");
        let other = wakeup_findings(K::Task, "task stress-ng:812 (SCHED_OTHER nice 0)");
        assert!(other.contains(&F::IsolatedMissing), "{other:?}");
        assert!(!other.contains(&F::WorkqueueOnMeasured), "{other:?}");
        let irq = wakeup_findings(K::Irq, "irq 36 virtio1-req.0");
        assert_eq!(irq[0], F::IrqOnMeasuredCpus);
        assert!(!irq.contains(&F::IsolatedMissing), "{irq:?}");
        let rcu = wakeup_findings(K::Softirq, "softirq RCU");
        assert!(rcu.contains(&F::RcuNocbsMissing) && !rcu.contains(&F::TimerMigrationOn));
        let timer = wakeup_findings(K::Softirq, "softirq TIMER");
        assert_eq!(timer, [F::TimerMigrationOn]);
        assert_eq!(
            wakeup_findings(K::Vector, "vector local_timer: tick_nohz_handler"),
            Cause::Tick.findings()
        );
        assert_eq!(
            wakeup_findings(K::Vector, "vector local_timer"),
            [F::TimerMigrationOn]
        );
        assert!(wakeup_findings(K::Vector, "vector local_timer: hrtimer_wakeup").is_empty());
        assert_eq!(
            wakeup_findings(K::Throttling, "real-time throttling"),
            [F::RtThrottlingOn]
        );
        assert_eq!(
            wakeup_findings(K::Throttling, "fair server"),
            [F::FairServerOn]
        );
        assert_eq!(
            wakeup_findings(K::Unaccounted, "unaccounted"),
            Cause::LongStall.findings()
        );
        // A sleeper woken for an idle CPU waits for it to leave idle.
        assert_eq!(wakeup_findings(K::Task, "idle (swapper/1)"), IDLE_EXIT);
        assert_eq!(wakeup_findings(K::Nmi, "nmi"), Vec::<FindingId>::new());
    }

    /// Issue 48: the rows of PREEMPT_RT's kernel threads point at what removes the work
    /// they run: an IRQ thread at its IRQ's affinity, ktimers at fewer timers, rcuc at
    /// rcu_nocbs; never at isolation or moving the task (they are per-CPU, or follow their
    /// IRQ). The residual tick and a tick kept on have no finding of their own.
    #[test]
    fn issue48_rt_threads_rows_point_at_the_work_they_run() {
        use CauseKind as K;
        use FindingId as F;
        let irq = wakeup_findings(K::Irq, "irq 4 ttyS0 (its thread irq/4-ttyS0, real-time 50)");
        assert_eq!(irq[0], F::IrqOnMeasuredCpus, "{irq:?}");
        let timers = wakeup_findings(
            K::Softirq,
            "softirqs TIMER and HRTIMER (their thread ktimers/1, real-time 1)",
        );
        assert_eq!(timers, [F::TimerMigrationOn]);
        let rcu = wakeup_findings(K::Softirq, "softirq RCU (its thread rcuc/1, real-time 1)");
        assert!(rcu.contains(&F::RcuNocbsMissing), "{rcu:?}");
        for ids in [&irq, &timers, &rcu] {
            for not in [F::IsolatedMissing, F::KthreadsOnMeasured] {
                assert!(!ids.contains(&not), "{ids:?}");
            }
        }
        let residual = "vector local_timer: tick_sched_timer (residual tick: nohz_full stopped \
                        the tick)";
        assert_eq!(Cause::of_row(K::Vector, residual), Cause::ResidualTick);
        assert!(wakeup_findings(K::Vector, residual).is_empty());
        let kept = "vector local_timer: tick_nohz_handler (tick kept on: SCHED)";
        assert_eq!(Cause::of_row(K::Vector, kept), Cause::TickKept);
        assert!(wakeup_findings(K::Vector, kept).is_empty());
    }

    /// A host whose audit reports the finding not ok gets the link; a host where it is
    /// ok (or info), or that has no such finding, gets none.
    #[test]
    fn only_a_finding_this_host_reported_not_ok_is_linked() {
        use CauseKind as K;
        use FindingId as F;
        let row = (
            K::Task,
            "task kworker/0:2:99 (SCHED_OTHER nice 0) vmstat_update",
        );
        let bad_host = [
            finding(F::WorkqueueOnMeasured, Severity::Warn),
            finding(F::IrqOnMeasuredCpus, Severity::Bad),
            finding(F::StatIntervalShort, Severity::Bad),
        ];
        let refs: Vec<&Finding> = bad_host.iter().collect();
        let got: Vec<FindingId> = wakeup_matching(row.0, row.1, &refs)
            .iter()
            .map(|f| f.id)
            .collect();
        // Worst first; the IRQ finding is not this row's.
        assert_eq!(got, [F::StatIntervalShort, F::WorkqueueOnMeasured]);
        let ok_host = [
            finding(F::WorkqueueOk, Severity::Ok),
            finding(F::StatIntervalOk, Severity::Ok),
            finding(F::WorkqueueOnMeasured, Severity::Info),
            finding(F::IrqOnMeasuredCpus, Severity::Bad),
        ];
        let refs: Vec<&Finding> = ok_host.iter().collect();
        assert!(wakeup_matching(row.0, row.1, &refs).is_empty());
        assert!(wakeup_matching(row.0, row.1, &[]).is_empty());
        // The idle row: linked to the host's deep idle states only where reported.
        let idle = [finding(F::IdleHaltpoll, Severity::Warn)];
        let refs: Vec<&Finding> = idle.iter().collect();
        let got = wakeup_matching(K::Task, "idle (swapper/1)", &refs);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].id, F::IdleHaltpoll);
        let shallow = [finding(F::IdleStatesShallow, Severity::Ok)];
        let refs: Vec<&Finding> = shallow.iter().collect();
        assert!(wakeup_matching(K::Task, "idle (swapper/1)", &refs).is_empty());
        // The fair server's info finding is its fix where the trace measured it.
        let fair = [finding(F::FairServerOn, Severity::Info)];
        let refs: Vec<&Finding> = fair.iter().collect();
        assert_eq!(
            wakeup_matching(K::Throttling, "fair server", &refs).len(),
            1
        );
    }
}
