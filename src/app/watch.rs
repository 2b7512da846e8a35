//! `jitterscope watch`: why were my application's threads late? The same trace session,
//! reader and attribution as `--trace`, keyed by someone else's threads rather than by a
//! probe's gaps (`trace::watch` does the pure part).
//!
//! The trace covers every online CPU, since threads migrate, and is read from the
//! housekeeping CPU until -D, Ctrl-C or SIGTERM, or until the watched process (or every
//! watched thread) ends. A process's threads are its `/proc/PID/task` listed at the
//! start and again every pass (100 ms), so threads it starts later are followed; one
//! that lives less than a pass may be missed. `--comm` is matched in the trace itself,
//! so every task of that name counts, new processes included.
//!
//! The trace is followed as it is read (`follow`): each CPU's events are walked once
//! they are `SETTLE` old, in time order across CPUs, by a `trace::watch::Watcher` that
//! keeps only open state, so memory stays flat however long the run.
//!
//! Filtering: none in the kernel, by choice. What ran instead of a watched thread is
//! other tasks' switches, wake-ups and interrupts: `set_event_pid` (even with
//! `options/event-fork`) records only events while a watched task is current, or switches
//! and wake-ups that name one, so a delay's hog woken from idle, a switch between two
//! other tasks and every IRQ inside a delay would be lost, and the delay left
//! unaccounted. A `pid` or `comm` filter on `sched_wakeup` would lose the hogs' wake-ups,
//! which date their runs where no switch out of idle is recorded. The cost is given as
//! numbers instead: events read and lost, and the tool's own CPU time.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};

use crate::cli::WatchArgs;
use crate::engine::clock::Scale;
use crate::engine::cpu::{CpuList, CpuPlan, CpuUniverse};
use crate::engine::run::RunOutcome;
use crate::engine::sched::{self, SchedRequest};
use crate::report::ResultFile;
use crate::report::terminal::watch::{WatchRecord, WatchedThread};
use crate::system::cgroup::target::{Group, Selector};
use crate::system::cgroup::{self, target};
use crate::trace::event::{Event, Names};
use crate::trace::reader;
use crate::trace::session::TraceError;
use crate::trace::session::TraceSession;
use crate::trace::symbols::{Symbols, name_functions_with};
use crate::trace::watch::{self, Settings, ThreadFigures, Watched, Watcher};

pub mod owners;
mod quota;

use super::Ending;
use super::cpuset::Cpuset;
use super::output::Warnings;
use super::pipeline::{Ctx, Measure, Measured, RunSettings, execute};

/// Per-CPU trace buffer: every CPU is traced, and the reader passes every 20 ms.
pub const BUFFER_KIB: u64 = 4096;
/// How often the reader drains the trace.
const READ_PASS: Duration = Duration::from_millis(20);
/// How old an event is when it is walked: by then every CPU's events before it have
/// been read, and a thread the process started then has been listed (a pass is 100 ms).
const SETTLE: Duration = Duration::from_millis(300);
/// Events read but not yet walked, per CPU (40 bytes each): far above SETTLE's worth
/// on a busy CPU; beyond it they are counted as lost.
const WINDOW_EVENTS: usize = 262_144;
/// How often the watched process is checked and its threads listed again.
const PASS: Duration = Duration::from_millis(100);
/// How many of each thread's worst delays are kept as timelines.
const TOP: usize = 5;

/// What is watched, as given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Pid(u32),
    Tids(Vec<u32>),
    Comm(String),
    /// A cgroup (`--cgroup/--container/--pod/--unit`), found at the start.
    Cgroup(Selector, Vec<Group>),
}

impl Target {
    fn describe(&self) -> String {
        match self {
            Target::Pid(p) => format!("pid {p}"),
            Target::Tids(t) => {
                let t: Vec<String> = t.iter().map(u32::to_string).collect();
                format!("tid {}", t.join(","))
            }
            Target::Comm(c) => format!("comm {c}"),
            Target::Cgroup(sel, groups) => {
                let paths: Vec<&str> = groups.iter().map(|g| g.path.as_str()).collect();
                let what = sel.describe();
                let what = what.trim_start_matches("--");
                format!("{what} (cgroup {})", paths.join(", "))
            }
        }
    }
}

