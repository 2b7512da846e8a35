//! The one path every measuring command takes: place the threads, check that they cannot
//! starve the machine, announce what degrades the figures, measure, record the run, save
//! and print. Each `app/<kind>.rs` only describes its kind (a [`Measure`]); this module
//! does the rest, once.

use std::sync::atomic::AtomicBool;
use std::time::{Duration, SystemTime};

use anyhow::{Context, bail};

use crate::degraded::Degraded;
use crate::engine::clock::ClockInfo;
use crate::engine::cpu::{CpuList, CpuPlan, CpuUniverse};
use crate::engine::run::RunOutcome;
use crate::engine::sched::{self, Policy, SchedRequest};
use crate::report::result::gate::Gate;
use crate::report::result::{Privileges, RunCpus};
use crate::report::{ProbeEntry, ResultFile, RunInfo};
use crate::system::HostInfo;
use crate::system::counters;

use super::Ending;
use super::cpuset::Cpuset;
use super::output::{Warnings, emit};

pub use super::settings::{RunSettings, sched_request};

/// The plan from `-a` and `--housekeeping` as given: the measured CPUs and the
/// coordinator's.
pub fn plan_cpus(
    cpus: Option<&str>,
    housekeeping: Option<usize>,
    universe: &CpuUniverse,
    cpuset: &Cpuset,
) -> anyhow::Result<CpuPlan> {
    let with_flag = |e: crate::engine::cpu::CpuListError| anyhow::anyhow!("-a/--cpus: {e}");
    // The cgroup's cpuset bounds the plan; in a group with CPUs of its own and CPUs it
    // shares, a shared one coordinates and its own are measured.
    let universe = &cpuset.narrowed(universe);
    let housekeeping = housekeeping.or_else(|| {
        cpus.is_none()
            .then(|| cpuset.housekeeping(universe))
            .flatten()
    });
    let requested = match cpus {
        Some(text) => Some((text, CpuList::parse_strict(text).map_err(with_flag)?)),
        None => None,
    };
    CpuPlan::choose(universe, requested, housekeeping).map_err(with_flag)
}

/// The one CPU a single-thread kind runs on: `-a CPU`, or the first CPU the default plan
/// would measure; the coordinator keeps to the others.
pub fn one_cpu_plan(
    s: &RunSettings,
    universe: &CpuUniverse,
    cpuset: &Cpuset,
    kind: &str,
) -> anyhow::Result<CpuPlan> {
    let cpu = match &s.cpus {
        Some(text) => {
            let list = universe
                .parse_user_list(text)
                .map_err(|e| anyhow::anyhow!("-a/--cpus: {e}"))?;
            match list.cpus() {
                [c] => *c,
                _ => bail!("-a/--cpus: {kind} runs on one CPU, got '{text}'"),
            }
        }
        None => plan_cpus(None, s.housekeeping, universe, cpuset)?
            .measured
            .first()
            .context("no usable CPU")?,
    };
    let measured = CpuList::from_cpus(vec![cpu]);
    Ok(CpuPlan {
        housekeeping: universe.housekeeping_for(&measured),
        measured,
    })
}

/// Below this interval a real-time timer thread barely sleeps, and one on every CPU could
/// starve the kernel's own work as a spinner would.
pub const TIMER_HOG_INTERVAL_NS: u64 = 100_000;

/// How a kind's measuring threads use their CPUs, for the safety check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuUse {
    /// Busy the whole run (noise, the spinning mechanisms, …).
    Spin,
    /// Asleep between wake-ups `interval_ns` apart (timer).
    Sleep { interval_ns: u64 },
}

impl CpuUse {
    /// Whether a real-time thread doing this can starve its CPU.
    fn hogs(self) -> bool {
        match self {
            CpuUse::Spin => true,
            CpuUse::Sleep { interval_ns } => interval_ns < TIMER_HOG_INTERVAL_NS,
        }
    }
}

