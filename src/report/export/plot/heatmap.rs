//! The c2c heat map: the CPU × CPU matrix drawn in pixels, each cell's value written in
//! it while the cells are large enough. In SVG the cells are a path per colour and the
//! values texts in two groups, written here rather than by plotters, which spends an
//! element of ninety bytes or more on each (issue 35).

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::{Area, FONT, Heatmap, de};

/// Pixels per heat-map cell: room for a label up to 96 CPUs (24 px), then smaller and
/// unlabelled.
pub(super) fn cell_px(n: usize) -> u32 {
    match n {
        0..=8 => 64,
        9..=16 => 44,
        17..=64 => 36,
        n => (2304 / n as u32).max(4),
    }
}

/// Where the matrix's top-left corner sits in the area below the title, in pixels:
/// centred, with room for the row labels on its left.
fn heat_origin<DB: DrawingBackend>(area: &Area<DB>, side: i32) -> (i32, i32) {
    let width = area.dim_in_pixel().0 as i32;
    (((width - side) / 2).max(80), 10)
}

/// The matrix drawn in pixels (a chart's automatic ticks would fall between CPUs). When
/// `svg_cells` is given, the cells and their values are left to it as SVG written here
/// (`heat_paths`, `heat_labels`): an element of plotters' per cell took 3.3 MB at 192
/// CPUs and 2.2 MB at 96, where each cell is labelled (issue 35).
pub(super) fn draw_heatmap<DB: DrawingBackend>(
    area: &Area<DB>,
    m: &Heatmap,
    svg_cells: Option<&mut Option<String>>,
) -> Result<(), String> {
    let (n, px) = (m.cpus.len(), cell_px(m.cpus.len()) as i32);
    let (ox, oy) = heat_origin(area, n as i32 * px);
    let values = m.cells.iter().flatten().copied();
    let (lo, hi) = values.fold((f64::INFINITY, 0.0f64), |(a, b), v| (a.min(v), b.max(v)));
    let t = |v: f64| if hi > lo { (v - lo) / (hi - lo) } else { 0.0 };
    let fill = |v: &Option<f64>| v.map_or(UNMEASURED, |v| heat_colour(t(v)));
    // White on the darker half of the ramp.
    let white = |v: f64| t(v) > 0.55;
    if let Some(out) = svg_cells {
        let (bx, by) = area.get_base_pixel();
        let origin = (bx + ox, by + oy);
        let mut svg = heat_paths(n, px, origin, m.cells.iter().map(fill));
        if px >= LABELLED_PX {
            svg.push_str(&heat_labels(n, px, origin, &m.cells, white));
        }
        *out = Some(svg);
        return draw_cpu_labels(area, m, px);
    }
    for (k, v) in m.cells.iter().enumerate() {
        let (x, y) = (ox + (k % n) as i32 * px, oy + (k / n) as i32 * px);
        let cell = Rectangle::new([(x, y), (x + px, y + px)], fill(v).filled());
        area.draw(&cell).map_err(de)?;
        match v {
            // Whole ns, as `heat_labels` writes them.
            Some(v) if px >= LABELLED_PX => {
                let ink = if white(*v) { &WHITE } else { &BLACK };
                let text = format!("{v:.0}");
                let at = (x + px / 2, y + px / 2);
                area.draw(&centred(&text, at, label_size(px), ink))
                    .map_err(de)?;
            }
            _ => {}
        }
    }
    draw_cpu_labels(area, m, px)
}

/// The size of a cell's value, in pixels: a third of the cell.
fn label_size(px: i32) -> f64 {
    f64::from(px) * 0.32
}

/// CPU numbers along the top-left matrix's rows and columns, and the axes' names.
fn draw_cpu_labels<DB: DrawingBackend>(
    area: &Area<DB>,
    m: &Heatmap,
    px: i32,
) -> Result<(), String> {
    let side = m.cpus.len() as i32 * px;
    let (ox, oy) = heat_origin(area, side);
    // Every CPU when there is room, else every k-th.
    let every = (14 / px.max(1) + 1) as usize;
    for (i, cpu) in m.cpus.iter().enumerate().step_by(every) {
        let mid = i as i32 * px + px / 2;
        let text = cpu.to_string();
        area.draw(&centred(&text, (ox + mid, oy + side + 12), 13.0, &BLACK))
            .map_err(de)?;
        area.draw(&centred(&text, (ox - 16, oy + mid), 13.0, &BLACK))
            .map_err(de)?;
    }
    let x_desc = centred("CPU", (ox + side / 2, oy + side + 34), 14.0, &BLACK);
    area.draw(&x_desc).map_err(de)?;
    let y_desc = centred("CPU", (ox - 52, oy + side / 2), 14.0, &BLACK);
    area.draw(&y_desc).map_err(de)
}

