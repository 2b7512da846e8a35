//! Producer → consumer transit latency through a ring: perf-workshop's application (Mark
//! Price's "System Jitter Utility") rebuilt.
//!
//! A producer stamps messages with the counter into a preallocated single-producer ring,
//! one every `interval_ns` on an absolute schedule, busy-waiting in between. Two
//! consumers read every message, LMAX Disruptor style, each with its own cursor: the
//! accumulator records transit time (its counter on seeing the message minus the
//! producer's stamp) and inter-message time (arrival to arrival); the journaller records
//! the same and also appends a fixed-size binary record of each message to a file, so
//! its write syscalls are the real work it does between messages. The producer never
//! overwrites a slot the slowest consumer has not read: it waits, spinning, and counts it.
//!
//! Every spin-wait polls the run's stop flag and deadline, and a role that leaves (its
//! end, a stop, a panic) releases the others: the producer publishes where it ended, and
//! a consumer that panics stops the run. Nothing in a hot loop allocates, locks or calls
//! the kernel (but the journaller's writes); each cursor has its own cache line and each
//! slot its own, so producer and consumers share no line but the one they pass.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;
use serde::{Deserialize, Serialize};

use crate::engine::clock::{self, ClockInfo, Scale};
use crate::engine::cpu::{CpuList, CpuPlan};
use crate::engine::run::{self, RunError, RunOutcome, RunPlan, ThreadSpec, Window, Worker};
use crate::engine::sched::{self, SchedRequest, ThreadCounters};
use crate::engine::tsc_sync::{self, SkewBound};
pub use crate::probes::record::{HistogramRecord, ThreadRecord};
use crate::stats::{LatencyHistogram, Summary};

/// perf-workshop's default: one message every 10 µs.
pub const DEFAULT_INTERVAL_NS: u64 = 10_000;
pub const DEFAULT_RING_SIZE: usize = 4096;
pub const DEFAULT_WARMUP: u64 = 10_000;
/// The longest interval accepted: a stop or a deadline is seen within one interval.
pub const MAX_INTERVAL_NS: u64 = 1_000_000_000;
/// The longest warm-up accepted, at the configured interval.
pub const MAX_WARMUP: Duration = Duration::from_secs(60);
/// The journaller's buffer: one write syscall per 64 KiB (2730 records).
pub const JOURNAL_BUFFER: usize = 64 * 1024;
/// One journal record: sequence, producer's stamp (counter ticks), transit (ns), each a
/// little-endian u64.
pub const JOURNAL_RECORD: usize = 24;
/// A publication later than this after its scheduled instant is late: a loop pass takes
/// tens of ns, so anything past a µs is the producer kept from its CPU or a full ring.
const LATE_SLACK_NS: u64 = 1_000;
/// perf-workshop's perturbing spinners: busy this long, then asleep that long.
const PERTURB_BUSY: Duration = Duration::from_millis(3);
const PERTURB_SLEEP: Duration = Duration::from_millis(30);
/// Time the window allows, beyond warm-up and measuring, for the consumers to drain.
const DRAIN_SLACK: Duration = Duration::from_secs(1);
/// With `-l` alone the run lasts until the count is done, within twice its nominal length
/// plus this.
const COUNT_SLACK: Duration = Duration::from_secs(10);

/// Errors of the queue probe; each names the input at fault.
#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    /// `--ring-size` is not a power of two of at least 2.
    #[error("--ring-size {0}: expected a power of two from 2 to 1048576")]
    RingSize(usize),
    /// `-i/--interval` is over a second (or zero).
    #[error("-i/--interval {0} ns: expected 1 ns to 1 s")]
    Interval(u64),
    /// The warm-up would last too long at this interval.
    #[error(
        "--warmup {warmup} at {interval_ns} ns a message would last {secs:.1} s, over the \
         60 s limit: lower --warmup or -i"
    )]
    Warmup {
        warmup: u64,
        interval_ns: u64,
        secs: f64,
    },
    /// `-D` is shorter than one interval: no message would be measured.
    #[error(
        "-D {duration:?} is shorter than the {interval_ns} ns interval: nothing would be measured"
    )]
    TooShort {
        duration: Duration,
        interval_ns: u64,
    },
    /// The journal file could not be created or opened. The I/O error is part of the
    /// message, not a `source`, so that it is printed once.
    #[error("cannot create the journal file {path}: {error}")]
    Journal {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error(transparent)]
    Run(#[from] RunError),
}

