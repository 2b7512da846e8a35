//! The tuning audit: read-only checks of how a host is set up for low latency.
//!
//! Each check reads a few files under /proc, /sys or /etc (below a chosen root, so that a
//! saved snapshot or a test fixture can be audited like the live host) and yields
//! findings: a stable kebab-case id, a severity, the value seen, why it matters and the
//! exact fix. A file that cannot be read or parsed is itself a finding (severity info,
//! value `unreadable: …` or `unparseable: …`): nothing is skipped silently and nothing
//! panics on a malformed file.

use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::engine::cpu::CpuList;

/// How much a finding costs latency.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Set as a latency-tuned host should be.
    Ok,
    /// Context, or something the audit could not read.
    Info,
    /// Likely to cost latency or determinism on the measured CPUs.
    Warn,
    /// Certain to interrupt the measured CPUs.
    Bad,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Ok => "ok",
            Severity::Info => "info",
            Severity::Warn => "warn",
            Severity::Bad => "bad",
        })
    }
}

/// The group a finding belongs to, in the order the table shows them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Area {
    Isolation,
    Irq,
    Power,
    Memory,
    Scheduling,
    Watchdog,
    Time,
    Virtualization,
    Housekeeping,
}

impl fmt::Display for Area {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Area::Isolation => "isolation and ticks",
            Area::Irq => "interrupts",
            Area::Power => "power",
            Area::Memory => "memory",
            Area::Scheduling => "scheduling",
            Area::Watchdog => "watchdogs",
            Area::Time => "time",
            Area::Virtualization => "virtualization",
            Area::Housekeeping => "kernel threads and housekeeping",
        })
    }
}

/// One thing the audit saw.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    pub id: String,
    pub area: Area,
    pub severity: Severity,
    pub value: String,
    pub why: String,
    pub fix: String,
}

/// What `jitterscope audit --json` prints, and every result file keeps as `host.audit`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditReport {
    /// The directory /proc, /sys and /etc were read under.
    pub root: PathBuf,
    pub measured: CpuList,
    pub housekeeping: CpuList,
    pub findings: Vec<Finding>,
}

impl AuditReport {
    /// Audits `measured` on the tree under `root` (`/` for the live host); every other
    /// online CPU is housekeeping.
    pub fn of(root: &Path, measured: CpuList, online: &CpuList) -> AuditReport {
        let host = Host::new(root, measured.clone(), online);
        AuditReport {
            root: root.to_path_buf(),
            housekeeping: online.without(&measured),
            findings: audit(&host),
            measured,
        }
    }
}

fn finding(area: Area, id: &str, severity: Severity, value: impl Into<String>) -> Finding {
    Finding {
        id: id.to_string(),
        area,
        severity,
        value: value.into(),
        why: String::new(),
        fix: String::new(),
    }
}

impl Finding {
    fn why(mut self, why: impl Into<String>) -> Finding {
        self.why = why.into();
        self
    }
    fn fix(mut self, fix: impl Into<String>) -> Finding {
        self.fix = fix.into();
        self
    }
}

/// Why a file gave no usable value.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Missing {
    /// The file does not exist: the kernel lacks the feature, or a snapshot lacks it.
    Absent(String),
    Unreadable(String),
    Unparseable(String),
}

impl Missing {
    /// The info finding that says what could not be checked: `<base>-unreadable` or
    /// `<base>-unparseable`.
    fn finding(self, area: Area, base: &str) -> Finding {
        match self {
            Missing::Absent(why) | Missing::Unreadable(why) => finding(
                area,
                &format!("{base}-unreadable"),
                Severity::Info,
                format!("unreadable: {why}"),
            )
            .why("the audit could not check this")
            .fix("run the audit as root, or on a kernel that provides the file"),
            Missing::Unparseable(why) => finding(
                area,
                &format!("{base}-unparseable"),
                Severity::Info,
                format!("unparseable: {why}"),
            )
            .why("the file does not hold what the kernel writes there")
            .fix("check the file (a truncated snapshot?)"),
        }
    }
}

/// The host (or snapshot) being audited and the CPUs the audit is about.
pub struct Host {
    root: PathBuf,
    measured: CpuList,
    housekeeping: CpuList,
}

impl Host {
    /// Audits `measured` on the tree under `root`; every online CPU not measured is
    /// housekeeping.
    pub fn new(root: &Path, measured: CpuList, online: &CpuList) -> Host {
        Host {
            root: root.to_path_buf(),
            housekeeping: online.without(&measured),
            measured,
        }
    }

    fn path(&self, abs: &str) -> PathBuf {
        self.root.join(abs.trim_start_matches('/'))
    }

    /// A file's trimmed text; the error names the path as the kernel knows it.
    fn read(&self, abs: &str) -> Result<String, Missing> {
        fs::read_to_string(self.path(abs))
            .map(|s| s.trim().to_string())
            .map_err(|e| missing(abs, &e))
    }

    fn read_int(&self, abs: &str) -> Result<i64, Missing> {
        let text = self.read(abs)?;
        text.parse()
            .map_err(|_| Missing::Unparseable(format!("{abs}: {:?}", short(&text))))
    }

    fn read_list(&self, abs: &str) -> Result<CpuList, Missing> {
        let text = self.read(abs)?;
        // Some kernels print an unset mask (nohz_full without the parameter) as "(null)".
        if text == "(null)" {
            return Ok(CpuList::default());
        }
        CpuList::parse_kernel(&text)
            .map_err(|_| Missing::Unparseable(format!("{abs}: {:?}", short(&text))))
    }

    /// The entries of a directory, sorted; unreadable is an error.
    fn list_dir(&self, abs: &str) -> Result<Vec<String>, Missing> {
        let dir = fs::read_dir(self.path(abs)).map_err(|e| missing(abs, &e))?;
        let mut names: Vec<String> = dir
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort_by_key(|n| natural(n));
        Ok(names)
    }

    /// The housekeeping CPUs for a fix, or a placeholder when every CPU is measured.
    fn hk(&self) -> String {
        if self.housekeeping.is_empty() {
            "<housekeeping CPUs>".into()
        } else {
            self.housekeeping.to_string()
        }
    }
}

