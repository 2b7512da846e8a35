//! `report --format gnuplot`: data files plus a script, `plots.gp`, that draws the same
//! plots as `--format svg` with gnuplot: `cd DIR && gnuplot plots.gp` writes one SVG per
//! plot next to its data (`gnuplot -e "fmt='png'" plots.gp` writes PNGs with pngcairo).
//!
//! The plots and their names are `report::result::figure`'s, as `--format svg` draws them. Per distribution with samples:
//! `…-percentiles.dat`, HdrHistogram's latency by percentile (value, percentile, count at
//! or below, 1/(1−p); drawn on a log x axis labelled 0 %, 90 %, 99 %, …; the last row is
//! the maximum, placed at 1/(1−p) = count), and `…-histogram.dat`, counts in log-spaced
//! bins, fifty per decade (both axes log). Per noise or timer entry: `…-series.dat`, the
//! largest gap of each interval over the run, with the entry's largest events beside it
//! in `…-series-largest.dat`. Per c2c mode: `c2c-heatmap.dat`, the CPU × CPU matrix of
//! median one-way latency (NaN where no pair was measured). Every data file is whitespace
//! separated and opens with a `#` line naming its columns with their units; latencies are
//! in µs with ns resolution, the heat map's in ns. With several result files, names are
//! prefixed by the file's stem, numbered when two files share one.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::report::export::Loaded;
use crate::report::export::describe;
use crate::report::result::figure::{Bin, Chart, Figure, Heatmap, Quantile, SeriesData};
use crate::report::result::write_atomic;

/// Writes the data files and `plots.gp` into `dir` (created if missing); returns the
/// files written.
pub fn write(results: &[Loaded], dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let plots = all_plots(results)?;
    let mut written = Vec::new();
    for p in &plots {
        written.push(put(dir, &format!("{}.dat", p.name), &p.data)?);
        if let Some(marks) = &p.marks {
            written.push(put(dir, &format!("{}-largest.dat", p.name), marks)?);
        }
    }
    written.push(put(dir, "plots.gp", &script(&plots))?);
    Ok(written)
}

