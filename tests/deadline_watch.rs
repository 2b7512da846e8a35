//! Whether a SCHED_DEADLINE loop was inside its runtime when a hold took its CPU, from the
//! kernel's own account: /proc/self/task/TID/sched prints a deadline task's `dl.runtime`,
//! above zero while it may run, at or below zero once throttled. Under tick enforcement a
//! loop that overran is throttled by the hold's own preemption, and reads as throttled.
//!
//! The watcher reads them from the housekeeping CPU while each hold lasts, at SCHED_FIFO:
//! a read costs about 10 µs, but a watcher at SCHED_OTHER beside a build waits for its CPU
//! for milliseconds, and a late read sees a loop replenished (or throttled) since. A look
//! counts only when its read ended before the hold did, so it saw the loop as the hold
//! left it. The injector wakes the watcher for each hold: a real-time spinner would starve
//! the housekeeping CPU's other work, and the kernel's fair server would then preempt it
//! for milliseconds to run that work.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::thread::Thread;
use std::time::Duration;

use jitterscope::engine::clock;
use jitterscope::engine::inject::Injection;
use jitterscope::engine::sched::{self, Policy, SchedRequest};

/// What the injector tells the watcher as each hold begins (`inject::inject_as`'s
/// `at_hold`).
#[derive(Default)]
pub struct HoldSignal {
    begun: AtomicUsize,
    injector: AtomicU32,
    watcher: OnceLock<Thread>,
}

impl HoldSignal {
    /// Called by the injector, on its thread, before each hold's recorded start.
    pub fn begin(&self) {
        let tid = rustix::thread::gettid().as_raw_nonzero().get() as u32;
        self.injector.store(tid, Ordering::Relaxed);
        self.begun.fetch_add(1, Ordering::Release);
        if let Some(w) = self.watcher.get() {
            w.unpark();
        }
    }
}

/// One look at the loop while a hold lasted.
#[derive(Debug, Clone, Copy)]
pub struct Look {
    /// The loop's `dl.runtime`, ns.
    runtime: i64,
    /// The loop's `dl.deadline` and the holder's, on the run queue's clock, ns.
    loop_deadline: i64,
    holder_deadline: i64,
    /// When the read of the loop's file ended, on the counter.
    read_end: u64,
}

impl Look {
    /// Whether the loop was inside its runtime when `h` began: it had runtime left. None
    /// when the read ended after the hold, and may have seen the loop run again. A
    /// replenishment in the few tens of µs between the holder's wake-up and the read
    /// makes a hold that began in a throttled stretch look inside; the test's bound
    /// allows for it.
    pub fn inside(&self, h: &Injection) -> Option<bool> {
        (self.read_end <= h.end).then_some(self.runtime > 0)
    }

    /// Whether `h`, from `before` ns ahead of its start to `after` ns past its end, holds
    /// one of the loop's period starts (its deadline less whole periods). The run queue's
    /// clock is put on CLOCK_MONOTONIC through the holder, whose deadline is set anew
    /// `holder_relative` ns after the timer that woke it (a few µs after its planned
    /// time, `late_ns` before its start).
    pub fn straddles(&self, h: &Injection, w: &Span) -> bool {
        let planned = (h.start_monotonic_ns - h.late_ns) as i64;
        let offset = self.holder_deadline - w.holder_relative as i64 - planned;
        let from = h.start_monotonic_ns as i64 - w.before as i64;
        let to = h.end_monotonic_ns as i64 + w.after as i64;
        let start = self.loop_deadline - offset;
        (start - from).rem_euclid(w.period as i64) <= to - from
    }
}

/// The span around a hold in which a period start of the loop makes it look like a
/// throttle that ended there, all in ns.
pub struct Span {
    pub period: u64,
    pub holder_relative: u64,
    pub before: u64,
    pub after: u64,
}

/// The watcher: one look per hold the injector begins, on `cpu`, until `stop`. A hold
/// begun while the last look lasted, or before the loop's thread was found, gets None.
pub fn follow(cpu: usize, signal: &HoldSignal, stop: &AtomicBool) -> Vec<Option<Look>> {
    sched::pin_to(cpu).expect("the watcher is on the housekeeping CPU");
    let fifo = SchedRequest {
        policy: Policy::Fifo,
        priority: 1,
    };
    sched::set_policy(fifo).expect("the watcher runs at SCHED_FIFO");
    let _ = signal.watcher.set(std::thread::current());
    let mut files: Option<(File, File)> = None;
    let (mut looks, mut looked) = (Vec::new(), 0);
    while !stop.load(Ordering::Relaxed) {
        let n = signal.begun.load(Ordering::Acquire);
        if n == looked {
            // Woken by the next hold; the timeout only notices `stop`.
            std::thread::park_timeout(Duration::from_millis(20));
            continue;
        }
        looks.extend((looked + 1..n).map(|_| None));
        let injector = signal.injector.load(Ordering::Relaxed);
        looks.push(match &files {
            Some((l, h)) => look(l, h),
            None => {
                files = open(injector);
                None
            }
        });
        looked = n;
    }
    looks
}

fn look(looped: &File, holder: &File) -> Option<Look> {
    let mut buf = [0u8; 4096];
    let n = looped.read_at(&mut buf, 0).ok()?;
    // Taken before the parsing, which is slow in a debug build.
    let read_end = clock::now_ordered();
    let fields = std::str::from_utf8(&buf[..n]).ok()?;
    Some(Look {
        runtime: field(fields, "dl.runtime")?,
        loop_deadline: field(fields, "dl.deadline")?,
        holder_deadline: field(&read(holder)?, "dl.deadline")?,
        read_end,
    })
}

/// The sched files of the loop (the deadline thread other than the injector, itself one)
/// and of the injector, kept open and read again from offset 0.
fn open(injector: u32) -> Option<(File, File)> {
    let sched = |tid: &str| File::open(format!("/proc/self/task/{tid}/sched")).ok();
    let tasks = std::fs::read_dir("/proc/self/task").ok()?;
    let injector = injector.to_string();
    let mut others = tasks
        .flatten()
        .filter(|t| t.file_name() != injector.as_str());
    let looped = others.find_map(|t| {
        let f = sched(t.file_name().to_str()?)?;
        (field(&read(&f)?, "policy") == Some(6)).then_some(f)
    })?;
    Some((looped, sched(&injector)?))
}

fn read(f: &File) -> Option<String> {
    let mut buf = [0u8; 4096];
    let n = f.read_at(&mut buf, 0).ok()?;
    String::from_utf8(buf[..n].to_vec()).ok()
}

/// A numeric field of a /proc sched file ("name   :   value").
fn field(text: &str, name: &str) -> Option<i64> {
    let line = text
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name))?;
    line.rsplit(':').next()?.trim().parse().ok()
}
