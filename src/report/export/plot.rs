//! Plots of saved results, drawn by the tool itself (plotters): SVG for the HTML page and
//! `report --format svg`, PNG for `--format png`. What each plot shows is described once
//! in `report::result::figure`, which `report::export::gnuplot` writes out too; this module only draws.
//!
//! Per distribution (see `export::distributions`), two plots:
//!
//! - `…-percentiles`: HdrHistogram's "latency by percentile". The x axis is 1/(1−p) on a
//!   log scale (`figure::percentile_x`), ticked at 0 %, 90 %, 99 %, 99.9 % … ([`percentile_label`]);
//!   the curve ends at the maximum, placed at 1/(1−p) = count.
//! - `…-histogram`: counts (log scale) in log-spaced bins, fifty per decade of latency
//!   (`figure::BINS_PER_DECADE`). A timer entry's measured and corrected latency share
//!   one percentile plot and one histogram, a line each. Percentile plots have a log y axis.
//!   Tick labels on log axes are 1, 2 and 5 times a power of ten at most, so none overlap;
//!   lines of an overlay differ in dash (solid, dashed, dotted) as well as colour.
//!
//! Per noise or timer entry, `…-series`: the largest gap of each interval over the run
//! (x in seconds), with the entry's largest events marked. Per c2c mode, `c2c-heatmap`: the
//! CPU × CPU matrix of median one-way latency, every cell labelled with its value in whole
//! ns. Latency axes pick ns, µs, ms or s by magnitude and name the unit in their label.
//!
//! Text is measured and (in PNG) drawn with DejaVu Sans, built into the binary by the
//! `dejavu` crate, so that plots are the same on every host, one with no font installed
//! included; `JITTERSCOPE_FONT=FILE` names another TrueType font instead.
//!
//! The two drawings made in pixels rather than on a chart have files of their own: the
//! c2c matrix (`heatmap`) and the cause-shares bar (`shares`).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use anyhow::Context;
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::report::ResultFile;
use crate::report::export::Loaded;
use crate::report::export::describe;
use crate::report::result::dist::Dist;
use crate::report::result::figure::{self, Figure, bin_edge};

mod heatmap;
mod shares;

use heatmap::{cell_px, draw_heatmap};
use shares::{BAR_HEIGHT, BAR_TOP, LEGEND_COLUMNS, LEGEND_ROW, SHARES_TITLE, draw_shares};

/// Why a plot could not be drawn.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    #[error("plots cannot use the font: {0}")]
    Font(String),
    #[error("{0}")]
    Data(String),
    #[error("cannot draw {name}: {reason}")]
    Draw { name: String, reason: String },
}

/// One plot, ready to render.
pub struct Plot {
    /// File-safe name, unique in its set (`noise-cpu1-percentiles`).
    pub name: String,
    /// Human title, with units.
    pub title: String,
    /// Whose data it draws, when one entry's.
    pub subject: Option<Subject>,
    chart: Chart,
}

/// The entry a plot is of: its probe and key (`noise`, `cpu3`), and for a distribution
/// its metric (the one named first when two are overlaid).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subject {
    pub probe: &'static str,
    pub key: String,
    /// `None` for a series.
    pub metric: Option<&'static str>,
}

/// What a plot draws, in ns; the display unit is chosen when drawing.
enum Chart {
    Percentiles {
        lines: Vec<Line>,
        y_desc: String,
        /// Drawn first, thin and grey, without a legend: the many lines the coloured
        /// ones stand out from.
        faint: Vec<Line>,
    },
    Histogram {
        lines: Vec<Line>,
        x_desc: String,
    },
    Series {
        lines: Vec<Line>,
        marks: Vec<(f64, f64)>,
        y_desc: String,
    },
    Heatmap(Heatmap),
    /// A stacked bar of cause shares and its legend.
    Shares(Vec<figure::CauseShare>),
}

/// One labelled curve: (x, y) points, y in ns (counts for a histogram, whose x is ns).
struct Line {
    label: String,
    points: Vec<(f64, f64)>,
}

/// Median one-way latency by CPU pair, both ways round.
struct Heatmap {
    cpus: Vec<usize>,
    /// `cells[row * n + col]`, ns; `None` where no pair was measured.
    cells: Vec<Option<f64>>,
}

const WIDTH: u32 = 800;
const HEIGHT: u32 = 400;
const FONT: &str = "sans-serif";

impl Plot {
    pub fn svg(&self) -> Result<String, PlotError> {
        ensure_font()?;
        let (mut s, mut cells) = (String::new(), None);
        {
            let root = SVGBackend::with_string(&mut s, self.size()).into_drawing_area();
            self.draw(&root, Some(&mut cells))
                .map_err(|r| self.draw_error(r))?;
            root.present().map_err(|e| self.draw_error(e.to_string()))?;
        }
        // A heat map's cells and their values, drawn last: nothing is drawn over them.
        if let (Some(cells), Some(end)) = (cells, s.rfind("</svg>")) {
            s.insert_str(end, &cells);
        }
        Ok(s)
    }

