//! CPU lists, the user's (`-a`) and the kernel's (sysfs `online`, `isolated`, …):
//! `parse_strict` and `parse_kernel` on arbitrary text, each list that parses printed and
//! parsed back to itself, and a universe built from the input checking a user list and
//! choosing a CPU plan (`CpuUniverse::parse_user_list`, `CpuPlan::choose`). Nothing
//! panics.
//!
//! Input: text. Its first line is also the user's list, the second the online CPUs, the
//! third the allowed ones and the fourth a housekeeping CPU, when there are that many.

#![no_main]

use jitterscope::engine::cpu::{CpuList, CpuPlan, CpuUniverse};
use libfuzzer_sys::fuzz_target;

/// A parsed list, written as the kernel writes it and parsed again, is the same list.
fn round_trips(list: &CpuList) {
    let text = String::from(list.clone());
    assert_eq!(CpuList::parse_kernel(&text).as_ref(), Ok(list), "{text:?}");
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let strict = CpuList::parse_strict(text);
    let kernel = CpuList::parse_kernel(text);
    if let Ok(l) = &strict {
        round_trips(l);
        // What the strict parser takes, the kernel's takes too, as the same set.
        assert_eq!(kernel.as_ref(), Ok(l));
    }
    if let Ok(l) = &kernel {
        round_trips(l);
    }
    let mut lines = text.split('\n');
    let user = lines.next().unwrap_or_default();
    let kernel_line = |l: Option<&str>| l.and_then(|l| CpuList::parse_kernel(l).ok());
    let (Some(online), Some(allowed)) = (kernel_line(lines.next()), kernel_line(lines.next()))
    else {
        return;
    };
    let Some(&max_cpu) = online.cpus().last() else {
        return;
    };
    let universe = CpuUniverse {
        online,
        max_cpu,
        allowed,
    };
    let housekeeping = lines.next().and_then(|l| l.trim().parse().ok());
    let requested = universe.parse_user_list(user).ok();
    let _ = CpuPlan::choose(&universe, requested.map(|l| (user, l)), housekeeping);
});
