//! `jitterscope pingpong` (placeholder: being written).

use std::sync::atomic::AtomicBool;

use crate::cli::PingpongArgs;

use super::Ending;

/// `jitterscope pingpong`.
pub fn run(_args: &PingpongArgs, _argv: &[String], _stop: &AtomicBool) -> anyhow::Result<Ending> {
    anyhow::bail!("pingpong is not written yet")
}