    pub fn png(&self) -> Result<Vec<u8>, PlotError> {
        ensure_font()?;
        let (w, h) = self.size();
        let mut rgb = vec![0u8; w as usize * h as usize * 3];
        {
            let root = BitMapBackend::with_buffer(&mut rgb, (w, h)).into_drawing_area();
            self.draw(&root, None).map_err(|r| self.draw_error(r))?;
            root.present().map_err(|e| self.draw_error(e.to_string()))?;
        }
        encode_png(&rgb, (w, h)).map_err(|r| self.draw_error(r))
    }

    /// Whether the plot is a time series (the page shows those first).
    pub fn is_series(&self) -> bool {
        matches!(self.chart, Chart::Series { .. })
    }

    /// Width and height in pixels: a heat map grows with its CPU count.
    pub fn size(&self) -> (u32, u32) {
        match &self.chart {
            Chart::Heatmap(m) => {
                let side = m.cpus.len() as u32 * cell_px(m.cpus.len());
                // Wide enough for the title.
                ((side + 140).max(560), side + 100)
            }
            Chart::Shares(segments) => {
                let rows = segments.len().div_ceil(LEGEND_COLUMNS) as u32;
                (
                    WIDTH,
                    SHARES_TITLE + BAR_TOP + BAR_HEIGHT + 16 + rows * LEGEND_ROW + 8,
                )
            }
            _ => (WIDTH, HEIGHT),
        }
    }

    fn draw_error(&self, reason: String) -> PlotError {
        PlotError::Draw {
            name: self.name.clone(),
            reason,
        }
    }

    /// Draws the plot; a heat map's cells and their values go to `svg_cells` instead,
    /// when given, as SVG written by hand (`heat_paths`, `heat_labels`).
    fn draw<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, Shift>,
        svg_cells: Option<&mut Option<String>>,
    ) -> Result<(), String> {
        root.fill(&WHITE).map_err(de)?;
        let area = root.titled(&self.title, (FONT, 17)).map_err(de)?;
        match &self.chart {
            Chart::Percentiles {
                lines,
                y_desc,
                faint,
            } => draw_percentiles(&area, lines, faint, y_desc),
            Chart::Histogram { lines, x_desc } => draw_histogram(&area, lines, x_desc),
            Chart::Series {
                lines,
                marks,
                y_desc,
            } => draw_series(&area, lines, marks, y_desc),
            Chart::Heatmap(m) => draw_heatmap(&area, m, svg_cells),
            Chart::Shares(segments) => draw_shares(&area, segments),
        }
    }

    /// A CPU's bar of cause shares (`figure::cause_shares`), titled `title` (which
    /// should name the unit, %).
    pub fn cause_shares(name: &str, title: &str, segments: Vec<figure::CauseShare>) -> Plot {
        Plot {
            name: figure::file_safe(name),
            title: title.to_string(),
            subject: None,
            chart: Chart::Shares(segments),
        }
    }

    /// Whether it is a distribution's percentile plot.
    pub fn is_percentiles(&self) -> bool {
        matches!(self.chart, Chart::Percentiles { .. })
    }

    /// Many entries' percentile curves in one plot: the first line of each of `all`
    /// thin and grey, then each of `named` (a label and a plot) in colour with a legend
    /// entry. `what` says what the curves are ("noise interruption, every CPU"); the
    /// unit is added. `None` unless every plot is a percentile plot.
    pub fn percentiles_overlaid(
        name: &str,
        what: &str,
        all: &[&Plot],
        named: &[(String, &Plot)],
    ) -> Option<Plot> {
        let first = |p: &Plot| match &p.chart {
            Chart::Percentiles { lines, .. } => lines.first().map(|l| l.points.clone()),
            _ => None,
        };
        let faint = (all.iter())
            .map(|p| first(p).map(|points| line("", points.into_iter())))
            .collect::<Option<Vec<Line>>>()?;
        let lines = (named.iter())
            .map(|(label, p)| first(p).map(|points| line(label, points.into_iter())))
            .collect::<Option<Vec<Line>>>()?;
        let unit = Unit::for_ns(max_y(&faint).max(max_y(&lines)));
        let metric = all.first()?.subject.as_ref()?.metric?;
        Some(Plot {
            name: figure::file_safe(name),
            title: format!("{what}: latency by percentile ({})", unit.name),
            subject: None,
            chart: Chart::Percentiles {
                lines,
                y_desc: format!("{metric} ({})", unit.name),
                faint,
            },
        })
    }
}

fn de<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

fn encode_png(rgb: &[u8], (w, h): (u32, u32)) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    let mut enc = png::Encoder::new(&mut out, w, h);
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    // Flat-coloured charts compress well even at the fast setting.
    enc.set_compression(png::Compression::Fast);
    let mut writer = enc.write_header().map_err(de)?;
    writer.write_image_data(rgb).map_err(de)?;
    writer.finish().map_err(de)?;
    Ok(out)
}

