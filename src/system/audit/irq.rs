//! Interrupts: which device IRQs reach the measured CPUs and whether they can be moved,
//! irqbalance, and the per-CPU interrupt and softirq counts since boot.
//!
//! An IRQ's severity follows how often it fired on the measured CPUs: one that fired
//! never or once is info. A kernel-managed IRQ cannot be moved at run time (writing its
//! `smp_affinity_list` is refused, EIO or EPERM by kernel version): it gets the boot
//! option that does move it.

use super::{Area, Effect, Finding, FindingId as Id, Host, Severity, finding, process_comms};
use crate::system::counters;
use crate::system::finding_id::Check;

/// Fired at most this often on the measured CPUs since boot: info, not a cost.
const QUIET_COUNT: u64 = 1;

/// One device IRQ that targets a measured CPU.
struct Irq {
    num: String,
    label: String,
    /// Times it fired on the measured CPUs since boot.
    count: u64,
    managed: bool,
}

pub(super) fn irqs(h: &Host) -> Vec<Finding> {
    let dirs = match h.list_dir("/proc/irq") {
        // A container's runtime may mask /proc/irq with an empty directory.
        Ok(d) if h.container.is_some() && !d.iter().any(|d| d.parse::<u32>().is_ok()) => {
            let hidden = super::Missing::Hidden("/proc/irq is masked".into());
            return vec![hidden.finding(Area::Irq, Check::IrqAffinity), irqbalance(h)];
        }
        Ok(d) => d,
        Err(e) => return vec![e.finding(Area::Irq, Check::IrqAffinity), irqbalance(h)],
    };
    let table = h.read("/proc/interrupts").unwrap_or_default();
    let parsed = counters::parse_interrupts(&table).unwrap_or_default();
    let (mut effective, mut allowed, mut unreadable) = (Vec::new(), Vec::new(), Vec::new());
    for irq in dirs.iter().filter(|d| d.parse::<u32>().is_ok()) {
        let aff = h.read_list(&format!("/proc/irq/{irq}/smp_affinity_list"));
        let eff = h.read_list(&format!("/proc/irq/{irq}/effective_affinity_list"));
        let row = parsed.iter().find(|r| &r.name == irq);
        let label = match row.map(|r| r.description.as_str()) {
            Some(d) if !d.is_empty() => {
                format!("{irq} ({})", d.split_whitespace().last().unwrap_or(d))
            }
            _ => irq.clone(),
        };
        let count = row.map_or(0, |r| {
            h.measured
                .cpus()
                .iter()
                .filter_map(|c| r.per_cpu.get(*c))
                .sum()
        });
        let one = |label: String| Irq {
            num: irq.clone(),
            managed: is_managed(h, irq, &label),
            label,
            count,
        };
        match (aff, eff) {
            (_, Ok(e)) if !e.intersect(&h.measured).is_empty() => effective.push(one(label)),
            (Ok(a), _) if !a.intersect(&h.measured).is_empty() => allowed.push(one(label)),
            (Err(_), _) => unreadable.push(irq.clone()),
            _ => {}
        }
    }
    let (managed, movable): (Vec<Irq>, Vec<Irq>) = effective.into_iter().partition(|i| i.managed);
    let (quiet, busy): (Vec<Irq>, Vec<Irq>) =
        movable.into_iter().partition(|i| i.count <= QUIET_COUNT);
    let allowed: Vec<Irq> = allowed.into_iter().filter(|i| !i.managed).collect();
    let mut out = vec![irq_effective(
        h,
        &busy,
        quiet.is_empty() && managed.is_empty(),
    )];
    if !quiet.is_empty() {
        out.push(
            finding(
                Area::Irq,
                Id::IrqQuietOnMeasured,
                Severity::Info,
                labels(&quiet),
            )
            .why("delivered to a measured CPU, but fired at most once since boot")
            .now(move_command(h, &quiet), move_effects(h, &quiet)),
        );
    }
    if !managed.is_empty() {
        let severity = if managed.iter().any(|i| i.count > QUIET_COUNT) {
            Severity::Bad
        } else {
            Severity::Info
        };
        let opt = format!("isolcpus=managed_irq,{}", h.measured);
        out.push(
            finding(
                Area::Irq,
                Id::IrqManagedOnMeasured,
                severity,
                labels(&managed),
            )
            .why(
                "kernel-managed IRQs (the driver spread its queues over the CPUs): the kernel \
                     refuses writes to their smp_affinity_list and irqaffinity= does not move \
                     them; isolcpus=managed_irq keeps them off the measured CPUs",
            )
            .boot(h, &[opt]),
        );
    }
    out.push(irq_allowed(h, &allowed));
    if !unreadable.is_empty() {
        out.push(
            super::Missing::Unreadable(format!(
                "smp_affinity_list of IRQs {}",
                unreadable.join(" ")
            ))
            .finding(Area::Irq, Check::IrqAffinity),
        );
    }
    out.push(irqbalance(h));
    out.push(irq_counts(h, &table));
    out.push(softirqs(h));
    out
}

