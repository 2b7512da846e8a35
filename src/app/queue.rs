//! `jitterscope queue` (placeholder: being written).

use std::sync::atomic::AtomicBool;

use crate::cli::QueueArgs;

use super::Ending;

/// `jitterscope queue`.
pub fn run(_args: &QueueArgs, _argv: &[String], _stop: &AtomicBool) -> anyhow::Result<Ending> {
    anyhow::bail!("queue is not written yet")
}
