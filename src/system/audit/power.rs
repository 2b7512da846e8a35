//! Power: the cpufreq governor and turbo (or, in a guest without a cpufreq driver, the
//! fact that the host owns the frequency), idle states (haltpoll's HLT is a VM exit),
//! haltpoll's guest polling, per-CPU PM QoS, and SMT (of the guest, in a VM).

use super::{Area, Finding, FindingId as Id, Host, Missing, Severity, finding};
use crate::system::finding_id::Check;

pub(super) fn power(h: &Host) -> Vec<Finding> {
    let mut out = Vec::new();
    match cpufreq_driver(h) {
        Some(_) => {
            out.push(governor(h));
            out.push(turbo(h));
        }
        None => out.push(no_cpufreq(h)),
    }
    out.push(idle_states(h));
    out.extend(haltpoll(h));
    out.push(pm_qos(h));
    out.push(smt(h));
    out
}

/// The measured CPUs' cpufreq driver; `None` when there is none (no cpufreq directory).
fn cpufreq_driver(h: &Host) -> Option<String> {
    let cpu = h.measured.first()?;
    let base = format!("/sys/devices/system/cpu/cpu{cpu}/cpufreq");
    if !h.path(&base).exists() {
        return None;
    }
    Some(
        h.read(&format!("{base}/scaling_driver"))
            .unwrap_or_else(|_| "?".into()),
    )
}

/// No cpufreq driver: the guest (or a kernel without one) cannot see or set the
/// frequency. In a VM that is the host's business.
fn no_cpufreq(h: &Host) -> Finding {
    let f = finding(
        Area::Power,
        Id::CpufreqNone,
        Severity::Info,
        format!(
            "no cpufreq driver for CPU {}: governor and turbo cannot be read here",
            h.measured.first().unwrap_or(0)
        ),
    );
    if h.guest {
        f.why("in a VM the physical CPU's frequency, governor and turbo belong to the host")
            .host("the performance governor and turbo off (or fixed) on the host CPUs that run this VM's vCPUs")
    } else {
        f.why("without a cpufreq driver the CPU runs at whatever the firmware set")
            .manual(
                "check the firmware's power settings (performance profile, no C-state demotion)",
            )
    }
}

fn governor(h: &Host) -> Finding {
    let mut seen = Vec::new();
    let mut slow = Vec::new();
    for cpu in h.measured.cpus() {
        let base = format!("/sys/devices/system/cpu/cpu{cpu}/cpufreq");
        let gov = match h.read(&format!("{base}/scaling_governor")) {
            Ok(g) => g,
            Err(e) => return e.finding(Area::Power, Check::Governor),
        };
        let driver = h
            .read(&format!("{base}/scaling_driver"))
            .unwrap_or_else(|_| "?".into());
        if gov != "performance" {
            slow.push(*cpu);
        }
        seen.push(format!("cpu{cpu}: {gov} ({driver})"));
    }
    let value = seen.join(", ");
    if slow.is_empty() {
        return finding(Area::Power, Id::GovernorPerformance, Severity::Ok, value)
            .why("the performance governor keeps the clock at its highest");
    }
    let effects = slow
        .iter()
        .map(|c| super::Effect::Write {
            path: format!("/sys/devices/system/cpu/cpu{c}/cpufreq/scaling_governor"),
            value: "performance".into(),
        })
        .collect();
    let list: Vec<String> = slow.iter().map(|c| format!("cpu{c}")).collect();
    finding(Area::Power, Id::GovernorNotPerformance, Severity::Warn, value)
        .why(
            "other governors lower the clock when idle; the \
             first work after a pause runs slow while it ramps up",
        )
        .now(
            format!(
                "for c in {}; do echo performance > /sys/devices/system/cpu/$c/cpufreq/scaling_governor; done",
                list.join(" ")
            ),
            effects,
        )
}

