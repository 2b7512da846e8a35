//! `report --format gnuplot`: real noise, c2c and pingpong runs (cut from the frozen
//! fixture) become data files whose figures are the results' own (percentiles, bin
//! counts, series, the c2c matrix), and a script that gnuplot, when it is installed, runs
//! into one non-empty SVG per plot.

use std::path::{Path, PathBuf};
use std::process::Command;

use jitterscope::probes::c2c::C2cEntry;
use jitterscope::probes::noise::NoiseEntry;
use jitterscope::probes::timer::TimerEntry;
use jitterscope::report::ResultFile;
use jitterscope::report::export::{Dist, distributions};
use jitterscope::stats::Summary;

use crate::util::{frozen_part, jitterscope, skip, stderr_lines};

const TEST: &str = "gnuplot";

/// The frozen fixture's noise, c2c and pingpong entries, one file each. Nothing is
/// measured.
fn measure(dir: &Path) -> Vec<PathBuf> {
    ["noise", "c2c", "pingpong"]
        .iter()
        .map(|kind| frozen_part(&dir.join(format!("{kind}.json")), &[kind]))
        .collect()
}

/// Runs `report --format gnuplot -o out`; returns the paths it printed.
fn report(files: &[PathBuf], out: &Path) -> Vec<PathBuf> {
    let mut args = vec!["report"];
    args.extend(files.iter().map(|p| p.to_str().unwrap()));
    args.extend(["--format", "gnuplot", "-o", out.to_str().unwrap()]);
    let o = jitterscope(&args);
    assert_eq!(o.status.code(), Some(0), "{args:?}: {:?}", stderr_lines(&o));
    let printed: Vec<PathBuf> = String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(PathBuf::from)
        .collect();
    for p in &printed {
        assert!(p.is_file() && p.starts_with(out), "{}", p.display());
    }
    printed
}

#[test]
fn gnuplot_files_hold_the_results_figures() {
    let tmp = tempfile::tempdir().unwrap();
    let files = measure(tmp.path());
    let out = tmp.path().join("gp");
    let printed = report(&files, &out);
    assert_eq!(printed.last(), Some(&out.join("plots.gp")));
    for path in &files {
        let r = ResultFile::read(path).unwrap();
        let prefix = format!("{}-", path.file_stem().unwrap().to_string_lossy());
        check_result(&out, &prefix, &r);
    }
    check_same_stems_are_numbered(&files[0], tmp.path());
    run_gnuplot(&out, &printed);
}

fn check_result(out: &Path, prefix: &str, r: &ResultFile) {
    for d in distributions(r).0 {
        if d.summary.count == 0 {
            continue;
        }
        let base = out.join(file_safe(&format!(
            "{prefix}{}-{}-{}",
            d.probe, d.key, d.metric
        )));
        check_percentiles(&with_ext(&base, "-percentiles.dat"), &d);
        check_histogram(&with_ext(&base, "-histogram.dat"), &d.summary);
    }
    for e in &r.probes {
        if let Some(n) = e.get::<NoiseEntry>() {
            let name = format!("{prefix}noise-cpu{}-series", n.cpu);
            check_series(out, &name, &n.series, n.largest.len());
        }
        if let Some(t) = e.get::<TimerEntry>() {
            let name = format!("{prefix}timer-cpu{}-series", t.cpu);
            check_series(out, &name, &t.series, t.largest.len());
        }
    }
    let pairs: Vec<(usize, usize, Option<f64>)> = (r.probes.iter())
        .filter_map(|e| e.get::<C2cEntry>())
        .map(|c| (c.cpu_a, c.cpu_b, c.median_ns))
        .collect();
    if !pairs.is_empty() {
        check_heatmap(&out.join(format!("{prefix}c2c-heatmap.dat")), &pairs);
    }
}

fn with_ext(base: &Path, suffix: &str) -> PathBuf {
    PathBuf::from(format!("{}{suffix}", base.display()))
}

/// What the exporter does to names: letters, digits, `.`, `-`, `_`; the rest `_`.
fn file_safe(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            c if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') => c,
            _ => '_',
        })
        .collect()
}

