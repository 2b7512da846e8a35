//! Facts about the host, stored with every result so that a figure always travels with
//! the machine and settings that produced it.

pub mod audit;
pub mod cause_fix;
pub mod cgroup;
pub mod counters;
pub mod finding_id;
pub mod kernel;
pub mod proc_stat;
pub mod rt_group;
pub mod throttle;
pub mod tune;

use serde::{Deserialize, Serialize};

use crate::engine::clock::ClockInfo;
use crate::engine::cpu::CpuList;

/// `host` in the result file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostInfo {
    pub hostname: String,
    pub kernel_release: String,
    pub kernel_version: String,
    /// `/proc/cmdline`.
    pub cmdline: String,
    pub cpu_model: String,
    /// Online CPUs.
    pub cpus_online: CpuList,
    pub cpu_count: usize,
    /// The time source: counter, frequency and where it came from, cross-checks, flags.
    pub clock: ClockInfo,
    /// The hypervisor, when running under one.
    pub virtualization: Option<String>,
    pub isolation: Isolation,
    /// `/proc/sys/kernel/sched_rt_runtime_us` (-1: real-time threads are never throttled).
    pub sched_rt_runtime_us: Option<i64>,
    /// Where the kernel was found to be PREEMPT_RT (`/sys/kernel/realtime`, or the version
    /// string); absent for any other kernel, and in files from before it was kept (then
    /// [`HostInfo::preempt_rt`] reads the version string).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preempt_rt: Option<String>,
    /// The tuning audit for the run's measured CPUs, as `jitterscope audit --json` gives
    /// it (absent in files written before it was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audit: Option<audit::AuditReport>,
}

/// CPU isolation the kernel was booted with.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Isolation {
    /// `/sys/devices/system/cpu/isolated`.
    pub isolated: CpuList,
    /// `/sys/devices/system/cpu/nohz_full`.
    pub nohz_full: CpuList,
}

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

impl HostInfo {
    /// The host's facts, without the audit (see `audited`).
    pub fn collect(clock: ClockInfo, cpus_online: CpuList) -> HostInfo {
        let uname = rustix::system::uname();
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu_list = |p: &str| read(p).and_then(|s| CpuList::parse_kernel(&s).ok());
        HostInfo {
            hostname: uname.nodename().to_string_lossy().into_owned(),
            kernel_release: uname.release().to_string_lossy().into_owned(),
            kernel_version: uname.version().to_string_lossy().into_owned(),
            cmdline: read("/proc/cmdline").unwrap_or_default(),
            cpu_model: cpu_model(&cpuinfo).unwrap_or_else(|| "unknown".into()),
            cpu_count: cpus_online.len(),
            cpus_online,
            clock,
            virtualization: detect_hypervisor(&cpuinfo),
            isolation: Isolation {
                isolated: cpu_list("/sys/devices/system/cpu/isolated").unwrap_or_default(),
                nohz_full: cpu_list("/sys/devices/system/cpu/nohz_full").unwrap_or_default(),
            },
            sched_rt_runtime_us: crate::engine::sched::rt_runtime_us(),
            preempt_rt: preempt_rt_source(
                read("/sys/kernel/realtime").as_deref(),
                &uname.version().to_string_lossy(),
            ),
            audit: None,
        }
    }

    /// Where the kernel was found to be PREEMPT_RT, `None` when it is not: as the run
    /// recorded it, else (a file from before it was kept) from the version string.
    pub fn preempt_rt(&self) -> Option<&str> {
        self.preempt_rt
            .as_deref()
            .or_else(|| preempt_rt_source(None, &self.kernel_version).map(|_| VERSION_STRING))
    }
}

/// How the version string is named as the source.
const VERSION_STRING: &str = "the version string";

/// Where a kernel shows it is PREEMPT_RT: `/sys/kernel/realtime` (1 on an RT kernel,
/// absent on others), else the `PREEMPT_RT` of its version string (`#1 SMP PREEMPT_RT
/// Debian 6.1.192-3`); `None` when neither says so.
pub fn preempt_rt_source(realtime: Option<&str>, version: &str) -> Option<String> {
    match realtime.map(str::trim) {
        Some("1") => Some("/sys/kernel/realtime".into()),
        _ if version.split_whitespace().any(|w| w == "PREEMPT_RT") => Some(VERSION_STRING.into()),
        _ => None,
    }
}

impl HostInfo {
    /// The same facts with the live host's tuning audit for `measured` (the audit takes a
    /// few ms: it reads /proc and /sys).
    pub fn audited(self, measured: &CpuList) -> HostInfo {
        self.audited_for(measured, audit::Measuring::Unknown)
    }

