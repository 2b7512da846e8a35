//! What every terminal table shares: the style, the layout (how wide the terminal is,
//! whether `--wide` asked for every column and `--per-cpu` for every CPU), the unit
//! cells, the policy cell and the distribution columns. Each probe kind's own tables are
//! in `report::views`.
//!
//! # Fitting the terminal
//!
//! A table has one line per row: no rule between rows, and no cell is ever wrapped. A
//! table's columns are either core (always shown) or wide-only (shown with `--wide`; the
//! files, CSV, Markdown and HTML, always hold every column), and either figures or text.
//! Without `--wide` a table must fit the terminal's width (`COLUMNS`, else the width of
//! the terminal on stdout, else 100 columns): the wide-only columns are left out first,
//! then the widest text column is shortened, its cells cut with "…", until the table
//! fits or no text column can give more. A figure is never cut: a table of figures alone
//! that is wider than the terminal stays whole. The layout is set once per command
//! ([`Layout::scoped`]) rather than handed down every view, so that the views keep one
//! signature for the measuring commands and `report`; without a scope it is the
//! terminal's, not wide, grouped.

use std::cell::Cell;

use comfy_table::{CellAlignment, ContentArrangement, Table, presets};

use crate::engine::sched::Policy;
use crate::stats::Summary;

/// The width a table fits when stdout is not a terminal and `COLUMNS` is unset.
pub const DEFAULT_WIDTH: u16 = 100;

/// How terminal output is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Columns of text the output must fit (ignored when `wide`).
    pub width: u16,
    /// Every column, whatever the width (`--wide`).
    pub wide: bool,
    /// Every CPU (or watched thread) its own rows, causes and gaps (`--per-cpu`), rather
    /// than CPUs whose figures agree said once as a group (`report::terminal::group`).
    pub per_cpu: bool,
}

thread_local! {
    static LAYOUT: Cell<Option<Layout>> = const { Cell::new(None) };
    /// Whether a table since the scope began left out wide-only columns.
    static HID: Cell<bool> = const { Cell::new(false) };
}

impl Layout {
    /// The terminal's: `COLUMNS` when set to a number, else the width of the terminal
    /// on stdout, else [`DEFAULT_WIDTH`]; CPUs grouped.
    pub fn terminal(wide: bool) -> Layout {
        let from_env = std::env::var("COLUMNS")
            .ok()
            .and_then(|c| c.trim().parse::<u16>().ok())
            .filter(|&w| w >= 20);
        let width = from_env
            .or_else(|| terminal_size::terminal_size().map(|(w, _)| w.0))
            .filter(|&w| w >= 20)
            .unwrap_or(DEFAULT_WIDTH);
        Layout {
            width,
            wide,
            per_cpu: false,
        }
    }

    /// A fixed width, for tests and for text written to files; CPUs grouped.
    pub fn fixed(width: u16, wide: bool) -> Layout {
        Layout {
            width,
            wide,
            per_cpu: false,
        }
    }

    /// The same, each CPU on its own when `per_cpu` (`--per-cpu`).
    pub fn per_cpu(self, per_cpu: bool) -> Layout {
        Layout { per_cpu, ..self }
    }

    /// The layout of the current scope, or the terminal's.
    pub fn current() -> Layout {
        LAYOUT
            .with(Cell::get)
            .unwrap_or_else(|| Layout::terminal(false))
    }

    /// Runs `f` with this layout as the current one (restored after, on this thread).
    pub fn scoped<T>(self, f: impl FnOnce() -> T) -> T {
        struct Restore(Option<Layout>, bool);
        impl Drop for Restore {
            fn drop(&mut self) {
                LAYOUT.with(|l| l.set(self.0));
                HID.with(|h| h.set(self.1));
            }
        }
        let _restore = Restore(LAYOUT.with(|l| l.replace(Some(self))), HID.with(Cell::get));
        HID.with(|h| h.set(false));
        f()
    }

    /// The width text must wrap to; `None` with `--wide`.
    pub fn wrap_width(self) -> Option<usize> {
        (!self.wide).then_some(usize::from(self.width))
    }
}

