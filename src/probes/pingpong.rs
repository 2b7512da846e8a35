//! Thread-to-thread notification latency: the job of osjitter's pingpong and of rt-tests'
//! ptsematest, svsematest, pmqtest and sigwaittest.
//!
//! Two pinned threads pass a token back and forth over one mechanism at a time. Thread A
//! busy-waits the pause, stamps the counter and sends the stamp; B reads the counter on
//! wake-up (one way, A→B) and answers at once with that same stamp; A reads the counter
//! on wake-up (one way, B→A, and the round trip). So the two one-way figures of a round
//! add up to its round trip, and B's side of the critical path holds one counter read and
//! nothing else: a second stamp for the answer, an echo of the first on the answer's line,
//! and fenced reads at the edges made the spin round trip 160–170 ns against a bare
//! loop's 110–120 ns here (bench/pingpong_floor.sh measures both). Every mechanism carries
//! the same stamp, in the message itself where it has one (pipe, eventfd, socket, queue)
//! or in a slot written before the wake-up otherwise.
//!
//! One-way figures compare two CPUs' counters, so they are only as good as the agreement
//! of those counters: `engine::tsc_sync` bounds it before the run, and the figures are
//! marked valid only when the bound is a tenth of them or less. Otherwise the round trip
//! halved stands in for them, and the result says so.
//!
//! Every blocking wait is the plain, untimed one an application would use: a timed wait
//! arms and cancels a timer each time, which on a VM costs exits that would be counted
//! as the mechanism's own (measured here: futex 21 µs against pipe's 18 µs, until the
//! futex wait lost its timeout). A thread that leaves, however it leaves, sends a last
//! message (GOODBYE) in its direction, which releases a peer waiting for it; spinning
//! and set-up waits poll the stop flags and the deadline.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use crossbeam_utils::CachePadded;
use rustix::fd::OwnedFd;
use serde::{Deserialize, Serialize};

use crate::engine::clock::{self, ClockInfo, Scale};
use crate::engine::ipc::{self, WaitResult};
use crate::engine::run::{self, RunError, RunOutcome, RunPlan, ThreadSpec, Worker};
use crate::engine::sched::ThreadCounters;
use crate::engine::tsc_sync::SkewBound;
use crate::probes::record::{HistogramRecord, ThreadRecord};
use crate::stats::{LatencyHistogram, Summary};

/// The default busy pause between round trips (`--pause`).
pub const DEFAULT_PAUSE_NS: u64 = 2_000;
/// The default warm-up per mechanism (`--warmup`).
pub const DEFAULT_WARMUP: Duration = Duration::from_millis(50);

/// A spinning receiver reads the clock for the deadline once every this many polls.
const DEADLINE_POLLS: u32 = 256;
/// The stamp a departing thread sends to release a peer blocked in `read`: no counter
/// reading is 1 once the machine has run for a moment, and it is not 0, which an
/// eventfd write would add without waking anyone.
const GOODBYE: u64 = 1;

/// A way for one thread to tell another something.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mechanism {
    /// The receiver polls an atomic with plain loads.
    Spin,
    /// The same, with the CPU's pause hint in each poll.
    SpinPause,
    /// Raw FUTEX_WAIT / FUTEX_WAKE on a private futex word.
    Futex,
    /// A pthread mutex and condition variable.
    Condvar,
    /// An unnamed POSIX semaphore (sem_post / sem_timedwait).
    Sem,
    /// A SysV semaphore (semop / semtimedop): svsematest's method.
    SysvSem,
    /// A pthread mutex the sender unlocks and the receiver was blocked locking:
    /// ptsematest's method.
    Mutex,
    /// A pipe carrying the stamp.
    Pipe,
    /// An eventfd whose counter is the stamp.
    Eventfd,
    /// A unix stream socket pair carrying the stamp.
    Unix,
    /// A POSIX message queue carrying the stamp: pmqtest's method.
    Mq,
    /// pthread_kill and sigtimedwait: sigwaittest's method.
    Signal,
    /// Nothing: two back-to-back stamps, the timing's own cost.
    Null,
}

