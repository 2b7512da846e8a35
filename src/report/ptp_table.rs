//! The `ptp` tables (placeholder: being written).
