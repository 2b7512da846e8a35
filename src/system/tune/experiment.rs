//! The statistics of `tune`: is one step's set of blocks better than the baseline's?
//!
//! Pure: values in, a decision with its figures out, so that it is tested on known data
//! and never touches the host. Blocks are interleaved (baseline, step, baseline, step …)
//! so that a slow drift of the host lands on both sides alike; what is compared is the
//! two sets of per-block values of one metric, lower being better for every metric.
//!
//! The test is Mann–Whitney's (exact for small samples without ties, else `compare`'s
//! normal approximation with the tie correction), the effect is the Hodges–Lehmann shift
//! (the median of every step − baseline difference) and its interval is the
//! distribution-free one that belongs to the test (Moses): the differences at the ranks
//! the test's critical value sets. So the interval excludes 0 exactly when the test
//! rejects at the same level, and the decision cannot disagree with its own figures.

use serde::{Deserialize, Serialize};

use crate::stats::rank::mann_whitney_p;

/// The level of the test and of the interval: 1 %. A sham step (one that changes
/// nothing) is then kept or reverted by chance in about 1 % of trials, each way ½ %.
pub const ALPHA: f64 = 0.01;

/// Sample sizes up to this (each side) get the exact null distribution of U.
const EXACT_MAX: usize = 25;

/// What happened to a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    /// Better than the baseline at the test's level: it stays, later steps build on it.
    Kept,
    /// Worse than the baseline at the test's level: undone.
    Reverted,
    /// Neither shown better nor shown worse: undone, since nothing shows it helps.
    Inconclusive,
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Kept => "kept",
            Decision::Reverted => "reverted",
            Decision::Inconclusive => "inconclusive",
        }
    }
}

/// The figures behind a decision. Shift and interval are step − baseline in the metric's
/// unit: negative is better.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Judgement {
    pub decision: Decision,
    /// Two-sided p of Mann–Whitney's U.
    pub p: f64,
    /// Whether `p` is exact or the normal approximation (ties, or large samples).
    pub exact: bool,
    /// Hodges–Lehmann estimate of step − baseline.
    pub shift: f64,
    /// Its distribution-free interval at 1 − `ALPHA`: unbounded when the blocks are too
    /// few for any, which JSON writes as null and reads back as such.
    #[serde(deserialize_with = "null_is_neg_inf")]
    pub ci_low: f64,
    #[serde(deserialize_with = "null_is_inf")]
    pub ci_high: f64,
    /// The medians of each side.
    pub baseline_median: f64,
    pub step_median: f64,
    /// The level `p` was held to: with the sequential test, this look's share of the
    /// run's level (`TuneEntry::alpha`).
    pub alpha: f64,
    /// Pairs judged (the sequential test: at the look that decided); 0 in older files.
    #[serde(default)]
    pub pairs: u32,
    /// Pairs whose step block was lower (better) and higher than its baseline block.
    #[serde(default)]
    pub better: u32,
    #[serde(default)]
    pub worse: u32,
    /// The look (1-based) the decision was made at; 0 in older files.
    #[serde(default)]
    pub look: u32,
    /// Judged by the paired signed-rank test (sequential); false (older files): by
    /// Mann–Whitney on the two sides' blocks.
    #[serde(default)]
    pub paired: bool,
}

fn null_is_neg_inf<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NEG_INFINITY))
}

fn null_is_inf<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::INFINITY))
}

/// Judges `step` against `baseline` (lower is better) at level `alpha`.
pub fn judge(baseline: &[u64], step: &[u64], alpha: f64) -> Judgement {
    let (n1, n2) = (baseline.len(), step.len());
    let mut diffs: Vec<i128> = Vec::with_capacity(n1 * n2);
    for &b in step {
        for &a in baseline {
            diffs.push(b as i128 - a as i128);
        }
    }
    diffs.sort_unstable();
    let ties = has_ties(baseline, step);
    let exact = n1 > 0 && n2 > 0 && n1 <= EXACT_MAX && n2 <= EXACT_MAX && !ties;
    let p = if exact {
        exact_p(u_of(baseline, step), n1, n2)
    } else {
        mann_whitney_p(baseline, step)
    };
    let shift = median_i(&diffs);
    let (ci_low, ci_high) = match interval_rank(n1, n2, alpha, exact) {
        Some(k) if !diffs.is_empty() => (diffs[k - 1] as f64, diffs[diffs.len() - k] as f64),
        // Too few blocks for any interval at this level: it spans everything.
        _ => (f64::NEG_INFINITY, f64::INFINITY),
    };
    let decision = if p < alpha && ci_high < 0.0 {
        Decision::Kept
    } else if p < alpha && ci_low > 0.0 {
        Decision::Reverted
    } else {
        Decision::Inconclusive
    };
    Judgement {
        decision,
        p,
        exact,
        shift,
        ci_low,
        ci_high,
        baseline_median: median_u(baseline),
        step_median: median_u(step),
        alpha,
        pairs: n1.min(n2) as u32,
        better: 0,
        worse: 0,
        look: 0,
        paired: false,
    }
}

