//! The `noise` view: one distribution per CPU (the interruptions), its series, and the
//! two terminal tables (how much noise per CPU, and how long the interruptions were).

use crate::probes::noise::NoiseEntry;
use crate::report::ResultFile;
use crate::report::dist::SeriesView;
use crate::report::dist::{Dist, Entry};
use crate::report::table::{Tab, core, policy_cell, wide};
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
    let u = Kind::Noise.unit();
    let mut rate = Tab::new(&[
        core("CPU"),
        core("policy"),
        core("runtime (s)"),
        core("interruptions"),
        core("rate (/s)"),
        core(u.header("interrupted")),
        core("(%)"),
        wide(u.header("loop min/med")),
        wide(u.header("threshold")),
        wide("invol. sw"),
        wide("migr."),
    ]);
    // The loop period is tens of ns: three decimals of µs keep it.
    let loop_us = |ns: f64| format!("{:.3}", ns / 1e3);
    for e in entries {
        rate.row(vec![
            e.cpu.to_string(),
            policy_cell(e.thread.policy, e.thread.priority),
            format!("{:.3}", e.runtime_ns as f64 / 1e9),
            e.interruptions.to_string(),
            format!("{:.1}", e.rate_per_s),
            u.cell(Some(e.interrupted_ns)),
            format!("{:.4}", e.interrupted_pct),
            format!(
                "{} / {}",
                loop_us(e.loop_period.min_ns),
                loop_us(e.loop_period.median_ns)
            ),
            u.cell(Some(e.config.threshold_ns)),
            e.thread.involuntary_switches.to_string(),
            e.thread.migrations.map_or("-".into(), |m| m.to_string()),
        ]);
    }
    let h = |w: &str| u.header(w);
    let mut dist = Tab::new(&[
        core("CPU"),
        core(h("min")),
        wide(h("p20")),
        core(h("p50")),
        wide(h("p80")),
        core(h("p90")),
        core(h("p99")),
        core(h("p99.9")),
        core(h("max")),
        wide(h("MAD")),
    ]);
    for e in entries {
        let s = &e.summary;
        dist.row(vec![
            e.cpu.to_string(),
            u.cell(s.min_ns),
            u.cell(s.p20_ns),
            u.cell(s.p50_ns),
            u.cell(s.p80_ns),
            u.cell(s.p90_ns),
            u.cell(s.p99_ns),
            u.cell(s.p999_ns),
            u.cell(s.max_ns),
            u.cell(s.mad_ns),
        ]);
    }
    format!("{rate}\n\nInterruption durations\n{dist}\n")
}
