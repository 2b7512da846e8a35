//! The runner: one pinned thread per measured CPU, started together, stopped together.
//!
//! The coordinator (the calling thread) pins itself to the housekeeping CPUs, spawns the
//! workers with small stacks, waits until every worker has warmed up, then publishes a
//! start instant a little in the future on the counter's timebase, so that all workers
//! begin within a few ns of each other. Workers stop on their own at the deadline, which
//! they check against the counter in their loop: no worker depends on the coordinator
//! being scheduled to stop, so a real-time spinner cannot outlive the run even if the
//! coordinator is starved or gone. A stop request (a signal, through the caller's flag)
//! ends the run early.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;

use super::clock::{self, Scale};
use super::cpu::CpuPlan;
use super::sched::{self, MlockGuard, MlockRefusal, SchedError, SchedRequest};

/// The longest accepted run: 30 days.
pub const MAX_DURATION: Duration = Duration::from_secs(30 * 24 * 3600);

/// Stack size of a measuring thread. mlockall faults in every thread's whole stack, so it
/// is kept small; the hot loops keep their state in preallocated heap memory.
pub const WORKER_STACK: usize = 128 * 1024;
/// How much of that stack is prefaulted before measuring.
const PREFAULT_STACK: usize = 64 * 1024;
/// How far ahead of "now" the common start instant is set.
const START_LEAD: Duration = Duration::from_micros(500);
/// How long a sleeping worker naps between looks at the gate: well inside START_LEAD.
const GATE_NAP: Duration = Duration::from_micros(50);
/// How often the coordinator looks at the stop flag and the deadline.
const POLL: Duration = Duration::from_millis(5);

/// What a run needs from its probe's configuration.
#[derive(Debug, Clone)]
pub struct RunPlan {
    pub cpus: CpuPlan,
    pub sched: SchedRequest,
    pub mlock: bool,
    pub duration: Duration,
    /// Lower each next worker's priority by one (cyclictest's --priospread).
    pub priospread: bool,
    /// How long a worker may take to set up and warm up before the run is abandoned.
    pub setup_timeout: Duration,
}

/// One measuring thread: the CPU it is pinned to and the policy it asks for. Probes that
/// need threads other than one per measured CPU (a pair on one CPU, a producer and its
/// consumers) list them with `run_threads`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThreadSpec {
    pub cpu: usize,
    pub sched: SchedRequest,
}

impl RunPlan {
    /// One thread per measured CPU, in CPU order, each at `sched_for` its index.
    pub fn threads(&self) -> Vec<ThreadSpec> {
        let cpus = self.cpus.measured.cpus().iter();
        cpus.enumerate()
            .map(|(index, &cpu)| ThreadSpec {
                cpu,
                sched: self.sched_for(index),
            })
            .collect()
    }

    /// The policy and priority of the `index`-th worker.
    pub fn sched_for(&self, index: usize) -> SchedRequest {
        if let sched::Policy::Deadline(d) = self.sched.policy {
            return SchedRequest {
                policy: sched::Policy::Deadline(d.for_thread(index)),
                priority: 0,
            };
        }
        match (self.priospread, self.sched.policy.is_realtime()) {
            (true, true) => SchedRequest {
                policy: self.sched.policy,
                priority: (self.sched.priority as usize).saturating_sub(index).max(1) as u8,
            },
            _ => self.sched,
        }
    }
}

/// Errors that end a run.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Sched(#[from] SchedError),
    #[error("cannot start a measuring thread: {0}")]
    Spawn(std::io::Error),
    #[error("cannot pin the coordinator to housekeeping CPUs {cpus}: {source}")]
    Coordinator {
        cpus: String,
        source: std::io::Error,
    },
    #[error("measuring threads did not become ready within {0:?}")]
    SetupTimeout(Duration),
    #[error("a measuring thread panicked")]
    WorkerPanicked,
}

