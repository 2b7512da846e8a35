//! `tune` in the result file: every step with its class, the values before and after,
//! its blocks, its decision and figures, and the staircase of the kept steps.

use serde::{Deserialize, Serialize};

use super::Step;
use super::apply::Readback;
use super::experiment::Judgement;
use super::timing::Timing;

/// The metric a step is judged on; lower is better for each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Metric {
    /// Time taken from the measured CPUs, ns per second (timer: the wake-ups' summed
    /// lateness per second).
    Lost,
    P99,
    P999,
    /// The block's largest interruption.
    Max,
}

impl Metric {
    pub fn name(self) -> &'static str {
        match self {
            Metric::Lost => "lost time per second",
            Metric::P99 => "p99",
            Metric::P999 => "p99.9",
            Metric::Max => "per-block max",
        }
    }

    /// The unit of the metric's values.
    pub fn unit(self) -> &'static str {
        match self {
            Metric::Lost => "ns/s",
            _ => "ns",
        }
    }

    pub fn of(self, b: &Block) -> u64 {
        match self {
            Metric::Lost => b.lost_ns_per_s,
            Metric::P99 => b.p99_ns,
            Metric::P999 => b.p999_ns,
            Metric::Max => b.max_ns,
        }
    }
}

/// One measured block.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Block {
    /// Measured with the step applied (else: the baseline).
    pub applied: bool,
    pub runtime_ns: u64,
    /// Gaps (noise), or deadlines skipped by a wake-up over an interval late (timer).
    pub interruptions: u64,
    /// Wake-ups measured (timer; absent for noise).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub wakeups: u64,
    pub lost_ns_per_s: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub max_ns: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// One file a step wrote: before, and as read back after the write.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Value {
    pub path: String,
    pub before: String,
    pub after: String,
}

/// One step as run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepRun {
    #[serde(flatten)]
    pub step: Step,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<Value>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocks: Vec<Block>,
    /// Absent for a step that was not measured (its class, or an interrupted run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judgement: Option<Judgement>,
    /// With a trace: the share (% of the attributed lost time) of the causes the step
    /// targets (`share::targets`), over its baseline blocks and over its step blocks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share_before_pct: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share_after_pct: Option<f64>,
    /// Its blocks' length, lead-in and the cause's period they are aligned to (absent in
    /// older files and for a step not measured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timing: Option<Timing>,
    /// What this step was judged on, where a step has its own (else the entry's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric: Option<Metric>,
}

impl StepRun {
    /// A step that was not measured (boot-only, or nothing ran).
    pub fn unmeasured(step: Step) -> StepRun {
        StepRun {
            step,
            values: Vec::new(),
            blocks: Vec::new(),
            judgement: None,
            share_before_pct: None,
            share_after_pct: None,
            timing: None,
            metric: None,
        }
    }
}

/// A figure over a set of blocks: the median of the blocks' values and its
/// distribution-free interval (order statistics), at `confidence`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Figure {
    pub median: f64,
    pub low: f64,
    pub high: f64,
}

/// One stair: the figures after a kept step (the first: the baseline).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stair {
    /// `baseline`, or the finding id of the kept step.
    pub after: String,
    pub blocks: usize,
    /// The intervals' coverage.
    pub confidence: f64,
    pub p50_ns: Figure,
    pub p99_ns: Figure,
    pub p999_ns: Figure,
    pub max_ns: Figure,
    pub lost_ns_per_s: Figure,
}

/// `tune` in the result file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TuneEntry {
    pub probe: String,
    pub metric: Metric,
    pub block_ns: u64,
    /// Pairs at the first look.
    pub pairs: u32,
    /// The most pairs a step still undecided may take (0 in older files: `pairs`).
    #[serde(default)]
    pub max_pairs: u32,
    pub rest_ns: u64,
    pub alpha: f64,
    pub steps: Vec<StepRun>,
    pub staircase: Vec<Stair>,
    /// Every file read back after its revert.
    pub restored: Vec<Readback>,
    /// The kept steps were left applied (`--keep`).
    pub kept_applied: bool,
}

/// The staircase's figures of `blocks`.
pub fn stair(after: &str, blocks: &[&Block]) -> Stair {
    let fig = |f: fn(&Block) -> u64| {
        let mut v: Vec<u64> = blocks.iter().map(|b| f(b)).collect();
        v.sort_unstable();
        median_interval(&v).0
    };
    let mut any: Vec<u64> = vec![0; blocks.len()];
    any.sort_unstable();
    Stair {
        after: after.to_string(),
        blocks: blocks.len(),
        confidence: median_interval(&any).1,
        p50_ns: fig(|b| b.p50_ns),
        p99_ns: fig(|b| b.p99_ns),
        p999_ns: fig(|b| b.p999_ns),
        max_ns: fig(|b| b.max_ns),
        lost_ns_per_s: fig(|b| b.lost_ns_per_s),
    }
}

/// The median of sorted `v` and the widest order-statistic interval [x(k), x(n−k+1)]
/// whose coverage is at least 95 % (or [min, max] when none reaches it), with the
/// coverage: 1 − 2·P(Binomial(n, ½) < k).
pub fn median_interval(v: &[u64]) -> (Figure, f64) {
    let n = v.len();
    if n == 0 {
        let z = Figure {
            median: 0.0,
            low: 0.0,
            high: 0.0,
        };
        return (z, 0.0);
    }
    let median = if n % 2 == 1 {
        v[n / 2] as f64
    } else {
        (v[n / 2 - 1] as f64 + v[n / 2] as f64) / 2.0
    };
    // P(Bin(n, ½) ≤ j), j = 0 ..
    let total = 2f64.powi(n as i32);
    let mut c = 1.0;
    let mut cdf = Vec::with_capacity(n);
    let mut acc = 0.0;
    for j in 0..n {
        acc += c / total;
        cdf.push(acc);
        c = c * (n - j) as f64 / (j + 1) as f64;
    }
    let mut k = 1;
    while k < n / 2 && 1.0 - 2.0 * cdf[k] >= 0.95 {
        k += 1;
    }
    let coverage = 1.0 - 2.0 * cdf[k - 1];
    (
        Figure {
            median,
            low: v[k - 1] as f64,
            high: v[n - k] as f64,
        },
        coverage,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_interval_of_order_statistics() {
        // n = 6: [min, max] covers 1 − 2/64 = 96.9 %; the next one in covers 78 %.
        let (f, c) = median_interval(&[1, 2, 3, 4, 5, 6]);
        assert_eq!((f.median, f.low, f.high), (3.5, 1.0, 6.0));
        assert!((c - (1.0 - 2.0 / 64.0)).abs() < 1e-12);
        // n = 20: k = 6 (P(Bin ≤ 5) = 0.0207), the 6th and 15th values.
        let v: Vec<u64> = (1..=20).collect();
        let (f, c) = median_interval(&v);
        assert_eq!((f.low, f.high), (6.0, 15.0));
        assert!(c > 0.95 && c < 0.96, "{c}");
    }
}
