//! CPUs (or watched threads) whose figures and causes agree, said once as a group: what
//! keeps terminal output bounded whatever the CPU count. A host of 192 CPUs gives a few
//! groups and a few outliers, not 192 rows; a host of up to four gives each its own.
//!
//! # When members agree
//!
//! Two members agree when the same cause took most of their lost time, and each of their
//! key figures (a view's few: share of time lost, a p99) is within the group's band. A
//! figure is compared on a log scale (1 % against 2 % lost differs as much as 10 % against
//! 20 %), after raising it to its key's resolution, below which differences mean nothing
//! (0.01 % of time lost; 1 µs of latency). Each key has a tolerance factor: how far one
//! CPU's own figure moves from run to run. On the 16-CPU host (tests/fixtures/host16,
//! two 20 s runs of the same CPUs) a CPU's share of time lost moved by up to ×1.42, and
//! its p99 by up to ×2.7, so the tolerance is ×1.5 for shares and ×3 for latencies.
//!
//! Members are split, for each key in turn, in three steps:
//! 1. by cause: members whose largest cause differs are never in one group;
//! 2. by gaps: sorted by the figure, a part is cut wherever two neighbours differ by more
//!    than the tolerance, and a part whose figures span more than the tolerance squared
//!    is cut at its widest gap until none does; so two modes (isolated CPUs at 0.01 % and
//!    busy ones at 2 %) never share a group, and a group's range stays readable;
//! 3. by the robust band: within a part, a member whose figure lies further from the
//!    part's median than three robust standard deviations (1.4826 × the median absolute
//!    deviation, the usual consistent estimate) and than the tolerance is an outlier.
//!
//! A part of one member is an outlier too. At most [`MAX_OUTLIERS`] outliers are named
//! (the furthest out); the others stay in their part. At most [`MAX_ROWS`] rows are made:
//! past that, the smallest groups are merged into one row of the rest, whose ranges say
//! so. The noisiest and the quietest member (by the first key) are named apart.
//!
//! Grouping is a pure function of the figures, so that the live run and `report` of its
//! saved result say the same.

use crate::engine::cpu::CpuList;
use crate::report::terminal::table::{Col, Layout, core, wrap};
use crate::stats::rank::{MAD_TO_SIGMA, median};

/// Up to this many members, each is its own row: grouping would hide nothing.
pub const EACH_UP_TO: usize = 4;
/// The most outliers named; the most rows made.
pub const MAX_OUTLIERS: usize = 8;
pub const MAX_ROWS: usize = 12;
/// How many robust standard deviations from its part's median make an outlier.
const BAND_SIGMAS: f64 = 3.0;

/// How a key figure is compared.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Key {
    /// What the figure is, as an outlier's reason names it ("share of time lost").
    pub name: &'static str,
    /// The factor within which one member's own figure moves from run to run.
    pub tolerance: f64,
    /// The figure's resolution: smaller values are raised to it.
    pub resolution: f64,
}

/// A share of time, in %: ×1.5, to 0.01 %.
pub const fn share(name: &'static str) -> Key {
    Key {
        name,
        tolerance: 1.5,
        resolution: 0.01,
    }
}

/// A latency, in ns: ×3, to 1 µs.
pub const fn latency(name: &'static str) -> Key {
    Key {
        name,
        tolerance: 3.0,
        resolution: 1_000.0,
    }
}

/// One member to group: the cause that took most of its time (`None` when nothing was
/// measured of its causes) and its key figures, one per key.
#[derive(Debug, Clone, PartialEq)]
pub struct Member {
    pub cause: Option<String>,
    pub figures: Vec<f64>,
}

/// Why a member is named on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// Few members: each is said on its own.
    Few,
    /// Its largest cause is one no other member shares.
    Cause,
    /// Key `k`'s figure is above (`true`) or below the others'.
    Figure { key: usize, high: bool },
}