/// The shared start/stop state. Each field sits on its own cache line: workers only read
/// them while measuring, and the coordinator writes each once.
#[derive(Default)]
struct Gate {
    ready: CachePadded<AtomicUsize>,
    failed: CachePadded<AtomicUsize>,
    /// Workers whose probe function has returned.
    done: CachePadded<AtomicUsize>,
    start: CachePadded<AtomicU64>,
    deadline: CachePadded<AtomicU64>,
    /// The start instant on CLOCK_MONOTONIC and CLOCK_REALTIME, for probes that sleep on
    /// those clocks and want a common phase.
    start_monotonic: CachePadded<AtomicU64>,
    start_realtime: CachePadded<AtomicU64>,
    /// Workers still waiting at the gate at this instant give up on their own, in case
    /// the coordinator can no longer run.
    give_up: CachePadded<AtomicU64>,
    stop: CachePadded<AtomicBool>,
    /// Measuring threads asked to lock their own stacks (a finite locked-memory limit),
    /// and how many could not.
    lock_stacks: bool,
    stack_lock_failed: AtomicUsize,
}

/// The measuring window on the counter's timebase, with its start on the kernel's clocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub start: u64,
    pub deadline: u64,
    /// The start instant on CLOCK_MONOTONIC, in ns.
    pub start_monotonic_ns: u64,
    /// The start instant on CLOCK_REALTIME, in ns since the epoch.
    pub start_realtime_ns: u64,
}

/// What a worker sees: its CPU, the counter scale, and the start gate.
pub struct Worker<'a> {
    pub cpu: usize,
    /// This worker's position among the measured CPUs (0 for the lowest).
    pub index: usize,
    /// The policy and priority this thread really runs at.
    pub sched: SchedRequest,
    pub scale: Scale,
    gate: &'a Gate,
}

impl Worker<'_> {
    /// Says this worker is warmed up, then waits for the common start, spinning, so that
    /// it begins within a few ns of the others. `None` means the run was stopped before
    /// it started.
    pub fn ready_and_wait(&self) -> Option<Window> {
        let window = self.gate_opens(std::hint::spin_loop)?;
        while clock::now() < window.start {
            std::hint::spin_loop();
        }
        Some(window)
    }

    /// `ready_and_wait` for probes that sleep: waits at the gate in short naps, then
    /// sleeps to the start instant on CLOCK_MONOTONIC. A real-time thread spinning at the
    /// gate on every CPU would starve the very coordinator that opens it.
    pub fn ready_and_sleep(&self) -> Option<Window> {
        let window = self.gate_opens(|| std::thread::sleep(GATE_NAP))?;
        let ts = rustix::time::Timespec {
            tv_sec: (window.start_monotonic_ns / 1_000_000_000) as i64,
            tv_nsec: (window.start_monotonic_ns % 1_000_000_000) as i64,
        };
        let mono = rustix::time::ClockId::Monotonic;
        while let Err(rustix::io::Errno::INTR) = rustix::thread::clock_nanosleep_absolute(mono, &ts)
        {
        }
        Some(window)
    }

    /// Counts this worker ready, then waits (`pause` between looks) until the coordinator
    /// publishes the window, or the run is stopped or abandoned.
    fn gate_opens(&self, pause: impl Fn()) -> Option<Window> {
        self.gate.ready.fetch_add(1, Ordering::AcqRel);
        let give_up = self.gate.give_up.load(Ordering::Relaxed);
        loop {
            if self.gate.stop.load(Ordering::Relaxed) || clock::now() > give_up {
                return None;
            }
            let start = self.gate.start.load(Ordering::Acquire);
            if start != 0 {
                return Some(Window {
                    start,
                    deadline: self.gate.deadline.load(Ordering::Relaxed),
                    start_monotonic_ns: self.gate.start_monotonic.load(Ordering::Relaxed),
                    start_realtime_ns: self.gate.start_realtime.load(Ordering::Relaxed),
                });
            }
            pause();
        }
    }

    /// The early-stop flag a hot loop polls beside its deadline.
    #[inline(always)]
    pub fn stop_flag(&self) -> &AtomicBool {
        &self.gate.stop
    }

    /// Ends the run for every worker (a probe's own stop condition, such as a latency
    /// limit). Workers see it at their next stop-flag check.
    pub fn stop_all(&self) {
        self.gate.stop.store(true, Ordering::Release);
    }
}