// ---------------------------------------------------------------------------------------
// From the descriptions (report::result::figure) to plots

/// Every plot of each result (see `describe::result_figures`): per distribution, its
/// percentile distribution and its histogram; per noise or timer entry, its series; per
/// c2c result, a heat map. With several files, names are prefixed by the file's stem
/// (numbered when stems repeat).
pub fn result_plots(results: &[Loaded]) -> Result<Vec<Plot>, PlotError> {
    let figures = describe::result_figures(results).map_err(PlotError::Data)?;
    Ok(corrected_overlaid(figures).iter().map(Plot::of).collect())
}

/// The plots of one result as [`result_plots`] draws them, but of `dists` (some of its
/// distributions) alone, for the page, which shows a bounded few: the others' histograms
/// are never decoded. Every series and c2c heat map is kept.
pub fn plots_of(r: &ResultFile, dists: &[&Dist]) -> Result<Vec<Plot>, PlotError> {
    let mut figures = describe::figures_of(r, dists).map_err(PlotError::Data)?;
    figure::unique_names(figures.iter_mut().map(|f| &mut f.name));
    Ok(corrected_overlaid(figures).iter().map(Plot::of).collect())
}

/// What a timer's two latency lines are called when drawn in one plot.
pub const MEASURED: &str = "measured";
pub const CORRECTED: &str = "corrected for coordinated omission";

/// Each timer entry's corrected latency drawn over its measured latency, in one
/// percentile plot and one histogram, instead of two of each: the correction shows as
/// the gap between the lines. (The gnuplot data keep one file per distribution.)
fn corrected_overlaid(mut figures: Vec<Figure>) -> Vec<Figure> {
    let id = |f: &Figure| match &f.chart {
        figure::Chart::Percentiles { dist, .. } => Some((0, dist.clone())),
        figure::Chart::Histogram { dist, .. } => Some((1, dist.clone())),
        _ => None,
    };
    let mut i = 0;
    while i < figures.len() {
        let corrected =
            id(&figures[i]).filter(|(_, d)| d.probe == "timer" && d.metric == "latency-corrected");
        let Some((kind, c)) = corrected else {
            i += 1;
            continue;
        };
        let measured = figures.iter().position(|f| {
            id(f).is_some_and(|(k, d)| {
                k == kind && d.probe == "timer" && d.metric == "latency" && d.key == c.key
            }) && f.source == figures[i].source
        });
        let Some(m) = measured else {
            i += 1;
            continue;
        };
        let gone = figures.remove(i);
        let target = if m > i { m - 1 } else { m };
        match (&mut figures[target].chart, gone.chart) {
            (
                figure::Chart::Percentiles { lines, .. },
                figure::Chart::Percentiles { lines: more, .. },
            ) => {
                relabel(lines, MEASURED);
                lines.extend(more.into_iter().map(|l| l.labelled(CORRECTED)));
            }
            (
                figure::Chart::Histogram { lines, .. },
                figure::Chart::Histogram { lines: more, .. },
            ) => {
                relabel(lines, MEASURED);
                lines.extend(more.into_iter().map(|l| l.labelled(CORRECTED)));
            }
            _ => {}
        }
    }
    figures
}

fn relabel<T>(lines: &mut [figure::Line<T>], label: &str) {
    for l in lines.iter_mut().filter(|l| l.label.is_empty()) {
        l.label = label.to_string();
    }
}

/// The runs overlaid (see `describe::overlay_figures`), a labelled line per run.
pub fn overlay_plots(runs: &[(String, &ResultFile)]) -> Result<Vec<Plot>, PlotError> {
    let figures = describe::overlay_figures(runs).map_err(PlotError::Data)?;
    Ok(figures.iter().map(Plot::of).collect())
}

impl Plot {
    /// The plot of a description, its latencies in the display unit their size calls for.
    pub fn of(f: &Figure) -> Plot {
        let subject = match &f.chart {
            figure::Chart::Percentiles { dist, .. } | figure::Chart::Histogram { dist, .. } => {
                Some(Subject {
                    probe: dist.probe,
                    key: dist.key.clone(),
                    metric: Some(dist.metric),
                })
            }
            figure::Chart::Series { id, .. } => Some(Subject {
                probe: id.probe,
                key: format!("cpu{}", id.cpu),
                metric: None,
            }),
            figure::Chart::Heatmap(_) => None,
        };
        let (title, chart) = match &f.chart {
            figure::Chart::Percentiles { dist, lines } => {
                let lines: Vec<Line> = (lines.iter())
                    .map(|l| {
                        line(
                            &l.label,
                            l.data.iter().map(|q| (q.x.log10(), q.value_ns as f64)),
                        )
                    })
                    .collect();
                let unit = Unit::for_ns(max_y(&lines));
                let y_desc = format!("{} ({})", dist.metric, unit.name);
                let title = dist_title(dist, "latency by percentile", unit);
                let faint = Vec::new();
                (
                    title,
                    Chart::Percentiles {
                        lines,
                        y_desc,
                        faint,
                    },
                )
            }
            figure::Chart::Histogram { dist, lines } => {
                let lines: Vec<Line> = (lines.iter())
                    .map(|l| line(&l.label, l.data.iter().map(|b| (b.lo_ns, b.count as f64))))
                    .collect();
                let unit = Unit::for_ns(max_x(&lines));
                let x_desc = format!("{} ({})", dist.metric, unit.name);
                (
                    dist_title(dist, "histogram", unit),
                    Chart::Histogram { lines, x_desc },
                )
            }
            figure::Chart::Series { id, lines, largest } => series_plot(id, lines, largest),
            figure::Chart::Heatmap(m) => (
                format!("c2c median one-way latency (ns), mode {}", m.mode),
                Chart::Heatmap(Heatmap {
                    cpus: m.cpus.clone(),
                    cells: m.cells.clone(),
                }),
            ),
        };
        Plot {
            name: f.name.clone(),
            title,
            subject,
            chart,
        }
    }
}

