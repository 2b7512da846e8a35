//! The kernel's settings that take a CPU from a measuring thread, read for attribution:
//! RT throttling (`kernel.sched_rt_runtime_us` of `sched_rt_period_us`), on 6.12+ the
//! fair server (`/sys/kernel/debug/sched/fair_server/cpuN/{runtime,period}`), and the CFS
//! quota of the process's cgroup chain (`system::cgroup`). Attribution is pure; this is
//! the I/O it is handed.

use std::path::{Path, PathBuf};

use crate::system::cgroup::{Cgroups, Chain};
use crate::trace::attribute::{CfsQuota, FairServer, Throttle};

const DEBUGFS: &str = "/sys/kernel/debug";
const FAIR_SERVER: &str = "sched/fair_server";

fn int(path: &Path) -> Option<i64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// The throttle settings as they apply to a thread of this process on each of `cpus`, in
/// their order: the kernel's, and the CFS quota of this process's cgroup chain (its
/// measuring threads share it). The chain is read once, and debugfs mounted at most once,
/// however many CPUs (a 192-CPU run mounted it 192 times).
pub fn read_for_self(cpus: &[usize]) -> Vec<Throttle> {
    let cfs_quota = Cgroups::of_self()
        .ok()
        .and_then(|c| tightest_quota(c.cpu()?));
    (read_all(cpus).into_iter())
        .map(|t| Throttle {
            cfs_quota: cfs_quota.clone(),
            ..t
        })
        .collect()
}

/// The quota of `chain` that allows the least CPU time per period: every level with one
/// throttles the groups below it, and the tightest is the one a single thread meets
/// first. `None` when no level has a quota.
pub fn tightest_quota(chain: &Chain) -> Option<CfsQuota> {
    let ratio = |l: &&crate::system::cgroup::Level| l.cfs.and_then(|c| c.cpus());
    let level = chain.quotas().min_by(|a, b| {
        ratio(a)
            .partial_cmp(&ratio(b))
            .unwrap_or(std::cmp::Ordering::Equal)
    })?;
    let cfs = level.cfs?;
    Some(CfsQuota {
        setting: cfs.setting(chain.version),
        group: level.path.clone(),
    })
}

/// The real-time bandwidth of `chain` below its root that allows the least time per
/// period (cgroup v1 with RT group scheduling: `cpu.rt_runtime_us` of
/// `cpu.rt_period_us`), when it allows less than `kernel` (`sched_rt_runtime_us`,
/// `sched_rt_period_us`) does; named as a `CfsQuota` is, by setting and group.
pub fn tightest_rt(chain: &Chain, kernel: Option<(i64, u64)>) -> Option<CfsQuota> {
    let kernel = kernel.map_or(1.0, |(r, p)| match r {
        r if r < 0 || p == 0 => 1.0,
        r => r as f64 / p as f64,
    });
    let levels = chain.levels.iter().skip(1);
    let (level, rt) = (levels.filter_map(|l| Some((l, l.rt?))))
        .filter(|(_, rt)| rt.ratio() < kernel)
        .min_by(|a, b| a.1.ratio().total_cmp(&b.1.ratio()))?;
    Some(CfsQuota {
        setting: format!(
            "cpu.rt_runtime_us {}, cpu.rt_period_us {}",
            rt.runtime_us, rt.period_us
        ),
        group: level.path.clone(),
    })
}

/// The kernel's throttle settings as they apply to `cpu` (no cgroup's quota: for threads
/// of another process, or where none applies).
pub fn read(cpu: usize) -> Throttle {
    read_all(&[cpu]).remove(0)
}

/// `read` for each of `cpus`, in their order.
fn read_all(cpus: &[usize]) -> Vec<Throttle> {
    let rt = int(Path::new("/proc/sys/kernel/sched_rt_runtime_us")).zip(
        int(Path::new("/proc/sys/kernel/sched_rt_period_us")).and_then(|p| u64::try_from(p).ok()),
    );
    (fair_servers(cpus).into_iter())
        .map(|fair_server| Throttle {
            rt,
            fair_server,
            cfs_quota: None,
            rt_group: None,
        })
        .collect()
}