/// The selector given, if any of `--cgroup/--container/--pod/--unit`, and how many were.
fn selector(args: &WatchArgs) -> (Option<Selector>, usize) {
    let given = [
        args.cgroup.clone().map(Selector::Path),
        args.container.clone().map(Selector::Container),
        args.pod.clone().map(Selector::Pod),
        args.unit.clone().map(Selector::Unit),
    ];
    let n = given.iter().flatten().count();
    (given.into_iter().flatten().next(), n)
}

/// The groups `sel` names on this host, or one line saying why none.
fn resolve(sel: &Selector) -> anyhow::Result<Vec<Group>> {
    let root = Path::new("/");
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")
        .context("cannot read /proc/self/mountinfo")?;
    let mounts = cgroup::parse_mountinfo(&mountinfo);
    target::resolve(root, &mounts, sel).map_err(|e| anyhow::anyhow!("{}: {e}", sel.describe()))
}

/// A watch run, described.
pub struct WatchCommand {
    pub settings: RunSettings,
    pub target: Target,
    pub threshold_ns: u64,
    record: Option<WatchRecord>,
}

impl WatchCommand {
    pub fn from_args(args: &WatchArgs) -> anyhow::Result<WatchCommand> {
        let (sel, selectors) = selector(args);
        let target = match (args.pid, &args.tid, &args.comm, sel) {
            (Some(p), None, None, None) => Target::Pid(p),
            (None, Some(t), None, None) if !t.is_empty() => Target::Tids(t.clone()),
            (None, None, Some(c), None) => {
                Target::Comm(watch::comm_of(c).map_err(|e| anyhow::anyhow!("--comm: {e}"))?)
            }
            (None, None, None, Some(sel)) if selectors == 1 => {
                let groups = resolve(&sel)?;
                Target::Cgroup(sel, groups)
            }
            _ => bail!(
                "give one of --pid PID, --tid TID[,TID…], --comm NAME, --cgroup PATH, \
                 --container ID, --pod ID or --unit NAME"
            ),
        };
        let settings = RunSettings {
            cpus: None,
            housekeeping: args.housekeeping,
            sched: SchedRequest::OTHER,
            duration: args.duration,
            // Nothing here is timed by the tool itself: its memory may page.
            mlock: false,
            force: false,
            save: args.save.clone(),
            gates: Vec::new(),
            whole_result: false,
        };
        Ok(WatchCommand {
            settings,
            target,
            threshold_ns: args.threshold,
            record: None,
        })
    }
}

/// `jitterscope watch`.
pub fn run(args: &WatchArgs, argv: &[String], stop: &AtomicBool) -> anyhow::Result<Ending> {
    let mut cmd = WatchCommand::from_args(args)?;
    Ok(execute(&mut cmd, argv, stop, &Warnings::stderr())?.1)
}

/// Whether a task (process or thread) is alive: its `/proc` entry is there and it is
/// no zombie.
fn alive(id: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{id}/stat")) else {
        return false;
    };
    // The state follows the name, which may hold spaces and parentheses.
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, r)| r.trim_start().chars().next());
    !matches!(state, None | Some('Z' | 'X' | 'x'))
}

/// The threads of `pid` now.
fn threads_of(pid: u32) -> Vec<u32> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// jitterscope's own CPU time, all threads, user and system (getrusage's sum).
pub fn own_cpu_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// Why the run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    Duration,
    Signal,
    ProcessEnded,
}

impl Measure for WatchCommand {
    fn settings(&self) -> &RunSettings {
        &self.settings
    }

