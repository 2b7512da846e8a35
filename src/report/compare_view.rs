//! The ways of showing a `Comparison`: a terminal table, Markdown, CSV and an HTML page.
//!
//! Table, Markdown and HTML share one grid: a row per distribution and run, the figures
//! of later runs followed by their change from the baseline, and the verdict. The basis of
//! each verdict follows the grid, then the method.

use std::fmt::Write as _;

use crate::report::compare::{Comparison, Figures, Judgement, Row, change_words, method, relative};
use crate::report::export::csv_field;
use crate::report::html;
use crate::report::table::new_table;

const HEADERS: [&str; 11] = [
    "probe",
    "entry",
    "metric",
    "run",
    "verdict",
    "count",
    "p50 (ns)",
    "p99 (ns)",
    "p99.9 (ns)",
    "max (ns)",
    "rate (/s)",
];

/// The grid's rows, as text.
fn grid(c: &Comparison) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for row in &c.rows {
        let base = row.figures.first().copied().flatten();
        for (i, f) in row.figures.iter().enumerate() {
            let head = if i == 0 {
                vec![
                    row.probe.to_string(),
                    row.key.clone(),
                    row.metric.to_string(),
                ]
            } else {
                vec![String::new(); 3]
            };
            let mut cells = head;
            cells.push(c.labels[i].clone());
            // The verdict before the figures: on a narrow screen it must not scroll away.
            cells.push(
                row.judgements[i]
                    .as_ref()
                    .map_or_else(String::new, |j| j.verdict.words().to_string()),
            );
            cells.extend(figure_cells(
                f.as_ref(),
                if i == 0 { None } else { base.as_ref() },
            ));
            out.push(cells);
        }
    }
    out
}

