//! `report --format svg|png` draws every distribution of real result files (noise, timer,
//! c2c, cut from the frozen fixture) as a percentile plot and a histogram, each noise and timer series, and the c2c
//! heat map; `plot::overlay_plots` lays runs over each other with a legend entry per run.
//! Each SVG is checked as a document (size, viewBox, balanced tags) and for the text a
//! reader needs: axis labels with units, percentile ticks, cell values.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use jitterscope::probes::c2c::C2cEntry;
use jitterscope::probes::noise::NoiseEntry;
use jitterscope::probes::timer::TimerEntry;
use jitterscope::report::ResultFile;
use jitterscope::report::export::distributions;
use jitterscope::report::export::plot;

use crate::util::{bin, frozen_part, jitterscope, measuring, stderr_lines};

/// Result files cut from the frozen fixture (its noise, timer and c2c entries), made once
/// for every test here. Nothing is measured.
struct Fixture {
    _dir: tempfile::TempDir,
    noise: PathBuf,
    timer: PathBuf,
    c2c: PathBuf,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        // Under the target directory, which `cargo clean` empties: a static is never dropped.
        let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let part = |kind: &str| frozen_part(&dir.path().join(format!("{kind}.json")), &[kind]);
        let (noise, timer, c2c) = (part("noise"), part("timer"), part("c2c"));
        Fixture {
            _dir: dir,
            noise,
            timer,
            c2c,
        }
    })
}

impl Fixture {
    fn files(&self) -> Vec<&Path> {
        vec![
            self.noise.as_path(),
            self.timer.as_path(),
            self.c2c.as_path(),
        ]
    }

    /// `report FILES --format FORMAT -o DIR`: the paths it lists on stdout.
    fn report(&self, files: &[&Path], format: &str, dir: &Path) -> Vec<PathBuf> {
        let mut args = vec!["report"];
        args.extend(files.iter().map(|p| p.to_str().unwrap()));
        args.extend(["--format", format, "-o", dir.to_str().unwrap()]);
        let _m = measuring();
        let out = jitterscope(&args);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{args:?}: {:?}",
            stderr_lines(&out)
        );
        let stdout = String::from_utf8(out.stdout).unwrap();
        stdout.lines().map(PathBuf::from).collect()
    }
}

fn read(path: &Path) -> ResultFile {
    ResultFile::read(path).expect("a result the binary wrote")
}

/// The names the plots of `r` must have, each prefixed by `prefix`: per distribution
/// with samples a percentile plot and a histogram, per noise or timer entry a series,
/// and a heat map when it holds c2c entries.
fn expected_names(r: &ResultFile, prefix: &str) -> BTreeSet<String> {
    counts(r, prefix).into_keys().collect()
}

/// Each percentile plot's name with its distribution's sample count.
fn counts(r: &ResultFile, prefix: &str) -> BTreeMap<String, u64> {
    let mut names = BTreeMap::new();
    for d in distributions(r).0 {
        if d.summary.count > 0 {
            let stem = format!("{prefix}{}-{}-{}", d.probe, d.key, d.metric);
            names.insert(format!("{stem}-percentiles"), d.summary.count);
            names.insert(format!("{stem}-histogram"), 0);
        }
    }
    for e in &r.probes {
        if let Some(n) = e.get::<NoiseEntry>() {
            names.insert(format!("{prefix}noise-cpu{}-series", n.cpu), 0);
        }
        if let Some(t) = e.get::<TimerEntry>() {
            names.insert(format!("{prefix}timer-cpu{}-series", t.cpu), 0);
        }
    }
    if r.probes.iter().any(|e| e.get::<C2cEntry>().is_some()) {
        names.insert(format!("{prefix}c2c-heatmap"), 0);
    }
    names
}

