//! The `syscalls` tables (placeholder: being written).
