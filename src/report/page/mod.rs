//! The page room: the self-contained HTML page and everything only the page draws (the
//! per-CPU sections, the heat map over time); it reads the result, terminal, views and
//! export rooms, never compare.

pub mod html;
pub mod page_cpus;
pub mod result_page;
pub mod time_heatmap;
