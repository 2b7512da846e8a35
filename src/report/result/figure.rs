//! What each plot shows, independent of how it is drawn: built once here, drawn by
//! plotters (`report::export::plot`, SVG and PNG) and written as data files and a script
//! (`report::export::gnuplot`) from the same description. The maths lives here only: the
//! percentile levels, the log-spaced bins, the series and the heat-map matrix.
//!
//! Per distribution with samples (see `export::distributions`), two figures:
//!
//! - `…-percentiles`: HdrHistogram's "latency by percentile": rows at ten levels per
//!   decade of 1/(1−p) up to what the count resolves, each decade starting at the literal
//!   0.9, 0.99, … (so those rows are the summary's own percentiles); the last row is the
//!   maximum, placed at 1/(1−p) = count. No value lies above the run's exact maximum.
//! - `…-histogram`: counts in log-spaced bins, [`BINS_PER_DECADE`] per decade of latency.
//!
//! Per entry with a series (noise, timer), `…-series`: the largest gap of each interval
//! over the run, with the entry's largest events. Per kind, whatever its view draws across
//! entries (`KindView::figures`: c2c's heat map of median one-way latency by CPU pair).
//! `report::export::describe` says which figures a result, or a set of runs, has.

use hdrhistogram::Histogram;

use crate::report::result::dist::Dist;
use crate::stats::causes::{Attribution, CauseKind, CauseRow};

/// Log bins per decade of latency in histograms: 50, each 4.7 % wide, so that the body of
/// a distribution (a timer's 62 to 80 µs) spreads over several bins rather than one.
pub const BINS_PER_DECADE: f64 = 50.0;

/// One plot's description.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    /// File-safe and unique in its set (`noise-cpu1-percentiles`); with several files,
    /// prefixed by the file's label and `-`.
    pub name: String,
    /// The file's label when there are several (its stem, numbered when stems repeat);
    /// empty for one file and for overlays.
    pub source: String,
    pub chart: Chart,
}

/// What a figure draws; every value in ns (counts for a histogram's height).
#[derive(Debug, Clone, PartialEq)]
pub enum Chart {
    Percentiles {
        dist: DistId,
        lines: Vec<Line<Vec<Quantile>>>,
    },
    Histogram {
        dist: DistId,
        lines: Vec<Line<Vec<Bin>>>,
    },
    Series {
        id: SeriesId,
        lines: Vec<Line<SeriesData>>,
        /// The largest events (one run only): (start, duration) in ns.
        largest: Vec<(u64, u64)>,
    },
    Heatmap(Heatmap),
}

/// One curve: a run's data, labelled by the run in an overlay (empty otherwise).
#[derive(Debug, Clone, PartialEq)]
pub struct Line<T> {
    pub label: String,
    pub data: T,
}

/// Which distribution a figure shows.
#[derive(Debug, Clone, PartialEq)]
pub struct DistId {
    pub probe: &'static str,
    pub key: String,
    pub metric: &'static str,
    /// False when a figure is unconfirmed (pingpong's one-way without the TSC check).
    pub trusted: bool,
}

/// One row of a percentile curve.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Quantile {
    /// The percentile as a fraction (1 for the maximum).
    pub q: f64,
    /// Where it sits on the percentile axis: 1/(1−q), and the count for the maximum.
    pub x: f64,
    pub value_ns: u64,
    /// Samples at or below the value.
    pub at_or_below: u64,
}

/// One histogram bin: [lower, upper) edges in ns and its count.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bin {
    pub lo_ns: f64,
    pub hi_ns: f64,
    pub count: u64,
}

/// Which series a figure shows.
#[derive(Debug, Clone, PartialEq)]
pub struct SeriesId {
    pub probe: &'static str,
    pub cpu: usize,
    /// What each interval's largest gap is called ("largest interruption").
    pub gap: &'static str,
}

/// One run's series: per interval, the largest gap, how many there were, their total.
#[derive(Debug, Clone, PartialEq)]
pub struct SeriesData {
    pub interval_ns: u64,
    pub max_ns: Vec<u64>,
    pub events: Vec<u64>,
    pub total_ns: Vec<u64>,
}

/// Median one-way latency by CPU pair, both ways round.
#[derive(Debug, Clone, PartialEq)]
pub struct Heatmap {
    /// The c2c mode, as the JSON names it.
    pub mode: String,
    pub cpus: Vec<usize>,
    /// `cells[row * n + col]`, ns; `None` where no pair was measured (the diagonal).
    pub cells: Vec<Option<f64>>,
}

impl DistId {
    pub(crate) fn of(d: &Dist) -> DistId {
        DistId {
            probe: d.probe,
            key: d.key.clone(),
            metric: d.metric,
            trusted: d.trusted,
        }
    }

