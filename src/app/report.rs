//! `jitterscope report` (placeholder: being written).

use crate::cli::ReportArgs;

use super::Ending;

/// `jitterscope report`.
pub fn run(_args: &ReportArgs) -> anyhow::Result<Ending> {
    anyhow::bail!("report is not written yet")
}
