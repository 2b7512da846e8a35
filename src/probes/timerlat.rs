//! The kernel's timerlat tracer as `timer`'s engine: its samples, folded per CPU into
//! the IRQ latency, the thread latency and the split between them (the thread's part,
//! thread − IRQ, of each activation that has both), as HdrHistograms like every other
//! probe's. The kernel measures; we only read its trace, so nothing here is a hot loop.
//! The trace lines are parsed in `trace::tracer::timerlat`.

use serde::{Deserialize, Serialize};

use crate::probes::record::HistogramRecord;
use crate::stats::{LatencyHistogram, Summary};

/// The version of the `timerlat` entry's layout: a reader that knows an older one reads
/// the fields it knows.
pub const SECTION_VERSION: u32 = 1;
/// How many of the latest activations (by thread latency) an entry keeps.
pub const LARGEST_KEPT: usize = 10;

/// Where in an activation the kernel took the sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Context {
    /// In the timer's IRQ handler.
    Irq,
    /// When the timerlat thread ran.
    Thread,
    /// A user-space workload's return to the kernel (6.5+; counted, not folded).
    UserRet,
}

/// One line of the timerlat tracer: the latency of one activation in one context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    pub cpu: usize,
    /// The activation's number on its CPU (`#N`).
    pub seq: u64,
    pub context: Context,
    pub latency_ns: u64,
}

/// One activation with both samples, as kept among the largest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Activation {
    pub seq: u64,
    pub irq_ns: u64,
    pub thread_ns: u64,
}

/// One CPU's share of a timerlat run, as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimerlatEntry {
    /// The layout of this entry ([`SECTION_VERSION`]).
    pub version: u32,
    pub cpu: usize,
    /// `osnoise/timerlat_period_us`, in ns.
    pub period_ns: u64,
    /// How long the tracer ran, in ns.
    pub duration_ns: u64,
    /// The kernel thread that slept on the timer ("timerlat/1"), its policy and priority
    /// as read from /proc while it ran (absent when it could not be read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread: Option<KernelThread>,
    /// Latency at the timer's IRQ handler: from the timer's expiry to the handler.
    pub irq: Summary,
    pub irq_histogram: HistogramRecord,
    /// Latency when the thread ran: from the timer's expiry to the thread (it includes
    /// the IRQ's part).
    pub thread_latency: Summary,
    pub thread_histogram: HistogramRecord,
    /// The thread's own part of each activation that has both samples: thread − IRQ.
    pub thread_part: Summary,
    pub thread_part_histogram: HistogramRecord,
    /// Activations with a thread sample but no IRQ sample of theirs (lost or before the
    /// first read), and IRQ samples whose thread sample never came.
    pub unpaired_thread: u64,
    pub unpaired_irq: u64,
    /// Samples of the user-return context (a user workload's; not folded).
    pub user_ret: u64,
    /// Events the kernel's ring buffer dropped on this CPU, as the trace said.
    pub lost_events: u64,
    /// The latest activations by thread latency, latest first.
    pub largest: Vec<Activation>,
}

/// A kernel thread as it ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelThread {
    pub comm: String,
    pub pid: u32,
    pub policy: crate::engine::sched::Policy,
    pub priority: u8,
}

/// One CPU's samples as they come.
pub struct CpuFold {
    pub cpu: usize,
    irq: LatencyHistogram,
    thread: LatencyHistogram,
    part: LatencyHistogram,
    /// The IRQ sample whose thread sample is awaited: (seq, ns).
    pending_irq: Option<(u64, u64)>,
    unpaired_thread: u64,
    unpaired_irq: u64,
    user_ret: u64,
    lost: u64,
    largest: Vec<Activation>,
}

impl CpuFold {
    pub fn new(cpu: usize) -> CpuFold {
        CpuFold {
            cpu,
            irq: LatencyHistogram::new(),
            thread: LatencyHistogram::new(),
            part: LatencyHistogram::new(),
            pending_irq: None,
            unpaired_thread: 0,
            unpaired_irq: 0,
            user_ret: 0,
            lost: 0,
            largest: Vec::with_capacity(LARGEST_KEPT + 1),
        }
    }

    /// Folds one sample of this CPU. The IRQ sample of activation N comes before its
    /// thread sample; the next IRQ sample can only come after it (the thread arms the
    /// next timer), so one pending IRQ is all there is to pair.
    pub fn add(&mut self, s: &Sample) {
        match s.context {
            Context::Irq => {
                if self.pending_irq.is_some() {
                    self.unpaired_irq += 1;
                }
                self.irq.record(s.latency_ns);
                self.pending_irq = Some((s.seq, s.latency_ns));
            }
            Context::Thread => {
                self.thread.record(s.latency_ns);
                match self.pending_irq.take() {
                    Some((seq, irq)) if seq == s.seq => self.paired(s.seq, irq, s.latency_ns),
                    Some(_) => {
                        self.unpaired_irq += 1;
                        self.unpaired_thread += 1;
                    }
                    None => self.unpaired_thread += 1,
                }
            }
            Context::UserRet => self.user_ret += 1,
        }
    }

