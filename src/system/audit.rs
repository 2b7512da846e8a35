//! The tuning audit: read-only checks of how a host is set up for low latency.
//!
//! Each check reads a few files under /proc, /sys or /etc (below a chosen root, so that a
//! saved snapshot or a test fixture can be audited like the live host) and yields
//! findings: a typed id (`FindingId`, stored as a stable kebab-case string), a severity,
//! the value seen, why it matters and the fix. A file that cannot be read or parsed is
//! itself a finding (severity info, value `unreadable: …` or `unparseable: …`): nothing
//! is skipped silently and nothing panics on a malformed file.
//!
//! Every fix is checked against the audited kernel and host before it is printed, and
//! says where it applies (`Remedy`): a command for run time (only for a file that exists
//! and, for an IRQ, only one that can move), boot options (only those the running
//! kernel's build configuration supports, with how to set them: GRUB, or the VM's host),
//! a kernel build (naming the missing option), or the hypervisor's host. The text in
//! `fix` is rendered from the remedies.

mod cgroups;
mod container;
mod housekeeping;
mod irq;
mod isolation;
mod memory;
mod power;
mod rt_threads;
mod sched;
mod time;

use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::engine::cpu::CpuList;
use crate::system::kernel::{self, KernelConfig, Support};

pub use crate::system::finding_id::{Check, FindingId};
pub use time::steal_over_run;

/// How much a finding costs latency.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Set as a latency-tuned host should be.
    Ok,
    /// Context, or something the audit could not read, or too rare to matter.
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
    Cgroups,
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
            Area::Cgroups => "cgroups",
            Area::Watchdog => "watchdogs",
            Area::Time => "time",
            Area::Virtualization => "virtualization",
            Area::Housekeeping => "kernel threads and housekeeping",
        })
    }
}

/// One change a run-time command makes, so that it can be checked and undone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Effect {
    /// The file (under /proc or /sys) reads `value` afterwards.
    Write { path: String, value: String },
    /// The thread's allowed CPUs (`Cpus_allowed_list`) are `cpus` afterwards.
    Affinity { pid: u32, cpus: CpuList },
}

/// One way to apply a fix, and where.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "applies", rename_all = "kebab-case")]
pub enum Remedy {
    /// A command that takes effect at once and lasts until the next boot.
    Runtime {
        command: String,
        /// What the command changes, in the order it changes it.
        effects: Vec<Effect>,
    },
    /// Kernel command-line options, each one the running kernel supports.
    Boot { options: Vec<String>, how: String },
    /// Boot options the running kernel lacks: a kernel built with `config`.
    KernelBuild {
        config: Vec<String>,
        options: Vec<String>,
        how: String,
    },
    /// Only the hypervisor's host can change this (vCPU pinning, host isolation, the
    /// host's cpufreq).
    Host { what: String },
    /// A step by hand (a service, a config file, a cgroup layout, the program itself).
    Manual { what: String },
}

impl Remedy {
    fn text(&self) -> String {
        match self {
            Remedy::Runtime { command, .. } => format!("now: {command}"),
            Remedy::Boot { options, how } => {
                format!("at boot: {} ({how})", options.join(" "))
            }
            Remedy::KernelBuild {
                config,
                options,
                how,
            } => {
                let then = if options.is_empty() {
                    String::new()
                } else {
                    format!(", then boot with {}", options.join(" "))
                };
                format!(
                    "kernel build: this kernel lacks {}{then} ({how})",
                    config.join(" ")
                )
            }
            Remedy::Host { what } => format!("on the host, not this guest: {what}"),
            Remedy::Manual { what } => what.clone(),
        }
    }
}