fn missing(abs: &str, e: &std::io::Error) -> Missing {
    let why = format!("{abs}: {e}");
    if e.kind() == std::io::ErrorKind::NotFound {
        Missing::Absent(why)
    } else {
        Missing::Unreadable(why)
    }
}

/// Sorts "irq10" after "irq9".
fn natural(s: &str) -> (String, u64) {
    let digits: String = s.chars().filter(char::is_ascii_digit).collect();
    let text: String = s.chars().filter(|c| !c.is_ascii_digit()).collect();
    (text, digits.parse().unwrap_or(0))
}

/// The start of a file's text, for an unparseable finding.
fn short(text: &str) -> String {
    text.chars().take(60).collect()
}

/// Runs every check; the findings come grouped by area.
pub fn audit(host: &Host) -> Vec<Finding> {
    let checks: [fn(&Host) -> Vec<Finding>; 9] = [
        isolation,
        irqs,
        power,
        memory,
        scheduling,
        watchdogs,
        time,
        virtualization,
        housekeeping,
    ];
    let mut all: Vec<Finding> = checks.iter().flat_map(|c| c(host)).collect();
    all.sort_by_key(|f| f.area);
    all
}

// ---------------------------------------------------------------------------------------
// 1. Isolation and ticks

/// The kernel command line as key → value (a bare flag has an empty value).
struct Cmdline(Vec<(String, String)>);

impl Cmdline {
    fn parse(text: &str) -> Cmdline {
        Cmdline(
            text.split_whitespace()
                .map(|w| match w.split_once('=') {
                    Some((k, v)) => (k.to_string(), v.to_string()),
                    None => (w.to_string(), String::new()),
                })
                .collect(),
        )
    }

    fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// A CPU-list parameter; isolcpus may lead with flags (`isolcpus=nohz,domain,1-3`).
    fn cpus(&self, key: &str) -> Result<Option<CpuList>, Missing> {
        let Some(v) = self.get(key) else {
            return Ok(None);
        };
        let list: Vec<&str> = v
            .split(',')
            .filter(|p| !p.chars().all(|c| c.is_ascii_alphabetic() || c == '_') || p.is_empty())
            .collect();
        CpuList::parse_kernel(&list.join(","))
            .map(Some)
            .map_err(|_| Missing::Unparseable(format!("/proc/cmdline: {key}={v}")))
    }
}

fn isolation(h: &Host) -> Vec<Finding> {
    let cmdline = match h.read("/proc/cmdline") {
        Ok(t) => Cmdline::parse(&t),
        Err(e) => return vec![e.finding(Area::Isolation, "cmdline")],
    };
    let boot = format!(
        "boot with isolcpus={m} nohz_full={m} rcu_nocbs={m}",
        m = h.measured
    );
    let mut out = Vec::new();
    let isolated = h.read_list("/sys/devices/system/cpu/isolated");
    let nohz = h.read_list("/sys/devices/system/cpu/nohz_full");
    out.push(match &isolated {
        Ok(l) => covered(h, Area::Isolation, "isolated", l)
            .why("the scheduler may put other tasks on CPUs that are not isolated")
            .fix(boot.clone()),
        Err(e) => e.clone().finding(Area::Isolation, "isolated"),
    });
    let tick = "without nohz_full the scheduler tick interrupts a busy CPU 100-1000 times a second";
    out.push(match &nohz {
        Ok(l) => covered(h, Area::Isolation, "nohz-full", l)
            .why(tick)
            .fix(boot.clone()),
        // The file exists only in kernels built with CONFIG_NO_HZ_FULL.
        Err(Missing::Absent(_)) => finding(
            Area::Isolation,
            "nohz-full-unsupported",
            Severity::Warn,
            "no /sys/devices/system/cpu/nohz_full",
        )
        .why(format!("{tick}; this kernel has no nohz_full support"))
        .fix(format!(
            "a kernel built with CONFIG_NO_HZ_FULL=y, then {boot}"
        )),
        Err(e) => e.clone().finding(Area::Isolation, "nohz-full"),
    });
    let nocbs = cmdline.cpus("rcu_nocbs");
    out.push(match &nocbs {
        Ok(l) => covered(
            h,
            Area::Isolation,
            "rcu-nocbs",
            &l.clone().unwrap_or_default(),
        )
        .why("RCU callbacks run as softirq work on the CPU that queued them unless offloaded")
        .fix(boot.clone()),
        Err(e) => e.clone().finding(Area::Isolation, "rcu-nocbs"),
    });
    out.extend(consistency(
        h,
        &cmdline,
        isolated.ok(),
        nohz.ok(),
        nocbs.ok().flatten(),
    ));
    out
}

/// `<base>-ok` when the list holds every measured CPU, `-partial` when some, `-missing`.
fn covered(h: &Host, area: Area, base: &str, list: &CpuList) -> Finding {
    let got = h.measured.intersect(list);
    let shown = if list.is_empty() {
        "none".into()
    } else {
        list.to_string()
    };
    let value = format!("{shown} (measured {})", h.measured);
    if got == h.measured {
        finding(area, &format!("{base}-ok"), Severity::Ok, value)
    } else if got.is_empty() {
        finding(area, &format!("{base}-missing"), Severity::Warn, value)
    } else {
        finding(area, &format!("{base}-partial"), Severity::Warn, value)
    }
}

