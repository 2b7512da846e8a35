//! Individual events with their timestamps: the K largest, and an optional bounded log of
//! every event.
//!
//! Timestamps stay raw counter values while recording (no conversion in the hot loop) so
//! that a later pass can match them against kernel trace events on the same timebase.

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
