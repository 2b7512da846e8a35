//! Whether the cgroup a process is in lets it run real-time, and what would.
//!
//! With RT group scheduling (`CONFIG_RT_GROUP_SCHED`) every task group has its own
//! real-time runtime; a new group gets none, so `sched_setscheduler(SCHED_FIFO)` fails
//! with EPERM there even for root. On cgroup v1 the runtime is `cpu.rt_runtime_us` of
//! `cpu.rt_period_us`, settable from the top down (a child's share never exceeds what its
//! parent has left); on cgroup v2 the kernel shows no such file, so any group below the
//! root whose `cpu` controller is on refuses real-time, unless the kernel (6.16+) was
//! booted with `rt_group_sched=0`.
//!
//! `blocked` is a pure function of the chain; `top_down` reads the sibling groups whose
//! runtime the chain's shares must fit beside; `live_cause` is the one-line cause a
//! refused command prints.

use std::path::Path;

use crate::system::cgroup::{self, Cgroups, Chain, Level, RtBandwidth, Version};
use crate::system::kernel::{self, KernelConfig};

/// The audit finding that explains a refusal by a cgroup.
pub const FINDING: &str = "rt-runtime-cgroup";

/// A chain that gives real-time no runtime.
#[derive(Debug, Clone, PartialEq)]
pub struct RtBlock {
    pub version: Version,
    /// The hierarchy's mount point (`/sys/fs/cgroup/cpu`).
    pub mount: String,
    /// Whether the chain's top is the hierarchy's real root (false in a container).
    pub from_root: bool,
    /// The group whose runtime the process's real-time threads would use.
    pub group: String,
    pub dir: String,
    /// The highest group on the chain with no runtime (v1), or the group itself (v2).
    pub first: String,
    /// Each level and its runtime, in words: `/ 950000 of 1000000 µs, /jsq 0`.
    pub chain: String,
}

/// Whether RT group scheduling acts on cgroup v2 groups: the kernel is built with it and
/// not booted with `rt_group_sched=0` (6.16+; the default follows
/// `CONFIG_RT_GROUP_SCHED_DEFAULT_DISABLED`). `None` when no kernel config can be read.
pub fn v2_rt_group_sched(config: &KernelConfig, cmdline: &str) -> Option<bool> {
    if !config.known() {
        return None;
    }
    if !config.enabled("CONFIG_RT_GROUP_SCHED") {
        return Some(false);
    }
    let asked = cmdline
        .split_whitespace()
        .take_while(|w| *w != "--")
        .filter_map(|w| w.strip_prefix("rt_group_sched="))
        .last();
    Some(match asked {
        Some(v) => v != "0",
        None => !config.enabled("CONFIG_RT_GROUP_SCHED_DEFAULT_DISABLED"),
    })
}

/// The kernel accepts `rt_group_sched=` at boot: 6.16 or later, built with RT groups.
pub fn boot_switch(config: &KernelConfig, release: &str) -> bool {
    config.enabled("CONFIG_RT_GROUP_SCHED")
        && kernel::release_version(release).is_some_and(|v| v >= (6, 16))
}

fn runtime_words(l: &Level) -> String {
    let path = crate::system::cgroup::short_path(&l.path);
    match l.rt {
        Some(RtBandwidth {
            runtime_us: -1,
            period_us,
        }) => format!("{path} unlimited of {period_us} µs"),
        Some(RtBandwidth {
            runtime_us,
            period_us,
        }) => format!("{path} {runtime_us} of {period_us} µs"),
        None => format!("{path} 0 (no cpu.rt_runtime_us on v2)"),
    }
}

/// The chain's RT block, if it has one. `v2_rt` says whether RT group scheduling acts on
/// v2 groups (`v2_rt_group_sched`; unknown counts as no: the caller confirms with a
/// refused SCHED_FIFO).
pub fn blocked(cg: &Cgroups, v2_rt: bool) -> Option<RtBlock> {
    let chain = cg.cpu()?;
    match chain.version {
        Version::V1 => blocked_v1(chain),
        Version::V2 if v2_rt => blocked_v2(chain),
        Version::V2 => None,
    }
}

