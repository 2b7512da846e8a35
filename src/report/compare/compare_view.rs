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

use crate::report::compare::compare_causes::{CauseGrid, CauseLine, Traced};
use crate::report::compare::{Comparison, Figures, Judgement, Row, change_words, method, relative};
use crate::report::export::plot::Plot;
use crate::report::export::{csv_field, unit_of};
use crate::report::page::html;
use crate::report::page::page_cpus::{self, Drawer, GapKind};
use crate::report::result::dist::UNCONFIRMED_NOTE;
use crate::report::terminal::group;
use crate::report::terminal::table::{
    Col, Layout, Tab, Unit, core, hidden_note, reset_hidden, wide, wrap,
};
use crate::stats::causes::CauseKind;

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

// ---------------------------------------------------------------------------------------
// Groups of entries (`report::terminal::group`): the terminal's rows at many CPUs

/// What the terminal says under a table with groups.
const GROUPED_NOTE: &str = "A group's two lines per run give each figure's lowest and highest \
    over its CPUs, whose verdicts agree; --per-cpu shows each CPU.";

/// The rows of one kind as the terminal shows them.
enum Shown<'a> {
    One(&'a Row),
    /// Rows of one metric, on CPUs whose verdicts agree.
    Group(Vec<&'a Row>),
}

/// The CPU an entry's key names ("cpu7", "cpu7#2"); `None` for other keys.
fn cpu_of(key: &str) -> Option<usize> {
    key.strip_prefix("cpu")?.split('#').next()?.parse().ok()
}

/// A row's verdicts against the baseline, as one key: rows are grouped by it.
fn verdicts(row: &Row) -> String {
    (row.judgements.iter().skip(1))
        .map(|j| j.as_ref().map_or("-", |j| j.verdict.words()))
        .collect::<Vec<_>>()
        .join("/")
}

/// The rows of one kind: each on its own, or, past `group::EACH_UP_TO` CPUs of one
/// metric and without `--per-cpu`, the CPUs whose verdicts agree said once (grouped by
/// their baseline p99 too, so that an outlier in size is named), in `report::terminal::group`'s way.
fn shown<'a>(rows: &[&'a Row]) -> Vec<Shown<'a>> {
    let each = || rows.iter().map(|r| Shown::One(r)).collect();
    let mut metrics: Vec<&str> = Vec::new();
    for r in rows {
        if !metrics.contains(&r.metric) {
            metrics.push(r.metric);
        }
    }
    let of = |m: &str| -> Vec<&'a Row> { rows.iter().copied().filter(|r| r.metric == m).collect() };
    let groups =
        |of: &[&Row]| !group::each_alone(of.len()) && of.iter().all(|r| cpu_of(&r.key).is_some());
    if !metrics.iter().any(|m| groups(&of(m))) {
        return each();
    }
    let keys = [group::latency("baseline p99")];
    let mut out = Vec::new();
    for m in metrics {
        let of = of(m);
        if !groups(&of) {
            out.extend(of.into_iter().map(Shown::One));
            continue;
        }
        let members: Vec<group::Member> = (of.iter())
            .map(|r| group::Member {
                cause: Some(verdicts(r)),
                figures: vec![
                    (r.figures.first().copied().flatten())
                        .and_then(|f| f.p99_ns)
                        .unwrap_or(0) as f64,
                ],
            })
            .collect();
        for row in group::group(&members, &keys).rows {
            match row.members().as_slice() {
                [one] => out.push(Shown::One(of[*one])),
                many => out.push(Shown::Group(many.iter().map(|&i| of[i]).collect())),
            }
        }
    }
    out
}

/// A group's entry: "cpu1-15 (15)".
fn group_key(rows: &[&Row]) -> String {
    let cpus: Vec<usize> = rows.iter().filter_map(|r| cpu_of(&r.key)).collect();
    format!("cpu{} ({})", group::cpu_list(&cpus), rows.len())
}

