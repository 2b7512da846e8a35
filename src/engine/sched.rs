//! Scheduling and memory for measuring threads: affinity, policy and priority, mlockall,
//! stack prefaulting, signal masking, and the per-thread counters a probe reports.
//!
//! Every call here acts on the calling thread only (Linux schedules threads, not
//! processes), so the coordinator can pin and prioritise each worker from inside it.
//! rustix covers affinity; `sched_setscheduler`, `getrusage(RUSAGE_THREAD)` and
//! `pthread_sigmask` are not in rustix, so those few calls go through libc.
#![allow(unsafe_code)]

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Mutex;

use rustix::thread::{CpuSet, sched_getcpu, sched_setaffinity};

use super::caps::holds;
use super::cpu::{CpuList, current_affinity};

/// Errors from scheduling calls that cannot be degraded around.
#[derive(Debug, thiserror::Error)]
pub enum SchedError {
    /// Pinning to a CPU failed.
    #[error("cannot pin a thread to CPU {cpu}: {source}")]
    Pin { cpu: usize, source: std::io::Error },
    /// SCHED_DEADLINE was refused for a thread pinned to this CPU: a deadline run stops
    /// rather than measure something else at SCHED_OTHER.
    #[error("SCHED_DEADLINE refused on CPU {cpu}: {reason}")]
    Deadline { cpu: usize, reason: String },
    /// The thread was pinned but the kernel ran it elsewhere.
    #[error("a thread pinned to CPU {cpu} ran on CPU {actual}")]
    WrongCpu { cpu: usize, actual: usize },
}

/// A scheduling policy, as `--policy` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Policy {
    Other,
    Fifo,
    Rr,
    /// SCHED_DEADLINE with its parameters (all zero until the command fills them in
    /// from `--runtime`, `--deadline` and `--period`).
    Deadline(super::deadline::Deadline),
}

impl Policy {
    /// Whether the policy preempts SCHED_OTHER work: FIFO and RR, and DEADLINE above both.
    pub fn is_realtime(self) -> bool {
        matches!(self, Policy::Fifo | Policy::Rr | Policy::Deadline(_))
    }
    fn to_libc(self) -> libc::c_int {
        match self {
            Policy::Other => libc::SCHED_OTHER,
            Policy::Fifo => libc::SCHED_FIFO,
            Policy::Rr => libc::SCHED_RR,
            Policy::Deadline(_) => libc::SCHED_DEADLINE,
        }
    }
    fn from_libc(p: libc::c_int) -> Option<Policy> {
        match p & !libc::SCHED_RESET_ON_FORK {
            libc::SCHED_OTHER => Some(Policy::Other),
            libc::SCHED_FIFO => Some(Policy::Fifo),
            libc::SCHED_RR => Some(Policy::Rr),
            libc::SCHED_DEADLINE => super::deadline::current().map(Policy::Deadline),
            _ => None,
        }
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Policy::Other => "other",
            Policy::Fifo => "fifo",
            Policy::Rr => "rr",
            Policy::Deadline(_) => "deadline",
        })
    }
}

impl FromStr for Policy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "other" => Ok(Policy::Other),
            "fifo" => Ok(Policy::Fifo),
            "rr" => Ok(Policy::Rr),
            "deadline" => Ok(Policy::Deadline(Default::default())),
            _ => Err(format!(
                "unknown policy '{s}'; expected other, fifo, rr or deadline"
            )),
        }
    }
}

/// A policy with its priority (0 for `other`, 1–99 for the real-time ones).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SchedRequest {
    pub policy: Policy,
    pub priority: u8,
}

impl SchedRequest {
    pub const OTHER: SchedRequest = SchedRequest {
        policy: Policy::Other,
        priority: 0,
    };
}

impl fmt::Display for SchedRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.policy {
            Policy::Other => f.write_str("SCHED_OTHER"),
            Policy::Fifo => write!(f, "SCHED_FIFO {}", self.priority),
            Policy::Rr => write!(f, "SCHED_RR {}", self.priority),
            Policy::Deadline(d) => write!(f, "SCHED_DEADLINE {d}"),
        }
    }
}

