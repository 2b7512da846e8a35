//! Kernel trace events on the loop's own clock: a tracefs session of our own, its raw
//! per-CPU buffers read while the run goes on, and the attribution of each gap the
//! probes saw to the events inside it.
//!
//! - `session`: a private tracefs instance (`instances/jitterscope-PID`) on the measured
//!   CPUs with the `x86-tsc` clock, removed on every way out; stale ones of dead
//!   processes are removed on the next start. Global tracing settings are never touched.
//! - `format` and `ring`: the kernel's own `format` files and ring-buffer pages, parsed.
//! - `event`: the events we use, typed, with TSC timestamps.
//! - `reader`: a thread on the housekeeping CPU that drains `trace_pipe_raw` (or recorded
//!   pages) into a bounded window per CPU, noting where events were lost.
//! - `attribute`: gaps × events → net time per cause. Pure: tested on made-up lists.
//! - `stream`: the gaps of each measured CPU attributed as they settle into a running
//!   tally, keeping only the events waiting gaps need (issue 29).
//! - `watch`: per-thread wake-up delays, preemption and IRQ time of someone else's
//!   threads, each delay attributed as a gap (`jitterscope watch`). Pure.
//! - `tracer`: the kernel's osnoise, timerlat and hwlat tracers in an instance of ours,
//!   their global settings journaled and restored.
//! - `breaktrace`: cyclictest's breaktrace on the global trace (timer `--stop-above`).

pub mod attribute;
pub mod breaktrace;
pub mod event;
pub mod format;
pub mod reader;
pub mod ring;
pub mod session;
pub mod stream;
pub mod symbols;
pub mod tracer;
pub mod watch;

pub use breaktrace::{BreakTracer, TraceAction, tracefs_in_mounts, tracefs_root};
