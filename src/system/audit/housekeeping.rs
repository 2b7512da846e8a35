//! Kernel threads and housekeeping: the unbound-workqueue cpumask, the per-workqueue
//! cpumasks (writeback among them), kernel threads that may run on the measured CPUs
//! (and whether they can be moved), tuned, and the measuring process itself.

use super::{
    Area, Effect, Finding, FindingId as Id, Host, Missing, Severity, finding, hex_mask,
    parse_hex_mask, process_comms, short,
};
use crate::engine::cpu::CpuList;
use crate::system::finding_id::Check;

pub(super) fn housekeeping(h: &Host) -> Vec<Finding> {
    let mut out = vec![workqueue(h)];
    out.extend(workqueues(h));
    out.push(kthreads(h));
    out.push(tuned(h));
    out.push(thread(h));
    out
}

const WQ: &str = "/sys/devices/virtual/workqueue";

/// The value to write to a workqueue cpumask: the housekeeping CPUs as a hex mask.
fn wq_fix(f: Finding, h: &Host, path: &str) -> Finding {
    if h.housekeeping.is_empty() {
        f.manual("leave a housekeeping CPU out of -a")
    } else {
        f.echo(h, path, &hex_mask(&h.housekeeping))
    }
}

fn workqueue(h: &Host) -> Finding {
    let path = format!("{WQ}/cpumask");
    let why = "unbound workqueue work (kworker/u*) runs on any CPU in this mask";
    let text = match h.read(&path) {
        Ok(t) => t,
        Err(e) => return e.finding(Area::Housekeeping, Check::Workqueue),
    };
    let Some(mask) = parse_hex_mask(&text) else {
        return Missing::Unparseable(format!("{path}: {:?}", short(&text)))
            .finding(Area::Housekeeping, Check::Workqueue);
    };
    let value = format!("{text} (CPUs {mask})");
    if mask.intersect(&h.measured).is_empty() {
        return finding(Area::Housekeeping, Id::WorkqueueOk, Severity::Ok, value).why(why);
    }
    wq_fix(
        finding(
            Area::Housekeeping,
            Id::WorkqueueOnMeasured,
            Severity::Warn,
            value,
        )
        .why(why),
        h,
        &path,
    )
}

/// Workqueues with their own sysfs cpumask (WQ_SYSFS): writeback is the one every
/// host has; each is checked, writeback under its own id.
fn workqueues(h: &Host) -> Vec<Finding> {
    let Ok(names) = h.list_dir(WQ) else {
        return Vec::new();
    };
    let mut hits = Vec::new();
    let mut ok = Vec::new();
    let mut out = Vec::new();
    for wq in names {
        let path = format!("{WQ}/{wq}/cpumask");
        let Ok(text) = h.read(&path) else { continue };
        let Some(mask) = parse_hex_mask(&text) else {
            out.push(
                Missing::Unparseable(format!("{path}: {:?}", short(&text)))
                    .finding(Area::Housekeeping, Check::Workqueues),
            );
            continue;
        };
        let on = !mask.intersect(&h.measured).is_empty();
        if wq == "writeback" {
            let why =
                "dirty-page writeback runs in this workqueue's kworkers, on any CPU of its mask";
            let value = format!("{text} (CPUs {mask})");
            out.push(if on {
                wq_fix(
                    finding(
                        Area::Housekeeping,
                        Id::WritebackOnMeasured,
                        Severity::Warn,
                        value,
                    )
                    .why(why),
                    h,
                    &path,
                )
            } else {
                finding(Area::Housekeeping, Id::WritebackOk, Severity::Ok, value).why(why)
            });
        } else if on {
            hits.push((wq, path, mask));
        } else {
            ok.push(wq);
        }
    }
    let why = "these workqueues have their own cpumask; their work runs on any CPU in it";
    if !hits.is_empty() {
        let value = hits
            .iter()
            .map(|(w, _, m)| format!("{w} ({m})"))
            .collect::<Vec<_>>()
            .join(", ");
        let mut f = finding(
            Area::Housekeeping,
            Id::WorkqueuesOnMeasured,
            Severity::Warn,
            value,
        )
        .why(why);
        for (_, path, _) in &hits {
            f = wq_fix(f, h, path);
        }
        out.push(f);
    } else if !ok.is_empty() {
        out.push(
            finding(
                Area::Housekeeping,
                Id::WorkqueuesOk,
                Severity::Ok,
                ok.join(", "),
            )
            .why(why),
        );
    }
    out
}

