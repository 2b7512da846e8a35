//! The result reader and the text exporters on arbitrary input: whatever a result file
//! holds, reading it either fails with an error or yields a result that every exporter
//! renders (or rejects with an error); nothing panics.

#![no_main]

use std::path::PathBuf;

use jitterscope::report::ResultFile;
use jitterscope::report::export::{csv_buckets, csv_summary, hdr_log, markdown};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // `ResultFile::read` rejects what is not UTF-8 before parsing, so only text matters.
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(result) = ResultFile::parse(text) else {
        return;
    };
    let loaded = [(PathBuf::from("fuzz/r.json"), result)];
    let _ = markdown(&loaded);
    let _ = csv_summary(&loaded);
    let _ = csv_buckets(&loaded);
    let _ = hdr_log(&loaded);
});
