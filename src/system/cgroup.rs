//! The cgroups a process lives in, read as chains from the top of each hierarchy down to
//! the process's own group, with what each level sets and shows: real-time runtime,
//! CFS quota, `cpu.stat`, cpusets and pressure.
//!
//! cgroup v1 mounts one hierarchy per controller (or a few co-mounted: `cpu,cpuacct`),
//! v2 one unified hierarchy (at /sys/fs/cgroup, or /sys/fs/cgroup/unified in hybrid mode).
//! `/proc/PID/cgroup` names the process's group in each hierarchy and `/proc/self/mountinfo`
//! where each hierarchy is mounted; a group's directory is the mount point plus the part
//! of its path below the mount's root. In a container only the levels from the mount's
//! root down are visible (`Chain::from_root` says whether the top is the real root).
//!
//! Everything is read below a root directory (`/` for the live host) so that tests point
//! it at a fake tree; the parsers are pure functions of the files' text. A file a level
//! lacks (the kernel or the controller does not have it) leaves its field `None`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::engine::cpu::CpuList;

mod cpuset_view;
pub mod pattern;
pub mod target;
pub use cpuset_view::{CpusetView, Sharers, TasksAbove, sibling_cpusets};

/// Why the chains could not be read at all (a level's missing file is not an error).
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    /// `/proc/PID/cgroup` or `/proc/self/mountinfo` could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// cgroup v1 (a hierarchy per controller) or v2 (the unified hierarchy).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Version {
    V1,
    V2,
}

/// A group's real-time bandwidth (v1 `cpu.rt_runtime_us` of `cpu.rt_period_us`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RtBandwidth {
    /// -1: unlimited; 0: no SCHED_FIFO or SCHED_RR task may run in the group.
    pub runtime_us: i64,
    pub period_us: u64,
}

impl RtBandwidth {
    /// The share of each period real-time tasks may use, 0–1 (unlimited is 1).
    pub fn ratio(&self) -> f64 {
        match self.runtime_us {
            r if r < 0 => 1.0,
            _ if self.period_us == 0 => 0.0,
            r => r as f64 / self.period_us as f64,
        }
    }
}

/// A group's CFS bandwidth limit (v2 `cpu.max`; v1 `cpu.cfs_quota_us`, `cpu.cfs_period_us`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CfsBandwidth {
    /// CPU time the group may use per period, summed over its CPUs; `None`: no limit.
    pub quota_us: Option<u64>,
    pub period_us: u64,
    /// v2 `cpu.max.burst`, v1 `cpu.cfs_burst_us` (0: none), where the kernel has it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst_us: Option<u64>,
}

impl CfsBandwidth {
    /// The setting as its file says it: `cpu.max 30000 100000` (v2) or
    /// `cpu.cfs_quota_us 30000, cpu.cfs_period_us 100000` (v1).
    pub fn setting(&self, version: Version) -> String {
        let quota = self.quota_us.map_or_else(
            || match version {
                Version::V2 => "max".to_string(),
                Version::V1 => "-1".to_string(),
            },
            |q| q.to_string(),
        );
        match version {
            Version::V2 => format!("cpu.max {quota} {}", self.period_us),
            Version::V1 => format!(
                "cpu.cfs_quota_us {quota}, cpu.cfs_period_us {}",
                self.period_us
            ),
        }
    }

    /// CPUs' worth of time per period the quota allows (0.35 for 35 ms per 100 ms).
    pub fn cpus(&self) -> Option<f64> {
        let q = self.quota_us?;
        (self.period_us > 0).then(|| q as f64 / self.period_us as f64)
    }
}

/// A group's `cpu.stat` throttle counters (v1 in ns, v2 in µs: both kept here in ns).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuStat {
    /// Periods in which the group had runnable tasks under a quota.
    pub nr_periods: u64,
    /// Of those, periods in which it used its quota and was stopped.
    pub nr_throttled: u64,
    /// Time the group's run queues spent throttled, summed over CPUs (v1 `throttled_time`,
    /// v2 `throttled_usec` × 1000).
    pub throttled_ns: u64,
    /// Periods in which the group used burst time, where the kernel counts them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nr_bursts: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst_ns: Option<u64>,
    /// CPU time the group used (v2 `usage_usec` × 1000; v1 has it in cpuacct, not here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage_ns: Option<u64>,
}

impl CpuStat {
    /// What changed since `earlier` (a counter that went backwards counts 0).
    pub fn since(&self, earlier: &CpuStat) -> CpuStat {
        let opt = |a: Option<u64>, b: Option<u64>| Some(a?.saturating_sub(b.unwrap_or(0)));
        CpuStat {
            nr_periods: self.nr_periods.saturating_sub(earlier.nr_periods),
            nr_throttled: self.nr_throttled.saturating_sub(earlier.nr_throttled),
            throttled_ns: self.throttled_ns.saturating_sub(earlier.throttled_ns),
            nr_bursts: opt(self.nr_bursts, earlier.nr_bursts),
            burst_ns: opt(self.burst_ns, earlier.burst_ns),
            usage_ns: opt(self.usage_ns, earlier.usage_ns),
        }
    }
}

