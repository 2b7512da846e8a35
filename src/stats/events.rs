//! Individual events with their timestamps: the K largest, and an optional bounded log of
//! every event.
//!
//! Timestamps stay raw counter values while recording (no conversion in the hot loop) so
//! that a later pass can match them against kernel trace events on the same timebase.

use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_utils::CachePadded;
use serde::{Deserialize, Serialize};

/// One event: where it started on the counter, and how long it lasted in ns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Event {
    pub start_ticks: u64,
    pub duration_ns: u64,
}

/// The K largest events seen, in fixed memory. Offering an event that is not among the K
/// largest costs one comparison.
#[derive(Debug, Clone)]
pub struct Largest {
    events: Vec<Event>,
    cap: usize,
    /// Index of the smallest kept event, valid once full.
    min_idx: usize,
}

impl Largest {
    pub fn new(cap: usize) -> Largest {
        let mut events = Vec::with_capacity(cap);
        // Touch the memory now rather than in the hot loop.
        events.resize(cap, Event::default());
        events.clear();
        Largest {
            events,
            cap,
            min_idx: 0,
        }
    }

    #[inline]
    pub fn offer(&mut self, e: Event) {
        if self.events.len() < self.cap {
            self.events.push(e);
            if self.events.len() == self.cap {
                self.refresh_min();
            }
        } else if self.cap > 0 && e.duration_ns > self.events[self.min_idx].duration_ns {
            self.events[self.min_idx] = e;
            self.refresh_min();
        }
    }

    fn refresh_min(&mut self) {
        self.min_idx = (0..self.events.len())
            .min_by_key(|&i| self.events[i].duration_ns)
            .unwrap_or(0);
    }

    pub fn clear(&mut self) {
        self.events.clear();
        self.min_idx = 0;
    }

    /// The kept events, largest first.
    pub fn sorted(&self) -> Vec<Event> {
        let mut v = self.events.clone();
        v.sort_by(|a, b| {
            b.duration_ns
                .cmp(&a.duration_ns)
                .then(a.start_ticks.cmp(&b.start_ticks))
        });
        v
    }
}

/// Every event, up to a fixed capacity; later ones are counted as dropped.
#[derive(Debug, Clone)]
pub struct EventLog {
    events: Vec<Event>,
    cap: usize,
    dropped: u64,
}

impl EventLog {
    pub fn new(cap: usize) -> EventLog {
        let mut events = Vec::with_capacity(cap);
        events.resize(cap, Event::default());
        events.clear();
        EventLog {
            events,
            cap,
            dropped: 0,
        }
    }

    #[inline]
    pub fn push(&mut self, e: Event) {
        if self.events.len() < self.cap {
            self.events.push(e);
        } else {
            self.dropped += 1;
        }
    }

    pub fn clear(&mut self) {
        self.events.clear();
        self.dropped = 0;
    }

    pub fn events(&self) -> &[Event] {
        &self.events
    }

    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    pub fn capacity(&self) -> usize {
        self.cap
    }
}

/// An event as stored in the result file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventOut {
    /// Start, in ns since the run began.
    pub start_ns: u64,
    /// Start, as the raw counter value (TSC on x86-64): the timebase of `x86-tsc` traces.
    pub start_tsc: u64,
    pub duration_ns: u64,
}

#[cfg(test)]
mod tests {
    use super::{Event, GapRing};

    /// Issue 22: gaps pass in order; a reader a whole queue behind costs drops, counted.
    #[test]
    fn issue22_a_gap_ring_hands_over_in_order_and_counts_what_it_drops() {
        let ring = GapRing::new(4);
        let mut p = ring.producer(42, 7);
        let e = |i: u64| Event {
            start_ticks: i,
            duration_ns: 10 * i,
        };
        for i in 0..3 {
            p.push(e(i));
        }
        let mut got = Vec::new();
        ring.drain(|x| got.push(x));
        assert_eq!(got, vec![e(0), e(1), e(2)]);
        for i in 3..9 {
            p.push(e(i));
        }
        got.clear();
        ring.drain(|x| got.push(x));
        assert_eq!(got, vec![e(3), e(4), e(5), e(6)]);
        assert_eq!((ring.dropped(), ring.tid(), ring.loop_min()), (2, 42, 7));
    }
    use super::*;

    fn ev(t: u64, d: u64) -> Event {
        Event {
            start_ticks: t,
            duration_ns: d,
        }
    }

    #[test]
    fn keeps_the_k_largest() {
        let mut l = Largest::new(3);
        for (i, d) in [5, 1, 9, 3, 7, 2, 8].into_iter().enumerate() {
            l.offer(ev(i as u64, d));
        }
        let d: Vec<u64> = l.sorted().iter().map(|e| e.duration_ns).collect();
        assert_eq!(d, [9, 8, 7]);
        assert_eq!(l.sorted()[0].start_ticks, 2);
    }

