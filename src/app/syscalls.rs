//! `jitterscope syscalls` (placeholder: being written).

use std::sync::atomic::AtomicBool;

use crate::cli::SyscallsArgs;

use super::Ending;

/// `jitterscope syscalls`.
pub fn run(_args: &SyscallsArgs, _argv: &[String], _stop: &AtomicBool) -> anyhow::Result<Ending> {
    anyhow::bail!("syscalls is not written yet")
}
