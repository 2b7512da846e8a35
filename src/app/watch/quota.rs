//! The CFS quotas over a watched cgroup: the group's and its ancestors' settings, the
//! tightest of them handed to attribution, and what each one's `cpu.stat` counted over
//! the trace (periods, throttled periods, throttled time), kept in the result beside the
//! delays named after it.
//!
//! No trace event marks CFS throttling: `trace::attribute` names a watched thread's
//! stretch the quota only where the trace shows it (the thread switched out runnable
//! inside the kernel, "R+", as 6.18's throttle dequeues it on its way back to user, until
//! a quota refill unthrottled a group on its CPU: `sched_cfs_period_timer`,
//! `sched_cfs_slack_timer` or `__cfsb_csd_unthrottle`; or the CPU idled while it was
//! runnable there). `cpu.stat` is the kernel's own count to judge that by, read when the
//! trace starts and when it stops recording: a throttling under way at either end is
//! counted by the kernel when it ends (at the unthrottle), traced only in part.

use std::path::Path;

use crate::system::cgroup::target::Group;
use crate::system::cgroup::{self, CpuStat, Level, Version};
use crate::system::counters::GroupStatDelta;
use crate::trace::attribute::CfsQuota;

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

/// The quota a thread of `groups` meets first (the tightest of its chain), when every
/// group has the same one: the threads of a pod whose containers set their own would
/// otherwise be named after another container's. `None` when none is set.
pub fn tightest(groups: &[Group]) -> Option<CfsQuota> {
    agreed(groups, crate::system::throttle::tightest_quota)
}

/// Likewise the real-time bandwidth a real-time thread of `groups` meets first, where
/// it is tighter than the kernel's `kernel` (cgroup v1 with RT group scheduling).
pub fn tightest_rt(groups: &[Group], kernel: Option<(i64, u64)>) -> Option<CfsQuota> {
    agreed(groups, |c| crate::system::throttle::tightest_rt(c, kernel))
}

/// What `of` finds in the chain of each of `groups`, when it finds the same in all.
fn agreed(groups: &[Group], of: impl Fn(&cgroup::Chain) -> Option<CfsQuota>) -> Option<CfsQuota> {
    let mut each = groups.iter().map(|g| chain(g).and_then(|c| of(&c)));
    let first = each.next()??;
    each.all(|q| q.as_ref() == Some(&first)).then_some(first)
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

    /// Each quota's setting and its `cpu.stat` deltas since `start` (a level whose
    /// `cpu.stat` cannot be read now is left out).
    pub fn deltas(&self) -> Vec<GroupStatDelta> {
        (self.levels.iter())
            .filter_map(|(l, before)| {
                let now = cgroup::read_level(Path::new("/"), self.version, &l.path, &l.dir);
                Some(GroupStatDelta {
                    group: l.path.clone(),
                    version: self.version,
                    quota: l.cfs.map(|c| c.setting(self.version)),
                    cfs: l.cfs,
                    stat: now.stat?.since(before),
                })
            })
            .collect()
    }
}

/// One line per quota: its setting and its `cpu.stat` deltas, and what watch makes of
/// it.
pub fn notes(deltas: &[GroupStatDelta]) -> Vec<String> {
    (deltas.iter())
        .map(|d| {
            format!(
                "CFS quota over the watched cgroup: {} sets {}; over the trace {}. A \
                 watched thread's delay is named after the quota where the trace shows the \
                 throttling (see the causes)",
                cgroup::short_path(&d.group),
                d.quota.as_deref().unwrap_or("no quota"),
                describe(&d.stat)
            )
        })
        .collect()
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