/// Whether a table in the current scope left out columns that `--wide` would show.
pub fn columns_hidden() -> bool {
    HID.with(Cell::get)
}

/// Forgets the tables drawn so far: a new output begins.
pub fn reset_hidden() {
    HID.with(|h| h.set(false));
}

/// The line said once under the tables when columns were left out.
pub fn hidden_note() -> Option<String> {
    columns_hidden().then(|| "Some columns are left out to fit the terminal: --wide shows every one (the CSV, Markdown and HTML exports always hold them).".to_string())
}

/// The unit a table's times are in: one per table, stated in its headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Ns,
    Us,
}

impl Unit {
    pub fn name(self) -> &'static str {
        match self {
            Unit::Ns => "ns",
            Unit::Us => "µs",
        }
    }

    /// `what (unit)`, as a header says it.
    pub fn header(self, what: &str) -> String {
        format!("{what} ({})", self.name())
    }

    /// A whole-ns figure in this unit: ns as they are, µs with two decimals; "-" when
    /// absent.
    pub fn cell(self, ns: Option<u64>) -> String {
        match (self, ns) {
            (_, None) => "-".into(),
            (Unit::Ns, Some(v)) => v.to_string(),
            (Unit::Us, Some(v)) => format!("{:.2}", v as f64 / 1e3),
        }
    }

    /// A fractional figure (a mean): ns with one decimal, µs with two.
    pub fn cell_f(self, ns: Option<f64>) -> String {
        match (self, ns) {
            (_, None) => "-".into(),
            (Unit::Ns, Some(v)) => format!("{v:.1}"),
            (Unit::Us, Some(v)) => format!("{:.2}", v / 1e3),
        }
    }
}

/// An interval as `62.5 ms` or `2 s`.
pub fn interval_words(ns: u64) -> String {
    if ns >= 1_000_000_000 && ns.is_multiple_of(1_000_000_000) {
        format!("{} s", ns / 1_000_000_000)
    } else {
        format!("{} ms", ns as f64 / 1e6)
    }
}

/// ns as µs with two decimals; "-" when absent.
pub fn us(ns: Option<u64>) -> String {
    Unit::Us.cell(ns)
}

/// A column of a terminal table: always shown, or only with `--wide`; figures (never
/// cut) or text (shortened with "…" when the table does not fit).
#[derive(Debug, Clone)]
pub(crate) struct Col {
    head: String,
    wide: bool,
    text: bool,
    /// A text column cut at its start, keeping its end ("…/ptp0:sys_offset"): where
    /// the end tells rows apart.
    tail: bool,
    spare: bool,
}

impl Col {
    /// The same column, of text: left-aligned, and the one shortened to fit.
    pub(crate) fn text(self) -> Col {
        Col { text: true, ..self }
    }

    /// The same column, of text cut at its start (its end tells rows apart).
    pub(crate) fn text_tail(self) -> Col {
        Col {
            text: true,
            tail: true,
            ..self
        }
    }

    /// The same column, left out (as a wide-only one is, and said so) when the table
    /// does not fit the width even with its text cut: a figure the others imply or
    /// bound (a run's length beside its rate, the minimum beside the median).
    pub(crate) fn spare(self) -> Col {
        Col {
            spare: true,
            ..self
        }
    }
}

/// A column of figures shown always.
pub(crate) fn core(h: impl Into<String>) -> Col {
    Col {
        head: h.into(),
        wide: false,
        text: false,
        tail: false,
        spare: false,
    }
}

/// A column of figures shown with `--wide` only.
pub(crate) fn wide(h: impl Into<String>) -> Col {
    Col {
        wide: true,
        ..core(h)
    }
}

/// The narrowest a text column is cut to (or its header's width, when wider).
const TEXT_MIN: usize = 10;

/// A terminal table: one line per row, its wide-only columns left out unless the layout
/// is wide, its text cut to the layout's width (see the module's doc).
pub(crate) struct Tab {
    layout: Layout,
    /// The columns shown, and which of the columns given to `new` they are.
    cols: Vec<Col>,
    keep: Vec<bool>,
    rows: Vec<Vec<String>>,
}

