//! The kernel's own counters of what interrupts a CPU, read before and after a run: the
//! per-CPU interrupt counts of /proc/interrupts (device IRQs and the architecture's
//! vectors: local timer, IPIs), /proc/softirqs, steal time from /proc/stat, and the CPU
//! time of the kernel threads that may run on the measured CPUs.
//!
//! `snapshot` reads them (a few ms, from the housekeeping CPU, never inside a measuring
//! loop); `diff` is a pure function from two snapshots to what changed in between, the
//! units in the field names. `around` does both around a closure, the one call a
//! measuring command needs.
//!
//! The process's cgroup chain (`system::cgroup`) is read with them: each group's
//! `cpu.stat` (CFS quota periods and throttled time) and the CPU and IRQ pressure of the
//! system and of each group, so that a run stores what they did over it too.
//!
//! A kernel thread's CPU time (/proc/<pid>/schedstat) is not split by CPU in /proc: a
//! thread bound to one measured CPU ran there; one allowed on several may have run on
//! any of them (`allowed` says which), which only a trace can tell apart.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::engine::cpu::{CpuList, MAX_CPUS};
use crate::system::cgroup::{
    self, CfsBandwidth, Cgroups, CpuStat, Pressure, SystemPressure, Version,
};

/// Why a snapshot could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum CountersError {
    /// A file every Linux kernel has could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A file did not hold what the kernel writes there.
    #[error("{path}: {what}")]
    Parse { path: String, what: String },
    /// Two snapshots of different CPU sets cannot be compared.
    #[error("the snapshots are of different CPUs ({before} and {after})")]
    Mismatch { before: CpuList, after: CpuList },
}

/// One row of /proc/interrupts or /proc/softirqs, per CPU number.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CountRow {
    /// The IRQ number or vector (`36`, `LOC`, `CAL`) or softirq (`NET_RX`).
    pub name: String,
    /// The rest of the line: chip, hardware IRQ and device name, or the vector's name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// Count per CPU number (index = CPU; CPUs absent from the table count 0).
    pub per_cpu: Vec<u64>,
}

impl CountRow {
    fn on(&self, cpu: usize) -> u64 {
        self.per_cpu.get(cpu).copied().unwrap_or(0)
    }
}

/// One CPU's time from /proc/stat, in USER_HZ ticks converted to ms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuTime {
    pub cpu: usize,
    /// user + nice + system + idle + iowait + irq + softirq + steal (guest time is
    /// already inside user and nice: counting it again would inflate the total).
    pub total_ms: u64,
    pub steal_ms: u64,
}

/// A kernel thread that may run on a snapshot's CPUs, and its CPU time so far.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KthreadTime {
    pub pid: u32,
    pub comm: String,
    /// `Cpus_allowed_list`.
    pub allowed: CpuList,
    /// /proc/<pid>/schedstat's first field.
    pub cpu_time_ns: u64,
}

/// The counters at one instant, for the CPUs it was taken for.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    pub cpus: CpuList,
    /// CLOCK_MONOTONIC when it was taken.
    pub monotonic_ns: u64,
    pub interrupts: Vec<CountRow>,
    pub softirqs: Vec<CountRow>,
    pub cpu_time: Vec<CpuTime>,
    pub kthreads: Vec<KthreadTime>,
    /// The process's `cpu` and v2 chains, the two the deltas use (absent when
    /// /proc/self/cgroup cannot be read).
    pub cgroups: Option<Cgroups>,
    pub pressure: SystemPressure,
}

/// What a counter did on one CPU over the interval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CountDelta {
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    pub cpu: usize,
    pub count: u64,
}

/// Steal over the interval on one CPU.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StealDelta {
    pub cpu: usize,
    pub steal_ms: u64,
    pub total_ms: u64,
    /// steal / total, in percent (0 when no time passed).
    pub steal_pct: f64,
}

/// A kernel thread's CPU time over the interval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KthreadDelta {
    pub pid: u32,
    pub comm: String,
    pub allowed: CpuList,
    pub cpu_time_ns: u64,
}

/// What changed between two snapshots; only non-zero counts are kept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CounterDelta {
    pub cpus: CpuList,
    pub elapsed_ns: u64,
    /// Per IRQ or vector and CPU, largest first.
    pub interrupts: Vec<CountDelta>,
    /// Per softirq and CPU, largest first.
    pub softirqs: Vec<CountDelta>,
    pub steal: Vec<StealDelta>,
    /// Kernel threads that ran, most CPU time first.
    pub kthreads: Vec<KthreadDelta>,
    /// The cgroup chain's `cpu.stat` and the pressure over the interval (absent in
    /// results from before they were recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<CgroupDelta>,
}

