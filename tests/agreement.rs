//! Issue 16, item 1: one number per figure. The frozen fixture (a main-job result with an
//! entry of every probe kind, pingpong's spin one-way among them unconfirmed) is rendered
//! by the binary in every format: the terminal tables (`--wide`, every column), Markdown,
//! CSV, HTML, `compare` against itself (table, Markdown, CSV), the HdrHistogram log, and
//! the plots' descriptions. Every cell that states a figure of a distribution (count, min,
//! p50, p90, p99, p99.9, max, mean, MAD) must be that distribution's figure, converted
//! from the unit its header states, within the cell's own rounding; every output marks an
//! unconfirmed row the same way, and none gives it a verdict.
//!
//! The expected figures come from the JSON itself, not from the exporters' mapping: a
//! confirmed row's summary as stored, an unconfirmed one-way row the stored round trip
//! halved.

use std::collections::BTreeMap;
use std::path::PathBuf;

use jitterscope::report::export::describe;
use jitterscope::report::result::figure::Chart;
use jitterscope::stats::{LatencyHistogram, Summary};
use serde_json::Value;

use crate::util::{FROZEN, frozen, stderr_lines};

/// One distribution as the JSON holds it.
#[derive(Debug, Clone)]
struct Row {
    probe: String,
    key: String,
    metric: String,
    trusted: bool,
    s: Summary,
}

impl Row {
    /// The metric as every output that shows it marks it.
    fn label(&self) -> String {
        match self.trusted {
            true => self.metric.clone(),
            false => format!("{}*", self.metric),
        }
    }

    /// The figure a column states, in ns; `None` where nothing was recorded.
    fn figure(&self, stat: &str) -> Option<f64> {
        let s = &self.s;
        let f = |v: Option<u64>| v.map(|v| v as f64);
        match stat {
            "count" => Some(s.count as f64),
            "min" => f(s.min_ns),
            "p50" => f(s.p50_ns),
            "p90" => f(s.p90_ns),
            "p99" => f(s.p99_ns),
            "p99.9" => f(s.p999_ns),
            "p99.99" => f(s.p9999_ns),
            "max" => f(s.max_ns),
            "mean" => s.mean_ns,
            "MAD" => f(s.mad_ns),
            other => panic!("no figure {other}"),
        }
    }
}

fn summary(v: &Value) -> Summary {
    at(&v["summary"])
}

/// A summary that is the value itself.
fn at(v: &Value) -> Summary {
    serde_json::from_value(v.clone()).expect("a summary")
}

/// The round trip halved, every time rounded down: what an unconfirmed one-way row is.
fn halved(mut s: Summary) -> Summary {
    for v in [
        &mut s.min_ns,
        &mut s.p20_ns,
        &mut s.p50_ns,
        &mut s.p80_ns,
        &mut s.p90_ns,
        &mut s.p99_ns,
        &mut s.p999_ns,
        &mut s.p9999_ns,
        &mut s.max_ns,
        &mut s.mad_ns,
    ] {
        *v = v.map(|v| v / 2);
    }
    s.mean_ns = s.mean_ns.map(|m| m / 2.0);
    s.sum_ns /= 2;
    s
}

