//! jitterscope: how long a Linux host can keep a thread from running, why, and whether a
//! change helped.
//!
//! The library holds everything; `src/main.rs` only parses, dispatches and maps errors to
//! exit codes. Data flows one way: `cli` → a probe's validated config → `engine` (threads,
//! clocks, scheduling) → `stats` → `report::result` (the saved JSON) → the exporters.
#![deny(unsafe_code)]

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
