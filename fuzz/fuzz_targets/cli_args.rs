//! The command line: arbitrary argv vectors through `Cli::try_parse_from`, the parse
//! that `main` does (`Cli::try_parse`), so every value parser (durations, times, CPU
//! counts, gates, addresses) sees them; nothing runs. An error is rendered as `main`
//! renders it. Nothing panics, and clap's own debug checks of the command definition
//! (on in fuzz builds) hold.
//!
//! Input: the arguments after the program name, NUL-separated; any bytes, since argv
//! need not be UTF-8.

#![no_main]

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;

use clap::Parser;
use jitterscope::cli::Cli;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let args = data
        .split(|&b| b == 0)
        .map(|a| OsString::from_vec(a.to_vec()));
    let argv = std::iter::once(OsString::from("jitterscope")).chain(args);
    if let Err(e) = Cli::try_parse_from(argv) {
        let _ = e.render().to_string();
    }
});