/// One row of output: a group, a member on its own, or the rest.
#[derive(Debug, Clone, PartialEq)]
pub enum Row {
    /// Members that agree (indices into the input, ascending).
    Group(Vec<usize>),
    /// One member, and why it is on its own.
    One(usize, Why),
    /// Groups merged past [`MAX_ROWS`]: they agree within themselves, not with each other.
    Rest(Vec<usize>),
}

impl Row {
    /// The members of the row, ascending.
    pub fn members(&self) -> Vec<usize> {
        match self {
            Row::Group(m) | Row::Rest(m) => m.clone(),
            Row::One(i, _) => vec![*i],
        }
    }
}

/// The rows, in the order of their first member, and the extremes by the first key.
#[derive(Debug, Clone, PartialEq)]
pub struct Grouping {
    pub rows: Vec<Row>,
    pub noisiest: Option<usize>,
    pub quietest: Option<usize>,
}

impl Grouping {
    /// Each member its own row (`--per-cpu`), with the extremes still known.
    pub fn each(members: &[Member]) -> Grouping {
        Grouping {
            rows: (0..members.len()).map(|i| Row::One(i, Why::Few)).collect(),
            ..extremes(members)
        }
    }

    /// Whether any row holds several members.
    pub fn grouped(&self) -> bool {
        self.rows.iter().any(|r| !matches!(r, Row::One(..)))
    }

    /// The members named on their own because they stand out.
    pub fn outliers(&self) -> Vec<(usize, Why)> {
        (self.rows.iter())
            .filter_map(|r| match r {
                Row::One(i, w) if *w != Why::Few => Some((*i, *w)),
                _ => None,
            })
            .collect()
    }
}

/// The members grouped as the current layout asks: each on its own with `--per-cpu`
/// (`--per-thread`), else by `keys`. The one place the views decide it.
pub fn in_layout(members: &[Member], keys: &[Key]) -> Grouping {
    match Layout::current().per_cpu {
        true => Grouping::each(members),
        false => group(members, keys),
    }
}

/// Whether `n` members are each shown on their own: with `--per-cpu`, or up to
/// [`EACH_UP_TO`] of them.
pub fn each_alone(n: usize) -> bool {
    Layout::current().per_cpu || n <= EACH_UP_TO
}

/// A legend (`legend`, `legend_of`) as the tables print it: wrapped to the layout, with
/// its newline; nothing for none.
pub fn legend_block(legend: &str) -> String {
    match legend.is_empty() {
        true => String::new(),
        false => format!("{}\n", wrap(legend, Layout::current().wrap_width(), "  ")),
    }
}

/// The members grouped by `keys` (see the module's doc).
pub fn group(members: &[Member], keys: &[Key]) -> Grouping {
    if members.len() <= EACH_UP_TO {
        return Grouping::each(members);
    }
    let mut parts: Vec<Vec<usize>> = by_cause(members);
    for (k, key) in keys.iter().enumerate() {
        let logs: Vec<f64> = members.iter().map(|m| log_of(m, k, key)).collect();
        parts = (parts.into_iter())
            .flat_map(|p| split(p, &logs, key.tolerance.ln()))
            .collect();
    }
    let mut singles: Vec<(usize, Why, f64)> = Vec::new();
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for part in parts {
        if part.len() == 1 {
            let i = part[0];
            singles.push((i, lone_why(members, keys, i), f64::INFINITY));
            continue;
        }
        let (kept, out) = band(members, keys, part);
        singles.extend(out);
        groups.push(kept);
    }
    // The furthest out first; past the most named, an outlier stays with its part.
    singles.sort_by(|a, b| b.2.total_cmp(&a.2));
    let mut rows: Vec<Row> = Vec::new();
    let mut rest: Vec<usize> = Vec::new();
    for (n, (i, why, _)) in singles.into_iter().enumerate() {
        match (n < MAX_OUTLIERS, home(&mut groups, members, i)) {
            (true, _) => rows.push(Row::One(i, why)),
            (false, Some(g)) => g.push(i),
            (false, None) => rest.push(i),
        }
    }
    groups.retain(|g| !g.is_empty());
    groups.sort_by_key(|g| std::cmp::Reverse(g.len()));
    let mut room = MAX_ROWS.saturating_sub(rows.len());
    if !rest.is_empty() || groups.len() > room {
        room = room.saturating_sub(1).max(1);
    }
    for (n, g) in groups.into_iter().enumerate() {
        match n < room {
            true if g.len() == 1 => rows.push(Row::One(g[0], Why::Few)),
            true => rows.push(Row::Group(sorted(g))),
            false => rest.extend(g),
        }
    }
    if !rest.is_empty() {
        rows.push(Row::Rest(sorted(rest)));
    }
    rows.sort_by_key(|r| r.members()[0]);
    Grouping {
        rows,
        ..extremes(members)
    }
}