/// Restricts the calling thread to `cpus`.
pub fn set_affinity(cpus: &CpuList) -> std::io::Result<()> {
    let mut set = CpuSet::new();
    for &c in cpus.cpus() {
        set.set(c);
    }
    sched_setaffinity(None, &set)?;
    Ok(())
}

/// Pins the calling thread to one CPU and checks that it really runs there.
pub fn pin_to(cpu: usize) -> Result<(), SchedError> {
    set_affinity(&CpuList::from_cpus(vec![cpu]))
        .map_err(|source| SchedError::Pin { cpu, source })?;
    // sched_setaffinity on oneself migrates before returning; one yield covers the rare
    // case where the migration is still pending.
    for _ in 0..3 {
        match sched_getcpu() {
            actual if actual == cpu => return Ok(()),
            _ => std::thread::yield_now(),
        }
    }
    Err(SchedError::WrongCpu {
        cpu,
        actual: sched_getcpu(),
    })
}

/// Restores the calling thread's affinity on drop: the coordinator pins itself to the
/// housekeeping CPUs for a run and must not stay pinned when used as a library.
pub struct AffinityGuard {
    original: CpuList,
}

impl AffinityGuard {
    pub fn pin(cpus: &CpuList) -> std::io::Result<AffinityGuard> {
        let original = current_affinity()?;
        set_affinity(cpus)?;
        Ok(AffinityGuard { original })
    }
}

impl Drop for AffinityGuard {
    fn drop(&mut self) {
        let _ = set_affinity(&self.original);
    }
}

