//! What every terminal table shares: the style, µs cells, the policy cell and the
//! distribution columns. Each probe kind's own tables are in `report::views`.

use comfy_table::{CellAlignment, Table, presets};

use crate::engine::sched::Policy;
use crate::stats::Summary;

/// ns as µs with two decimals; "-" when absent.
pub fn us(ns: Option<u64>) -> String {
    ns.map_or_else(|| "-".into(), |v| format!("{:.2}", v as f64 / 1e3))
}

pub(crate) fn new_table(header: &[&str]) -> Table {
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

pub(crate) fn policy_cell(policy: Policy, priority: u8) -> String {
    match policy {
        Policy::Other => "other".to_string(),
        p => format!("{p} {priority}"),
    }
}

/// The columns `distribution` fills.
pub(crate) const DISTRIBUTION: [&str; 9] = [
    "min (µs)",
    "p50 (µs)",
    "p90 (µs)",
    "p99 (µs)",
    "p99.9 (µs)",
    "p99.99 (µs)",
    "max (µs)",
    "mean (µs)",
    "MAD (µs)",
];

/// min, p50, p90, p99, p99.9, p99.99, max, mean and MAD in µs.
pub(crate) fn distribution(s: &Summary) -> Vec<String> {
    vec![
        us(s.min_ns),
        us(s.p50_ns),
        us(s.p90_ns),
        us(s.p99_ns),
        us(s.p999_ns),
        us(s.p9999_ns),
        us(s.max_ns),
        s.mean_ns.map_or("-".into(), |m| format!("{:.2}", m / 1e3)),
        us(s.mad_ns),
    ]
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