/// A validated configuration of the queue probe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueConfig {
    pub interval_ns: u64,
    pub ring_size: usize,
    /// Messages published and discarded before measuring.
    pub warmup: u64,
    /// Measured messages; the run ends after them.
    pub count: Option<u64>,
    /// How long to measure after the warm-up; `None` with a count: until it is done.
    pub duration: Option<Duration>,
    pub producer: ThreadSpec,
    pub accumulator: ThreadSpec,
    /// `None`: no journaller thread at all.
    pub journaller: Option<ThreadSpec>,
    /// Where the journal goes; `None`: a temporary file, gone at the end.
    pub journal_path: Option<PathBuf>,
    /// CPUs that get a perturbing spinner while the run lasts; empty for none.
    pub perturb: CpuList,
}

impl QueueConfig {
    /// The defaults around three roles' threads.
    pub fn new(producer: ThreadSpec, accumulator: ThreadSpec) -> QueueConfig {
        QueueConfig {
            interval_ns: DEFAULT_INTERVAL_NS,
            ring_size: DEFAULT_RING_SIZE,
            warmup: DEFAULT_WARMUP,
            count: None,
            duration: Some(Duration::from_secs(10)),
            producer,
            accumulator,
            journaller: None,
            journal_path: None,
            perturb: CpuList::default(),
        }
    }

    /// Checks what the command line cannot.
    pub fn validate(&self) -> Result<(), QueueError> {
        if !self.ring_size.is_power_of_two() || !(2..=1 << 20).contains(&self.ring_size) {
            return Err(QueueError::RingSize(self.ring_size));
        }
        if !(1..=MAX_INTERVAL_NS).contains(&self.interval_ns) {
            return Err(QueueError::Interval(self.interval_ns));
        }
        let warm = self.warmup_nominal();
        if warm > MAX_WARMUP {
            return Err(QueueError::Warmup {
                warmup: self.warmup,
                interval_ns: self.interval_ns,
                secs: warm.as_secs_f64(),
            });
        }
        match self.duration {
            Some(d) if d.as_nanos() < self.interval_ns as u128 => Err(QueueError::TooShort {
                duration: d,
                interval_ns: self.interval_ns,
            }),
            _ => Ok(()),
        }
    }

    fn warmup_nominal(&self) -> Duration {
        Duration::from_nanos(self.warmup.saturating_mul(self.interval_ns))
    }

    /// How long measuring should take: `-D`, or the count at the interval.
    pub fn nominal_measure(&self) -> Duration {
        match (self.duration, self.count) {
            (Some(d), _) => d,
            (None, Some(n)) => Duration::from_nanos(n.saturating_mul(self.interval_ns)),
            (None, None) => Duration::ZERO,
        }
    }

    /// The runner's window: a bound, not a target. The producer ends measuring on its own
    /// schedule; the window leaves room for a late warm-up and for the consumers to drain.
    pub fn window(&self) -> Duration {
        let measure = match (self.duration, self.count) {
            (Some(d), _) => d,
            (None, _) => self.nominal_measure().saturating_mul(2) + COUNT_SLACK,
        };
        let w = self.warmup_nominal().saturating_mul(2) + measure + DRAIN_SLACK;
        w.min(crate::engine::run::MAX_DURATION)
    }

    /// The threads, in role order: producer, accumulator, then the journaller if any.
    pub fn threads(&self) -> Vec<ThreadSpec> {
        let mut t = vec![self.producer, self.accumulator];
        t.extend(self.journaller);
        t
    }

    /// The run plan for these roles: the coordinator on `housekeeping`.
    pub fn plan(&self, housekeeping: CpuList, mlock: bool) -> RunPlan {
        let measured = CpuList::from_cpus(self.threads().iter().map(|t| t.cpu).collect());
        RunPlan {
            cpus: CpuPlan {
                housekeeping: housekeeping.without(&measured),
                measured,
            },
            sched: self.producer.sched,
            mlock,
            duration: self.window(),
            priospread: false,
            setup_timeout: Duration::from_secs(10),
        }
    }
}

/// Which consumer an entry describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Accumulator,
    Journaller,
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Role::Accumulator => "accumulator",
            Role::Journaller => "journaller",
        })
    }
}

/// The policy each role asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RolePolicies {
    pub producer: SchedRequest,
    pub accumulator: SchedRequest,
    pub journaller: Option<SchedRequest>,
}

/// The configuration as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueConfigRecord {
    pub interval_ns: u64,
    pub ring_size: usize,
    pub warmup: u64,
    pub count: Option<u64>,
    /// The measuring time asked for (`-D`); null with `-l` alone.
    pub duration_ns: Option<u64>,
    /// The journal kept (`--journal`); null for a temporary one or none.
    pub journal: Option<String>,
    pub perturb: bool,
    pub policies: RolePolicies,
}

/// One latency's distribution, to the 99.9999th percentile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyRecord {
    pub summary: Summary,
    /// The 99.999th percentile.
    pub p99999_ns: Option<u64>,
    /// The 99.9999th percentile.
    pub p999999_ns: Option<u64>,
    pub histogram: HistogramRecord,
}

