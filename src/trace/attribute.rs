//! Attribution: gaps × events → net time per cause. Pure: no I/O, so it is tested on
//! made-up event lists and can be fuzzed.
//!
//! The events of one CPU are walked in time order, keeping what runs there: the task
//! (from sched_switch) and a stack of interrupt contexts (hard IRQs, softirqs, vectors,
//! NMIs). Between two events, the innermost context is the cause; with none, another
//! task is; the measuring thread itself is no cause. That gives a timeline of segments,
//! and each gap takes the parts of them it overlaps: net (exclusive) time per cause, an
//! IRQ inside a softirq inside another task's slice counted once, where it ran. What no
//! segment covers is `unaccounted`, reported as such and never spread over the rest.
//! A task switched out that was not thought to run (its switch in was not recorded)
//! ran at least since the event before its switch out: that stretch is its own.
//!
//! A real-time measuring thread switched out while still runnable, for idle or for a
//! task of lower priority, was not preempted by ordinary scheduling: the kernel took the
//! CPU from it (RT throttling, or on 6.12+ the fair server). That window, until it runs
//! again, is one cause named after the setting that controls it, with the tasks that ran
//! in it listed under it; interrupts inside it stay their own causes.
//!
//! A SCHED_OTHER measurer whose cgroup chain has a CFS quota is held off the same way
//! when the group has used its quota: no event says so, so a window in which it stayed
//! runnable is named the quota only on evidence that the trace holds (the CPU idled while
//! it was runnable, or the group's bandwidth timer refilled the quota on the CPU);
//! otherwise its time is the tasks' that ran, as ordinary time-sharing.
//!
//! A loop that spins never leaves its CPU by itself: where the context says the measurer
//! spins, a switch of another task while it was thought to run means its own switch out
//! was not recorded (some guests' kernels lose a few), and it is taken as switched out
//! runnable there.

use std::collections::HashMap;

use crate::engine::clock::Scale;
use crate::stats::causes::{Attribution, CauseKind};

use super::event::{Event, Kind, NameId, Names, Task, policy_words, softirq_name};

mod kthread;
mod tally;

pub use tally::{MAX_CAUSES, MAX_PARTS, Tally};

/// A gap on the counter: [start, end) ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gap {
    pub start: u64,
    pub end: u64,
}

/// What ran, as a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Cause {
    Irq(u32, NameId),
    Softirq(u32),
    /// A vector, with the hrtimer callback it ran when one did (the tick's is
    /// tick_nohz_handler or tick_sched_timer) and, for the tick's, what the trace said of
    /// the tick then.
    Vector(NameId, Option<u64>, TickMode),
    Nmi,
    Task(Task, Option<u64>),
    /// A task (or idle) that ran while a runnable real-time measurer was held off by the
    /// kernel's throttle: counted under the throttle, listed by the task.
    Throttled(By, Task),
    /// A task's time the trace cannot vouch for: the kernel recorded no switch between
    /// it and the task seen switching out (`UNRECORDED`). Its own cause, never given to
    /// either task by guess.
    Unknown,
}

/// What the trace said of a CPU's tick when it ran (`timer:tick_stop`, issue 48): the
/// tick a nohz_full CPU keeps once stopped is not the periodic tick, and one kept running
/// is kept so by something the event names.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum TickMode {
    /// Nothing said (no tick_stop seen, or no such event): the tick, plainly.
    #[default]
    Unknown,
    /// nohz_full had stopped it: what runs is the residual tick (at most a second apart).
    Residual,
    /// Kept running by these dependencies (TICK_DEP_MASK_* bits), which only a nohz_full
    /// CPU checks.
    Kept(u32),
}

/// The tick's state on one CPU as the trace tells it, carried across batches: on a
/// nohz_full CPU whose tick stays stopped no event comes for seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TickState {
    mode: TickMode,
    /// The CPU showed it is nohz_full: a dependency was checked there, or its tick
    /// stopped while a task ran. A stop on entering idle is any NOHZ kernel's, which
    /// restarts the tick unseen when a task runs again: it says nothing until then.
    full: bool,
}

impl TickState {
    /// A `tick_stop` seen while a task (`in_task`) or idle ran.
    fn stop(&mut self, success: bool, dependency: u32, in_task: bool) {
        self.full |= in_task || !success;
        self.mode = match (success, self.full) {
            (false, _) => TickMode::Kept(dependency),
            (true, true) => TickMode::Residual,
            (true, false) => TickMode::Unknown,
        };
    }
}