impl Mechanism {
    pub const ALL: [Mechanism; 13] = [
        Mechanism::Spin,
        Mechanism::SpinPause,
        Mechanism::Futex,
        Mechanism::Condvar,
        Mechanism::Sem,
        Mechanism::SysvSem,
        Mechanism::Mutex,
        Mechanism::Pipe,
        Mechanism::Eventfd,
        Mechanism::Unix,
        Mechanism::Mq,
        Mechanism::Signal,
        Mechanism::Null,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Spin => "spin",
            Mechanism::SpinPause => "spin-pause",
            Mechanism::Futex => "futex",
            Mechanism::Condvar => "condvar",
            Mechanism::Sem => "sem",
            Mechanism::SysvSem => "sysv-sem",
            Mechanism::Mutex => "mutex",
            Mechanism::Pipe => "pipe",
            Mechanism::Eventfd => "eventfd",
            Mechanism::Unix => "unix",
            Mechanism::Mq => "mq",
            Mechanism::Signal => "signal",
            Mechanism::Null => "null",
        }
    }

    /// Whether the threads busy-wait (and so hog their CPUs) rather than sleep.
    pub fn spins(self) -> bool {
        matches!(self, Mechanism::Spin | Mechanism::SpinPause)
    }

    /// Parses a `--mech` list: names separated by commas, or `all`.
    pub fn parse_list(text: &str) -> Result<Vec<Mechanism>, String> {
        let mut out = Vec::new();
        for part in text.split(',').map(str::trim) {
            if part == "all" {
                out.extend(Mechanism::ALL);
                continue;
            }
            let m = Mechanism::ALL
                .into_iter()
                .find(|m| m.name() == part)
                .ok_or_else(|| {
                    let names: Vec<&str> = Mechanism::ALL.iter().map(|m| m.name()).collect();
                    format!(
                        "unknown mechanism '{part}'; expected all or some of {}",
                        names.join(", ")
                    )
                })?;
            if out.contains(&m) {
                return Err(format!("mechanism '{part}' is named twice in '{text}'"));
            }
            out.push(m);
        }
        Ok(out)
    }
}

impl std::fmt::Display for Mechanism {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A validated configuration of the pingpong probe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PingpongConfig {
    pub cpu_a: usize,
    pub cpu_b: usize,
    pub mechanisms: Vec<Mechanism>,
    /// Busy-wait between round trips, in ns.
    pub pause_ns: u64,
    /// Per mechanism: rounds passed first and not recorded.
    pub warmup: Duration,
    /// Per mechanism: stop after this many measured round trips.
    pub count: Option<u64>,
}

/// The configuration as recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PingpongConfigRecord {
    pub pause_ns: u64,
    pub warmup_ns: u64,
    pub count: Option<u64>,
    pub duration_ns: u64,
    pub policy: crate::engine::sched::Policy,
    pub priority: u8,
}

/// A distribution as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Distribution {
    pub summary: Summary,
    pub histogram: HistogramRecord,
}

impl Distribution {
    fn of(h: &LatencyHistogram) -> Distribution {
        Distribution {
            summary: h.summary(),
            histogram: HistogramRecord::from_hist(h),
        }
    }
}

/// Where the one-way figures shown come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OneWayBasis {
    /// Counter stamps from the sender and the receiver: the TSC check supports them.
    Tsc,
    /// The round trip halved: the counters could not be shown to agree closely enough.
    RttHalf,
}

/// One mechanism's result: the probe's entry in the result file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PingpongEntry {
    pub mechanism: Mechanism,
    pub cpu_a: usize,
    pub cpu_b: usize,
    pub config: PingpongConfigRecord,
    pub thread_a: ThreadRecord,
    pub thread_b: ThreadRecord,
    /// Measured round trips.
    pub round_trips: u64,
    /// From the first measured round to the last.
    pub runtime_ns: u64,
    /// A's stamp before sending to A's stamp on the answer.
    pub rtt: Distribution,
    /// Both directions' one-way latencies (receiver's counter − sender's stamp).
    pub one_way: Distribution,
    pub one_way_a_to_b: Summary,
    pub one_way_b_to_a: Summary,
    /// One-way readings below 0 (counters out of step), recorded as 0.
    pub one_way_negative: u64,
    /// The counters' agreement between the two CPUs, measured before the run.
    pub tsc_skew: SkewBound,
    /// Whether `one_way` can be trusted (the skew bound is at most a tenth of its median).
    pub one_way_valid: bool,
    /// What a summary should show as one-way.
    pub one_way_basis: OneWayBasis,
}

/// What a whole pingpong run produced.
pub struct PingpongRun {
    pub entries: Vec<PingpongEntry>,
    /// Every mechanism's run, without values, in order.
    pub outcomes: Vec<RunOutcome<()>>,
}