/// The grid of `shown`: a row on its own as `grid` has it; a group, per run, a line of
/// each figure's lowest and one of its highest over the group's rows.
fn grid_shown(c: &Comparison, probe: &str, shown: &[Shown]) -> (Vec<Column>, Vec<Vec<String>>) {
    let all: Vec<&Row> = (shown.iter())
        .flat_map(|s| match s {
            Shown::One(r) => vec![*r],
            Shown::Group(rs) => rs.clone(),
        })
        .collect();
    let (cols, _) = grid(c, probe, &all);
    let u = unit_of(probe);
    let rates = cols.len() > 9;
    let mut out = Vec::new();
    for s in shown {
        let rows = match s {
            Shown::One(r) => {
                out.extend(grid(c, probe, &[*r]).1);
                continue;
            }
            Shown::Group(rows) => rows,
        };
        for i in 0..c.labels.len() {
            let cells: Vec<Vec<group::Cell>> = (rows.iter())
                .map(|row| {
                    let base = row.figures.first().copied().flatten();
                    let f = row.figures[i];
                    let texts =
                        figure_cells(f.as_ref(), if i == 0 { None } else { base.as_ref() }, u);
                    let values = f.map_or([None; 6], |f| {
                        let ns = |v: Option<u64>| v.map(|v| v as f64);
                        [
                            Some(f.count as f64),
                            ns(f.p50_ns),
                            ns(f.p99_ns),
                            ns(f.p999_ns),
                            ns(f.max_ns),
                            f.rate_per_s,
                        ]
                    });
                    let verdict = row.judgements[i]
                        .as_ref()
                        .map_or_else(String::new, |j| j.verdict.words().to_string());
                    let mut v = vec![group::text(verdict)];
                    v.extend(texts.into_iter().zip(values).map(|(t, v)| match v {
                        Some(v) => group::num(v, t),
                        None => group::text(t),
                    }));
                    if !rates {
                        v.pop();
                    }
                    v
                })
                .collect();
            let members: Vec<usize> = (0..rows.len()).collect();
            for (n, high) in [false, true].into_iter().enumerate() {
                let lead = match (i, n) {
                    (0, 0) => vec![group_key(rows), rows[0].metric_label()],
                    _ => vec![String::new(), String::new()],
                };
                let run = match n {
                    0 => format!("{} low", c.labels[i]),
                    _ => "high".to_string(),
                };
                let mut line = lead;
                line.push(run);
                line.extend(group::extremes_of(&members, &cells, high));
                out.push(line);
            }
        }
    }
    (cols, out)
}

/// Each verdict's basis, one line per later run and row; a group's once, with its
/// first row's basis.
fn shown_bases(c: &Comparison, shown: &[Shown]) -> Vec<String> {
    let mut out = Vec::new();
    for s in shown {
        let rows = match s {
            Shown::One(r) => vec![*r],
            Shown::Group(rs) => rs.clone(),
        };
        let first = rows[0];
        for (i, j) in first.judgements.iter().enumerate() {
            let Some(Judgement { verdict, basis }) = j else {
                continue;
            };
            let (who, on) = match s {
                Shown::One(r) => (r.key.clone(), String::new()),
                Shown::Group(rs) => {
                    let cpus: Vec<usize> = rs.iter().filter_map(|r| cpu_of(&r.key)).collect();
                    (
                        group::cpus_words(&cpus),
                        format!(" on all {}; {} for one", rs.len(), first.key),
                    )
                }
            };
            out.push(format!(
                "{} {who} {}, {} vs {}: {}{on}: {basis}",
                first.probe,
                first.metric,
                c.labels[i],
                c.labels[0],
                verdict.words()
            ));
        }
    }
    out
}

// ---------------------------------------------------------------------------------------
// Causes (`compare_causes`)

/// What a cause's figure reads where its run has no such cause.
const NO_CAUSE: &str = "-";