impl LatencyRecord {
    pub fn from_hist(h: &LatencyHistogram) -> LatencyRecord {
        LatencyRecord {
            summary: h.summary(),
            p99999_ns: tail(h, 0.99999),
            p999999_ns: tail(h, 0.999999),
            histogram: HistogramRecord::from_hist(h),
        }
    }
}

/// A quantile beyond what `Summary` holds, capped at the exact max as `summary()` does
/// (the histogram gives a bucket's top edge).
pub fn tail(h: &LatencyHistogram, q: f64) -> Option<u64> {
    let max = h.max_ns()?;
    Some(h.inner().value_at_quantile(q).min(max))
}

/// What the producer did while measuring (warm-up not counted).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProducerRecord {
    pub cpu: usize,
    pub thread: ThreadRecord,
    /// Messages published after the warm-up.
    pub published: u64,
    /// Warm-up messages published.
    pub warmup_published: u64,
    /// Publications more than 1 µs after their scheduled instant (each is followed by a
    /// new schedule from then, never by a catch-up burst).
    pub late: u64,
    /// How late the latest of those was.
    pub late_max_ns: u64,
    /// Times the producer found the ring full and waited for the slowest consumer.
    pub full_ring_waits: u64,
    /// From the first measured message's scheduled instant to the end of measuring.
    pub measured_ns: u64,
}

/// The journal as written.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JournalRecord {
    /// The file kept; null for a temporary one (unlinked from the start).
    pub path: Option<String>,
    /// Records written, warm-up included.
    pub records: u64,
    pub bytes: u64,
    pub record_bytes: usize,
    pub buffer_bytes: usize,
    /// The first write error, after which nothing more was written.
    pub error: Option<String>,
}

/// One consumer's result: the probe's entry in the result file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueueEntry {
    pub role: Role,
    pub cpu: usize,
    pub producer_cpu: usize,
    pub config: QueueConfigRecord,
    pub thread: ThreadRecord,
    /// Measured messages this consumer read.
    pub messages: u64,
    /// Consumer's counter on seeing a message − the producer's stamp.
    pub transit: LatencyRecord,
    /// Arrival to arrival at this consumer.
    pub inter_message: LatencyRecord,
    /// Transits that came out negative (recorded as 0): the two counters disagree.
    pub negative_transits: u64,
    /// The offset between the producer's counter and this consumer's, measured before
    /// the run; null if it could not be measured.
    pub tsc_skew: Option<SkewBound>,
    pub producer: ProducerRecord,
    /// The journaller's file; null for the accumulator.
    pub journal: Option<JournalRecord>,
}

/// The whole probe's outcome.
pub struct QueueRun {
    pub entries: Vec<QueueEntry>,
    pub producer: ProducerRecord,
    pub outcome: RunOutcome<()>,
}

/// One ring slot, alone on its cache line: the producer writing the next slot never
/// touches the line a consumer is reading.
#[repr(align(64))]
#[derive(Default)]
struct Slot {
    seq: AtomicU64,
    stamp: AtomicU64,
}

/// The ring and its cursors, each cursor on its own line.
struct Ring {
    slots: Box<[Slot]>,
    mask: u64,
    /// Messages published so far (the next sequence).
    published: CachePadded<AtomicU64>,
    /// Where the producer ended (u64::MAX while it runs): consumers that reach it are done.
    end: CachePadded<AtomicU64>,
    /// Messages each consumer has read.
    consumed: Box<[CachePadded<AtomicU64>]>,
}

impl Ring {
    /// Every slot written once here, so that no page fault lands in the run.
    fn new(size: usize, consumers: usize) -> Ring {
        Ring {
            slots: (0..size).map(|_| Slot::default()).collect(),
            mask: size as u64 - 1,
            published: CachePadded::new(AtomicU64::new(0)),
            end: CachePadded::new(AtomicU64::new(u64::MAX)),
            consumed: (0..consumers)
                .map(|_| CachePadded::new(AtomicU64::new(0)))
                .collect(),
        }
    }

    fn size(&self) -> u64 {
        self.mask + 1
    }

    /// The slowest consumer's cursor.
    #[inline(always)]
    fn slowest(&self) -> u64 {
        (self.consumed.iter())
            .map(|c| c.load(Ordering::Acquire))
            .min()
            .unwrap_or(u64::MAX)
    }

    /// Fills slot `seq` and publishes it: the fields before the cursor's Release store.
    #[inline(always)]
    fn publish(&self, seq: u64, stamp: u64) {
        let slot = &self.slots[(seq & self.mask) as usize];
        slot.seq.store(seq, Ordering::Relaxed);
        slot.stamp.store(stamp, Ordering::Relaxed);
        self.published.store(seq + 1, Ordering::Release);
    }