    /// Every online CPU is traced; the reader keeps to the housekeeping CPU.
    fn place(&mut self, universe: &CpuUniverse, _: &Cpuset) -> anyhow::Result<CpuPlan> {
        let usable = universe.usable();
        let hk = match self.settings.housekeeping {
            Some(c) if usable.cpus().contains(&c) => c,
            Some(c) => bail!("--housekeeping: CPU {c} is not online and allowed ({usable})"),
            None => (universe.housekeeping_pool().first()).context("no usable CPU")?,
        };
        Ok(CpuPlan {
            measured: universe.online.clone(),
            housekeeping: CpuList::from_cpus(vec![hk]),
        })
    }

    /// Always audited, saved or not: the cause table names the finding whose fix would
    /// remove each cause, on the terminal too. The audit is about the traced CPUs but the
    /// reader's, as `jitterscope audit` is about every CPU but one kept for housekeeping:
    /// about every CPU, its fixes would read "isolate every CPU" and "move the IRQs to a
    /// housekeeping CPU" where none is left. Nothing here is timed, so its cost (time
    /// before the trace starts, memory) takes nothing from the figures.
    fn audit_cpus(&self, plan: &CpuPlan) -> Option<CpuList> {
        let rest = plan.measured.without(&plan.housekeeping);
        Some(match rest.cpus().is_empty() {
            true => plan.measured.clone(),
            false => rest,
        })
    }

