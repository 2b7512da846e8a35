//! A kernel tracer's run, for the engines that use one (`noise --engine osnoise`,
//! `noise --hwlat`): its output read on a housekeeping CPU into a tally while it runs,
//! until the tally has what was asked for, the time is up, or the user stops it; then
//! the tracer is stopped and every setting it touched put back, and what did not read
//! back is said.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::trace::tracer::instance::{Stopped, TracerInstance};

use super::pipeline::Ctx;

/// What a tracer's run gave.
pub struct TracerRun<T> {
    pub tally: T,
    pub elapsed: Duration,
    pub interrupted: bool,
    /// Events the kernel lost, per traced CPU.
    pub lost: Vec<(usize, u64)>,
}

/// Runs `inst` until `done(tally, elapsed)` or the stop flag, feeding each output line
/// to `feed`; stops it and says in `ctx` what did not read back.
pub fn run<T: Send + 'static>(
    ctx: &mut Ctx<'_>,
    mut inst: TracerInstance,
    tally: T,
    feed: fn(&mut T, &str),
    done: impl Fn(&T, Duration) -> bool,
) -> TracerRun<T> {
    for name in &inst.removed_stale {
        ctx.note(super::tracing::stale_removed(name));
    }
    if let Some(words) = inst.reverted_stale.take() {
        ctx.note(words);
    }
    let shared = Arc::new(Mutex::new(tally));
    let into = shared.clone();
    // Off the traced CPUs: reading there would be noise in what is measured.
    let reader_cpu = ctx.cpus.housekeeping.first();
    let reading = inst.read_lines(reader_cpu, move |l| {
        feed(&mut into.lock().unwrap_or_else(|e| e.into_inner()), l)
    });
    if !reading {
        ctx.note(format!(
            "{}: the tracer's output could not be opened; its figures are empty",
            inst.trace_pipe().display()
        ));
    }
    let start = Instant::now();
    let interrupted = loop {
        if ctx.stop.load(Ordering::Relaxed) {
            break true;
        }
        let t = shared.lock().unwrap_or_else(|e| e.into_inner());
        if done(&t, start.elapsed()) {
            break false;
        }
        drop(t);
        std::thread::sleep(Duration::from_millis(20));
    };
    let elapsed = start.elapsed();
    let lost = (inst.cpus.cpus().iter())
        .map(|&c| (c, inst.lost(c)))
        .collect();
    let tracer = inst.tracer.clone();
    let stopped = inst.stop();
    say_restore(ctx, &tracer, &stopped);
    let tally = match Arc::try_unwrap(shared) {
        Ok(m) => m.into_inner().unwrap_or_else(|e| e.into_inner()),
        Err(_) => unreachable!("the reader has ended: it held the only other handle"),
    };
    TracerRun {
        tally,
        elapsed,
        interrupted,
        lost,
    }
}

/// A note for each setting that did not read back as it was.
fn say_restore(ctx: &mut Ctx<'_>, tracer: &str, s: &Stopped) {
    if s.restored {
        return;
    }
    let bad: Vec<String> = (s.readbacks.iter())
        .filter(|r| !r.ok)
        .map(|r| format!("{} should read {} and reads {}", r.path, r.expected, r.now))
        .collect();
    ctx.note(format!(
        "{tracer}: not every tracefs setting read back as it was ({}): `jitterscope tune \
         --restore` retries",
        match bad.is_empty() {
            true => "its instance is still there".to_string(),
            false => bad.join("; "),
        }
    ));
}

/// A global tracer file's value, trimmed; `None` when unreadable.
pub fn read_global(file: &str) -> Option<String> {
    let root = crate::trace::tracefs_root()?;
    let text = crate::system::tune::apply::read_text(&root.join(file)).ok()?;
    Some(crate::system::tune::normalize(&text))
}