/// What one CPU's attribution carries from batch to batch.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Carried {
    /// The measuring thread as the trace last showed it.
    me: Option<Task>,
    tick: TickState,
}

/// What held a runnable real-time measurer off its CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum By {
    /// RT throttling: idle ran, or no fair server is known to exist.
    Rt,
    /// RT throttling, decided from the rt settings alone: a SCHED_OTHER task ran and the
    /// fair server's settings could not be read.
    RtGuess,
    FairServer,
    /// The CFS quota of the measurer's cgroup chain.
    CfsQuota,
}

/// The kernel's settings that take a CPU from the measurer, as the app layer read them:
/// which one held it off is decided from them and from what ran.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Throttle {
    /// `kernel.sched_rt_runtime_us` and `sched_rt_period_us` (runtime -1: off); `None`
    /// when unread.
    pub rt: Option<(i64, u64)>,
    pub fair_server: FairServer,
    /// The tightest CFS quota of the measurer's cgroup chain; `None` when no group of it
    /// has one (or the chain was not read): then no window is ever named a quota.
    pub cfs_quota: Option<CfsQuota>,
    /// The tightest real-time bandwidth of a watched cgroup's chain below the root
    /// (cgroup v1 with RT group scheduling), when it is tighter than the kernel's: named
    /// beside the kernel's in RT throttling's label. `None` elsewhere.
    pub rt_group: Option<CfsQuota>,
}

/// A cgroup's CFS bandwidth limit: its tasks run at most the quota of every period
/// (summed over the group's CPUs), then wait for the next period.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CfsQuota {
    /// The setting as its files spell it: `cpu.max 30000 100000` (v2), or
    /// `cpu.cfs_quota_us 30000, cpu.cfs_period_us 100000` (v1).
    pub setting: String,
    /// The group's path in its hierarchy (`/kubepods/pod1`).
    pub group: String,
}

/// The kernel functions that refill a group's CFS quota and unthrottle it on the CPU
/// they run on: the period's hrtimer, the slack hrtimer that hands back unused runtime,
/// and the cross-CPU call by which a timer on another CPU unthrottles this one.
const CFS_UNTHROTTLE: [&str; 3] = [
    "sched_cfs_period_timer",
    "sched_cfs_slack_timer",
    "__cfsb_csd_unthrottle",
];

/// The fair server (6.12+) of the measured CPU.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum FairServer {
    /// No fair server, or its runtime is 0.
    #[default]
    Off,
    /// It runs SCHED_OTHER tasks for `runtime_ns` of every `period_ns` while real-time
    /// tasks hog the CPU.
    On { runtime_ns: u64, period_ns: u64 },
    /// The kernel may have one but its settings could not be read (debugfs unmounted,
    /// or restricted by lockdown).
    Unreadable,
}

impl Throttle {
    /// No throttle known: none read, no quota.
    pub const NONE: Throttle = Throttle {
        rt: None,
        fair_server: FairServer::Off,
        cfs_quota: None,
        rt_group: None,
    };

    fn rt_on(&self) -> bool {
        self.rt.is_some_and(|(r, _)| r >= 0)
    }

    /// Who took the CPU in a window where `idle_ran` (else only lower-priority tasks).
    fn by(&self, idle_ran: bool) -> By {
        match self.fair_server {
            // The fair server never runs idle: it gives its time back when the fair
            // class has nothing to run.
            _ if idle_ran => By::Rt,
            FairServer::On { .. } => By::FairServer,
            FairServer::Unreadable if !self.rt_on() && self.rt.is_some() => By::FairServer,
            FairServer::Unreadable => By::RtGuess,
            FairServer::Off => By::Rt,
        }
    }
}

/// A stretch of the timeline with one cause; `instance` tells one run of a cause (one
/// interrupt, one time slice) from the next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Segment {
    start: u64,
    end: u64,
    cause: Cause,
    instance: u64,
}

