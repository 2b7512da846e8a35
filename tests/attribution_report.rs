//! Issue 13, the last items: the HTML page shows each traced CPU's bar of cause shares,
//! its cause table and its largest gaps part by part; `compare` compares cause shares
//! between runs in every format. The runs are the frozen fixture's noise and timer
//! entries with an `attribution` of known figures written in (nothing is measured), so
//! that every cell can be checked against what the JSON holds.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::util::{frozen_part, run_ok};

/// A cause row of the JSON: its total is its share of `interrupted_ns`.
fn cause(kind: &str, name: &str, share_pct: f64, interrupted_ns: u64) -> Value {
    json!({
        "kind": kind, "cause": name, "gaps": 10, "occurrences": 12,
        "total_ns": (share_pct / 100.0 * interrupted_ns as f64).round() as u64,
        "share_pct": share_pct, "median_ns": 2500, "max_ns": 9000,
        "period_ns": if kind == "vector" { json!(4_000_000) } else { Value::Null },
    })
}

const INTERRUPTED_NS: u64 = 10_000_000;

/// Run A: the tick, an IRQ, a task, three small causes (grouped in the bar as "other (3
/// causes)", one with markup in its name) and the unaccounted time: 100 % in all.
pub(crate) fn causes_a() -> Vec<Value> {
    let n = INTERRUPTED_NS;
    vec![
        cause("vector", "vector local_timer: tick_nohz_handler", 50.0, n),
        cause("irq", "irq 36 virtio1-req.0", 25.0, n),
        cause("unaccounted", "unaccounted", 10.0, n),
        cause("task", "task rustc:111 (SCHED_OTHER nice 10)", 13.0, n),
        cause("softirq", "softirq RCU", 1.0, n),
        cause("softirq", "softirq TIMER", 0.6, n),
        cause("task", "task <b>evil</b>:5 (SCHED_OTHER nice 0)", 0.4, n),
    ]
}

/// Run B: the tick down to 30 %, no IRQ 36, the task (another pid) up, a new softirq.
fn causes_b() -> Vec<Value> {
    let n = INTERRUPTED_NS;
    vec![
        cause("task", "task rustc:222 (SCHED_OTHER nice 10)", 40.0, n),
        cause("vector", "vector local_timer: tick_nohz_handler", 30.0, n),
        cause("unaccounted", "unaccounted", 25.0, n),
        cause("softirq", "softirq NET_RX", 5.0, n),
    ]
}

/// The largest gaps of run A: two, their parts in time order.
pub(crate) fn top_a() -> Value {
    json!([
        { "start_ns": 1_250_000_000u64, "start_tsc": 123456789u64, "duration_ns": 52_000,
          "parts": [
            { "kind": "vector", "cause": "vector local_timer: tick_nohz_handler",
              "offset_ns": 1_000, "duration_ns": 9_000 },
            { "kind": "task", "cause": "task rustc:111 (SCHED_OTHER nice 10)",
              "offset_ns": 11_000, "duration_ns": 40_000 },
            { "kind": "unaccounted", "cause": "unaccounted", "offset_ns": 0, "duration_ns": 3_000 }
          ] },
        { "start_ns": 2_500_000_000u64, "start_tsc": 223456789u64, "duration_ns": 20_000,
          "parts": [
            { "kind": "irq", "cause": "irq 36 virtio1-req.0", "offset_ns": 500, "duration_ns": 19_500 }
          ] }
    ])
}

pub(crate) fn attribution(causes: Vec<Value>, top: Value) -> Value {
    json!({
        "method": "test", "gaps": 100, "interrupted_ns": INTERRUPTED_NS,
        "causes": causes, "top": top, "coincident_gaps": 0, "coincidence_window_ns": 5000,
        "unattributed_gaps": 0, "events_read": 1000, "events_lost": 0
    })
}

