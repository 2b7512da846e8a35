//! The kernel's own latency tracers, run in an instance of ours.
//!
//! - `timerlat`: the timerlat tracer's lines parsed into samples, and its run.

pub mod timerlat;
