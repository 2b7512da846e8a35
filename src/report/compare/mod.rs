//! The compare room: `jitterscope compare` judged (here), its rows of causes and its views
//! (terminal, Markdown, HTML); it sits on top and may use every other room, and none uses it.
//!
//! `jitterscope compare`: the same probe and CPU across runs, with a verdict per row.
//!
//! Rows are the distributions of `export::distributions`, matched by probe, key and
//! metric. The first run is the baseline; every later run is judged against it.
//!
//! # How "clear" is judged
//!
//! A verdict needs a difference that is both large enough to matter and unlikely to be
//! chance:
//! - **Entries with a series** (noise, timer): the run's intervals are the samples. A
//!   two-sided Mann–Whitney test compares the per-interval worst gap (and, for noise, the
//!   per-interval time lost) of the two runs; the difference is clear when p < 0.01 and
//!   the medians of those per-interval values differ by at least 20 %. Intervals, not
//!   single interruptions, are the unit because interruptions come in bursts: millions of
//!   them are far from independent, while a host's phases still show as a spread between
//!   intervals.
//! - **Other entries** (pingpong, c2c, queue, work, syscalls, ptp): the distribution-free
//!   99 % confidence intervals of p50 and of p99, from the order statistics of each
//!   histogram, must not overlap, and the figures must differ by at least 10 %.
//! - Each test votes worse, better or nothing; votes that disagree give "mixed".
//!
//! Samples from one run are not truly independent (a host has phases longer than any
//! interval), so a verdict on one pair of runs is a lead to confirm by repeating them.

pub mod compare_causes;
pub mod compare_view;

pub use crate::stats::rank::mann_whitney_p;
use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::report::ResultFile;
use crate::report::compare::compare_causes::{CauseGrid, cause_grids};
use crate::report::export::{self, Dist};
use crate::report::result::dist::SeriesView;
use crate::stats::series::SeriesOut;
use crate::system::audit::{Finding, Severity};

/// Significance level of every test.
pub const ALPHA: f64 = 0.01;
/// Smallest change in the per-interval medians that counts (series test).
pub const SERIES_MIN_CHANGE: f64 = 0.20;
/// Smallest change in p50 or p99 that counts (histogram test).
pub const QUANTILE_MIN_CHANGE: f64 = 0.10;
/// Fewest intervals per run for the series test.
pub const MIN_INTERVALS: usize = 8;
/// z for a two-sided 99 % interval.
const Z99: f64 = 2.5758;

/// One saved run, as named on the command line.
pub struct Run<'a> {
    pub label: String,
    pub path: PathBuf,
    pub result: &'a ResultFile,
}

/// What `compare` found.
#[derive(Debug, Clone)]
pub struct Comparison {
    pub labels: Vec<String>,
    /// Differences between the runs' hosts, kernels or settings, baseline first.
    pub differences: Vec<String>,
    pub rows: Vec<Row>,
    /// Each traced noise or timer entry's causes across the runs (`compare_causes`).
    pub causes: Vec<CauseGrid>,
}

/// One distribution across the runs.
#[derive(Debug, Clone)]
pub struct Row {
    pub probe: &'static str,
    pub key: String,
    pub metric: &'static str,
    /// False when any run's figures are unconfirmed (the row is then never judged).
    pub trusted: bool,
    /// Per run; None where the run has no such entry.
    pub figures: Vec<Option<Figures>>,
    /// Per run against the baseline; None for the baseline and where either is missing.
    pub judgements: Vec<Option<Judgement>>,
}

impl Row {
    /// The metric as every table shows it: starred when unconfirmed.
    pub fn metric_label(&self) -> String {
        match self.trusted {
            true => self.metric.to_string(),
            false => format!(
                "{}{}",
                self.metric,
                crate::report::result::dist::UNCONFIRMED_MARK
            ),
        }
    }
}

/// The figures shown per run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Figures {
    pub count: u64,
    pub p50_ns: Option<u64>,
    pub p99_ns: Option<u64>,
    pub p999_ns: Option<u64>,
    pub max_ns: Option<u64>,
    pub rate_per_s: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    Better,
    Worse,
    NoClearDifference,
    Mixed,
    /// The figures are unconfirmed (pingpong's one-way halved round trip): no verdict.
    NotJudged,
}