fn turbo(h: &Host) -> Finding {
    let why = "turbo changes the clock with load and temperature on other cores: run times vary";
    let pstate = "/sys/devices/system/cpu/intel_pstate/no_turbo";
    let boost = "/sys/devices/system/cpu/cpufreq/boost";
    let (on, value, path, want) = match (h.read_int(pstate), h.read_int(boost)) {
        (Ok(v), _) => (v == 0, format!("intel_pstate/no_turbo = {v}"), pstate, "1"),
        (Err(Missing::Absent(_) | Missing::Unreadable(_)), Ok(v)) => {
            (v != 0, format!("cpufreq/boost = {v}"), boost, "0")
        }
        (Err(Missing::Absent(_)), Err(Missing::Absent(_))) => {
            // A cpufreq driver without a turbo switch (acpi-cpufreq on a CPU without
            // boost, cppc on some arm64): nothing to set.
            let none = format!("neither {pstate} nor {boost} exists: no turbo control");
            return finding(Area::Power, Id::TurboOff, Severity::Ok, none)
                .why("this cpufreq driver has no turbo switch");
        }
        (Err(e @ (Missing::Unparseable(_) | Missing::Hidden(_))), _) | (_, Err(e)) => {
            return e.finding(Area::Power, Check::Turbo);
        }
    };
    if on {
        finding(Area::Power, Id::TurboOn, Severity::Warn, value)
            .why(why)
            .echo(h, path, want)
    } else {
        finding(Area::Power, Id::TurboOff, Severity::Ok, value).why(why)
    }
}

/// One enabled idle state deeper than a polling wait.
const SHALLOW_EXIT_US: i64 = 2;

/// An idle state: (state dir, name, exit latency µs, disabled).
fn states(h: &Host, cpu: usize) -> Result<Vec<(String, String, i64, bool)>, Missing> {
    let dir = format!("/sys/devices/system/cpu/cpu{cpu}/cpuidle");
    let mut out = Vec::new();
    for s in h.list_dir(&dir)?.iter().filter(|s| s.starts_with("state")) {
        let p = format!("{dir}/{s}");
        let name = h.read(&format!("{p}/name"))?;
        let latency = h.read_int(&format!("{p}/latency"))?;
        let disabled = h.read_int(&format!("{p}/disable"))?;
        out.push((p, name, latency, disabled != 0));
    }
    Ok(out)
}

fn idle_states(h: &Host) -> Finding {
    let mut deep = Vec::new();
    let mut effects = Vec::new();
    let mut halt = Vec::new();
    for cpu in h.measured.cpus() {
        let list = match states(h, *cpu) {
            Ok(s) => s,
            Err(e) => return e.finding(Area::Power, Check::IdleStates),
        };
        for (p, name, lat, disabled) in list {
            if disabled || name == "POLL" {
                continue;
            }
            // haltpoll's state is a HLT in a guest: its "1 µs" is what the guest sees,
            // not the VM exit and host wake-up behind it.
            if name.starts_with("haltpoll") {
                halt.push(format!("cpu{cpu} haltpoll"));
            } else if lat > SHALLOW_EXIT_US {
                deep.push(format!("cpu{cpu} {name} ({lat} µs)"));
                effects.push(super::Effect::Write {
                    path: format!("{p}/disable"),
                    value: "1".into(),
                });
            }
        }
    }
    let why = "waking from a deep idle state takes its exit \
               latency, added to the first event after a pause";
    if !halt.is_empty() {
        return finding(
            Area::Power,
            Id::IdleHaltpoll,
            Severity::Warn,
            halt.join(", "),
        )
        .why(
            "the haltpoll idle state is a HLT: a VM exit, and the wake-up is the host \
                 scheduling the vCPU again (tens of µs, not the 1 µs it lists). Holding \
                 /dev/cpu_dma_latency at 0 keeps the CPU in POLL: it cut a cross-CPU futex \
                 wake-up from a 22-25 µs median to 2.5 µs on a Firecracker guest",
        )
        .manual(
            "while measuring, hold /dev/cpu_dma_latency open with 0 (jitterscope does by \
                 default: --dma-latency 0); for other programs see pm-qos-*",
        );
    }
    if deep.is_empty() {
        return finding(
            Area::Power,
            Id::IdleStatesShallow,
            Severity::Ok,
            format!("no enabled state exits in more than {SHALLOW_EXIT_US} µs"),
        )
        .why(why);
    }
    let n = effects.len();
    let f = finding(
        Area::Power,
        Id::IdleStatesDeep,
        Severity::Warn,
        deep.join(", "),
    )
    .why(why);
    let cmd = effects
        .iter()
        .filter_map(|e| match e {
            super::Effect::Write { path, .. } => Some(format!("echo 1 > {path}")),
            super::Effect::Affinity { .. } => None,
        })
        .collect::<Vec<_>>()
        .join("; ");
    let f = if n > 0 { f.now(cmd, effects) } else { f };
    f.boot(
        h,
        &[
            "processor.max_cstate=1".to_string(),
            "intel_idle.max_cstate=0".to_string(),
        ],
    )
}