/// The smallest number of pairs (of `n` per side, each a baseline then a step block)
/// with which a step that beats the baseline in every pair can be kept at `alpha`.
pub fn min_pairs(alpha: f64) -> usize {
    (1..=EXACT_MAX)
        .find(|&n| exact_p(0.0, n, n) < alpha)
        .unwrap_or(EXACT_MAX)
}

/// U of the step sample: how many (baseline, step) pairs have step < baseline … counted
/// as the number of pairs where the baseline is below the step (ties count ½, absent).
fn u_of(baseline: &[u64], step: &[u64]) -> f64 {
    let mut u = 0.0;
    for &a in baseline {
        for &b in step {
            if a < b {
                u += 1.0;
            } else if a == b {
                u += 0.5;
            }
        }
    }
    u
}

fn has_ties(a: &[u64], b: &[u64]) -> bool {
    let mut all: Vec<u64> = a.iter().chain(b).copied().collect();
    all.sort_unstable();
    all.windows(2).any(|w| w[0] == w[1])
}

/// counts[u] = how many of the C(n1+n2, n1) orderings give U = u.
fn u_counts(n1: usize, n2: usize) -> Vec<f64> {
    // f[i][j][u], built up over i and j: the last value is either from the first
    // sample (it exceeds all j of the second: U grows by j) or from the second.
    let max = n1 * n2;
    let mut prev: Vec<Vec<f64>> = vec![vec![0.0; max + 1]; n2 + 1];
    for row in prev.iter_mut() {
        row[0] = 1.0; // i = 0: one ordering, U = 0
    }
    for _i in 1..=n1 {
        let mut cur: Vec<Vec<f64>> = vec![vec![0.0; max + 1]; n2 + 1];
        cur[0][0] = 1.0;
        for j in 1..=n2 {
            for u in 0..=max {
                let from_first = if u >= j { prev[j][u - j] } else { 0.0 };
                cur[j][u] = from_first + cur[j - 1][u];
            }
        }
        prev = cur;
    }
    prev.swap_remove(n2)
}

/// Exact two-sided p of U (no ties).
fn exact_p(u: f64, n1: usize, n2: usize) -> f64 {
    let counts = u_counts(n1, n2);
    let total: f64 = counts.iter().sum();
    let mean = (n1 * n2) as f64 / 2.0;
    let lo = if u <= mean { u } else { (n1 * n2) as f64 - u };
    let tail: f64 = counts
        .iter()
        .enumerate()
        .filter(|(k, _)| (*k as f64) <= lo + 1e-9)
        .map(|(_, c)| c)
        .sum();
    (2.0 * tail / total).min(1.0)
}

/// The rank k (1-based) of the interval's ends among the sorted differences: the lower
/// end is the k-th smallest, the upper the k-th largest. `None` when even the extremes
/// do not reach the level.
fn interval_rank(n1: usize, n2: usize, alpha: f64, exact: bool) -> Option<usize> {
    if n1 == 0 || n2 == 0 {
        return None;
    }
    if exact || (n1 <= EXACT_MAX && n2 <= EXACT_MAX) {
        // The largest c with P(U ≤ c) ≤ α/2; then k = c + 1.
        let counts = u_counts(n1, n2);
        let total: f64 = counts.iter().sum();
        let mut cum = 0.0;
        let mut c = None;
        for (u, n) in counts.iter().enumerate() {
            cum += n;
            if cum / total <= alpha / 2.0 {
                c = Some(u);
            } else {
                break;
            }
        }
        return c.map(|c| c + 1);
    }
    let (a, b) = (n1 as f64, n2 as f64);
    let z = z_two_sided(alpha);
    let k = (a * b / 2.0 - z * (a * b * (a + b + 1.0) / 12.0).sqrt()).floor();
    (k >= 1.0).then_some(k as usize)
}

/// z with P(|Z| > z) = alpha, for the levels offered.
fn z_two_sided(alpha: f64) -> f64 {
    // Bisection on erfc through the normal approximation's p: precise enough here.
    let (mut lo, mut hi) = (0.0f64, 10.0f64);
    for _ in 0..100 {
        let mid = (lo + hi) / 2.0;
        // P(|Z| > mid) for a standard normal: by the p of a one-pair U.
        if normal_two_sided(mid) > alpha {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    (lo + hi) / 2.0
}

fn normal_two_sided(z: f64) -> f64 {
    // erfc(z/√2) by the same series compare uses, through a trapezoid of the density:
    // cheap and exact enough (1e-6) for choosing a rank.
    let steps = 20_000;
    let h = (z.max(0.0)) / steps as f64;
    let f = |x: f64| (-x * x / 2.0).exp() / (2.0 * std::f64::consts::PI).sqrt();
    let inner: f64 = (0..steps)
        .map(|i| (f(i as f64 * h) + f((i + 1) as f64 * h)) * h / 2.0)
        .sum();
    (1.0 - 2.0 * inner).max(0.0)
}

fn median_i(v: &[i128]) -> f64 {
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2] as f64,
        n => (v[n / 2 - 1] as f64 + v[n / 2] as f64) / 2.0,
    }
}

