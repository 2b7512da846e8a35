//! The export room: every file `report --format`/`--plot` writes (CSV, Markdown, HdrHistogram
//! logs, gnuplot, SVG/PNG plots); it reads the result, terminal and views rooms, never the page
//! or compare.
//!
//! Text exports of saved results for `jitterscope report`: Markdown tables, CSV (one row
//! per distribution, or one per histogram bucket) and an HdrHistogram interval log.
//!
//! Every exporter is a pure function from the results read (each with the path it came
//! from) to a `String`, so that they can be tested without files or a terminal.
//!
//! # Distributions
//!
//! A probe entry holds one or more distributions, each with a summary and (mostly) a
//! histogram. Each becomes one row, named by `probe`, `key` (which entry: CPU, pair,
//! mechanism, consumer, call, run, device and method) and `metric` (which of its
//! distributions):
//!
//! | probe | key | metric |
//! |---|---|---|
//! | noise | `cpu3` | `interruption` |
//! | timer | `cpu3` | `latency`, `latency-corrected` |
//! | pingpong | `futex:0-1` (mechanism, CPU A, CPU B) | `rtt`, `one-way` |
//! | c2c | `0-1` | `one-way` |
//! | queue | `accumulator:cpu2` | `transit`, `inter-message` |
//! | work | `loop:action:run1` (action, role, run) | `duration` |
//! | syscalls | `getppid` | `cost` |
//! | ptp | `/dev/ptp0:sys_offset` | `cost` |
//!
//! Each kind's view (`report::views::<kind>`, `EntryView::dists`) makes its rows. Keys
//! and metrics never contain commas or white space, so they can serve as HdrHistogram
//! log tags as they are. Entries of a probe this version does not know are skipped.
//!
//! # CSV
//!
//! RFC 4180: comma separated, `\n` line ends, a field with a comma, a quote or a line
//! break is quoted with its quotes doubled. Units are in the headers (`_ns`). Absent
//! statistics (nothing recorded) are empty fields. `cpu` is the CPU, or a pair as `A,B`
//! (quoted), or empty (ptp). The last column, `trusted`, is `false` only for pingpong's
//! one-way figures when the TSC check could not confirm them (`one_way_valid`): that row
//! then holds the round trip halved, as every other output does, which they mark by
//! starring the metric (`one-way*`); the CSV keeps the metric plain, so that rows of two
//! runs still join on it, and says so in `trusted`. The CSV is one table of every kind,
//! in ns, as its headers say; Markdown and HTML tables are per kind, in the kind's unit
//! (`Kind::unit`: µs for noise, timer and queue, ns for the rest), as the terminal's are.
//! With `--buckets` each
//! non-empty bucket is a row `file,probe,key,metric,value_ns,count`, where `value_ns` is
//! the bucket's highest equivalent value (what HdrHistogram's iterators report).
//!
//! # HdrHistogram interval log
//!
//! The format of HdrHistogram's `HistogramLogWriter` (log format version 1.3), which
//! jHiccup writes and `HistogramLogProcessor` and Python's `hdrh.log` read:
//!
//! ```text
//! #[Histogram log format version 1.3]
//! #[StartTime: 1795386288.000 (seconds since epoch), 2026-11-22T22:24:48Z]
//! #[BaseTime: 1795386288.000 (seconds since epoch)]
//! "StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram"
//! Tag=noise-cpu1-interruption,0.000,0.300,0.068,HISTFAAAAXx4nDVRsUoDQRCdezu7awhh…
//! ```
//!
//! One tagged interval per distribution that has a histogram. `StartTime` and `BaseTime`
//! are the earliest file's `run.start_time`; each interval starts at its file's start
//! time relative to that (so timestamps are relative, as jHiccup writes them) and lasts
//! the file's `run.actual_duration_ns`: a result does not record when each entry ran.
//! `Interval_Max` is the histogram's maximum (the highest equivalent value of its bucket)
//! in ms, the writer's default unit ratio of 10^6 for ns values, with three decimals as
//! the Java writer prints it. The payload is the result file's `histogram.data` as it is:
//! it already is HdrHistogram V2 compressed, base64. With several files the tag is
//! prefixed by the file's stem (`before/noise-cpu1-interruption`), numbered when two
//! files share a stem (`r.1/…`, `r.2/…`), so tags stay distinct. Distributions without a
//! histogram (a ptp method that was not measured) are left out.

