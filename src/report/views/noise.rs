//! The `noise` view: one distribution per CPU (the interruptions), its series, and the
//! two terminal tables (how much noise per CPU, and how long the interruptions were).

use crate::probes::noise::NoiseEntry;
use crate::report::ResultFile;
use crate::report::result::dist::SeriesView;
use crate::report::result::dist::{Dist, Entry};
use crate::report::terminal::group::{self, Cell, Grouping, num, text};
use crate::report::terminal::table::{Tab, core, policy_cell, wide};
use crate::report::terminal::verdict::{NOISE_KEYS, noise_members};
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
        noise_text(r)
    }
}

/// How many largest gaps the causes' view breaks down, part by part.
pub const GAPS_SHOWN: usize = 5;

/// What `noise` prints and `report` shows of its entries: the two tables, then, for a
/// traced run, the causes (`attribution`). One function for both, so that a saved run
/// reads back as the live one printed it.
pub fn noise_text(r: &ResultFile) -> String {
    let g = grouping(r);
    let entries: Vec<&NoiseEntry> = r.entries().collect();
    format!(
        "{}{}",
        tables(&entries, &g),
        super::attribution::noise_attribution(r, &g, GAPS_SHOWN)
    )
}

/// The two noise tables: how much noise per CPU, and how long the interruptions were;
/// CPUs that agree as one group (`report::terminal::group`) unless `--per-cpu`.
pub fn noise_tables(r: &ResultFile) -> String {
    let entries: Vec<&NoiseEntry> = r.entries().collect();
    tables(&entries, &grouping(r))
}

/// How the noise CPUs group in the current layout: each on its own with `--per-cpu`.
pub fn grouping(r: &ResultFile) -> Grouping {
    group::in_layout(&noise_members(r), &NOISE_KEYS)
}

fn tables(entries: &[&NoiseEntry], g: &Grouping) -> String {
    let u = Kind::Noise.unit();
    let ids: Vec<usize> = entries.iter().map(|e| e.cpu).collect();
    let rate_cols = vec![
        core("policy").text(),
        core("runtime (s)").spare(),
        core("interruptions"),
        core("rate (/s)"),
        core(u.header("interrupted")).spare(),
        core("(%)"),
        wide(u.header("loop min/med")),
        wide(u.header("threshold")),
        wide("invol. sw"),
        wide("migr."),
    ];
    let mut rate = Tab::new(&group::columns(g, core("CPU"), rate_cols));
    let cells: Vec<Vec<Cell>> = entries.iter().map(|e| rate_cells(e)).collect();
    for row in group::table_rows(g, &ids, &cells) {
        rate.row(row);
    }
    let h = |w: &str| u.header(w);
    let dist_cols = vec![
        core(h("min")).spare(),
        wide(h("p20")),
        core(h("p50")),
        wide(h("p80")),
        core(h("p90")).spare(),
        core(h("p99")),
        core(h("p99.9")),
        core(h("max")),
        wide(h("MAD")),
    ];
    let mut dist = Tab::new(&group::columns(g, core("CPU"), dist_cols));
    let cells: Vec<Vec<Cell>> = entries.iter().map(|e| dist_cells(e)).collect();
    for row in group::table_rows(g, &ids, &cells) {
        dist.row(row);
    }
    let legend = group::legend_block(&group::legend(
        g,
        &NOISE_KEYS,
        &ids,
        &|i| format!("{:.3} % lost", entries[i].interrupted_pct),
        "--per-cpu",
    ));
    format!("{rate}\n\nInterruption durations\n{dist}\n{legend}")
}

/// One CPU's cells of the rate table, under its columns.
fn rate_cells(e: &NoiseEntry) -> Vec<Cell> {
    let u = Kind::Noise.unit();
    // The loop period is tens of ns: three decimals of µs keep it.
    let loop_us = |ns: f64| format!("{:.3}", ns / 1e3);
    let thread = &e.thread;
    vec![
        text(policy_cell(thread.policy, thread.priority)),
        num(
            e.runtime_ns as f64,
            format!("{:.3}", e.runtime_ns as f64 / 1e9),
        ),
        num(e.interruptions as f64, e.interruptions.to_string()),
        num(e.rate_per_s, format!("{:.1}", e.rate_per_s)),
        num(e.interrupted_ns as f64, u.cell(Some(e.interrupted_ns))),
        num(e.interrupted_pct, format!("{:.4}", e.interrupted_pct)),
        text(format!(
            "{} / {}",
            loop_us(e.loop_period.min_ns),
            loop_us(e.loop_period.median_ns)
        )),
        num(
            e.config.threshold_ns as f64,
            u.cell(Some(e.config.threshold_ns)),
        ),
        num(
            thread.involuntary_switches as f64,
            thread.involuntary_switches.to_string(),
        ),
        match thread.migrations {
            Some(m) => num(m as f64, m.to_string()),
            None => text("-"),
        },
    ]
}

/// One CPU's cells of the durations table, under its columns.
fn dist_cells(e: &NoiseEntry) -> Vec<Cell> {
    let u = Kind::Noise.unit();
    let s = &e.summary;
    let f = |v: Option<u64>| match v {
        Some(ns) => num(ns as f64, u.cell(Some(ns))),
        None => text("-"),
    };
    vec![
        f(s.min_ns),
        f(s.p20_ns),
        f(s.p50_ns),
        f(s.p80_ns),
        f(s.p90_ns),
        f(s.p99_ns),
        f(s.p999_ns),
        f(s.max_ns),
        f(s.mad_ns),
    ]
}