fn sorted(mut v: Vec<usize>) -> Vec<usize> {
    v.sort_unstable();
    v
}

/// The group a member past the named outliers rejoins: the one sharing its cause whose
/// median figures are nearest; `None` when no group shares its cause.
fn home<'a>(
    groups: &'a mut [Vec<usize>],
    members: &[Member],
    i: usize,
) -> Option<&'a mut Vec<usize>> {
    let dist = |g: &Vec<usize>| {
        let m = g[g.len() / 2];
        (members[m].figures.iter().zip(&members[i].figures))
            .map(|(a, b)| (a.max(1e-12).ln() - b.max(1e-12).ln()).abs())
            .sum::<f64>()
    };
    (groups.iter_mut())
        .filter(|g| !g.is_empty() && members[g[0]].cause == members[i].cause)
        .min_by(|a, b| dist(a).total_cmp(&dist(b)))
}

/// The members by their largest cause, the largest class first.
fn by_cause(members: &[Member]) -> Vec<Vec<usize>> {
    let mut classes: Vec<(Option<&String>, Vec<usize>)> = Vec::new();
    for (i, m) in members.iter().enumerate() {
        match classes.iter_mut().find(|c| c.0 == m.cause.as_ref()) {
            Some(c) => c.1.push(i),
            None => classes.push((m.cause.as_ref(), vec![i])),
        }
    }
    classes.sort_by_key(|c| std::cmp::Reverse(c.1.len()));
    classes.into_iter().map(|c| c.1).collect()
}

/// Key `k`'s figure of a member on the log scale, raised to the key's resolution.
fn log_of(m: &Member, k: usize, key: &Key) -> f64 {
    let v = m.figures.get(k).copied().unwrap_or(0.0);
    let v = if v.is_finite() { v } else { 0.0 };
    v.max(key.resolution).ln()
}

/// A part cut wherever sorted neighbours are more than `tol` apart (log scale), then at
/// its widest gap while it spans more than twice `tol`.
fn split(mut part: Vec<usize>, logs: &[f64], tol: f64) -> Vec<Vec<usize>> {
    part.sort_by(|a, b| logs[*a].total_cmp(&logs[*b]));
    let mut runs: Vec<Vec<usize>> = Vec::new();
    for i in part {
        match runs.last_mut() {
            Some(r) if logs[i] - logs[*r.last().expect("a run is never empty")] <= tol => r.push(i),
            _ => runs.push(vec![i]),
        }
    }
    let mut out = Vec::new();
    while let Some(r) = runs.pop() {
        let span = logs[r[r.len() - 1]] - logs[r[0]];
        if span <= 2.0 * tol {
            out.push(r);
            continue;
        }
        let at = cut_at(&r, logs);
        runs.push(r[..at].to_vec());
        runs.push(r[at..].to_vec());
    }
    out
}

