//! `monitor --watch-comm NAME[,NAME…]`: `watch` without end, exported to Prometheus.
//!
//! The same trace, reader loop and pure follower as `jitterscope watch --comm`
//! (`app::watch::follow` feeding a `trace::watch::Watcher`), on a thread of its own
//! pinned to the housekeeping CPU. Every [`DRAIN_EVERY`] the watcher's figures since the
//! last drain are folded into cumulative counters and histograms (`Books`), and the
//! watcher starts them afresh; a thread asleep for [`IDLE`] is dropped from its open
//! state after its last figures were folded, so memory is flat however many threads
//! come and go.
//!
//! Labels, and why per name rather than per thread: a series is keyed by `comm`, one of
//! the names given, never by thread id. Thread ids churn (a pool that restarts, a
//! thread per connection), and every new id would be a new series in the fleet's
//! time-series database for as long as it keeps them, however the exposition dropped
//! it; the names are fixed by the command line, so the series are bounded before the
//! first scrape: at most [`MAX_COMMS`] names, each with its histogram and counters, and
//! its causes. Threads of one name (a pool of 16 `gw-worker`s) sum into one histogram,
//! which is what a Prometheus histogram is for; a thread that needs its own series is
//! given its own name (`prctl(PR_SET_NAME)`, `pthread_setname_np`), as the hot threads
//! of a latency-critical application usually are, and named here. `watch --pid` gives
//! a one-off run thread by thread.
//!
//! Causes are named as `--trace` names them (no pids, no policies: `task kworker
//! vmstat_update`), and each name gives out at most [`MAX_CAUSES`], the first it meets
//! (largest first in each drain; a counter cannot drop a series without resetting it);
//! later ones count as `other` of their kind, and `unaccounted` is never folded.
//!
//! Its own trace instance (`jitterscope-PID-watch`), beside `--trace`'s if both are on:
//! `--trace` reads the measured CPUs' events at the timer threads' handoffs, keeping a
//! second and a quarter of them to attribute each handed-over second, while this one
//! needs every online CPU (threads migrate) walked 300 ms behind; one reader for both
//! would hold the larger window of every CPU. The cost is that the measured CPUs' events
//! are written to two buffers.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use crate::engine::clock::Scale;
use crate::engine::cpu::CpuList;
use crate::engine::sched;
use crate::stats::causes::CauseKind;
use crate::trace::session::{TraceError, TraceSession};
use crate::trace::symbols::Symbols;
use crate::trace::watch::{Settings, ThreadFigures, Watched, Watcher};

use super::super::output::warn;
use super::super::watch::owners::Owners;
use super::super::watch::{TraceCounts, follow};
use super::causes::{BUFFER_KIB, CauseNames, clean};
use super::groups::{Groups, LIST_EVERY};
use super::metrics::{
    CommLabels, Key, KindCause, Metrics, ReaderMetrics, SourceLabels, WatchMetrics,
};

/// Thread names one monitor watches at most: each brings about 30 series and its causes.
pub const MAX_COMMS: usize = 16;
/// Cause names each watched key gives out; the rest are `other`.
pub const MAX_CAUSES: usize = 10;
/// How often the figures are folded into the metrics.
pub const DRAIN_EVERY: Duration = Duration::from_secs(1);
/// A thread asleep this long (trace time) is dropped from the open state.
pub const IDLE: Duration = Duration::from_secs(10);
/// The instance's tag: `jitterscope-PID-watch`.
pub const TAG: &str = "watch";
/// Tasks whose owners are remembered (`--watch-cgroup`'s causes); past it, forgotten
/// and read again as they run, so that a host that forks without end keeps memory flat.
const OWNERS_KEPT: usize = 8192;

/// The watch's trace, started before the timer threads.
pub struct WatchComms {
    session: TraceSession,
    kallsyms: Symbols,
    comms: BTreeSet<String>,
    threshold_ns: u64,
    throttle: crate::trace::attribute::Throttle,
}