/// One thing the audit saw.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    pub id: FindingId,
    pub area: Area,
    pub severity: Severity,
    pub value: String,
    pub why: String,
    /// The remedies in words, `; `-separated (empty when nothing is to be done).
    pub fix: String,
    /// The same fix, typed: what to run or set, and where.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remedies: Vec<Remedy>,
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
        Self::of_measuring(root, measured, online, Measuring::Unknown)
    }

    /// As `of`, for measuring threads that run as `measuring` says: the real-time kernel
    /// threads at or above their priority are the ones that preempt them.
    pub fn of_measuring(
        root: &Path,
        measured: CpuList,
        online: &CpuList,
        measuring: Measuring,
    ) -> AuditReport {
        let mut host = Host::new(root, measured.clone(), online);
        host.measuring = measuring;
        AuditReport {
            root: root.to_path_buf(),
            housekeeping: host.housekeeping.clone(),
            findings: audit(&host),
            measured,
        }
    }

    /// Every run-time remedy of every finding, with the finding's id.
    pub fn runtime_remedies(&self) -> Vec<(FindingId, &Remedy)> {
        self.findings
            .iter()
            .flat_map(|f| f.remedies.iter().map(move |r| (f.id, r)))
            .filter(|(_, r)| matches!(r, Remedy::Runtime { .. }))
            .collect()
    }
}

fn finding(area: Area, id: FindingId, severity: Severity, value: impl Into<String>) -> Finding {
    Finding {
        id,
        area,
        severity,
        value: value.into(),
        why: String::new(),
        fix: String::new(),
        remedies: Vec::new(),
    }
}

impl Finding {
    /// A finding of `id` for tests of what reads findings: its fix is `fix`.
    #[cfg(test)]
    pub fn made_up(id: FindingId, severity: Severity, fix: &str) -> Finding {
        Finding {
            fix: fix.into(),
            ..finding(Area::Isolation, id, severity, "")
        }
    }

    fn why(mut self, why: impl Into<String>) -> Finding {
        self.why = why.into();
        self
    }

    fn remedy(mut self, r: Remedy) -> Finding {
        self.remedies.push(r);
        self.render_fix();
        self
    }

    /// `fix`: the remedies' texts, joined.
    fn render_fix(&mut self) {
        self.fix = (self.remedies.iter())
            .map(Remedy::text)
            .collect::<Vec<_>>()
            .join("; ");
    }

    /// A run-time command and what it changes.
    fn now(self, command: impl Into<String>, effects: Vec<Effect>) -> Finding {
        self.remedy(Remedy::Runtime {
            command: command.into(),
            effects,
        })
    }

    /// `sysctl -w key=value`, only when the sysctl exists on the audited host.
    fn sysctl(self, h: &Host, key: &str, value: &str) -> Finding {
        let path = format!("/proc/sys/{}", key.replace('.', "/"));
        if !h.path(&path).exists() {
            return self;
        }
        self.now(
            format!("sysctl -w {key}={value}"),
            vec![Effect::Write {
                path,
                value: value.to_string(),
            }],
        )
    }

    /// `echo value > path`, only when the file exists on the audited host and opens for
    /// writing there.
    fn echo(self, h: &Host, path: &str, value: &str) -> Finding {
        if !h.path(path).exists() || !h.writable(path) {
            return self;
        }
        self.now(
            format!("echo {value} > {path}"),
            vec![Effect::Write {
                path: path.to_string(),
                value: value.to_string(),
            }],
        )
    }

