//! SCHED_DEADLINE for a measuring thread: its three parameters, the `sched_setattr` and
//! `sched_getattr` calls (glibc has no wrapper and rustix lacks them, so they are raw
//! syscalls on libc's `sched_attr`), and the refusals in words a user can act on.
//!
//! While admission control is on, the kernel admits a deadline thread only when its
//! affinity spans its root domain (it sums bandwidths over a root domain): a thread pinned
//! to one CPU of a multi-CPU domain is refused with EPERM, and a deadline thread cannot be
//! pinned afterwards (EBUSY). Widening the affinity and counting on the thread to stay put
//! does not hold: on a 6.18 guest under load, 770 of 919 timer wake-ups came on the other
//! CPU. So a measuring thread is pinned first. As root, the run then gives each measured
//! CPU a root domain of its own (`system::tune::root_domain`); otherwise, or where the
//! host forbids that, the refusal is said with its two fixes: a root domain of the CPU's
//! own, or admission control off (`sched_rt_runtime_us` -1), under which the kernel
//! takes the pinned thread.
#![allow(unsafe_code)]

use std::fmt;

/// The kernel's least runtime: 1 << DL_SCALE ns.
pub const MIN_RUNTIME_NS: u64 = 1024;
/// Below this runtime, enforcement at the scheduler tick (without HRTICK_DL) lets a job
/// overrun its budget by up to a tick: 4 ms at 250 Hz.
pub const HRTICK_BELOW_NS: u64 = 2_000_000;

/// SCHED_DEADLINE's parameters, in ns: every period the thread may run for `runtime`,
/// which the scheduler guarantees by `deadline` after the period's start.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Deadline {
    pub runtime_ns: u64,
    pub deadline_ns: u64,
    pub period_ns: u64,
    /// Added to each next thread's deadline and period (cyclicdeadline's `-s`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub step_ns: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Deadline {
    /// The parameters of the `index`-th thread: each next one `step_ns` longer.
    pub fn for_thread(self, index: usize) -> Deadline {
        let step = index as u64 * self.step_ns;
        Deadline {
            deadline_ns: self.deadline_ns + step,
            period_ns: self.period_ns + step,
            step_ns: 0,
            ..self
        }
    }

    /// runtime ≤ deadline ≤ period, within the kernel's limits, said in one line.
    pub fn check(&self) -> Result<(), String> {
        let (r, d, p) = (self.runtime_ns, self.deadline_ns, self.period_ns);
        if r < MIN_RUNTIME_NS {
            return Err(format!(
                "--runtime {}: SCHED_DEADLINE needs at least {MIN_RUNTIME_NS} ns",
                us(r)
            ));
        }
        if !(r <= d && d <= p) {
            return Err(format!(
                "--runtime {} --deadline {} --period {}: SCHED_DEADLINE needs runtime ≤ \
                 deadline ≤ period",
                us(r),
                us(d),
                us(p)
            ));
        }
        let limit = |name: &str| {
            std::fs::read_to_string(format!("/proc/sys/kernel/sched_deadline_{name}_us"))
                .ok()
                .and_then(|s| s.trim().parse::<u64>().ok())
        };
        if let Some(min) = limit("period_min").filter(|&m| p < m * 1000) {
            return Err(format!(
                "--period {}: under the kernel's sched_deadline_period_min_us ({min} µs)",
                us(p)
            ));
        }
        if let Some(max) = limit("period_max").filter(|&m| p > m * 1000) {
            return Err(format!(
                "--period {}: over the kernel's sched_deadline_period_max_us ({max} µs)",
                us(p)
            ));
        }
        Ok(())
    }

    /// The runtime's share of the period, as admission control sums it.
    pub fn bandwidth(&self) -> f64 {
        self.runtime_ns as f64 / self.period_ns.max(1) as f64
    }
}

/// "500 µs", "1.5 µs".
fn us(ns: u64) -> String {
    format!("{} µs", ns as f64 / 1e3)
}

impl fmt::Display for Deadline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "runtime {} deadline {} period {}",
            us(self.runtime_ns),
            us(self.deadline_ns),
            us(self.period_ns)
        )
    }
}

fn attr(d: Option<Deadline>) -> libc::sched_attr {
    let d = d.unwrap_or_default();
    libc::sched_attr {
        size: std::mem::size_of::<libc::sched_attr>() as u32,
        sched_policy: match d.runtime_ns {
            0 => libc::SCHED_OTHER as u32,
            _ => libc::SCHED_DEADLINE as u32,
        },
        sched_flags: 0,
        sched_nice: 0,
        sched_priority: 0,
        sched_runtime: d.runtime_ns,
        sched_deadline: d.deadline_ns,
        sched_period: d.period_ns,
    }
}

