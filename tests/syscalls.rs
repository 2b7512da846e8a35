//! Issue 5: `jitterscope syscalls` (placeholder: being written).