/// Refuses real-time threads that hog their CPUs (spinners, or timers that barely sleep)
/// when they leave the coordinator no CPU of its own (every CPU this process may use is
/// measured), unless forced: they could starve it, and the kernel's per-CPU work, for the
/// whole run. Threads that sleep may take every CPU, as cyclictest's `-S -p 90` does.
/// `cpu_flags` names the options that place the threads, for the fix the error gives.
pub fn check_safety(
    req: SchedRequest,
    plan: &CpuPlan,
    universe: &CpuUniverse,
    force: bool,
    usage: CpuUse,
    cpu_flags: &str,
) -> anyhow::Result<()> {
    if req.policy.is_realtime() && plan.coordinator_shares() && usage.hogs() && !force {
        let (what, fix) = match usage {
            CpuUse::Spin => ("spinners".to_string(), ""),
            CpuUse::Sleep { interval_ns } => (
                format!("timer threads at {} µs", interval_ns as f64 / 1e3),
                ", use -i 100 or more",
            ),
        };
        bail!(
            "refusing to run {req} {what} on every CPU this process may use ({}): none \
             would be left for housekeeping. Leave a CPU free ({cpu_flags}){fix}, or pass \
             --force",
            universe.usable()
        );
    }
    Ok(())
}

/// A measuring kind, described: where it runs, how it uses its CPUs, how it measures,
/// and how it prints. [`execute`] runs it.
pub trait Measure {
    /// The shared settings it was built with.
    fn settings(&self) -> &RunSettings;

    /// The CPUs it measures and where the coordinator goes [default: `-a` and
    /// `--housekeeping`].
    fn place(&mut self, universe: &CpuUniverse, cpuset: &Cpuset) -> anyhow::Result<CpuPlan> {
        let s = self.settings();
        plan_cpus(s.cpus.as_deref(), s.housekeeping, universe, cpuset)
    }

    /// The policy the safety check and the degradations judge [default: the settings'].
    fn sched(&self) -> SchedRequest {
        self.settings().sched
    }

    /// How its threads use their CPUs [default: they spin].
    fn cpu_use(&self) -> CpuUse {
        CpuUse::Spin
    }

    /// The flags that place its threads, for the safety check's advice.
    fn cpu_flags(&self) -> &'static str {
        "-a"
    }

    /// Checks that need the placement, made before anything is printed.
    fn check(&self, _cpus: &CpuPlan) -> anyhow::Result<()> {
        Ok(())
    }

    /// Whether the host's warnings wait until it has measured: a kind whose bad input
    /// only shows when measuring (ptp's devices) then fails with its one line alone.
    fn announces_late(&self) -> bool {
        false
    }

    /// Measures.
    fn measure(&mut self, ctx: &mut Ctx<'_>) -> anyhow::Result<Measured>;

    /// The text printed on the terminal.
    fn text(&self, result: &ResultFile) -> String;

    /// The CPUs the host's audit in the result is about, or `None` for no audit [default:
    /// the measured CPUs, when the result is kept (`RunSettings::keeps_result`)].
    fn audit_cpus(&self, plan: &CpuPlan) -> Option<CpuList> {
        self.settings()
            .keeps_result()
            .then(|| plan.measured.clone())
    }

    /// Adds what the kind keeps beside its probe entries (`tune`'s steps, `watch`'s
    /// threads) to the result, before it is saved and printed [default: nothing].
    fn finish(&mut self, _result: &mut ResultFile) {}
}

/// What a kind measures with: the host, its CPUs, and where its warnings go.
pub struct Ctx<'a> {
    pub host: &'a HostInfo,
    pub cpus: &'a CpuPlan,
    pub universe: &'a CpuUniverse,
    /// The process's cpuset group, as read for the plan.
    pub cpuset: &'a Cpuset,
    pub sched: SchedRequest,
    pub stop: &'a AtomicBool,
    /// Whether the result is kept (`RunSettings::keeps_result`): a kind encodes its
    /// histograms only then.
    pub keep: bool,
    sink: &'a Warnings,
    warnings: Vec<String>,
    degraded: Vec<Degraded>,
}

impl Ctx<'_> {
    /// A warning printed now (unless held) and kept for the result's `run.warnings`.
    pub fn note(&mut self, w: String) {
        self.sink.warn(&w);
        self.warnings.push(w);
    }

    /// A degradation found while measuring: printed now and stored in the result.
    pub fn degrade(&mut self, d: Degraded) {
        self.sink.warn(&d.to_string());
        self.degraded.push(d);
    }
}

