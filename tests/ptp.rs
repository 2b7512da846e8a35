//! Issue 5: `jitterscope ptp` (placeholder: being written).
