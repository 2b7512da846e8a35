//! Time and virtualization: the clocksource, the TSC and whether the kernel already
//! trusts it, the hypervisor, steal time (since boot here; over a run from the
//! counters' delta) and the CPU-bug mitigations in force.

use super::{Area, Finding, FindingId as Id, Host, Missing, Severity, cpu_flags, finding, short};
use crate::system::counters::CounterDelta;
use crate::system::finding_id::Check;

pub(super) fn time(h: &Host) -> Vec<Finding> {
    let cpuinfo = h.read("/proc/cpuinfo");
    let flags: Vec<String> = cpuinfo.as_ref().map(|t| cpu_flags(t)).unwrap_or_default();
    let mut out = vec![clocksource(h)];
    match cpuinfo {
        Ok(_) if flags.iter().any(|f| f == "tsc") => {
            out.push(tsc_flags(&flags));
            out.push(tsc_reliable(h, &flags));
        }
        Ok(_) => out.push(
            finding(
                Area::Time,
                Id::TscAbsent,
                Severity::Info,
                "no tsc flag in /proc/cpuinfo",
            )
            .why("not an x86 CPU (or no TSC): the TSC checks do not apply"),
        ),
        Err(e) => out.push(e.finding(Area::Time, Check::Cpuinfo)),
    }
    out
}

fn clocksource(h: &Host) -> Finding {
    let path = "/sys/devices/system/clocksource/clocksource0/current_clocksource";
    let available = h
        .read("/sys/devices/system/clocksource/clocksource0/available_clocksource")
        .unwrap_or_default();
    let tsc_there = available.split_whitespace().any(|c| c == "tsc");
    let fix = |f: Finding| {
        if tsc_there {
            f.echo(h, path, "tsc")
                .boot(h, &["clocksource=tsc".to_string()])
        } else {
            f.manual("the TSC is not an available clocksource here (unstable, or not x86)")
        }
    };
    match h.read(path) {
        Ok(c) if c == "tsc" || c == "arch_sys_counter" => {
            finding(Area::Time, Id::ClocksourceOk, Severity::Ok, c)
                .why("clock reads stay in the vDSO, tens of ns")
        }
        Ok(c) if c == "hpet" || c == "acpi_pm" => {
            fix(
                finding(Area::Time, Id::ClocksourceSlow, Severity::Bad, c).why(
                    "every clock read is a system call and a slow device read, about a microsecond",
                ),
            )
        }
        Ok(c) => fix(
            finding(Area::Time, Id::ClocksourceNotTsc, Severity::Info, c)
                .why("a paravirtual clock works in the vDSO but is slower to read than the TSC"),
        ),
        Err(e) => e.finding(Area::Time, Check::Clocksource),
    }
}

fn tsc_flags(flags: &[String]) -> Finding {
    let missing: Vec<&str> = ["constant_tsc", "nonstop_tsc"]
        .into_iter()
        .filter(|w| !flags.iter().any(|f| f == w))
        .collect();
    let why = "an invariant TSC ticks at one rate in every P- and C-state, so it can time events";
    if missing.is_empty() {
        finding(
            Area::Time,
            Id::TscInvariant,
            Severity::Ok,
            "constant_tsc nonstop_tsc",
        )
        .why(why)
    } else {
        finding(
            Area::Time,
            Id::TscNotInvariant,
            Severity::Warn,
            format!("missing {}", missing.join(" ")),
        )
        .why(why)
        .manual(
            "none in software: use a CPU (or, in a VM, a CPU model \
             such as -cpu host,+invtsc) with an invariant TSC",
        )
    }
}

/// The clocksource watchdog leaves the TSC alone when the command line says
/// tsc=reliable, when the CPU flags it reliable (`tsc_reliable`, set by some
/// hypervisors), or, since 5.16, when the TSC is constant, nonstop and has TSC_ADJUST on
/// a machine of at most four NUMA nodes (arch/x86/kernel/tsc.c).
fn tsc_reliable(h: &Host, flags: &[String]) -> Finding {
    let why = "unless the TSC is trusted, the clocksource watchdog checks it from a timer \
               that visits every CPU in turn";
    if h.cmdline()
        .0
        .iter()
        .any(|(k, v)| k == "tsc" && v == "reliable")
    {
        return finding(Area::Time, Id::TscReliableSet, Severity::Ok, "tsc=reliable").why(why);
    }
    let has = |f: &str| flags.iter().any(|x| x == f);
    let nodes = h
        .read_list("/sys/devices/system/node/online")
        .map(|l| l.len())
        .unwrap_or(1);
    if has("tsc_reliable") {
        return finding(
            Area::Time,
            Id::TscReliableByKernel,
            Severity::Ok,
            "cpuinfo flag tsc_reliable",
        )
        .why(why);
    }
    if has("constant_tsc") && has("nonstop_tsc") && has("tsc_adjust") && nodes <= 4 {
        return finding(
            Area::Time,
            Id::TscReliableByKernel,
            Severity::Ok,
            format!(
                "constant_tsc nonstop_tsc tsc_adjust, {nodes} NUMA node(s): the kernel trusts it"
            ),
        )
        .why(why);
    }
    let f = finding(
        Area::Time,
        Id::TscReliableUnset,
        Severity::Warn,
        "not on the command line, and the kernel does not trust the TSC on its own",
    )
    .why(why);
    if has("constant_tsc") && has("nonstop_tsc") {
        f.boot(h, &["tsc=reliable".to_string()])
    } else {
        f.manual("none safe: tsc=reliable needs an invariant, synchronised TSC")
    }
}

pub(super) fn virtualization(h: &Host) -> Vec<Finding> {
    vec![hypervisor(h), steal(h), mitigations(h)]
}

