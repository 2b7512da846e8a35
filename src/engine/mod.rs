//! What every probe shares: CPU sets, scheduling and memory, the clock, and the runner
//! that starts pinned measuring threads together and stops them together.

pub mod calls;
pub mod caps;
pub mod clock;
pub mod cpu;
pub mod deadline;
pub mod errno;
pub mod inject;
pub mod ipc;
pub mod pmqos;
pub mod ptp_ioctl;
pub mod run;
pub mod sched;
pub mod topology;
pub mod tsc_sync;
