//! The CPU × time heat map, the one picture of a whole host over a whole run: a row per
//! CPU, a column per slice of time, each cell coloured by the largest gap (noise) or the
//! latest wake-up (timer) that began in it. Brendan Gregg's latency and utilization heat
//! maps are the model (time across, one row per device, colour for magnitude).
//!
//! Made from each entry's stored `series` only (per interval: the largest gap, the count,
//! the total), merged to at most [`MAX_COLUMNS`] columns by taking the largest of the
//! intervals a column covers, so its size does not grow with the run's length. (A
//! subsecond-offset heat map, time within the second up the y axis, needs every gap's
//! start; the series keeps none, so it is not drawn.)
//!
//! Drawn as SVG by hand rather than through plotters: a 191-CPU map has tens of
//! thousands of cells, and one `<path>` per colour, with each row's runs of one colour
//! merged into one rectangle, keeps it to a few hundred kilobytes where a rectangle
//! element per cell would take megabytes. Its text is SVG text, laid out by the browser:
//! it needs no font here.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::report::export::plot::{Unit, fmt_num};
use crate::report::result::dist::SeriesView;

/// The most columns a map has: a 4-pixel column across a 960-pixel plot.
const MAX_COLUMNS: usize = 240;

/// Colour levels (log-spaced between the smallest and the largest cell): ColorBrewer's
/// 9-class YlOrRd, light for the smallest gaps, dark red for the largest.
const PALETTE: [&str; 9] = [
    "#ffffcc", "#ffeda0", "#fed976", "#feb24c", "#fd8d3c", "#fc4e2a", "#e31a1c", "#bd0026",
    "#800026",
];
/// A slice in which nothing crossed the threshold.
const NONE_OVER: &str = "#ffffff";
/// A slice the entry did not measure (it started later or ended earlier).
const NOT_MEASURED: &str = "#d9d9d9";

/// One probe kind's map.
#[derive(Debug, Clone, PartialEq)]
pub struct TimeHeatmap {
    /// What a cell holds ("largest interruption", "largest latency").
    pub gap: &'static str,
    /// The time each column covers.
    pub column_ns: u64,
    /// By CPU, ascending.
    rows: Vec<HeatRow>,
}

#[derive(Debug, Clone, PartialEq)]
struct HeatRow {
    cpu: usize,
    /// Per column, the largest gap that began in it (0: none crossed the threshold);
    /// `None` where the entry did not measure.
    cells: Vec<Option<u64>>,
}

impl TimeHeatmap {
    /// The map of `series` (one probe kind's entries); `None` when there is nothing to
    /// place in time. Two entries of one CPU (two timer threads) share its row, each
    /// cell the larger of theirs.
    pub fn of(series: &[SeriesView<'_>]) -> Option<TimeHeatmap> {
        let first = series.first()?;
        let base = series.iter().map(|s| s.series.interval_ns).max()?;
        let span = (series.iter())
            .map(|s| s.series.interval_ns * s.series.max_ns.len() as u64)
            .max()?;
        if base == 0 || span == 0 {
            return None;
        }
        let merge = span.div_ceil(base).div_ceil(MAX_COLUMNS as u64).max(1);
        let column_ns = base * merge;
        let columns = span.div_ceil(column_ns) as usize;
        let mut rows: BTreeMap<usize, Vec<Option<u64>>> = BTreeMap::new();
        for s in series {
            let cells = rows.entry(s.cpu).or_insert_with(|| vec![None; columns]);
            let iv = s.series.interval_ns;
            for (i, &max) in s.series.max_ns.iter().enumerate() {
                let col = ((i as u64 * iv / column_ns) as usize).min(columns - 1);
                cells[col] = Some(cells[col].unwrap_or(0).max(max));
            }
        }
        Some(TimeHeatmap {
            gap: first.gap,
            column_ns,
            rows: (rows.into_iter())
                .map(|(cpu, cells)| HeatRow { cpu, cells })
                .collect(),
        })
    }

    fn columns(&self) -> usize {
        self.rows.first().map_or(0, |r| r.cells.len())
    }

    /// The smallest and largest non-zero cell.
    fn range(&self) -> Option<(u64, u64)> {
        let cells = self.rows.iter().flat_map(|r| r.cells.iter().flatten());
        let (lo, hi) =
            (cells.filter(|&&v| v > 0)).fold((u64::MAX, 0), |(lo, hi), &v| (lo.min(v), hi.max(v)));
        (hi > 0).then_some((lo, hi))
    }

    /// The largest cell: its CPU, its column and its value (the first, on a tie).
    pub fn peak(&self) -> Option<(usize, usize, u64)> {
        let (_, hi) = self.range()?;
        self.rows.iter().find_map(|r| {
            let col = r.cells.iter().position(|&c| c == Some(hi))?;
            Some((r.cpu, col, hi))
        })
    }

    /// The unit the legend gives values in: the plots' (ns, µs, ms or s), by the largest.
    pub fn unit(&self) -> &'static str {
        self.units().name
    }

