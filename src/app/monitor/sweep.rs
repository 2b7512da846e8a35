//! Noise sweeps: every `every`, `noise`'s spinner for `length` on the CPUs the user named
//! (and only those), at SCHED_OTHER, so that the timer threads (real-time as root)
//! preempt it rather than the other way round. The timer's own wake-ups then show in the
//! sweep as interruptions of a few µs each: the sweep measures the CPU as it is, monitor
//! included. Runs on its own thread; its coordinator keeps to the housekeeping CPUs.
//!
//! Announced at start on stderr, and visible while it runs as
//! `jitterscope_noise_sweep_running{cpu} 1`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::engine::clock::ClockInfo;
use crate::engine::cpu::{CpuList, CpuPlan};
use crate::engine::run::RunPlan;
use crate::engine::sched::SchedRequest;
use crate::probes::noise::{self, NoiseConfig};

use super::metrics::{CpuLabels, Metrics};

/// A sweep schedule, checked.
#[derive(Debug, Clone)]
pub struct Sweeps {
    pub cpus: CpuList,
    pub every: Duration,
    pub length: Duration,
    pub cfg: NoiseConfig,
}

/// Runs sweeps until `stop`; each sweep's figures go into `metrics`.
pub fn run(
    s: &Sweeps,
    housekeeping: &CpuList,
    clock: &ClockInfo,
    metrics: &Arc<Metrics>,
    stop: &AtomicBool,
) {
    let plan = RunPlan {
        cpus: CpuPlan {
            measured: s.cpus.clone(),
            housekeeping: housekeeping.clone(),
        },
        sched: SchedRequest::OTHER,
        // The timer's run holds mlockall already; a sweep's munlockall would undo it.
        mlock: false,
        duration: s.length,
        priospread: false,
        setup_timeout: s.cfg.warmup + Duration::from_secs(10),
    };
    // Between sweeps too, this thread keeps off the measured CPUs.
    if !housekeeping.is_empty() {
        let _ = crate::engine::sched::set_affinity(housekeeping);
    }
    let mut next = Instant::now() + s.every;
    while !stop.load(Ordering::Relaxed) {
        if Instant::now() < next {
            std::thread::sleep(Duration::from_millis(100));
            continue;
        }
        next += s.every;
        let labels: Vec<CpuLabels> = (s.cpus.cpus().iter())
            .map(|c| CpuLabels { cpu: c.to_string() })
            .collect();
        for l in &labels {
            metrics.noise_running.get_or_create(l).set(1);
        }
        let out = noise::run(&s.cfg, &plan, clock, stop);
        for l in &labels {
            metrics.noise_running.get_or_create(l).set(0);
        }
        let Ok(out) = out else {
            continue;
        };
        for e in &out.entries {
            let l = CpuLabels {
                cpu: e.cpu.to_string(),
            };
            metrics.noise_sweeps.get_or_create(&l).inc();
            metrics
                .noise_interruptions
                .get_or_create(&l)
                .inc_by(e.interruptions);
            metrics
                .noise_lost
                .get_or_create(&l)
                .inc_by(e.interrupted_ns as f64 / 1e9);
            metrics
                .noise_sampled
                .get_or_create(&l)
                .inc_by(e.runtime_ns as f64 / 1e9);
            metrics
                .noise_max
                .get_or_create(&l)
                .set(e.summary.max_ns.unwrap_or(0) as f64 / 1e9);
        }
    }
}
