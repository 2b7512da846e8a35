//! One self-contained HTML page (maud): no external assets, no JavaScript, plots inline
//! as SVG. It reads on a laptop screen and prints: an embedded style sheet with a
//! max-width layout, right-aligned numbers, and print rules that keep figures and
//! tables whole.
//!
//! `render` escapes every text (maud does); only `Figure::svg`, which our own plotter
//! draws, goes in as markup. What goes on the page of saved results is built in
//! `report::page::result_page` (and, per probe kind across CPUs, `report::page::page_cpus`); the
//! comparison page in `report::compare::compare_view`.

use maud::{DOCTYPE, Markup, PreEscaped, html};

/// A page: a title, warnings shown first, then sections.
#[derive(Debug, Clone, Default)]
pub struct Page {
    pub title: String,
    pub subtitle: Option<String>,
    /// Degradations and differences the reader must see first.
    pub warnings: Vec<String>,
    pub sections: Vec<Section>,
}

#[derive(Debug, Clone, Default)]
pub struct Section {
    pub heading: String,
    /// Label and value pairs (host facts).
    pub facts: Vec<(String, String)>,
    /// Paragraphs of plain text.
    pub text: Vec<String>,
    /// Figures shown before the tables (an overview the tables then detail).
    pub lead: Vec<Figure>,
    /// Matrices (a table whose cells are shaded by value), after the lead figures.
    pub matrices: Vec<Shaded>,
    pub tables: Vec<Table>,
    pub figures: Vec<Figure>,
    /// Detail folded under a line each (`<details>`), last.
    pub folds: Vec<Fold>,
}

/// A table whose cells carry a shade: 0 none, up to [`SHADES`] − 1 the darkest.
#[derive(Debug, Clone, Default)]
pub struct Shaded {
    pub table: Table,
    /// Per row, per cell.
    pub shades: Vec<Vec<u8>>,
}

/// The number of shades a matrix cell can take (`s0` … `s5` in the style sheet).
pub const SHADES: u8 = 6;

/// Detail under a one-line summary that opens on a click: a `<details>` element, so no
/// script is needed.
#[derive(Debug, Clone, Default)]
pub struct Fold {
    pub summary: String,
    /// Shown open (a run of one CPU has nothing to fold away).
    pub open: bool,
    pub text: Vec<String>,
    pub figures: Vec<Figure>,
    pub tables: Vec<Table>,
    /// Folds inside this one, last.
    pub folds: Vec<Fold>,
}

#[derive(Debug, Clone, Default)]
pub struct Table {
    pub caption: String,
    pub headers: Vec<String>,
    pub rows: Vec<Vec<String>>,
    pub note: Option<String>,
}

#[derive(Debug, Clone, Default)]
pub struct Figure {
    pub caption: String,
    /// A complete `<svg>` element.
    pub svg: String,
    /// A time series (shown before the tables), not a distribution.
    pub series: bool,
}