/// How to name things and where the run began.
pub struct Context<'a> {
    pub names: &'a Names,
    /// Work and hrtimer functions' names by address.
    pub symbols: &'a HashMap<u64, String>,
    pub scale: Scale,
    /// The run's first tick, for the breakdowns' start times.
    pub run_start: u64,
    /// The thread whose gaps these are: its own time is no cause.
    pub measurer: u32,
    /// How many of the largest gaps to break down.
    pub top: usize,
    /// What the measuring thread does between its gaps.
    pub measurer_kind: MeasurerKind,
    /// How causes are named.
    pub naming: Naming,
    /// The kernel's real-time throttle and fair server settings, and the CFS quota of
    /// the measurer's cgroup chain.
    pub throttle: &'a Throttle,
}

/// What a measuring thread does between its gaps, which says what a gap's start and its
/// absence from its CPU mean.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MeasurerKind {
    /// A loop that spins (noise): it runs at each gap's start with no interrupt context
    /// open, and never leaves its CPU by itself, so that found not running with no switch
    /// out recorded, it was switched out runnable.
    Spins,
    /// A thread that sleeps (a timer, a watched thread): its gaps are intervals such as a
    /// deadline to its wake-up, and it may be off its CPU with nothing lost.
    Sleeps,
}

#[cfg(test)]
impl<'a> Context<'a> {
    /// A test's context: a 1 GHz counter, the run from 0, three gaps broken down, a
    /// noise loop's gaps, full names, no throttle.
    pub(crate) fn plain(
        names: &'a Names,
        symbols: &'a HashMap<u64, String>,
        measurer: u32,
    ) -> Context<'a> {
        Context {
            names,
            symbols,
            scale: Scale::from_hz(1e9),
            run_start: 0,
            measurer,
            top: 3,
            measurer_kind: MeasurerKind::Spins,
            naming: Naming::Full,
            throttle: &Throttle::NONE,
        }
    }
}

/// How causes are named: for a person reading one run, or for series a fleet graphs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Naming {
    /// Everything that tells one run's causes apart: a task's pid and policy
    /// (`task js-holder:7 (real-time 2)`), the idle task's name, what unaccounted means.
    #[default]
    Full,
    /// Names that stay the same from one minute, one boot and one host to the next, so
    /// that a counter labelled with them keeps one series: no pid (a kworker's changes
    /// as the pool grows and shrinks), no policy, a kworker by its work alone
    /// (`task kworker vmstat_update`, its pool number dropped), `idle`, `unaccounted`.
    /// IRQs, softirqs and vectors are named as in `Full`: they are stable already.
    Stable,
    /// As `Stable`, but a task other than a kworker keeps its pid (`task hog:812`), for
    /// a caller that names the task's owner from it and then drops the pid
    /// (`monitor --watch-cgroup`: `task hog (container 3f2a9c1b7d4e)`).
    StableWithPids,
}

impl Naming {
    /// Names that stay the same from one run to the next (pids aside).
    pub fn is_stable(self) -> bool {
        self != Naming::Full
    }
}

