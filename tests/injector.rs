//! The ground-truth disturbance now lives in the library (`engine::inject`, which
//! `selftest` uses too); the tests call it through this thin wrapper, which fails the test
//! if the injector cannot be real-time on its CPU.

use std::sync::Barrier;
use std::sync::atomic::AtomicBool;

use jitterscope::engine::clock::ClockInfo;
pub use jitterscope::engine::inject::{Injection, Schedule};

/// Runs `s` until done or `stop` (see `engine::inject::inject`).
pub fn inject(
    s: Schedule,
    ready: &Barrier,
    stop: &AtomicBool,
    clock: &ClockInfo,
) -> Vec<Injection> {
    jitterscope::engine::inject::inject(s, ready, stop, clock)
        .expect("the injector is real-time on its CPU")
}
