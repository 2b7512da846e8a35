//! Plots of saved results, drawn by the tool itself (plotters): SVG for the HTML page and
//! `report --format svg`, PNG for `--format png`.
//!
//! (Skeleton: the signatures are the contract the HTML page and the CLI are written
//! against.)

use crate::report::ResultFile;
use crate::report::export::Loaded;

/// Why a plot could not be drawn.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    #[error("plots need a TrueType font and none was found: {0}")]
    FontMissing(String),
    #[error("{0}")]
    Data(String),
    #[error("cannot draw {name}: {reason}")]
    Draw { name: String, reason: String },
}

/// One plot, ready to render.
pub struct Plot {
    /// File-safe name, unique in its set (`noise-cpu1-percentiles`).
    pub name: String,
    /// Human title, with units.
    pub title: String,
}

impl Plot {
    pub fn svg(&self) -> Result<String, PlotError> {
        Err(PlotError::Data("not yet".into()))
    }

    pub fn png(&self) -> Result<Vec<u8>, PlotError> {
        Err(PlotError::Data("not yet".into()))
    }
}

/// Every plot of each result: per distribution, its percentile distribution and its
/// histogram; per noise or timer entry, its series; per c2c result, a heat map. With
/// several files, names are prefixed by the file's stem.
pub fn result_plots(results: &[Loaded]) -> Result<Vec<Plot>, PlotError> {
    let _ = results;
    Ok(Vec::new())
}

/// The runs overlaid: for each distribution present in more than one run (matched by
/// probe, key and metric), one percentile plot and one histogram with a labelled line per
/// run; and series overlaid the same way.
pub fn overlay_plots(runs: &[(String, &ResultFile)]) -> Result<Vec<Plot>, PlotError> {
    let _ = runs;
    Ok(Vec::new())
}

/// The file formats a plot renders to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Svg,
    Png,
}

/// Renders every plot into `dir` (created if missing) as `NAME.svg` or `NAME.png`, each
/// written atomically; returns the paths written.
pub fn write_all(
    plots: &[Plot],
    dir: &std::path::Path,
    format: Format,
) -> anyhow::Result<Vec<std::path::PathBuf>> {
    let _ = (plots, dir, format);
    Ok(Vec::new())
}