/// A group's cpuset.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cpuset {
    /// `cpuset.cpus` as set (empty on v2: the parent's).
    pub cpus: Option<CpuList>,
    /// The CPUs its tasks may use: v2 `cpuset.cpus.effective`, v1 `cpuset.effective_cpus`.
    pub effective: Option<CpuList>,
    /// v1 `cpuset.cpu_exclusive`: no sibling may share its CPUs.
    pub cpu_exclusive: Option<bool>,
    /// v2 `cpuset.cpus.partition`: `member`, `root`, `isolated`, or `… invalid (why)`.
    pub partition: Option<String>,
}

/// One line of a pressure file: the share of time some (or all) tasks waited.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PsiLine {
    /// Percent of the last 10, 60 and 300 s.
    pub avg10: f64,
    pub avg60: f64,
    pub avg300: f64,
    /// Time stalled since boot (or since the group was made), µs.
    pub total_us: u64,
}

/// A pressure file (`/proc/pressure/cpu`, a group's `cpu.pressure`, `irq.pressure`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Pressure {
    pub some: PsiLine,
    /// Absent from files that have no `full` line (older kernels' system CPU file).
    pub full: Option<PsiLine>,
}

/// One group on a chain and what it sets and shows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Level {
    /// The group's path in its hierarchy: `/` for the root, `/jsq/inner`.
    pub path: String,
    /// Its directory as the host (or container) sees it: `/sys/fs/cgroup/cpu/jsq/inner`.
    pub dir: String,
    pub rt: Option<RtBandwidth>,
    pub cfs: Option<CfsBandwidth>,
    pub stat: Option<CpuStat>,
    pub cpuset: Option<Cpuset>,
    /// `cpu.pressure` (v2).
    pub cpu_pressure: Option<Pressure>,
    /// `irq.pressure` (v2, kernels with IRQ time accounting).
    pub irq_pressure: Option<Pressure>,
    /// v2 `cgroup.controllers`: the controllers that act on this group.
    pub controllers: Vec<String>,
}

/// One hierarchy, from its visible top to the process's group.
#[derive(Debug, Clone, PartialEq)]
pub struct Chain {
    pub version: Version,
    /// v1: the mount's controllers (`cpu`, `cpuacct`, `name=systemd`); v2: those bound to
    /// it (the top's `cgroup.controllers`).
    pub controllers: Vec<String>,
    /// Where the hierarchy is mounted: `/sys/fs/cgroup/cpu`.
    pub mount: String,
    /// True when the first level is the hierarchy's real root; false inside a container
    /// (or a cgroup namespace) that sees only its own subtree.
    pub from_root: bool,
    /// Top first; the process's own group last. Never empty.
    pub levels: Vec<Level>,
}

impl Chain {
    /// The process's own group.
    pub fn own(&self) -> &Level {
        self.levels.last().expect("a chain has at least one level")
    }

    /// True when the hierarchy holds `controller` (`cpu`, `cpuset`).
    pub fn has(&self, controller: &str) -> bool {
        self.controllers.iter().any(|c| c == controller)
    }

    /// The levels that set a CFS quota (any of them throttles the group below it).
    pub fn quotas(&self) -> impl Iterator<Item = &Level> {
        self.levels
            .iter()
            .filter(|l| l.cfs.is_some_and(|c| c.quota_us.is_some()))
    }

    /// The CPUs the process's group may use: the lowest level's effective cpuset.
    pub fn effective_cpus(&self) -> Option<&CpuList> {
        self.levels
            .iter()
            .rev()
            .find_map(|l| l.cpuset.as_ref()?.effective.as_ref())
    }
}

