//! Issue 5: `jitterscope work` (placeholder: being written).