/// Settings that contradict each other.
fn consistency(
    h: &Host,
    cmdline: &Cmdline,
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
                    "nohz-full-without-rcu-nocbs",
                    Severity::Warn,
                    format!("nohz_full CPUs {without} not in rcu_nocbs"),
                )
                .why(
                    "recent kernels offload RCU callbacks of \
         nohz_full CPUs implicitly, older ones do not",
                )
                .fix(format!("add rcu_nocbs={nohz} to the kernel command line")),
            );
        }
        if let Some(iso) = &isolated {
            let tick = iso.without(nohz);
            if !tick.is_empty() {
                out.push(
                    finding(
                        Area::Isolation,
                        "isolated-not-nohz-full",
                        Severity::Warn,
                        format!("isolated CPUs {tick} keep the tick"),
                    )
                    .why(
                        "an isolated CPU without nohz_full is \
         still interrupted by the scheduler tick",
                    )
                    .fix(format!(
                        "add nohz_full={iso} rcu_nocbs={iso} \
         to the kernel command line"
                    )),
                );
            }
        }
    }
    let asked = match cmdline.cpus("isolcpus") {
        Ok(a) => a,
        Err(e) => {
            out.push(e.finding(Area::Isolation, "isolcpus"));
            None
        }
    };
    if let (Some(asked), Some(iso)) = (asked, &isolated) {
        let lost = asked.intersect(&h.measured).without(iso);
        if !lost.is_empty() {
            out.push(
                finding(
                    Area::Isolation,
                    "isolcpus-not-in-force",
                    Severity::Bad,
                    format!(
                        "isolcpus={asked} on the \
         command line, isolated: {iso}"
                    ),
                )
                .why(
                    "the kernel did not apply the isolation the command \
         line asks for (a typo, or an unsupported flag)",
                )
                .fix(format!(
                    "check dmesg for isolcpus; boot with isolcpus={}",
                    h.measured
                )),
            );
        }
    }
    out
}

// ---------------------------------------------------------------------------------------
// 2. IRQs

fn irqs(h: &Host) -> Vec<Finding> {
    let dirs = match h.list_dir("/proc/irq") {
        Ok(d) => d,
        Err(e) => return vec![e.finding(Area::Irq, "irq-affinity"), irqbalance(h)],
    };
    let names = irq_names(&h.read("/proc/interrupts").unwrap_or_default());
    let (mut effective, mut allowed, mut unreadable) = (Vec::new(), Vec::new(), Vec::new());
    for irq in dirs.iter().filter(|d| d.parse::<u32>().is_ok()) {
        let aff = h.read_list(&format!("/proc/irq/{irq}/smp_affinity_list"));
        let eff = h.read_list(&format!("/proc/irq/{irq}/effective_affinity_list"));
        let label = match names.iter().find(|(n, _)| n == irq) {
            Some((_, name)) => format!("{irq} ({name})"),
            None => irq.clone(),
        };
        match (aff, eff) {
            (_, Ok(e)) if !e.intersect(&h.measured).is_empty() => {
                effective.push((irq.clone(), label))
            }
            (Ok(a), _) if !a.intersect(&h.measured).is_empty() => {
                allowed.push((irq.clone(), label))
            }
            (Err(_), _) => unreadable.push(irq.clone()),
            _ => {}
        }
    }
    let mut out = vec![irq_effective(h, &effective), irq_allowed(h, &allowed)];
    if !unreadable.is_empty() {
        out.push(
            finding(
                Area::Irq,
                "irq-affinity-unreadable",
                Severity::Info,
                format!(
                    "unreadable: smp_affinity_list of IRQs {}",
                    unreadable.join(" ")
                ),
            )
            .why("the audit could not check these IRQs")
            .fix("run the audit as root"),
        );
    }
    out.push(irqbalance(h));
    out
}

/// IRQ number → the name /proc/interrupts gives (its last column).
fn irq_names(interrupts: &str) -> Vec<(String, String)> {
    interrupts
        .lines()
        .filter_map(|l| {
            let (n, rest) = l.trim_start().split_once(':')?;
            n.parse::<u32>().ok()?;
            let name = rest.split_whitespace().last()?;
            (!name.chars().all(|c| c.is_ascii_digit())).then(|| (n.to_string(), name.to_string()))
        })
        .collect()
}

fn irq_fix(h: &Host, irqs: &[(String, String)]) -> String {
    let nums: Vec<&str> = irqs.iter().map(|(n, _)| n.as_str()).collect();
    format!(
        "for i in {}; do echo {} > /proc/irq/$i/smp_affinity_list; \
         done (and boot with irqaffinity={})",
        nums.join(" "),
        h.hk(),
        h.hk()
    )
}

/// "IRQ 24 (eth0)" or "2 IRQs: 24 (eth0), 25 (nvme0q0)".
fn irq_labels(irqs: &[(String, String)]) -> String {
    let labels: Vec<&str> = irqs.iter().map(|(_, l)| l.as_str()).collect();
    match labels.as_slice() {
        [one] => format!("IRQ {one}"),
        all => format!("{} IRQs: {}", all.len(), all.join(", ")),
    }
}

fn irq_effective(h: &Host, irqs: &[(String, String)]) -> Finding {
    if irqs.is_empty() {
        return finding(
            Area::Irq,
            "irq-effective-ok",
            Severity::Ok,
            format!("no IRQ is delivered to {}", h.measured),
        )
        .why("an IRQ delivered to a measured CPU interrupts it");
    }
    finding(
        Area::Irq,
        "irq-on-measured-cpus",
        Severity::Bad,
        irq_labels(irqs),
    )
    .why("each of these IRQs is delivered to a measured CPU and interrupts it")
    .fix(irq_fix(h, irqs))
}

fn irq_allowed(h: &Host, irqs: &[(String, String)]) -> Finding {
    if irqs.is_empty() {
        return finding(
            Area::Irq,
            "irq-affinity-ok",
            Severity::Ok,
            format!("no IRQ may move to {}", h.measured),
        )
        .why("an IRQ whose affinity includes a measured CPU may be moved there");
    }
    finding(
        Area::Irq,
        "irq-affinity-includes-measured",
        Severity::Warn,
        irq_labels(irqs),
    )
    .why(
        "these IRQs are allowed on a measured CPU and may be \
         moved there (CPU hotplug, irqbalance, driver reset)",
    )
    .fix(irq_fix(h, irqs))
}

fn irqbalance(h: &Host) -> Finding {
    match process_comms(h) {
        Err(e) => e.finding(Area::Irq, "irqbalance"),
        Ok(p) if p.iter().any(|(_, c)| c == "irqbalance") => {
            finding(Area::Irq, "irqbalance-running", Severity::Warn, "running")
                .why("irqbalance moves IRQs back onto the measured CPUs")
                .fix(format!(
                    "systemctl disable --now irqbalance (or set \
         IRQBALANCE_BANNED_CPULIST={} in its config)",
                    h.measured
                ))
        }
        Ok(_) => finding(
            Area::Irq,
            "irqbalance-not-running",
            Severity::Ok,
            "not running",
        )
        .why("irqbalance would move IRQs onto the measured CPUs"),
    }
}