/// The fair server of each of `cpus`: from debugfs where it is mounted; else from a
/// private mount of it, made and removed here, so that the host is left as it was.
fn fair_servers(cpus: &[usize]) -> Vec<FairServer> {
    let all_in = |root: &Path| cpus.iter().map(|&c| fair_server_in(root, c)).collect();
    if Path::new(DEBUGFS).join("sched").is_dir() {
        return all_in(Path::new(DEBUGFS));
    }
    let Some(dir) = private_dir() else {
        return vec![FairServer::Unreadable; cpus.len()];
    };
    let flags = rustix::mount::MountFlags::RDONLY;
    let got = match rustix::mount::mount("none", &dir, "debugfs", flags, None) {
        Ok(()) => {
            let got = all_in(&dir);
            let _ = rustix::mount::unmount(&dir, rustix::mount::UnmountFlags::DETACH);
            got
        }
        // Not root, or no debugfs: whether there is a fair server is unknown.
        Err(_) => vec![FairServer::Unreadable; cpus.len()],
    };
    let _ = std::fs::remove_dir(&dir);
    got
}

fn private_dir() -> Option<PathBuf> {
    let dir = std::env::temp_dir().join(format!("jitterscope-debugfs-{}", std::process::id()));
    std::fs::create_dir(&dir).ok()?;
    Some(dir)
}

/// The fair server under a debugfs root: `Off` when the kernel has none (no directory)
/// or its runtime is 0; `Unreadable` when its files cannot be read (lockdown restricts
/// debugfs reads even to root).
fn fair_server_in(root: &Path, cpu: usize) -> FairServer {
    let dir = root.join(FAIR_SERVER).join(format!("cpu{cpu}"));
    if !root.join(FAIR_SERVER).is_dir() {
        return FairServer::Off;
    }
    match (int(&dir.join("runtime")), int(&dir.join("period"))) {
        (Some(r), _) if r <= 0 => FairServer::Off,
        (Some(r), Some(p)) if p > 0 => FairServer::On {
            runtime_ns: r as u64,
            period_ns: p as u64,
        },
        _ => FairServer::Unreadable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::system::cgroup::{CfsBandwidth, Level, Version};

    fn level(path: &str, quota_us: Option<u64>, period_us: u64) -> Level {
        Level {
            path: path.into(),
            cfs: Some(CfsBandwidth {
                quota_us,
                period_us,
                burst_us: None,
            }),
            ..Level::default()
        }
    }

    fn chain(version: Version, levels: Vec<Level>) -> Chain {
        Chain {
            version,
            controllers: vec!["cpu".into()],
            mount: "/sys/fs/cgroup/cpu".into(),
            from_root: true,
            levels,
        }
    }

    /// Issue 30: the quota handed to attribution is the chain's tightest, named by its
    /// file and group; a chain with none hands none.
    #[test]
    fn issue30_the_tightest_quota_of_the_chain_is_handed_to_attribution() {
        let levels = vec![
            level("/", None, 100_000),
            level("/pod", Some(200_000), 100_000),
            level("/pod/jsq", Some(20_000), 50_000),
            level("/pod/jsq/inner", None, 100_000),
        ];
        let q = tightest_quota(&chain(Version::V1, levels.clone())).unwrap();
        assert_eq!(
            (q.setting.as_str(), q.group.as_str()),
            (
                "cpu.cfs_quota_us 20000, cpu.cfs_period_us 50000",
                "/pod/jsq"
            )
        );
        let q = tightest_quota(&chain(Version::V2, levels.clone())).unwrap();
        assert_eq!(q.setting, "cpu.max 20000 50000");
        let free = vec![levels[0].clone(), levels[3].clone()];
        assert_eq!(tightest_quota(&chain(Version::V1, free)), None);
    }

    #[test]
    fn the_fair_server_is_read_from_its_files() {
        let root = std::env::temp_dir().join(format!("js-fs-test-{}", std::process::id()));
        let cpu1 = root.join(FAIR_SERVER).join("cpu1");
        std::fs::create_dir_all(&cpu1).unwrap();
        assert_eq!(fair_server_in(&root, 1), FairServer::Unreadable);
        std::fs::write(cpu1.join("runtime"), "50000000\n").unwrap();
        std::fs::write(cpu1.join("period"), "1000000000\n").unwrap();
        assert_eq!(
            fair_server_in(&root, 1),
            FairServer::On {
                runtime_ns: 50_000_000,
                period_ns: 1_000_000_000
            }
        );
        std::fs::write(cpu1.join("runtime"), "0\n").unwrap();
        assert_eq!(fair_server_in(&root, 1), FairServer::Off);
        std::fs::remove_dir_all(&root).unwrap();
        assert_eq!(fair_server_in(&root, 1), FairServer::Off);
    }
}