/// What a kind hands back: its entries and how the run went.
pub struct Measured {
    pub entries: Vec<ProbeEntry>,
    pub outcome: RunOutcome<()>,
    /// The time asked for (0 where a count sets the length).
    pub requested: Duration,
    /// Whether memory locking was asked for.
    pub mlock: bool,
    /// The time measured, where the kind knows it better than the runner's window.
    pub actual: Option<Duration>,
    /// A limit the user set was crossed (`timer --stop-above`).
    pub limit_exceeded: bool,
}

impl Measured {
    /// A run that measured what `plan` asked for: its duration requested, its memory
    /// locking; `wrap` makes each probe entry a result entry (`ProbeEntry::Noise`, …).
    pub fn of_plan<T>(
        entries: Vec<T>,
        wrap: fn(Box<T>) -> ProbeEntry,
        outcome: RunOutcome<()>,
        plan: &crate::engine::run::RunPlan,
    ) -> Measured {
        Measured {
            entries: entries.into_iter().map(|e| wrap(Box::new(e))).collect(),
            outcome,
            requested: plan.duration,
            mlock: plan.mlock,
            actual: None,
            limit_exceeded: false,
        }
    }
}

/// Runs a kind: placement, safety, announcement, measuring, the result, saving and
/// printing. Returns the result (for the main job) and how the run ended.
pub fn execute(
    m: &mut dyn Measure,
    argv: &[String],
    stop: &AtomicBool,
    sink: &Warnings,
) -> anyhow::Result<(ResultFile, Ending)> {
    let universe = CpuUniverse::detect().context("cannot read the system's CPUs")?;
    let cpuset = Cpuset::read();
    let cpus = m.place(&universe, &cpuset)?;
    let req = m.sched();
    check_safety(
        req,
        &cpus,
        &universe,
        m.settings().force,
        m.cpu_use(),
        m.cpu_flags(),
    )?;
    m.check(&cpus)?;
    // Held until the threads have ended: a deadline run's root domain, if it needs one.
    let mut domain = super::deadline::admit(req, &cpus)?;
    let start_time = SystemTime::now();
    let keep = m.settings().keeps_result();
    let mut pre = preamble(req, &cpus, &universe, &cpuset, m.audit_cpus(&cpus).as_ref());
    pre.warnings
        .extend(domain.as_mut().and_then(|d| d.reverted_stale.take()));
    let late = m.announces_late();
    if !late {
        pre.announce(sink);
    }
    let mut ctx = Ctx {
        host: &pre.host,
        cpus: &cpus,
        universe: &universe,
        cpuset: &cpuset,
        sched: req,
        stop,
        keep,
        sink,
        warnings: pre.warnings.clone(),
        degraded: pre.degraded.clone(),
    };
    let before = counters::snapshot(&cpus.measured);
    let measured = m.measure(&mut ctx)?;
    let delta = before.and_then(|b| counters::diff(&b, &counters::snapshot(&cpus.measured)?));
    let root_domain = domain.map(|d| d.finish());
    if let Some(r) = root_domain.as_ref().filter(|r| !r.removed) {
        ctx.note(r.to_string());
    }
    let (warnings, degraded) = (ctx.warnings, ctx.degraded);
    if late {
        pre.announce(sink);
    }
    let facts = RunFacts {
        argv,
        start_time,
        cpus: &cpus,
        req,
    };
    let mut info = facts.run_info(&measured, degraded, warnings, sink);
    info.counters = delta.ok();
    info.root_domain = root_domain;
    let limit = measured.limit_exceeded;
    let mut result = ResultFile::new(pre.host, info, measured.entries);
    m.finish(&mut result);
    emit(&result, &m.settings().save, || m.text(&result))?;
    let gated = gate(&result, &m.settings().gates);
    let end = match (limit, result.run.interrupted, gated) {
        (true, _, _) => Ending::LimitExceeded,
        (false, true, _) => Ending::Interrupted,
        (false, false, Ending::LimitExceeded) => Ending::LimitExceeded,
        (false, false, _) => Ending::Completed,
    };
    Ok((result, end))
}

