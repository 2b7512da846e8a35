//! The HdrHistogram interval-log reader (`report` on a log `monitor --log-dir` or
//! `report --format hdr` wrote): `looks_like` and `parse` on arbitrary bytes, and the
//! table `report` prints for what parses. Nothing panics.

#![no_main]

use jitterscope::report::terminal::interval_log::{looks_like, parse, table};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = looks_like(data);
    if let Ok(log) = parse(data) {
        let _ = table("fuzz.hlog", &log);
    }
});
