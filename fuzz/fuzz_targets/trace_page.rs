//! A ring-buffer page as `trace_pipe_raw` hands it over, parsed and decoded the way the
//! trace reader does (`parse_page`, then `Decoder::decode` on each record), with this
//! host's real event formats: whatever the page holds, nothing panics.
//!
//! Input: one mode byte, then either the page (even mode: the default 64-bit layout) or
//! `events/header_page` text, a NUL and the page (odd mode: the layout parsed from that
//! text, as the session does, falling back to the default when it does not parse).

#![no_main]

use std::sync::OnceLock;

use jitterscope::trace::event::Decoder;
use jitterscope::trace::format::{EventFormat, PageLayout, parse_event_format};
use jitterscope::trace::ring::parse_page;
use libfuzzer_sys::fuzz_target;

/// ("system:event", its `format` file) as read from tracefs by fuzz/make_seeds.sh.
macro_rules! format_file {
    ($sys:literal, $ev:literal) => {
        (
            concat!($sys, ":", $ev),
            include_str!(concat!("../tracefs/events/", $sys, "/", $ev, "/format")),
        )
    };
}

/// The events the session enables (`trace::event::EVENTS`) and the vectors that fire most.
const FORMATS: &[(&str, &str)] = &[
    format_file!("irq", "irq_handler_entry"),
    format_file!("irq", "irq_handler_exit"),
    format_file!("irq", "softirq_entry"),
    format_file!("irq", "softirq_exit"),
    format_file!("nmi", "nmi_handler"),
    format_file!("sched", "sched_switch"),
    format_file!("sched", "sched_wakeup"),
    format_file!("workqueue", "workqueue_execute_start"),
    format_file!("workqueue", "workqueue_execute_end"),
    format_file!("timer", "hrtimer_expire_entry"),
    format_file!("timer", "hrtimer_expire_exit"),
    format_file!("irq_vectors", "local_timer_entry"),
    format_file!("irq_vectors", "local_timer_exit"),
    format_file!("irq_vectors", "reschedule_entry"),
    format_file!("irq_vectors", "reschedule_exit"),
    format_file!("irq_vectors", "call_function_single_entry"),
    format_file!("irq_vectors", "call_function_single_exit"),
];

/// Parsed once: parsing them is not what this target tests (trace_format does).
fn formats() -> &'static [EventFormat] {
    static PARSED: OnceLock<Vec<EventFormat>> = OnceLock::new();
    PARSED.get_or_init(|| {
        FORMATS
            .iter()
            .map(|(name, text)| parse_event_format(name, text).expect("a real format parses"))
            .collect()
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let (layout, page) = match mode % 2 {
        0 => (PageLayout::DEFAULT, rest),
        _ => {
            let nul = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
            let header = String::from_utf8_lossy(&rest[..nul]);
            let layout = PageLayout::parse(&header).unwrap_or(PageLayout::DEFAULT);
            (layout, rest.get(nul + 1..).unwrap_or_default())
        }
    };
    let parsed = parse_page(page, &layout);
    // A fresh decoder per page, as each run has: its interned names start empty.
    let mut decoder = Decoder::new(formats());
    for r in &parsed.records {
        let _ = decoder.decode(r.ts, r.data);
    }
});
