//! The ways of showing a `Comparison`: a terminal table, Markdown, CSV and an HTML page.
//!
//! Table, Markdown and HTML share one grid per probe kind, its times in the kind's unit
//! (`Kind::unit`, as `report` shows them): a row per distribution and run, the figures of
//! later runs followed by their change from the baseline, and the verdict. The terminal
//! leaves out the wide-only columns (count, p99.9, rate) unless `--wide`, and wraps its
//! text to the width. The basis of each verdict follows the grids, then the method. The
//! CSV is one table of every kind in ns, as its headers say; its `trusted` column is
//! false where the other formats star the metric (`one-way*`), and such a row's verdict
//! is `not judged`.

use std::fmt::Write as _;

use crate::report::compare::{Comparison, Figures, Judgement, Row, change_words, method, relative};
use crate::report::dist::UNCONFIRMED_NOTE;
use crate::report::export::{csv_field, unit_of};
use crate::report::html;
use crate::report::table::{Col, Layout, Tab, Unit, core, hidden_note, reset_hidden, wide, wrap};

/// One column of the grid: its name (with the unit for times) and whether the terminal
/// shows it without `--wide`.
struct Column {
    name: String,
    core: bool,
}

/// The grid's columns for rows of one probe kind, times in the kind's unit.
fn columns(u: Unit, rates: bool) -> Vec<Column> {
    let c = |name: String, core: bool| Column { name, core };
    let mut v = vec![
        c("entry".into(), true),
        c("metric".into(), true),
        c("run".into(), true),
        c("verdict".into(), true),
        c("count".into(), false),
        c(u.header("p50"), true),
        c(u.header("p99"), true),
        c(u.header("p99.9"), false),
        c(u.header("max"), true),
    ];
    if rates {
        v.push(c("rate (/s)".into(), false));
    }
    v
}

/// The rows of each probe kind, in the order the kinds first appear: one table each, in
/// the kind's unit.
fn by_kind(c: &Comparison) -> Vec<(&'static str, Vec<&Row>)> {
    let mut out: Vec<(&'static str, Vec<&Row>)> = Vec::new();
    for row in &c.rows {
        match out.iter_mut().find(|(p, _)| *p == row.probe) {
            Some((_, rows)) => rows.push(row),
            None => out.push((row.probe, vec![row])),
        }
    }
    out
}

/// One kind's grid: its columns and its rows as text, a row per distribution and run.
fn grid(c: &Comparison, probe: &str, rows: &[&Row]) -> (Vec<Column>, Vec<Vec<String>>) {
    let u = unit_of(probe);
    let rates = rows
        .iter()
        .any(|r| r.figures.iter().flatten().any(|f| f.rate_per_s.is_some()));
    let mut out = Vec::new();
    for row in rows {
        let base = row.figures.first().copied().flatten();
        for (i, f) in row.figures.iter().enumerate() {
            let mut cells = if i == 0 {
                vec![row.key.clone(), row.metric_label()]
            } else {
                vec![String::new(); 2]
            };
            cells.push(c.labels[i].clone());
            // The verdict before the figures: on a narrow screen it must not scroll away.
            cells.push(
                row.judgements[i]
                    .as_ref()
                    .map_or_else(String::new, |j| j.verdict.words().to_string()),
            );
            let mut figures =
                figure_cells(f.as_ref(), if i == 0 { None } else { base.as_ref() }, u);
            if !rates {
                figures.pop();
            }
            cells.extend(figures);
            out.push(cells);
        }
    }
    (columns(u, rates), out)
}

fn figure_cells(f: Option<&Figures>, base: Option<&Figures>, u: Unit) -> Vec<String> {
    let Some(f) = f else {
        let mut v = vec![String::new(); 6];
        v[0] = "absent".into();
        return v;
    };
    let with_change = |v: Option<f64>, b: Option<f64>, fmt: &dyn Fn(f64) -> String| match (v, b) {
        (Some(v), Some(b)) => format!("{} ({})", fmt(v), change_words(relative(b, v))),
        (Some(v), None) => fmt(v),
        (None, _) => "-".into(),
    };
    let time = |v: f64| u.cell(Some(v as u64));
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
        cells.push(with_change(v, b, &time));
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

/// The terminal tables, one per probe kind, fitted to the layout's width: the wide-only
/// columns left out and every line of text wrapped unless `--wide`.
pub fn table(c: &Comparison, paths: &[String]) -> String {
    reset_hidden();
    let width = Layout::current().wrap_width();
    let line = |text: &str, indent: &str| format!("{}\n", wrap(text, width, indent));
    let mut out = line(&runs_line(c, paths), "  ");
    for d in &c.differences {
        out.push_str(&line(&format!("note: {d}"), "  "));
    }
    let mut starred = false;
    for (probe, rows) in by_kind(c) {
        let (cols, grid) = grid(c, probe, &rows);
        let spec: Vec<Col> = (cols.into_iter())
            .map(|c| if c.core { core(c.name) } else { wide(c.name) })
            .collect();
        let mut t = Tab::new(&spec);
        for r in grid {
            t.row(r);
        }
        let _ = writeln!(out, "\n{probe}\n{t}");
        starred |= rows.iter().any(|r| !r.trusted);
    }
    if starred {
        out.push_str(&line(UNCONFIRMED_NOTE, "  "));
    }
    out.push('\n');
    for b in bases(c) {
        out.push_str(&line(&format!("- {b}"), "  "));
    }
    out.push('\n');
    out.push_str(&line(&method(), ""));
    if let Some(note) = hidden_note() {
        out.push_str(&line(&note, ""));
    }
    out
}

/// The same in Markdown, every column.
pub fn markdown(c: &Comparison, paths: &[String]) -> String {
    let cell = |s: &str| s.replace('|', "\\|");
    let mut out = format!("## Comparison\n\n{}\n\n", cell(&runs_line(c, paths)));
    for d in &c.differences {
        let _ = writeln!(out, "- **note:** {}", cell(d));
    }
    if !c.differences.is_empty() {
        out.push('\n');
    }
    let mut starred = false;
    for (probe, rows) in by_kind(c) {
        let (cols, grid) = grid(c, probe, &rows);
        let names: Vec<&str> = cols.iter().map(|c| c.name.as_str()).collect();
        let _ = writeln!(out, "### {probe}\n");
        let _ = writeln!(out, "| {} |", names.join(" | "));
        let _ = writeln!(out, "|{}", "---|".repeat(names.len()));
        for r in grid {
            let cells: Vec<String> = r.iter().map(|s| cell(s)).collect();
            let _ = writeln!(out, "| {} |", cells.join(" | "));
        }
        out.push('\n');
        starred |= rows.iter().any(|r| !r.trusted);
    }
    if starred {
        let _ = writeln!(out, "\\{UNCONFIRMED_NOTE}\n");
    }
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
         p50_change_pct,p99_change_pct,p999_change_pct,max_change_pct,rate_change_pct,trusted,\
         verdict,basis\n",
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
    fields.push(row.trusted.to_string());
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
    let mut tables = Vec::new();
    for (probe, rows) in by_kind(c) {
        let (cols, grid) = grid(c, probe, &rows);
        tables.push(html::Table {
            caption: format!(
                "{probe}: each later run against the baseline (times in {})",
                unit_of(probe).name()
            ),
            headers: cols.into_iter().map(|c| c.name).collect(),
            rows: (grid.into_iter())
                .map(|r| r.into_iter().map(keep).collect())
                .collect(),
            note: rows
                .iter()
                .any(|r| !r.trusted)
                .then(|| UNCONFIRMED_NOTE.to_string()),
        });
    }
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
                tables,
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
