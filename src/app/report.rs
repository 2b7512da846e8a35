//! `jitterscope report`: renders saved result files as terminal tables, Markdown, CSV or
//! an HdrHistogram interval log (the writers are in `report::export`), to stdout or,
//! atomically, to a file.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::cli::{ReportArgs, ReportFormat};
use crate::report::export::{self, Loaded};
use crate::report::terminal::table::{Layout, wrap};
use crate::report::{
    ResultFile, export::gnuplot, export::plot, page::html, terminal::verdict, views,
};

use super::Ending;

/// `jitterscope report`.
pub fn run(args: &ReportArgs) -> anyhow::Result<Ending> {
    if args.buckets && !matches!(args.format, ReportFormat::Csv) {
        anyhow::bail!("--buckets applies to --format csv only");
    }
    if let Some(text) = interval_logs(args)? {
        return deliver(&text, args.output.as_deref());
    }
    let results = read_all(&args.results)?;
    let dir = || output_dir(args.format, args.output.as_deref());
    let text = match args.format {
        ReportFormat::Table => (Layout::terminal(args.wide).per_cpu(args.per_cpu))
            .scoped(|| tables(&results, args.top)),
        ReportFormat::Markdown => export::markdown(&results),
        ReportFormat::Csv if args.buckets => export::csv_buckets(&results)?,
        ReportFormat::Csv => export::csv_summary(&results),
        ReportFormat::Hdr => export::hdr_log(&results)?,
        ReportFormat::Html => {
            html::render(&crate::report::page::result_page::result_page(&results)?)
        }
        ReportFormat::Gnuplot => return list_written(&gnuplot::write(&results, dir()?)?),
        ReportFormat::Svg => return list_written(&plots(&results, dir()?, plot::Format::Svg)?),
        ReportFormat::Png => return list_written(&plots(&results, dir()?, plot::Format::Png)?),
    };
    deliver(&text, args.output.as_deref())
}

fn plots(results: &[Loaded], dir: &Path, format: plot::Format) -> anyhow::Result<Vec<PathBuf>> {
    plot::write_all(&plot::result_plots(results)?, dir, format)
}

/// HdrHistogram interval logs (`monitor --log-dir`) instead of result files: a table per
/// log. `None` when the first file is not one.
fn interval_logs(args: &ReportArgs) -> anyhow::Result<Option<String>> {
    use crate::report::terminal::interval_log;
    let read = |p: &Path| std::fs::read(p).with_context(|| format!("cannot read {}", p.display()));
    let Some(first) = args.results.first() else {
        return Ok(None);
    };
    if !interval_log::looks_like(&read(first)?) {
        return Ok(None);
    }
    if !matches!(args.format, ReportFormat::Table) {
        anyhow::bail!(
            "{}: an interval log is shown as a table only",
            first.display()
        );
    }
    let mut text = String::new();
    for p in &args.results {
        let log =
            interval_log::parse(&read(p)?).map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))?;
        text.push_str(&interval_log::table(&p.display().to_string(), &log));
    }
    Ok(Some(text))
}

/// Reads every file before anything is written: one bad file fails the whole command,
/// and the error names it.
pub(super) fn read_all(paths: &[std::path::PathBuf]) -> anyhow::Result<Vec<Loaded>> {
    paths
        .iter()
        .map(|p| Ok((p.clone(), ResultFile::read(p)?)))
        .collect()
}

/// `text` to `output` (atomically) or to stdout.
pub(super) fn deliver(text: &str, output: Option<&Path>) -> anyhow::Result<Ending> {
    match output {
        Some(path) => crate::report::result::write_atomic(path, text.as_bytes())
            .with_context(|| format!("cannot write {}", path.display()))?,
        None => write_stdout(text)?,
    }
    Ok(Ending::Completed)
}

/// gnuplot, svg and png write several files: the directory -o names.
pub(super) fn output_dir(format: ReportFormat, output: Option<&Path>) -> anyhow::Result<&Path> {
    output.ok_or_else(|| {
        anyhow::anyhow!(
            "--format {} writes several files: name a directory with -o DIR",
            format_name(format)
        )
    })
}

/// The files written, one per line on stdout.
pub(super) fn list_written(written: &[std::path::PathBuf]) -> anyhow::Result<Ending> {
    let mut text = String::new();
    for p in written {
        text.push_str(&format!("{}\n", p.display()));
    }
    write_stdout(&text)?;
    Ok(Ending::Completed)
}

fn format_name(f: ReportFormat) -> String {
    use clap::ValueEnum;
    f.to_possible_value()
        .map_or_else(String::new, |v| v.get_name().to_string())
}

/// The probes' own terminal tables, file after file, each followed by its verdict (a
/// main job's) and, with `--top N`, its N largest events.
fn tables(results: &[Loaded], top: Option<usize>) -> String {
    let mut out = String::new();
    for (path, r) in results {
        out.push_str(&file_header(path, r));
        out.push_str(&probe_tables(r));
        out.push_str(&crate::report::terminal::watch::watch_text(r));
        if let Some(t) = &r.tune {
            out.push_str(&views::tune::tune_text(t));
        }
        if let Some(v) = verdict_of(r) {
            out.push('\n');
            out.push_str(&verdict::text(&v));
        }
        if let Some(n) = top {
            out.push('\n');
            out.push_str(&views::largest_events(r, n));
        }
        out.push('\n');
    }
    out
}

/// The verdict a main job stored; for a main job's file from before verdicts were
/// stored, the same verdict made now from the file. `None` for a single command's file.
pub fn verdict_of(r: &ResultFile) -> Option<verdict::Verdict> {
    if let Some(v) = &r.verdict {
        return Some(v.clone());
    }
    // `jitterscope` alone or `jitterscope run …`: the main job.
    let sub = r.run.command_line.get(1).map(String::as_str);
    matches!(sub, None | Some("run")).then(|| verdict::verdict(r))
}

/// The file, host and run, wrapped to the layout's width, then the command on a line of
/// its own (whole, ready to paste), then the degradations.
fn file_header(path: &Path, r: &ResultFile) -> String {
    let (h, run) = (&r.host, &r.run);
    let width = Layout::current().wrap_width();
    let rt = match h.preempt_rt() {
        Some(_) => " PREEMPT_RT",
        None => "",
    };
    let head = format!(
        "== {}: {} ({}{rt}, {}), started {}",
        path.display(),
        h.hostname,
        h.kernel_release,
        h.cpu_model,
        run.start_time,
    );
    let mut out = format!(
        "{}\n  {}\n",
        wrap(&head, width, "   "),
        run.command_line.join(" ")
    );
    for d in &run.degraded {
        let line = format!("degraded: {}", d.message);
        out.push_str(&wrap(&line, width, "  "));
        out.push('\n');
    }
    out
}

/// The tables of every probe kind the result holds, in a fixed order.
pub(super) fn probe_tables(r: &ResultFile) -> String {
    views::tables(r)
}

/// Stdout; a reader that went away (`| head`) is not an error.
pub(super) fn write_stdout(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r.context("cannot write to stdout"),
    }
}
