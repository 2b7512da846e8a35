//! `jitterscope ptp` (placeholder: being written).

use std::sync::atomic::AtomicBool;

use crate::cli::PtpArgs;

use super::Ending;

/// `jitterscope ptp`.
pub fn run(_args: &PtpArgs, _argv: &[String], _stop: &AtomicBool) -> anyhow::Result<Ending> {
    anyhow::bail!("ptp is not written yet")
}
