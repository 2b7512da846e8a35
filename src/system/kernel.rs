//! What the running kernel was built with and what it said at boot: its build
//! configuration (/proc/config.gz, else /boot/config-<release>), the kernel log
//! (/dev/kmsg) and, from both, whether a boot option would be accepted. The audit prints a
//! boot option only when this says the kernel supports it; otherwise it names the missing
//! build option.
//!
//! Everything is read below a root directory so that a recorded tree (a test fixture)
//! is read like the live host; a fixture may hold `boot/config-<release>` in plain text.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

/// The kernel's build options (`CONFIG_X` → `y`, `m`, a number or a string).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KernelConfig {
    values: BTreeMap<String, String>,
    /// Where it was read from, for the finding's value; `None` when no config was found.
    pub source: Option<String>,
}

impl KernelConfig {
    /// /proc/config.gz, else /boot/config-<release> (the release from
    /// /proc/sys/kernel/osrelease); empty with no source when neither can be read.
    pub fn read(root: &Path) -> KernelConfig {
        let gz = root.join("proc/config.gz");
        if let Ok(file) = std::fs::File::open(&gz) {
            let mut text = String::new();
            if flate2::read::GzDecoder::new(file)
                .read_to_string(&mut text)
                .is_ok()
            {
                return KernelConfig::parse(&text, "/proc/config.gz");
            }
        }
        let release = std::fs::read_to_string(root.join("proc/sys/kernel/osrelease"))
            .map(|s| s.trim().to_string())
            .unwrap_or_default();
        if !release.is_empty() {
            let rel = format!("boot/config-{release}");
            if let Ok(text) = std::fs::read_to_string(root.join(&rel)) {
                return KernelConfig::parse(&text, &format!("/{rel}"));
            }
        }
        KernelConfig::default()
    }

    /// `CONFIG_X=v` lines; `# CONFIG_X is not set` and everything else are ignored.
    pub fn parse(text: &str, source: &str) -> KernelConfig {
        let values = text
            .lines()
            .filter_map(|l| {
                let (k, v) = l.trim().split_once('=')?;
                k.starts_with("CONFIG_")
                    .then(|| (k.to_string(), v.trim_matches('"').to_string()))
            })
            .collect();
        KernelConfig {
            values,
            source: Some(source.to_string()),
        }
    }

    /// True when a config was found.
    pub fn known(&self) -> bool {
        self.source.is_some()
    }

    /// The value of `CONFIG_X`, `None` when unset (or no config is known).
    pub fn get(&self, key: &str) -> Option<&str> {
        self.values.get(key).map(String::as_str)
    }

    /// Built in or a module.
    pub fn enabled(&self, key: &str) -> bool {
        matches!(self.get(key), Some("y" | "m"))
    }

    /// CONFIG_HZ.
    pub fn hz(&self) -> Option<u32> {
        self.get("CONFIG_HZ")?.parse().ok()
    }

    /// The preemption model the kernel boots with unless told otherwise.
    pub fn default_preemption(&self) -> Option<&'static str> {
        if self.enabled("CONFIG_PREEMPT_RT") {
            Some("rt")
        } else if self.enabled("CONFIG_PREEMPT_LAZY") {
            Some("lazy")
        } else if self.enabled("CONFIG_PREEMPT") {
            Some("full")
        } else if self.enabled("CONFIG_PREEMPT_VOLUNTARY") {
            Some("voluntary")
        } else if self.enabled("CONFIG_PREEMPT_NONE") {
            Some("none")
        } else {
            None
        }
    }

    /// Whether the running kernel accepts a boot option (`name` or `name=value`).
    pub fn supports(&self, option: &str) -> Support {
        let name = option.split_once('=').map_or(option, |(n, _)| n);
        let Some(needs) = boot_option_needs(name) else {
            return Support::Unknown;
        };
        if needs.is_empty() {
            return Support::Yes;
        }
        if !self.known() {
            return Support::Unchecked;
        }
        match needs.iter().find(|c| !self.enabled(c)) {
            None => Support::Yes,
            Some(c) => Support::Missing(c),
        }
    }
}

/// The answer of `KernelConfig::supports`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Support {
    /// Built in: the kernel accepts it.
    Yes,
    /// The kernel lacks this build option.
    Missing(&'static str),
    /// No kernel config to read: not checked.
    Unchecked,
    /// An option this table does not know: never printed by the audit (a test checks).
    Unknown,
}