/// Sets the calling thread's policy. `Err` carries the errno so that the caller can
/// degrade to SCHED_OTHER and say why.
pub fn set_policy(req: SchedRequest) -> Result<(), std::io::Error> {
    if let Policy::Deadline(d) = req.policy {
        return super::deadline::set(d);
    }
    let param = libc::sched_param {
        sched_priority: req.priority as libc::c_int,
    };
    // SAFETY: `param` is a valid sched_param for the duration of the call; pid 0 names
    // the calling thread.
    let rc = unsafe { libc::sched_setscheduler(0, req.policy.to_libc(), &param) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Sets thread `pid`'s policy and priority (SCHED_DEADLINE is the calling thread's only:
/// `deadline::set`). The kernel's `timerlat/N` threads are set so, as rtla's `-P` does.
pub fn set_policy_of(pid: u32, req: SchedRequest) -> Result<(), std::io::Error> {
    if let Policy::Deadline(_) = req.policy {
        return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
    }
    let param = libc::sched_param {
        sched_priority: req.priority as libc::c_int,
    };
    // SAFETY: `param` is a valid sched_param for the duration of the call.
    let rc = unsafe { libc::sched_setscheduler(pid as libc::pid_t, req.policy.to_libc(), &param) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The policy and priority the calling thread actually has.
pub fn current_policy() -> SchedRequest {
    // SAFETY: pid 0 is the calling thread; sched_getparam writes into a local we own.
    let (policy, prio) = unsafe {
        let policy = libc::sched_getscheduler(0);
        let mut param = libc::sched_param { sched_priority: 0 };
        libc::sched_getparam(0, &mut param);
        (policy, param.sched_priority)
    };
    SchedRequest {
        policy: Policy::from_libc(policy).unwrap_or(Policy::Other),
        priority: prio.clamp(0, 99) as u8,
    }
}

/// The name of a scheduling policy number (sched_getscheduler, /proc/<pid>/stat's 41st
/// field).
pub fn policy_name(p: u32) -> &'static str {
    match p {
        0 => "SCHED_OTHER",
        1 => "SCHED_FIFO",
        2 => "SCHED_RR",
        3 => "SCHED_BATCH",
        5 => "SCHED_IDLE",
        6 => "SCHED_DEADLINE",
        _ => "?",
    }
}

/// Another thread's policy and priority in words ("SCHED_FIFO 10", "SCHED_OTHER nice
/// 0"), or `None` when it has ended.
pub fn policy_of(tid: u32) -> Option<String> {
    let tid = libc::pid_t::try_from(tid).ok()?;
    // SAFETY: plain queries of another task; the param is a local we own.
    let (policy, prio) = unsafe {
        let policy = libc::sched_getscheduler(tid);
        let mut param = libc::sched_param { sched_priority: 0 };
        if policy < 0 || libc::sched_getparam(tid, &mut param) != 0 {
            return None;
        }
        (policy, param.sched_priority)
    };
    // The reset-on-fork flag rides on the policy.
    let name = policy_name((policy & !libc::SCHED_RESET_ON_FORK) as u32);
    Some(match name {
        "SCHED_FIFO" | "SCHED_RR" => format!("{name} {prio}"),
        "SCHED_OTHER" | "SCHED_BATCH" => {
            let nice = std::fs::read_to_string(format!("/proc/{tid}/stat")).ok()?;
            // The 19th field, after the name (which may hold spaces and parentheses).
            let nice = nice
                .rsplit_once(')')?
                .1
                .split_whitespace()
                .nth(16)?
                .to_string();
            format!("{name} nice {nice}")
        }
        _ => name.to_string(),
    })
}

/// How a refusal to root that holds CAP_SYS_NICE begins: only a cgroup without real-time
/// runtime refuses it then, and the app layer looks for that cgroup.
pub const EPERM_AS_ROOT: &str = "EPERM although root";

/// Explains a refused policy change in words a user can act on.
pub fn explain_refusal(err: &std::io::Error) -> String {
    match err.raw_os_error() {
        Some(libc::EPERM) => {
            let root = rustix::process::geteuid().is_root();
            if root && !holds(rustix::thread::CapabilitySet::SYS_NICE) {
                // Docker's default set drops it: root, and refused whatever the cgroup.
                "EPERM: root without CAP_SYS_NICE (containers drop it: run with \
                 --cap-add SYS_NICE)"
                    .to_string()
            } else if root {
                format!(
                    "{EPERM_AS_ROOT}: RT group scheduling gives this cgroup no rt_runtime \
                     (set cpu.rt_runtime_us, or run outside the cgroup)"
                )
            } else {
                "EPERM: not root and no CAP_SYS_NICE or RLIMIT_RTPRIO (run as root, or \
                 `setcap cap_sys_nice+ep` the binary, or raise `ulimit -r`)"
                    .to_string()
            }
        }
        Some(libc::EINVAL) => "EINVAL: priority not accepted by the kernel".to_string(),
        _ => err.to_string(),
    }
}

/// Locks the process's memory and unlocks it on drop.
///
/// MCL_ONFAULT locks each page as it is first touched instead of faulting in every mapped
/// page at once. Every page a measuring thread touches (its stack, its statistics, its
/// code) is touched during setup and warm-up, so nothing faults while measuring, and the
/// resident set no longer grows with the size of the binary and its libraries (here, for
/// two measured CPUs: 5.9 MiB with the classic flags, 5.0 MiB with ONFAULT; see
/// bench/memory.sh). Kernels older than 4.4 reject the flag; those get CURRENT|FUTURE.
///
/// MCL_FUTURE is taken only where the locked-memory limit cannot bite: with CAP_IPC_LOCK,
/// or an unlimited RLIMIT_MEMLOCK (the soft limit is raised to the hard one first). Under
/// a finite limit it would make every later mapping past the limit fail, and Rust aborts
/// on a failed allocation or thread stack (issue 22: 8 MiB, the default for a user).
pub struct MlockGuard(());

impl MlockGuard {
    /// Locks everything, or says why it did not: `MlockRefusal::Limited` asks the
    /// measuring threads to lock their own stacks instead (`lock_own_stack`).
    pub fn lock() -> Result<MlockGuard, MlockRefusal> {
        use rustix::mm::{MlockAllFlags, mlockall};
        if let Some(limit) = memlock_limit() {
            return Err(MlockRefusal::Limited { limit });
        }
        let classic = MlockAllFlags::CURRENT | MlockAllFlags::FUTURE;
        let locked = match mlockall(classic | MlockAllFlags::ONFAULT) {
            Err(rustix::io::Errno::INVAL) => mlockall(classic),
            other => other,
        };
        locked.map_err(|e| MlockRefusal::Failed(e.into()))?;
        Ok(MlockGuard(()))
    }
}

impl Drop for MlockGuard {
    fn drop(&mut self) {
        let _ = rustix::mm::munlockall();
    }
}

/// Why not all memory was locked.
#[derive(Debug)]
pub enum MlockRefusal {
    /// RLIMIT_MEMLOCK is finite (bytes) and CAP_IPC_LOCK is missing.
    Limited { limit: u64 },
    /// mlockall itself failed.
    Failed(std::io::Error),
}

impl MlockRefusal {
    /// The reason a run's `mlock-failed` degradation gives; `stacks_locked` says whether
    /// the measuring threads could lock their own stacks under the limit.
    pub fn into_error(self, stacks_locked: bool) -> std::io::Error {
        match self {
            MlockRefusal::Failed(e) => e,
            MlockRefusal::Limited { limit } => std::io::Error::other(format!(
                "the locked-memory limit is {} KiB and CAP_IPC_LOCK is missing, so locking \
                 all future memory would make allocations fail; {}",
                limit / 1024,
                match stacks_locked {
                    true => "only the measuring threads' stacks were locked",
                    false => "nothing was locked",
                }
            )),
        }
    }
}

/// The locked-memory limit in bytes when it can bite: `None` with CAP_IPC_LOCK or an
/// unlimited limit. The soft limit is raised to the hard one first.
pub fn memlock_limit() -> Option<u64> {
    use rustix::process::{Resource, getrlimit, setrlimit};
    if holds(rustix::thread::CapabilitySet::IPC_LOCK) {
        return None;
    }
    let mut limit = getrlimit(Resource::Memlock);
    if limit.current != limit.maximum {
        limit.current = limit.maximum;
        if setrlimit(Resource::Memlock, limit).is_err() {
            limit = getrlimit(Resource::Memlock);
        }
    }
    limit.current
}

/// Locks the part of the calling thread's stack that `prefault_stack(bytes)` touched:
/// what a measuring thread needs when the limit forbids locking everything.
#[inline(never)]
pub fn lock_own_stack(bytes: usize) -> std::io::Result<()> {
    const PAGE: usize = 4096;
    let here = std::hint::black_box(0u8);
    let top = (&here as *const u8 as usize).div_ceil(PAGE) * PAGE;
    let bottom = top.saturating_sub(bytes + PAGE);
    // SAFETY: [bottom, top) lies in this thread's mapped stack: `prefault_stack(bytes)`
    // touched it from a frame below this one, and mlock only pins the pages.
    unsafe { rustix::mm::mlock(bottom as *mut libc::c_void, top - bottom) }.map_err(Into::into)
}

/// Blocks every signal in the calling thread, so that SIGINT and SIGTERM reach the
/// coordinator and never interrupt a measuring thread.
pub fn block_all_signals() {
    // SAFETY: sigfillset initialises the set we own; pthread_sigmask only reads it.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut set);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

/// Touches `bytes` of the calling thread's stack so that no page fault lands in the
/// measurement (mlockall already does this when it succeeded; this covers `--no-mlock`).
#[inline(never)]
pub fn prefault_stack(bytes: usize) {
    const CHUNK: usize = 4096;
    fn touch(depth: usize) {
        let mut page = [0u8; CHUNK];
        std::hint::black_box(&mut page);
        if depth > 1 {
            touch(depth - 1);
        }
        std::hint::black_box(&page);
    }
    touch(bytes / CHUNK);
}

/// Counters the kernel keeps for the calling thread.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ThreadCounters {
    pub involuntary_switches: u64,
    pub voluntary_switches: u64,
    /// `se.nr_migrations` from `/proc/thread-self/sched`, when the kernel has it.
    pub migrations: Option<u64>,
}

impl ThreadCounters {
    pub fn read() -> ThreadCounters {
        // SAFETY: getrusage writes into a zeroed rusage we own.
        let usage = unsafe {
            let mut ru: libc::rusage = std::mem::zeroed();
            libc::getrusage(libc::RUSAGE_THREAD, &mut ru);
            ru
        };
        ThreadCounters {
            involuntary_switches: usage.ru_nivcsw as u64,
            voluntary_switches: usage.ru_nvcsw as u64,
            migrations: read_sched_field("se.nr_migrations"),
        }
    }

    /// What happened between two readings.
    pub fn since(&self, earlier: &ThreadCounters) -> ThreadCounters {
        ThreadCounters {
            involuntary_switches: self.involuntary_switches - earlier.involuntary_switches,
            voluntary_switches: self.voluntary_switches - earlier.voluntary_switches,
            migrations: match (self.migrations, earlier.migrations) {
                (Some(a), Some(b)) => Some(a - b),
                _ => None,
            },
        }
    }
}

fn read_sched_field(name: &str) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/thread-self/sched").ok()?;
    parse_sched_field(&text, name)
}

fn parse_sched_field(text: &str, name: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        (key.trim() == name).then(|| value.trim().parse().ok())?
    })
}

