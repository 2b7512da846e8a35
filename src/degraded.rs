//! Every reason a figure may be worse than it should be.
//!
//! A degraded run is never silent: each reason is shown on screen once, with its cause
//! and its fix, and stored in the result's `run.degraded` list with a stable `kind` that
//! scripts can match on.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::engine::clock::{ClockProblem, FrequencySource};
use crate::engine::sched::SchedRequest;

/// One degradation.
#[derive(Debug, Clone, PartialEq)]
pub enum Degraded {
    /// The requested real-time policy was refused; threads ran at SCHED_OTHER.
    SchedRefused {
        requested: SchedRequest,
        reason: String,
    },
    /// mlockall failed; page faults may land inside the measurement.
    MlockFailed { reason: String },
    /// The TSC lacks constant_tsc or nonstop_tsc: its rate may change with frequency or
    /// stop in idle states.
    TscNotInvariant { missing: Vec<String> },
    /// The kernel does not trust the TSC as its clocksource.
    ClocksourceNotTsc { current: String },
    /// Two sources of the TSC frequency disagree beyond the accepted bound.
    TscFrequencyMismatch { other: FrequencySource, ppm: f64 },
    /// No cycle counter on this architecture; CLOCK_MONOTONIC is read instead.
    NoCycleCounter,
    /// Running under a hypervisor: it can stop a vCPU at any time, unseen by the guest.
    VirtualMachine { hypervisor: String },
    /// The coordinator shares a measured CPU (a single CPU, or every CPU measured).
    CoordinatorShares,
    /// /dev/cpu_dma_latency could not be set: CPUs may enter idle states whose exit
    /// latency adds to every wake-up.
    DmaLatencyNotSet { reason: String },
    /// `--trace` was asked for but no trace could be made: the gaps are not attributed.
    TraceUnavailable { reason: String },
    /// A SCHED_DEADLINE runtime short enough that its enforcement at the scheduler tick
    /// (no HRTICK_DL) lets jobs overrun it: `reason` says why and how to change it.
    DeadlineAtTick { reason: String },
    /// A kernel tracer engine was asked for (`noise --engine osnoise`) but could not
    /// run: the TSC loop measured instead.
    EngineUnavailable { engine: String, reason: String },
}

impl Degraded {
    /// A stable identifier for scripts.
    pub fn kind(&self) -> &'static str {
        match self {
            Degraded::SchedRefused { .. } => "sched-refused",
            Degraded::MlockFailed { .. } => "mlock-failed",
            Degraded::TscNotInvariant { .. } => "tsc-not-invariant",
            Degraded::ClocksourceNotTsc { .. } => "clocksource-not-tsc",
            Degraded::TscFrequencyMismatch { .. } => "tsc-frequency-mismatch",
            Degraded::NoCycleCounter => "no-cycle-counter",
            Degraded::VirtualMachine { .. } => "virtual-machine",
            Degraded::CoordinatorShares => "coordinator-shares-cpu",
            Degraded::DmaLatencyNotSet { .. } => "dma-latency-not-set",
            Degraded::TraceUnavailable { .. } => "trace-unavailable",
            Degraded::DeadlineAtTick { .. } => "deadline-at-tick",
            Degraded::EngineUnavailable { .. } => "engine-unavailable",
        }
    }

    /// The requested policy was refused for `reason` (`sched::explain_refusal`'s words);
    /// when root was refused because the process's cgroup has no real-time runtime, the
    /// reason names the group and the audit finding that gives the fixes.
    pub fn sched_refused(requested: SchedRequest, reason: String) -> Degraded {
        Degraded::SchedRefused {
            requested,
            reason: refusal_reason(reason),
        }
    }

    pub fn from_clock(p: &ClockProblem) -> Degraded {
        match p {
            ClockProblem::NotInvariant { missing } => Degraded::TscNotInvariant {
                missing: missing.clone(),
            },
            ClockProblem::ClocksourceNotTsc { current } => Degraded::ClocksourceNotTsc {
                current: current.clone(),
            },
            ClockProblem::FrequencyMismatch { other, ppm } => Degraded::TscFrequencyMismatch {
                other: *other,
                ppm: *ppm,
            },
            ClockProblem::NoCycleCounter => Degraded::NoCycleCounter,
        }
    }

    /// The entry stored in the result file.
    pub fn to_record(&self) -> DegradedRecord {
        DegradedRecord {
            kind: self.kind().to_string(),
            message: self.to_string(),
            steps: Vec::new(),
        }
    }
}

