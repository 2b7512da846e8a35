//! Isolation and ticks: isolcpus, nohz_full, rcu_nocbs and how they agree, managed IRQ
//! isolation, skew_tick, the RCU boot options, CONFIG_HZ and cgroup v2 isolated cpuset
//! partitions (isolation without a reboot).

use super::{Area, Finding, FindingId as Id, Host, Missing, Severity, finding};
use crate::engine::cpu::CpuList;
use crate::system::cgroup::{self, Level, Version};
use crate::system::finding_id::Check;

pub(super) fn isolation(h: &Host) -> Vec<Finding> {
    if let Err(e) = h.read("/proc/cmdline") {
        return vec![e.finding(Area::Isolation, Check::Cmdline)];
    }
    let m = &h.measured;
    let cmdline = h.cmdline();
    let mut out = Vec::new();
    let isolated = h.read_list("/sys/devices/system/cpu/isolated");
    let nohz = h.read_list("/sys/devices/system/cpu/nohz_full");
    let ids = |ok, partial, missing| [ok, partial, missing];
    out.push(match &isolated {
        Ok(l) => covered(
            h,
            ids(Id::IsolatedOk, Id::IsolatedPartial, Id::IsolatedMissing),
            l,
        )
        .why("the scheduler may put other tasks on CPUs that are not isolated")
        .boot(h, &[format!("isolcpus={m}")]),
        Err(e) => e.clone().finding(Area::Isolation, Check::Isolated),
    });
    let tick = "without nohz_full the scheduler tick interrupts a busy CPU HZ times a second";
    out.push(match &nohz {
        Ok(l) => covered(
            h,
            ids(Id::NohzFullOk, Id::NohzFullPartial, Id::NohzFullMissing),
            l,
        )
        .why(tick)
        .boot(h, &[format!("nohz_full={m}")]),
        // The file exists only in kernels built with CONFIG_NO_HZ_FULL.
        Err(Missing::Absent(_)) => finding(
            Area::Isolation,
            Id::NohzFullUnsupported,
            Severity::Warn,
            "no /sys/devices/system/cpu/nohz_full",
        )
        .why(format!("{tick}; this kernel has no nohz_full support"))
        .boot(h, &[format!("nohz_full={m}")]),
        Err(e) => e.clone().finding(Area::Isolation, Check::NohzFull),
    });
    let nocbs = cmdline.cpus("rcu_nocbs");
    out.push(match &nocbs {
        Ok(l) => covered(
            h,
            ids(Id::RcuNocbsOk, Id::RcuNocbsPartial, Id::RcuNocbsMissing),
            &l.clone().unwrap_or_default(),
        )
        .why("RCU callbacks run as softirq work on the CPU that queued them unless offloaded")
        .boot(h, &[format!("rcu_nocbs={m}")]),
        Err(e) => e.clone().finding(Area::Isolation, Check::RcuNocbs),
    });
    out.extend(consistency(
        h,
        isolated.ok(),
        nohz.ok(),
        nocbs.ok().flatten(),
    ));
    out.push(managed_irq(h));
    out.push(skew_tick(h));
    out.push(rcu_boot(h));
    out.push(hz(h));
    out.push(cpuset_partition(h));
    out
}

/// ok when the list holds every measured CPU, partial when some, missing when none.
fn covered(h: &Host, [ok, partial, none]: [Id; 3], list: &CpuList) -> Finding {
    let got = h.measured.intersect(list);
    let shown = if list.is_empty() {
        "none".into()
    } else {
        list.to_string()
    };
    let value = format!("{shown} (measured {})", h.measured);
    if got == h.measured {
        finding(Area::Isolation, ok, Severity::Ok, value)
    } else if got.is_empty() {
        finding(Area::Isolation, none, Severity::Warn, value)
    } else {
        finding(Area::Isolation, partial, Severity::Warn, value)
    }
}

