//! The bookkeeping, on the housekeeping CPU: takes each thread's finished second from its
//! handoff, adds it to the metrics (histogram, late counters, maxima) and to the interval
//! being logged, writes the log when an interval is complete, and gives the emptied
//! buffer back. Its memory is fixed after start: one log histogram per CPU and a
//! ten-entry window of recent maxima; with `--trace`, the trace's windows of events,
//! bounded by count (`causes`).
//!
//! With `--trace`, each tick takes the finished seconds first and drains the trace
//! after, so that every event of a second taken is in the window when its late
//! wake-ups are attributed.

use std::collections::VecDeque;
use std::time::{Duration, SystemTime};

use crossbeam_utils::CachePadded;

use crate::probes::timer_stream::{Handoff, IntervalData};
use crate::stats::LatencyHistogram;

use super::causes::Tracer;
use super::log::{IntervalLog, LogError};
use super::metrics::{CpuLabels, LateLabels, MaxLabels, Metrics, seconds_label};

/// The "recent" maximum's window.
pub const RECENT_NS: u64 = 10_000_000_000;

/// One CPU's running figures.
struct CpuBooks {
    cpu: usize,
    labels: CpuLabels,
    late_labels: Vec<LateLabels>,
    recent_labels: MaxLabels,
    start_labels: MaxLabels,
    /// (end on CLOCK_MONOTONIC, max ns) of the intervals of the last 10 s.
    recent: VecDeque<(u64, u64)>,
    max_since_start: u64,
    /// The interval being logged, and where it began (CLOCK_MONOTONIC).
    log_hist: LatencyHistogram,
    log_start_ns: Option<u64>,
    log_end_ns: u64,
    handoffs_seen: u64,
}

/// Everything the bookkeeping keeps.
pub struct Books {
    cpus: Vec<CpuBooks>,
    log: Option<IntervalLog>,
    log_every_ns: u64,
    /// CLOCK_REALTIME − CLOCK_MONOTONIC, ns, read once at start.
    wall_offset_ns: i128,
    /// Intervals written to the log, all CPUs.
    pub logged: u64,
    /// The trace, when late wake-ups are attributed.
    tracer: Option<Tracer>,
    /// The seconds taken at a tick, one slot per CPU (kept to be reused).
    taken: Vec<Option<Box<IntervalData>>>,
}

impl Books {
    pub fn new(
        cpus: &[usize],
        limits_ns: &[u64],
        log: Option<IntervalLog>,
        log_every: Duration,
    ) -> Books {
        let wall_offset_ns = crate::engine::clock::realtime_ns() as i128
            - crate::engine::clock::monotonic_ns() as i128;
        let cpus: Vec<CpuBooks> = cpus
            .iter()
            .map(|&cpu| {
                let c = cpu.to_string();
                CpuBooks {
                    cpu,
                    labels: CpuLabels { cpu: c.clone() },
                    late_labels: (limits_ns.iter())
                        .map(|&l| LateLabels {
                            cpu: c.clone(),
                            above_seconds: seconds_label(l),
                        })
                        .collect(),
                    recent_labels: MaxLabels {
                        cpu: c.clone(),
                        window: "10s".into(),
                    },
                    start_labels: MaxLabels {
                        cpu: c,
                        window: "start".into(),
                    },
                    recent: VecDeque::with_capacity(16),
                    max_since_start: 0,
                    log_hist: LatencyHistogram::new(),
                    log_start_ns: None,
                    log_end_ns: 0,
                    handoffs_seen: 0,
                }
            })
            .collect();
        let taken = (0..cpus.len()).map(|_| None).collect();
        Books {
            cpus,
            log,
            log_every_ns: log_every.as_nanos() as u64,
            wall_offset_ns,
            logged: 0,
            tracer: None,
            taken,
        }
    }

    /// Attributes every second's late wake-ups to this trace from now on.
    pub fn trace(&mut self, tracer: Tracer) {
        self.tracer = Some(tracer);
    }

    /// Drains the trace (before absorbing the threads' last seconds by hand).
    pub fn pass_trace(&mut self, metrics: &Metrics) {
        if let Some(t) = &mut self.tracer {
            t.pass(metrics);
        }
    }

    /// Stops tracing and removes the trace's instance.
    pub fn close_trace(&mut self) {
        if let Some(t) = self.tracer.take() {
            t.close();
        }
    }

