//! Records every probe's result entry shares: the thread as it ran, the histogram as
//! stored, and a bounded log of timestamped events.

use serde::{Deserialize, Serialize};

use crate::engine::clock::Scale;
use crate::engine::run::WorkerOutcome;
use crate::engine::sched::ThreadCounters;
use crate::stats::LatencyHistogram;
use crate::stats::events::EventOut;
use crate::stats::{Event, EventLog};

/// The thread as it really ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadRecord {
    pub policy: crate::engine::sched::Policy,
    pub priority: u8,
    /// Why the requested policy was refused, if it was.
    pub sched_refused: Option<String>,
    pub involuntary_switches: u64,
    pub voluntary_switches: u64,
    /// CPU migrations (absent when the kernel has no /proc/thread-self/sched).
    pub migrations: Option<u64>,
    /// The thread's id, as trace events name it (absent in results from before it was
    /// recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tid: Option<u32>,
}

/// The `encoding` of a histogram left out of a result that was neither saved nor printed.
pub const OMITTED: &str = "omitted";

/// How the histogram is stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistogramRecord {
    pub unit: String,
    pub encoding: String,
    pub data: String,
}

impl HistogramRecord {
    pub fn from_hist(h: &LatencyHistogram) -> HistogramRecord {
        HistogramRecord {
            unit: "ns".into(),
            encoding: "hdrhistogram-v2-deflate-base64".into(),
            data: h.encode_base64(),
        }
    }

    /// No histogram: for a result that nobody reads beyond its table, which shows the
    /// summary. Encoding one takes about 0.4 MiB of transient buffers and deflate state.
    pub fn omitted() -> HistogramRecord {
        HistogramRecord {
            unit: "ns".into(),
            encoding: OMITTED.into(),
            data: String::new(),
        }
    }
}

/// Every interruption with its timestamp, when `--event-log` asked for it. Columns of
/// equal length.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EventLogRecord {
    pub capacity: usize,
    pub dropped: u64,
    pub start_ns: Vec<u64>,
    pub start_tsc: Vec<u64>,
    pub duration_ns: Vec<u64>,
}

impl ThreadRecord {
    /// The record of a worker that ran with `counters` (taken over its measuring window).
    pub fn from_worker<T>(w: &WorkerOutcome<T>, counters: &ThreadCounters) -> ThreadRecord {
        ThreadRecord {
            policy: w.sched.policy,
            priority: w.sched.priority,
            sched_refused: w.sched_refused.clone(),
            involuntary_switches: counters.involuntary_switches,
            voluntary_switches: counters.voluntary_switches,
            migrations: counters.migrations,
            tid: Some(w.tid),
        }
    }
}

/// An event as stored: its start relative to the run's `start` tick, and on the counter.
pub fn event_out(scale: Scale, start: u64, e: &Event) -> EventOut {
    EventOut {
        start_ns: scale.to_ns(e.start_ticks.saturating_sub(start)),
        start_tsc: e.start_ticks,
        duration_ns: e.duration_ns,
    }
}

impl EventLogRecord {
    /// The log's events as columns, relative to the run's `start` tick.
    pub fn from_log(log: &EventLog, scale: Scale, start: u64) -> EventLogRecord {
        let out: Vec<EventOut> = log
            .events()
            .iter()
            .map(|e| event_out(scale, start, e))
            .collect();
        EventLogRecord {
            capacity: log.capacity(),
            dropped: log.dropped(),
            start_ns: out.iter().map(|e| e.start_ns).collect(),
            start_tsc: out.iter().map(|e| e.start_tsc).collect(),
            duration_ns: out.iter().map(|e| e.duration_ns).collect(),
        }
    }
}
