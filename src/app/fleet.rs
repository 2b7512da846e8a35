//! `jitterscope fleet`: reads a fleet's results one at a time, keeping a small summary of
//! each (`report::fleet::summary`), ranks them and writes the text, CSV or page.
//!
//! A file named on the command line must be a result. In a directory, only `*.json`
//! files are read: a fleet's directory also holds the pages and logs its runs wrote, so
//! the others are skipped and counted; a `*.json` that is not a result is an error, as a
//! host quietly left out of the ranking would be worse than a stopped command.

use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::cli::{FleetArgs, FleetFormat};
use crate::report::fleet::rank::Fleet;
use crate::report::fleet::summary::{self, HostSummary};
use crate::report::fleet::{csv, page, text};
use crate::report::page::html;
use crate::report::terminal::table::Layout;

use super::Ending;
use super::report::deliver;

/// `jitterscope fleet`.
pub fn run(args: &FleetArgs) -> anyhow::Result<Ending> {
    let found = files(&args.results)?;
    let mut hosts: Vec<HostSummary> = Vec::with_capacity(found.files.len());
    for path in &found.files {
        hosts.push(summary::read(path)?);
    }
    summary::label_hosts(&mut hosts);
    let fleet = Fleet::rank(hosts, args.per_host);
    let source = source_words(&args.results);
    let text = match args.format {
        FleetFormat::Text => {
            Layout::terminal(args.wide).scoped(|| text::text(&fleet, &source, &found.notes))
        }
        FleetFormat::Csv => csv::csv(&fleet),
        FleetFormat::Html => html::render(&page::page(&fleet, &source, &found.notes)),
    };
    deliver(&text, args.output.as_deref())
}

/// The result files to read, and notes on what was skipped.
struct Found {
    files: Vec<PathBuf>,
    notes: Vec<String>,
}

/// Each argument's files: a file as it is, a directory's `*.json` files in name order.
fn files(args: &[PathBuf]) -> anyhow::Result<Found> {
    let mut found = Found {
        files: Vec::new(),
        notes: Vec::new(),
    };
    for arg in args {
        if !arg.is_dir() {
            found.files.push(arg.clone());
            continue;
        }
        let (json, skipped) = json_files(arg)?;
        if json.is_empty() {
            anyhow::bail!(
                "{}: no result files (*.json) in the directory",
                arg.display()
            );
        }
        if skipped > 0 {
            found.notes.push(format!(
                "{skipped} file(s) in {} that are not *.json were skipped.",
                arg.display()
            ));
        }
        found.files.extend(json);
    }
    Ok(found)
}

/// A directory's `*.json` files, sorted, and how many other files it holds.
fn json_files(dir: &Path) -> anyhow::Result<(Vec<PathBuf>, usize)> {
    let read = || format!("cannot read the directory {}", dir.display());
    let mut json = Vec::new();
    let mut skipped = 0;
    for entry in std::fs::read_dir(dir).with_context(read)? {
        let path = entry.with_context(read)?.path();
        match path.extension().is_some_and(|e| e == "json") && path.is_file() {
            true => json.push(path),
            false => skipped += usize::from(path.is_file()),
        }
    }
    json.sort();
    Ok((json, skipped))
}

/// Where the results came from: the directory, or "12 files".
fn source_words(args: &[PathBuf]) -> String {
    match args {
        [one] if one.is_dir() => one.display().to_string(),
        many => format!("{} paths", many.len()),
    }
}