/// Every distribution of the fixture, read from the JSON.
fn expected() -> Vec<Row> {
    let v: Value = serde_json::from_str(&std::fs::read_to_string(FROZEN).unwrap()).unwrap();
    let mut out = Vec::new();
    let mut push = |probe: &str, key: String, metric: &str, trusted: bool, s: Summary| {
        out.push(Row {
            probe: probe.into(),
            key,
            metric: metric.into(),
            trusted,
            s,
        })
    };
    for p in v["probes"].as_array().unwrap() {
        let cpu = &p["cpu"];
        match p["probe"].as_str().unwrap() {
            "noise" => push(
                "noise",
                format!("cpu{cpu}"),
                "interruption",
                true,
                summary(p),
            ),
            "timer" => {
                push("timer", format!("cpu{cpu}"), "latency", true, summary(p));
                let c = summary(&p["corrected"]);
                push("timer", format!("cpu{cpu}"), "latency-corrected", true, c);
            }
            "pingpong" => {
                let mech = p["mechanism"].as_str().unwrap();
                let key = format!("{mech}:{}-{}", p["cpu_a"], p["cpu_b"]);
                let rtt = summary(&p["rtt"]);
                push("pingpong", key.clone(), "rtt", true, rtt.clone());
                match p["one_way_valid"].as_bool().unwrap() {
                    true => push("pingpong", key, "one-way", true, summary(&p["one_way"])),
                    false => push("pingpong", key, "one-way", false, halved(rtt)),
                }
            }
            "c2c" => {
                let key = format!("{}-{}", p["cpu_a"], p["cpu_b"]);
                push("c2c", key, "one-way", true, summary(p));
            }
            "queue" => {
                let key = format!("{}:cpu{cpu}", p["role"].as_str().unwrap());
                push(
                    "queue",
                    key.clone(),
                    "transit",
                    true,
                    summary(&p["transit"]),
                );
                let im = summary(&p["inter_message"]);
                push("queue", key, "inter-message", true, im);
            }
            "work" => {
                let key = format!(
                    "{}:{}:run{}",
                    p["action"].as_str().unwrap(),
                    p["role"].as_str().unwrap(),
                    p["run"]
                );
                push("work", key, "duration", true, summary(p));
            }
            "syscalls" => {
                let call = p["call"].as_str().unwrap().to_string();
                push("syscalls", call, "cost", true, summary(p));
            }
            "ptp" => {
                for m in p["methods"].as_array().unwrap() {
                    let key = format!(
                        "{}:{}",
                        p["device"].as_str().unwrap(),
                        m["method"].as_str().unwrap()
                    );
                    let cost = serde_json::from_value(m["cost"].clone()).unwrap();
                    push("ptp", key, "cost", true, cost);
                }
            }
            // The kernel tracers' entries: their distributions are summaries of their own.
            // The terminal shows timerlat's as a table of them; osnoise's and hwlat's tables
            // hold rtla's totals and counts, no figure of these distributions.
            "osnoise" => push(
                "osnoise",
                format!("cpu{cpu}"),
                "noise",
                true,
                at(&p["noise"]),
            ),
            "timerlat" => {
                for (metric, field) in [
                    ("irq", "irq"),
                    ("thread", "thread_latency"),
                    ("thread-part", "thread_part"),
                ] {
                    push("timerlat", format!("cpu{cpu}"), metric, true, at(&p[field]));
                }
            }
            "hwlat" => push("hwlat", format!("cpu{cpu}"), "gap", true, at(&p["latency"])),
            other => panic!("the fixture has no {other} entries"),
        }
    }
    assert!(out.iter().any(|r| !r.trusted), "an unconfirmed row");
    out
}

/// `jitterscope ARGS` at `COLUMNS=100`; its stdout.
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
    String::from_utf8(out.stdout).unwrap()
}

/// What a header states: the figure (`p50`), and ns per unit of its cells; `None` for a
/// column that states no figure of the distribution.
fn column(header: &str) -> Option<(&'static str, f64)> {
    let h = header.trim();
    let (name, unit) = match h.rsplit_once(" (") {
        Some((n, u)) => (n.trim(), u.trim_end_matches(')')),
        None => (h, ""),
    };
    let (name, unit) = match name.rsplit_once('_') {
        Some((n, "ns")) if unit.is_empty() => (n, "ns"),
        _ => (name, unit),
    };
    let stat = match name {
        "count" | "samples" => "count",
        "min" => "min",
        "p50" | "median" => "p50",
        "p90" => "p90",
        "p99" => "p99",
        "p99.9" | "p999" => "p99.9",
        "p99.99" | "p9999" => "p99.99",
        "max" => "max",
        "mean" => "mean",
        "MAD" | "mad" => "MAD",
        _ => return None,
    };
    let per = match unit {
        "" if stat == "count" => 1.0,
        "ns" => 1.0,
        "µs" => 1e3,
        _ => return None,
    };
    Some((stat, per))
}