    fn check(&self, _cpus: &CpuPlan) -> anyhow::Result<()> {
        if !rustix::process::geteuid().is_root() {
            bail!("watch needs root: it traces the scheduler with a tracefs instance of its own");
        }
        match &self.target {
            Target::Pid(p) if !alive(*p) => bail!("--pid {p}: no such process"),
            Target::Tids(tids) => {
                if let Some(t) = tids.iter().find(|t| !alive(**t)) {
                    bail!("--tid {t}: no such thread");
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn measure(&mut self, ctx: &mut Ctx<'_>) -> anyhow::Result<Measured> {
        let cpus = ctx.cpus.measured.clone();
        // Read before tracing: it may mount debugfs for the fair server's settings.
        let mut throttle = crate::system::throttle::read(cpus.first().unwrap_or(0));
        // A watched cgroup's quota: its threads' stretches held off by it are named so.
        if let Target::Cgroup(_, groups) = &self.target {
            throttle.cfs_quota = quota::tightest(groups);
            throttle.rt_group = quota::tightest_rt(groups, throttle.rt);
        }
        // Read before tracing too: it takes ~60 ms here, during which a busy CPU's
        // buffer would fill with nobody reading it.
        let kallsyms = Symbols::load();
        let mut session = TraceSession::start_with(&cpus, BUFFER_KIB, &["sched:sched_wakeup_new"])
            .map_err(|e| anyhow::anyhow!("watch cannot trace: {e}"))?;
        for name in &session.removed_stale {
            ctx.note(super::tracing::stale_removed(name));
        }
        for needed in ["sched:sched_switch", "sched:sched_wakeup"] {
            if session.missing.iter().any(|m| m == needed) {
                bail!("watch cannot trace: this kernel's trace has no {needed} event");
            }
        }
        let tids: HashSet<u32> = match &self.target {
            Target::Pid(p) => threads_of(*p).into_iter().collect(),
            Target::Tids(t) => t.iter().copied().collect(),
            Target::Comm(_) => HashSet::new(),
            Target::Cgroup(_, groups) => {
                target::threads(Path::new("/"), groups).unwrap_or_default()
            }
        };
        let watched = match &self.target {
            Target::Comm(name) => Watched::Comm(name.clone()),
            _ => Watched::Tids(tids.iter().copied().collect()),
        };
        let tids = Mutex::new(tids);
        let quotas = match &self.target {
            Target::Cgroup(_, groups) => quota::Quotas::start(groups),
            _ => None,
        };
        // What ran instead is named with its owner, read while the watch runs.
        let owners = matches!(self.target, Target::Cgroup(..)).then(owners::Owners::default);
        let cpu_before = own_cpu_ns();
        let run_start = crate::engine::clock::now();
        let scale = ctx.host.clock.scale;
        let watcher = Watcher::new(
            watched,
            Settings {
                scale,
                threshold_ns: self.threshold_ns,
                top: TOP,
                throttle,
                run_start,
            },
        );
        let started = Instant::now();
        let deadline = self.settings.duration.map(|d| started + d);
        let done = AtomicBool::new(false);
        let housekeeping = ctx.cpus.housekeeping.first();
        // This thread lists the process's threads every pass: on the housekeeping CPU
        // too, or it shows up among the causes of the delays it watches (it did, 3 %).
        let affinity = crate::engine::cpu::current_affinity().ok();
        if let Some(cpu) = housekeeping {
            let _ = sched::pin_to(cpu);
        }
        let (end, followed, stopped, quotas) = std::thread::scope(|s| {
            let reader = s.spawn(|| {
                if let Some(cpu) = housekeeping {
                    let _ = sched::pin_to(cpu);
                }
                let end =
                    |w: Watcher, names: &Names, symbols: &HashMap<u64, String>, counts| Followed {
                        figures: w.finish(names, symbols),
                        counts,
                    };
                let mut known = rustc_hash::FxHashSet::default();
                let ran = |p: Pass<'_>| {
                    if let Some(owners) = &owners {
                        owners.ran(p.fed, &mut known);
                    }
                };
                follow(
                    &session,
                    &kallsyms,
                    watcher,
                    Some(&tids),
                    scale,
                    &done,
                    ran,
                    end,
                )
            });
            let end = loop {
                if ctx.stop.load(Ordering::Relaxed) {
                    break End::Signal;
                }
                let now = Instant::now();
                if deadline.is_some_and(|d| now >= d) {
                    break End::Duration;
                }
                let gone = match &self.target {
                    Target::Pid(p) => {
                        let found = threads_of(*p);
                        lock(&tids).extend(found);
                        !alive(*p)
                    }
                    Target::Tids(t) => t.iter().all(|t| !alive(*t)),
                    Target::Comm(_) => false,
                    // Listed afresh: a task that moved out is followed no more.
                    Target::Cgroup(_, groups) => match target::threads(Path::new("/"), groups) {
                        Some(now) => {
                            *lock(&tids) = now;
                            false
                        }
                        None => true,
                    },
                };
                if let Some(owners) = &owners {
                    owners.read_new();
                }
                if gone {
                    break End::ProcessEnded;
                }
                let left = deadline.map_or(PASS, |d| d.saturating_duration_since(now));
                std::thread::sleep(left.min(PASS));
            };
            // Recording stops here, and the quotas' counters are read at once, so that
            // they cover what the trace does (the reader stops it again, harmlessly).
            session.stop_recording();
            let stopped = crate::engine::clock::now();
            let quotas = quotas
                .as_ref()
                .map(quota::Quotas::deltas)
                .unwrap_or_default();
            done.store(true, Ordering::Relaxed);
            (end, reader.join(), stopped, quotas)
        });
        if let Some(cpus) = &affinity {
            let _ = sched::set_affinity(cpus);
        }
        let elapsed = started.elapsed();
        session.close();
        let f = match followed {
            Ok(Ok(f)) => f,
            Ok(Err(e)) => bail!("the trace failed: {e}"),
            Err(_) => bail!("the trace reader panicked"),
        };
        let c = f.counts;
        let lost = c.lost_kernel + c.lost_reader;
        if lost > 0 {
            ctx.note(format!(
                "{lost} trace events were lost ({} overwritten in the kernel's buffers before \
                 they were read, {} dropped by jitterscope's bounds): delays in those \
                 stretches may be missing or misread",
                c.lost_kernel, c.lost_reader
            ));
        }
        if end == End::ProcessEnded {
            ctx.note(format!(
                "{} ended after {:.3} s: the watch ended with it",
                self.target.describe(),
                elapsed.as_secs_f64()
            ));
        }
        for note in quota::notes(&quotas) {
            ctx.note(note);
        }
        let mut figures = f.figures;
        if let Some(owners) = &owners {
            owners.read_new();
            owners.name(&mut figures);
        }
        let threads: Vec<WatchedThread> = (figures.into_iter())
            .map(|f| {
                let tid = f.tid;
                let mut t = WatchedThread::from_figures(f, ctx.keep);
                t.policy_at_end = sched::policy_of(tid);
                t
            })
            .collect();
        let task_cpus = task_cpus(&threads);
        self.record = Some(WatchRecord {
            task_cpus,
            target: self.target.describe(),
            threshold_ns: self.threshold_ns,
            ended: match end {
                End::Duration => "duration",
                End::Signal if deadline.is_some() => "interrupted",
                End::Signal => "stopped by a signal, as asked",
                End::ProcessEnded => "process ended",
            }
            .into(),
            method: "kernel trace events of every online CPU on the TSC (x86-tsc): per \
                     watched thread, sched_wakeup/sched_wakeup_new to the sched_switch that \
                     runs it, switched out runnable to switched in, and interrupt contexts \
                     while it ran; a CFS quota or RT throttling named where the trace shows \
                     it held a runnable thread off"
                .into(),
            filtering: "none in the kernel: what ran instead is other tasks' events, which \
                        a pid filter would drop"
                .into(),
            events_read: c.read,
            events_lost: lost,
            events_lost_kernel: c.lost_kernel,
            events_lost_reader: c.lost_reader,
            tool_cpu_ns: own_cpu_ns().saturating_sub(cpu_before),
            threads,
            quotas,
            traced_ticks: Some([run_start, stopped]),
        });
        let interrupted = end == End::Signal && deadline.is_some();
        Ok(Measured {
            entries: Vec::new(),
            outcome: RunOutcome {
                workers: Vec::new(),
                window: None,
                interrupted,
                elapsed,
                mlock_error: None,
            },
            requested: self.settings.duration.unwrap_or(Duration::ZERO),
            mlock: false,
            actual: Some(elapsed),
            limit_exceeded: false,
        })
    }

    fn finish(&mut self, result: &mut ResultFile) {
        result.watch = self.record.take();
    }

    fn text(&self, r: &ResultFile) -> String {
        crate::report::terminal::watch::watch_text(r)
    }
}

fn lock(tids: &Mutex<HashSet<u32>>) -> std::sync::MutexGuard<'_, HashSet<u32>> {
    tids.lock().unwrap_or_else(|p| p.into_inner())
}

/// A kernel thread bound to its CPU (kworker/1:1, ksoftirqd/1): taskset refuses it.
const PF_NO_SETAFFINITY: u64 = 0x0400_0000;

/// The CPUs each task among the threads' causes may run on now, for those alive and
/// movable (a per-CPU kernel thread's own findings say what moves its work).
fn task_cpus(threads: &[WatchedThread]) -> BTreeMap<u32, String> {
    let causes = (threads.iter())
        .filter_map(|t| t.attribution.as_ref())
        .flat_map(|a| a.causes.iter());
    causes
        .filter_map(|c| crate::report::terminal::watch::task_pid(&c.cause))
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            // The 9th field, after the name (which may hold spaces and parentheses).
            let flags: u64 = stat
                .rsplit_once(')')?
                .1
                .split_whitespace()
                .nth(6)?
                .parse()
                .ok()?;
            if flags & PF_NO_SETAFFINITY != 0 {
                return None;
            }
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
            let list = (status.lines())
                .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))?
                .trim()
                .to_string();
            Some((pid, list))
        })
        .collect()
}

