//! The kernel's own latency tracers, run in a tracefs instance of ours.
//!
//! - `instance`: a tracer in `instances/jitterscope-PID-TRACER`, its global settings
//!   (`osnoise/*`, `tracing_thresh`) journaled before they are written and restored on
//!   every way out; shared by every engine below.
//! - `osnoise`: the osnoise tracer's per-CPU noise and interference, for `noise`.
//! - `hwlat`: the hwlat tracer's hardware and firmware stalls, a check run alone.
//! - `timerlat`: the timerlat tracer's lines parsed into per-CPU samples, for `timer`.

pub mod hwlat;
pub mod instance;
pub mod osnoise;
pub mod timerlat;
pub mod timerlat_run;