impl Verdict {
    pub fn words(self) -> &'static str {
        match self {
            Verdict::Better => "better",
            Verdict::Worse => "worse",
            Verdict::NoClearDifference => "no clear difference",
            Verdict::Mixed => "mixed",
            Verdict::NotJudged => "not judged",
        }
    }
}

/// A verdict and the figures it rests on, in words.
#[derive(Debug, Clone, PartialEq)]
pub struct Judgement {
    pub verdict: Verdict,
    pub basis: String,
}

/// The one-paragraph statement of the method, printed under every comparison.
pub fn method() -> String {
    format!(
        "How verdicts are judged: noise and timer rows compare the worst gap or latest \
         wake-up (noise: and the time lost) per interval of the series with a two-sided \
         Mann-Whitney test; a row is \
         better or worse when p < {ALPHA} and the medians differ by at least {:.0} %. Other \
         rows need the 99 % confidence intervals of p50 or p99 (distribution-free, from the \
         histograms) not to overlap and a change of at least {:.0} %. Tests that disagree \
         give 'mixed'. Samples within a run are not fully independent: repeat the runs \
         before trusting a single verdict.",
        SERIES_MIN_CHANGE * 100.0,
        QUANTILE_MIN_CHANGE * 100.0
    )
}

/// Compares `runs`, the first being the baseline.
pub fn compare(runs: &[Run<'_>]) -> Result<Comparison, String> {
    let per_run: Vec<BTreeMap<(&str, String, &str), Dist<'_>>> =
        runs.iter().map(|r| keyed(r.result)).collect();
    let mut order: Vec<(&str, String, &str)> = Vec::new();
    for m in &per_run {
        for k in m.keys() {
            if !order.contains(k) {
                order.push(k.clone());
            }
        }
    }
    let mut rows = Vec::new();
    for k in order {
        let dists: Vec<Option<&Dist<'_>>> = per_run.iter().map(|m| m.get(&k)).collect();
        rows.push(row(&k.1, &dists, runs)?);
    }
    let mut differences = differences(runs);
    for r in runs {
        let unknown = export::distributions(r.result).1;
        if unknown > 0 {
            differences.push(format!(
                "{}: {unknown} entries of a newer probe kind were left out",
                r.label
            ));
        }
    }
    Ok(Comparison {
        labels: runs.iter().map(|r| r.label.clone()).collect(),
        differences,
        rows,
        causes: cause_grids(&runs.iter().map(|r| r.result).collect::<Vec<_>>()),
    })
}

/// A run's distributions by (probe, key, metric). A key that repeats (two timer threads
/// on one CPU) is numbered `#2`, `#3` … in entry order, so none replaces another.
fn keyed(r: &ResultFile) -> BTreeMap<(&'static str, String, &'static str), Dist<'_>> {
    let mut m = BTreeMap::new();
    let watched = r
        .watch
        .iter()
        .flat_map(crate::report::terminal::watch::wakeup_dists);
    for d in export::distributions(r).0.into_iter().chain(watched) {
        let mut key = (d.probe, d.key.clone(), d.metric);
        let mut n = 1;
        while m.contains_key(&key) {
            n += 1;
            key.1 = format!("{}#{n}", d.key);
        }
        m.insert(key, d);
    }
    m
}

/// One row; `key` is the row's own (numbered when it repeats in a run).
fn row(key: &str, dists: &[Option<&Dist<'_>>], runs: &[Run<'_>]) -> Result<Row, String> {
    let d0 = dists
        .iter()
        .flatten()
        .next()
        .expect("a row exists because a run has it");
    let mut hists = Vec::new();
    for (d, r) in dists.iter().zip(runs) {
        let decoded = d.map_or(Ok(None), |d| d.decode_histogram());
        hists.push(decoded.map_err(|e| format!("{}: {e}", r.path.display()))?);
    }
    let figures = dists.iter().map(|d| d.map(figures_of)).collect();
    let judgements = (0..dists.len())
        .map(|i| match (i, dists[0], dists[i]) {
            (0, ..) => None,
            (_, Some(a), Some(b)) => Some(judge(a, b, hists[0].as_ref(), hists[i].as_ref())),
            _ => None,
        })
        .collect();
    Ok(Row {
        probe: d0.probe,
        key: key.to_string(),
        metric: d0.metric,
        trusted: dists.iter().flatten().all(|d| d.trusted),
        figures,
        judgements,
    })
}