fn line(label: &str, points: impl Iterator<Item = (f64, f64)>) -> Line {
    Line {
        label: label.to_string(),
        points: points.collect(),
    }
}

fn dist_title(d: &figure::DistId, what: &str, unit: Unit) -> String {
    let (p, k, m, u) = (d.probe, &d.key, d.metric, unit.name);
    format!("{p} {k} {m}: {what} ({u}){}", d.caveat())
}

/// The per-interval maxima as steps, each flat across its interval (x in seconds), so
/// that a run of a single interval still shows; the largest events as marks.
fn series_plot(
    id: &figure::SeriesId,
    lines: &[figure::Line<figure::SeriesData>],
    largest: &[(u64, u64)],
) -> (String, Chart) {
    let interval_ns = lines.first().map_or(0, |l| l.data.interval_ns);
    let lines: Vec<Line> = (lines.iter())
        .map(|l| {
            let step = l.data.interval_ns as f64 / 1e9;
            let points = (l.data.max_ns.iter().enumerate()).flat_map(|(i, &ns)| {
                [
                    (i as f64 * step, ns as f64),
                    ((i + 1) as f64 * step, ns as f64),
                ]
            });
            line(&l.label, points)
        })
        .collect();
    let marks: Vec<(f64, f64)> = (largest.iter())
        .map(|&(start, ns)| (start as f64 / 1e9, ns as f64))
        .collect();
    let top = marks.iter().map(|m| m.1).fold(max_y(&lines), f64::max);
    let unit = Unit::for_ns(top);
    let interval = crate::report::terminal::table::interval_words(interval_ns);
    let (p, cpu, gap, u) = (id.probe, id.cpu, id.gap, unit.name);
    let title = format!("{p} cpu{cpu}: {gap} per {interval} ({u})");
    (
        title,
        Chart::Series {
            lines,
            marks,
            y_desc: format!("{} ({})", id.gap, unit.name),
        },
    )
}

/// The tick label at 10^`decades` on the percentile axis: `0 %`, `90 %`, `99 %`,
/// `99.9 %`, …
pub fn percentile_label(decades: u32) -> String {
    match decades {
        0 => "0 %".into(),
        1 => "90 %".into(),
        2 => "99 %".into(),
        d => format!("99.{} %", "9".repeat(d as usize - 2)),
    }
}

/// A tick on the percentile axis (log10 of 1/(1−p)): whole decades only.
fn percentile_tick(x: &f64) -> String {
    match (x.round() - x).abs() < 1e-6 && *x >= 0.0 {
        true => percentile_label(x.round() as u32),
        false => String::new(),
    }
}

fn max_y(lines: &[Line]) -> f64 {
    let ys = lines.iter().flat_map(|l| l.points.iter().map(|p| p.1));
    ys.fold(0.0, f64::max)
}

fn max_x(lines: &[Line]) -> f64 {
    let xs = lines.iter().flat_map(|l| l.points.iter().map(|p| p.0));
    xs.fold(0.0, f64::max)
}

// ---------------------------------------------------------------------------------------
// Units and labels

/// A display unit for ns values.
#[derive(Clone, Copy)]
pub(crate) struct Unit {
    pub(crate) name: &'static str,
    pub(crate) ns: f64,
}

impl Unit {
    /// The largest unit in which `max_ns` is still at least 1 (…so ticks read 0 to 9 999).
    pub(crate) fn for_ns(max_ns: f64) -> Unit {
        let (name, ns) = match max_ns {
            v if v < 1e4 => ("ns", 1.0),
            v if v < 1e7 => ("µs", 1e3),
            v if v < 1e10 => ("ms", 1e6),
            _ => ("s", 1e9),
        };
        Unit { name, ns }
    }
}

/// A tick label: short, without trailing zeros.
pub(crate) fn fmt_num(v: f64) -> String {
    let a = v.abs();
    let s = match a {
        _ if a >= 1e5 => return format!("{v:.0e}"),
        _ if a >= 100.0 || a == 0.0 => format!("{v:.0}"),
        _ if a >= 1.0 => format!("{v:.1}"),
        _ => format!("{v:.3}"),
    };
    match s.contains('.') {
        true => s.trim_end_matches('0').trim_end_matches('.').to_string(),
        false => s,
    }
}