/// The file names in `dir` with extension `ext`, without it; and checks `listed` (what the
/// command printed) names exactly those files.
fn names_in(dir: &Path, ext: &str, listed: &[PathBuf]) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        assert_eq!(path.extension().unwrap(), ext, "{}", path.display());
        names.insert(path.file_stem().unwrap().to_string_lossy().into_owned());
    }
    let listed: BTreeSet<String> = listed
        .iter()
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(listed, names, "stdout lists the files written");
    names
}

// ---------------------------------------------------------------------------------------
// A small SVG reader: enough to check structure and text, not a general XML parser.

/// The root `<svg …>` tag's attribute `name`.
fn root_attr(svg: &str, name: &str) -> Option<String> {
    let root = &svg[svg.find("<svg")?..];
    let root = &root[..root.find('>')?];
    let at = root.find(&format!(" {name}=\""))? + name.len() + 3;
    Some(root[at..].split('"').next()?.to_string())
}

/// Asserts every element is closed in order: the document is well formed as far as tags go.
fn assert_balanced(svg: &str, what: &str) {
    let mut stack: Vec<&str> = Vec::new();
    for tag in svg.split('<').skip(1) {
        let tag = &tag[..tag
            .find('>')
            .unwrap_or_else(|| panic!("{what}: unclosed <"))];
        if tag.starts_with('?') || tag.starts_with('!') || tag.ends_with('/') {
            continue;
        }
        let name = tag
            .trim_start_matches('/')
            .split_whitespace()
            .next()
            .unwrap();
        if tag.starts_with('/') {
            assert_eq!(
                stack.pop(),
                Some(name),
                "{what}: </{name}> closes the wrong element"
            );
        } else {
            stack.push(name);
        }
    }
    assert!(stack.is_empty(), "{what}: unclosed {stack:?}");
}

/// The text of every `<text>` element, trimmed.
fn texts(svg: &str) -> Vec<String> {
    svg.split("<text")
        .skip(1)
        .filter_map(|t| {
            let body = &t[t.find('>')? + 1..t.find("</text>")?];
            Some(body.trim().replace("&amp;", "&").replace("&lt;", "<"))
        })
        .collect()
}

/// The SVG at `path`, checked as a document that scales: width, height and a viewBox.
fn svg_doc(path: &Path) -> String {
    let svg = std::fs::read_to_string(path).unwrap();
    let what = path.display().to_string();
    assert!(svg.trim_start().starts_with("<svg"), "{what}");
    assert!(svg.trim_end().ends_with("</svg>"), "{what}");
    let w = root_attr(&svg, "width").unwrap_or_else(|| panic!("{what}: no width"));
    let h = root_attr(&svg, "height").unwrap_or_else(|| panic!("{what}: no height"));
    let view = root_attr(&svg, "viewBox").unwrap_or_else(|| panic!("{what}: no viewBox"));
    assert_eq!(view, format!("0 0 {w} {h}"), "{what}");
    assert_balanced(&svg, &what);
    svg
}

/// The display unit in a label `… (UNIT)`.
fn unit_of(label: &str) -> Option<&str> {
    let unit = label.strip_suffix(')')?.rsplit_once('(')?.1;
    ["ns", "µs", "ms", "s"].contains(&unit).then_some(unit)
}

// ---------------------------------------------------------------------------------------

