//! The result schema and the ways of showing it. Every reader and exporter works from a
//! `ResultFile` only, never from live probe state.

pub mod audit_table;
pub mod cause_matrix;
pub mod cause_names;
pub mod compare;
pub mod compare_causes;
pub mod compare_view;
pub mod describe;
pub mod dist;
pub mod export;
pub mod figure;
pub mod fleet;
pub mod gate;
pub mod gnuplot;
pub mod group;
pub mod html;
pub mod interval_log;
pub mod page_cpus;
pub mod plot;
pub mod result;
pub mod result_page;
pub mod table;
pub mod time_heatmap;
pub mod verdict;
pub mod views;
pub mod watch;

pub use result::{ProbeEntry, ResultFile, RunInfo, SCHEMA};