fn blocked_v1(chain: &Chain) -> Option<RtBlock> {
    let own = chain.own();
    // No rt files: the kernel has no RT group scheduling (or it was booted off).
    if own.rt?.runtime_us != 0 {
        return None;
    }
    let first = chain
        .levels
        .iter()
        .find(|l| l.rt.is_some_and(|r| r.runtime_us == 0))?;
    Some(block(chain, own, first))
}

/// v2: the group the `cpu` controller acts on is the deepest level that lists it;
/// below the root it has no runtime unless the kernel shows one.
fn blocked_v2(chain: &Chain) -> Option<RtBlock> {
    let (i, group) = chain
        .levels
        .iter()
        .enumerate()
        .rev()
        .find(|(_, l)| l.controllers.iter().any(|c| c == "cpu"))?;
    if i == 0 && chain.from_root {
        return None;
    }
    if group.rt.is_some_and(|r| r.runtime_us != 0) {
        return None;
    }
    Some(block(chain, group, group))
}

fn block(chain: &Chain, group: &Level, first: &Level) -> RtBlock {
    RtBlock {
        version: chain.version,
        mount: chain.mount.clone(),
        from_root: chain.from_root,
        group: group.path.clone(),
        dir: group.dir.clone(),
        first: first.path.clone(),
        chain: chain
            .levels
            .iter()
            .map(runtime_words)
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// One write of a top-down fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Share {
    /// `cpu.rt_runtime_us` of a group on the chain.
    pub file: String,
    pub runtime_us: i64,
}

/// v1: the writes that give each group on the chain with no runtime all that its parent
/// has left, parents first; `Err` says why there is none to give. Reads the siblings'
/// runtimes below `root`.
pub fn top_down(root: &Path, chain: &Chain) -> Result<Vec<Share>, String> {
    let mut out = Vec::new();
    let Some(top) = chain.levels.first().and_then(|l| l.rt) else {
        return Err("the chain shows no cpu.rt_runtime_us".into());
    };
    if top.runtime_us == 0 {
        return Err(format!(
            "the top of the chain in sight, {}, has none, and its parent is out of sight",
            chain.levels[0].path
        ));
    }
    let mut parent = (
        top,
        chain.levels[0].path.clone(),
        chain.levels[0].dir.clone(),
    );
    for level in chain.levels.iter().skip(1) {
        let Some(rt) = level.rt else {
            return Err(format!("{}: no cpu.rt_runtime_us", level.dir));
        };
        if rt.runtime_us != 0 {
            parent = (rt, level.path.clone(), level.dir.clone());
            continue;
        }
        let name = level.dir.rsplit('/').next().unwrap_or_default();
        let taken = siblings_ratio(root, chain.version, (&parent.1, &parent.2), name);
        let left = ratio(&parent.0).saturating_sub(taken);
        // The largest runtime whose ratio, floored as the kernel floors it, fits in what
        // is left: r << 20 / period <= left.
        let limit = (u128::from(left) + 1) * u128::from(rt.period_us);
        let runtime_us = (limit.saturating_sub(1) >> BW_SHIFT) as i64;
        if runtime_us <= 0 {
            return Err(format!(
                "the groups beside {} hold all of {}'s real-time runtime: lower theirs first",
                level.path, parent.1
            ));
        }
        out.push(Share {
            file: format!("{}/cpu.rt_runtime_us", level.dir),
            runtime_us,
        });
        let given = RtBandwidth {
            runtime_us,
            period_us: rt.period_us,
        };
        parent = (given, level.path.clone(), level.dir.clone());
    }
    Ok(out)
}

/// The kernel's fixed point for bandwidth ratios (`to_ratio`: runtime << 20 / period).
const BW_SHIFT: u32 = 20;

fn ratio(rt: &RtBandwidth) -> u64 {
    match rt.runtime_us {
        r if r < 0 => 1 << BW_SHIFT,
        _ if rt.period_us == 0 => 0,
        r => ((r as u128) << BW_SHIFT) as u64 / rt.period_us.max(1),
    }
}

/// The runtime ratio (fixed point) the child groups of the group at `path` (directory
/// `dir`) other than `except` hold.
fn siblings_ratio(root: &Path, version: Version, (path, dir): (&str, &str), except: &str) -> u64 {
    (cgroup::child_levels(root, version, path, dir).iter())
        .filter(|l| l.dir.rsplit('/').next() != Some(except))
        .filter_map(|l| l.rt.as_ref().map(ratio))
        .sum()
}

/// The shell command that moves the calling shell (and what it starts) to the top of the
/// chain, where it is the real root.
pub fn to_root_command(b: &RtBlock) -> Option<String> {
    b.from_root
        .then(|| format!("echo $$ > {}/cgroup.procs", b.mount.trim_end_matches('/')))
}

/// The container runtime the group's path names, if any: (name, its way, if it has one).
pub fn container_runtime(group: &str) -> Option<&'static str> {
    if group.contains("libpod") {
        Some("podman")
    } else if group.contains("docker") {
        Some("docker")
    } else if group.contains("kubepods") {
        Some("kubernetes")
    } else {
        None
    }
}

