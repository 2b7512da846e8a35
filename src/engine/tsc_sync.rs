//! Do two CPUs' counters agree? A bound on their offset, measured by message passing.
//!
//! A one-way latency stamped on one CPU and read on another is only as good as the
//! agreement of the two counters. Thread A reads its counter (`a1`) and signals B over a
//! cache line; B reads its counter (`b`) on seeing it and answers; A reads its counter
//! again (`a2`) on seeing the answer. Causality puts B's read between A's two reads, so
//! the offset δ = TSC_B − TSC_A satisfies `b − a2 ≤ δ ≤ b − a1`. Over many rounds the
//! tightest bounds are kept: the interval's width is about one round trip, so a bound is
//! never smaller than the pair's cache-line latency. If the interval holds 0, the
//! counters agree within its larger end; if not, they provably disagree.
//!
//! Both threads spin at the caller's policy for a few ms at most (bounded by a deadline),
//! then return.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use crossbeam_utils::CachePadded;
use serde::{Deserialize, Serialize};

use super::clock::{self, Scale};
use super::sched;

/// Rounds by default: a few ms even across sockets.
pub const DEFAULT_ROUNDS: u32 = 5_000;
/// A pair that cannot finish in this long (a starved thread) reports what it has.
const TIME_LIMIT: Duration = Duration::from_millis(500);

/// What the check found for one pair of CPUs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SkewBound {
    pub cpu_a: usize,
    pub cpu_b: usize,
    /// Rounds completed.
    pub rounds: u32,
    /// The offset TSC_b − TSC_a lies in [offset_lo_ns, offset_hi_ns].
    pub offset_lo_ns: i64,
    pub offset_hi_ns: i64,
    /// The interval holds 0: the counters may agree.
    pub consistent: bool,
    /// When consistent, |offset| ≤ this; otherwise the counters differ by at least this.
    pub bound_ns: u64,
}

impl SkewBound {
    /// One CPU agrees with itself exactly.
    pub fn same_cpu(cpu: usize) -> SkewBound {
        SkewBound {
            cpu_a: cpu,
            cpu_b: cpu,
            rounds: 0,
            offset_lo_ns: 0,
            offset_hi_ns: 0,
            consistent: true,
            bound_ns: 0,
        }
    }

    /// No usable measurement (a thread could not be pinned, or no round finished): the
    /// counters cannot be shown to agree.
    pub fn unknown(a: usize, b: usize) -> SkewBound {
        SkewBound {
            cpu_a: a,
            cpu_b: b,
            rounds: 0,
            offset_lo_ns: 0,
            offset_hi_ns: 0,
            consistent: false,
            bound_ns: 0,
        }
    }

    /// Whether one-way figures whose median is `median_ns` can be trusted: the counters
    /// agree and their possible offset is at most a tenth of the figure.
    pub fn supports(&self, median_ns: u64) -> bool {
        self.consistent && self.rounds_or_same() && self.bound_ns.saturating_mul(10) <= median_ns
    }

    fn rounds_or_same(&self) -> bool {
        self.rounds > 0 || self.cpu_a == self.cpu_b
    }
}

#[derive(Default)]
struct Lines {
    ping: CachePadded<AtomicU64>,
    pong: CachePadded<Pong>,
}

/// B's answer: the round and B's counter reading, on one line, so that a round costs
/// two line transfers and no more (the bound is never narrower than a round trip).
#[derive(Default)]
struct Pong {
    seq: AtomicU64,
    at: AtomicU64,
}

