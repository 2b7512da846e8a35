//! The `osnoise` tables (`noise --engine osnoise`): per CPU, the figures `rtla osnoise
//! top` shows (runtime, noise, available share, the most noise of a period, the longest
//! single noise, and the interference the kernel counted by kind), then each kind's time
//! from the tracer's events with the sources that took the most.

use crate::report::ResultFile;
use crate::report::result::dist::{Dist, Entry};
use crate::report::terminal::table::{Tab, core, wide};
use crate::report::views::{EntryView, Kind, KindView};
use crate::trace::tracer::osnoise::OsnoiseEntry;

impl EntryView for OsnoiseEntry {
    fn kind(&self) -> Kind {
        Kind::Osnoise
    }

    /// One distribution: the noise samples above the threshold, with their rate and the
    /// share of the CPU they took.
    fn dists<'a>(&'a self, out: &mut Vec<Dist<'a>>) {
        let en = Entry::new("osnoise", format!("cpu{}", self.cpu), self.cpu.to_string());
        let secs = self.runtime_ns as f64 / 1e9;
        out.push(Dist {
            rate_per_s: Some(match secs > 0.0 {
                true => self.noise.count as f64 / secs,
                false => 0.0,
            }),
            interrupted_pct: Some(100.0 - self.available_pct),
            ..en.dist("noise", &self.noise, &self.histogram)
        });
    }
}

impl KindView for OsnoiseEntry {
    fn tables(r: &ResultFile) -> String {
        osnoise_text(r)
    }
}

/// Both tables and the engine's settings.
pub fn osnoise_text(r: &ResultFile) -> String {
    let entries: Vec<&OsnoiseEntry> = r.entries().collect();
    let Some(first) = entries.first() else {
        return String::new();
    };
    let mut out = format!("{}\n", settings_line(first));
    out.push_str(&summary_table(&entries).to_string());
    out.push('\n');
    out.push_str(&kinds_table(&entries).to_string());
    out.push('\n');
    for e in entries.iter().filter(|e| e.lost_events > 0) {
        out.push_str(&format!(
            "CPU {}: {} events lost by the kernel (its buffer overflowed): the figures miss \
             them; a higher -T gives fewer\n",
            e.cpu, e.lost_events
        ));
    }
    out
}

fn us(ns: u64) -> String {
    format!("{:.2}", ns as f64 / 1e3)
}

/// rtla osnoise top's columns, in µs: the headers (a `*` marks a wide-only one) and a
/// row per CPU, for the terminal and the page.
pub fn summary_rows(entries: &[&OsnoiseEntry]) -> (Vec<&'static str>, Vec<Vec<String>>) {
    let headers = vec![
        "CPU",
        "*periods",
        "*runtime (s)",
        "noise (µs)",
        "available (%)",
        "*max noise (µs)",
        "max single (µs)",
        "HW",
        "NMI",
        "IRQ",
        "softirq",
        "thread",
    ];
    let rows = (entries.iter())
        .map(|e| {
            let i = &e.interference;
            vec![
                e.cpu.to_string(),
                e.periods.to_string(),
                format!("{:.3}", e.runtime_ns as f64 / 1e9),
                us(e.noise_ns),
                format!("{:.5}", e.available_pct),
                us(e.max_period_noise_ns),
                us(e.max_single_ns),
                i.hw.count.to_string(),
                i.nmi.count.to_string(),
                i.irq.count.to_string(),
                i.softirq.count.to_string(),
                i.thread.count.to_string(),
            ]
        })
        .collect();
    (headers, rows)
}

/// Each kind's time from the events, and its source with the most time.
pub fn kinds_rows(entries: &[&OsnoiseEntry]) -> (Vec<&'static str>, Vec<Vec<String>>) {
    let headers = vec![
        "CPU",
        "kind",
        "counted",
        "events",
        "total (µs)",
        "longest (µs)",
        "most time",
    ];
    let mut rows = Vec::new();
    for e in entries {
        for (kind, i) in e.interference.each() {
            if i.count == 0 && i.events == 0 {
                continue;
            }
            let top = (e.sources.iter()).find(|s| s.kind == kind).map_or_else(
                || "-".to_string(),
                |s| format!("{} ({} µs)", s.name, us(s.total_ns)),
            );
            rows.push(vec![
                e.cpu.to_string(),
                kind.to_string(),
                i.count.to_string(),
                i.events.to_string(),
                us(i.total_ns),
                us(i.max_ns),
                top,
            ]);
        }
    }
    (headers, rows)
}

/// A terminal table of those rows: text columns left-aligned.
fn tab((headers, rows): (Vec<&'static str>, Vec<Vec<String>>), text: &[&str]) -> Tab {
    let cols: Vec<_> = (headers.iter())
        .map(|h| match h.strip_prefix('*') {
            Some(w) => wide(w),
            None if text.contains(h) => core(*h).text(),
            None => core(*h),
        })
        .collect();
    let mut t = Tab::new(&cols);
    for r in rows {
        t.row(r);
    }
    t
}

fn summary_table(entries: &[&OsnoiseEntry]) -> Tab {
    tab(summary_rows(entries), &[])
}

fn kinds_table(entries: &[&OsnoiseEntry]) -> Tab {
    tab(kinds_rows(entries), &["kind", "most time"])
}

/// The settings line over the tables.
pub fn settings_line(e: &OsnoiseEntry) -> String {
    let c = &e.config;
    format!(
        "osnoise (the kernel's tracer): period {} µs, runtime {} µs, threshold {} µs",
        c.period_us, c.runtime_us, c.threshold_us
    )
}
