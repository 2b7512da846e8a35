//! Every id the audit can give a finding, as a type. The result file keeps the ids as
//! kebab-case strings (`jitterscope/1`); in code they are `FindingId` values, so the
//! verdict and anything else that reacts to a finding names it by a variant the compiler
//! checks, not by a string that silently stops matching when an id is renamed.
//!
//! A check that could not read (or parse) its file gives `<check>-unreadable`
//! (`-unparseable`): those are `FindingId::Unreadable(Check)` and
//! `FindingId::Unparseable(Check)`, one `Check` per base name.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A string that is no finding id of this version.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FindingIdError {
    /// Not one of `FindingId::all()`.
    #[error("'{0}' is not an audit finding id")]
    Unknown(String),
}

macro_rules! named_enum {
    ($(#[$doc:meta])* $name:ident { $( $v:ident = $s:literal, )* }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name { $( $v, )* }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$( $name::$v, )*];

            /// The kebab-case name stored in result files.
            pub fn as_str(self) -> &'static str {
                match self { $( $name::$v => $s, )* }
            }

            fn from_name(s: &str) -> Option<$name> {
                match s { $( $s => Some($name::$v), )* _ => None }
            }
        }
    };
}

named_enum! {
    /// The base name of a check, as used in `<base>-unreadable` and `<base>-unparseable`.
    Check {
        Cmdline = "cmdline",
        Isolated = "isolated",
        NohzFull = "nohz-full",
        RcuNocbs = "rcu-nocbs",
        Isolcpus = "isolcpus",
        IrqAffinity = "irq-affinity",
        Irqbalance = "irqbalance",
        IrqCounts = "irq-counts",
        Softirqs = "softirqs",
        Governor = "governor",
        Turbo = "turbo",
        IdleStates = "idle-states",
        Haltpoll = "haltpoll",
        PmQos = "pm-qos",
        Smt = "smt",
        Thp = "thp",
        ThpDefrag = "thp-defrag",
        Swap = "swap",
        Swappiness = "swappiness",
        StatInterval = "stat-interval",
        NumaBalancing = "numa-balancing",
        Ksm = "ksm",
        Damon = "damon",
        RtThrottling = "rt-throttling",
        Preempt = "preempt",
        Hz = "hz",
        TimerMigration = "timer-migration",
        CpusetPartition = "cpuset-partition",
        NmiWatchdog = "nmi-watchdog",
        SoftWatchdog = "soft-watchdog",
        HungTask = "hung-task",
        Clocksource = "clocksource",
        Cpuinfo = "cpuinfo",
        TscReliable = "tsc-reliable",
        Hypervisor = "hypervisor",
        Steal = "steal",
        Mitigations = "mitigations",
        Workqueue = "workqueue",
        Workqueues = "workqueues",
        Writeback = "writeback",
        Kthreads = "kthreads",
        RtThreads = "rt-threads",
        Tuned = "tuned",
        Thread = "thread",
        Cgroup = "cgroup",
        Cpuset = "cpuset",
        Pressure = "pressure",
    }
}