/// haltpoll.guest_halt_poll_ns: how long a guest CPU polls before the HLT. 0 means it
/// never polls: every idle period ends in a VM exit.
fn haltpoll(h: &Host) -> Option<Finding> {
    let path = "/sys/module/haltpoll/parameters/guest_halt_poll_ns";
    let ns = match h.read_int(path) {
        Ok(v) => v,
        Err(Missing::Absent(_)) => return None,
        Err(e) => return Some(e.finding(Area::Power, Check::Haltpoll)),
    };
    let why = "haltpoll polls this long before it halts the vCPU; a wake-up within the \
               window costs no VM exit";
    if ns > 0 {
        return Some(
            finding(
                Area::Power,
                Id::HaltpollPolls,
                Severity::Ok,
                format!("{ns} ns"),
            )
            .why(why),
        );
    }
    let value = match h.cmdline().get("haltpoll.guest_halt_poll_ns") {
        Some(v) => format!("0 ns (haltpoll.guest_halt_poll_ns={v} on the command line)"),
        None => "0 ns".to_string(),
    };
    Some(
        finding(Area::Power, Id::HaltpollNoPoll, Severity::Warn, value)
            .why(why)
            .echo(h, path, "200000")
            .boot(h, &["haltpoll.guest_halt_poll_ns=200000".to_string()]),
    )
}

/// The per-CPU resume-latency limit: `n/a` holds the CPU to states that exit at once.
fn pm_qos(h: &Host) -> Finding {
    let mut open = Vec::new();
    let mut effects = Vec::new();
    let mut seen = Vec::new();
    for cpu in h.measured.cpus() {
        let path = format!("/sys/devices/system/cpu/cpu{cpu}/power/pm_qos_resume_latency_us");
        match h.read(&path) {
            Ok(v) => {
                seen.push(format!("cpu{cpu}: {v}"));
                // "0" is no constraint; "n/a" is none tolerated.
                if v == "0" {
                    open.push(cpu);
                    effects.push(super::Effect::Write {
                        path,
                        value: "n/a".into(),
                    });
                }
            }
            Err(e) => return e.finding(Area::Power, Check::PmQos),
        }
    }
    let why = "pm_qos_resume_latency_us limits how deep a CPU may idle: 'n/a' keeps it \
               polling (a wake-up costs no exit), '0' sets no limit";
    if open.is_empty() {
        return finding(Area::Power, Id::PmQosOk, Severity::Ok, seen.join(", ")).why(why);
    }
    // Only a cost when there is a state deeper than polling to fall into.
    let deeper =
        h.measured.cpus().iter().any(|c| {
            states(h, *c).is_ok_and(|s| s.iter().any(|(_, n, _, off)| !off && n != "POLL"))
        });
    let severity = if deeper {
        Severity::Warn
    } else {
        Severity::Info
    };
    let cmd = effects
        .iter()
        .filter_map(|e| match e {
            super::Effect::Write { path, value } => Some(format!("echo {value} > {path}")),
            super::Effect::Affinity { .. } => None,
        })
        .collect::<Vec<_>>()
        .join("; ");
    finding(Area::Power, Id::PmQosUnset, severity, seen.join(", "))
        .why(why)
        .now(cmd, effects)
}

fn smt(h: &Host) -> Finding {
    let why =
        "a hyperthread sibling shares the core's caches and execution units with the measured CPU";
    let whose = if h.guest {
        " (this guest's vCPU topology; the host's SMT is not visible from here)"
    } else {
        ""
    };
    match h.read_int("/sys/devices/system/cpu/smt/active") {
        Ok(0) => {
            let f = finding(Area::Power, Id::SmtOff, Severity::Ok, format!("0{whose}")).why(why);
            if h.guest {
                f.host(
                    "keep each vCPU's host core free of other work (its sibling thread included)",
                )
            } else {
                f
            }
        }
        Ok(v) => {
            let f = finding(
                Area::Power,
                Id::SmtActive,
                Severity::Warn,
                format!("{v}{whose}"),
            )
            .why(why);
            if h.guest {
                f.host("give the VM whole host cores (both siblings), or disable SMT on the host")
            } else {
                f.echo(h, "/sys/devices/system/cpu/smt/control", "off")
                    .boot(h, &["nosmt".to_string()])
            }
        }
        Err(e) => e.finding(Area::Power, Check::Smt),
    }
}
