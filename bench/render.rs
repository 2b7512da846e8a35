//! How long the plots of a large result take to draw: a synthetic noise result with 16
//! CPUs, each with a histogram of a million interruptions and a one-hour series of 3600
//! one-second intervals (the bound: all its plots in under one second).
//!
//! Usage: cargo bench --bench render [-- ROUNDS] [DIR]
//!
//! Prints the plot count and, per step, the best and the median time over ROUNDS rounds
//! (default 5); with DIR, also writes the plots there as SVG and PNG to look at. The font
//! is the one built into the binary (see `report::export::plot`).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use jitterscope::engine::clock::ClockInfo;
use jitterscope::engine::cpu::CpuList;
use jitterscope::engine::sched::Policy;
use jitterscope::probes::noise::{LoopPeriod, NoiseConfigRecord, NoiseEntry};
use jitterscope::probes::record::{HistogramRecord, ThreadRecord};
use jitterscope::report::export::Loaded;
use jitterscope::report::export::plot::{self, Plot};
use jitterscope::report::result::{Privileges, RunCpus};
use jitterscope::report::{ProbeEntry, ResultFile, RunInfo};
use jitterscope::stats::LatencyHistogram;
use jitterscope::stats::events::EventOut;
use jitterscope::stats::series::SeriesOut;

const CPUS: usize = 16;
const INTERVALS: usize = 3600;
const SAMPLES: usize = 1_000_000;

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let rounds: usize = args.iter().find_map(|a| a.parse().ok()).unwrap_or(5).max(1);
    let dir = args.iter().find(|a| a.parse::<usize>().is_err());
    let t = Instant::now();
    let loaded: Vec<Loaded> = vec![(PathBuf::from("synthetic.json"), synthetic())];
    println!(
        "synthetic result: {CPUS} CPUs x {SAMPLES} samples, {INTERVALS} intervals, made in {:.0?}",
        t.elapsed()
    );

    let plots = plot::result_plots(&loaded).expect("plots");
    println!("{} plots", plots.len());
    time("result_plots (decode, percentiles, bins)", rounds, || {
        plot::result_plots(&loaded).expect("plots").len()
    });
    time("render all to SVG", rounds, || svg_bytes(&plots));
    time("render all to PNG", rounds, || png_bytes(&plots));
    if let Some(dir) = dir {
        for format in [plot::Format::Svg, plot::Format::Png] {
            let written = plot::write_all(&plots, dir.as_ref(), format).expect("write");
            println!("wrote {} files to {dir}", written.len());
        }
    }
}

fn svg_bytes(plots: &[Plot]) -> usize {
    plots.iter().map(|p| p.svg().expect("svg").len()).sum()
}

fn png_bytes(plots: &[Plot]) -> usize {
    plots.iter().map(|p| p.png().expect("png").len()).sum()
}

/// Runs `f` `rounds` times; prints the best and the median.
fn time(what: &str, rounds: usize, mut f: impl FnMut() -> usize) {
    let mut times: Vec<Duration> = Vec::with_capacity(rounds);
    let mut bytes = 0;
    for _ in 0..rounds {
        let t = Instant::now();
        bytes = std::hint::black_box(f());
        times.push(t.elapsed());
    }
    times.sort();
    println!(
        "{what:<42} best {:>8.1?}  median {:>8.1?}  ({rounds} rounds, output {bytes})",
        times[0],
        times[rounds / 2]
    );
}

/// A small deterministic generator (xorshift64*): the same data every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// An interruption: mostly 1–5 µs, with a long tail to milliseconds.
    fn gap_ns(&mut self) -> u64 {
        let u = self.unit().max(1e-9);
        (1_000.0 + 4_000.0 * self.unit() + 2_000.0 / u.powf(0.7)).min(5e6) as u64
    }
}

fn synthetic() -> ResultFile {
    let probes = (0..CPUS)
        .map(|cpu| ProbeEntry::Noise(Box::new(noise_entry(cpu))))
        .collect();
    ResultFile::new(host(), run(), probes)
}

fn noise_entry(cpu: usize) -> NoiseEntry {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (cpu as u64 + 1));
    let mut h = LatencyHistogram::new();
    for _ in 0..SAMPLES {
        h.record(rng.gap_ns());
    }
    let max_ns: Vec<u64> = (0..INTERVALS).map(|_| rng.gap_ns().max(20_000)).collect();
    // The largest events are the largest interval maxima, somewhere in their interval.
    let mut order: Vec<usize> = (0..INTERVALS).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(max_ns[i]));
    let largest = (order[..64].iter())
        .map(|&i| EventOut {
            start_ns: i as u64 * 1_000_000_000 + rng.next() % 900_000_000,
            start_tsc: 0,
            duration_ns: max_ns[i],
        })
        .collect();
    let series = SeriesOut {
        interval_ns: 1_000_000_000,
        events: vec![(SAMPLES / INTERVALS) as u64; INTERVALS],
        total_ns: vec![0; INTERVALS],
        max_ns,
    };
    let thread = ThreadRecord {
        policy: Policy::Fifo,
        priority: 1,
        sched_refused: None,
        involuntary_switches: 0,
        voluntary_switches: 0,
        migrations: Some(0),
        tid: None,
    };
    NoiseEntry {
        cpu,
        config: NoiseConfigRecord {
            threshold_ns: 1_000,
            warmup_ns: 0,
            largest: 64,
            event_log: 0,
            policy: Policy::Fifo,
            priority: 1,
        },
        thread,
        runtime_ns: INTERVALS as u64 * 1_000_000_000,
        iterations: 0,
        loop_period: LoopPeriod {
            min_ns: 10.0,
            median_ns: 10.0,
            mean_ns: 10.0,
        },
        interruptions: h.count(),
        rate_per_s: h.count() as f64 / INTERVALS as f64,
        interrupted_ns: h.sum_ns(),
        interrupted_pct: 0.0,
        summary: h.summary(),
        histogram: HistogramRecord::from_hist(&h),
        series,
        largest,
        events: None,
        attribution: None,
        deadline: None,
    }
}

fn host() -> jitterscope::system::HostInfo {
    let (clock, _) = ClockInfo::detect();
    let cpus = CpuList::from_cpus((0..CPUS).collect());
    jitterscope::system::HostInfo::collect(clock, cpus)
}

fn run() -> RunInfo {
    let cpus = CpuList::from_cpus((0..CPUS).collect());
    RunInfo {
        tool_version: "bench".into(),
        tool_commit: None,
        command_line: vec![],
        start_time: "2024-01-01T00:00:00Z".into(),
        requested_duration_ns: INTERVALS as u64 * 1_000_000_000,
        actual_duration_ns: INTERVALS as u64 * 1_000_000_000,
        interrupted: false,
        privileges: Privileges {
            euid: 0,
            root: true,
            memory_locked: true,
        },
        cpus: RunCpus {
            measured: cpus,
            housekeeping: CpuList::default(),
        },
        degraded: vec![],
        warnings: vec![],
        peak_rss_kib: 0,
        counters: None,
        root_domain: None,
    }
}