/// What the process's cgroups and the pressure files did over the interval.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CgroupDelta {
    /// `cpu.stat` over the interval, per group on the `cpu` controller's chain, top first.
    pub cpu_stat: Vec<GroupStatDelta>,
    /// CPU and IRQ pressure over the interval: the system's, then each group's below the
    /// root of the v2 chain.
    pub pressure: Vec<PressureDelta>,
}

/// One group's `cpu.stat` over the interval, with its CFS quota as set at the end.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupStatDelta {
    /// The group's path in its hierarchy (`/jsq`).
    pub group: String,
    pub version: Version,
    /// `cpu.max 30000 100000` (v2) or `cpu.cfs_quota_us 30000, cpu.cfs_period_us 100000`
    /// (v1); absent when the group sets no quota.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cfs: Option<CfsBandwidth>,
    /// Periods, throttled periods and throttled time (summed over the group's run queues,
    /// one per CPU) over the interval.
    pub stat: CpuStat,
}

/// One pressure file over the interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PressureDelta {
    /// `cpu` or `irq`.
    pub resource: String,
    /// `system`, or the group's path.
    pub scope: String,
    /// Time some tasks stalled over the interval (`total=` of the `some` line), µs.
    pub some_us: u64,
    /// Time all tasks stalled (the `full` line), µs, where the file has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub full_us: Option<u64>,
    /// `avg10` of the `some` line at the end of the interval, percent.
    pub some_avg10_end_pct: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub full_avg10_end_pct: Option<f64>,
}

impl CounterDelta {
    /// The count of one interrupt row (`"LOC"`, `"36"`) on one CPU.
    pub fn interrupts_on(&self, name: &str, cpu: usize) -> u64 {
        self.interrupts
            .iter()
            .find(|d| d.name == name && d.cpu == cpu)
            .map_or(0, |d| d.count)
    }
}

/// The live host's counters for `cpus`.
pub fn snapshot(cpus: &CpuList) -> Result<Snapshot, CountersError> {
    snapshot_at(Path::new("/"), cpus)
}

/// Snapshots before and after `f`, and their difference: the one call a measuring command
/// makes around its run. The delta is an error when a snapshot failed; the run's own
/// result is returned either way.
pub fn around<T>(
    cpus: &CpuList,
    f: impl FnOnce() -> T,
) -> (T, Result<CounterDelta, CountersError>) {
    let before = snapshot(cpus);
    let out = f();
    let delta = before.and_then(|b| diff(&b, &snapshot(cpus)?));
    (out, delta)
}

/// The counters of the tree under `root` (a recorded one in tests).
pub fn snapshot_at(root: &Path, cpus: &CpuList) -> Result<Snapshot, CountersError> {
    let read = |rel: &str| {
        let path = root.join(rel);
        std::fs::read_to_string(&path).map_err(|source| CountersError::Read { path, source })
    };
    let monotonic_ns = {
        let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
        t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
    };
    let interrupts = parse_interrupts(&read("proc/interrupts")?)?;
    let softirqs = parse_softirqs(&read("proc/softirqs")?)?
        .into_iter()
        .map(|(name, per_cpu)| CountRow {
            name,
            description: String::new(),
            per_cpu,
        })
        .collect();
    let cpu_time = parse_stat(&read("proc/stat")?, cpus)?;
    Ok(Snapshot {
        cpus: cpus.clone(),
        monotonic_ns,
        interrupts,
        softirqs,
        cpu_time,
        kthreads: kthreads(root, cpus),
        cgroups: Cgroups::read_cpu_and_unified(root).ok(),
        pressure: cgroup::system_pressure(root),
    })
}

