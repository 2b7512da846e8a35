//! Cgroups: the chain of groups the audited process lives in, read from the top of each
//! hierarchy down (`system::cgroup`). Whether it may run real-time (RT group
//! scheduling), whether a CFS quota stops it for the rest of each period and how often it
//! has, which CPUs its cpuset gives it and who else may use them, and how much CPU and
//! IRQ pressure the system and the group show.

use super::{Area, Finding, FindingId as Id, Host, Missing, Severity, finding};
use crate::engine::cpu::CpuList;
use crate::system::cgroup::{self, Cgroups, Chain, Level, Pressure, Version};
use crate::system::finding_id::Check;
use crate::system::rt_group::{self, RtBlock};

pub(super) fn cgroups(h: &Host) -> Vec<Finding> {
    let mut out = Vec::new();
    match Cgroups::read(&h.root, None) {
        Ok(cg) => {
            out.push(rt_runtime(h, &cg));
            out.push(cfs_quota(h, &cg));
            out.push(cpuset(h, &cg));
            out.push(pressure(h, &cg));
        }
        Err(e) => {
            let why = e.to_string().replace(&h.root.display().to_string(), "");
            let m = match std::fs::metadata(h.path("/proc/self/cgroup")) {
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => Missing::Absent(why),
                _ => Missing::Unreadable(why),
            };
            out.push(m.finding(Area::Cgroups, Check::Cgroup));
        }
    }
    out
}

/// Whether the live host refuses SCHED_FIFO to root here: `Some(reason)` when refused.
fn fifo_refused(h: &Host) -> Option<String> {
    let live = h.root == std::path::Path::new("/");
    if !live || !rustix::process::geteuid().is_root() {
        return None;
    }
    let fifo = crate::engine::sched::SchedRequest {
        policy: crate::engine::sched::Policy::Fifo,
        priority: 1,
    };
    crate::engine::sched::preflight(fifo).err()
}

fn rt_runtime(h: &Host, cg: &Cgroups) -> Finding {
    let why = "with RT group scheduling each cgroup has its own real-time runtime; a group \
               made without one refuses SCHED_FIFO and SCHED_RR even to root, so every \
               real-time thread started in it runs at SCHED_OTHER";
    let cmdline = h.read("/proc/cmdline").unwrap_or_default();
    let v2 = rt_group::v2_rt_group_sched(&h.config, &cmdline);
    let refused = fifo_refused(h);
    // No kernel config to read on v2: a refusal to root is the evidence.
    let v2_active = v2.unwrap_or(refused.is_some());
    let Some(b) = rt_group::blocked(cg, v2_active) else {
        return finding(
            Area::Cgroups,
            Id::RtRuntimeCgroupOk,
            Severity::Ok,
            rt_ok_value(cg, v2),
        )
        .why(why);
    };
    let seen = match &refused {
        Some(r) => format!("; SCHED_FIFO 1 refused here ({})", short_errno(r)),
        None => String::new(),
    };
    let value = format!("{} has no real-time runtime ({}){seen}", b.first, b.chain);
    let f = finding(Area::Cgroups, Id::RtRuntimeCgroup, Severity::Warn, value).why(why);
    rt_fixes(h, cg, &b, f)
}

fn short_errno(reason: &str) -> &str {
    reason.split(':').next().unwrap_or(reason)
}

fn rt_ok_value(cg: &Cgroups, v2: Option<bool>) -> String {
    let Some(chain) = cg.cpu() else {
        return "no cpu controller is mounted: real-time is not limited by a cgroup".into();
    };
    let own = chain.own();
    match (chain.version, own.rt) {
        (Version::V1, Some(rt)) if own.path == "/" => {
            format!(
                "the root cpu cgroup: {} of {} µs",
                rt.runtime_us, rt.period_us
            )
        }
        (_, Some(rt)) => format!("{}: {} of {} µs", own.path, rt.runtime_us, rt.period_us),
        (Version::V1, None) => format!(
            "{}: this kernel has no RT group scheduling (no cpu.rt_runtime_us)",
            own.path
        ),
        (Version::V2, None) => match v2 {
            Some(false) => format!(
                "cgroup v2 group {}: no RT group scheduling (not built in, or \
                 rt_group_sched=0)",
                own.path
            ),
            _ => format!(
                "cgroup v2 group {}: the cpu controller does not act on it, or it is the root",
                own.path
            ),
        },
    }
}