/// The process's peak resident set size in KiB (`ru_maxrss`).
pub fn peak_rss_kib() -> u64 {
    // SAFETY: getrusage writes into a zeroed rusage we own.
    let usage = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        ru
    };
    usage.ru_maxrss.max(0) as u64
}

// Placing a deadline thread: here rather than in `deadline`, which `sched` builds on.

/// The `cgroup.threads` file each measured CPU's deadline thread joins before it is
/// pinned, where a cgroup v2 partition is the CPU's root domain: the partition's CPUs
/// leave every other cgroup, so a thread must be inside it to be pinned there. Set for a
/// run by the root domain's guard and cleared by it; empty otherwise (cgroup v1's
/// exclusive cpusets need no thread inside them).
static JOIN: Mutex<Vec<(usize, PathBuf)>> = Mutex::new(Vec::new());

/// Sets the groups deadline threads join, by CPU (empty: none).
pub fn join_before_pin(groups: Vec<(usize, PathBuf)>) {
    *JOIN.lock().unwrap_or_else(|p| p.into_inner()) = groups;
}

/// Places the calling thread as a deadline thread is placed before it becomes one: in
/// its CPU's group, if it has one, then pinned to the CPU.
pub fn place(cpu: usize) -> Result<(), SchedError> {
    let file = (JOIN.lock().unwrap_or_else(|p| p.into_inner()).iter())
        .find(|(c, _)| *c == cpu)
        .map(|(_, f)| f.clone());
    if let Some(file) = file {
        let tid = rustix::thread::gettid().as_raw_nonzero().get();
        std::fs::write(&file, tid.to_string()).map_err(|e| SchedError::Deadline {
            cpu,
            reason: format!("cannot join {}: {e}", file.display()),
        })?;
    }
    pin_to(cpu)
}