/// The causes the terminal shows per entry without `--wide` (the unaccounted time
/// aside).
const TERMINAL_CAUSES: usize = 12;

/// The cause grids' columns, the same in every format.
const CAUSE_COLUMNS: [&str; 5] = ["cause", "run", "share (%)", "change (pp)", "time (µs/s)"];

/// What the causes' tables show, said once above them.
const CAUSES_INTRO: &str = "Causes of each traced entry's gaps, from kernel trace \
    events: each cause's share of the interrupted time (a timer's: of its lateness) per run, \
    its change from the baseline in percentage points, and its time per second of run, which \
    shows a change of the whole that shares hide. A task is matched by name and policy, its pid left out (pids differ \
    between runs). A cause a run did not see reads -.";

/// The cause tables' columns in the terminal: the cause is text, cut with "…" to fit.
fn cause_cols() -> Vec<Col> {
    (CAUSE_COLUMNS.iter().enumerate())
        .map(|(i, h)| if i == 0 { core(*h).text() } else { core(*h) })
        .collect()
}

/// A grid's title: the entry (the units are in the column headers).
fn cause_title(g: &CauseGrid) -> String {
    format!("{} {}: causes", g.probe, g.key)
}

/// A grid's rows: per cause, a row per traced run; the cause named on its first.
fn cause_cells(c: &Comparison, g: &CauseGrid) -> Vec<Vec<String>> {
    cells_of(c, g, g.rows.iter())
}

/// The rows of `lines`, of grid `g`.
fn cells_of<'a>(
    c: &Comparison,
    g: &CauseGrid,
    lines: impl Iterator<Item = &'a CauseLine>,
) -> Vec<Vec<String>> {
    let base_traced = g.runs.first() == Some(&Traced::Yes);
    let mut out = Vec::new();
    for line in lines {
        let mut first = true;
        for (i, t) in g.runs.iter().enumerate() {
            if *t != Traced::Yes {
                continue;
            }
            let f = line.figures[i];
            let name = if first {
                line.cause.clone()
            } else {
                String::new()
            };
            first = false;
            let change = match line.change_pp(i) {
                Some(pp) => format!("{pp:+.1}"),
                // The baseline, or a later run beside an untraced baseline: nothing to
                // change from.
                None if i == 0 || !base_traced => String::new(),
                None => NO_CAUSE.into(),
            };
            out.push(vec![
                name,
                c.labels[i].clone(),
                f.map_or(NO_CAUSE.into(), |f| format!("{:.1}", f.share_pct)),
                change,
                f.map_or(NO_CAUSE.into(), |f| format!("{:.1}", f.ns_per_s / 1e3)),
            ]);
        }
    }
    out
}

/// The causes in the terminal: the intro, then per grid its title, the runs without
/// attribution in one line each, and its table.
fn causes_table(c: &Comparison, line: &dyn Fn(&str, &str) -> String) -> String {
    let mut out = String::new();
    if c.causes.is_empty() {
        return out;
    }
    out.push('\n');
    out.push_str(&line(CAUSES_INTRO, ""));
    let mut merged: Vec<&'static str> = Vec::new();
    for g in &c.causes {
        let of: Vec<&CauseGrid> = c.causes.iter().filter(|x| x.probe == g.probe).collect();
        let many = !group::each_alone(of.len()) && of.iter().all(|x| cpu_of(&x.key).is_some());
        if many {
            if !merged.contains(&g.probe) {
                merged.push(g.probe);
                out.push_str(&merged_causes(c, &of, line));
            }
            continue;
        }
        let _ = writeln!(out, "\n{}", cause_title(g));
        for m in g.missing(&c.labels) {
            out.push_str(&line(&m, "  "));
        }
        // A busy host has a hundred causes: the terminal shows the largest, and the
        // unaccounted time, unless --wide.
        let shown: Vec<&CauseLine> = match Layout::current().wide {
            true => g.rows.iter().collect(),
            false => (g.rows.iter())
                .enumerate()
                .filter(|(i, l)| *i < TERMINAL_CAUSES || l.kind == CauseKind::Unaccounted)
                .map(|(_, l)| l)
                .collect(),
        };
        let cells = cells_of(c, g, shown.iter().copied());
        if cells.is_empty() {
            continue;
        }
        let spec = cause_cols();
        let mut t = Tab::new(&spec);
        for r in cells {
            t.row(r);
        }
        let _ = writeln!(out, "{t}");
        let left = g.rows.len() - shown.len();
        if left > 0 {
            out.push_str(&line(
                &format!(
                    "{left} smaller causes left out: --wide shows every one (the CSV, Markdown \
                     and HTML always hold them)"
                ),
                "  ",
            ));
        }
    }
    out
}

