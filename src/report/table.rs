//! Terminal tables, with the unit of every figure in its column header.

use comfy_table::{CellAlignment, Table, presets};

use crate::probes::noise::NoiseEntry;
use crate::report::{ProbeEntry, ResultFile};

/// ns as µs with two decimals; "-" when absent.
pub fn us(ns: Option<u64>) -> String {
    ns.map_or_else(|| "-".into(), |v| format!("{:.2}", v as f64 / 1e3))
}

fn new_table(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_style(presets::UTF8_HORIZONTAL_ONLY);
    t.set_header(header.iter().copied());
    for (i, col) in t.column_iter_mut().enumerate() {
        if i > 0 {
            col.set_cell_alignment(CellAlignment::Right);
        }
    }
    t
}

fn noise_entries(r: &ResultFile) -> Vec<&NoiseEntry> {
    r.probes
        .iter()
        .map(|p| match p {
            ProbeEntry::Noise(n) => n,
        })
        .collect()
}

/// The two noise tables: how much noise per CPU, and how long the interruptions were.
pub fn noise_tables(r: &ResultFile) -> String {
    let entries = noise_entries(r);
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
    for e in &entries {
        rate.add_row(vec![
            e.cpu.to_string(),
            match e.thread.policy {
                crate::engine::sched::Policy::Other => "other".to_string(),
                p => format!("{p} {}", e.thread.priority),
            },
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
    for e in &entries {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn microseconds_keep_two_decimals() {
        assert_eq!(us(Some(41_520)), "41.52");
        assert_eq!(us(None), "-");
    }
}