    /// The ring buffer dropped `n` events on this CPU: a pending IRQ sample may have lost
    /// its thread sample, so it is not paired across the gap.
    pub fn lost(&mut self, n: u64) {
        self.lost += n;
        if self.pending_irq.take().is_some() {
            self.unpaired_irq += 1;
        }
    }

    fn paired(&mut self, seq: u64, irq_ns: u64, thread_ns: u64) {
        self.part.record(thread_ns.saturating_sub(irq_ns));
        let a = Activation {
            seq,
            irq_ns,
            thread_ns,
        };
        let kept_least = self.largest.last().map_or(0, |l| l.thread_ns);
        if self.largest.len() < LARGEST_KEPT || thread_ns > kept_least {
            let at = self.largest.partition_point(|l| l.thread_ns >= thread_ns);
            self.largest.insert(at, a);
            self.largest.truncate(LARGEST_KEPT);
        }
    }

    /// The entry: `period_ns` as set, `histograms` false for a result nobody reads
    /// beyond its table (see `HistogramRecord::omitted`).
    pub fn finish(mut self, period_ns: u64, histograms: bool) -> TimerlatEntry {
        if self.pending_irq.take().is_some() {
            self.unpaired_irq += 1;
        }
        let rec = |h: &LatencyHistogram| match histograms {
            true => HistogramRecord::from_hist(h),
            false => HistogramRecord::omitted(),
        };
        TimerlatEntry {
            version: SECTION_VERSION,
            cpu: self.cpu,
            period_ns,
            duration_ns: 0,
            thread: None,
            irq: self.irq.summary(),
            irq_histogram: rec(&self.irq),
            thread_latency: self.thread.summary(),
            thread_histogram: rec(&self.thread),
            thread_part: self.part.summary(),
            thread_part_histogram: rec(&self.part),
            unpaired_thread: self.unpaired_thread,
            unpaired_irq: self.unpaired_irq,
            user_ret: self.user_ret,
            lost_events: self.lost,
            largest: self.largest,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(seq: u64, context: Context, latency_ns: u64) -> Sample {
        Sample {
            cpu: 1,
            seq,
            context,
            latency_ns,
        }
    }

    /// Each activation's split is its thread sample less its own IRQ sample; a thread
    /// sample whose IRQ sample was lost counts in the thread latency but not the split.
    #[test]
    fn pairs_by_activation_and_splits_thread_minus_irq() {
        let mut f = CpuFold::new(1);
        f.add(&s(1, Context::Irq, 1_000));
        f.add(&s(1, Context::Thread, 4_000));
        f.add(&s(2, Context::Irq, 2_000));
        f.add(&s(2, Context::Thread, 12_000));
        f.lost(3);
        f.add(&s(5, Context::Thread, 9_000));
        f.add(&s(6, Context::Irq, 500));
        let e = f.finish(1_000_000, true);
        assert_eq!(e.irq.count, 3);
        assert_eq!(e.thread_latency.count, 3);
        assert_eq!(e.thread_part.count, 2);
        assert_eq!(e.thread_part.min_ns, Some(3_000));
        assert_eq!(e.thread_part.max_ns, Some(10_000));
        assert_eq!(
            (e.unpaired_thread, e.unpaired_irq, e.lost_events),
            (1, 1, 3)
        );
        assert_eq!(
            e.largest[0],
            Activation {
                seq: 2,
                irq_ns: 2_000,
                thread_ns: 12_000
            }
        );
        assert_eq!(e.largest.len(), 2);
        assert_eq!(e.version, SECTION_VERSION);
    }

    #[test]
    fn keeps_only_the_latest_activations_latest_first() {
        let mut f = CpuFold::new(0);
        for seq in 1..=100 {
            f.add(&s(seq, Context::Irq, 100));
            f.add(&s(seq, Context::Thread, 1_000 + (seq * 37) % 101));
        }
        let e = f.finish(1_000_000, false);
        assert_eq!(e.largest.len(), LARGEST_KEPT);
        assert!(
            e.largest
                .windows(2)
                .all(|w| w[0].thread_ns >= w[1].thread_ns)
        );
        assert_eq!(e.largest[0].thread_ns, e.thread_latency.max_ns.unwrap());
    }
}