    #[test]
    fn zero_capacity_keeps_nothing() {
        let mut l = Largest::new(0);
        l.offer(ev(1, 1));
        assert!(l.sorted().is_empty());
    }

    #[test]
    fn log_counts_what_it_drops() {
        let mut log = EventLog::new(2);
        for i in 0..5 {
            log.push(ev(i, i));
        }
        assert_eq!(log.events().len(), 2);
        assert_eq!(log.dropped(), 3);
    }
}

/// A bounded single-producer, single-consumer queue of events, through which a measuring
/// thread hands each gap to a reader on the housekeeping CPU while the run goes on (so
/// that a run of any length is attributed whole in bounded memory). Safe code: each slot
/// is two atomics. The producer writes its own cache line (`head`, `dropped`) once a gap,
/// on the interruption path, never in the loop; it reads the consumer's `tail` only when
/// the queue looks full. When the reader falls behind by a whole queue, gaps are dropped
/// and counted, never waited for.
#[derive(Debug)]
pub struct GapRing {
    slots: Vec<(AtomicU64, AtomicU64)>,
    head: CachePadded<AtomicU64>,
    dropped: AtomicU64,
    /// The producing thread's id, for the reader to tell its time slices from others',
    /// and its loop's own shortest step in ticks, which ends each gap.
    tid: AtomicU64,
    loop_min: AtomicU64,
    tail: CachePadded<AtomicU64>,
}

/// The producer's side: its own copy of where the reader was last seen.
#[derive(Debug)]
pub struct GapProducer<'r> {
    ring: &'r GapRing,
    tail_seen: u64,
}

impl GapRing {
    /// A queue of `cap` gaps (16 bytes each), touched now so that no page fault comes
    /// while measuring.
    pub fn new(cap: usize) -> GapRing {
        let slots = (0..cap.max(1))
            .map(|_| (AtomicU64::new(0), AtomicU64::new(0)))
            .collect();
        GapRing {
            slots,
            head: CachePadded::new(AtomicU64::new(0)),
            dropped: AtomicU64::new(0),
            tid: AtomicU64::new(0),
            loop_min: AtomicU64::new(0),
            tail: CachePadded::new(AtomicU64::new(0)),
        }
    }

    /// The producing side, one at a time: thread `tid`, whose loop's shortest step is
    /// `loop_min` ticks.
    pub fn producer(&self, tid: u32, loop_min: u64) -> GapProducer<'_> {
        self.tid.store(u64::from(tid), Ordering::Relaxed);
        self.loop_min.store(loop_min, Ordering::Relaxed);
        GapProducer {
            ring: self,
            tail_seen: self.tail.load(Ordering::Acquire),
        }
    }

    /// The producer's thread id, once it has started (0 before).
    pub fn tid(&self) -> u32 {
        self.tid.load(Ordering::Relaxed) as u32
    }

    /// The producer's loop's shortest step, in ticks.
    pub fn loop_min(&self) -> u64 {
        self.loop_min.load(Ordering::Relaxed)
    }

    /// Gaps dropped because the reader was a whole queue behind.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Hands every gap queued so far to `f`, oldest first (the consumer's side).
    pub fn drain(&self, f: impl FnMut(Event)) {
        self.drain_at_most(usize::MAX, f);
    }

    /// Hands at most `n` of the gaps queued so far to `f`, oldest first, leaving the rest
    /// queued; whether any were left.
    pub fn drain_at_most(&self, n: usize, mut f: impl FnMut(Event)) -> bool {
        let tail = self.tail.load(Ordering::Relaxed);
        let queued = self.head.load(Ordering::Acquire);
        let head = queued.min(tail.saturating_add(n as u64));
        let cap = self.slots.len() as u64;
        for i in tail..head {
            let (s, d) = &self.slots[(i % cap) as usize];
            f(Event {
                start_ticks: s.load(Ordering::Relaxed),
                duration_ns: d.load(Ordering::Relaxed),
            });
        }
        self.tail.store(head, Ordering::Release);
        head < queued
    }
}

impl GapProducer<'_> {
    /// Queues one gap, or counts it dropped when the queue is full.
    #[inline]
    pub fn push(&mut self, e: Event) {
        let r = self.ring;
        let head = r.head.load(Ordering::Relaxed);
        let cap = r.slots.len() as u64;
        if head - self.tail_seen >= cap {
            self.tail_seen = r.tail.load(Ordering::Acquire);
            if head - self.tail_seen >= cap {
                r.dropped.fetch_add(1, Ordering::Relaxed);
                return;
            }
        }
        let (s, d) = &r.slots[(head % cap) as usize];
        s.store(e.start_ticks, Ordering::Relaxed);
        d.store(e.duration_ns, Ordering::Relaxed);
        r.head.store(head + 1, Ordering::Release);
    }
}
