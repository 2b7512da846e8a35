//! The capabilities this thread holds: a leaf that `sched` and `deadline` both ask, since
//! `sched` already uses `deadline`.

use rustix::thread::CapabilitySet;

/// Whether this thread holds `cap` in its effective set.
pub fn holds(cap: CapabilitySet) -> bool {
    rustix::thread::capabilities(None).is_ok_and(|c| c.effective.contains(cap))
}