fn put(dir: &Path, name: &str, text: &str) -> anyhow::Result<PathBuf> {
    let path = dir.join(name);
    write_atomic(&path, text.as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
}

/// One plot: its data file's contents and how to draw it.
struct Plot {
    /// File-safe and unique: the data is `NAME.dat`, the picture `NAME.svg`.
    name: String,
    title: String,
    data: String,
    /// A series' largest events, written to `NAME-largest.dat`.
    marks: Option<String>,
    kind: Kind,
}

/// What the script needs beyond the data: axis ranges are set from the data so that
/// gnuplot never has to guess one (it warns on an empty range).
enum Kind {
    Percentiles {
        x_max: f64,
        y_max: f64,
    },
    Histogram {
        x_min: f64,
        x_max: f64,
        count_max: u64,
    },
    Series {
        interval_s: f64,
        x_max: f64,
        y_max: f64,
        marked: bool,
    },
    Heatmap {
        cpus: Vec<usize>,
        max_ns: f64,
    },
}

fn all_plots(results: &[Loaded]) -> anyhow::Result<Vec<Plot>> {
    let figures = describe::result_figures(results).map_err(anyhow::Error::msg)?;
    Ok(figures.iter().filter_map(plot_of).collect())
}

/// A figure's data and script; none for what gnuplot cannot draw (an empty series, a
/// heat map without a measured pair). Result files give one line per figure.
fn plot_of(f: &Figure) -> Option<Plot> {
    // Titles name the file only when there are several.
    let label = match f.source.is_empty() {
        true => String::new(),
        false => format!("{}: ", f.source),
    };
    let name = f.name.clone();
    match &f.chart {
        Chart::Percentiles { dist, lines } => {
            let what = format!("{label}{} {} {}", dist.probe, dist.key, dist.metric);
            let title = format!("{what}: latency by percentile (µs){}", dist.caveat());
            Some(percentile_plot(name, title, &lines.first()?.data))
        }
        Chart::Histogram { dist, lines } => {
            let what = format!("{label}{} {} {}", dist.probe, dist.key, dist.metric);
            let title = format!("{what}: histogram (µs){}", dist.caveat());
            Some(histogram_plot(name, title, &lines.first()?.data))
        }
        Chart::Series { id, lines, largest } => {
            let what = format!("{label}{} cpu{}", id.probe, id.cpu);
            series_plot(name, &what, id.gap, &lines.first()?.data, largest)
        }
        Chart::Heatmap(m) => {
            let title = format!(
                "{label}c2c: median one-way latency by CPU pair (ns), mode {}",
                m.mode
            );
            heatmap(name, title, m)
        }
    }
}

// ---------------------------------------------------------------------------------------
// Distributions

/// The rows as HdrHistogram's percentile output lays them out; the last is the maximum.
fn percentile_plot(name: String, title: String, rows: &[Quantile]) -> Plot {
    let mut data = String::from(
        "# value_us percentile count_at_or_below 1/(1-percentile)\n\
         # latency by percentile (HdrHistogram's layout, percentile as a fraction); \
         the last row is the maximum, at 1/(1-percentile) = count\n",
    );
    for r in rows {
        let (v, q, below, x) = (us(r.value_ns), r.q, r.at_or_below, r.x);
        let _ = writeln!(data, "{v} {q:.12} {below} {x:.6}");
    }
    let last = rows.last();
    Plot {
        name,
        title,
        data,
        marks: None,
        kind: Kind::Percentiles {
            x_max: last.map_or(1.0, |r| r.x),
            y_max: last.map_or(0.0, |r| r.value_ns as f64 / 1e3),
        },
    }
}

fn histogram_plot(name: String, title: String, bins: &[Bin]) -> Plot {
    let mut data = String::from(
        "# lower_us upper_us count\n\
         # samples per bin, ten log-spaced bins per decade of latency\n",
    );
    for b in bins {
        let _ = writeln!(
            data,
            "{:.6} {:.6} {}",
            b.lo_ns / 1e3,
            b.hi_ns / 1e3,
            b.count
        );
    }
    let x_min = bins.first().map_or(1.0, |b| b.lo_ns);
    let x_max = bins.last().map_or(1.0, |b| b.hi_ns);
    Plot {
        name,
        title,
        data,
        marks: None,
        kind: Kind::Histogram {
            x_min: x_min / 1e3,
            x_max: x_max / 1e3,
            count_max: bins.iter().map(|b| b.count).max().unwrap_or(1),
        },
    }
}

/// ns as µs with every ns kept.
fn us(ns: u64) -> String {
    format!("{}.{:03}", ns / 1000, ns % 1000)
}

// ---------------------------------------------------------------------------------------
// Series and heat maps

fn series_plot(
    name: String,
    what: &str,
    gap: &str,
    s: &SeriesData,
    largest: &[(u64, u64)],
) -> Option<Plot> {
    if s.max_ns.is_empty() || s.interval_ns == 0 {
        return None;
    }
    let interval_s = s.interval_ns as f64 / 1e9;
    let mut data = String::from("# start_s max_us events total_us\n");
    let _ = writeln!(
        data,
        "# per interval of {interval_s} s: its start, the largest gap, how many, their sum"
    );
    let rows = s.max_ns.iter().zip(&s.events).zip(&s.total_ns);
    for (i, ((max, events), total)) in rows.enumerate() {
        let start = i as f64 * interval_s;
        let _ = writeln!(data, "{start:.6} {} {events} {}", us(*max), us(*total));
    }
    let top = (largest.iter().map(|e| e.1)).chain(s.max_ns.iter().copied());
    Some(Plot {
        name,
        title: format!("{what}: {gap} per {interval_s} s interval (µs)"),
        data,
        marks: marks(largest),
        kind: Kind::Series {
            interval_s,
            x_max: s.max_ns.len() as f64 * interval_s,
            y_max: top.max().unwrap_or(0) as f64 / 1e3,
            marked: !largest.is_empty(),
        },
    })
}

/// The entry's largest events, marked on its series.
fn marks(largest: &[(u64, u64)]) -> Option<String> {
    if largest.is_empty() {
        return None;
    }
    let mut out = String::from("# start_s duration_us\n# the largest events, largest first\n");
    for &(start, ns) in largest {
        let _ = writeln!(out, "{:.9} {}", start as f64 / 1e9, us(ns));
    }
    Some(out)
}

/// The matrix of one-way medians, NaN where no pair was measured; none when no pair was.
fn heatmap(name: String, title: String, m: &Heatmap) -> Option<Plot> {
    let n = m.cpus.len();
    let cells: Vec<Vec<f64>> = (0..n)
        .map(|i| {
            (0..n)
                .map(|j| m.cells[i * n + j].unwrap_or(f64::NAN))
                .collect()
        })
        .collect();
    let finite = cells.iter().flatten().copied().filter(|v| v.is_finite());
    let max_ns = finite.reduce(f64::max)?;
    Some(Plot {
        name,
        title,
        data: matrix_text(&m.cpus, &cells),
        marks: None,
        kind: Kind::Heatmap {
            cpus: m.cpus.clone(),
            max_ns,
        },
    })
}

fn matrix_text(cpus: &[usize], cells: &[Vec<f64>]) -> String {
    let names: Vec<String> = cpus.iter().map(|c| format!("cpu{c}")).collect();
    let columns: Vec<String> = names.iter().map(|n| format!("{n}_ns")).collect();
    let mut out = format!("# {}\n", columns.join(" "));
    let _ = writeln!(
        out,
        "# median one-way latency in ns: a column per CPU B, a row per CPU A ({}); \
         NaN: not measured",
        names.join(" ")
    );
    for row in cells {
        let row: Vec<String> = row.iter().map(|v| format!("{v:.1}")).collect();
        let _ = writeln!(out, "{}", row.join(" "));
    }
    out
}

// ---------------------------------------------------------------------------------------
// The script

const HEADER: &str = "\
# jitterscope: draws this directory's data files, one picture per plot next to its data.
# Run: cd DIR && gnuplot plots.gp                      (SVG)
#      cd DIR && gnuplot -e \"fmt='png'\" plots.gp      (PNG, with pngcairo)
if (!exists('fmt')) fmt = 'svg'
set encoding utf8
if (fmt eq 'png') {
    set terminal pngcairo size 960,600 noenhanced
} else {
    set terminal svg size 960,600 dynamic noenhanced
}
";

fn script(plots: &[Plot]) -> String {
    let mut out = String::from(HEADER);
    for p in plots {
        let _ = write!(
            out,
            "\n# {name}\nreset\nset output '{name}.'.fmt\nset title {title}\n\
             set grid\nset key off\n{body}",
            name = p.name,
            title = quoted(&p.title),
            body = commands(p),
        );
    }
    out.push_str("\nunset output\n");
    out
}

/// A gnuplot single-quoted string: no escapes but `''` for a quote.
fn quoted(s: &str) -> String {
    let clean: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    format!("'{}'", clean.replace('\'', "''"))
}

fn commands(p: &Plot) -> String {
    let data = format!("'{}.dat'", p.name);
    match &p.kind {
        Kind::Percentiles { x_max, y_max } => percentile_commands(&data, *x_max, *y_max),
        Kind::Histogram {
            x_min,
            x_max,
            count_max,
        } => format!(
            "set xlabel 'latency (µs)'\nset ylabel 'count'\nset logscale xy\n\
             set xrange [{x_min}:{x_max}]\nset yrange [0.5:{}]\nset style fill solid 0.6\n\
             plot {data} using (($1+$2)/2):3:($2-$1) with boxes\n",
            *count_max as f64 * 2.0,
        ),
        Kind::Series {
            interval_s,
            x_max,
            y_max,
            marked,
        } => series_commands(&p.name, *interval_s, *x_max, *y_max, *marked),
        Kind::Heatmap { cpus, max_ns } => heatmap_commands(&data, cpus, *max_ns),
    }
}

/// HdrHistogram's percentile plot: 1/(1−p) on a log axis, labelled as percentiles.
fn percentile_commands(data: &str, x_max: f64, y_max: f64) -> String {
    let decades = (x_max.log10().ceil() as usize).max(1);
    let tics: Vec<String> = (0..=decades)
        // Tic labels are formats: `%%` is a literal percent sign.
        .map(|k| {
            format!(
                "'{}' {}",
                tic_label(k).replace('%', "%%"),
                10f64.powi(k as i32)
            )
        })
        .collect();
    format!(
        "set xlabel 'percentile'\nset ylabel 'latency (µs)'\nset logscale x\n\
         set xrange [1:{}]\nset xtics ({})\nset yrange [0:{}]\n\
         plot {data} using 4:1 with lines lw 2\n",
        10f64.powi(decades as i32),
        tics.join(", "),
        top(y_max),
    )
}

/// 0%, 90%, 99%, 99.9%, …: the percentile at 1/(1−p) = 10^k.
fn tic_label(k: usize) -> String {
    match k {
        0 => "0%".into(),
        1 => "90%".into(),
        k => format!("99.{}%", "9".repeat(k - 2)).replace(".%", "%"),
    }
}

/// Each interval's largest gap as a bar across the interval; the largest events as points.
fn series_commands(name: &str, interval_s: f64, x_max: f64, y_max: f64, marked: bool) -> String {
    let marks = match marked {
        true => format!(", '{name}-largest.dat' using 1:2 with points pt 7 ps 0.8"),
        false => String::new(),
    };
    format!(
        "set xlabel 'time (s)'\nset ylabel 'largest gap (µs)'\n\
         set xrange [0:{x_max}]\nset yrange [0:{}]\nset style fill solid 0.3\n\
         plot '{name}.dat' using ($1+{h}):2:({interval_s}) with boxes{marks}\n",
        top(y_max),
        h = interval_s / 2.0,
    )
}

fn heatmap_commands(data: &str, cpus: &[usize], max_ns: f64) -> String {
    let tics: Vec<String> = (cpus.iter().enumerate())
        .map(|(i, c)| format!("'{c}' {i}"))
        .collect();
    let (tics, edge) = (tics.join(", "), cpus.len() as f64 - 0.5);
    format!(
        "set xlabel 'CPU B'\nset ylabel 'CPU A'\nset cblabel 'ns'\nset size ratio -1\n\
         set xrange [-0.5:{edge}]\nset yrange [{edge}:-0.5]\nset cbrange [0:{}]\n\
         set xtics ({tics})\nset ytics ({tics})\nset palette rgb 33,13,10\n\
         # Cells not measured (the diagonal) are NaN: gnuplot warns that the matrix\n\
         # holds undefined values, and leaves them blank.\n\
         plot {data} matrix with image, \
         {data} matrix using 1:2:($3 == $3 ? sprintf('%.0f', $3) : '') with labels\n",
        top(max_ns),
    )
}

/// An axis top above `v`, never an empty range.
fn top(v: f64) -> f64 {
    match v > 0.0 {
        true => v * 1.05,
        false => 1.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_tics_read_as_percentiles() {
        let labels: Vec<String> = (0..5).map(tic_label).collect();
        assert_eq!(labels, ["0%", "90%", "99%", "99.9%", "99.99%"]);
    }

    #[test]
    fn titles_are_safe_in_the_script() {
        assert_eq!(quoted("it's\nfine"), "'it''s fine'");
        assert_eq!(us(1_234_567), "1234.567");
        assert_eq!(us(7), "0.007");
    }

    #[test]
    fn what_gnuplot_cannot_draw_is_left_out() {
        let empty = SeriesData {
            interval_ns: 62_500_000,
            max_ns: vec![],
            events: vec![],
            total_ns: vec![],
        };
        assert!(series_plot("s".into(), "noise cpu1", "gap", &empty, &[]).is_none());
        let unmeasured = Heatmap::new("load".into(), [(0, 1, None)].into_iter());
        assert!(heatmap("h".into(), String::new(), &unmeasured).is_none());
    }
}