/// Why the kernel refused a deadline thread placed as a measuring thread is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// In words a user can act on (`explain_refusal`).
    pub why: String,
    /// The refusal is admission control's for a pinned thread (EPERM while holding
    /// CAP_SYS_NICE): a root domain of the CPU's own is what the thread lacks.
    pub root_domain: bool,
}

/// Tries `d` on a short-lived thread placed on `cpu` (`place`), or left where it is.
pub fn try_on(d: super::deadline::Deadline, cpu: Option<usize>) -> Result<(), Refused> {
    std::thread::spawn(move || {
        if let Some(cpu) = cpu {
            place(cpu).map_err(|e| Refused {
                why: e.to_string(),
                root_domain: false,
            })?;
        }
        super::deadline::set(d).map_err(|e| Refused {
            why: super::deadline::explain_refusal(&e),
            root_domain: e.raw_os_error() == Some(libc::EPERM)
                && super::caps::holds(rustix::thread::CapabilitySet::SYS_NICE),
        })
    })
    .join()
    .unwrap_or_else(|_| {
        Err(Refused {
            why: "the trial thread panicked".into(),
            root_domain: false,
        })
    })
}

/// Tries `req` on a short-lived thread, so that a refusal can be reported once, before
/// the run, rather than by every worker after it. A deadline thread is refused for a
/// narrow affinity, so it is tried pinned, as the measuring threads will be, on the last
/// allowed CPU (the first is housekeeping's); `preflight_on` names the CPU.
pub fn preflight(req: SchedRequest) -> Result<(), String> {
    let last = current_affinity()
        .ok()
        .and_then(|c| c.cpus().last().copied());
    preflight_on(req, last)
}