/// PF_NO_SETAFFINITY: the kernel refuses sched_setaffinity (taskset) for this thread.
pub(super) const PF_NO_SETAFFINITY: u64 = 0x0400_0000;

/// Kernel threads watched: those the kernel's per-CPU kthread guide names as movable
/// or as running on any CPU. Per-CPU threads bound to one CPU (ksoftirqd/1,
/// kworker/1:0, migration/1) are that CPU's by design and left out, except IRQ threads.
const WATCHED: [&str; 11] = [
    "rcu",
    "kworker",
    "watchdog",
    "kdamond",
    "kcompactd",
    "khugepaged",
    "ksmd",
    "kswapd",
    "khungtaskd",
    "irq/",
    "oom_reaper",
];

/// A kernel thread's allowed CPUs and its flags; `None` for a user process.
pub(super) fn kthread_info(h: &Host, pid: &str) -> Option<(CpuList, u64)> {
    let status = h.read(&format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(str::trim)
    };
    if !matches!(field("PPid:"), Some("0" | "2")) {
        return None;
    }
    let cpus = CpuList::parse_kernel(field("Cpus_allowed_list:")?).ok()?;
    // The 9th field of stat, after the comm in parentheses (which may hold spaces).
    let flags = h
        .read(&format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            let (_, rest) = s.rsplit_once(')')?;
            rest.split_whitespace().nth(6)?.parse().ok()
        })
        .unwrap_or(0);
    Some((cpus, flags))
}

fn kthreads(h: &Host) -> Finding {
    let procs = match process_comms(h) {
        Ok(p) => p,
        Err(e) => return e.finding(Area::Housekeeping, Check::Kthreads),
    };
    let (mut hits, mut stuck, mut movable) = (Vec::new(), Vec::new(), Vec::new());
    for (pid, comm) in procs {
        if !WATCHED.iter().any(|w| comm.starts_with(w)) {
            continue;
        }
        let Some((allowed, flags)) = kthread_info(h, &pid) else {
            continue;
        };
        let irq_thread = comm.starts_with("irq/");
        if allowed.intersect(&h.measured).is_empty() || (allowed.len() < 2 && !irq_thread) {
            continue;
        }
        // kworkers last: they are many, and follow the workqueue masks.
        hits.push((
            comm.starts_with("kworker"),
            format!("{comm} ({pid}: {allowed})"),
        ));
        if flags & PF_NO_SETAFFINITY != 0 || irq_thread {
            stuck.push(comm);
        } else if let Ok(p) = pid.parse::<u32>() {
            movable.push(p);
        }
    }
    let why = "these kernel threads may be scheduled on a measured CPU";
    if hits.is_empty() {
        return finding(
            Area::Housekeeping,
            Id::KthreadsOk,
            Severity::Ok,
            format!("none of {}* may run there", WATCHED.join("*, ")),
        )
        .why(why);
    }
    hits.sort_by_key(|h| h.0);
    let hits: Vec<String> = hits.into_iter().map(|h| h.1).collect();
    let shown = hits.len().min(12);
    let more = if hits.len() > shown {
        format!(" and {} more", hits.len() - shown)
    } else {
        String::new()
    };
    let mut f = finding(
        Area::Housekeeping,
        Id::KthreadsOnMeasured,
        Severity::Warn,
        format!("{}{more}", hits[..shown].join(", ")),
    )
    .why(why);
    if !movable.is_empty() && !h.housekeeping.is_empty() {
        let pids: Vec<String> = movable.iter().map(u32::to_string).collect();
        let effects = movable
            .iter()
            .map(|p| Effect::Affinity {
                pid: *p,
                cpus: h.housekeeping.clone(),
            })
            .collect();
        // A thread may exit before its turn (khugepaged when THP goes to never, kdamond
        // when DAMON stops): it is skipped rather than failing the loop.
        f = f.now(
            format!(
                "for p in {}; do if [ -d /proc/$p ]; then taskset -pc {} $p; fi; done",
                pids.join(" "),
                h.hk()
            ),
            effects,
        );
    }
    if !stuck.is_empty() {
        f = f.manual(
            "kworkers follow the workqueue cpumasks (workqueue-*), IRQ threads their IRQ's \
             affinity (irq-*); other per-CPU threads refuse taskset (PF_NO_SETAFFINITY)",
        );
    }
    f
}