/// sched_setattr on the calling thread: SCHED_DEADLINE with `d`, or SCHED_OTHER for None.
fn setattr(d: Option<Deadline>) -> std::io::Result<()> {
    let a = attr(d);
    // SAFETY: `a` is a valid sched_attr whose `size` is its own size; pid 0 names the
    // calling thread, flags 0; the kernel only reads it.
    let rc = unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &a as *const _, 0) };
    match rc {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

/// The calling thread's deadline parameters, when it runs at SCHED_DEADLINE.
pub fn current() -> Option<Deadline> {
    let mut a = attr(None);
    // SAFETY: the kernel writes at most `size` bytes into `a`, which we own; pid 0 is the
    // calling thread.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_sched_getattr,
            0,
            &mut a as *mut _,
            std::mem::size_of::<libc::sched_attr>() as u32,
            0,
        )
    };
    (rc == 0 && a.sched_policy == libc::SCHED_DEADLINE as u32).then_some(Deadline {
        runtime_ns: a.sched_runtime,
        deadline_ns: a.sched_deadline,
        period_ns: a.sched_period,
        step_ns: 0,
    })
}

/// Makes the calling thread a deadline thread.
pub fn set(d: Deadline) -> std::io::Result<()> {
    setattr(Some(d))
}

/// Why root is refused a pinned deadline thread, and what to change.
pub const PINNED_WHY: &str = "EPERM with CAP_SYS_NICE: while admission control is on, the \
     kernel admits a deadline thread only with an affinity spanning its root domain, and a \
     measuring thread is pinned to one CPU. Either give the measured CPUs a root domain of \
     their own (run as root and jitterscope makes one for the run: a cpuset with \
     cpuset.cpu_exclusive 1 and the parent's cpuset.sched_load_balance 0), or turn \
     admission control off for the run with `sysctl kernel.sched_rt_runtime_us=-1` (it \
     also turns RT throttling off) and restore it after";

/// The refusal's second fix alone, for a run that could not make the root domain.
pub const ADMISSION_OFF: &str = "turn admission control off for the run with `sysctl \
     kernel.sched_rt_runtime_us=-1` (it also turns RT throttling off) and restore it after";

/// Explains a refused SCHED_DEADLINE in words a user can act on.
pub fn explain_refusal(err: &std::io::Error) -> String {
    match err.raw_os_error() {
        Some(libc::EBUSY) => "EBUSY: admission control refused the bandwidth: the deadline \
             tasks' runtime/period summed over the root domain's CPUs would pass \
             sched_rt_runtime_us/sched_rt_period_us of each; lower --runtime, lengthen \
             --period, or end other SCHED_DEADLINE tasks (`ps -eo pid,cls,comm | grep DLN`)"
            .to_string(),
        Some(libc::EPERM) if !super::caps::holds(rustix::thread::CapabilitySet::SYS_NICE) => {
            "EPERM: SCHED_DEADLINE \
             needs CAP_SYS_NICE (no rlimit grants it): run as root, `setcap cap_sys_nice+ep` \
             the binary, or --cap-add SYS_NICE in a container"
                .to_string()
        }
        Some(libc::EPERM) => PINNED_WHY.to_string(),
        Some(libc::EINVAL) => "EINVAL: the kernel refused the runtime, deadline or period \
             (see /proc/sys/kernel/sched_deadline_period_{min,max}_us)"
            .to_string(),
        _ => err.to_string(),
    }
}

