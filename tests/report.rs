//! Issue 6: `jitterscope report` (placeholder: being written).
