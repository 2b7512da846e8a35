//! A latency histogram in ns, and the summary every probe reports.
//!
//! HdrHistogram with 3 significant digits from 1 ns to one hour: recording is a few shifts
//! and an add, and the counts array (about 260 KiB) is allocated and touched once, before
//! the run. Values above an hour are clamped and counted, never dropped silently. Exact
//! min, max and sum are tracked beside the buckets, so those three carry no bucket error.

use base64::Engine;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use serde::{Deserialize, Serialize};

/// The highest value kept exactly: one hour, in ns.
pub const HIGHEST_NS: u64 = 3_600_000_000_000;
/// Significant digits: bucket error at most 0.1 %.
pub const SIGFIG: u8 = 3;

/// A fixed-size histogram of durations in ns, owned by one thread.
#[derive(Debug, Clone)]
pub struct LatencyHistogram {
    hist: Histogram<u64>,
    min: u64,
    max: u64,
    sum: u128,
    clamped: u64,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyHistogram {
    /// Allocates the counts and writes every one of them, so that no page fault happens
    /// while recording.
    pub fn new() -> LatencyHistogram {
        let mut hist =
            Histogram::new_with_bounds(1, HIGHEST_NS, SIGFIG).expect("constant bounds are valid");
        hist.reset();
        LatencyHistogram {
            hist,
            min: u64::MAX,
            max: 0,
            sum: 0,
            clamped: 0,
        }
    }

    /// Records one value. O(1), no allocation.
    #[inline]
    pub fn record(&mut self, ns: u64) {
        if ns > HIGHEST_NS {
            self.clamped += 1;
        }
        self.hist.saturating_record(ns.min(HIGHEST_NS));
        self.min = self.min.min(ns);
        self.max = self.max.max(ns);
        self.sum += ns as u128;
    }

    /// Records the samples a stall of `ns` hid from a loop that expected one sample every
    /// `interval_ns`: `ns − interval`, `ns − 2·interval`, … down to the last one that is
    /// not negative, ⌊ns / interval⌋ values in all (one per deadline a late timer
    /// skipped). Recorded beside the sample itself, this is HdrHistogram's
    /// expected-interval correction for coordinated omission (as jHiccup applies it),
    /// carried one step further: HdrHistogram stops at values of at least one interval,
    /// which leaves out the last hidden sample. Called only on stalls, so cold.
    #[cold]
    pub fn record_skipped(&mut self, ns: u64, interval_ns: u64) {
        if interval_ns == 0 {
            return;
        }
        let mut missing = ns;
        while missing >= interval_ns {
            missing -= interval_ns;
            self.record(missing);
        }
    }

    /// Forgets everything recorded (and touches every count again).
    pub fn clear(&mut self) {
        self.hist.reset();
        (self.min, self.max, self.sum, self.clamped) = (u64::MAX, 0, 0, 0);
    }

    pub fn count(&self) -> u64 {
        self.hist.len()
    }

    /// The exact minimum so far, if anything was recorded.
    pub fn min_ns(&self) -> Option<u64> {
        (self.count() > 0).then_some(self.min)
    }

    /// The exact maximum so far, if anything was recorded.
    pub fn max_ns(&self) -> Option<u64> {
        (self.count() > 0).then_some(self.max)
    }

    /// The exact sum so far, saturating.
    pub fn sum_ns(&self) -> u64 {
        self.sum.min(u64::MAX as u128) as u64
    }

    /// Adds another histogram's contents (for merging threads after a run).
    pub fn add(&mut self, other: &LatencyHistogram) {
        self.hist.add(&other.hist).expect("same bounds");
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        self.sum += other.sum;
        self.clamped += other.clamped;
    }

    /// The underlying HdrHistogram, for exporters.
    pub fn inner(&self) -> &Histogram<u64> {
        &self.hist
    }

    /// The summary of what was recorded.
    pub fn summary(&self) -> Summary {
        let count = self.hist.len();
        if count == 0 {
            return Summary::default();
        }
        // value_at_quantile gives the top of the bucket; never report above the true max.
        let q = |q: f64| Some(self.hist.value_at_quantile(q).min(self.max));
        let median = self.hist.value_at_quantile(0.5).min(self.max);
        Summary {
            count,
            min_ns: Some(self.min),
            p20_ns: q(0.20),
            p50_ns: Some(median),
            p80_ns: q(0.80),
            p90_ns: q(0.90),
            p99_ns: q(0.99),
            p999_ns: q(0.999),
            p9999_ns: q(0.9999),
            max_ns: Some(self.max),
            mean_ns: Some(self.sum as f64 / count as f64),
            sum_ns: self.sum_ns(),
            // Deviations are measured between bucket midpoints.
            mad_ns: Some(self.mad(self.hist.median_equivalent(median))),
            clamped: self.clamped,
        }
    }

    /// Median absolute deviation around `median`, from the buckets: the median of
    /// |v − median| with each bucket represented by its midpoint.
    fn mad(&self, median: u64) -> u64 {
        let mut devs: Vec<(u64, u64)> = self
            .hist
            .iter_recorded()
            .map(|v| {
                let value = self.hist.median_equivalent(v.value_iterated_to());
                (value.abs_diff(median), v.count_at_value())
            })
            .collect();
        devs.sort_unstable();
        let half = self.hist.len().div_ceil(2);
        let mut seen = 0;
        for (dev, n) in devs {
            seen += n;
            if seen >= half {
                return dev;
            }
        }
        0
    }

    /// The histogram in HdrHistogram's V2 compressed format, base64: the same string
    /// HdrHistogram's own tools (and jHiccup's logs) carry.
    pub fn encode_base64(&self) -> String {
        let mut bytes = Vec::new();
        V2DeflateSerializer::new()
            .serialize(&self.hist, &mut bytes)
            .expect("serializing to memory cannot fail");
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }

    /// Decodes a string written by `encode_base64` (or any V2 compressed histogram).
    pub fn decode_base64(text: &str) -> Result<Histogram<u64>, String> {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text.trim())
            .map_err(|e| format!("histogram is not base64: {e}"))?;
        Deserializer::new()
            .deserialize(&mut bytes.as_slice())
            .map_err(|e| format!("histogram is not HdrHistogram V2: {e:?}"))
    }
}