/// The frozen fixture's noise and timer entries at `path`, each given `a` (none: as
/// measured without a trace).
fn traced(path: &Path, a: Option<Value>) -> PathBuf {
    traced_kinds(path, &["noise", "timer"], a)
}

/// The frozen fixture's entries of `kinds` at `path`, each given `a`.
pub(crate) fn traced_kinds(path: &Path, kinds: &[&str], a: Option<Value>) -> PathBuf {
    frozen_part(path, kinds);
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    if let Some(a) = a {
        for p in v["probes"].as_array_mut().unwrap() {
            p["attribution"] = a.clone();
        }
    }
    std::fs::write(path, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    path.to_path_buf()
}

/// The cells of each row of the HTML table whose caption starts with `caption`, tags
/// left in the cells' text escaped as the page has it.
fn html_table(html: &str, caption: &str) -> Vec<Vec<String>> {
    let at = html
        .find(&format!("<caption>{caption}"))
        .unwrap_or_else(|| panic!("no table {caption}"));
    let body = &html[at..];
    let body = &body[body.find("<tbody>").unwrap()..body.find("</tbody>").unwrap()];
    body.split("<tr>")
        .skip(1)
        .map(|row| {
            row.split("<td")
                .skip(1)
                .map(|c| {
                    let c = &c[c.find('>').unwrap() + 1..];
                    c[..c.find("</td>").unwrap()].to_string()
                })
                .collect()
        })
        .collect()
}

/// The legend entries ("12.3 %  cause") and the bar's segment widths of the figure
/// captioned `caption`.
fn bar(html: &str, caption: &str) -> (Vec<(f64, String)>, Vec<f64>) {
    let at = html
        .find(&format!("<figcaption>{caption}"))
        .expect("the bar");
    let svg = &html[html[..at].rfind("<svg").unwrap()..at];
    let svg = &svg[..svg.find("</svg>").unwrap()];
    let mut legend = Vec::new();
    for t in svg.split("<text").skip(2) {
        let text = t[t.find('>').unwrap() + 1..t.find("</text>").unwrap()].trim();
        // Legend entries hold the share and the cause; the segments' labels only a share.
        if let Some((pct, name)) = text.split_once(" %  ") {
            legend.push((pct.parse().unwrap(), name.to_string()));
        }
    }
    let attr = |tag: &str, name: &str| -> f64 {
        let i = tag.find(&format!(" {name}=\"")).unwrap() + name.len() + 3;
        tag[i..i + tag[i..].find('"').unwrap()].parse().unwrap()
    };
    let widths = (svg.split("<rect").skip(2))
        .filter(|r| !r.contains("fill=\"none\"") && attr(r, "height") == 34.0)
        .map(|r| attr(r, "width"))
        .collect();
    (legend, widths)
}

#[test]
fn the_page_shows_each_traced_cpus_causes() {
    let dir = tempfile::tempdir().unwrap();
    let a = traced(
        &dir.path().join("a.json"),
        Some(attribution(causes_a(), top_a())),
    );
    let page = dir.path().join("a.html");
    run_ok(&[
        "report",
        a.to_str().unwrap(),
        "--format",
        "html",
        "-o",
        page.to_str().unwrap(),
    ]);
    let html = std::fs::read_to_string(&page).unwrap();
    // Markup in a cause is text, everywhere (the SVG's legend included).
    assert!(!html.contains("<b>evil"), "unescaped cause");
    assert!(html.contains("task &lt;b&gt;evil&lt;/b&gt;:5"));

    // In each kind's section (issue 29: the CPU's fold, open for a run of one CPU), after
    // its plots and before the tables of figures.
    let pos = |h: &str| html.find(h).unwrap_or_else(|| panic!("{h}"));
    let noise = pos("<h2>noise: CPU 1</h2>");
    let timer = pos("<h2>timer: CPU 1</h2>");
    let causes = pos("noise CPU 1: the causes of 100 gaps");
    assert!(noise < causes && causes < timer && timer < pos("<h2>Measurements</h2>"));
    assert!(
        html[noise..causes].contains("<details open>"),
        "the fold is open"
    );

    // The cause table: every stored row, in order, in µs and %.
    let rows = html_table(&html, "noise CPU 1: the causes of 100 gaps");
    let stored = causes_a();
    assert_eq!(rows.len(), stored.len());
    for (row, c) in rows.iter().zip(&stored) {
        let name = c["cause"]
            .as_str()
            .unwrap()
            .replace('<', "&lt;")
            .replace('>', "&gt;");
        assert_eq!(row[0], name);
        assert_eq!(row[1], c["kind"].as_str().unwrap());
        let total_us = c["total_ns"].as_u64().unwrap() as f64 / 1e3;
        assert_eq!(row[4], format!("{total_us:.2}"), "{row:?}");
        assert_eq!(row[5], format!("{:.1}", c["share_pct"].as_f64().unwrap()));
        let period = if c["kind"] == "vector" { "4.000" } else { "-" };
        assert_eq!(row[8], period);
    }
    assert!(html.contains("<th class=\"num\">share (%)</th>"));

    // The largest gaps: each gap's start and duration on its first row, then its parts
    // in the stored order, offset from the gap's start (none for the unaccounted part).
    let rows = html_table(&html, "noise CPU 1: the 2 largest gaps");
    let cells: Vec<[&str; 6]> = rows
        .iter()
        .map(|r| std::array::from_fn(|i| r[i].as_str()))
        .collect();
    assert_eq!(
        cells,
        [
            [
                "1",
                "1.250000",
                "52.00",
                "vector local_timer: tick_nohz_handler",
                "1.00",
                "9.00"
            ],
            [
                "",
                "",
                "",
                "task rustc:111 (SCHED_OTHER nice 10)",
                "11.00",
                "40.00"
            ],
            ["", "", "", "unaccounted", "-", "3.00"],
            [
                "2",
                "2.500000",
                "20.00",
                "irq 36 virtio1-req.0",
                "0.50",
                "19.50"
            ],
        ]
    );

    // The bar: the stored shares, the small ones as one "other", the unaccounted last;
    // the segments as wide as their shares, and adding up to 100 %.
    let (legend, widths) = bar(&html, "noise CPU 1: share of interrupted time by cause");
    let names: Vec<&str> = legend.iter().map(|l| l.1.as_str()).collect();
    assert_eq!(
        names,
        [
            "vector local_timer: tick_nohz_handler",
            "irq 36 virtio1-req.0",
            "task rustc:111 (SCHED_OTHER nice 10)",
            "other (3 causes)",
            "unaccounted"
        ]
    );
    let shares: Vec<f64> = legend.iter().map(|l| l.0).collect();
    assert_eq!(shares, [50.0, 25.0, 13.0, 2.0, 10.0]);
    let sum: f64 = shares.iter().sum();
    assert!((sum - 100.0).abs() <= 0.5, "{sum}");
    let whole: f64 = widths.iter().sum();
    assert_eq!(widths.len(), shares.len(), "{widths:?}");
    for (w, s) in widths.iter().zip(&shares) {
        assert!(
            (w / whole * 100.0 - s).abs() < 0.3,
            "{w} px of {whole} for {s} %"
        );
    }
    assert_eq!(
        html.matches("<figcaption>noise CPU 1: share of interrupted time by cause (%)")
            .count(),
        1
    );
}

/// compare A B C: A and B traced, C not.
fn three_runs(dir: &Path) -> [String; 3] {
    let a = traced(&dir.join("a.json"), Some(attribution(causes_a(), top_a())));
    let b = traced(
        &dir.join("b.json"),
        Some(attribution(causes_b(), json!([]))),
    );
    let c = traced(&dir.join("c.json"), None);
    [a, b, c].map(|p| p.to_str().unwrap().to_string())
}

fn compare(files: &[String; 3], format: &str) -> String {
    let mut args = vec!["compare"];
    args.extend(files.iter().map(String::as_str));
    args.extend([
        "--label", "A", "--label", "B", "--label", "C", "--format", format,
    ]);
    run_ok(&args)
}

/// The expected cells (share in A, share in B, change in pp) of each cause as compare
/// names it: matched by name with a task's pid left out.
const EXPECTED: [(&str, &str, &str, &str); 8] = [
    (
        "vector local_timer: tick_nohz_handler",
        "50.0",
        "30.0",
        "-20.0",
    ),
    ("task rustc (SCHED_OTHER nice 10)", "13.0", "40.0", "+27.0"),
    ("irq 36 virtio1-req.0", "25.0", "-", "-"),
    ("softirq NET_RX", "-", "5.0", "-"),
    ("softirq RCU", "1.0", "-", "-"),
    ("softirq TIMER", "0.6", "-", "-"),
    ("task <b>evil</b> (SCHED_OTHER nice 0)", "0.4", "-", "-"),
    ("unaccounted", "10.0", "25.0", "+15.0"),
];

/// Rows of a cause grid as text cells: (cause, run, share, change, time); a cause's
/// name carried down to its later runs' rows.
fn grid_rows(rows: Vec<Vec<String>>) -> Vec<[String; 5]> {
    let mut name = String::new();
    rows.into_iter()
        .map(|r| {
            if !r[0].is_empty() {
                name = r[0].clone();
            }
            [
                name.clone(),
                r[1].clone(),
                r[2].clone(),
                r[3].clone(),
                r[4].clone(),
            ]
        })
        .collect()
}

/// Each expected cause has its A and B rows with the expected share and change, and a
/// time per second of run that is its total over the entry's runtime.
fn check_grid(rows: &[[String; 5]], unescape: &dyn Fn(&str) -> String, runtime_s: f64) {
    for (name, sa, sb, pp) in EXPECTED {
        let find = |run: &str| {
            rows.iter()
                .find(|r| unescape(&r[0]) == name && r[1] == run)
                .unwrap_or_else(|| panic!("{name} {run}: {rows:?}"))
        };
        let (a, b) = (find("A"), find("B"));
        assert_eq!(
            (a[2].as_str(), b[2].as_str(), b[3].as_str()),
            (sa, sb, pp),
            "{name}"
        );
        assert_eq!(a[3], "", "the baseline has no change");
        if sb != "-" {
            let ns = sb.parse::<f64>().unwrap() / 100.0 * INTERRUPTED_NS as f64;
            let per_s: f64 = b[4].parse().unwrap();
            assert!(
                (per_s - ns / runtime_s / 1e3).abs() < 0.06,
                "{name}: {per_s}"
            );
        }
    }
    assert!(!rows.iter().any(|r| r[1] == "C"), "C has no attribution");
}

fn noise_runtime_s() -> f64 {
    let r = crate::util::frozen();
    let e = r
        .entries::<jitterscope::probes::noise::NoiseEntry>()
        .next()
        .unwrap();
    e.runtime_ns as f64 / 1e9
}

#[test]
fn compare_shows_cause_shares_in_every_format() {
    let dir = tempfile::tempdir().unwrap();
    let files = three_runs(dir.path());
    let runtime_s = noise_runtime_s();
    let missing = "noise cpu1: C has no attribution (it was measured without --trace)";

    // The terminal, at 100 columns: every line fits; the missing run said once.
    let text = {
        let mut cmd = std::process::Command::new(crate::util::bin());
        cmd.arg("compare").args(&files);
        cmd.args(["--label", "A", "--label", "B", "--label", "C"]);
        let o = cmd.env("COLUMNS", "100").output().unwrap();
        assert_eq!(o.status.code(), Some(0));
        String::from_utf8(o.stdout).unwrap()
    };
    for l in text.lines() {
        assert!(l.chars().count() <= 100, "wider than 100 columns: {l}");
    }
    assert_eq!(text.matches(missing).count(), 1, "{text}");
    let at = text.find("noise cpu1: causes").expect("the noise grid");
    let grid_text = &text[at..];
    let grid_text = &grid_text[..grid_text.find("\ntimer cpu1: causes").unwrap()];
    let rows: Vec<Vec<String>> = (grid_text.lines())
        .filter(|l| l.ends_with(' ') && l.starts_with(' ') && !l.contains("share (%)"))
        .map(|l| {
            // cause (left), then run, share, change, time right-aligned in their columns.
            let cells: Vec<&str> = l
                .split("  ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .collect();
            let n = cells.len();
            let (name, rest) = match n {
                5 => (cells[0].to_string(), &cells[1..]),
                4 if l.starts_with("  ") => (String::new(), &cells[..]),
                _ => (cells[0].to_string(), &cells[1..]),
            };
            let mut r = vec![name];
            r.extend(rest.iter().map(|s| s.to_string()));
            if r.len() == 4 {
                // The baseline's change cell is blank.
                r.insert(3, String::new());
            }
            r
        })
        .collect();
    check_grid(&grid_rows(rows), &|s| s.to_string(), runtime_s);

    // Markdown.
    let md = compare(&files, "markdown");
    assert!(md.contains(&format!("- {missing}")), "{md}");
    let at = md.find("### noise cpu1: causes").unwrap();
    let rows: Vec<Vec<String>> = (md[at..].lines())
        .skip_while(|l| !l.starts_with("| cause"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            l.trim_matches('|')
                .split(" | ")
                .map(|c| c.trim().to_string())
                .collect()
        })
        .collect();
    check_grid(&grid_rows(rows), &|s| s.to_string(), runtime_s);

    // CSV: raw figures, empty where a run did not see a cause.
    let csv_text = compare(&files, "csv");
    let records = crate::report::parse_csv(&csv_text);
    let causes: Vec<&std::collections::HashMap<String, String>> = records
        .iter()
        .filter(|r| r["metric"] == "cause" && r["probe"] == "noise")
        .collect();
    let get = |cause: &str, run: &str| {
        *causes
            .iter()
            .find(|r| r["cause"] == cause && r["run"] == run)
            .unwrap_or_else(|| panic!("{cause} {run}"))
    };
    for (name, sa, sb, pp) in EXPECTED {
        let (a, b) = (get(name, "A"), get(name, "B"));
        let pct = |s: &str| {
            if s == "-" {
                String::new()
            } else {
                format!("{s}00")
            }
        };
        assert_eq!(a["share_pct"], pct(sa), "{name}");
        assert_eq!(b["share_pct"], pct(sb), "{name}");
        let change = if pp == "-" {
            String::new()
        } else {
            format!("{}00", pp.trim_start_matches('+'))
        };
        assert_eq!(b["share_change_pp"], change, "{name}");
    }
    assert_eq!(
        get("vector local_timer: tick_nohz_handler", "A")["cause_kind"],
        "vector"
    );
    let c_row = causes.iter().find(|r| r["run"] == "C").expect("C's row");
    assert_eq!(c_row["basis"], missing);

    // HTML: the same grid, escaped.
    let html = compare(&files, "html");
    assert!(!html.contains("<b>evil"));
    assert!(html.contains(missing));
    let rows = html_table(&html, "noise cpu1: causes: share of interrupted time (%)");
    let unescape = |s: &str| s.replace("&lt;", "<").replace("&gt;", ">");
    check_grid(&grid_rows(rows), &unescape, runtime_s);
}

/// Runs without any attribution compare as before: no causes section, no line about it.
#[test]
fn compare_of_untraced_runs_says_nothing_of_causes() {
    let dir = tempfile::tempdir().unwrap();
    let a = traced(&dir.path().join("a.json"), None);
    let b = traced(&dir.path().join("b.json"), None);
    let text = run_ok(&["compare", a.to_str().unwrap(), b.to_str().unwrap()]);
    assert!(
        !text.contains("causes") && !text.contains("attribution"),
        "{text}"
    );
}