impl WatchComms {
    /// Starts tracing every CPU of `online` for the threads named `comms` (and those of
    /// the groups `run` is given).
    pub fn start(
        online: &CpuList,
        comms: &[String],
        threshold_ns: u64,
    ) -> Result<WatchComms, TraceError> {
        // Read before tracing: reading the fair server may mount debugfs, and kallsyms
        // takes ~60 ms during which a busy CPU's buffer would fill unread.
        let throttle = crate::system::throttle::read(online.first().unwrap_or(0));
        let kallsyms = Symbols::load();
        let session =
            TraceSession::start_tagged(online, BUFFER_KIB, &["sched:sched_wakeup_new"], TAG)?;
        for needed in ["sched:sched_switch", "sched:sched_wakeup"] {
            if session.missing.iter().any(|m| m == needed) {
                return Err(TraceError::Io {
                    path: session.dir.join("events").join(needed.replace(':', "/")),
                    source: std::io::Error::other("this kernel's trace has no such event"),
                });
            }
        }
        Ok(WatchComms {
            session,
            kallsyms,
            comms: comms.iter().cloned().collect(),
            threshold_ns,
            throttle,
        })
    }

    /// Follows the watched threads until `done`, folding their figures into `metrics`;
    /// pinned to `housekeeping`. With `groups`, their threads are listed again every
    /// [`LIST_EVERY`] and folded per group, and the tasks that ran instead are named
    /// with their owners. A trace that can no longer be read is said once, and
    /// `watch_info` says `failed`.
    pub fn run(
        &self,
        housekeeping: Option<usize>,
        scale: Scale,
        metrics: &Metrics,
        mut groups: Option<Groups>,
        done: &AtomicBool,
    ) {
        if let Some(cpu) = housekeeping {
            let _ = sched::pin_to(cpu);
        }
        let mut watcher = Watcher::new(
            Watched::Comms(self.comms.clone(), HashSet::new()),
            Settings {
                scale,
                threshold_ns: self.threshold_ns,
                top: 0,
                throttle: self.throttle.clone(),
                run_start: crate::engine::clock::now(),
            },
        )
        .streaming();
        if groups.is_some() {
            // Pids, to name each task's owner; dropped before they become labels.
            watcher = watcher.with_pids();
        }
        let comm_key = |c: &String| CommLabels { comm: c.clone() };
        let mut comms = Books::new(self.comms.iter().map(comm_key));
        let mut per_group = Books::new([]);
        let mut reader = ReaderBooks::default();
        let owners = Owners::default();
        let mut known = HashSet::new();
        let cpu_start = thread_cpu_ns();
        let mut next = Instant::now() + DRAIN_EVERY;
        let mut next_list = Instant::now();
        let with_pids = groups.is_some();
        let followed = follow(
            &self.session,
            &self.kallsyms,
            watcher,
            None,
            scale,
            done,
            |p| {
                if let Some(g) = &mut groups {
                    owners.ran(p.fed, &mut known);
                    if Instant::now() >= next_list {
                        next_list = Instant::now() + LIST_EVERY;
                        g.list(&metrics.groups, &mut per_group);
                        p.watcher.watch_tids(g.tids());
                    }
                }
                if !p.last && Instant::now() < next {
                    return;
                }
                next = Instant::now() + DRAIN_EVERY;
                owners.read_new();
                let (cm, gm) = (&metrics.watch, &metrics.groups.watch);
                comms.begin();
                per_group.begin();
                p.watcher.drain(IDLE.as_nanos() as u64, |f| {
                    let key = comm_key(&f.comm);
                    if comms.has(&key) {
                        let strip = |c: &str, k| match with_pids {
                            true => Owners::without_pid(c, k),
                            false => c.to_string(),
                        };
                        comms.absorb(cm, &key, f, &strip);
                    }
                    if let Some(key) = groups.as_ref().and_then(|g| g.key(f.tid)) {
                        per_group.absorb(gm, key, f, &|c, k| owners.stable(c, k));
                    }
                });
                comms.end(cm);
                per_group.end(gm);
                reader.counts(&metrics.reader, p.counts(), thread_cpu_ns() - cpu_start);
                if known.len() > OWNERS_KEPT {
                    known.clear();
                    owners.forget();
                }
            },
            |_, _, _, _| (),
        );
        if let Err(e) = followed {
            metrics.reader.set_state("failed", "read-error");
            warn(&format!(
                "--watch-comm/--watch-cgroup: the trace can no longer be read ({e}): the \
                 watched threads' metrics stop here (said once)"
            ));
        }
    }