pub mod describe;
pub mod gnuplot;
pub mod plot;
pub mod staircase;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::probes::record::HistogramRecord;
use crate::report::ResultFile;
use crate::report::result::dist::{UNCONFIRMED_NOTE, tag_safe};
use crate::report::terminal::table::Unit;
use crate::report::views::Kind;
use crate::stats::{LatencyHistogram, Summary};

pub use crate::report::result::dist::{Dist, serde_name};

/// A result file with the path it was read from.
pub type Loaded = (PathBuf, ResultFile);

/// A result whose histogram cannot be used; names the file and the entry.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error("{file}: entry {probe} {key} {metric}: {reason}")]
    BadHistogram {
        file: String,
        probe: &'static str,
        key: String,
        metric: &'static str,
        reason: String,
    },
    #[error("{file}: run.start_time '{value}' is not an RFC 3339 time")]
    BadStartTime { file: String, value: String },
}

/// The distributions of a result, in entry order, and how many entries were skipped
/// because a newer jitterscope wrote them.
pub fn distributions(r: &ResultFile) -> (Vec<Dist<'_>>, usize) {
    let mut out = Vec::new();
    let mut unknown = 0;
    for e in &r.probes {
        match e.view() {
            Some(v) => v.dists(&mut out),
            None => unknown += 1,
        }
    }
    (out, unknown)
}

/// The path as shown in exports.
fn file_name(p: &Path) -> String {
    p.display().to_string()
}

fn opt(v: Option<u64>) -> String {
    v.map_or_else(String::new, |v| v.to_string())
}

fn opt_f(v: Option<f64>) -> String {
    v.map_or_else(String::new, |v| format!("{v:.3}"))
}

// ---------------------------------------------------------------------------------------
// CSV

/// One CSV field, quoted when it holds a comma, a quote or a line break (RFC 4180).
pub fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

pub fn csv_row(fields: &[String]) -> String {
    let cells: Vec<String> = fields.iter().map(|f| csv_field(f)).collect();
    cells.join(",") + "\n"
}

/// `report --format csv`'s watch table (file name, section).
pub fn watch_csv(watches: &[(String, &crate::report::terminal::watch::WatchRecord)]) -> String {
    let rows = crate::report::terminal::watch::watch_csv_rows(watches);
    let mut out = format!("{}\n", crate::report::terminal::watch::WATCH_CSV_HEADER);
    out.extend(rows.iter().map(|r| csv_row(r)));
    out
}

/// The summary CSV's header.
pub const CSV_HEADER: &str = "probe,file,key,metric,cpu,count,min_ns,p20_ns,p50_ns,p80_ns,\
p90_ns,p99_ns,p999_ns,p9999_ns,max_ns,mean_ns,sum_ns,mad_ns,clamped,trusted";

/// One row per distribution with every summary column.
///
/// `tune`'s staircase and `watch`'s threads are tables of their own: such a result has
/// no distributions, so its CSV is that table alone; after other rows (or tables) each
/// follows a blank line.
pub fn csv_summary(results: &[Loaded]) -> String {
    let mut out = format!("{CSV_HEADER}\n");
    let mut rows = 0;
    for (path, r) in results {
        for d in distributions(r).0 {
            out.push_str(&csv_row(&summary_fields(&file_name(path), &d)));
            rows += 1;
        }
    }
    let tunes: Vec<(String, &crate::system::tune::record::TuneEntry)> = results
        .iter()
        .filter_map(|(path, r)| Some((file_name(path), r.tune.as_ref()?)))
        .collect();
    let watches: Vec<(String, &crate::report::terminal::watch::WatchRecord)> = results
        .iter()
        .filter_map(|(path, r)| Some((file_name(path), r.watch.as_ref()?)))
        .collect();
    // Tables of their own, each after a blank line.
    let mut tables = Vec::new();
    if !tunes.is_empty() {
        tables.push(staircase_csv(&tunes));
    }
    if !watches.is_empty() {
        tables.push(watch_csv(&watches));
    }
    match (rows, tables.is_empty()) {
        (_, true) => out,
        (0, false) => tables.join("\n"),
        _ => format!("{out}\n{}", tables.join("\n")),
    }
}

