//! The `pingpong` tables (placeholder: being written).
