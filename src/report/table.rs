//! What every terminal table shares: the style, the layout (how wide the terminal is and
//! whether `--wide` asked for every column), the unit cells, the policy cell and the
//! distribution columns. Each probe kind's own tables are in `report::views`.
//!
//! # Fitting the terminal
//!
//! A table's columns are either core (always shown) or wide-only (shown with `--wide`;
//! the files, CSV, Markdown and HTML, always hold every column). Without `--wide` a
//! table is also wrapped to the terminal's width: `COLUMNS`, else the width of the
//! terminal on stdout, else 100 columns. The layout is set once per command
//! ([`Layout::scoped`]) rather than handed down every view, so that the views keep one
//! signature for the measuring commands and `report`; without a scope it is the
//! terminal's, not wide.

use std::cell::Cell;

use comfy_table::{CellAlignment, ContentArrangement, Table, presets};

use crate::engine::sched::Policy;
use crate::stats::Summary;

/// The width a table fits when stdout is not a terminal and `COLUMNS` is unset.
pub const DEFAULT_WIDTH: u16 = 100;

/// How terminal tables are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Columns of text the output must fit (ignored when `wide`).
    pub width: u16,
    /// Every column, whatever the width (`--wide`).
    pub wide: bool,
}

thread_local! {
    static LAYOUT: Cell<Option<Layout>> = const { Cell::new(None) };
    /// Whether a table since the scope began left out wide-only columns.
    static HID: Cell<bool> = const { Cell::new(false) };
}

impl Layout {
    /// The terminal's: `COLUMNS` when set to a number, else the width of the terminal
    /// on stdout, else [`DEFAULT_WIDTH`].
    pub fn terminal(wide: bool) -> Layout {
        let from_env = std::env::var("COLUMNS")
            .ok()
            .and_then(|c| c.trim().parse::<u16>().ok())
            .filter(|&w| w >= 20);
        let width = from_env
            .or_else(|| terminal_size::terminal_size().map(|(w, _)| w.0))
            .filter(|&w| w >= 20)
            .unwrap_or(DEFAULT_WIDTH);
        Layout { width, wide }
    }

    /// A fixed width, for tests and for text written to files.
    pub fn fixed(width: u16, wide: bool) -> Layout {
        Layout { width, wide }
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

    /// How far a cell of this unit may lie from the exact figure (half its last digit),
    /// in ns: what a reader of two outputs may expect them to agree within.
    pub fn resolution_ns(self) -> f64 {
        match self {
            Unit::Ns => 0.5,
            Unit::Us => 5.0,
        }
    }
}

/// ns as µs with two decimals; "-" when absent.
pub fn us(ns: Option<u64>) -> String {
    Unit::Us.cell(ns)
}

/// A column of a terminal table: always shown, or only with `--wide`.
#[derive(Debug, Clone)]
pub(crate) enum Col {
    Core(String),
    Wide(String),
}

pub(crate) fn core(h: impl Into<String>) -> Col {
    Col::Core(h.into())
}

pub(crate) fn wide(h: impl Into<String>) -> Col {
    Col::Wide(h.into())
}

/// A terminal table whose wide-only columns are left out unless the layout is wide.
pub(crate) struct Tab {
    table: Table,
    keep: Vec<bool>,
}

impl Tab {
    pub(crate) fn new(cols: &[Col]) -> Tab {
        let layout = Layout::current();
        let keep: Vec<bool> = cols
            .iter()
            .map(|c| layout.wide || matches!(c, Col::Core(_)))
            .collect();
        if keep.contains(&false) {
            HID.with(|h| h.set(true));
        }
        let header: Vec<&str> = cols
            .iter()
            .zip(&keep)
            .filter(|(_, k)| **k)
            .map(|(c, _)| match c {
                Col::Core(h) | Col::Wide(h) => h.as_str(),
            })
            .collect();
        Tab {
            table: new_table(&header),
            keep,
        }
    }

    /// One row, a cell per column given to `new` (the hidden ones are dropped here).
    pub(crate) fn row(&mut self, cells: Vec<String>) {
        let kept = cells.into_iter().zip(&self.keep).filter(|(_, k)| **k);
        self.table.add_row(kept.map(|(c, _)| c).collect::<Vec<_>>());
    }

    /// No rules between rows: for tables whose rows come in pairs or groups.
    pub(crate) fn compact(mut self) -> Tab {
        let style = self
            .table
            .style()
            .row_separator(comfy_table::LineStyle::none());
        self.table.load_style(style);
        self
    }
}

impl std::fmt::Display for Tab {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.table.fmt(f)
    }
}

/// A table of the current layout: wrapped to its width unless wide.
pub(crate) fn new_table(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_style(presets::UTF8_HORIZONTAL_ONLY);
    let layout = Layout::current();
    if !layout.wide {
        t.set_content_arrangement(ContentArrangement::Dynamic);
        t.set_width(layout.width);
    }
    t.set_header(header.iter().copied());
    for (i, col) in t.column_iter_mut().enumerate() {
        if i > 0 {
            col.set_cell_alignment(CellAlignment::Right);
        }
    }
    t
}

pub(crate) fn policy_cell(policy: Policy, priority: u8) -> String {
    match policy {
        Policy::Other => "other".to_string(),
        p => format!("{p} {priority}"),
    }
}

/// The columns `distribution` fills, in `unit`: min, p50, p99, p99.9 and max always;
/// p90, p99.99, mean and MAD with `--wide`.
pub(crate) fn distribution_cols(unit: Unit) -> Vec<Col> {
    let u = |w: &str| unit.header(w);
    vec![
        core(u("min")),
        core(u("p50")),
        wide(u("p90")),
        core(u("p99")),
        core(u("p99.9")),
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
            let mut t = Tab::new(&[core("text")]);
            t.row(vec![long.clone()]);
            t.to_string()
        });
        assert!(fitted.lines().all(|l| l.chars().count() <= 40), "{fitted}");
    }
}