    /// Boot options: those the running kernel supports as a boot remedy, the others as
    /// a kernel build naming the missing option. An option that sets CPUs apart
    /// (`isolcpus`, `nohz_full`) keeps those the command line already sets apart, and
    /// one that would leave the kernel no housekeeping CPU is never given: the finding
    /// then says so and what to do instead (issue 48).
    fn boot(mut self, h: &Host, options: &[String]) -> Finding {
        let (mut kept, mut refused) = (Vec::new(), None);
        for o in options {
            match h.set_apart(o) {
                Ok(o) => kept.push(o),
                Err(why) => refused = Some(why),
            }
        }
        if let Some(why) = refused {
            if self.severity > Severity::Info {
                self.severity = Severity::Info;
            }
            self = self.manual(why);
        }
        let (mut ok, mut unchecked, mut lacking) = (Vec::new(), Vec::new(), Vec::new());
        for o in &kept {
            match h.config.supports(o) {
                Support::Yes => ok.push(o.clone()),
                Support::Unchecked => unchecked.push(o.clone()),
                Support::Missing(c) => lacking.push((c.to_string(), o.clone())),
                // Only options of the table are printed (a unit test walks them all).
                Support::Unknown => unchecked.push(o.clone()),
            }
        }
        if !ok.is_empty() {
            self = self.remedy(Remedy::Boot {
                options: ok,
                how: h.boot_how(),
            });
        }
        if !unchecked.is_empty() {
            let how = format!("{}; not checked: no kernel config to read", h.boot_how());
            self = self.remedy(Remedy::Boot {
                options: unchecked,
                how,
            });
        }
        if !lacking.is_empty() {
            let mut config: Vec<String> = lacking.iter().map(|(c, _)| format!("{c}=y")).collect();
            config.dedup();
            self = self.remedy(Remedy::KernelBuild {
                config,
                options: lacking.into_iter().map(|(_, o)| o).collect(),
                how: h.build_how(),
            });
        }
        self
    }

    fn host(self, what: impl Into<String>) -> Finding {
        self.remedy(Remedy::Host { what: what.into() })
    }

    fn manual(self, what: impl Into<String>) -> Finding {
        self.remedy(Remedy::Manual { what: what.into() })
    }
}

/// Why a file gave no usable value.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Missing {
    /// The file does not exist: the kernel lacks the feature, or a snapshot lacks it.
    Absent(String),
    Unreadable(String),
    Unparseable(String),
    /// Out of sight from inside a container (the node's processes, its /etc).
    Hidden(String),
}

impl Missing {
    /// The info finding that says what could not be checked.
    fn finding(self, area: Area, check: Check) -> Finding {
        match self {
            Missing::Absent(why) => finding(
                area,
                FindingId::Unreadable(check),
                Severity::Info,
                format!("unreadable: {why}"),
            )
            .why("the audit could not check this: this kernel (or snapshot) has no such file")
            .manual("none needed: the feature is absent"),
            Missing::Unreadable(why) => {
                let fix = if rustix::process::geteuid().is_root() {
                    "check the file's permissions (it refuses root too)"
                } else {
                    "run the audit as root"
                };
                finding(
                    area,
                    FindingId::Unreadable(check),
                    Severity::Info,
                    format!("unreadable: {why}"),
                )
                .why("the audit could not check this")
                .manual(fix)
            }
            Missing::Unparseable(why) => finding(
                area,
                FindingId::Unparseable(check),
                Severity::Info,
                format!("unparseable: {why}"),
            )
            .why("the file does not hold what the kernel writes there")
            .manual("check the file (a truncated snapshot?)"),
            Missing::Hidden(why) => finding(
                area,
                FindingId::Unreadable(check),
                Severity::Info,
                format!("{} the container: {why}", container::HIDDEN),
            )
            .why("the audit cannot check this from inside a container: it is not passed")
            .manual("audit the node itself: jitterscope audit on the host"),
        }
    }
}

/// How the threads the audit is for will be scheduled, as far as it was told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Measuring {
    /// Not told (`jitterscope audit`): every real-time thread outranks a SCHED_OTHER
    /// one, and those are named with their priorities.
    Unknown,
    /// SCHED_OTHER: every real-time thread preempts it.
    Other,
    /// SCHED_FIFO or SCHED_RR at this priority: a thread at it or above preempts it (a
    /// FIFO thread of equal priority runs until it yields).
    RealTime(u8),
    /// SCHED_DEADLINE: above every real-time thread.
    Deadline,
}

impl Measuring {
    /// From a measuring command's scheduling request.
    pub fn of(req: crate::engine::sched::SchedRequest) -> Measuring {
        use crate::engine::sched::Policy;
        match req.policy {
            Policy::Other => Measuring::Other,
            Policy::Fifo | Policy::Rr => Measuring::RealTime(req.priority),
            Policy::Deadline(_) => Measuring::Deadline,
        }
    }
}

