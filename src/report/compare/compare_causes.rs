//! `compare`'s causes: for each noise or timer entry (probe and CPU) that a run traced
//! (`attribution`), each cause's share of the interrupted time in every run and its change
//! from the baseline in percentage points, with the time it took per second of run.
//!
//! Why time per second of run beside the share: a share alone hides a change of the
//! whole (the tick at 50 % of twice the interrupted time is twice the cost), and time per
//! gap would move with the gap count (remove many short gaps and every remaining cause's
//! time per gap rises though nothing about it changed). Time per second of the entry's
//! own runtime is what the measured thread paid, and it compares runs of any length.
//!
//! Causes are matched by kind and name, except that a task's pid is dropped (and the rows
//! of one name summed): pids differ from run to run, so "task rustc:13225" and
//! "task rustc:13793" are the same cause for the question "did my change help".

use std::collections::BTreeMap;

use crate::probes::noise::NoiseEntry;
use crate::probes::timer::TimerEntry;
use crate::report::ResultFile;
use crate::report::terminal::cause_names::task_key;
use crate::stats::causes::{Attribution, CauseKind};

/// One entry's causes across the runs.
#[derive(Debug, Clone, PartialEq)]
pub struct CauseGrid {
    pub probe: &'static str,
    /// As the distributions' rows name it: `cpu1` (numbered `#2` … when it repeats).
    pub key: String,
    /// Per run, what it holds for this entry.
    pub runs: Vec<Traced>,
    /// Largest share in any run first; the unaccounted time last.
    pub rows: Vec<CauseLine>,
}

/// What a run holds for an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Traced {
    /// It has the entry, with its attribution.
    Yes,
    /// It has the entry but measured it without a trace.
    Untraced,
    /// It has no such entry.
    Absent,
}

/// One cause across the runs.
#[derive(Debug, Clone, PartialEq)]
pub struct CauseLine {
    pub kind: CauseKind,
    pub cause: String,
    /// Per run; `None` where the run was traced and saw no such cause, or was not traced.
    pub figures: Vec<Option<CauseFigures>>,
}

/// A cause's figures in one run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CauseFigures {
    /// Of the run's interrupted time, as stored (summed over a task's pids).
    pub share_pct: f64,
    /// Its total time per second of the entry's runtime, in ns.
    pub ns_per_s: f64,
}

impl CauseLine {
    /// Run `i`'s share less the baseline's, in percentage points; `None` for the baseline
    /// and where either run lacks the cause.
    pub fn change_pp(&self, i: usize) -> Option<f64> {
        match (i, self.figures.first().copied().flatten(), self.figures[i]) {
            (0, ..) => None,
            (_, Some(b), Some(f)) => Some(f.share_pct - b.share_pct),
            _ => None,
        }
    }
}

impl CauseGrid {
    /// One line per run that has the entry but no attribution, or no entry: said once,
    /// rather than rows of dashes.
    pub fn missing(&self, labels: &[String]) -> Vec<String> {
        (labels.iter().enumerate())
            .filter_map(|(i, label)| self.why_missing(i, label))
            .collect()
    }

    /// Why run `i` (called `label`) has no causes here; `None` when it has them.
    pub fn why_missing(&self, i: usize, label: &str) -> Option<String> {
        let why = match self.runs.get(i)? {
            Traced::Yes => return None,
            Traced::Untraced => "has no attribution (it was measured without --trace)",
            Traced::Absent => "has no such entry",
        };
        Some(format!("{} {}: {label} {why}", self.probe, self.key))
    }
}

/// A traced entry of one run: its attribution and runtime.
struct Entry<'a> {
    attribution: Option<&'a Attribution>,
    runtime_ns: u64,
}

/// Every noise and timer entry of a run, keyed by (probe, key) as `compare` keys rows.
fn entries(r: &ResultFile) -> BTreeMap<(&'static str, String), Entry<'_>> {
    let mut m = BTreeMap::new();
    let noise =
        (r.entries::<NoiseEntry>()).map(|e| ("noise", e.cpu, e.attribution.as_ref(), e.runtime_ns));
    let timer =
        (r.entries::<TimerEntry>()).map(|e| ("timer", e.cpu, e.attribution.as_ref(), e.runtime_ns));
    for (probe, cpu, attribution, runtime_ns) in noise.chain(timer) {
        let base = format!("cpu{cpu}");
        let mut key = (probe, base.clone());
        let mut n = 1;
        while m.contains_key(&key) {
            n += 1;
            key.1 = format!("{base}#{n}");
        }
        m.insert(
            key,
            Entry {
                attribution,
                runtime_ns,
            },
        );
    }
    m
}

/// The grids of every entry that at least one run traced, in the order of the runs'
/// entries. None when no run was traced: then there are no causes to compare, and the
/// rest of `compare` says everything.
pub fn cause_grids(runs: &[&ResultFile]) -> Vec<CauseGrid> {
    let per_run: Vec<_> = runs.iter().map(|r| entries(r)).collect();
    let mut keys: Vec<(&'static str, String)> = Vec::new();
    for m in &per_run {
        for (k, e) in m {
            if e.attribution.is_some() && !keys.contains(k) {
                keys.push(k.clone());
            }
        }
    }
    keys.into_iter().map(|k| grid(&k, &per_run)).collect()
}

fn grid(
    k: &(&'static str, String),
    per_run: &[BTreeMap<(&'static str, String), Entry<'_>>],
) -> CauseGrid {
    let n = per_run.len();
    let mut runs = Vec::with_capacity(n);
    let mut lines: Vec<CauseLine> = Vec::new();
    for (i, m) in per_run.iter().enumerate() {
        let Some(e) = m.get(k) else {
            runs.push(Traced::Absent);
            continue;
        };
        let Some(a) = e.attribution else {
            runs.push(Traced::Untraced);
            continue;
        };
        runs.push(Traced::Yes);
        let seconds = e.runtime_ns as f64 / 1e9;
        for c in &a.causes {
            let name = task_key(c.kind, &c.cause);
            let line = match lines
                .iter()
                .position(|l| l.kind == c.kind && l.cause == name)
            {
                Some(p) => &mut lines[p],
                None => {
                    lines.push(CauseLine {
                        kind: c.kind,
                        cause: name,
                        figures: vec![None; n],
                    });
                    lines.last_mut().expect("just pushed")
                }
            };
            let per_s = if seconds > 0.0 {
                c.total_ns as f64 / seconds
            } else {
                0.0
            };
            let share = if c.share_pct.is_finite() {
                c.share_pct
            } else {
                0.0
            };
            let f = line.figures[i].get_or_insert(CauseFigures {
                share_pct: 0.0,
                ns_per_s: 0.0,
            });
            f.share_pct += share;
            f.ns_per_s += per_s;
        }
    }
    let top = |l: &CauseLine| {
        (l.figures.iter().flatten())
            .map(|f| f.share_pct)
            .fold(0.0, f64::max)
    };
    lines.sort_by(|a, b| {
        let last = |l: &CauseLine| l.kind == CauseKind::Unaccounted;
        last(a).cmp(&last(b)).then(top(b).total_cmp(&top(a)))
    });
    CauseGrid {
        probe: k.0,
        key: k.1.clone(),
        runs,
        rows: lines,
    }
}
