//! `monitor --trace`: why the late wake-ups happened, as counters by cause.
//!
//! One tracefs session (`trace::session`) on the measured CPUs for the monitor's life.
//! The bookkeeping, on the housekeeping CPU, drains it at every tick into a sliding
//! window of events per CPU (`trace::reader::Follower`, at most [`WINDOW_EVENTS`] a CPU),
//! and, for each second a timer thread hands over, attributes that second's late
//! wake-ups (each from its deadline to its waking, as `timer --trace` does) to the
//! window's events with the pure `trace::attribute`. Then it forgets the events before
//! the second's last wake-up: every later deadline comes after it.
//!
//! A late wake-up is one above the lowest `--late-above` limit: the very wake-ups that
//! `jitterscope_timer_late_wakeups_total{above_seconds=<lowest>}` counts, so the causes
//! explain that counter and no second knob can disagree with it.
//!
//! Labels a fleet can graph: causes are named without pids or policies
//! (`attribute::Naming::Stable`: `task kworker vmstat_update`, `irq 36 virtio1-req.0`,
//! `softirq RCU`, `idle`, `real-time throttling`, `fair server`, `unaccounted`), so that a counter keeps one series while
//! kworkers come and go. Each CPU names at most [`MAX_CAUSES`] causes, the first it
//! meets (counters cannot drop a series without resetting it); later ones are counted
//! as `other` of their kind. `unaccounted` is never folded.

use std::collections::{HashMap, HashSet};

use crate::engine::clock::{self, Scale};
use crate::engine::cpu::CpuList;
use crate::probes::timer_stream::IntervalData;
use crate::stats::causes::CauseKind;
use crate::trace::attribute::{self, Context, Gap, MeasurerKind, Naming, Throttle};
use crate::trace::reader::Follower;
use crate::trace::session::{TraceError, TraceSession};

use super::metrics::{CauseLabels, CpuLabels, Metrics};

/// Distinct cause names per CPU; the rest are `other`.
pub const MAX_CAUSES: usize = 20;
/// The name the causes beyond [`MAX_CAUSES`] share.
pub const OTHER: &str = "other";
/// Events kept per CPU: 40 bytes each, at most 5 MiB a CPU; a quiet measured CPU makes
/// about 10 000 a second (its own timer's), a busy one 100 000, and the window must
/// span about a second and a quarter (a second handed over, and the tick's lag).
pub const WINDOW_EVENTS: usize = 131_072;
/// Per-CPU kernel buffer: the tick drains it four times a second, so 2 MiB holds a
/// quarter of a second of a CPU making a few hundred thousand events a second (half of
/// what a one-shot run takes: the monitor keeps it on every measured CPU for days).
pub const BUFFER_KIB: u64 = 2048;
/// Events kept before the last attributed wake-up, for the state they set up (which task
/// runs, which context is open).
const MARGIN_NS: u64 = 10_000_000;
/// A label value is cut to this many characters.
const MAX_LABEL: usize = 64;

/// The label values one CPU (or one watched thread name) gives out.
#[derive(Debug)]
pub struct CauseNames {
    named: HashSet<(CauseKind, String)>,
    cap: usize,
}

impl Default for CauseNames {
    fn default() -> CauseNames {
        CauseNames::with_cap(MAX_CAUSES)
    }
}

impl CauseNames {
    /// At most `cap` names given out.
    pub fn with_cap(cap: usize) -> CauseNames {
        CauseNames {
            named: HashSet::new(),
            cap,
        }
    }

    /// The label value of a cause: its own name while fewer than the cap were given
    /// out (or when it was one of them), `other` beyond; `unaccounted` always.
    pub fn label(&mut self, kind: CauseKind, cause: &str) -> String {
        let cause = clean(cause);
        if kind == CauseKind::Unaccounted || self.named.contains(&(kind, cause.clone())) {
            return cause;
        }
        if self.named.len() < self.cap {
            self.named.insert((kind, cause.clone()));
            return cause;
        }
        OTHER.to_string()
    }
}