fn centred<'a>(
    text: &'a str,
    at: (i32, i32),
    size: f64,
    ink: &'static RGBColor,
) -> Text<'a, (i32, i32), &'a str> {
    let centre = Pos::new(HPos::Center, VPos::Center);
    let style = TextStyle::from((FONT, size).into_font())
        .color(ink)
        .pos(centre);
    Text::new(text, at, style)
}

/// Cells of at least this many pixels carry their value.
const LABELLED_PX: i32 = 24;
/// A pair not measured.
const UNMEASURED: RGBColor = RGBColor(235, 235, 235);
/// Colour steps between the fastest and the slowest cell: finer than the eye tells
/// apart on this ramp, and few enough that neighbouring cells share one (a run).
const HEAT_LEVELS: f64 = 63.0;

/// Per colour, its path's data and where its pen is (column, row).
type Pens = std::collections::BTreeMap<(u8, u8, u8), (String, (usize, usize))>;

/// An `n` × `n` matrix of `px`-pixel cells at `origin`, row by row, as one `<path>` per
/// colour: each row's runs of one colour one horizontal stroke on a grid of one unit a
/// cell that a transform scales to pixels (as `time_heatmap` draws the main job's map),
/// each run placed relative to the end of the last. A few bytes a run, where a
/// rectangle element takes ninety.
pub(super) fn heat_paths(
    n: usize,
    px: i32,
    (x0, y0): (i32, i32),
    fills: impl Iterator<Item = RGBColor>,
) -> String {
    use std::fmt::Write as _;
    let fills: Vec<RGBColor> = fills.collect();
    let mut paths: Pens = Default::default();
    for (r, row) in fills.chunks(n.max(1)).enumerate() {
        let mut start = 0;
        while start < row.len() {
            let fill = row[start];
            let end = (start..row.len())
                .find(|&c| row[c] != fill)
                .unwrap_or(row.len());
            let RGBColor(red, green, blue) = fill;
            let (d, pen) = paths.entry((red, green, blue)).or_default();
            let (dx, dy) = (start as i64 - pen.0 as i64, r as i64 - pen.1 as i64);
            let _ = write!(d, "m{dx} {dy}h{}", end - start);
            *pen = (end, r);
            start = end;
        }
    }
    let mut svg = format!(
        "<g transform=\"translate({x0} {}) scale({px} {px})\" stroke-width=\"1\" \
         fill=\"none\" shape-rendering=\"crispEdges\">\n",
        f64::from(y0) + f64::from(px) / 2.0
    );
    for ((r, g, b), (d, _)) in paths {
        let _ = writeln!(
            svg,
            "<path stroke=\"#{r:02x}{g:02x}{b:02x}\" d=\"M0 0{d}\"/>"
        );
    }
    svg.push_str("</g>\n");
    svg
}

/// Each measured cell's value (whole ns: sub-ns digits are below what the probe
/// resolves) centred in its cell of an `n` × `n` matrix of `px`-pixel cells at
/// `origin`, in two groups, black and (where `white`) white ink, that carry what the
/// texts share, so that a text is its place and its digits.
pub(super) fn heat_labels(
    n: usize,
    px: i32,
    (x0, y0): (i32, i32),
    cells: &[Option<f64>],
    white: impl Fn(f64) -> bool,
) -> String {
    use std::fmt::Write as _;
    let mut inks = [String::new(), String::new()];
    for (k, v) in cells.iter().enumerate() {
        let Some(v) = v else { continue };
        let (x, y) = ((k % n) as i32 * px + px / 2, (k / n) as i32 * px + px / 2);
        let ink = &mut inks[usize::from(white(*v))];
        let _ = writeln!(ink, "<text x=\"{x}\" y=\"{y}\" dy=\"0.5ex\">{v:.0}</text>");
    }
    let mut svg = String::new();
    for (colour, texts) in ["#000000", "#FFFFFF"].iter().zip(inks) {
        let _ = write!(
            svg,
            "<g transform=\"translate({x0} {y0})\" fill=\"{colour}\" \
             font-family=\"{FONT}\" font-size=\"{}\" text-anchor=\"middle\">\n{texts}</g>\n",
            label_size(px) / SVG_FONT_SCALE
        );
    }
    svg
}

/// What plotters' SVG backend divides a text's size by to write its `font-size`; the
/// labels written here by hand do the same, so that they read as plotters drew them.
const SVG_FONT_SCALE: f64 = 1.24;

/// The colour of a cell whose value lies at `t` (0 fastest … 1 slowest) of the range, in
/// [`HEAT_LEVELS`] steps.
fn heat_colour(t: f64) -> RGBColor {
    let t = (t * HEAT_LEVELS).round() / HEAT_LEVELS;
    let mix = |a: u8, b: u8| (f64::from(a) + (f64::from(b) - f64::from(a)) * t).round() as u8;
    RGBColor(mix(255, 180), mix(245, 30), mix(200, 30))
}