/// Where a run too wide is cut: at its widest gap when that gap is clearly one (twice
/// the median gap), else nearest the middle of its span, so that an even spread is
/// halved rather than shaved one member at a time.
fn cut_at(r: &[usize], logs: &[f64]) -> usize {
    let gap = |j: usize| logs[r[j]] - logs[r[j - 1]];
    let gaps: Vec<f64> = (1..r.len()).map(gap).collect();
    let widest = (1..r.len())
        .max_by(|&a, &b| gap(a).total_cmp(&gap(b)))
        .expect("a run spanning anything has two members");
    if gap(widest) > 2.0 * median(&gaps).unwrap_or(0.0) {
        return widest;
    }
    let mid = (logs[r[0]] + logs[r[r.len() - 1]]) / 2.0;
    (1..r.len())
        .min_by(|&a, &b| {
            (logs[r[a]] - mid)
                .abs()
                .total_cmp(&(logs[r[b]] - mid).abs())
        })
        .expect("two members at least")
}

/// A part's members within its robust band on every key, and the outliers, each with
/// why and how far out (in bands).
fn band(
    members: &[Member],
    keys: &[Key],
    part: Vec<usize>,
) -> (Vec<usize>, Vec<(usize, Why, f64)>) {
    let mut worst: Vec<Option<(Why, f64)>> = vec![None; part.len()];
    for (k, key) in keys.iter().enumerate() {
        let logs: Vec<f64> = part.iter().map(|&i| log_of(&members[i], k, key)).collect();
        let med = median(&logs).unwrap_or(0.0);
        let dev: Vec<f64> = logs.iter().map(|l| (l - med).abs()).collect();
        let width =
            (BAND_SIGMAS * MAD_TO_SIGMA * median(&dev).unwrap_or(0.0)).max(key.tolerance.ln());
        for (j, l) in logs.iter().enumerate() {
            let out = (l - med).abs() / width;
            if out > 1.0 && worst[j].is_none_or(|w| out > w.1) {
                let why = Why::Figure {
                    key: k,
                    high: *l > med,
                };
                worst[j] = Some((why, out));
            }
        }
    }
    let mut kept = Vec::new();
    let mut out = Vec::new();
    for (j, i) in part.into_iter().enumerate() {
        match worst[j] {
            Some((why, by)) => out.push((i, why, by)),
            None => kept.push(i),
        }
    }
    (kept, out)
}

/// Why a part of one member stands alone: its cause, when no other member shares it;
/// else the key figure furthest from the other members' median.
fn lone_why(members: &[Member], keys: &[Key], i: usize) -> Why {
    let same = members
        .iter()
        .filter(|m| m.cause == members[i].cause)
        .count();
    if same == 1 {
        return Why::Cause;
    }
    let mut best = (0, 0.0, true);
    for (k, key) in keys.iter().enumerate() {
        let others: Vec<f64> = (0..members.len())
            .filter(|&j| j != i)
            .map(|j| log_of(&members[j], k, key))
            .collect();
        let d = log_of(&members[i], k, key) - median(&others).unwrap_or(0.0);
        if d.abs() / key.tolerance.ln() > best.1 {
            best = (k, d.abs() / key.tolerance.ln(), d > 0.0);
        }
    }
    Why::Figure {
        key: best.0,
        high: best.2,
    }
}

/// The members with the highest and lowest first figure (the first of equals).
fn extremes(members: &[Member]) -> Grouping {
    let first = |i: usize| members[i].figures.first().copied().unwrap_or(0.0);
    let idx = 0..members.len();
    let noisiest = idx
        .clone()
        .reduce(|a, b| if first(b) > first(a) { b } else { a });
    let quietest = idx.reduce(|a, b| if first(b) < first(a) { b } else { a });
    let two = members.len() >= 2;
    Grouping {
        rows: Vec::new(),
        noisiest: noisiest.filter(|_| two),
        quietest: quietest.filter(|_| two),
    }
}

// ---------------------------------------------------------------------------------------
// Words

