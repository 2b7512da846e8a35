//! Statistics recorded by the hot loops and summarised after them.
//!
//! Every structure here is allocated and prefaulted before measuring starts, is owned by
//! one measuring thread, records in O(1) without allocating, and keeps a fixed memory
//! footprint however long the run.

pub mod causes;
pub mod coincidence;
pub mod events;
pub mod histogram;
pub mod misses;
pub mod rank;
pub mod series;

pub use events::{Event, EventLog, Largest};
pub use histogram::{LatencyHistogram, Summary};
pub use series::{IntervalSeries, SeriesOut};
