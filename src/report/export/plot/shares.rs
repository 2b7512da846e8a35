//! The cause-shares bar: a segment per cause as wide as its share, coloured by its kind,
//! with a legend in columns below.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::{Area, FONT, de};
use crate::report::result::figure;
use crate::stats::causes::CauseKind;

/// The bar's layout in pixels: the title's band (what `titled` takes at 17 px), the bar
/// below it, then the legend in columns of rows.
pub(super) const SHARES_TITLE: u32 = 30;
pub(super) const BAR_TOP: u32 = 8;
pub(super) const BAR_HEIGHT: u32 = 34;
pub(super) const LEGEND_ROW: u32 = 22;
pub(super) const LEGEND_COLUMNS: usize = 2;
const SIDE: i32 = 16;

/// A segment's colour: a hue per kind of cause (IRQs blue, softirqs green, vectors
/// orange, NMIs red, tasks purple, throttling brown), a lighter or darker shade for each
/// further cause of that kind; the unaccounted time mid grey, the unrecorded switches' dark grey, the grouped "other" light grey.
fn share_colour(kind: Option<CauseKind>, nth_of_kind: usize) -> RGBColor {
    const SHADES: usize = 3;
    let shades: [(u8, u8, u8); SHADES] = match kind {
        Some(CauseKind::Irq) => [(31, 119, 180), (107, 174, 214), (8, 69, 148)],
        Some(CauseKind::Softirq) => [(44, 160, 44), (116, 196, 118), (0, 109, 44)],
        Some(CauseKind::Vector) => [(255, 127, 14), (253, 174, 107), (166, 54, 3)],
        Some(CauseKind::Nmi) => [(214, 39, 40), (251, 106, 74), (153, 0, 13)],
        Some(CauseKind::Task) => [(148, 103, 189), (188, 189, 220), (84, 39, 143)],
        // Brown: a setting took the CPU, not something that ran.
        Some(CauseKind::Throttling) => [(140, 86, 75), (196, 156, 148), (94, 52, 44)],
        Some(CauseKind::Unaccounted) => [(120, 120, 120); SHADES],
        // Dark grey: time the trace could not place, beside what no event covered.
        Some(CauseKind::Unrecorded) => [(80, 80, 80); SHADES],
        None => [(205, 205, 205); SHADES],
    };
    let (r, g, b) = shades[nth_of_kind % SHADES];
    RGBColor(r, g, b)
}

/// Text that reads on `fill`: white on dark colours, black on light ones.
fn ink_on(fill: RGBColor) -> &'static RGBColor {
    let RGBColor(r, g, b) = fill;
    let luma = 0.299 * f64::from(r) + 0.587 * f64::from(g) + 0.114 * f64::from(b);
    if luma < 140.0 { &WHITE } else { &BLACK }
}

/// "12.3 %": the share as the legend and the segments say it.
fn share_words(pct: f64) -> String {
    format!("{pct:.1} %")
}

/// The bar: each segment as wide as its share of the whole (so the bar is full even when
/// the stored shares add up to 99.9), its share written inside when it fits; below, the
/// legend, two columns of a swatch, the share and the cause, the cause cut with "…" to
/// its column.
pub(super) fn draw_shares<DB: DrawingBackend>(
    area: &Area<DB>,
    segments: &[figure::CauseShare],
) -> Result<(), String> {
    let width = area.dim_in_pixel().0 as i32;
    let (left, right) = (SIDE, width - SIDE);
    let total: f64 = segments.iter().map(|s| s.share_pct).sum();
    let colours = segment_colours(segments);
    let (top, bottom) = (BAR_TOP as i32, (BAR_TOP + BAR_HEIGHT) as i32);
    let label_style = |ink: &'static RGBColor| {
        TextStyle::from((FONT, 14).into_font())
            .color(ink)
            .pos(Pos::new(HPos::Center, VPos::Center))
    };
    if total > 0.0 {
        let mut acc = 0.0;
        for (s, &fill) in segments.iter().zip(&colours) {
            let x0 = left + ((right - left) as f64 * acc / total).round() as i32;
            acc += s.share_pct;
            let x1 = left + ((right - left) as f64 * acc / total).round() as i32;
            if x1 <= x0 {
                continue;
            }
            area.draw(&Rectangle::new([(x0, top), (x1, bottom)], fill.filled()))
                .map_err(de)?;
            // A white rule between segments: two shades of one kind stay apart.
            area.draw(&Rectangle::new(
                [(x0, top), (x1, bottom)],
                WHITE.stroke_width(1),
            ))
            .map_err(de)?;
            let text = share_words(s.share_pct);
            let style = label_style(ink_on(fill));
            let (tw, _) = area.estimate_text_size(&text, &style).map_err(de)?;
            if tw as i32 + 8 <= x1 - x0 {
                let at = ((x0 + x1) / 2, (top + bottom) / 2);
                area.draw(&Text::new(text, at, style)).map_err(de)?;
            }
        }
    }
    let column = (right - left) / LEGEND_COLUMNS as i32;
    let swatch = 14;
    let legend = TextStyle::from((FONT, 15).into_font())
        .color(&BLACK)
        .pos(Pos::new(HPos::Left, VPos::Center));
    for (i, (s, &fill)) in segments.iter().zip(&colours).enumerate() {
        let (row, col) = ((i / LEGEND_COLUMNS) as i32, (i % LEGEND_COLUMNS) as i32);
        let x = left + col * column;
        let y = bottom + 16 + row * LEGEND_ROW as i32 + LEGEND_ROW as i32 / 2;
        let half = swatch / 2;
        area.draw(&Rectangle::new(
            [(x, y - half), (x + swatch, y + half)],
            fill.filled(),
        ))
        .map_err(de)?;
        let room = (column - swatch - 6 - 10).max(0) as u32;
        let text = fit_text(
            area,
            &format!("{}  {}", share_words(s.share_pct), s.label),
            &legend,
            room,
        )?;
        area.draw(&Text::new(text, (x + swatch + 6, y), legend.clone()))
            .map_err(de)?;
    }
    Ok(())
}

/// Each segment's colour: its kind's hue, shaded by its place among the causes of that
/// kind.
fn segment_colours(segments: &[figure::CauseShare]) -> Vec<RGBColor> {
    let mut seen: Vec<Option<CauseKind>> = Vec::new();
    (segments.iter())
        .map(|s| {
            let nth = seen.iter().filter(|k| **k == s.kind).count();
            seen.push(s.kind);
            share_colour(s.kind, nth)
        })
        .collect()
}

/// `text`, or as much of it as fits in `room` pixels followed by "…".
fn fit_text<DB: DrawingBackend>(
    area: &Area<DB>,
    text: &str,
    style: &TextStyle<'_>,
    room: u32,
) -> Result<String, String> {
    let fits = |t: &str| -> Result<bool, String> {
        Ok(area.estimate_text_size(t, style).map_err(de)?.0 <= room)
    };
    if fits(text)? {
        return Ok(text.to_string());
    }
    let chars: Vec<char> = text.chars().collect();
    // The longest prefix that fits with the ellipsis, by bisection.
    let (mut lo, mut hi) = (0, chars.len());
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        let candidate: String = chars[..mid].iter().chain(['…'].iter()).collect();
        if fits(&candidate)? {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    Ok(chars[..lo].iter().chain(['…'].iter()).collect())
}
