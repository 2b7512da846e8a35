//! The floor for `jitterscope pingpong --mech spin`: two pinned threads bounce a counter
//! on one cache line, nothing else. A writes an odd value and waits for B to answer with
//! the next even one; B waits for an odd value and answers at once. A reads the counter
//! with RDTSCP before writing and after seeing the answer, so the round trip carries the
//! same two clock reads a timed round must have, and nothing more: no pause between
//! rounds, no fences, no stamps carried, no second line. Every round's ticks go to a
//! preallocated array; the median and the minimum are printed.
//!
//! Usage: cargo bench --bench bare_pingpong -- CPU_A CPU_B [SECONDS] [fifo]
//! Prints one line: `bare_pingpong cpu_a=.. cpu_b=.. policy=.. rounds=.. min_ns=..
//! median_ns=..` (bench/pingpong_floor.sh reads it).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use jitterscope::engine::clock::{self, ClockInfo};
use jitterscope::engine::sched::{self, Policy, SchedRequest};

/// The bounced counter, alone on its line (and on the adjacent-line prefetcher's pair).
#[repr(align(128))]
struct Line(AtomicU64);

/// Written by A in place of an odd value: B leaves.
const QUIT: u64 = u64::MAX;

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let cpu_a: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(0);
    let cpu_b: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(1);
    let secs: f64 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(1.0);
    let fifo = args.iter().any(|a| a == "fifo");
    let (clock, _) = ClockInfo::detect();
    let tick_ns = 1e9 / clock.frequency_hz;
    let setup = move |cpu: usize| {
        if fifo {
            sched::set_policy(SchedRequest {
                policy: Policy::Fifo,
                priority: 1,
            })
            .expect("SCHED_FIFO");
        }
        sched::pin_to(cpu).expect("pin");
    };

    let line: &'static Line = Box::leak(Box::new(Line(AtomicU64::new(0))));
    let b = std::thread::spawn(move || {
        setup(cpu_b);
        loop {
            let v = line.0.load(Ordering::Acquire);
            if v == QUIT {
                break;
            }
            if v & 1 == 1 {
                line.0.store(v + 1, Ordering::Release);
            }
        }
    });
    let a = std::thread::spawn(move || {
        setup(cpu_a);
        let max_rounds = 40_000_000usize;
        let mut rtt = vec![0u32; max_rounds];
        let deadline = clock::now()
            + clock
                .scale
                .to_ticks(Duration::from_secs_f64(secs).as_nanos() as u64);
        // A tenth of the rounds, first, are a warm-up and are not kept.
        let warmup = clock::now()
            + clock
                .scale
                .to_ticks(Duration::from_secs_f64(secs / 10.0).as_nanos() as u64);
        let mut k = 1u64;
        let mut n = 0usize;
        loop {
            let t0 = clock::now_rdtscp();
            line.0.store(k, Ordering::Release);
            while line.0.load(Ordering::Acquire) != k + 1 {}
            let t1 = clock::now_rdtscp();
            k += 2;
            if t0 >= warmup {
                rtt[n] = (t1 - t0).min(u32::MAX as u64) as u32;
                n += 1;
                if n == max_rounds || t1 >= deadline {
                    break;
                }
            }
        }
        line.0.store(QUIT, Ordering::Release);
        let kept = &mut rtt[..n];
        kept.sort_unstable();
        let q = |f: f64| kept[((n - 1) as f64 * f) as usize] as f64 * tick_ns;
        (
            n,
            q(0.0),
            q(0.5),
            [q(0.1), q(0.25), q(0.75), q(0.9), q(0.99)],
        )
    });
    let (n, min, median, [p10, p25, p75, p90, p99]) = a.join().unwrap();
    b.join().unwrap();
    println!(
        "bare_pingpong cpu_a={cpu_a} cpu_b={cpu_b} policy={} rounds={n} min_ns={min:.2} median_ns={median:.2} \
         p10_ns={p10:.2} p25_ns={p25:.2} p75_ns={p75:.2} p90_ns={p90:.2} p99_ns={p99:.2}",
        if fifo { "fifo" } else { "other" }
    );
}
