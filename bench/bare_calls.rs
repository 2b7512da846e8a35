//! The reference for `jitterscope syscalls`: the same calls in a bare loop, pinned to one
//! CPU, timed as a whole (no per-sample fences at all). Each call runs 20 repeats of
//! 100000 calls; the per-call figure is the median of the 20 repeats' means, which an
//! occasional interruption does not move. bench/syscalls.sh compares it with the
//! tool's medians, measured in the same run.
//!
//! Usage: cargo bench --bench bare_calls -- [CPU]

use std::hint::black_box;
use std::time::Instant;

use jitterscope::engine::{calls, sched};

const REPEATS: usize = 20;
const CALLS: u32 = 100_000;

fn per_call_ns(f: &mut dyn FnMut()) -> f64 {
    let mut means: Vec<f64> = (0..REPEATS)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..CALLS {
                f();
            }
            t.elapsed().as_nanos() as f64 / CALLS as f64
        })
        .collect();
    means.sort_by(f64::total_cmp);
    means[REPEATS / 2]
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let cpu: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(1);
    sched::pin_to(cpu).expect("pin");
    let rows: [(&str, &mut dyn FnMut()); 3] = [
        ("clock_gettime-monotonic", &mut || {
            black_box(calls::clock_gettime(libc::CLOCK_MONOTONIC));
        }),
        ("invalid-syscall", &mut || {
            black_box(calls::invalid_syscall());
        }),
        ("getppid", &mut || {
            black_box(calls::getppid());
        }),
    ];
    for (name, f) in rows {
        println!("{name} {:.2}", per_call_ns(f));
    }
}
