//! The hwlat tracer: hardware and firmware stalls, a check run alone.
//!
//! A kernel thread spins with interrupts off for `hwlat_detector/width` of every
//! `window` on one CPU of the tracer's cpumask at a time (`round-robin`), reading the
//! time back to back; a gap above `tracing_thresh` can only be the machine's own (an SMI,
//! the hypervisor taking the CPU back). Each window with such a gap gives one line:
//! `#N inner/outer(us): I/O ts:S.N count:C`, inner the largest gap between two reads,
//! outer the largest between two loops, `count` the gaps above the threshold, and
//! `nmi-total:T nmi-count:K` where NMIs came. It disturbs every CPU it runs on.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::probes::record::HistogramRecord;
use crate::stats::{LatencyHistogram, Summary};

/// The tracer's settings for the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HwlatConfig {
    pub width_us: u64,
    pub window_us: u64,
    /// `tracing_thresh`: the smallest gap reported.
    pub threshold_us: u64,
    /// `hwlat_detector/mode`: `round-robin` moves across the CPUs.
    pub mode: String,
}

/// One CPU's hwlat check: the `"probe": "hwlat"` entries of a result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HwlatEntry {
    pub cpu: usize,
    pub config: HwlatConfig,
    /// The time the check ran for, on all its CPUs together.
    pub runtime_ns: u64,
    /// Windows with a gap above the threshold.
    pub samples: u64,
    /// Gaps above the threshold, summed over the windows (`count:`).
    pub gaps: u64,
    pub max_inner_ns: u64,
    pub max_outer_ns: u64,
    /// Each window's largest gap (inner or outer).
    pub latency: Summary,
    pub histogram: HistogramRecord,
    pub nmi_count: u64,
    pub nmi_total_ns: u64,
}

/// One sample line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    pub cpu: usize,
    pub inner_us: u64,
    pub outer_us: u64,
    pub count: u64,
    pub nmi_total_us: u64,
    pub nmi_count: u64,
}

/// Parses one line of hwlat's output; `None` for headers and other lines.
pub fn parse_line(line: &str) -> Option<Sample> {
    let (cpu, rest) = super::osnoise::cpu_field(line)?;
    let (_, body) = rest.split_once("inner/outer(us):")?;
    let mut words = body.split_whitespace();
    let (inner, outer) = words.next()?.split_once('/')?;
    let mut s = Sample {
        cpu,
        inner_us: inner.parse().ok()?,
        outer_us: outer.parse().ok()?,
        count: 0,
        nmi_total_us: 0,
        nmi_count: 0,
    };
    for w in words {
        let Some((k, v)) = w.split_once(':') else {
            continue;
        };
        let v = || v.parse::<u64>().unwrap_or(0);
        match k {
            "count" => s.count = v(),
            "nmi-total" => s.nmi_total_us = v(),
            "nmi-count" => s.nmi_count = v(),
            _ => {}
        }
    }
    Some(s)
}

/// Lines in, per-CPU entries out.
#[derive(Debug, Default)]
pub struct Tally {
    cpus: BTreeMap<usize, (Vec<Sample>, LatencyHistogram)>,
}

impl Tally {
    pub fn new() -> Tally {
        Tally::default()
    }

    pub fn line(&mut self, text: &str) {
        if let Some(s) = parse_line(text) {
            let (v, h) = self.cpus.entry(s.cpu).or_default();
            h.record(s.inner_us.max(s.outer_us) * 1000);
            v.push(s);
        }
    }

    /// One entry per CPU in `cpus`: one with no sample saw no gap above the threshold.
    pub fn entries(
        &self,
        cpus: &[usize],
        config: &HwlatConfig,
        runtime_ns: u64,
    ) -> Vec<HwlatEntry> {
        let none = (Vec::new(), LatencyHistogram::new());
        (cpus.iter())
            .map(|&cpu| {
                let (v, h) = self.cpus.get(&cpu).unwrap_or(&none);
                let max = |f: fn(&Sample) -> u64| v.iter().map(f).max().unwrap_or(0) * 1000;
                HwlatEntry {
                    cpu,
                    config: config.clone(),
                    runtime_ns,
                    samples: v.len() as u64,
                    gaps: v.iter().map(|s| s.count).sum(),
                    max_inner_ns: max(|s| s.inner_us),
                    max_outer_ns: max(|s| s.outer_us),
                    latency: h.summary(),
                    histogram: HistogramRecord::from_hist(h),
                    nmi_count: v.iter().map(|s| s.nmi_count).sum(),
                    nmi_total_ns: v.iter().map(|s| s.nmi_total_us).sum::<u64>() * 1000,
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 6.1 RT guest's hwlat instance on CPU 1 (TCG), round-robin, width 100 ms of 200 ms.
    const ROUND_ROBIN: &str =
        include_str!("../../../tests/fixtures/hwlat/instance-trace-6.1-rt.txt");
    /// The same guest's per-cpu mode on CPUs 0-1, from trace_pipe.
    const PER_CPU: &str =
        include_str!("../../../tests/fixtures/hwlat/trace-pipe-per-cpu-6.1-rt.txt");

    fn config() -> HwlatConfig {
        HwlatConfig {
            width_us: 100_000,
            window_us: 200_000,
            threshold_us: 10,
            mode: "round-robin".into(),
        }
    }

    #[test]
    fn sample_lines_parse() {
        let l = "           <...>-122     [001] dn.....     8.847914: #1     inner/outer(us): \
                 20079/24071 ts:1796191350.714956510 count:31";
        let s = parse_line(l).unwrap();
        assert_eq!(
            (s.cpu, s.inner_us, s.outer_us, s.count),
            (1, 20079, 24071, 31)
        );
        let nmi = "x-1 [003] d... 1.0: #7 inner/outer(us): 12/11 ts:1.000000000 count:2 \
                   nmi-total:4 nmi-count:1";
        let s = parse_line(nmi).unwrap();
        assert_eq!((s.cpu, s.nmi_total_us, s.nmi_count), (3, 4, 1));
        assert_eq!(parse_line("# tracer: hwlat"), None);
    }

    /// Against the files counted by hand: 16 samples on CPU 1, the largest inner 24100 µs
    /// (#12) and outer 24071 µs (#1); per-cpu mode 15 samples on CPU 0, 14 on CPU 1.
    #[test]
    fn real_captures_tally_as_counted_by_hand() {
        let mut t = Tally::new();
        ROUND_ROBIN.lines().for_each(|l| t.line(l));
        let e = &t.entries(&[1], &config(), 3_000_000_000)[0];
        assert_eq!(
            (e.samples, e.max_inner_ns, e.max_outer_ns),
            (16, 24_100_000, 24_071_000)
        );
        assert_eq!(
            e.gaps,
            31 + 30 + 24 + 30 + 23 + 45 + 33 + 45 + 51 + 26 + 31 + 19 + 24 + 17 + 13 + 17
        );
        assert_eq!(e.latency.count, 16);
        let mut t = Tally::new();
        PER_CPU.lines().for_each(|l| t.line(l));
        let e = t.entries(&[0, 1], &config(), 3_000_000_000);
        assert_eq!((e[0].samples, e[1].samples), (15, 14));
    }
}