/// Errors that end a pingpong run.
#[derive(Debug, thiserror::Error)]
pub enum PingpongError {
    /// The mechanism's objects could not be made (a limit on message queues, say).
    #[error("cannot set up the {mechanism} mechanism: {source}")]
    Open {
        mechanism: Mechanism,
        source: io::Error,
    },
    #[error(transparent)]
    Run(#[from] RunError),
}

/// Runs every configured mechanism in turn between `cfg.cpu_a` and `cfg.cpu_b`, each for
/// `plan.duration` after the warm-up; a stop request ends the current mechanism and
/// skips the rest.
pub fn run(
    cfg: &PingpongConfig,
    plan: &RunPlan,
    clock: &ClockInfo,
    skew: SkewBound,
    stop: &AtomicBool,
) -> Result<PingpongRun, PingpongError> {
    let threads = [
        ThreadSpec {
            cpu: cfg.cpu_a,
            sched: plan.sched,
        },
        ThreadSpec {
            cpu: cfg.cpu_b,
            sched: plan.sched,
        },
    ];
    let mut entries = Vec::new();
    let mut outcomes = Vec::new();
    for &mech in &cfg.mechanisms {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let channel = Channel::open(mech).map_err(|source| PingpongError::Open {
            mechanism: mech,
            source,
        })?;
        let shared = Shared::new(&channel);
        let mut per = plan.clone();
        per.duration = plan.duration + cfg.warmup;
        let outcome = run::run_threads(
            &per,
            &threads,
            clock.scale,
            stop,
            |w| side(w, cfg, &shared),
            None,
        )?;
        entries.push(to_entry(cfg, mech, plan, clock.scale, skew, &outcome));
        outcomes.push(outcome.without_values());
    }
    Ok(PingpongRun { entries, outcomes })
}

/// A direction: 0 is A→B, 1 is B→A.
type Dir = usize;
const AB: Dir = 0;
const BA: Dir = 1;

/// Per direction: the stamp (the message's payload) and a word, each on a line of its
/// own, so that a spinning receiver waits for one transfer and nothing else shares it.
#[derive(Default)]
struct Lane {
    stamp: CachePadded<AtomicU64>,
    /// The futex word, or a sequence for the spinning and mutex mechanisms.
    word: CachePadded<AtomicU32>,
    /// Mutex hand-off: the sender holds the mutex for this round.
    armed: CachePadded<AtomicU64>,
    /// Mutex hand-off: the receiver has let go of it after this round.
    released: CachePadded<AtomicU64>,
}

/// One mechanism's kernel or library objects.
enum Channel {
    Memory(Mechanism),
    Condvar([(ipc::PthreadMutex, ipc::PthreadCond); 2]),
    Sem([ipc::PosixSem; 2]),
    SysvSem(ipc::SysvSems),
    Mutex([ipc::PthreadMutex; 2]),
    /// (read end, write end) per direction.
    Fds(Mechanism, [(OwnedFd, OwnedFd); 2]),
    Mq([ipc::MessageQueue; 2]),
    Signal,
}

impl Channel {
    fn open(mech: Mechanism) -> io::Result<Channel> {
        Ok(match mech {
            Mechanism::Spin | Mechanism::SpinPause | Mechanism::Futex | Mechanism::Null => {
                Channel::Memory(mech)
            }
            Mechanism::Condvar => Channel::Condvar([
                (ipc::PthreadMutex::new()?, ipc::PthreadCond::new()?),
                (ipc::PthreadMutex::new()?, ipc::PthreadCond::new()?),
            ]),
            Mechanism::Sem => Channel::Sem([ipc::PosixSem::new()?, ipc::PosixSem::new()?]),
            Mechanism::SysvSem => Channel::SysvSem(ipc::SysvSems::new(2)?),
            Mechanism::Mutex => {
                Channel::Mutex([ipc::PthreadMutex::new()?, ipc::PthreadMutex::new()?])
            }
            Mechanism::Pipe => Channel::Fds(mech, [rustix::pipe::pipe()?, rustix::pipe::pipe()?]),
            Mechanism::Eventfd => {
                let pair = || -> io::Result<(OwnedFd, OwnedFd)> {
                    let fd = rustix::event::eventfd(0, rustix::event::EventfdFlags::CLOEXEC)?;
                    Ok((fd.try_clone()?, fd))
                };
                Channel::Fds(mech, [pair()?, pair()?])
            }
            Mechanism::Unix => {
                use rustix::net::{AddressFamily, SocketFlags, SocketType, socketpair};
                let (a, b) = socketpair(
                    AddressFamily::UNIX,
                    SocketType::STREAM,
                    SocketFlags::CLOEXEC,
                    None,
                )?;
                // A writes on a, B reads on b; B answers on b, A reads on a.
                Channel::Fds(mech, [(b.try_clone()?, a.try_clone()?), (a, b)])
            }
            Mechanism::Mq => {
                Channel::Mq([ipc::MessageQueue::new("ab")?, ipc::MessageQueue::new("ba")?])
            }
            Mechanism::Signal => Channel::Signal,
        })
    }