/// Settings that contradict each other.
fn consistency(
    h: &Host,
    isolated: Option<CpuList>,
    nohz: Option<CpuList>,
    nocbs: Option<CpuList>,
) -> Vec<Finding> {
    let mut out = Vec::new();
    if let Some(nohz) = &nohz {
        let without = nohz.without(&nocbs.clone().unwrap_or_default());
        if !without.is_empty() {
            out.push(
                finding(
                    Area::Isolation,
                    Id::NohzFullWithoutRcuNocbs,
                    Severity::Warn,
                    format!("nohz_full CPUs {without} not in rcu_nocbs"),
                )
                .why(
                    "recent kernels offload RCU callbacks of \
                     nohz_full CPUs implicitly, older ones do not",
                )
                .boot(h, &[format!("rcu_nocbs={nohz}")]),
            );
        }
        if let Some(iso) = &isolated {
            let tick = iso.without(nohz);
            if !tick.is_empty() {
                out.push(
                    finding(
                        Area::Isolation,
                        Id::IsolatedNotNohzFull,
                        Severity::Warn,
                        format!("isolated CPUs {tick} keep the tick"),
                    )
                    .why(
                        "an isolated CPU without nohz_full is \
                         still interrupted by the scheduler tick",
                    )
                    .boot(h, &[format!("nohz_full={iso}"), format!("rcu_nocbs={iso}")]),
                );
            }
        }
    }
    let asked = match h.cmdline().cpus("isolcpus") {
        Ok(a) => a,
        Err(e) => {
            out.push(e.finding(Area::Isolation, Check::Isolcpus));
            None
        }
    };
    if let (Some(asked), Some(iso)) = (asked, &isolated) {
        let lost = asked.intersect(&h.measured).without(iso);
        // isolcpus=managed_irq,N alone does not list N in `isolated` (that is the
        // domain flag's job): only the domain isolation is checked here.
        let flags = h.cmdline().flags("isolcpus");
        let domain = flags.is_empty() || flags.contains(&"domain");
        if !lost.is_empty() && domain {
            out.push(
                finding(
                    Area::Isolation,
                    Id::IsolcpusNotInForce,
                    Severity::Bad,
                    format!("isolcpus={asked} on the command line, isolated: {iso}"),
                )
                .why(
                    "the kernel did not apply the isolation the command \
                     line asks for (a typo, or an unsupported flag)",
                )
                .manual("check dmesg for isolcpus")
                .boot(h, &[format!("isolcpus={}", h.measured)]),
            );
        }
    }
    out
}

/// `isolcpus=managed_irq,<cpus>`: the only way to keep kernel-managed IRQs (multi-queue
/// block and NVMe queues) off a CPU; their affinity cannot be written at run time.
fn managed_irq(h: &Host) -> Finding {
    let c = h.cmdline();
    let on = c.flags("isolcpus").contains(&"managed_irq");
    let cpus = c.cpus("isolcpus").ok().flatten().unwrap_or_default();
    let why = "kernel-managed IRQs (multi-queue block and NVMe queues) keep their CPUs: \
               the kernel refuses writes to their smp_affinity and irqaffinity= does not move \
               them; only \
               isolcpus=managed_irq keeps them off a CPU while a housekeeping CPU is left";
    if on && h.measured.intersect(&cpus) == h.measured {
        return finding(
            Area::Isolation,
            Id::ManagedIrqIsolated,
            Severity::Ok,
            format!("isolcpus=managed_irq covers {}", h.measured),
        )
        .why(why);
    }
    let managed = super::irq::managed_on_measured(h);
    let (severity, value) = if managed.is_empty() {
        (
            Severity::Info,
            "not set; no managed IRQ targets the measured CPUs now".to_string(),
        )
    } else {
        (
            Severity::Warn,
            format!(
                "not set; managed IRQs on the measured CPUs: {}",
                managed.join(", ")
            ),
        )
    };
    let mut opt = vec!["managed_irq".to_string()];
    opt.extend(
        c.flags("isolcpus")
            .iter()
            .filter(|f| **f != "managed_irq")
            .map(|f| f.to_string()),
    );
    let opt = format!("isolcpus={},{}", opt.join(","), h.measured);
    finding(Area::Isolation, Id::ManagedIrqNotIsolated, severity, value)
        .why(why)
        .boot(h, &[opt])
}

fn skew_tick(h: &Host) -> Finding {
    let why = "without skew_tick=1 every CPU's tick fires at the same instant, and they \
               contend for the same timekeeping and RCU locks";
    if h.cmdline().get("skew_tick") == Some("1") {
        return finding(
            Area::Isolation,
            Id::SkewTickSet,
            Severity::Ok,
            "skew_tick=1",
        )
        .why(why);
    }
    // The contention grows with the CPUs that tick together.
    let severity = if h.online.len() > 4 {
        Severity::Warn
    } else {
        Severity::Info
    };
    finding(
        Area::Isolation,
        Id::SkewTickUnset,
        severity,
        format!("not set ({} CPUs online)", h.online.len()),
    )
    .why(why)
    .boot(h, &["skew_tick=1".to_string()])
}

/// rcu_nocb_poll (the offload threads poll: the measured CPU never wakes them) and
/// rcupdate.rcu_normal_after_boot=1 (no expedited grace periods, which IPI every CPU).
fn rcu_boot(h: &Host) -> Finding {
    let c = h.cmdline();
    let mut lacking = Vec::new();
    if c.get("rcu_nocb_poll").is_none() {
        lacking.push("rcu_nocb_poll".to_string());
    }
    if c.get("rcupdate.rcu_normal_after_boot") != Some("1") {
        lacking.push("rcupdate.rcu_normal_after_boot=1".to_string());
    }
    let why = "rcu_nocb_poll spares the measured CPU the wake-ups of its offload thread; \
               rcu_normal_after_boot stops expedited grace periods, which IPI every CPU";
    if lacking.is_empty() {
        return finding(
            Area::Isolation,
            Id::RcuBootOk,
            Severity::Ok,
            "rcu_nocb_poll rcupdate.rcu_normal_after_boot=1",
        )
        .why(why);
    }
    finding(
        Area::Isolation,
        Id::RcuBootMissing,
        Severity::Info,
        format!("not set: {}", lacking.join(" ")),
    )
    .why(why)
    .boot(h, &lacking)
}