/// One worker's outcome.
#[derive(Debug)]
pub struct WorkerOutcome<T> {
    pub cpu: usize,
    /// The policy and priority the thread really ran at.
    pub sched: SchedRequest,
    /// Why the requested policy was refused, if it was.
    pub sched_refused: Option<String>,
    /// The thread's id, as the kernel's trace events name it.
    pub tid: u32,
    pub value: T,
}

impl<T> WorkerOutcome<T> {
    /// The same outcome with its value replaced, once a probe has turned it into a record.
    pub fn map_value<U>(self, f: impl FnOnce(T) -> U) -> WorkerOutcome<U> {
        WorkerOutcome {
            cpu: self.cpu,
            sched: self.sched,
            sched_refused: self.sched_refused,
            tid: self.tid,
            value: f(self.value),
        }
    }
}

/// What a whole run produced.
#[derive(Debug)]
pub struct RunOutcome<T> {
    pub workers: Vec<WorkerOutcome<T>>,
    /// The measuring window that was published, if the run got that far.
    pub window: Option<Window>,
    /// The run was stopped before its deadline.
    pub interrupted: bool,
    /// Wall time from the start instant to the end of the last worker's window.
    pub elapsed: Duration,
    /// Why mlockall failed, when it was asked for and failed.
    pub mlock_error: Option<std::io::Error>,
}

impl<T> RunOutcome<T> {
    /// The same outcome without the workers' values, once a probe has turned them into
    /// records.
    pub fn without_values(self) -> RunOutcome<()> {
        RunOutcome {
            workers: self
                .workers
                .into_iter()
                .map(|w| w.map_value(|_| ()))
                .collect(),
            window: self.window,
            interrupted: self.interrupted,
            elapsed: self.elapsed,
            mlock_error: self.mlock_error,
        }
    }
}

impl RunOutcome<()> {
    /// No run yet: what `absorb` builds on.
    pub fn none() -> RunOutcome<()> {
        RunOutcome {
            workers: Vec::new(),
            window: None,
            interrupted: false,
            elapsed: Duration::ZERO,
            mlock_error: None,
        }
    }

    /// Adds one of several runs (a probe that runs one per mechanism, or per pair) to
    /// their sum for the result's `run` section: every worker, the first window,
    /// interrupted if any was, the summed elapsed time, the first mlock failure.
    pub fn absorb(&mut self, o: RunOutcome<()>) {
        self.workers.extend(o.workers);
        self.window = self.window.or(o.window);
        self.interrupted |= o.interrupted;
        self.elapsed += o.elapsed;
        self.mlock_error = self.mlock_error.take().or(o.mlock_error);
    }
}

/// Sets the gate's stop flag when dropped, so that workers waiting at the gate are
/// released even if the coordinator unwinds.
struct StopOnDrop<'a>(&'a AtomicBool);
impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

/// Runs `work` on one pinned thread per measured CPU. `stop` is the caller's request to
/// end early (signal handlers set it). `work` sets up, warms up, calls
/// `Worker::ready_and_wait`, measures until the window's deadline or the stop flag, and
/// returns its result. The run ends at the deadline, on a stop request, when a worker
/// calls `stop_all`, or when every worker has returned.
pub fn run<T, F>(
    plan: &RunPlan,
    scale: Scale,
    stop: &AtomicBool,
    work: F,
) -> Result<RunOutcome<T>, RunError>
where
    T: Send,
    F: Fn(&Worker<'_>) -> T + Sync,
{
    run_monitored(plan, scale, stop, work, None)
}

/// A callback the coordinator runs on its housekeeping CPU while the run lasts (a live
/// display), every `every`, and once more at the end.
pub struct Monitor<'m> {
    pub every: Duration,
    pub tick: &'m mut dyn FnMut(),
}

