//! Shared helpers: the binary, the measurement lock, and skip conditions.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::{Mutex, MutexGuard};

/// Measuring tests run one at a time: on a 2-CPU machine two of them would measure each
/// other.
pub fn measuring() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_jitterscope"))
}

pub fn jitterscope(args: &[&str]) -> Output {
    Command::new(bin())
        .args(args)
        .output()
        .expect("the binary runs")
}

/// Prints why a test is skipped; the caller returns.
pub fn skip(test: &str, why: &str) {
    eprintln!("SKIPPED {test}: {why}");
}

pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// A CPU to measure and a different one for the coordinator, when there are two.
pub fn two_cpus() -> Option<(usize, usize)> {
    let u = jitterscope::engine::cpu::CpuUniverse::detect().ok()?;
    let usable = u.usable();
    let cpus = usable.cpus();
    (cpus.len() >= 2).then(|| (cpus[cpus.len() - 1], cpus[0]))
}

/// Whether this process may use SCHED_FIFO at all.
pub fn fifo_available() -> Result<(), String> {
    use jitterscope::engine::sched::{Policy, SchedRequest, preflight};
    preflight(SchedRequest {
        policy: Policy::Fifo,
        priority: 1,
    })
}

pub fn stderr_lines(o: &Output) -> Vec<String> {
    String::from_utf8_lossy(&o.stderr)
        .lines()
        .map(str::to_string)
        .collect()
}