    /// Stops tracing and removes the instance (dropping does the same).
    pub fn close(mut self) {
        self.session.close();
    }
}

/// This thread's CPU time, ns.
fn thread_cpu_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

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

/// The names given, checked: each a comm the kernel can hold, no repeats, at most
/// [`MAX_COMMS`].
pub fn comms(given: &[String]) -> Result<Vec<String>, String> {
    let mut out: Vec<String> = Vec::new();
    for g in given {
        let c = crate::trace::watch::comm_of(g)?;
        if clean(&c) != c {
            return Err(format!("'{}' holds control characters", c.escape_debug()));
        }
        if !out.contains(&c) {
            out.push(c);
        }
    }
    if out.len() > MAX_COMMS {
        return Err(format!(
            "{} names given; at most {MAX_COMMS} (each is a set of series)",
            out.len()
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::LatencyHistogram;
    use crate::stats::causes::{Attribution, CauseKind, CauseRow};

    fn metrics(comms: &[&str]) -> Metrics {
        let comms: Vec<String> = comms.iter().map(|s| s.to_string()).collect();
        Metrics::new(&[1], &[100_000], super::super::metrics::tests::config())
            .with_watch(&comms, false, 10_000)
    }

    /// One thread's figures since a drain: `wakeups` of 20 µs, the last `late` of them
    /// above the threshold and split between `cause` (main) and an IRQ.
    fn figures(tid: u32, comm: &str, wakeups: u64, late: u64, cause: &str) -> ThreadFigures {
        let mut wakeup = LatencyHistogram::with_sigfig(2);
        for _ in 0..wakeups {
            wakeup.record(20_000);
        }
        let mut preempted = LatencyHistogram::with_sigfig(2);
        preempted.record(500_000);
        ThreadFigures {
            wakeup,
            preempted: Some(preempted),
            irq: None,
            runs: wakeups,
            migrations: 1,
            involuntary: 1,
            attribution: (late > 0).then(|| {
                Attribution::of_causes(
                    vec![
                        CauseRow::made_up(CauseKind::Task, cause, late, late, late * 15_000),
                        CauseRow::made_up(CauseKind::Irq, "irq 30 eth0", late, 0, late * 5_000),
                    ],
                    late,
                    late * 20_000,
                )
            }),
            ..ThreadFigures::new(tid, comm.into(), 2)
        }
    }

    fn books(comms: &[&str]) -> Books<CommLabels> {
        Books::new(comms.iter().map(|c| CommLabels {
            comm: c.to_string(),
        }))
    }

    /// What `Books::absorb` is given by the follower: the thread's own name as its key.
    trait AbsorbByName {
        fn absorb_named(&mut self, m: &WatchMetrics<CommLabels>, f: &ThreadFigures);
    }

    impl AbsorbByName for Books<CommLabels> {
        fn absorb_named(&mut self, m: &WatchMetrics<CommLabels>, f: &ThreadFigures) {
            let key = CommLabels {
                comm: f.comm.clone(),
            };
            Books::absorb(self, m, &key, f, &|c, _| c.to_string());
        }
    }

    fn series(text: &str, prefix: &str) -> usize {
        text.lines().filter(|l| l.starts_with(prefix)).count()
    }

    /// Issue 25: a process that starts a thread per request, each with a new tid and a
    /// new hog beside it, under one watched name: the series stay those of the name,
    /// and its causes stop at the cap plus `other`; the counts still add up.
    #[test]
    fn thread_churn_keeps_the_series_bounded() {
        let m = metrics(&["gw-worker", "gw-io"]);
        let mut b = books(&["gw-worker", "gw-io"]);
        let (before, _) = m.encode(false);
        for i in 0..5_000u32 {
            b.absorb_named(
                &m.watch,
                &figures(10_000 + i, "gw-worker", 10, 2, &format!("task hog{i}")),
            );
        }
        // Renamed away from the watched names: no series of its own.
        b.absorb_named(&m.watch, &figures(9, "renamed", 10, 2, "task x"));
        let (text, _) = m.encode(false);
        assert!(!text.contains("tid="), "no thread ids in labels");
        assert!(!text.contains("renamed"));
        let hist = "jitterscope_watch_wakeup_delay_seconds_bucket{";
        assert_eq!(
            series(&before, hist),
            series(&text, hist),
            "one histogram a name"
        );
        assert_eq!(series(&text, hist), 2 * 17);
        // The cap's task names, `other` (task) and the IRQ: 10 + 1 + … the IRQ is among
        // the first ten names given out.
        let causes = series(&text, "jitterscope_watch_cause_seconds_total{");
        assert_eq!(causes, MAX_CAUSES + 1, "{text}");
        assert!(text.contains(
            "jitterscope_watch_cause_main_total{comm=\"gw-worker\",kind=\"task\",cause=\"other\"} "
        ));
        let count = "jitterscope_watch_wakeup_delay_seconds_count{comm=\"gw-worker\"} 50000";
        assert!(text.contains(count), "{text}");
        assert!(text.contains("jitterscope_watch_late_wakeups_total{comm=\"gw-worker\"} 10000"));
        assert!(text.contains("jitterscope_watch_migrations_total{comm=\"gw-worker\"} 5000"));
        // The quiet name shows zeros, not nothing.
        assert!(text.contains("jitterscope_watch_wakeup_delay_seconds_count{comm=\"gw-io\"} 0"));
        // Every series of the watch, however many threads came and went: bounded.
        let all = series(&text, "jitterscope_watch_");
        assert!(all < 120, "{all} series");
    }

    /// The main-cause counters add up over drains: a hog that was the main cause of
    /// 3 delays in one drain and 4 in the next reads 7; its seconds add too.
    #[test]
    fn causes_accumulate_over_drains() {
        let m = metrics(&["app"]);
        let mut b = books(&["app"]);
        b.absorb_named(&m.watch, &figures(1, "app", 10, 3, "task hog"));
        b.absorb_named(&m.watch, &figures(1, "app", 10, 4, "task hog"));
        let (text, _) = m.encode(false);
        let l = "{comm=\"app\",kind=\"task\",cause=\"task hog\"}";
        assert!(
            text.contains(&format!("jitterscope_watch_cause_main_total{l} 7")),
            "{text}"
        );
        assert!(text.contains(&format!("jitterscope_watch_cause_wakeups_total{l} 7")));
        assert!(text.contains(&format!(
            "jitterscope_watch_cause_seconds_total{l} 0.000105"
        )));
        assert!(text.contains("jitterscope_watch_preempted_seconds_total{comm=\"app\"} 0.001"));
    }

    /// Cumulative reader counts become counters that only grow.
    #[test]
    fn reader_counts_are_counted_once() {
        let m = metrics(&["app"]);
        let mut b = ReaderBooks::default();
        let c = |read, k, r| TraceCounts {
            read,
            lost_kernel: k,
            lost_reader: r,
        };
        b.counts(&m.reader, c(100, 1, 0), 1_000_000);
        b.counts(&m.reader, c(250, 1, 3), 3_000_000);
        let (text, _) = m.encode(false);
        assert!(
            text.contains("jitterscope_watch_events_total 250"),
            "{text}"
        );
        assert!(text.contains("jitterscope_watch_events_lost_total{source=\"kernel\"} 1"));
        assert!(text.contains("jitterscope_watch_events_lost_total{source=\"reader\"} 3"));
        assert!(text.contains("jitterscope_watch_reader_cpu_seconds_total 0.003"));
    }

    #[test]
    fn names_are_checked_and_bounded() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(comms(&s(&["a", "b", "a"])).unwrap(), s(&["a", "b"]));
        assert!(comms(&s(&["a-very-long-thread-name"])).is_err());
        assert!(comms(&s(&[""])).is_err());
        let many: Vec<String> = (0..=MAX_COMMS).map(|i| format!("t{i}")).collect();
        assert!(comms(&many).unwrap_err().contains("at most"));
    }
}