/// A label value: at most [`MAX_LABEL`] characters, no control characters.
pub fn clean(s: &str) -> String {
    s.chars()
        .take(MAX_LABEL)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

/// The `reason` label of a trace that could not be made: short and stable.
pub fn reason_label(e: &TraceError) -> &'static str {
    match e {
        TraceError::NotRoot => "not-root",
        TraceError::Mount(_) => "no-tracefs",
        TraceError::NoTscClock => "no-tsc-clock",
        TraceError::Io { .. } => "tracefs-error",
        TraceError::NoTracer { .. } => "no-tracer",
        TraceError::Journal(_) => "journal-busy",
    }
}

/// One CPU's counters, as last read.
#[derive(Debug)]
struct CpuTrace {
    labels: CpuLabels,
    names: CauseNames,
    read_seen: u64,
    lost_seen: u64,
    /// Its throttle settings, read once (reading the fair server may mount debugfs).
    throttle: Throttle,
}

/// The session, its reader and what the bookkeeping keeps between seconds.
pub struct Tracer {
    // Before the session: its pipes are closed before the session removes the instance.
    follower: Follower,
    session: TraceSession,
    scale: Scale,
    /// Work and hrtimer functions' names by address, filled as they show up.
    symbols: HashMap<u64, String>,
    cpus: Vec<CpuTrace>,
    /// The trace could no longer be read: late wake-ups are counted unattributed from
    /// then on, and `trace_info` says `failed`.
    failed: bool,
}

impl Tracer {
    /// Starts tracing `cpus` (the measured CPUs, in the handoffs' order).
    pub fn start(cpus: &CpuList, scale: Scale) -> Result<Tracer, TraceError> {
        let session = TraceSession::start(cpus, BUFFER_KIB)?;
        let follower = Follower::open(&session, WINDOW_EVENTS)?;
        Ok(Tracer {
            cpus: (follower.windows.iter())
                .map(|w| CpuTrace {
                    labels: CpuLabels {
                        cpu: w.cpu.to_string(),
                    },
                    names: CauseNames::default(),
                    read_seen: 0,
                    lost_seen: 0,
                    throttle: crate::system::throttle::read(w.cpu),
                })
                .collect(),
            follower,
            session,
            scale,
            symbols: HashMap::new(),
            failed: false,
        })
    }

    /// Drains the kernel's buffers into the windows, and counts what was read and lost.
    pub fn pass(&mut self, metrics: &Metrics) {
        if self.failed {
            return;
        }
        if let Err(e) = self.follower.pass() {
            self.failed = true;
            metrics.set_trace("failed", "read-error");
            crate::app::output::warn(&format!(
                "the trace can no longer be read ({e}): late wake-ups are counted as \
                 unattributed from now on"
            ));
            return;
        }
        for (c, w) in self.cpus.iter_mut().zip(&self.follower.windows) {
            let lost = self.session.lost(w.cpu) + w.evicted;
            metrics
                .trace_lost
                .get_or_create(&c.labels)
                .inc_by(lost.saturating_sub(c.lost_seen));
            c.lost_seen = c.lost_seen.max(lost);
            metrics
                .trace_events
                .get_or_create(&c.labels)
                .inc_by(w.read - c.read_seen);
            c.read_seen = w.read;
        }
    }