/// The causes of many CPUs' grids of one probe as one table: a cause (a per-CPU kernel
/// thread as one, its CPU written N) per run, each figure lowest–highest over the CPUs
/// that saw it; the runs without attribution said once.
fn merged_causes(
    c: &Comparison,
    grids: &[&CauseGrid],
    line: &dyn Fn(&str, &str) -> String,
) -> String {
    struct Merged {
        kind: CauseKind,
        cause: String,
        /// Per run: shares, changes (pp) and times per second over the CPUs.
        share: Vec<Vec<f64>>,
        change: Vec<Vec<f64>>,
        per_s: Vec<Vec<f64>>,
    }
    let n = c.labels.len();
    let mut rows: Vec<Merged> = Vec::new();
    for g in grids {
        let cpu = cpu_of(&g.key).unwrap_or(0);
        for l in &g.rows {
            // Keyed by `compare` already (a task without its pid); only a task's name
            // starts "task ", so any other cause passes through unchanged.
            let key = crate::report::terminal::cause_names::per_cpu_key(cpu, &l.cause);
            let at = match rows.iter().position(|m| m.cause == key) {
                Some(p) => p,
                None => {
                    rows.push(Merged {
                        kind: l.kind,
                        cause: key,
                        share: vec![Vec::new(); n],
                        change: vec![Vec::new(); n],
                        per_s: vec![Vec::new(); n],
                    });
                    rows.len() - 1
                }
            };
            for (i, f) in l.figures.iter().enumerate() {
                if let Some(f) = f {
                    rows[at].share[i].push(f.share_pct);
                    rows[at].per_s[i].push(f.ns_per_s / 1e3);
                }
                if let Some(pp) = l.change_pp(i) {
                    rows[at].change[i].push(pp);
                }
            }
        }
    }
    let top = |m: &Merged| m.share.iter().flatten().fold(0.0, |a: f64, b| a.max(*b));
    rows.sort_by(|a, b| {
        let last = |m: &Merged| m.kind == CauseKind::Unaccounted;
        last(a).cmp(&last(b)).then(top(b).total_cmp(&top(a)))
    });
    let cpus: Vec<usize> = grids.iter().filter_map(|g| cpu_of(&g.key)).collect();
    let probe = grids.first().map_or("", |g| g.probe);
    let mut out = format!(
        "\n{}",
        line(
            &format!(
                "{probe} {}: causes, each figure lowest–highest over the CPUs that saw it (N \
                 in a thread's name is its own CPU)",
                group::cpus_words(&cpus)
            ),
            "  "
        )
    );
    let traced: Vec<usize> = (0..n)
        .filter(|&i| grids.iter().any(|g| g.runs.get(i) == Some(&Traced::Yes)))
        .collect();
    for (i, label) in c.labels.iter().enumerate() {
        if !traced.contains(&i) {
            out.push_str(&line(
                &format!("{probe}: {label} has no attribution on these CPUs"),
                "  ",
            ));
        }
    }
    let spec = cause_cols();
    let mut t = Tab::new(&spec);
    let shown =
        crate::report::terminal::cause_names::shown_causes(&rows, |m| m.kind, TERMINAL_CAUSES);
    let count = shown.len();
    let one = |v: &[f64], fmt: &dyn Fn(f64) -> String| match v.is_empty() {
        true => NO_CAUSE.to_string(),
        false => group::range(v.iter().copied(), fmt),
    };
    for m in shown {
        for (k, &i) in traced.iter().enumerate() {
            t.row(vec![
                if k == 0 {
                    m.cause.clone()
                } else {
                    String::new()
                },
                c.labels[i].clone(),
                one(&m.share[i], &|v| format!("{v:.1}")),
                match i {
                    0 => String::new(),
                    _ => one(&m.change[i], &|v| format!("{v:+.1}")),
                },
                one(&m.per_s[i], &|v| format!("{v:.1}")),
            ]);
        }
    }
    let _ = writeln!(out, "{t}");
    if rows.len() > count {
        out.push_str(&line(
            &format!(
                "{} smaller causes left out: --per-cpu shows each CPU's, --wide every cause \
                 (the CSV, Markdown and HTML always hold them)",
                rows.len() - count
            ),
            "  ",
        ));
    }
    out
}

