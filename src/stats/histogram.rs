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
        Self::with_sigfig(SIGFIG)
    }

    /// As `new`, with `sigfig` significant digits (1 to 5): 2 digits (1 % bucket error)
    /// take about 37 KiB where 3 take 260 KiB, for holders of many histograms that only
    /// fold them into coarser buckets (`monitor --watch-comm`, one per watched thread).
    pub fn with_sigfig(sigfig: u8) -> LatencyHistogram {
        let mut hist = Histogram::new_with_bounds(1, HIGHEST_NS, sigfig.clamp(1, 5))
            .expect("constant bounds are valid");
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
    /// which leaves out the last hidden sample. At most `most` of them, the first (a run
    /// that ends inside the stall skipped only the deadlines before its end). Called only
    /// on stalls, so cold.
    #[cold]
    pub fn record_skipped(&mut self, ns: u64, interval_ns: u64, most: u64) {
        if interval_ns == 0 {
            return;
        }
        let mut missing = ns;
        let mut left = most;
        while missing >= interval_ns && left > 0 {
            missing -= interval_ns;
            left -= 1;
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
        let plain = plain_v2(&bytes)?;
        let h: Histogram<u64> = Deserializer::new()
            .deserialize(&mut plain.as_slice())
            .map_err(|e| format!("histogram is not HdrHistogram V2: {e:?}"))?;
        // The decoder saturates its total, and then a quantile's running sum overflows
        // (found by fuzzing, issue 22). No run records 2^53 values: 104 days at one a ns.
        if h.len() > MAX_COUNT {
            return Err(format!("histogram holds {} values; at most 2^53", h.len()));
        }
        Ok(h)
    }
}

/// HdrHistogram V2's cookies (with the 0x10 of its word size): plain, and zlib-compressed
/// around a plain one.
const V2_COOKIE: u32 = 0x1c84_9313;
const V2_COMPRESSED_COOKIE: u32 = 0x1c84_9314;
/// The plain header: cookie, payload length, offset, digits, lowest, highest, ratio.
const V2_HEADER: usize = 40;
/// The most values a decoded histogram may hold: each counts exactly as an f64.
const MAX_COUNT: u64 = 1 << 53;
/// The most an encoded histogram may inflate to: a full one of ours is well under 1 MiB.
const MAX_PLAIN: u64 = 16 << 20;

/// The plain V2 form of `bytes`, inflated if need be, once its declared payload length
/// is checked against what is there: the decoder sizes its buffer by that declaration,
/// so a few bytes of hostile input asked it for 3.3 GB (found by fuzzing, issue 22), and
/// by the digits and range, which size the counts.
fn plain_v2(bytes: &[u8]) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let be32 = |b: &[u8], at: usize| {
        (b.get(at..at + 4)).map(|w| u32::from_be_bytes(w.try_into().unwrap_or([0; 4])))
    };
    let plain = match be32(bytes, 0) {
        Some(V2_COMPRESSED_COOKIE) => {
            let mut out = Vec::new();
            let body = bytes.get(8..).unwrap_or_default();
            flate2::read::ZlibDecoder::new(body)
                .take(MAX_PLAIN)
                .read_to_end(&mut out)
                .map_err(|e| format!("histogram does not inflate: {e}"))?;
            out
        }
        Some(V2_COOKIE) => bytes.to_vec(),
        _ => return Err("histogram is not HdrHistogram V2: unknown cookie".into()),
    };
    let declared = be32(&plain, 4).unwrap_or(u32::MAX) as usize;
    let digits = be32(&plain, 12).unwrap_or(u32::MAX);
    if be32(&plain, 0) != Some(V2_COOKIE) || declared > plain.len().saturating_sub(V2_HEADER) {
        return Err("histogram is not HdrHistogram V2: its length is not what it holds".into());
    }
    if digits > 5 {
        return Err(format!(
            "histogram has {digits} significant digits; at most 5"
        ));
    }
    Ok(plain)
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
    /// Issue 22 (fuzzing): a histogram that declares more payload than it holds, or a
    /// compressed one that inflates to such, is refused without the allocation it asks for.
    #[test]
    fn issue22_a_histogram_that_lies_about_its_length_is_refused() {
        use base64::Engine;
        let mut plain = Vec::new();
        plain.extend(0x1c84_9313u32.to_be_bytes());
        plain.extend(0xc500_0000u32.to_be_bytes()); // 3.3 GB of payload, declared
        plain.extend(0u32.to_be_bytes());
        plain.extend(3u32.to_be_bytes());
        plain.extend(1u64.to_be_bytes());
        plain.extend(3_600_000_000_000u64.to_be_bytes());
        plain.extend(1f64.to_be_bytes());
        let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
        let err = LatencyHistogram::decode_base64(&b64(&plain)).unwrap_err();
        assert!(err.contains("length"), "{err}");
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut z, &plain).unwrap();
        let deflated = z.finish().unwrap();
        let mut packed = 0x1c84_9314u32.to_be_bytes().to_vec();
        packed.extend((deflated.len() as u32).to_be_bytes());
        packed.extend(deflated);
        assert!(LatencyHistogram::decode_base64(&b64(&packed)).is_err());
        // A real one still decodes.
        let mut h = LatencyHistogram::new();
        h.record(1234);
        let text = h.encode_base64();
        assert_eq!(LatencyHistogram::decode_base64(&text).unwrap().len(), 1);
    }

    /// Issue 22 (fuzzing): a histogram whose counts sum past u64 is refused, not left
    /// to overflow the first quantile asked of it.
    #[test]
    fn issue22_a_histogram_of_more_values_than_any_run_is_refused() {
        let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).unwrap();
        // The format carries counts up to i64::MAX each; three of them overflow a u64.
        for v in [10, 20, 30] {
            h.record_n(v, i64::MAX as u64).unwrap();
        }
        let mut bytes = Vec::new();
        V2DeflateSerializer::new()
            .serialize(&h, &mut bytes)
            .unwrap();
        let text = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, bytes);
        let err = LatencyHistogram::decode_base64(&text).unwrap_err();
        assert!(err.contains("at most 2^53"), "{err}");
    }

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
            ours.record_skipped(v, interval, u64::MAX);
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