    fn mechanism(&self) -> Mechanism {
        match self {
            Channel::Memory(m) | Channel::Fds(m, _) => *m,
            Channel::Condvar(_) => Mechanism::Condvar,
            Channel::Sem(_) => Mechanism::Sem,
            Channel::SysvSem(_) => Mechanism::SysvSem,
            Channel::Mutex(_) => Mechanism::Mutex,
            Channel::Mq(_) => Mechanism::Mq,
            Channel::Signal => Mechanism::Signal,
        }
    }
}

/// What both threads of one mechanism's run share.
struct Shared<'c> {
    channel: &'c Channel,
    lanes: [Lane; 2],
    /// The spinning mechanisms' question (AB) and answer (BA), two words on one cache
    /// line: a round trip moves that one line there and back, as a bare ping-pong does.
    /// One line per direction costs a second line's transfers, 70-80 ns more per round
    /// trip on these VMs (bench/pingpong_floor.sh), which is the layout's, not the CPUs'.
    spin_line: CachePadded<[AtomicU64; 2]>,
    /// Each thread's id, for signals.
    thread: [CachePadded<AtomicU64>; 2],
    /// Set by each thread as it leaves, so that its peer stops waiting for it.
    gone: [CachePadded<AtomicBool>; 2],
}

impl<'c> Shared<'c> {
    fn new(channel: &'c Channel) -> Shared<'c> {
        Shared {
            channel,
            lanes: Default::default(),
            spin_line: Default::default(),
            thread: Default::default(),
            gone: Default::default(),
        }
    }
}

/// When a waiting thread should give up: its run was stopped, its peer left, or the
/// deadline passed.
struct Leave<'a> {
    stop: &'a AtomicBool,
    peer_gone: &'a AtomicBool,
    deadline: u64,
}

impl Leave<'_> {
    #[inline]
    fn now(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
            || self.peer_gone.load(Ordering::Acquire)
            || clock::now() > self.deadline
    }
}

