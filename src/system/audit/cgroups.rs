//! Cgroups: the chain of groups the audited process lives in, read from the top of each
//! hierarchy down (`system::cgroup`). Whether it may run real-time (RT group
//! scheduling), whether a CFS quota stops it for the rest of each period and how often it
//! has, which CPUs its cpuset gives it and who else may use them, and how much CPU and
//! IRQ pressure the system and the group show.

use super::{Area, Finding, FindingId as Id, Host, Missing, Severity, finding};
use crate::system::cgroup::{self, Cgroups, Chain, CpusetView, Level, Pressure, Sharers, Version};
use crate::system::finding_id::Check;
use crate::system::rt_group::{self, RtBlock};

pub(super) fn cgroups(h: &Host) -> Vec<Finding> {
    let mut out = Vec::new();
    let cg = match &h.cgroups {
        Ok(cg) => {
            out.push(rt_runtime(h, cg));
            out.push(cfs_quota(h, cg));
            out.push(cpuset(h, cg));
            Some(cg)
        }
        Err(e) => {
            out.push(unread(h, e).finding(Area::Cgroups, Check::Cgroup));
            None
        }
    };
    out.push(pressure(h, cg));
    out
}

/// Why the cgroups could not be read, with the path as the kernel knows it.
pub(super) fn unread(h: &Host, e: &cgroup::CgroupError) -> Missing {
    let cgroup::CgroupError::Read { path, source } = e;
    let path = path.strip_prefix(&h.root).unwrap_or(path);
    let why = format!("/{}: {source}", path.display());
    match source.kind() {
        std::io::ErrorKind::NotFound => Missing::Absent(why),
        _ => Missing::Unreadable(why),
    }
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
    // No kernel config to read on v2: a refusal to root holding CAP_SYS_NICE is the
    // evidence (without it, the missing capability is the cause).
    let by_group =
        (refused.as_deref()).is_some_and(|r| r.starts_with(crate::engine::sched::EPERM_AS_ROOT));
    let v2_active = v2.unwrap_or(by_group);
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
    let value = format!(
        "{} has no real-time runtime ({}){seen}",
        cgroup::short_path(&b.first),
        b.chain
    );
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
/// root and it has runtime), then the version's own (`rt_fixes_v1`, `rt_fixes_v2`), the
/// Kubernetes node's way, and the boot switch (6.16+).
fn rt_fixes(h: &Host, cg: &Cgroups, b: &RtBlock, mut f: Finding) -> Finding {
    let chain = cg.cpu().expect("a block has a cpu chain");
    let top_has_runtime = chain.levels[0].rt.is_none_or(|r| r.runtime_us != 0);
    if let Some(cmd) = rt_group::to_root_command(b).filter(|_| top_has_runtime) {
        f = f.manual(format!(
            "leave for the root cgroup, from the shell that starts the program: {cmd}"
        ));
    }
    let runtime = container_runtime(h, chain);
    f = match b.version {
        Version::V1 => rt_fixes_v1(h, chain, runtime, f),
        Version::V2 => rt_fixes_v2(h, b, f),
    };
    if runtime == Some("kubernetes") {
        f = f.manual(
            "Kubernetes gives a pod no real-time runtime: run the node's kernel without RT \
             group scheduling (CONFIG_RT_GROUP_SCHED unset, as distribution kernels are), \
             or boot it with rt_group_sched=0 (6.16 and later)",
        );
    }
    let release = h.read("/proc/sys/kernel/osrelease").unwrap_or_default();
    if rt_group::boot_switch(&h.config, &release) {
        f = f.boot(h, &["rt_group_sched=0".to_string()]);
    }
    f
}

/// A container runtime's way to give its containers real-time runtime: cgroup v1 only
/// (`--cpu-rt-runtime` sets `cpu.rt_runtime_us`, which v2 does not have).
fn runtime_way_v1(runtime: Option<&str>) -> Option<&'static str> {
    match runtime {
        Some("podman") => Some(
            "podman (cgroup v1): give podman's parent group runtime (echo N > \
             /sys/fs/cgroup/cpu/libpod_parent/cpu.rt_runtime_us, N within the root's), \
             then start the container with podman run --cpu-rt-runtime=N",
        ),
        Some("docker") => Some(
            "docker (cgroup v1): start dockerd with --cpu-rt-runtime (its parent group's \
             share), then docker run --cpu-rt-runtime=N",
        ),
        _ => None,
    }
}