impl Tab {
    pub(crate) fn new(cols: &[Col]) -> Tab {
        let layout = Layout::current();
        let keep: Vec<bool> = cols.iter().map(|c| layout.wide || !c.wide).collect();
        if keep.contains(&false) {
            HID.with(|h| h.set(true));
        }
        let shown = cols.iter().zip(&keep).filter(|(_, k)| **k);
        Tab {
            layout,
            cols: shown.map(|(c, _)| c.clone()).collect(),
            keep,
            rows: Vec::new(),
        }
    }

    /// One row, a cell per column given to `new` (the hidden ones are dropped here).
    pub(crate) fn row(&mut self, cells: Vec<String>) {
        let kept = cells.into_iter().zip(&self.keep).filter(|(_, k)| **k);
        self.rows.push(kept.map(|(c, _)| c).collect());
    }

    /// The table fitted to the layout's width: the spare columns left out, the leftmost
    /// first, while it does not fit with its text whole; then the text cut (`cut_text`).
    fn fitted(&self) -> Table {
        let (mut cols, mut rows) = (self.cols.clone(), self.rows.clone());
        if self.layout.wide {
            return table(&cols, &rows);
        }
        let width = usize::from(self.layout.width);
        while widest_line(&table(&cols, &rows)) > width {
            let Some(drop) = cols.iter().position(|c| c.spare) else {
                break;
            };
            HID.with(|h| h.set(true));
            cols.remove(drop);
            for r in &mut rows {
                if drop < r.len() {
                    r.remove(drop);
                }
            }
        }
        cut_text(&cols, rows, width)
    }
}

/// `rows` under `cols` with the widest text column cut, again and again, until the table
/// fits `width` or no text column can give more.
fn cut_text(cols: &[Col], mut rows: Vec<Vec<String>>, width: usize) -> Table {
    loop {
        let t = table(cols, &rows);
        let over = widest_line(&t).saturating_sub(width);
        if over == 0 {
            return t;
        }
        let widths = widths(cols, &rows);
        let floor = |i: usize| cols[i].head.chars().count().max(TEXT_MIN);
        let Some(i) = (0..cols.len())
            .filter(|&i| cols[i].text && widths[i] > floor(i))
            .max_by_key(|&i| widths[i])
        else {
            return t;
        };
        let to = widths[i].saturating_sub(over).max(floor(i));
        for r in &mut rows {
            if let Some(c) = r.get_mut(i) {
                *c = match cols[i].tail {
                    true => cut_start(c, to),
                    false => cut(c, to),
                };
            }
        }
    }
}

/// Each column's widest cell or header, in chars.
fn widths(cols: &[Col], rows: &[Vec<String>]) -> Vec<usize> {
    let mut w: Vec<usize> = cols.iter().map(|c| c.head.chars().count()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate().take(w.len()) {
            w[i] = w[i].max(c.chars().count());
        }
    }
    w
}

/// The comfy table of `rows`, never wrapped: figures right-aligned, text (and the first
/// column) left-aligned, a rule under the header and none between rows.
fn table(cols: &[Col], rows: &[Vec<String>]) -> Table {
    let mut t = Table::new();
    t.load_style(presets::UTF8_HORIZONTAL_ONLY);
    let style = t.style().row_separator(comfy_table::LineStyle::none());
    t.load_style(style);
    t.set_content_arrangement(ContentArrangement::Disabled);
    t.set_header(cols.iter().map(|c| c.head.as_str()));
    for r in rows {
        t.add_row(r.iter().map(String::as_str));
    }
    for (i, col) in t.column_iter_mut().enumerate() {
        let text = cols.get(i).is_some_and(|c| c.text);
        if i > 0 && !text {
            col.set_cell_alignment(CellAlignment::Right);
        }
    }
    t
}

impl std::fmt::Display for Tab {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.fitted().fmt(f)
    }
}

/// The widest line of a rendered table, in chars (our text has no double-width ones).
fn widest_line(t: &Table) -> usize {
    (t.to_string().lines())
        .map(|l| l.chars().count())
        .max()
        .unwrap_or(0)
}

