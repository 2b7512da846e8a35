//! Issue 6: `jitterscope report` renders real result files (cut from the frozen fixture)
//! as tables, Markdown, CSV and an HdrHistogram interval log; every figure it writes is the
//! result's, and the log is read back by an independent implementation (Python's
//! `hdrhistogram` package).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use jitterscope::report::ResultFile;
use jitterscope::stats::Summary;
use serde_json::Value;

use crate::util::{assert_bad_input, bin, frozen_part, jitterscope, skip, stderr_lines};

/// Result files cut from the frozen fixture: its noise, syscalls and pingpong entries,
/// one file each. Nothing is measured.
struct Fixture {
    dir: tempfile::TempDir,
    files: Vec<PathBuf>,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let files = ["noise", "syscalls", "pingpong"]
            .iter()
            .enumerate()
            .map(|(i, kind)| frozen_part(&dir.path().join(format!("r{i}.json")), &[kind]))
            .collect();
        Fixture { dir, files }
    }

    fn args<'a>(&'a self, extra: &[&'a str]) -> Vec<&'a str> {
        let mut a = vec!["report"];
        a.extend(self.files.iter().map(|p| p.to_str().unwrap()));
        a.extend(extra);
        a
    }
}

/// Runs `report` and returns its stdout, expecting exit 0.
fn report(args: &[&str]) -> String {
    let out = jitterscope(args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{args:?}: {:?}",
        stderr_lines(&out)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Splits one CSV record the RFC 4180 way (a quoted field may hold commas and quotes).
pub(crate) fn split_csv(line: &str) -> Vec<String> {
    let (mut fields, mut cur, mut quoted) = (Vec::new(), String::new(), false);
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            ('"', _) => quoted = !quoted,
            (',', false) => fields.push(std::mem::take(&mut cur)),
            (c, _) => cur.push(c),
        }
    }
    fields.push(cur);
    fields
}

/// CSV text as maps from column name to field.
pub(crate) fn parse_csv(text: &str) -> Vec<HashMap<String, String>> {
    let mut lines = text.lines();
    let header = split_csv(lines.next().expect("a header"));
    lines
        .map(|l| {
            let f = split_csv(l);
            assert_eq!(f.len(), header.len(), "{l}");
            header.iter().cloned().zip(f).collect()
        })
        .collect()
}

/// One distribution as the test reads it from the JSON itself (not through the
/// exporter's own mapping): which entry, which of its distributions, and its summary.
#[derive(Debug)]
struct Expect {
    probe: String,
    key: String,
    metric: String,
    cpu: String,
    summary: Summary,
    /// The histogram's base64, as stored.
    data: String,
    trusted: bool,
}

/// `dist` is the JSON object holding `summary` and `histogram`.
fn expect(probe: &str, key: String, metric: &str, cpu: String, dist: &Value) -> Expect {
    Expect {
        probe: probe.into(),
        key,
        metric: metric.into(),
        cpu,
        summary: serde_json::from_value(dist["summary"].clone()).expect("a summary"),
        data: dist["histogram"]["data"]
            .as_str()
            .expect("a histogram")
            .into(),
        trusted: true,
    }
}

/// The round trip halved, as the exports show an unconfirmed one-way figure.
fn halved(mut e: Expect) -> Expect {
    let s = &mut e.summary;
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
    e.trusted = false;
    e
}

/// Every distribution of the fixture's files (noise, syscalls, pingpong), in order.
fn every_dist(fx: &Fixture) -> Vec<(usize, Expect)> {
    let mut all = Vec::new();
    for (i, path) in fx.files.iter().enumerate() {
        let v: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        for p in v["probes"].as_array().unwrap() {
            let cpu = p["cpu"].to_string();
            match p["probe"].as_str().unwrap() {
                "noise" => all.push((
                    i,
                    expect("noise", format!("cpu{cpu}"), "interruption", cpu, p),
                )),
                "syscalls" => {
                    let call = p["call"].as_str().unwrap().to_string();
                    all.push((i, expect("syscalls", call, "cost", cpu, p)));
                }
                "pingpong" => {
                    let (a, b) = (&p["cpu_a"], &p["cpu_b"]);
                    let key = format!("{}:{a}-{b}", p["mechanism"].as_str().unwrap());
                    let pair = format!("{a},{b}");
                    all.push((
                        i,
                        expect("pingpong", key.clone(), "rtt", pair.clone(), &p["rtt"]),
                    ));
                    // Unconfirmed counter stamps are shown nowhere: the row is the round
                    // trip halved (every time, rounded down), marked untrusted.
                    let ow = match p["one_way_valid"].as_bool().unwrap() {
                        true => expect("pingpong", key, "one-way", pair, &p["one_way"]),
                        false => halved(expect("pingpong", key, "one-way", pair, &p["rtt"])),
                    };
                    all.push((i, ow));
                }
                other => panic!("the fixture made no {other} entry"),
            }
        }
    }
    all
}