/// Distinct line colours: matplotlib's tab10, then plotters' 99-colour palette.
fn colour(i: usize) -> RGBColor {
    const TAB10: [(u8, u8, u8); 10] = [
        (31, 119, 180),
        (255, 127, 14),
        (44, 160, 44),
        (214, 39, 40),
        (148, 103, 189),
        (140, 86, 75),
        (227, 119, 194),
        (127, 127, 127),
        (188, 189, 34),
        (23, 190, 207),
    ];
    match TAB10.get(i) {
        Some(&(r, g, b)) => RGBColor(r, g, b),
        None => {
            let (r, g, b) = Palette99::pick(i).rgb();
            RGBColor(r, g, b)
        }
    }
}

// ---------------------------------------------------------------------------------------
// Drawing

type Area<DB> = DrawingArea<DB, Shift>;

/// How the `i`-th line of a plot is drawn, so that lines that lie on one another (two
/// identical runs) still tell apart: solid, dashed, dotted, then solid again.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Dash {
    Solid,
    Dashed,
    Dotted,
}

pub fn dash(i: usize) -> Dash {
    match i % 3 {
        0 => Dash::Solid,
        1 => Dash::Dashed,
        _ => Dash::Dotted,
    }
}

/// Draws `lines` on `chart`, each in its colour and dash ([`dash`]), labelled for a
/// legend when there is more than one.
fn draw_lines<'a, DB, X, Y>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    lines: impl Iterator<Item = (String, Vec<(X::ValueType, Y::ValueType)>)>,
) -> Result<(), String>
where
    DB: DrawingBackend + 'a,
    X: Ranged,
    Y: Ranged,
    X::ValueType: Clone + 'static,
    Y::ValueType: Clone + 'static,
{
    for (i, (label, points)) in lines.enumerate() {
        let c = colour(i);
        let style = c.stroke_width(2);
        let d = dash(i);
        let s = match d {
            Dash::Solid => chart.draw_series(LineSeries::new(points, style)),
            Dash::Dashed => chart.draw_series(DashedLineSeries::new(points, 9, 6, style)),
            Dash::Dotted => chart.draw_series(DashedLineSeries::new(points, 2, 5, style)),
        }
        .map_err(de)?;
        if !label.is_empty() {
            s.label(label).legend(move |(x, y)| {
                let pts: Vec<(i32, i32)> = match d {
                    Dash::Solid => vec![(x, y), (x + 24, y)],
                    Dash::Dashed => vec![(x, y), (x + 9, y)],
                    Dash::Dotted => vec![(x, y), (x + 2, y)],
                };
                let second = match d {
                    Dash::Solid => vec![(x + 24, y), (x + 24, y)],
                    Dash::Dashed => vec![(x + 15, y), (x + 24, y)],
                    Dash::Dotted => vec![(x + 7, y), (x + 9, y)],
                };
                EmptyElement::at((0, 0))
                    + PathElement::new(pts, style)
                    + PathElement::new(second, style)
            });
        }
    }
    Ok(())
}

fn draw_legend<'a, DB, X, Y>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    at: SeriesLabelPosition,
) -> Result<(), String>
where
    DB: DrawingBackend + 'a,
    X: Ranged,
    Y: Ranged,
{
    chart
        .configure_series_labels()
        .position(at)
        .border_style(BLACK.mix(0.4))
        .background_style(WHITE.mix(0.85))
        .label_font((FONT, 13))
        .draw()
        .map_err(de)
}

fn has_legend(lines: &[Line]) -> bool {
    lines.iter().any(|l| !l.label.is_empty())
}