    pub(crate) fn same(&self, o: &DistId) -> bool {
        (self.probe, &self.key, self.metric) == (o.probe, &o.key, o.metric)
    }

    fn name(&self, what: &str) -> String {
        file_safe(&format!(
            "{}-{}-{}-{what}",
            self.probe, self.key, self.metric
        ))
    }

    pub(crate) fn percentiles(&self, lines: Vec<Line<Vec<Quantile>>>) -> Figure {
        Figure {
            name: self.name("percentiles"),
            source: String::new(),
            chart: Chart::Percentiles {
                dist: self.clone(),
                lines,
            },
        }
    }

    pub(crate) fn histogram(&self, lines: Vec<Line<Vec<Bin>>>) -> Figure {
        Figure {
            name: self.name("histogram"),
            source: String::new(),
            chart: Chart::Histogram {
                dist: self.clone(),
                lines,
            },
        }
    }

    /// What a title says after the figure's name: nothing, or that it is unconfirmed.
    pub fn caveat(&self) -> &'static str {
        match self.trusted {
            true => "",
            false => " (unconfirmed by TSC check)",
        }
    }
}

/// A distribution's percentile curve and histogram bins, from its recorded histogram.
pub(crate) struct Curves {
    pub(crate) percentiles: Line<Vec<Quantile>>,
    pub(crate) bins: Line<Vec<Bin>>,
}

impl Curves {
    /// `None` when nothing was recorded (a quiet CPU, a method not measured): an empty
    /// chart says nothing.
    pub(crate) fn of(d: &Dist) -> Result<Option<Curves>, String> {
        let Some(h) = d.decode_histogram()? else {
            return Ok(None);
        };
        if h.is_empty() {
            return Ok(None);
        }
        let max = d.summary.max_ns.unwrap_or(u64::MAX).min(h.max());
        Ok(Some(Curves {
            percentiles: unlabelled(percentile_rows(&h, max)),
            bins: unlabelled(log_bins(&h)),
        }))
    }
}

fn unlabelled<T>(data: T) -> Line<T> {
    Line {
        label: String::new(),
        data,
    }
}

impl<T> Line<T> {
    pub(crate) fn labelled(self, label: &str) -> Line<T> {
        Line {
            label: label.to_string(),
            ..self
        }
    }
}

/// The quantiles drawn: ten per decade of 1/(1−p), up to what the count resolves. Each
/// decade starts at the literal 0.9, 0.99, … (parsed, not computed), so that those rows
/// are the summary's own percentiles.
pub fn levels(count: u64) -> Vec<f64> {
    let mut out = Vec::new();
    for decade in 0..15 {
        for step in 0..10 {
            let x = 10f64.powf(decade as f64 + step as f64 / 10.0);
            if x > count as f64 {
                return out;
            }
            out.push(match step {
                0 => nines(decade),
                _ => 1.0 - 1.0 / x,
            });
        }
    }
    out
}

/// 0, 0.9, 0.99, … as the decimal literal would be.
fn nines(k: usize) -> f64 {
    match k {
        0 => 0.0,
        k => format!("0.{}", "9".repeat(k)).parse().unwrap_or(1.0),
    }
}

/// The percentile curve at [`levels`], then the maximum at 1/(1−p) = count. `max_ns` is
/// the exact maximum: like the summary, no row reports above it.
fn percentile_rows(h: &Histogram<u64>, max_ns: u64) -> Vec<Quantile> {
    let row = |q: f64, x: f64, v: u64| Quantile {
        q,
        x,
        value_ns: v,
        at_or_below: h.count_between(0, v),
    };
    let mut out: Vec<Quantile> = (levels(h.len()).into_iter())
        .map(|q| row(q, 1.0 / (1.0 - q), h.value_at_quantile(q).min(max_ns)))
        .collect();
    out.push(row(1.0, h.len() as f64, max_ns));
    out
}

/// Where percentile `p` (0 ≤ p < 1) sits on the percentile axis: 1/(1−p), so that
/// 90 % is at 10, 99 % at 100, 99.9 % at 1000.
pub fn percentile_x(p: f64) -> f64 {
    1.0 / (1.0 - p)
}

/// The lower edge of log bin `k` (of [`BINS_PER_DECADE`] per decade), in ns; bin `k`'s
/// upper edge is `bin_edge(k + 1)`.
pub fn bin_edge(k: f64) -> f64 {
    10f64.powf(k / BINS_PER_DECADE)
}

/// The counts in log-spaced bins, ascending; empty bins are left out.
pub fn log_bins(h: &Histogram<u64>) -> Vec<Bin> {
    let mut out: Vec<Bin> = Vec::new();
    for v in h.iter_recorded() {
        // 0 ns (possible in a histogram whose lowest value is 1) goes in the first bin.
        let k = ((v.value_iterated_to().max(1) as f64).log10() * BINS_PER_DECADE).floor();
        match out.last_mut() {
            Some(last) if last.lo_ns == bin_edge(k) => last.count += v.count_at_value(),
            _ => out.push(Bin {
                lo_ns: bin_edge(k),
                hi_ns: bin_edge(k + 1.0),
                count: v.count_at_value(),
            }),
        }
    }
    out
}