/// Rows whose first column is a CPU header (`CPU0 CPU1 …`): each row's counts by CPU
/// number. Rows with fewer counts than CPUs (`ERR`, `MIS`: system-wide) are left out.
fn parse_table(text: &str, path: &str) -> Result<Vec<(String, Vec<u64>, String)>, CountersError> {
    let mut lines = text.lines();
    let header = lines.next().unwrap_or_default();
    // A CPU number no kernel has (a damaged header) would size every row's vector.
    let cols: Vec<usize> = header
        .split_whitespace()
        .map(|c| c.strip_prefix("CPU").and_then(|n| n.parse().ok()))
        .map(|n| n.filter(|&n| n < MAX_CPUS))
        .collect::<Option<_>>()
        .ok_or_else(|| CountersError::Parse {
            path: path.into(),
            what: format!("header {:?} is not CPU0 CPU1 …", header.trim()),
        })?;
    if cols.is_empty() {
        return Err(CountersError::Parse {
            path: path.into(),
            what: "no CPU columns".into(),
        });
    }
    let width = cols.iter().max().map_or(0, |m| m + 1);
    let mut out = Vec::new();
    for line in lines {
        let Some((name, rest)) = line.trim_start().split_once(':') else {
            continue;
        };
        let mut words = rest.split_whitespace().peekable();
        let mut per_cpu = vec![0u64; width];
        let mut n = 0;
        while n < cols.len() {
            match words.peek().and_then(|w| w.parse::<u64>().ok()) {
                Some(v) => {
                    per_cpu[cols[n]] = v;
                    n += 1;
                    words.next();
                }
                None => break,
            }
        }
        if n < cols.len() {
            continue;
        }
        let description = words.collect::<Vec<_>>().join(" ");
        out.push((name.trim().to_string(), per_cpu, description));
    }
    Ok(out)
}

/// /proc/interrupts.
pub fn parse_interrupts(text: &str) -> Result<Vec<CountRow>, CountersError> {
    Ok(parse_table(text, "/proc/interrupts")?
        .into_iter()
        .map(|(name, per_cpu, description)| CountRow {
            name,
            description,
            per_cpu,
        })
        .collect())
}

/// /proc/softirqs: (name, count per CPU number).
pub fn parse_softirqs(text: &str) -> Result<Vec<(String, Vec<u64>)>, CountersError> {
    Ok(parse_table(text, "/proc/softirqs")?
        .into_iter()
        .map(|(n, c, _)| (n, c))
        .collect())
}

/// The `cpuN` lines of /proc/stat for `cpus` (public for the fuzz target).
pub fn parse_stat(text: &str, cpus: &CpuList) -> Result<Vec<CpuTime>, CountersError> {
    let ms_per_tick = 1000 / rustix::param::clock_ticks_per_second().max(1);
    cpus.cpus()
        .iter()
        .map(|cpu| {
            let tag = format!("cpu{cpu}");
            let bad = |what: String| CountersError::Parse {
                path: "/proc/stat".into(),
                what,
            };
            let line = text
                .lines()
                .find(|l| l.split_whitespace().next() == Some(&tag))
                .ok_or_else(|| bad(format!("no {tag} line")))?;
            let n: Vec<u64> = line
                .split_whitespace()
                .skip(1)
                .map(str::parse)
                .collect::<Result<_, _>>()
                .map_err(|_| bad(format!("{line:?}")))?;
            let (total, steal) =
                stat_total_and_steal(&n).ok_or_else(|| bad(format!("{line:?}")))?;
            Ok(CpuTime {
                cpu: *cpu,
                total_ms: total.saturating_mul(ms_per_tick),
                steal_ms: steal.saturating_mul(ms_per_tick),
            })
        })
        .collect()
}

/// (total, steal) ticks of a `cpuN` line's numbers: the first eight columns (user …
/// steal). guest and guest_nice are already counted in user and nice.
pub fn stat_total_and_steal(n: &[u64]) -> Option<(u64, u64)> {
    let steal = *n.get(7)?;
    // Saturating: a damaged line must not overflow (and panic in debug builds).
    let total = n.iter().take(8).fold(0u64, |t, &v| t.saturating_add(v));
    Some((total, steal))
}

/// Kernel threads (parent kthreadd) allowed on any of `cpus`, with their CPU time.
fn kthreads(root: &Path, cpus: &CpuList) -> Vec<KthreadTime> {
    let Ok(dir) = std::fs::read_dir(root.join("proc")) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in dir.filter_map(Result::ok) {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let base = root.join(format!("proc/{pid}"));
        let Ok(status) = std::fs::read_to_string(base.join("status")) else {
            continue;
        };
        let field = |k: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(k))
                .map(str::trim)
        };
        // kthreadd itself (pid 2, parent 0) and its children.
        if !(pid == 2 || field("PPid:") == Some("2")) {
            continue;
        }
        let Some(allowed) = field("Cpus_allowed_list:").and_then(|l| CpuList::parse_kernel(l).ok())
        else {
            continue;
        };
        if allowed.intersect(cpus).is_empty() {
            continue;
        }
        let cpu_time_ns = std::fs::read_to_string(base.join("schedstat"))
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse().ok())
            .unwrap_or(0);
        out.push(KthreadTime {
            pid,
            comm: field("Name:").unwrap_or("?").to_string(),
            allowed,
            cpu_time_ns,
        });
    }
    out.sort_by_key(|k| k.pid);
    out
}