impl Shared<'_> {
    /// Untimed set-up before sending message `k` in `dir` (mutex hand-off: take the
    /// mutex back once the receiver has let go of it).
    fn prepare_send(&self, dir: Dir, k: u64, leave: &Leave<'_>) -> Option<()> {
        if let Channel::Mutex(m) = self.channel {
            let lane = &self.lanes[dir];
            wait_until(|| lane.released.load(Ordering::Acquire) + 1 >= k, leave)?;
            m[dir].lock().ok()?;
            lane.armed.store(k, Ordering::Release);
        }
        Some(())
    }

    /// Untimed set-up before waiting for message `k` in `dir` (mutex hand-off: the sender
    /// must hold the mutex before the receiver blocks on it).
    fn prepare_receive(&self, dir: Dir, k: u64, leave: &Leave<'_>) -> Option<()> {
        if let Channel::Mutex(_) = self.channel {
            let lane = &self.lanes[dir];
            wait_until(|| lane.armed.load(Ordering::Acquire) >= k, leave)?;
        }
        Some(())
    }

    /// Sends `stamp` in `dir`.
    #[inline]
    fn send(&self, dir: Dir, stamp: u64) -> io::Result<()> {
        let lane = &self.lanes[dir];
        match self.channel {
            Channel::Memory(Mechanism::Futex) => {
                lane.stamp.store(stamp, Ordering::Relaxed);
                lane.word.store(1, Ordering::Release);
                rustix::thread::futex::wake(&lane.word, rustix::thread::futex::Flags::PRIVATE, 1)?;
            }
            Channel::Memory(_) => {
                // The stamp is the message: the receiver waits for it to change.
                lane.stamp.store(stamp, Ordering::Release);
            }
            Channel::Condvar(pairs) => {
                let (m, c) = &pairs[dir];
                m.lock()?;
                lane.stamp.store(stamp, Ordering::Relaxed);
                lane.word.store(1, Ordering::Relaxed);
                let signalled = c.signal();
                m.unlock()?;
                signalled?;
            }
            Channel::Sem(sems) => {
                lane.stamp.store(stamp, Ordering::Relaxed);
                sems[dir].post()?;
            }
            Channel::SysvSem(set) => {
                lane.stamp.store(stamp, Ordering::Relaxed);
                set.post(dir)?;
            }
            Channel::Mutex(m) => {
                lane.stamp.store(stamp, Ordering::Relaxed);
                m[dir].unlock()?;
            }
            Channel::Fds(_, fds) => write_stamp(&fds[dir].1, stamp)?,
            Channel::Mq(qs) => qs[dir].send(stamp)?,
            Channel::Signal => {
                lane.stamp.store(stamp, Ordering::Release);
                let to = self.thread[1 - dir].load(Ordering::Relaxed);
                ipc::signal_thread(to)?;
            }
        }
        Ok(())
    }

    /// Waits for the next message in `dir` and returns its stamp; `None` when the wait
    /// was abandoned (see `Leave`) or the peer said goodbye. `last` is the previous
    /// stamp seen in `dir` (the spinning mechanisms wait for a change).
    #[inline]
    fn receive(&self, dir: Dir, last: u64, leave: &Leave<'_>) -> Option<u64> {
        let lane = &self.lanes[dir];
        let stamp = match self.channel {
            Channel::Memory(Mechanism::Spin) => spin_for_change(&lane.stamp, last, leave, false)?,
            Channel::Memory(Mechanism::SpinPause) => {
                spin_for_change(&lane.stamp, last, leave, true)?
            }
            Channel::Memory(_) => loop {
                if lane.word.swap(0, Ordering::Acquire) == 1 {
                    break lane.stamp.load(Ordering::Relaxed);
                }
                if leave.now() {
                    return None;
                }
                let flags = rustix::thread::futex::Flags::PRIVATE;
                let _ = rustix::thread::futex::wait(&lane.word, flags, 0, None);
            },
            Channel::Condvar(pairs) => {
                let (m, c) = &pairs[dir];
                m.lock().ok()?;
                let got = loop {
                    if lane.word.swap(0, Ordering::Relaxed) == 1 {
                        break Some(lane.stamp.load(Ordering::Relaxed));
                    }
                    if leave.now() || c.wait(m).is_err() {
                        break None;
                    }
                };
                m.unlock().ok()?;
                got?
            }
            Channel::Sem(sems) => {
                wait_ready(|| sems[dir].wait(), leave)?;
                lane.stamp.load(Ordering::Relaxed)
            }
            Channel::SysvSem(set) => {
                wait_ready(|| set.wait(dir), leave)?;
                lane.stamp.load(Ordering::Relaxed)
            }
            Channel::Mutex(m) => {
                m[dir].lock().ok()?;
                let stamp = lane.stamp.load(Ordering::Relaxed);
                m[dir].unlock().ok()?;
                let round = lane.released.load(Ordering::Relaxed) + 1;
                lane.released.store(round, Ordering::Release);
                stamp
            }
            Channel::Fds(_, fds) => read_stamp(&fds[dir].0)?,
            Channel::Mq(qs) => loop {
                if let Some(s) = qs[dir].receive().ok()? {
                    break s;
                }
                if leave.now() {
                    return None;
                }
            },
            Channel::Signal => {
                wait_ready(ipc::wait_signal, leave)?;
                lane.stamp.load(Ordering::Acquire)
            }
        };
        (stamp != GOODBYE).then_some(stamp)
    }

    /// On leaving: tell the peer, and send it a last message, GOODBYE, in this side's
    /// direction. Every blocking wait is a plain, untimed one (a timed wait arms a timer,
    /// which on a VM costs exits that would be counted as the mechanism's), so this last
    /// message is what releases a peer waiting for this side.
    fn leave(&self, me: usize) {
        self.gone[me].store(true, Ordering::Release);
        let lane = &self.lanes[me];
        let goodbye = || lane.stamp.store(GOODBYE, Ordering::Release);
        match self.channel {
            // Spinners look at `gone` as they poll.
            Channel::Memory(Mechanism::Spin | Mechanism::SpinPause | Mechanism::Null) => {}
            // The mutex hand-off's receiver blocks only on a mutex its sender holds.
            Channel::Mutex(m) => {
                if m[me].is_held_here() {
                    goodbye();
                    let _ = m[me].unlock();
                }
            }
            // `send` puts the stamp in the slot or the message itself.
            _ => {
                let _ = self.send(me, GOODBYE);
            }
        }
    }
}