/// The causes in Markdown.
fn causes_markdown(c: &Comparison, cell: &dyn Fn(&str) -> String) -> String {
    let mut out = String::new();
    if c.causes.is_empty() {
        return out;
    }
    let _ = writeln!(out, "{}\n", CAUSES_INTRO);
    for g in &c.causes {
        let _ = writeln!(out, "### {}\n", cell(&cause_title(g)));
        for m in g.missing(&c.labels) {
            let _ = writeln!(out, "- {}", cell(&m));
        }
        let cells = cause_cells(c, g);
        if !cells.is_empty() {
            let _ = writeln!(out, "\n| {} |", CAUSE_COLUMNS.join(" | "));
            let _ = writeln!(out, "|{}", "---|".repeat(CAUSE_COLUMNS.len()));
            for r in cells {
                let r: Vec<String> = r.iter().map(|s| cell(s)).collect();
                let _ = writeln!(out, "| {} |", r.join(" | "));
            }
        }
        out.push('\n');
    }
    out
}

/// The causes as CSV rows (metric `cause`), in the columns `csv` adds for them: a row
/// per cause and traced run (share empty where the run did not see the cause), and a row
/// per run without attribution, saying so in `basis`.
fn causes_csv(c: &Comparison, out: &mut String) {
    for g in &c.causes {
        let lead = |i: usize| {
            vec![
                g.probe.to_string(),
                g.key.clone(),
                "cause".to_string(),
                c.labels[i].clone(),
                c.labels[0].clone(),
            ]
        };
        let fields_of = |mut fields: Vec<String>, rest: [String; CSV_CAUSES.len()], basis| {
            fields.extend(std::iter::repeat_n(String::new(), CSV_FIGURES.len()));
            fields.extend(rest);
            // The tail: not judged, so neither trusted nor a verdict; the basis says why.
            fields.extend([String::new(), String::new(), basis]);
            let f: Vec<String> = fields.iter().map(|s| csv_field(s)).collect();
            f.join(",")
        };
        for (i, t) in g.runs.iter().enumerate() {
            if *t == Traced::Yes {
                continue;
            }
            let why = g.why_missing(i, &c.labels[i]).unwrap_or_default();
            let _ = writeln!(out, "{}", fields_of(lead(i), Default::default(), why));
        }
        for line in &g.rows {
            for (i, _) in g
                .runs
                .iter()
                .enumerate()
                .filter(|(_, t)| **t == Traced::Yes)
            {
                let f = line.figures[i];
                let rest = [
                    crate::report::export::serde_name(&line.kind),
                    line.cause.clone(),
                    f.map_or_else(String::new, |f| format!("{:.3}", f.share_pct)),
                    line.change_pp(i)
                        .map_or_else(String::new, |pp| format!("{pp:.3}")),
                    f.map_or_else(String::new, |f| format!("{:.0}", f.ns_per_s)),
                ];
                let _ = writeln!(out, "{}", fields_of(lead(i), rest, String::new()));
            }
        }
    }
}