/// The timeline of one CPU's events: who had the CPU, segment by segment. At each of
/// `quiet` the measuring thread is known to run with no interrupt context open (a gap's
/// start is its loop's last counter read): an entry whose exit was not seen cannot leak
/// past it.
///
/// A vector is named by the hrtimer it ran; by the tick's when it ran several.
///
/// `carried.me` is the measuring thread as the trace showed it (its priority), kept across
/// batches by the caller since a batch may hold none of its switches; unknown, it is
/// taken from the batch's first event that shows it. `carried.tick` is the tick's state.
fn timeline(
    events: &[Event],
    cx: &Context<'_>,
    quiet: &[u64],
    carried: &mut Carried,
) -> Vec<Segment> {
    let Carried { me, tick } = carried;
    let measurer = cx.measurer;
    if me.is_none() {
        *me = events.iter().find_map(|e| match e.kind {
            Kind::Switch { prev, next, .. } => [prev, next].into_iter().find(|t| t.pid == measurer),
            Kind::Wakeup { task, .. } => Some(task).filter(|t| t.pid == measurer),
            _ => None,
        });
    }
    let named = |f: u64, what: &dyn Fn(&str) -> bool| cx.symbols.get(&f).is_some_and(|n| what(n));
    let is_tick = |f: u64| named(f, &|n| n.starts_with("tick_"));
    let is_refill = |f: u64| named(f, &|n| CFS_UNTHROTTLE.contains(&n));
    // An NMI is stamped when its handler ends: its start is `delta_ns` earlier.
    let mut evs: Vec<(u64, Step)> = Vec::with_capacity(events.len() + quiet.len() + 8);
    evs.extend(quiet.iter().map(|&q| (q, Step::Quiet)));
    for e in events {
        match e.kind {
            Kind::Nmi { delta_ns, .. } => {
                evs.push((
                    e.ts.saturating_sub(cx.scale.to_ticks(delta_ns)),
                    Step::NmiIn,
                ));
                evs.push((e.ts, Step::NmiOut));
            }
            k => evs.push((e.ts, Step::Event(k))),
        }
    }
    // Stable: at one instant a quiet point comes first, then the events stamped there.
    evs.sort_by_key(|(ts, _)| *ts);
    let mut out: Vec<Segment> = Vec::new();
    let mut stack: Vec<Cause> = Vec::new();
    // Where each open context's segments begin (for naming a vector by its hrtimer),
    // and its instance.
    let mut opened: Vec<(usize, u64)> = Vec::new();
    let mut task: Option<Task> = None;
    let mut work: Option<u64> = None;
    let (mut instances, mut slice) = (0u64, 0u64);
    // Where each task's last wake-up fell in the timeline.
    let mut woken_at: rustc_hash::FxHashMap<u32, usize> = Default::default();
    // Where the current task's segments begin.
    let mut switched_at = 0;
    // A runnable measurer held off its CPU: since where, and its priority.
    let mut window: Option<Window> = None;
    // The measurer is thought to run: it was switched in, or its loop ran at a quiet
    // point, and no switch out of it has been recorded since.
    let mut on_cpu = false;
    let mut last = evs.first().map_or(0, |e| e.0);
    for (ts, step) in evs {
        let current = match (stack.last(), opened.last()) {
            (Some(c), Some(o)) => Some((*c, o.1)),
            // The measuring thread's own time is taken out at the end (one rule).
            _ => task.map(|t| (Cause::Task(t, work), slice)),
        };
        if let Some((cause, instance)) = current.filter(|_| ts > last) {
            match out.last_mut() {
                Some(s) if s.cause == cause && s.instance == instance && s.end == last => {
                    s.end = ts
                }
                _ => out.push(Segment {
                    start: last,
                    end: ts,
                    cause,
                    instance,
                }),
            }
        }
        // Where the previous event fell: a task switched out ran at least since then.
        let since = last;
        last = last.max(ts);
        match step {
            Step::Quiet => {
                // The measurer runs again: the window, if any, is over.
                if let Some(w) = window.take() {
                    w.close(&mut out, measurer, cx.throttle);
                }
                on_cpu = true;
                stack.clear();
                task = task.filter(|t| t.pid == measurer);
                work = None;
            }
            Step::Event(Kind::CsdEntry { function }) => {
                if let Some(w) = window.as_mut().filter(|_| is_refill(function)) {
                    w.unthrottled.get_or_insert(out.len());
                }
            }
            Step::Event(Kind::HrtimerEntry { function }) => {
                if let Some(w) = window.as_mut().filter(|_| is_refill(function)) {
                    w.unthrottled.get_or_insert(out.len());
                }
                let top = stack.last().copied().zip(opened.last().map(|o| o.0));
                if let Some((Cause::Vector(name, was, mode), from)) = top
                    && (was.is_none() || (is_tick(function) && !was.is_some_and(is_tick)))
                {
                    let now = match is_tick(function) {
                        true => tick.mode,
                        false => TickMode::Unknown,
                    };
                    let (old, new) = (
                        Cause::Vector(name, was, mode),
                        Cause::Vector(name, Some(function), now),
                    );
                    for seg in out[from..].iter_mut().filter(|s| s.cause == old) {
                        seg.cause = new;
                    }
                    if let Some(top) = stack.last_mut() {
                        *top = new;
                    }
                }
            }
            Step::Event(Kind::TickStop {
                success,
                dependency,
            }) => {
                let in_task = on_cpu || task.is_some_and(|t| t.pid != 0);
                tick.stop(success, dependency, in_task);
            }
            Step::Event(Kind::Wakeup { task: woken, .. }) => {
                // A new stretch begins here, so that it can be given to the woken task.
                instances += 1;
                slice = instances;
                woken_at.insert(woken.pid, out.len());
                if woken.pid == measurer {
                    *me = Some(woken);
                }
            }
            step => {
                if let Step::Event(Kind::Switch {
                    prev,
                    prev_state,
                    next,
                }) = step
                {
                    // Switched out, `prev` was running: when it was not thought to run,
                    // its switch in was lost, and the stretch since the previous event
                    // here (after its wake-up, if seen: an event too) was its own. Named
                    // first, so that a window closing here judges it as `prev`'s.
                    let lost_in = task.is_none_or(|t| t.pid != prev.pid) && stack.is_empty();
                    let held = lost_in.then(|| {
                        instances += 1;
                        held_since(&mut out, since, ts, prev, instances)
                    });
                    let held = held.flatten();
                    // The measurer switching in, or out (it ran before), ends a window;
                    // closed before the idle fix-up below, which would give the window's
                    // idle time to the measurer when no switch out of idle was recorded.
                    if (prev.pid == measurer || next.pid == measurer)
                        && let Some(w) = window.take()
                    {
                        w.close(&mut out, measurer, cx.throttle);
                    }
                    for t in [prev, next].into_iter().filter(|t| t.pid == measurer) {
                        *me = Some(t);
                    }
                    // Preempted while runnable (state 0, or "R+" where the kernel marks
                    // preemption); or, for a loop that spins, found not running with no
                    // switch out of it recorded: its own switch was lost.
                    let switched_out =
                        prev.pid == measurer && super::event::still_runnable(prev_state);
                    let found_out = cx.measurer_kind == MeasurerKind::Spins
                        && on_cpu
                        && prev.pid != measurer
                        && next.pid != measurer;
                    if let Some(m) = me.filter(|_| switched_out || found_out)
                        && let Some(kind) = Window::kind(m, cx.throttle)
                    {
                        instances += 1;
                        window = Some(Window {
                            from: held.unwrap_or(out.len()),
                            prio: m.prio,
                            kind,
                            in_kernel: switched_out
                                && super::event::preempted_in_kernel(prev_state),
                            unthrottled: None,
                            instance: instances,
                        });
                    }
                    on_cpu = next.pid == measurer;
                    // Some kernels record no sched_switch out of idle (none was seen on
                    // 6.18 in a KVM guest): a task switching out while the idle task is
                    // thought to run came in after its wake-up, so the idle time since
                    // then was the task's.
                    if task.is_some_and(|t| t.pid == 0) && prev.pid != 0 {
                        let from = woken_at.get(&prev.pid).copied().unwrap_or(out.len());
                        let idle = |c: &Cause| matches!(c, Cause::Task(t, _) if t.pid == 0);
                        for seg in out[from..].iter_mut().filter(|s| idle(&s.cause)) {
                            seg.cause = Cause::Task(prev, None);
                        }
                    } else if let Some(t) = task.filter(|t| t.pid != prev.pid) {
                        // Another task switches out than the one thought to run: a switch
                        // in between was not recorded, so when `t` stopped running is
                        // unknown. Its time since it came in is given to no one, but
                        // named as the switch the kernel did not record.
                        let wrong = |c: &Cause| matches!(c, Cause::Task(w, _) if w.pid == t.pid);
                        for seg in out[switched_at..].iter_mut().filter(|s| wrong(&s.cause)) {
                            seg.cause = Cause::Unknown;
                        }
                    }
                    instances += 1;
                    slice = instances;
                    switched_at = out.len();
                }
                apply(step, &mut stack, &mut task, &mut work)
            }
        }
        opened.truncate(stack.len());
        while opened.len() < stack.len() {
            instances += 1;
            opened.push((out.len(), instances));
        }
    }
    if let Some(w) = window.take() {
        w.close(&mut out, measurer, cx.throttle);
    }
    // The measuring thread itself is no cause: its own slices, and idle time given to it
    // above (it woke from idle with no switch recorded), which is its wake-up path, are
    // what no event covers.
    out.retain(|s| match s.cause {
        Cause::Task(t, _) => t.pid != measurer,
        _ => true,
    });
    out
}