/// CONFIG_HZ: the tick's period on every CPU that keeps it.
fn hz(h: &Host) -> Finding {
    let why = "a CPU that keeps the tick is interrupted HZ times a second while busy";
    match h.config.hz() {
        Some(hz) => finding(
            Area::Isolation,
            Id::HzTick,
            Severity::Info,
            format!(
                "CONFIG_HZ={hz}: a tick every {:.2} ms ({})",
                1000.0 / f64::from(hz),
                h.config.source.as_deref().unwrap_or("?")
            ),
        )
        .why(why),
        None if h.config.known() => {
            Missing::Unparseable("no CONFIG_HZ in the kernel config".into())
                .finding(Area::Isolation, Check::Hz)
        }
        None => Missing::Absent("neither /proc/config.gz nor /boot/config-<release>".into())
            .finding(Area::Isolation, Check::Hz),
    }
}

/// A cgroup v2 cpuset partition of type `isolated` that holds the measured CPUs
/// isolates them at run time (no load balancing, no unbound work), no reboot needed.
fn cpuset_partition(h: &Host) -> Finding {
    let why = "a cgroup v2 cpuset partition of type 'isolated' takes CPUs out of load \
               balancing at run time, without a reboot";
    let cg = match &h.cgroups {
        Ok(cg) => cg,
        Err(e) => {
            return super::cgroups::unread(h, e).finding(Area::Isolation, Check::CpusetPartition);
        }
    };
    let Some(unified) = cg.unified() else {
        return finding(
            Area::Isolation,
            Id::CpusetPartitionNone,
            Severity::Info,
            "no cgroup v2 mounted",
        )
        .why(why)
        .manual("mount cgroup2 (the unified hierarchy) to use cpuset partitions");
    };
    let mnt = &unified.mount;
    if !unified.has("cpuset") {
        return finding(
            Area::Isolation,
            Id::CpusetPartitionNone,
            Severity::Info,
            format!("cgroup v2 at {mnt} has no cpuset controller (it is bound to cgroup v1)"),
        )
        .why(why)
        .manual("boot into the unified hierarchy (systemd.unified_cgroup_hierarchy=1) to use cpuset partitions");
    }
    // Partitions one or two levels down (a layout of one's own, or systemd slices).
    let mut isolated = CpuList::default();
    let mut found = Vec::new();
    let mut levels = vec![unified.levels[0].clone()];
    for _ in 0..2 {
        let next: Vec<Level> = (levels.iter())
            .flat_map(|l| cgroup::child_levels(&h.root, Version::V2, &l.path, &l.dir))
            .collect();
        for l in &next {
            let set = l.cpuset.as_ref();
            if set.and_then(|c| c.partition.as_deref()) == Some("isolated")
                && let Some(cpus) = set.and_then(|c| c.effective.as_ref())
            {
                found.push(format!("{} ({cpus})", l.dir));
                isolated = CpuList::from_cpus(
                    isolated.cpus().iter().chain(cpus.cpus()).copied().collect(),
                );
            }
        }
        levels = next;
    }
    if !found.is_empty() && h.measured.intersect(&isolated) == h.measured {
        return finding(
            Area::Isolation,
            Id::CpusetPartitionIsolated,
            Severity::Ok,
            found.join(", "),
        )
        .why(why);
    }
    finding(
        Area::Isolation,
        Id::CpusetPartitionNone,
        Severity::Info,
        if found.is_empty() {
            "no isolated partition".to_string()
        } else {
            format!(
                "isolated partitions {} miss some measured CPUs",
                found.join(", ")
            )
        },
    )
    .why(why)
    .manual(partition_step(h, mnt))
}

/// The steps that make an isolated partition of the measured CPUs, or, where that would
/// leave the kernel no housekeeping CPU (every other CPU set apart already), what to do
/// instead.
fn partition_step(h: &Host, mnt: &str) -> String {
    let apart = crate::engine::cpu::Tuned::read(&h.root).cpus;
    if h.online.without(&h.measured).without(&apart).is_empty() {
        return match apart.without(&h.measured).is_empty() {
            true => "leave at least one CPU unmeasured (-a) for the kernel's housekeeping \
                     before isolating the others"
                .into(),
            false => format!(
                "a partition of CPUs {} would leave no CPU for the kernel's housekeeping: \
                 measure the CPUs already set apart instead (-a {apart})",
                h.measured
            ),
        };
    }
    format!(
        "mkdir {mnt}/jitterscope; echo +cpuset > {mnt}/cgroup.subtree_control; \
         echo {m} > {mnt}/jitterscope/cpuset.cpus; echo isolated > \
         {mnt}/jitterscope/cpuset.cpus.partition; then run the program in that cgroup",
        m = h.measured
    )
}