    /// Slot `seq`'s (sequence, stamp); the caller has seen it published.
    #[inline(always)]
    fn read(&self, seq: u64) -> (u64, u64) {
        let slot = &self.slots[(seq & self.mask) as usize];
        (
            slot.seq.load(Ordering::Relaxed),
            slot.stamp.load(Ordering::Relaxed),
        )
    }
}

/// Publishes where the producer ended, however it ends, so that no consumer waits for
/// a message that will never come.
struct EndOnDrop<'r>(&'r Ring);
impl Drop for EndOnDrop<'_> {
    fn drop(&mut self) {
        let at = self.0.published.load(Ordering::Relaxed);
        self.0.end.store(at, Ordering::Release);
    }
}

/// Stops the run if a consumer unwinds, so that the producer does not wait on it.
struct StopIfPanicking<'w, 'g>(&'w Worker<'g>);
impl Drop for StopIfPanicking<'_, '_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.stop_all();
        }
    }
}

/// What the producer hands back.
#[derive(Default)]
struct ProducerOut {
    published: u64,
    warmup_published: u64,
    late: u64,
    late_max: u64,
    full_ring_waits: u64,
    measured_ticks: u64,
    counters: ThreadCounters,
}

/// What a consumer hands back.
struct ConsumerOut {
    transit: LatencyHistogram,
    inter: LatencyHistogram,
    messages: u64,
    negative: u64,
    counters: ThreadCounters,
    journal: Option<JournalRecord>,
}

enum RoleOut {
    Producer(ProducerOut),
    Consumer(Box<ConsumerOut>),
}

/// Where a consumer's messages go besides its histograms.
trait Sink {
    fn append(&mut self, seq: u64, stamp: u64, transit_ns: u64);
}

/// The accumulator keeps nothing.
struct Discard;
impl Sink for Discard {
    #[inline(always)]
    fn append(&mut self, _: u64, _: u64, _: u64) {}
}

/// The journaller's file behind a buffer made before the run.
struct Journal {
    out: BufWriter<File>,
    path: Option<PathBuf>,
    records: u64,
    error: Option<std::io::Error>,
}

impl Sink for Journal {
    #[inline(always)]
    fn append(&mut self, seq: u64, stamp: u64, transit_ns: u64) {
        if self.error.is_some() {
            return;
        }
        let mut rec = [0u8; JOURNAL_RECORD];
        rec[..8].copy_from_slice(&seq.to_le_bytes());
        rec[8..16].copy_from_slice(&stamp.to_le_bytes());
        rec[16..].copy_from_slice(&transit_ns.to_le_bytes());
        match self.out.write_all(&rec) {
            Ok(()) => self.records += 1,
            Err(e) => self.error = Some(e),
        }
    }
}

impl Journal {
    /// Opens the journal: `path`, truncated, or a temporary file that is unlinked at
    /// once, so that it is gone however the process ends (even killed).
    fn open(path: Option<&Path>) -> Result<Journal, QueueError> {
        let file = match path {
            Some(p) => File::create(p).map_err(|e| journal_err(p, e))?,
            None => temporary()?,
        };
        Ok(Journal {
            out: BufWriter::with_capacity(JOURNAL_BUFFER, file),
            path: path.map(Path::to_path_buf),
            records: 0,
            error: None,
        })
    }

    /// Flushes (after the run) and describes what was written.
    fn finish(mut self) -> JournalRecord {
        if self.error.is_none()
            && let Err(e) = self.out.flush()
        {
            self.error = Some(e);
        }
        JournalRecord {
            path: self.path.map(|p| p.display().to_string()),
            records: self.records,
            bytes: self.records * JOURNAL_RECORD as u64,
            record_bytes: JOURNAL_RECORD,
            buffer_bytes: JOURNAL_BUFFER,
            error: self.error.map(|e| e.to_string()),
        }
    }
}

fn journal_err(p: &Path, error: std::io::Error) -> QueueError {
    QueueError::Journal {
        path: p.to_path_buf(),
        error,
    }
}

