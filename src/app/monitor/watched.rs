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

use std::collections::BTreeSet;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use crate::engine::clock::Scale;
use crate::engine::cpu::CpuList;
use crate::engine::sched;
use crate::trace::session::{TraceError, TraceSession};
use crate::trace::symbols::Symbols;
use crate::trace::watch::{Settings, Watched, Watcher};

use super::super::output::warn;
use super::super::watch::follow;
use super::super::watch::owners::Owners;
use super::causes::{BUFFER_KIB, clean};
use super::groups::{Groups, LIST_EVERY};
use super::metrics::{CommLabels, Metrics};
pub use super::watch_books::MAX_CAUSES;
use super::watch_books::{Books, ReaderBooks};

/// Thread names one monitor watches at most: each brings about 30 series and its causes.
pub const MAX_COMMS: usize = 16;
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
            Watched::Comms(self.comms.clone(), Default::default()),
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
        let mut known = rustc_hash::FxHashSet::default();
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
    use super::super::super::watch::TraceCounts;
    use super::super::metrics::WatchMetrics;
    use super::*;
    use crate::stats::LatencyHistogram;
    use crate::stats::causes::{Attribution, CauseKind, CauseRow};
    use crate::trace::watch::ThreadFigures;

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
