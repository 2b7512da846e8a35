//! Issue 4: `jitterscope queue` (placeholder: being written).