fn opt(v: Option<u64>) -> String {
    v.map_or_else(String::new, |v| v.to_string())
}

#[test]
fn table_and_markdown_show_every_entry_with_its_median() {
    let fx = Fixture::new();
    let results: Vec<ResultFile> = fx
        .files
        .iter()
        .map(|p| ResultFile::read(p).unwrap())
        .collect();
    let table = report(&fx.args(&[]));
    let md = report(&fx.args(&["--format", "markdown"]));
    for (i, r) in results.iter().enumerate() {
        let name = fx.files[i].to_str().unwrap();
        // The file's line, then the command on a line of its own.
        let mut lines = table.lines().skip_while(|l| !l.contains(name));
        let header = format!(
            "{} {}",
            lines.next().expect("a file line"),
            lines.next().expect("the command line")
        );
        assert!(header.contains(&r.host.hostname) && header.contains(&r.run.start_time));
        assert!(header.contains(&r.host.kernel_release) && header.contains(&r.host.cpu_model));
        assert!(header.contains(&r.run.command_line.join(" ")), "{header}");
        // The table wraps prose to the terminal's width: compare the words.
        let words = |t: &str| t.split_whitespace().collect::<Vec<_>>().join(" ");
        for d in &r.run.degraded {
            assert!(words(&table).contains(&words(&d.message)) && md.contains(&d.message));
        }
    }
    // Tables: the noise CPU with its p50 in µs, each call and mechanism with its p50 in ns.
    let rows: Vec<Vec<&str>> = table
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    let has_row = |first: &str, cell: &str| {
        rows.iter()
            .any(|r| r.first() == Some(&first) && r.contains(&cell))
    };
    for (_, d) in every_dist(&fx) {
        let p50 = d.summary.p50_ns.expect("something recorded");
        match (d.probe.as_str(), d.metric.as_str()) {
            ("noise", _) => assert!(
                has_row(&d.cpu, &format!("{:.2}", p50 as f64 / 1e3)),
                "{d:?}"
            ),
            ("syscalls", _) => assert!(has_row(&d.key, &p50.to_string()), "{d:?}"),
            ("pingpong", "rtt") => {
                let mech = d.key.split(':').next().unwrap();
                assert!(has_row(mech, &p50.to_string()), "{d:?}\n{table}");
            }
            _ => {}
        }
        // Markdown: the entry's row, with its p50 in the `p50` column, in the kind's unit.
        let row = md
            .lines()
            .map(|l| l.split('|').map(str::trim).collect::<Vec<_>>())
            .find(|c| c.len() > 6 && c[1] == d.key && c[2].trim_end_matches('*') == d.metric)
            .unwrap_or_else(|| panic!("no markdown row for {d:?}\n{md}"));
        let unit = jitterscope::report::export::unit_of(&d.probe);
        assert_eq!(row[6], unit.cell(Some(p50)), "{d:?}");
    }
    assert!(md.contains("| p50 (ns) |") && md.contains("| p50 (µs) |"));
}

#[test]
fn csv_rows_are_the_summaries_and_buckets_add_up() {
    let fx = Fixture::new();
    let rows = parse_csv(&report(&fx.args(&["--format", "csv"])));
    let dists = every_dist(&fx);
    assert_eq!(rows.len(), dists.len());
    for (row, (i, d)) in rows.iter().zip(&dists) {
        let s = &d.summary;
        assert_eq!(row["file"], fx.files[*i].to_str().unwrap());
        assert_eq!(
            (&row["probe"], &row["key"], &row["metric"]),
            (&d.probe, &d.key, &d.metric)
        );
        assert_eq!(row["cpu"], d.cpu, "a pair is one quoted field");
        assert_eq!(row["count"], s.count.to_string());
        for (col, v) in [
            ("min_ns", s.min_ns),
            ("p20_ns", s.p20_ns),
            ("p50_ns", s.p50_ns),
            ("p90_ns", s.p90_ns),
            ("p99_ns", s.p99_ns),
            ("p999_ns", s.p999_ns),
            ("max_ns", s.max_ns),
            ("mad_ns", s.mad_ns),
        ] {
            assert_eq!(row[col], opt(v), "{col} of {d:?}");
        }
        assert_eq!(row["sum_ns"], s.sum_ns.to_string());
        assert_eq!(row["trusted"], d.trusted.to_string());
        let mean: f64 = row["mean_ns"].parse().unwrap();
        assert!((mean - s.mean_ns.unwrap()).abs() <= 0.001, "{d:?}");
    }
    // Buckets: every distribution's counts add up to its summary's count.
    let buckets = parse_csv(&report(&fx.args(&["--format", "csv", "--buckets"])));
    let mut sums: HashMap<(String, String, String), u64> = HashMap::new();
    for b in &buckets {
        let key = (b["file"].clone(), b["key"].clone(), b["metric"].clone());
        *sums.entry(key).or_default() += b["count"].parse::<u64>().unwrap();
        assert!(b["value_ns"].parse::<u64>().is_ok());
    }
    for (i, d) in &dists {
        let key = (
            fx.files[*i].to_str().unwrap().to_string(),
            d.key.clone(),
            d.metric.clone(),
        );
        assert_eq!(
            sums.get(&key).copied().unwrap_or(0),
            d.summary.count,
            "{d:?}"
        );
    }
}