/// A fresh file in the temporary directory, created exclusively and unlinked at once: the
/// open descriptor keeps it while the run writes, and the kernel frees it at close.
fn temporary() -> Result<File, QueueError> {
    static N: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let path = dir.join(format!(
        "jitterscope-journal.{}.{nanos}.{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
        .map_err(|e| journal_err(&path, e))?;
    std::fs::remove_file(&path).map_err(|e| journal_err(&path, e))?;
    Ok(file)
}

/// Runs the queue probe: the TSC offsets first, then producer, accumulator and journaller
/// on their CPUs, with perturbing spinners beside them if asked.
pub fn run(
    cfg: &QueueConfig,
    plan: &RunPlan,
    clock: &ClockInfo,
    stop: &AtomicBool,
) -> Result<QueueRun, QueueError> {
    cfg.validate()?;
    let scale = clock.scale;
    let skew = |c: &ThreadSpec| {
        tsc_sync::measure(
            cfg.producer.cpu,
            c.cpu,
            tsc_sync::DEFAULT_ROUNDS,
            SchedRequest::OTHER,
            scale,
        )
    };
    let skews = [
        Some(skew(&cfg.accumulator)),
        cfg.journaller.as_ref().map(skew),
    ];
    let journal = match cfg.journaller {
        Some(_) => Some(Journal::open(cfg.journal_path.as_deref())?),
        None => None,
    };
    let journal = Mutex::new(journal);
    let ring = Ring::new(cfg.ring_size, 1 + cfg.journaller.is_some() as usize);
    let threads = cfg.threads();
    let spinners_stop = AtomicBool::new(false);
    let outcome = std::thread::scope(|s| {
        for &cpu in cfg.perturb.cpus() {
            let flag = &spinners_stop;
            // A spinner that cannot start only weakens the perturbation.
            let _ = std::thread::Builder::new()
                .name(format!("perturb-cpu{cpu}"))
                .stack_size(64 * 1024)
                .spawn_scoped(s, move || perturb(cpu, flag));
        }
        let work = |w: &Worker<'_>| role(w, cfg, &ring, &journal);
        let out = run::run_threads(plan, &threads, scale, stop, work, None);
        spinners_stop.store(true, Ordering::Relaxed);
        out
    })?;
    Ok(to_run(cfg, outcome, skews, scale))
}

/// perf-workshop's perturbation: 3 ms busy, 30 ms asleep, at SCHED_OTHER on one CPU,
/// until told to stop (within one sleep).
fn perturb(cpu: usize, stop: &AtomicBool) {
    sched::block_all_signals();
    if sched::pin_to(cpu).is_err() {
        return;
    }
    while !stop.load(Ordering::Relaxed) {
        let busy_until = Instant::now() + PERTURB_BUSY;
        while Instant::now() < busy_until && !stop.load(Ordering::Relaxed) {
            std::hint::spin_loop();
        }
        std::thread::sleep(PERTURB_SLEEP);
    }
}

/// One worker's role, by its place in `cfg.threads()`.
fn role(
    w: &Worker<'_>,
    cfg: &QueueConfig,
    ring: &Ring,
    journal: &Mutex<Option<Journal>>,
) -> RoleOut {
    match w.index {
        0 => RoleOut::Producer(produce(w, cfg, ring)),
        1 => RoleOut::Consumer(Box::new(consume(w, cfg, ring, 0, Discard, |_| None))),
        _ => {
            let taken = journal.lock().unwrap_or_else(|p| p.into_inner()).take();
            let out = match taken {
                Some(j) => consume(w, cfg, ring, 1, j, |j| Some(j.finish())),
                // Only one journaller is ever configured; without its file, read the ring
                // anyway so that the producer is not held up.
                None => consume(w, cfg, ring, 1, Discard, |_| None),
            };
            RoleOut::Consumer(Box::new(out))
        }
    }
}

/// The producer's state through the run.
struct Schedule {
    interval: u64,
    slack: u64,
    /// The scheduled instant of the next publication.
    next_at: u64,
    /// The first measured message's scheduled instant (0 until then).
    t0: u64,
    measure_end: u64,
    /// Messages before measuring starts.
    warmup: u64,
    /// Messages in all (warm-up included); u64::MAX without a count.
    total: u64,
    /// How long measuring lasts, in ticks, with `-D`.
    measure: Option<u64>,
}

fn produce(w: &Worker<'_>, cfg: &QueueConfig, ring: &Ring) -> ProducerOut {
    let _end = EndOnDrop(ring);
    let scale = w.scale;
    let before = ThreadCounters::read();
    let Some(window) = w.ready_and_wait() else {
        return ProducerOut::default();
    };
    let mut out = ProducerOut::default();
    let mut s = Schedule {
        interval: scale.to_ticks(cfg.interval_ns),
        slack: scale.to_ticks(LATE_SLACK_NS.min(cfg.interval_ns / 2).max(1)),
        next_at: window.start,
        t0: 0,
        measure_end: u64::MAX,
        warmup: cfg.warmup,
        total: cfg.count.map_or(u64::MAX, |n| cfg.warmup.saturating_add(n)),
        measure: cfg
            .duration
            .map(|d| scale.to_ticks_ceil(d.as_nanos() as u64)),
    };
    let end_at = publish_loop(w, ring, &window, &mut s, &mut out);
    if s.t0 != 0 {
        out.measured_ticks = end_at.min(s.measure_end).saturating_sub(s.t0);
    }
    out.counters = ThreadCounters::read().since(&before);
    out
}

/// The producer's hot loop; returns when measuring ended (the instant the next message
/// would have been due, or when it was stopped).
#[inline(never)]
fn publish_loop(
    w: &Worker<'_>,
    ring: &Ring,
    window: &Window,
    s: &mut Schedule,
    out: &mut ProducerOut,
) -> u64 {
    let stop = w.stop_flag();
    let size = ring.size();
    let mut slowest = 0u64;
    let mut seq = 0u64;
    loop {
        if seq == s.total {
            return s.next_at;
        }
        if seq == s.warmup {
            s.t0 = s.next_at;
            s.measure_end = s.measure.map_or(u64::MAX, |m| s.t0.saturating_add(m));
        }
        if s.next_at >= s.measure_end {
            return s.next_at;
        }
        let measuring = seq >= s.warmup;
        // Room first, while there is time before the schedule: the slowest consumer must
        // have read the slot this message overwrites.
        if seq >= slowest + size {
            slowest = ring.slowest();
            if seq >= slowest + size {
                out.full_ring_waits += measuring as u64;
                match wait_for_room(ring, seq, size, stop, window.deadline) {
                    Some(v) => slowest = v,
                    None => return clock::now(),
                }
            }
        }
        let t = loop {
            let t = clock::now();
            if t >= s.next_at {
                break t;
            }
            if stop.load(Ordering::Relaxed) {
                return t;
            }
            std::hint::spin_loop();
        };
        if t >= window.deadline || stop.load(Ordering::Relaxed) {
            return t;
        }
        ring.publish(seq, t);
        let late = t - s.next_at;
        if late > s.slack {
            // Late: published at once, and the schedule starts again from now, so that
            // a stall is never followed by a burst.
            out.late += measuring as u64;
            out.late_max = out.late_max.max(late * measuring as u64);
            s.next_at = t + s.interval;
        } else {
            s.next_at += s.interval;
        }
        match measuring {
            true => out.published += 1,
            false => out.warmup_published += 1,
        }
        seq += 1;
    }
}

/// Spins until the slowest consumer has read slot `seq - size`; `None` on a stop or the
/// deadline.
#[cold]
fn wait_for_room(
    ring: &Ring,
    seq: u64,
    size: u64,
    stop: &AtomicBool,
    deadline: u64,
) -> Option<u64> {
    loop {
        std::hint::spin_loop();
        let slowest = ring.slowest();
        if seq < slowest + size {
            return Some(slowest);
        }
        if stop.load(Ordering::Relaxed) || clock::now() >= deadline {
            return None;
        }
    }
}

/// A consumer: reads every message, records its transit and inter-message time once the
/// warm-up is past, and hands each to `sink`.
fn consume<S: Sink>(
    w: &Worker<'_>,
    cfg: &QueueConfig,
    ring: &Ring,
    me: usize,
    mut sink: S,
    finish: impl FnOnce(S) -> Option<JournalRecord>,
) -> ConsumerOut {
    let _guard = StopIfPanicking(w);
    let mut out = ConsumerOut {
        transit: LatencyHistogram::new(),
        inter: LatencyHistogram::new(),
        messages: 0,
        negative: 0,
        counters: ThreadCounters::default(),
        journal: None,
    };
    let before = ThreadCounters::read();
    if let Some(window) = w.ready_and_wait() {
        read_loop(w, ring, me, &window, cfg.warmup, &mut sink, &mut out);
    }
    out.counters = ThreadCounters::read().since(&before);
    out.journal = finish(sink);
    out
}

/// The consumer's hot loop.
#[inline(never)]
fn read_loop<S: Sink>(
    w: &Worker<'_>,
    ring: &Ring,
    me: usize,
    window: &Window,
    warmup: u64,
    sink: &mut S,
    out: &mut ConsumerOut,
) {
    let (stop, scale) = (w.stop_flag(), w.scale);
    let cursor = &ring.consumed[me];
    let (mut next, mut available, mut prev) = (0u64, 0u64, 0u64);
    loop {
        if next == available {
            available = ring.published.load(Ordering::Acquire);
            if next == available {
                if next >= ring.end.load(Ordering::Acquire)
                    || stop.load(Ordering::Relaxed)
                    || clock::now() >= window.deadline
                {
                    return;
                }
                std::hint::spin_loop();
                continue;
            }
        }
        // Ordered: the counter must not be read before the cursor that showed the message.
        let t = clock::now_ordered();
        let (seq, stamp) = ring.read(next);
        cursor.store(next + 1, Ordering::Release);
        let transit = match t.checked_sub(stamp) {
            Some(d) => scale.to_ns(d),
            None => {
                out.negative += (next >= warmup) as u64;
                0
            }
        };
        if next >= warmup {
            out.transit.record(transit);
            // The first measured message has an arrival before it unless there was no
            // warm-up at all.
            if next > 0 {
                out.inter.record(scale.to_ns(t.saturating_sub(prev)));
            }
            out.messages += 1;
        }
        prev = t;
        sink.append(seq, stamp, transit);
        next += 1;
        if stop.load(Ordering::Relaxed) {
            return;
        }
    }
}

/// The entries, one per consumer, from the workers' outcomes.
fn to_run(
    cfg: &QueueConfig,
    outcome: RunOutcome<RoleOut>,
    skews: [Option<Option<SkewBound>>; 2],
    scale: Scale,
) -> QueueRun {
    let mut producer = None;
    let mut consumers = Vec::new();
    for (index, w) in outcome.workers.iter().enumerate() {
        match &w.value {
            RoleOut::Producer(p) => producer = Some(producer_record(w, p, scale)),
            RoleOut::Consumer(c) => consumers.push((index, w, c)),
        }
    }
    // The runner hands back every thread it was given, the producer first.
    let producer = producer.unwrap_or_else(|| idle_producer(cfg));
    let record = config_record(cfg);
    let entries = consumers
        .into_iter()
        .map(|(index, w, c)| QueueEntry {
            role: match index {
                1 => Role::Accumulator,
                _ => Role::Journaller,
            },
            cpu: w.cpu,
            producer_cpu: cfg.producer.cpu,
            config: record.clone(),
            thread: ThreadRecord::from_worker(w, &c.counters),
            messages: c.messages,
            transit: LatencyRecord::from_hist(&c.transit),
            inter_message: LatencyRecord::from_hist(&c.inter),
            negative_transits: c.negative,
            tsc_skew: skews.get(index - 1).copied().flatten().flatten(),
            producer: producer.clone(),
            journal: c.journal.clone(),
        })
        .collect();
    QueueRun {
        entries,
        producer,
        outcome: outcome.without_values(),
    }
}

/// The record of a producer that never ran (kept for completeness: the runner always
/// hands the producer back).
fn idle_producer(cfg: &QueueConfig) -> ProducerRecord {
    ProducerRecord {
        cpu: cfg.producer.cpu,
        thread: ThreadRecord {
            policy: cfg.producer.sched.policy,
            priority: cfg.producer.sched.priority,
            sched_refused: None,
            involuntary_switches: 0,
            voluntary_switches: 0,
            migrations: None,
            tid: None,
        },
        published: 0,
        warmup_published: 0,
        late: 0,
        late_max_ns: 0,
        full_ring_waits: 0,
        measured_ns: 0,
    }
}

fn producer_record(
    w: &run::WorkerOutcome<RoleOut>,
    p: &ProducerOut,
    scale: Scale,
) -> ProducerRecord {
    ProducerRecord {
        cpu: w.cpu,
        thread: ThreadRecord::from_worker(w, &p.counters),
        published: p.published,
        warmup_published: p.warmup_published,
        late: p.late,
        late_max_ns: scale.to_ns(p.late_max),
        full_ring_waits: p.full_ring_waits,
        measured_ns: scale.to_ns(p.measured_ticks),
    }
}

fn config_record(cfg: &QueueConfig) -> QueueConfigRecord {
    QueueConfigRecord {
        interval_ns: cfg.interval_ns,
        ring_size: cfg.ring_size,
        warmup: cfg.warmup,
        count: cfg.count,
        duration_ns: cfg.duration.map(|d| d.as_nanos() as u64),
        journal: (cfg.journal_path.as_ref()).map(|p| p.display().to_string()),
        perturb: !cfg.perturb.is_empty(),
        policies: RolePolicies {
            producer: cfg.producer.sched,
            accumulator: cfg.accumulator.sched,
            journaller: cfg.journaller.map(|j| j.sched),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::cpu::CpuUniverse;

    fn spec(cpu: usize) -> ThreadSpec {
        ThreadSpec {
            cpu,
            sched: SchedRequest::OTHER,
        }
    }

    /// Two CPUs when there are, else one for everything.
    fn cpus() -> (usize, usize) {
        let u = CpuUniverse::detect().unwrap().usable();
        let c = u.cpus();
        (c[0], *c.last().unwrap())
    }

    /// Runs `cfg` to its count, checking that it ends by itself, promptly.
    fn run_to_count(cfg: &QueueConfig) -> QueueRun {
        let (clock, _) = ClockInfo::detect();
        let plan = cfg.plan(CpuList::default(), false);
        let t0 = Instant::now();
        let r = run(cfg, &plan, &clock, &AtomicBool::new(false)).unwrap();
        assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
        assert!(!r.outcome.interrupted);
        assert_eq!(r.producer.published, cfg.count.unwrap());
        assert_eq!(r.producer.warmup_published, cfg.warmup);
        r
    }

    #[test]
    fn a_count_ends_the_run_with_exactly_that_many_messages_through_a_tiny_ring() {
        let (a, b) = cpus();
        let mut cfg = QueueConfig::new(spec(a), spec(b));
        // A ring of 4 and a 1 µs interval: the producer runs into the consumer's heels.
        (cfg.ring_size, cfg.interval_ns, cfg.warmup) = (4, 1_000, 10);
        (cfg.count, cfg.duration) = (Some(20_000), None);
        let r = run_to_count(&cfg);
        assert_eq!(r.entries.len(), 1);
        assert_eq!(r.entries[0].messages, 20_000);
        assert_eq!(r.entries[0].transit.summary.count, 20_000);
        assert_eq!(r.entries[0].inter_message.summary.count, 20_000);
    }

    #[test]
    fn the_journaller_reads_every_message_and_writes_each_record() {
        let (a, b) = cpus();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.bin");
        let mut cfg = QueueConfig::new(spec(a), spec(b));
        // Both consumers on one CPU time-slice; the default ring absorbs a slice's backlog.
        cfg.journaller = Some(spec(b));
        cfg.journal_path = Some(path.clone());
        (cfg.warmup, cfg.count, cfg.duration) = (100, Some(3_000), None);
        let r = run_to_count(&cfg);
        assert_eq!(r.entries.len(), 2);
        for e in &r.entries {
            assert_eq!(e.messages, 3_000, "{}", e.role);
            assert_eq!(e.transit.summary.count, 3_000);
        }
        assert_eq!(r.entries[1].role, Role::Journaller);
        let j = r.entries[1]
            .journal
            .as_ref()
            .expect("the journaller's file");
        assert_eq!((j.records, j.error.as_deref()), (3_100, None));
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes.len(), 3_100 * JOURNAL_RECORD);
        // Records in order, sequence first, then a stamp that never goes backwards.
        let mut last_stamp = 0;
        for (i, rec) in bytes.chunks(JOURNAL_RECORD).enumerate() {
            let word = |k: usize| u64::from_le_bytes(rec[k * 8..k * 8 + 8].try_into().unwrap());
            assert_eq!(word(0), i as u64);
            assert!(word(1) > last_stamp);
            last_stamp = word(1);
        }
    }

    #[test]
    fn a_stop_ends_a_run_through_a_two_slot_ring_mid_way() {
        let (a, b) = cpus();
        let mut cfg = QueueConfig::new(spec(a), spec(b));
        (cfg.ring_size, cfg.warmup) = (2, 0);
        let (clock, _) = ClockInfo::detect();
        let plan = cfg.plan(CpuList::default(), false);
        let stop = AtomicBool::new(false);
        let t0 = Instant::now();
        let r = std::thread::scope(|s| {
            // A second before the stop: beside a build and the other spinning tests of
            // this binary, 300 ms once passed before the producer published anything.
            s.spawn(|| {
                std::thread::sleep(Duration::from_secs(1));
                stop.store(true, Ordering::Relaxed);
            });
            run(&cfg, &plan, &clock, &stop).unwrap()
        });
        assert!(r.outcome.interrupted);
        assert!(t0.elapsed() < Duration::from_secs(4), "{:?}", t0.elapsed());
        assert!(r.producer.published > 0);
        let e = &r.entries[0];
        assert!(
            e.messages + 2 >= r.producer.published,
            "{} of {}",
            e.messages,
            r.producer.published
        );
    }

    #[test]
    fn the_temporary_journal_leaves_no_file() {
        let before = journal_files();
        let j = Journal::open(None).unwrap();
        assert_eq!(journal_files(), before, "unlinked at once");
        let rec = j.finish();
        assert_eq!(rec.path, None);
    }

    fn journal_files() -> usize {
        std::fs::read_dir(std::env::temp_dir())
            .unwrap()
            .filter_map(Result::ok)
            .filter(|e| {
                let name = e.file_name().to_string_lossy().to_string();
                name.starts_with(&format!("jitterscope-journal.{}.", std::process::id()))
            })
            .count()
    }

    #[test]
    fn tails_are_capped_at_the_exact_max() {
        let mut h = LatencyHistogram::new();
        for v in 1..=1_000_000u64 {
            h.record(v);
        }
        h.record(123_456_789);
        assert!(tail(&h, 0.99999).unwrap() >= 999_000);
        assert_eq!(tail(&h, 1.0), Some(123_456_789));
        assert_eq!(tail(&LatencyHistogram::new(), 0.5), None);
    }

    #[test]
    fn bad_configurations_are_refused_with_their_flag() {
        let mut cfg = QueueConfig::new(spec(0), spec(0));
        cfg.ring_size = 1000;
        assert!(
            cfg.validate()
                .unwrap_err()
                .to_string()
                .contains("--ring-size 1000")
        );
        cfg.ring_size = 8;
        cfg.duration = Some(Duration::from_nanos(5_000));
        assert!(cfg.validate().unwrap_err().to_string().contains("shorter"));
        cfg.duration = None;
        (cfg.warmup, cfg.interval_ns) = (1_000_000, 1_000_000);
        assert!(cfg.validate().unwrap_err().to_string().contains("--warmup"));
    }
}
