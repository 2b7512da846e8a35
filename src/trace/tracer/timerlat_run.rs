//! A timerlat run: the kernel's timerlat tracer in an instance of ours on the measured
//! CPUs at a period, its `trace_pipe` read on a housekeeping CPU and folded per CPU, for
//! a duration or until a stop; then the tracer stopped and every global file restored.
//!
//! The global files it writes, journaled first by the instance: `osnoise/cpus` (where the
//! kernel starts its `timerlat/N` threads) and `osnoise/timerlat_period_us`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::engine::cpu::CpuList;
use crate::engine::sched::{self, SchedRequest};
use crate::probes::timerlat::{KernelThread, TimerlatEntry};

use super::super::session::TraceError;
use super::instance::{Stopped, TracerInstance};
use super::timerlat::Folds;

/// The shortest and longest period `osnoise/timerlat_period_us` takes, in µs.
pub const PERIOD_US: std::ops::RangeInclusive<u64> = 100..=1_000_000;

/// What a run asks for.
pub struct TimerlatPlan<'a> {
    pub cpus: &'a CpuList,
    /// Where the reader runs (a housekeeping CPU), if anywhere in particular.
    pub reader_cpu: Option<usize>,
    pub period_ns: u64,
    pub duration: Duration,
    /// Encode the histograms (false for a result nobody reads beyond its table).
    pub histograms: bool,
    /// The policy the kernel's `timerlat/N` threads are set to as they appear (`-p`,
    /// `--policy`); `None` leaves the kernel's own (SCHED_FIFO 95).
    pub sched: Option<SchedRequest>,
}

/// What it gave.
pub struct TimerlatRun {
    pub entries: Vec<TimerlatEntry>,
    /// From the tracer's start to its stop.
    pub elapsed: Duration,
    pub interrupted: bool,
    /// The instance's teardown: each global file read back, and whether all were put back.
    pub stopped: Stopped,
    /// What the start found and did that a user should know (stale instances removed).
    pub notes: Vec<String>,
}

/// Why the period cannot be timerlat's: one line, or none.
pub fn period_refusal(period_ns: u64) -> Option<String> {
    let us = period_ns / 1000;
    match (period_ns % 1000, PERIOD_US.contains(&us)) {
        (0, true) => None,
        (0, false) => Some(format!(
            "timerlat's period is {} to {} µs; -i {us} is outside it",
            PERIOD_US.start(),
            PERIOD_US.end()
        )),
        _ => Some(format!(
            "timerlat's period is whole µs; -i {} µs is not",
            period_ns as f64 / 1e3
        )),
    }
}

/// Runs the tracer as `plan` says, until its duration or `stop`.
pub fn run(plan: &TimerlatPlan<'_>, stop: &AtomicBool) -> Result<TimerlatRun, TraceError> {
    let globals = [
        ("osnoise/cpus", plan.cpus.to_string()),
        (
            "osnoise/timerlat_period_us",
            (plan.period_ns / 1000).to_string(),
        ),
    ];
    let mut inst = TracerInstance::start("timerlat", plan.cpus, &globals, &[])?;
    let started = Instant::now();
    let mut notes: Vec<String> = inst.reverted_stale.iter().cloned().collect();
    if !inst.removed_stale.is_empty() {
        notes.push(format!(
            "removed tracefs instances of killed runs: {}",
            inst.removed_stale.join(", ")
        ));
    }
    let folds = Arc::new(Mutex::new(Folds::new(plan.cpus.cpus().iter().copied())));
    let feed = folds.clone();
    // The reader's own thread; the lock is only ever contended at the end.
    inst.read_lines(plan.reader_cpu, move |l| {
        feed.lock().map(|mut f| f.feed_line(l)).unwrap_or(())
    });
    let mut threads = Vec::new();
    let mut set: Vec<u32> = Vec::new();
    let mut interrupted = false;
    while started.elapsed() < plan.duration {
        if stop.load(Ordering::Relaxed) {
            interrupted = true;
            break;
        }
        if threads.len() < plan.cpus.len() {
            threads = kernel_threads(plan.cpus);
            if let Some(req) = plan.sched {
                notes.extend(set_threads(&threads, req, &mut set));
                threads = kernel_threads(plan.cpus);
            }
        }
        // With a policy to set, every 1 ms for the first 100 ms until each thread is
        // found and set, so that few wake-ups ran at the kernel's priority; else 20 ms.
        let hurry = plan.sched.is_some()
            && threads.len() < plan.cpus.len()
            && started.elapsed() < Duration::from_millis(100);
        let poll = Duration::from_millis(if hurry { 1 } else { 20 });
        std::thread::sleep(poll.min(plan.duration));
    }
    let elapsed = started.elapsed();
    // The stop drains the buffer before the tracer goes (`TracerInstance::stop`).
    let stopped = inst.stop();
    let folds = std::mem::replace(
        &mut *folds.lock().unwrap_or_else(|p| p.into_inner()),
        Folds::new([]),
    );
    let entries = (folds.cpus.into_iter())
        .map(|f| {
            let mut e = f.finish(plan.period_ns, plan.histograms);
            e.thread = threads
                .iter()
                .find(|t| t.comm == thread_name(e.cpu))
                .cloned();
            e
        })
        .collect();
    Ok(TimerlatRun {
        entries,
        elapsed,
        interrupted,
        stopped,
        notes,
    })
}