/// The causes on the comparison page: the intro, and per grid its missing runs and table.
fn causes_section(c: &Comparison) -> Option<html::Section> {
    if c.causes.is_empty() {
        return None;
    }
    let mut text = vec![CAUSES_INTRO.to_string()];
    let mut tables = Vec::new();
    for g in &c.causes {
        text.extend(g.missing(&c.labels));
        let rows = cause_cells(c, g);
        if rows.is_empty() {
            continue;
        }
        tables.push(html::Table {
            caption: format!(
                "{}: share of {} (%), change from {} (percentage points) and time per \
                 second of run (µs/s)",
                cause_title(g),
                GapKind::of_probe(g.probe).map_or("interrupted time", GapKind::of),
                c.labels[0]
            ),
            headers: CAUSE_COLUMNS.map(String::from).to_vec(),
            rows,
            note: None,
        });
    }
    // Of many CPUs, each table folded under its caption: the page stays a page.
    let folds = match tables.len() > crate::report::page::page_cpus::FEW {
        true => (tables.drain(..))
            .map(|t| html::Fold {
                summary: t.caption.clone(),
                tables: vec![t],
                ..Default::default()
            })
            .collect(),
        false => Vec::new(),
    };
    Some(html::Section {
        heading: "Causes, from kernel trace events".into(),
        text,
        tables,
        folds,
        ..Default::default()
    })
}

/// The longest run name the terminal's tables print in their run column: a longer one
/// (a dated file stem is 31 characters) would repeat across every row, so every run is
/// then called by a letter, said once above the tables.
const SHORT_LABEL: usize = 12;

/// The names the terminal's tables call the runs: the labels when each fits
/// [`SHORT_LABEL`], else A, B, … Z, then R27, R28 ….
pub fn terminal_labels(labels: &[String]) -> Vec<String> {
    if labels.iter().all(|l| l.chars().count() <= SHORT_LABEL) {
        return labels.to_vec();
    }
    (0..labels.len())
        .map(|i| match u8::try_from(i).ok().filter(|&i| i < 26) {
            Some(i) => char::from(b'A' + i).to_string(),
            None => format!("R{}", i + 1),
        })
        .collect()
}