impl Heatmap {
    /// The matrix of one-way medians, symmetric (a pair is measured once), from (CPU A,
    /// CPU B, median) per measured pair.
    pub fn new(
        mode: String,
        pairs: impl Iterator<Item = (usize, usize, Option<f64>)> + Clone,
    ) -> Heatmap {
        let mut cpus: Vec<usize> = pairs.clone().flat_map(|(a, b, _)| [a, b]).collect();
        cpus.sort_unstable();
        cpus.dedup();
        let n = cpus.len();
        let mut cells = vec![None; n * n];
        let at = |cpu| cpus.binary_search(&cpu).unwrap_or(0);
        for (a, b, median) in pairs {
            let (i, j) = (at(a), at(b));
            cells[i * n + j] = median;
            cells[j * n + i] = median;
        }
        Heatmap { mode, cpus, cells }
    }
}

// ---------------------------------------------------------------------------------------
// Cause shares

/// One segment of a CPU's bar of cause shares (`attribution`, drawn by `report::export::plot`).
#[derive(Debug, Clone, PartialEq)]
pub struct CauseShare {
    /// The cause as the result names it, or "other (N causes)".
    pub label: String,
    /// `None` for the "other" segment, which groups causes of several kinds.
    pub kind: Option<CauseKind>,
    /// Of the interrupted time: the stored `share_pct`, or the sum of those it groups.
    pub share_pct: f64,
}

/// Causes below this share (%) are grouped into one "other" segment: a sliver of a bar
/// cannot be told apart, and its legend entry would crowd out the causes that matter.
pub const SMALL_SHARE_PCT: f64 = 2.0;

/// At most this many causes get a segment of their own, the unaccounted time aside.
const NAMED_CAUSES: usize = 8;

/// The segments of a CPU's bar: each cause of at least [`SMALL_SHARE_PCT`] in order of
/// share (at most [`NAMED_CAUSES`]), then the rest as one "other (N causes)" segment
/// (a single leftover cause keeps its name), then the unaccounted time, always its own
/// segment. Shares are the stored ones, so the segments add up to what the rows do
/// (100 % within rounding); rows with a share that is not a finite number ≥ 0 (never
/// written, but a file can be edited) are left out.
pub fn cause_shares(a: &Attribution) -> Vec<CauseShare> {
    let mut rows: Vec<&CauseRow> = (a.causes.iter())
        .filter(|c| c.share_pct.is_finite() && c.share_pct >= 0.0)
        .collect();
    rows.sort_by(|x, y| y.share_pct.total_cmp(&x.share_pct));
    let share = |c: &CauseRow| CauseShare {
        label: c.cause.clone(),
        kind: Some(c.kind),
        share_pct: c.share_pct,
    };
    let (mut named, mut rest, mut unaccounted) = (Vec::new(), Vec::new(), Vec::new());
    for c in rows {
        if c.kind == CauseKind::Unaccounted {
            unaccounted.push(share(c));
        } else if named.len() < NAMED_CAUSES && c.share_pct >= SMALL_SHARE_PCT {
            named.push(share(c));
        } else {
            rest.push(c);
        }
    }
    match rest.as_slice() {
        [] => {}
        [one] => named.push(share(one)),
        many => named.push(CauseShare {
            label: format!("other ({} causes)", many.len()),
            kind: None,
            share_pct: many.iter().map(|c| c.share_pct).sum(),
        }),
    }
    named.extend(unaccounted);
    named
}

// ---------------------------------------------------------------------------------------
// Names

/// Letters, digits, `.`, `_` and `-` only, so that a name is a file name anywhere.
pub fn file_safe(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            c if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') => c,
            _ => '_',
        })
        .collect()
}

