//! Issue 4: `jitterscope pingpong` (placeholder: being written).
