//! Execution-time jitter of one fixed action: the Ultra Messaging jitter tools' job
//! (jtr_null, jtr_sock).
//!
//! A pinned thread times the action N times between fenced counter reads, with a busy
//! pause between samples, and records every sample. Each sample includes the timing's
//! own cost (shown in the header), as jtr's do; `--baseline` pairs each run with a null
//! loop calibrated to the action's mean sample time, which carries the same cost, so the
//! two distributions compare like for like: what the action adds to the system's own
//! jitter.
//!
//! `udp-send` sends to a loopback sink the tool opens itself unless a destination is
//! given: a non-loopback destination is never a default. The sink runs on the
//! coordinator's CPUs and counts what arrives, so the result says whether every datagram
//! did.

use std::hint::black_box;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::engine::clock::{self, ClockInfo, Scale};
use crate::engine::cpu::CpuList;
use crate::engine::ipc::PthreadCond;
use crate::engine::run::{self, RunError, RunOutcome, RunPlan, ThreadSpec, Worker};
use crate::engine::sched::{self, ThreadCounters};
use crate::probes::record::{HistogramRecord, ThreadRecord};
use crate::probes::syscalls::Call;
use crate::stats::{LatencyHistogram, Summary};

/// The sink gives up waiting for stragglers after this long without one.
const SINK_IDLE: Duration = Duration::from_millis(300);
/// The receive buffer asked for, so that the sink never drops a burst.
const SINK_BUFFER: usize = 16 << 20;

/// What to time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// A busy loop of this many iterations.
    Loop(u64),
    /// Copy this many bytes within a buffer twice as large (oslat's workload).
    Memmove(usize),
    /// One call from `syscalls`' catalogue.
    Syscall(Call),
    /// One sendto() of this many bytes.
    UdpSend(usize),
}

impl Action {
    /// Parses `--action`: loop:N, memmove:SIZE, syscall:NAME or udp-send:SIZE.
    pub fn parse(text: &str) -> Result<Action, String> {
        let (kind, arg) = text.split_once(':').ok_or_else(|| {
            format!(
                "'{text}' is not an action; expected loop:N, memmove:SIZE, syscall:NAME or \
                 udp-send:SIZE"
            )
        })?;
        match kind {
            "loop" => match arg.parse::<u64>() {
                Ok(n) if (1..=1_000_000_000).contains(&n) => Ok(Action::Loop(n)),
                _ => Err(format!(
                    "loop:{arg}: expected a number of iterations from 1 to 1000000000"
                )),
            },
            "memmove" => parse_size(arg, 1 << 30).map(Action::Memmove),
            "syscall" => Call::by_name(arg).map(Action::Syscall).ok_or_else(|| {
                format!("syscall:{arg}: unknown call; `jitterscope syscalls --list` names them")
            }),
            "udp-send" => parse_size(arg, 65_507).map(Action::UdpSend),
            _ => Err(format!(
                "unknown action '{kind}'; expected loop, memmove, syscall or udp-send"
            )),
        }
    }
}

/// A size in bytes: a number with an optional K, M or G (powers of 1024).
fn parse_size(s: &str, max: usize) -> Result<usize, String> {
    let t = s.trim();
    let (num, mult) = match t.char_indices().last() {
        Some((i, 'K' | 'k')) => (&t[..i], 1 << 10),
        Some((i, 'M' | 'm')) => (&t[..i], 1 << 20),
        Some((i, 'G' | 'g')) => (&t[..i], 1 << 30),
        _ => (t, 1),
    };
    match num.parse::<usize>().ok().and_then(|n| n.checked_mul(mult)) {
        Some(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(format!(
            "'{s}' is not a size from 1 to {max} bytes (a number, or with K, M or G)"
        )),
    }
}

impl std::fmt::Display for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Action::Loop(n) => write!(f, "loop:{n}"),
            Action::Memmove(n) => write!(f, "memmove:{n}"),
            Action::Syscall(c) => write!(f, "syscall:{c}"),
            Action::UdpSend(n) => write!(f, "udp-send:{n}"),
        }
    }
}