/// The build options each boot option the audit may print needs (empty: every kernel
/// of the last ten years has it). From the kernel's admin-guide/kernel-parameters and
/// the `__setup`/`module_param` sites of each.
pub fn boot_option_needs(name: &str) -> Option<&'static [&'static str]> {
    Some(match name {
        "nohz_full" => &["CONFIG_NO_HZ_FULL"],
        "isolcpus" => &["CONFIG_CPU_ISOLATION"],
        "rcu_nocbs" | "rcu_nocb_poll" => &["CONFIG_RCU_NOCB_CPU"],
        "rcupdate.rcu_normal_after_boot" => &["CONFIG_TREE_RCU"],
        "irqaffinity" | "skew_tick" | "mitigations" | "idle" | "clocksource" => &[],
        "nosoftlockup" => &["CONFIG_SOFTLOCKUP_DETECTOR"],
        "nmi_watchdog" => &["CONFIG_HARDLOCKUP_DETECTOR"],
        "preempt" => &["CONFIG_PREEMPT_DYNAMIC"],
        "transparent_hugepage" => &["CONFIG_TRANSPARENT_HUGEPAGE"],
        "tsc" => &["CONFIG_X86_TSC"],
        "processor.max_cstate" => &["CONFIG_ACPI_PROCESSOR"],
        "intel_idle.max_cstate" => &["CONFIG_INTEL_IDLE"],
        "nosmt" => &["CONFIG_HOTPLUG_SMT"],
        "haltpoll.guest_halt_poll_ns" => &["CONFIG_HALTPOLL_CPUIDLE"],
        // 6.16+ (the audit checks the release too).
        "rt_group_sched" => &["CONFIG_RT_GROUP_SCHED"],
        "psi" => &["CONFIG_PSI"],
        _ => return None,
    })
}

/// The kernel log as text: /dev/kmsg read without blocking (root, or
/// kernel.dmesg_restrict=0), or a recorded file at `<root>/dev/kmsg`; `None` when neither
/// can be read.
pub fn kernel_log(root: &Path) -> Option<String> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(root.join("dev/kmsg"))
        .ok()?;
    let mut out = Vec::new();
    // /dev/kmsg gives one record per read and EAGAIN at the end; a plain file gives
    // chunks and 0 at the end.
    let mut buf = vec![0u8; 8192];
    for _ in 0..100_000 {
        match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            // EPIPE: a record was overwritten while reading; the next read goes on.
            Err(e) if e.raw_os_error() == Some(libc::EPIPE) => continue,
            Err(_) => break,
        }
    }
    Some(String::from_utf8_lossy(&out).into_owned())
}

/// The mode from "Dynamic Preempt: none" in the kernel log.
pub fn dynamic_preempt_from_log(log: &str) -> Option<String> {
    log.lines().rev().find_map(|l| {
        let (_, rest) = l.split_once("Dynamic Preempt: ")?;
        Some(rest.split_whitespace().next()?.to_string())
    })
}

/// "6.18.44-fc" → (6, 18).
pub fn release_version(release: &str) -> Option<(u32, u32)> {
    let mut parts = release.split(|c: char| !c.is_ascii_digit());
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_lines_and_support() {
        let c = KernelConfig::parse(
            "CONFIG_HZ=250\n# CONFIG_NO_HZ_FULL is not set\nCONFIG_CPU_ISOLATION=y\n\
             CONFIG_PREEMPT_NONE=y\nCONFIG_PREEMPT_DYNAMIC=y\nCONFIG_RCU_NOCB_CPU=y\n",
            "test",
        );
        assert_eq!(c.hz(), Some(250));
        assert_eq!(c.default_preemption(), Some("none"));
        assert_eq!(
            c.supports("nohz_full=1"),
            Support::Missing("CONFIG_NO_HZ_FULL")
        );
        assert_eq!(c.supports("isolcpus=managed_irq,1"), Support::Yes);
        assert_eq!(c.supports("skew_tick=1"), Support::Yes);
        assert_eq!(c.supports("frobnicate=1"), Support::Unknown);
        assert_eq!(
            KernelConfig::default().supports("rcu_nocbs=1"),
            Support::Unchecked
        );
    }

    #[test]
    fn the_log_names_the_dynamic_preemption_mode() {
        let log = "6,12,244570,-;Dynamic Preempt: none\n6,13,1,-;rcu: Preemptible\n";
        assert_eq!(dynamic_preempt_from_log(log).as_deref(), Some("none"));
        assert_eq!(release_version("6.18.44-fc-v657"), Some((6, 18)));
    }
}
