//! The /proc counter parsers a snapshot uses (`parse_interrupts`, `parse_softirqs`,
//! `parse_stat`) on arbitrary text, and `diff` between snapshots built from what parsed
//! (counters that appear, vanish or stand still). Nothing panics.
//!
//! Input: the text of /proc/interrupts, /proc/softirqs or /proc/stat (each parser tries
//! it); CPUs 0 and 1 are the snapshot's, as on the 2-CPU hosts this runs on.

#![no_main]

use jitterscope::engine::cpu::CpuList;
use jitterscope::system::counters::{
    CountRow, Snapshot, diff, parse_interrupts, parse_softirqs, parse_stat,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // read_to_string: only UTF-8 reaches the parsers.
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let cpus = CpuList::from_cpus(vec![0, 1]);
    let softirqs = parse_softirqs(text).unwrap_or_default();
    let snap = Snapshot {
        cpus: cpus.clone(),
        monotonic_ns: 1_000_000_000,
        interrupts: parse_interrupts(text).unwrap_or_default(),
        softirqs: softirqs
            .into_iter()
            .map(|(name, per_cpu)| CountRow {
                name,
                description: String::new(),
                per_cpu,
            })
            .collect(),
        cpu_time: parse_stat(text, &cpus).unwrap_or_default(),
        kthreads: Vec::new(),
    };
    let empty = Snapshot {
        monotonic_ns: 0,
        interrupts: Vec::new(),
        softirqs: Vec::new(),
        cpu_time: Vec::new(),
        ..snap.clone()
    };
    let _ = diff(&empty, &snap);
    let _ = diff(&snap, &snap);
    let _ = diff(&snap, &empty);
});