fn summary_fields(file: &str, d: &Dist) -> Vec<String> {
    let s = &d.summary;
    vec![
        d.probe.to_string(),
        file.to_string(),
        d.key.clone(),
        d.metric.to_string(),
        d.cpu.clone(),
        s.count.to_string(),
        opt(s.min_ns),
        opt(s.p20_ns),
        opt(s.p50_ns),
        opt(s.p80_ns),
        opt(s.p90_ns),
        opt(s.p99_ns),
        opt(s.p999_ns),
        opt(s.p9999_ns),
        opt(s.max_ns),
        opt_f(s.mean_ns),
        s.sum_ns.to_string(),
        opt(s.mad_ns),
        s.clamped.to_string(),
        d.trusted.to_string(),
    ]
}

/// The bucket CSV's header.
pub const CSV_BUCKETS_HEADER: &str = "file,probe,key,metric,value_ns,count";

/// One row per non-empty histogram bucket of every distribution that has a histogram.
pub fn csv_buckets(results: &[Loaded]) -> Result<String, ExportError> {
    let mut out = format!("{CSV_BUCKETS_HEADER}\n");
    for (path, r) in results {
        let file = file_name(path);
        for d in distributions(r).0 {
            let Some(h) = d.histogram.as_deref() else {
                continue;
            };
            let hist = decode(&file, &d, h)?;
            for v in hist.iter_recorded() {
                let row = [
                    file.clone(),
                    d.probe.to_string(),
                    d.key.clone(),
                    d.metric.to_string(),
                    v.value_iterated_to().to_string(),
                    v.count_at_value().to_string(),
                ];
                out.push_str(&csv_row(&row));
            }
        }
    }
    Ok(out)
}

fn decode(
    file: &str,
    d: &Dist,
    h: &HistogramRecord,
) -> Result<hdrhistogram::Histogram<u64>, ExportError> {
    LatencyHistogram::decode_base64(&h.data).map_err(|reason| ExportError::BadHistogram {
        file: file.to_string(),
        probe: d.probe,
        key: d.key.clone(),
        metric: d.metric,
        reason,
    })
}

// ---------------------------------------------------------------------------------------
// Markdown

/// One Markdown cell: pipes escaped, line breaks flattened.
fn md_cell(s: &str) -> String {
    s.replace('|', "\\|").replace(['\n', '\r'], " ")
}

/// Per file: a heading, the host and run, the degradations, then one table per probe kind.
pub fn markdown(results: &[Loaded]) -> String {
    let mut out = String::new();
    for (path, r) in results {
        md_file(&mut out, path, r);
    }
    out
}

fn md_file(out: &mut String, path: &Path, r: &ResultFile) {
    let (h, run) = (&r.host, &r.run);
    let _ = writeln!(out, "## {}\n", md_cell(&file_name(path)));
    let _ = writeln!(
        out,
        "Host **{}**, kernel {}, {}; started {}; `{}`\n",
        md_cell(&h.hostname),
        md_cell(&h.kernel_release),
        md_cell(&h.cpu_model),
        md_cell(&run.start_time),
        md_cell(&run.command_line.join(" ")).replace('`', "'"),
    );
    for d in &run.degraded {
        let _ = writeln!(out, "- degraded: {}", md_cell(&d.message));
    }
    if !run.degraded.is_empty() {
        out.push('\n');
    }
    let (dists, unknown) = distributions(r);
    let mut probes: Vec<&str> = Vec::new();
    for d in &dists {
        if !probes.contains(&d.probe) {
            probes.push(d.probe);
        }
    }
    for probe in probes {
        md_table(out, probe, dists.iter().filter(|d| d.probe == probe));
    }
    if let Some(t) = &r.tune {
        let _ = writeln!(
            out,
            "### tune: staircase (µs, median [interval] over blocks)\n"
        );
        out.push_str(&crate::report::views::tune::staircase_markdown(t));
        out.push('\n');
    }
    if unknown > 0 {
        let _ = writeln!(
            out,
            "{unknown} entries of a newer probe kind were skipped.\n"
        );
    }
}

