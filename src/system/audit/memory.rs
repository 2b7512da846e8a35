//! Memory: transparent huge pages, swap and swappiness, the vmstat interval, NUMA
//! balancing, KSM and DAMON (whose kernel threads scan memory on any CPU).

use super::{Area, Finding, FindingId as Id, Host, Missing, Severity, finding, short};
use crate::system::finding_id::Check;

pub(super) fn memory(h: &Host) -> Vec<Finding> {
    vec![
        thp_enabled(h),
        thp_defrag(h),
        swap(h),
        swappiness(h),
        stat_interval(h),
        numa_balancing(h),
        ksm(h),
        damon(h),
    ]
}

/// The bracketed, active word of a sysfs choice file ("always [madvise] never").
fn active_choice(h: &Host, abs: &str) -> Result<String, Missing> {
    let text = h.read(abs)?;
    text.split_whitespace()
        .find_map(|w| w.strip_prefix('[')?.strip_suffix(']'))
        .map(str::to_string)
        .ok_or_else(|| Missing::Unparseable(format!("{abs}: {:?}", short(&text))))
}

fn thp_enabled(h: &Host) -> Finding {
    let path = "/sys/kernel/mm/transparent_hugepage/enabled";
    let why = "khugepaged and page faults that compact memory into huge pages stall the program";
    match active_choice(h, path) {
        Ok(w) if w == "never" => finding(Area::Memory, Id::ThpNever, Severity::Ok, w).why(why),
        Ok(w) if w == "madvise" => finding(Area::Memory, Id::ThpMadvise, Severity::Info, w)
            .why("only regions that ask for huge pages get them; khugepaged still scans those")
            .echo(h, path, "never"),
        Ok(w) => finding(Area::Memory, Id::ThpAlways, Severity::Warn, w)
            .why(why)
            .echo(h, path, "never")
            .boot(h, &["transparent_hugepage=never".to_string()]),
        Err(e) => e.finding(Area::Memory, Check::Thp),
    }
}

fn thp_defrag(h: &Host) -> Finding {
    let path = "/sys/kernel/mm/transparent_hugepage/defrag";
    let why = "with defrag 'always' a page fault may stop to compact memory for a huge page";
    match active_choice(h, path) {
        Ok(w) if w == "always" => finding(Area::Memory, Id::ThpDefragAlways, Severity::Warn, w)
            .why(why)
            .echo(h, path, "never"),
        Ok(w) => finding(Area::Memory, Id::ThpDefragOk, Severity::Ok, w).why(why),
        Err(e) => e.finding(Area::Memory, Check::ThpDefrag),
    }
}

/// The swap devices in use; `None` when /proc/swaps cannot be read.
fn swap_devices(h: &Host) -> Result<Vec<String>, Missing> {
    Ok(h.read("/proc/swaps")?
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect())
}

fn swap(h: &Host) -> Finding {
    let why = "a page swapped out costs a disk read, milliseconds, when touched again";
    match swap_devices(h) {
        Ok(d) if d.is_empty() => {
            finding(Area::Memory, Id::SwapOff, Severity::Ok, "no swap").why(why)
        }
        Ok(d) => finding(Area::Memory, Id::SwapOn, Severity::Warn, d.join(", "))
            .why(why)
            .manual("swapoff -a (and remove swap from /etc/fstab), or mlockall in the program"),
        Err(e) => e.finding(Area::Memory, Check::Swap),
    }
}

/// The swappiness tuned's latency profiles set.
const SWAPPINESS_TUNED: i64 = 10;