macro_rules! finding_ids {
    ($( $(#[$doc:meta])* $v:ident = $s:literal, )*) => {
        /// One finding id. The named variants are spelled out; the other two are the
        /// "could not check" ids of each `Check`.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum FindingId {
            $( $(#[$doc])* $v, )*
            /// `<check>-unreadable`: the file is missing or cannot be read.
            Unreadable(Check),
            /// `<check>-unparseable`: the file does not hold what the kernel writes.
            Unparseable(Check),
        }

        impl FindingId {
            /// The spelled-out ids, in declaration order.
            pub const NAMED: &'static [FindingId] = &[$( FindingId::$v, )*];

            fn named(self) -> Option<&'static str> {
                match self { $( FindingId::$v => Some($s), )* _ => None }
            }

            fn from_named(s: &str) -> Option<FindingId> {
                match s { $( $s => Some(FindingId::$v), )* _ => None }
            }
        }
    };
}

finding_ids! {
    IsolatedOk = "isolated-ok",
    IsolatedPartial = "isolated-partial",
    IsolatedMissing = "isolated-missing",
    NohzFullOk = "nohz-full-ok",
    NohzFullPartial = "nohz-full-partial",
    NohzFullMissing = "nohz-full-missing",
    NohzFullUnsupported = "nohz-full-unsupported",
    RcuNocbsOk = "rcu-nocbs-ok",
    RcuNocbsPartial = "rcu-nocbs-partial",
    RcuNocbsMissing = "rcu-nocbs-missing",
    NohzFullWithoutRcuNocbs = "nohz-full-without-rcu-nocbs",
    IsolatedNotNohzFull = "isolated-not-nohz-full",
    IsolcpusNotInForce = "isolcpus-not-in-force",
    ManagedIrqIsolated = "managed-irq-isolated",
    ManagedIrqNotIsolated = "managed-irq-not-isolated",
    SkewTickSet = "skew-tick-set",
    SkewTickUnset = "skew-tick-unset",
    RcuBootOk = "rcu-boot-ok",
    RcuBootMissing = "rcu-boot-missing",
    CpusetPartitionIsolated = "cpuset-partition-isolated",
    CpusetPartitionNone = "cpuset-partition-none",
    IrqEffectiveOk = "irq-effective-ok",
    IrqOnMeasuredCpus = "irq-on-measured-cpus",
    IrqQuietOnMeasured = "irq-quiet-on-measured",
    IrqManagedOnMeasured = "irq-managed-on-measured",
    IrqAffinityOk = "irq-affinity-ok",
    IrqAffinityIncludesMeasured = "irq-affinity-includes-measured",
    IrqbalanceRunning = "irqbalance-running",
    IrqbalanceNotRunning = "irqbalance-not-running",
    IrqCountsOnMeasured = "irq-counts-on-measured",
    SoftirqsOnMeasured = "softirqs-on-measured",
    GovernorPerformance = "governor-performance",
    GovernorNotPerformance = "governor-not-performance",
    CpufreqNone = "cpufreq-none",
    TurboOn = "turbo-on",
    TurboOff = "turbo-off",
    IdleStatesShallow = "idle-states-shallow",
    IdleStatesDeep = "idle-states-deep",
    IdleHaltpoll = "idle-haltpoll",
    HaltpollNoPoll = "haltpoll-no-poll",
    HaltpollPolls = "haltpoll-polls",
    PmQosOk = "pm-qos-ok",
    PmQosUnset = "pm-qos-unset",
    SmtOff = "smt-off",
    SmtActive = "smt-active",
    ThpNever = "thp-never",
    ThpMadvise = "thp-madvise",
    ThpAlways = "thp-always",
    ThpDefragOk = "thp-defrag-ok",
    ThpDefragAlways = "thp-defrag-always",
    SwapOff = "swap-off",
    SwapOn = "swap-on",
    SwappinessOk = "swappiness-ok",
    SwappinessHigh = "swappiness-high",
    StatIntervalOk = "stat-interval-ok",
    StatIntervalShort = "stat-interval-short",
    NumaBalancingOff = "numa-balancing-off",
    NumaBalancingOn = "numa-balancing-on",
    KsmOff = "ksm-off",
    KsmRunning = "ksm-running",
    DamonOff = "damon-off",
    DamonRunning = "damon-running",
    RtThrottlingOff = "rt-throttling-off",
    RtThrottlingOn = "rt-throttling-on",
    FairServerOn = "fair-server-on",
    FairServerOff = "fair-server-off",
    PreemptRt = "preempt-rt",
    PreemptFull = "preempt-full",
    PreemptLimited = "preempt-limited",
    PreemptDynamicUnknown = "preempt-dynamic-unknown",
    HzTick = "hz-tick",
    TimerMigrationOff = "timer-migration-off",
    TimerMigrationOn = "timer-migration-on",
    NmiWatchdogOff = "nmi-watchdog-off",
    NmiWatchdogOn = "nmi-watchdog-on",
    SoftWatchdogOff = "soft-watchdog-off",
    SoftWatchdogExcludesMeasured = "soft-watchdog-excludes-measured",
    SoftWatchdogOn = "soft-watchdog-on",
    HungTaskOff = "hung-task-off",
    HungTaskOn = "hung-task-on",
    ClocksourceOk = "clocksource-ok",
    ClocksourceSlow = "clocksource-slow",
    ClocksourceNotTsc = "clocksource-not-tsc",
    TscInvariant = "tsc-invariant",
    TscNotInvariant = "tsc-not-invariant",
    TscAbsent = "tsc-absent",
    TscReliableSet = "tsc-reliable-set",
    TscReliableByKernel = "tsc-reliable-by-kernel",
    TscReliableUnset = "tsc-reliable-unset",
    HypervisorPresent = "hypervisor-present",
    BareMetal = "bare-metal",
    StealNone = "steal-none",
    StealTime = "steal-time",
    MitigationsNone = "mitigations-none",
    MitigationsOn = "mitigations-on",
    WorkqueueOk = "workqueue-ok",
    WorkqueueOnMeasured = "workqueue-on-measured",
    WorkqueuesOk = "workqueues-ok",
    WorkqueuesOnMeasured = "workqueues-on-measured",
    WritebackOk = "writeback-ok",
    WritebackOnMeasured = "writeback-on-measured",
    KthreadsOk = "kthreads-ok",
    KthreadsOnMeasured = "kthreads-on-measured",
    /// Real-time kernel threads (PREEMPT_RT's IRQ, timer and RCU threads) that may run on
    /// a measured CPU at or above the measuring threads' priority.
    RtThreadsAbove = "rt-threads-above",
    RtThreadsOk = "rt-threads-ok",
    TunedLatencyProfile = "tuned-latency-profile",
    TunedOtherProfile = "tuned-other-profile",
    TunedAbsent = "tuned-absent",
    ThreadOk = "thread-ok",
    ThreadNotTuned = "thread-not-tuned",
    RtRuntimeCgroup = "rt-runtime-cgroup",
    RtRuntimeCgroupOk = "rt-runtime-cgroup-ok",
    CfsQuota = "cfs-quota",
    CfsQuotaNone = "cfs-quota-none",
    CpusetExclusive = "cpuset-exclusive",
    CpusetShared = "cpuset-shared",
    CpusetExcludesMeasured = "cpuset-excludes-measured",
    CpuPressureLow = "cpu-pressure-low",
    CpuPressureHigh = "cpu-pressure-high",
    InsideContainer = "inside-container",
}

impl FindingId {
    /// Every id: the named ones, then `-unreadable` and `-unparseable` for each check.
    pub fn all() -> Vec<FindingId> {
        let mut v = FindingId::NAMED.to_vec();
        v.extend(Check::ALL.iter().map(|c| FindingId::Unreadable(*c)));
        v.extend(Check::ALL.iter().map(|c| FindingId::Unparseable(*c)));
        v
    }
}

impl fmt::Display for FindingId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.named(), self) {
            (Some(s), _) => f.write_str(s),
            (None, FindingId::Unreadable(c)) => write!(f, "{}-unreadable", c.as_str()),
            (None, FindingId::Unparseable(c)) => write!(f, "{}-unparseable", c.as_str()),
            // `named` covers every other variant.
            (None, _) => f.write_str("?"),
        }
    }
}