fn md_table<'a>(out: &mut String, probe: &str, dists: impl Iterator<Item = &'a Dist<'a>>) {
    let mut untrusted = false;
    let u = unit_of(probe);
    let _ = writeln!(out, "### {probe}\n");
    let heads: Vec<String> = ["key", "metric", "cpu", "count"]
        .map(String::from)
        .into_iter()
        .chain(TIME_COLUMNS.iter().map(|c| u.header(c)))
        .collect();
    let _ = writeln!(out, "| {} |", heads.join(" | "));
    let _ = writeln!(out, "|---|---|---|{}", "--:|".repeat(heads.len() - 3));
    for d in dists {
        let mut cells = vec![md_cell(&d.key), d.metric_label(), md_cell(&d.cpu)];
        cells.push(d.summary.count.to_string());
        cells.extend(time_cells(&d.summary, u));
        let _ = writeln!(out, "| {} |", cells.join(" | "));
        untrusted |= !d.trusted;
    }
    out.push('\n');
    if untrusted {
        let _ = writeln!(out, "\\{}\n", UNCONFIRMED_NOTE);
    }
}

/// The unit of a probe kind's tables (`Kind::unit`); ns for a kind this version does
/// not know.
pub fn unit_of(probe: &str) -> Unit {
    // Wake-up delays are read in µs, as the watch table shows them.
    if probe == "watch" {
        return Unit::Us;
    }
    Kind::of_probe(probe).map_or(Unit::Ns, Kind::unit)
}

/// The time columns of every summary table (Markdown, HTML), each headed with its
/// table's unit: `min (µs)`, ….
pub const TIME_COLUMNS: [&str; 8] = ["min", "p50", "p90", "p99", "p99.9", "max", "mean", "MAD"];

/// A summary's [`TIME_COLUMNS`] cells in `unit`.
pub fn time_cells(s: &Summary, u: Unit) -> Vec<String> {
    vec![
        u.cell(s.min_ns),
        u.cell(s.p50_ns),
        u.cell(s.p90_ns),
        u.cell(s.p99_ns),
        u.cell(s.p999_ns),
        u.cell(s.max_ns),
        u.cell_f(s.mean_ns),
        u.cell(s.mad_ns),
    ]
}

// ---------------------------------------------------------------------------------------
// HdrHistogram interval log

/// The whole interval log (see the module doc).
pub fn hdr_log(results: &[Loaded]) -> Result<String, ExportError> {
    let starts = results
        .iter()
        .map(|(p, r)| start_secs(p, r))
        .collect::<Result<Vec<f64>, _>>()?;
    let base = starts.iter().copied().fold(f64::INFINITY, f64::min);
    let base = if base.is_finite() { base } else { 0.0 };
    let base_text = results
        .iter()
        .zip(&starts)
        .find(|(_, s)| **s == base)
        .map_or(String::new(), |((_, r), _)| r.run.start_time.clone());
    let mut out = String::from("#[Histogram log format version 1.3]\n");
    let _ = writeln!(
        out,
        "#[StartTime: {base:.3} (seconds since epoch), {base_text}]"
    );
    let _ = writeln!(out, "#[BaseTime: {base:.3} (seconds since epoch)]");
    out.push_str(
        "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\
         \"Interval_Compressed_Histogram\"\n",
    );
    let prefixes = tag_prefixes(results);
    for (((path, r), start), prefix) in results.iter().zip(&starts).zip(&prefixes) {
        hdr_file(&mut out, path, r, start - base, prefix)?;
    }
    Ok(out)
}

/// Each file's stem when there are several, numbered (`r.2`) when two files share one;
/// empty for one file. What tags and plot file names are prefixed by.
pub fn file_prefixes(results: &[Loaded]) -> Vec<String> {
    let prefixes = tag_prefixes(results).into_iter();
    prefixes.map(|p| p.trim_end_matches('/').into()).collect()
}

/// What each file's tags start with: nothing for one file; with several, the file's
/// stem and `/`, numbered (`r.2/`) when two files share a stem, so no two tags collide.
fn tag_prefixes(results: &[Loaded]) -> Vec<String> {
    if results.len() < 2 {
        return vec![String::new(); results.len()];
    }
    let stems: Vec<String> = results
        .iter()
        .map(|(p, _)| {
            p.file_stem()
                .map_or_else(String::new, |s| tag_safe(&s.to_string_lossy()))
        })
        .collect();
    let unique = (1..stems.len()).all(|i| !stems[..i].contains(&stems[i]));
    stems
        .iter()
        .enumerate()
        .map(|(i, s)| match unique {
            true => format!("{s}/"),
            false => format!("{s}.{}/", i + 1),
        })
        .collect()
}