/// What the reader has read and lost so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TraceCounts {
    pub read: u64,
    /// Overwritten or dropped by the kernel, and dropped by the reader's own bounds.
    pub lost_kernel: u64,
    pub lost_reader: u64,
}

/// One pass of the reader, handed to its caller after the watcher was fed.
pub struct Pass<'a> {
    pub watcher: &'a mut Watcher,
    /// The trace has stopped and every event was fed: the last pass.
    pub last: bool,
    /// The events just fed, by CPU.
    pub fed: &'a [(usize, &'a [Event])],
    session: &'a TraceSession,
    follower: &'a reader::Follower,
}

impl Pass<'_> {
    /// Events read and lost since the start (reads each CPU's `stats`: call it when
    /// the figures are wanted, not every pass).
    pub fn counts(&self) -> TraceCounts {
        let windows = &self.follower.windows;
        TraceCounts {
            read: windows.iter().map(|w| w.read).sum(),
            // The kernel's count, or what its pages said they missed where that is more.
            lost_kernel: (windows.iter())
                .map(|w| self.session.lost(w.cpu).max(w.missed))
                .sum(),
            lost_reader: windows.iter().map(|w| w.evicted).sum::<u64>() + self.watcher.evicted,
        }
    }
}

/// What `watch`'s reader made of the trace.
struct Followed {
    figures: Vec<ThreadFigures>,
    counts: TraceCounts,
}