/// The host (or snapshot) being audited and the CPUs the audit is about.
pub struct Host {
    root: PathBuf,
    measured: CpuList,
    housekeeping: CpuList,
    online: CpuList,
    config: KernelConfig,
    cmdline: Option<Cmdline>,
    /// The cpuinfo `hypervisor` flag.
    guest: bool,
    log: Option<String>,
    /// The container runtime, when the audited tree is a container's.
    container: Option<String>,
    /// The node's tasks are out of sight (another PID namespace).
    tasks_hidden: bool,
    /// The audited process's cgroups, read once: the container's evidence and the
    /// cgroup checks judge the same reading.
    cgroups: Result<crate::system::cgroup::Cgroups, crate::system::cgroup::CgroupError>,
    /// How the measuring threads will be scheduled.
    measuring: Measuring,
}

impl Host {
    /// Audits `measured` on the tree under `root`; every online CPU neither measured nor
    /// set apart by the host (isolcpus, nohz_full, an isolated partition) is housekeeping,
    /// so that no fix moves IRQs or unbound work onto another isolated CPU; every one not
    /// measured where that leaves none.
    pub fn new(root: &Path, measured: CpuList, online: &CpuList) -> Host {
        let rest = online.without(&measured);
        let spare = rest.without(&crate::engine::cpu::Tuned::read(root).cpus);
        let mut h = Host {
            root: root.to_path_buf(),
            housekeeping: if spare.is_empty() { rest } else { spare },
            online: online.clone(),
            measured,
            config: KernelConfig::read(root),
            cmdline: None,
            guest: false,
            log: kernel::kernel_log(root),
            container: None,
            tasks_hidden: false,
            cgroups: crate::system::cgroup::Cgroups::read(root, None),
            measuring: Measuring::Unknown,
        };
        let from_root =
            (h.cgroups.as_ref().ok()).and_then(|c| c.cpu().or(c.unified()).map(|ch| ch.from_root));
        let hidden = container::host_tasks_hidden(root);
        h.container = container::detect(root, from_root, hidden);
        h.tasks_hidden = h.container.is_some() && hidden;
        h.cmdline = h.read("/proc/cmdline").ok().map(|c| Cmdline::parse(&c));
        h.guest = h
            .read("/proc/cpuinfo")
            .is_ok_and(|t| cpu_flags(&t).iter().any(|f| f == "hypervisor"));
        h
    }