impl FromStr for FindingId {
    type Err = FindingIdError;
    fn from_str(s: &str) -> Result<FindingId, FindingIdError> {
        if let Some(id) = FindingId::from_named(s) {
            return Ok(id);
        }
        let unknown = || FindingIdError::Unknown(s.to_string());
        if let Some(base) = s.strip_suffix("-unreadable") {
            return Check::from_name(base)
                .map(FindingId::Unreadable)
                .ok_or_else(unknown);
        }
        if let Some(base) = s.strip_suffix("-unparseable") {
            return Check::from_name(base)
                .map(FindingId::Unparseable)
                .ok_or_else(unknown);
        }
        Err(unknown())
    }
}

impl PartialEq<&str> for FindingId {
    fn eq(&self, other: &&str) -> bool {
        other.parse::<FindingId>() == Ok(*self)
    }
}

impl Serialize for FindingId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for FindingId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<FindingId, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_id_round_trips_through_its_string_and_json() {
        let all = FindingId::all();
        let mut seen = std::collections::HashSet::new();
        for id in &all {
            let s = id.to_string();
            assert!(seen.insert(s.clone()), "{s} twice");
            assert_eq!(s.parse::<FindingId>(), Ok(*id), "{s}");
            let json = serde_json::to_string(id).expect("json");
            assert_eq!(json, format!("\"{s}\""));
            assert_eq!(serde_json::from_str::<FindingId>(&json).expect("back"), *id);
            assert!(
                s.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
                "{s} is not kebab-case"
            );
        }
    }

    #[test]
    fn ids_of_earlier_versions_still_parse() {
        // Spelled out, not generated: these strings are in result files already written.
        for s in [
            "isolated-missing",
            "nohz-full-unsupported",
            "irq-on-measured-cpus",
            "irq-affinity-unreadable",
            "governor-unreadable",
            "turbo-unreadable",
            "preempt-dynamic-unknown",
            "tsc-reliable-unset",
            "steal-time",
            "kthreads-on-measured",
            "tuned-absent",
            "thp-defrag-unparseable",
        ] {
            assert!(s.parse::<FindingId>().is_ok(), "{s}");
        }
        assert!("no-such-id".parse::<FindingId>().is_err());
        assert!("no-such-unreadable".parse::<FindingId>().is_err());
    }
}
