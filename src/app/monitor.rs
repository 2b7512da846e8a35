//! `jitterscope monitor`: always-on timer latency for a fleet, through Prometheus.
//!
//! One pinned thread per measured CPU runs `timer`'s loop without end
//! (`probes::timer_stream`), at 1 ms and SCHED_FIFO 1 by default as root (SCHED_OTHER
//! otherwise, and it says so). Each second every thread hands its figures over without a
//! lock; the bookkeeping (`books`), on the runner's coordinator pinned to the
//! housekeeping CPU, folds them into the metrics (`metrics`) and the interval log (`log`).
//! The HTTP server (`server`) runs on its own thread, pinned to the housekeeping CPU too,
//! and binds to loopback unless told otherwise. Optional noise sweeps (`sweep`) spin only
//! on the CPUs named for them.
//!
//! With `--trace`, the late wake-ups are attributed to their causes from a kernel trace
//! of the measured CPUs (`causes`), read by the bookkeeping; without root or tracefs it
//! says so once and measures on.
//!
//! With `--watch-comm NAME`, the threads of that name (someone else's) are traced as
//! `watch --comm` traces them, by `watch`'s own reader loop on a thread pinned to the
//! housekeeping CPU, and exported per name (`watched`). With `--watch-cgroup PATTERN`,
//! the threads of the cgroups matching it, by the same reader, exported per group
//! (`groups`).
//!
//! SIGTERM or Ctrl-C end it: the threads stop at their next wake-up, the last partial
//! second and log interval are written, the trace's instance is removed, and it exits 0.
//! SIGHUP reopens the log.

mod books;
pub mod causes;
mod cgroups;
mod groups;
pub mod log;
pub mod metrics;
mod server;
mod sweep;
mod watch_books;
pub mod watched;

use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, bail};

use crate::cli::{MAX_DURATION, MonitorArgs};
use crate::degraded::Degraded;
use crate::engine::clock::ClockInfo;
use crate::engine::cpu::{CpuPlan, CpuUniverse};
use crate::engine::run::{Monitor, RunPlan};
use crate::engine::sched::{self, Policy, SchedRequest};
use crate::probes::noise::NoiseConfig;
use crate::probes::timer_stream::{self, StreamConfig};
use crate::system::HostInfo;
use crate::system::audit::AuditReport;

use super::Ending;
use super::output::warn;
use super::pipeline::{CpuUse, check_safety, plan_cpus, sched_request};

use books::Books;
use causes::Tracer;
use metrics::{ConfigLabels, FindingLabels, KindLabels, Metrics};

/// How often the bookkeeping looks for finished seconds.
const TICK: Duration = Duration::from_millis(250);

/// The policy asked for; with neither flag, SCHED_FIFO 1 as root and SCHED_OTHER
/// otherwise (an unprivileged process cannot have real-time threads).
fn monitor_sched(policy: Option<Policy>, priority: Option<u8>) -> anyhow::Result<SchedRequest> {
    match (policy, priority) {
        (None, None) if rustix::process::geteuid().is_root() => Ok(SchedRequest {
            policy: Policy::Fifo,
            priority: 1,
        }),
        (p, prio) => sched_request(p, prio),
    }
}

/// The sweeps asked for, checked against the plan.
fn sweeps(
    args: &MonitorArgs,
    plan: &CpuPlan,
    universe: &CpuUniverse,
) -> anyhow::Result<Option<sweep::Sweeps>> {
    let (Some(every), Some(text)) = (args.noise_every, args.noise_cpus.as_deref()) else {
        return Ok(None);
    };
    let cpus = universe
        .parse_user_list(text)
        .map_err(|e| anyhow::anyhow!("--noise-cpus: {e}"))?;
    if let Some(c) = cpus.cpus().iter().find(|&&c| !plan.measured.contains(c)) {
        bail!(
            "--noise-cpus: CPU {c} is not measured ({}): sweeps spin only on measured CPUs, \
             never on the housekeeping CPU the server needs",
            plan.measured
        );
    }
    if args.noise_for > Duration::from_secs(60) || args.noise_for * 2 > every {
        bail!(
            "--noise-for {}: expected at most 60s and at most half of --noise-every {}",
            humantime::format_duration(args.noise_for),
            humantime::format_duration(every)
        );
    }
    let cfg = NoiseConfig {
        threshold_ns: args.noise_threshold,
        ..NoiseConfig::default()
    };
    cfg.validate()
        .map_err(|e| anyhow::anyhow!("--noise-threshold: {e}"))?;
    Ok(Some(sweep::Sweeps {
        cpus,
        every,
        length: args.noise_for,
        cfg,
    }))
}