/// The one-line cause of a real-time refusal on the live host when a cgroup is it;
/// `None` when the chain gives runtime (the refusal has another cause).
pub fn live_cause() -> Option<String> {
    let root = Path::new("/");
    let cg = Cgroups::read(root, None).ok()?;
    let config = KernelConfig::read(root);
    let cmdline = std::fs::read_to_string("/proc/cmdline").unwrap_or_default();
    // Unknown config on v2: the refusal itself (EPERM as root) is the evidence.
    let v2 = v2_rt_group_sched(&config, &cmdline).unwrap_or(true);
    let b = blocked(&cg, v2)?;
    let fix = match to_root_command(&b) {
        Some(cmd) => format!(" gives the fixes, e.g. {cmd}"),
        None => " gives the fixes".to_string(),
    };
    Some(format!(
        "the cgroup {} has no real-time runtime (cpu.rt_runtime_us 0); audit finding \
         {FINDING}{fix}",
        b.first
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::system::cgroup::{Chain, Level};

    fn level(path: &str, dir: &str, rt: Option<(i64, u64)>, ctl: &[&str]) -> Level {
        Level {
            path: path.into(),
            dir: dir.into(),
            rt: rt.map(|(runtime_us, period_us)| RtBandwidth {
                runtime_us,
                period_us,
            }),
            controllers: ctl.iter().map(|c| c.to_string()).collect(),
            ..Level::default()
        }
    }

    fn cgroups(version: Version, from_root: bool, levels: Vec<Level>) -> Cgroups {
        Cgroups {
            pid: None,
            chains: vec![Chain {
                version,
                controllers: vec!["cpu".into()],
                mount: levels[0].dir.clone(),
                from_root,
                levels,
            }],
        }
    }

    #[test]
    fn v1_names_the_highest_group_without_runtime() {
        let m = "/sys/fs/cgroup/cpu";
        let cg = cgroups(
            Version::V1,
            true,
            vec![
                level("/", m, Some((950_000, 1_000_000)), &[]),
                level("/jsq", &format!("{m}/jsq"), Some((0, 1_000_000)), &[]),
                level("/jsq/in", &format!("{m}/jsq/in"), Some((0, 1_000_000)), &[]),
            ],
        );
        let b = blocked(&cg, false).expect("blocked");
        assert_eq!((b.first.as_str(), b.group.as_str()), ("/jsq", "/jsq/in"));
        assert_eq!(
            b.chain,
            "/ 950000 of 1000000 µs, /jsq 0 of 1000000 µs, /jsq/in 0 of 1000000 µs"
        );
        assert_eq!(
            to_root_command(&b).as_deref(),
            Some("echo $$ > /sys/fs/cgroup/cpu/cgroup.procs")
        );
        // The root, or a group with runtime, is not blocked; nor a kernel without rt files.
        let root = cgroups(
            Version::V1,
            true,
            vec![level("/", m, Some((950_000, 1_000_000)), &[])],
        );
        assert_eq!(blocked(&root, false), None);
        let given = cgroups(
            Version::V1,
            true,
            vec![
                level("/", m, Some((950_000, 1_000_000)), &[]),
                level("/jsq", m, Some((100_000, 1_000_000)), &[]),
            ],
        );
        assert_eq!(blocked(&given, false), None);
        let none = cgroups(Version::V1, true, vec![level("/", m, None, &[])]);
        assert_eq!(blocked(&none, false), None);
    }

    #[test]
    fn v2_blocks_below_the_root_where_the_cpu_controller_acts() {
        let u = "/sys/fs/cgroup";
        let chain = |ctl: &[&str]| {
            cgroups(
                Version::V2,
                true,
                vec![
                    level("/", u, None, &["cpu", "memory"]),
                    level("/user.slice", &format!("{u}/user.slice"), None, ctl),
                ],
            )
        };
        let b = blocked(&chain(&["cpu", "memory"]), true).expect("blocked");
        assert_eq!(b.group, "/user.slice");
        assert_eq!(
            to_root_command(&b).as_deref(),
            Some("echo $$ > /sys/fs/cgroup/cgroup.procs")
        );
        // No cpu controller on the group: its tasks use the root's runtime.
        assert_eq!(blocked(&chain(&["memory"]), true), None);
        // RT group scheduling off (not built, or rt_group_sched=0).
        assert_eq!(blocked(&chain(&["cpu"]), false), None);
    }

    #[test]
    fn the_kernel_switch_and_its_default() {
        let cfg = |t: &str| KernelConfig::parse(t, "test");
        let on = cfg("CONFIG_RT_GROUP_SCHED=y\n");
        assert_eq!(v2_rt_group_sched(&on, "ro quiet"), Some(true));
        assert_eq!(v2_rt_group_sched(&on, "rt_group_sched=0"), Some(false));
        assert_eq!(v2_rt_group_sched(&on, "-- rt_group_sched=0"), Some(true));
        let off_by_default =
            cfg("CONFIG_RT_GROUP_SCHED=y\nCONFIG_RT_GROUP_SCHED_DEFAULT_DISABLED=y\n");
        assert_eq!(v2_rt_group_sched(&off_by_default, ""), Some(false));
        assert_eq!(
            v2_rt_group_sched(&off_by_default, "rt_group_sched=1"),
            Some(true)
        );
        assert_eq!(v2_rt_group_sched(&cfg("CONFIG_HZ=250\n"), ""), Some(false));
        assert_eq!(v2_rt_group_sched(&KernelConfig::default(), ""), None);
        assert!(boot_switch(&on, "6.18.44-fc"));
        assert!(!boot_switch(&on, "6.12.1"));
    }

    /// The shares fit beside the siblings' runtime, parents first.
    #[test]
    fn top_down_shares_fit_beside_the_siblings() {
        let t = tempfile::tempdir().expect("tempdir");
        let m = "sys/fs/cgroup/cpu";
        let write = |p: &str, v: &str| {
            let p = t.path().join(m).join(p);
            std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
            std::fs::write(p, v).expect("write");
        };
        write("other/cpu.rt_runtime_us", "200000\n");
        write("other/cpu.rt_period_us", "1000000\n");
        let d = |p: &str| format!("/{m}{p}");
        let cg = cgroups(
            Version::V1,
            true,
            vec![
                level("/", &d(""), Some((950_000, 1_000_000)), &[]),
                level("/jsq", &d("/jsq"), Some((0, 1_000_000)), &[]),
                level("/jsq/in", &d("/jsq/in"), Some((0, 500_000)), &[]),
            ],
        );
        let shares = top_down(t.path(), cg.cpu().expect("cpu")).expect("shares");
        assert_eq!(
            shares,
            [
                Share {
                    file: d("/jsq/cpu.rt_runtime_us"),
                    runtime_us: 750_000
                },
                // Half the period: half of what /jsq now has.
                Share {
                    file: d("/jsq/in/cpu.rt_runtime_us"),
                    runtime_us: 375_000
                },
            ]
        );
        write("other/cpu.rt_runtime_us", "950000\n");
        let e = top_down(t.path(), cg.cpu().expect("cpu")).expect_err("nothing left");
        assert!(e.contains("beside /jsq"), "{e}");
    }
}
