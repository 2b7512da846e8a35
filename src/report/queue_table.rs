//! The `queue` tables (placeholder: being written).
