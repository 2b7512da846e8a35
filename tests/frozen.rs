//! Issue 17: every exporter and view of the frozen fixture (tests/fixtures/all-probes.json,
//! a `jitterscope/1` result with an entry of every probe kind), as insta snapshots under
//! tests/snapshots/. A change in any export is a reviewed diff (`cargo insta review`),
//! and the schema cannot drift by accident: the fixture must read back to itself.
//!
//! Nothing here measures. The outputs depend only on the fixture, with two exceptions
//! pinned on purpose: temporary directories are written as `[TMP]`, and the SVG inside the
//! HTML page is replaced by `<svg>[plot]</svg>` (its text layout follows the installed
//! font); the plots themselves are checked through their descriptions.

use std::path::{Path, PathBuf};

use jitterscope::probes::record::HistogramRecord;
use jitterscope::report::compare::{self, Run};
use jitterscope::report::export::describe;
use jitterscope::report::result::figure::{Chart, Figure};
use jitterscope::report::views::Kind;
use jitterscope::report::{ResultFile, export::plot, terminal::audit_table, terminal::verdict};
use jitterscope::stats::LatencyHistogram;

use crate::util::{FROZEN, assert_fits, frozen, stderr_lines};

/// `jitterscope ARGS` with `COLUMNS=100`, which must succeed; its stdout.
fn run_ok(args: &[&str]) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_jitterscope"))
        .args(args)
        .env("COLUMNS", "100")
        .output()
        .expect("the binary runs");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{args:?}: {:?}",
        stderr_lines(&out)
    );
    String::from_utf8(out.stdout).expect("UTF-8")
}

fn report(format: &[&str]) -> String {
    let mut args = vec!["report", FROZEN];
    args.extend(format);
    run_ok(&args)
}