/// v1: the top-down shares where the chain is in sight and its files can be written;
/// else the runtime's way, or the shares given from the host.
fn rt_fixes_v1(h: &Host, chain: &Chain, runtime: Option<&str>, f: Finding) -> Finding {
    let from_host = "on the host: give the container's group runtime, parents first";
    let way = runtime_way_v1(runtime);
    if !chain.from_root {
        // A container's view: the groups above it, and their runtime, are the host's.
        return f.manual(way.map_or(from_host.to_string(), |w| format!("on the host, {w}")));
    }
    match rt_group::top_down(&h.root, chain) {
        Ok(shares) if shares.iter().all(|s| h.writable(&s.file)) => {
            let cmds: Vec<String> = (shares.iter())
                .map(|s| format!("echo {} > {}", s.runtime_us, s.file))
                .collect();
            let f = f.manual(format!(
                "or give the chain real-time runtime, parents first: {}",
                cmds.join("; ")
            ));
            match runtime {
                Some("podman") => podman_rt(f, chain, &shares),
                _ => match way {
                    Some(w) => f.manual(w),
                    None => f,
                },
            }
        }
        Ok(_) => f.manual(format!(
            "the cgroup files are read-only here (a container): {}",
            way.map_or(from_host.to_string(), |w| format!("on the host, {w}"))
        )),
        Err(why) => {
            let f = f.manual(format!("no runtime to give from the top down: {why}"));
            match way {
                Some(w) => f.manual(w),
                None => f,
            }
        }
    }
}