/// "CPU 7" or "CPUs 1-15" (the kernel's compact list).
pub fn cpus_words(cpus: &[usize]) -> String {
    match cpus {
        [one] => format!("CPU {one}"),
        _ => format!("CPUs {}", cpu_list(cpus).replace(',', ", ")),
    }
}

/// A list's compact form: "1-15" or "3,7-9".
pub fn cpu_list(cpus: &[usize]) -> String {
    CpuList::from_cpus(cpus.to_vec()).to_string()
}

/// The lowest and highest of `values`, formatted: "1.19–1.92", or one figure when both
/// read the same.
pub fn range(values: impl IntoIterator<Item = f64>, fmt: impl Fn(f64) -> String) -> String {
    let (lo, hi) = values
        .into_iter()
        .filter(|v| v.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
    if lo > hi {
        return "-".into();
    }
    let (a, b) = (fmt(lo), fmt(hi));
    match a == b {
        true => a,
        false => format!("{a}–{b}"),
    }
}

/// The distinct values of `cells`, in order of first sight, joined with "/": a column
/// of text over a group ("other", "fifo 90/other").
pub fn distinct(cells: impl IntoIterator<Item = String>) -> String {
    let mut seen: Vec<String> = Vec::new();
    for c in cells {
        if !seen.contains(&c) {
            seen.push(c);
        }
    }
    seen.join("/")
}

/// The longest label a table's first column holds ("1-15,17-31 (30)" is 15): a group
/// whose list is longer is named by a letter there and said whole under the table.
const LABEL_MAX: usize = 14;

/// Each row's label in a table's first column: "7" for one CPU, "1-15 (15)" for several,
/// "(a) 13 CPUs" for several whose list is too long for the column (`ids` names each
/// member).
pub fn row_labels(g: &Grouping, ids: &[usize]) -> Vec<String> {
    let mut letters = (b'a'..=b'z').map(char::from).cycle();
    (g.rows.iter())
        .map(|r| {
            let cpus: Vec<usize> = r.members().iter().map(|&i| ids[i]).collect();
            let label = format!("{} ({})", cpu_list(&cpus), cpus.len());
            match cpus.as_slice() {
                [one] => one.to_string(),
                _ if label.chars().count() <= LABEL_MAX => label,
                _ => format!("({}) {} CPUs", letters.next().unwrap_or('?'), cpus.len()),
            }
        })
        .collect()
}

/// The line under a grouped table: what a row of several means, who stands out and why,
/// the extremes by the first key (`first` gives a member's figure in words), and how to
/// see each. `name` gives a member's label ("CPU 7"). Empty when nothing was grouped.
pub fn legend(
    g: &Grouping,
    keys: &[Key],
    ids: &[usize],
    first: &dyn Fn(usize) -> String,
    each: &str,
) -> String {
    let mut lists = Vec::new();
    for (label, r) in row_labels(g, ids).iter().zip(&g.rows) {
        if let Some(letter) = label.strip_prefix('(').and_then(|l| l.split(')').next()) {
            let cpus: Vec<usize> = r.members().iter().map(|&i| ids[i]).collect();
            lists.push(format!("({letter}) is {}", cpus_words(&cpus)));
        }
    }
    legend_of(g, keys, &|i| format!("CPU {}", ids[i]), first, each, lists)
}

/// The same for members named by `name` ("app:812"), with `said` (what the labels
/// stand for) after the first sentence.
pub fn legend_of(
    g: &Grouping,
    keys: &[Key],
    name: &dyn Fn(usize) -> String,
    first: &dyn Fn(usize) -> String,
    each: &str,
    said: Vec<String>,
) -> String {
    if !g.grouped() {
        return String::new();
    }
    let mut parts = vec![
        "A group's two lines give each figure's lowest (low) and highest (high) over its \
         members"
            .to_string(),
    ];
    parts.extend(said);
    let out = g.outliers();
    if !out.is_empty() {
        let said: Vec<String> = (out.iter())
            .map(|(i, why)| format!("{} ({})", name(*i), why_words(*why, keys)))
            .collect();
        parts.push(format!("standing out: {}", said.join(", ")));
    }
    if g.rows.iter().any(|r| matches!(r, Row::Rest(_))) {
        parts.push("the last row merges the smallest groups".into());
    }
    if let (Some(hi), Some(lo)) = (g.noisiest, g.quietest) {
        parts.push(format!(
            "highest {} ({}), lowest {} ({})",
            name(hi),
            first(hi),
            name(lo),
            first(lo)
        ));
    }
    format!("{}; {each} shows each.", parts.join("; "))
}

/// Why a member stands out, in words: "its largest cause is its own", "p99 high".
pub fn why_words(why: Why, keys: &[Key]) -> String {
    match why {
        Why::Few => "on its own".into(),
        Why::Cause => "another largest cause".into(),
        Why::Figure { key, high } => format!(
            "{} {}",
            keys.get(key).map_or("figure", |k| k.name),
            if high { "high" } else { "low" }
        ),
    }
}

// ---------------------------------------------------------------------------------------
// Tables

/// One cell of a member's row: its text, and for a figure its value, by which a group's
/// lowest and highest are chosen.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    pub text: String,
    pub value: Option<f64>,
}

