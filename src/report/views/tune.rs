//! `tune`'s terminal text: each step with its class and decision, and the staircase (the
//! figures after each kept step, with their intervals). Every line fits 100 columns.
//! The CSV and Markdown forms use the same cells (`staircase_rows`), so the figures agree.

use crate::report::terminal::table::cut;
use crate::system::tune::Class;
use crate::system::tune::record::{Figure, Metric, Stair, StepRun, TuneEntry};

/// A value of `metric` with its unit: ns/s as µs/s or ms/s, ns as µs or ms.
pub fn value(x: f64, metric: Metric) -> String {
    let per_s = if metric == Metric::Lost { "/s" } else { "" };
    time(x) + per_s
}

/// ns in µs below 10 ms, else ms (signed).
pub fn time(ns: f64) -> String {
    if !ns.is_finite() {
        return if ns > 0.0 {
            "+∞".into()
        } else {
            "−∞".into()
        };
    }
    match ns.abs() {
        a if a >= 10e6 => format!("{:.1} ms", ns / 1e6),
        a if a >= 1e6 => format!("{:.2} ms", ns / 1e6),
        a if a >= 100e3 => format!("{:.0} µs", ns / 1e3),
        _ => format!("{:.1} µs", ns / 1e3),
    }
}

fn fig(f: &Figure) -> String {
    format!("{} [{}–{}]", short(f.median), short(f.low), short(f.high))
}

/// A figure in µs, without the unit (the column header carries it).
pub fn short(ns: f64) -> String {
    let us = ns / 1e3;
    if us >= 100.0 {
        format!("{us:.0}")
    } else {
        format!("{us:.1}")
    }
}

/// The staircase's header and rows, as cells: what the terminal, CSV and Markdown show.
pub fn staircase_rows(stairs: &[Stair]) -> (Vec<&'static str>, Vec<Vec<String>>) {
    let header = vec![
        "after",
        "p50 (µs)",
        "p99 (µs)",
        "p99.9 (µs)",
        "max (µs)",
        "lost (µs/s)",
    ];
    let rows = stairs
        .iter()
        .map(|s| {
            vec![
                s.after.clone(),
                fig(&s.p50_ns),
                fig(&s.p99_ns),
                fig(&s.p999_ns),
                fig(&s.max_ns),
                fig(&s.lost_ns_per_s),
            ]
        })
        .collect();
    (header, rows)
}

/// Every step's decision, as cells: its id, what became of it (kept, reverted,
/// inconclusive, or, for a step not measured, its class: not applicable, already done …),
/// the medians of the metric on each side, the shift with its interval, and p.
pub fn step_rows(t: &TuneEntry) -> (Vec<String>, Vec<Vec<String>>) {
    let header = vec![
        "step".to_string(),
        "decision".into(),
        format!("{}: baseline → step", t.metric.name()),
        "shift [interval]".into(),
        "p".into(),
        "pairs (better)".into(),
    ];
    let rows = (t.steps.iter())
        .map(|s| match &s.judgement {
            Some(j) => vec![
                s.step.id.clone(),
                j.decision.as_str().into(),
                format!(
                    "{}{} → {}",
                    own_metric(t, s),
                    value(j.baseline_median, metric_of(t, s)),
                    value(j.step_median, metric_of(t, s))
                ),
                format!(
                    "{} [{}, {}]",
                    value(j.shift, metric_of(t, s)),
                    value(j.ci_low, metric_of(t, s)),
                    value(j.ci_high, metric_of(t, s))
                ),
                format!("{:.4}", j.p),
                pairs_cell(j),
            ],
            None => {
                let what = match &s.step.class {
                    Class::Applies => "not measured (the run stopped first)".to_string(),
                    c if c.detail().is_empty() => c.label().to_string(),
                    c => format!("{}: {}", c.label(), c.detail()),
                };
                let dash = || "—".to_string();
                vec![s.step.id.clone(), what, dash(), dash(), dash(), dash()]
            }
        })
        .collect();
    (header, rows)
}

/// The metric `s` was judged on: its own, else the run's.
fn metric_of(t: &TuneEntry, s: &StepRun) -> Metric {
    s.metric.unwrap_or(t.metric)
}

/// "per-block max: " where a step was judged on another metric than the run's.
fn own_metric(t: &TuneEntry, s: &StepRun) -> String {
    match s.metric {
        Some(m) if m != t.metric => format!("{}: ", m.name()),
        _ => String::new(),
    }
}