    fn units(&self) -> Unit {
        Unit::for_ns(self.range().map_or(0, |(_, hi)| hi) as f64)
    }

    /// The map as a standalone `<svg>`, titled `title`.
    pub fn svg(&self, title: &str) -> String {
        let layout = Layout::of(self);
        let scale = self.range().map(Scale::of);
        let mut svg = String::new();
        let (w, h) = (layout.width, layout.height);
        let _ = write!(
            svg,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" \
             viewBox=\"0 0 {w} {h}\" font-family=\"sans-serif\" font-size=\"12\">\n\
             <rect width=\"{w}\" height=\"{h}\" fill=\"white\"/>\n\
             <text x=\"{}\" y=\"22\" font-size=\"16\" text-anchor=\"middle\">{}</text>\n",
            w / 2,
            crate::report::export::plot::xml_escape(title)
        );
        self.cells(&mut svg, &layout, scale.as_ref());
        self.axes(&mut svg, &layout);
        legend(&mut svg, &layout, self, scale.as_ref());
        svg.push_str("</svg>\n");
        svg
    }

    /// One `<path>` per colour: each row's runs of one colour as one horizontal stroke,
    /// drawn on a grid of one unit a cell that a transform scales to pixels (a stroke one
    /// unit wide is then a row high), each run placed relative to the end of the last.
    fn cells(&self, svg: &mut String, l: &Layout, scale: Option<&Scale>) {
        // Per colour: its path data, and where its pen is.
        let mut paths: BTreeMap<&str, (String, (i64, i64))> = BTreeMap::new();
        for (r, row) in self.rows.iter().enumerate() {
            let colour = |c: &Option<u64>| match (c, scale) {
                (None, _) => NOT_MEASURED,
                (Some(0), _) | (_, None) => NONE_OVER,
                (Some(v), Some(s)) => PALETTE[s.level(*v)],
            };
            let mut start = 0;
            while start < row.cells.len() {
                let fill = colour(&row.cells[start]);
                let end = (start..row.cells.len())
                    .find(|&c| colour(&row.cells[c]) != fill)
                    .unwrap_or(row.cells.len());
                let (d, pen) = paths.entry(fill).or_insert_with(|| (String::new(), (0, 0)));
                let (x, y) = (start as i64, r as i64);
                let _ = write!(d, "m{} {}h{}", x - pen.0, y - pen.1, end - start);
                *pen = (end as i64, y);
                start = end;
            }
        }
        let _ = writeln!(
            svg,
            "<g transform=\"translate({} {}) scale({} {})\" stroke-width=\"1\" \
             fill=\"none\" shape-rendering=\"crispEdges\">",
            l.left,
            l.top as f64 + l.row_h as f64 / 2.0,
            l.col_w,
            l.row_h
        );
        for (fill, (d, _)) in paths {
            let _ = writeln!(svg, "<path stroke=\"{fill}\" d=\"M0 0{d}\"/>");
        }
        let _ = writeln!(
            svg,
            "</g>\n<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" \
             stroke=\"#888\"/>",
            l.left,
            l.top,
            l.plot_w(self),
            l.plot_h(self)
        );
    }

    /// CPU numbers down the left (every k-th when rows are thin), seconds along the
    /// bottom, and the axes' names.
    fn axes(&self, svg: &mut String, l: &Layout) {
        let every = (13u32.div_ceil(l.row_h)).max(1) as usize;
        for (r, row) in self.rows.iter().enumerate().step_by(every) {
            let y = l.top + r as u32 * l.row_h + l.row_h / 2 + 4;
            let _ = writeln!(
                svg,
                "<text x=\"{}\" y=\"{y}\" text-anchor=\"end\">{}</text>",
                l.left - 6,
                row.cpu
            );
        }
        let (pw, ph) = (l.plot_w(self), l.plot_h(self));
        let mid = l.top + ph / 2;
        let _ = writeln!(
            svg,
            "<text x=\"16\" y=\"{mid}\" font-size=\"14\" text-anchor=\"middle\" \
             transform=\"rotate(-90 16 {mid})\">CPU</text>"
        );
        let secs = self.columns() as f64 * self.column_ns as f64 / 1e9;
        let (step, ticks) = crate::report::export::plot::nice_ticks(secs);
        let base = l.top + ph;
        for t in (0..=ticks).map(|t| t as f64 * step).filter(|&t| t <= secs) {
            let x = l.left as f64 + pw as f64 * t / secs;
            let _ = writeln!(
                svg,
                "<line x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{base}\" y2=\"{}\" stroke=\"#888\"/>\
                 <text x=\"{x:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
                base + 4,
                base + 17,
                crate::report::export::plot::trim_float(t)
            );
        }
        let _ = writeln!(
            svg,
            "<text x=\"{}\" y=\"{}\" font-size=\"14\" text-anchor=\"middle\">time (s), \
             each column {}</text>",
            l.left + pw / 2,
            base + 36,
            crate::report::terminal::table::interval_words(self.column_ns)
        );
    }
}