#[test]
fn svg_report_draws_every_plot_with_units_and_ticks() {
    let f = fixture();
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("plots");
    let listed = f.report(&f.files(), "svg", &dir);
    let mut expected = BTreeMap::new();
    for path in f.files() {
        let prefix = format!("{}-", path.file_stem().unwrap().to_string_lossy());
        let mut of_file = counts(&read(path), &prefix);
        // A timer's corrected latency is drawn in its measured latency's plots (a line
        // each); only overlays of runs keep it apart.
        of_file
            .retain(|name, _| !name.contains("timer-cpu") || !name.contains("-latency-corrected-"));
        expected.extend(of_file);
    }
    let names: BTreeSet<String> = expected.keys().cloned().collect();
    assert_eq!(names_in(&dir, "svg", &listed), names);

    for (name, count) in &expected {
        let svg = svg_doc(&dir.join(format!("{name}.svg")));
        let t = texts(&svg);
        let has = |s: &str| t.iter().any(|x| x == s);
        let title = &t[0];
        if name.ends_with("-percentiles") {
            assert!(has("percentile"), "{name}: {t:?}");
            // A tick per decade up to the sample count: 0 %, 90 %, 99 %, 99.9 % …
            let decades = (*count as f64).log10().ceil().max(1.0) as u32;
            for k in 0..=decades {
                let tick = plot::percentile_label(k);
                assert!(has(&tick), "{name}: {count} samples, no {tick:?} in {t:?}");
            }
            assert_axis_unit(name, &t, title);
        } else if name.ends_with("-histogram") {
            assert!(has("count"), "{name}: {t:?}");
            assert_axis_unit(name, &t, title);
        } else if name.ends_with("-series") {
            assert!(has("time (s)"), "{name}: {t:?}");
            let y = t.iter().find(|x| x.starts_with("largest "));
            let y = y.unwrap_or_else(|| panic!("{name}: no y label in {t:?}"));
            assert!(unit_of(y).is_some(), "{name}: {y}");
            assert!(
                has("largest events"),
                "{name}: the largest events are marked: {t:?}"
            );
        }
    }
}

/// The title names the probe, key and metric and the unit; an axis label
/// `METRIC (UNIT)` carries the same unit.
fn assert_axis_unit(name: &str, texts: &[String], title: &str) {
    let unit = title
        .split_once(" (")
        .and_then(|(_, rest)| rest.split(')').next())
        .unwrap_or_else(|| panic!("{name}: no unit in the title {title:?}"));
    assert!(unit_of(&format!("({unit})")).is_some(), "{name}: {title}");
    let label = texts.iter().skip(1).find(|t| unit_of(t) == Some(unit));
    assert!(
        label.is_some(),
        "{name}: no axis label in {unit}: {texts:?}"
    );
    let (probe, rest) = title.split_once(' ').unwrap();
    assert!(name.contains(probe), "{name}: {title}");
    let metric = label.unwrap().rsplit_once(" (").unwrap().0;
    assert!(rest.contains(&format!(" {metric}: ")), "{name}: {title}");
}

#[test]
fn heat_map_labels_every_pair_with_its_median() {
    let f = fixture();
    let c2c = &f.c2c;
    let out = tempfile::tempdir().unwrap();
    let listed = f.report(&[c2c.as_path()], "svg", out.path());
    let names = names_in(out.path(), "svg", &listed);
    // One file: no prefix.
    assert!(names.contains("c2c-heatmap"), "{names:?}");
    let svg = svg_doc(&out.path().join("c2c-heatmap.svg"));
    let t = texts(&svg);
    let r = read(c2c);
    let mut pairs = 0;
    for e in r.probes.iter().filter_map(|e| e.get::<C2cEntry>()) {
        let Some(median) = e.median_ns else { continue };
        let label = format!("{median:.0}");
        // Both cells of the symmetric matrix.
        let cells = t.iter().filter(|x| **x == label).count();
        assert!(cells >= 2, "{}-{}: {label} in {t:?}", e.cpu_a, e.cpu_b);
        for cpu in [e.cpu_a, e.cpu_b] {
            assert!(t.contains(&cpu.to_string()), "CPU {cpu} labelled: {t:?}");
        }
        pairs += 1;
    }
    assert!(pairs > 0, "the run measured at least one pair");
    assert!(t[0].contains("median one-way latency (ns)"), "{t:?}");
}