/// What changed from `before` to `after` on their CPUs. Counters that went backwards
/// (a CPU hot-unplugged and back, a thread whose pid was reused) count as 0.
pub fn diff(before: &Snapshot, after: &Snapshot) -> Result<CounterDelta, CountersError> {
    if before.cpus != after.cpus {
        return Err(CountersError::Mismatch {
            before: before.cpus.clone(),
            after: after.cpus.clone(),
        });
    }
    let rows = |b: &[CountRow], a: &[CountRow]| {
        let old: BTreeMap<&str, &CountRow> = b.iter().map(|r| (r.name.as_str(), r)).collect();
        let mut out = Vec::new();
        for r in a {
            for &cpu in after.cpus.cpus() {
                let was = old.get(r.name.as_str()).map_or(0, |o| o.on(cpu));
                let count = r.on(cpu).saturating_sub(was);
                if count > 0 {
                    out.push(CountDelta {
                        name: r.name.clone(),
                        description: r.description.clone(),
                        cpu,
                        count,
                    });
                }
            }
        }
        out.sort_by_key(|d| std::cmp::Reverse(d.count));
        out
    };
    let steal = after
        .cpu_time
        .iter()
        .filter_map(|a| {
            let b = before.cpu_time.iter().find(|b| b.cpu == a.cpu)?;
            let total_ms = a.total_ms.saturating_sub(b.total_ms);
            let steal_ms = a.steal_ms.saturating_sub(b.steal_ms);
            let steal_pct = if total_ms == 0 {
                0.0
            } else {
                100.0 * steal_ms as f64 / total_ms as f64
            };
            Some(StealDelta {
                cpu: a.cpu,
                steal_ms,
                total_ms,
                steal_pct,
            })
        })
        .collect();
    let mut kthreads: Vec<KthreadDelta> = after
        .kthreads
        .iter()
        .filter_map(|a| {
            let b = before
                .kthreads
                .iter()
                .find(|b| b.pid == a.pid && b.comm == a.comm);
            let ns = a.cpu_time_ns.saturating_sub(b.map_or(0, |b| b.cpu_time_ns));
            (ns > 0 && b.is_some()).then(|| KthreadDelta {
                pid: a.pid,
                comm: a.comm.clone(),
                allowed: a.allowed.clone(),
                cpu_time_ns: ns,
            })
        })
        .collect();
    kthreads.sort_by_key(|k| std::cmp::Reverse(k.cpu_time_ns));
    Ok(CounterDelta {
        cpus: after.cpus.clone(),
        elapsed_ns: after.monotonic_ns.saturating_sub(before.monotonic_ns),
        interrupts: rows(&before.interrupts, &after.interrupts),
        softirqs: rows(&before.softirqs, &after.softirqs),
        steal,
        kthreads,
        cgroup: cgroup_delta(before, after),
    })
}

/// The cgroup counters' and the pressure files' change, where both snapshots have them.
fn cgroup_delta(before: &Snapshot, after: &Snapshot) -> Option<CgroupDelta> {
    let mut out = CgroupDelta::default();
    let (b, a) = (before.cgroups.as_ref(), after.cgroups.as_ref());
    if let (Some(b), Some(a)) = (b.and_then(Cgroups::cpu), a.and_then(Cgroups::cpu)) {
        for l in &a.levels {
            let was = b.levels.iter().find(|w| w.path == l.path);
            let (Some(now), Some(then)) = (l.stat, was.and_then(|w| w.stat)) else {
                continue;
            };
            out.cpu_stat.push(GroupStatDelta {
                group: l.path.clone(),
                version: a.version,
                quota: (l.cfs)
                    .filter(|c| c.quota_us.is_some())
                    .map(|c| c.setting(a.version)),
                cfs: l.cfs,
                stat: now.since(&then),
            });
        }
    }
    let (bp, ap) = (&before.pressure, &after.pressure);
    for (resource, then, now) in [("cpu", bp.cpu, ap.cpu), ("irq", bp.irq, ap.irq)] {
        out.pressure
            .extend(pressure_delta(resource, "system", then, now));
    }
    if let (Some(b), Some(a)) = (b.and_then(Cgroups::unified), a.and_then(Cgroups::unified)) {
        for l in a.levels.iter().filter(|l| l.path != "/") {
            let Some(was) = b.levels.iter().find(|w| w.path == l.path) else {
                continue;
            };
            for (resource, then, now) in [
                ("cpu", was.cpu_pressure, l.cpu_pressure),
                ("irq", was.irq_pressure, l.irq_pressure),
            ] {
                out.pressure
                    .extend(pressure_delta(resource, &l.path, then, now));
            }
        }
    }
    (!out.cpu_stat.is_empty() || !out.pressure.is_empty()).then_some(out)
}