/// Pixel sizes.
struct Layout {
    left: u32,
    top: u32,
    col_w: u32,
    row_h: u32,
    width: u32,
    height: u32,
}

const PLOT_W: u32 = 960;
const LEGEND_H: u32 = 64;

impl Layout {
    fn of(m: &TimeHeatmap) -> Layout {
        let (left, top) = (56, 34);
        let col_w = (PLOT_W / m.columns().max(1) as u32).max(1);
        // Rows of 3 to 18 pixels: a 191-CPU map is about 570 pixels high.
        let row_h = (540 / m.rows.len().max(1) as u32).clamp(3, 18);
        let plot_h = row_h * m.rows.len() as u32;
        let plot_w = col_w * m.columns() as u32;
        Layout {
            left,
            top,
            col_w,
            row_h,
            width: (left + plot_w + 24).max(620),
            height: top + plot_h + 44 + LEGEND_H,
        }
    }

    fn plot_w(&self, m: &TimeHeatmap) -> u32 {
        self.col_w * m.columns() as u32
    }

    fn plot_h(&self, m: &TimeHeatmap) -> u32 {
        self.row_h * m.rows.len() as u32
    }
}

/// Log-spaced colour levels between the smallest and largest non-zero cell.
struct Scale {
    lo: f64,
    hi: f64,
}

impl Scale {
    fn of((lo, hi): (u64, u64)) -> Scale {
        Scale {
            lo: lo as f64,
            hi: hi as f64,
        }
    }

    fn level(&self, v: u64) -> usize {
        if self.hi <= self.lo {
            return PALETTE.len() - 1;
        }
        let t = (v as f64 / self.lo).ln() / (self.hi / self.lo).ln();
        ((t * PALETTE.len() as f64) as usize).min(PALETTE.len() - 1)
    }

    /// The lower edge of level `i` (the top edge for `i` = the level count).
    fn edge(&self, i: usize) -> f64 {
        self.lo * (self.hi / self.lo).powf(i as f64 / PALETTE.len() as f64)
    }
}