fn figures_of(d: &Dist<'_>) -> Figures {
    let s = &d.summary;
    Figures {
        count: s.count,
        p50_ns: s.p50_ns,
        p99_ns: s.p99_ns,
        p999_ns: s.p999_ns,
        max_ns: s.max_ns,
        rate_per_s: d.rate_per_s,
    }
}

// ---------------------------------------------------------------------------------------
// Verdicts

/// One test's vote: +1 worse, −1 better, 0 no clear difference; and its basis in words.
type Vote = (i8, String);

fn judge(
    a: &Dist<'_>,
    b: &Dist<'_>,
    ha: Option<&hdrhistogram::Histogram<u64>>,
    hb: Option<&hdrhistogram::Histogram<u64>>,
) -> Judgement {
    if !a.trusted || !b.trusted {
        return Judgement {
            verdict: Verdict::NotJudged,
            basis: "the one-way figures are unconfirmed (the TSC check failed), so they are \
                    the round trip halved: judge the rtt row"
                .into(),
        };
    }
    let (votes, fallback) = match (a.series, b.series) {
        (Some(sa), Some(sb)) => match series_votes(&sa, sa.series, sb.series) {
            Some(v) => (Some(v), ""),
            None => (
                None,
                "series too short or of unlike intervals, so by histogram: ",
            ),
        },
        _ => (None, ""),
    };
    let votes = votes.unwrap_or_else(|| match (ha, hb) {
        (Some(ha), Some(hb)) => {
            let mut v = histogram_votes(ha, hb);
            if let Some(first) = v.first_mut() {
                first.1.insert_str(0, fallback);
            }
            v
        }
        _ => vec![(0, "no histogram to compare".to_string())],
    });
    let worse = votes.iter().any(|v| v.0 > 0);
    let better = votes.iter().any(|v| v.0 < 0);
    let verdict = match (worse, better) {
        (true, true) => Verdict::Mixed,
        (true, false) => Verdict::Worse,
        (false, true) => Verdict::Better,
        (false, false) => Verdict::NoClearDifference,
    };
    let basis = votes
        .into_iter()
        .map(|v| v.1)
        .collect::<Vec<_>>()
        .join("; ");
    Judgement { verdict, basis }
}

/// The series test, or None when either run has too few intervals or the intervals
/// cannot be brought to the same length.
fn series_votes(view: &SeriesView, a: &SeriesOut, b: &SeriesOut) -> Option<Vec<Vote>> {
    let interval = a.interval_ns.max(b.interval_ns);
    let (a, b) = (regroup(a, interval)?, regroup(b, interval)?);
    if a.max_ns.len() < MIN_INTERVALS || b.max_ns.len() < MIN_INTERVALS {
        return None;
    }
    let per = format!(
        "per {}",
        crate::report::terminal::table::interval_words(interval)
    );
    let worst = view.worst;
    let mut votes = vec![series_vote(&format!("{worst} {per}"), &a.max_ns, &b.max_ns)];
    if view.time_lost {
        votes.push(series_vote(
            &format!("time lost {per}"),
            &a.total_ns,
            &b.total_ns,
        ));
    }
    Some(votes)
}

fn series_vote(what: &str, a: &[u64], b: &[u64]) -> Vote {
    let (ma, mb) = (median(a), median(b));
    let p = mann_whitney_p(a, b);
    let change = relative(ma, mb);
    let clear = p < ALPHA && change.abs() >= SERIES_MIN_CHANGE;
    let vote = if clear { change.signum() as i8 } else { 0 };
    let change = change_words(change);
    (
        vote,
        format!(
            "{what}: median {ma:.0} → {mb:.0} ns ({change}), p = {}",
            p_words(p)
        ),
    )
}

/// `s` with intervals merged to `interval_ns` (a whole multiple of its own), or None.
fn regroup(s: &SeriesOut, interval_ns: u64) -> Option<SeriesOut> {
    if s.interval_ns == 0 || !interval_ns.is_multiple_of(s.interval_ns) {
        return None;
    }
    let k = (interval_ns / s.interval_ns) as usize;
    // Whole chunks only: a short last one would be a shorter interval.
    let fold = |v: &[u64], f: fn(u64, u64) -> u64| -> Vec<u64> {
        v.chunks_exact(k)
            .map(|c| c.iter().copied().fold(0, f))
            .collect()
    };
    Some(SeriesOut {
        interval_ns,
        events: fold(&s.events, u64::saturating_add),
        total_ns: fold(&s.total_ns, u64::saturating_add),
        max_ns: fold(&s.max_ns, u64::max),
    })
}