#[test]
fn the_fixture_holds_every_probe_kind() {
    let text = std::fs::read_to_string(FROZEN).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut kinds: Vec<&str> = v["probes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["probe"].as_str().unwrap())
        .collect();
    kinds.dedup();
    // Every kind this version knows, in table order: a new kind fails here until the
    // fixture holds an entry of it (scripts/make-fixture).
    let all: Vec<&str> = Kind::ALL.iter().map(|k| k.name()).collect();
    assert_eq!(kinds, all);
    for e in &frozen().probes {
        let kind = e.view().expect("a known kind").kind();
        assert!(Kind::ALL.contains(&kind), "{kind:?} is in Kind::ALL");
    }
    // What the views must show: the event log, the largest events, a starred one-way
    // row, and the main job's audit.
    assert!(v["probes"][0]["events"].is_object(), "noise's event log");
    assert!(!v["probes"][0]["largest"].as_array().unwrap().is_empty());
    let pp = v["probes"].as_array().unwrap().iter();
    let valid: Vec<bool> = pp
        .filter(|p| p["probe"] == "pingpong")
        .map(|p| p["one_way_valid"].as_bool().unwrap())
        .collect();
    assert!(valid.contains(&true) && valid.contains(&false), "{valid:?}");
    assert!(v["host"]["audit"]["findings"].as_array().unwrap().len() > 3);
}

/// Read and written again, the fixture is the same document: every field this version
/// writes is one the fixture holds, and back.
#[test]
fn json_round_trip_is_exact() {
    let text = std::fs::read_to_string(FROZEN).unwrap();
    let r = ResultFile::parse(&text).unwrap();
    let original: serde_json::Value = serde_json::from_str(&text).unwrap();
    let written: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
    assert_eq!(written, original);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("again.json");
    r.write_atomic(&path).unwrap();
    assert_eq!(ResultFile::read(&path).unwrap(), r);
}

#[test]
fn terminal_tables() {
    let text = report(&[]);
    assert_fits(&text, 100);
    insta::assert_snapshot!("table", text);
}

#[test]
fn markdown() {
    insta::assert_snapshot!("markdown", report(&["--format", "markdown"]));
}

#[test]
fn csv_summary_and_buckets() {
    insta::assert_snapshot!("csv", report(&["--format", "csv"]));
    // Every bucket of every histogram is thousands of rows: the header, the first rows,
    // and per distribution its number of buckets and their total count.
    let buckets = report(&["--format", "csv", "--buckets"]);
    let mut lines = buckets.lines();
    let mut text: Vec<String> = lines.by_ref().take(20).map(str::to_string).collect();
    let mut totals: Vec<(String, u64, u64)> = Vec::new();
    for line in buckets.lines().skip(1) {
        let (dist, count) = line.rsplit_once(',').unwrap();
        let dist = dist.rsplit_once(',').unwrap().0.to_string();
        let count: u64 = count.parse().unwrap();
        match totals.last_mut() {
            Some(t) if t.0 == dist => (t.1, t.2) = (t.1 + 1, t.2 + count),
            _ => totals.push((dist, 1, count)),
        }
    }
    text.push(format!(
        "… {} rows in all; per distribution:",
        buckets.lines().count() - 1
    ));
    text.extend(
        totals
            .iter()
            .map(|(d, n, c)| format!("{d}: {n} buckets, {c} samples")),
    );
    insta::assert_snapshot!("csv_buckets", text.join("\n"));
}

#[test]
fn hdr_interval_log() {
    insta::assert_snapshot!("hdr", report(&["--format", "hdr"]));
}

#[test]
fn verdict_and_audit() {
    let r = frozen();
    insta::assert_snapshot!("verdict", verdict::text(&verdict::verdict(&r)));
    let audit = r.host.audit.as_ref().expect("the main job's audit");
    insta::assert_snapshot!("audit", audit_table::render(audit));
}

/// Whether plots can be drawn here (a TrueType font is installed).
/// Each inline `<svg …>…</svg>` as `<svg>[plot]</svg>`: its layout follows the font.
fn without_svg(html: &str) -> String {
    let mut out = String::new();
    let mut rest = html;
    while let Some(at) = rest.find("<svg") {
        out.push_str(&rest[..at]);
        let end = rest[at..].find("</svg>").expect("a closed svg") + at + "</svg>".len();
        out.push_str("<svg>[plot]</svg>");
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

#[test]
fn html_page() {
    insta::assert_snapshot!("html", without_svg(&report(&["--format", "html"])));
}

/// Every file `--format gnuplot` writes, in the order listed, one after another.
#[test]
fn gnuplot_data_and_script() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("gp");
    let listed = report(&["--format", "gnuplot", "-o", dir.to_str().unwrap()]);
    let mut all = String::new();
    for line in listed.lines() {
        let path = Path::new(line);
        assert!(path.starts_with(&dir), "{line}");
        let name = path.strip_prefix(&dir).unwrap().display().to_string();
        all.push_str(&format!("==> {name} <==\n"));
        all.push_str(&std::fs::read_to_string(path).unwrap());
    }
    insta::assert_snapshot!("gnuplot", all);
}

/// What each plot is: name, title and size in pixels (the SVG itself depends on the font).
#[test]
fn plot_descriptions() {
    let plots = plot::result_plots(&[(PathBuf::from(FROZEN), frozen())]).unwrap();
    let text: Vec<String> = plots
        .iter()
        .map(|p| format!("{} {:?}: {}", p.name, p.size(), p.title))
        .collect();
    insta::assert_snapshot!("plots", text.join("\n"));
    let r = frozen();
    let runs = [("before".to_string(), &r), ("after".to_string(), &r)];
    let overlays = plot::overlay_plots(&runs).unwrap();
    let text: Vec<String> = overlays
        .iter()
        .map(|p| format!("{} {:?}: {}", p.name, p.size(), p.title))
        .collect();
    insta::assert_snapshot!("overlay_plots", text.join("\n"));
}

/// One line per figure description (`report::result::figure`), what both backends draw from:
/// its name, what it shows and the extent of each line's data (the gnuplot snapshot holds
/// every row).
fn describe(figures: &[Figure]) -> String {
    let mut out = Vec::new();
    for f in figures {
        let what = match &f.chart {
            Chart::Percentiles { dist, lines } => {
                let l: Vec<String> = (lines.iter())
                    .map(|l| {
                        let last = l.data.last().unwrap();
                        let (n, x, v) = (l.data.len(), last.x, last.value_ns);
                        format!("{:?}: {n} rows to x {x} at {v} ns", l.label)
                    })
                    .collect();
                format!("percentiles of {dist:?}; {}", l.join("; "))
            }
            Chart::Histogram { dist, lines } => {
                let l: Vec<String> = (lines.iter())
                    .map(|l| {
                        let (lo, hi) = (l.data[0].lo_ns, l.data.last().unwrap().hi_ns);
                        let n: u64 = l.data.iter().map(|b| b.count).sum();
                        let bins = l.data.len();
                        format!(
                            "{:?}: {bins} bins {lo:.1}..{hi:.1} ns, {n} samples",
                            l.label
                        )
                    })
                    .collect();
                format!(
                    "histogram of {} {} {}; {}",
                    dist.probe,
                    dist.key,
                    dist.metric,
                    l.join("; ")
                )
            }
            Chart::Series { id, lines, largest } => {
                let l: Vec<String> = (lines.iter())
                    .map(|l| {
                        let d = &l.data;
                        let top = d.max_ns.iter().max().unwrap_or(&0);
                        let (n, every) = (d.max_ns.len(), d.interval_ns);
                        format!("{:?}: {n} intervals of {every} ns, top {top} ns", l.label)
                    })
                    .collect();
                format!(
                    "series {id:?}; {}; {} largest events",
                    l.join("; "),
                    largest.len()
                )
            }
            Chart::Heatmap(m) => format!("heat map {m:?}"),
        };
        out.push(format!("{} [{}] {what}", f.name, f.source));
    }
    out.join("\n")
}

#[test]
fn figure_descriptions() {
    let figures = describe::result_figures(&[(PathBuf::from(FROZEN), frozen())]).unwrap();
    insta::assert_snapshot!("figures", describe(&figures));
    let r = frozen();
    let worse_r = worse(&r);
    let runs = [("before".to_string(), &r), ("after".to_string(), &worse_r)];
    let overlays = describe::overlay_figures(&runs).unwrap();
    insta::assert_snapshot!("overlay_figures", describe(&overlays));
}

/// The fixture made worse: noise loses three times as much each interval, getppid costs
/// twice as much, and the kernel differs.
fn worse(r: &ResultFile) -> ResultFile {
    let mut v = serde_json::to_value(r).unwrap();
    v["host"]["kernel_release"] = "6.99.0-worse".into();
    for p in v["probes"].as_array_mut().unwrap() {
        if p["probe"] == "noise" {
            for field in ["max_ns", "total_ns"] {
                for x in p["series"][field].as_array_mut().unwrap() {
                    *x = (x.as_u64().unwrap() * 3).into();
                }
            }
        }
        if p["probe"] == "syscalls" && p["call"] == "getppid" {
            let h = LatencyHistogram::decode_base64(p["histogram"]["data"].as_str().unwrap());
            let mut doubled = LatencyHistogram::new();
            for b in h.unwrap().iter_recorded() {
                for _ in 0..b.count_at_value() {
                    doubled.record(b.value_iterated_to() * 2);
                }
            }
            p["summary"] = serde_json::to_value(doubled.summary()).unwrap();
            p["histogram"] = serde_json::to_value(HistogramRecord::from_hist(&doubled)).unwrap();
        }
    }
    serde_json::from_value(v).unwrap()
}

#[test]
fn compare_with_a_worse_copy() {
    let tmp = tempfile::tempdir().unwrap();
    let after = tmp.path().join("after.json");
    worse(&frozen()).write_atomic(&after).unwrap();
    let (a, b) = (FROZEN, after.to_str().unwrap());
    let tmp_s = tmp.path().to_str().unwrap();
    for (name, format) in [("table", "table"), ("markdown", "markdown"), ("csv", "csv")] {
        let args = ["compare", a, b, "--format", format];
        let text = run_ok(&args).replace(tmp_s, "[TMP]");
        if format == "table" {
            assert_fits(&text, 100);
        }
        insta::assert_snapshot!(format!("compare_{name}"), text);
    }
    // The same through the library, so the rows are checked beside their words.
    let (before, worse_r) = (frozen(), ResultFile::read(&after).unwrap());
    let runs = [
        Run {
            label: "before".into(),
            path: PathBuf::from(a),
            result: &before,
        },
        Run {
            label: "after".into(),
            path: after.clone(),
            result: &worse_r,
        },
    ];
    let c = compare::compare(&runs).unwrap();
    let getppid = c.rows.iter().find(|r| r.key == "getppid").unwrap();
    let judged = getppid.judgements[1].as_ref().unwrap();
    assert_eq!(judged.verdict, compare::Verdict::Worse, "{judged:?}");
    assert!(c.differences.iter().any(|d| d.contains("6.99.0-worse")));
    let html = run_ok(&["compare", a, b, "--format", "html"]).replace(tmp_s, "[TMP]");
    insta::assert_snapshot!("compare_html", without_svg(&html));
}

/// Issue 16, item 6: a main job's stored verdict is what `report` prints (not one made
/// again), it survives the round trip, and a file without one (the fixture, as older
/// versions wrote it) still gets the verdict made from the file.
#[test]
fn report_prints_the_stored_verdict() {
    let mut r = frozen();
    assert!(r.verdict.is_none(), "the fixture predates stored verdicts");
    let made = verdict::verdict(&r);
    let without = run_ok(&["report", FROZEN]);
    // The verdict's lines are wrapped to the terminal: compare the words.
    let words = |t: &str| t.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        words(&without).contains(&words(&made.lines[0])),
        "{without}"
    );
    let mut stored = made.clone();
    stored
        .lines
        .insert(0, "A stored line no analysis would write.".into());
    r.verdict = Some(stored.clone());
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("main.json");
    r.write_atomic(&path).unwrap();
    // serde_json may round a share's last bit: the words and fixes read back, the
    // shares to 1e-12.
    let back = ResultFile::read(&path).unwrap().verdict.expect("stored");
    assert_eq!(back.lines, stored.lines);
    for (a, b) in back.fixes.iter().zip(&stored.fixes) {
        assert_eq!((&a.finding, &a.fix), (&b.finding, &b.fix));
        match (a.share, b.share) {
            (Some(x), Some(y)) => assert!((x - y).abs() < 1e-12),
            (x, y) => assert_eq!(x, y),
        }
    }
    let with = run_ok(&["report", path.to_str().unwrap()]);
    assert!(
        with.contains("A stored line no analysis would write."),
        "{with}"
    );
    for f in &made.fixes {
        // Each fix's command on a line of its own, whole, ready to paste (what is said
        // of it after its " (" on the next).
        let command = f.fix.split(" (").next().unwrap_or_default();
        assert!(with.lines().any(|l| l.trim() == command), "{}", f.fix);
    }
    let html = run_ok(&["report", path.to_str().unwrap(), "--format", "html"]);
    let at = |s: &str| html.find(s).unwrap_or_else(|| panic!("{s} missing"));
    assert!(at("A stored line no analysis would write.") < at("<h2>noise: CPU 1</h2>"));
    assert!(at("<h2>noise: CPU 1</h2>") < at("<h2>timer: CPU 1</h2>"));
    assert!(at("<h2>timer: CPU 1</h2>") < at("<h2>Measurements</h2>"));
    assert!(at("<h2>Measurements</h2>") < at("<h2>Distributions</h2>"));
    assert!(at("<h2>Distributions</h2>") < at("<h2>Run, host and audit</h2>"));
    // --top: the largest events with their times.
    let top = run_ok(&["report", FROZEN, "--top", "3"]);
    assert!(
        top.contains("noise CPU 1: the 3 largest of 64 kept"),
        "{top}"
    );
}
