//! The monitor's cgroup and pressure metrics, read from the kernel's files at each
//! scrape (a few small reads, on the server's housekeeping CPU; the groups that share the
//! cpuset, a larger read, once a minute): the CFS quota of each
//! group on the process's `cpu` chain and its throttle counters (`cpu.stat`), the
//! measured CPUs its cpuset holds alone or shares, and the CPU and IRQ pressure of the
//! system and of the process's v2 group. Counters are the kernel's own, since the group
//! was made (or since boot, for the system's pressure): `rate()` gives them per second.
//!
//! Labels are bounded: `group` takes one value per level of the chain (a handful), and
//! `resource`, `kind` and `scope` two or three each.

use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Unit;

use crate::engine::cpu::CpuList;
use crate::system::cgroup::{self, Cgroups, CpusetView, Pressure};

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct GroupLabels {
    group: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CpusetLabels {
    group: String,
    /// The group's effective cpuset.
    cpus: String,
    /// Measured CPUs no other group's cpuset holds (and no task of an ancestor group).
    exclusive: String,
    /// Measured CPUs other groups share.
    shared: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PressureLabels {
    /// `cpu` or `irq`.
    resource: String,
    /// `some` or `full`.
    kind: String,
    /// `system`, or the group's path.
    scope: String,
}

/// Reads the process's cgroups and the pressure files at each scrape; the groups that
/// may share the cpuset's CPUs, at most once a `SHARERS_TTL`.
#[derive(Debug)]
pub struct CgroupCollector {
    /// The monitor's measured CPUs, for which the cpuset says exclusive or shared.
    measured: CpuList,
    sharers: Mutex<Option<Sharers>>,
}

/// The sharers of a cpuset group, and when and for which group they were read.
#[derive(Debug)]
struct Sharers {
    group: String,
    at: Instant,
    read: cgroup::Sharers,
}

/// How long the cpuset's sharers are kept: reading them walks every sibling group and,
/// on v1, reads /proc/PID/stat of every task an ancestor holds (thousands in a v1 root),
/// far from the few small reads a scrape makes; groups come and go far less often.
const SHARERS_TTL: Duration = Duration::from_secs(60);

impl CgroupCollector {
    pub fn new(measured: CpuList) -> CgroupCollector {
        CgroupCollector {
            measured,
            sharers: Mutex::new(None),
        }
    }

    /// The cpuset's view of the measured CPUs, with the sharers read again when stale or
    /// when the process is in another group.
    fn view(&self, chain: &cgroup::Chain) -> CpusetView {
        let mut cached = self.sharers.lock().unwrap_or_else(|p| p.into_inner());
        let group = &chain.own().path;
        let fresh = cached
            .as_ref()
            .is_some_and(|c| c.group == *group && c.at.elapsed() < SHARERS_TTL);
        if !fresh {
            *cached = Some(Sharers {
                group: group.clone(),
                at: Instant::now(),
                read: cgroup::Sharers::read(Path::new("/"), chain),
            });
        }
        let sharers = &cached.as_ref().expect("just read").read;
        CpusetView::of(chain, sharers, &self.measured)
    }
}

type Result = std::result::Result<(), std::fmt::Error>;

/// One metric family of constant values (read at the scrape), left out when empty.
fn family<L: EncodeLabelSet>(
    e: &mut DescriptorEncoder,
    kind: MetricType,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    series: &[(L, f64)],
) -> Result {
    if series.is_empty() {
        return Ok(());
    }
    let mut m = e.encode_descriptor(name, help, unit, kind)?;
    for (labels, v) in series {
        let one = m.encode_family(labels)?;
        match kind {
            MetricType::Counter => ConstCounter::new(*v).encode(one)?,
            _ => ConstGauge::new(*v).encode(one)?,
        }
    }
    Ok(())
}

fn counter<L: EncodeLabelSet>(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    series: &[(L, f64)],
) -> Result {
    family(e, MetricType::Counter, name, help, unit, series)
}

fn gauge<L: EncodeLabelSet>(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    series: &[(L, f64)],
) -> Result {
    family(e, MetricType::Gauge, name, help, unit, series)
}

impl CgroupCollector {
    fn quota(&self, e: &mut DescriptorEncoder, cg: &Cgroups) -> Result {
        let Some(chain) = cg.cpu() else {
            return Ok(());
        };
        let label = |p: &str| GroupLabels { group: p.into() };
        let stats: Vec<(GroupLabels, cgroup::CpuStat)> = (chain.levels.iter())
            .filter_map(|l| Some((label(&l.path), l.stat?)))
            .collect();
        let quotas: Vec<(GroupLabels, f64)> = chain
            .quotas()
            .filter_map(|l| Some((label(&l.path), l.cfs?.cpus()?)))
            .collect();
        gauge(
            e,
            "cgroup_cpu_quota_cpus",
            "CFS quota of each group on the monitor's cpu cgroup chain that sets one, in \
             CPUs per period (cpu.max or cpu.cfs_quota_us over the period)",
            None,
            &quotas,
        )?;
        let of = |f: fn(&cgroup::CpuStat) -> f64| -> Vec<(GroupLabels, f64)> {
            stats.iter().map(|(l, s)| (l.clone(), f(s))).collect()
        };
        counter(
            e,
            "cgroup_cpu_periods",
            "CFS periods in which the group had runnable tasks under a quota (cpu.stat \
             nr_periods)",
            None,
            &of(|s| s.nr_periods as f64),
        )?;
        counter(
            e,
            "cgroup_cpu_throttled_periods",
            "CFS periods in which the group used its quota and was stopped (cpu.stat \
             nr_throttled)",
            None,
            &of(|s| s.nr_throttled as f64),
        )?;
        counter(
            e,
            "cgroup_cpu_throttled",
            "Time the group's run queues were throttled, summed over its CPUs (cpu.stat \
             throttled_usec, v1 throttled_time)",
            Some(&Unit::Seconds),
            &of(|s| s.throttled_ns as f64 / 1e9),
        )
    }

    fn cpuset(&self, e: &mut DescriptorEncoder, cg: &Cgroups) -> Result {
        let Some(chain) = cg.cpuset() else {
            return Ok(());
        };
        let Some(cpus) = chain.effective_cpus() else {
            return Ok(());
        };
        let v = self.view(chain);
        let labels = CpusetLabels {
            group: v.group.clone(),
            cpus: cpus.to_string(),
            exclusive: v.exclusive.to_string(),
            shared: v.shared.to_string(),
        };
        gauge(
            e,
            "cgroup_cpuset_info",
            "The monitor's cpuset cgroup, its effective CPUs, and which measured CPUs it \
             holds alone (exclusive) or shares with other groups or an ancestor's tasks",
            None,
            &[(labels, 1.0)],
        )
    }

    fn pressure(&self, e: &mut DescriptorEncoder, cg: &Cgroups) -> Result {
        let sys = cgroup::system_pressure(Path::new("/"));
        let mut files: Vec<(&str, String, Pressure)> = Vec::new();
        files.extend(sys.cpu.map(|p| ("cpu", "system".to_string(), p)));
        files.extend(sys.irq.map(|p| ("irq", "system".to_string(), p)));
        if let Some(own) = cg.unified().map(|c| c.own()).filter(|l| l.path != "/") {
            files.extend(own.cpu_pressure.map(|p| ("cpu", own.path.clone(), p)));
            files.extend(own.irq_pressure.map(|p| ("irq", own.path.clone(), p)));
        }
        let mut stalled = Vec::new();
        let mut avg10 = Vec::new();
        for (resource, scope, p) in files {
            let lines = std::iter::once(("some", p.some)).chain(p.full.map(|f| ("full", f)));
            for (kind, line) in lines {
                let l = PressureLabels {
                    resource: resource.into(),
                    kind: kind.into(),
                    scope: scope.clone(),
                };
                stalled.push((l.clone(), line.total_us as f64 / 1e6));
                // Percent with two decimals, as the file has it: a ratio without float noise.
                avg10.push((l, (line.avg10 * 100.0).round() / 10_000.0));
            }
        }
        counter(
            e,
            "pressure_stalled",
            "Time some (or all) tasks stalled waiting for a CPU (cpu) or lost it to \
             interrupts (irq), from the PSI files: scope=system is /proc/pressure, else \
             the monitor's cgroup",
            Some(&Unit::Seconds),
            &stalled,
        )?;
        gauge(
            e,
            "pressure_avg10_ratio",
            "The PSI files' avg10: the share of the last 10 s some (or all) tasks stalled",
            None,
            &avg10,
        )
    }
}

impl Collector for CgroupCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result {
        // Unreadable (no cgroup mounted): only the system's pressure.
        let cg = Cgroups::of_self().unwrap_or(Cgroups {
            pid: None,
            chains: Vec::new(),
        });
        self.quota(&mut encoder, &cg)?;
        self.cpuset(&mut encoder, &cg)?;
        self.pressure(&mut encoder, &cg)
    }
}
