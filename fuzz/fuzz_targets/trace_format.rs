//! The kernel's trace format files and a record decoded with them: `parse_event_format`
//! and `PageLayout::parse` on arbitrary text, then the decoder built from that format on
//! an arbitrary record, and `parse_page` with a layout built from that text (a layout
//! with absurd offsets must not panic either). Nothing panics.
//!
//! Input: the event's "system:event" name, a newline, its format text, a NUL, then the
//! record bytes (what a page's record holds, its common_type first).

#![no_main]

use jitterscope::trace::event::Decoder;
use jitterscope::trace::format::{PageLayout, parse_event_format};
use jitterscope::trace::ring::parse_page;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let nul = data.iter().position(|&b| b == 0).unwrap_or(data.len());
    let record = data.get(nul + 1..).unwrap_or_default();
    // The session reads format files with read_to_string: only UTF-8 reaches the parsers.
    let Ok(text) = std::str::from_utf8(&data[..nul]) else {
        return;
    };
    let (name, format) = text.split_once('\n').unwrap_or((text, ""));
    if let Some(layout) = PageLayout::parse(format) {
        let _ = parse_page(record, &layout);
    }
    if let Some(f) = parse_event_format(name, format) {
        let mut decoder = Decoder::new(std::slice::from_ref(&f));
        let _ = decoder.decode(0, record);
        let _ = decoder.decode(u64::MAX, record);
    }
});