/// The histogram test on p50 and p99.
fn histogram_votes(
    a: &hdrhistogram::Histogram<u64>,
    b: &hdrhistogram::Histogram<u64>,
) -> Vec<Vote> {
    if a.is_empty() || b.is_empty() {
        return vec![(0, "a run has no samples".to_string())];
    }
    [(0.5, "p50"), (0.99, "p99")]
        .into_iter()
        .map(|(q, name)| {
            let (pa, pb) = (a.value_at_quantile(q), b.value_at_quantile(q));
            let (la, ua) = quantile_interval(a, q);
            let (lb, ub) = quantile_interval(b, q);
            let change = relative(pa as f64, pb as f64);
            let apart = ub < la || lb > ua;
            let clear = apart && change.abs() >= QUANTILE_MIN_CHANGE;
            let vote = if clear { change.signum() as i8 } else { 0 };
            let overlap = if apart { "apart" } else { "overlap" };
            let change = change_words(change);
            (
                vote,
                format!(
                    "{name} {pa} → {pb} ns ({change}), 99 % intervals [{la}, {ua}] and [{lb}, {ub}] ns {overlap}"
                ),
            )
        })
        .collect()
}

/// The distribution-free confidence interval of quantile `q`: the values at the ranks
/// n·q ∓ z·√(n·q·(1−q)) (normal approximation to the binomial).
pub fn quantile_interval(h: &hdrhistogram::Histogram<u64>, q: f64) -> (u64, u64) {
    let n = h.len() as f64;
    let half = Z99 * (n * q * (1.0 - q)).sqrt();
    let at = |rank: f64| h.value_at_quantile((rank / n).clamp(0.0, 1.0));
    (at((n * q - half).floor()), at((n * q + half).ceil()))
}

