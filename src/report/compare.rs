//! `jitterscope compare` (in progress).
