//! `noise --hwlat`: the kernel's hwlat tracer on the measured CPUs, alone, for the run's
//! duration: a check of the machine (SMIs, a hypervisor), not a measurement of the OS.
//!
//! It takes `hwlat_detector`'s default width and window (500 ms of every second with
//! interrupts off), moving round-robin across the CPUs, with noise's `-T` in whole µs
//! as its threshold (the tracer's own default, when none is set, is 10 µs).

use std::time::Duration;

use crate::trace::session::TraceError;
use crate::trace::tracer::hwlat::{HwlatConfig, HwlatEntry, Tally};
use crate::trace::tracer::instance::TracerInstance;

use super::kernel_tracer::{self, read_global};
use super::pipeline::Ctx;

const WIDTH_US: u64 = 500_000;
const WINDOW_US: u64 = 1_000_000;

/// What the check found.
pub struct HwlatRun {
    pub entries: Vec<HwlatEntry>,
    pub elapsed: Duration,
    pub interrupted: bool,
}

/// The global files, width before window or after as the kernel keeps width ≤ window.
fn globals(threshold_us: u64, old_window: Option<u64>) -> Vec<(&'static str, String)> {
    let (w, win) = (
        ("hwlat_detector/width", WIDTH_US.to_string()),
        ("hwlat_detector/window", WINDOW_US.to_string()),
    );
    let mut g = vec![("hwlat_detector/mode", "round-robin".to_string())];
    match old_window.is_some_and(|old| old < WIDTH_US) {
        true => g.extend([win, w]),
        false => g.extend([w, win]),
    }
    g.push(("tracing_thresh", threshold_us.to_string()));
    g
}

/// Runs hwlat for `duration` on the measured CPUs.
pub fn run(
    ctx: &mut Ctx<'_>,
    threshold_us: u64,
    duration: Duration,
) -> Result<HwlatRun, TraceError> {
    let cpus = ctx.cpus.measured.clone();
    let old_window = read_global("hwlat_detector/window").and_then(|v| v.parse().ok());
    let g = globals(threshold_us, old_window);
    let inst = TracerInstance::start("hwlat", &cpus, &g, &[])?;
    let config = HwlatConfig {
        width_us: WIDTH_US,
        window_us: WINDOW_US,
        threshold_us,
        mode: "round-robin".into(),
    };
    let done = move |_: &Tally, elapsed: Duration| elapsed >= duration;
    let r = kernel_tracer::run(ctx, inst, Tally::new(), |t, l| t.line(l), done);
    let runtime_ns = r.elapsed.as_nanos() as u64;
    Ok(HwlatRun {
        entries: r.tally.entries(cpus.cpus(), &config, runtime_ns),
        elapsed: r.elapsed,
        interrupted: r.interrupted,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn width_and_window_go_in_an_order_the_kernel_takes() {
        let names =
            |g: Vec<(&'static str, String)>| g.into_iter().map(|(f, _)| f).collect::<Vec<_>>();
        assert_eq!(
            names(globals(10, Some(1_000_000)))[1],
            "hwlat_detector/width"
        );
        assert_eq!(
            names(globals(10, Some(200_000)))[1],
            "hwlat_detector/window"
        );
    }
}
