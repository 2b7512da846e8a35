//! `jitterscope c2c` (placeholder: being written).

use std::sync::atomic::AtomicBool;

use crate::cli::C2cArgs;

use super::Ending;

/// `jitterscope c2c`.
pub fn run(_args: &C2cArgs, _argv: &[String], _stop: &AtomicBool) -> anyhow::Result<Ending> {
    anyhow::bail!("c2c is not written yet")
}