fn hypervisor(h: &Host) -> Finding {
    match h.read("/proc/cpuinfo") {
        Ok(_) if h.guest => finding(
            Area::Virtualization,
            Id::HypervisorPresent,
            Severity::Info,
            "hypervisor flag set",
        )
        .why(
            "the host can deschedule a vCPU or exit to the \
             hypervisor at any time; its tuning is invisible here",
        )
        .host("pin each vCPU to a dedicated, isolated host CPU (no overcommit)"),
        Ok(_) => finding(
            Area::Virtualization,
            Id::BareMetal,
            Severity::Ok,
            "no hypervisor flag",
        )
        .why("no hypervisor between the program and the CPU"),
        Err(e) => e.finding(Area::Virtualization, Check::Hypervisor),
    }
}

/// Steal share at or above which it is a warning: over a run, and (much diluted) since boot.
const STEAL_WARN_PCT: f64 = 1.0;

/// Steal since boot: context only (info) unless it is large. A run's own steal comes
/// from `steal_over_run`.
fn steal(h: &Host) -> Finding {
    let stat = match h.read("/proc/stat") {
        Ok(s) => s,
        Err(e) => return e.finding(Area::Virtualization, Check::Steal),
    };
    let mut stolen = Vec::new();
    let mut worst: f64 = 0.0;
    for cpu in h.measured.cpus() {
        let tag = format!("cpu{cpu}");
        let Some(line) = stat
            .lines()
            .find(|l| l.split_whitespace().next() == Some(&tag))
        else {
            return Missing::Unparseable(format!("/proc/stat: no {tag} line"))
                .finding(Area::Virtualization, Check::Steal);
        };
        let nums: Result<Vec<u64>, _> = line.split_whitespace().skip(1).map(str::parse).collect();
        match nums
            .ok()
            .and_then(|n| crate::system::counters::stat_total_and_steal(&n))
        {
            Some((_, 0)) => {}
            Some((total, s)) => {
                let pct = 100.0 * s as f64 / total.max(1) as f64;
                worst = worst.max(pct);
                stolen.push(format!("{tag}: {s} ticks ({pct:.2} % since boot)"));
            }
            None => {
                return Missing::Unparseable(format!("/proc/stat: {:?}", short(line)))
                    .finding(Area::Virtualization, Check::Steal);
            }
        }
    }
    let why = "steal time is time the hypervisor ran something else on this vCPU; since \
               boot it says little about a run (a run's own steal is judged from its delta)";
    if stolen.is_empty() {
        return finding(
            Area::Virtualization,
            Id::StealNone,
            Severity::Ok,
            "0 since boot",
        )
        .why(why);
    }
    let severity = if worst >= STEAL_WARN_PCT {
        Severity::Warn
    } else {
        Severity::Info
    };
    finding(
        Area::Virtualization,
        Id::StealTime,
        severity,
        stolen.join(", "),
    )
    .why(why)
    .host("give the VM dedicated host CPUs (vCPU pinning, no overcommit)")
}

/// Steal over a run, from the counters' delta: warn from 1 % of a measured CPU's time.
pub fn steal_over_run(delta: &CounterDelta) -> Finding {
    let worst = delta
        .steal
        .iter()
        .map(|s| s.steal_pct)
        .fold(0.0_f64, f64::max);
    let value = delta
        .steal
        .iter()
        .map(|s| {
            format!(
                "cpu{}: {} ms of {} ms ({:.2} %)",
                s.cpu, s.steal_ms, s.total_ms, s.steal_pct
            )
        })
        .collect::<Vec<_>>()
        .join(", ");
    let why = "steal time during the run: the hypervisor ran something else on a measured vCPU";
    let f = if delta.steal.iter().all(|s| s.steal_ms == 0) {
        return finding(
            Area::Virtualization,
            Id::StealNone,
            Severity::Ok,
            format!("0 during the run ({value})"),
        )
        .why(why);
    } else if worst >= STEAL_WARN_PCT {
        finding(Area::Virtualization, Id::StealTime, Severity::Warn, value)
    } else {
        finding(Area::Virtualization, Id::StealTime, Severity::Info, value)
    };
    f.why(why)
        .host("give the VM dedicated host CPUs (vCPU pinning, no overcommit)")
}

/// A vulnerability file that says a mitigation runs: "Mitigation: …", or SRSO's
/// "Vulnerable: Safe RET, no microcode" (the Safe RET return thunk is in force; only
/// the microcode part is missing).
fn mitigation_active(text: &str) -> bool {
    text.starts_with("Mitigation") || text.contains("Safe RET")
}

fn mitigations(h: &Host) -> Finding {
    let dir = "/sys/devices/system/cpu/vulnerabilities";
    let names = match h.list_dir(dir) {
        Ok(n) => n,
        Err(e) => return e.finding(Area::Virtualization, Check::Mitigations),
    };
    let on: Vec<String> = names
        .into_iter()
        .filter(|n| {
            h.read(&format!("{dir}/{n}"))
                .is_ok_and(|t| mitigation_active(&t))
        })
        .collect();
    let why = "mitigations add work to every system call, interrupt and context switch \
               (SRSO's Safe RET thunk to every return)";
    if on.is_empty() {
        return finding(
            Area::Virtualization,
            Id::MitigationsNone,
            Severity::Ok,
            "none active",
        )
        .why(why);
    }
    finding(
        Area::Virtualization,
        Id::MitigationsOn,
        Severity::Info,
        on.join(" "),
    )
    .why(why)
    .boot(h, &["mitigations=off".to_string()])
    .manual("only where the security trade-off is accepted")
}