fn figure_cells(f: Option<&Figures>, base: Option<&Figures>) -> Vec<String> {
    let Some(f) = f else {
        return vec![
            "absent".into(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
        ];
    };
    let with_change = |v: Option<f64>, b: Option<f64>, fmt: &dyn Fn(f64) -> String| match (v, b) {
        (Some(v), Some(b)) => format!("{} ({})", fmt(v), change_words(relative(b, v))),
        (Some(v), None) => fmt(v),
        (None, _) => "-".into(),
    };
    let ns = |v: f64| format!("{v:.0}");
    let rate = |v: f64| format!("{v:.1}");
    let pick = |g: fn(&Figures) -> Option<u64>| {
        (g(f).map(|v| v as f64), base.and_then(g).map(|v| v as f64))
    };
    let mut cells = vec![f.count.to_string()];
    for g in [
        (|f: &Figures| f.p50_ns) as fn(&Figures) -> Option<u64>,
        |f| f.p99_ns,
        |f| f.p999_ns,
        |f| f.max_ns,
    ] {
        let (v, b) = pick(g);
        cells.push(with_change(v, b, &ns));
    }
    cells.push(with_change(
        f.rate_per_s,
        base.and_then(|b| b.rate_per_s),
        &rate,
    ));
    cells
}

/// Each verdict's basis, one line per later run and row.
fn bases(c: &Comparison) -> Vec<String> {
    let mut out = Vec::new();
    for row in &c.rows {
        for (i, j) in row.judgements.iter().enumerate() {
            if let Some(Judgement { verdict, basis }) = j {
                out.push(format!(
                    "{} {} {}, {} vs {}: {}: {basis}",
                    row.probe,
                    row.key,
                    row.metric,
                    c.labels[i],
                    c.labels[0],
                    verdict.words()
                ));
            }
        }
    }
    out
}

fn runs_line(c: &Comparison, paths: &[String]) -> String {
    let named: Vec<String> = c
        .labels
        .iter()
        .zip(paths)
        .map(|(l, p)| format!("{l} = {p}"))
        .collect();
    format!("Baseline {}; runs: {}", c.labels[0], named.join(", "))
}

/// The terminal table.
pub fn table(c: &Comparison, paths: &[String]) -> String {
    let mut out = format!("{}\n", runs_line(c, paths));
    for d in &c.differences {
        let _ = writeln!(out, "note: {d}");
    }
    let mut t = new_table(&HEADERS);
    for r in grid(c) {
        t.add_row(r);
    }
    let _ = writeln!(out, "{t}");
    for b in bases(c) {
        let _ = writeln!(out, "- {b}");
    }
    let _ = writeln!(out, "\n{}", method());
    out
}

/// The same in Markdown.
pub fn markdown(c: &Comparison, paths: &[String]) -> String {
    let cell = |s: &str| s.replace('|', "\\|");
    let mut out = format!("## Comparison\n\n{}\n\n", cell(&runs_line(c, paths)));
    for d in &c.differences {
        let _ = writeln!(out, "- **note:** {}", cell(d));
    }
    if !c.differences.is_empty() {
        out.push('\n');
    }
    let _ = writeln!(out, "| {} |", HEADERS.join(" | "));
    let _ = writeln!(out, "|{}", "---|".repeat(HEADERS.len()));
    for r in grid(c) {
        let cells: Vec<String> = r.iter().map(|s| cell(s)).collect();
        let _ = writeln!(out, "| {} |", cells.join(" | "));
    }
    out.push('\n');
    for b in bases(c) {
        let _ = writeln!(out, "- {}", cell(&b));
    }
    let _ = writeln!(out, "\n{}", method());
    out
}

/// CSV: one row per distribution and run, raw figures, the change from the baseline in
/// percent (empty for the baseline), the verdict and its basis.
pub fn csv(c: &Comparison) -> String {
    let mut out = String::from(
        "probe,key,metric,run,baseline,count,p50_ns,p99_ns,p999_ns,max_ns,rate_per_s,\
         p50_change_pct,p99_change_pct,p999_change_pct,max_change_pct,rate_change_pct,verdict,basis\n",
    );
    for row in &c.rows {
        for (i, f) in row.figures.iter().enumerate() {
            let _ = writeln!(out, "{}", csv_row(c, row, i, f.as_ref()));
        }
    }
    out
}

fn csv_row(c: &Comparison, row: &Row, i: usize, f: Option<&Figures>) -> String {
    let base = if i == 0 {
        None
    } else {
        row.figures[0].as_ref()
    };
    let opt = |v: Option<u64>| v.map_or_else(String::new, |v| v.to_string());
    let change = |v: Option<f64>, b: Option<f64>| match (v, b) {
        (Some(v), Some(b)) => format!("{:.1}", relative(b, v) * 100.0),
        _ => String::new(),
    };
    let mut fields = vec![
        row.probe.to_string(),
        row.key.clone(),
        row.metric.to_string(),
        c.labels[i].clone(),
        c.labels[0].clone(),
    ];
    match f {
        Some(f) => {
            fields.extend([
                f.count.to_string(),
                opt(f.p50_ns),
                opt(f.p99_ns),
                opt(f.p999_ns),
                opt(f.max_ns),
                f.rate_per_s.map_or_else(String::new, |v| format!("{v:.3}")),
            ]);
            let as_f = |v: Option<u64>| v.map(|v| v as f64);
            for g in [
                (|f: &Figures| f.p50_ns) as fn(&Figures) -> Option<u64>,
                |f| f.p99_ns,
                |f| f.p999_ns,
                |f| f.max_ns,
            ] {
                fields.push(change(as_f(g(f)), base.and_then(|b| as_f(g(b)))));
            }
            fields.push(change(f.rate_per_s, base.and_then(|b| b.rate_per_s)));
        }
        None => fields.extend(std::iter::repeat_n(String::new(), 11)),
    }
    let j = row.judgements[i].as_ref();
    fields.push(j.map_or_else(String::new, |j| j.verdict.words().to_string()));
    fields.push(j.map_or_else(String::new, |j| j.basis.clone()));
    fields
        .iter()
        .map(|s| csv_field(s))
        .collect::<Vec<_>>()
        .join(",")
}

/// The comparison page: differences first, then the grid, the bases, the method and the
/// overlaid plots.
pub fn page(
    c: &Comparison,
    paths: &[String],
    figures: Vec<html::Figure>,
    plot_error: Option<String>,
) -> html::Page {
    let mut warnings = c.differences.clone();
    warnings.extend(plot_error.map(|e| format!("plots left out: {e}")));
    // No line break inside "1182 (−39 %)".
    let keep = |cell: String| cell.replace(" (", "\u{a0}(").replace(" %", "\u{a0}%");
    let rows = grid(c)
        .into_iter()
        .map(|r| r.into_iter().map(keep).collect())
        .collect();
    let table = html::Table {
        caption: "Each later run against the baseline".into(),
        headers: HEADERS.iter().map(|h| h.to_string()).collect(),
        rows,
        note: None,
    };
    let mut basis = bases(c);
    basis.push(method());
    html::Page {
        title: format!("jitterscope comparison: {}", c.labels.join(" vs ")),
        subtitle: None,
        warnings,
        sections: vec![
            html::Section {
                heading: "Verdicts".into(),
                text: vec![runs_line(c, paths)],
                tables: vec![table],
                ..Default::default()
            },
            html::Section {
                heading: "What each verdict rests on".into(),
                text: basis,
                ..Default::default()
            },
            html::Section {
                heading: "Plots".into(),
                figures,
                ..Default::default()
            },
        ],
    }
}
