//! The measurements, one module per kind. A probe is a validated configuration plus a
//! function from (configuration, run plan, clock) to a result; probes never print.

pub mod c2c;
pub mod deadline_gaps;
pub mod noise;
pub mod pingpong;
pub mod ptp;
pub mod queue;
pub mod record;
pub mod syscalls;
pub mod timer;
pub mod timer_stream;
pub mod timerlat;
pub mod work;