/// `run.start_time` as seconds since the epoch.
fn start_secs(path: &Path, r: &ResultFile) -> Result<f64, ExportError> {
    humantime::parse_rfc3339_weak(&r.run.start_time)
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_secs_f64())
        .ok_or_else(|| ExportError::BadStartTime {
            file: file_name(path),
            value: r.run.start_time.clone(),
        })
}

fn hdr_file(
    out: &mut String,
    path: &Path,
    r: &ResultFile,
    offset: f64,
    prefix: &str,
) -> Result<(), ExportError> {
    let file = file_name(path);
    let length = r.run.actual_duration_ns as f64 / 1e9;
    for d in distributions(r).0 {
        let Some(h) = d.histogram.as_deref() else {
            continue;
        };
        // Decoded only to check the payload and read its max: the log carries it as is.
        let hist = decode(&file, &d, h)?;
        let max_ms = hist.max() as f64 / 1e6;
        let tag = format!("{prefix}{}-{}-{}", d.probe, d.key, d.metric);
        let _ = writeln!(
            out,
            "Tag={tag},{offset:.3},{length:.3},{max_ms:.3},{}",
            h.data.trim()
        );
    }
    Ok(())
}

/// The staircases of `tunes` (file name, entry) as one CSV table: one row per stair, each
/// figure as median, low and high in µs, the same figures the terminal and Markdown show.
fn staircase_csv(tunes: &[(String, &crate::system::tune::record::TuneEntry)]) -> String {
    let mut out = String::from("file,after,blocks,confidence");
    for f in ["p50", "p99", "p99.9", "max"] {
        out.push_str(&format!(",{f}_us,{f}_low_us,{f}_high_us"));
    }
    out.push_str(",lost_us_per_s,lost_low_us_per_s,lost_high_us_per_s\n");
    for (file, t) in tunes {
        for s in &t.staircase {
            out.push_str(&format!(
                "{},{},{},{:.4}",
                csv_field(file),
                csv_field(&s.after),
                s.blocks,
                s.confidence
            ));
            for f in [
                &s.p50_ns,
                &s.p99_ns,
                &s.p999_ns,
                &s.max_ns,
                &s.lost_ns_per_s,
            ] {
                out.push_str(&format!(
                    ",{},{},{}",
                    crate::report::views::tune::short(f.median),
                    crate::report::views::tune::short(f.low),
                    crate::report::views::tune::short(f.high)
                ));
            }
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::result::dist::Entry;

    /// Splits one CSV line (no embedded line breaks) the RFC 4180 way.
    fn split_csv(line: &str) -> Vec<String> {
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

    #[test]
    fn csv_quotes_only_what_needs_it() {
        assert_eq!(csv_field("plain"), "plain");
        assert_eq!(csv_field("0,1"), "\"0,1\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_field("two\nlines"), "\"two\nlines\"");
        assert_eq!(csv_field(""), "");
        let row = csv_row(&["a,b".into(), "c\"d".into(), "e".into()]);
        assert_eq!(row, "\"a,b\",\"c\"\"d\",e\n");
        assert_eq!(split_csv(row.trim_end()), ["a,b", "c\"d", "e"]);
    }

    #[test]
    fn tags_hold_no_commas_or_spaces() {
        assert_eq!(tag_safe("a b,c\td\"e"), "a_b_c_d_e");
        assert_eq!(tag_safe("/dev/ptp0:sys_offset"), "/dev/ptp0:sys_offset");
    }

    #[test]
    fn markdown_cells_escape_pipes() {
        assert_eq!(md_cell("a|b\nc"), "a\\|b c");
    }

    #[test]
    fn serde_names_match_the_json() {
        use crate::probes::pingpong::Mechanism;
        use crate::probes::ptp::Method;
        assert_eq!(serde_name(&Mechanism::SpinPause), "spin-pause");
        assert_eq!(
            serde_name(&Method::SysOffsetExtended),
            "sys_offset_extended"
        );
    }

    #[test]
    fn decode_errors_name_the_file_and_entry() {
        let s = Summary::default();
        let h = HistogramRecord {
            unit: "ns".into(),
            encoding: "hdrhistogram-v2-deflate-base64".into(),
            data: "not base64!".into(),
        };
        let d = Entry::new("noise", "cpu1".into(), "1".into()).dist("interruption", &s, &h);
        let e = decode("r.json", &d, &h).unwrap_err().to_string();
        assert!(
            e.starts_with("r.json: entry noise cpu1 interruption: "),
            "{e}"
        );
        assert!(!e.contains('\n'), "{e}");
    }

    /// A result with no entry of a known probe: one from a newer jitterscope.
    const SKELETON: &str = r##"{"schema":"jitterscope/1",
"host":{"hostname":"vm","kernel_release":"6.18.44-fc-v657","kernel_version":"1 SMP PREEMPT_DYNAMIC @0","cmdline":"quiet","cpu_model":"AMD EPYC","cpus_online":"0-1","cpu_count":2,
"clock":{"counter":"tsc","frequency_hz":1996249486.6944652,"frequency_source":"calibrated_monotonic_raw","scale":{"mult":2151518297,"shift":32},"calibration_uncertainty_ppm":1.995941452650181,"cross_checks":[],"clocksource":"tsc","tsc_flags":["tsc"],"invariant":true},"virtualization":"KVM","isolation":{"isolated":"","nohz_full":""},"sched_rt_runtime_us":950000},
"run":{"tool_version":"0.1.0","command_line":["jitterscope","noise"],"start_time":"2026-11-22T22:24:49Z","requested_duration_ns":40000000,"actual_duration_ns":41556076,"interrupted":false,
"privileges":{"euid":0,"root":true,"memory_locked":true},"cpus":{"measured":"1","housekeeping":"0"},"degraded":[],"warnings":[],"peak_rss_kib":9996},
"probes":[{"probe":"teleport","cpu":1}]}"##;

    #[test]
    fn hdr_log_header_is_what_log_readers_parse() {
        let r = ResultFile::parse(SKELETON).unwrap();
        assert_eq!(distributions(&r).0.len(), 0);
        assert_eq!(
            distributions(&r).1,
            1,
            "the newer probe is counted, not shown"
        );
        let log = hdr_log(&[(PathBuf::from("r.json"), r.clone())]).unwrap();
        let lines: Vec<&str> = log.lines().collect();
        assert_eq!(lines[0], "#[Histogram log format version 1.3]");
        // 2026-11-22T22:24:49Z
        let start = "#[StartTime: 1795386289.000 (seconds since epoch), 2026-11-22T22:24:49Z]";
        assert_eq!(lines[1], start);
        assert_eq!(
            lines[2],
            "#[BaseTime: 1795386289.000 (seconds since epoch)]"
        );
        assert!(lines[3].starts_with("\"StartTimestamp\",\"Interval_Length\""));
        assert_eq!(lines.len(), 4);
        assert_eq!(
            csv_summary(&[(PathBuf::from("r.json"), r.clone())]),
            format!("{CSV_HEADER}\n")
        );
        let md = markdown(&[(PathBuf::from("r.json"), r.clone())]);
        assert!(
            md.contains("1 entries of a newer probe kind were skipped"),
            "{md}"
        );
        let mut bad = r;
        bad.run.start_time = "yesterday".into();
        let e = hdr_log(&[(PathBuf::from("r.json"), bad)])
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "r.json: run.start_time 'yesterday' is not an RFC 3339 time"
        );
    }

    #[test]
    fn tag_prefixes_stay_distinct() {
        let r = ResultFile::parse(SKELETON).unwrap();
        let load = |p: &str| (PathBuf::from(p), r.clone());
        assert_eq!(tag_prefixes(&[load("a/r.json")]), [""]);
        let two = tag_prefixes(&[load("a/before.json"), load("after.json")]);
        assert_eq!(two, ["before/", "after/"]);
        let same = tag_prefixes(&[load("a/r.json"), load("b/r.json")]);
        assert_eq!(same, ["r.1/", "r.2/"]);
    }

    #[test]
    fn buckets_of_a_known_histogram() {
        let mut lh = LatencyHistogram::new();
        for v in [100, 100, 2000] {
            lh.record(v);
        }
        let hist = LatencyHistogram::decode_base64(&lh.encode_base64()).unwrap();
        let rows: Vec<(u64, u64)> = hist
            .iter_recorded()
            .map(|v| (v.value_iterated_to(), v.count_at_value()))
            .collect();
        assert_eq!(rows, [(100, 2), (2000, 1)]);
    }
}