/// Measures the offset between `a` and `b`'s counters over `rounds` rounds, each thread
/// pinned and at `req`. `None` when a thread could not be pinned or no round finished.
pub fn measure(
    a: usize,
    b: usize,
    rounds: u32,
    req: sched::SchedRequest,
    scale: Scale,
) -> Option<SkewBound> {
    if a == b {
        return Some(SkewBound::same_cpu(a));
    }
    let lines = Lines::default();
    let give_up = AtomicBool::new(false);
    let limit = clock::now() + scale.to_ticks(TIME_LIMIT.as_nanos() as u64);
    let (lo, hi, done) = std::thread::scope(|s| {
        let responder = s.spawn(|| {
            let _ = sched::set_policy(req);
            if sched::pin_to(b).is_err() {
                give_up.store(true, Ordering::Relaxed);
                return;
            }
            for k in 1..=rounds as u64 {
                loop {
                    if lines.ping.load(Ordering::Acquire) == k {
                        break;
                    }
                    if give_up.load(Ordering::Relaxed) || clock::now() > limit {
                        return;
                    }
                    std::hint::spin_loop();
                }
                lines.pong.at.store(clock::now_ordered(), Ordering::Relaxed);
                lines.pong.seq.store(k, Ordering::Release);
            }
        });
        let initiator = s.spawn(|| {
            let _ = sched::set_policy(req);
            let (mut lo, mut hi, mut done) = (i64::MIN, i64::MAX, 0u32);
            if sched::pin_to(a).is_err() {
                give_up.store(true, Ordering::Relaxed);
                return (lo, hi, done);
            }
            'rounds: for k in 1..=rounds as u64 {
                let a1 = clock::now_ordered();
                lines.ping.store(k, Ordering::Release);
                while lines.pong.seq.load(Ordering::Acquire) != k {
                    if give_up.load(Ordering::Relaxed) || clock::now() > limit {
                        break 'rounds;
                    }
                    std::hint::spin_loop();
                }
                let a2 = clock::now_ordered();
                let bt = lines.pong.at.load(Ordering::Relaxed);
                lo = lo.max(bt.wrapping_sub(a2) as i64);
                hi = hi.min(bt.wrapping_sub(a1) as i64);
                done += 1;
            }
            give_up.store(true, Ordering::Relaxed);
            (lo, hi, done)
        });
        let out = initiator.join().unwrap_or((0, 0, 0));
        let _ = responder.join();
        out
    });
    (done > 0).then(|| bound_from(a, b, done, lo, hi, scale))
}

/// The bound from the tightest tick interval [lo, hi].
fn bound_from(a: usize, b: usize, rounds: u32, lo: i64, hi: i64, scale: Scale) -> SkewBound {
    let ns = |t: i64| {
        let v = scale.to_ns(t.unsigned_abs()) as i64;
        if t < 0 { -v } else { v }
    };
    let (lo_ns, hi_ns) = (ns(lo), ns(hi));
    let consistent = lo_ns <= 0 && hi_ns >= 0;
    let bound_ns = match consistent {
        true => lo_ns.unsigned_abs().max(hi_ns.unsigned_abs()),
        // The interval misses 0: the offset is at least its nearer end.
        false => lo_ns.unsigned_abs().min(hi_ns.unsigned_abs()),
    };
    SkewBound {
        cpu_a: a,
        cpu_b: b,
        rounds,
        offset_lo_ns: lo_ns,
        offset_hi_ns: hi_ns,
        consistent,
        bound_ns,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_interval_around_zero_is_consistent() {
        let b = bound_from(0, 1, 10, -40, 70, Scale::NS);
        assert!(b.consistent);
        assert_eq!(b.bound_ns, 70);
        assert!(b.supports(700) && !b.supports(699));
        // A proven offset: the interval misses 0 by 300 ns at least.
        let b = bound_from(0, 1, 10, 300, 420, Scale::NS);
        assert!(!b.consistent);
        assert_eq!(b.bound_ns, 300);
        assert!(!b.supports(1_000_000));
        assert!(SkewBound::same_cpu(3).supports(0));
    }

    #[test]
    fn this_machines_cpus_agree_within_a_round_trip() {
        let u = crate::engine::cpu::CpuUniverse::detect().unwrap();
        let cpus = u.usable();
        if cpus.len() < 2 {
            eprintln!("SKIPPED this_machines_cpus_agree_within_a_round_trip: one CPU");
            return;
        }
        let (clock, _) = crate::engine::clock::ClockInfo::detect();
        let (a, b) = (cpus.cpus()[0], cpus.cpus()[1]);
        let s = measure(a, b, 2_000, sched::SchedRequest::OTHER, clock.scale).unwrap();
        assert!(s.rounds > 0);
        assert!(s.offset_lo_ns <= s.offset_hi_ns, "{s:?}");
        // An invariant TSC on one host: the interval holds 0 and is a round trip wide at
        // most (a few µs even in a busy VM).
        assert!(s.consistent, "{s:?}");
        assert!(s.bound_ns < 50_000, "{s:?}");
    }
}
