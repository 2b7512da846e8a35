//! `jitterscope compare`: reads the runs, compares them (`report::compare`) and writes
//! the comparison in the format asked for.

use std::path::{Path, PathBuf};

use crate::cli::{CompareArgs, ReportFormat};
use crate::report::compare::{self, Comparison, Run};
use crate::report::export::{self, Loaded};
use crate::report::terminal::table::Layout;
use crate::report::{compare::compare_view, export::gnuplot, export::plot, page::html};

use super::Ending;
use super::report::{deliver, list_written, output_dir, read_all};

/// `jitterscope compare`.
pub fn run(args: &CompareArgs) -> anyhow::Result<Ending> {
    if !args.labels.is_empty() && args.labels.len() != args.results.len() {
        anyhow::bail!(
            "{} --label given for {} result files: give one per file, or none",
            args.labels.len(),
            args.results.len()
        );
    }
    if args.labels.iter().any(|l| l.trim().is_empty()) {
        anyhow::bail!("--label: a label may not be empty");
    }
    let loaded = read_all(&args.results)?;
    let labels = labels(&args.labels, &args.results);
    if let Some(dup) = labels
        .iter()
        .enumerate()
        .find(|(i, l)| labels[..*i].contains(l))
    {
        anyhow::bail!(
            "--label: two runs would both be called '{}'; give distinct labels",
            dup.1
        );
    }
    // The terminal calls the runs by short names, said once above its tables.
    let called = match args.format {
        ReportFormat::Table => compare_view::terminal_labels(&labels),
        _ => labels.clone(),
    };
    let runs: Vec<Run<'_>> = loaded
        .iter()
        .zip(&called)
        .map(|((path, r), label)| Run {
            label: label.clone(),
            path: path.clone(),
            result: r,
        })
        .collect();
    let c = compare::compare(&runs).map_err(anyhow::Error::msg)?;
    let paths: Vec<String> = args
        .results
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    let dir = || output_dir(args.format, args.output.as_deref());
    let text = match args.format {
        ReportFormat::Table => (Layout::terminal(args.wide).per_cpu(args.per_cpu))
            .scoped(|| compare_view::table(&c, &labels, &paths)),
        ReportFormat::Markdown => compare_view::markdown(&c, &paths),
        ReportFormat::Csv => compare_view::csv(&c),
        ReportFormat::Hdr => export::hdr_log(&relabelled(&loaded, &labels))?,
        ReportFormat::Html => html::render(&page(&c, &runs, &paths)),
        ReportFormat::Gnuplot => {
            return list_written(&gnuplot::write(&relabelled(&loaded, &labels), dir()?)?);
        }
        ReportFormat::Svg => {
            return list_written(&plot::write_all(
                &overlays(&runs)?,
                dir()?,
                plot::Format::Svg,
            )?);
        }
        ReportFormat::Png => {
            return list_written(&plot::write_all(
                &overlays(&runs)?,
                dir()?,
                plot::Format::Png,
            )?);
        }
    };
    deliver(&text, args.output.as_deref())
}

/// The labels given, or the file names; equal names are numbered.
fn labels(given: &[String], paths: &[PathBuf]) -> Vec<String> {
    let base: Vec<String> = if given.is_empty() {
        paths
            .iter()
            .map(|p| {
                p.file_stem().map_or_else(
                    || p.display().to_string(),
                    |s| s.to_string_lossy().into_owned(),
                )
            })
            .collect()
    } else {
        given.to_vec()
    };
    base.iter()
        .enumerate()
        .map(|(i, l)| {
            let same = base.iter().filter(|m| *m == l).count();
            if same > 1 {
                format!("{l}.{}", i + 1)
            } else {
                l.clone()
            }
        })
        .collect()
}

/// The files under their labels' names, so exports that prefix by file stem use them.
fn relabelled(loaded: &[Loaded], labels: &[String]) -> Vec<Loaded> {
    loaded
        .iter()
        .zip(labels)
        .map(|((_, r), l)| {
            (
                Path::new(&format!("{}.json", l.replace(['/', ' '], "_"))).to_path_buf(),
                r.clone(),
            )
        })
        .collect()
}

fn overlays(runs: &[Run<'_>]) -> anyhow::Result<Vec<plot::Plot>> {
    let pairs: Vec<(String, &crate::report::ResultFile)> =
        runs.iter().map(|r| (r.label.clone(), r.result)).collect();
    Ok(plot::overlay_plots(&pairs)?)
}

/// The HTML page; plots that cannot be drawn leave a warning, not a failure
/// (`compare_view::page`, which bounds them too).
fn page(c: &Comparison, runs: &[Run<'_>], paths: &[String]) -> html::Page {
    compare_view::page(c, paths, overlays(runs).map_err(|e| format!("{e:#}")))
}
