//! The result schema and the ways of showing it, in rooms by who reads them, bottom to
//! top: `result` (the schema), `terminal`, `views`, `export`, `page`, then `compare` and
//! `fleet` (many results ranked), side by side on top. A room uses the rooms below it,
//! never those above, but for the one borrowing named atop `result`. Every reader and
//! exporter works from a `ResultFile` only, never from live probe state.

pub mod compare;
pub mod export;
pub mod fleet;
pub mod page;
pub mod result;
pub mod terminal;
pub mod views;

pub use result::{ProbeEntry, ResultFile, RunInfo, SCHEMA};