/// A figure's cell.
pub fn num(value: f64, text: String) -> Cell {
    Cell {
        text,
        value: Some(value),
    }
}

/// A text cell: over a group, its distinct values joined.
pub fn text(text: impl Into<String>) -> Cell {
    Cell {
        text: text.into(),
        value: None,
    }
}

/// The header of the column a grouped table adds after its first, whose cells say which
/// of a group's two lines it is ("low", "high"): none, to keep the table narrow.
pub const OF_COLUMN: &str = "";

/// The columns of a table whose rows are `g`'s: `first` (the CPUs), then, when `g`
/// grouped anything, the column naming a group's two lines, then `rest`.
pub(crate) fn columns(g: &Grouping, first: Col, rest: Vec<Col>) -> Vec<Col> {
    let mut v = vec![first];
    if g.grouped() {
        v.push(core(OF_COLUMN).text());
    }
    v.extend(rest);
    v
}

/// The table rows of `g`: a member on its own is one line, as it would be ungrouped; a
/// group is two, each figure's lowest and then its highest over the group's members
/// (figures from different members: a line is not a member). `ids` names each member
/// (a CPU number); `cells` gives each member's cells after the first column.
pub fn table_rows(g: &Grouping, ids: &[usize], cells: &[Vec<Cell>]) -> Vec<Vec<String>> {
    rows_labelled(g, &row_labels(g, ids), cells)
}

/// The same, each row of the grouping labelled by `labels` (one per row).
pub fn rows_labelled(g: &Grouping, labels: &[String], cells: &[Vec<Cell>]) -> Vec<Vec<String>> {
    let grouped = g.grouped();
    let mut out = Vec::new();
    for (row, label) in g.rows.iter().zip(labels) {
        let members = row.members();
        if let Row::One(i, _) = row {
            let mut line = vec![label.clone()];
            if grouped {
                line.push(String::new());
            }
            line.extend(cells[*i].iter().map(|c| c.text.clone()));
            out.push(line);
            continue;
        }
        for (n, high) in [false, true].into_iter().enumerate() {
            let mut line = match n {
                0 => vec![label.clone(), "low".to_string()],
                _ => vec![String::new(), "high".to_string()],
            };
            line.extend(extremes_of(&members, cells, high));
            out.push(line);
        }
    }
    out
}

/// A group's line of cells: each column's lowest (or highest) figure over `members`, a
/// text column's distinct values.
pub fn extremes_of(members: &[usize], cells: &[Vec<Cell>], high: bool) -> Vec<String> {
    let columns = members
        .first()
        .and_then(|&m| cells.get(m))
        .map_or(0, Vec::len);
    (0..columns)
        .map(|c| extreme(members, cells, c, high))
        .collect()
}

