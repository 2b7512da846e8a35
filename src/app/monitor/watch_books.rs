//! The folding of `monitor`'s watch (`watched`): each drain's figures per thread added
//! to cumulative counters and histograms per watched key, a thread name
//! (`--watch-comm`) or a cgroup (`--watch-cgroup`, `groups`), and the trace reader's
//! own counts. Bounded by the keys: each gives out at most [`MAX_CAUSES`] cause names
//! (the rest are `other`), and a key that goes takes every series of its with it.

use std::collections::{BTreeMap, BTreeSet};

use crate::stats::causes::CauseKind;
use crate::trace::watch::ThreadFigures;

use super::super::watch::TraceCounts;
use super::causes::CauseNames;
use super::metrics::{Key, KindCause, ReaderMetrics, SourceLabels, WatchMetrics};

/// Cause names each watched key gives out; the rest are `other`.
pub const MAX_CAUSES: usize = 10;

/// What the folding keeps between drains, per watched key (a name, a group): the cause
/// names it gave out (and so its series, to remove them when the key goes) and its
/// threads followed. Bounded by the keys.
pub struct Books<L> {
    names: BTreeMap<L, CauseNames>,
    given: BTreeMap<L, BTreeSet<KindCause>>,
    threads: BTreeMap<L, i64>,
}

impl<L: Key> Books<L> {
    pub fn new(keys: impl IntoIterator<Item = L>) -> Books<L> {
        let mut b = Books {
            names: BTreeMap::new(),
            given: BTreeMap::new(),
            threads: BTreeMap::new(),
        };
        for k in keys {
            b.names.insert(k, CauseNames::with_cap(MAX_CAUSES));
        }
        b
    }

    /// Whether `key` is watched.
    pub fn has(&self, key: &L) -> bool {
        self.names.contains_key(key)
    }

    /// Watches `key` from now on, its series created at 0.
    pub fn add(&mut self, key: &L, m: &WatchMetrics<L>) {
        if !self.has(key) {
            self.names
                .insert(key.clone(), CauseNames::with_cap(MAX_CAUSES));
            m.create(key);
        }
    }

    /// Watches `key` no more: every series of it removed.
    pub fn forget(&mut self, key: &L, m: &WatchMetrics<L>) {
        m.remove(key, self.given.get(key).into_iter().flatten());
        self.names.remove(key);
        self.given.remove(key);
        self.threads.remove(key);
    }

    /// A drain begins: no thread counted yet.
    pub fn begin(&mut self) {
        self.threads.clear();
        for k in self.names.keys() {
            self.threads.insert(k.clone(), 0);
        }
    }

    /// A drain ended: the threads followed per key.
    pub fn end(&self, m: &WatchMetrics<L>) {
        for (k, n) in &self.threads {
            m.threads.get_or_create(k).set(*n);
        }
    }

    /// Adds one thread's figures since the last drain under `key`, each cause named by
    /// `name` (its pid dropped, its owner added). A key not watched is left out: its
    /// series would be series no one asked for (a thread renamed since it was matched).
    pub fn absorb(
        &mut self,
        m: &WatchMetrics<L>,
        l: &L,
        f: &ThreadFigures,
        name: &dyn Fn(&str, CauseKind) -> String,
    ) {
        let Some(names) = self.names.get_mut(l) else {
            return;
        };
        *self.threads.entry(l.clone()).or_default() += 1;
        if f.wakeup.count() > 0 {
            m.wakeup.get_or_create(l).add(&f.wakeup);
        }
        let secs = |h: &Option<crate::stats::LatencyHistogram>| {
            h.as_ref().map_or(0.0, |h| h.sum_ns() as f64 / 1e9)
        };
        m.preempted.get_or_create(l).inc_by(secs(&f.preempted));
        m.irq.get_or_create(l).inc_by(secs(&f.irq));
        m.runs.get_or_create(l).inc_by(f.runs);
        m.migrations.get_or_create(l).inc_by(f.migrations);
        m.involuntary.get_or_create(l).inc_by(f.involuntary);
        let Some(a) = &f.attribution else {
            return;
        };
        m.late.get_or_create(l).inc_by(a.gaps);
        let given = self.given.entry(l.clone()).or_default();
        // Largest first: the largest causes of the first drains keep their names.
        for r in &a.causes {
            let kc = KindCause {
                kind: r.kind.as_str().to_string(),
                cause: names.label(r.kind, &name(&r.cause, r.kind)),
            };
            given.insert(kc.clone());
            let cl = (l.clone(), kc);
            m.cause_seconds
                .get_or_create(&cl)
                .inc_by(r.total_ns as f64 / 1e9);
            m.cause_delays.get_or_create(&cl).inc_by(r.gaps);
            m.cause_main.get_or_create(&cl).inc_by(r.largest_in);
        }
    }
}

/// The reader's counts as last exported.
#[derive(Default)]
pub struct ReaderBooks {
    seen: TraceCounts,
    cpu_seen_ns: u64,
}

impl ReaderBooks {
    /// The reader's cumulative counts and CPU time, as counters.
    pub fn counts(&mut self, m: &ReaderMetrics, c: TraceCounts, cpu_ns: u64) {
        m.events.inc_by(c.read.saturating_sub(self.seen.read));
        let lost = |s: &str| SourceLabels { source: s.into() };
        (m.events_lost.get_or_create(&lost("kernel")))
            .inc_by(c.lost_kernel.saturating_sub(self.seen.lost_kernel));
        (m.events_lost.get_or_create(&lost("reader")))
            .inc_by(c.lost_reader.saturating_sub(self.seen.lost_reader));
        self.seen = TraceCounts {
            read: c.read.max(self.seen.read),
            lost_kernel: c.lost_kernel.max(self.seen.lost_kernel),
            lost_reader: c.lost_reader.max(self.seen.lost_reader),
        };
        m.reader_cpu
            .inc_by(cpu_ns.saturating_sub(self.cpu_seen_ns) as f64 / 1e9);
        self.cpu_seen_ns = self.cpu_seen_ns.max(cpu_ns);
    }
}