/// The reader loop, one for `watch` and `monitor --watch-comm`: drains the trace every
/// `READ_PASS` and feeds `watcher` each CPU's events once they are `SETTLE` old, so that
/// nothing of the run is kept but open state (issue 25: memory flat over the length of
/// a run). Runs on the caller's thread, which the caller pins to the housekeeping CPU,
/// until `done`; then it stops recording, feeds what is left, and gives `end` the
/// watcher with the names its figures need. After every pass (the last included)
/// `each` sees the watcher: `monitor` drains its figures there. `tids`, when given,
/// are the threads to watch, updated by the caller (a process's new threads).
#[allow(clippy::too_many_arguments)]
pub fn follow<T>(
    session: &TraceSession,
    kallsyms: &Symbols,
    mut watcher: Watcher,
    tids: Option<&Mutex<HashSet<u32>>>,
    scale: Scale,
    done: &AtomicBool,
    mut each: impl FnMut(Pass<'_>),
    end: impl FnOnce(Watcher, &Names, &HashMap<u64, String>, TraceCounts) -> T,
) -> Result<T, TraceError> {
    let io = |source| TraceError::Io {
        path: session.pipe(session.cpus.first().unwrap_or(0)),
        source,
    };
    let mut follower = reader::Follower::open(session, WINDOW_EVENTS)?;
    let mut symbols: HashMap<u64, String> = HashMap::new();
    let settle = scale.to_ticks(SETTLE.as_nanos() as u64);
    let mut names = 0;
    loop {
        let last = done.load(Ordering::Relaxed);
        if last {
            session.stop_recording();
        }
        let until = match last {
            true => u64::MAX,
            false => crate::engine::clock::now().saturating_sub(settle),
        };
        follower.pass().map_err(io)?;
        // The follower started afresh (too many names): the events held name by the
        // old ones.
        if follower.decoder.names.len() < names {
            watcher.forget_events();
        }
        names = follower.decoder.names.len();
        if let Some(tids) = tids {
            watcher.watch_tids(lock(tids).iter().copied());
        }
        // Fed from the windows where they lie, then forgotten: copied out first, they
        // were a twentieth of the reader's time (issue 34).
        let batch: Vec<(usize, &[Event])> = (follower.windows.iter())
            .map(|w| (w.cpu, w.before(until)))
            .collect();
        // Named from the table read before tracing.
        let events = batch.iter().flat_map(|(_, evs)| evs.iter());
        name_functions_with(&mut symbols, events, |new| kallsyms.names(new.into_iter()));
        watcher.feed(&batch, until, &follower.decoder.names, &symbols);
        each(Pass {
            watcher: &mut watcher,
            last,
            fed: &batch,
            session,
            follower: &follower,
        });
        for w in &mut follower.windows {
            w.forget_before(until);
        }
        if last {
            break;
        }
        std::thread::sleep(READ_PASS);
    }
    let counts = Pass {
        watcher: &mut watcher,
        last: true,
        fed: &[],
        session,
        follower: &follower,
    }
    .counts();
    let names = std::mem::take(&mut follower.decoder.names);
    // The buffers are closed before the caller removes the instance.
    drop(follower);
    Ok(end(watcher, &names, &symbols, counts))
}