/// (pid, comm) of every process /proc lists.
fn process_comms(h: &Host) -> Result<Vec<(String, String)>, Missing> {
    Ok(h.list_dir("/proc")?
        .into_iter()
        .filter(|d| d.parse::<u32>().is_ok())
        .filter_map(|pid| {
            let comm = h.read(&format!("/proc/{pid}/comm")).ok()?;
            Some((pid, comm))
        })
        .collect())
}

// ---------------------------------------------------------------------------------------
// 3. Power

fn power(h: &Host) -> Vec<Finding> {
    vec![governor(h), turbo(h), idle_states(h), smt(h)]
}

fn governor(h: &Host) -> Finding {
    let mut seen = Vec::new();
    let mut slow = false;
    for cpu in h.measured.cpus() {
        let base = format!("/sys/devices/system/cpu/cpu{cpu}/cpufreq");
        let gov = match h.read(&format!("{base}/scaling_governor")) {
            Ok(g) => g,
            Err(e) => return e.finding(Area::Power, "governor"),
        };
        let driver = h
            .read(&format!("{base}/scaling_driver"))
            .unwrap_or_else(|_| "?".into());
        slow |= gov != "performance";
        seen.push(format!("cpu{cpu}: {gov} ({driver})"));
    }
    let value = seen.join(", ");
    if slow {
        finding(
            Area::Power,
            "governor-not-performance",
            Severity::Warn,
            value,
        )
        .why(
            "other governors lower the clock when idle; the \
         first work after a pause runs slow while it ramps up",
        )
        .fix("echo performance | tee /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor")
    } else {
        finding(Area::Power, "governor-performance", Severity::Ok, value)
            .why("the performance governor keeps the clock at its highest")
    }
}

fn turbo(h: &Host) -> Finding {
    let why = "turbo changes the clock with load and temperature on other cores: run times vary";
    let pstate = "/sys/devices/system/cpu/intel_pstate/no_turbo";
    let boost = "/sys/devices/system/cpu/cpufreq/boost";
    let (on, value, fix) = match (h.read_int(pstate), h.read_int(boost)) {
        (Ok(v), _) => (
            v == 0,
            format!("intel_pstate/no_turbo = {v}"),
            format!("echo 1 > {pstate}"),
        ),
        (Err(Missing::Absent(_) | Missing::Unreadable(_)), Ok(v)) => (
            v != 0,
            format!("cpufreq/boost = {v}"),
            format!("echo 0 > {boost}"),
        ),
        (Err(Missing::Absent(_)), Err(Missing::Absent(_))) => {
            let none = format!("neither {pstate} nor {boost} exists");
            return Missing::Absent(none).finding(Area::Power, "turbo");
        }
        (Err(e @ Missing::Unparseable(_)), _) | (_, Err(e)) => {
            return e.finding(Area::Power, "turbo");
        }
    };
    if on {
        finding(Area::Power, "turbo-on", Severity::Warn, value)
            .why(why)
            .fix(fix)
    } else {
        finding(Area::Power, "turbo-off", Severity::Ok, value).why(why)
    }
}

/// One enabled idle state deeper than a polling wait.
const SHALLOW_EXIT_US: i64 = 2;

