//! A per-interval time series with bounded memory.
//!
//! Each interval (1/16 s to begin with) holds the number of events, their summed duration and
//! the largest one. When a run outlives the capacity, neighbouring intervals merge
//! pairwise and the interval doubles, so memory stays fixed and the whole run stays
//! covered, at a coarser grain.

use serde::{Deserialize, Serialize};

/// Room for an hour of 1 s intervals.
pub const CAPACITY: usize = 3600;
/// The first interval: 1/16 s. A short run still has enough intervals to plot and for
/// `compare` to test (a 2 s run has 32), and after four doublings an hour-long run ends
/// with exactly 1 s intervals.
pub const FIRST_INTERVAL_NS: u64 = 62_500_000;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Interval {
    events: u64,
    total_ns: u64,
    max_ns: u64,
}

impl Interval {
    fn merge(self, other: Interval) -> Interval {
        Interval {
            events: self.events + other.events,
            total_ns: self.total_ns + other.total_ns,
            max_ns: self.max_ns.max(other.max_ns),
        }
    }
}

/// The bounded series, owned by one measuring thread. Offsets are counter ticks since the
/// start of the run.
#[derive(Debug, Clone)]
pub struct IntervalSeries {
    interval_ticks: u64,
    interval_ns: u64,
    /// The interval before any merge, restored by `clear`.
    first: (u64, u64),
    buf: Vec<Interval>,
}

impl IntervalSeries {
    /// A series of `capacity` intervals of `interval_ns`, prefaulted.
    pub fn new(capacity: usize, interval_ns: u64, interval_ticks: u64) -> IntervalSeries {
        assert!(capacity >= 2 && interval_ticks > 0);
        IntervalSeries {
            interval_ticks,
            interval_ns,
            first: (interval_ticks, interval_ns),
            buf: vec![Interval::default(); capacity],
        }
    }

    /// Adds one event that started `offset_ticks` into the run, merging first if it lies
    /// past the capacity (rare: once per doubling of the run length).
    #[inline]
    pub fn record(&mut self, offset_ticks: u64, duration_ns: u64) {
        let mut idx = (offset_ticks / self.interval_ticks) as usize;
        while idx >= self.buf.len() {
            self.merge_pairs();
            idx = (offset_ticks / self.interval_ticks) as usize;
        }
        let slot = &mut self.buf[idx];
        slot.events += 1;
        slot.total_ns += duration_ns;
        slot.max_ns = slot.max_ns.max(duration_ns);
    }

    #[cold]
    fn merge_pairs(&mut self) {
        let half = self.buf.len() / 2;
        for i in 0..half {
            self.buf[i] = self.buf[2 * i].merge(self.buf[2 * i + 1]);
        }
        if self.buf.len() % 2 == 1 {
            self.buf[half] = self.buf[self.buf.len() - 1];
            self.buf[half + 1..].fill(Interval::default());
        } else {
            self.buf[half..].fill(Interval::default());
        }
        self.interval_ticks *= 2;
        self.interval_ns *= 2;
    }

    /// Forgets every event and any merging they caused: a warm-up's events (the timer's
    /// priming sample sits at an absolute counter value) must not leave coarse intervals.
    pub fn clear(&mut self) {
        self.buf.fill(Interval::default());
        (self.interval_ticks, self.interval_ns) = self.first;
    }

    /// The series covering `run_ticks` of measurement. Intervals merge here too if the run
    /// outlasted the capacity with no event late enough to force a merge, so the series
    /// always covers the whole run. A last interval shorter than 0.1 % of the interval
    /// (the few ns a loop overshoots its deadline) is not reported.
    pub fn finish(&self, run_ticks: u64) -> SeriesOut {
        let mut s = self.clone();
        while run_ticks > s.interval_ticks * s.buf.len() as u64 {
            s.merge_pairs();
        }
        let covered = run_ticks.saturating_sub(s.interval_ticks / 1000);
        let mut n = (covered.div_ceil(s.interval_ticks) as usize).clamp(1, s.buf.len());
        if n < s.buf.len() && s.buf[n].events > 0 {
            n += 1; // never drop events, however short their interval
        }
        let used = &s.buf[..n];
        SeriesOut {
            interval_ns: s.interval_ns,
            events: used.iter().map(|i| i.events).collect(),
            total_ns: used.iter().map(|i| i.total_ns).collect(),
            max_ns: used.iter().map(|i| i.max_ns).collect(),
        }
    }
}

/// The series as stored in the result: columns of equal length, one entry per interval.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SeriesOut {
    /// Length of each interval; the last one may be partial.
    pub interval_ns: u64,
    /// Events (interruptions) that started in the interval.
    pub events: Vec<u64>,
    /// Their summed duration.
    pub total_ns: Vec<u64>,
    /// The largest of them (0 when none).
    pub max_ns: Vec<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_land_in_their_interval() {
        let mut s = IntervalSeries::new(8, 1_000, 10);
        s.record(5, 100);
        assert_eq!(s.finish(10).interval_ns, 1_000, "no merge within capacity");
        s.record(15, 50);
        s.record(19, 300);
        let out = s.finish(30);
        assert_eq!(out.interval_ns, 1_000);
        assert_eq!(out.events, [1, 2, 0]);
        assert_eq!(out.total_ns, [100, 350, 0]);
        assert_eq!(out.max_ns, [100, 300, 0]);
    }

    #[test]
    fn past_capacity_neighbours_merge_and_nothing_is_lost() {
        let mut s = IntervalSeries::new(4, 1_000, 10);
        for t in 0..4 {
            s.record(t * 10, 1);
        }
        s.record(45, 7);
        assert_eq!(
            s.finish(50).interval_ns,
            2_000,
            "the fifth interval forces a merge"
        );
        let out = s.finish(50);
        assert_eq!(out.interval_ns, 2_000);
        assert_eq!(out.events, [2, 2, 1]);
        assert_eq!(out.max_ns, [1, 1, 7]);
        assert_eq!(out.events.iter().sum::<u64>(), 5);
        // Far beyond: several doublings at once.
        s.record(1_000, 9);
        let out = s.finish(1_010);
        assert_eq!(out.events.iter().sum::<u64>(), 6);
        assert!(out.events.len() <= 4);
    }

    #[test]
    fn a_quiet_tail_past_capacity_is_still_covered() {
        let mut s = IntervalSeries::new(4, 1_000, 10);
        s.record(5, 3);
        // 100 ticks of run and no event after the first: intervals of 40 ticks (4 µs)
        // cover all of it, rather than 4 intervals of 10 that stop at tick 40.
        let out = s.finish(100);
        assert_eq!(out.interval_ns, 4_000);
        assert_eq!(out.events, [1, 0, 0]);
    }

    #[test]
    fn clear_forgets_the_merges_too() {
        let mut s = IntervalSeries::new(4, 1_000, 10);
        s.record(1_000_000, 5); // a warm-up event at an absolute counter value
        s.clear();
        s.record(15, 7);
        let out = s.finish(40);
        assert_eq!(out.interval_ns, 1_000);
        assert_eq!(out.max_ns, [0, 7, 0, 0]);
    }

    #[test]
    fn a_deadline_overshoot_is_not_an_interval() {
        let s = IntervalSeries::new(8, 1_000_000, 1_000_000);
        assert_eq!(s.finish(2_000_007).events.len(), 2);
        assert_eq!(s.finish(2_100_000).events.len(), 3);
    }
}
