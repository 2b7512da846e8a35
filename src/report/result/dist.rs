//! What each probe kind's view yields for every export: its distributions (one row of
//! the CSV, Markdown and HdrHistogram exports, one row of a comparison, one percentile
//! plot and one histogram each) and its series. The views (`report::views`) make them;
//! the exporters, `compare` and the figures read them. See `report::export` for how the
//! keys and metrics of each kind read.

use std::borrow::Cow;

use serde::Serialize;

use crate::probes::record::HistogramRecord;
use crate::stats::events::EventOut;
use crate::stats::series::SeriesOut;
use crate::stats::{LatencyHistogram, Summary};

/// One distribution of one probe entry.
#[derive(Debug, Clone)]
pub struct Dist<'a> {
    pub probe: &'static str,
    pub key: String,
    pub metric: &'static str,
    /// The CPU, or the pair as `A,B`, or empty.
    pub cpu: String,
    /// The entry's own summary, or one derived from it (pingpong's round trip halved).
    pub summary: Cow<'a, Summary>,
    pub histogram: Option<Cow<'a, HistogramRecord>>,
    /// False only for pingpong's one-way figures when the TSC check could not confirm
    /// them (`one_way_valid`): the figures are then the round trip halved, in every
    /// output, marked [`UNCONFIRMED_MARK`] and never judged by `compare`.
    pub trusted: bool,
    /// The entry's per-interval series (noise, and timer's measured latency).
    pub series: Option<SeriesView<'a>>,
    /// Interruptions per second (noise).
    pub rate_per_s: Option<f64>,
    /// The share of the run lost to interruptions, in % (noise).
    pub interrupted_pct: Option<f64>,
}

/// What marks an unconfirmed figure in every output that shows the metric's name.
pub const UNCONFIRMED_MARK: &str = "*";

/// The note that explains the mark, the same words in every output.
pub const UNCONFIRMED_NOTE: &str = "* the round trip halved: the TSC check could not confirm \
the two CPUs' counter stamps (one_way_valid is false), so the one-way figure is half the \
round trip, and compare does not judge it.";

impl Dist<'_> {
    /// The metric as every table shows it: starred when unconfirmed.
    pub fn metric_label(&self) -> String {
        match self.trusted {
            true => self.metric.to_string(),
            false => format!("{}{UNCONFIRMED_MARK}", self.metric),
        }
    }

    /// The histogram decoded, if the entry has one; an error names the entry.
    pub fn decode_histogram(&self) -> Result<Option<hdrhistogram::Histogram<u64>>, String> {
        let Some(rec) = self.histogram.as_deref() else {
            return Ok(None);
        };
        LatencyHistogram::decode_base64(&rec.data)
            .map(Some)
            .map_err(|e| format!("entry {} {} {}: {e}", self.probe, self.key, self.metric))
    }
}

/// What the distributions of one entry share; each view makes its rows with it.
pub(crate) struct Entry {
    probe: &'static str,
    key: String,
    cpu: String,
}

impl Entry {
    pub(crate) fn new(probe: &'static str, key: String, cpu: String) -> Entry {
        Entry {
            probe,
            key: tag_safe(&key),
            cpu,
        }
    }

    pub(crate) fn dist<'a>(
        &self,
        metric: &'static str,
        s: &'a Summary,
        h: &'a HistogramRecord,
    ) -> Dist<'a> {
        self.maybe(metric, s, Some(h))
    }

    pub(crate) fn maybe<'a>(
        &self,
        metric: &'static str,
        summary: &'a Summary,
        histogram: Option<&'a HistogramRecord>,
    ) -> Dist<'a> {
        Dist {
            probe: self.probe,
            key: self.key.clone(),
            metric,
            cpu: self.cpu.clone(),
            summary: Cow::Borrowed(summary),
            histogram: histogram.map(Cow::Borrowed),
            trusted: true,
            series: None,
            rate_per_s: None,
            interrupted_pct: None,
        }
    }
}

/// A summary with every time halved (integer ns, rounded down): the round trip halved.
/// The count is the round trips'.
pub(crate) fn halved(s: &Summary) -> Summary {
    let h = |v: Option<u64>| v.map(|v| v / 2);
    Summary {
        count: s.count,
        min_ns: h(s.min_ns),
        p20_ns: h(s.p20_ns),
        p50_ns: h(s.p50_ns),
        p80_ns: h(s.p80_ns),
        p90_ns: h(s.p90_ns),
        p99_ns: h(s.p99_ns),
        p999_ns: h(s.p999_ns),
        p9999_ns: h(s.p9999_ns),
        max_ns: h(s.max_ns),
        mean_ns: s.mean_ns.map(|m| m / 2.0),
        sum_ns: s.sum_ns / 2,
        mad_ns: h(s.mad_ns),
        clamped: s.clamped,
    }
}

/// A histogram with every value halved, for the plots and the HdrHistogram log of the
/// round trip halved; `None` when the record does not decode (the exporters then name
/// the entry when they decode the original).
pub(crate) fn halved_histogram(rec: &HistogramRecord) -> Option<HistogramRecord> {
    use base64::Engine as _;
    use hdrhistogram::serialization::{Serializer as _, V2DeflateSerializer};
    let h = LatencyHistogram::decode_base64(&rec.data).ok()?;
    let mut half = hdrhistogram::Histogram::<u64>::new_from(&h);
    for v in h.iter_recorded() {
        half.saturating_record_n(v.value_iterated_to() / 2, v.count_at_value());
    }
    let mut bytes = Vec::new();
    V2DeflateSerializer::new()
        .serialize(&half, &mut bytes)
        .ok()?;
    Some(HistogramRecord {
        data: base64::engine::general_purpose::STANDARD.encode(bytes),
        ..rec.clone()
    })
}

/// An entry's series: the largest gap (and the total) of each interval of the run.
#[derive(Debug, Clone, Copy)]
pub struct SeriesView<'a> {
    pub probe: &'static str,
    pub cpu: usize,
    pub series: &'a SeriesOut,
    pub largest: &'a [EventOut],
    /// What each interval's largest gap is called on a plot ("largest interruption").
    pub gap: &'static str,
    /// What it is called in a comparison ("worst gap", "latest wake-up").
    pub worst: &'static str,
    /// Each interval's total is time lost, a figure of its own (noise).
    pub time_lost: bool,
}

/// The name serde gives a unit enum variant (`spin-pause`, `sys_offset`, …): stable,
/// and the same as in the JSON.
pub fn serde_name<T: Serialize>(v: &T) -> String {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::String(s)) => s,
        _ => "unknown".into(),
    }
}

/// Replaces what a log tag or a key may not hold (commas, white space, control
/// characters) with `_`: HdrHistogram log readers split tags at the first comma.
pub(crate) fn tag_safe(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            ',' | '"' => '_',
            c if c.is_whitespace() || c.is_control() => '_',
            c => c,
        })
        .collect()
}