#[test]
fn png_report_writes_decodable_images_of_the_stated_size() {
    let f = fixture();
    let out = tempfile::tempdir().unwrap();
    let listed = f.report(&[f.noise.as_path()], "png", out.path());
    let names = names_in(out.path(), "png", &listed);
    assert_eq!(names, expected_names(&read(&f.noise), ""));
    for name in &names {
        let bytes = std::fs::read(out.path().join(format!("{name}.png"))).unwrap();
        assert!(
            bytes.starts_with(b"\x89PNG\r\n\x1a\n"),
            "{name}: PNG signature"
        );
        let mut reader = png::Decoder::new(std::io::Cursor::new(bytes))
            .read_info()
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut buf = vec![0; reader.output_buffer_size().unwrap()];
        let info = reader.next_frame(&mut buf).unwrap();
        assert_eq!((info.width, info.height), (800, 400), "{name}");
        assert_eq!(info.color_type, png::ColorType::Rgb, "{name}");
        // Something is drawn: more than a handful of colours.
        let colours: BTreeSet<&[u8]> = buf[..info.buffer_size()].chunks(3).collect();
        assert!(colours.len() > 4, "{name}: {} colours", colours.len());
    }
}

#[test]
fn several_files_with_one_stem_get_numbered_prefixes() {
    let f = fixture();
    let out = tempfile::tempdir().unwrap();
    let (a, b) = (out.path().join("a"), out.path().join("b"));
    for d in [&a, &b] {
        std::fs::create_dir(d).unwrap();
        std::fs::copy(&f.noise, d.join("run.json")).unwrap();
    }
    let dir = out.path().join("plots");
    let listed = f.report(&[&a.join("run.json"), &b.join("run.json")], "svg", &dir);
    let r = read(&f.noise);
    let mut expected = expected_names(&r, "run.1-");
    expected.extend(expected_names(&r, "run.2-"));
    assert_eq!(names_in(&dir, "svg", &listed), expected);
}

#[test]
fn overlay_draws_one_legend_entry_per_run() {
    let f = fixture();
    let (noise, timer) = (read(&f.noise), read(&f.timer));
    let runs = [
        ("before".to_string(), &noise),
        ("after".to_string(), &noise),
        ("timer only".to_string(), &timer),
    ];
    let plots = plot::overlay_plots(&runs).expect("overlay");
    let names: BTreeSet<&str> = plots.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names.len(), plots.len(), "names are unique");
    for n in &names {
        let safe = n
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
        assert!(safe, "{n} is file-safe");
    }
    // Present in at least one run: the noise and the timer figures all have their plots.
    let mut expected = expected_names(&noise, "");
    expected.extend(expected_names(&timer, ""));
    assert_eq!(names, expected.iter().map(String::as_str).collect());

    for p in &plots {
        let svg = p.svg().expect("svg");
        let t = texts(&svg);
        let count = |label: &str| t.iter().filter(|x| *x == label).count();
        let want = match p.name.starts_with("noise-") {
            true => [1, 1, 0],
            false => [0, 0, 1],
        };
        let got = [count("before"), count("after"), count("timer only")];
        assert_eq!(got, want, "{}: legend entries {t:?}", p.name);
    }
    // Distinct colours: each run's line has its own stroke.
    let pct = plots
        .iter()
        .find(|p| p.name.starts_with("noise-") && p.name.ends_with("-percentiles"));
    let svg = pct.expect("a noise percentile plot").svg().unwrap();
    let strokes: BTreeSet<&str> = svg
        .split("<polyline")
        .skip(1)
        .filter_map(|s| s.split("stroke=\"").nth(1)?.split('"').next())
        .collect();
    assert!(strokes.len() >= 2, "{strokes:?}");
}

#[test]
fn a_missing_font_is_one_clear_line() {
    let f = fixture();
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("plots");
    let noise = f.noise.to_str().unwrap();
    let dir_s = dir.to_str().unwrap();
    let cases = [
        (
            "/nonexistent/DejaVuSans.ttf",
            "JITTERSCOPE_FONT=/nonexistent",
        ),
        (noise, "is not a TrueType font"),
    ];
    let _m = measuring();
    for (font, says) in cases {
        let o = Command::new(bin())
            .args(["report", noise, "--format", "svg", "-o", dir_s])
            .env("JITTERSCOPE_FONT", font)
            .output()
            .unwrap();
        let lines = stderr_lines(&o);
        assert_eq!(o.status.code(), Some(2), "{lines:?}");
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].starts_with("jitterscope: "), "{lines:?}");
        assert!(lines[0].contains(says), "{lines:?}");
        assert!(
            lines[0].contains("unset it to use the built-in font"),
            "says the fix: {lines:?}"
        );
        assert!(!dir.exists(), "nothing written");
    }
}

