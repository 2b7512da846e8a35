//! `report --format gnuplot`: data files plus a script, `plots.gp`, that draws the same
//! plots as `--format svg` with gnuplot: `cd DIR && gnuplot plots.gp` writes one SVG per
//! plot next to its data (`gnuplot -e "fmt='png'" plots.gp` writes PNGs with pngcairo).
//!
//! The plots and their names are `report::plot`'s. Per distribution with samples:
//! `…-percentiles.dat`, HdrHistogram's latency by percentile (value, percentile, count at
//! or below, 1/(1−p); drawn on a log x axis labelled 0 %, 90 %, 99 %, …; the last row is
//! the maximum, placed at 1/(1−p) = count), and `…-histogram.dat`, counts in log-spaced
//! bins, ten per decade (both axes log). Per noise or timer entry: `…-series.dat`, the
//! largest gap of each interval over the run, with the entry's largest events beside it
//! in `…-series-largest.dat`. Per c2c mode: `c2c-heatmap.dat`, the CPU × CPU matrix of
//! median one-way latency (NaN where no pair was measured). Every data file is whitespace
//! separated and opens with a `#` line naming its columns with their units; latencies are
//! in µs with ns resolution, the heat map's in ns. With several result files, names are
//! prefixed by the file's stem, numbered when two files share one.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context;
use hdrhistogram::Histogram;

use crate::probes::c2c::C2cEntry;
use crate::report::export::{Dist, Loaded, distributions};
use crate::report::result::write_atomic;
use crate::report::{ResultFile, plot};
use crate::stats::SeriesOut;
use crate::stats::events::EventOut;

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
    let mut plots = Vec::new();
    for ((path, r), prefix) in results.iter().zip(plot::name_prefixes(results)) {
        file_plots(path, r, &prefix, &mut plots)?;
    }
    plot::unique_names(plots.iter_mut().map(|p| &mut p.name));
    Ok(plots)
}

fn file_plots(
    path: &Path,
    r: &ResultFile,
    prefix: &str,
    out: &mut Vec<Plot>,
) -> anyhow::Result<()> {
    // Titles name the file only when there are several.
    let label = match prefix.is_empty() {
        true => String::new(),
        false => format!("{}: ", prefix.trim_end_matches('-')),
    };
    for d in distributions(r).0 {
        out.extend(dist_plots(path, &d, prefix, &label)?);
    }
    for e in &r.probes {
        if let Some(s) = e.view().and_then(|v| v.series()) {
            let (probe, cpu) = (s.probe, s.cpu);
            let name = format!("{prefix}{probe}-cpu{cpu}-series");
            let title = format!("{label}{probe} cpu{cpu}");
            out.extend(series_plot(name, &title, s.gap, s.series, s.largest));
        }
    }
    out.extend(heatmaps(r, prefix, &label));
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Distributions

fn dist_plots(path: &Path, d: &Dist, prefix: &str, label: &str) -> anyhow::Result<Vec<Plot>> {
    let decoded = d.decode_histogram();
    let Some(hist) = decoded.map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))? else {
        return Ok(Vec::new());
    };
    // Nothing recorded: nothing to draw, and gnuplot fails on an empty file.
    if hist.is_empty() {
        return Ok(Vec::new());
    }
    let base = plot::file_safe(&format!("{prefix}{}-{}-{}", d.probe, d.key, d.metric));
    let caveat = match d.trusted {
        true => "",
        false => " (unconfirmed by TSC check)",
    };
    let what = format!("{label}{} {} {}", d.probe, d.key, d.metric);
    let max = d.summary.max_ns.unwrap_or(u64::MAX).min(hist.max());
    Ok(vec![
        percentile_plot(&base, &what, caveat, &hist, max),
        histogram_plot(&base, &what, caveat, &hist),
    ])
}

/// The quantiles drawn: ten per decade of 1/(1−p), up to what the count resolves. Each
/// decade starts at the literal 0.9, 0.99, … (parsed, not computed), so that those rows
/// are the summary's own percentiles.
fn levels(count: u64) -> Vec<f64> {
    let mut out = Vec::new();
    for decade in 0..15 {
        for step in 0..10 {
            let x = 10f64.powf(decade as f64 + step as f64 / 10.0);
            if x > count as f64 {
                return out;
            }
            out.push(match step {
                0 => nines(decade),
                _ => 1.0 - 1.0 / x,
            });
        }
    }
    out
}

