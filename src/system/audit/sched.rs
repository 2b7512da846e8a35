//! Scheduling and watchdogs: RT throttling and (6.12+) the fair server, the preemption
//! model, timer migration, the NMI and soft-lockup watchdogs and the hung-task detector.

use super::{Area, Finding, FindingId as Id, Host, Missing, Severity, finding, short};
use crate::system::finding_id::Check;
use crate::system::kernel;

pub(super) fn scheduling(h: &Host) -> Vec<Finding> {
    let mut out = vec![rt_throttling(h)];
    out.extend(fair_server(h));
    out.push(preemption(h));
    out.push(timer_migration(h));
    out
}

fn rt_throttling(h: &Host) -> Finding {
    // On PREEMPT_RT the CPU's own timer and RCU work are FIFO 1 threads (issue 48).
    let rt = super::rt_threads::preempt_rt(h);
    let why = match rt {
        true => {
            "RT throttling stops a spinning SCHED_FIFO thread for the rest of each period; \
             on this PREEMPT_RT kernel that is also when a spinner above FIFO 1 lets its \
             CPU's ktimers and rcuc threads run"
        }
        false => "RT throttling stops a spinning SCHED_FIFO thread for the rest of each period",
    };
    let off = match rt {
        true => {
            "no safety net: a runaway real-time thread can starve its CPU, and on this \
             PREEMPT_RT kernel one above FIFO 1 starves the CPU's timers (ktimers) and RCU \
             (rcuc)"
        }
        false => "no safety net: a runaway real-time thread can starve its CPU",
    };
    match h.read_int("/proc/sys/kernel/sched_rt_runtime_us") {
        Ok(-1) => finding(Area::Scheduling, Id::RtThrottlingOff, Severity::Ok, "-1").why(off),
        Ok(v) => finding(
            Area::Scheduling,
            Id::RtThrottlingOn,
            Severity::Warn,
            format!("{v} µs per period"),
        )
        .why(why)
        .sysctl(h, "kernel.sched_rt_runtime_us", "-1"),
        Err(e) => e.finding(Area::Scheduling, Check::RtThrottling),
    }
}

/// Since 6.12 a deadline server runs the fair class for a while each period even when
/// a SCHED_FIFO thread spins, whatever sched_rt_runtime_us says.
fn fair_server(h: &Host) -> Option<Finding> {
    let release = h.read("/proc/sys/kernel/osrelease").ok()?;
    let new = kernel::release_version(&release).is_some_and(|v| v >= (6, 12));
    let dir = "/sys/kernel/debug/sched/fair_server";
    let why = "the fair server (a deadline server, since 6.12) lets normal tasks run for \
               its runtime each period on a CPU where a SCHED_FIFO thread spins, even \
               with sched_rt_runtime_us = -1";
    let mut seen = Vec::new();
    let mut effects = Vec::new();
    let mut readable = false;
    for cpu in h.measured.cpus() {
        let path = format!("{dir}/cpu{cpu}/runtime");
        if let Ok(v) = h.read_int(&path) {
            readable = true;
            seen.push(format!("cpu{cpu}: {v} ns"));
            if v > 0 {
                effects.push(super::Effect::Write {
                    path,
                    value: "0".into(),
                });
            }
        }
    }
    if !readable && !new {
        return None;
    }
    if readable && effects.is_empty() {
        return Some(
            finding(
                Area::Scheduling,
                Id::FairServerOff,
                Severity::Ok,
                seen.join(", "),
            )
            .why(why),
        );
    }
    let f = if readable {
        let cmd = effects
            .iter()
            .filter_map(|e| match e {
                super::Effect::Write { path, value } => Some(format!("echo {value} > {path}")),
                super::Effect::Affinity { .. } => None,
            })
            .collect::<Vec<_>>()
            .join("; ");
        finding(
            Area::Scheduling,
            Id::FairServerOn,
            Severity::Info,
            seen.join(", "),
        )
        .why(why)
        .now(cmd, effects)
    } else {
        finding(
            Area::Scheduling,
            Id::FairServerOn,
            Severity::Info,
            format!("kernel {release} (6.12 or later); {dir} unreadable (debugfs not mounted)"),
        )
        .why(why)
        .manual(format!(
            "mount -t debugfs none /sys/kernel/debug, then echo 0 > {dir}/cpu{}/runtime \
             (only when the spinner leaves its CPU now and then)",
            h.measured
        ))
    };
    Some(f)
}

/// The preemption model and where it was read: PREEMPT_RT from the version string,
/// else debugfs, else the kernel log ("Dynamic Preempt: none"), else `preempt=` on the
/// command line, else the kernel config's default, else the version's build flags.
fn preemption(h: &Host) -> Finding {
    let version = match h.read("/proc/version") {
        Ok(v) => v,
        Err(e) => return e.finding(Area::Scheduling, Check::Preempt),
    };
    let words: Vec<&str> = version.split_whitespace().collect();
    let debug = "/sys/kernel/debug/sched/preempt";
    let dynamic = words.contains(&"PREEMPT_DYNAMIC") || h.config.enabled("CONFIG_PREEMPT_DYNAMIC");
    let (model, source) = if words.contains(&"PREEMPT_RT") {
        ("rt".to_string(), "uname")
    } else if let Ok(t) = h.read(debug) {
        match t
            .split_whitespace()
            .find_map(|w| w.strip_prefix('(')?.strip_suffix(')'))
        {
            Some(m) => (m.to_string(), "debugfs"),
            None => {
                return Missing::Unparseable(format!("{debug}: {:?}", short(&t)))
                    .finding(Area::Scheduling, Check::Preempt);
            }
        }
    } else if let Some(m) = h.log.as_deref().and_then(kernel::dynamic_preempt_from_log) {
        (m, "kernel log: Dynamic Preempt")
    } else if let Some(m) = h.cmdline().get("preempt") {
        (m.to_string(), "preempt= on the command line")
    } else if let Some(m) = h.config.default_preemption() {
        (m.to_string(), "kernel config default")
    } else if dynamic {
        return finding(
            Area::Scheduling,
            Id::PreemptDynamicUnknown,
            Severity::Info,
            format!("PREEMPT_DYNAMIC; unreadable: {debug}, the kernel log and the kernel config"),
        )
        .why("the preemption mode is chosen at boot; debugfs or the kernel log tells which")
        .manual("run the audit as root (it reads the kernel log), or mount debugfs");
    } else if words.contains(&"PREEMPT") {
        ("full".to_string(), "uname")
    } else {
        ("none or voluntary".to_string(), "uname")
    };
    preempt_finding(h, &model, source, dynamic)
}