/// The degradations known before measuring.
fn degradations(
    req: SchedRequest,
    plan: &CpuPlan,
    host: &HostInfo,
    problems: &[crate::engine::clock::ClockProblem],
) -> Vec<Degraded> {
    let mut d: Vec<Degraded> = problems.iter().map(Degraded::from_clock).collect();
    if let Err(reason) = sched::preflight(req) {
        d.push(Degraded::sched_refused(req, reason));
    }
    if let Some(h) = &host.virtualization {
        d.push(Degraded::VirtualMachine {
            hypervisor: h.clone(),
        });
    }
    if plan.coordinator_shares() {
        d.push(Degraded::CoordinatorShares);
    }
    d
}

fn audit_labels(report: &AuditReport) -> Vec<FindingLabels> {
    (report.findings.iter())
        .map(|f| FindingLabels {
            id: f.id.to_string(),
            severity: f.severity.to_string(),
        })
        .collect()
}

/// `jitterscope monitor`: runs until `stop` (or `-D`); `reopen` asks for the log to be
/// reopened.
pub fn run(
    args: &MonitorArgs,
    _argv: &[String],
    stop: &AtomicBool,
    reopen: &AtomicBool,
) -> anyhow::Result<Ending> {
    let mut cfg = StreamConfig::new(args.interval, args.late_above.0.clone())
        .map_err(|e| anyhow::anyhow!("-i/--late-above: {e}"))?;
    if args.log_interval.subsec_nanos() != 0 {
        bail!(
            "--log-interval {}: expected whole seconds (the threads hand over once a second)",
            humantime::format_duration(args.log_interval)
        );
    }
    let req = monitor_sched(args.policy, args.priority)?;
    let universe = CpuUniverse::detect().context("cannot read the system's CPUs")?;
    let cpuset = super::cpuset::Cpuset::read();
    let plan = plan_cpus(args.cpus.as_deref(), args.housekeeping, &universe, &cpuset)?;
    check_safety(
        req,
        &plan,
        &universe,
        args.force,
        CpuUse::Sleep {
            interval_ns: cfg.interval_ns,
        },
        "-a or --housekeeping",
    )?;
    let sweeps = sweeps(args, &plan, &universe)?;
    let watch_comms =
        watched::comms(&args.watch_comm).map_err(|e| anyhow::anyhow!("--watch-comm: {e}"))?;
    let patterns =
        groups::patterns(&args.watch_cgroup).map_err(|e| anyhow::anyhow!("--watch-cgroup {e}"))?;
    let watch_groups = match patterns.is_empty() {
        true => None,
        false => Some(
            groups::Groups::new(std::path::Path::new("/"), patterns.clone())
                .map_err(|e| anyhow::anyhow!("--watch-cgroup: {e}"))?,
        ),
    };
    if let Some(dir) = &args.log_dir
        && !dir.is_dir()
    {
        bail!("--log-dir {}: not a directory", dir.display());
    }
    let listener = TcpListener::bind(args.listen)
        .with_context(|| format!("--listen {}: cannot listen", args.listen))?;

    let start = SystemTime::now();
    let (clock, problems) = ClockInfo::detect();
    let host = HostInfo::collect(clock.clone(), universe.online.clone());
    let audit = AuditReport::of(
        std::path::Path::new("/"),
        plan.measured.clone(),
        &host.cpus_online,
    );
    let mut degraded = degradations(req, &plan, &host, &problems);
    // The trace before the threads: their first late wake-ups find it recording.
    let trace = match args.trace {
        true => Some(Tracer::start(&plan.measured, clock.scale)),
        false => None,
    };
    if let Some(Err(e)) = &trace {
        degraded.push(Degraded::TraceUnavailable {
            reason: e.to_string(),
        });
    }
    // The watched threads' trace, before the threads too; it needs no `--trace`.
    let watching = match watch_comms.is_empty() && watch_groups.is_none() {
        true => None,
        false => Some(watched::WatchComms::start(
            &universe.online,
            &watch_comms,
            args.watch_threshold,
        )),
    };
    if let Some(Err(e)) = &watching {
        // Said once: with `--trace` refused for the same reason, that says it.
        let reason = format!("--watch-comm/--watch-cgroup: {e}");
        let same = matches!(&trace, Some(Err(t)) if t.to_string() == e.to_string());
        if !same {
            degraded.push(Degraded::TraceUnavailable { reason });
        }
    }
    for d in &degraded {
        warn(&d.to_string());
    }
    if !args.listen.ip().is_loopback() {
        warn(&format!(
            "serving on {}, not a loopback address: anyone who can reach it can read \
             these metrics",
            args.listen
        ));
    }

    let cpus = plan.measured.cpus().to_vec();
    let mut m = Metrics::new(
        &cpus,
        &cfg.late_limits_ns,
        ConfigLabels {
            policy: req.policy.to_string(),
            priority: req.priority.to_string(),
            interval_seconds: metrics::seconds_label(cfg.interval_ns),
            cpus: plan.measured.to_string(),
        },
    );
    if !watch_comms.is_empty() || watch_groups.is_some() {
        m = m.with_watch(&watch_comms, watch_groups.is_some(), args.watch_threshold);
    }
    let m = m.with_cgroups(plan.measured.clone());
    let metrics = Arc::new(m);
    let watching = match watching {
        None => None,
        Some(Err(e)) => {
            metrics
                .reader
                .set_state("unavailable", causes::reason_label(&e));
            None
        }
        Some(Ok(w)) => {
            metrics.reader.set_state("on", "");
            Some(w)
        }
    };
    metrics.start_time.set(
        start
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64()),
    );
    metrics.set_audit(audit_labels(&audit));
    let tracer = match trace {
        None => {
            metrics.set_trace("off", "");
            None
        }
        Some(Err(e)) => {
            metrics.set_trace("unavailable", causes::reason_label(&e));
            None
        }
        Some(Ok(t)) => {
            metrics.set_trace("on", "");
            metrics.trace_cpus(plan.measured.cpus());
            // The wake-ups the lowest late counter counts, so that the causes explain it.
            cfg.log_above_ns = cfg.late_limits_ns.first().copied();
            Some(t)
        }
    };
    let set_degraded = |d: &[Degraded]| {
        for x in d {
            metrics
                .degraded
                .get_or_create(&KindLabels {
                    kind: x.kind().to_string(),
                })
                .set(1);
        }
    };
    set_degraded(&degraded);
    let log = match &args.log_dir {
        Some(dir) => Some(log::IntervalLog::open(
            dir,
            args.log_max_mib * 1024 * 1024,
            args.log_keep,
            start,
        )?),
        None => None,
    };
    let log_path = log.as_ref().map(|l| l.path().to_path_buf());
    let mut books = Books::new(&cpus, &cfg.late_limits_ns, log, args.log_interval);
    if let Some(t) = tracer {
        books.trace(t);
    }

    let why = match (args.policy, args.priority) {
        (None, None) if req.policy.is_realtime() => " (root's default; --policy other to change)",
        (None, None) => " (not root: no real-time priority)",
        _ => "",
    };
    let logging = match &log_path {
        Some(p) => format!(
            "; interval log {} every {}",
            p.display(),
            humantime::format_duration(args.log_interval)
        ),
        None => String::new(),
    };
    eprintln!(
        "jitterscope: monitor: timer every {} µs on CPUs {} at {req}{why}; server and \
         bookkeeping on CPU {}; serving http://{}/metrics{logging}",
        cfg.interval_ns as f64 / 1e3,
        plan.measured,
        if plan.housekeeping.is_empty() {
            "(none: shared)".to_string()
        } else {
            plan.housekeeping.to_string()
        },
        // The address bound, so that `--listen 127.0.0.1:0` names the port it got.
        listener.local_addr().unwrap_or(args.listen),
    );
    if let Some(above) = cfg.log_above_ns {
        eprintln!(
            "jitterscope: monitor: tracing the causes of wake-ups later than {} µs on CPUs \
             {} (a tracefs instance of ours, removed at exit)",
            above as f64 / 1e3,
            plan.measured
        );
    }
    if watching.is_some() {
        let mut what = Vec::new();
        if !watch_comms.is_empty() {
            what.push(format!("the threads named {}", watch_comms.join(", ")));
        }
        if let Some(g) = &watch_groups {
            what.push(format!(
                "the threads of the cgroups matching {} under {} (at most {} with series \
                 of their own)",
                patterns.join(", "),
                g.describe(),
                groups::MAX_GROUPS
            ));
        }
        eprintln!(
            "jitterscope: monitor: watching {} on every CPU, delays of {} µs or more split \
             by what ran instead (a tracefs instance of ours, removed at exit)",
            what.join(" and "),
            args.watch_threshold as f64 / 1e3
        );
    }
    if let Some(s) = &sweeps {
        eprintln!(
            "jitterscope: monitor: noise sweeps of {} every {} on CPUs {} (a SCHED_OTHER \
             spinner; the timer threads preempt it, and their wake-ups count as its noise)",
            humantime::format_duration(s.length),
            humantime::format_duration(s.every),
            s.cpus
        );
    }

    server::spawn(listener, plan.housekeeping.clone(), Arc::clone(&metrics))?;
    let handoffs = timer_stream::handoffs(cpus.len(), &cfg);
    let deadline = args.duration.map(|d| Instant::now() + d);
    let mut log_error: Option<String> = None;
    let mut next_audit = Instant::now() + args.audit_every;
    let watch_done = AtomicBool::new(false);
    let outcome = std::thread::scope(|scope| -> anyhow::Result<()> {
        // However this closure returns, the watch's reader stops, so that the scope
        // can join it.
        let _stop_watch = SetOnDrop(&watch_done);
        if let Some(w) = &watching {
            let (hk, scale, m, done) = (
                plan.housekeeping.first(),
                clock.scale,
                &metrics,
                &watch_done,
            );
            let g = watch_groups;
            std::thread::Builder::new()
                .name("monitor-watch".into())
                .spawn_scoped(scope, move || w.run(hk, scale, m, g, done))
                .context("cannot start the watch's reader thread")?;
        }
        if let Some(s) = &sweeps {
            let (hk, clock, m) = (&plan.housekeeping, &clock, &metrics);
            std::thread::Builder::new()
                .name("monitor-noise".into())
                .spawn_scoped(scope, move || sweep::run(s, hk, clock, m, stop))
                .context("cannot start the noise sweeps' thread")?;
        }
        let mut first = true;
        loop {
            let left = match deadline {
                Some(d) => d.saturating_duration_since(Instant::now()),
                None => MAX_DURATION,
            };
            if left.is_zero() || stop.load(Ordering::Relaxed) {
                break;
            }
            let run_plan = RunPlan {
                cpus: plan.clone(),
                sched: req,
                mlock: !args.no_mlock,
                duration: left,
                priospread: false,
                setup_timeout: Duration::from_secs(10),
            };
            metrics.up.set(1);
            let mut tick = || {
                let logged = books.collect(&metrics, &handoffs);
                if reopen.swap(false, Ordering::Relaxed)
                    && let Err(e) = books.reopen_log()
                {
                    say_log_error(&mut log_error, &e.to_string());
                }
                if let Err(e) = logged {
                    say_log_error(&mut log_error, &e.to_string());
                }
                if Instant::now() >= next_audit {
                    next_audit = Instant::now() + args.audit_every;
                    let a = AuditReport::of(
                        std::path::Path::new("/"),
                        plan.measured.clone(),
                        &host.cpus_online,
                    );
                    metrics.set_audit(audit_labels(&a));
                }
            };
            let monitor = Monitor {
                every: TICK,
                tick: &mut tick,
            };
            let out = timer_stream::run(&cfg, &run_plan, &clock, stop, &handoffs, monitor);
            metrics.up.set(0);
            let out = out.context("the timer threads failed")?;
            // The seconds handed over since the last tick, then each thread's last one.
            books.collect(&metrics, &handoffs).ok();
            for (i, w) in out.workers.into_iter().enumerate() {
                if let Some(last) = w.value {
                    if let Err(e) = books.absorb(&metrics, i, &last, w.tid) {
                        say_log_error(&mut log_error, &e.to_string());
                    }
                    handoffs[i].give_first(last);
                }
                // Once, however many threads were refused, and not again after the
                // pre-flight check said so.
                let known = (degraded.iter()).any(|d| matches!(d, Degraded::SchedRefused { .. }));
                if first
                    && !known
                    && let Some(reason) = w.sched_refused
                {
                    let d = Degraded::sched_refused(req, reason);
                    warn(&d.to_string());
                    degraded.push(d);
                }
            }
            if first && let Some(e) = &out.mlock_error {
                let d = Degraded::MlockFailed {
                    reason: e.to_string(),
                };
                warn(&d.to_string());
                degraded.push(d);
            }
            set_degraded(&degraded);
            first = false;
            if out.window.is_none() {
                break;
            }
        }
        Ok(())
    });
    // Whatever ended the run, the trace's instance goes (dropping `books` would do it
    // too, on every way out) and the last partial interval goes to the log.
    books.close_trace();
    if let Some(w) = watching {
        w.close();
    }
    books
        .flush_log()
        .map_err(|e| anyhow::anyhow!("the last interval was not logged: {e}"))?;
    outcome?;
    Ok(Ending::Completed)
}

/// Sets its flag when dropped.
struct SetOnDrop<'a>(&'a AtomicBool);

impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// A log that cannot be written is said once, not every second.
fn say_log_error(said: &mut Option<String>, e: &str) {
    if said.is_none() {
        warn(&format!("{e} (measuring goes on; said once)"));
        *said = Some(e.to_string());
    }
}
