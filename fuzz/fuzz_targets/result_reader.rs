//! The result reader and the text exporters on arbitrary input: whatever a result file
//! holds, reading it either fails with an error or yields a result that every exporter
//! renders (or rejects with an error), and compare and the main job's verdict take it;
//! nothing panics.

#![no_main]

use std::path::PathBuf;

use jitterscope::report::ResultFile;
use jitterscope::report::compare::{Run, compare};
use jitterscope::report::export::{csv_buckets, csv_summary, hdr_log, markdown};
use jitterscope::report::terminal::verdict::verdict;
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
    // compare decodes every histogram and tests the series; the verdict splits event logs.
    let r = &loaded[0].1;
    let run = |label: &str| Run {
        label: label.into(),
        path: PathBuf::from("fuzz/r.json"),
        result: r,
    };
    let _ = compare(&[run("a"), run("b")]);
    let _ = verdict(r);
});