/// The colour key under the map: a swatch per level with its edges, in the map's unit.
fn legend(svg: &mut String, l: &Layout, m: &TimeHeatmap, scale: Option<&Scale>) {
    let y = l.top + l.plot_h(m) + 52;
    let Unit {
        name: unit,
        ns: div,
    } = m.units();
    let _ = writeln!(
        svg,
        "<text x=\"{}\" y=\"{}\">{} per cell ({unit}):</text>",
        l.left,
        y + 12,
        m.gap
    );
    let mut x = l.left + 200;
    const SW: u32 = 40;
    if let Some(s) = scale {
        for (i, fill) in PALETTE.iter().enumerate() {
            let _ = writeln!(
                svg,
                "<rect x=\"{}\" y=\"{y}\" width=\"{SW}\" height=\"14\" fill=\"{fill}\" \
                 stroke=\"#888\" stroke-width=\"0.5\"/>",
                x + i as u32 * SW
            );
        }
        for i in (0..=PALETTE.len()).step_by(2) {
            let _ = writeln!(
                svg,
                "<text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"middle\">{}</text>",
                x + i as u32 * SW,
                y + 28,
                fmt_num(s.edge(i) / div)
            );
        }
        x += PALETTE.len() as u32 * SW + 16;
    }
    let measured_all = m.rows.iter().all(|r| r.cells.iter().all(Option::is_some));
    let keys = [
        (NONE_OVER, "none", true),
        (NOT_MEASURED, "not measured", !measured_all),
    ];
    for (fill, words, shown) in keys {
        if !shown {
            continue;
        }
        let _ = writeln!(
            svg,
            "<rect x=\"{x}\" y=\"{y}\" width=\"14\" height=\"14\" fill=\"{fill}\" \
             stroke=\"#888\" stroke-width=\"0.5\"/><text x=\"{}\" y=\"{}\">{words}</text>",
            x + 18,
            y + 12
        );
        x += 110;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::series::SeriesOut;

    fn series(cpu: usize, interval_ns: u64, max_ns: Vec<u64>) -> (usize, SeriesOut) {
        let n = max_ns.len();
        let s = SeriesOut {
            interval_ns,
            events: vec![1; n],
            total_ns: max_ns.clone(),
            max_ns,
        };
        (cpu, s)
    }

    fn view(cpu: usize, s: &SeriesOut) -> SeriesView<'_> {
        SeriesView {
            probe: "noise",
            cpu,
            series: s,
            largest: &[],
            gap: "largest interruption",
            worst: "worst gap",
            time_lost: true,
        }
    }

    #[test]
    fn columns_take_the_largest_of_the_intervals_they_cover() {
        let long: Vec<u64> = (0..480).collect();
        let (a, b) = (series(3, 10, long), series(1, 20, vec![7, 0]));
        let m = TimeHeatmap::of(&[view(a.0, &a.1), view(b.0, &b.1)]).unwrap();
        // 480 intervals of 10 ns merge two to a column: 240 columns of 20 ns.
        assert_eq!((m.column_ns, m.columns()), (20, MAX_COLUMNS));
        assert_eq!(m.rows.iter().map(|r| r.cpu).collect::<Vec<_>>(), [1, 3]);
        assert_eq!(m.rows[1].cells[0], Some(1));
        assert_eq!(m.rows[1].cells[239], Some(479));
        // The shorter entry: its two intervals, then nothing measured.
        assert_eq!(&m.rows[0].cells[..3], &[Some(7), Some(0), None]);
        assert_eq!(m.peak(), Some((3, 239, 479)));
    }

    #[test]
    fn a_cpu_of_two_entries_keeps_the_larger_cell() {
        let (a, b) = (series(2, 10, vec![5, 1]), series(2, 10, vec![3, 9]));
        let m = TimeHeatmap::of(&[view(a.0, &a.1), view(b.0, &b.1)]).unwrap();
        assert_eq!(m.rows.len(), 1);
        assert_eq!(m.rows[0].cells, [Some(5), Some(9)]);
    }

    #[test]
    fn the_svg_has_a_path_per_colour_and_merges_runs() {
        let flat = series(1, 1_000_000, vec![50_000; 100]);
        let rising = series(2, 1_000_000, (1..=100).map(|i| i * 10_000).collect());
        let m = TimeHeatmap::of(&[view(flat.0, &flat.1), view(rising.0, &rising.1)]).unwrap();
        let svg = m.svg("noise <all>");
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        assert!(svg.contains("noise &lt;all&gt;"));
        // Nine levels plus nothing else: at most one path per colour.
        assert!(svg.matches("<path").count() <= PALETTE.len());
        // The flat row is one run: one stroke across its 100 columns.
        assert!(svg.contains("d=\"M0 0m0 0h100"), "{svg}");
        assert!(
            svg.contains(&format!("scale({} 18)", PLOT_W / 100)),
            "{svg}"
        );
        assert!(svg.contains("largest interruption per cell (µs)"));
        assert!(svg.contains("each column 1 ms"), "{svg}");
        assert_eq!(Scale::of((1, 1000)).level(1000), PALETTE.len() - 1);
        assert_eq!(Scale::of((1, 1000)).level(1), 0);
    }

    #[test]
    fn the_legend_is_in_the_plots_unit_ns_for_gaps_under_10_us() {
        let small = series(1, 1_000_000, (1..=50).map(|i| i * 100).collect());
        let m = TimeHeatmap::of(&[view(small.0, &small.1)]).unwrap();
        assert_eq!(m.unit(), "ns");
        let svg = m.svg("noise");
        assert!(svg.contains("largest interruption per cell (ns)"), "{svg}");
        // The edges from 100 ns up, in ns, as the plots' ticks are written.
        assert!(
            svg.contains(">100</text>") && svg.contains(">1357</text>"),
            "{svg}"
        );
        let large = series(2, 1_000_000, vec![20_000_000]);
        let m = TimeHeatmap::of(&[view(large.0, &large.1)]).unwrap();
        assert_eq!(m.unit(), "ms");
    }

    #[test]
    fn nothing_to_place_gives_no_map() {
        assert!(TimeHeatmap::of(&[]).is_none());
        let empty = series(1, 10, vec![]);
        assert!(TimeHeatmap::of(&[view(empty.0, &empty.1)]).is_none());
    }
}
