//! What `/metrics` shows: every metric `monitor` exports, registered once at start with
//! prometheus-client, and encoded at each scrape in the format the scraper asks for
//! (OpenMetrics text, or Prometheus text 0.0.4).
//!
//! Names follow Prometheus conventions (`jitterscope_` prefix, base units in the name,
//! `_total` on counters). Labels are bounded: `cpu` takes one value per measured CPU,
//! `above_seconds` one per late limit (at most 4), `window` two, and the audit's `id` and
//! `severity` the audit's fixed set of checks. With `--trace`, the causes' `kind` takes
//! one of six values and `cause` at most `causes::MAX_CAUSES` names per CPU plus `other`
//! (per kind) and `unaccounted`: names without pids (`causes` says why). With
//! `--watch-comm`, `comm` takes the names given (at most `watched::MAX_COMMS`), never
//! thread ids, and `cause` at most `watched::MAX_CAUSES` per name plus `other` (per
//! kind) and `unaccounted` (`watched` says why).
//!
//! The latency histogram's buckets are fixed and log-spaced, 1-2-5 per decade from 1 µs
//! to 100 ms ([`BUCKETS_NS`]); the counts come from the threads' HdrHistograms (3
//! significant digits), so a wake-up within 0.1 % above a bucket's bound may be counted
//! in that bucket. The late-wake-up counters and the maxima are exact.

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::{EncodeLabelSet, EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::{MetricType, TypedMetric};
use prometheus_client::registry::{Registry, Unit};

use crate::stats::LatencyHistogram;

/// The histogram's upper bounds, in ns: 1-2-5 per decade, 1 µs … 100 ms (then +Inf).
pub const BUCKETS_NS: [u64; 16] = [
    1_000,
    2_000,
    5_000,
    10_000,
    20_000,
    50_000,
    100_000,
    200_000,
    500_000,
    1_000_000,
    2_000_000,
    5_000_000,
    10_000_000,
    20_000_000,
    50_000_000,
    100_000_000,
];

/// The index of the bucket `ns` is counted in (`BUCKETS_NS.len()` for +Inf).
pub fn bucket_of(ns: u64) -> usize {
    BUCKETS_NS.partition_point(|&b| b < ns)
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CpuLabels {
    pub cpu: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LateLabels {
    pub cpu: String,
    pub above_seconds: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MaxLabels {
    pub cpu: String,
    /// `10s` (the last ten seconds) or `start` (since the monitor started).
    pub window: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct FindingLabels {
    pub id: String,
    pub severity: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    pub kind: String,
}

/// One cause of late wake-ups on one CPU.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CauseLabels {
    pub cpu: String,
    /// irq, softirq, vector, nmi, task, unaccounted.
    pub kind: String,
    pub cause: String,
}

/// Whether the causes are traced: `on`, `off` (not asked for) or `unavailable`, with a
/// short reason when unavailable.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TraceLabels {
    pub state: String,
    pub reason: String,
}

/// A watched thread name (`--watch-comm`): every thread of that name, summed.
#[derive(Debug, Clone, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct CommLabels {
    pub comm: String,
}

/// A watched cgroup (`--watch-cgroup`): its path in its hierarchy, and the ids the
/// ecosystem joins on, each empty where the path holds none. `cgroup="dropped"` (other
/// labels empty) sums the groups past `groups::MAX_GROUPS`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct GroupLabels {
    pub cgroup: String,
    pub container_id: String,
    pub pod_uid: String,
    pub unit: String,
}

/// A cause, after the labels of whose delays it is.
#[derive(Debug, Clone, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct KindCause {
    /// irq, softirq, vector, nmi, task, throttling, unaccounted.
    pub kind: String,
    pub cause: String,
}

/// One cause of the delays of one watched key (a name, a cgroup): its labels, then
/// `kind` and `cause`.
pub type CauseOf<L> = (L, KindCause);