/// Spins until `slot` differs from `last`.
#[inline(always)]
fn spin_for_change(slot: &AtomicU64, last: u64, leave: &Leave<'_>, pause: bool) -> Option<u64> {
    let mut polls: u32 = 0;
    loop {
        let v = slot.load(Ordering::Acquire);
        if v != last {
            return Some(v);
        }
        if pause {
            std::hint::spin_loop();
        }
        polls = polls.wrapping_add(1);
        if polls.is_multiple_of(DEADLINE_POLLS) && leave.now() {
            return None;
        }
    }
}

/// Repeats a bounded wait until it is ready or it is time to leave.
fn wait_ready(mut wait: impl FnMut() -> io::Result<WaitResult>, leave: &Leave<'_>) -> Option<()> {
    loop {
        match wait() {
            Ok(WaitResult::Ready) => return Some(()),
            Ok(WaitResult::TimedOut) if !leave.now() => {}
            _ => return None,
        }
    }
}

/// Waits, yielding the CPU, until `cond` holds or it is time to leave (untimed set-up
/// only: a peer on the same CPU must get to run).
fn wait_until(cond: impl Fn() -> bool, leave: &Leave<'_>) -> Option<()> {
    while !cond() {
        if leave.now() {
            return None;
        }
        std::thread::yield_now();
    }
    Some(())
}

fn write_stamp(fd: &OwnedFd, stamp: u64) -> io::Result<()> {
    let bytes = stamp.to_ne_bytes();
    match rustix::io::write(fd, &bytes)? {
        8 => Ok(()),
        n => Err(io::Error::other(format!("short write of {n} bytes"))),
    }
}

/// Reads one 8-byte stamp. Blocks in `read` (the peer's goodbye releases it).
fn read_stamp(fd: &OwnedFd) -> Option<u64> {
    let mut bytes = [0u8; 8];
    let mut got = 0;
    while got < 8 {
        match rustix::io::read(fd, &mut bytes[got..]) {
            Ok(0) => return None,
            Ok(n) => got += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(_) => return None,
        }
    }
    Some(u64::from_ne_bytes(bytes))
}

/// What one thread hands back. A records every figure, so that the counts agree
/// whenever a run ends: B's answer carries when it received the question.
struct SideResult {
    rtt: LatencyHistogram,
    a_to_b: LatencyHistogram,
    b_to_a: LatencyHistogram,
    negative: u64,
    rounds: u64,
    first_ticks: u64,
    last_ticks: u64,
    counters: ThreadCounters,
}

impl SideResult {
    fn new() -> SideResult {
        SideResult {
            rtt: LatencyHistogram::new(),
            a_to_b: LatencyHistogram::new(),
            b_to_a: LatencyHistogram::new(),
            negative: 0,
            rounds: 0,
            first_ticks: 0,
            last_ticks: 0,
            counters: ThreadCounters::default(),
        }
    }

    /// Records one measured round: sent at `t0`, received by B at `t1`, answered at `t2`,
    /// answer received at `t3`.
    #[inline]
    fn round(&mut self, scale: Scale, t: [u64; 4]) {
        if self.rounds == 0 {
            self.first_ticks = t[0];
        }
        self.rtt.record(scale.to_ns(t[3].saturating_sub(t[0])));
        for (h, (from, to)) in [
            (&mut self.a_to_b, (t[0], t[1])),
            (&mut self.b_to_a, (t[2], t[3])),
        ] {
            match to.checked_sub(from) {
                Some(d) => h.record(scale.to_ns(d)),
                None => {
                    self.negative += 1;
                    h.record(0);
                }
            }
        }
        self.rounds += 1;
        self.last_ticks = t[3];
    }

    /// Touches the histograms' pages and the recording path before the start.
    fn prime(&mut self) {
        self.round(Scale::NS, [1, 2, 3, 4]);
        self.rtt.clear();
        self.a_to_b.clear();
        self.b_to_a.clear();
        self.rounds = 0;
    }
}