/// Checks one cell against the row's figure: `-` or empty where nothing was recorded,
/// else the figure within half the cell's last digit (and a comparison's change, after
/// the figure, ignored).
fn check(what: &str, row: &Row, header: &str, cell: &str, checked: &mut usize) {
    let Some((stat, per)) = column(header) else {
        return;
    };
    let want = row.figure(stat);
    let text = cell.split_whitespace().next().unwrap_or("");
    let text = text.split('\u{a0}').next().unwrap_or("");
    match want {
        None => assert!(
            text.is_empty() || text == "-",
            "{what}: {} {} {header}: '{cell}' for no figure",
            row.key,
            row.metric
        ),
        Some(want) => {
            let got: f64 = text.parse().unwrap_or_else(|_| {
                panic!("{what}: {} {} {header}: '{cell}'", row.key, row.metric)
            });
            let decimals = text.split_once('.').map_or(0, |(_, d)| d.len());
            let mut tolerance = 0.5 * 10f64.powi(-(decimals as i32)) * per + 1e-6;
            // c2c's table holds the median of the per-sample figures (fractional ns), its
            // histogram the figures rounded to whole ns: half a ns apart at most.
            if row.probe == "c2c" {
                tolerance += 0.5;
            }
            assert!(
                (got * per - want).abs() <= tolerance,
                "{what}: {} {} {header}: '{cell}' is {} ns, the figure is {want} ns",
                row.key,
                row.metric,
                got * per
            );
            *checked += 1;
        }
    }
}

/// The rows of every Markdown table: (the `### heading` above it, header cells, cells).
fn markdown_tables(md: &str) -> Vec<(String, Vec<String>, Vec<Vec<String>>)> {
    let mut out: Vec<(String, Vec<String>, Vec<Vec<String>>)> = Vec::new();
    let mut heading = String::new();
    let mut in_table = false;
    for line in md.lines() {
        if let Some(h) = line.strip_prefix("### ") {
            heading = h.to_string();
        }
        if !line.starts_with('|') {
            in_table = false;
            continue;
        }
        let cells: Vec<String> = line
            .trim_matches('|')
            .split(" | ")
            .map(|c| c.trim().replace("\\|", "|"))
            .collect();
        if line.starts_with("|---") {
            continue;
        }
        match in_table {
            false => {
                out.push((heading.clone(), cells, Vec::new()));
                in_table = true;
            }
            true => out.last_mut().unwrap().2.push(cells),
        }
    }
    out
}

/// The text of each `<tag …>…</tag>` in `html`, in order.
fn elements<'a>(html: &'a str, tag: &str) -> Vec<&'a str> {
    let (open, close) = (format!("<{tag}"), format!("</{tag}>"));
    let mut out = Vec::new();
    let mut rest = html;
    while let Some(at) = rest.find(&open) {
        let after = &rest[at + open.len()..];
        // `<th` must not match `<thead`.
        if !after.starts_with(['>', ' ']) {
            rest = after;
            continue;
        }
        let start = after.find('>').unwrap() + 1;
        let end = after.find(&close).unwrap();
        out.push(&after[start..end]);
        rest = &after[end..];
    }
    out
}

fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&amp;", "&")
}

/// The HTML tables: caption, headers, rows of cells.
fn html_tables(html: &str) -> Vec<(String, Vec<String>, Vec<Vec<String>>)> {
    elements(html, "table")
        .into_iter()
        .map(|t| {
            let caption = elements(t, "caption")
                .first()
                .map_or(String::new(), |c| unescape(c));
            let heads = elements(t, "th").into_iter().map(unescape).collect();
            let rows = elements(t, "tr")
                .into_iter()
                .map(|r| {
                    elements(r, "td")
                        .into_iter()
                        .map(unescape)
                        .collect::<Vec<_>>()
                })
                .filter(|r| !r.is_empty())
                .collect();
            (caption, heads, rows)
        })
        .collect()
}

/// A terminal table's cells: split at runs of two or more spaces.
fn cells(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut spaces = 0;
    for c in line.trim().chars() {
        if c == ' ' {
            spaces += 1;
            continue;
        }
        if spaces >= 2 {
            out.push(std::mem::take(&mut cur));
        } else if spaces == 1 {
            cur.push(' ');
        }
        spaces = 0;
        cur.push(c);
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// The terminal's tables: for each, the line above it (its title), its header cells and
/// its rows' cells. Figures are right-aligned at the end of each row, so a row's cells
/// are matched to the header from the right.
fn terminal_tables(text: &str) -> Vec<(String, Vec<String>, Vec<Vec<String>>)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].starts_with('─') && i + 2 < lines.len() && lines[i + 2].starts_with('═') {
            let title = if i > 0 {
                lines[i - 1].to_string()
            } else {
                String::new()
            };
            let header = cells(lines[i + 1]);
            let mut rows = Vec::new();
            let mut j = i + 3;
            while j < lines.len() && !lines[j].is_empty() {
                if !lines[j].starts_with('─') {
                    rows.push(cells(lines[j]));
                } else if j + 1 < lines.len() && !lines[j + 1].starts_with(' ') {
                    break;
                }
                j += 1;
            }
            out.push((title, header, rows));
            i = j;
        } else {
            i += 1;
        }
    }
    out
}