/// How many pairs a step took, and in how many its block was the better: "12 (11)"; a
/// file from before the paired test has only its pairs.
fn pairs_cell(j: &crate::system::tune::experiment::Judgement) -> String {
    if j.paired {
        format!("{} ({})", j.pairs, j.better)
    } else {
        j.pairs.to_string()
    }
}

/// The staircase as a Markdown table.
pub fn staircase_markdown(t: &TuneEntry) -> String {
    let (header, rows) = staircase_rows(&t.staircase);
    let mut out = format!(
        "| {} |\n|{}\n",
        header.join(" | "),
        "---|".repeat(header.len())
    );
    for r in rows {
        out.push_str(&format!("| {} |\n", r.join(" | ")));
    }
    out
}

/// Everything `tune` prints at the end.
pub fn tune_text(t: &TuneEntry) -> String {
    let mut out = format!(
        "\ntune: {} steps judged on {} unless a step says its own ({}), level {} %\n\
         {} pairs of {:.0} ms blocks (or whole periods of the step's cause) at the first look{}\n",
        t.steps.iter().filter(|s| s.judgement.is_some()).count(),
        t.metric.name(),
        t.probe,
        t.alpha * 100.0,
        t.pairs,
        t.block_ns as f64 / 1e6,
        if t.max_pairs > t.pairs {
            format!(", up to {}", t.max_pairs)
        } else {
            String::new()
        },
    );
    for s in &t.steps {
        // The pairs first: a long line is cut at 100 columns, and how many pairs a step
        // took is part of its decision.
        let what = match &s.judgement {
            Some(j) => format!(
                "{} ({}): {}{} → {}, p {:.4}, shift {} [{}, {}]",
                j.decision.as_str(),
                if j.paired {
                    format!("{} pairs, {} better", j.pairs, j.better)
                } else {
                    format!("{} pairs", j.pairs)
                },
                own_metric(t, s),
                value(j.baseline_median, metric_of(t, s)),
                value(j.step_median, metric_of(t, s)),
                j.p,
                value(j.shift, metric_of(t, s)),
                value(j.ci_low, metric_of(t, s)),
                value(j.ci_high, metric_of(t, s)),
            ),
            None => s.step.class.to_string(),
        };
        let line = format!("  {:<24} {what}", s.step.id);
        out.push_str(&cut(&line, 100));
        out.push('\n');
    }
    if !t.staircase.is_empty() {
        let (header, rows) = staircase_rows(&t.staircase);
        let conf = t.staircase.iter().map(|s| s.confidence).fold(1.0, f64::min);
        out.push_str(&format!(
            "\nstaircase: medians over blocks [distribution-free interval, ≥ {:.1} %]\n",
            conf * 100.0
        ));
        // Two lines a stair, the medians then their intervals, so that it fits 100
        // columns.
        let cells = |r: &Vec<String>| -> (Vec<String>, Vec<String>) {
            let mut top = vec![r[0].clone()];
            let mut low = vec![String::new()];
            for c in &r[1..] {
                let (m, i) = c.split_once(' ').unwrap_or((c.as_str(), ""));
                top.push(m.to_string());
                low.push(i.to_string());
            }
            (top, low)
        };
        let split: Vec<(Vec<String>, Vec<String>)> = rows.iter().map(cells).collect();
        let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
        for (a, b) in &split {
            for (i, w) in widths.iter_mut().enumerate() {
                *w = (*w).max(a[i].chars().count()).max(b[i].chars().count());
            }
        }
        widths[0] = widths[0].min(24);
        let line = |cells: &[String]| {
            let mut l = String::new();
            for (i, (c, w)) in cells.iter().zip(&widths).enumerate() {
                if i == 0 {
                    l.push_str(&format!("  {:<w$}", cut(c, *w)));
                } else {
                    l.push_str(&format!(" {c:>w$}"));
                }
            }
            l.trim_end().to_string() + "\n"
        };
        let head: Vec<String> = header.iter().map(|h| h.to_string()).collect();
        out.push_str(&line(&head));
        for (a, b) in &split {
            out.push_str(&line(a));
            out.push_str(&line(b));
        }
    }
    let bad = t.restored.iter().filter(|r| !r.ok).count();
    if !t.kept_applied {
        let state = match bad {
            // Files and kernel threads alike: a thread move is read back too.
            0 => "every setting reads as before",
            _ => "`jitterscope tune --restore` retries the others",
        };
        out.push_str(&format!(
            "\nrestored: {} revert(s) made and read back, {bad} mismatch(es): {state}\n",
            t.restored.len(),
        ));
    }
    out
}
