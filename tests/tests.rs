//! The one integration-test binary (one link instead of one per file). Tests that
//! measure hold `util::measuring()` so that they never disturb each other, and tests that
//! need root, SCHED_FIFO, a second CPU or Python say plainly why they skip.

mod deadline_watch;
mod injector;
mod util;

mod agreement;
mod attribution_report;
mod audit;
mod bad_input;
mod big_hosts;
mod c2c;
mod c2c_view;
mod cfs_quota;
mod cgroups;
mod compare;
mod containers;
mod deadline;
mod fleet;
mod frozen;
mod gates;
mod gnuplot;
mod ground_truth;
mod help;
mod histogram_interop;
mod html_page;
mod image;
mod import_cycles;
mod lab;
mod lost_share;
mod main_job;
mod matrix;
mod memory;
mod monitor;
mod nonroot;
mod package;
mod pingpong;
mod plots;
mod podman;
mod ptp;
mod queue;
mod readme;
mod report;
mod root_domain;
mod selftest;
mod signals;
mod skips;
mod syscalls;
mod timer_cli;
mod timer_truth;
mod trace;
mod tune;
mod tuned_host;
mod version;
mod watch;
mod work;
