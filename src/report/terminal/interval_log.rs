//! Reading an HdrHistogram interval log (jHiccup's format, as `monitor --log-dir` writes
//! it) back: per tag (one per CPU), the intervals' time span, the merged distribution and
//! the worst interval, as a table. Parsing is HdrHistogram's own (`IntervalLogIterator`).

use std::collections::BTreeMap;
use std::fmt::Write;

use hdrhistogram::Histogram;
use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};

use crate::stats::LatencyHistogram;

/// One tag's intervals, merged.
#[derive(Debug, Clone)]
pub struct TagSeries {
    pub intervals: usize,
    /// Seconds from the first interval's start to the last one's end.
    pub first_s: f64,
    pub last_s: f64,
    pub merged: Histogram<u64>,
    /// The largest interval maximum (ns, exact where the log's max column is) and when
    /// that interval started (s).
    pub worst_ns: u64,
    pub worst_at_s: f64,
    /// Per interval: start (s) and max (ns), in order.
    pub maxima: Vec<(f64, u64)>,
}

/// A whole log.
#[derive(Debug, Clone, Default)]
pub struct IntervalLogFile {
    /// Seconds since the epoch the interval starts are relative to.
    pub base_s: f64,
    pub tags: BTreeMap<String, TagSeries>,
}

/// Whether `bytes` look like an interval log rather than a result file.
pub fn looks_like(bytes: &[u8]) -> bool {
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(4096)]);
    let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    first.starts_with("#[") || first.starts_with("Tag=") || first.contains(",HIST")
}

/// Parses a log; an interval whose histogram does not decode is an error naming it.
pub fn parse(bytes: &[u8]) -> Result<IntervalLogFile, String> {
    let mut out = IntervalLogFile::default();
    let mut start_s = None;
    for (n, e) in IntervalLogIterator::new(bytes).enumerate() {
        match e.map_err(|e| format!("not an HdrHistogram interval log: {e:?}"))? {
            LogEntry::BaseTime(d) => out.base_s = d.as_secs_f64(),
            LogEntry::StartTime(d) => start_s = Some(d.as_secs_f64()),
            LogEntry::Interval(iv) => {
                let h = LatencyHistogram::decode_base64(iv.encoded_histogram())
                    .map_err(|e| format!("interval {n}: {e}"))?;
                let tag = iv.tag().map_or("(untagged)", |t| t.as_str()).to_string();
                let start = iv.start_timestamp().as_secs_f64();
                let end = start + iv.duration().as_secs_f64();
                // The interval's max column is exact (ms, jHiccup's unit); the decoded
                // histogram's max is only the top of its bucket.
                let max = match iv.max() {
                    m if m > 0.0 => ((m * 1e6).round() as u64).min(h.max()),
                    _ => h.max(),
                };
                let s = out.tags.entry(tag).or_insert_with(|| TagSeries {
                    intervals: 0,
                    first_s: start,
                    last_s: end,
                    merged: Histogram::new_with_bounds(1, crate::stats::histogram::HIGHEST_NS, 3)
                        .expect("constant bounds"),
                    worst_ns: 0,
                    worst_at_s: start,
                    maxima: Vec::new(),
                });
                s.intervals += 1;
                s.first_s = s.first_s.min(start);
                s.last_s = s.last_s.max(end);
                s.merged
                    .add(&h)
                    .map_err(|e| format!("interval {n}: {e:?}"))?;
                if max > s.worst_ns || s.intervals == 1 {
                    s.worst_ns = max;
                    s.worst_at_s = start;
                }
                s.maxima.push((start, max));
            }
        }
    }
    if out.base_s == 0.0 {
        out.base_s = start_s.unwrap_or(0.0);
    }
    if out.tags.is_empty() {
        return Err("no intervals in this interval log".into());
    }
    Ok(out)
}

fn us(ns: u64) -> String {
    format!("{:.1}", ns as f64 / 1e3)
}

/// The table `report` prints for a log.
pub fn table(name: &str, log: &IntervalLogFile) -> String {
    use super::table::{Tab, core};
    // A tag is text, cut to fit as text is.
    let mut t = Tab::new(&[
        core("tag").text(),
        core("intervals"),
        core("span s"),
        core("count"),
        core("p50 µs"),
        core("p99 µs"),
        core("p99.9 µs"),
        core("max µs"),
        core("worst at s"),
    ]);
    for (tag, s) in &log.tags {
        let h = &s.merged;
        let q = |q: f64| us(h.value_at_quantile(q).min(h.max()));
        t.row(vec![
            tag.clone(),
            s.intervals.to_string(),
            format!("{:.0}", s.last_s - s.first_s),
            h.len().to_string(),
            q(0.5),
            q(0.99),
            q(0.999),
            us(s.worst_ns),
            format!("{:.0}", s.worst_at_s),
        ]);
    }
    let when = humantime::format_rfc3339_seconds(
        std::time::UNIX_EPOCH + std::time::Duration::from_secs_f64(log.base_s.max(0.0)),
    );
    let mut out = String::new();
    let _ = writeln!(
        out,
        "interval log {name}: timer wake-up latency, times from {when} (HdrHistogram, 3 \
         significant digits; max exact per interval)"
    );
    let _ = writeln!(out, "{t}");
    out
}

#[cfg(test)]
mod tests {
    /// Issue 22: the input the fuzzer found asked the HdrHistogram decoder for 3.3 GB;
    /// it is now refused as an error.
    #[test]
    fn issue22_a_log_whose_histogram_lies_about_its_length_is_an_error() {
        let bytes = include_bytes!("../../../fuzz/corpus/interval_log/issue22-oom-declared-length");
        assert!(super::parse(bytes).is_err());
    }

    use super::*;

    /// Review 2 of issue 29: the table made every column a figure's, so a long tag was
    /// never cut and the table ran past the terminal; a tag is text, cut to fit.
    #[test]
    fn a_long_tag_is_cut_to_fit_the_terminal() {
        let mut merged = Histogram::<u64>::new(3).unwrap();
        merged.record(12_000).unwrap();
        let series = TagSeries {
            intervals: 3,
            first_s: 0.0,
            last_s: 3.0,
            merged,
            worst_ns: 12_000,
            worst_at_s: 1.0,
            maxima: Vec::new(),
        };
        let log = IntervalLogFile {
            base_s: 0.0,
            tags: [(format!("cpu7-{}", "x".repeat(120)), series)].into(),
        };
        let t = crate::report::terminal::table::Layout::fixed(100, false)
            .scoped(|| table("l.hlog", &log));
        let row = t
            .lines()
            .find(|l| l.contains("cpu7-"))
            .expect("the tag's row");
        assert!(row.chars().count() <= 100, "{t}");
        assert!(t.contains("cpu7-xxx") && t.contains('…'), "{t}");
    }

    #[test]
    fn a_foreign_file_is_refused_and_a_result_is_not_taken_for_a_log() {
        assert!(!looks_like(b"{\"schema\": \"jitterscope/1\"}"));
        assert!(looks_like(b"#[Histogram log format version 1.3]\n"));
        assert!(parse(b"#[Histogram log format version 1.3]\n").is_err());
    }
}
