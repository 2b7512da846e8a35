//! The `noise` view: one distribution per CPU (the interruptions), its series, and the
//! two terminal tables (how much noise per CPU, and how long the interruptions were).

use crate::probes::noise::NoiseEntry;
use crate::report::ResultFile;
use crate::report::dist::SeriesView;
use crate::report::dist::{Dist, Entry};
use crate::report::table::{new_table, policy_cell, us};
use crate::report::views::{EntryView, Kind, KindView};

impl EntryView for NoiseEntry {
    fn kind(&self) -> Kind {
        Kind::Noise
    }

    fn dists<'a>(&'a self, out: &mut Vec<Dist<'a>>) {
        let en = Entry::new("noise", format!("cpu{}", self.cpu), self.cpu.to_string());
        out.push(Dist {
            series: self.series(),
            rate_per_s: Some(self.rate_per_s),
            interrupted_pct: Some(self.interrupted_pct),
            ..en.dist("interruption", &self.summary, &self.histogram)
        });
    }

    fn series(&self) -> Option<SeriesView<'_>> {
        Some(SeriesView {
            probe: "noise",
            cpu: self.cpu,
            series: &self.series,
            largest: &self.largest,
            gap: "largest interruption",
            worst: "worst gap",
            time_lost: true,
        })
    }
}

impl KindView for NoiseEntry {
    fn tables(r: &ResultFile) -> String {
        noise_tables(r)
    }
}

/// The two noise tables: how much noise per CPU, and how long the interruptions were.
pub fn noise_tables(r: &ResultFile) -> String {
    tables(&r.entries().collect::<Vec<_>>())
}

fn tables(entries: &[&NoiseEntry]) -> String {
    let mut rate = new_table(&[
        "CPU",
        "policy",
        "runtime (s)",
        "interruptions",
        "rate (/s)",
        "interrupted (µs)",
        "(%)",
        "loop min/med (ns)",
        "thresh. (ns)",
        "invol. sw",
        "migr.",
    ]);
    for e in entries {
        rate.add_row(vec![
            e.cpu.to_string(),
            policy_cell(e.thread.policy, e.thread.priority),
            format!("{:.3}", e.runtime_ns as f64 / 1e9),
            e.interruptions.to_string(),
            format!("{:.1}", e.rate_per_s),
            format!("{:.2}", e.interrupted_ns as f64 / 1e3),
            format!("{:.4}", e.interrupted_pct),
            format!(
                "{:.1} / {:.1}",
                e.loop_period.min_ns, e.loop_period.median_ns
            ),
            e.config.threshold_ns.to_string(),
            e.thread.involuntary_switches.to_string(),
            e.thread.migrations.map_or("-".into(), |m| m.to_string()),
        ]);
    }
    let mut dist = new_table(&[
        "CPU",
        "min (µs)",
        "p20 (µs)",
        "p50 (µs)",
        "p80 (µs)",
        "p90 (µs)",
        "p99 (µs)",
        "p99.9 (µs)",
        "max (µs)",
        "MAD (µs)",
    ]);
    for e in entries {
        let s = &e.summary;
        dist.add_row(vec![
            e.cpu.to_string(),
            us(s.min_ns),
            us(s.p20_ns),
            us(s.p50_ns),
            us(s.p80_ns),
            us(s.p90_ns),
            us(s.p99_ns),
            us(s.p999_ns),
            us(s.max_ns),
            us(s.mad_ns),
        ]);
    }
    format!("{rate}\n\nInterruption durations\n{dist}\n")
}
