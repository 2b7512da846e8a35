//! A known disturbance: a SCHED_FIFO thread that takes a CPU for a known time, again and
//! again. `selftest` and the ground-truth tests check the probes against it. Against a
//! loop at SCHED_DEADLINE it runs as a deadline thread itself (`Holder::Deadline`): no
//! FIFO thread preempts a deadline one, as deadline is the higher class.
//!
//! It sleeps to absolute deadlines on CLOCK_MONOTONIC, every `period`, and busy-waits
//! `busy` each time, logging each hold on the TSC and on CLOCK_MONOTONIC so that what a
//! probe saw can be matched to it, hold by hold. It never outlives `run_for`, and checks
//! the stop flag before every hold, so a Ctrl-C ends it within one period.

use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rustix::time::{ClockId, Timespec};

use super::clock::{self, ClockInfo};
use super::deadline::{self, Deadline};
use super::sched::{self, Policy, SchedError, SchedRequest};

/// One hold of the CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Injection {
    /// On the counter (TSC ticks).
    pub start: u64,
    pub end: u64,
    pub start_monotonic_ns: u64,
    pub end_monotonic_ns: u64,
    /// The thread's own CPU time across the hold, as the kernel accounts it: about the
    /// hold when it held the CPU, far less when the kernel preempted it mid-hold (a fair
    /// server running SCHED_OTHER work, a stopper thread), and then it was no hold.
    pub ran_ns: u64,
    /// How late the holder woke for this hold, by its own clock: from its deadline to
    /// `start`. The hold took the CPU from the deadline on (the timer's interrupt, the
    /// wake-up, and any stall of the vCPU on the way are the hold's doing).
    pub late_ns: u64,
}

impl Injection {
    /// Whether the thread ran for at least half the hold: a hold the kernel took the CPU
    /// from for longer is no ground truth for a probe on that CPU.
    pub fn held(&self, scale: clock::Scale) -> bool {
        self.ran_ns * 2 >= scale.to_ns(self.end - self.start)
    }
}

/// The holds that lie within [from, to] on the counter, split into those the holder ran
/// through (ground truth for a probe on its CPU) and a count of those the kernel
/// preempted it through (see `Injection::held`).
pub fn held_within(
    holds: Vec<Injection>,
    from: u64,
    to: u64,
    scale: clock::Scale,
) -> (Vec<Injection>, usize) {
    let inside = holds.into_iter().filter(|h| h.start >= from && h.end <= to);
    let (held, preempted): (Vec<Injection>, Vec<Injection>) = inside.partition(|h| h.held(scale));
    (held, preempted.len())
}

/// Whether few enough holds were set aside for the rest to stand as ground truth: at
/// most one in ten.
pub fn enough_held(held: usize, preempted: usize) -> bool {
    preempted * 10 <= held + preempted
}

/// This thread's CPU time in ns (a syscall: read outside the hold).
fn thread_cpu_ns() -> u64 {
    let ts = rustix::time::clock_gettime(ClockId::ThreadCPUTime);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// What to inject, and where.
#[derive(Debug, Clone, Copy)]
pub struct Schedule {
    pub cpu: usize,
    pub priority: u8,
    pub period: Duration,
    pub busy: Duration,
    /// Stop after this long, or after `count` holds.
    pub run_for: Duration,
    pub count: usize,
}

/// The policy the injector holds its CPU at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holder {
    /// SCHED_FIFO at this priority: above a FIFO or RR probe of a lower one.
    Fifo(u8),
    /// SCHED_DEADLINE: the only way into a deadline loop's runtime. With a runtime a little
    /// over the hold and a deadline shorter than the loop's, each hold's absolute deadline
    /// comes first, so EDF preempts the loop for it.
    Deadline(Deadline),
}