/// Column `c` over `members`: the lowest or highest figure's text; a text column's
/// distinct values.
fn extreme(members: &[usize], cells: &[Vec<Cell>], c: usize, high: bool) -> String {
    let of = |i: &usize| cells[*i].get(c);
    let figures = members
        .iter()
        .filter_map(|i| of(i).and_then(|x| x.value.map(|v| (v, x))));
    let pick = match high {
        true => figures.max_by(|a, b| a.0.total_cmp(&b.0)),
        false => figures.min_by(|a, b| a.0.total_cmp(&b.0)),
    };
    match pick {
        Some((_, cell)) => cell.text.clone(),
        None => distinct(members.iter().filter_map(|i| of(i).map(|x| x.text.clone()))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEYS: [Key; 2] = [share("lost"), latency("p99")];

    fn m(cause: &str, lost: f64, p99: f64) -> Member {
        Member {
            cause: Some(cause.into()),
            figures: vec![lost, p99],
        }
    }

    /// The host16 fixture's 15 CPUs (share lost, p99 in ns), all mostly unaccounted.
    fn host16() -> Vec<Member> {
        let lost = [
            1.629, 1.699, 1.327, 1.549, 1.522, 1.829, 1.917, 1.293, 1.25, 1.554, 1.193, 1.365,
            1.724, 1.741, 1.801,
        ];
        let p99 = [
            41279., 55167., 33887., 29583., 28271., 64543., 39359., 26975., 23599., 33791., 23167.,
            24207., 51103., 57567., 59711.,
        ];
        (lost.iter().zip(p99))
            .map(|(l, p)| m("unaccounted", *l, p))
            .collect()
    }

    fn every_member_once(g: &Grouping, n: usize) {
        let mut all: Vec<usize> = g.rows.iter().flat_map(Row::members).collect();
        all.sort_unstable();
        assert_eq!(all, (0..n).collect::<Vec<_>>(), "{g:?}");
    }

    #[test]
    fn one_and_two_members_are_each_their_own_row() {
        for n in 0..=EACH_UP_TO {
            let members: Vec<Member> = host16().into_iter().take(n).collect();
            let g = group(&members, &KEYS);
            assert_eq!(g.rows.len(), n);
            assert!(g.rows.iter().all(|r| matches!(r, Row::One(_, Why::Few))));
            assert!(!g.grouped());
            assert_eq!(g.noisiest.is_some(), n >= 2);
        }
        let two = group(&[m("a", 1.0, 5e3), m("b", 9.0, 5e5)], &KEYS);
        assert_eq!((two.noisiest, two.quietest), (Some(1), Some(0)));
    }

    #[test]
    fn the_sixteen_cpu_host_is_one_group() {
        let g = group(&host16(), &KEYS);
        assert_eq!(g.rows, vec![Row::Group((0..15).collect())]);
        assert_eq!((g.noisiest, g.quietest), (Some(6), Some(10)));
    }

    #[test]
    fn an_outlier_stands_out_by_figure_and_by_cause() {
        let mut v = host16();
        v[4].figures[0] = 9.0;
        v[9].cause = Some("tick".into());
        let g = group(&v, &KEYS);
        every_member_once(&g, 15);
        let out = g.outliers();
        assert!(
            out.contains(&(4, Why::Figure { key: 0, high: true })),
            "{g:?}"
        );
        assert!(out.contains(&(9, Why::Cause)), "{g:?}");
        assert_eq!(g.noisiest, Some(4));
        assert_eq!(g.rows.len(), 3, "{g:?}");
    }

    #[test]
    fn two_modes_are_two_groups() {
        // Isolated CPUs losing 0.02 %, busy ones 2 %.
        let v: Vec<Member> = (0..40)
            .map(|i| match i % 2 {
                0 => m("tick", 0.02 + i as f64 * 1e-4, 8e3),
                _ => m("tick", 2.0 + i as f64 * 1e-3, 8e3),
            })
            .collect();
        let g = group(&v, &KEYS);
        every_member_once(&g, 40);
        assert_eq!(g.rows.len(), 2, "{g:?}");
        let evens: Vec<usize> = (0..40).step_by(2).collect();
        assert_eq!(g.rows[0], Row::Group(evens));
    }

    /// A figure spread evenly over a wide range makes a few groups, each of a bounded
    /// range, however many members.
    #[test]
    fn a_wide_spread_makes_bounded_groups() {
        for n in [16, 64, 192] {
            let v: Vec<Member> = (0..n)
                .map(|i| m("x", 0.1 * 1000f64.powf(i as f64 / n as f64), 5e3))
                .collect();
            let g = group(&v, &KEYS);
            every_member_once(&g, n);
            assert!(g.rows.len() <= MAX_ROWS, "{n}: {g:?}");
            for r in &g.rows {
                if let Row::Group(ms) = r {
                    let lo = v[ms[0]].figures[0];
                    let hi = v[*ms.last().unwrap()].figures[0];
                    assert!(hi / lo <= 1.5 * 1.5 + 1e-9, "{n}: {lo}–{hi}");
                }
            }
        }
    }

    /// Many causes, each of one member: at most MAX_OUTLIERS are named, the rest merged.
    #[test]
    fn rows_stay_bounded_when_every_member_differs() {
        let v: Vec<Member> = (0..192).map(|i| m(&format!("c{i}"), 1.0, 5e3)).collect();
        let g = group(&v, &KEYS);
        every_member_once(&g, 192);
        assert!(g.rows.len() <= MAX_ROWS, "{}", g.rows.len());
        assert_eq!(g.outliers().len(), MAX_OUTLIERS);
        let rest = g.rows.iter().find_map(|r| match r {
            Row::Rest(m) => Some(m.len()),
            _ => None,
        });
        assert!(rest.is_some_and(|n| n > 100), "{rest:?}");
    }

    #[test]
    fn zeros_and_missing_causes_group_without_panicking() {
        let v: Vec<Member> = (0..10)
            .map(|i| Member {
                cause: None,
                figures: vec![0.0, if i == 3 { f64::NAN } else { 0.0 }],
            })
            .collect();
        let g = group(&v, &KEYS);
        assert_eq!(g.rows, vec![Row::Group((0..10).collect())]);
    }

    #[test]
    fn words_read_well() {
        assert_eq!(cpus_words(&[7]), "CPU 7");
        assert_eq!(cpus_words(&[1, 2, 3, 5]), "CPUs 1-3, 5");
        assert_eq!(range([1.917, 1.193], |v| format!("{v:.2}")), "1.19–1.92");
        assert_eq!(range([2.0, 2.001], |v| format!("{v:.1}")), "2.0");
        let scattered: Vec<usize> = (0..40).step_by(3).collect();
        let two = Grouping {
            rows: vec![Row::Group(vec![0, 1, 2]), Row::Group(scattered.clone())],
            noisiest: None,
            quietest: None,
        };
        let ids: Vec<usize> = (0..40).collect();
        assert_eq!(row_labels(&two, &ids), ["0-2 (3)", "(a) 14 CPUs"]);
        let said = legend(&two, &KEYS, &ids, &|_| String::new(), "--per-cpu");
        assert!(said.contains("(a) is CPUs 0, 3, 6, 9,"), "{said}");
        assert_eq!(
            distinct(["other".into(), "fifo 1".into(), "other".into()]),
            "other/fifo 1"
        );
        let g = group(&host16(), &KEYS);
        let ids: Vec<usize> = (1..=15).collect();
        let words = legend(&g, &KEYS, &ids, &|_| "x".into(), "--per-cpu");
        assert!(
            words.contains("highest CPU 7 (x), lowest CPU 11 (x)"),
            "{words}"
        );
    }
}