/// The embedded style sheet: the page must need nothing else.
const STYLE: &str = r#"
:root { color-scheme: light; }
body { margin: 0; background: #fff; color: #1b1b1b;
  font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
main { max-width: 75rem; margin: 0 auto; padding: 1.5rem 2rem 3rem; }
h1 { font-size: 1.7rem; margin: 0 0 .2rem; }
.subtitle { color: #555; margin: 0 0 1rem; }
h2 { font-size: 1.3rem; margin: 2.2rem 0 .8rem; padding-bottom: .2rem; border-bottom: 2px solid #d0d0d0;
  overflow-wrap: anywhere; }
.warnings { border-left: 4px solid #c25e00; background: #fff4e5; padding: .6rem 1rem; margin: 1rem 0; }
.warnings h2 { border: 0; margin: 0 0 .3rem; font-size: 1.1rem; }
.warnings ul { margin: 0; padding-left: 1.2rem; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: .15rem 1.2rem; margin: 0 0 1rem; }
dl.facts dt { font-weight: 600; color: #444; }
dl.facts dd { margin: 0; overflow-wrap: anywhere; }
.scroll { overflow-x: auto; }
.scroll.tall { max-height: 36rem; overflow-y: auto; border-bottom: 1px solid #ccc; }
.scroll.tall thead th { position: sticky; top: 0; z-index: 1; }
table { border-collapse: collapse; margin: 1rem 0 .4rem; font-variant-numeric: tabular-nums; }
caption { caption-side: top; text-align: left; font-weight: 600; padding: 0 0 .35rem; }
th, td { padding: .22rem .65rem; border-bottom: 1px solid #ddd; vertical-align: top; text-align: left; }
td { overflow-wrap: break-word; }
th.wide, td.wide { min-width: 13rem; overflow-wrap: anywhere; }
thead th { background: #f2f2f2; border-bottom: 2px solid #bbb; }
th.num, td.num { text-align: right; white-space: nowrap; }
.note { font-size: .9rem; color: #555; margin: .2rem 0 1rem; }
figure { margin: 1.5rem 0; }
figure svg { display: block; max-width: 100%; height: auto; }
figcaption { font-size: .9rem; color: #444; margin-top: .3rem; }
table.matrix th { font-size: .8rem; vertical-align: bottom; }
table.matrix th:nth-child(n+4) { white-space: normal; min-width: 4.5rem; width: 7rem; overflow-wrap: break-word; }
table.matrix td { padding: .1rem .5rem; }
td.s1 { background: #eff3ff; } td.s2 { background: #c6dbef; } td.s3 { background: #6baed6; }
td.s4 { background: #2171b5; color: #fff; } td.s5 { background: #08306b; color: #fff; }
details { margin: .4rem 0; padding: .1rem 0 .1rem .8rem; border-left: 3px solid #d0d0d0; }
summary { cursor: pointer; font-weight: 600; }
details[open] > summary { margin-bottom: .4rem; }
@media print {
  body { font-size: 10pt; }
  main { max-width: none; padding: 0; }
  figure, table.keep, dl.facts, .warnings { break-inside: avoid; page-break-inside: avoid; }
  tr { break-inside: avoid; page-break-inside: avoid; }
  thead { display: table-header-group; }
  h2, caption { break-after: avoid; page-break-after: avoid; }
  section.part + section.part { break-before: page; }
  .warnings, thead th { background: none; }
  td.s4, td.s5 { color: #000; }
  .scroll, .scroll.tall { overflow: visible; max-height: none; }
}
"#;

/// The page as HTML text.
pub fn render(page: &Page) -> String {
    let markup = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (page.title) }
                style { (PreEscaped(STYLE)) }
            }
            body { main {
                h1 { (page.title) }
                @if let Some(s) = &page.subtitle { p.subtitle { (s) } }
                (warnings(&page.warnings))
                @for s in &page.sections { (section(s)) }
            } }
        }
    };
    markup.into_string()
}

fn warnings(list: &[String]) -> Markup {
    html! {
        @if !list.is_empty() {
            section.warnings {
                h2 { "Warnings" }
                ul { @for w in list { li { (w) } } }
            }
        }
    }
}

fn section(s: &Section) -> Markup {
    html! {
        section.part {
            h2 { (s.heading) }
            @if !s.facts.is_empty() {
                dl.facts { @for (k, v) in &s.facts { dt { (k) } dd { (v) } } }
            }
            @for p in &s.text { p { (p) } }
            @for f in &s.lead { (figure(f)) }
            @for m in &s.matrices { (table(&m.table, Some(&m.shades))) }
            @for t in &s.tables { (table(t, None)) }
            @for f in &s.figures { (figure(f)) }
            @for f in &s.folds { (fold(f)) }
        }
    }
}

fn fold(f: &Fold) -> Markup {
    html! {
        details open[f.open] {
            summary { (f.summary) }
            @for p in &f.text { p { (p) } }
            @for fig in &f.figures { (figure(fig)) }
            @for t in &f.tables { (table(t, None)) }
            @for inner in &f.folds { (fold(inner)) }
        }
    }
}

/// A table; with `shades`, a matrix whose cells are shaded (`s1` … `s5`).
fn table(t: &Table, shades: Option<&[Vec<u8>]>) -> Markup {
    let classes = column_classes(t);
    let class = |i: usize| classes.get(i).copied().flatten();
    let shade = |r: usize, i: usize| {
        let s = shades?.get(r)?.get(i).copied().filter(|&s| s > 0)?;
        Some(format!("s{}", s.min(SHADES - 1)))
    };
    let cell_class = |r: usize, i: usize| match (class(i), shade(r, i)) {
        (Some(c), Some(s)) => Some(format!("{c} {s}")),
        (c, s) => c.map(String::from).or(s),
    };
    // A long table would only be pushed to the next page, then break anyway.
    let keep = (t.rows.len() <= KEEP_ROWS).then_some("keep");
    let matrix = shades.is_some().then_some("matrix");
    let table_class = [keep, matrix]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(" ");
    html! {
        div.scroll.tall[t.rows.len() > TALL_ROWS] {
            table class=[(!table_class.is_empty()).then_some(table_class)] {
                caption { (t.caption) }
                thead { tr { @for (i, h) in t.headers.iter().enumerate() { th class=[class(i)] { (h) } } } }
                tbody {
                    @for (r, row) in t.rows.iter().enumerate() {
                        tr { @for (i, c) in row.iter().enumerate() { td class=[cell_class(r, i)] { (c) } } }
                    }
                }
            }
        }
        @if let Some(n) = &t.note { p.note { (n) } }
    }
}

/// Tables of up to this many rows are kept on one printed page.
const KEEP_ROWS: usize = 20;

/// Tables of more rows scroll in a box of their own on screen, their header kept in
/// view, so that a table of 191 CPUs does not push the rest of the page ten screens down.
const TALL_ROWS: usize = 40;

/// Prose longer than this makes a column `wide`: it gets a minimum width, so that the
/// table's layout does not squeeze it into a word per line.
const WIDE_CHARS: usize = 40;

/// Each column's class: `num` where every non-empty cell is a number (or `-`), so that
/// digits line up on the right; `wide` for prose.
fn column_classes(t: &Table) -> Vec<Option<&'static str>> {
    (0..t.headers.len())
        .map(|i| {
            let cells: Vec<&String> = (t.rows.iter())
                .filter_map(|r| r.get(i))
                .filter(|c| !c.trim().is_empty())
                .collect();
            if !cells.is_empty() && cells.iter().all(|c| is_number(c)) {
                Some("num")
            } else if cells.iter().any(|c| c.chars().count() > WIDE_CHARS) {
                Some("wide")
            } else {
                None
            }
        })
        .collect()
}

fn is_number(cell: &str) -> bool {
    let c = cell.trim().trim_end_matches(['%', '*']).trim_end();
    c == "-" || (!c.is_empty() && c.parse::<f64>().is_ok())
}

fn figure(f: &Figure) -> Markup {
    html! {
        figure {
            // Our own plotter's SVG: markup, not text.
            (PreEscaped(inline_svg(&f.svg)))
            figcaption { (f.caption) }
        }
    }
}

/// The `<svg>` element alone: an XML declaration or doctype has no place inside HTML.
fn inline_svg(svg: &str) -> &str {
    svg.find("<svg").map_or(svg, |i| &svg[i..])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page_with_host(host: &str) -> Page {
        Page {
            title: "t <b>".into(),
            subtitle: None,
            warnings: vec!["w & <i>".into()],
            sections: vec![Section {
                heading: "h".into(),
                facts: vec![("Host".into(), host.into())],
                text: vec!["\"quoted\" <p>".into()],
                tables: vec![Table {
                    caption: "c".into(),
                    headers: vec!["key".into(), "p50 (ns)".into()],
                    rows: vec![vec!["<k>".into(), "12".into()]],
                    note: None,
                }],
                ..Section::default()
            }],
        }
    }

    #[test]
    fn text_is_escaped() {
        let out = render(&page_with_host("<script>alert(1)</script>"));
        assert!(!out.contains("<script"), "{out}");
        assert!(
            out.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
            "{out}"
        );
        assert!(
            out.contains("t &lt;b&gt;") && out.contains("w &amp; &lt;i&gt;"),
            "{out}"
        );
        assert!(out.contains("&lt;k&gt;") && !out.contains("<k>"), "{out}");
    }

    #[test]
    fn figures_are_inlined_as_markup() {
        let svg = r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 10 10"><text>a &lt; b</text></svg>"#;
        let mut page = page_with_host("h");
        page.sections[0].figures.push(Figure {
            caption: "latency (ns) <x>".into(),
            svg: format!("<?xml version=\"1.0\"?>\n{svg}"),
            series: false,
        });
        let out = render(&page);
        assert!(out.contains(&format!("<figure>{svg}<figcaption>")), "{out}");
        assert!(out.contains("latency (ns) &lt;x&gt;"), "{out}");
        assert!(!out.contains("<?xml"), "{out}");
    }

    #[test]
    fn numbers_are_right_aligned() {
        let out = render(&page_with_host("h"));
        assert!(out.contains(r#"<th class="num">p50 (ns)</th>"#), "{out}");
        assert!(out.contains(r#"<td class="num">12</td>"#), "{out}");
        assert!(out.contains("<th>key</th>"), "{out}");
        assert!(is_number("-") && is_number("1.5%") && is_number("3 *"));
        assert!(!is_number("cpu1") && !is_number(""));
    }

    #[test]
    fn the_page_needs_nothing_outside_it() {
        let out = render(&page_with_host("h"));
        for banned in ["<script", "src=", "href=", "url(", "@import", "<link"] {
            assert!(!out.contains(banned), "{banned}: {out}");
        }
        assert!(out.contains("@media print"), "{out}");
    }

    #[test]
    fn folds_and_matrices_need_no_script() {
        let mut page = page_with_host("h");
        page.sections[0].folds.push(Fold {
            summary: "CPU <3>".into(),
            open: false,
            text: vec!["detail".into()],
            ..Fold::default()
        });
        page.sections[0].matrices.push(Shaded {
            table: Table {
                caption: "m".into(),
                headers: vec!["CPU".into(), "irq (%)".into()],
                rows: vec![
                    vec!["1".into(), "50.0".into()],
                    vec!["2".into(), "0.0".into()],
                ],
                note: None,
            },
            shades: vec![vec![0, 4], vec![0, 0]],
        });
        let out = render(&page);
        assert!(
            out.contains("<details><summary>CPU &lt;3&gt;</summary><p>detail</p></details>"),
            "{out}"
        );
        assert!(out.contains(r#"<table class="keep matrix">"#), "{out}");
        assert!(out.contains(r#"<td class="num s4">50.0</td>"#), "{out}");
        assert!(out.contains(r#"<td class="num">0.0</td>"#), "{out}");
        page.sections[0].folds[0].open = true;
        assert!(render(&page).contains("<details open><summary>"));
    }
}
