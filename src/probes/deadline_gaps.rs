//! The deadline's own gaps: a noise loop at SCHED_DEADLINE is throttled when its runtime
//! runs out and runs again at the next period's start, and that withheld time is the
//! policy doing its job, not noise.
//!
//! The loop knows its period but not the kernel's phase, so it learns it: the first gap
//! of at least half the withheld time (period − runtime) ends at a period start, and
//! period starts then follow every period on the counter. A gap that contains a period
//! start is the deadline's own up to it; what comes after (the loop woke late) is noise
//! when it passes `tolerance`, the wake-up the replenishment itself costs. A long gap
//! that ends just before a predicted start shows the estimate was late (it held a
//! wake-up's latency) and moves it earlier, so it converges on the earliest wake-up; a
//! short one there is noise and moves nothing. Three long gaps
//! in a row with no period start in them mean the phase was learned from noise, and the
//! last of them sets it again. Without HRTICK_DL the runtime is enforced at the tick, so
//! the loop runs past period starts; a noise gap that straddles one is then counted as
//! the deadline's own up to it (the header says the runtime is enforced at the tick).

use crate::engine::clock::Scale;
use crate::engine::deadline::Deadline;

/// The least tolerance for the wake-up after a replenishment.
const MIN_TOLERANCE_NS: u64 = 50_000;

/// Splits a deadline loop's gaps into the deadline's own and noise, counting the first.
#[derive(Debug, Clone)]
pub struct Throttle {
    period: u64,
    tolerance: u64,
    long: u64,
    /// A period start on the counter, once learned.
    anchor: Option<u64>,
    /// Long gaps in a row that held no period start.
    misses: u32,
    /// Gaps (or their first parts) that were the deadline's own, and their ticks.
    pub count: u64,
    pub ticks: u64,
}

impl Throttle {
    pub fn new(d: &Deadline, scale: Scale) -> Throttle {
        let tolerance = MIN_TOLERANCE_NS.max(d.period_ns / 20);
        Throttle {
            period: scale.to_ticks(d.period_ns).max(1),
            tolerance: scale.to_ticks(tolerance),
            long: scale.to_ticks((d.period_ns - d.runtime_ns) / 2).max(1),
            anchor: None,
            misses: 0,
            count: 0,
            ticks: 0,
        }
    }

    fn own(&mut self, ticks: u64) {
        self.count += 1;
        self.ticks += ticks;
    }

    /// The noise in a gap of `step` ticks from `at`, as (start, ticks); None when all of
    /// it was the deadline's own.
    pub fn split(&mut self, at: u64, step: u64) -> Option<(u64, u64)> {
        let end = at + step;
        let Some(anchor) = self.anchor.filter(|&a| a <= end + self.tolerance) else {
            if step >= self.long {
                self.anchor = Some(end);
                self.own(step);
                return None;
            }
            return Some((at, step));
        };
        // The latest period start at or before the end (and the tolerance after it).
        let start = anchor + (end + self.tolerance - anchor) / self.period * self.period;
        if start <= at {
            return match self.relearned(end, step) {
                true => None,
                false => Some((at, step)),
            };
        }
        if end <= start {
            // A gap shorter than a throttle (an interrupt, a hold inside the runtime)
            // that ends just before a period start does so by chance: it is noise, and
            // moving the phase to it would let such gaps walk the phase away, a few tens
            // of µs each, until whole holds were taken for throttling.
            if step < self.long {
                return Some((at, step));
            }
            self.misses = 0;
            self.anchor = Some(anchor - (start - end));
            self.own(step);
            return None;
        }
        match end - start {
            late if late <= self.tolerance => {
                self.misses = 0;
                self.own(step);
                None
            }
            _ if self.relearned(end, step) => None,
            late => {
                self.own(start - at);
                Some((start, late))
            }
        }
    }

    /// A gap that did not end at a period start: the third long one in a row sets the
    /// phase again at its end, and is then the deadline's own (true).
    fn relearned(&mut self, end: u64, step: u64) -> bool {
        if step < self.long {
            return false;
        }
        self.misses += 1;
        if self.misses < 3 {
            return false;
        }
        (self.anchor, self.misses) = (Some(end), 0);
        self.own(step);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 1 tick = 1 ns; runtime 500 µs, period 1 ms; tolerance 50 µs.
    fn throttle() -> Throttle {
        let d = Deadline {
            runtime_ns: 500_000,
            deadline_ns: 1_000_000,
            period_ns: 1_000_000,
            step_ns: 0,
        };
        Throttle::new(&d, Scale::from_hz(1e9))
    }

    #[test]
    fn throttled_halves_are_the_deadlines_own_and_a_hold_inside_the_runtime_is_noise() {
        let mut t = throttle();
        // Period k starts at k ms + 5 µs of wake-up; the loop is throttled from +500 µs.
        let mut noise = Vec::new();
        for k in 1..100u64 {
            let start = k * 1_000_000;
            let wake = [5_000, 2_000, 8_000][k as usize % 3];
            if k == 40 {
                // A 30 µs hold inside the runtime.
                noise.extend(t.split(start + 100_000, 30_000));
            }
            noise.extend(t.split(start + 500_000, 500_000 + wake));
        }
        assert_eq!(noise, vec![(40_100_000, 30_000)]);
        assert_eq!(t.count, 99);
        let own = t.ticks as f64 / 99.0;
        assert!((500_000.0..=510_000.0).contains(&own), "{own}");
    }

    /// Issue 37: holds inside the runtime that end just before a period start are noise,
    /// and do not walk the phase earlier: each moved it to its own end, and a few dozen
    /// such holds took it hundreds of µs early, so that holds were taken for throttling.
    #[test]
    fn a_short_gap_ending_before_a_period_start_is_noise_and_keeps_the_phase() {
        let mut t = throttle();
        for k in 1..10u64 {
            assert_eq!(t.split(k * 1_000_000 + 500_000, 505_000), None);
        }
        // The runtime enforced at the tick: the loop runs on past the period's end, and a
        // 120 µs gap ends 30 µs before the next start; then a throttle.
        let mut noise = Vec::new();
        for k in (10..40u64).step_by(2) {
            noise.extend(t.split(k * 1_000_000 + 850_000, 120_000));
            noise.extend(t.split((k + 1) * 1_000_000 + 500_000, 505_000));
        }
        assert_eq!(noise.len(), 15, "{noise:?}");
        assert!(noise.iter().all(|&(_, d)| d == 120_000), "{noise:?}");
        assert_eq!(t.count, 9 + 15);
        // A hold well inside the runtime stays noise, whole.
        assert_eq!(t.split(70_100_000, 130_000), Some((70_100_000, 130_000)));
    }

    #[test]
    fn a_late_wake_up_after_the_period_start_is_noise() {
        let mut t = throttle();
        for k in 1..10u64 {
            assert_eq!(t.split(k * 1_000_000 + 500_000, 502_000), None);
        }
        // Woke 200 µs after the period start: the throttle to it is the deadline's own,
        // the rest (past the 2 µs wake-up learned) noise.
        let got = t.split(10_500_000, 700_000);
        assert_eq!(got, Some((11_002_000, 198_000)));
    }

    #[test]
    fn a_phase_learned_from_noise_is_learned_again() {
        let mut t = throttle();
        // A 400 µs stall at a random phase first.
        assert_eq!(t.split(300_000, 400_000), None);
        let mut noise = 0;
        for k in 2..20u64 {
            noise += t.split(k * 1_000_000 + 500_000, 500_000).is_some() as u32;
        }
        assert!(
            noise <= 3,
            "{noise} throttles called noise after a wrong phase"
        );
    }
}
