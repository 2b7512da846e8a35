//! The `pingpong` table: every mechanism's round trip and one-way latency, side by side,
//! in ns (these run from tens of ns to tens of µs).

use crate::probes::pingpong::{OneWayBasis, PingpongEntry};
use crate::report::ResultFile;
use crate::report::dist::{Dist, Entry, serde_name};
use crate::report::table::new_table;
use crate::report::views::{EntryView, Kind, KindView};
use crate::stats::Summary;

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
        let one_way = en.dist("one-way", &ow.summary, &ow.histogram);
        out.push(Dist {
            trusted: self.one_way_valid,
            ..one_way
        });
    }
}

impl KindView for PingpongEntry {
    fn tables(r: &ResultFile) -> String {
        pingpong_table(r)
    }
}

const COLUMNS: [&str; 10] = [
    "mechanism",
    "latency",
    "count",
    "min (ns)",
    "p50 (ns)",
    "p90 (ns)",
    "p99 (ns)",
    "p99.9 (ns)",
    "max (ns)",
    "MAD (ns)",
];

fn ns(v: Option<u64>) -> String {
    v.map_or_else(|| "-".into(), |v| v.to_string())
}

/// A summary's cells, each value divided by `div` (2 for the round trip halved).
fn cells(s: &Summary, div: u64) -> Vec<String> {
    let d = |v: Option<u64>| ns(v.map(|v| v / div));
    vec![
        s.count.to_string(),
        d(s.min_ns),
        d(s.p50_ns),
        d(s.p90_ns),
        d(s.p99_ns),
        d(s.p999_ns),
        d(s.max_ns),
        d(s.mad_ns),
    ]
}

/// One table, two rows per mechanism: the round trip, then the one-way latency (from the
/// counters when their agreement supports it, else the round trip halved, starred).
pub fn pingpong_table(r: &ResultFile) -> String {
    let entries: Vec<&PingpongEntry> = r.entries().collect();
    let mut t = new_table(&COLUMNS);
    // Two rows a mechanism: rules between rows would double the table's height.
    let style = t.style().row_separator(comfy_table::LineStyle::none());
    t.load_style(style);
    let mut starred = false;
    let mut negative = Vec::new();
    for e in &entries {
        let mut row = vec![e.mechanism.to_string(), "round trip".into()];
        row.extend(cells(&e.rtt.summary, 1));
        t.add_row(row);
        let mut row = vec![String::new()];
        match e.one_way_basis {
            OneWayBasis::Tsc => {
                row.push("one-way".into());
                row.extend(cells(&e.one_way.summary, 1));
            }
            OneWayBasis::RttHalf => {
                starred = true;
                row.push("one-way*".into());
                row.extend(cells(&e.rtt.summary, 2));
            }
        }
        t.add_row(row);
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
        text.push_str(&format!(
            "* the round trip halved: the two CPUs' counters could not be shown to agree \
             within 10 % of the one-way figure ({bound})\n"
        ));
    }
    if !negative.is_empty() {
        text.push_str(&format!(
            "one-way readings below 0, counted as 0 (counters out of step): {}\n",
            negative.join(", ")
        ));
    }
    text
}