/// The labels of the managed IRQs that target a measured CPU now (for isolation's
/// managed_irq check).
pub(super) fn managed_on_measured(h: &Host) -> Vec<String> {
    let table = h.read("/proc/interrupts").unwrap_or_default();
    let parsed = counters::parse_interrupts(&table).unwrap_or_default();
    let mut out = Vec::new();
    for r in parsed.iter().filter(|r| r.name.parse::<u32>().is_ok()) {
        let label = r
            .description
            .split_whitespace()
            .last()
            .unwrap_or("")
            .to_string();
        let eff = h.read_list(&format!("/proc/irq/{}/effective_affinity_list", r.name));
        if eff.is_ok_and(|e| !e.intersect(&h.measured).is_empty()) && is_managed(h, &r.name, &label)
        {
            out.push(format!("{} ({label})", r.name));
        }
    }
    out
}

/// Kernel-managed: from the IRQ's debugfs flags when debugfs has them; otherwise from
/// the names of the drivers that allocate their queue vectors with affinity (virtio-blk
/// `virtioN-req.K`, virtio-scsi `virtioN-request.K`, NVMe I/O queues `nvmeNqK`, K > 0).
/// Config and admin vectors of those devices are not managed.
fn is_managed(h: &Host, irq: &str, label: &str) -> bool {
    if let Ok(t) = h.read(&format!("/sys/kernel/debug/irq/irqs/{irq}")) {
        return t.contains("AFFINITY_MANAGED");
    }
    let name = label
        .rsplit_once('(')
        .map_or(label, |(_, n)| n.trim_end_matches(')'));
    let virtio_queue =
        name.starts_with("virtio") && (name.contains("-req.") || name.contains("-request."));
    let nvme_io = name.starts_with("nvme")
        && name
            .split_once('q')
            .is_some_and(|(_, q)| q.parse::<u32>().is_ok_and(|q| q > 0));
    virtio_queue || nvme_io
}

fn move_command(h: &Host, irqs: &[Irq]) -> String {
    let nums: Vec<&str> = irqs.iter().map(|i| i.num.as_str()).collect();
    format!(
        "for i in {}; do echo {} > /proc/irq/$i/smp_affinity_list; done",
        nums.join(" "),
        h.hk()
    )
}

fn move_effects(h: &Host, irqs: &[Irq]) -> Vec<Effect> {
    irqs.iter()
        .map(|i| Effect::Write {
            path: format!("/proc/irq/{}/smp_affinity_list", i.num),
            value: h.hk(),
        })
        .collect()
}

/// "IRQ 24 (eth0) ×5" or "2 IRQs: …", with each one's count on the measured CPUs.
fn labels(irqs: &[Irq]) -> String {
    let l: Vec<String> = irqs
        .iter()
        .map(|i| format!("{} ×{}", i.label, i.count))
        .collect();
    match l.as_slice() {
        [one] => format!("IRQ {one}"),
        all => format!("{} IRQs: {}", all.len(), all.join(", ")),
    }
}

fn irq_effective(h: &Host, busy: &[Irq], none_at_all: bool) -> Finding {
    if busy.is_empty() {
        let value = if none_at_all {
            format!("no IRQ is delivered to {}", h.measured)
        } else {
            format!("no movable IRQ that fires is delivered to {}", h.measured)
        };
        return finding(Area::Irq, Id::IrqEffectiveOk, Severity::Ok, value)
            .why("an IRQ delivered to a measured CPU interrupts it");
    }
    let mut f = finding(
        Area::Irq,
        Id::IrqOnMeasuredCpus,
        Severity::Bad,
        labels(busy),
    )
    .why("each of these IRQs is delivered to a measured CPU and interrupts it")
    .now(move_command(h, busy), move_effects(h, busy));
    if !h.housekeeping.is_empty() {
        f = f.boot(h, &[format!("irqaffinity={}", h.housekeeping)]);
    }
    f
}