fn draw_percentiles<DB: DrawingBackend>(
    area: &Area<DB>,
    lines: &[Line],
    faint: &[Line],
    y_desc: &str,
) -> Result<(), String> {
    let every = || lines.iter().chain(faint);
    let top = max_y(lines).max(max_y(faint));
    let unit = Unit::for_ns(top);
    // Whole decades, so that every tick is a percentile label.
    let decades = (max_x(lines).max(max_x(faint)).ceil() as u32).max(1);
    let x = 0.0..f64::from(decades);
    // A log y axis, as HdrHistogram plots latency: p50 and p99 stay apart under a tail
    // thousands of times longer. The floor is below the lowest value (0 ns sits on it).
    let low = every()
        .flat_map(|l| l.points.iter().map(|p| p.1))
        .filter(|&y| y > 0.0)
        .fold(f64::INFINITY, f64::min);
    let y_low = if low.is_finite() {
        low / unit.ns / 1.5
    } else {
        0.5 / unit.ns
    };
    let y_top = (top / unit.ns * 1.5).max(y_low * 10.0);
    let y_decades = (y_top / y_low).log10();
    let mut chart = chart_on(area, 70)
        .build_cartesian_2d(x, (y_low..y_top).log_scale())
        .map_err(de)?;
    chart
        .configure_mesh()
        .x_desc("percentile")
        .y_desc(y_desc)
        .x_labels(decades as usize + 1)
        .x_label_formatter(&percentile_tick)
        .y_label_formatter(&|y| log_label(*y, y_decades))
        // Every sub-decade tick as a light line makes grey bands on a log axis.
        .light_line_style(TRANSPARENT)
        .label_style((FONT, 13))
        .draw()
        .map_err(de)?;
    let scaled = |l: &Line| -> Vec<(f64, f64)> {
        (l.points.iter())
            .map(|&(x, y)| (x, (y / unit.ns).max(y_low)))
            .collect()
    };
    let grey = RGBColor(150, 150, 150).mix(0.5).stroke_width(1);
    for l in faint {
        chart
            .draw_series(LineSeries::new(scaled(l), grey))
            .map_err(de)?;
    }
    draw_lines(
        &mut chart,
        lines.iter().map(|l| (l.label.clone(), scaled(l))),
    )?;
    if has_legend(lines) {
        draw_legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
    }
    Ok(())
}

/// A tick label on a log axis spanning `decades`: only 1, 2 and 5 times a power of ten
/// (only powers of ten beyond five decades), so that labels never crowd into one another
/// ("700800 9001000"); the grid keeps every tick.
fn log_label(v: f64, decades: f64) -> String {
    if v <= 0.0 {
        return String::new();
    }
    let mantissa = v / 10f64.powf(v.log10().floor());
    let near = |m: f64| (mantissa - m).abs() < 1e-6 * m || (mantissa - m * 10.0).abs() < 1e-5;
    let keep = match decades {
        d if d > 5.0 => near(1.0),
        d if d > 2.5 => near(1.0) || near(3.0),
        _ => near(1.0) || near(2.0) || near(5.0),
    };
    if keep { fmt_num(v) } else { String::new() }
}

fn draw_histogram<DB: DrawingBackend>(
    area: &Area<DB>,
    lines: &[Line],
    x_desc: &str,
) -> Result<(), String> {
    let unit = Unit::for_ns(max_x(lines));
    let lo = lines.iter().flat_map(|l| l.points.first()).map(|p| p.0);
    let lo = lo.fold(f64::INFINITY, f64::min) / unit.ns;
    let hi = max_x(lines) * bin_edge(1.0) / unit.ns;
    let (floor, top) = (0.7, max_y(lines) * 2.0);
    let mut chart = chart_on(area, 60)
        .build_cartesian_2d((lo..hi).log_scale(), (floor..top).log_scale())
        .map_err(de)?;
    let (x_decades, y_decades) = ((hi / lo).log10(), (top / floor).log10());
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc("count")
        .x_label_formatter(&|x| log_label(*x, x_decades))
        .y_label_formatter(&|y| log_label(*y, y_decades))
        // Every sub-decade tick as a light line makes grey bands on a log axis.
        .light_line_style(TRANSPARENT)
        .label_style((FONT, 13))
        .draw()
        .map_err(de)?;
    let steps = lines
        .iter()
        .map(|l| (l.label.clone(), steps(&l.points, unit, floor)));
    draw_lines(&mut chart, steps)?;
    if has_legend(lines) {
        draw_legend(&mut chart, SeriesLabelPosition::UpperRight)?;
    }
    Ok(())
}

/// A histogram's outline: each bin a flat step, dropping to `floor` around empty bins.
fn steps(bins: &[(f64, f64)], unit: Unit, floor: f64) -> Vec<(f64, f64)> {
    let mut out: Vec<(f64, f64)> = Vec::with_capacity(bins.len() * 4);
    for &(lo, count) in bins {
        let (x0, x1) = (lo / unit.ns, lo * bin_edge(1.0) / unit.ns);
        let adjacent = out.last().is_some_and(|p| (p.0 / x0 - 1.0).abs() < 1e-9);
        if !adjacent {
            if let Some(&(px, _)) = out.last() {
                out.push((px, floor));
            }
            out.push((x0, floor));
        }
        out.extend([(x0, count), (x1, count)]);
    }
    if let Some(&(px, _)) = out.last() {
        out.push((px, floor));
    }
    out
}

