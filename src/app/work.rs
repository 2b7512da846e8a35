//! `jitterscope work` (placeholder: being written).

use std::sync::atomic::AtomicBool;

use crate::cli::WorkArgs;

use super::Ending;

/// `jitterscope work`.
pub fn run(_args: &WorkArgs, _argv: &[String], _stop: &AtomicBool) -> anyhow::Result<Ending> {
    anyhow::bail!("work is not written yet")
}
