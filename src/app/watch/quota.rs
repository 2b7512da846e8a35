//! The CFS quotas over a watched cgroup: the group's and its ancestors' settings read at
//! the start, and what each one's `cpu.stat` counted over the watch (periods, throttled
//! periods, throttled time), said beside the figures. The kernel's counts, not a split
//! of the delays: `watch` does not name a quota as a delay's cause (the trace has no
//! event for a throttled group's wake-up), and says so.

use std::path::Path;

use crate::system::cgroup::target::Group;
use crate::system::cgroup::{self, CpuStat, Level, Version};

/// The levels from the top down to the watched group that set a quota, with their
/// counters at the start.
pub struct Quotas {
    version: Version,
    levels: Vec<(Level, CpuStat)>,
}

/// The chain of `group` (in its own hierarchy) from the top, each level read.
fn chain(group: &Group) -> Option<cgroup::Chain> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mounts = cgroup::parse_mountinfo(&mountinfo);
    let mount = mounts.iter().find(|m| m.mount_point == group.mount)?;
    // As /proc/PID/cgroup would name a task of the group.
    let line = match group.version {
        Version::V2 => format!("0::{}\n", group.path),
        Version::V1 => format!("1:{}:{}\n", mount.controllers.join(","), group.path),
    };
    let groups = cgroup::Cgroups::from_text(Path::new("/"), None, &line, &mountinfo);
    groups.chains.into_iter().next()
}

impl Quotas {
    /// The quotas over the first of `groups` (where the `cpu` controller is), if any.
    pub fn start(groups: &[Group]) -> Option<Quotas> {
        let chain = chain(groups.first()?)?;
        let levels: Vec<(Level, CpuStat)> = (chain.quotas())
            .map(|l| (l.clone(), l.stat.unwrap_or_default()))
            .collect();
        (!levels.is_empty()).then_some(Quotas {
            version: chain.version,
            levels,
        })
    }

    /// One line per quota: its setting and its `cpu.stat` deltas since `start`.
    pub fn notes(&self) -> Vec<String> {
        (self.levels.iter())
            .map(|(l, before)| {
                let now = cgroup::read_level(Path::new("/"), self.version, &l.path, &l.dir);
                let setting = l.cfs.map(|c| c.setting(self.version)).unwrap_or_default();
                let counted = match now.stat {
                    Some(s) => describe(&s.since(before)),
                    None => "its cpu.stat could not be read at the end".into(),
                };
                format!(
                    "CFS quota over the watched cgroup: {} sets {setting}; over the watch \
                     {counted}. watch does not split delays by it: what ran instead is named",
                    cgroup::short_path(&l.path)
                )
            })
            .collect()
    }
}

/// `cpu.stat`'s deltas, in words.
fn describe(d: &CpuStat) -> String {
    format!(
        "cpu.stat counted {} of {} periods throttled, {:.1} ms throttled (summed over CPUs)",
        d.nr_throttled,
        d.nr_periods,
        d.throttled_ns as f64 / 1e6
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deltas_are_said_with_their_units() {
        let d = CpuStat {
            nr_periods: 30,
            nr_throttled: 25,
            throttled_ns: 712_400_000,
            ..CpuStat::default()
        };
        assert_eq!(
            describe(&d),
            "cpu.stat counted 25 of 30 periods throttled, 712.4 ms throttled (summed over CPUs)"
        );
    }
}