fn draw_series<DB: DrawingBackend>(
    area: &Area<DB>,
    lines: &[Line],
    marks: &[(f64, f64)],
    y_desc: &str,
) -> Result<(), String> {
    let top = marks.iter().map(|m| m.1).fold(max_y(lines), f64::max);
    let unit = Unit::for_ns(top);
    let end = marks.iter().map(|m| m.0).fold(max_x(lines), f64::max);
    let x_end = end.max(1.0);
    let y_top = (top / unit.ns * 1.08).max(1.0);
    let mut chart = chart_on(area, 70)
        .build_cartesian_2d(0.0..x_end, 0.0..y_top)
        .map_err(de)?;
    chart
        .configure_mesh()
        .x_desc("time (s)")
        .y_desc(y_desc)
        .x_label_formatter(&|x| fmt_num(*x))
        .y_label_formatter(&|y| fmt_num(*y))
        .label_style((FONT, 13))
        .draw()
        .map_err(de)?;
    let single = lines.len() == 1;
    let scaled = lines.iter().map(|l| {
        let pts = l.points.iter().map(|&(x, y)| (x, y / unit.ns)).collect();
        let label = match (single, l.label.is_empty()) {
            (true, true) if !marks.is_empty() => "per interval".to_string(),
            _ => l.label.clone(),
        };
        (label, pts)
    });
    draw_lines(&mut chart, scaled)?;
    if !marks.is_empty() {
        let red = RGBColor(214, 39, 40);
        let pts = marks.iter().map(|&(x, y)| (x, y / unit.ns));
        chart
            .draw_series(pts.map(|p| Circle::new(p, 4, red.stroke_width(2))))
            .map_err(de)?
            .label("largest events")
            .legend(move |(x, y)| Circle::new((x + 10, y), 4, red.stroke_width(2)));
    }
    if has_legend(lines) || !marks.is_empty() {
        draw_legend(&mut chart, SeriesLabelPosition::UpperRight)?;
    }
    Ok(())
}

/// A chart with room for axis labels (`y_label` px for the y tick labels and title).
fn chart_on<'a, 'b, DB: DrawingBackend>(
    area: &'a Area<DB>,
    y_label: u32,
) -> ChartBuilder<'a, 'b, DB> {
    let mut b = ChartBuilder::on(area);
    // The wider right margin leaves room for the last x tick label, centred on the edge.
    b.margin(12)
        .margin_right(40)
        .x_label_area_size(42)
        .y_label_area_size(y_label);
    b
}

// ---------------------------------------------------------------------------------------
// Font

/// Registers a TrueType font with plotters once per process; plotters draws no text,
/// SVG included, without one.
fn ensure_font() -> Result<(), PlotError> {
    static FONT_READY: OnceLock<Result<(), String>> = OnceLock::new();
    FONT_READY
        .get_or_init(|| register_font(std::env::var_os("JITTERSCOPE_FONT")))
        .clone()
        .map_err(PlotError::Font)
}

const FONT_FIX: &str = "unset it to use the built-in font";

/// The font's bytes: the file `JITTERSCOPE_FONT` names when it is set (`env`), else
/// DejaVu Sans, built into the binary (the `dejavu` crate ships it): the same text, so the
/// same plots, on every host, one with no font installed (a static binary, an image FROM
/// scratch) included. Nothing else is looked up: no system path, no fontconfig.
pub fn font_bytes(
    env: Option<std::ffi::OsString>,
) -> Result<std::borrow::Cow<'static, [u8]>, String> {
    let Some(path) = env.map(PathBuf::from) else {
        return Ok(dejavu::sans::regular().into());
    };
    let bytes = std::fs::read(&path)
        .map_err(|e| format!("JITTERSCOPE_FONT={}: {e}; {FONT_FIX}", path.display()))?;
    Ok(bytes.into())
}

fn register_font(env: Option<std::ffi::OsString>) -> Result<(), String> {
    let named = env.clone();
    let bytes = font_bytes(env)?;
    // The bytes live for the rest of the process, as plotters needs.
    let bytes: &'static [u8] = match bytes {
        std::borrow::Cow::Borrowed(b) => b,
        std::borrow::Cow::Owned(v) => Box::leak(v.into_boxed_slice()),
    };
    plotters::style::register_font(FONT, FontStyle::Normal, bytes).map_err(|_| match named {
        Some(path) => format!(
            "JITTERSCOPE_FONT={} is not a TrueType font; {FONT_FIX}",
            PathBuf::from(path).display()
        ),
        None => "the built-in font does not load".into(),
    })
}

// ---------------------------------------------------------------------------------------
// Files

/// The file formats a plot renders to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Svg,
    Png,
}

/// Renders every plot into `dir` (created if missing) as `NAME.svg` or `NAME.png`, each
/// written atomically; returns the paths written.
pub fn write_all(plots: &[Plot], dir: &Path, format: Format) -> anyhow::Result<Vec<PathBuf>> {
    if !plots.is_empty() {
        // Before creating anything: a missing font fails the command cleanly.
        ensure_font()?;
    }
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut out = Vec::with_capacity(plots.len());
    for p in plots {
        let (bytes, ext) = match format {
            Format::Svg => (p.svg()?.into_bytes(), "svg"),
            Format::Png => (p.png()?, "png"),
        };
        let path = dir.join(format!("{}.{ext}", p.name));
        crate::report::result::write_atomic(&path, &bytes)
            .with_context(|| format!("cannot write {}", path.display()))?;
        out.push(path);
    }
    Ok(out)
}