/// The header line (column names) and the data rows as numbers (`NaN` allowed).
fn read_data(path: &Path) -> (String, Vec<Vec<f64>>) {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let header = text.lines().next().unwrap_or_default().to_string();
    assert!(header.starts_with("# "), "{}: {header}", path.display());
    let rows = (text.lines())
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| l.split_whitespace().map(|f| f.parse().unwrap()).collect())
        .collect();
    (header, rows)
}

/// Within the histogram's precision (3 significant digits) of a summary figure in ns.
fn close(us: f64, ns: u64) -> bool {
    (us * 1e3 - ns as f64).abs() <= ns as f64 * 1e-3 + 1.0
}

fn check_percentiles(path: &Path, d: &Dist) {
    let (header, rows) = read_data(path);
    assert_eq!(
        header,
        "# value_us percentile count_at_or_below 1/(1-percentile)"
    );
    let s = &d.summary;
    let named = [
        (0.9, s.p90_ns),
        (0.99, s.p99_ns),
        (0.999, s.p999_ns),
        (0.9999, s.p9999_ns),
    ];
    for (q, want) in named {
        // A row at each decade of 1/(1−p) that the count resolves.
        if 1.0 / (1.0 - q) > s.count as f64 {
            continue;
        }
        let row = rows.iter().find(|r| (r[1] - q).abs() < 1e-12);
        let row = row.unwrap_or_else(|| panic!("{}: no row at {q}", path.display()));
        assert!(
            close(row[0], want.unwrap()),
            "{}: {row:?} vs {want:?}",
            path.display()
        );
    }
    let last = rows.last().unwrap();
    assert_eq!(
        (last[1], last[2], last[3]),
        (1.0, s.count as f64, s.count as f64)
    );
    assert!(
        close(last[0], s.max_ns.unwrap()),
        "{last:?} vs {:?}",
        s.max_ns
    );
    assert!(
        close(rows[0][0], s.min_ns.unwrap()),
        "{:?} vs {:?}",
        rows[0],
        s.min_ns
    );
    let ordered = |i: usize| rows.windows(2).all(|w| w[0][i] <= w[1][i]);
    assert!(
        ordered(0) && ordered(1) && ordered(2) && ordered(3),
        "{}",
        path.display()
    );
}

fn check_histogram(path: &Path, s: &Summary) {
    let (header, rows) = read_data(path);
    assert_eq!(header, "# lower_us upper_us count");
    let total: f64 = rows.iter().map(|r| r[2]).sum();
    assert_eq!(total, s.count as f64, "{}", path.display());
    assert!(rows.iter().all(|r| r[0] < r[1] && r[2] > 0.0));
    let (first, last) = (&rows[0], rows.last().unwrap());
    let (min, max) = (
        s.min_ns.unwrap() as f64 / 1e3,
        s.max_ns.unwrap() as f64 / 1e3,
    );
    assert!(first[0] <= min * 1.001 + 1e-3, "{first:?} vs min {min}");
    assert!(last[1] >= max, "{last:?} vs max {max}");
}

fn check_series(out: &Path, name: &str, s: &jitterscope::stats::SeriesOut, largest: usize) {
    let (header, rows) = read_data(&out.join(format!("{name}.dat")));
    assert_eq!(header, "# start_s max_us events total_us");
    assert_eq!(rows.len(), s.max_ns.len(), "{name}");
    for (i, r) in rows.iter().enumerate() {
        let start = i as f64 * s.interval_ns as f64 / 1e9;
        assert!((r[0] - start).abs() < 1e-6, "{name} row {i}: {r:?}");
        assert_eq!((r[1] * 1e3).round() as u64, s.max_ns[i], "{name} row {i}");
        assert_eq!(r[2] as u64, s.events[i], "{name} row {i}");
        assert_eq!((r[3] * 1e3).round() as u64, s.total_ns[i], "{name} row {i}");
    }
    if largest > 0 {
        let (header, marks) = read_data(&out.join(format!("{name}-largest.dat")));
        assert_eq!(header, "# start_s duration_us");
        assert_eq!(marks.len(), largest);
    }
}