/// The distribution summary every probe reports, in ns. Percentiles come from the
/// histogram (upper edge of the bucket, within 0.1 %); min, max, mean and sum are exact.
/// Every statistic is null when nothing was recorded.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub count: u64,
    pub min_ns: Option<u64>,
    pub p20_ns: Option<u64>,
    pub p50_ns: Option<u64>,
    pub p80_ns: Option<u64>,
    pub p90_ns: Option<u64>,
    pub p99_ns: Option<u64>,
    pub p999_ns: Option<u64>,
    pub p9999_ns: Option<u64>,
    pub max_ns: Option<u64>,
    pub mean_ns: Option<f64>,
    pub sum_ns: u64,
    /// Median absolute deviation from the median.
    pub mad_ns: Option<u64>,
    /// Values above the histogram's one-hour range, recorded as one hour.
    pub clamped: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn summary_of_known_values() {
        let mut h = LatencyHistogram::new();
        for v in 1..=1000u64 {
            h.record(v * 1000); // 1 µs .. 1 ms
        }
        let s = h.summary();
        assert_eq!(s.count, 1000);
        assert_eq!(s.min_ns, Some(1000));
        assert_eq!(s.max_ns, Some(1_000_000));
        assert_eq!(s.sum_ns, 500_500_000);
        let within = |got: Option<u64>, want: u64| {
            let g = got.unwrap() as f64;
            assert!(
                (g - want as f64).abs() <= want as f64 * 0.001 + 1.0,
                "{g} vs {want}"
            );
        };
        within(s.p50_ns, 500_000);
        within(s.p90_ns, 900_000);
        within(s.p99_ns, 990_000);
        within(s.p20_ns, 200_000);
        // |v - 500 µs| for v = 1..1000 µs has median 250 µs; the median and the bucket
        // midpoints each carry up to 0.1 % of ~500 µs.
        let mad = s.mad_ns.unwrap();
        assert!(mad.abs_diff(250_000) <= 1_000, "MAD {mad}");
    }

    #[test]
    fn empty_summary_is_null() {
        let s = LatencyHistogram::new().summary();
        assert_eq!(s.count, 0);
        assert_eq!(s.p50_ns, None);
        assert_eq!(s.mad_ns, None);
    }

    #[test]
    fn values_beyond_an_hour_are_clamped_and_counted() {
        let mut h = LatencyHistogram::new();
        h.record(HIGHEST_NS * 3);
        h.record(5);
        let s = h.summary();
        assert_eq!(s.count, 2);
        assert_eq!(s.clamped, 1);
        assert_eq!(s.max_ns, Some(HIGHEST_NS * 3));
    }

    #[test]
    fn encoding_round_trips() {
        let mut h = LatencyHistogram::new();
        for v in [10, 20, 20, 1_000, 55_555, 3_000_000_000] {
            h.record(v);
        }
        let decoded = LatencyHistogram::decode_base64(&h.encode_base64()).unwrap();
        assert_eq!(decoded.len(), 6);
        assert_eq!(
            decoded.value_at_quantile(0.5),
            h.inner().value_at_quantile(0.5)
        );
        assert_eq!(decoded.max(), h.inner().max());
        assert!(
            h.encode_base64().starts_with("HISTF"),
            "V2 compressed cookie"
        );
    }

    proptest! {
        #[test]
        fn percentiles_are_ordered_and_bounded(values in proptest::collection::vec(0u64..10_000_000_000, 1..300)) {
            let mut h = LatencyHistogram::new();
            for &v in &values { h.record(v); }
            let s = h.summary();
            let seq = [s.min_ns, s.p20_ns, s.p50_ns, s.p80_ns, s.p90_ns, s.p99_ns, s.p999_ns, s.p9999_ns, s.max_ns];
            let seq: Vec<u64> = seq.iter().map(|v| v.unwrap()).collect();
            prop_assert!(seq.windows(2).all(|w| w[0] <= w[1]), "{:?}", seq);
            prop_assert_eq!(s.min_ns.unwrap(), *values.iter().min().unwrap());
            prop_assert_eq!(s.max_ns.unwrap(), *values.iter().max().unwrap());
        }
    }

    #[test]
    fn correction_is_hdrhistograms_plus_the_last_hidden_sample() {
        let cases = [(50, 100), (100, 100), (250, 100), (1_000_000, 1000), (7, 0)];
        let mut ours = LatencyHistogram::new();
        let mut theirs = Histogram::<u64>::new_with_bounds(1, HIGHEST_NS, SIGFIG).unwrap();
        for (v, interval) in cases {
            ours.record(v);
            ours.record_skipped(v, interval);
            theirs.record_correct(v, interval).unwrap();
            // HdrHistogram leaves out the last hidden value, the one below the interval.
            if interval > 0 && v >= interval {
                theirs.record(v % interval).unwrap();
            }
        }
        assert_eq!(ours.inner(), &theirs);
        // One value per hidden sample: ⌊v / interval⌋ of them.
        let hidden: u64 = cases
            .iter()
            .map(|&(v, i)| v.checked_div(i).unwrap_or(0))
            .sum();
        assert_eq!(ours.count(), cases.len() as u64 + hidden);
        // 250 with an interval of 100 hid two wake-ups, late by 150 and 50.
        assert_eq!(theirs.count_at(150), 1);
        assert_eq!(theirs.count_at(50), 2);
        assert_eq!(ours.summary().min_ns, Some(0));
    }
}
