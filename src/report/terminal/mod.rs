//! The terminal room: what `jitterscope` prints on a terminal (the tables, the grouping of
//! CPUs that agree, the verdict, the audit's table, watch); it reads the result room only,
//! never the views, the exporters, the page or compare.

pub mod audit_table;
pub mod cause_matrix;
pub mod cause_names;
pub mod group;
pub mod interval_log;
pub mod table;
pub mod verdict;
pub mod watch;