/// The runs, said once above the terminal's tables, a line each: the name the tables
/// use, the run's own label when that differs and is not its file's stem, and its file.
fn runs_said(c: &Comparison, names: &[String], paths: &[String]) -> String {
    let mut out = format!("Runs ({} the baseline):\n", c.labels[0]);
    for ((short, name), path) in c.labels.iter().zip(names).zip(paths) {
        let stem = std::path::Path::new(path).file_stem();
        let named = match short == name || stem.is_some_and(|s| s.to_string_lossy() == **name) {
            true => String::new(),
            false => format!("{name}: "),
        };
        let _ = writeln!(out, "  {short}  {named}{path}");
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

/// The terminal tables, one per probe kind, fitted to the layout's width: the runs said
/// once above them (`c`'s labels are the short names of [`terminal_labels`], `names` the
/// runs' own), the wide-only columns left out and every line of text wrapped unless
/// `--wide`.
pub fn table(c: &Comparison, names: &[String], paths: &[String]) -> String {
    reset_hidden();
    let width = Layout::current().wrap_width();
    let line = |text: &str, indent: &str| format!("{}\n", wrap(text, width, indent));
    let mut out = runs_said(c, names, paths);
    for d in &c.differences {
        out.push_str(&line(&format!("note: {d}"), "  "));
    }
    let mut starred = false;
    let mut said = Vec::new();
    for (probe, rows) in by_kind(c) {
        let shown = shown(&rows);
        let (cols, grid) = grid_shown(c, probe, &shown);
        // The entry is text, cut at its start (a path's end names the entry). When the figures do not fit, the one that matters least
        // gives way: p50 where the tail is the point (noise, timer: µs), the max where
        // the median is (a cost or a transit: ns).
        let spare = match unit_of(probe) {
            Unit::Us => 5,
            Unit::Ns => 8,
        };
        // The metric and the verdict are words, cut with "…" where the figures leave no
        // room (each verdict is said whole in its basis below the tables).
        let spec: Vec<Col> = (cols.into_iter().enumerate())
            .map(|(i, c)| match (c.core, i) {
                (true, 0) => core(c.name).text_tail(),
                (true, 1 | 3) => core(c.name).text(),
                (true, i) if i == spare => core(c.name).spare(),
                (true, _) => core(c.name),
                (false, _) => wide(c.name),
            })
            .collect();
        let mut t = Tab::new(&spec);
        for r in grid {
            t.row(r);
        }
        let _ = writeln!(out, "\n{probe}\n{t}");
        if shown.iter().any(|s| matches!(s, Shown::Group(_))) {
            let _ = write!(out, "{}", line(GROUPED_NOTE, "  "));
        }
        starred |= rows.iter().any(|r| !r.trusted);
        said.extend(shown_bases(c, &shown));
    }
    if starred {
        out.push_str(&line(UNCONFIRMED_NOTE, "  "));
    }
    out.push_str(&causes_table(c, &line));
    out.push('\n');
    for b in said {
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
    out.push_str(&causes_markdown(c, &cell));
    for b in bases(c) {
        let _ = writeln!(out, "- {}", cell(&b));
    }
    let _ = writeln!(out, "\n{}", method());
    out
}

/// The CSV's columns, in four groups: a distribution's rows fill the figures and leave
/// the causes empty, a cause's rows the reverse; both fill the lead and the tail.
const CSV_LEAD: [&str; 5] = ["probe", "key", "metric", "run", "baseline"];
const CSV_FIGURES: [&str; 11] = [
    "count",
    "p50_ns",
    "p99_ns",
    "p999_ns",
    "max_ns",
    "rate_per_s",
    "p50_change_pct",
    "p99_change_pct",
    "p999_change_pct",
    "max_change_pct",
    "rate_change_pct",
];
const CSV_CAUSES: [&str; 5] = [
    "cause_kind",
    "cause",
    "share_pct",
    "share_change_pp",
    "cause_ns_per_s",
];
const CSV_TAIL: [&str; 3] = ["trusted", "verdict", "basis"];

/// CSV: one row per distribution and run, raw figures, the change from the baseline in
/// percent (empty for the baseline), the verdict and its basis; then the causes' rows
/// (metric `cause`, see `causes_csv`), which fill the five cause columns instead.
pub fn csv(c: &Comparison) -> String {
    let header = [&CSV_LEAD[..], &CSV_FIGURES, &CSV_CAUSES, &CSV_TAIL].concat();
    let mut out = header.join(",") + "\n";
    for row in &c.rows {
        for (i, f) in row.figures.iter().enumerate() {
            let _ = writeln!(out, "{}", csv_row(c, row, i, f.as_ref()));
        }
    }
    causes_csv(c, &mut out);
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
        None => fields.extend(std::iter::repeat_n(String::new(), CSV_FIGURES.len())),
    }
    // The cause columns belong to the cause rows (`causes_csv`).
    fields.extend(std::iter::repeat_n(String::new(), CSV_CAUSES.len()));
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
pub fn page(c: &Comparison, paths: &[String], plots: Result<Vec<Plot>, String>) -> html::Page {
    let mut warnings = c.differences.clone();
    let mut drawer = Drawer::default();
    let (figures, note) = match plots {
        Ok(plots) => {
            let (plots, note) = bounded_plots(c, plots);
            let figures = (plots.iter()).filter_map(|p| drawer.figure(p, None));
            (figures.collect(), note)
        }
        Err(e) => {
            warnings.push(format!("plots left out: {e}"));
            (Vec::new(), None)
        }
    };
    warnings.extend(drawer.warning());
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
        sections: [html::Section {
            heading: "Verdicts".into(),
            text: vec![runs_line(c, paths)],
            tables,
            ..Default::default()
        }]
        .into_iter()
        .chain(causes_section(c))
        .chain([
            html::Section {
                heading: "What each verdict rests on".into(),
                text: basis,
                ..Default::default()
            },
            html::Section {
                heading: "Plots".into(),
                text: note.into_iter().collect(),
                figures,
                ..Default::default()
            },
        ])
        .collect(),
    }
}

/// The comparison page's plots, bounded: of a per-CPU kind (noise, timer) of more than
/// `page_cpus::FEW` CPUs, only the plots of the `FEW` CPUs whose p99 changed most against
/// the baseline (any verdict other than "no clear difference" first), and a note that
/// names how many were left out; every other plot as it is.
fn bounded_plots(c: &Comparison, plots: Vec<Plot>) -> (Vec<Plot>, Option<String>) {
    let mut kept_keys: Vec<(&'static str, Vec<String>)> = Vec::new();
    let mut left_out = Vec::new();
    for kind in page_cpus::KINDS {
        let rows: Vec<_> = (c.rows.iter())
            .filter(|r| r.probe == kind.probe())
            .filter(|r| r.figures.iter().flatten().next().is_some())
            .collect();
        let mut keys: Vec<&str> = rows.iter().map(|r| r.key.as_str()).collect();
        keys.dedup();
        if keys.len() <= page_cpus::FEW {
            continue;
        }
        let mut ranked: Vec<(bool, f64, &str)> = (rows.iter())
            .map(|r| (judged(r), p99_change(r), r.key.as_str()))
            .collect();
        ranked.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.total_cmp(&a.1)));
        let mut kept: Vec<String> = Vec::new();
        for (_, _, key) in ranked {
            if kept.len() < page_cpus::FEW && !kept.iter().any(|k| k == key) {
                kept.push(key.to_string());
            }
        }
        left_out.push(format!(
            "{} of {} {} CPUs",
            keys.len() - kept.len(),
            keys.len(),
            kind.probe()
        ));
        kept_keys.push((kind.probe(), kept));
    }
    if kept_keys.is_empty() {
        return (plots, None);
    }
    let keep = |p: &Plot| match &p.subject {
        Some(s) => (kept_keys.iter())
            .find(|(probe, _)| *probe == s.probe)
            .is_none_or(|(_, keys)| keys.contains(&s.key)),
        None => true,
    };
    let kept: Vec<Plot> = plots.into_iter().filter(|p| keep(p)).collect();
    let named: Vec<String> = (kept_keys.iter())
        .map(|(probe, keys)| format!("{probe} {}", keys.join(", ")))
        .collect();
    let note = format!(
        "Plots of the CPUs whose p99 changed most are drawn ({}); those of {} are left \
         out, the page would otherwise hold hundreds. `compare --format svg -o DIR` draws \
         every one.",
        named.join("; "),
        left_out.join(" and ")
    );
    (kept, Some(note))
}

/// Whether a row has a verdict other than "no clear difference" in some run.
fn judged(r: &Row) -> bool {
    use crate::report::compare::Verdict;
    (r.judgements.iter().flatten()).any(|j| j.verdict != Verdict::NoClearDifference)
}

/// The largest change of a row's p99 from the baseline's, as |log ratio|.
fn p99_change(r: &Row) -> f64 {
    let p99 = |f: &Option<Figures>| f.and_then(|f| f.p99_ns);
    let Some(base) = r.figures.first().and_then(p99).filter(|&b| b > 0) else {
        return 0.0;
    };
    (r.figures.iter().skip(1).filter_map(p99))
        .map(|v| (v.max(1) as f64 / base as f64).ln().abs())
        .fold(0.0, f64::max)
}