fn pressure_delta(
    resource: &str,
    scope: &str,
    then: Option<Pressure>,
    now: Option<Pressure>,
) -> Option<PressureDelta> {
    let (then, now) = (then?, now?);
    let full = |p: &Pressure| p.full.map(|f| f.total_us);
    Some(PressureDelta {
        resource: resource.to_string(),
        scope: scope.to_string(),
        some_us: now.some.total_us.saturating_sub(then.some.total_us),
        full_us: full(&now).map(|n| n.saturating_sub(full(&then).unwrap_or(0))),
        some_avg10_end_pct: now.some.avg10,
        full_avg10_end_pct: now.full.map(|f| f.avg10),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const INTERRUPTS: &str = "           CPU0       CPU1       \n\
  24:          1          0  IO-APIC   5-edge      ACPI:Ged\n\
  36:          0      80089 PCI-MSIX-0000:00:02.0   1-edge      virtio1-req.0\n\
 LOC:     544622     820954   Local timer interrupts\n\
 ERR:          0\n";

    #[test]
    fn interrupt_rows_by_cpu_number() {
        let rows = parse_interrupts(INTERRUPTS).expect("parses");
        let names: Vec<&str> = rows.iter().map(|r| r.name.as_str()).collect();
        // ERR is system-wide: one count, not one per CPU.
        assert_eq!(names, ["24", "36", "LOC"]);
        assert_eq!(rows[1].per_cpu, [0, 80089]);
        assert!(rows[1].description.ends_with("virtio1-req.0"));
        assert_eq!(rows[2].description, "Local timer interrupts");
        // Columns are CPU numbers, not positions: CPU1 offline.
        let gap = parse_interrupts("  CPU0 CPU2\n LOC: 5 7 Local timer\n").expect("parses");
        assert_eq!(gap[0].per_cpu, [5, 0, 7]);
        assert!(parse_interrupts("garbage\n").is_err());
    }

    /// Fuzzing (issue 22) found a header naming CPU 6666666666666 asking for a row of
    /// that many counts: CPU numbers past what any thread can be pinned to are refused.
    #[test]
    fn issue22_a_header_with_an_impossible_cpu_is_refused() {
        let text = "  CPU0 CPU6666666666666\n LOC: 5 7 Local timer\n";
        assert!(parse_interrupts(text).is_err());
        assert!(parse_softirqs("  CPU0 CPU99999999999999999999999\n TIMER: 1 2\n").is_err());
        let last = format!("  CPU0 CPU{}\n LOC: 5 7\n", MAX_CPUS - 1);
        assert_eq!(
            parse_interrupts(&last).expect("parses")[0].per_cpu.len(),
            MAX_CPUS
        );
    }

    /// A /proc/stat line whose counts sum past 64 bits (a damaged file, read while
    /// fixing the above) saturates instead of overflowing.
    #[test]
    fn issue22_stat_counts_past_64_bits_saturate() {
        let big = u64::MAX;
        let n = [big, big, 0, 0, 0, 0, 0, 7];
        assert_eq!(stat_total_and_steal(&n), Some((u64::MAX, 7)));
        let text = format!("cpu0 {big} {big} 0 0 0 0 0 {big}\n");
        let t = parse_stat(&text, &CpuList::from_cpus(vec![0])).expect("parses");
        assert_eq!((t[0].total_ms, t[0].steal_ms), (u64::MAX, u64::MAX));
    }

    #[test]
    fn steal_counts_the_guest_columns_once() {
        // user nice system idle iowait irq softirq steal guest guest_nice
        let n = [100, 0, 50, 1000, 3, 0, 2, 45, 80, 0];
        assert_eq!(stat_total_and_steal(&n), Some((1200, 45)));
    }

    fn snap(loc: u64, steal_ms: u64, total_ms: u64, kt_ns: u64, t: u64) -> Snapshot {
        Snapshot {
            cpus: CpuList::from_cpus(vec![1]),
            monotonic_ns: t,
            interrupts: vec![CountRow {
                name: "LOC".into(),
                description: "Local timer interrupts".into(),
                per_cpu: vec![999, loc],
            }],
            softirqs: vec![],
            cpu_time: vec![CpuTime {
                cpu: 1,
                total_ms,
                steal_ms,
            }],
            kthreads: vec![KthreadTime {
                pid: 36,
                comm: "kcompactd0".into(),
                allowed: CpuList::from_cpus(vec![0, 1]),
                cpu_time_ns: kt_ns,
            }],
            cgroups: None,
            pressure: SystemPressure::default(),
        }
    }

    #[test]
    fn diff_is_what_changed_on_the_cpus_asked_for() {
        let d = diff(
            &snap(100, 10, 1000, 5, 0),
            &snap(350, 30, 2000, 905, 1_000_000_000),
        )
        .expect("same cpus");
        assert_eq!(d.elapsed_ns, 1_000_000_000);
        assert_eq!(d.interrupts_on("LOC", 1), 250);
        // CPU 0 is not asked for.
        assert_eq!(d.interrupts_on("LOC", 0), 0);
        assert_eq!(d.steal[0].steal_ms, 20);
        assert!((d.steal[0].steal_pct - 2.0).abs() < 1e-9);
        assert_eq!(d.kthreads[0].cpu_time_ns, 900);
        let mut other = snap(0, 0, 0, 0, 0);
        other.cpus = CpuList::from_cpus(vec![0]);
        assert!(diff(&other, &snap(0, 0, 0, 0, 0)).is_err());
    }

    fn with_group(mut s: Snapshot, throttled_ns: u64, psi_us: u64) -> Snapshot {
        use crate::system::cgroup::{Chain, Level, PsiLine};
        let psi = |total_us| Pressure {
            some: PsiLine {
                avg10: 1.5,
                total_us,
                ..PsiLine::default()
            },
            full: None,
        };
        let level = |path: &str, stat| Level {
            path: path.into(),
            dir: format!("/sys/fs/cgroup/cpu{path}"),
            cfs: Some(CfsBandwidth {
                quota_us: (path != "/").then_some(35_000),
                period_us: 100_000,
                burst_us: None,
            }),
            stat,
            ..Level::default()
        };
        let cpu = Chain {
            version: Version::V1,
            controllers: vec!["cpu".into()],
            mount: "/sys/fs/cgroup/cpu".into(),
            from_root: true,
            levels: vec![
                level("/", None),
                level(
                    "/jsq",
                    Some(CpuStat {
                        nr_periods: throttled_ns / 1_000_000,
                        nr_throttled: throttled_ns / 2_000_000,
                        throttled_ns,
                        ..CpuStat::default()
                    }),
                ),
            ],
        };
        s.cgroups = Some(Cgroups {
            pid: None,
            chains: vec![cpu],
        });
        s.pressure = SystemPressure {
            cpu: Some(psi(psi_us)),
            irq: None,
        };
        s
    }

    /// A run stores its group's cpu.stat and the system's pressure over the run, with
    /// the quota as set; a group without cpu.stat (the root, here) is left out.
    #[test]
    fn a_run_stores_its_groups_throttling_and_the_pressure_over_it() {
        let before = with_group(snap(0, 0, 0, 0, 0), 1_000_000_000, 500);
        let after = with_group(snap(0, 0, 0, 0, 6_000_000_000), 5_000_000_000, 4_500);
        let d = diff(&before, &after).expect("same cpus");
        let c = d.cgroup.expect("the cgroup's counters");
        assert_eq!(c.cpu_stat.len(), 1);
        let g = &c.cpu_stat[0];
        assert_eq!(g.group, "/jsq");
        assert_eq!(
            g.quota.as_deref(),
            Some("cpu.cfs_quota_us 35000, cpu.cfs_period_us 100000")
        );
        assert_eq!(
            (g.stat.throttled_ns, g.stat.nr_periods, g.stat.nr_throttled),
            (4_000_000_000, 4000, 2000)
        );
        assert_eq!(c.pressure.len(), 1);
        let p = &c.pressure[0];
        assert_eq!((p.resource.as_str(), p.scope.as_str()), ("cpu", "system"));
        assert_eq!((p.some_us, p.full_us), (4_000, None));
        assert_eq!(p.some_avg10_end_pct, 1.5);
        // Without cgroups or pressure on one side, nothing is made up.
        assert_eq!(diff(&snap(0, 0, 0, 0, 0), &after).unwrap().cgroup, None);
    }
}