/// Why a runtime may be enforced at tick granularity, or None when it cannot be: at or
/// above `HRTICK_BELOW_NS`, or with HRTICK_DL seen on in the scheduler's features.
pub fn tick_enforced(d: &Deadline) -> Option<String> {
    if d.runtime_ns >= HRTICK_BELOW_NS {
        return None;
    }
    let features = std::fs::read_to_string("/sys/kernel/debug/sched/features");
    let why = match features {
        Ok(f) if f.split_whitespace().any(|x| x == "HRTICK_DL") => return None,
        Ok(_) => "HRTICK_DL is off in /sys/kernel/debug/sched/features".to_string(),
        Err(e) => format!("/sys/kernel/debug/sched/features is unreadable ({e})"),
    };
    Some(format!(
        "the {} runtime is under 2 ms and {why}: the kernel enforces it at the scheduler \
         tick, so a job may overrun its runtime by up to a tick before it is throttled. \
         `echo HRTICK_DL > /sys/kernel/debug/sched/features` as root (debugfs mounted, no \
         lockdown) enforces it to the µs",
        us(d.runtime_ns)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::cpu::current_affinity;
    use rustix::thread::sched_getcpu;

    fn dl(r: u64, d: u64, p: u64) -> Deadline {
        Deadline {
            runtime_ns: r,
            deadline_ns: d,
            period_ns: p,
            step_ns: 0,
        }
    }

    #[test]
    fn runtime_deadline_and_period_must_be_ordered() {
        assert!(dl(500_000, 1_000_000, 1_000_000).check().is_ok());
        let e = dl(600_000, 500_000, 1_000_000).check().unwrap_err();
        assert!(e.contains("runtime ≤ deadline ≤ period"), "{e}");
        assert!(dl(100_000, 2_000_000, 1_000_000).check().is_err());
        assert!(dl(100, 1_000_000, 1_000_000).check().is_err());
    }

    #[test]
    fn each_next_thread_steps_its_deadline_and_period() {
        let d = Deadline {
            step_ns: 100_000,
            ..dl(200_000, 1_000_000, 1_000_000)
        };
        let third = d.for_thread(2);
        assert_eq!(third, dl(200_000, 1_200_000, 1_200_000));
    }

    /// A thread pinned to one CPU gets SCHED_DEADLINE where admission control allows it,
    /// with the parameters set; refused, it is refused for a reason `explain_refusal` names.
    #[test]
    fn a_pinned_thread_becomes_a_deadline_thread_or_is_told_why() {
        let cpus = current_affinity().unwrap();
        let cpu = *cpus.cpus().last().unwrap();
        let want = dl(100_000, 1_000_000, 1_000_000);
        std::thread::spawn(move || {
            let mut one = rustix::thread::CpuSet::new();
            one.set(cpu);
            rustix::thread::sched_setaffinity(None, &one).unwrap();
            match set(want) {
                Ok(()) => {
                    assert_eq!(current(), Some(want));
                    assert_eq!(sched_getcpu(), cpu);
                }
                Err(e) => {
                    let why = explain_refusal(&e);
                    assert!(
                        why.starts_with("EPERM") || why.starts_with("EBUSY"),
                        "{why}"
                    );
                    assert_eq!(current(), None);
                }
            }
        })
        .join()
        .unwrap();
    }

    /// EBUSY through the kernel: threads whose affinity spans the root domain (so that
    /// admission control takes them) reserve 70 % of a CPU each until the sum would pass
    /// what the root domain allows (95 % of each CPU by default); the one refused is said
    /// in one line with the fixes. A pinned measuring thread meets EPERM first (above), so
    /// this is the only way to EBUSY on a host with no exclusive cpuset to make.
    #[test]
    fn ebusy_from_admission_control_is_said_with_the_fixes() {
        let rt = std::fs::read_to_string("/proc/sys/kernel/sched_rt_runtime_us");
        if !rustix::process::geteuid().is_root() || rt.is_ok_and(|r| r.trim() == "-1") {
            eprintln!("SKIPPED ebusy_from_admission_control: needs root and admission control on");
            return;
        }
        let cpus = current_affinity().unwrap().cpus().len();
        let want = dl(700_000, 1_000_000, 1_000_000);
        let mut held = Vec::new();
        let mut refused = None;
        for _ in 0..=2 * cpus {
            let (result, got) = std::sync::mpsc::channel();
            let (stop, stopped) = std::sync::mpsc::channel::<()>();
            let h = std::thread::spawn(move || {
                let r = set(want).map_err(|e| explain_refusal(&e));
                let admitted = r.is_ok();
                result.send(r).unwrap();
                if admitted {
                    let _ = stopped.recv();
                }
            });
            match got.recv().unwrap() {
                Ok(()) => held.push((stop, h)),
                Err(why) => {
                    h.join().unwrap();
                    refused = Some(why);
                    break;
                }
            }
        }
        for (stop, h) in held {
            drop(stop);
            h.join().unwrap();
        }
        let why = refused.expect("a thread refused past the root domain's bandwidth");
        if why.starts_with("EPERM") && why.contains("root domain") {
            eprintln!(
                "SKIPPED ebusy_from_admission_control: the affinity does not span the root domain"
            );
            return;
        }
        assert!(why.starts_with("EBUSY"), "{why}");
        assert!(
            why.contains("lower --runtime") && !why.contains('\n'),
            "{why}"
        );
    }
}
