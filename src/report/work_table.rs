//! The `work` tables (placeholder: being written).