/// `s` cut to `n` chars, its last one "…" when cut.
pub fn cut(s: &str, n: usize) -> String {
    match s.chars().count() > n {
        true if n > 0 => format!("{}…", s.chars().take(n - 1).collect::<String>()),
        true => String::new(),
        false => s.to_string(),
    }
}

/// `s` cut to its last `n` chars, its first one "…" when cut.
pub fn cut_start(s: &str, n: usize) -> String {
    let len = s.chars().count();
    match len > n {
        true if n > 0 => format!("…{}", s.chars().skip(len - n + 1).collect::<String>()),
        true => String::new(),
        false => s.to_string(),
    }
}

pub(crate) fn policy_cell(policy: Policy, priority: u8) -> String {
    match policy {
        Policy::Other => "other".to_string(),
        // Its parameters are in the header: a cell stays narrow.
        Policy::Deadline(_) => "deadline".to_string(),
        p => format!("{p} {priority}"),
    }
}

/// The columns `distribution` fills, in `unit`: p50, p99 and max always, min and p99.9
/// when they fit; p90, p99.99, mean and MAD with `--wide`.
pub(crate) fn distribution_cols(unit: Unit) -> Vec<Col> {
    let u = |w: &str| unit.header(w);
    vec![
        core(u("min")).spare(),
        core(u("p50")),
        wide(u("p90")),
        core(u("p99")),
        core(u("p99.9")).spare(),
        wide(u("p99.99")),
        core(u("max")),
        wide(u("mean")),
        wide(u("MAD")),
    ]
}

/// min, p50, p90, p99, p99.9, p99.99, max, mean and MAD in `unit`.
pub(crate) fn distribution(s: &Summary, unit: Unit) -> Vec<String> {
    vec![
        unit.cell(s.min_ns),
        unit.cell(s.p50_ns),
        unit.cell(s.p90_ns),
        unit.cell(s.p99_ns),
        unit.cell(s.p999_ns),
        unit.cell(s.p9999_ns),
        unit.cell(s.max_ns),
        unit.cell_f(s.mean_ns),
        unit.cell(s.mad_ns),
    ]
}

/// `text` wrapped to `width` columns at spaces, each line after the first starting with
/// `indent`. A word longer than the width stays whole. Hand-written: ten lines, and the
/// text is our own (no tabs, no double-width characters).
pub fn wrap(text: &str, width: Option<usize>, indent: &str) -> String {
    let Some(width) = width else {
        return text.to_string();
    };
    let lead = &text[..text.len() - text.trim_start_matches(' ').len()];
    let (mut out, mut line, mut bare) = (String::new(), lead.to_string(), true);
    for word in figures_whole(text) {
        let word = word.as_str();
        if !bare && line.chars().count() + 1 + word.chars().count() > width {
            out.push_str(&line);
            out.push('\n');
            (line, bare) = (indent.to_string(), true);
        }
        if !bare {
            line.push(' ');
        }
        line.push_str(word);
        bare = false;
    }
    out.push_str(&line);
    out
}

/// Units a figure's number is never parted from at a line break.
const UNITS: [&str; 14] = [
    "ns", "µs", "us", "ms", "s", "%", "pp", "Hz", "kHz", "MHz", "GHz", "KiB", "MiB", "ppm",
];