/// A validated configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkConfig {
    pub action: Action,
    /// For `loop`: calibrate the iterations to this many ns per sample instead.
    pub loop_ns: Option<u64>,
    pub samples: u64,
    pub runs: u32,
    pub warmup: u64,
    pub pause_ns: u64,
    pub baseline: bool,
    /// Where `udp-send` sends, or `None` for the tool's own loopback sink.
    pub udp_dest: Option<SocketAddr>,
    /// The interface address multicast leaves from, and the TTL.
    pub multicast_if: Option<Ipv4Addr>,
    pub ttl: u32,
}

/// Action or its paired null loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Action,
    Baseline,
}

/// The configuration as recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkConfigRecord {
    pub samples: u64,
    pub runs: u32,
    pub warmup: u64,
    pub pause_ns: u64,
    pub baseline: bool,
    pub loop_ns: Option<u64>,
    pub policy: crate::engine::sched::Policy,
    pub priority: u8,
}

/// What every sample includes besides the action, measured before the runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct TimingCosts {
    /// The median of an empty timed section (two fenced counter reads): part of every
    /// sample.
    pub overhead_ns: f64,
    /// One rdtsc, back to back.
    pub rdtsc_ns: f64,
    /// One clock_gettime(CLOCK_MONOTONIC) through the vDSO, back to back.
    pub clock_gettime_ns: f64,
    /// One iteration of the busy loop.
    pub loop_iteration_ns: f64,
}

/// What happened to the datagrams of a `udp-send` run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UdpRecord {
    pub dest: String,
    /// The tool's own loopback sink (rather than a destination given with --dest).
    pub loopback_sink: bool,
    /// Successful sendto() calls, warm-up included.
    pub sent: u64,
    pub send_errors: u64,
    /// Datagrams the sink received (only with the loopback sink).
    pub received: Option<u64>,
}

/// One run of the action, or of its baseline: the probe's entry in the result file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkEntry {
    /// The action as given, e.g. `loop:100`, or `loop:N` for a baseline.
    pub action: String,
    pub role: Role,
    /// Which run (1 is the first).
    pub run: u32,
    pub cpu: usize,
    pub config: WorkConfigRecord,
    pub thread: ThreadRecord,
    /// For loops and baselines: the loop's iterations.
    pub loop_iterations: Option<u64>,
    pub samples: u64,
    /// Every sample: the action plus `timing.overhead_ns`.
    pub summary: Summary,
    pub histogram: HistogramRecord,
    pub timing: TimingCosts,
    /// On the last action entry of a `udp-send` run.
    pub udp: Option<UdpRecord>,
}

/// The whole probe's outcome.
pub struct WorkRun {
    pub entries: Vec<WorkEntry>,
    pub outcome: RunOutcome<()>,
}