fn idle_states(h: &Host) -> Finding {
    let mut deep = Vec::new();
    for cpu in h.measured.cpus() {
        let dir = format!("/sys/devices/system/cpu/cpu{cpu}/cpuidle");
        let states = match h.list_dir(&dir) {
            Ok(s) => s,
            Err(e) => return e.finding(Area::Power, "idle-states"),
        };
        for s in states.iter().filter(|s| s.starts_with("state")) {
            let name = h.read(&format!("{dir}/{s}/name"));
            let latency = h.read_int(&format!("{dir}/{s}/latency"));
            let disabled = h.read_int(&format!("{dir}/{s}/disable"));
            match (name, latency, disabled) {
                (Ok(n), Ok(l), Ok(0)) if l > SHALLOW_EXIT_US => {
                    deep.push(format!("cpu{cpu} {n} ({l} µs)"))
                }
                (Ok(_), Ok(_), Ok(_)) => {}
                (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => {
                    return e.finding(Area::Power, "idle-states");
                }
            }
        }
    }
    let why = "waking from a deep idle state takes its exit \
         latency, added to the first event after a pause";
    if deep.is_empty() {
        finding(
            Area::Power,
            "idle-states-shallow",
            Severity::Ok,
            format!("no enabled state exits in more than {SHALLOW_EXIT_US} µs"),
        )
        .why(why)
    } else {
        finding(
            Area::Power,
            "idle-states-deep",
            Severity::Warn,
            deep.join(", "),
        )
        .why(why)
        .fix(format!(
            "cpupower -c {} idle-set -D {} (or boot with \
         processor.max_cstate=1 intel_idle.max_cstate=0)",
            h.measured,
            SHALLOW_EXIT_US + 1
        ))
    }
}

fn smt(h: &Host) -> Finding {
    let why =
        "a hyperthread sibling shares the core's caches and execution units with the measured CPU";
    match h.read_int("/sys/devices/system/cpu/smt/active") {
        Ok(0) => finding(Area::Power, "smt-off", Severity::Ok, "0").why(why),
        Ok(v) => finding(Area::Power, "smt-active", Severity::Warn, v.to_string())
            .why(why)
            .fix("echo off > /sys/devices/system/cpu/smt/control (or boot with nosmt)"),
        Err(e) => e.finding(Area::Power, "smt"),
    }
}

// ---------------------------------------------------------------------------------------
// 4. Memory

fn memory(h: &Host) -> Vec<Finding> {
    vec![
        thp_enabled(h),
        thp_defrag(h),
        swap(h),
        stat_interval(h),
        numa_balancing(h),
    ]
}

/// The bracketed, active word of a sysfs choice file ("always [madvise] never").
fn active_choice(h: &Host, abs: &str) -> Result<String, Missing> {
    let text = h.read(abs)?;
    text.split_whitespace()
        .find_map(|w| w.strip_prefix('[')?.strip_suffix(']'))
        .map(str::to_string)
        .ok_or_else(|| Missing::Unparseable(format!("{abs}: {:?}", short(&text))))
}

fn thp_enabled(h: &Host) -> Finding {
    let path = "/sys/kernel/mm/transparent_hugepage/enabled";
    let why = "khugepaged and page faults that compact memory into huge pages stall the program";
    match active_choice(h, path) {
        Ok(w) if w == "never" => finding(Area::Memory, "thp-never", Severity::Ok, w).why(why),
        Ok(w) if w == "madvise" => finding(Area::Memory, "thp-madvise", Severity::Info, w)
            .why("only regions that ask for huge pages get them; khugepaged still scans those")
            .fix(format!("echo never > {path}")),
        Ok(w) => finding(Area::Memory, "thp-always", Severity::Warn, w)
            .why(why)
            .fix(format!(
                "echo never > {path} (or boot with transparent_hugepage=never)"
            )),
        Err(e) => e.finding(Area::Memory, "thp"),
    }
}

fn thp_defrag(h: &Host) -> Finding {
    let path = "/sys/kernel/mm/transparent_hugepage/defrag";
    let why = "with defrag 'always' a page fault may stop to compact memory for a huge page";
    match active_choice(h, path) {
        Ok(w) if w == "always" => finding(Area::Memory, "thp-defrag-always", Severity::Warn, w)
            .why(why)
            .fix(format!("echo never > {path}")),
        Ok(w) => finding(Area::Memory, "thp-defrag-ok", Severity::Ok, w).why(why),
        Err(e) => e.finding(Area::Memory, "thp-defrag"),
    }
}

fn swap(h: &Host) -> Finding {
    let why = "a page swapped out costs a disk read, milliseconds, when touched again";
    match h.read("/proc/swaps") {
        Ok(t) => {
            let devices: Vec<&str> = t
                .lines()
                .skip(1)
                .filter_map(|l| l.split_whitespace().next())
                .collect();
            if devices.is_empty() {
                finding(Area::Memory, "swap-off", Severity::Ok, "no swap").why(why)
            } else {
                finding(Area::Memory, "swap-on", Severity::Warn, devices.join(", "))
                    .why(why)
                    .fix("swapoff -a (and remove swap from /etc/fstab), or mlockall in the program")
            }
        }
        Err(e) => e.finding(Area::Memory, "swap"),
    }
}

/// The value the realtime tuned profile sets.
const STAT_INTERVAL_TUNED: i64 = 10;

fn stat_interval(h: &Host) -> Finding {
    let why = "the vmstat worker wakes on every CPU with changed counters once per interval";
    match h.read_int("/proc/sys/vm/stat_interval") {
        Ok(v) if v >= STAT_INTERVAL_TUNED => finding(
            Area::Memory,
            "stat-interval-ok",
            Severity::Ok,
            format!("{v} s"),
        )
        .why(why),
        Ok(v) => finding(
            Area::Memory,
            "stat-interval-short",
            Severity::Warn,
            format!("{v} s"),
        )
        .why(why)
        .fix(format!("sysctl -w vm.stat_interval={STAT_INTERVAL_TUNED}")),
        Err(e) => e.finding(Area::Memory, "stat-interval"),
    }
}

fn numa_balancing(h: &Host) -> Finding {
    let why =
        "automatic NUMA balancing unmaps pages to sample accesses: page faults and migrations";
    match h.read_int("/proc/sys/kernel/numa_balancing") {
        Ok(0) => finding(Area::Memory, "numa-balancing-off", Severity::Ok, "0").why(why),
        Ok(v) => finding(
            Area::Memory,
            "numa-balancing-on",
            Severity::Warn,
            v.to_string(),
        )
        .why(why)
        .fix("sysctl -w kernel.numa_balancing=0"),
        Err(e) => e.finding(Area::Memory, "numa-balancing"),
    }
}

// ---------------------------------------------------------------------------------------
// 5. Scheduling

fn scheduling(h: &Host) -> Vec<Finding> {
    vec![rt_throttling(h), preemption(h), timer_migration(h)]
}

fn rt_throttling(h: &Host) -> Finding {
    let why = "RT throttling stops a spinning SCHED_FIFO thread for the rest of each period";
    match h.read_int("/proc/sys/kernel/sched_rt_runtime_us") {
        Ok(-1) => finding(Area::Scheduling, "rt-throttling-off", Severity::Ok, "-1")
            .why("no safety net: a runaway real-time thread can starve its CPU"),
        Ok(v) => finding(
            Area::Scheduling,
            "rt-throttling-on",
            Severity::Warn,
            format!("{v} µs per period"),
        )
        .why(why)
        .fix(
            "sysctl -w kernel.sched_rt_runtime_us=-1 (only when \
         every real-time thread leaves room for the kernel)",
        ),
        Err(e) => e.finding(Area::Scheduling, "rt-throttling"),
    }
}

/// The preemption model: PREEMPT_RT from the version string, else the dynamic mode from
/// debugfs, else `preempt=` on the command line, else the build flags in the version.
fn preemption(h: &Host) -> Finding {
    let version = match h.read("/proc/version") {
        Ok(v) => v,
        Err(e) => return e.finding(Area::Scheduling, "preempt"),
    };
    let words: Vec<&str> = version.split_whitespace().collect();
    let debug = "/sys/kernel/debug/sched/preempt";
    let model = if words.contains(&"PREEMPT_RT") {
        "rt".to_string()
    } else if let Ok(t) = h.read(debug) {
        match t
            .split_whitespace()
            .find_map(|w| w.strip_prefix('(')?.strip_suffix(')'))
        {
            Some(m) => m.to_string(),
            None => {
                return Missing::Unparseable(format!("{debug}: {:?}", short(&t)))
                    .finding(Area::Scheduling, "preempt");
            }
        }
    } else if let Some(m) = h
        .read("/proc/cmdline")
        .ok()
        .and_then(|c| Cmdline::parse(&c).get("preempt").map(str::to_string))
    {
        m
    } else if words.contains(&"PREEMPT_DYNAMIC") {
        return finding(
            Area::Scheduling,
            "preempt-dynamic-unknown",
            Severity::Info,
            format!("PREEMPT_DYNAMIC; unreadable: {debug}"),
        )
        .why("the preemption mode is chosen at boot; only debugfs (root) tells which")
        .fix("boot with preempt=full, or run the audit as root with debugfs mounted");
    } else if words.contains(&"PREEMPT") {
        "full".to_string()
    } else {
        "none or voluntary".to_string()
    };
    preempt_finding(&model)
}

fn preempt_finding(model: &str) -> Finding {
    let why = "with less preemption a woken high-priority thread \
         waits for the kernel to reach a preemption point";
    match model {
        "rt" => finding(Area::Scheduling, "preempt-rt", Severity::Ok, "PREEMPT_RT").why(why),
        // Lazy preemption still preempts at once for real-time tasks.
        "full" | "lazy" => finding(Area::Scheduling, "preempt-full", Severity::Ok, model).why(why),
        m => finding(Area::Scheduling, "preempt-limited", Severity::Warn, m)
            .why(why)
            .fix("boot with preempt=full (PREEMPT_DYNAMIC kernels), or a PREEMPT_RT kernel"),
    }
}

fn timer_migration(h: &Host) -> Finding {
    let why =
        "timer migration lets idle CPUs hand their timers to busy ones, such as a CPU that polls";
    match h.read_int("/proc/sys/kernel/timer_migration") {
        Ok(0) => finding(Area::Scheduling, "timer-migration-off", Severity::Ok, "0").why(why),
        Ok(v) => finding(
            Area::Scheduling,
            "timer-migration-on",
            Severity::Warn,
            v.to_string(),
        )
        .why(why)
        .fix("sysctl -w kernel.timer_migration=0"),
        Err(e) => e.finding(Area::Scheduling, "timer-migration"),
    }
}

// ---------------------------------------------------------------------------------------
// 6. Watchdogs

fn watchdogs(h: &Host) -> Vec<Finding> {
    vec![nmi_watchdog(h), soft_watchdog(h)]
}

fn nmi_watchdog(h: &Host) -> Finding {
    let why = "the hard-lockup detector fires a perf NMI on every CPU every few seconds";
    match h.read_int("/proc/sys/kernel/nmi_watchdog") {
        Ok(0) => finding(Area::Watchdog, "nmi-watchdog-off", Severity::Ok, "0").why(why),
        Ok(v) => finding(
            Area::Watchdog,
            "nmi-watchdog-on",
            Severity::Warn,
            v.to_string(),
        )
        .why(why)
        .fix("sysctl -w kernel.nmi_watchdog=0 (or boot with nmi_watchdog=0)"),
        Err(e) => e.finding(Area::Watchdog, "nmi-watchdog"),
    }
}

fn soft_watchdog(h: &Host) -> Finding {
    let why = "the soft-lockup detector runs a timer and a stopper thread on each CPU in its mask";
    let mask = h.read_list("/proc/sys/kernel/watchdog_cpumask");
    match (h.read_int("/proc/sys/kernel/watchdog"), mask) {
        (Ok(0), _) => finding(Area::Watchdog, "soft-watchdog-off", Severity::Ok, "0").why(why),
        (Ok(_), Ok(m)) if m.intersect(&h.measured).is_empty() => finding(
            Area::Watchdog,
            "soft-watchdog-excludes-measured",
            Severity::Ok,
            format!("on, cpumask {m}"),
        )
        .why(why),
        (Ok(_), Ok(m)) => finding(
            Area::Watchdog,
            "soft-watchdog-on",
            Severity::Warn,
            format!("on, cpumask {m}"),
        )
        .why(why)
        .fix(format!(
            "sysctl -w kernel.watchdog=0 (or sysctl -w kernel.watchdog_cpumask={})",
            h.hk()
        )),
        (Ok(_), Err(e)) | (Err(e), _) => e.finding(Area::Watchdog, "soft-watchdog"),
    }
}

// ---------------------------------------------------------------------------------------
// 7. Time

fn time(h: &Host) -> Vec<Finding> {
    let cpuinfo = h.read("/proc/cpuinfo");
    let flags: Vec<String> = cpuinfo.as_ref().map(|t| cpu_flags(t)).unwrap_or_default();
    let mut out = vec![clocksource(h)];
    match cpuinfo {
        Ok(_) if flags.iter().any(|f| f == "tsc") => {
            out.push(tsc_flags(&flags));
            out.push(tsc_reliable(h));
        }
        Ok(_) => out.push(
            finding(
                Area::Time,
                "tsc-absent",
                Severity::Info,
                "no tsc flag in /proc/cpuinfo",
            )
            .why("not an x86 CPU (or no TSC): the TSC checks do not apply"),
        ),
        Err(e) => out.push(e.finding(Area::Time, "cpuinfo")),
    }
    out
}

/// The first `flags` line of /proc/cpuinfo.
fn cpu_flags(cpuinfo: &str) -> Vec<String> {
    cpuinfo
        .lines()
        .find(|l| l.starts_with("flags"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, f)| f.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}

fn clocksource(h: &Host) -> Finding {
    let path = "/sys/devices/system/clocksource/clocksource0/current_clocksource";
    let fix = format!("echo tsc > {path} (or boot with clocksource=tsc tsc=reliable)");
    match h.read(path) {
        Ok(c) if c == "tsc" || c == "arch_sys_counter" => {
            finding(Area::Time, "clocksource-ok", Severity::Ok, c)
                .why("clock reads stay in the vDSO, tens of ns")
        }
        Ok(c) if c == "hpet" || c == "acpi_pm" => {
            finding(Area::Time, "clocksource-slow", Severity::Bad, c)
                .why(
                    "every clock read is a system call and a slow device read, about a microsecond",
                )
                .fix(fix)
        }
        Ok(c) => finding(Area::Time, "clocksource-not-tsc", Severity::Info, c)
            .why("a paravirtual clock works in the vDSO but is slower to read than the TSC")
            .fix(fix),
        Err(e) => e.finding(Area::Time, "clocksource"),
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
            "tsc-invariant",
            Severity::Ok,
            "constant_tsc nonstop_tsc",
        )
        .why(why)
    } else {
        finding(
            Area::Time,
            "tsc-not-invariant",
            Severity::Warn,
            format!("missing {}", missing.join(" ")),
        )
        .why(why)
        .fix(
            "none in software: use a CPU (or, in a VM, a CPU model \
         such as -cpu host,+invtsc) with an invariant TSC",
        )
    }
}

fn tsc_reliable(h: &Host) -> Finding {
    let why = "without tsc=reliable the clocksource watchdog checks \
         the TSC from a timer that visits every CPU in turn";
    match h.read("/proc/cmdline") {
        Ok(c) if c.split_whitespace().any(|w| w == "tsc=reliable") => {
            finding(Area::Time, "tsc-reliable-set", Severity::Ok, "tsc=reliable").why(why)
        }
        Ok(_) => finding(
            Area::Time,
            "tsc-reliable-unset",
            Severity::Warn,
            "not on the command line",
        )
        .why(why)
        .fix("boot with tsc=reliable (only with an invariant, synchronised TSC)"),
        Err(e) => e.finding(Area::Time, "tsc-reliable"),
    }
}

// ---------------------------------------------------------------------------------------
// 8. Virtualization and mitigations

fn virtualization(h: &Host) -> Vec<Finding> {
    vec![hypervisor(h), steal(h), mitigations(h)]
}

fn hypervisor(h: &Host) -> Finding {
    match h.read("/proc/cpuinfo") {
        Ok(t) if cpu_flags(&t).iter().any(|f| f == "hypervisor") => finding(
            Area::Virtualization,
            "hypervisor-present",
            Severity::Info,
            "hypervisor flag set",
        )
        .why(
            "the host can deschedule a vCPU or exit to the \
         hypervisor at any time; its tuning is invisible here",
        )
        .fix("pin each vCPU to a dedicated, isolated host CPU (no overcommit)"),
        Ok(_) => finding(
            Area::Virtualization,
            "bare-metal",
            Severity::Ok,
            "no hypervisor flag",
        )
        .why("no hypervisor between the program and the CPU"),
        Err(e) => e.finding(Area::Virtualization, "hypervisor"),
    }
}

/// Steal ticks since boot per measured CPU: the 8th number of each `cpuN` line.
fn steal(h: &Host) -> Finding {
    let stat = match h.read("/proc/stat") {
        Ok(s) => s,
        Err(e) => return e.finding(Area::Virtualization, "steal"),
    };
    let mut stolen = Vec::new();
    for cpu in h.measured.cpus() {
        let tag = format!("cpu{cpu}");
        let Some(line) = stat
            .lines()
            .find(|l| l.split_whitespace().next() == Some(&tag))
        else {
            return Missing::Unparseable(format!("/proc/stat: no {tag} line"))
                .finding(Area::Virtualization, "steal");
        };
        let nums: Result<Vec<u64>, _> = line.split_whitespace().skip(1).map(str::parse).collect();
        match nums
            .ok()
            .and_then(|n| Some((*n.get(7)?, n.iter().sum::<u64>())))
        {
            Some((0, _)) => {}
            Some((s, total)) => stolen.push(format!(
                "{tag}: {s} ticks ({:.2}%)",
                100.0 * s as f64 / total.max(1) as f64
            )),
            None => {
                return Missing::Unparseable(format!("/proc/stat: {:?}", short(line)))
                    .finding(Area::Virtualization, "steal");
            }
        }
    }
    let why = "steal time is time the hypervisor ran something else on this vCPU";
    if stolen.is_empty() {
        finding(
            Area::Virtualization,
            "steal-none",
            Severity::Ok,
            "0 since boot",
        )
        .why(why)
    } else {
        finding(
            Area::Virtualization,
            "steal-time",
            Severity::Warn,
            stolen.join(", "),
        )
        .why(why)
        .fix("give the VM dedicated host CPUs (vCPU pinning, no overcommit)")
    }
}

fn mitigations(h: &Host) -> Finding {
    let dir = "/sys/devices/system/cpu/vulnerabilities";
    let names = match h.list_dir(dir) {
        Ok(n) => n,
        Err(e) => return e.finding(Area::Virtualization, "mitigations"),
    };
    let on: Vec<String> = names
        .into_iter()
        .filter(|n| {
            h.read(&format!("{dir}/{n}"))
                .is_ok_and(|t| t.starts_with("Mitigation"))
        })
        .collect();
    let why = "mitigations add work to every system call, interrupt and context switch";
    if on.is_empty() {
        finding(
            Area::Virtualization,
            "mitigations-none",
            Severity::Ok,
            "none active",
        )
        .why(why)
    } else {
        finding(
            Area::Virtualization,
            "mitigations-on",
            Severity::Info,
            on.join(" "),
        )
        .why(why)
        .fix("boot with mitigations=off, only where the security trade-off is accepted")
    }
}

// ---------------------------------------------------------------------------------------
// 9. Kernel threads and housekeeping

fn housekeeping(h: &Host) -> Vec<Finding> {
    vec![workqueue(h), kthreads(h), tuned(h)]
}

/// A kernel hex mask ("ff,ffffffff": 32-bit words, most significant first) as a CPU list.
fn parse_hex_mask(text: &str) -> Option<CpuList> {
    let mut cpus = Vec::new();
    for (i, word) in text.trim().rsplit(',').enumerate() {
        let bits = u32::from_str_radix(word, 16).ok()?;
        cpus.extend((0..32).filter(|b| bits & (1 << b) != 0).map(|b| i * 32 + b));
    }
    Some(CpuList::from_cpus(cpus))
}

/// A CPU list as the kernel's hex mask: the top word unpadded, the others 8 digits.
fn hex_mask(list: &CpuList) -> String {
    let words = list.cpus().last().map_or(1, |m| m / 32 + 1);
    let word = |w: usize| {
        list.cpus()
            .iter()
            .filter(|c| *c / 32 == w)
            .fold(0u32, |a, c| a | 1 << (c % 32))
    };
    let mut out = vec![format!("{:x}", word(words - 1))];
    out.extend((0..words - 1).rev().map(|w| format!("{:08x}", word(w))));
    out.join(",")
}

fn workqueue(h: &Host) -> Finding {
    let path = "/sys/devices/virtual/workqueue/cpumask";
    let why = "unbound workqueue work (kworker/u*) runs on any CPU in this mask";
    let text = match h.read(path) {
        Ok(t) => t,
        Err(e) => return e.finding(Area::Housekeeping, "workqueue"),
    };
    let Some(mask) = parse_hex_mask(&text) else {
        return Missing::Unparseable(format!("{path}: {:?}", short(&text)))
            .finding(Area::Housekeeping, "workqueue");
    };
    let hit = mask.intersect(&h.measured);
    if hit.is_empty() {
        finding(
            Area::Housekeeping,
            "workqueue-ok",
            Severity::Ok,
            format!("{text} (CPUs {mask})"),
        )
        .why(why)
    } else {
        let fix = if h.housekeeping.is_empty() {
            "leave a housekeeping CPU out of -a".to_string()
        } else {
            format!("echo {} > {path}", hex_mask(&h.housekeeping))
        };
        finding(
            Area::Housekeeping,
            "workqueue-on-measured",
            Severity::Warn,
            format!("{text} (CPUs {mask})"),
        )
        .why(why)
        .fix(fix)
    }
}

/// Kernel threads that may run on several CPUs, measured ones among them. Per-CPU
/// threads (kworker/1:0, ksoftirqd/1) are bound to their CPU by design and left out.
fn kthreads(h: &Host) -> Finding {
    let procs = match process_comms(h) {
        Ok(p) => p,
        Err(e) => return e.finding(Area::Housekeeping, "kthreads"),
    };
    let mut hits = Vec::new();
    let mut pids = Vec::new();
    for (pid, comm) in procs {
        let watched = ["rcu", "kworker", "watchdog"];
        if !watched.iter().any(|w| comm.starts_with(w)) {
            continue;
        }
        let hit = |a: &CpuList| a.len() > 1 && !a.intersect(&h.measured).is_empty();
        if let Some(a) = kthread_cpus(h, &pid).filter(hit) {
            hits.push(format!("{comm} ({pid}: {a})"));
            // Workqueue workers refuse taskset (PF_NO_SETAFFINITY).
            if !comm.starts_with("kworker") {
                pids.push(pid);
            }
        }
    }
    let why = "these kernel threads may be scheduled on a measured CPU";
    if hits.is_empty() {
        return finding(
            Area::Housekeeping,
            "kthreads-ok",
            Severity::Ok,
            "none of rcu*, kworker, watchdog* may run there",
        )
        .why(why);
    }
    let shown = hits.len().min(8);
    let more = if hits.len() > shown {
        format!(" and {} more", hits.len() - shown)
    } else {
        String::new()
    };
    finding(
        Area::Housekeeping,
        "kthreads-on-measured",
        Severity::Warn,
        format!("{}{more}", hits[..shown].join(", ")),
    )
    .why(why)
    .fix(if pids.is_empty() {
        "kworkers follow the workqueue cpumask (see workqueue-*)".to_string()
    } else {
        format!(
            "for p in {}; do taskset -pc {} $p; done (kworkers follow the workqueue cpumask)",
            pids.join(" "),
            h.hk()
        )
    })
}

/// The CPUs a kernel thread (parent 0 or kthreadd, pid 2) may run on; `None` for a user
/// process with the same name, or a thread that exited since /proc was listed.
fn kthread_cpus(h: &Host, pid: &str) -> Option<CpuList> {
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
    CpuList::parse_kernel(field("Cpus_allowed_list:")?).ok()
}

fn tuned(h: &Host) -> Finding {
    let path = "/etc/tuned/active_profile";
    let why = "tuned re-applies its profile's settings at boot and may undo manual tuning";
    let latency = [
        "realtime",
        "cpu-partitioning",
        "latency-performance",
        "network-latency",
    ];
    match fs::read_to_string(h.path(path)) {
        Ok(p)
            if latency
                .iter()
                .any(|l| p.split_whitespace().any(|w| w.starts_with(l))) =>
        {
            finding(
                Area::Housekeeping,
                "tuned-latency-profile",
                Severity::Ok,
                p.trim(),
            )
            .why(why)
        }
        Ok(p) => finding(
            Area::Housekeeping,
            "tuned-other-profile",
            Severity::Warn,
            p.trim(),
        )
        .why(why)
        .fix("tuned-adm profile latency-performance (or cpu-partitioning with isolated_cores set)"),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => finding(
            Area::Housekeeping,
            "tuned-absent",
            Severity::Info,
            format!("no {path}"),
        )
        .why("tuned is not in use: nothing re-applies (or undoes) the settings above at boot"),
        Err(e) => Missing::Unreadable(format!("{path}: {e}")).finding(Area::Housekeeping, "tuned"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_masks_round_trip() {
        assert_eq!(parse_hex_mask("3"), Some(CpuList::from_cpus(vec![0, 1])));
        assert_eq!(
            parse_hex_mask("1,00000001"),
            Some(CpuList::from_cpus(vec![0, 32]))
        );
        assert_eq!(parse_hex_mask("zz"), None);
        assert_eq!(hex_mask(&CpuList::from_cpus(vec![0])), "1");
        assert_eq!(hex_mask(&CpuList::from_cpus(vec![0, 32])), "1,00000001");
        assert_eq!(hex_mask(&CpuList::from_cpus(vec![4, 5])), "30");
    }

    #[test]
    fn isolcpus_flags_are_not_cpus() {
        let c = Cmdline::parse("ro isolcpus=nohz,domain,managed_irq,1-3 rcu_nocbs");
        assert_eq!(
            c.cpus("isolcpus"),
            Ok(Some(CpuList::from_cpus(vec![1, 2, 3])))
        );
        assert_eq!(c.cpus("rcu_nocbs"), Ok(Some(CpuList::default())));
        assert_eq!(c.cpus("nohz_full"), Ok(None));
    }

    #[test]
    fn irq_names_come_from_the_last_column() {
        let t = "           CPU0       CPU1\n 24:  1  0  IO-APIC   5-edge      ACPI:Ged\nNMI: 0 0 Non-maskable interrupts\n";
        assert_eq!(
            irq_names(t),
            vec![("24".to_string(), "ACPI:Ged".to_string())]
        );
    }
}
