//! The `pingpong` table: every mechanism's round trip and one-way latency, side by side,
//! in ns (these run from tens of ns to tens of µs).

use crate::probes::pingpong::{OneWayBasis, PingpongEntry};
use crate::report::ResultFile;
use std::borrow::Cow;

use crate::report::result::dist::{
    Dist, Entry, UNCONFIRMED_NOTE, halved, halved_histogram, serde_name,
};
use crate::report::terminal::table::{Layout, Tab, core, wide, wrap};
use crate::report::views::{EntryView, Kind, KindView};

impl EntryView for PingpongEntry {
    fn kind(&self) -> Kind {
        Kind::Pingpong
    }

    /// The round trip, then the one-way figure from the counters, marked untrusted when
    /// the TSC check could not confirm it (the table then shows the round trip halved).
    fn dists<'a>(&'a self, out: &mut Vec<Dist<'a>>) {
        let key = format!(
            "{}:{}-{}",
            serde_name(&self.mechanism),
            self.cpu_a,
            self.cpu_b
        );
        let en = Entry::new("pingpong", key, format!("{},{}", self.cpu_a, self.cpu_b));
        let (rtt, ow) = (&self.rtt, &self.one_way);
        out.push(en.dist("rtt", &rtt.summary, &rtt.histogram));
        // Unconfirmed counter stamps are not shown anywhere: every output shows the
        // round trip halved instead, starred, so that one row means one figure.
        out.push(match self.one_way_basis {
            OneWayBasis::Tsc => en.dist("one-way", &ow.summary, &ow.histogram),
            OneWayBasis::RttHalf => Dist {
                summary: Cow::Owned(halved(&rtt.summary)),
                histogram: halved_histogram(&rtt.histogram).map(Cow::Owned),
                trusted: false,
                ..en.dist("one-way", &rtt.summary, &rtt.histogram)
            },
        });
    }
}

impl KindView for PingpongEntry {
    fn tables(r: &ResultFile) -> String {
        pingpong_table(r)
    }
}

/// One table, two rows per mechanism: the round trip (`rtt`), then the one-way latency
/// (from the counters when their agreement supports it, else the round trip halved,
/// starred): the rows of every export, from the same distributions.
pub fn pingpong_table(r: &ResultFile) -> String {
    let entries: Vec<&PingpongEntry> = r.entries().collect();
    let u = Kind::Pingpong.unit();
    let h = |w: &str| u.header(w);
    let mut t = Tab::new(&[
        core("mechanism"),
        wide("CPUs"),
        core("metric"),
        core("count"),
        core(h("min")).spare(),
        core(h("p50")),
        wide(h("p90")),
        core(h("p99")),
        core(h("p99.9")),
        core(h("max")),
        wide(h("MAD")),
    ]);
    let mut starred = false;
    let mut negative = Vec::new();
    for e in &entries {
        let mut dists = Vec::new();
        e.dists(&mut dists);
        for (i, d) in dists.iter().enumerate() {
            let s = &d.summary;
            let name = if i == 0 {
                e.mechanism.to_string()
            } else {
                String::new()
            };
            starred |= !d.trusted;
            t.row(vec![
                name,
                d.cpu.clone(),
                d.metric_label(),
                s.count.to_string(),
                u.cell(s.min_ns),
                u.cell(s.p50_ns),
                u.cell(s.p90_ns),
                u.cell(s.p99_ns),
                u.cell(s.p999_ns),
                u.cell(s.max_ns),
                u.cell(s.mad_ns),
            ]);
        }
        if e.one_way_negative > 0 {
            negative.push(format!("{} ({})", e.mechanism, e.one_way_negative));
        }
    }
    let mut text = format!("{t}\n");
    if let Some(skew) = entries
        .iter()
        .find(|e| !e.one_way_valid)
        .map(|e| e.tsc_skew)
        && starred
    {
        let bound = match (skew.rounds, skew.consistent) {
            (0, _) => "the check could not run".to_string(),
            (_, true) => format!("they agree within {} ns", skew.bound_ns),
            (_, false) => format!("they differ by at least {} ns", skew.bound_ns),
        };
        let note = format!(
            "{UNCONFIRMED_NOTE} The counters could not be shown to agree within 10 % of \
             the one-way figure ({bound})."
        );
        text.push_str(&wrap(&note, Layout::current().wrap_width(), "  "));
        text.push('\n');
    }
    if !negative.is_empty() {
        let note = format!(
            "one-way readings below 0, counted as 0 (counters out of step): {}",
            negative.join(", ")
        );
        text.push_str(&wrap(&note, Layout::current().wrap_width(), "  "));
        text.push('\n');
    }
    text
}