/// Errors of a work run.
#[derive(Debug, thiserror::Error)]
pub enum WorkError {
    #[error("udp-send: {0}")]
    Udp(std::io::Error),
    #[error(transparent)]
    Run(#[from] RunError),
}

/// Runs `cfg.runs` runs on `plan`'s one measured CPU; the sink (for `udp-send` without a
/// destination) runs on `sink_cpus`.
pub fn run(
    cfg: &WorkConfig,
    plan: &RunPlan,
    clock: &ClockInfo,
    sink_cpus: &CpuList,
    stop: &AtomicBool,
) -> Result<WorkRun, WorkError> {
    let sink = match (&cfg.action, cfg.udp_dest) {
        (Action::UdpSend(_), None) => Some(Sink::open().map_err(WorkError::Udp)?),
        _ => None,
    };
    let target = match (&cfg.action, &sink) {
        (Action::UdpSend(size), _) => {
            let dest = sink.as_ref().map_or(cfg.udp_dest, |s| Some(s.addr));
            Some(
                UdpTarget::open(*size, dest.expect("a destination"), cfg)
                    .map_err(WorkError::Udp)?,
            )
        }
        _ => None,
    };
    let thread = [ThreadSpec {
        cpu: plan.cpus.measured.first().unwrap_or(0),
        sched: plan.sched,
    }];
    let sink_done = AtomicBool::new(false);
    let (outcome, received) = std::thread::scope(|s| {
        let counter = sink.as_ref().map(|sink| {
            s.spawn(|| {
                let _ = sched::set_affinity(sink_cpus);
                sink.drain(&sink_done)
            })
        });
        let outcome = run::run_threads(
            plan,
            &thread,
            clock.scale,
            stop,
            |w| measure(w, cfg, target.as_ref()),
            None,
        );
        // Let the sink catch up with what is still in flight, then stop it.
        if let (Some(sink), Some(t)) = (&sink, &target) {
            sink.wait_for(t.sent.load(Ordering::Relaxed));
        }
        sink_done.store(true, Ordering::Relaxed);
        (outcome, counter.map(|h| h.join().unwrap_or(0)))
    });
    let outcome = outcome?;
    let mut entries: Vec<WorkEntry> = outcome
        .workers
        .iter()
        .flat_map(|w| to_entries(cfg, w))
        .collect();
    if let Some(t) = &target
        && let Some(last) = entries.iter_mut().rev().find(|e| e.role == Role::Action)
    {
        last.udp = Some(UdpRecord {
            dest: t.dest.to_string(),
            loopback_sink: sink.is_some(),
            sent: t.sent.load(Ordering::Relaxed),
            send_errors: t.errors.load(Ordering::Relaxed),
            received,
        });
    }
    Ok(WorkRun {
        entries,
        outcome: outcome.without_values(),
    })
}

/// The tool's own loopback receiver.
struct Sink {
    socket: UdpSocket,
    addr: SocketAddr,
    received: AtomicU64,
}

impl Sink {
    fn open() -> std::io::Result<Sink> {
        let socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0))?;
        // As large a buffer as we may have: SO_RCVBUFFORCE as root, else up to rmem_max.
        if rustix::net::sockopt::set_socket_recv_buffer_size_force(&socket, SINK_BUFFER).is_err() {
            let _ = rustix::net::sockopt::set_socket_recv_buffer_size(&socket, SINK_BUFFER);
        }
        socket.set_read_timeout(Some(Duration::from_millis(20)))?;
        let addr = socket.local_addr()?;
        Ok(Sink {
            socket,
            addr,
            received: AtomicU64::new(0),
        })
    }

    /// Counts datagrams until `done`.
    fn drain(&self, done: &AtomicBool) -> u64 {
        let mut buf = vec![0u8; 65_536];
        while !done.load(Ordering::Relaxed) {
            if self.socket.recv(&mut buf).is_ok() {
                self.received.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.received.load(Ordering::Relaxed)
    }

    /// Waits until `sent` datagrams arrived, or none came for `SINK_IDLE`.
    fn wait_for(&self, sent: u64) {
        let mut last = (self.received.load(Ordering::Relaxed), Instant::now());
        loop {
            let now = self.received.load(Ordering::Relaxed);
            if now >= sent || last.1.elapsed() > SINK_IDLE {
                return;
            }
            if now != last.0 {
                last = (now, Instant::now());
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

/// The sending side of `udp-send`.
struct UdpTarget {
    socket: UdpSocket,
    dest: SocketAddr,
    payload: Vec<u8>,
    sent: AtomicU64,
    errors: AtomicU64,
}

impl UdpTarget {
    fn open(size: usize, dest: SocketAddr, cfg: &WorkConfig) -> std::io::Result<UdpTarget> {
        let socket = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0))?;
        if let Some(iface) = cfg.multicast_if {
            socket.set_multicast_ttl_v4(cfg.ttl)?;
            rustix::net::sockopt::set_ip_multicast_if(&socket, &iface)?;
        }
        Ok(UdpTarget {
            socket,
            dest,
            payload: vec![0x5a; size],
            sent: AtomicU64::new(0),
            errors: AtomicU64::new(0),
        })
    }

    #[inline(always)]
    fn send(&self) {
        // Counted on the measuring thread's own lines: nobody else writes them.
        match self.socket.send_to(&self.payload, self.dest) {
            Ok(_) => self.sent.fetch_add(1, Ordering::Relaxed),
            Err(_) => self.errors.fetch_add(1, Ordering::Relaxed),
        };
    }
}

/// The busy loop: `n` iterations the compiler must keep.
#[inline(never)]
pub fn busy_loop(n: u64) -> u64 {
    let mut x = 0u64;
    for i in 0..n {
        x = black_box(x.wrapping_add(i));
    }
    x
}

/// What the measuring thread hands back.
struct Measured {
    costs: TimingCosts,
    /// (role, run, loop iterations, histogram), in order.
    runs: Vec<(Role, u32, Option<u64>, LatencyHistogram)>,
    counters: ThreadCounters,
}

/// Everything an action needs, made before measuring.
struct Prepared<'a> {
    action: Action,
    buffer: Vec<u8>,
    cond: Option<PthreadCond>,
    udp: Option<&'a UdpTarget>,
}

impl Prepared<'_> {
    #[inline(always)]
    fn run(&mut self) {
        match &self.action {
            Action::Loop(n) => {
                black_box(busy_loop(*n));
            }
            Action::Memmove(n) => {
                self.buffer.copy_within(..*n, *n);
                black_box(&self.buffer);
            }
            Action::Syscall(c) => {
                if let Some(cond) = &self.cond {
                    c.run_once(cond);
                }
            }
            Action::UdpSend(_) => {
                if let Some(t) = self.udp {
                    t.send();
                }
            }
        }
    }
}

fn measure(w: &Worker<'_>, cfg: &WorkConfig, udp: Option<&UdpTarget>) -> Measured {
    // Spin first, as c2c preheats its cores: a vCPU that was idle may run at a lower
    // clock for a few ms, and a calibration made then comes out short once it is warm.
    clock::spin_for(w.scale.to_ticks(PREHEAT.as_nanos() as u64));
    let costs = timing_costs(w.scale);
    let action = match (&cfg.action, cfg.loop_ns) {
        (Action::Loop(_), Some(ns)) => {
            let pause = w.scale.to_ticks(cfg.pause_ns);
            Action::Loop(
                calibrate_loop(ns as f64, &costs, w.scale, pause, w.stop_flag()).unwrap_or(1),
            )
        }
        (a, _) => a.clone(),
    };
    // The call's name promises a 1 ns timer slack, as `syscalls` gives it.
    let _slack = match action {
        Action::Syscall(Call::Nanosleep0Slack1) => {
            crate::engine::calls::TimerSlackGuard::set(1).ok()
        }
        _ => None,
    };
    let mut prepared = Prepared {
        buffer: match action {
            Action::Memmove(n) => vec![1u8; 2 * n],
            _ => Vec::new(),
        },
        action,
        cond: PthreadCond::new().ok(),
        udp,
    };
    let roles = if cfg.baseline { 2 } else { 1 };
    let mut hists: Vec<LatencyHistogram> = (0..cfg.runs * roles)
        .map(|_| LatencyHistogram::new())
        .collect();
    // Warm-up samples go here and are forgotten.
    let mut warm = LatencyHistogram::new();
    let before = ThreadCounters::read();
    let mut runs = Vec::with_capacity(hists.len());
    if w.ready_and_wait().is_some() {
        let pause = w.scale.to_ticks(cfg.pause_ns);
        let mut hist_iter = hists.iter_mut();
        for run in 1..=cfg.runs {
            if w.stop_flag().load(Ordering::Relaxed) {
                break;
            }
            let Some(h) = hist_iter.next() else { break };
            sample(w, &mut || prepared.run(), cfg.warmup, pause, &mut warm);
            let n = sample(w, &mut || prepared.run(), cfg.samples, pause, h);
            let iterations = match prepared.action {
                Action::Loop(n) => Some(n),
                _ => None,
            };
            runs.push((Role::Action, run, iterations, n));
            if cfg.baseline {
                // jtr's pairing: a null loop whose typical sample is the action's mean.
                let mean = h.summary().mean_ns.unwrap_or(0.0) - costs.overhead_ns;
                let Some(iters) = calibrate_loop(mean, &costs, w.scale, pause, w.stop_flag())
                else {
                    break;
                };
                let Some(b) = hist_iter.next() else { break };
                let mut null = || {
                    black_box(busy_loop(iters));
                };
                sample(w, &mut null, cfg.warmup, pause, &mut warm);
                let m = sample(w, &mut null, cfg.samples, pause, b);
                runs.push((Role::Baseline, run, Some(iters), m));
            }
        }
    }
    let counters = ThreadCounters::read().since(&before);
    let runs = runs
        .into_iter()
        .zip(hists)
        .map(|((role, run, iters, _), h)| (role, run, iters, h))
        .collect();
    Measured {
        costs,
        runs,
        counters,
    }
}

/// Times `samples` runs of `action`, a busy pause before each: the hot loop.
#[inline(never)]
fn sample(
    w: &Worker<'_>,
    action: &mut dyn FnMut(),
    samples: u64,
    pause: u64,
    hist: &mut LatencyHistogram,
) -> u64 {
    let scale = w.scale;
    let stop = w.stop_flag();
    for i in 0..samples {
        clock::spin_for(pause);
        let t0 = clock::now_ordered();
        action();
        let t1 = clock::now_ordered();
        hist.record(scale.to_ns(t1 - t0));
        if stop.load(Ordering::Relaxed) {
            return i + 1;
        }
    }
    samples
}

/// How many busy-loop iterations take `ns`, by the per-iteration estimate.
fn iterations_for(ns: f64, costs: &TimingCosts) -> u64 {
    (ns / costs.loop_iteration_ns.max(0.01)).round().max(1.0) as u64
}

/// How long the measuring thread spins before it calibrates anything.
const PREHEAT: Duration = Duration::from_millis(50);

/// Calibration samples per step, at most.
const CALIBRATION_SAMPLES: usize = 2_001;
/// Calibration samples per step, at least.
const CALIBRATION_MIN_SAMPLES: usize = 5;
/// What one calibration step may take: a long action calibrates on fewer samples.
const CALIBRATION_STEP_NS: f64 = 200e6;

/// The iterations whose timed median, less the timing's own cost, is `ns`: the estimate,
/// corrected three times by measuring it the way the samples are measured (a short loop
/// costs more per iteration than a long one: its call and exit are a larger share). The
/// median, not the mean: one interruption in the calibration must not move it. Each
/// calibration sample follows the same busy pause as a real one (`pause` ticks): what
/// runs just before the loop changes its speed. Bounded in time, and `None` when stopped.
fn calibrate_loop(
    ns: f64,
    costs: &TimingCosts,
    scale: Scale,
    pause: u64,
    stop: &AtomicBool,
) -> Option<u64> {
    let mut n = iterations_for(ns, costs);
    let samples = ((CALIBRATION_STEP_NS / ns.max(1.0)) as usize)
        .clamp(CALIBRATION_MIN_SAMPLES, CALIBRATION_SAMPLES);
    let mut times = vec![0u64; samples];
    for _ in 0..3 {
        for t in times.iter_mut() {
            if stop.load(Ordering::Relaxed) {
                return None;
            }
            clock::spin_for(pause);
            let t0 = clock::now_ordered();
            black_box(busy_loop(n));
            *t = clock::now_ordered() - t0;
        }
        times.sort_unstable();
        let median = scale.to_ns(times[samples / 2]) as f64 - costs.overhead_ns;
        if median <= 0.0 {
            break;
        }
        n = ((n as f64) * ns / median).round().max(1.0) as u64;
    }
    Some(n)
}

/// The timing's own cost, an rdtsc, a clock_gettime, and one loop iteration.
fn timing_costs(scale: Scale) -> TimingCosts {
    let median = |f: &mut dyn FnMut() -> u64| -> u64 {
        let mut v: Vec<u64> = (0..1001).map(|_| f()).collect();
        v.sort_unstable();
        v[v.len() / 2]
    };
    let ns = |ticks: f64| ticks * scale.to_ns(1 << 20) as f64 / (1u64 << 20) as f64;
    let overhead = median(&mut || {
        let t0 = clock::now_ordered();
        clock::now_ordered() - t0
    });
    let per = |f: &mut dyn FnMut(), n: u64| -> f64 {
        let t = median(&mut || {
            let t0 = clock::now_ordered();
            for _ in 0..n {
                f();
            }
            clock::now_ordered() - t0
        });
        ns(t.saturating_sub(overhead) as f64) / n as f64
    };
    TimingCosts {
        overhead_ns: ns(overhead as f64),
        rdtsc_ns: per(
            &mut || {
                black_box(clock::now());
            },
            100,
        ),
        clock_gettime_ns: per(
            &mut || {
                black_box(clock::monotonic_ns());
            },
            100,
        ),
        loop_iteration_ns: per(
            &mut || {
                black_box(busy_loop(1000));
            },
            1,
        ) / 1000.0,
    }
}

fn to_entries(cfg: &WorkConfig, w: &run::WorkerOutcome<Measured>) -> Vec<WorkEntry> {
    let m = &w.value;
    let thread = ThreadRecord::from_worker(w, &m.counters);
    m.runs
        .iter()
        .map(|(role, run, iters, h)| WorkEntry {
            action: match (role, &cfg.action, cfg.loop_ns) {
                (Role::Action, Action::Loop(_), None) | (Role::Action, Action::UdpSend(_) | Action::Memmove(_) | Action::Syscall(_), _) => cfg.action.to_string(),
                // A calibrated loop and a baseline are named by the iterations they ran.
                _ => format!("loop:{}", iters.unwrap_or(0)),
            },
            role: *role,
            run: *run,
            cpu: w.cpu,
            config: WorkConfigRecord {
                samples: cfg.samples,
                runs: cfg.runs,
                warmup: cfg.warmup,
                pause_ns: cfg.pause_ns,
                baseline: cfg.baseline,
                loop_ns: cfg.loop_ns,
                policy: w.sched.policy,
                priority: w.sched.priority,
            },
            thread: thread.clone(),
            loop_iterations: *iters,
            samples: h.count(),
            summary: h.summary(),
            histogram: HistogramRecord::from_hist(h),
            timing: m.costs,
            udp: None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actions_parse_strictly() {
        assert_eq!(Action::parse("loop:100").unwrap(), Action::Loop(100));
        assert_eq!(Action::parse("memmove:4K").unwrap(), Action::Memmove(4096));
        assert_eq!(
            Action::parse("memmove:4096").unwrap(),
            Action::Memmove(4096)
        );
        assert_eq!(
            Action::parse("udp-send:1024").unwrap(),
            Action::UdpSend(1024)
        );
        assert_eq!(
            Action::parse("syscall:getppid").unwrap(),
            Action::Syscall(Call::Getppid)
        );
        for bad in [
            "loop",
            "loop:0",
            "loop:x",
            "memmove:0",
            "memmove:2G",
            "udp-send:70000",
            "syscall:getpid",
            "sleep:1",
            "",
        ] {
            assert!(Action::parse(bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            Action::parse("memmove:64K").unwrap().to_string(),
            "memmove:65536"
        );
    }

    #[test]
    fn the_busy_loop_scales_with_its_iterations() {
        let c = timing_costs(ClockInfo::detect().0.scale);
        assert!(
            c.loop_iteration_ns > 0.0 && c.loop_iteration_ns < 100.0,
            "{c:?}"
        );
        assert!(c.overhead_ns > 0.0);
        assert_eq!(
            iterations_for(1000.0, &c),
            (1000.0 / c.loop_iteration_ns).round() as u64
        );
    }
}
