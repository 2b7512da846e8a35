//! What each probe kind's view yields for every export: its distributions (one row of
//! the CSV, Markdown and HdrHistogram exports, one row of a comparison, one percentile
//! plot and one histogram each) and its series. The views (`report::views`) make them;
//! the exporters, `compare` and the figures read them. See `report::export` for how the
//! keys and metrics of each kind read.

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
    pub summary: &'a Summary,
    pub histogram: Option<&'a HistogramRecord>,
    /// False only for pingpong's one-way figures when the TSC check could not confirm
    /// them (`one_way_valid`): the probe's own table then shows the round trip halved.
    pub trusted: bool,
    /// The entry's per-interval series (noise, and timer's measured latency).
    pub series: Option<SeriesView<'a>>,
    /// Interruptions per second (noise).
    pub rate_per_s: Option<f64>,
    /// The share of the run lost to interruptions, in % (noise).
    pub interrupted_pct: Option<f64>,
}

impl Dist<'_> {
    /// The histogram decoded, if the entry has one; an error names the entry.
    pub fn decode_histogram(&self) -> Result<Option<hdrhistogram::Histogram<u64>>, String> {
        let Some(rec) = self.histogram else {
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
            summary,
            histogram,
            trusted: true,
            series: None,
            rate_per_s: None,
            interrupted_pct: None,
        }
    }
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