/// Checks a table's row against `row`: every figure column, matched from the right.
fn check_right(what: &str, row: &Row, header: &[String], cells: &[String], n: &mut usize) {
    for (h, c) in header.iter().rev().zip(cells.iter().rev()) {
        check(what, row, h, c, n);
    }
}

#[test]
fn every_format_states_the_same_figures() {
    let rows = expected();
    let find = |probe: &str, key: &str, label: &str| -> &Row {
        rows.iter()
            .find(|r| r.probe == probe && r.key == key && r.label() == label)
            .unwrap_or_else(|| panic!("no row {probe} {key} {label}"))
    };
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();

    // CSV: every row, every figure column, and the mark.
    let csv = run_ok(&["report", FROZEN, "--format", "csv"]);
    let mut lines = csv.lines();
    let header: Vec<String> = lines.next().unwrap().split(',').map(String::from).collect();
    let mut n = 0;
    let mut csv_rows = 0;
    for line in lines {
        // Only the cpu field is ever quoted ("0,1"): join it back.
        let mut f: Vec<String> = Vec::new();
        let mut quoted = false;
        for part in line.split(',') {
            match quoted {
                true => {
                    let last = f.last_mut().unwrap();
                    last.push(',');
                    last.push_str(part.trim_end_matches('"'));
                    quoted = !part.ends_with('"');
                }
                false if part.starts_with('"') && !part.ends_with('"') => {
                    f.push(part.trim_start_matches('"').into());
                    quoted = true;
                }
                false => f.push(part.into()),
            }
        }
        let col = |name: &str| &f[header.iter().position(|h| h == name).unwrap()];
        let label = match col("trusted").as_str() {
            "true" => col("metric").clone(),
            _ => format!("{}*", col("metric")),
        };
        let row = find(col("probe"), col("key"), &label);
        for (h, c) in header.iter().zip(&f) {
            check("csv", row, h, c, &mut n);
        }
        csv_rows += 1;
    }
    assert_eq!(csv_rows, rows.len());
    seen.insert("csv", n);

    // Markdown: a table per kind, a row per distribution.
    let md = run_ok(&["report", FROZEN, "--format", "markdown"]);
    let mut n = 0;
    let mut md_rows = 0;
    for (probe, head, body) in markdown_tables(&md) {
        for cells in body {
            let row = find(&probe, &cells[0], &cells[1]);
            for (h, c) in head.iter().zip(&cells) {
                check("markdown", row, h, c, &mut n);
            }
            md_rows += 1;
        }
    }
    assert_eq!(md_rows, rows.len());
    seen.insert("markdown", n);

    // HTML: the summary tables (captioned "probe: summary …").
    let html = run_ok(&["report", FROZEN, "--format", "html"]);
    let mut n = 0;
    let mut html_rows = 0;
    for (caption, head, body) in html_tables(&html) {
        let Some((probe, _)) = caption.split_once(": summary") else {
            continue;
        };
        for cells in body {
            let row = find(probe, &cells[0], &cells[1]);
            for (h, c) in head.iter().zip(&cells) {
                check("html", row, h, c, &mut n);
            }
            html_rows += 1;
        }
    }
    assert_eq!(html_rows, rows.len());
    assert!(
        html.contains("one-way*"),
        "the HTML marks the unconfirmed row"
    );
    seen.insert("html", n);

    // The terminal, every column: each kind's own tables.
    let table = run_ok(&["report", FROZEN, "--wide"]);
    let mut n = 0;
    let mut mechanism = String::new();
    let (mut timerlat_cpu, mut timerlat_rows) = (String::new(), 0);
    for (title, head, body) in terminal_tables(&table) {
        let first = head.first().map(String::as_str).unwrap_or("");
        for cells in &body {
            let row = match first {
                "CPU" if title == "Interruption durations" => {
                    Some(find("noise", &format!("cpu{}", cells[0]), "interruption"))
                }
                "CPU" if title == "Wake-up latency" => {
                    Some(find("timer", &format!("cpu{}", cells[0]), "latency"))
                }
                "CPU"
                    if title.starts_with("Corrected for")
                        || title.contains("expected-interval") =>
                {
                    Some(find(
                        "timer",
                        &format!("cpu{}", cells[0]),
                        "latency-corrected",
                    ))
                }
                "CPU" if title.contains("timerlat tracer") => {
                    // The CPU is named on its first row only, then IRQ, thread, thread − IRQ.
                    if cells.len() == head.len() {
                        timerlat_cpu = cells[0].clone();
                    }
                    let metric = match cells[cells.len() + 1 - head.len()].as_str() {
                        "IRQ" => "irq",
                        "thread" => "thread",
                        "thread − IRQ" => "thread-part",
                        other => panic!("a timerlat row labelled '{other}'"),
                    };
                    timerlat_rows += 1;
                    Some(find("timerlat", &format!("cpu{timerlat_cpu}"), metric))
                }
                "mechanism" => {
                    // The mechanism is named on its first row only.
                    if cells.len() == head.len() {
                        mechanism = cells[0].clone();
                    }
                    let label = &cells[cells.len() + 2 - head.len()];
                    let key = format!(
                        "{mechanism}:{}",
                        cells[cells.len() + 1 - head.len()].replace(',', "-")
                    );
                    Some(find("pingpong", &key, label))
                }
                "pair" => Some(find("c2c", &cells[0], "one-way")),
                "consumer" => {
                    let key = format!("{}:cpu{}", cells[0], cells[1]);
                    Some(find("queue", &key, &cells[3]))
                }
                "run" => {
                    let key = format!("{}:action:run{}", cells[1], cells[0]);
                    Some(find("work", &key, "duration"))
                }
                "call" => Some(find("syscalls", &cells[0], "cost")),
                _ => None,
            };
            if let Some(row) = row {
                check_right("terminal", row, &head, cells, &mut n);
            }
        }
    }
    assert!(
        table.contains("one-way*"),
        "the terminal marks the unconfirmed row"
    );
    let timerlat = rows.iter().filter(|r| r.probe == "timerlat").count();
    assert_eq!(timerlat_rows, timerlat, "each timerlat row in the terminal");
    seen.insert("terminal", n);

    // compare, the fixture against itself: table (every column), Markdown and CSV. No
    // unconfirmed row gets a verdict.
    let cmp_md = run_ok(&["compare", FROZEN, FROZEN, "--format", "markdown"]);
    let mut n = 0;
    for (probe, head, body) in markdown_tables(&cmp_md) {
        let mut current: Option<&Row> = None;
        for cells in body {
            if !cells[0].is_empty() {
                current = Some(find(&probe, &cells[0], &cells[1]));
            }
            let row = current.unwrap();
            if !row.trusted {
                assert!(matches!(cells[3].as_str(), "" | "not judged"), "{cells:?}");
            }
            for (h, c) in head.iter().zip(&cells) {
                check("compare markdown", row, h, c, &mut n);
            }
        }
    }
    seen.insert("compare markdown", n);
    let cmp = run_ok(&["compare", FROZEN, FROZEN, "--wide"]);
    let mut n = 0;
    for (probe, head, body) in terminal_tables(&cmp) {
        let mut current: Option<&Row> = None;
        for cells in body {
            // The baseline's row names its entry; the later run's row starts at its
            // label.
            let named = rows.iter().find(|r| {
                r.probe == probe && cells.len() > 1 && r.key == cells[0] && r.label() == cells[1]
            });
            if named.is_some() {
                current = named;
            }
            let row = current.unwrap();
            if !row.trusted {
                assert!(
                    !cells
                        .iter()
                        .any(|c| c.contains("difference") || c == "better" || c == "worse")
                );
            }
            check_right("compare table", row, &head, &cells, &mut n);
        }
    }
    seen.insert("compare table", n);
    let cmp_csv = run_ok(&["compare", FROZEN, FROZEN, "--format", "csv"]);
    let mut lines = cmp_csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let mut n = 0;
    for line in lines {
        let f: Vec<&str> = line.splitn(header.len(), ',').collect();
        let col = |name: &str| f[header.iter().position(|h| *h == name).unwrap()];
        let label = match col("trusted") {
            "true" => col("metric").to_string(),
            _ => format!("{}*", col("metric")),
        };
        let row = find(col("probe"), col("key"), &label);
        if !row.trusted && col("run") != col("baseline") {
            assert_eq!(col("verdict"), "not judged", "{line}");
        }
        for (h, c) in header.iter().zip(&f) {
            if !h.ends_with("_pct") {
                check("compare csv", row, h, c, &mut n);
            }
        }
    }
    seen.insert("compare csv", n);

    // The plots: each percentile curve ends at the row's maximum after its count of
    // samples; each histogram holds its count.
    let figures = describe::result_figures(&[(PathBuf::from(FROZEN), frozen())]).unwrap();
    let mut n = 0;
    for f in &figures {
        match &f.chart {
            Chart::Percentiles { dist, lines } => {
                let label = if dist.trusted {
                    dist.metric.to_string()
                } else {
                    format!("{}*", dist.metric)
                };
                let row = find(dist.probe, &dist.key, &label);
                for l in lines
                    .iter()
                    .filter(|l| l.label.is_empty() || l.label == "measured")
                {
                    let last = l.data.last().unwrap();
                    assert_eq!(Some(last.value_ns as f64), row.figure("max"), "{}", f.name);
                    assert_eq!(last.x, row.s.count as f64, "{}", f.name);
                    n += 1;
                }
            }
            Chart::Histogram { dist, lines } => {
                let label = if dist.trusted {
                    dist.metric.to_string()
                } else {
                    format!("{}*", dist.metric)
                };
                let row = find(dist.probe, &dist.key, &label);
                for l in lines
                    .iter()
                    .filter(|l| l.label.is_empty() || l.label == "measured")
                {
                    let total: u64 = l.data.iter().map(|b| b.count).sum();
                    assert_eq!(total, row.s.count, "{}", f.name);
                    n += 1;
                }
            }
            _ => {}
        }
    }
    seen.insert("plots", n);

    // The HdrHistogram log: each payload holds the row's count, up to its maximum.
    let hdr = run_ok(&["report", FROZEN, "--format", "hdr"]);
    let mut n = 0;
    for line in hdr.lines().filter(|l| l.starts_with("Tag=")) {
        let tag = line[4..].split(',').next().unwrap();
        let payload = line.rsplit(',').next().unwrap();
        let h = LatencyHistogram::decode_base64(payload).unwrap();
        let row = rows
            .iter()
            .find(|r| tag == format!("{}-{}-{}", r.probe, r.key, r.metric))
            .unwrap_or_else(|| panic!("no row for {tag}"));
        assert_eq!(h.len(), row.s.count, "{tag}");
        let max = row.figure("max").unwrap();
        assert!(
            (h.max() as f64 - max).abs() <= max * 0.001 + 1.0,
            "{tag}: {} vs {max}",
            h.max()
        );
        n += 1;
    }
    seen.insert("hdr", n);

    eprintln!("cells checked per output: {seen:?}");
    for (what, n) in &seen {
        assert!(*n > 0, "{what}: no cell checked");
    }
}