/// The fixes, each checked here: the move to the root (where the chain's top is the real
/// root and it has runtime), the top-down shares (v1, where the siblings leave some and
/// the files can be written), the container runtime's way, and the boot switch (6.16+).
fn rt_fixes(h: &Host, cg: &Cgroups, b: &RtBlock, mut f: Finding) -> Finding {
    let chain = cg.cpu().expect("a block has a cpu chain");
    let top_has_runtime = chain.levels[0].rt.is_none_or(|r| r.runtime_us != 0);
    if let Some(cmd) = rt_group::to_root_command(b).filter(|_| top_has_runtime) {
        f = f.manual(format!(
            "leave for the root cgroup, from the shell that starts the program: {cmd}"
        ));
    }
    let runtime = container_runtime(chain);
    if b.version == Version::V1 {
        match rt_group::top_down(&h.root, chain) {
            Ok(shares) if shares.iter().all(|s| writable(h, &s.file)) => {
                let cmds: Vec<String> = shares
                    .iter()
                    .map(|s| format!("echo {} > {}", s.runtime_us, s.file))
                    .collect();
                f = f.manual(format!(
                    "or give the chain real-time runtime, parents first: {}",
                    cmds.join("; ")
                ));
                if runtime == Some("podman") {
                    f = podman_rt(f, chain, &shares);
                }
            }
            Ok(_) => {
                f = f.manual(
                    "the cgroup files are read-only here (a container): give the group \
                     runtime from the host",
                );
            }
            Err(why) => f = f.manual(format!("no runtime to give from the top down: {why}")),
        }
    }
    match runtime {
        Some("docker") => {
            f = f.manual(
                "docker: start dockerd with --cpu-rt-runtime (its parent group's share), \
                 then docker run --cpu-rt-runtime=N (cgroup v1 only)",
            )
        }
        Some("kubernetes") => {
            f = f.manual(
                "Kubernetes gives a pod no real-time runtime: run the node's kernel \
                 without RT group scheduling (CONFIG_RT_GROUP_SCHED unset, as distribution \
                 kernels are), or boot it with rt_group_sched=0 (6.16 and later)",
            )
        }
        _ => {}
    }
    let release = h.read("/proc/sys/kernel/osrelease").unwrap_or_default();
    if rt_group::boot_switch(&h.config, &release) {
        f = f.boot(h, &["rt_group_sched=0".to_string()]);
    }
    f
}

/// podman's way (cgroup v1): its parent group (`libpod_parent`) needs runtime before
/// `podman run --cpu-rt-runtime` can give a new container a share of it.
fn podman_rt(f: Finding, chain: &Chain, shares: &[rt_group::Share]) -> Finding {
    let Some(i) = chain
        .levels
        .iter()
        .position(|l| l.path.ends_with("libpod_parent"))
    else {
        return f;
    };
    let parent = &chain.levels[i];
    let share_of = |l: &Level| {
        shares
            .iter()
            .find(|s| s.file == format!("{}/cpu.rt_runtime_us", l.dir))
    };
    let (first, runtime) = match (share_of(parent), chain.levels.get(i + 1).and_then(share_of)) {
        (Some(p), child) => (
            format!("echo {} > {}, then ", p.runtime_us, p.file),
            child.map_or(p.runtime_us, |c| c.runtime_us),
        ),
        (None, Some(c)) => (String::new(), c.runtime_us),
        (None, None) => return f,
    };
    f.manual(format!(
        "podman (cgroup v1): {first}start the container with podman run \
         --cpu-rt-runtime={runtime}"
    ))
}

/// Whether a cgroup file may be written (the live host's answer; a recorded tree's files
/// are taken as writable).
fn writable(h: &Host, abs: &str) -> bool {
    if h.root != std::path::Path::new("/") {
        return true;
    }
    rustix::fs::access(abs, rustix::fs::Access::WRITE_OK).is_ok()
}