    fn wall(&self, monotonic_ns: u64) -> SystemTime {
        let ns = (monotonic_ns as i128 + self.wall_offset_ns).max(0) as u64;
        SystemTime::UNIX_EPOCH + Duration::from_nanos(ns)
    }

    /// Takes every finished second from the threads (one handoff per CPU, same order)
    /// and gives the buffers back. The first log error is returned; the others are the
    /// same failure again.
    pub fn collect(
        &mut self,
        metrics: &Metrics,
        handoffs: &[CachePadded<Handoff>],
    ) -> Result<(), LogError> {
        let mut first_err = None;
        for (slot, h) in self.taken.iter_mut().zip(handoffs) {
            *slot = h.take_ready();
        }
        self.pass_trace(metrics);
        for (i, h) in handoffs.iter().enumerate() {
            if let Some(d) = self.taken[i].take() {
                if let Err(e) = self.absorb(metrics, i, &d, h.tid())
                    && first_err.is_none()
                {
                    first_err = Some(e);
                }
                h.give_spare(d);
            }
            let late = h.late_handoffs();
            let b = &mut self.cpus[i];
            metrics
                .late_handoffs
                .get_or_create(&b.labels)
                .inc_by(late - b.handoffs_seen);
            b.handoffs_seen = late;
        }
        first_err.map_or(Ok(()), Err)
    }

    /// Adds one interval of the `i`-th CPU, measured by thread `tid`, to the metrics and
    /// the log, and attributes its late wake-ups when traced.
    pub fn absorb(
        &mut self,
        metrics: &Metrics,
        i: usize,
        d: &IntervalData,
        tid: u32,
    ) -> Result<(), LogError> {
        if let Some(t) = &mut self.tracer {
            t.attribute(metrics, i, d, tid);
        }
        let b = &mut self.cpus[i];
        metrics.latency.get_or_create(&b.labels).add(&d.hist);
        for (labels, &n) in b.late_labels.iter().zip(&d.late) {
            metrics.late.get_or_create(labels).inc_by(n);
        }
        metrics.overruns.get_or_create(&b.labels).inc_by(d.overruns);
        if let Some(max) = d.hist.max_ns() {
            b.max_since_start = b.max_since_start.max(max);
            b.recent.push_back((d.end_ns, max));
        }
        while let Some(&(end, _)) = b.recent.front()
            && end + RECENT_NS < d.end_ns
        {
            b.recent.pop_front();
        }
        let recent = b.recent.iter().map(|&(_, m)| m).max().unwrap_or(0);
        metrics
            .max
            .get_or_create(&b.recent_labels)
            .set(recent as f64 / 1e9);
        metrics
            .max
            .get_or_create(&b.start_labels)
            .set(b.max_since_start as f64 / 1e9);
        if self.log.is_none() {
            return Ok(());
        }
        b.log_hist.add(&d.hist);
        let start = *b.log_start_ns.get_or_insert(d.start_ns);
        b.log_end_ns = d.end_ns;
        // A whole interval, give or take the half second a handoff may drift.
        if d.end_ns.saturating_sub(start) + 500_000_000 >= self.log_every_ns {
            self.write_log(i)?;
        }
        Ok(())
    }

    /// Writes the `i`-th CPU's logged interval and starts the next.
    fn write_log(&mut self, i: usize) -> Result<(), LogError> {
        let Some(start) = self.cpus[i].log_start_ns else {
            return Ok(());
        };
        let (end, cpu) = (self.cpus[i].log_end_ns, self.cpus[i].cpu);
        let wall = self.wall(start);
        let b = &mut self.cpus[i];
        let log = self.log.as_mut().expect("checked by the caller");
        let written = log.write(
            cpu,
            wall,
            end.saturating_sub(start) as f64 / 1e9,
            &b.log_hist,
        );
        b.log_hist.clear();
        b.log_start_ns = None;
        written?;
        self.logged += 1;
        Ok(())
    }

    /// Writes every CPU's partial interval (at exit: no interval is lost) and flushes.
    pub fn flush_log(&mut self) -> Result<(), LogError> {
        if self.log.is_none() {
            return Ok(());
        }
        for i in 0..self.cpus.len() {
            self.write_log(i)?;
        }
        self.log.as_mut().map_or(Ok(()), IntervalLog::flush)
    }

    /// Reopens the log file (SIGHUP).
    pub fn reopen_log(&mut self) -> Result<(), LogError> {
        self.log.as_mut().map_or(Ok(()), IntervalLog::reopen)
    }
}