/// A group's path for reading: components longer than 24 characters (a container's
/// 64-digit id) cut to their first 16 and `…`. Commands keep the whole path.
pub fn short_path(path: &str) -> String {
    path.split('/')
        .map(|c| match c.chars().count() {
            n if n > 24 => format!("{}…", c.chars().take(16).collect::<String>()),
            _ => c.to_string(),
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// Every hierarchy's chain for one process.
#[derive(Debug, Clone, PartialEq)]
pub struct Cgroups {
    /// The process whose groups these are (`None`: the reader itself).
    pub pid: Option<u32>,
    pub chains: Vec<Chain>,
}

impl Cgroups {
    /// The reader's own groups on the live host.
    pub fn of_self() -> Result<Cgroups, CgroupError> {
        Cgroups::read(Path::new("/"), None)
    }

    /// `pid`'s groups (`None`: the reader's) on the tree under `root`.
    pub fn read(root: &Path, pid: Option<u32>) -> Result<Cgroups, CgroupError> {
        Cgroups::read_where(root, pid, |_| true)
    }

    /// The reader's `cpu` chain and v2 chain alone (often one): what the counters'
    /// deltas use, without reading every v1 hierarchy's levels twice a run.
    pub fn read_cpu_and_unified(root: &Path) -> Result<Cgroups, CgroupError> {
        Cgroups::read_where(root, None, |m| {
            m.version == Version::V2 || m.controllers.iter().any(|c| c == "cpu")
        })
    }

    /// `pid`'s groups in the hierarchies whose mount `keep` accepts.
    fn read_where(
        root: &Path,
        pid: Option<u32>,
        keep: impl Fn(&CgroupMount) -> bool,
    ) -> Result<Cgroups, CgroupError> {
        let proc = pid.map_or_else(|| "self".to_string(), |p| p.to_string());
        let text = |rel: String| {
            let path = root.join(rel);
            std::fs::read_to_string(&path).map_err(|source| CgroupError::Read { path, source })
        };
        let member = text(format!("proc/{proc}/cgroup"))?;
        let mounts = text("proc/self/mountinfo".to_string())?;
        Ok(Cgroups::from_text_where(root, pid, &member, &mounts, keep))
    }

    /// The chains that `/proc/PID/cgroup` and mountinfo's text name, each level read
    /// from the tree under `root`.
    pub fn from_text(root: &Path, pid: Option<u32>, proc_cgroup: &str, mountinfo: &str) -> Cgroups {
        Cgroups::from_text_where(root, pid, proc_cgroup, mountinfo, |_| true)
    }

    fn from_text_where(
        root: &Path,
        pid: Option<u32>,
        proc_cgroup: &str,
        mountinfo: &str,
        keep: impl Fn(&CgroupMount) -> bool,
    ) -> Cgroups {
        let mounts = parse_mountinfo(mountinfo);
        let chains = parse_proc_cgroup(proc_cgroup)
            .iter()
            .filter(|m| mount_for(m, &mounts).is_some_and(&keep))
            .filter_map(|m| chain(root, m, &mounts))
            .collect();
        Cgroups { pid, chains }
    }

    /// The hierarchy with `controller` (v1's mount of it, or v2 when bound there).
    pub fn with(&self, controller: &str) -> Option<&Chain> {
        self.chains.iter().find(|c| c.has(controller))
    }

    /// The hierarchy of the `cpu` controller: RT runtime, CFS quota and `cpu.stat`.
    pub fn cpu(&self) -> Option<&Chain> {
        self.with("cpu")
    }

    /// The hierarchy of the `cpuset` controller.
    pub fn cpuset(&self) -> Option<&Chain> {
        self.with("cpuset")
    }

    /// The v2 hierarchy (pressure files live there whatever controllers it holds).
    pub fn unified(&self) -> Option<&Chain> {
        self.chains.iter().find(|c| c.version == Version::V2)
    }
}

/// One line of `/proc/PID/cgroup`: `ID:CONTROLLERS:PATH`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Membership {
    pub id: u32,
    /// Empty for v2 (`0::/path`).
    pub controllers: Vec<String>,
    pub path: String,
}

/// `/proc/PID/cgroup`'s lines; lines that are not `ID:CONTROLLERS:PATH` are left out.
pub fn parse_proc_cgroup(text: &str) -> Vec<Membership> {
    text.lines()
        .filter_map(|l| {
            let mut parts = l.splitn(3, ':');
            let id = parts.next()?.trim().parse().ok()?;
            let controllers = parts
                .next()?
                .split(',')
                .filter(|c| !c.is_empty())
                .map(str::to_string)
                .collect();
            let path = parts.next()?.trim().to_string();
            path.starts_with('/').then_some(Membership {
                id,
                controllers,
                path,
            })
        })
        .collect()
}

/// A cgroup filesystem mount from mountinfo.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupMount {
    pub version: Version,
    /// The group the mount shows at its mount point (`/` unless bind-mounted or in a
    /// container that mounted its own subtree).
    pub root: String,
    pub mount_point: String,
    /// v1: the controllers (and `name=…`) in its super options; v2: empty.
    pub controllers: Vec<String>,
}

/// v1 controller names that may appear among a cgroup mount's super options.
const V1_CONTROLLERS: &[&str] = &[
    "cpu",
    "cpuacct",
    "cpuset",
    "memory",
    "devices",
    "freezer",
    "net_cls",
    "net_prio",
    "blkio",
    "perf_event",
    "hugetlb",
    "pids",
    "rdma",
    "misc",
];

/// The cgroup and cgroup2 mounts in mountinfo (fields: id parent dev root mountpoint
/// options [optional…] - fstype source superoptions).
pub fn parse_mountinfo(text: &str) -> Vec<CgroupMount> {
    text.lines()
        .filter_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            let f: Vec<&str> = left.split_whitespace().collect();
            let r: Vec<&str> = right.split_whitespace().collect();
            let (root, mount_point) = (unescape(f.get(3)?), unescape(f.get(4)?));
            let version = match *r.first()? {
                "cgroup2" => Version::V2,
                "cgroup" => Version::V1,
                _ => return None,
            };
            let controllers = match version {
                Version::V2 => Vec::new(),
                Version::V1 => r
                    .get(2)
                    .unwrap_or(&"")
                    .split(',')
                    .filter(|o| V1_CONTROLLERS.contains(o) || o.starts_with("name="))
                    .map(str::to_string)
                    .collect(),
            };
            Some(CgroupMount {
                version,
                root,
                mount_point,
                controllers,
            })
        })
        .collect()
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo`.
fn unescape(field: &str) -> String {
    let b = field.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match (b[i], octal) {
            (b'\\', Some(d)) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The mount that shows membership `m`'s group: same version and controllers, a root
/// at or above the group; the widest view (shortest root) first.
fn mount_for<'a>(m: &Membership, mounts: &'a [CgroupMount]) -> Option<&'a CgroupMount> {
    let v2 = m.controllers.is_empty() && m.id == 0;
    let mut fit: Vec<&CgroupMount> = mounts
        .iter()
        .filter(|c| {
            if v2 {
                c.version == Version::V2
            } else {
                c.version == Version::V1 && same_set(&c.controllers, &m.controllers)
            }
        })
        .filter(|c| below(&m.path, &c.root).is_some())
        .collect();
    fit.sort_by_key(|c| (c.root.len(), !c.mount_point.starts_with("/sys/fs/cgroup")));
    fit.first().copied()
}

fn same_set(a: &[String], b: &[String]) -> bool {
    a.len() == b.len() && a.iter().all(|x| b.contains(x))
}

/// `path` below `top` (both absolute): `Some("")` when equal, `Some("a/b")` when below.
fn below<'a>(path: &'a str, top: &str) -> Option<&'a str> {
    let top = top.trim_end_matches('/');
    let rest = path.strip_prefix(top)?;
    if rest.is_empty() {
        Some("")
    } else {
        rest.strip_prefix('/')
    }
}

fn chain(root: &Path, m: &Membership, mounts: &[CgroupMount]) -> Option<Chain> {
    let mount = mount_for(m, mounts)?;
    let rest = below(&m.path, &mount.root)?;
    let top_path = if mount.root == "/" {
        String::new()
    } else {
        mount.root.trim_end_matches('/').to_string()
    };
    let mut names = vec![""];
    names.extend(rest.split('/').filter(|s| !s.is_empty()));
    let (mut path, mut dir) = (
        top_path,
        mount.mount_point.trim_end_matches('/').to_string(),
    );
    let mut levels = Vec::new();
    for name in names {
        if !name.is_empty() {
            path = format!("{path}/{name}");
            dir = format!("{dir}/{name}");
        }
        let shown = if path.is_empty() { "/" } else { &path };
        levels.push(read_level(root, mount.version, shown, &dir));
    }
    let top = host_path(root, &mount.mount_point);
    let from_root = match mount.version {
        // Files the kernel shows only at the real root (v1) or only below it (v2).
        Version::V1 => top.join("cgroup.sane_behavior").exists(),
        Version::V2 => !top.join("cgroup.type").exists(),
    };
    let controllers = match mount.version {
        Version::V1 => mount.controllers.clone(),
        Version::V2 => {
            words(&std::fs::read_to_string(top.join("cgroup.controllers")).unwrap_or_default())
        }
    };
    Some(Chain {
        version: mount.version,
        controllers,
        mount: mount.mount_point.clone(),
        from_root,
        levels,
    })
}

fn host_path(root: &Path, abs: &str) -> PathBuf {
    root.join(abs.trim_start_matches('/'))
}

fn words(text: &str) -> Vec<String> {
    text.split_whitespace().map(str::to_string).collect()
}

/// Reads one group's files.
pub fn read_level(root: &Path, version: Version, path: &str, dir: &str) -> Level {
    let d = host_path(root, dir);
    let text = |f: &str| std::fs::read_to_string(d.join(f)).ok();
    let int = |f: &str| text(f)?.trim().parse::<i64>().ok();
    let list = |f: &str| CpuList::parse_kernel(text(f)?.trim()).ok();
    // v1's files; some kernels (and patched ones) show them on v2 too.
    let rt = int("cpu.rt_runtime_us")
        .zip(int("cpu.rt_period_us"))
        .map(|(runtime_us, p)| RtBandwidth {
            runtime_us,
            period_us: p.max(0) as u64,
        });
    let (cfs, cpuset) = match version {
        Version::V1 => {
            let cfs = int("cpu.cfs_quota_us")
                .zip(int("cpu.cfs_period_us"))
                .map(|(q, p)| CfsBandwidth {
                    quota_us: u64::try_from(q).ok(),
                    period_us: p.max(0) as u64,
                    burst_us: int("cpu.cfs_burst_us").and_then(|b| u64::try_from(b).ok()),
                });
            let cpuset = Cpuset {
                cpus: list("cpuset.cpus"),
                effective: list("cpuset.effective_cpus"),
                cpu_exclusive: int("cpuset.cpu_exclusive").map(|v| v != 0),
                partition: None,
            };
            (cfs, cpuset)
        }
        Version::V2 => {
            let cfs = text("cpu.max")
                .and_then(|t| parse_cpu_max(&t))
                .map(|mut c| {
                    c.burst_us = int("cpu.max.burst").and_then(|b| u64::try_from(b).ok());
                    c
                });
            let cpuset = Cpuset {
                cpus: list("cpuset.cpus"),
                effective: list("cpuset.cpus.effective"),
                cpu_exclusive: None,
                partition: text("cpuset.cpus.partition").map(|t| t.trim().to_string()),
            };
            (cfs, cpuset)
        }
    };
    let any_cpuset = cpuset.cpus.is_some() || cpuset.effective.is_some();
    Level {
        path: path.to_string(),
        dir: dir.to_string(),
        rt,
        cfs,
        stat: text("cpu.stat").and_then(|t| parse_cpu_stat(&t)),
        cpuset: any_cpuset.then_some(cpuset),
        cpu_pressure: text("cpu.pressure").and_then(|t| parse_pressure(&t)),
        irq_pressure: text("irq.pressure").and_then(|t| parse_pressure(&t)),
        controllers: match version {
            Version::V2 => text("cgroup.controllers")
                .map(|t| words(&t))
                .unwrap_or_default(),
            Version::V1 => Vec::new(),
        },
    }
}

/// v2 `cpu.max`: `max 100000` or `30000 100000`.
pub fn parse_cpu_max(text: &str) -> Option<CfsBandwidth> {
    let mut w = text.split_whitespace();
    let quota = w.next()?;
    let period_us = w.next().map_or(Some(100_000), |p| p.parse().ok())?;
    let quota_us = match quota {
        "max" => None,
        q => Some(q.parse().ok()?),
    };
    Some(CfsBandwidth {
        quota_us,
        period_us,
        burst_us: None,
    })
}

/// `cpu.stat` (v1 or v2); `None` when it holds no throttle counters (v2 without the cpu
/// controller shows only usage).
pub fn parse_cpu_stat(text: &str) -> Option<CpuStat> {
    let kv: BTreeMap<&str, u64> = text
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(char::is_whitespace)?;
            Some((k, v.trim().parse().ok()?))
        })
        .collect();
    let us = |k: &str| kv.get(k).map(|v| v.saturating_mul(1000));
    let throttled_ns = kv
        .get("throttled_time")
        .copied()
        .or_else(|| us("throttled_usec"));
    let usage_ns = us("usage_usec");
    if throttled_ns.is_none() && usage_ns.is_none() {
        return None;
    }
    Some(CpuStat {
        nr_periods: kv.get("nr_periods").copied().unwrap_or(0),
        nr_throttled: kv.get("nr_throttled").copied().unwrap_or(0),
        throttled_ns: throttled_ns.unwrap_or(0),
        nr_bursts: kv.get("nr_bursts").copied(),
        burst_ns: kv.get("burst_time").copied().or_else(|| us("burst_usec")),
        usage_ns,
    })
}

/// A pressure file: `some avg10=… avg60=… avg300=… total=…` and, mostly, a `full` line.
pub fn parse_pressure(text: &str) -> Option<Pressure> {
    let line = |kind: &str| -> Option<PsiLine> {
        let l = text.lines().find(|l| l.starts_with(kind))?;
        let kv: BTreeMap<&str, &str> = l
            .split_whitespace()
            .skip(1)
            .filter_map(|w| w.split_once('='))
            .collect();
        Some(PsiLine {
            avg10: kv.get("avg10")?.parse().ok()?,
            avg60: kv.get("avg60")?.parse().ok()?,
            avg300: kv.get("avg300")?.parse().ok()?,
            total_us: kv.get("total")?.parse().ok()?,
        })
    };
    Some(Pressure {
        some: line("some ")?,
        full: line("full "),
    })
}

/// The system's pressure: `/proc/pressure/cpu` and `irq` (absent without PSI, or for
/// `irq` without IRQ time accounting).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SystemPressure {
    pub cpu: Option<Pressure>,
    pub irq: Option<Pressure>,
}

/// The pressure files under `root` (`/` for the live host).
pub fn system_pressure(root: &Path) -> SystemPressure {
    let read = |f: &str| {
        std::fs::read_to_string(root.join("proc/pressure").join(f))
            .ok()
            .and_then(|t| parse_pressure(&t))
    };
    SystemPressure {
        cpu: read("cpu"),
        irq: read("irq"),
    }
}

/// The child groups of the group at `path` (its directory `dir`, under `root`), read, in
/// the order of their names: what the cpuset views and the real-time runtime's shares
/// judge a group's neighbours by.
pub fn child_levels(root: &Path, version: Version, path: &str, dir: &str) -> Vec<Level> {
    let Ok(entries) = std::fs::read_dir(host_path(root, dir)) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let sep = if path == "/" { "" } else { "/" };
    (names.into_iter())
        .map(|name| {
            read_level(
                root,
                version,
                &format!("{path}{sep}{name}"),
                &format!("{dir}/{name}"),
            )
        })
        .collect()
}

/// A tree of files under a temporary root, (path, text) each: the fake hosts the
/// cgroup and audit tests read.
#[cfg(test)]
pub(crate) fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for (path, text) in files {
        let p = dir.path().join(path);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, text).expect("write");
    }
    dir
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_components_are_cut_for_reading() {
        let id = "917d8d7e7ab14735f9893d3a2caae49c14689563a99623609a763497541a5e93";
        assert_eq!(
            short_path(&format!("/libpod_parent/libpod-{id}")),
            "/libpod_parent/libpod-917d8d7e7…"
        );
        assert_eq!(short_path("/"), "/");
        assert_eq!(
            short_path("/system.slice/sshd.service"),
            "/system.slice/sshd.service"
        );
    }

    #[test]
    fn proc_cgroup_lines() {
        let m = parse_proc_cgroup("9:name=systemd:/\n2:cpu,cpuacct:/jsq/a\n0::/user.slice\nbad\n");
        assert_eq!(m.len(), 3);
        assert_eq!(m[1].controllers, ["cpu", "cpuacct"]);
        assert_eq!(m[1].path, "/jsq/a");
        assert!(m[2].controllers.is_empty());
        assert_eq!(m[2].id, 0);
    }

    #[test]
    fn mountinfo_cgroup_mounts() {
        let text = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpu\\040acct rw shared:5 - cgroup cgroup rw,nosuid,cpuacct
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,name=systemd
41 31 0:38 /libpod/x /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw,nsdelegate
";
        let m = parse_mountinfo(text);
        assert_eq!(m.len(), 4);
        assert_eq!(m[0].controllers, ["cpu"]);
        assert_eq!(m[1].mount_point, "/sys/fs/cgroup/cpu acct");
        assert_eq!(m[1].controllers, ["cpuacct"]);
        assert_eq!(m[2].controllers, ["name=systemd"]);
        assert_eq!(m[3].version, Version::V2);
        assert_eq!(m[3].root, "/libpod/x");
    }

    #[test]
    fn cpu_stat_v1_and_v2_in_ns() {
        let v1 =
            "nr_periods 40\nnr_throttled 31\nthrottled_time 2500000\nnr_bursts 0\nburst_time 0\n";
        let s = parse_cpu_stat(v1).expect("v1");
        assert_eq!(
            (s.nr_periods, s.nr_throttled, s.throttled_ns),
            (40, 31, 2_500_000)
        );
        assert_eq!(s.nr_bursts, Some(0));
        assert_eq!(s.usage_ns, None);
        let v2 = "usage_usec 900\nuser_usec 800\nsystem_usec 100\nnr_periods 5\n\
                  nr_throttled 2\nthrottled_usec 70\nnr_bursts 1\nburst_usec 3\n";
        let s = parse_cpu_stat(v2).expect("v2");
        assert_eq!(
            (s.nr_throttled, s.throttled_ns, s.usage_ns),
            (2, 70_000, Some(900_000))
        );
        assert_eq!(s.burst_ns, Some(3000));
        // v2 without the cpu controller: usage only, throttle counts 0.
        let bare = parse_cpu_stat("usage_usec 5\nuser_usec 4\nsystem_usec 1\n").expect("usage");
        assert_eq!(bare.throttled_ns, 0);
        assert_eq!(parse_cpu_stat("junk\n"), None);
        let later = CpuStat {
            nr_throttled: 10,
            throttled_ns: 170_000,
            ..s
        };
        let d = later.since(&s);
        assert_eq!(
            (d.nr_throttled, d.throttled_ns, d.nr_periods),
            (8, 100_000, 0)
        );
        // A counter that went backwards (the group was remade) counts 0.
        assert_eq!(s.since(&later).throttled_ns, 0);
    }

    #[test]
    fn cpu_max_and_its_setting() {
        let c = parse_cpu_max("30000 100000\n").expect("quota");
        assert_eq!(c.quota_us, Some(30_000));
        assert_eq!(c.setting(Version::V2), "cpu.max 30000 100000");
        assert_eq!(c.cpus(), Some(0.3));
        let max = parse_cpu_max("max 100000").expect("max");
        assert_eq!(max.quota_us, None);
        assert_eq!(max.setting(Version::V2), "cpu.max max 100000");
        assert_eq!(
            max.setting(Version::V1),
            "cpu.cfs_quota_us -1, cpu.cfs_period_us 100000"
        );
        assert_eq!(parse_cpu_max("lots 100000"), None);
    }

    #[test]
    fn pressure_lines() {
        let p = parse_pressure(
            "some avg10=2.35 avg60=1.29 avg300=3.29 total=26896525\n\
             full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
        )
        .expect("parses");
        assert_eq!(p.some.total_us, 26_896_525);
        assert!((p.some.avg10 - 2.35).abs() < 1e-9);
        assert_eq!(p.full.map(|f| f.total_us), Some(0));
        let some_only = parse_pressure("some avg10=0.00 avg60=0.00 avg300=0.00 total=7\n");
        assert_eq!(some_only.and_then(|p| p.full), None);
        assert_eq!(parse_pressure("some avg10=x\n"), None);
    }

    const V1_MOUNTS: &str = "\
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

    /// cgroup v1 as on the 2-vCPU guest: a child cpu group with no RT runtime and a
    /// quota, under a root with 950 ms/s; a cpuset group beside a sibling.
    #[test]
    fn v1_chain_from_root_to_the_group() {
        let cpu = "sys/fs/cgroup/cpu";
        let set = "sys/fs/cgroup/cpuset";
        let t = tree(&[
            ("proc/self/cgroup", "3:cpuset:/rt\n1:cpu:/jsq/inner\n0::/\n"),
            ("proc/self/mountinfo", V1_MOUNTS),
            (&format!("{cpu}/cgroup.sane_behavior"), "0\n"),
            (&format!("{cpu}/cpu.rt_runtime_us"), "950000\n"),
            (&format!("{cpu}/cpu.rt_period_us"), "1000000\n"),
            (&format!("{cpu}/cpu.cfs_quota_us"), "-1\n"),
            (&format!("{cpu}/cpu.cfs_period_us"), "100000\n"),
            (&format!("{cpu}/jsq/cpu.rt_runtime_us"), "0\n"),
            (&format!("{cpu}/jsq/cpu.rt_period_us"), "1000000\n"),
            (&format!("{cpu}/jsq/cpu.cfs_quota_us"), "35000\n"),
            (&format!("{cpu}/jsq/cpu.cfs_period_us"), "100000\n"),
            (&format!("{cpu}/jsq/cpu.cfs_burst_us"), "0\n"),
            (
                &format!("{cpu}/jsq/cpu.stat"),
                "nr_periods 60\nnr_throttled 58\nthrottled_time 3900000000\n",
            ),
            (&format!("{cpu}/jsq/inner/cpu.rt_runtime_us"), "0\n"),
            (&format!("{cpu}/jsq/inner/cpu.rt_period_us"), "1000000\n"),
            (&format!("{set}/cgroup.sane_behavior"), "0\n"),
            (&format!("{set}/cpuset.cpus"), "0-1\n"),
            (&format!("{set}/cpuset.effective_cpus"), "0-1\n"),
            (&format!("{set}/rt/cpuset.cpus"), "1\n"),
            (&format!("{set}/rt/cpuset.effective_cpus"), "1\n"),
            (&format!("{set}/rt/cpuset.cpu_exclusive"), "1\n"),
            (&format!("{set}/other/cpuset.effective_cpus"), "0\n"),
            ("sys/fs/cgroup/unified/cgroup.controllers", "hugetlb\n"),
            (
                "sys/fs/cgroup/unified/cpu.pressure",
                "some avg10=1.00 avg60=0.50 avg300=0.10 total=1234\n\
                 full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
            ),
        ]);
        let g = Cgroups::read(t.path(), None).expect("reads");
        let c = g.cpu().expect("cpu hierarchy");
        assert_eq!(c.version, Version::V1);
        assert!(c.from_root);
        let paths: Vec<&str> = c.levels.iter().map(|l| l.path.as_str()).collect();
        assert_eq!(paths, ["/", "/jsq", "/jsq/inner"]);
        assert_eq!(c.own().dir, "/sys/fs/cgroup/cpu/jsq/inner");
        assert_eq!(c.levels[0].rt.map(|r| r.runtime_us), Some(950_000));
        assert_eq!(c.own().rt.map(|r| r.runtime_us), Some(0));
        // The quota is the parent's: it throttles the whole subtree.
        let q: Vec<&str> = c.quotas().map(|l| l.path.as_str()).collect();
        assert_eq!(q, ["/jsq"]);
        let jsq = &c.levels[1];
        assert_eq!(
            jsq.cfs.map(|f| f.setting(Version::V1)).as_deref(),
            Some("cpu.cfs_quota_us 35000, cpu.cfs_period_us 100000")
        );
        assert_eq!(jsq.stat.map(|s| s.throttled_ns), Some(3_900_000_000));
        // cpuset: its own chain, effective CPUs, exclusive flag, the sibling's CPUs.
        let s = g.cpuset().expect("cpuset hierarchy");
        assert_eq!(s.effective_cpus(), Some(&CpuList::from_cpus(vec![1])));
        assert_eq!(
            s.own().cpuset.as_ref().and_then(|c| c.cpu_exclusive),
            Some(true)
        );
        assert_eq!(
            sibling_cpusets(t.path(), s),
            [("/other".to_string(), CpuList::from_cpus(vec![0]))]
        );
        // v2 holds no controller here but still shows pressure.
        let u = g.unified().expect("v2");
        assert!(!u.has("cpu"));
        assert_eq!(u.own().cpu_pressure.map(|p| p.some.total_us), Some(1234));
        assert!(g.with("memory").is_none());
        // The counters' reading: the cpu and v2 chains, as read in full, and no other.
        let some = Cgroups::read_cpu_and_unified(t.path()).expect("reads");
        assert!(some.cpuset().is_none(), "{some:?}");
        assert_eq!(some.cpu(), g.cpu());
        assert_eq!(some.unified(), g.unified());
        assert_eq!(some.chains.len(), 2);
    }

    /// cgroup v2 alone, as a container sees it: the mount shows only its own subtree
    /// (no real root above it), a quota in cpu.max, a partition.
    #[test]
    fn v2_chain_inside_a_container() {
        let u = "sys/fs/cgroup";
        let t = tree(&[
            ("proc/self/cgroup", "0::/kubepods/pod1/ctr\n"),
            (
                "proc/self/mountinfo",
                "41 31 0:38 /kubepods/pod1 /sys/fs/cgroup ro - cgroup2 cgroup2 rw\n",
            ),
            (&format!("{u}/cgroup.type"), "domain\n"),
            (&format!("{u}/cgroup.controllers"), "cpuset cpu memory\n"),
            (&format!("{u}/cpu.max"), "200000 100000\n"),
            (&format!("{u}/ctr/cgroup.type"), "domain\n"),
            (&format!("{u}/ctr/cgroup.controllers"), "cpuset cpu\n"),
            (&format!("{u}/ctr/cpu.max"), "30000 100000\n"),
            (&format!("{u}/ctr/cpu.max.burst"), "0\n"),
            (
                &format!("{u}/ctr/cpu.stat"),
                "usage_usec 10\nnr_periods 3\nnr_throttled 2\nthrottled_usec 140000\n",
            ),
            (&format!("{u}/ctr/cpuset.cpus"), "\n"),
            (&format!("{u}/ctr/cpuset.cpus.effective"), "2-3\n"),
            (&format!("{u}/ctr/cpuset.cpus.partition"), "isolated\n"),
            (
                &format!("{u}/ctr/irq.pressure"),
                "full avg10=0.00 avg60=0.00 avg300=0.00 total=9\n",
            ),
        ]);
        let g = Cgroups::read(t.path(), None).expect("reads");
        let c = g.cpu().expect("cpu on v2");
        assert_eq!(c.version, Version::V2);
        assert!(!c.from_root, "a container's mount is not the real root");
        let paths: Vec<&str> = c.levels.iter().map(|l| l.path.as_str()).collect();
        assert_eq!(paths, ["/kubepods/pod1", "/kubepods/pod1/ctr"]);
        assert_eq!(c.own().dir, "/sys/fs/cgroup/ctr");
        assert_eq!(c.quotas().count(), 2);
        assert_eq!(
            c.own().cfs.map(|f| f.setting(Version::V2)).as_deref(),
            Some("cpu.max 30000 100000")
        );
        assert_eq!(c.own().cfs.and_then(|f| f.burst_us), Some(0));
        assert_eq!(c.own().stat.map(|s| s.throttled_ns), Some(140_000_000));
        assert_eq!(c.own().controllers, ["cpuset", "cpu"]);
        let set = c.own().cpuset.clone().expect("cpuset");
        assert_eq!(set.cpus, Some(CpuList::default()));
        assert_eq!(set.partition.as_deref(), Some("isolated"));
        assert_eq!(c.effective_cpus(), Some(&CpuList::from_cpus(vec![2, 3])));
        // An irq.pressure with only a full line has no `some`: not read as pressure.
        assert_eq!(c.own().irq_pressure, None);
        assert_eq!(c.own().rt, None);
    }

    /// A process whose group no mount shows (another mount namespace's) has no chain;
    /// a missing /proc file is an error naming it.
    #[test]
    fn unseen_groups_and_missing_files() {
        let t = tree(&[
            ("proc/self/cgroup", "1:cpu:/elsewhere\n"),
            (
                "proc/self/mountinfo",
                "32 31 0:29 /mine /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n",
            ),
        ]);
        let g = Cgroups::read(t.path(), None).expect("reads");
        assert!(g.chains.is_empty());
        let e = Cgroups::read(t.path(), Some(4242)).expect_err("no such pid");
        assert!(e.to_string().contains("proc/4242/cgroup"), "{e}");
    }

    #[test]
    fn system_pressure_without_irq() {
        let t = tree(&[(
            "proc/pressure/cpu",
            "some avg10=0.00 avg60=0.00 avg300=0.00 total=5\n",
        )]);
        let p = system_pressure(t.path());
        assert_eq!(p.cpu.map(|c| c.some.total_us), Some(5));
        assert_eq!(p.irq, None);
    }

    /// The live host's own chains read without error wherever the test runs.
    #[test]
    fn the_live_host_reads() {
        let g = Cgroups::of_self().expect("reads /proc/self");
        for c in &g.chains {
            assert!(!c.levels.is_empty());
            assert!(c.own().path.starts_with('/'));
        }
    }
}
