//! `tune`'s staircase as an SVG drawn by hand (no plotting backend, unlike `plot`): the
//! median p99 and max after each kept step, on a log axis of whole decades.

use super::plot::{trim_float, xml_escape};

/// `tune`'s staircase as a step chart: the median p99 and the median per-block max after
/// each kept step (the first stair is the baseline), on a log axis of whole decades, so
/// that a p99 of tens of µs and a max of tens of ms both read (issue 38: a linear axis
/// laid p99 flat along zero). Written by hand (no plotting backend): two polylines, the
/// axes and the labels.
pub fn staircase_svg(stairs: &[crate::system::tune::record::Stair]) -> String {
    const W: f64 = 720.0;
    const H: f64 = 360.0;
    const LEFT: f64 = 70.0;
    const RIGHT: f64 = 20.0;
    const TOP: f64 = 30.0;
    const BOTTOM: f64 = 90.0;
    let n = stairs.len().max(1);
    // A log axis of whole decades: p99 (tens of µs) and max (up to tens of ms) both
    // readable on one chart, neither laid flat along the axis by the other.
    let (lo, hi) = decades(
        stairs
            .iter()
            .flat_map(|s| [s.p99_ns.median, s.max_ns.median]),
    );
    let (pw, ph) = (W - LEFT - RIGHT, H - TOP - BOTTOM);
    let x = |i: usize| LEFT + pw * i as f64 / n as f64;
    let y = |us: f64| {
        let d = us.max(10f64.powi(lo)).log10();
        TOP + ph * (1.0 - (d - lo as f64) / (hi - lo) as f64)
    };
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{H}\" \
         viewBox=\"0 0 {W} {H}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"{W}\" height=\"{H}\" fill=\"white\"/>\n"
    );
    for d in lo..=hi {
        let v = 10f64.powi(d);
        svg.push_str(&format!(
            "<line x1=\"{LEFT}\" x2=\"{}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#ddd\"/>\
             <text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>\n",
            W - RIGHT,
            LEFT - 6.0,
            y(v) + 4.0,
            us_words(v),
            y = y(v)
        ));
    }
    svg.push_str(&format!(
        "<text x=\"16\" y=\"{:.1}\" transform=\"rotate(-90 16 {:.1})\" \
         text-anchor=\"middle\">median over blocks (log scale)</text>\n",
        TOP + ph / 2.0,
        TOP + ph / 2.0
    ));
    for (i, s) in stairs.iter().enumerate() {
        let cx = (x(i) + x(i + 1)) / 2.0;
        let ly = TOP + ph + 14.0;
        svg.push_str(&format!(
            "<text x=\"{cx:.1}\" y=\"{ly:.1}\" text-anchor=\"end\" \
             transform=\"rotate(-30 {cx:.1} {ly:.1})\">{}</text>\n",
            xml_escape(&s.after)
        ));
    }
    type Of = fn(&crate::system::tune::record::Stair) -> f64;
    let series: [(&str, &str, &str, Of); 2] = [
        ("p99", "#1f77b4", "", |s| s.p99_ns.median),
        ("max", "#d62728", " stroke-dasharray=\"6 4\"", |s| {
            s.max_ns.median
        }),
    ];
    for (k, (name, color, dash, of)) in series.iter().enumerate() {
        let mut pts = Vec::new();
        for (i, s) in stairs.iter().enumerate() {
            let v = y(of(s) / 1e3);
            pts.push(format!("{:.1},{v:.1}", x(i)));
            pts.push(format!("{:.1},{v:.1}", x(i + 1)));
        }
        svg.push_str(&format!(
            "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"2\"{dash} points=\"{}\"/>\n",
            pts.join(" ")
        ));
        let lx = LEFT + 10.0 + 150.0 * k as f64;
        svg.push_str(&format!(
            "<line x1=\"{lx}\" x2=\"{}\" y1=\"14\" y2=\"14\" stroke=\"{color}\" \
             stroke-width=\"2\"{dash}/><text x=\"{}\" y=\"18\">median {name}</text>\n",
            lx + 24.0,
            lx + 30.0
        ));
    }
    svg.push_str(&format!(
        "<line x1=\"{LEFT}\" x2=\"{LEFT}\" y1=\"{TOP}\" y2=\"{b}\" stroke=\"#333\"/>\
         <line x1=\"{LEFT}\" x2=\"{}\" y1=\"{b}\" y2=\"{b}\" stroke=\"#333\"/>\n</svg>\n",
        W - RIGHT,
        b = TOP + ph
    ));
    svg
}