/// A round tick step and count (at most about 6 ticks) whose top covers `top`.
pub(crate) fn nice_ticks(top: f64) -> (f64, usize) {
    if top <= 0.0 || !top.is_finite() {
        return (1.0, 1);
    }
    let raw = top / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    (step, (top / step).ceil().max(1.0) as usize)
}

/// `s` as text in SVG (or any XML), in an element or an attribute: the hand-drawn
/// plots' labels hold titles and step names.
pub(crate) fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A tick value without trailing zeros.
pub(crate) fn trim_float(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::heatmap::{heat_labels, heat_paths};
    use super::*;

    /// Issue 35: a heat map's cells are a path per colour, each row's runs of one colour
    /// one stroke, each placed from the end of the last.
    #[test]
    fn issue35_heat_cells_are_a_path_per_colour_with_runs_merged() {
        let (a, b) = (RGBColor(1, 2, 3), RGBColor(4, 5, 6));
        let cells = [a, a, b, b, b, b, a, b, a];
        let svg = heat_paths(3, 10, (100, 50), cells.into_iter());
        assert_eq!(svg.matches("<path").count(), 2, "{svg}");
        assert!(
            svg.contains("#010203\" d=\"M0 0m0 0h2m-2 2h1m1 0h1\""),
            "{svg}"
        );
        assert!(
            svg.contains("#040506\" d=\"M0 0m2 0h1m-3 1h3m-2 1h1\""),
            "{svg}"
        );
        assert!(svg.contains("translate(100 55) scale(10 10)"), "{svg}");
    }

    /// Issue 35: a labelled heat map's values are bare texts at their cells' centres, in
    /// a group per ink that carries the font, so a text is its place and its digits.
    #[test]
    fn issue35_heat_labels_are_short_texts_grouped_by_ink() {
        let cells = [None, Some(150.4), Some(209.6), None];
        let svg = heat_labels(2, 40, (100, 50), &cells, |v| v > 200.0);
        let groups: Vec<&str> = svg.split("<g ").skip(1).collect();
        assert_eq!(groups.len(), 2, "{svg}");
        let head = "transform=\"translate(100 50)\" fill=\"#000000\" font-family=\"sans-serif\" \
                    font-size=\"10.322580645161292\" text-anchor=\"middle\">";
        assert!(groups[0].starts_with(head), "{svg}");
        assert!(
            groups[0].contains("\n<text x=\"60\" y=\"20\" dy=\"0.5ex\">150</text>\n</g>"),
            "{svg}"
        );
        assert!(groups[1].contains("fill=\"#FFFFFF\""), "{svg}");
        assert!(
            groups[1].contains("\n<text x=\"20\" y=\"60\" dy=\"0.5ex\">210</text>\n</g>"),
            "{svg}"
        );
        assert_eq!(
            svg.matches("<text").count(),
            2,
            "unmeasured cells have none: {svg}"
        );
    }

    #[test]
    fn percentile_labels_read_as_percentiles() {
        let labels: Vec<String> = (0..5).map(percentile_label).collect();
        assert_eq!(labels, ["0 %", "90 %", "99 %", "99.9 %", "99.99 %"]);
    }

    #[test]
    fn units_follow_magnitude() {
        assert_eq!(Unit::for_ns(9_999.0).name, "ns");
        assert_eq!(Unit::for_ns(10_000.0).name, "µs");
        assert_eq!(Unit::for_ns(5e7).name, "ms");
    }

    fn percentile_figure(trusted: bool) -> Figure {
        let q = |q: f64, x: f64, v: u64| figure::Quantile {
            q,
            x,
            value_ns: v,
            at_or_below: 0,
        };
        let dist = figure::DistId {
            probe: "pingpong",
            key: "futex:0-1".into(),
            metric: "one-way",
            trusted,
        };
        Figure {
            name: "pingpong-futex_0-1-one-way-percentiles".into(),
            source: String::new(),
            chart: figure::Chart::Percentiles {
                dist,
                lines: vec![figure::Line {
                    label: String::new(),
                    data: vec![q(0.0, 1.0, 500), q(1.0, 100.0, 900)],
                }],
            },
        }
    }

    #[test]
    fn an_unconfirmed_one_way_figure_says_so_in_its_title() {
        let plot = Plot::of(&percentile_figure(false));
        assert_eq!(
            plot.title,
            "pingpong futex:0-1 one-way: latency by percentile (ns) (unconfirmed by TSC check)"
        );
        assert_eq!(plot.name, "pingpong-futex_0-1-one-way-percentiles");
        let plot = Plot::of(&percentile_figure(true));
        assert!(
            plot.title.ends_with("latency by percentile (ns)"),
            "{}",
            plot.title
        );
    }

    #[test]
    fn the_curve_is_drawn_on_log10_of_the_axis() {
        let plot = Plot::of(&percentile_figure(true));
        let Chart::Percentiles { lines, y_desc, .. } = &plot.chart else {
            panic!("a percentile chart");
        };
        assert_eq!(lines[0].points, [(0.0, 500.0), (2.0, 900.0)]);
        assert_eq!(y_desc, "one-way (ns)");
    }
}