/// Names that repeat (two timer threads on one CPU, two keys that map to one file-safe
/// name) get `-2`, `-3`, … in order.
pub fn unique_names<'a>(names: impl IntoIterator<Item = &'a mut String>) {
    let mut seen = std::collections::HashSet::new();
    for name in names {
        let base = name.clone();
        let mut n = 1;
        while !seen.insert(name.clone()) {
            n += 1;
            *name = format!("{base}-{n}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decade_starts_are_the_summary_quantiles() {
        let l = levels(10_000);
        for q in [0.0, 0.9, 0.99, 0.999, 0.9999] {
            assert!(l.contains(&q), "{q} in {l:?}");
        }
        assert_eq!(l.len(), 41);
        assert!(l.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(levels(1), [0.0]);
    }

    #[test]
    fn percentile_axis_puts_99_at_100_and_999_at_1000() {
        assert!((percentile_x(0.9) - 10.0).abs() < 1e-9);
        assert!((percentile_x(0.99) - 100.0).abs() < 1e-9);
        assert!((percentile_x(0.999) - 1000.0).abs() < 1e-9);
    }

    #[test]
    fn bins_keep_every_count() {
        let mut lh = crate::stats::LatencyHistogram::new();
        for v in [0, 1, 100, 105, 2000, 2000, 3_000_000] {
            lh.record(v);
        }
        let bins = log_bins(lh.inner());
        let counts: Vec<u64> = bins.iter().map(|b| b.count).collect();
        assert_eq!(counts, [2, 1, 1, 2, 1]);
        assert!(bins.iter().all(|b| b.lo_ns < b.hi_ns));
        assert!((bins[1].lo_ns - 100.0).abs() < 1e-9 && bins[1].hi_ns < 105.0);
        assert!(bins[2].lo_ns <= 105.0 && bins[2].hi_ns > 105.0);
    }

    #[test]
    fn the_curve_ends_at_the_exact_maximum() {
        let mut lh = crate::stats::LatencyHistogram::new();
        for v in 1..=1000 {
            lh.record(v * 997);
        }
        let rows = percentile_rows(lh.inner(), 997_000);
        let last = rows.last().unwrap();
        assert_eq!((last.q, last.x, last.value_ns), (1.0, 1000.0, 997_000));
        assert_eq!(last.at_or_below, 1000);
        assert!(rows.iter().all(|r| r.value_ns <= 997_000));
        assert!(rows.windows(2).all(|w| w[0].value_ns <= w[1].value_ns));
    }

    #[test]
    fn a_heat_map_is_symmetric_with_an_empty_diagonal() {
        let m = Heatmap::new(
            "load".into(),
            [(2, 0, Some(40.0)), (0, 5, None)].into_iter(),
        );
        assert_eq!(m.cpus, [0, 2, 5]);
        assert_eq!(m.cells[1], Some(40.0));
        assert_eq!(m.cells[3], Some(40.0));
        assert!(m.cells.iter().step_by(4).all(Option::is_none));
    }

    fn row(kind: CauseKind, cause: &str, share_pct: f64) -> CauseRow {
        CauseRow {
            share_pct,
            median_ns: 1,
            max_ns: 1,
            ..CauseRow::made_up(kind, cause, 1, 1, 1)
        }
    }

    fn attribution(causes: Vec<CauseRow>) -> Attribution {
        Attribution::of_causes(causes, 1, 1)
    }

    #[test]
    fn small_causes_are_grouped_and_the_unaccounted_time_comes_last() {
        use CauseKind::*;
        let a = attribution(vec![
            row(Unaccounted, "unaccounted", 20.0),
            row(Vector, "vector local_timer", 50.0),
            row(Irq, "irq 36 virtio", 27.0),
            row(Softirq, "softirq RCU", 1.5),
            row(Task, "task a:1", 1.0),
            row(Softirq, "softirq TIMER", 0.5),
            row(Task, "bad", f64::NAN),
        ]);
        let s = cause_shares(&a);
        let labels: Vec<&str> = s.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "vector local_timer",
                "irq 36 virtio",
                "other (3 causes)",
                "unaccounted"
            ]
        );
        assert_eq!(s[2].kind, None);
        assert!((s[2].share_pct - 3.0).abs() < 1e-9);
        let sum: f64 = s.iter().map(|s| s.share_pct).sum();
        assert!((sum - 100.0).abs() < 1e-9, "{sum}");
        // One small cause keeps its name; no causes give no segments.
        let s = cause_shares(&attribution(vec![
            row(Vector, "tick", 99.0),
            row(Irq, "irq 1", 1.0),
        ]));
        assert_eq!(s[1].label, "irq 1");
        assert!(cause_shares(&attribution(Vec::new())).is_empty());
    }

    #[test]
    fn at_most_the_named_causes_get_their_own_segment() {
        let causes = (0..12)
            .map(|i| row(CauseKind::Irq, &format!("irq {i}"), 100.0 / 12.0))
            .collect();
        let s = cause_shares(&attribution(causes));
        assert_eq!(s.len(), NAMED_CAUSES + 1);
        assert_eq!(s[NAMED_CAUSES].label, "other (4 causes)");
    }

    #[test]
    fn names_are_file_safe_and_unique() {
        assert_eq!(
            file_safe("ptp-/dev/ptp0:sys_offset"),
            "ptp-_dev_ptp0_sys_offset"
        );
        let mut names = [String::from("a_b"), "a_b".into(), "a_b".into()];
        unique_names(names.iter_mut());
        assert_eq!(names, ["a_b", "a_b-2", "a_b-3"]);
    }
}