/// 0, 0.9, 0.99, … as the decimal literal would be.
fn nines(k: usize) -> f64 {
    match k {
        0 => 0.0,
        k => format!("0.{}", "9".repeat(k)).parse().unwrap_or(1.0),
    }
}

/// `max_ns` is the exact maximum: like the summary, no row reports above it, and the
/// curve ends there, at 1/(1−p) = count (where `report::plot` puts it).
fn percentile_plot(base: &str, what: &str, caveat: &str, h: &Histogram<u64>, max_ns: u64) -> Plot {
    let mut data = String::from(
        "# value_us percentile count_at_or_below 1/(1-percentile)\n\
         # latency by percentile (HdrHistogram's layout, percentile as a fraction); \
         the last row is the maximum, at 1/(1-percentile) = count\n",
    );
    let row = |data: &mut String, v: u64, q: f64, x: f64| {
        let below = h.count_between(0, v);
        let _ = writeln!(data, "{} {q:.12} {below} {x:.6}", us(v));
    };
    for q in levels(h.len()) {
        row(
            &mut data,
            h.value_at_quantile(q).min(max_ns),
            q,
            1.0 / (1.0 - q),
        );
    }
    row(&mut data, max_ns, 1.0, h.len() as f64);
    Plot {
        name: format!("{base}-percentiles"),
        title: format!("{what}: latency by percentile (µs){caveat}"),
        data,
        marks: None,
        kind: Kind::Percentiles {
            x_max: h.len() as f64,
            y_max: max_ns as f64 / 1e3,
        },
    }
}

/// Bins per decade of latency, as `report::plot` draws them.
const BINS_PER_DECADE: f64 = 10.0;

/// The counts in log-spaced bins: (lower edge, upper edge) in ns, count.
fn log_bins(h: &Histogram<u64>) -> Vec<(f64, f64, u64)> {
    let edge = |k: f64| 10f64.powf(k / BINS_PER_DECADE);
    let mut out: Vec<(f64, f64, u64)> = Vec::new();
    for v in h.iter_recorded() {
        // 0 ns (possible in a histogram whose lowest value is 1) goes in the first bin.
        let k = ((v.value_iterated_to().max(1) as f64).log10() * BINS_PER_DECADE).floor();
        match out.last_mut() {
            Some(last) if last.0 == edge(k) => last.2 += v.count_at_value(),
            _ => out.push((edge(k), edge(k + 1.0), v.count_at_value())),
        }
    }
    out
}