    /// Attributes the late wake-ups of one second of the `i`-th CPU, measured by thread
    /// `tid`, and forgets the events no later second needs. Call `pass` first.
    pub fn attribute(&mut self, metrics: &Metrics, i: usize, d: &IntervalData, tid: u32) {
        let scale = self.scale;
        let (Some(c), Some(w)) = (self.cpus.get_mut(i), self.follower.windows.get_mut(i)) else {
            return;
        };
        let log = d.late_log.events();
        let unread = if self.failed { log.len() as u64 } else { 0 };
        metrics
            .trace_unattributed
            .get_or_create(&c.labels)
            .inc_by(d.late_log.dropped() + unread);
        if self.failed {
            return;
        }
        if !log.is_empty() {
            let gaps: Vec<(Gap, u64)> = (d.late_wakeups(scale))
                .map(|(start, end, late_ns)| (Gap { start, end }, late_ns))
                .collect();
            let events = w.events();
            crate::trace::symbols::name_functions(&mut self.symbols, events);
            let cx = Context {
                names: &self.follower.decoder.names,
                symbols: &self.symbols,
                scale,
                run_start: 0,
                measurer: tid,
                // No breakdowns: the rows count the wake-ups each cause took part in.
                top: 0,
                // The thread sleeps until its deadline: whatever ran then is the delay's.
                measurer_kind: MeasurerKind::Sleeps,
                naming: Naming::Stable,
                throttle: &c.throttle,
            };
            let a = attribute::attribute(&gaps, events, &cx);
            let labels = |names: &mut CauseNames, kind: CauseKind, cause: &str| CauseLabels {
                cpu: c.labels.cpu.clone(),
                kind: kind.as_str().to_string(),
                cause: names.label(kind, cause),
            };
            // Rows first, largest first: the largest causes of the first seconds are the
            // ones that keep their names.
            for r in &a.causes {
                let l = labels(&mut c.names, r.kind, &r.cause);
                metrics
                    .cause_seconds
                    .get_or_create(&l)
                    .inc_by(r.total_ns as f64 / 1e9);
                metrics.cause_wakeups.get_or_create(&l).inc_by(r.gaps);
            }
            metrics
                .trace_attributed
                .get_or_create(&c.labels)
                .inc_by(gaps.len() as u64);
        }
        // Every later deadline comes after this second's last wake-up.
        let (now_tsc, now_ns) = (clock::now(), clock::monotonic_ns());
        let back = now_ns.saturating_sub(d.end_ns) + MARGIN_NS;
        w.forget_before(now_tsc.saturating_sub(scale.to_ticks(back)));
    }

    /// Stops tracing and removes the instance (dropping does the same).
    pub fn close(self) {
        let Tracer {
            follower,
            mut session,
            ..
        } = self;
        drop(follower);
        session.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn causes_beyond_the_cap_fold_into_other_and_unaccounted_never_does() {
        let mut n = CauseNames::default();
        for i in 0..MAX_CAUSES {
            assert_eq!(
                n.label(CauseKind::Task, &format!("task t{i}")),
                format!("task t{i}")
            );
        }
        // Full: a new cause is `other`; one named before keeps its name, however often.
        assert_eq!(n.label(CauseKind::Irq, "irq 36 eth0"), OTHER);
        assert_eq!(n.label(CauseKind::Task, "task late"), OTHER);
        assert_eq!(n.label(CauseKind::Task, "task t3"), "task t3");
        assert_eq!(
            n.label(CauseKind::Unaccounted, "unaccounted"),
            "unaccounted"
        );
        // The same name under another kind is another cause.
        assert_eq!(n.label(CauseKind::Irq, "task t0"), OTHER);
        assert_eq!(n.named.len(), MAX_CAUSES);
    }

    #[test]
    fn labels_are_short_and_printable() {
        let mut n = CauseNames::default();
        let long = "x".repeat(200);
        assert_eq!(n.label(CauseKind::Task, &long).chars().count(), MAX_LABEL);
        assert_eq!(n.label(CauseKind::Task, "task a\nb"), "task a?b");
    }

    /// The series the folding makes, as scraped: one per kind for `other`.
    #[test]
    fn folded_causes_are_scraped_as_other_of_their_kind() {
        let m = Metrics::new(&[1], &[100_000], super::super::metrics::tests::config());
        let mut n = CauseNames::default();
        for i in 0..MAX_CAUSES + 5 {
            let l = CauseLabels {
                cpu: "1".into(),
                kind: "task".into(),
                cause: n.label(CauseKind::Task, &format!("task t{i}")),
            };
            m.cause_seconds.get_or_create(&l).inc_by(0.001);
        }
        let (text, _) = m.encode(false);
        let series = |name: &str| text.lines().filter(|l| l.starts_with(name)).count();
        assert_eq!(series("jitterscope_cause_seconds_total{"), MAX_CAUSES + 1);
        let other = "jitterscope_cause_seconds_total{cpu=\"1\",kind=\"task\",cause=\"other\"} ";
        let v: f64 = (text.lines())
            .find_map(|l| l.strip_prefix(other))
            .expect("an other series")
            .parse()
            .unwrap();
        assert!((v - 0.005).abs() < 1e-9, "{v}");
    }
}