/// v2 shows no `cpu.rt_runtime_us`: no share can be given to a group below the root, and
/// the container runtimes' `--cpu-rt-runtime` is v1's. What works: the root group (the
/// move above, or on the node for a container), a kernel without RT group scheduling, or
/// `rt_group_sched=0` at boot (6.16+, given by the caller where the kernel takes it).
fn rt_fixes_v2(h: &Host, b: &RtBlock, mut f: Finding) -> Finding {
    if !b.from_root {
        f = f.manual(
            "on the node: start the program in the root cgroup, outside any container \
             (cgroup v2 gives a group below the root no real-time runtime to set)",
        );
    }
    let release = h.read("/proc/sys/kernel/osrelease").unwrap_or_default();
    if !rt_group::boot_switch(&h.config, &release) {
        f = f.manual(
            "run a kernel built without CONFIG_RT_GROUP_SCHED (as distribution kernels \
             are), or 6.16 or later booted with rt_group_sched=0",
        );
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

/// The container runtime: the one `Host` found (marker files), else the one the chain's
/// groups name (`podman`, `docker` or `kubernetes`); inside a cgroup namespace the paths
/// are `/` and name none.
fn container_runtime(h: &Host, chain: &Chain) -> Option<&'static str> {
    let named = match h.container.as_deref() {
        Some("podman") => Some("podman"),
        Some("docker") => Some("docker"),
        Some("a Kubernetes pod") => Some("kubernetes"),
        _ => None,
    };
    named.or_else(|| (chain.levels.iter()).find_map(|l| rt_group::container_runtime(&l.path)))
}

fn quota_words(chain: &Chain, l: &Level) -> String {
    match l.cfs {
        Some(c) => {
            let cpus = c
                .cpus()
                .map_or(String::new(), |n| format!(" ({n:.2} CPUs)"));
            let path = cgroup::short_path(&l.path);
            format!("{path}: {}{cpus}", c.setting(chain.version))
        }
        None => format!("{}: no quota file", cgroup::short_path(&l.path)),
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
        let above = match chain.from_root {
            true => "",
            false => "; the groups above it are out of sight from inside",
        };
        let value = format!(
            "no CPU quota on the chain ({}){above}; {}: {}",
            if levels.is_empty() {
                "no quota files".to_string()
            } else {
                levels.join(", ")
            },
            cgroup::short_path(&own.path),
            throttle_words(own)
        );
        // A container cannot see its parents' quotas: not a pass.
        let severity = match chain.from_root {
            true => Severity::Ok,
            false => Severity::Info,
        };
        return finding(Area::Cgroups, Id::CfsQuotaNone, severity, value).why(why);
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
            // A cgroup namespace's root: the kernel refuses its cpu.max from inside
            // (nsdelegate, systemd's default), whatever the mount's rw says.
            Version::V2 if !chain.from_root && std::ptr::eq(*l, &chain.levels[0]) => {
                f.manual(format!(
                    "{}/cpu.max is the container's own group, set from the host: lift \
                     the quota there (echo max > its cpu.max)",
                    l.dir
                ))
            }
            Version::V2 => {
                let file = format!("{}/cpu.max", l.dir);
                let value = format!("max {period}");
                quota_write(h, f, &format!("echo max > {file}"), &file, &value)
            }
        };
    }
    match container_runtime(h, chain) {
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
    if !h.writable(file) {
        return f.manual(format!(
            "{file} is read-only here (a container's view of its own group): lift the quota \
             from the host"
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
            .finding(Area::Cgroups, Check::Cpuset);
    };
    let own = chain.own();
    let view = CpusetView::of(chain, &Sharers::read(&h.root, chain), &h.measured);
    let outside = h.measured.without(&effective);
    let head = format!("{} cpuset {effective}", cgroup::short_path(&own.path));
    if !chain.from_root && outside.is_empty() {
        // The other groups are the host's: who else holds these CPUs is out of sight.
        return Missing::Hidden(format!(
            "which other groups hold measured CPUs {} ({head})",
            h.measured
        ))
        .finding(Area::Cgroups, Check::Cpuset);
    }
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
        Version::V2 => partition_fix(chain, f),
        Version::V1 => exclusive_fix(chain, &view, f),
    }
}

fn is_partition_root(l: &Level) -> bool {
    let p = l.cpuset.as_ref().and_then(|c| c.partition.as_deref());
    matches!(p, Some("root" | "isolated"))
}

/// v2: a partition takes its CPUs from every other group, but the kernel makes it
/// "root invalid" unless its parent is a partition root (the real root is): the parents
/// that are not come first, top down.
fn partition_fix(chain: &Chain, f: Finding) -> Finding {
    let own = chain.own();
    let inner = &chain.levels[1..chain.levels.len() - 1];
    let parents: Vec<&Level> = inner.iter().filter(|l| !is_partition_root(l)).collect();
    let needs = "cpuset.cpus set to CPUs that no sibling group holds";
    if parents.is_empty() {
        return f.manual(format!(
            "make the group a partition of its own (it needs {needs}): echo root > \
             {}/cpuset.cpus.partition (its CPUs then leave every other group; isolated \
             also takes them out of load balancing)",
            own.dir
        ));
    }
    let names: Vec<String> = parents
        .iter()
        .map(|l| cgroup::short_path(&l.path))
        .collect();
    let cmds: Vec<String> = (parents.iter().copied().chain([own]))
        .map(|l| format!("echo root > {}/cpuset.cpus.partition", l.dir))
        .collect();
    f.manual(format!(
        "make the group a partition of its own, parents first ({} not a partition root, \
         and a partition's parent must be one; each needs {needs}): {}",
        names.join(", "),
        cmds.join("; ")
    ))
}

/// v1: `cpu_exclusive` only keeps siblings' cpusets apart; the tasks an ancestor holds
/// itself (on v1 systemd leaves most of the system in the root) keep its CPUs, so they
/// move first into a group beside that has none of this group's CPUs, as `cset shield`
/// does.
fn exclusive_fix(chain: &Chain, view: &CpusetView, mut f: Finding) -> Finding {
    let own = chain.own();
    let mine = chain.effective_cpus().cloned().unwrap_or_default();
    for (dir, cpus) in &view.tasks_above {
        let left = cpus.without(&mine);
        if left.is_empty() {
            f = f.manual(format!(
                "{dir} holds tasks of its own and has no CPU outside the group's {mine} to \
                 move them to: narrow the group's cpuset.cpus first"
            ));
            continue;
        }
        let hk = format!("{dir}/jitterscope-housekeeping");
        f = f.manual(format!(
            "move the tasks {dir} holds itself to a group without the measured CPUs (as \
             cset shield does; kernel threads bound to a CPU stay): mkdir -p {hk}; echo \
             {left} > {hk}/cpuset.cpus; cat {dir}/cpuset.mems > {hk}/cpuset.mems; for p in \
             $(cat {dir}/cgroup.procs); do echo $p > {hk}/cgroup.procs 2>/dev/null; done"
        ));
    }
    let siblings = view.others.len() > view.tasks_above.len();
    let first = match siblings {
        true => "take the measured CPUs out of the other groups' cpuset.cpus, then ",
        false => "",
    };
    f.manual(format!("{first}echo 1 > {}/cpuset.cpu_exclusive", own.dir))
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

fn pressure(h: &Host, cg: Option<&Cgroups>) -> Finding {
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
    let group = cg
        .and_then(Cgroups::unified)
        .map(Chain::own)
        .filter(|l| l.path != "/");
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::cpu::CpuList;
    use crate::system::audit::{AuditReport, Effect, Remedy};
    use crate::system::cgroup::tree;

    fn audit(t: &tempfile::TempDir, measured: &[usize]) -> AuditReport {
        let online = CpuList::from_cpus(vec![0, 1, 2, 3]);
        AuditReport::of(t.path(), CpuList::from_cpus(measured.to_vec()), &online)
    }

    fn the(r: &AuditReport, id: Id) -> &Finding {
        r.findings
            .iter()
            .find(|f| f.id == id)
            .unwrap_or_else(|| panic!("no {id}: {:?}", r.findings))
    }

    fn manual(f: &Finding) -> Vec<&str> {
        f.remedies
            .iter()
            .filter_map(|r| match r {
                Remedy::Manual { what } => Some(what.as_str()),
                _ => None,
            })
            .collect()
    }

    const V1_MOUNT: &str = "32 31 0:29 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n";

    /// v1 files of one cpu group: (dir below the mount, rt runtime, quota).
    fn v1_group(dir: &str, rt: &str, quota: &str) -> Vec<(String, String)> {
        let d = format!("sys/fs/cgroup/cpu{dir}");
        vec![
            (format!("{d}/cpu.rt_runtime_us"), format!("{rt}\n")),
            (format!("{d}/cpu.rt_period_us"), "1000000\n".into()),
            (format!("{d}/cpu.cfs_quota_us"), format!("{quota}\n")),
            (format!("{d}/cpu.cfs_period_us"), "100000\n".into()),
            (
                format!("{d}/cpu.stat"),
                "nr_periods 60\nnr_throttled 58\nthrottled_time 3900000000\n".into(),
            ),
        ]
    }

    fn v1_tree(own: &str, groups: &[(&str, &str, &str)]) -> tempfile::TempDir {
        let mut files: Vec<(String, String)> = vec![
            ("proc/self/cgroup".into(), format!("1:cpu:{own}\n")),
            ("proc/self/mountinfo".into(), V1_MOUNT.into()),
            (
                "sys/fs/cgroup/cpu/cgroup.sane_behavior".into(),
                "0\n".into(),
            ),
            (
                "proc/sys/kernel/osrelease".into(),
                "6.18.1-fixture\n".into(),
            ),
            (
                "boot/config-6.18.1-fixture".into(),
                "CONFIG_RT_GROUP_SCHED=y\nCONFIG_CFS_BANDWIDTH=y\n".into(),
            ),
        ];
        for (dir, rt, quota) in groups {
            files.extend(v1_group(dir, rt, quota));
        }
        let refs: Vec<(&str, &str)> = files
            .iter()
            .map(|(a, b)| (a.as_str(), b.as_str()))
            .collect();
        tree(&refs)
    }

    #[test]
    fn issue30_a_v1_group_without_runtime_is_named_with_fixes_that_fit() {
        let t = v1_tree(
            "/jsq/in",
            &[
                ("", "950000", "-1"),
                ("/other", "200000", "-1"),
                ("/jsq", "0", "-1"),
                ("/jsq/in", "0", "-1"),
            ],
        );
        let r = audit(&t, &[1]);
        let f = the(&r, Id::RtRuntimeCgroup);
        assert!(
            f.value.starts_with("/jsq has no real-time runtime"),
            "{f:?}"
        );
        let m = manual(f);
        assert!(
            m[0].ends_with("echo $$ > /sys/fs/cgroup/cpu/cgroup.procs"),
            "{m:?}"
        );
        // 950 ms/s at the root, 200 held by /other: 750 left for the chain, parents first.
        assert!(
            m[1].ends_with(
                "echo 750000 > /sys/fs/cgroup/cpu/jsq/cpu.rt_runtime_us; \
                 echo 750000 > /sys/fs/cgroup/cpu/jsq/in/cpu.rt_runtime_us"
            ),
            "{m:?}"
        );
        // 6.16+ with RT group scheduling takes rt_group_sched=0 at boot.
        assert!(f.remedies.iter().any(
            |r| matches!(r, Remedy::Boot { options, .. } if options == &["rt_group_sched=0"])
        ));
        // No quota on the chain, and its throttle counts said.
        let q = the(&r, Id::CfsQuotaNone);
        assert!(q.value.contains("throttled in 58 of 60 periods"), "{q:?}");
    }

    #[test]
    fn issue30_podmans_parent_without_runtime_gets_podmans_way() {
        let t = v1_tree(
            "/libpod_parent/libpod-abc",
            &[
                ("", "950000", "-1"),
                ("/libpod_parent", "0", "-1"),
                ("/libpod_parent/libpod-abc", "0", "-1"),
            ],
        );
        let r = audit(&t, &[1]);
        let f = the(&r, Id::RtRuntimeCgroup);
        let podman = manual(f)
            .into_iter()
            .find(|m| m.starts_with("podman"))
            .expect("podman's way");
        assert_eq!(
            podman,
            "podman (cgroup v1): echo 950000 > \
             /sys/fs/cgroup/cpu/libpod_parent/cpu.rt_runtime_us, then start the container \
             with podman run --cpu-rt-runtime=950000"
        );
    }

    #[test]
    fn issue30_a_root_or_a_group_with_runtime_is_ok() {
        let t = v1_tree("/", &[("", "950000", "-1")]);
        let r = audit(&t, &[1]);
        assert_eq!(
            the(&r, Id::RtRuntimeCgroupOk).value,
            "the root cpu cgroup: 950000 of 1000000 µs"
        );
        let t = v1_tree("/rt", &[("", "950000", "-1"), ("/rt", "100000", "-1")]);
        assert_eq!(
            the(&audit(&t, &[1]), Id::RtRuntimeCgroupOk).value,
            "/rt: 100000 of 1000000 µs"
        );
    }

    #[test]
    fn issue30_a_v1_quota_is_named_with_its_setting_and_the_write_that_lifts_it() {
        let t = v1_tree("/jsq", &[("", "950000", "-1"), ("/jsq", "0", "35000")]);
        let r = audit(&t, &[1]);
        let f = the(&r, Id::CfsQuota);
        assert_eq!(f.severity, Severity::Warn);
        assert_eq!(
            f.value,
            "/jsq: cpu.cfs_quota_us 35000, cpu.cfs_period_us 100000 (0.35 CPUs), throttled \
             in 58 of 60 periods, 3.900 s in all since it was made"
        );
        assert!(f.remedies.contains(&Remedy::Runtime {
            command: "echo -1 > /sys/fs/cgroup/cpu/jsq/cpu.cfs_quota_us".into(),
            effects: vec![Effect::Write {
                path: "/sys/fs/cgroup/cpu/jsq/cpu.cfs_quota_us".into(),
                value: "-1".into(),
            }],
        }));
    }

    /// cgroup v2 as on a Kubernetes node: a pod's quota (cpu.max), a cpuset shared with
    /// a sibling, group pressure, and no RT group scheduling (a distribution kernel).
    #[test]
    fn issue30_v2_quota_cpuset_and_pressure() {
        let u = "sys/fs/cgroup";
        let pod = format!("{u}/kubepods/pod1");
        let files = [
            ("proc/self/cgroup", "0::/kubepods/pod1\n".to_string()),
            (
                "proc/self/mountinfo",
                "41 31 0:38 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n".into(),
            ),
            ("proc/sys/kernel/osrelease", "6.8.0-fixture\n".into()),
            (
                "boot/config-6.8.0-fixture",
                "CONFIG_CFS_BANDWIDTH=y\n".into(),
            ),
            (&format!("{u}/cgroup.controllers"), "cpuset cpu\n".into()),
            (&format!("{u}/cpuset.cpus.effective"), "0-3\n".into()),
            (&format!("{u}/kubepods/cgroup.type"), "domain\n".into()),
            (
                &format!("{u}/kubepods/cgroup.controllers"),
                "cpuset cpu\n".into(),
            ),
            (&format!("{u}/kubepods/cpu.max"), "max 100000\n".into()),
            (
                &format!("{u}/kubepods/cpuset.cpus.effective"),
                "0-3\n".into(),
            ),
            (
                &format!("{u}/system.slice/cpuset.cpus.effective"),
                "0-1\n".into(),
            ),
            (&format!("{pod}/cgroup.type"), "domain\n".into()),
            (&format!("{pod}/cgroup.controllers"), "cpuset cpu\n".into()),
            (&format!("{pod}/cpu.max"), "30000 100000\n".into()),
            (
                &format!("{pod}/cpu.stat"),
                "usage_usec 1\nnr_periods 9\nnr_throttled 4\nthrottled_usec 250000\n".into(),
            ),
            (&format!("{pod}/cpuset.cpus.effective"), "1-3\n".into()),
            (&format!("{pod}/kubepods-other/x"), String::new()),
            (
                &format!("{pod}/cpu.pressure"),
                "some avg10=40.00 avg60=30.00 avg300=5.00 total=9\n".into(),
            ),
            (
                "proc/pressure/cpu",
                "some avg10=1.00 avg60=2.00 avg300=3.00 total=5\n".into(),
            ),
        ];
        let refs: Vec<(&str, &str)> = files.iter().map(|(a, b)| (*a, b.as_str())).collect();
        let t = tree(&refs);
        let r = audit(&t, &[2, 3]);
        let q = the(&r, Id::CfsQuota);
        assert!(
            q.value.starts_with("/kubepods/pod1: cpu.max 30000 100000 (0.30 CPUs), throttled in 4 of 9 periods, 0.250 s"),
            "{q:?}"
        );
        assert!(q.remedies.contains(&Remedy::Runtime {
            command: "echo max > /sys/fs/cgroup/kubepods/pod1/cpu.max".into(),
            effects: vec![Effect::Write {
                path: "/sys/fs/cgroup/kubepods/pod1/cpu.max".into(),
                value: "max 100000".into(),
            }],
        }));
        assert!(
            manual(q).iter().any(|m| m.starts_with("Kubernetes")),
            "{q:?}"
        );
        // Measured 2-3 are the pod's alone; the sibling slice holds 0-1 only.
        let c = the(&r, Id::CpusetExclusive);
        assert_eq!(
            c.value,
            "/kubepods/pod1 cpuset 1-3; measured CPUs 2-3 exclusive to it"
        );
        // Measuring CPU 1 too: shared with /system.slice.
        let shared = audit(&t, &[1, 2]);
        let s = the(&shared, Id::CpusetShared);
        assert!(
            s.value
                .contains("measured CPUs 1 shared with /system.slice on 1"),
            "{s:?}"
        );
        // The fix works there: /kubepods is no partition root, so it becomes one first
        // (the kernel makes the pod "root invalid" otherwise).
        assert!(
            manual(s).iter().any(|m| m.ends_with(
                "echo root > /sys/fs/cgroup/kubepods/cpuset.cpus.partition; echo root > \
                 /sys/fs/cgroup/kubepods/pod1/cpuset.cpus.partition"
            )),
            "{s:?}"
        );
        // Measuring CPU 0: outside the pod's cpuset.
        assert_eq!(
            the(&audit(&t, &[0]), Id::CpusetExcludesMeasured).severity,
            Severity::Bad
        );
        let p = the(&r, Id::CpuPressureHigh);
        assert!(
            p.value.contains("group /kubepods/pod1 cpu some 40.00 %"),
            "{p:?}"
        );
        // No RT group scheduling in this kernel: v2 groups may run real-time.
        assert!(
            the(&r, Id::RtRuntimeCgroupOk)
                .value
                .contains("no RT group scheduling")
        );
    }

    fn texts(f: &Finding) -> Vec<String> {
        f.remedies.iter().map(Remedy::text).collect()
    }

    /// A docker container on cgroup v2 with RT group scheduling and a quota, inside its
    /// cgroup namespace (the chain is `/`): no runtime file exists to give, docker's
    /// --cpu-rt-runtime is v1's, and the namespace's root cpu.max is the host's to write.
    #[test]
    fn issue30_a_docker_v2_containers_fixes_work_there() {
        let u = "sys/fs/cgroup";
        let t = tree(&[
            (".dockerenv", ""),
            ("proc/self/cgroup", "0::/\n"),
            (
                "proc/self/mountinfo",
                "41 31 0:38 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
            ),
            ("proc/sys/kernel/osrelease", "6.18.1-fixture\n"),
            (
                "boot/config-6.18.1-fixture",
                "CONFIG_RT_GROUP_SCHED=y\nCONFIG_CFS_BANDWIDTH=y\n",
            ),
            (&format!("{u}/cgroup.type"), "domain\n"),
            (&format!("{u}/cgroup.controllers"), "cpuset cpu\n"),
            (&format!("{u}/cpu.max"), "50000 100000\n"),
        ]);
        let r = audit(&t, &[1]);
        let rt = the(&r, Id::RtRuntimeCgroup);
        let all = texts(rt).join(" | ");
        for wrong in ["rt_runtime_us", "--cpu-rt-runtime", "parents first"] {
            assert!(!all.contains(wrong), "'{wrong}' in {all}");
        }
        assert!(
            all.contains("start the program in the root cgroup"),
            "{all}"
        );
        assert!(all.contains("rt_group_sched=0"), "{all}");
        let q = the(&r, Id::CfsQuota);
        assert!(
            !q.remedies
                .iter()
                .any(|x| matches!(x, Remedy::Runtime { .. })),
            "{q:?}"
        );
        assert!(
            manual(q)
                .iter()
                .any(|m| m.contains("cpu.max is the container's own group, set from the host")),
            "{q:?}"
        );
        assert!(manual(q).iter().any(|m| m.starts_with("docker: ")), "{q:?}");
    }

    /// The same on cgroup v1 (no cgroup.sane_behavior: the mount is not the real root):
    /// docker's way is said once, and as v1's.
    #[test]
    fn issue30_a_docker_v1_containers_runtime_advice_is_said_once() {
        let t = tree(&[
            (".dockerenv", ""),
            ("proc/self/cgroup", "1:cpu:/\n"),
            ("proc/self/mountinfo", V1_MOUNT),
            ("proc/sys/kernel/osrelease", "6.1.0-fixture\n"),
            ("boot/config-6.1.0-fixture", "CONFIG_RT_GROUP_SCHED=y\n"),
            ("sys/fs/cgroup/cpu/cpu.rt_runtime_us", "0\n"),
            ("sys/fs/cgroup/cpu/cpu.rt_period_us", "1000000\n"),
        ]);
        let r = audit(&t, &[1]);
        let f = the(&r, Id::RtRuntimeCgroup);
        let docker: Vec<String> = (texts(f).into_iter())
            .filter(|m| m.contains("docker run --cpu-rt-runtime"))
            .collect();
        assert_eq!(docker.len(), 1, "{f:?}");
        assert!(
            docker[0].starts_with("on the host, docker (cgroup v1): "),
            "{docker:?}"
        );
    }

    /// v1: the root holds tasks of its own (systemd leaves them there), and they keep the
    /// root's every CPU whatever cpu_exclusive says: the fix moves them first.
    #[test]
    fn issue30_a_v1_cpuset_shared_with_the_roots_tasks_moves_them_first() {
        let c = "sys/fs/cgroup/cpuset";
        let t = tree(&[
            ("proc/self/cgroup", "3:cpuset:/jsq\n"),
            (
                "proc/self/mountinfo",
                "33 31 0:30 / /sys/fs/cgroup/cpuset rw - cgroup cgroup rw,cpuset\n",
            ),
            (&format!("{c}/cgroup.sane_behavior"), "0\n"),
            (&format!("{c}/cpuset.cpus"), "0-3\n"),
            (&format!("{c}/cpuset.effective_cpus"), "0-3\n"),
            (&format!("{c}/cpuset.mems"), "0\n"),
            (&format!("{c}/cgroup.procs"), "100\n200\n"),
            ("proc/100/stat", "100 (bash) S 1 100 100 0 -1 4194560 0 0\n"),
            (
                "proc/200/stat",
                "200 (kworker/1:0) I 2 0 0 0 -1 69238880 0 0\n",
            ),
            (&format!("{c}/jsq/cpuset.cpus"), "2-3\n"),
            (&format!("{c}/jsq/cpuset.effective_cpus"), "2-3\n"),
            (&format!("{c}/jsq/cgroup.procs"), "300\n"),
        ]);
        let r = audit(&t, &[3]);
        let f = the(&r, Id::CpusetShared);
        assert!(f.value.contains("/ (its 1 tasks) on 3"), "{f:?}");
        let hk = "/sys/fs/cgroup/cpuset/jitterscope-housekeeping";
        let m = manual(f);
        assert!(
            m[0].ends_with(&format!(
                "mkdir -p {hk}; echo 0-1 > {hk}/cpuset.cpus; cat \
                 /sys/fs/cgroup/cpuset/cpuset.mems > {hk}/cpuset.mems; for p in $(cat \
                 /sys/fs/cgroup/cpuset/cgroup.procs); do echo $p > {hk}/cgroup.procs \
                 2>/dev/null; done"
            )),
            "{m:?}"
        );
        assert_eq!(
            m[1],
            "echo 1 > /sys/fs/cgroup/cpuset/jsq/cpuset.cpu_exclusive"
        );
    }

    /// The partition check reads cgroup v2 through system::cgroup (mountinfo and the
    /// process's own line), as the cgroup checks do, not through /proc/mounts.
    #[test]
    fn issue30_an_isolated_partition_is_found_through_the_cgroup_reader() {
        let u = "sys/fs/cgroup/unified";
        let t = tree(&[
            ("proc/cmdline", "ro\n"),
            ("proc/self/cgroup", "1:cpu:/\n0::/\n"),
            (
                "proc/self/mountinfo",
                "41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n",
            ),
            (&format!("{u}/cgroup.controllers"), "cpuset cpu\n"),
            (&format!("{u}/rt/cpuset.cpus.partition"), "isolated\n"),
            (&format!("{u}/rt/cpuset.cpus.effective"), "2-3\n"),
            (&format!("{u}/a/b/cpuset.cpus.partition"), "isolated\n"),
            (&format!("{u}/a/b/cpuset.cpus.effective"), "1\n"),
        ]);
        let r = audit(&t, &[1, 3]);
        let f = the(&r, Id::CpusetPartitionIsolated);
        assert_eq!(
            f.value,
            "/sys/fs/cgroup/unified/rt (2-3), /sys/fs/cgroup/unified/a/b (1)"
        );
    }

    #[test]
    fn a_tree_without_proc_self_cgroup_says_so() {
        let t = tree(&[("proc/cmdline", "ro\n")]);
        let r = audit(&t, &[1]);
        let f = the(&r, Id::Unreadable(Check::Cgroup));
        assert!(f.value.contains("/proc/self/cgroup"), "{f:?}");
        assert!(
            the(&r, Id::Unreadable(Check::Pressure))
                .value
                .contains("/proc/pressure/cpu")
        );
    }
}