fn histogram_plot(base: &str, what: &str, caveat: &str, h: &Histogram<u64>) -> Plot {
    let bins = log_bins(h);
    let mut data = String::from(
        "# lower_us upper_us count\n\
         # samples per bin, ten log-spaced bins per decade of latency\n",
    );
    for (lo, hi, count) in &bins {
        let _ = writeln!(data, "{:.6} {:.6} {count}", lo / 1e3, hi / 1e3);
    }
    let x_min = bins.first().map_or(1.0, |b| b.0);
    let x_max = bins.last().map_or(1.0, |b| b.1);
    Plot {
        name: format!("{base}-histogram"),
        title: format!("{what}: histogram (µs){caveat}"),
        data,
        marks: None,
        kind: Kind::Histogram {
            x_min: x_min / 1e3,
            x_max: x_max / 1e3,
            count_max: bins.iter().map(|b| b.2).max().unwrap_or(1),
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
    s: &SeriesOut,
    largest: &[EventOut],
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
    let top = largest
        .iter()
        .map(|e| e.duration_ns)
        .chain(s.max_ns.iter().copied());
    Some(Plot {
        name: plot::file_safe(&name),
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
fn marks(largest: &[EventOut]) -> Option<String> {
    if largest.is_empty() {
        return None;
    }
    let mut out = String::from("# start_s duration_us\n# the largest events, largest first\n");
    for e in largest {
        let _ = writeln!(out, "{:.9} {}", e.start_ns as f64 / 1e9, us(e.duration_ns));
    }
    Some(out)
}

/// One heat map per c2c mode (a result normally holds one), named as `report::plot`
/// names them.
fn heatmaps(r: &ResultFile, prefix: &str, label: &str) -> Vec<Plot> {
    let entries: Vec<&C2cEntry> = r.entries().collect();
    let mut modes: Vec<String> = Vec::new();
    for m in entries.iter().map(|e| mode_of(e)) {
        if !modes.contains(&m) {
            modes.push(m);
        }
    }
    let several = modes.len() > 1;
    let one = |mode: &String| {
        let pairs = entries.iter().filter(|e| mode_of(e) == *mode);
        let name = match several {
            true => plot::file_safe(&format!("{prefix}c2c-{mode}-heatmap")),
            false => format!("{prefix}c2c-heatmap"),
        };
        let title = format!("{label}c2c: median one-way latency by CPU pair (ns), mode {mode}");
        heatmap(name, title, pairs.map(|c| (c.cpu_a, c.cpu_b, c.median_ns)))
    };
    modes.iter().filter_map(one).collect()
}

/// The mode's name as in the JSON (`load`, …).
fn mode_of(e: &C2cEntry) -> String {
    crate::report::export::serde_name(&e.config.mode)
}

/// The matrix of one-way medians, symmetric: a pair is measured once.
fn heatmap(
    name: String,
    title: String,
    pairs: impl Iterator<Item = (usize, usize, Option<f64>)> + Clone,
) -> Option<Plot> {
    let mut cpus: Vec<usize> = pairs.clone().flat_map(|p| [p.0, p.1]).collect();
    cpus.sort_unstable();
    cpus.dedup();
    let at = |cpu: usize| cpus.binary_search(&cpu).unwrap_or(0);
    let mut cells = vec![vec![f64::NAN; cpus.len()]; cpus.len()];
    for (a, b, median) in pairs {
        let v = median.unwrap_or(f64::NAN);
        (cells[at(a)][at(b)], cells[at(b)][at(a)]) = (v, v);
    }
    let finite = cells.iter().flatten().copied().filter(|v| v.is_finite());
    let max_ns = finite.reduce(f64::max)?;
    Some(Plot {
        name,
        title,
        data: matrix_text(&cpus, &cells),
        marks: None,
        kind: Kind::Heatmap { cpus, max_ns },
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
// Names

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
    fn decade_starts_are_the_summary_quantiles() {
        let l = levels(10_000);
        for q in [0.0, 0.9, 0.99, 0.999, 0.9999] {
            assert!(l.contains(&q), "{q} in {l:?}");
        }
        assert_eq!(l.len(), 41);
        assert!(l.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(levels(1), [0.0]);
    }

    #[test]
    fn percentile_tics_read_as_percentiles() {
        let labels: Vec<String> = (0..5).map(tic_label).collect();
        assert_eq!(labels, ["0%", "90%", "99%", "99.9%", "99.99%"]);
    }

    #[test]
    fn bins_keep_every_count() {
        let mut lh = crate::stats::LatencyHistogram::new();
        for v in [0, 1, 100, 105, 2000, 2000, 3_000_000] {
            lh.record(v);
        }
        let bins = log_bins(lh.inner());
        let counts: Vec<u64> = bins.iter().map(|b| b.2).collect();
        assert_eq!(counts, [2, 2, 2, 1]);
        assert!(bins.iter().all(|b| b.0 < b.1));
        assert!((bins[1].0 - 100.0).abs() < 1e-9 && bins[1].1 > 105.0);
    }

    #[test]
    fn names_are_file_safe_and_unique() {
        let safe = plot::file_safe("ptp-/dev/ptp0:sys_offset");
        assert_eq!(safe, "ptp-_dev_ptp0_sys_offset");
        let plot = |name: &str| Plot {
            name: name.into(),
            title: String::new(),
            data: String::new(),
            marks: None,
            kind: Kind::Heatmap {
                cpus: vec![],
                max_ns: 0.0,
            },
        };
        let mut plots = [plot("a_b"), plot("a_b"), plot("a_b")];
        plot::unique_names(plots.iter_mut().map(|p| &mut p.name));
        let names: Vec<&str> = plots.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["a_b", "a_b-2", "a_b-3"]);
    }

    #[test]
    fn titles_are_safe_in_the_script() {
        assert_eq!(quoted("it's\nfine"), "'it''s fine'");
        assert_eq!(us(1_234_567), "1234.567");
        assert_eq!(us(7), "0.007");
    }
}
