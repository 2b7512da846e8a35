//! `watch`: attribution pointed at someone else's threads. Pure: the decoded events of
//! every traced CPU in, per-thread figures out, no I/O, so it is tested on made-up lists.
//!
//! The events of all CPUs are walked as one stream in time order (a thread migrates),
//! following each watched thread through four states: asleep, woken (a `sched_wakeup`
//! or `sched_wakeup_new` of it: runnable, waiting for a CPU), running (a `sched_switch`
//! to it), and preempted (switched out while still runnable). From them come, per
//! thread: the wake-up delay (run-queue latency: from its wake-up to the switch that
//! runs it), the time runnable but preempted, the time interrupt contexts took while it
//! ran, its runs, migrations (a run on another CPU than the last) and involuntary
//! switches.
//!
//! Each wake-up delay above the threshold is then a "gap" on the CPU that ran the
//! thread, attributed as a timer's late wake-ups are (`trace::attribute`, with nothing
//! known to run at the gap's start): what ran on that CPU instead, net, summed over all
//! of the thread's delays, and the worst few as timelines. So is each stretch preempted
//! while runnable, from its switch out to its switch in on the same CPU: a throttle
//! (its group's CFS quota, RT throttling) shows only there, as the thread switched out
//! runnable, and attribution names it from the settings in `Settings::throttle`.
//!
//! Some kernels record no `sched_switch` out of idle (6.18 in a KVM guest: none is ever
//! seen): a thread woken for an idle CPU starts running with no event saying so. Then
//! the first event on that CPU after its wake-up (the exit of the interrupt that woke
//! it, the IPI that told the CPU) is taken as its start, and counted as guessed; a
//! switch to it that comes later on that CPU, before it stops, corrects the guess. A
//! thread that stops before any such event had its start unseen: its delay is not
//! recorded, only counted.
//!
//! In parts, each using only those before it: `figures` what is watched, the settings
//! and each thread's figures; `walk` the state of each thread and CPU as the merged
//! stream goes by; `watcher` the streaming `Watcher` that feeds the walk window by
//! window, keeps each CPU's tail of events and attributes the delays. This file holds
//! the one-shot `watch` and `wakeup_delays` and re-exports what callers use.

use std::collections::{BTreeMap, HashMap};

use crate::engine::clock::Scale;

use super::attribute::Gap;
use super::event::{Event, Names};

mod figures;
mod walk;
mod watcher;

pub use super::event::still_runnable;
pub use figures::{PRIO_CHANGES_KEPT, SLEEP_STATES, Settings, ThreadFigures, Watched};
use walk::Walk;
use watcher::Merge;
pub use watcher::{TAIL_CAP, Watcher};

/// Every wake-up delay of each watched thread, by thread id: (the CPU that ran it,
/// [wake-up, start) in ticks, ns), in time order. For checking a run against ground
/// truth delay by delay; `watch` gives the figures.
pub fn wakeup_delays(
    per_cpu: &BTreeMap<usize, Vec<Event>>,
    names: &Names,
    watched: &Watched,
    scale: Scale,
) -> BTreeMap<u32, Vec<(usize, Gap, u64)>> {
    let mut w = Walk::new(watched.clone(), scale, 0);
    w.split_preempted = false;
    let per_cpu = slices(per_cpu);
    let mut merged = Merge::new(&per_cpu);
    while let Some((cpu, run)) = merged.next_run(usize::MAX) {
        for e in run {
            w.step(names, cpu, e);
        }
    }
    w.finish();
    let mut out: BTreeMap<u32, Vec<(usize, Gap, u64)>> = BTreeMap::new();
    for (tid, cpu, gap, ns) in w.ended {
        out.entry(tid).or_default().push((cpu, gap, ns));
    }
    out
}

/// Each watched thread's figures, from every traced CPU's events (each CPU's in time
/// order), by thread id: a `Watcher` fed them all at once.
pub fn watch(
    per_cpu: &BTreeMap<usize, Vec<Event>>,
    names: &Names,
    watched: &Watched,
    s: &Settings,
    symbols: &HashMap<u64, String>,
) -> Vec<ThreadFigures> {
    let mut w = Watcher::new(watched.clone(), s.clone());
    w.feed(&slices(per_cpu), u64::MAX, names, symbols);
    w.finish(names, symbols)
}

/// Each CPU's events as `Watcher::feed` takes them.
pub fn slices(per_cpu: &BTreeMap<usize, Vec<Event>>) -> Vec<(usize, &[Event])> {
    (per_cpu.iter())
        .map(|(&cpu, evs)| (cpu, evs.as_slice()))
        .collect()
}

/// A task's name as the kernel keeps it: at most 15 bytes.
pub const COMM_MAX: usize = 15;

/// The comm a name would have, or why none can.
pub fn comm_of(name: &str) -> Result<String, String> {
    match name.len() {
        0 => Err("an empty name matches no task".into()),
        n if n > COMM_MAX => Err(format!(
            "'{name}' is {n} bytes; the kernel keeps task names to {COMM_MAX}: give '{}'",
            name.get(..COMM_MAX).unwrap_or(name)
        )),
        _ => Ok(name.to_string()),
    }
}

#[cfg(test)]
mod tests;
