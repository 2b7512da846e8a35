//! The fleet in the terminal: a line saying what was read, one table row per group of
//! hosts that agree (two lines: each figure's lowest and highest), a row per outlier, the
//! worst and the best host, then each outlier with what sets it apart from the majority.
//! Its length depends on the groups, never on the host count; its width on the layout
//! (`COLUMNS`), cells and lines cut with "…" as every table does.

use crate::report::fleet::rank::Fleet;
use crate::report::fleet::summary::{FIGURES, HostSummary, short_cause};
use crate::report::terminal::group::{self, Cell, Row};
use crate::report::terminal::table::{Layout, Tab, core, cut, wrap};

/// The most lines an outlier's differences take; the CSV and the page hold them whole.
const OUTLIER_LINES: usize = 3;

/// The whole text; `source` says where the results came from ("DIR", "12 files"), and
/// `notes` are lines said after the first (files skipped).
pub fn text(fleet: &Fleet, source: &str, notes: &[String]) -> String {
    let width = Layout::current().wrap_width();
    let mut out = String::new();
    let mut say = |line: String| {
        out.push_str(&wrap(&line, width, "  "));
        out.push('\n');
    };
    say(format!(
        "Fleet of {} results from {source} ({}): each host's figures are its worst CPU's.",
        fleet.hosts.len(),
        kinds(&fleet.hosts)
    ));
    for n in notes {
        say(n.clone());
    }
    if fleet.hosts.is_empty() {
        return out;
    }
    out.push_str(&table(fleet).to_string());
    out.push('\n');
    let mut say = |line: String| {
        out.push_str(&wrap(&line, width, "  "));
        out.push('\n');
    };
    if fleet.grouping.grouped() {
        say(
            "A group's two lines give each figure's lowest (low) and highest (high) over its \
             hosts; --per-host shows each."
                .into(),
        );
    }
    if let Some(line) = extremes(fleet) {
        say(line);
    }
    if let Some(line) = degraded(&fleet.hosts) {
        say(line);
    }
    out.push_str(&outliers(fleet, width));
    out
}

/// "1000 main jobs" or "990 main jobs, 10 noise".
pub fn kinds(hosts: &[HostSummary]) -> String {
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for h in hosts {
        match counts.iter_mut().find(|c| c.0 == h.kind) {
            Some(c) => c.1 += 1,
            None => counts.push((&h.kind, 1)),
        }
    }
    (counts.iter())
        .map(|(k, n)| match *k {
            "run" => format!("{n} main jobs"),
            k => format!("{n} {k}"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A figure of a host as its cell says it: a share with two decimals, ns in µs.
pub fn figure_text(f: usize, v: Option<f64>) -> String {
    match (v, FIGURES[f].ns) {
        (None, _) => "-".into(),
        (Some(v), false) => format!("{v:.2}"),
        (Some(v), true) => format!("{:.1}", v / 1e3),
    }
}

/// Each host's cells after the first column: its figures and top cause (its kernel, when
/// not the majority's, is said with the outliers).
pub fn cells(fleet: &Fleet) -> Vec<Vec<Cell>> {
    (fleet.hosts.iter())
        .map(|h| {
            let mut row: Vec<Cell> = (fleet.shown.iter())
                .map(|&f| match h.figures[f] {
                    Some(v) => group::num(v, figure_text(f, Some(v))),
                    None => group::text("-"),
                })
                .collect();
            let cause = h.top_cause.as_ref().map_or("not traced", |c| c.0.as_str());
            row.push(group::text(short_cause(cause)));
            row
        })
        .collect()
}

/// Each row's label: a host's name, or "412 hosts".
pub fn row_labels(fleet: &Fleet) -> Vec<String> {
    (fleet.grouping.rows.iter())
        .map(|r| match r {
            Row::One(i, _) => fleet.hosts[*i].label.clone(),
            r => format!("{} hosts", r.members().len()),
        })
        .collect()
}

/// The headers after the first column.
pub fn headers(fleet: &Fleet) -> Vec<String> {
    let mut h: Vec<String> = fleet
        .shown
        .iter()
        .map(|&f| FIGURES[f].header.into())
        .collect();
    h.push("top cause".to_string());
    h
}

fn table(fleet: &Fleet) -> Tab {
    let rest: Vec<_> = (headers(fleet).into_iter())
        .enumerate()
        .map(|(i, h)| match i < fleet.shown.len() {
            true => core(h),
            false => core(h).text(),
        })
        .collect();
    let cols = group::columns(&fleet.grouping, core("hosts").text(), rest);
    let mut t = Tab::new(&cols);
    let rows = group::rows_labelled(&fleet.grouping, &row_labels(fleet), &cells(fleet));
    for r in rows {
        t.row(r);
    }
    t
}

/// "Worst by share lost: node0412 (26.92 %), best node0007 (1.19 %); by max gap: …": the
/// worst host by each figure, and the best by those hosts are grouped by.
fn extremes(fleet: &Fleet) -> Option<String> {
    let said: Vec<String> = (fleet.shown.iter())
        .filter_map(|&f| {
            let (worst, best) = fleet.extremes(f)?;
            let fig = FIGURES[f];
            let unit = if fig.ns { "µs" } else { "%" };
            let v = |i: usize| figure_text(f, fleet.hosts[i].figures[f]);
            let name = |i: usize| &fleet.hosts[i].label;
            Some(match fig.ranks {
                true => format!(
                    "{}: {} ({} {unit}), best {} ({} {unit})",
                    fig.key.name,
                    name(worst),
                    v(worst),
                    name(best),
                    v(best)
                ),
                false => format!("{}: {} ({} {unit})", fig.key.name, name(worst), v(worst)),
            })
        })
        .collect();
    (!said.is_empty()).then(|| format!("Worst by {}.", said.join("; by ")))
}

/// "Degraded: virtual-machine on 1000 hosts.", every kind with its count; `None` when no
/// host was.
fn degraded(hosts: &[HostSummary]) -> Option<String> {
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for k in hosts.iter().flat_map(|h| &h.degraded) {
        match counts.iter_mut().find(|c| c.0 == k) {
            Some(c) => c.1 += 1,
            None => counts.push((k, 1)),
        }
    }
    let words: Vec<String> = (counts.iter())
        .map(|(k, n)| format!("{k} on {n} host{}", if *n == 1 { "" } else { "s" }))
        .collect();
    (!words.is_empty()).then(|| format!("Degraded: {}.", words.join(", ")))
}

/// Each outlier with why it stands out and what sets it apart from the majority, at most
/// [`OUTLIER_LINES`] lines each.
fn outliers(fleet: &Fleet, width: Option<usize>) -> String {
    let out = fleet.outliers();
    if out.is_empty() {
        return String::new();
    }
    let m = &fleet.majority;
    let mut text = format!(
        "\nStanding out, against the majority of the {} hosts:\n",
        m.hosts
    );
    for (i, why) in out {
        let h = &fleet.hosts[i];
        let line = format!("  {} ({why}): {}", h.label, m.differences(h).join("; "));
        let wrapped = wrap(&line, width, "    ");
        let lines: Vec<&str> = wrapped.lines().collect();
        for (n, l) in lines.iter().take(OUTLIER_LINES).enumerate() {
            let last_kept = n + 1 == OUTLIER_LINES && lines.len() > OUTLIER_LINES;
            let l = match (width, last_kept) {
                (Some(w), true) => cut(&format!("{l} …"), w),
                (Some(w), false) => cut(l, w),
                (None, _) => l.to_string(),
            };
            text.push_str(&l);
            text.push('\n');
        }
    }
    text
}