/// The words of `text`, a number kept with the unit after it ("79.5 µs)." is one word),
/// so that wrapping never splits a figure.
fn figures_whole(text: &str) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    for w in text.split(' ').filter(|w| !w.is_empty()) {
        let unit = w.trim_end_matches([',', '.', ';', ':', ')']);
        let after_number = words.last().is_some_and(|p| {
            let p = p.trim_start_matches(['(', '~', '≤', '≥', '<', '>', '+', '-']);
            !p.is_empty()
                && p.chars()
                    .all(|c| c.is_ascii_digit() || c == '.' || c == ',')
        });
        match words.last_mut() {
            Some(prev) if after_number && UNITS.contains(&unit) => {
                prev.push(' ');
                prev.push_str(w);
            }
            _ => words.push(w.to_string()),
        }
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapping_never_parts_a_number_from_its_unit() {
        let w = wrap("woke up to 1.82 ms late (p99 79.5 µs).", Some(34), "  ");
        assert_eq!(w, "woke up to 1.82 ms late (p99\n  79.5 µs).");
        assert_eq!(wrap("about 40 % of it", Some(7), ""), "about\n40 % of\nit");
    }

    #[test]
    fn microseconds_keep_two_decimals() {
        assert_eq!(us(Some(41_520)), "41.52");
        assert_eq!(us(None), "-");
        assert_eq!(Unit::Ns.cell(Some(41_520)), "41520");
        assert_eq!(Unit::Us.cell_f(Some(993.7)), "0.99");
        assert_eq!(Unit::Ns.header("p50"), "p50 (ns)");
    }

    #[test]
    fn wrapping_keeps_words_whole_and_indents() {
        let w = wrap("aaa bbb ccc ddd", Some(8), "  ");
        assert_eq!(w, "aaa bbb\n  ccc\n  ddd");
        assert_eq!(wrap("a b", None, "  "), "a b");
        let long = wrap("x averyveryverylongword y", Some(6), "");
        assert_eq!(long, "x\naveryveryverylongword\ny");
    }

    #[test]
    fn wide_only_columns_show_with_wide_and_narrow_tables_fit() {
        let cols = [core("a"), wide("b"), core("c")];
        let narrow = Layout::fixed(40, false).scoped(|| {
            let mut t = Tab::new(&cols);
            t.row(vec!["1".into(), "2".into(), "3".into()]);
            (t.to_string(), columns_hidden())
        });
        assert!(
            !narrow.0.contains(" b ") && narrow.0.contains(" c "),
            "{}",
            narrow.0
        );
        assert!(narrow.1);
        let all = Layout::fixed(40, true).scoped(|| {
            let mut t = Tab::new(&cols);
            t.row(vec!["1".into(), "2".into(), "3".into()]);
            (t.to_string(), columns_hidden())
        });
        assert!(all.0.contains(" b "), "{}", all.0);
        assert!(!all.1);
        let long = "word ".repeat(30);
        let fitted = Layout::fixed(40, false).scoped(|| {
            let mut t = Tab::new(&[core("n"), core("text").text()]);
            t.row(vec!["12345".into(), long.clone()]);
            t.to_string()
        });
        assert!(fitted.lines().all(|l| l.chars().count() <= 40), "{fitted}");
        assert!(
            fitted.contains("12345") && fitted.contains("word…"),
            "{fitted}"
        );
    }

    /// Issue 29: one line per row, whatever the width: no rule between rows, no cell
    /// wrapped; text is cut with "…" and figures are never cut, even when the table is
    /// then wider than the terminal.
    #[test]
    fn issue29_one_line_per_row_and_figures_whole() {
        let rows = [
            ["1", "190.2", "a cause with a long name"],
            ["2", "22.6", "b"],
        ];
        let draw = |width: u16, text: bool| {
            Layout::fixed(width, false).scoped(|| {
                let cause = if text {
                    core("cause").text()
                } else {
                    core("cause")
                };
                let mut t = Tab::new(&[core("CPU"), core("max (ns)"), cause]);
                for r in rows {
                    t.row(r.iter().map(|c| c.to_string()).collect());
                }
                t.to_string()
            })
        };
        let t = draw(34, true);
        // Header, its rule, two rows, the rules above and below: six lines.
        assert_eq!(t.lines().count(), 6, "{t}");
        assert!(t.lines().all(|l| l.chars().count() <= 34), "{t}");
        assert!(
            t.contains(" 190.2 ") && t.contains("a cause with a… "),
            "{t}"
        );
        let figures = draw(20, false);
        assert_eq!(figures.lines().count(), 6, "{figures}");
        assert!(figures.contains("a cause with a long name"), "{figures}");
        // Text is cut no narrower than its header or ten columns.
        let narrow = draw(20, true);
        assert!(narrow.contains("a cause w…"), "{narrow}");
        let whole = Layout::fixed(20, true).scoped(|| {
            let mut t = Tab::new(&[core("cause").text()]);
            t.row(vec!["a cause with a long name".into()]);
            t.to_string()
        });
        assert!(whole.contains("a cause with a long name"), "{whole}");
    }
}