/// Reads the log with hdrh's own log reader and prints, per interval: tag, count, min,
/// max, the nearest-rank p99 (the definition the summary documents: hdrh's own
/// get_value_at_percentile rounds the rank to nearest, which can name a neighbouring
/// bucket where few values lie) and get_value_at_percentile(99).
const READ_LOG: &str = r#"
import math, sys
from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogReader

def nearest_rank(h, q):
    target = max(1, math.ceil(q * h.get_total_count()))
    seen = 0
    for i in range(h.counts_len):
        seen += h.get_count_at_index(i)
        if seen >= target:
            return h.get_highest_equivalent_value(h.get_value_from_index(i))
    return 0

reader = HistogramLogReader(sys.argv[1], HdrHistogram(1, 3600 * 10**9, 3))
while True:
    h = reader.get_next_interval_histogram()
    if h is None:
        break
    print(h.get_tag(), h.get_total_count(), h.get_min_value(), h.get_max_value(),
          nearest_rank(h, 0.99), h.get_value_at_percentile(99))
"#;

fn has_hdrh() -> bool {
    Command::new("python3")
        .args(["-c", "import hdrh.histogram, hdrh.log"])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// |a − b| within 0.1 % of b (HdrHistogram's precision at 3 significant digits).
fn close(a: u64, b: u64) -> bool {
    a.abs_diff(b) as f64 <= b as f64 * 0.001 + 1.0
}

#[test]
fn hdr_log_is_read_back_by_python_hdrhistogram() {
    const NAME: &str = "hdr_log_is_read_back_by_python_hdrhistogram";
    if !has_hdrh() {
        return skip(
            NAME,
            "python3 with the hdrhistogram package is missing (pip install hdrhistogram)",
        );
    }
    let fx = Fixture::new();
    let log = fx.dir.path().join("out.hlog");
    report(&fx.args(&["--format", "hdr", "-o", log.to_str().unwrap()]));
    let text = std::fs::read_to_string(&log).unwrap();
    let check = Command::new("python3")
        .args(["-c", READ_LOG])
        .arg(&log)
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
    let decoded: Vec<Vec<String>> = String::from_utf8_lossy(&check.stdout)
        .lines()
        .map(|l| l.split(' ').map(str::to_string).collect())
        .collect();
    let dists = every_dist(&fx);
    assert_eq!(decoded.len(), dists.len(), "{text}");
    for (got, (i, d)) in decoded.iter().zip(&dists) {
        let stem = fx.files[*i].file_stem().unwrap().to_str().unwrap();
        assert_eq!(got[0], format!("{stem}/{}-{}-{}", d.probe, d.key, d.metric));
        assert!(!got[0].contains([',', ' ']));
        let n = |k: usize| got[k].parse::<u64>().unwrap();
        let s = &d.summary;
        assert_eq!(n(1), s.count, "{got:?}");
        assert!(close(n(2), s.min_ns.unwrap()), "min {got:?} {s:?}");
        assert!(close(n(3), s.max_ns.unwrap()), "max {got:?} {s:?}");
        assert!(
            close(n(4).min(s.max_ns.unwrap()), s.p99_ns.unwrap()),
            "p99 {got:?} {s:?}"
        );
        eprintln!(
            "{} p99: ours {}, hdrh get_value_at_percentile {}",
            got[0],
            s.p99_ns.unwrap(),
            got[5]
        );
    }
    // Interval_Max is the max in ms; the payload is the result's histogram as stored.
    for (line, (_, d)) in text.lines().filter(|l| l.starts_with("Tag=")).zip(&dists) {
        // The payload as stored; an unconfirmed one-way row carries the round trip's
        // histogram halved, as its plots do.
        if d.trusted {
            assert_eq!(line.split(',').nth(4), Some(d.data.as_str()), "{line}");
        }
        let max_ms: f64 = line.split(',').nth(3).unwrap().parse().unwrap();
        let max_ns = d.summary.max_ns.unwrap() as f64;
        assert!(
            (max_ms * 1e6 - max_ns).abs() <= max_ns * 0.001 + 500.0,
            "{line}"
        );
    }
}

#[test]
fn output_file_is_written_whole_and_stdout_may_close() {
    let fx = Fixture::new();
    let out = fx.dir.path().join("report.csv");
    let stdout = report(&fx.args(&["--format", "csv"]));
    assert_eq!(
        report(&fx.args(&["--format", "csv", "-o", out.to_str().unwrap()])),
        ""
    );
    assert_eq!(std::fs::read_to_string(&out).unwrap(), stdout);
    let left: Vec<_> = std::fs::read_dir(fx.dir.path())
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(left.is_empty(), "temporary files left: {left:?}");
    // A reader that goes away at once (`| head -0`) is not an error. The files are
    // repeated so that the output overflows the pipe's buffer and the write must fail.
    let mut args = fx.args(&["--format", "csv", "--buckets"]);
    let files: Vec<&str> = fx.files.iter().map(|p| p.to_str().unwrap()).collect();
    for _ in 0..8 {
        args.extend(&files);
    }
    let mut child = Command::new(bin())
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let done = child.wait_with_output().unwrap();
    assert_eq!(
        done.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_str().unwrap().to_string()
}

#[test]
fn bad_result_files_are_one_line_and_exit_2() {
    let fx = Fixture::new();
    let d = fx.dir.path();
    let good = std::fs::read_to_string(&fx.files[0]).unwrap();
    let missing = d.join("missing.json").to_str().unwrap().to_string();
    let truncated = write(d, "truncated.json", &good[..good.len() / 2]);
    let not_json = write(d, "not.json", "hello, world\n");
    let schema9 = write(d, "schema9.json", r#"{"schema":"jitterscope/9"}"#);
    // A histogram that does not decode: one line naming the file and the entry.
    let mut v: serde_json::Value = serde_json::from_str(&good).unwrap();
    v["probes"][0]["histogram"]["data"] = "HISTFAAAA!!not-base64".into();
    let bad_hist = write(d, "badhist.json", &v.to_string());
    let mut cases: Vec<Vec<&str>> = Vec::new();
    for f in [&missing, &truncated, &not_json, &schema9] {
        for fmt in ["table", "markdown", "csv", "hdr", "html"] {
            cases.push(vec!["report", "--format", fmt, f]);
        }
    }
    let good_path = fx.files[0].to_str().unwrap();
    cases.push(vec![
        "report",
        "--format",
        "markdown",
        "--buckets",
        good_path,
    ]);
    cases.push(vec!["report", "--format", "hdr", &bad_hist]);
    cases.push(vec!["report", "--format", "csv", "--buckets", &bad_hist]);
    let refs: Vec<&[&str]> = cases.iter().map(Vec::as_slice).collect();
    assert_bad_input(&refs);
    let line = &stderr_lines(&jitterscope(&["report", "--format", "hdr", &bad_hist]))[0];
    assert!(
        line.contains("badhist.json") && line.contains("noise cpu"),
        "{line}"
    );
    // Nothing was written for a failed report.
    let out = d.join("never.txt");
    jitterscope(&["report", "-o", out.to_str().unwrap(), &schema9]);
    assert!(!out.exists());
}

#[test]
fn entries_of_a_newer_probe_are_skipped_with_a_note() {
    let fx = Fixture::new();
    let good = std::fs::read_to_string(&fx.files[1]).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&good).unwrap();
    let future = serde_json::json!({"probe": "teleport", "cpu": 1, "summary": {}});
    v["probes"].as_array_mut().unwrap().push(future);
    let f = write(fx.dir.path(), "future.json", &v.to_string());
    assert!(report(&["report", &f]).contains("1 entries of a newer probe kind were skipped"));
    let rows = parse_csv(&report(&["report", "--format", "csv", &f]));
    assert_eq!(rows.len(), 2, "rdtsc and getppid only");
    assert_eq!(
        report(&["report", "--format", "hdr", &f])
            .matches("Tag=")
            .count(),
        2
    );
}

/// The 16-CPU host's traced noise, grown to 64 CPUs, reads back with every CPU.
#[test]
fn a_grown_host16_result_reads_back_with_every_cpu() {
    let text = crate::util::grown(&crate::util::host16("noise-traced-15cpu"), 64);
    let r = ResultFile::parse(&text).expect("a result");
    let cpus: Vec<usize> = (r.entries::<jitterscope::probes::noise::NoiseEntry>())
        .map(|e| e.cpu)
        .collect();
    assert_eq!(cpus, (1..64).collect::<Vec<_>>());
    assert!(
        r.entries::<jitterscope::probes::noise::NoiseEntry>()
            .all(|e| e.attribution.is_some())
    );
}
