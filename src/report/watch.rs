//! `watch` in the result file (its top-level `watch` section) and on the terminal: per
//! watched thread, its wake-up delays, preemption and IRQ time with their histograms,
//! and what ran instead during its delays above the threshold.

use serde::{Deserialize, Serialize};

use crate::probes::record::HistogramRecord;
use crate::stats::causes::Attribution;
use crate::stats::histogram::{LatencyHistogram, Summary};
use crate::trace::watch::ThreadFigures;

use super::ResultFile;
use super::table::{Tab, core, us, wide};

/// The `watch` section: what was watched, how, and each thread's figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WatchRecord {
    /// "pid 1234", "tid 1234,1240", "comm nginx".
    pub target: String,
    /// Wake-up delays at or above this are attributed.
    pub threshold_ns: u64,
    /// How the run ended: "duration", "interrupted", "process ended", "threads ended".
    pub ended: String,
    /// How the figures were made, and what the kernel filtered, in words.
    pub method: String,
    pub filtering: String,
    /// Trace events read on all CPUs, and lost (overwritten before they were read, or
    /// beyond what is kept): delays while events were lost may be missing or misread.
    pub events_read: u64,
    pub events_lost: u64,
    /// jitterscope's own CPU time over the run (user + system, all its threads).
    pub tool_cpu_ns: u64,
    /// One per thread seen, by thread id.
    pub threads: Vec<WatchedThread>,
}

/// One watched thread.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WatchedThread {
    pub tid: u32,
    pub comm: String,
    /// Wake-up to running (run-queue latency).
    pub wakeup: Summary,
    pub wakeup_histogram: HistogramRecord,
    /// Each time runnable but preempted, until it ran again.
    pub preempted: Summary,
    pub preempted_histogram: HistogramRecord,
    /// Each interrupt context (IRQ, softirq, vector, NMI) while it ran.
    pub irq: Summary,
    pub irq_histogram: HistogramRecord,
    pub runs: u64,
    pub migrations: u64,
    pub involuntary_switches: u64,
    /// Delays whose start was taken from the first event on an idle CPU (no switch out
    /// of idle recorded), and wake-ups whose start no event dated (not in `wakeup`).
    pub starts_guessed: u64,
    pub starts_unseen: u64,
    /// Its delays at or above the threshold, split by what ran instead on that CPU;
    /// absent when none was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attribution: Option<Attribution>,
}

fn summary_and_record(h: Option<&LatencyHistogram>, keep: bool) -> (Summary, HistogramRecord) {
    match h {
        Some(h) if keep => (h.summary(), HistogramRecord::from_hist(h)),
        Some(h) => (h.summary(), HistogramRecord::omitted()),
        None => (Summary::default(), HistogramRecord::omitted()),
    }
}

impl WatchedThread {
    /// The record of `f`; histograms encoded only when the result is `keep`t.
    pub fn from_figures(f: ThreadFigures, keep: bool) -> WatchedThread {
        let (wakeup, wakeup_histogram) = summary_and_record(Some(&f.wakeup), keep);
        let (preempted, preempted_histogram) = summary_and_record(f.preempted.as_ref(), keep);
        let (irq, irq_histogram) = summary_and_record(f.irq.as_ref(), keep);
        WatchedThread {
            tid: f.tid,
            comm: f.comm,
            wakeup,
            wakeup_histogram,
            preempted,
            preempted_histogram,
            irq,
            irq_histogram,
            runs: f.runs,
            migrations: f.migrations,
            involuntary_switches: f.involuntary,
            starts_guessed: f.starts_guessed,
            starts_unseen: f.starts_unseen,
            attribution: f.attribution,
        }
    }
}

fn ms(ns: u64) -> String {
    format!("{:.2}", ns as f64 / 1e6)
}

/// The terminal text of a result's `watch` section (empty without one).
pub fn watch_text(r: &ResultFile) -> String {
    let Some(w) = &r.watch else {
        return String::new();
    };
    let th_us = w.threshold_ns as f64 / 1e3;
    let mut t = Tab::new(&[
        core("thread"),
        core("wake-ups"),
        core("p50 µs"),
        core("p99 µs"),
        core("max µs"),
        core("preempted ms"),
        core("irq ms"),
        core("migr."),
        wide("invol."),
        wide("runs"),
        core(format!("main cause ≥ {th_us} µs")),
    ]);
    for th in &w.threads {
        let cause = th.attribution.as_ref().map_or("-".to_string(), |a| {
            let main = a.causes.iter().max_by_key(|c| c.largest_in);
            match main {
                Some(c) if a.gaps > 0 => format!(
                    "{:.0} % {}",
                    c.largest_in as f64 * 100.0 / a.gaps as f64,
                    c.cause
                ),
                _ => "-".into(),
            }
        });
        t.row(vec![
            format!("{}:{}", th.comm, th.tid),
            th.wakeup.count.to_string(),
            us(th.wakeup.p50_ns),
            us(th.wakeup.p99_ns),
            us(th.wakeup.max_ns),
            ms(th.preempted.sum_ns),
            ms(th.irq.sum_ns),
            th.migrations.to_string(),
            th.involuntary_switches.to_string(),
            th.runs.to_string(),
            cause,
        ]);
    }
    let mut out = format!(
        "watch: {} for {:.3} s ({}), wake-up delay = from sched_wakeup to the switch that \
         ran the thread\n{t}\n",
        w.target,
        r.run.actual_duration_ns as f64 / 1e9,
        w.ended,
    );
    // The causes of each thread's delays, as shares of their time.
    for th in &w.threads {
        let Some(a) = &th.attribution else { continue };
        out.push_str(&format!(
            "{}:{}: {} delays ≥ {th_us} µs, {:.3} ms in all; share of their time, and of \
             the delays where it was the largest part:\n",
            th.comm,
            th.tid,
            a.gaps,
            a.interrupted_ns as f64 / 1e6
        ));
        for c in a.causes.iter().take(5) {
            out.push_str(&format!(
                "  {:5.1} %  main cause of {:>5} delays  {}\n",
                c.share_pct, c.largest_in, c.cause
            ));
        }
    }
    let guessed: u64 = w.threads.iter().map(|t| t.starts_guessed).sum();
    let unseen: u64 = w.threads.iter().map(|t| t.starts_unseen).sum();
    out.push_str(&format!(
        "trace: {} events read, {} lost; jitterscope used {:.3} s of CPU; {guessed} starts \
         from idle dated by the CPU's next event, {unseen} undated (left out)\n",
        w.events_read,
        w.events_lost,
        w.tool_cpu_ns as f64 / 1e9
    ));
    out
}