fn irq_allowed(h: &Host, irqs: &[Irq]) -> Finding {
    if irqs.is_empty() {
        return finding(
            Area::Irq,
            Id::IrqAffinityOk,
            Severity::Ok,
            format!("no movable IRQ may move to {}", h.measured),
        )
        .why("an IRQ whose affinity includes a measured CPU may be moved there");
    }
    let mut f = finding(
        Area::Irq,
        Id::IrqAffinityIncludesMeasured,
        Severity::Warn,
        labels(irqs),
    )
    .why(
        "these IRQs are allowed on a measured CPU and may be \
         moved there (CPU hotplug, irqbalance, driver reset)",
    )
    .now(move_command(h, irqs), move_effects(h, irqs));
    if !h.housekeeping.is_empty() {
        f = f.boot(h, &[format!("irqaffinity={}", h.housekeeping)]);
    }
    f
}

fn irqbalance(h: &Host) -> Finding {
    match process_comms(h) {
        Err(e) => e.finding(Area::Irq, Check::Irqbalance),
        Ok(p) if p.iter().any(|(_, c)| c == "irqbalance") => {
            finding(Area::Irq, Id::IrqbalanceRunning, Severity::Warn, "running")
                .why("irqbalance moves IRQs back onto the measured CPUs")
                .manual(format!(
                    "systemctl disable --now irqbalance (or set \
                     IRQBALANCE_BANNED_CPULIST={} in its config)",
                    h.measured
                ))
        }
        Ok(_) => finding(
            Area::Irq,
            Id::IrqbalanceNotRunning,
            Severity::Ok,
            "not running",
        )
        .why("irqbalance would move IRQs onto the measured CPUs"),
    }
}

/// Seconds since boot, for rates.
fn uptime_s(h: &Host) -> Option<f64> {
    h.read("/proc/uptime")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

fn rate(count: u64, up: Option<f64>) -> String {
    match up {
        Some(s) if s > 0.0 => format!("{count} ({:.1}/s)", count as f64 / s),
        _ => count.to_string(),
    }
}

/// The architecture's per-CPU interrupts (local timer, IPIs) on the measured CPUs,
/// since boot. Info: a since-boot count says what happens, not what a run met; the run's
/// own counts come from `counters` deltas.
fn irq_counts(h: &Host, table: &str) -> Finding {
    let rows = match counters::parse_interrupts(table) {
        Ok(r) if !r.is_empty() => r,
        Ok(_) | Err(_) => {
            return super::Missing::Unparseable("/proc/interrupts: no rows".into())
                .finding(Area::Irq, Check::IrqCounts);
        }
    };
    let up = uptime_s(h);
    let mut parts = Vec::new();
    for cpu in h.measured.cpus() {
        let mut each = Vec::new();
        for key in ["LOC", "RES", "CAL", "TLB", "IWI", "NMI"] {
            if let Some(n) = rows
                .iter()
                .find(|r| r.name == key)
                .and_then(|r| r.per_cpu.get(*cpu))
                && *n > 0
            {
                each.push(format!("{key} {}", rate(*n, up)));
            }
        }
        parts.push(format!("cpu{cpu}: {}", each.join(", ")));
    }
    finding(
        Area::Irq,
        Id::IrqCountsOnMeasured,
        Severity::Info,
        parts.join("; "),
    )
    .why(
        "since boot: LOC is the tick (HZ/s on a busy CPU without nohz_full), RES \
             reschedule IPIs, CAL function-call IPIs (other CPUs asking this one to run \
             something), TLB shootdowns; each is an interruption",
    )
}

/// /proc/softirqs on the measured CPUs, since boot.
fn softirqs(h: &Host) -> Finding {
    let text = match h.read("/proc/softirqs") {
        Ok(t) => t,
        Err(e) => return e.finding(Area::Irq, Check::Softirqs),
    };
    let rows = match counters::parse_softirqs(&text) {
        Ok(r) => r,
        Err(e) => {
            return super::Missing::Unparseable(format!("/proc/softirqs: {e}"))
                .finding(Area::Irq, Check::Softirqs);
        }
    };
    let up = uptime_s(h);
    let mut parts = Vec::new();
    for cpu in h.measured.cpus() {
        let mut each: Vec<(u64, String)> = rows
            .iter()
            .filter_map(|(k, v)| Some((*v.get(*cpu)?, k.clone())))
            .filter(|(n, _)| *n > 0)
            .collect();
        each.sort_by_key(|e| std::cmp::Reverse(e.0));
        let shown: Vec<String> = each
            .iter()
            .take(4)
            .map(|(n, k)| format!("{k} {}", rate(*n, up)))
            .collect();
        parts.push(format!("cpu{cpu}: {}", shown.join(", ")));
    }
    finding(
        Area::Irq,
        Id::SoftirqsOnMeasured,
        Severity::Info,
        parts.join("; "),
    )
    .why(
        "since boot, busiest first: TIMER follows the tick, NET_RX/NET_TX the NIC's IRQs \
         and RPS, RCU the callbacks rcu_nocbs would offload, SCHED load balancing",
    )
}