/// `run`, with a monitor called from the coordinator while the workers measure.
pub fn run_monitored<T, F>(
    plan: &RunPlan,
    scale: Scale,
    stop: &AtomicBool,
    work: F,
    monitor: Option<Monitor<'_>>,
) -> Result<RunOutcome<T>, RunError>
where
    T: Send,
    F: Fn(&Worker<'_>) -> T + Sync,
{
    run_threads(plan, &plan.threads(), scale, stop, work, monitor)
}

/// `run_monitored` over an explicit list of threads (`Worker::index` is the position in
/// `threads`). The coordinator still runs on `plan.cpus.housekeeping`, so `measured`
/// should hold every CPU a thread is pinned to.
pub fn run_threads<T, F>(
    plan: &RunPlan,
    threads: &[ThreadSpec],
    scale: Scale,
    stop: &AtomicBool,
    work: F,
    mut monitor: Option<Monitor<'_>>,
) -> Result<RunOutcome<T>, RunError>
where
    T: Send,
    F: Fn(&Worker<'_>) -> T + Sync,
{
    let (mlock, refusal) = match plan.mlock {
        true => match MlockGuard::lock() {
            Ok(g) => (Some(g), None),
            Err(r) => (None, Some(r)),
        },
        false => (None, None),
    };
    let _coordinator_affinity =
        match plan.cpus.coordinator_shares() {
            true => None,
            false => Some(sched::AffinityGuard::pin(&plan.cpus.housekeeping).map_err(
                |source| RunError::Coordinator {
                    cpus: plan.cpus.housekeeping.to_string(),
                    source,
                },
            )?),
        };
    let gate = Gate {
        lock_stacks: matches!(refusal, Some(MlockRefusal::Limited { .. })),
        ..Gate::default()
    };
    let give_up = plan.setup_timeout + Duration::from_secs(1);
    gate.give_up.store(
        clock::now() + scale.to_ticks(give_up.as_nanos() as u64),
        Ordering::Relaxed,
    );
    let n = threads.len();

    let result = std::thread::scope(|scope| -> Result<_, RunError> {
        let _release = StopOnDrop(&gate.stop);
        let mut handles = Vec::with_capacity(n);
        for (index, spec) in threads.iter().enumerate() {
            let (gate, work) = (&gate, &work);
            let (cpu, sched_req) = (spec.cpu, spec.sched);
            let handle = std::thread::Builder::new()
                .name(format!("measure-cpu{cpu}"))
                .stack_size(WORKER_STACK)
                .spawn_scoped(scope, move || {
                    worker_main(cpu, index, sched_req, scale, gate, work)
                })
                .map_err(RunError::Spawn)?;
            handles.push(handle);
        }

        let window = coordinate(plan, scale, &gate, stop, n, &mut monitor)?;
        let interrupted = stop.load(Ordering::Relaxed);
        gate.stop.store(true, Ordering::Release);
        let mut workers = Vec::with_capacity(n);
        for h in handles {
            workers.push(h.join().map_err(|_| RunError::WorkerPanicked)??);
        }
        Ok((workers, window, interrupted))
    });
    drop(mlock);
    let stacks_locked = gate.stack_lock_failed.load(Ordering::Relaxed) == 0;
    let mlock_error = refusal.map(|r| r.into_error(stacks_locked));
    let (workers, window, interrupted) = result?;
    let elapsed = match window {
        Some(w) => {
            Duration::from_nanos(scale.to_ns(clock::now().min(w.deadline).saturating_sub(w.start)))
        }
        None => Duration::ZERO,
    };
    Ok(RunOutcome {
        workers,
        window,
        interrupted,
        elapsed,
        mlock_error,
    })
}

/// The coordinator's part: wait for readiness, publish the window, wait for the end.
fn coordinate(
    plan: &RunPlan,
    scale: Scale,
    gate: &Gate,
    stop: &AtomicBool,
    n: usize,
    monitor: &mut Option<Monitor<'_>>,
) -> Result<Option<Window>, RunError> {
    let setup_deadline = Instant::now() + plan.setup_timeout;
    while gate.ready.load(Ordering::Acquire) < n {
        if stop.load(Ordering::Relaxed) || gate.failed.load(Ordering::Relaxed) > 0 {
            return Ok(None);
        }
        if Instant::now() > setup_deadline {
            return Err(RunError::SetupTimeout(plan.setup_timeout));
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    if gate.failed.load(Ordering::Relaxed) > 0 || stop.load(Ordering::Relaxed) {
        return Ok(None);
    }
    let lead = START_LEAD.as_nanos() as u64;
    // The three clocks are read back to back, so the start instant agrees on each within
    // the ~100 ns these reads take.
    let start = clock::now() + scale.to_ticks(lead);
    let start_monotonic_ns = clock::monotonic_ns() + lead;
    let start_realtime_ns = clock::realtime_ns() + lead;
    // Rounded up, so that the window converts back to no less than the duration asked for.
    let deadline = start + scale.to_ticks_ceil(plan.duration.as_nanos() as u64);
    gate.deadline.store(deadline, Ordering::Relaxed);
    gate.start_monotonic
        .store(start_monotonic_ns, Ordering::Relaxed);
    gate.start_realtime
        .store(start_realtime_ns, Ordering::Relaxed);
    gate.start.store(start, Ordering::Release);
    let window = Window {
        start,
        deadline,
        start_monotonic_ns,
        start_realtime_ns,
    };
    let mut next_tick = monitor.as_ref().map(|m| Instant::now() + m.every);
    let running = || {
        clock::now() < deadline
            && !stop.load(Ordering::Relaxed)
            && !gate.stop.load(Ordering::Relaxed)
            && gate.done.load(Ordering::Acquire) < n
    };
    while running() {
        let left = scale.to_ns(deadline.saturating_sub(clock::now()));
        std::thread::sleep(POLL.min(Duration::from_nanos(left)));
        if let (Some(m), Some(due)) = (monitor.as_mut(), next_tick.as_mut())
            && Instant::now() >= *due
        {
            (m.tick)();
            // From now, not from the last due time: a coordinator that was kept off its
            // CPU must not catch up with a burst of redraws.
            *due = Instant::now() + m.every;
        }
    }
    if let Some(m) = monitor.as_mut() {
        (m.tick)();
    }
    Ok(Some(window))
}

/// A worker's life: signals off, policy set, pinned, stack prefaulted, then the probe.
fn worker_main<T, F>(
    cpu: usize,
    index: usize,
    req: SchedRequest,
    scale: Scale,
    gate: &Gate,
    work: &F,
) -> Result<WorkerOutcome<T>, RunError>
where
    F: Fn(&Worker<'_>) -> T,
{
    // However this thread ends, the coordinator must learn that it has.
    struct Done<'g>(&'g AtomicUsize);
    impl Drop for Done<'_> {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::AcqRel);
        }
    }
    let _done = Done(&gate.done);
    sched::block_all_signals();
    // Policy first, then the CPU: a SCHED_OTHER thread moved onto a CPU that another
    // real-time thread holds would starve there until the fair server let it run. A
    // deadline thread is the exception: the kernel pins it no more (EBUSY), so it is
    // pinned first and stays where it was pinned (engine::deadline).
    let deadline = matches!(req.policy, sched::Policy::Deadline(_));
    let placed = match deadline {
        true => sched::place(cpu).and_then(|()| {
            sched::set_policy(req).map_err(|e| SchedError::Deadline {
                cpu,
                reason: super::deadline::explain_refusal(&e),
            })
        }),
        false => Ok(()),
    };
    let sched_refused = match deadline {
        true => None,
        false => sched::set_policy(req)
            .err()
            .map(|e| sched::explain_refusal(&e)),
    };
    let placed = placed.and_then(|()| match deadline {
        true => Ok(()),
        false => sched::pin_to(cpu),
    });
    if let Err(e) = placed {
        gate.failed.fetch_add(1, Ordering::AcqRel);
        return Err(e.into());
    }
    let sched_actual = sched::current_policy();
    sched::prefault_stack(PREFAULT_STACK);
    if gate.lock_stacks && sched::lock_own_stack(PREFAULT_STACK).is_err() {
        gate.stack_lock_failed.fetch_add(1, Ordering::Relaxed);
    }
    let worker = Worker {
        cpu,
        index,
        sched: sched_actual,
        scale,
        gate,
    };
    // A panicking probe must not leave the coordinator waiting for its readiness.
    let value =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work(&worker))).map_err(|_| {
            gate.failed.fetch_add(1, Ordering::AcqRel);
            RunError::WorkerPanicked
        })?;
    Ok(WorkerOutcome {
        cpu,
        sched: sched_actual,
        sched_refused,
        tid: rustix::thread::gettid().as_raw_nonzero().get() as u32,
        value,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::engine::cpu::CpuUniverse;

    /// Every usable CPU but the housekeeping one, at SCHED_OTHER, without mlock.
    pub(crate) fn plan(duration_ms: u64) -> RunPlan {
        let u = CpuUniverse::detect().unwrap();
        RunPlan {
            cpus: CpuPlan::choose(&u, None, None).unwrap(),
            sched: SchedRequest::OTHER,
            mlock: false,
            duration: Duration::from_millis(duration_ms),
            priospread: false,
            setup_timeout: Duration::from_secs(5),
        }
    }

    #[test]
    fn workers_run_pinned_and_stop_at_the_deadline() {
        let p = plan(50);
        let scale = Scale::from_hz(
            crate::engine::clock::calibrate_against_monotonic_raw(Duration::from_millis(10)).hz,
        );
        let stop = AtomicBool::new(false);
        let t0 = Instant::now();
        let out = run(&p, scale, &stop, |w| {
            let window = w.ready_and_wait().unwrap();
            let mut last = 0;
            while !w.stop_flag().load(Ordering::Relaxed) {
                last = clock::now();
                if last >= window.deadline {
                    break;
                }
            }
            (rustix::thread::sched_getcpu(), last >= window.deadline)
        })
        .unwrap();
        assert!(t0.elapsed() < Duration::from_secs(2));
        assert!(!out.interrupted);
        for w in &out.workers {
            assert_eq!(w.value.0, w.cpu, "worker ran where it was pinned");
        }
        let e = out.elapsed.as_millis();
        assert!((45..1000).contains(&e), "elapsed {e} ms for a 50 ms run");
    }

    #[test]
    fn a_stop_request_ends_the_run_early() {
        let p = plan(10_000);
        let scale = Scale::from_hz(
            crate::engine::clock::calibrate_against_monotonic_raw(Duration::from_millis(10)).hz,
        );
        let stop = AtomicBool::new(false);
        let t0 = Instant::now();
        std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(100));
                stop.store(true, Ordering::Relaxed);
            });
            let out = run(&p, scale, &stop, |w| {
                let window = w.ready_and_wait();
                while !w.stop_flag().load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
                window.is_some()
            })
            .unwrap();
            assert!(out.interrupted);
            assert!(out.elapsed < Duration::from_secs(2));
        });
        assert!(t0.elapsed() < Duration::from_secs(3));
    }
}