/// Issue 29: with `JITTERSCOPE_FONT` unset, the plots' font is the one built into the
/// binary: no file is read for it, so it is there on a host with no font at all.
#[test]
fn issue29_the_font_is_built_in() {
    let bytes = plot::font_bytes(None).expect("the built-in font");
    // The binary's own bytes, not a file read.
    assert!(matches!(bytes, std::borrow::Cow::Borrowed(_)));
    assert_eq!(&bytes[..], dejavu::sans::regular());
    // A TrueType file: version 1.0 ('\0\x01\0\0'), DejaVu Sans's size.
    assert_eq!(&bytes[..4], &[0, 1, 0, 0]);
    assert!(bytes.len() > 500_000, "{} bytes", bytes.len());
    let missing = plot::font_bytes(Some("/nonexistent.ttf".into()));
    assert!(missing.is_err(), "a named font that is missing is an error");
    let f = fixture();
    let plots = plot::result_plots(&[(f.noise.clone(), read(&f.noise))]).unwrap();
    let svg = plots[0].svg().expect("drawn with the built-in font");
    assert!(
        texts(&svg).iter().any(|t| t.contains("percentile")),
        "{svg}"
    );
}

/// Issue 29: the page has its plots on a host with no font installed: the report runs in
/// a mount namespace whose /usr/share/fonts is an empty tmpfs (root and unshare needed;
/// skipped, saying why, without them).
#[test]
fn issue29_the_page_has_plots_with_no_font_installed() {
    const TEST: &str = "issue29_the_page_has_plots_with_no_font_installed";
    if !crate::util::is_root() {
        return crate::util::skip(TEST, "needs root to make a mount namespace");
    }
    let fonts = Path::new("/usr/share/fonts");
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("page.html");
    let f = fixture();
    let report = format!(
        "exec {} report {} {} --format html -o {}",
        bin().display(),
        f.noise.display(),
        f.timer.display(),
        page.display()
    );
    // Where there is no font directory, there is no font to hide.
    let script = match fonts.is_dir() {
        true => format!(
            "mount -t tmpfs none {0} && test -z \"$(ls -A {0})\" && {report}",
            fonts.display()
        ),
        false => report,
    };
    let out = Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c", &script])
        .env_remove("JITTERSCOPE_FONT")
        .output();
    let out = match out {
        Ok(o) if o.status.success() => o,
        Ok(o) if String::from_utf8_lossy(&o.stderr).contains("unshare") => {
            return crate::util::skip(
                TEST,
                &format!("unshare -m refused: {}", stderr_lines(&o).join(" ")),
            );
        }
        Ok(o) => panic!("{script}: {:?}", stderr_lines(&o)),
        Err(e) => return crate::util::skip(TEST, &format!("no unshare: {e}")),
    };
    // (Another test's tune run may add a warning; nothing may be about plots.)
    let lines = stderr_lines(&out);
    assert!(
        !lines
            .iter()
            .any(|l| l.contains("plot") || l.contains("font")),
        "{lines:?}"
    );
    let html = std::fs::read_to_string(&page).unwrap();
    // The page's warning when a plot cannot be drawn (page_cpus::Drawer::warning).
    for warning in ["plots are left out", "is left out: "] {
        assert!(!html.contains(warning), "a plot was left out");
    }
    // Every plot of both files: the noise and timer entry's series and distributions.
    let expected: usize = [&f.noise, &f.timer]
        .iter()
        .map(|p| {
            plot::result_plots(&[(p.to_path_buf(), read(p))])
                .unwrap()
                .len()
        })
        .sum();
    assert_eq!(html.matches("<figure>").count(), expected);
}