fn tuned(h: &Host) -> Finding {
    let path = "/etc/tuned/active_profile";
    if h.container.is_some() {
        return Missing::Hidden(format!("{path} is the container's, not the node's"))
            .finding(Area::Housekeeping, Check::Tuned);
    }
    let why = "tuned re-applies its profile's settings at boot and may undo manual tuning";
    let latency = [
        "realtime",
        "cpu-partitioning",
        "latency-performance",
        "network-latency",
    ];
    match std::fs::read_to_string(h.path(path)) {
        Ok(p)
            if latency
                .iter()
                .any(|l| p.split_whitespace().any(|w| w.starts_with(l))) =>
        {
            finding(
                Area::Housekeeping,
                Id::TunedLatencyProfile,
                Severity::Ok,
                p.trim(),
            )
            .why(why)
        }
        Ok(p) => finding(
            Area::Housekeeping,
            Id::TunedOtherProfile,
            Severity::Warn,
            p.trim(),
        )
        .why(why)
        .manual(
            "tuned-adm profile latency-performance (or cpu-partitioning with isolated_cores set)",
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => finding(
            Area::Housekeeping,
            Id::TunedAbsent,
            Severity::Info,
            format!("no {path}"),
        )
        .why("tuned is not in use: nothing re-applies (or undoes) the settings above at boot"),
        Err(e) => {
            Missing::Unreadable(format!("{path}: {e}")).finding(Area::Housekeeping, Check::Tuned)
        }
    }
}

/// The audit's own process: the affinity, policy and timer slack a program started
/// from the same shell inherits. A cpuset or taskset that leaves out a measured CPU
/// makes every measurement there fail.
fn thread(h: &Host) -> Finding {
    let status = match h.read("/proc/self/status") {
        Ok(s) => s,
        Err(e) => return e.finding(Area::Housekeeping, Check::Thread),
    };
    let Some(allowed) = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .and_then(|l| CpuList::parse_kernel(l.trim()).ok())
    else {
        return Missing::Unparseable("/proc/self/status: no Cpus_allowed_list".into())
            .finding(Area::Housekeeping, Check::Thread);
    };
    let policy = h
        .read("/proc/self/stat")
        .ok()
        .and_then(|s| {
            let (_, rest) = s.rsplit_once(')')?;
            rest.split_whitespace().nth(38)?.parse().ok()
        })
        .map_or("?", crate::engine::sched::policy_name);
    let slack = h
        .read("/proc/self/timerslack_ns")
        .map_or("?".to_string(), |s| format!("{s} ns"));
    let value = format!("{policy}, timer slack {slack}, allowed CPUs {allowed}");
    let why = "a measuring thread inherits its starter's affinity (taskset, cgroup cpuset); \
               jitterscope then pins each thread, sets SCHED_FIFO (timer slack 0) and \
               mlocks; a program of your own should do the same";
    let lost = h.measured.without(&allowed);
    if lost.is_empty() {
        return finding(Area::Housekeeping, Id::ThreadOk, Severity::Ok, value).why(why);
    }
    finding(Area::Housekeeping, Id::ThreadNotTuned, Severity::Bad, value)
        .why(format!("measured CPUs {lost} are outside this process's allowed set; {why}"))
        .manual("start it from a shell (or cgroup) allowed on the measured CPUs: taskset -pc <all CPUs> $$")
}