/// Checks `--fail-above` on a saved result: one line on stderr naming the figure that
/// crossed its limit, and `LimitExceeded`; else `Completed`.
pub fn gate(result: &ResultFile, gates: &[Gate]) -> Ending {
    match crate::report::result::gate::crossing_line(&crate::report::result::gate::crossings(
        result, gates,
    )) {
        Some(line) => {
            use std::io::Write;
            let _ = writeln!(std::io::stderr(), "jitterscope: {line}");
            Ending::LimitExceeded
        }
        None => Ending::Completed,
    }
}

/// Everything known before measuring: what to print as warnings and store as degraded.
struct Preamble {
    host: HostInfo,
    degraded: Vec<Degraded>,
    warnings: Vec<String>,
}

impl Preamble {
    fn announce(&self, sink: &Warnings) {
        for d in &self.degraded {
            sink.warn(&d.to_string());
        }
        for w in &self.warnings {
            sink.warn(w);
        }
    }
}

/// `audit`: the CPUs the host's audit in the result is about, if it has one.
fn preamble(
    req: SchedRequest,
    plan: &CpuPlan,
    universe: &CpuUniverse,
    cpuset: &Cpuset,
    audit: Option<&CpuList>,
) -> Preamble {
    let (clock, problems) = ClockInfo::detect();
    let host = HostInfo::collect(clock, universe.online.clone());
    let host = match audit {
        Some(cpus) => host.audited_for(cpus, crate::system::audit::Measuring::of(req)),
        None => host,
    };
    let mut degraded: Vec<Degraded> = problems.iter().map(Degraded::from_clock).collect();
    // A deadline thread is tried where the first one will run (`deadline::admit`).
    if let Err(reason) = sched::preflight_on(req, plan.measured.first()) {
        degraded.push(Degraded::sched_refused(req, reason));
    }
    if let Some(h) = &host.virtualization {
        degraded.push(Degraded::VirtualMachine {
            hypervisor: h.clone(),
        });
    }
    if plan.coordinator_shares() {
        degraded.push(Degraded::CoordinatorShares);
    }
    if let Policy::Deadline(d) = req.policy {
        let at_tick = crate::engine::deadline::tick_enforced(&d);
        degraded.extend(at_tick.map(|reason| Degraded::DeadlineAtTick { reason }));
    }
    let mut warnings = Vec::new();
    warnings.extend(cpuset.note(&plan.measured));
    if req.policy.is_realtime() && host.sched_rt_runtime_us == Some(-1) {
        warnings.push(
            "sched_rt_runtime_us is -1: real-time throttling is off, so a spinning \
             real-time thread gives nothing back to its CPU until the run ends"
                .to_string(),
        );
    }
    Preamble {
        host,
        degraded,
        warnings,
    }
}

/// What `run` in the result is made from.
struct RunFacts<'a> {
    argv: &'a [String],
    start_time: SystemTime,
    cpus: &'a CpuPlan,
    req: SchedRequest,
}

impl RunFacts<'_> {
    /// `run` in the result file. The degradations known before the run are completed
    /// with those only the run could show, so that no kind can leave them out.
    fn run_info(
        &self,
        m: &Measured,
        mut degraded: Vec<Degraded>,
        warnings: Vec<String>,
        sink: &Warnings,
    ) -> RunInfo {
        for d in late_degradations(&m.outcome, self.req, &degraded) {
            sink.warn(&d.to_string());
            degraded.push(d);
        }
        let euid = rustix::process::geteuid();
        RunInfo {
            tool_version: env!("CARGO_PKG_VERSION").to_string(),
            tool_commit: Some(crate::COMMIT.to_string()),
            command_line: self.argv.to_vec(),
            start_time: humantime::format_rfc3339_seconds(self.start_time).to_string(),
            requested_duration_ns: m.requested.as_nanos() as u64,
            actual_duration_ns: m.actual.unwrap_or(m.outcome.elapsed).as_nanos() as u64,
            interrupted: m.outcome.interrupted,
            privileges: Privileges {
                euid: euid.as_raw(),
                root: euid.is_root(),
                memory_locked: m.mlock && m.outcome.mlock_error.is_none(),
            },
            cpus: RunCpus {
                measured: self.cpus.measured.clone(),
                housekeeping: self.cpus.housekeeping.clone(),
            },
            degraded: degraded.iter().map(Degraded::to_record).collect(),
            warnings,
            peak_rss_kib: sched::peak_rss_kib(),
            counters: None,
            root_domain: None,
        }
    }
}