fn swappiness(h: &Host) -> Finding {
    let why = "a high swappiness swaps out anonymous memory sooner, a program's included";
    let v = match h.read_int("/proc/sys/vm/swappiness") {
        Ok(v) => v,
        Err(e) => return e.finding(Area::Memory, Check::Swappiness),
    };
    let swapping = swap_devices(h).is_ok_and(|d| !d.is_empty());
    if v <= SWAPPINESS_TUNED || !swapping {
        let note = if swapping {
            ""
        } else {
            " (no swap: it has no effect)"
        };
        return finding(
            Area::Memory,
            Id::SwappinessOk,
            Severity::Ok,
            format!("{v}{note}"),
        )
        .why(why);
    }
    finding(
        Area::Memory,
        Id::SwappinessHigh,
        Severity::Warn,
        v.to_string(),
    )
    .why(why)
    .sysctl(h, "vm.swappiness", &SWAPPINESS_TUNED.to_string())
}

/// The value the realtime tuned profile sets.
const STAT_INTERVAL_TUNED: i64 = 10;

fn stat_interval(h: &Host) -> Finding {
    let why = "the vmstat worker wakes on every CPU with changed counters once per interval";
    match h.read_int("/proc/sys/vm/stat_interval") {
        Ok(v) if v >= STAT_INTERVAL_TUNED => finding(
            Area::Memory,
            Id::StatIntervalOk,
            Severity::Ok,
            format!("{v} s"),
        )
        .why(why),
        Ok(v) => finding(
            Area::Memory,
            Id::StatIntervalShort,
            Severity::Warn,
            format!("{v} s"),
        )
        .why(why)
        .sysctl(h, "vm.stat_interval", &STAT_INTERVAL_TUNED.to_string()),
        Err(e) => e.finding(Area::Memory, Check::StatInterval),
    }
}

fn numa_balancing(h: &Host) -> Finding {
    let why =
        "automatic NUMA balancing unmaps pages to sample accesses: page faults and migrations";
    match h.read_int("/proc/sys/kernel/numa_balancing") {
        Ok(0) => finding(Area::Memory, Id::NumaBalancingOff, Severity::Ok, "0").why(why),
        Ok(v) => finding(
            Area::Memory,
            Id::NumaBalancingOn,
            Severity::Warn,
            v.to_string(),
        )
        .why(why)
        .sysctl(h, "kernel.numa_balancing", "0"),
        Err(e) => e.finding(Area::Memory, Check::NumaBalancing),
    }
}

fn ksm(h: &Host) -> Finding {
    let path = "/sys/kernel/mm/ksm/run";
    let why = "ksmd scans and merges identical pages, on any CPU it may run on, and a \
               write to a merged page is a copy-on-write fault";
    match h.read_int(path) {
        Ok(0) => finding(Area::Memory, Id::KsmOff, Severity::Ok, "run = 0").why(why),
        Ok(v) => finding(
            Area::Memory,
            Id::KsmRunning,
            Severity::Warn,
            format!("run = {v}"),
        )
        .why(why)
        .echo(h, path, "0"),
        Err(e) => e.finding(Area::Memory, Check::Ksm),
    }
}

/// DAMON's kdamond threads, as started through sysfs.
fn damon(h: &Host) -> Finding {
    let base = "/sys/kernel/mm/damon/admin/kdamonds";
    let why = "a running kdamond samples memory accesses every few ms from a kernel \
               thread that may run on any CPU";
    let n = match h.read_int(&format!("{base}/nr_kdamonds")) {
        Ok(n) => n,
        Err(e) => return e.finding(Area::Memory, Check::Damon),
    };
    let on: Vec<i64> = (0..n)
        .filter(|i| h.read(&format!("{base}/{i}/state")).as_deref() == Ok("on"))
        .collect();
    if on.is_empty() {
        return finding(
            Area::Memory,
            Id::DamonOff,
            Severity::Ok,
            format!("{n} kdamonds, none on"),
        )
        .why(why);
    }
    let mut f = finding(
        Area::Memory,
        Id::DamonRunning,
        Severity::Warn,
        format!(
            "kdamond {} on",
            on.iter()
                .map(|i| i.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    )
    .why(why);
    for i in on {
        f = f.echo(h, &format!("{base}/{i}/state"), "off");
    }
    f
}