/// The container runtime the chain's groups name: `podman`, `docker` or `kubernetes`.
fn container_runtime(chain: &Chain) -> Option<&'static str> {
    chain
        .levels
        .iter()
        .find_map(|l| rt_group::container_runtime(&l.path))
}

fn quota_words(chain: &Chain, l: &Level) -> String {
    match l.cfs {
        Some(c) => {
            let cpus = c
                .cpus()
                .map_or(String::new(), |n| format!(" ({n:.2} CPUs)"));
            format!("{}: {}{cpus}", l.path, c.setting(chain.version))
        }
        None => format!("{}: no quota file", l.path),
    }
}

fn throttle_words(l: &Level) -> String {
    match l.stat {
        Some(s) => format!(
            "throttled in {} of {} periods, {:.3} s in all",
            s.nr_throttled,
            s.nr_periods,
            s.throttled_ns as f64 / 1e9
        ),
        None => "no cpu.stat".into(),
    }
}

fn cfs_quota(h: &Host, cg: &Cgroups) -> Finding {
    let why = "CFS bandwidth control stops every task of the group for the rest of each \
               period once the group has used its quota (summed over its CPUs): a gap of up \
               to the period less the quota, tens of ms, that nothing in the process \
               explains; a thread that spins uses the quota up first";
    let Some(chain) = cg.cpu() else {
        return finding(
            Area::Cgroups,
            Id::CfsQuotaNone,
            Severity::Ok,
            "no cpu controller is mounted: no CPU quota",
        )
        .why(why);
    };
    let quotas: Vec<&Level> = chain.quotas().collect();
    if quotas.is_empty() {
        let levels: Vec<String> = (chain.levels.iter())
            .filter(|l| l.cfs.is_some())
            .map(|l| quota_words(chain, l))
            .collect();
        let own = chain.own();
        let value = format!(
            "no CPU quota on the chain ({}); {}: {}",
            if levels.is_empty() {
                "no quota files".to_string()
            } else {
                levels.join(", ")
            },
            own.path,
            throttle_words(own)
        );
        return finding(Area::Cgroups, Id::CfsQuotaNone, Severity::Ok, value).why(why);
    }
    let value = quotas
        .iter()
        .map(|l| {
            format!(
                "{}, {} since it was made",
                quota_words(chain, l),
                throttle_words(l)
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    let mut f = finding(Area::Cgroups, Id::CfsQuota, Severity::Warn, value).why(why);
    for l in &quotas {
        let period = l.cfs.map_or(100_000, |c| c.period_us);
        f = match chain.version {
            Version::V1 => {
                let file = format!("{}/cpu.cfs_quota_us", l.dir);
                quota_write(h, f, &format!("echo -1 > {file}"), &file, "-1")
            }
            Version::V2 => {
                let file = format!("{}/cpu.max", l.dir);
                let value = format!("max {period}");
                quota_write(h, f, &format!("echo max > {file}"), &file, &value)
            }
        };
    }
    match container_runtime(chain) {
        Some("kubernetes") => {
            f = f.manual(
                "Kubernetes: drop the container's CPU limit (a request alone sets no quota), \
                 or run the kubelet with --cpu-cfs-quota=false",
            )
        }
        Some(rt @ ("podman" | "docker")) => {
            f = f.manual(format!(
                "{rt}: start the container without --cpus or --cpu-quota (or {rt} update \
                 --cpu-quota=-1 on cgroup v1)"
            ))
        }
        _ => {}
    }
    if let Some(unit) = quotas.iter().find_map(|l| systemd_unit(&l.path)) {
        f = f.manual(format!("systemd: systemctl set-property {unit} CPUQuota="));
    }
    f
}

/// A run-time write that lifts a quota, where the file can be written here.
fn quota_write(h: &Host, f: Finding, command: &str, file: &str, value: &str) -> Finding {
    if !writable(h, file) {
        return f.manual(format!(
            "{file} is read-only here (a container): lift the quota from the host"
        ));
    }
    f.now(
        command,
        vec![super::Effect::Write {
            path: file.to_string(),
            value: value.to_string(),
        }],
    )
}

/// The systemd unit a group's path ends in (`/system.slice/x.service` → `x.service`).
fn systemd_unit(path: &str) -> Option<String> {
    let last = path.rsplit('/').next()?;
    [".service", ".scope", ".slice"]
        .iter()
        .any(|s| last.ends_with(s))
        .then(|| last.to_string())
}

fn cpuset(h: &Host, cg: &Cgroups) -> Finding {
    let why = "the cgroup's cpuset decides which CPUs its tasks may use; CPUs that other \
               groups' cpusets also hold get those groups' tasks too";
    let Some(chain) = cg.cpuset() else {
        return finding(
            Area::Cgroups,
            Id::CpusetShared,
            Severity::Info,
            "no cpuset controller is mounted: every task may use every CPU",
        )
        .why(why);
    };
    let Some(effective) = chain.effective_cpus().cloned() else {
        return Missing::Absent(format!("{}: no effective cpuset file", chain.own().dir))
            .finding(Area::Cgroups, Check::Cgroup);
    };
    let own = chain.own();
    let view = CpusetView::of(&h.root, chain, &h.measured);
    let outside = h.measured.without(&effective);
    let head = format!("{} cpuset {effective}", own.path);
    if !outside.is_empty() {
        return finding(
            Area::Cgroups,
            Id::CpusetExcludesMeasured,
            Severity::Bad,
            format!("{head}: measured CPUs {outside} are outside it"),
        )
        .why(why)
        .manual(format!(
            "measure CPUs inside the cpuset (-a {effective}), or widen {}/cpuset.cpus",
            own.dir
        ));
    }
    let value = format!("{head}; {}", view.words());
    if view.shared.is_empty() && own.path != "/" {
        return finding(Area::Cgroups, Id::CpusetExclusive, Severity::Ok, value).why(why);
    }
    if own.path == "/" {
        // Everything shares the root's CPUs: isolation (isolcpus, a partition) is the
        // fix, and those findings give it.
        return finding(Area::Cgroups, Id::CpusetShared, Severity::Info, value).why(why);
    }
    let f = finding(Area::Cgroups, Id::CpusetShared, Severity::Warn, value).why(why);
    match chain.version {
        Version::V2 => f.manual(format!(
            "make the group a partition of its own: echo root > {}/cpuset.cpus.partition \
             (its CPUs then leave every other group; isolated also takes them out of load \
             balancing)",
            own.dir
        )),
        Version::V1 => f.manual(format!(
            "take the measured CPUs out of the other groups' cpuset.cpus, then echo 1 > \
             {}/cpuset.cpu_exclusive",
            own.dir
        )),
    }
}

/// Which measured CPUs are the group's alone, and which other groups also hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CpusetView {
    /// The group's path.
    pub group: String,
    pub exclusive: CpuList,
    /// Measured CPUs other groups' cpusets hold too.
    pub shared: CpuList,
    /// The other groups (path and the measured CPUs they hold), at most a few named.
    pub others: Vec<(String, CpuList)>,
    /// v1 `cpu_exclusive`, v2 partition type, where set.
    pub flag: Option<String>,
}

impl CpusetView {
    /// The view of `measured` from `chain`'s group: the siblings of each level down the
    /// chain (or, for the root, its children) that hold a measured CPU.
    pub fn of(root: &std::path::Path, chain: &Chain, measured: &CpuList) -> CpusetView {
        let own = chain.own();
        let others: Vec<(String, CpuList)> = if chain.levels.len() == 1 {
            children_cpusets(root, chain)
        } else {
            cgroup::sibling_cpusets(root, chain)
        }
        .into_iter()
        .map(|(p, c)| (p, c.intersect(measured)))
        .filter(|(_, c)| !c.is_empty())
        .collect();
        let shared = CpuList::from_cpus(
            others
                .iter()
                .flat_map(|(_, c)| c.cpus().iter().copied())
                .collect(),
        );
        let set = own.cpuset.clone().unwrap_or_default();
        let flag = match (set.cpu_exclusive, set.partition) {
            // The root is always both: only a child's setting says something.
            _ if own.path == "/" => None,
            (Some(true), _) => Some("cpu_exclusive 1".to_string()),
            (_, Some(p)) if p != "member" => Some(format!("partition {p}")),
            _ => None,
        };
        CpusetView {
            group: own.path.clone(),
            exclusive: measured.without(&shared),
            shared,
            others,
            flag,
        }
    }

    /// "measured CPUs 2-3 exclusive to it; 1 shared with /system.slice (1)".
    pub fn words(&self) -> String {
        let mut parts = Vec::new();
        if !self.exclusive.is_empty() {
            let whose = if self.group == "/" {
                "held by no child group".to_string()
            } else {
                "exclusive to it".to_string()
            };
            parts.push(format!("measured CPUs {} {whose}", self.exclusive));
        }
        if !self.shared.is_empty() {
            let named: Vec<String> = (self.others.iter().take(3))
                .map(|(p, c)| format!("{p} ({c})"))
                .collect();
            let more = match self.others.len() {
                n if n > 3 => format!(" and {} more", n - 3),
                _ => String::new(),
            };
            parts.push(format!(
                "measured CPUs {} shared with {}{more}",
                self.shared,
                named.join(", ")
            ));
        }
        if self.group == "/" {
            parts.push("every task not in a cpuset group of its own runs here".into());
        }
        if let Some(f) = &self.flag {
            parts.push(f.clone());
        }
        parts.join("; ")
    }
}

/// The effective cpusets of the root's child groups.
fn children_cpusets(root: &std::path::Path, chain: &Chain) -> Vec<(String, CpuList)> {
    let top = &chain.levels[0];
    let Ok(dir) = std::fs::read_dir(root.join(top.dir.trim_start_matches('/'))) else {
        return Vec::new();
    };
    let mut names: Vec<String> = dir
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
        .into_iter()
        .filter_map(|n| {
            let path = format!("/{n}");
            let l = cgroup::read_level(root, chain.version, &path, &format!("{}/{n}", top.dir));
            Some((path, l.cpuset?.effective?))
        })
        .collect()
}

fn psi_words(p: &Pressure) -> String {
    format!(
        "some {:.2} % (avg10), {:.2} % (avg60)",
        p.some.avg10, p.some.avg60
    )
}

/// Tasks waited for a CPU this share of the last minute or more: the run queues are
/// rarely empty, and a woken thread may wait behind others.
const HIGH_PRESSURE_PCT: f64 = 10.0;

fn pressure(h: &Host, cg: &Cgroups) -> Finding {
    let why = "pressure (PSI) is the share of time tasks waited for a CPU (cpu) or lost \
               it to interrupt handling (irq); high CPU pressure means runnable tasks \
               queue, and a woken thread may wait behind them";
    let sys = cgroup::system_pressure(&h.root);
    let Some(cpu) = sys.cpu else {
        let f = finding(
            Area::Cgroups,
            Id::Unreadable(Check::Pressure),
            Severity::Info,
            "unreadable: /proc/pressure/cpu (no PSI: not built in, or off at boot)",
        )
        .why(why);
        return if h.config.enabled("CONFIG_PSI") {
            f.boot(h, &["psi=1".to_string()])
        } else {
            f.manual("none needed for measuring; PSI needs CONFIG_PSI=y")
        };
    };
    let mut parts = vec![format!("system cpu {}", psi_words(&cpu))];
    match sys.irq {
        Some(irq) => parts.push(format!("irq {}", psi_words(&irq))),
        None => parts.push("no irq pressure (no IRQ time accounting)".into()),
    }
    let group = cg.unified().map(Chain::own).filter(|l| l.path != "/");
    if let Some(g) = group
        && let Some(p) = g.cpu_pressure
    {
        parts.push(format!("group {} cpu {}", g.path, psi_words(&p)));
    }
    let worst = std::iter::once(cpu.some.avg60)
        .chain(group.and_then(|g| g.cpu_pressure).map(|p| p.some.avg60))
        .fold(0.0, f64::max);
    if worst < HIGH_PRESSURE_PCT {
        return finding(
            Area::Cgroups,
            Id::CpuPressureLow,
            Severity::Ok,
            parts.join("; "),
        )
        .why(why);
    }
    finding(
        Area::Cgroups,
        Id::CpuPressureHigh,
        Severity::Warn,
        parts.join("; "),
    )
    .why(why)
    .manual(
        "find what keeps the CPUs busy (jitterscope noise --trace names what ran); move \
         it off the measured CPUs, or measure where the run queues are short",
    )
}