impl fmt::Display for Degraded {
    /// Cause, then fix.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Degraded::SchedRefused { requested, reason } => write!(
                f,
                "{requested} was refused ({reason}); measuring threads ran at SCHED_OTHER, \
                 so other tasks can preempt them and inflate the figures"
            ),
            Degraded::MlockFailed { reason } => write!(
                f,
                "mlockall failed ({reason}); page faults may land inside the measurement. \
                 Run as root or raise the locked-memory limit (ulimit -l)"
            ),
            Degraded::TscNotInvariant { missing } => write!(
                f,
                "the TSC is not invariant (missing {}); its rate may vary with CPU \
                 frequency or stop in deep idle states, so converted times can be wrong",
                missing.join(", ")
            ),
            Degraded::ClocksourceNotTsc { current } => write!(
                f,
                "the kernel's clocksource is '{current}', not 'tsc': the kernel does not \
                 trust the TSC here, and its frequency is only an estimate. Check dmesg for \
                 'TSC unstable'; tsc=reliable on the kernel command line forces it"
            ),
            Degraded::TscFrequencyMismatch { other, ppm } => write!(
                f,
                "the TSC frequency used disagrees with {other} by {ppm:+.1} ppm (limit \
                 {} ppm); durations may be off by that ratio",
                crate::engine::clock::MISMATCH_PPM
            ),
            Degraded::NoCycleCounter => f.write_str(
                "no cycle counter on this architecture: loops read CLOCK_MONOTONIC, whose \
                 cost (tens of ns) limits the resolution",
            ),
            Degraded::VirtualMachine { hypervisor } => write!(
                f,
                "running in a virtual machine ({hypervisor}): the hypervisor can stop a \
                 vCPU unseen by the guest; such gaps are real for this guest but say little \
                 about bare metal"
            ),
            Degraded::CoordinatorShares => f.write_str(
                "the coordinator shares a measured CPU, so its own wake-ups appear as \
                 noise there; leave a housekeeping CPU unmeasured to avoid this",
            ),
            Degraded::DmaLatencyNotSet { reason } => write!(
                f,
                "/dev/cpu_dma_latency was not set ({reason}); idle CPUs may sleep in deep \
                 C-states whose exit latency adds to each wake-up. Run as root, or pass \
                 --no-dma-latency to measure that on purpose"
            ),
            Degraded::TraceUnavailable { reason } => write!(
                f,
                "no kernel trace ({reason}): the gaps are not attributed to their causes, and \
                 any cause named is inferred. Run as root on a kernel with tracefs"
            ),
            Degraded::DeadlineAtTick { reason } => f.write_str(reason),
            Degraded::EngineUnavailable { engine, reason } => write!(
                f,
                "the {engine} engine could not run ({reason}): the TSC loop measured instead"
            ),
        }
    }
}

/// A refusal's reason, with the cgroup that caused it where one did: root refused with
/// EPERM (RT group scheduling) in a group the live host's chain shows without runtime.
pub fn refusal_reason(reason: String) -> String {
    if !reason.starts_with(crate::engine::sched::EPERM_AS_ROOT) {
        return reason;
    }
    match crate::system::rt_group::live_cause() {
        Some(cause) => format!("EPERM: {cause}"),
        None => reason,
    }
}

/// `run.degraded[]` in the result file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DegradedRecord {
    /// A stable identifier: sched-refused, mlock-failed, tsc-not-invariant,
    /// clocksource-not-tsc, tsc-frequency-mismatch, no-cycle-counter, virtual-machine,
    /// coordinator-shares-cpu, dma-latency-not-set, trace-unavailable, deadline-at-tick.
    pub kind: String,
    /// Cause and fix, in words.
    pub message: String,
    /// In a result of several steps (the main job), the steps it applies to; empty when
    /// it applies to every figure.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::sched::{Policy, SchedRequest, explain_refusal, preflight};

    /// Issue 30, second review: root without CAP_SYS_NICE (Docker's default set) was told
    /// its cgroup had no real-time runtime. Capabilities are a thread's own, so a thread
    /// drops it here and asks for SCHED_FIFO.
    #[test]
    fn issue30_root_without_cap_sys_nice_is_told_so_not_blamed_on_the_cgroup() {
        if !rustix::process::geteuid().is_root() {
            eprintln!("skipped: needs root");
            return;
        }
        let message = std::thread::spawn(|| {
            use rustix::thread::{CapabilitySet, capabilities, set_capabilities};
            let mut caps = capabilities(None).expect("capget");
            caps.effective.remove(CapabilitySet::SYS_NICE);
            set_capabilities(None, caps).expect("capset");
            let fifo = SchedRequest {
                policy: Policy::Fifo,
                priority: 1,
            };
            let reason = preflight(fifo).expect_err("SCHED_FIFO without CAP_SYS_NICE");
            assert_eq!(
                reason,
                explain_refusal(&std::io::Error::from_raw_os_error(libc::EPERM))
            );
            Degraded::sched_refused(fifo, reason).to_string()
        })
        .join()
        .expect("the thread");
        assert!(message.contains("without CAP_SYS_NICE"), "{message}");
        assert!(!message.contains("rt_runtime"), "{message}");
    }
}