/// One cause of the delays of the threads of one watched name.
pub type CommCauseLabels = CauseOf<CommLabels>;

/// Where watched trace events were lost: `kernel` (overwritten before they were read)
/// or `reader` (beyond jitterscope's own bounds).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SourceLabels {
    pub source: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BuildLabels {
    pub version: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ConfigLabels {
    pub policy: String,
    pub priority: String,
    pub interval_seconds: String,
    pub cpus: String,
}

/// A histogram with the fixed buckets, fed whole HdrHistograms at a time (one per
/// thread per second) rather than one value at a time.
#[derive(Debug, Default)]
pub struct FixedBuckets {
    inner: Mutex<BucketCounts>,
}

#[derive(Debug, Default, Clone)]
pub struct BucketCounts {
    /// Per bucket, not cumulative; the last is +Inf.
    pub counts: [u64; BUCKETS_NS.len() + 1],
    pub sum_ns: u128,
    pub count: u64,
}

impl FixedBuckets {
    /// Adds every value `h` recorded.
    pub fn add(&self, h: &LatencyHistogram) {
        let mut b = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let hist = h.inner();
        for v in hist.iter_recorded() {
            // The bucket's lowest value: a recorded value at or under a bound is never
            // pushed above it.
            let low = hist.lowest_equivalent(v.value_iterated_to());
            b.counts[bucket_of(low)] += v.count_at_value();
        }
        b.sum_ns += h.sum_ns() as u128;
        b.count += h.count();
    }

    pub fn snapshot(&self) -> BucketCounts {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl TypedMetric for FixedBuckets {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for FixedBuckets {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let b = self.snapshot();
        let buckets: Vec<(f64, u64)> = (BUCKETS_NS.iter().map(|&ns| ns as f64 / 1e9))
            .chain(std::iter::once(f64::INFINITY))
            .zip(b.counts)
            .collect();
        encoder.encode_histogram::<NoLabelSet>(b.sum_ns as f64 / 1e9, b.count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

type GaugeF = Gauge<f64, AtomicU64>;
type CounterF = Counter<f64, AtomicU64>;

/// Every metric handle, and the registry that encodes them.
pub struct Metrics {
    registry: Registry,
    pub latency: Family<CpuLabels, FixedBuckets>,
    pub max: Family<MaxLabels, GaugeF>,
    pub late: Family<LateLabels, Counter>,
    pub overruns: Family<CpuLabels, Counter>,
    pub late_handoffs: Family<CpuLabels, Counter>,
    pub noise_sweeps: Family<CpuLabels, Counter>,
    pub noise_interruptions: Family<CpuLabels, Counter>,
    pub noise_lost: Family<CpuLabels, CounterF>,
    pub noise_sampled: Family<CpuLabels, CounterF>,
    pub noise_max: Family<CpuLabels, GaugeF>,
    pub noise_running: Family<CpuLabels, Gauge>,
    audit: Family<FindingLabels, Gauge>,
    audit_now: Mutex<BTreeSet<FindingLabels>>,
    pub audit_runs: Counter,
    pub degraded: Family<KindLabels, Gauge>,
    pub up: Gauge,
    pub start_time: GaugeF,
    pub cause_seconds: Family<CauseLabels, CounterF>,
    pub cause_wakeups: Family<CauseLabels, Counter>,
    pub trace_attributed: Family<CpuLabels, Counter>,
    pub trace_unattributed: Family<CpuLabels, Counter>,
    pub trace_events: Family<CpuLabels, Counter>,
    pub trace_lost: Family<CpuLabels, Counter>,
    trace_state: Family<TraceLabels, Gauge>,
    trace_now: Mutex<Option<TraceLabels>>,
    /// `--watch-comm` (registered by `with_watch` only).
    pub watch: WatchMetrics<CommLabels>,
    /// `--watch-cgroup` (registered by `with_watch` only).
    pub groups: GroupMetrics,
    /// The watch's reader (registered by `with_watch` only).
    pub reader: ReaderMetrics,
}

/// What a watched key's labels must be to key series.
pub trait Key:
    Clone + std::hash::Hash + Eq + Ord + EncodeLabelSet + std::fmt::Debug + Send + Sync + 'static
{
}
impl<T> Key for T where
    T: Clone
        + std::hash::Hash
        + Eq
        + Ord
        + EncodeLabelSet
        + std::fmt::Debug
        + Send
        + Sync
        + 'static
{
}

/// What the watch exports per watched key: a thread name (`--watch-comm`, `comm`) or a
/// cgroup (`--watch-cgroup`, `GroupLabels`).
pub struct WatchMetrics<L> {
    pub wakeup: Family<L, FixedBuckets>,
    pub preempted: Family<L, CounterF>,
    pub irq: Family<L, CounterF>,
    pub runs: Family<L, Counter>,
    pub migrations: Family<L, Counter>,
    pub involuntary: Family<L, Counter>,
    pub threads: Family<L, Gauge>,
    pub late: Family<L, Counter>,
    pub cause_seconds: Family<CauseOf<L>, CounterF>,
    pub cause_delays: Family<CauseOf<L>, Counter>,
    pub cause_main: Family<CauseOf<L>, Counter>,
}

impl<L: Key> Default for WatchMetrics<L> {
    fn default() -> Self {
        WatchMetrics {
            wakeup: Family::default(),
            preempted: Family::default(),
            irq: Family::default(),
            runs: Family::default(),
            migrations: Family::default(),
            involuntary: Family::default(),
            threads: Family::default(),
            late: Family::default(),
            cause_seconds: Family::default(),
            cause_delays: Family::default(),
            cause_main: Family::default(),
        }
    }
}

impl<L: Key> WatchMetrics<L> {
    /// The key's series at 0, so that a quiet key shows zeros rather than nothing.
    pub fn create(&self, l: &L) {
        let _ = self.wakeup.get_or_create(l);
        let _ = self.preempted.get_or_create(l);
        let _ = self.irq.get_or_create(l);
        let _ = self.runs.get_or_create(l);
        let _ = self.migrations.get_or_create(l);
        let _ = self.involuntary.get_or_create(l);
        let _ = self.threads.get_or_create(l);
        let _ = self.late.get_or_create(l);
    }

    /// Every series of the key, its causes given, removed (a group that is gone).
    pub fn remove<'a>(&self, l: &L, causes: impl IntoIterator<Item = &'a KindCause>) {
        self.wakeup.remove(l);
        self.preempted.remove(l);
        self.irq.remove(l);
        self.runs.remove(l);
        self.migrations.remove(l);
        self.involuntary.remove(l);
        self.threads.remove(l);
        self.late.remove(l);
        for c in causes {
            let cl = (l.clone(), c.clone());
            self.cause_seconds.remove(&cl);
            self.cause_delays.remove(&cl);
            self.cause_main.remove(&cl);
        }
    }

    /// Registers the families as `PREFIX_…`; `flag` and `of` say whose they are in the
    /// help (`--watch-comm`, `the threads of each name`).
    fn register(&self, r: &mut Registry, prefix: &str, flag: &str, of: &str) {
        let s = Unit::Seconds;
        let n = |x: &str| format!("{prefix}_{x}");
        r.register_with_unit(
            n("wakeup_delay"),
            format!(
                "{flag}: wake-up delay of {of} (from the sched_wakeup to the sched_switch \
                 that runs the thread), all its threads together: fixed 1-2-5 buckets \
                 from 1 us to 100 ms"
            ),
            s.clone(),
            self.wakeup.clone(),
        );
        r.register_with_unit(
            n("preempted"),
            format!(
                "{flag}: time {of} spent runnable but preempted (switched out runnable to \
                 switched in)"
            ),
            s.clone(),
            self.preempted.clone(),
        );
        r.register_with_unit(
            n("irq"),
            format!(
                "{flag}: time interrupt contexts (IRQ, softirq, vector, NMI) took while \
                 {of} ran"
            ),
            s.clone(),
            self.irq.clone(),
        );
        r.register(
            n("runs"),
            format!("{flag}: runs of {of} (switches out)"),
            self.runs.clone(),
        );
        r.register(
            n("migrations"),
            format!("{flag}: runs on another CPU than the thread's previous run"),
            self.migrations.clone(),
        );
        r.register(
            n("involuntary_switches"),
            format!("{flag}: switches out while still runnable (preemptions)"),
            self.involuntary.clone(),
        );
        r.register(
            n("threads"),
            format!("{flag}: threads of each key followed now (seen in the last 10 s)"),
            self.threads.clone(),
        );
        r.register(
            n("late_wakeups"),
            format!(
                "{flag}: wake-up delays at or above the threshold \
                 (jitterscope_watch_threshold_seconds), each split by what ran instead"
            ),
            self.late.clone(),
        );
        r.register_with_unit(
            n("cause"),
            format!(
                "{flag}: time each cause took inside the late wake-ups of {of}, net of \
                 nested causes; the unaccounted part is its own cause"
            ),
            s,
            self.cause_seconds.clone(),
        );
        r.register(
            n("cause_wakeups"),
            format!("{flag}: late wake-ups each cause took time in"),
            self.cause_delays.clone(),
        );
        r.register(
            n("cause_main"),
            format!(
                "{flag}: late wake-ups in which each cause took more time than any other \
                 (the main cause)"
            ),
            self.cause_main.clone(),
        );
    }
}

/// What `--watch-cgroup` exports beside the per-group watch: the groups' own throttling
/// from `cpu.stat`, and how many groups the patterns match and how many past the cap.
#[derive(Default)]
pub struct GroupMetrics {
    pub watch: WatchMetrics<GroupLabels>,
    pub throttled: Family<GroupLabels, CounterF>,
    pub throttled_periods: Family<GroupLabels, Counter>,
    pub matched: Gauge,
    pub dropped: Gauge,
}

/// The watch's trace reader, one for `--watch-comm` and `--watch-cgroup`.
#[derive(Default)]
pub struct ReaderMetrics {
    pub events: Counter,
    pub events_lost: Family<SourceLabels, Counter>,
    pub reader_cpu: CounterF,
    pub threshold: GaugeF,
    state: Family<TraceLabels, Gauge>,
    now: Mutex<Option<TraceLabels>>,
}

impl ReaderMetrics {
    /// Whether the watched threads are traced now: `on`, `unavailable` or `failed`, and
    /// why (replacing what was said before).
    pub fn set_state(&self, state: &str, reason: &str) {
        set_state(&self.state, &self.now, state, reason);
    }
}

/// Replaces the one series of a state family.
fn set_state(
    family: &Family<TraceLabels, Gauge>,
    now: &Mutex<Option<TraceLabels>>,
    state: &str,
    reason: &str,
) {
    let new = TraceLabels {
        state: state.to_string(),
        reason: reason.to_string(),
    };
    let mut now = now.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(old) = now.as_ref().filter(|o| **o != new) {
        family.remove(old);
    }
    family.get_or_create(&new).set(1);
    *now = Some(new);
}

/// The label value of a time in seconds, from ns, without float noise (`0.0001`).
pub fn seconds_label(ns: u64) -> String {
    let s = format!("{:.9}", ns as f64 / 1e9);
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

impl Metrics {
    /// Every metric registered; the per-CPU series created at 0 for `cpus`, so that a
    /// quiet CPU shows zeros rather than nothing.
    pub fn new(cpus: &[usize], limits_ns: &[u64], config: ConfigLabels) -> Metrics {
        let mut r = Registry::with_prefix("jitterscope");
        let m = Metrics {
            registry: Registry::default(),
            latency: Family::default(),
            max: Family::default(),
            late: Family::default(),
            overruns: Family::default(),
            late_handoffs: Family::default(),
            noise_sweeps: Family::default(),
            noise_interruptions: Family::default(),
            noise_lost: Family::default(),
            noise_sampled: Family::default(),
            noise_max: Family::default(),
            noise_running: Family::default(),
            audit: Family::default(),
            audit_now: Mutex::new(BTreeSet::new()),
            audit_runs: Counter::default(),
            degraded: Family::default(),
            up: Gauge::default(),
            start_time: GaugeF::default(),
            cause_seconds: Family::default(),
            cause_wakeups: Family::default(),
            trace_attributed: Family::default(),
            trace_unattributed: Family::default(),
            trace_events: Family::default(),
            trace_lost: Family::default(),
            trace_state: Family::default(),
            trace_now: Mutex::new(None),
            watch: WatchMetrics::default(),
            groups: GroupMetrics::default(),
            reader: ReaderMetrics::default(),
        };
        let s = Unit::Seconds;
        r.register_with_unit(
            "timer_wakeup_latency",
            "Timer wake-up latency per CPU (clock_nanosleep to an absolute deadline, then \
             the clock read): fixed 1-2-5 buckets from 1 us to 100 ms",
            s.clone(),
            m.latency.clone(),
        );
        r.register_with_unit(
            "timer_wakeup_latency_max",
            "Largest wake-up latency per CPU over the last 10 s (window=10s) and since \
             the monitor started (window=start), exact",
            s.clone(),
            m.max.clone(),
        );
        r.register(
            "timer_late_wakeups",
            "Wake-ups later than above_seconds, per CPU, exact",
            m.late.clone(),
        );
        r.register(
            "timer_overruns",
            "Timer deadlines skipped because a wake-up came more than a whole interval late",
            m.overruns.clone(),
        );
        r.register(
            "monitor_late_handoffs",
            "Seconds whose figures a timer thread could not hand over because the \
             bookkeeping was late (they are counted with the next second's)",
            m.late_handoffs.clone(),
        );
        r.register(
            "noise_sweeps",
            "Noise sweeps run on this CPU",
            m.noise_sweeps.clone(),
        );
        r.register(
            "noise_interruptions",
            "Gaps above the noise threshold seen by noise sweeps",
            m.noise_interruptions.clone(),
        );
        r.register_with_unit(
            "noise_lost",
            "Time the noise sweeps' spinner lost to interruptions",
            s.clone(),
            m.noise_lost.clone(),
        );
        r.register_with_unit(
            "noise_sampled",
            "Time the noise sweeps spun",
            s.clone(),
            m.noise_sampled.clone(),
        );
        r.register_with_unit(
            "noise_last_sweep_max",
            "Longest interruption in the last noise sweep",
            s.clone(),
            m.noise_max.clone(),
        );
        r.register(
            "noise_sweep_running",
            "1 while a noise sweep spins on this CPU",
            m.noise_running.clone(),
        );
        r.register(
            "audit_finding",
            "One series per finding of the host's tuning audit, by check id and severity",
            m.audit.clone(),
        );
        r.register(
            "audit_runs",
            "Times the tuning audit ran",
            m.audit_runs.clone(),
        );
        r.register(
            "degraded_info",
            "Why the figures may be worse than they should be (VM, TSC, clocksource, \
             scheduling refused, mlock failed, ...), one series per reason",
            m.degraded.clone(),
        );
        let build: Family<BuildLabels, Gauge> = Family::default();
        build
            .get_or_create(&BuildLabels {
                version: env!("CARGO_PKG_VERSION").to_string(),
            })
            .set(1);
        r.register("build_info", "The jitterscope version serving", build);
        let conf: Family<ConfigLabels, Gauge> = Family::default();
        conf.get_or_create(&config).set(1);
        r.register("monitor_config_info", "How the timer threads measure", conf);
        r.register("up", "1 while the timer threads measure", m.up.clone());
        r.register_with_unit(
            "monitor_start_time",
            "When the monitor started, since the epoch",
            s.clone(),
            m.start_time.clone(),
        );
        r.register_with_unit(
            "cause",
            "With --trace: time each cause took inside the late wake-ups (those above \
             the lowest --late-above limit), from each deadline to the waking, net of \
             nested causes; the unaccounted part is its own cause",
            s,
            m.cause_seconds.clone(),
        );
        r.register(
            "cause_wakeups",
            "With --trace: late wake-ups each cause took time in (for cause=\"other\", \
             one per folded cause it took time in)",
            m.cause_wakeups.clone(),
        );
        r.register(
            "trace_wakeups_attributed",
            "With --trace: late wake-ups attributed to their causes",
            m.trace_attributed.clone(),
        );
        r.register(
            "trace_wakeups_unattributed",
            "With --trace: late wake-ups not attributed (more in one second than the \
             thread's log holds)",
            m.trace_unattributed.clone(),
        );
        r.register(
            "trace_events",
            "With --trace: kernel trace events read",
            m.trace_events.clone(),
        );
        r.register(
            "trace_events_lost",
            "With --trace: kernel trace events lost (overwritten before they were read, \
             or pushed out of the window before they were used): the causes of late \
             wake-ups then show more unaccounted time",
            m.trace_lost.clone(),
        );
        r.register(
            "trace_info",
            "Whether late wake-ups are traced to their causes: state on, off (no \
             --trace) or unavailable, and why",
            m.trace_state.clone(),
        );
        for &cpu in cpus {
            let c = cpu.to_string();
            let cl = CpuLabels { cpu: c.clone() };
            let _ = m.latency.get_or_create(&cl);
            for w in ["10s", "start"] {
                let _ = m.max.get_or_create(&MaxLabels {
                    cpu: c.clone(),
                    window: w.to_string(),
                });
            }
            for &l in limits_ns {
                let _ = m.late.get_or_create(&LateLabels {
                    cpu: c.clone(),
                    above_seconds: seconds_label(l),
                });
            }
            let _ = m.overruns.get_or_create(&cl);
            let _ = m.late_handoffs.get_or_create(&cl);
        }
        Metrics { registry: r, ..m }
    }

    /// Whether the causes are traced now (replacing what was said before).
    pub fn set_trace(&self, state: &str, reason: &str) {
        set_state(&self.trace_state, &self.trace_now, state, reason);
    }

    /// Registers the watch's metrics: `--watch-comm`'s with the per-name series at 0
    /// for `comms` (so that a quiet thread name shows zeros rather than nothing), and
    /// `--watch-cgroup`'s when `groups`. Their labels are bounded by the command line:
    /// `comm` takes the names given (at most `watched::MAX_COMMS`), never thread ids;
    /// `cgroup` at most `groups::MAX_GROUPS` groups and `dropped`; `cause` at most
    /// `watched::MAX_CAUSES` per key, plus `other` per kind and `unaccounted`
    /// (`watched` says why).
    pub fn with_watch(mut self, comms: &[String], groups: bool, threshold_ns: u64) -> Metrics {
        let r = &mut self.registry;
        if !comms.is_empty() {
            (self.watch).register(r, "watch", "--watch-comm", "the threads of each name");
        }
        if groups {
            let g = &self.groups;
            (g.watch).register(
                r,
                "watch_cgroup",
                "--watch-cgroup",
                "the threads of each cgroup",
            );
            r.register_with_unit(
                "watch_cgroup_throttled",
                "--watch-cgroup: time the group's run queues spent throttled by its CFS \
                 quota, summed over CPUs, since it was first matched (cpu.stat: v1 \
                 throttled_time, v2 throttled_usec)",
                Unit::Seconds,
                g.throttled.clone(),
            );
            r.register(
                "watch_cgroup_throttled_periods",
                "--watch-cgroup: quota periods in which the group was throttled, since it \
                 was first matched (cpu.stat nr_throttled)",
                g.throttled_periods.clone(),
            );
            r.register(
                "watch_cgroups_matched",
                "--watch-cgroup: groups the patterns match now",
                g.matched.clone(),
            );
            r.register(
                "watch_cgroups_dropped",
                "--watch-cgroup: groups matched past the cap of series, summed into \
                 cgroup=\"dropped\"",
                g.dropped.clone(),
            );
        }
        let w = &self.reader;
        let s = Unit::Seconds;
        r.register(
            "watch_events",
            "--watch-comm/--watch-cgroup: kernel trace events read (every online CPU is \
             traced)",
            w.events.clone(),
        );
        r.register(
            "watch_events_lost",
            "--watch-comm/--watch-cgroup: trace events lost, source=kernel (overwritten \
             before they were read) or reader (beyond jitterscope's bounds)",
            w.events_lost.clone(),
        );
        r.register_with_unit(
            "watch_reader_cpu",
            "--watch-comm/--watch-cgroup: CPU time of the trace reader (reading, \
             decoding, following the threads, attributing, listing the groups), on the \
             housekeeping CPU",
            s.clone(),
            w.reader_cpu.clone(),
        );
        r.register_with_unit(
            "watch_threshold",
            "--watch-comm/--watch-cgroup: wake-up delays at or above this are attributed",
            s,
            w.threshold.clone(),
        );
        r.register(
            "watch_info",
            "--watch-comm/--watch-cgroup: whether the watched threads are traced: state \
             on, unavailable (and why) or failed (the trace could no longer be read)",
            w.state.clone(),
        );
        w.threshold.set(threshold_ns as f64 / 1e9);
        for c in comms {
            self.watch.create(&CommLabels { comm: c.clone() });
        }
        for source in ["kernel", "reader"] {
            let _ = w.events_lost.get_or_create(&SourceLabels {
                source: source.into(),
            });
        }
        self
    }

    /// Registers the cgroup and pressure metrics (`monitor::cgroups`), read at each
    /// scrape, for the measured CPUs `measured`.
    pub fn with_cgroups(mut self, measured: crate::engine::cpu::CpuList) -> Metrics {
        let collector = super::cgroups::CgroupCollector::new(measured);
        self.registry.register_collector(Box::new(collector));
        self
    }

    /// The per-CPU trace series, at 0, so that a quiet CPU shows zeros once tracing runs.
    pub fn trace_cpus(&self, cpus: &[usize]) {
        for &cpu in cpus {
            let cl = CpuLabels {
                cpu: cpu.to_string(),
            };
            let _ = self.trace_attributed.get_or_create(&cl);
            let _ = self.trace_unattributed.get_or_create(&cl);
            let _ = self.trace_events.get_or_create(&cl);
            let _ = self.trace_lost.get_or_create(&cl);
        }
    }

    /// The audit's findings now: series that are gone are removed, new ones set to 1.
    pub fn set_audit(&self, findings: impl IntoIterator<Item = FindingLabels>) {
        let new: BTreeSet<FindingLabels> = findings.into_iter().collect();
        let mut now = self.audit_now.lock().unwrap_or_else(|p| p.into_inner());
        for gone in now.difference(&new) {
            self.audit.remove(gone);
        }
        for f in &new {
            self.audit.get_or_create(f).set(1);
        }
        *now = new;
        self.audit_runs.inc();
    }

    /// The exposition: OpenMetrics text when `openmetrics`, Prometheus text 0.0.4
    /// otherwise; with its content type.
    pub fn encode(&self, openmetrics: bool) -> (String, &'static str) {
        let mut out = String::with_capacity(16 * 1024);
        let done = match openmetrics {
            true => prometheus_client::encoding::text::encode(&mut out, &self.registry),
            false => prometheus_client::encoding::prometheus_text::encode(&mut out, &self.registry),
        };
        // Writing to a String cannot fail; an encoder error would be a bug in a label.
        debug_assert!(done.is_ok());
        match openmetrics {
            true => (
                out,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            ),
            false => (
                out,
                prometheus_client::encoding::prometheus_text::CONTENT_TYPE,
            ),
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// The labels of a monitor of CPU 1 at 1 ms, SCHED_FIFO 1, for tests.
    pub(in crate::app::monitor) fn config() -> ConfigLabels {
        ConfigLabels {
            policy: "fifo".into(),
            priority: "1".into(),
            interval_seconds: "0.001".into(),
            cpus: "1".into(),
        }
    }

    #[test]
    fn buckets_are_log_spaced_and_bounds_belong_to_their_bucket() {
        assert_eq!(bucket_of(1), 0);
        assert_eq!(bucket_of(1_000), 0);
        assert_eq!(bucket_of(1_001), 1);
        assert_eq!(bucket_of(100_000_000), 15);
        assert_eq!(bucket_of(100_000_001), 16);
        for w in BUCKETS_NS.windows(2) {
            assert!(w[1] / w[0] <= 5 && w[1] > w[0]);
        }
    }

    #[test]
    fn histograms_are_encoded_cumulative_with_units_in_the_names() {
        let m = Metrics::new(&[1], &[100_000], config());
        let mut h = LatencyHistogram::new();
        for v in [900, 1_500, 1_500, 150_000, 2_000_000_000] {
            h.record(v);
        }
        m.latency
            .get_or_create(&CpuLabels { cpu: "1".into() })
            .add(&h);
        let (text, ctype) = m.encode(false);
        assert!(ctype.starts_with("text/plain"));
        assert!(text.contains("# TYPE jitterscope_timer_wakeup_latency_seconds histogram"));
        assert!(
            text.contains(
                "jitterscope_timer_wakeup_latency_seconds_bucket{cpu=\"1\",le=\"1e-06\"} 1"
            ),
            "{text}"
        );
        // Cumulative: the +Inf bucket holds every value.
        assert!(
            text.contains(
                "jitterscope_timer_wakeup_latency_seconds_bucket{cpu=\"1\",le=\"+Inf\"} 5"
            ),
            "{text}"
        );
        assert!(
            text.contains("jitterscope_timer_wakeup_latency_seconds_count{cpu=\"1\"} 5"),
            "{text}"
        );
        assert!(
            text.contains(
                "jitterscope_timer_late_wakeups_total{cpu=\"1\",above_seconds=\"0.0001\"} 0"
            ),
            "{text}"
        );
        assert!(text.contains("jitterscope_up 0"));
        let b = m
            .latency
            .get_or_create(&CpuLabels { cpu: "1".into() })
            .snapshot();
        assert_eq!(b.counts[0], 1);
        assert_eq!(b.counts[1], 2);
        assert_eq!(b.counts[bucket_of(150_000)], 1);
        assert_eq!(b.counts[16], 1);
        let (om, ctype) = m.encode(true);
        assert!(ctype.starts_with("application/openmetrics-text"));
        assert!(om.ends_with("# EOF\n"));
    }

    #[test]
    fn a_finding_that_changes_replaces_its_series() {
        let m = Metrics::new(&[1], &[100_000], config());
        let f = |id: &str, sev: &str| FindingLabels {
            id: id.into(),
            severity: sev.into(),
        };
        m.set_audit([f("governor", "warn"), f("thp", "ok")]);
        m.set_audit([f("governor", "ok"), f("thp", "ok")]);
        let (text, _) = m.encode(false);
        assert!(text.contains("jitterscope_audit_finding{id=\"governor\",severity=\"ok\"} 1"));
        assert!(!text.contains("severity=\"warn\""), "{text}");
        assert!(text.contains("jitterscope_audit_runs_total 2"));
    }

    #[test]
    fn seconds_labels_are_short() {
        assert_eq!(seconds_label(100_000), "0.0001");
        assert_eq!(seconds_label(1_000_000_000), "1");
        assert_eq!(seconds_label(1_500_000), "0.0015");
    }
}