fn preempt_finding(h: &Host, model: &str, source: &str, dynamic: bool) -> Finding {
    let why = "with less preemption a woken high-priority thread \
               waits for the kernel to reach a preemption point";
    let value = format!("{model} ({source})");
    match model {
        "rt" => finding(Area::Scheduling, Id::PreemptRt, Severity::Ok, value).why(why),
        // Lazy preemption still preempts at once for real-time tasks.
        "full" | "lazy" => finding(Area::Scheduling, Id::PreemptFull, Severity::Ok, value).why(why),
        _ => {
            let mut f =
                finding(Area::Scheduling, Id::PreemptLimited, Severity::Warn, value).why(why);
            if dynamic {
                f = f.echo(h, "/sys/kernel/debug/sched/preempt", "full");
            }
            if dynamic || !h.config.known() {
                f.boot(h, &["preempt=full".to_string()])
            } else {
                f.remedy(super::Remedy::KernelBuild {
                    config: vec!["CONFIG_PREEMPT=y (or CONFIG_PREEMPT_RT=y)".into()],
                    options: Vec::new(),
                    how: h.build_how(),
                })
            }
        }
    }
}

fn timer_migration(h: &Host) -> Finding {
    let why =
        "timer migration lets idle CPUs hand their timers to busy ones, such as a CPU that polls";
    match h.read_int("/proc/sys/kernel/timer_migration") {
        Ok(0) => finding(Area::Scheduling, Id::TimerMigrationOff, Severity::Ok, "0").why(why),
        Ok(v) => finding(
            Area::Scheduling,
            Id::TimerMigrationOn,
            Severity::Warn,
            v.to_string(),
        )
        .why(why)
        .sysctl(h, "kernel.timer_migration", "0"),
        Err(e) => e.finding(Area::Scheduling, Check::TimerMigration),
    }
}

pub(super) fn watchdogs(h: &Host) -> Vec<Finding> {
    vec![nmi_watchdog(h), soft_watchdog(h), hung_task(h)]
}

fn nmi_watchdog(h: &Host) -> Finding {
    let why = "the hard-lockup detector fires a perf NMI on every CPU every few seconds";
    match h.read_int("/proc/sys/kernel/nmi_watchdog") {
        Ok(0) => finding(Area::Watchdog, Id::NmiWatchdogOff, Severity::Ok, "0").why(why),
        Ok(v) => finding(
            Area::Watchdog,
            Id::NmiWatchdogOn,
            Severity::Warn,
            v.to_string(),
        )
        .why(why)
        .sysctl(h, "kernel.nmi_watchdog", "0")
        .boot(h, &["nmi_watchdog=0".to_string()]),
        Err(e) => e.finding(Area::Watchdog, Check::NmiWatchdog),
    }
}

fn soft_watchdog(h: &Host) -> Finding {
    let why = "the soft-lockup detector runs a timer and a stopper thread on each CPU in its mask";
    let mask = h.read_list("/proc/sys/kernel/watchdog_cpumask");
    match (h.read_int("/proc/sys/kernel/watchdog"), mask) {
        (Ok(0), _) => finding(Area::Watchdog, Id::SoftWatchdogOff, Severity::Ok, "0").why(why),
        (Ok(_), Ok(m)) if m.intersect(&h.measured).is_empty() => finding(
            Area::Watchdog,
            Id::SoftWatchdogExcludesMeasured,
            Severity::Ok,
            format!("on, cpumask {m}"),
        )
        .why(why),
        (Ok(_), Ok(m)) => {
            let f = finding(
                Area::Watchdog,
                Id::SoftWatchdogOn,
                Severity::Warn,
                format!("on, cpumask {m}"),
            )
            .why(why);
            let f = if h.housekeeping.is_empty() {
                f.sysctl(h, "kernel.watchdog", "0")
            } else {
                f.sysctl(h, "kernel.watchdog_cpumask", &h.housekeeping.to_string())
            };
            f.boot(h, &["nosoftlockup".to_string()])
        }
        (Ok(_), Err(e)) | (Err(e), _) => e.finding(Area::Watchdog, Check::SoftWatchdog),
    }
}

fn hung_task(h: &Host) -> Finding {
    let why = "khungtaskd wakes every hung_task_timeout_secs (at most every 120 s) and \
               walks every task, on whichever CPU it runs";
    match h.read_int("/proc/sys/kernel/hung_task_timeout_secs") {
        Ok(0) => finding(Area::Watchdog, Id::HungTaskOff, Severity::Ok, "0").why(why),
        Ok(v) => finding(
            Area::Watchdog,
            Id::HungTaskOn,
            Severity::Info,
            format!("{v} s"),
        )
        .why(why)
        .sysctl(h, "kernel.hung_task_timeout_secs", "0"),
        Err(e) => e.finding(Area::Watchdog, Check::HungTask),
    }
}
