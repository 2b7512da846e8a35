//! `report --format gnuplot`: data files plus a script that draws the same plots as
//! `--format svg`. (Skeleton.)

use std::path::{Path, PathBuf};

use crate::report::export::Loaded;

/// Writes the data files and `plots.gp` into `dir` (created if missing); returns the
/// files written.
pub fn write(results: &[Loaded], dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let _ = (results, dir);
    Ok(Vec::new())
}
