//! The osnoise tracer: its output parsed, its runs for `noise`.