    /// Whether a sysfs, procfs, debugfs or cgroup file may be written from here: it opens
    /// for writing on the live host (a recorded tree's files are taken as writable).
    /// Opening one changes nothing until a write, and it sees what `access(W_OK)` does
    /// not: debugfs under kernel lockdown refuses the open even to root (the audit printed
    /// `echo full > /sys/kernel/debug/sched/preempt` once debugfs was mounted), as does a
    /// read-only sysfs in a container.
    fn writable(&self, abs: &str) -> bool {
        self.root != Path::new("/") || fs::OpenOptions::new().write(true).open(abs).is_ok()
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
        if text == "(null)" || text.is_empty() {
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

    /// A boot option as a fix may give it, or why it may not be given. A CPU-list option
    /// (`isolcpus`, `nohz_full`, `rcu_nocbs`) replaces the command line's, so it keeps the
    /// CPUs that one already lists, and isolcpus's flags of both (a bare list means
    /// `domain`). None may leave the kernel no housekeeping CPU (set apart by isolcpus and
    /// nohz_full together), and nohz_full never names the boot CPU 0, whose tick the
    /// kernel keeps for timekeeping.
    fn set_apart(&self, option: &str) -> Result<String, String> {
        let Some((key, _)) = option.split_once('=') else {
            return Ok(option.to_string());
        };
        if !matches!(key, "isolcpus" | "nohz_full" | "rcu_nocbs") {
            return Ok(option.to_string());
        }
        let one = Cmdline::parse(option);
        let (Ok(Some(mut asked)), Ok(now)) = (one.cpus(key), self.cmdline_cpus(key)) else {
            return Ok(option.to_string());
        };
        if key == "nohz_full" {
            asked = asked.without(&CpuList::from_cpus(vec![0]));
            if asked.is_empty() {
                return Err(
                    "nohz_full cannot stop CPU 0's tick: the kernel keeps the boot \
                            CPU ticking for timekeeping; measure another CPU"
                        .into(),
                );
            }
        }
        let now = now.unwrap_or_default();
        let all = CpuList::from_cpus([asked.cpus(), now.cpus()].concat());
        if key != "rcu_nocbs" {
            let other = if key == "isolcpus" {
                "nohz_full"
            } else {
                "isolcpus"
            };
            let others = self.cmdline_cpus(other).ok().flatten().unwrap_or_default();
            if self.online.without(&all).without(&others).is_empty() {
                let apart = CpuList::from_cpus([now.cpus(), others.cpus()].concat());
                let instead = match apart.without(&self.measured).is_empty() {
                    true => "leave at least one CPU unmeasured (-a) for it".to_string(),
                    false => format!("measure the CPUs already set apart instead (-a {apart})"),
                };
                return Err(format!(
                    "{key}={all} would leave no CPU for the kernel's housekeeping (its \
                     timers, IRQs, RCU and unbound work, and this tool's reader): {instead}"
                ));
            }
        }
        let mut parts = match key {
            "isolcpus" => isolcpus_flags(
                &one.flags(key),
                self.cmdline().get(key).map(|_| self.cmdline().flags(key)),
            ),
            _ => Vec::new(),
        };
        parts.push(all.to_string());
        Ok(format!("{key}={}", parts.join(",")))
    }

    /// A CPU-list parameter of the command line; `all` (rcu_nocbs=all) is every online
    /// CPU.
    fn cmdline_cpus(&self, key: &str) -> Result<Option<CpuList>, Missing> {
        match self.cmdline().get(key) {
            Some("all") => Ok(Some(self.online.clone())),
            _ => self.cmdline().cpus(key),
        }
    }

    /// The housekeeping CPUs for a fix, or a placeholder when every CPU is measured.
    fn hk(&self) -> String {
        if self.housekeeping.is_empty() {
            "<housekeeping CPUs>".into()
        } else {
            self.housekeeping.to_string()
        }
    }

    fn cmdline(&self) -> &Cmdline {
        static EMPTY: Cmdline = Cmdline(Vec::new());
        self.cmdline.as_ref().unwrap_or(&EMPTY)
    }

    /// True when nothing on this machine sets its kernel command line: a guest with no
    /// boot loader (Firecracker and other direct kernel boots), whose host passes it.
    fn cmdline_from_host(&self) -> bool {
        let loader = ["etc/default/grub", "boot/grub", "boot/grub2", "boot/loader"]
            .iter()
            .any(|p| self.root.join(p).exists());
        self.guest && !loader
    }

    /// How a boot option gets onto the kernel command line here.
    fn boot_how(&self) -> String {
        if self.root.join("etc/default/grub").exists() {
            "add to GRUB_CMDLINE_LINUX in /etc/default/grub, run update-grub \
             (or grub2-mkconfig -o /boot/grub2/grub.cfg) and reboot"
                .into()
        } else if self.cmdline_from_host() {
            "set by this VM's host (Firecracker boot_args, QEMU -append): change it there".into()
        } else {
            "add to the boot loader's kernel command line and reboot".into()
        }
    }

    /// How a kernel with other build options gets here.
    fn build_how(&self) -> String {
        if self.cmdline_from_host() {
            "this VM's kernel comes from its host: the host must boot it with such a kernel".into()
        } else {
            "build and install a kernel with it, then reboot".into()
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

/// The first `flags` line of /proc/cpuinfo.
fn cpu_flags(cpuinfo: &str) -> Vec<String> {
    cpuinfo
        .lines()
        .find(|l| l.starts_with("flags"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, f)| f.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}

/// Runs every check; the findings come grouped by area.
pub fn audit(host: &Host) -> Vec<Finding> {
    let checks: [fn(&Host) -> Vec<Finding>; 11] = [
        isolation::isolation,
        irq::irqs,
        power::power,
        memory::memory,
        sched::scheduling,
        cgroups::cgroups,
        sched::watchdogs,
        time::time,
        time::virtualization,
        housekeeping::housekeeping,
        rt_threads::rt_threads,
    ];
    let mut all: Vec<Finding> = checks.iter().flat_map(|c| c(host)).collect();
    if let Some(runtime) = &host.container {
        container::adjust(host, runtime, &mut all);
    }
    all.sort_by_key(|f| f.area);
    all
}

/// Two words of one CPU-list boot option (`isolcpus`, `nohz_full`, `rcu_nocbs`) as one,
/// since the kernel takes one of each: both's CPUs, and for isolcpus both's flags. None
/// for words of different keys or of another kind.
pub(crate) fn merged_option(a: &str, b: &str) -> Option<String> {
    let (ka, _) = a.split_once('=')?;
    let (kb, _) = b.split_once('=')?;
    if ka != kb || !matches!(ka, "isolcpus" | "nohz_full" | "rcu_nocbs") {
        return None;
    }
    let (ca, cb) = (Cmdline::parse(a), Cmdline::parse(b));
    let cpus = CpuList::from_cpus([ca.cpus(ka).ok()??.cpus(), cb.cpus(kb).ok()??.cpus()].concat());
    let mut parts = match ka {
        "isolcpus" => isolcpus_flags(&ca.flags(ka), Some(cb.flags(kb))),
        _ => Vec::new(),
    };
    parts.push(cpus.to_string());
    Some(format!("{ka}={}", parts.join(",")))
}

/// The flags of an isolcpus fix that replaces the command line's `line` (None: it has
/// none): both's, the fix's first, where a list without flags means `domain`; printed
/// bare when `domain` is all.
fn isolcpus_flags(fix: &[&str], line: Option<Vec<&str>>) -> Vec<String> {
    let domain = |f: &[&str]| -> Vec<String> {
        match f.is_empty() {
            true => vec!["domain".into()],
            false => f.iter().map(|s| s.to_string()).collect(),
        }
    };
    let mut out = domain(fix);
    for f in line.map(|l| domain(&l)).unwrap_or_default() {
        if !out.contains(&f) {
            out.push(f);
        }
    }
    if out == ["domain"] {
        out.clear();
    }
    out
}

/// The kernel command line as key → value (a bare flag has an empty value).
struct Cmdline(Vec<(String, String)>);

impl Cmdline {
    fn parse(text: &str) -> Cmdline {
        Cmdline(
            text.split_whitespace()
                // Everything after `--` goes to init, not the kernel.
                .take_while(|w| *w != "--")
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

    /// The flags of a list parameter (`isolcpus=managed_irq,domain,1` → managed_irq, domain).
    fn flags(&self, key: &str) -> Vec<&str> {
        self.get(key)
            .map(|v| {
                v.split(',')
                    .filter(|p| {
                        !p.is_empty() && p.chars().all(|c| c.is_ascii_alphabetic() || c == '_')
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
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

/// (pid, comm) of every process /proc lists; hidden inside a container that shows none
/// of the node's.
fn process_comms(h: &Host) -> Result<Vec<(String, String)>, Missing> {
    if h.tasks_hidden {
        return Err(Missing::Hidden(
            "the node's processes are in another PID namespace".into(),
        ));
    }
    Ok(h.list_dir("/proc")?
        .into_iter()
        .filter(|d| d.parse::<u32>().is_ok())
        .filter_map(|pid| {
            let comm = h.read(&format!("/proc/{pid}/comm")).ok()?;
            Some((pid, comm))
        })
        .collect())
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

    /// The boot options every finding of an audit of `measured` on a 2-CPU host booted
    /// with `cmdline` gives, and the manual steps.
    fn fixes(cmdline: &str, isolated: &str, measured: &str) -> (Vec<String>, Vec<String>) {
        let d = tempfile::tempdir().unwrap();
        let put = |rel: &str, text: &str| {
            let p = d.path().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        put("proc/cmdline", cmdline);
        put("sys/devices/system/cpu/isolated", isolated);
        put("sys/devices/system/cpu/nohz_full", isolated);
        put("sys/devices/system/cpu/online", "0-1");
        let list = |l: &str| CpuList::parse_kernel(l).unwrap();
        let r = AuditReport::of(d.path(), list(measured), &list("0-1"));
        let (mut boot, mut manual) = (Vec::new(), Vec::new());
        for rem in r.findings.iter().flat_map(|f| &f.remedies) {
            match rem {
                Remedy::Boot { options, .. } | Remedy::KernelBuild { options, .. } => {
                    boot.extend(options.iter().cloned())
                }
                Remedy::Manual { what } => manual.push(what.clone()),
                _ => {}
            }
        }
        (boot, manual)
    }

    /// Issue 48: on a host whose CPU 1 is isolated, an audit of CPU 0 (the last
    /// housekeeping CPU) never advises isolating it; it says to measure CPU 1 instead.
    /// An audit of CPU 1 there, or of CPU 1 on an untuned host, may advise its options.
    #[test]
    fn no_fix_isolates_the_last_housekeeping_cpu() {
        let tuned = "BOOT_IMAGE=/vmlinuz isolcpus=1 nohz_full=1 rcu_nocbs=1";
        let sets_apart = |o: &String| o.starts_with("isolcpus=") || o.starts_with("nohz_full=");
        let (boot, manual) = fixes(tuned, "1", "0");
        assert!(!boot.iter().any(sets_apart), "{boot:?}");
        assert!(manual.iter().any(|m| m.contains("(-a 1)")), "{manual:?}");
        // Every CPU measured: isolcpus would leave none; nohz_full may take CPU 1 alone
        // (never the boot CPU 0, whose tick the kernel keeps).
        let (boot, manual) = fixes("ro", "", "0-1");
        assert!(!boot.iter().any(|o| o.starts_with("isolcpus=")), "{boot:?}");
        assert!(boot.contains(&"nohz_full=1".to_string()), "{boot:?}");
        assert!(
            manual.iter().any(|m| m.contains("leave at least one CPU")),
            "{manual:?}"
        );
        // Untuned, CPU 1 measured: its options, CPU 0 left for housekeeping.
        let (boot, _) = fixes("ro", "", "1");
        assert!(boot.contains(&"isolcpus=1".to_string()), "{boot:?}");
        assert!(boot.contains(&"nohz_full=1".to_string()), "{boot:?}");
    }

    /// A fix that sets more CPUs apart keeps those the command line already sets apart,
    /// with their flags: the option replaces the old one.
    #[test]
    fn a_fix_keeps_the_cpus_and_flags_already_set_apart() {
        let host = |cmdline: &str| {
            let d = tempfile::tempdir().unwrap();
            std::fs::create_dir_all(d.path().join("proc")).unwrap();
            std::fs::write(d.path().join("proc/cmdline"), cmdline).unwrap();
            let online = CpuList::parse_kernel("0-3").unwrap();
            (Host::new(d.path(), CpuList::from_cpus(vec![3]), &online), d)
        };
        let (h, _d) = host("isolcpus=managed_irq,2 nohz_full=2");
        // A bare list is `domain`: CPU 3 is isolated, CPU 2 keeps managed_irq.
        let ok = |o: &str| Ok::<String, String>(o.into());
        assert_eq!(
            h.set_apart("isolcpus=3"),
            ok("isolcpus=domain,managed_irq,2-3")
        );
        assert_eq!(
            h.set_apart("isolcpus=managed_irq,3"),
            ok("isolcpus=managed_irq,2-3")
        );
        assert_eq!(h.set_apart("nohz_full=3"), ok("nohz_full=2-3"));
        assert_eq!(h.set_apart("rcu_nocbs=3"), ok("rcu_nocbs=3"));
        assert!(h.set_apart("isolcpus=0-1,3").is_err());
        // nohz_full never names the boot CPU.
        assert_eq!(h.set_apart("nohz_full=0,3"), ok("nohz_full=2-3"));
        assert!(h.set_apart("nohz_full=0").is_err());
        // A bare isolcpus=2 on the line is `domain` too: a managed_irq fix keeps it.
        let (h, _d) = host("isolcpus=2 rcu_nocbs=all");
        assert_eq!(
            h.set_apart("isolcpus=managed_irq,3"),
            ok("isolcpus=managed_irq,domain,2-3")
        );
        assert_eq!(h.set_apart("isolcpus=3"), ok("isolcpus=2-3"));
        // rcu_nocbs=all is every CPU: a fix keeps them all.
        assert_eq!(h.set_apart("rcu_nocbs=3"), ok("rcu_nocbs=0-3"));
        // isolcpus and nohz_full together may not leave none: 0-1 isolated, 2 nohz_full.
        let (h, _d) = host("isolcpus=0-1 nohz_full=2");
        assert!(h.set_apart("isolcpus=3").is_err());
        assert!(h.set_apart("nohz_full=3").is_err());
    }

    /// Review of issue 48: on a host with 4-15 isolated, an audit of CPU 4 keeps 0-3 as
    /// housekeeping, so that no IRQ or workqueue fix moves work onto 5-15.
    #[test]
    fn housekeeping_leaves_out_the_cpus_the_host_set_apart() {
        let d = tempfile::tempdir().unwrap();
        let put = |rel: &str, text: &str| {
            let p = d.path().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        put("proc/cmdline", "isolcpus=4-15 nohz_full=4-15");
        put("sys/devices/system/cpu/isolated", "4-15");
        put("sys/devices/system/cpu/nohz_full", "4-15");
        let online = CpuList::parse_kernel("0-15").unwrap();
        let r = AuditReport::of(d.path(), CpuList::from_cpus(vec![4]), &online);
        assert_eq!(r.housekeeping.to_string(), "0-3");
        let irq_fixes: Vec<&String> = (r.findings.iter())
            .flat_map(|f| &f.remedies)
            .flat_map(|rem| match rem {
                Remedy::Boot { options, .. } => options.iter().collect(),
                _ => Vec::new(),
            })
            .filter(|o| o.starts_with("irqaffinity="))
            .collect();
        assert!(
            irq_fixes.iter().all(|o| *o == "irqaffinity=0-3"),
            "{irq_fixes:?}"
        );
    }

    /// Two steps' lists of one option become one word (the kernel takes one of each).
    #[test]
    fn one_options_two_lists_merge() {
        let m = |a: &str, b: &str| merged_option(a, b);
        assert_eq!(
            m("isolcpus=2", "isolcpus=3").as_deref(),
            Some("isolcpus=2-3")
        );
        assert_eq!(
            m("isolcpus=2", "isolcpus=managed_irq,3").as_deref(),
            Some("isolcpus=domain,managed_irq,2-3")
        );
        assert_eq!(
            m("nohz_full=1", "nohz_full=3").as_deref(),
            Some("nohz_full=1,3")
        );
        assert_eq!(m("nohz_full=1", "rcu_nocbs=1"), None);
        assert_eq!(m("skew_tick=1", "skew_tick=1"), None);
    }

    #[test]
    fn isolcpus_flags_are_not_cpus() {
        let c = Cmdline::parse("ro isolcpus=nohz,domain,managed_irq,1-3 rcu_nocbs -- nohz_full=1");
        assert_eq!(
            c.cpus("isolcpus"),
            Ok(Some(CpuList::from_cpus(vec![1, 2, 3])))
        );
        assert_eq!(c.flags("isolcpus"), vec!["nohz", "domain", "managed_irq"]);
        assert_eq!(c.cpus("rcu_nocbs"), Ok(Some(CpuList::default())));
        // After `--` the words belong to init.
        assert_eq!(c.cpus("nohz_full"), Ok(None));
    }
}
