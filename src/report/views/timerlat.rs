//! The `timerlat` view: the kernel's timerlat tracer's activations per CPU, as IRQ
//! latency, thread latency and the thread's own part (thread − IRQ), each a distribution
//! of every export, comparison and plot, and one terminal table with the split.

use crate::probes::record::HistogramRecord;
use crate::probes::timerlat::TimerlatEntry;
use crate::report::ResultFile;
use crate::report::result::dist::{Dist, Entry};
use crate::report::terminal::table::{Layout, Tab, core, wide, wrap};
use crate::report::views::{EntryView, Kind, KindView};
use crate::stats::Summary;

impl TimerlatEntry {
    /// The three latencies of each activation, with the names every output gives them.
    pub fn parts(&self) -> [(&'static str, &Summary, &HistogramRecord); 3] {
        [
            ("irq", &self.irq, &self.irq_histogram),
            ("thread", &self.thread_latency, &self.thread_histogram),
            (
                "thread-part",
                &self.thread_part,
                &self.thread_part_histogram,
            ),
        ]
    }
}

impl EntryView for TimerlatEntry {
    fn kind(&self) -> Kind {
        Kind::Timerlat
    }

    fn dists<'a>(&'a self, out: &mut Vec<Dist<'a>>) {
        let en = Entry::new("timerlat", format!("cpu{}", self.cpu), self.cpu.to_string());
        for (metric, s, h) in self.parts() {
            out.push(en.dist(metric, s, h));
        }
    }
}

impl KindView for TimerlatEntry {
    fn tables(r: &ResultFile) -> String {
        timerlat_tables(r)
    }
}

/// How each part reads in the table.
fn label(metric: &str) -> &'static str {
    match metric {
        "irq" => "IRQ",
        "thread" => "thread",
        _ => "thread − IRQ",
    }
}

/// One table, three rows per CPU: the IRQ latency, the thread latency and the thread's
/// part of it; then a line per CPU whose samples did not all pair or were lost.
pub fn timerlat_tables(r: &ResultFile) -> String {
    let u = Kind::Timerlat.unit();
    let cols = vec![
        core("CPU"),
        core("latency").text(),
        core("count"),
        core(u.header("min")),
        core(u.header("avg")),
        core(u.header("p50")),
        core(u.header("p99")),
        wide(u.header("p99.9")),
        core(u.header("max")),
    ];
    let mut t = Tab::new(&cols);
    let entries: Vec<&TimerlatEntry> = r.entries().collect();
    for e in &entries {
        for (i, (metric, s, _)) in e.parts().into_iter().enumerate() {
            let cpu = if i == 0 {
                e.cpu.to_string()
            } else {
                String::new()
            };
            t.row(vec![
                cpu,
                label(metric).to_string(),
                s.count.to_string(),
                u.cell(s.min_ns),
                u.cell_f(s.mean_ns),
                u.cell(s.p50_ns),
                u.cell(s.p99_ns),
                u.cell(s.p999_ns),
                u.cell(s.max_ns),
            ]);
        }
    }
    let period = entries.first().map_or(0, |e| e.period_ns);
    let title = format!(
        "Timer latency from the kernel's timerlat tracer (period {} µs): at the timer's \
         IRQ, at its thread, and the thread's part (thread − IRQ)",
        period as f64 / 1e3
    );
    let mut out = format!(
        "{}\n{t}\n",
        wrap(&title, Layout::current().wrap_width(), "  ")
    );
    for e in &entries {
        out.push_str(&losses(e));
    }
    out
}

/// "CPU 1: 3 thread samples without their IRQ's, 12 events lost": nothing when all paired.
fn losses(e: &TimerlatEntry) -> String {
    let mut parts = Vec::new();
    if e.unpaired_thread > 0 {
        parts.push(format!(
            "{} thread samples without their IRQ's",
            e.unpaired_thread
        ));
    }
    if e.unpaired_irq > 0 {
        parts.push(format!(
            "{} IRQ samples without their thread's",
            e.unpaired_irq
        ));
    }
    if e.lost_events > 0 {
        parts.push(format!(
            "{} events lost by the kernel's buffer",
            e.lost_events
        ));
    }
    match parts.is_empty() {
        true => String::new(),
        false => format!("CPU {}: {}\n", e.cpu, parts.join(", ")),
    }
}