    /// As `audited`, for measuring threads scheduled as `measuring` says.
    pub fn audited_for(mut self, measured: &CpuList, measuring: audit::Measuring) -> HostInfo {
        let report = audit::AuditReport::of_measuring(
            std::path::Path::new("/"),
            measured.clone(),
            &self.cpus_online,
            measuring,
        );
        self.audit = Some(report);
        self
    }
}

fn cpu_model(cpuinfo: &str) -> Option<String> {
    cpuinfo
        .lines()
        .find(|l| {
            l.starts_with("model name") || l.starts_with("Model") || l.starts_with("cpu model")
        })
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
}

/// Names the hypervisor from the CPU flag, CPUID's vendor leaf, /sys/hypervisor and DMI.
pub fn detect_hypervisor(cpuinfo: &str) -> Option<String> {
    let flagged = cpuinfo
        .lines()
        .find(|l| l.starts_with("flags"))
        .is_some_and(|l| l.split_whitespace().any(|f| f == "hypervisor"));
    let named = cpuid_hypervisor_vendor()
        .or_else(|| read("/sys/hypervisor/type"))
        .or_else(|| {
            let vendor = read("/sys/class/dmi/id/sys_vendor")?;
            let product = read("/sys/class/dmi/id/product_name").unwrap_or_default();
            let known = [
                "QEMU",
                "KVM",
                "VMware",
                "Xen",
                "Microsoft",
                "Amazon EC2",
                "Google",
            ];
            known
                .iter()
                .any(|k| vendor.contains(k) || product.contains(k))
                .then(|| format!("{vendor} {product}").trim().to_string())
        });
    match (flagged, named) {
        (_, Some(name)) => Some(name),
        (true, None) => Some("unknown hypervisor (cpuinfo 'hypervisor' flag)".into()),
        (false, None) => None,
    }
}

#[cfg(target_arch = "x86_64")]
fn cpuid_hypervisor_vendor() -> Option<String> {
    use core::arch::x86_64::__cpuid;
    if __cpuid(1).ecx & (1 << 31) == 0 {
        return None;
    }
    let l = __cpuid(0x4000_0000);
    let bytes: Vec<u8> = [l.ebx, l.ecx, l.edx]
        .iter()
        .flat_map(|r| r.to_le_bytes())
        .collect();
    let sig = String::from_utf8_lossy(&bytes)
        .trim_matches(char::from(0))
        .trim()
        .to_string();
    let name = match sig.as_str() {
        "KVMKVMKVM" => "KVM",
        "Microsoft Hv" => "Hyper-V",
        "VMwareVMware" => "VMware",
        "XenVMMXenVMM" => "Xen",
        "TCGTCGTCGTCG" => "QEMU TCG",
        "ACRNACRNACRN" => "ACRN",
        "" => return None,
        other => other,
    };
    Some(name.to_string())
}

#[cfg(not(target_arch = "x86_64"))]
fn cpuid_hypervisor_vendor() -> Option<String> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_cpu_model() {
        let info = "processor\t: 0\nmodel name\t: AMD EPYC\nflags\t: fpu hypervisor\n";
        assert_eq!(cpu_model(info).as_deref(), Some("AMD EPYC"));
    }

    /// Issue 48: the kernel is PREEMPT_RT by /sys/kernel/realtime, else by its version
    /// string; PREEMPT_DYNAMIC and plain PREEMPT are not RT.
    #[test]
    fn issue48_preempt_rt_is_read_from_realtime_then_the_version() {
        let debian_rt = "#1 SMP PREEMPT_RT Debian 6.1.192-3 (2026-11-26)";
        assert_eq!(
            preempt_rt_source(Some("1\n"), debian_rt).as_deref(),
            Some("/sys/kernel/realtime")
        );
        assert_eq!(
            preempt_rt_source(None, debian_rt).as_deref(),
            Some(VERSION_STRING)
        );
        for other in [
            "#1 SMP PREEMPT_DYNAMIC Debian 6.1.192-3",
            "#1 SMP PREEMPT Thu",
        ] {
            assert_eq!(preempt_rt_source(None, other), None, "{other}");
        }
        assert_eq!(preempt_rt_source(Some("0"), "#1 SMP PREEMPT_DYNAMIC"), None);
    }

    #[test]
    fn a_hypervisor_flag_alone_still_says_vm() {
        let v = detect_hypervisor("flags : fpu hypervisor\n");
        assert!(v.is_some());
    }
}