/// One thread's whole job: A (index 0) leads the rounds, B answers.
fn side(w: &Worker<'_>, cfg: &PingpongConfig, shared: &Shared<'_>) -> SideResult {
    /// Tells the peer this side has gone on every way out, a panic included: a peer
    /// blocked in `read` is released only by it.
    struct LeaveOnDrop<'s, 'c>(&'s Shared<'c>, usize);
    impl Drop for LeaveOnDrop<'_, '_> {
        fn drop(&mut self) {
            self.0.leave(self.1);
        }
    }
    let me = w.index;
    shared.thread[me].store(ipc::this_thread(), Ordering::Relaxed);
    let mut out = SideResult::new();
    if me == 0 {
        out.prime();
    }
    let before = ThreadCounters::read();
    let gone = LeaveOnDrop(shared, me);
    if let Some(window) = w.ready_and_sleep() {
        let leave = Leave {
            stop: w.stop_flag(),
            peer_gone: &shared.gone[1 - me],
            deadline: window.deadline,
        };
        let measure_from = window.start + w.scale.to_ticks(cfg.warmup.as_nanos() as u64);
        match (me, shared.channel.mechanism()) {
            (_, Mechanism::Null) if me == 1 => {}
            (_, Mechanism::Null) => null_rounds(w, cfg, &leave, measure_from, &mut out),
            (0, m) if m.spins() => lead_spin(w, cfg, shared, &leave, measure_from, &mut out),
            (_, m) if m.spins() => answer_spin(shared, &leave),
            (0, _) => lead(w, cfg, shared, &leave, measure_from, &mut out),
            _ => answer(shared, &leave),
        }
    }
    drop(gone);
    out.counters = ThreadCounters::read().since(&before);
    out
}

/// Whether A should start another round.
#[inline]
fn another_round(cfg: &PingpongConfig, out: &SideResult, leave: &Leave<'_>) -> bool {
    let counted = cfg.count.is_none_or(|n| out.rounds < n);
    counted && !leave.stop.load(Ordering::Relaxed) && clock::now() < leave.deadline
}

/// A's rounds: pause, stamp, send; wait for the answer, stamp, record.
fn lead(
    w: &Worker<'_>,
    cfg: &PingpongConfig,
    shared: &Shared<'_>,
    leave: &Leave<'_>,
    measure_from: u64,
    out: &mut SideResult,
) {
    let pause_ticks = w.scale.to_ticks(cfg.pause_ns);
    let rdtscp = clock::has_rdtscp();
    let mut last_answer = 0;
    let mut k = 0;
    while another_round(cfg, out, leave) {
        k += 1;
        if shared.prepare_send(AB, k, leave).is_none() {
            return;
        }
        clock::spin_for(pause_ticks);
        let t0 = clock::now_edge(rdtscp);
        if shared.send(AB, t0).is_err() || shared.prepare_receive(BA, k, leave).is_none() {
            return;
        }
        // B's answer carries its stamp on receipt: the end of A→B, the start of B→A.
        let Some(t1) = shared.receive(BA, last_answer, leave) else {
            return;
        };
        let t3 = clock::now_edge(rdtscp);
        last_answer = t1;
        if t0 >= measure_from {
            out.round(w.scale, [t0, t1, t1, t3]);
        }
    }
}

/// B's rounds: wait for A's stamp, stamp its arrival, answer at once with that stamp.
fn answer(shared: &Shared<'_>, leave: &Leave<'_>) {
    let rdtscp = clock::has_rdtscp();
    let mut last = 0;
    let mut k = 0;
    loop {
        k += 1;
        if shared.prepare_send(BA, k, leave).is_none()
            || shared.prepare_receive(AB, k, leave).is_none()
        {
            return;
        }
        let Some(sent) = shared.receive(AB, last, leave) else {
            return;
        };
        let t1 = clock::now_edge(rdtscp);
        last = sent;
        if shared.send(BA, t1).is_err() {
            return;
        }
    }
}

/// A's rounds for the spinning mechanisms: `lead` with the channel's dispatch taken out of
/// the timed section. `send` and `receive` serve every mechanism, so they stay out of
/// line, each behind a jump on the channel; between two stamps ~110 ns apart (a bare
/// one-line ping-pong here) those calls were a measurable share. Here the stamp's store
/// and the poll of the answer's line sit inline between the two counter reads.
fn lead_spin(
    w: &Worker<'_>,
    cfg: &PingpongConfig,
    shared: &Shared<'_>,
    leave: &Leave<'_>,
    measure_from: u64,
    out: &mut SideResult,
) {
    let pause = shared.channel.mechanism() == Mechanism::SpinPause;
    let pause_ticks = w.scale.to_ticks(cfg.pause_ns);
    let rdtscp = clock::has_rdtscp();
    let (question, answer) = (&shared.spin_line[AB], &shared.spin_line[BA]);
    // Both slots start at 0 (a fresh `Shared` per mechanism), as in `lead`.
    let mut last_answer = 0;
    while another_round(cfg, out, leave) {
        clock::spin_for(pause_ticks);
        let t0 = clock::now_edge(rdtscp);
        question.store(t0, Ordering::Release);
        let Some(t1) = spin_for_change(answer, last_answer, leave, pause) else {
            return;
        };
        let t3 = clock::now_edge(rdtscp);
        last_answer = t1;
        if t0 >= measure_from {
            out.round(w.scale, [t0, t1, t1, t3]);
        }
    }
}

