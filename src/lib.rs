//! jitterscope: how long a Linux host can keep a thread from running, why, and whether a
//! change helped.
//!
//! The library holds everything; `src/main.rs` only parses, dispatches and maps errors to
//! exit codes. Data flows one way: `cli` → a probe's validated config → `engine` (threads,
//! clocks, scheduling) → `stats` → `report::result` (the saved JSON) → the exporters.
#![deny(unsafe_code)]

/// The git commit this binary was built from (build.rs), or "unknown".
pub const COMMIT: &str = env!("JITTERSCOPE_COMMIT");
/// What `--version` prints after the name: the version and the commit.
pub const LONG_VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("JITTERSCOPE_COMMIT"),
    ")"
);

pub mod app;
pub mod cli;
pub mod degraded;
pub mod engine;
pub mod probes;
pub mod report;
pub mod stats;
pub mod system;
pub mod trace;
pub mod units;