fn median_u(v: &[u64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_unstable();
    let w: Vec<i128> = s.iter().map(|&x| x as i128).collect();
    median_i(&w)
}

/// The order of the blocks for `pairs` pairs: false = baseline, true = step.
pub fn schedule(pairs: usize) -> Vec<bool> {
    (0..pairs).flat_map(|_| [false, true]).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two pairs allow no interval: JSON writes ±∞ as null, and the file must read back
    /// (a `tune --blocks 2` result could not be reported before).
    #[test]
    fn an_unbounded_interval_survives_the_result_file() {
        let j = judge(&[5, 6], &[6, 7], ALPHA);
        assert_eq!((j.ci_low, j.ci_high), (f64::NEG_INFINITY, f64::INFINITY));
        let text = serde_json::to_string(&j).unwrap();
        assert!(text.contains("\"ci_low\":null"), "{text}");
        let back: Judgement = serde_json::from_str(&text).unwrap();
        assert_eq!(back, j);
    }

    #[test]
    fn exact_null_distribution_sums_to_the_binomial() {
        let c = u_counts(3, 2);
        // C(5,2) = 10 orderings, symmetric about 3.
        assert_eq!(c.iter().sum::<f64>(), 10.0);
        assert_eq!(c, vec![1.0, 1.0, 2.0, 2.0, 2.0, 1.0, 1.0]);
        // Complete separation of 6 and 6: p = 2/924.
        assert!((exact_p(0.0, 6, 6) - 2.0 / 924.0).abs() < 1e-12);
    }

    #[test]
    fn a_clear_improvement_is_kept_with_its_shift() {
        // RT throttling: the baseline's per-block max is ~45 ms, the step's ~1 ms.
        let base = [
            45_000_000, 44_100_000, 46_200_000, 43_900_000, 45_500_000, 44_800_000,
        ];
        let step = [1_000_000, 1_200_000, 900_000, 1_100_000, 950_000, 1_050_000];
        let j = judge(&base, &step, ALPHA);
        assert_eq!(j.decision, Decision::Kept);
        assert!(j.exact);
        assert!(j.p < 0.01);
        // Every difference lies between -45.3 ms and -42.7 ms; so do the shift and CI.
        assert!(j.shift < -42e6 && j.shift > -46e6, "{}", j.shift);
        assert!(j.ci_high < 0.0 && j.ci_low <= j.shift && j.shift <= j.ci_high);
    }

    #[test]
    fn a_clear_harm_is_reverted_and_overlap_is_inconclusive() {
        let base = [10, 11, 12, 13, 14, 15];
        let worse = [30, 31, 32, 33, 34, 35];
        assert_eq!(judge(&base, &worse, ALPHA).decision, Decision::Reverted);
        let same = [10, 12, 13, 16, 11, 9];
        let j = judge(&base, &same, ALPHA);
        assert_eq!(j.decision, Decision::Inconclusive);
        assert!(j.ci_low <= 0.0 && j.ci_high >= 0.0);
    }

    #[test]
    fn hodges_lehmann_of_a_pure_shift_is_the_shift() {
        let base: Vec<u64> = (0..10).map(|i| 100 + i * 7).collect();
        let step: Vec<u64> = base.iter().map(|v| v - 20).collect();
        let j = judge(&base, &step, ALPHA);
        assert_eq!(j.shift, -20.0);
    }

    #[test]
    fn moses_interval_matches_the_tables() {
        // n = 6 and 6 at 5 %: the critical U is 5, so the interval runs from the 6th
        // smallest to the 6th largest of the 36 differences.
        assert_eq!(interval_rank(6, 6, 0.05, true), Some(6));
        // At 1 %: critical U 2.
        assert_eq!(interval_rank(6, 6, 0.01, true), Some(3));
        // Three pairs can never reach 1 %.
        assert_eq!(interval_rank(3, 3, 0.01, true), None);
        assert_eq!(min_pairs(0.01), 5);
        assert_eq!(min_pairs(0.05), 4);
    }

    #[test]
    fn ties_fall_back_to_the_normal_approximation() {
        let base = [5, 5, 5, 6, 6, 6, 7, 7];
        let step = [5, 5, 6, 6, 6, 7, 7, 7];
        let j = judge(&base, &step, ALPHA);
        assert!(!j.exact);
        assert_eq!(j.decision, Decision::Inconclusive);
    }

    #[test]
    fn large_samples_use_the_normal_rank() {
        let z = z_two_sided(0.05);
        assert!((z - 1.96).abs() < 0.001, "{z}");
        let k = interval_rank(40, 40, 0.05, false).unwrap();
        // 800 − 1.96 · √(1600 · 81 / 12) = 800 − 203.7
        assert_eq!(k, 596);
    }

    #[test]
    fn the_schedule_alternates_from_the_baseline() {
        assert_eq!(schedule(2), vec![false, true, false, true]);
    }
}