/// B's rounds for the spinning mechanisms (see `lead_spin`): one counter read and one
/// store between seeing the question and answering it.
fn answer_spin(shared: &Shared<'_>, leave: &Leave<'_>) {
    let pause = shared.channel.mechanism() == Mechanism::SpinPause;
    let rdtscp = clock::has_rdtscp();
    let (question, answer) = (&shared.spin_line[AB], &shared.spin_line[BA]);
    // Not a load of the slot: A may have asked already.
    let mut last = 0;
    while let Some(sent) = spin_for_change(question, last, leave, pause) {
        let t1 = clock::now_edge(rdtscp);
        answer.store(t1, Ordering::Release);
        last = sent;
    }
}

/// The null mechanism: two stamps with nothing between them, on A alone (both "one-way"
/// halves are the same pair of stamps).
fn null_rounds(
    w: &Worker<'_>,
    cfg: &PingpongConfig,
    leave: &Leave<'_>,
    measure_from: u64,
    out: &mut SideResult,
) {
    let pause_ticks = w.scale.to_ticks(cfg.pause_ns);
    let rdtscp = clock::has_rdtscp();
    while another_round(cfg, out, leave) {
        clock::spin_for(pause_ticks);
        let t0 = clock::now_edge(rdtscp);
        let t1 = clock::now_edge(rdtscp);
        if t0 >= measure_from {
            out.round(w.scale, [t0, t1, t0, t1]);
        }
    }
}

fn to_entry(
    cfg: &PingpongConfig,
    mech: Mechanism,
    plan: &RunPlan,
    scale: Scale,
    skew: SkewBound,
    outcome: &RunOutcome<SideResult>,
) -> PingpongEntry {
    let a = &outcome.workers[0];
    let b = &outcome.workers[1];
    let mut one_way = a.value.a_to_b.clone();
    one_way.add(&a.value.b_to_a);
    let median = one_way.summary().p50_ns.unwrap_or(0);
    // Null stamps twice on one thread: one counter, nothing to agree on.
    let one_counter = mech == Mechanism::Null;
    let valid = one_way.count() > 0 && (one_counter || skew.supports(median));
    PingpongEntry {
        mechanism: mech,
        cpu_a: cfg.cpu_a,
        cpu_b: cfg.cpu_b,
        config: PingpongConfigRecord {
            pause_ns: cfg.pause_ns,
            warmup_ns: cfg.warmup.as_nanos() as u64,
            count: cfg.count,
            duration_ns: plan.duration.as_nanos() as u64,
            policy: plan.sched.policy,
            priority: plan.sched.priority,
        },
        thread_a: ThreadRecord::from_worker(a, &a.value.counters),
        thread_b: ThreadRecord::from_worker(b, &b.value.counters),
        round_trips: a.value.rounds,
        runtime_ns: scale.to_ns(a.value.last_ticks.saturating_sub(a.value.first_ticks)),
        rtt: Distribution::of(&a.value.rtt),
        one_way: Distribution::of(&one_way),
        one_way_a_to_b: a.value.a_to_b.summary(),
        one_way_b_to_a: a.value.b_to_a.summary(),
        one_way_negative: a.value.negative,
        tsc_skew: skew,
        one_way_valid: valid,
        one_way_basis: match valid {
            true => OneWayBasis::Tsc,
            false => OneWayBasis::RttHalf,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mechanism_lists_parse_strictly() {
        assert_eq!(Mechanism::parse_list("all").unwrap().len(), 13);
        assert_eq!(
            Mechanism::parse_list("spin,futex").unwrap(),
            vec![Mechanism::Spin, Mechanism::Futex]
        );
        let e = Mechanism::parse_list("spin,pigeon").unwrap_err();
        assert!(e.contains("'pigeon'") && e.contains("sysv-sem"), "{e}");
        assert!(Mechanism::parse_list("spin,spin").is_err());
        assert!(Mechanism::parse_list("").is_err());
        for m in Mechanism::ALL {
            assert_eq!(Mechanism::parse_list(m.name()).unwrap(), vec![m]);
        }
    }
}