/// Issue 23: `tune`'s staircase states the same figures in the terminal, CSV, Markdown and
/// HTML. The fixture is a real run (RT throttling turned off and kept); the expected
/// figures are the stored medians and interval ends, in ns, each cell in µs within its
/// own rounding.
#[test]
fn the_tune_staircase_agrees_in_every_format() {
    const TUNE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/tune.json");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(TUNE).unwrap()).unwrap();
    let stairs = v["tune"]["staircase"].as_array().unwrap();
    assert!(stairs.len() >= 2, "the fixture keeps a step");
    let keys = ["p50_ns", "p99_ns", "p999_ns", "max_ns", "lost_ns_per_s"];
    // Per stair: its name and, per figure, (median, low, high) in ns.
    let expected: Vec<(String, Vec<[f64; 3]>)> = stairs
        .iter()
        .map(|s| {
            let figs = keys
                .iter()
                .map(|k| ["median", "low", "high"].map(|p| s[k][p].as_f64().unwrap()))
                .collect();
            (s["after"].as_str().unwrap().to_string(), figs)
        })
        .collect();
    let close = |what: &str, cell: &str, ns: f64| {
        let us: f64 = cell
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{what}: {cell:?}"));
        // short(): whole µs from 100 µs, tenths below.
        let tol = if ns / 1e3 >= 100.0 { 0.5 } else { 0.05 } + 1e-9;
        assert!((us - ns / 1e3).abs() <= tol, "{what}: {cell} µs vs {ns} ns");
    };
    // "13.0 [12.5–13.6]"
    let fig_cell = |what: &str, cell: &str, want: &[f64; 3]| {
        let (m, rest) = cell
            .split_once(" [")
            .unwrap_or_else(|| panic!("{what}: {cell}"));
        let (l, h) = rest.trim_end_matches(']').split_once('–').unwrap();
        close(what, m, want[0]);
        close(what, l, want[1]);
        close(what, h, want[2]);
    };
    let mut checked: BTreeMap<&str, usize> = BTreeMap::new();

    let csv = run_ok(&["report", TUNE, "--format", "csv"]);
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let body: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(body.len(), expected.len(), "{csv}");
    let cols = ["p50", "p99", "p99.9", "max"];
    for (row, (after, figs)) in body.iter().zip(&expected) {
        assert_eq!(
            row[header.iter().position(|h| *h == "after").unwrap()],
            after
        );
        for (i, want) in figs.iter().enumerate() {
            let names: [String; 3] = match cols.get(i) {
                Some(f) => [
                    format!("{f}_us"),
                    format!("{f}_low_us"),
                    format!("{f}_high_us"),
                ],
                None => {
                    ["lost_us_per_s", "lost_low_us_per_s", "lost_high_us_per_s"].map(String::from)
                }
            };
            for (name, ns) in names.iter().zip(want) {
                let at = header.iter().position(|h| h == name).unwrap();
                close("csv", row[at], *ns);
                *checked.entry("csv").or_default() += 1;
            }
        }
    }

    let md = run_ok(&["report", TUNE, "--format", "markdown"]);
    let rows: Vec<Vec<String>> = md
        .lines()
        .skip_while(|l| !l.starts_with("| after |"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            l.trim_matches('|')
                .split(" | ")
                .map(|c| c.trim().to_string())
                .collect()
        })
        .collect();
    let html = run_ok(&["report", TUNE, "--format", "html"]);
    let (_, _, html_rows) = html_tables(&html)
        .into_iter()
        .find(|(c, _, _)| c.starts_with("tune: staircase"))
        .expect("the page has the staircase table");
    assert!(
        html.contains("<polyline"),
        "the page has the staircase chart"
    );
    for (what, rows) in [("markdown", rows), ("html", html_rows)] {
        assert_eq!(rows.len(), expected.len(), "{what}");
        for (row, (after, figs)) in rows.iter().zip(&expected) {
            assert_eq!(&row[0], after, "{what}");
            for (cell, want) in row[1..].iter().zip(figs) {
                fig_cell(what, cell, want);
                *checked.entry(what).or_default() += 3;
            }
        }
    }

    // The terminal: a line of medians, then a line of intervals, per stair.
    let text = run_ok(&["report", TUNE]);
    let lines: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("after "))
        .skip(1)
        .take(2 * expected.len())
        .collect();
    for (pair, (after, figs)) in lines.chunks(2).zip(&expected) {
        let medians: Vec<&str> = pair[0].split_whitespace().collect();
        assert_eq!(medians[0], after, "terminal");
        for (i, want) in figs.iter().enumerate() {
            close("terminal", medians[i + 1], want[0]);
            let interval = pair[1].split_whitespace().nth(i).unwrap();
            let (l, h) = interval
                .trim_matches(|c| c == '[' || c == ']')
                .split_once('–')
                .unwrap();
            close("terminal", l, want[1]);
            close("terminal", h, want[2]);
            *checked.entry("terminal").or_default() += 3;
        }
    }
    for what in ["csv", "markdown", "html", "terminal"] {
        assert_eq!(
            checked.get(what),
            Some(&(15 * expected.len())),
            "{what}: {checked:?}"
        );
    }
}