/// Gives [`since`, `ts`) to `prev`, the task a switch at `ts` took off the CPU, as a
/// time slice of `instance`: the end of `out`'s last segment is split off, or a segment
/// added where nothing ran as far as the events told. Its index; `None` for an empty
/// stretch.
fn held_since(
    out: &mut Vec<Segment>,
    since: u64,
    ts: u64,
    prev: Task,
    instance: u64,
) -> Option<usize> {
    if since >= ts {
        return None;
    }
    let slice = Segment {
        start: since,
        end: ts,
        cause: Cause::Task(prev, None),
        instance,
    };
    match out.last_mut() {
        Some(s) if s.end == ts && s.start >= since => *s = slice,
        Some(s) if s.end == ts => {
            s.end = since;
            out.push(slice);
        }
        _ => out.push(slice),
    }
    Some(out.len() - 1)
}

/// Which throttle can hold a runnable measurer off its CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WindowKind {
    /// A real-time measurer: RT throttling or the fair server.
    Rt,
    /// A SCHED_OTHER measurer in a group chain with a CFS quota.
    Cfs,
}

/// A runnable measurer held off its CPU, from segment `from` on.
struct Window {
    from: usize,
    /// The measurer's priority: a task of higher priority would have preempted it
    /// anyway, so its time stays its own.
    prio: i32,
    kind: WindowKind,
    /// Its switch out was a preemption inside the kernel ("R+"), which a loop that spins
    /// in user space meets when its CFS throttle dequeues it on its way back to user
    /// (6.18+); time-sharing preempts it on that way back, and reads "R".
    in_kernel: bool,
    /// Where (the segments before it) the group was first unthrottled on the CPU inside
    /// the window: its quota refilled there (a CFS bandwidth timer fired), or from
    /// another CPU (a cross-CPU call). Past it, the loop waited its turn like any task;
    /// a later refill is a later period's, which comes throttled or not, and taken as
    /// the end it named whole periods of a busy CPU's turns the quota (issue 36).
    unthrottled: Option<usize>,
    /// One throttling, however many tasks ran in it.
    instance: u64,
}

