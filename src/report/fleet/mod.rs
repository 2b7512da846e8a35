//! A fleet's results ranked: each result reduced to a host's headline figures and facts
//! as it is read (`summary`), the hosts that agree grouped and the outliers named
//! (`rank`) with what sets each apart from the majority (`differ`), shown as text, CSV or
//! an HTML page.

pub mod boot;
pub mod csv;
pub mod differ;
pub mod drift;
pub mod page;
pub mod rank;
pub mod summary;
pub mod text;
