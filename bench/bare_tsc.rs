//! The reference for the noise loop's resolution: a bare back-to-back TSC read loop, pinned
//! to one CPU, measured two ways. `stored` keeps every step in a preallocated array (one
//! store per iteration) and gives the distribution; `counted` keeps nothing and gives the
//! mean step. bench/resolution.sh compares both with `jitterscope noise` in the same run.
//!
//! Usage: cargo bench --bench bare_tsc -- [CPU] [SECONDS] [fifo]

use std::time::Duration;

use jitterscope::engine::clock::{self, ClockInfo};
use jitterscope::engine::sched::{self, Policy, SchedRequest};

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let cpu: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(1);
    let secs: f64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(2.0);
    let fifo = args.iter().any(|a| a == "fifo");
    let (clock, _) = ClockInfo::detect();
    let tick_ns = 1e9 / clock.frequency_hz;

    std::thread::spawn(move || {
        if fifo {
            sched::set_policy(SchedRequest { policy: Policy::Fifo, priority: 1 }).expect("SCHED_FIFO");
        }
        sched::pin_to(cpu).expect("pin");
        let ticks = clock.scale.to_ticks(Duration::from_secs_f64(secs).as_nanos() as u64);

        // Stored: every step, for the median.
        let n = 50_000_000usize;
        let mut steps = vec![0u32; n];
        let mut prev = clock::now();
        let mut i = 0;
        while i < n {
            let t = clock::now();
            steps[i] = t.wrapping_sub(prev).min(u32::MAX as u64) as u32;
            prev = t;
            i += 1;
        }
        steps.sort_unstable();
        let median = steps[n / 2] as f64 * tick_ns;
        let min = steps[0] as f64 * tick_ns;

        // Counted: nothing but the read and the deadline check.
        let start = clock::now();
        let end = start + ticks;
        let mut iterations = 0u64;
        let mut t = start;
        while t < end {
            t = clock::now();
            iterations += 1;
        }
        let mean = (t - start) as f64 * tick_ns / iterations as f64;
        println!("bare_rdtsc cpu={cpu} policy={} stored_min_ns={min:.2} stored_median_ns={median:.2} counted_mean_ns={mean:.2}",
            if fifo { "fifo" } else { "other" });
    })
    .join()
    .unwrap();
}