/// `preflight` with a deadline thread placed on `cpu` (a measured one) as its measuring
/// thread will be.
pub fn preflight_on(req: SchedRequest, cpu: Option<usize>) -> Result<(), String> {
    match req.policy {
        _ if !req.policy.is_realtime() => Ok(()),
        Policy::Deadline(d) => try_on(d, cpu).map_err(|r| r.why),
        _ => std::thread::spawn(move || set_policy(req).map_err(|e| explain_refusal(&e)))
            .join()
            .unwrap_or_else(|_| Err("the preflight thread panicked".into())),
    }
}

/// `/proc/sys/kernel/sched_rt_runtime_us`: -1 means real-time threads are never throttled.
pub fn rt_runtime_us() -> Option<i64> {
    std::fs::read_to_string("/proc/sys/kernel/sched_rt_runtime_us")
        .ok()?
        .trim()
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_sched_file() {
        let text = "worker (1234, #threads: 3)\n----\nse.exec_start  :  1.5\n\
                    se.nr_migrations                             :                    7\n";
        assert_eq!(parse_sched_field(text, "se.nr_migrations"), Some(7));
        assert_eq!(parse_sched_field(text, "nr_switches"), None);
    }

    /// Another thread's policy as set, in words; none once it has ended.
    #[test]
    fn another_threads_policy_is_read_in_words() {
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let h = std::thread::spawn(move || {
            let tid = rustix::thread::gettid().as_raw_nonzero().get() as u32;
            // Raising nice to 19 needs no privilege.
            // SAFETY: a plain syscall on this thread's own id.
            unsafe { libc::setpriority(libc::PRIO_PROCESS, tid, 19) };
            tx.send(tid).unwrap();
            done_rx.recv().unwrap();
        });
        let tid = rx.recv().unwrap();
        assert_eq!(policy_of(tid).as_deref(), Some("SCHED_OTHER nice 19"));
        done_tx.send(()).unwrap();
        h.join().unwrap();
        // The kernel releases the task a moment after the join.
        let gone = (0..1000).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(1));
            policy_of(tid).is_none()
        });
        assert!(gone, "thread {tid} still has a policy after it ended");
        assert_eq!(policy_name(1), "SCHED_FIFO");
    }

    #[test]
    fn pinning_really_moves_the_thread() {
        let usable = current_affinity().unwrap();
        for &cpu in usable.cpus() {
            std::thread::spawn(move || {
                pin_to(cpu).unwrap();
                assert_eq!(sched_getcpu(), cpu);
                assert_eq!(current_affinity().unwrap().cpus(), &[cpu]);
            })
            .join()
            .unwrap();
        }
    }

    #[test]
    fn affinity_guard_restores() {
        std::thread::spawn(|| {
            let before = current_affinity().unwrap();
            {
                let _g = AffinityGuard::pin(&CpuList::from_cpus(vec![before.cpus()[0]])).unwrap();
                assert_eq!(current_affinity().unwrap().len(), 1);
            }
            assert_eq!(current_affinity().unwrap(), before);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn policy_names_round_trip() {
        for p in [Policy::Other, Policy::Fifo, Policy::Rr] {
            assert_eq!(p.to_string().parse::<Policy>().unwrap(), p);
        }
        assert!("batch".parse::<Policy>().is_err());
    }

    #[test]
    fn counters_move_forward() {
        let a = ThreadCounters::read();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = ThreadCounters::read();
        assert!(
            b.voluntary_switches > a.voluntary_switches,
            "a sleep is a voluntary switch"
        );
    }
}
