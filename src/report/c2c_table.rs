//! The `c2c` tables (placeholder: being written).
