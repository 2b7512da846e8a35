//! Issue 4: `jitterscope c2c` (placeholder: being written).