/// Why the injector could not take its CPU.
#[derive(Debug, thiserror::Error)]
pub enum InjectError {
    /// SCHED_FIFO was refused (not root, or no real-time budget).
    #[error("the injector cannot run at SCHED_FIFO: {0}")]
    Policy(std::io::Error),
    /// SCHED_DEADLINE was refused, with what to change (`deadline::explain_refusal`).
    #[error("the injector cannot run at SCHED_DEADLINE: {0}")]
    Deadline(String),
    /// It could not be pinned to its CPU.
    #[error(transparent)]
    Pin(#[from] SchedError),
}

/// Runs `s` on the calling thread at SCHED_FIFO `s.priority` until done or `stop`.
/// `ready` is passed once the thread is real-time and on its CPU (or once it failed to
/// be); the first hold comes one period later.
pub fn inject(
    s: Schedule,
    ready: &Barrier,
    stop: &AtomicBool,
    clock: &ClockInfo,
) -> Result<Vec<Injection>, InjectError> {
    let holder = Holder::Fifo(s.priority);
    inject_as(s, holder, ready, stop, clock, &mut || {})
}

/// As `inject`, at `holder`'s policy, calling `at_hold` as each hold begins (a signal to
/// a watcher of the measured thread, which tells which holds landed while it could run).
/// It comes before the recorded start, so the hold keeps the length asked and any time
/// `at_hold` takes is in `late_ns`, where a probe's gap holds it too.
pub fn inject_as(
    s: Schedule,
    holder: Holder,
    ready: &Barrier,
    stop: &AtomicBool,
    clock: &ClockInfo,
    at_hold: &mut dyn FnMut(),
) -> Result<Vec<Injection>, InjectError> {
    let placed = place(s.cpu, holder);
    ready.wait();
    placed?;
    Ok(holds(s, stop, clock, at_hold))
}

fn place(cpu: usize, holder: Holder) -> Result<(), InjectError> {
    match holder {
        // Real-time first, then pinned: a SCHED_OTHER thread moved onto a CPU that a
        // real-time spinner holds would starve there until the fair server let it run.
        Holder::Fifo(priority) => {
            let policy = Policy::Fifo;
            sched::set_policy(SchedRequest { policy, priority }).map_err(InjectError::Policy)?;
            Ok(sched::pin_to(cpu)?)
        }
        // Pinned first: the kernel refuses to move a deadline thread (EBUSY). The measured
        // loop starts only after `ready`, so nothing holds the CPU yet.
        Holder::Deadline(d) => {
            sched::pin_to(cpu)?;
            deadline::set(d).map_err(|e| InjectError::Deadline(deadline::explain_refusal(&e)))
        }
    }
}

/// The holds themselves, on a thread already placed.
fn holds(
    s: Schedule,
    stop: &AtomicBool,
    clock: &ClockInfo,
    at_hold: &mut dyn FnMut(),
) -> Vec<Injection> {
    let busy_ticks = clock.scale.to_ticks(s.busy.as_nanos() as u64);
    let period = (s.period.as_nanos() as u64).max(1);
    let expected = (s.run_for.as_nanos() as u64 / period) as usize + 1;
    let mut log = Vec::with_capacity(expected.min(s.count));
    let end = clock::monotonic_ns() + s.run_for.as_nanos() as u64;
    let mut next = clock::monotonic_ns() + period;
    while next < end && log.len() < s.count && !stop.load(Ordering::Relaxed) {
        let ts = Timespec {
            tv_sec: (next / 1_000_000_000) as i64,
            tv_nsec: (next % 1_000_000_000) as i64,
        };
        let _ = rustix::thread::clock_nanosleep_absolute(ClockId::Monotonic, &ts);
        at_hold();
        let cpu_before = thread_cpu_ns();
        let start_monotonic_ns = clock::monotonic_ns();
        let start = clock::now_ordered();
        while clock::now().wrapping_sub(start) < busy_ticks {
            std::hint::spin_loop();
        }
        let end_tsc = clock::now_ordered();
        let end_monotonic_ns = clock::monotonic_ns();
        log.push(Injection {
            start,
            end: end_tsc,
            start_monotonic_ns,
            end_monotonic_ns,
            ran_ns: thread_cpu_ns().saturating_sub(cpu_before),
            late_ns: start_monotonic_ns.saturating_sub(next),
        });
        next += period;
        let now = clock::monotonic_ns();
        while next <= now {
            next += period; // late (throttled): skip the missed periods, as a timer would
        }
    }
    log
}
