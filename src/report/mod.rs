//! The result schema and the ways of showing it. Every reader and exporter works from a
//! `ResultFile` only, never from live probe state.

pub mod audit_table;
pub mod c2c_table;
pub mod compare;
pub mod compare_view;
pub mod export;
pub mod gnuplot;
pub mod html;
pub mod interval_log;
pub mod pingpong_table;
pub mod plot;
pub mod ptp_table;
pub mod queue_table;
pub mod result;
pub mod syscalls_table;
pub mod table;
pub mod verdict;
pub mod work_table;

pub use result::{ProbeEntry, ResultFile, RunInfo, SCHEMA};