fn check_heatmap(path: &Path, pairs: &[(usize, usize, Option<f64>)]) {
    let (header, rows) = read_data(path);
    let cpus: Vec<usize> = (header.split_whitespace().skip(1))
        .map(|c| c.strip_prefix("cpu").unwrap().strip_suffix("_ns").unwrap())
        .map(|c| c.parse().unwrap())
        .collect();
    assert_eq!(rows.len(), cpus.len());
    let at = |cpu| cpus.iter().position(|&c| c == cpu).unwrap();
    for &(a, b, median) in pairs {
        let want = median.unwrap_or(f64::NAN);
        for (i, j) in [(at(a), at(b)), (at(b), at(a))] {
            let got = rows[i][j];
            let same = (got - want).abs() <= 0.05 || (got.is_nan() && want.is_nan());
            assert!(same, "cell cpu{a} cpu{b}: {got} vs {want}");
        }
    }
    for (i, row) in rows.iter().enumerate() {
        assert!(row[i].is_nan(), "the diagonal is not measured: {row:?}");
    }
}

/// Two files named alike: their names are numbered, never overwritten.
fn check_same_stems_are_numbered(result: &Path, tmp: &Path) {
    let copies = [tmp.join("a/r.json"), tmp.join("b/r.json")];
    for c in &copies {
        std::fs::create_dir_all(c.parent().unwrap()).unwrap();
        std::fs::copy(result, c).unwrap();
    }
    let out = tmp.join("same");
    let printed = report(&copies, &out);
    let r = ResultFile::read(result).unwrap();
    check_result(&out, "r.1-", &r);
    check_result(&out, "r.2-", &r);
    // Every plot of a file once per file, and the script.
    let (n1, n2) = (
        count_prefixed(&printed, "r.1-"),
        count_prefixed(&printed, "r.2-"),
    );
    assert!(
        n1 > 0 && n1 == n2 && n1 + n2 + 1 == printed.len(),
        "{printed:?}"
    );
}

fn count_prefixed(paths: &[PathBuf], prefix: &str) -> usize {
    let name = |p: &PathBuf| p.file_name().unwrap().to_string_lossy().into_owned();
    paths.iter().filter(|p| name(p).starts_with(prefix)).count()
}

// ---------------------------------------------------------------------------------------
// gnuplot itself, when installed

fn run_gnuplot(dir: &Path, printed: &[PathBuf]) {
    if Command::new("gnuplot").arg("--version").output().is_err() {
        skip(
            TEST,
            "gnuplot is not on PATH: plots.gp was not run (the data files were checked)",
        );
        return;
    }
    let script = std::fs::read_to_string(dir.join("plots.gp")).unwrap();
    let outputs: Vec<String> = (script.lines())
        .filter_map(|l| l.strip_prefix("set output '"))
        .map(|l| l.split('\'').next().unwrap().to_string())
        .collect();
    // Every data file is drawn, in a plot of its own name or as its series' marks.
    let dats = printed
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "dat"));
    for p in dats {
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            script.contains(&format!("'{name}'")),
            "{name} is not plotted"
        );
    }
    draw(dir, &[], &outputs, "svg", |b| {
        let text = String::from_utf8_lossy(b);
        text.contains("<svg") && text.trim_end().ends_with("</svg>")
    });
    if gnuplot_has("pngcairo") {
        draw(dir, &["-e", "fmt='png'"], &outputs, "png", |b| {
            b.starts_with(b"\x89PNG")
        });
    }
}

/// Runs the script; every picture it names appears, non-empty and well-formed, and
/// gnuplot says nothing but the heat map's note on its NaN diagonal.
fn draw(dir: &Path, args: &[&str], outputs: &[String], ext: &str, ok: fn(&[u8]) -> bool) {
    let o = Command::new("gnuplot")
        .args(args)
        .arg("plots.gp")
        .current_dir(dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "gnuplot {args:?}: {stderr}");
    let unexpected: Vec<&str> = (stderr.lines())
        .filter(|l| !l.contains("warning: matrix contains missing or undefined values"))
        .filter(|l| !l.trim().is_empty())
        .collect();
    assert!(unexpected.is_empty(), "gnuplot {args:?}: {unexpected:?}");
    assert!(!outputs.is_empty());
    for name in outputs {
        let path = dir.join(format!("{name}{ext}"));
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(bytes.len() > 200 && ok(&bytes), "{}", path.display());
    }
}

fn gnuplot_has(terminal: &str) -> bool {
    let o = Command::new("gnuplot")
        .args(["-e", "set terminal"])
        .output();
    o.is_ok_and(|o| {
        let all = [o.stdout, o.stderr].concat();
        String::from_utf8_lossy(&all).contains(terminal)
    })
}