/// The whole decades of µs (as powers of ten) that hold every positive value of `ns`:
/// at least one decade, 1 µs to 10 µs when none is positive.
fn decades(ns: impl Iterator<Item = f64>) -> (i32, i32) {
    let us: Vec<f64> = ns
        .map(|v| v / 1e3)
        .filter(|v| *v > 0.0 && v.is_finite())
        .collect();
    let lo = us.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = us.iter().copied().fold(0.0, f64::max);
    if us.is_empty() {
        return (0, 1);
    }
    let (lo, hi) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
    (lo, hi.max(lo + 1))
}

/// A decade of µs in words with its unit: 100 µs, 1 ms, 10 s.
fn us_words(us: f64) -> String {
    match us {
        v if v >= 1e6 => format!("{} s", trim_float(v / 1e6)),
        v if v >= 1e3 => format!("{} ms", trim_float(v / 1e3)),
        v => format!("{} µs", trim_float(v)),
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::export::plot::nice_ticks;
    use crate::system::tune::record::{Figure, Stair};

    fn stair(after: &str, p99: f64, max: f64) -> Stair {
        let f = |m: f64| Figure {
            median: m,
            low: m,
            high: m,
        };
        Stair {
            after: after.into(),
            blocks: 5,
            confidence: 0.94,
            p50_ns: f(1e3),
            p99_ns: f(p99),
            p999_ns: f(p99),
            max_ns: f(max),
            lost_ns_per_s: f(1e3),
        }
    }

    #[test]
    fn the_staircase_chart_has_a_stair_per_kept_step_and_units() {
        let svg = staircase_svg(&[stair("baseline", 20e3, 900e3), stair("a<b", 10e3, 40e3)]);
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        assert_eq!(svg.matches("<polyline").count(), 2);
        // Two stairs: four points a series.
        let pts = svg
            .split("points=\"")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap();
        assert_eq!(pts.split(' ').count(), 4);
        assert!(svg.contains(">10 µs<") && svg.contains(">1 ms<") && svg.contains("a&lt;b"));
        assert_eq!(nice_ticks(900.0), (200.0, 5));
    }

    /// The y of each series' first stair, from its polyline's first point.
    fn first_ys(svg: &str) -> Vec<f64> {
        (svg.split("points=\"").skip(1))
            .map(|p| p.split([',', ' ']).nth(1).unwrap().parse().unwrap())
            .collect()
    }

    /// Issue 38: p99 (tens of µs) and max (tens of ms) on one chart. On the linear axis
    /// the p99 line lay within a pixel of zero; on the log axis each series stands a
    /// tenth of the plot's height at least away from the axis and from the other.
    #[test]
    fn issue38_the_staircase_keeps_p99_off_the_axis_beside_a_max_of_ms() {
        let svg = staircase_svg(&[stair("baseline", 57e3, 25e6), stair("step", 48e3, 2e6)]);
        let (bottom, height) = (360.0 - 90.0, 360.0 - 90.0 - 30.0);
        let ys = first_ys(&svg);
        let (p99, max) = (ys[0], ys[1]);
        assert!(
            bottom - p99 > height / 10.0,
            "p99 at y {p99}, the axis at {bottom}"
        );
        assert!(p99 - max > height / 10.0, "p99 at y {p99}, max at {max}");
        assert!(max >= 30.0, "max at y {max} is inside the plot");
        assert_eq!(decades([57e3, 25e6].into_iter()), (1, 5));
        assert_eq!(decades(std::iter::empty()), (0, 1));
    }
}
