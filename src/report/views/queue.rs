//! The `queue` tables: the producer's line, then transit and inter-message time (ns) per
//! consumer to the 99.9999th percentile, then the journal.

use crate::probes::queue::{LatencyRecord, QueueEntry};
use crate::report::ResultFile;
use crate::report::result::dist::{Dist, Entry};
use crate::report::terminal::table::{Col, Layout, Tab, Unit, core, policy_cell, us, wide, wrap};
use crate::report::views::{EntryView, Kind, KindView};

impl EntryView for QueueEntry {
    fn kind(&self) -> Kind {
        Kind::Queue
    }

    fn dists<'a>(&'a self, out: &mut Vec<Dist<'a>>) {
        let key = format!("{}:cpu{}", self.role, self.cpu);
        let en = Entry::new("queue", key, self.cpu.to_string());
        let (t, i) = (&self.transit, &self.inter_message);
        out.push(en.dist("transit", &t.summary, &t.histogram));
        out.push(en.dist("inter-message", &i.summary, &i.histogram));
    }
}

impl KindView for QueueEntry {
    fn tables(r: &ResultFile) -> String {
        queue_tables(r)
    }
}

fn queue_entries(r: &ResultFile) -> Vec<&QueueEntry> {
    r.entries().collect()
}

/// The columns after the row's names.
/// The figure columns, in µs (the kind's unit): the deep tail only with `--wide`.
fn columns(u: Unit) -> Vec<Col> {
    let h = |w: &str| u.header(w);
    vec![
        core("count"),
        core(h("min")),
        core(h("p50")),
        wide(h("p90")),
        core(h("p99")),
        core(h("p99.9")),
        wide(h("p99.99")),
        wide(h("p99.999")),
        wide(h("p99.9999")),
        core(h("max")),
        wide(h("mean")),
    ]
}

fn figures(l: &LatencyRecord, u: Unit) -> Vec<String> {
    let s = &l.summary;
    vec![
        s.count.to_string(),
        u.cell(s.min_ns),
        u.cell(s.p50_ns),
        u.cell(s.p90_ns),
        u.cell(s.p99_ns),
        u.cell(s.p999_ns),
        u.cell(s.p9999_ns),
        u.cell(l.p99999_ns),
        u.cell(l.p999999_ns),
        u.cell(s.max_ns),
        u.cell_f(s.mean_ns),
    ]
}

/// The producer's line, the latency table and the journal's line.
pub fn queue_tables(r: &ResultFile) -> String {
    let entries = queue_entries(r);
    let Some(first) = entries.first() else {
        return String::new();
    };
    let p = &first.producer;
    let producer = format!(
        "producer on CPU {} ({}): {} published after {} warm-up, {} late (latest {} µs \
         late), {} waits for a full ring, {:.3} s measured",
        p.cpu,
        policy_cell(p.thread.policy, p.thread.priority),
        p.published,
        p.warmup_published,
        p.late,
        us(Some(p.late_max_ns)),
        p.full_ring_waits,
        p.measured_ns as f64 / 1e9,
    );
    let mut out = format!(
        "{}\n\n",
        wrap(&producer, Layout::current().wrap_width(), "  ")
    );
    let u = Kind::Queue.unit();
    let head = [
        core("consumer"),
        core("CPU"),
        wide("policy"),
        core("latency"),
    ];
    let mut t = Tab::new(&[&head[..], &columns(u)[..]].concat());
    for e in &entries {
        for (name, l) in [("transit", &e.transit), ("inter-message", &e.inter_message)] {
            let mut row = vec![
                e.role.to_string(),
                e.cpu.to_string(),
                policy_cell(e.thread.policy, e.thread.priority),
                name.to_string(),
            ];
            row.extend(figures(l, u));
            t.row(row);
        }
    }
    out.push_str(&format!("{t}\n"));
    for e in &entries {
        out.push_str(&notes(e));
    }
    out
}

/// The journal's line and anything odd about one consumer.
fn notes(e: &QueueEntry) -> String {
    let mut out = String::new();
    if e.negative_transits > 0 {
        out.push_str(&format!(
            "{} transits on CPU {} came out negative (recorded as 0): the two CPUs' \
             counters disagree\n",
            e.negative_transits, e.cpu
        ));
    }
    if let Some(j) = &e.journal {
        let target = match &j.path {
            Some(p) => p.clone(),
            None => "a temporary file, removed".to_string(),
        };
        out.push_str(&format!(
            "journal: {} records of {} bytes ({} bytes, warm-up included) through a {} KiB \
             buffer to {target}\n",
            j.records,
            j.record_bytes,
            j.bytes,
            j.buffer_bytes / 1024
        ));
        if let Some(err) = &j.error {
            out.push_str(&format!(
                "journal: writing stopped after {} records: {err}\n",
                j.records
            ));
        }
    }
    out
}
