//! The command layer: turns parsed arguments into validated commands, runs them through
//! the one pipeline (`pipeline`), and says how the run ended. Warnings go to stderr once
//! each; the table (or the JSON) goes to stdout.
//!
//! A measuring kind is a file here that describes it (`noise.rs`, `timer.rs`, …: a
//! `Measure`); placing its threads, the safety check, the announcement, the result,
//! saving and printing are written once, in `pipeline` and `output`.

pub mod audit;
pub mod c2c;
pub mod compare;
pub mod cpuset;
pub mod deadline;
pub mod fleet;
pub mod hold;
pub mod hwlat;
pub mod kernel_tracer;
pub mod main_job;
pub mod manual;
pub mod monitor;
pub mod noise;
pub mod osnoise;
pub mod output;
pub mod pingpong;
pub mod pipeline;
pub mod ptp;
pub mod queue;
pub mod report;
pub mod selftest;
pub mod settings;
pub mod syscalls;
pub mod timer;
pub mod timerlat;
pub mod tracing;
pub mod tune;
pub mod watch;
pub mod work;

/// How a command ended, for the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// Ran to completion (exit 0).
    Completed,
    /// Stopped early by a signal; what was measured was printed and saved (exit 130).
    Interrupted,
    /// A limit the user set was crossed (`timer --stop-above`); what was measured was
    /// printed and saved (exit 1).
    LimitExceeded,
    /// `selftest`: no check failed, but one could not tell the tool's error from the
    /// host's background, which was too noisy to judge against (exit 3).
    Undecided,
    /// `selftest`: no check with holds judged at all: each could not, or was skipped
    /// (exit 4).
    Unjudged,
}

impl Ending {
    /// Completed, or interrupted when the run was.
    pub fn of(interrupted: bool) -> Ending {
        match interrupted {
            true => Ending::Interrupted,
            false => Ending::Completed,
        }
    }
}