/// Degradations only known once the threads ran: mlockall's failure, and a policy the
/// pre-flight check allowed but a thread was refused.
fn late_degradations(
    outcome: &RunOutcome<()>,
    req: SchedRequest,
    known: &[Degraded],
) -> Vec<Degraded> {
    let mut late = Vec::new();
    if let Some(e) = &outcome.mlock_error {
        late.push(Degraded::MlockFailed {
            reason: e.to_string(),
        });
    }
    let already_refused = known
        .iter()
        .any(|d| matches!(d, Degraded::SchedRefused { .. }));
    let late_refusal = outcome.workers.iter().find_map(|w| w.sched_refused.clone());
    if let Some(reason) = late_refusal.filter(|_| !already_refused) {
        late.push(Degraded::sched_refused(req, reason));
    }
    late
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::SaveArgs;

    #[test]
    fn priority_implies_fifo_and_other_takes_none() {
        let fifo = |p| SchedRequest {
            policy: Policy::Fifo,
            priority: p,
        };
        assert_eq!(sched_request(None, Some(50)).unwrap(), fifo(50));
        assert_eq!(
            sched_request(Some(Policy::Rr), Some(5)).unwrap(),
            SchedRequest {
                policy: Policy::Rr,
                priority: 5
            }
        );
        assert_eq!(sched_request(Some(Policy::Fifo), None).unwrap(), fifo(1));
        assert!(sched_request(Some(Policy::Other), Some(5)).is_err());
        assert_eq!(sched_request(None, None).unwrap(), SchedRequest::OTHER);
    }

    #[test]
    fn only_a_result_that_leaves_the_process_is_completed() {
        let table_only = RunSettings {
            whole_result: false,
            save: SaveArgs::default(),
            ..RunSettings::quiet()
        };
        assert!(!table_only.keeps_result());
        let with = |save: SaveArgs| RunSettings {
            save,
            ..table_only.clone()
        };
        let file = || Some(std::path::PathBuf::from("r.json"));
        assert!(
            with(SaveArgs {
                output: file(),
                ..SaveArgs::default()
            })
            .keeps_result()
        );
        assert!(
            with(SaveArgs {
                json: Some(None),
                ..SaveArgs::default()
            })
            .keeps_result()
        );
        assert!(
            with(SaveArgs {
                json: Some(file()),
                ..SaveArgs::default()
            })
            .keeps_result()
        );
        assert!(
            with(SaveArgs {
                html: file(),
                ..SaveArgs::default()
            })
            .keeps_result()
        );
        // Quiet settings keep nothing; the main job asks for whole results itself
        // (main_job's tests check its steps do).
        assert!(!RunSettings::quiet().keeps_result());
    }

    #[test]
    fn realtime_on_every_cpu_needs_force() {
        let both = CpuList::parse_kernel("0-1").unwrap();
        let u = CpuUniverse::of(both.clone(), both);
        let all = plan_cpus(Some("0-1"), None, &u, &Cpuset::default()).unwrap();
        let fifo = SchedRequest {
            policy: Policy::Fifo,
            priority: 1,
        };
        assert!(check_safety(fifo, &all, &u, false, CpuUse::Spin, "-a").is_err());
        assert!(check_safety(fifo, &all, &u, true, CpuUse::Spin, "-a").is_ok());
        assert!(check_safety(SchedRequest::OTHER, &all, &u, false, CpuUse::Spin, "-a").is_ok());
        let one = plan_cpus(Some("1"), None, &u, &Cpuset::default()).unwrap();
        assert!(check_safety(fifo, &one, &u, false, CpuUse::Spin, "-a").is_ok());
        let sleepy = CpuUse::Sleep {
            interval_ns: 1_000_000,
        };
        assert!(check_safety(fifo, &all, &u, false, sleepy, "-a").is_ok());
    }
}