impl Window {
    /// The throttle that can hold measurer `m` off, if any: RT throttling a real-time
    /// one, a CFS quota a SCHED_OTHER one (prio 100-139) whose chain has one.
    fn kind(m: Task, throttle: &Throttle) -> Option<WindowKind> {
        match m.prio {
            0..100 => Some(WindowKind::Rt),
            100.. if throttle.cfs_quota.is_some() => Some(WindowKind::Cfs),
            _ => None,
        }
    }

    /// Gives the window's task time (idle's and lower-priority tasks') to the throttle
    /// that took the CPU: for a real-time measurer, RT throttling when idle ran, else as
    /// `throttle` says; for a SCHED_OTHER one, the CFS quota where the trace shows it,
    /// else nothing: the tasks took their turns. The trace shows it when idle ran while
    /// the loop was runnable (the whole window), or when the loop was dequeued in the
    /// kernel and a quota refill unthrottled a group on its CPU (until then). A refill
    /// alone is not enough: the period timer fires every period, throttled or not, and
    /// another group's unthrottle looks the same.
    fn close(self, out: &mut [Segment], measurer: u32, throttle: &Throttle) {
        let held = |c: &Cause| match *c {
            Cause::Task(t, _) => {
                t.pid != measurer
                    && (t.pid == 0
                        || t.prio > self.prio
                        || (self.kind == WindowKind::Cfs && t.prio >= 100))
            }
            _ => false,
        };
        let idle =
            |s: &Segment| held(&s.cause) && matches!(s.cause, Cause::Task(t, _) if t.pid == 0);
        let (by, to) = match self.kind {
            WindowKind::Rt => (throttle.by(out[self.from..].iter().any(idle)), out.len()),
            WindowKind::Cfs => match self.unthrottled.filter(|_| self.in_kernel) {
                Some(at) => (By::CfsQuota, at.max(self.from)),
                None if out[self.from..].iter().any(idle) => (By::CfsQuota, out.len()),
                None => return,
            },
        };
        let segs = &mut out[self.from..to];
        for s in segs.iter_mut() {
            if let Cause::Task(t, _) = s.cause
                && held(&s.cause)
            {
                s.cause = Cause::Throttled(by, t);
                s.instance = self.instance;
            }
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Step {
    Event(Kind),
    NmiIn,
    NmiOut,
    /// The measuring thread runs, no context open.
    Quiet,
}

fn apply(step: Step, stack: &mut Vec<Cause>, task: &mut Option<Task>, work: &mut Option<u64>) {
    let pop = |stack: &mut Vec<Cause>, want: &dyn Fn(&Cause) -> bool| {
        // An exit whose entry came before the trace began matches nothing.
        if let Some(i) = stack.iter().rposition(want) {
            stack.truncate(i);
        }
    };
    match step {
        Step::NmiIn => stack.push(Cause::Nmi),
        Step::NmiOut => pop(stack, &|c| *c == Cause::Nmi),
        Step::Quiet => {}
        Step::Event(k) => match k {
            Kind::IrqEntry { irq, name } => stack.push(Cause::Irq(irq, name)),
            Kind::IrqExit { irq } => pop(stack, &|c| matches!(c, Cause::Irq(i, _) if *i == irq)),
            Kind::SoftirqEntry { vec } => stack.push(Cause::Softirq(vec)),
            Kind::SoftirqExit { vec } => pop(stack, &|c| *c == Cause::Softirq(vec)),
            Kind::VectorEntry { name } => stack.push(Cause::Vector(name, None, TickMode::Unknown)),
            Kind::VectorExit { name } => {
                pop(stack, &|c| matches!(c, Cause::Vector(n, ..) if *n == name))
            }
            // Interrupt contexts end before a task switch: any still open lost its exit.
            Kind::Switch { next, .. } => {
                *task = Some(next);
                *work = None;
                stack.clear();
            }
            Kind::WorkStart { function } => *work = Some(function),
            Kind::WorkEnd => *work = None,
            Kind::Nmi { .. }
            | Kind::Wakeup { .. }
            | Kind::HrtimerEntry { .. }
            | Kind::HrtimerExit
            | Kind::CsdEntry { .. }
            | Kind::TickStop { .. } => {}
        },
    }
}

impl Context<'_> {
    fn kind(&self, c: Cause) -> CauseKind {
        match c {
            Cause::Irq(..) => CauseKind::Irq,
            Cause::Softirq(_) => CauseKind::Softirq,
            Cause::Vector(..) => CauseKind::Vector,
            Cause::Nmi => CauseKind::Nmi,
            Cause::Task(t, _) => match kthread::Work::of(self.names.get(t.comm)) {
                Some(w) if t.pid != 0 => w.kind(),
                _ => CauseKind::Task,
            },
            Cause::Throttled(..) => CauseKind::Throttling,
            Cause::Unknown => CauseKind::Unrecorded,
        }
    }

    /// A throttle's name, with the setting that controls it.
    fn throttle_label(&self, by: By) -> String {
        let rt = match self.throttle.rt {
            Some((r, p)) => format!("kernel.sched_rt_runtime_us = {r} of {p}"),
            None => "kernel.sched_rt_runtime_us unread".to_string(),
        };
        // A group's RT bandwidth, tighter than the kernel's: either may have held it.
        let rt = match &self.throttle.rt_group {
            Some(g) => format!("{} of {}; {rt}", g.setting, g.group),
            None => rt,
        };
        let ms = |ns: u64| ns as f64 / 1e6;
        match (by, self.naming.is_stable()) {
            (By::CfsQuota, true) => "CFS quota".into(),
            (By::CfsQuota, false) => match &self.throttle.cfs_quota {
                Some(q) => crate::stats::causes::quota_label(&q.setting, &q.group),
                None => "CFS quota".into(),
            },
            (By::Rt | By::RtGuess, true) => "real-time throttling".into(),
            (By::FairServer, true) => "fair server".into(),
            (By::Rt, false) => format!("real-time throttling ({rt})"),
            (By::RtGuess, false) => {
                format!("real-time throttling ({rt}; fair server unreadable)")
            }
            (By::FairServer, false) => match self.throttle.fair_server {
                FairServer::On {
                    runtime_ns,
                    period_ns,
                } => format!(
                    "fair server (fair_server runtime {} ms of {} ms)",
                    ms(runtime_ns),
                    ms(period_ns)
                ),
                _ => format!("fair server (its settings unreadable; {rt})"),
            },
        }
    }

    /// What the trace said of a tick, after its vector's name: `(residual tick: nohz_full
    /// stopped the tick)`, `(tick kept on: SCHED, more than one task was runnable)`.
    fn tick_words(&self, mode: TickMode) -> String {
        let stable = self.naming.is_stable();
        match mode {
            TickMode::Unknown => String::new(),
            TickMode::Residual if stable => format!(" ({RESIDUAL})"),
            TickMode::Residual => format!(" ({RESIDUAL}: nohz_full stopped the tick)"),
            TickMode::Kept(bits) => {
                let names = super::event::dependency_words(bits);
                let why: Vec<&str> = (super::event::TICK_DEPENDENCIES.iter())
                    .filter(|(b, ..)| bits & b != 0)
                    .map(|d| d.2)
                    .collect();
                match (stable, why.as_slice()) {
                    (true, _) | (false, []) => format!(" ({KEPT} {names})"),
                    (false, why) => format!(" ({KEPT} {names}: {})", why.join("; ")),
                }
            }
        }
    }

    fn label(&self, c: Cause) -> String {
        // A kernel thread running interrupt work: named as that work.
        if let Cause::Task(t, _) = c
            && t.pid != 0
            && let Some(w) = kthread::Work::of(self.names.get(t.comm))
        {
            let comm = self.names.get(t.comm);
            return match self.naming {
                Naming::Full => w.label(&format!("{comm}, {}", policy_words(t.prio))),
                _ => w.label(comm),
            };
        }
        match c {
            Cause::Irq(irq, name) => format!("irq {irq} {}", self.names.get(name)),
            Cause::Softirq(v) => format!("softirq {}", softirq_name(v)),
            Cause::Vector(name, f, mode) => match f.and_then(|f| self.symbols.get(&f)) {
                Some(f) => format!(
                    "vector {}: {f}{}",
                    self.names.get(name),
                    self.tick_words(mode)
                ),
                None => format!("vector {}", self.names.get(name)),
            },
            Cause::Nmi => "nmi".to_string(),
            Cause::Unknown => UNRECORDED.to_string(),
            Cause::Throttled(by, _) => self.throttle_label(by),
            // pid 0 is the idle task: the CPU slept (on a VM, halted and left to the host).
            Cause::Task(t, _) if t.pid == 0 => match self.naming {
                Naming::Full => format!("idle ({})", self.names.get(t.comm)),
                _ => "idle".to_string(),
            },
            Cause::Task(t, work) if self.naming.is_stable() => {
                let comm = self.names.get(t.comm);
                let kworker = comm.starts_with("kworker/");
                let base = match (kworker, self.naming) {
                    (true, _) => "task kworker".to_string(),
                    (false, Naming::StableWithPids) => format!("task {comm}:{}", t.pid),
                    (false, _) => format!("task {comm}"),
                };
                match work.filter(|_| kworker).and_then(|w| self.symbols.get(&w)) {
                    Some(f) => format!("{base} {f}"),
                    None => base,
                }
            }
            Cause::Task(t, work) => {
                let work = work.filter(|_| self.names.get(t.comm).starts_with("kworker"));
                let base = format!(
                    "task {}:{} ({})",
                    self.names.get(t.comm),
                    t.pid,
                    policy_words(t.prio)
                );
                match work.and_then(|w| self.symbols.get(&w)) {
                    Some(f) => format!("{base} {f}"),
                    None => base,
                }
            }
        }
    }
}

/// How a tick that ran while nohz_full had stopped it is named, and one that ran kept on
/// by a dependency: the verdict reads them (`system::cause_fix`).
pub const RESIDUAL: &str = "residual tick";
/// How time the kernel's missing sched_switch leaves unplaced is named (issue 50).
pub const UNRECORDED: &str = "switch not recorded by the kernel";
pub const KEPT: &str = "tick kept on:";

/// The key of a throttle's row: which task ran is listed under it, not keyed.
const NOBODY: Task = Task {
    pid: u32::MAX,
    comm: 0,
    prio: 0,
};

/// Attributes `gaps` (sorted by start, each with its interrupted time in ns) of one CPU
/// to its `events` (in time order).
pub fn attribute(gaps: &[(Gap, u64)], events: &[Event], cx: &Context<'_>) -> Attribution {
    let mut t = Tally::new(cx.top);
    t.add(gaps, events, cx);
    t.finish(cx.scale)
}

/// The interval most of `starts` (sorted ticks) recur at: the median gap between
/// successive ones, when at least half of the intervals lie within 5 % of it.
pub fn period(starts: &[u64]) -> Option<u64> {
    if starts.len() < 5 {
        return None;
    }
    let mut d: Vec<u64> = starts.windows(2).map(|w| w[1] - w[0]).collect();
    d.sort_unstable();
    let m = d[d.len() / 2];
    let near = d.iter().filter(|&&x| x.abs_diff(m) * 20 <= m).count();
    (near * 2 >= d.len() && m > 0).then_some(m)
}

#[cfg(test)]
mod tests;
