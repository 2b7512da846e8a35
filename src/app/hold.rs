//! `jitterscope hold` (hidden, a test aid): the injector `selftest` uses
//! (`engine::inject`), run on its own so that a container whose image holds only this
//! binary can be the known neighbour of a ground-truth test. It measures nothing; it
//! says how many holds it made and how many it ran through.

use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::bail;

use super::Ending;
use crate::cli::HoldArgs;
use crate::engine::clock::ClockInfo;
use crate::engine::inject::{Schedule, inject};

/// Holds `args.cpu` until -D passes or `stop`; one line on stdout when done.
pub fn run(args: &HoldArgs, stop: &AtomicBool) -> anyhow::Result<Ending> {
    if args.busy >= args.period {
        bail!(
            "--busy ({} µs) must be shorter than --period ({} µs)",
            args.busy / 1000,
            args.period / 1000
        );
    }
    let schedule = Schedule {
        cpu: args.cpu,
        priority: args.priority,
        period: Duration::from_nanos(args.period),
        busy: Duration::from_nanos(args.busy),
        run_for: args.duration,
        count: usize::MAX,
    };
    let clock = ClockInfo::detect().0;
    let holds = inject(schedule, &Barrier::new(1), stop, &clock)?;
    let ran = holds.iter().filter(|h| h.held(clock.scale)).count();
    println!(
        "hold: {} holds of {} µs every {} µs on CPU {} at SCHED_FIFO {}; {ran} ran through, \
         {} preempted mid-hold",
        holds.len(),
        args.busy / 1000,
        args.period / 1000,
        args.cpu,
        args.priority,
        holds.len() - ran
    );
    Ok(match stop.load(Ordering::Relaxed) {
        true => Ending::Interrupted,
        false => Ending::Completed,
    })
}