/// Sets each thread not yet in `set` to `req`; a line for each refusal.
fn set_threads(threads: &[KernelThread], req: SchedRequest, set: &mut Vec<u32>) -> Vec<String> {
    let mut refused = Vec::new();
    for t in threads {
        if set.contains(&t.pid) {
            continue;
        }
        set.push(t.pid);
        if let Err(e) = sched::set_policy_of(t.pid, req) {
            refused.push(format!(
                "{} (pid {}) kept its policy: {req} was refused: {e}",
                t.comm, t.pid
            ));
        }
    }
    refused
}

fn thread_name(cpu: usize) -> String {
    format!("timerlat/{cpu}")
}

/// The kernel's `timerlat/N` threads of `cpus`, with their policy and priority.
pub fn kernel_threads(cpus: &CpuList) -> Vec<KernelThread> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let names: Vec<String> = cpus.cpus().iter().map(|&c| thread_name(c)).collect();
    (dir.flatten())
        .filter_map(|d| d.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
            let comm = comm.trim();
            names
                .iter()
                .any(|n| n == comm)
                .then(|| thread_of(pid, comm))?
        })
        .collect()
}

/// A thread's policy and priority, from `/proc/PID/stat`.
fn thread_of(pid: u32, comm: &str) -> Option<KernelThread> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (priority, policy) = stat_sched(&stat)?;
    Some(KernelThread {
        comm: comm.to_string(),
        pid,
        policy,
        priority,
    })
}

/// The policy and priority of a thread's stat (`system::proc_stat`); SCHED_OTHER where it
/// is not real-time.
fn stat_sched(stat: &str) -> Option<(u8, crate::engine::sched::Policy)> {
    use crate::engine::sched::Policy;
    Some(match crate::system::proc_stat::rt_priority(stat) {
        Some(("RR", prio)) => (prio, Policy::Rr),
        Some((_, prio)) => (prio, Policy::Fifo),
        None => (0, Policy::Other),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_period_must_be_whole_us_within_the_kernels_range() {
        assert_eq!(period_refusal(1_000_000), None);
        assert_eq!(period_refusal(100_000), None);
        assert!(
            period_refusal(50_000)
                .unwrap()
                .contains("100 to 1000000 µs")
        );
        assert!(period_refusal(1_500).unwrap().contains("whole µs"));
    }

    /// A stat line as a timerlat thread's reads at SCHED_FIFO 95 (the kernel's default).
    #[test]
    fn reads_policy_and_priority_from_stat() {
        let stat = "122 (timerlat/1) S 2 0 0 0 -1 2129984 0 0 0 0 0 1029 0 0 -96 0 1 0 \
                    940 0 0 18446744073709551615 0 0 0 0 0 0 0 2147483647 0 0 0 0 17 1 95 1 0 \
                    0 0 0 0 0 0 0 0 0 0";
        assert_eq!(
            stat_sched(stat),
            Some((95, crate::engine::sched::Policy::Fifo))
        );
    }
}