fn median(v: &[u64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_unstable();
    let n = s.len();
    match n {
        0 => 0.0,
        _ if n % 2 == 1 => s[n / 2] as f64,
        _ => (s[n / 2 - 1] as f64 + s[n / 2] as f64) / 2.0,
    }
}

/// (b − a) / a; a zero baseline counts any rise as +100 %.
pub fn relative(a: f64, b: f64) -> f64 {
    if a > 0.0 {
        (b - a) / a
    } else if b > 0.0 {
        1.0
    } else {
        0.0
    }
}

pub fn change_words(c: f64) -> String {
    format!("{:+.0} %", c * 100.0)
}

fn p_words(p: f64) -> String {
    if p < 0.0001 {
        "< 0.0001".into()
    } else {
        format!("{p:.4}")
    }
}

// ---------------------------------------------------------------------------------------
// Differences between the runs

/// What differs between the baseline and each later run: host, kernel, settings,
/// privileges, probe configuration and the audit's findings.
fn differences(runs: &[Run<'_>]) -> Vec<String> {
    let Some(base) = runs.first() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for r in &runs[1..] {
        for (what, a, b) in facts(base.result)
            .into_iter()
            .zip(facts(r.result))
            .map(|(a, b)| (a.0, a.1, b.1))
        {
            if a != b {
                out.push(format!(
                    "{what} differs: {} has {a}, {} has {b}",
                    base.label, r.label
                ));
            }
        }
        for d in config_differences(base.result, r.result) {
            out.push(format!("{d} ({} vs {})", base.label, r.label));
        }
        for d in audit_differences(base.result, r.result) {
            out.push(format!("{d} ({} vs {})", base.label, r.label));
        }
    }
    out
}

/// The facts whose difference is flagged.
fn facts(r: &ResultFile) -> Vec<(&'static str, String)> {
    let h = &r.host;
    vec![
        ("host", h.hostname.clone()),
        (
            "kernel",
            format!("{} {}", h.kernel_release, h.kernel_version),
        ),
        (
            "preemption",
            h.preempt_rt()
                .map_or("not PREEMPT_RT", |_| "PREEMPT_RT")
                .into(),
        ),
        ("kernel command line", h.cmdline.clone()),
        ("CPU model", h.cpu_model.clone()),
        ("online CPUs", h.cpus_online.to_string()),
        (
            "virtualisation",
            h.virtualization.clone().unwrap_or_else(|| "none".into()),
        ),
        ("isolated CPUs", h.isolation.isolated.to_string()),
        ("nohz_full CPUs", h.isolation.nohz_full.to_string()),
        ("root", r.run.privileges.root.to_string()),
        ("memory locked", r.run.privileges.memory_locked.to_string()),
        ("jitterscope version", r.run.tool()),
        ("interrupted", r.run.interrupted.to_string()),
        ("degradations", degradations(r)),
    ]
}

/// The run's degradations by kind, so that one run measured degraded and the other not
/// is flagged.
fn degradations(r: &ResultFile) -> String {
    let kinds: Vec<&str> = r.run.degraded.iter().map(|d| d.kind.as_str()).collect();
    match kinds.is_empty() {
        true => "none".into(),
        false => kinds.join(", "),
    }
}

/// Entries whose configuration or scheduling differ, by probe and key.
fn config_differences(a: &ResultFile, b: &ResultFile) -> Vec<String> {
    // Every entry's settings, as a set per probe: a change in any entry shows.
    let settings = |r: &ResultFile| -> BTreeMap<String, std::collections::BTreeSet<String>> {
        let mut m: BTreeMap<String, std::collections::BTreeSet<String>> = BTreeMap::new();
        for e in &r.probes {
            let Ok(v) = serde_json::to_value(e) else {
                continue;
            };
            let probe = v
                .get("probe")
                .and_then(|p| p.as_str())
                .unwrap_or("?")
                .to_string();
            let cfg = serde_json::json!({
                "config": v.get("config"),
                "policy": v.pointer("/thread/policy"),
                "priority": v.pointer("/thread/priority"),
            });
            m.entry(probe).or_default().insert(cfg.to_string());
        }
        m
    };
    let (sa, sb) = (settings(a), settings(b));
    sa.iter()
        .filter(|(k, v)| sb.get(*k).is_some_and(|w| w != *v))
        .map(|(k, _)| format!("{k} settings differ"))
        .collect()
}

/// Findings whose value moves from run to run on an unchanged host (steal time grows,
/// kernel threads come and go, IRQ and softirq counts rise): only a change of severity
/// is flagged for them.
const VOLATILE_FINDINGS: [&str; 4] = ["steal", "kthreads", "irq-", "softirqs-"];

/// Audit findings whose value or severity changed.
fn audit_differences(a: &ResultFile, b: &ResultFile) -> Vec<String> {
    let (Some(fa), Some(fb)) = (&a.host.audit, &b.host.audit) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let notable = |f: &&Finding| matches!(f.severity, Severity::Warn | Severity::Bad);
    for f in fa.findings.iter().filter(notable) {
        if !fb.findings.iter().any(|g| g.id == f.id) {
            out.push(format!("audit {} ({}) is gone", f.id, f.value));
        }
    }
    for g in fb.findings.iter().filter(notable) {
        if !fa.findings.iter().any(|f| f.id == g.id) {
            out.push(format!("audit {} ({}) is new", g.id, g.value));
        }
    }
    for f in &fa.findings {
        if let Some(g) = fb.findings.iter().find(|g| g.id == f.id)
            && (g.severity != f.severity
                || (g.value != f.value
                    && !VOLATILE_FINDINGS
                        .iter()
                        .any(|v| f.id.to_string().starts_with(v))))
        {
            out.push(format!(
                "audit {}: '{}' became '{}'",
                f.id, f.value, g.value
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 48: a run on a PREEMPT_RT kernel beside one on another kernel says so, from
    /// the recorded source or, in an older file, the version string.
    #[test]
    fn issue48_a_preempt_rt_kernel_beside_another_is_a_difference() {
        let base =
            ResultFile::parse(include_str!("../../../tests/fixtures/all-probes.json")).unwrap();
        let mut rt = base.clone();
        rt.host.preempt_rt = Some("/sys/kernel/realtime".into());
        let run = |label: &str, result| Run {
            label: label.into(),
            path: PathBuf::from(label),
            result,
        };
        let diff = differences(&[run("a", &base), run("b", &rt)]);
        assert!(
            diff.iter().any(
                |d| d.starts_with("preemption differs: a has not PREEMPT_RT, b has PREEMPT_RT")
            ),
            "{diff:?}"
        );
        let mut old = base.clone();
        old.host.kernel_version = "#1 SMP PREEMPT_RT Debian 6.1.192-3".into();
        assert_eq!(old.host.preempt_rt(), Some("the version string"));
    }

    #[test]
    fn mann_whitney_matches_known_values() {
        // Fully separated samples of 10: exact two-sided p is 1.1e-5; the normal
        // approximation with continuity correction gives about 1.8e-4.
        let a: Vec<u64> = (1..=10).collect();
        let b: Vec<u64> = (11..=20).collect();
        let p = mann_whitney_p(&a, &b);
        assert!(p < 0.001, "{p}");
        // Interleaved samples: no difference.
        let a: Vec<u64> = (0..20).step_by(2).collect();
        let b: Vec<u64> = (1..20).step_by(2).collect();
        assert!(mann_whitney_p(&a, &b) > 0.5);
        // All equal: no evidence at all.
        assert_eq!(mann_whitney_p(&[5; 8], &[5; 8]), 1.0);
    }

    #[test]
    fn regroup_merges_whole_multiples_only() {
        let s = SeriesOut {
            interval_ns: 100,
            events: vec![1, 2, 3, 4, 5],
            total_ns: vec![10, 20, 30, 40, 50],
            max_ns: vec![5, 9, 1, 2, 7],
        };
        // The fifth interval alone would be half an interval: left out.
        let r = regroup(&s, 200).unwrap();
        assert_eq!(r.events, [3, 7]);
        assert_eq!(r.total_ns, [30, 70]);
        assert_eq!(r.max_ns, [9, 2]);
        assert!(regroup(&s, 150).is_none());
    }

    /// The view of a noise entry's series: worst gap and time lost.
    fn noise_view(s: &SeriesOut) -> SeriesView<'_> {
        SeriesView {
            probe: "noise",
            cpu: 1,
            series: s,
            largest: &[],
            gap: "largest interruption",
            worst: "worst gap",
            time_lost: true,
        }
    }

    fn votes(a: &SeriesOut, b: &SeriesOut) -> Option<Vec<Vote>> {
        series_votes(&noise_view(a), a, b)
    }

    fn series(max: &[u64]) -> SeriesOut {
        SeriesOut {
            interval_ns: 62_500_000,
            events: vec![1; max.len()],
            total_ns: max.to_vec(),
            max_ns: max.to_vec(),
        }
    }

    #[test]
    fn a_clear_rise_is_worse_and_a_small_one_is_not() {
        let quiet: Vec<u64> = (0..32).map(|i| 10_000 + (i * 37 % 11) * 100).collect();
        let loud: Vec<u64> = quiet.iter().map(|v| v * 3).collect();
        let v = votes(&series(&quiet), &series(&loud)).unwrap();
        assert!(v.iter().all(|x| x.0 == 1), "{v:?}");
        let v = votes(&series(&loud), &series(&quiet)).unwrap();
        assert!(v.iter().all(|x| x.0 == -1), "{v:?}");
        // 5 % higher everywhere: significant, but below the change that counts.
        let slight: Vec<u64> = quiet.iter().map(|v| v * 105 / 100).collect();
        let v = votes(&series(&quiet), &series(&slight)).unwrap();
        assert!(v.iter().all(|x| x.0 == 0), "{v:?}");
        // Too few intervals: no series test.
        assert!(votes(&series(&quiet[..4]), &series(&loud[..4])).is_none());
    }

    #[test]
    fn histogram_intervals_separate_only_real_shifts() {
        let mut a = hdrhistogram::Histogram::<u64>::new(3).unwrap();
        let mut b = a.clone();
        let mut c = a.clone();
        for i in 0..10_000u64 {
            a.record(1_000 + i % 100).unwrap();
            b.record(1_000 + (i * 7) % 100).unwrap();
            c.record(1_500 + i % 100).unwrap();
        }
        assert!(histogram_votes(&a, &b).iter().all(|v| v.0 == 0));
        assert!(histogram_votes(&a, &c).iter().all(|v| v.0 == 1));
        let (lo, hi) = quantile_interval(&a, 0.5);
        assert!(lo <= a.value_at_quantile(0.5) && a.value_at_quantile(0.5) <= hi);
    }
}
