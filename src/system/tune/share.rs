//! The cause each step targets, and the steps ordered by its traced share.
//!
//! With a trace, a step that goes after the largest share of the lost time is tried
//! first; `system::cause_fix::TARGETS` says which attributed causes each step's fix removes. Steps
//! it does not name (PM QoS: a spinning CPU never idles, so no gap shows its cost) have
//! no share and keep their severity order after those that do.

use crate::stats::causes::Attribution;
use crate::system::cause_fix::{self, Target};

use super::Step;

/// The causes `step_id` targets (none for a step the table does not name): the audit
/// finding's targets in the one table of what each fix removes (`system::cause_fix`).
pub fn targets(step_id: &str) -> &'static [Target] {
    step_id.parse().map_or(&[], cause_fix::targets)
}

/// The share, in % of the interrupted time of every attributed gap of `attrs` (one per
/// CPU and block, pooled), of the causes `step_id` targets; None without a target or
/// with no attributed time.
pub fn share_of(step_id: &str, attrs: &[&Attribution]) -> Option<f64> {
    let t = targets(step_id);
    let total: u64 = attrs.iter().map(|a| a.interrupted_ns).sum();
    if t.is_empty() || total == 0 {
        return None;
    }
    let hit: u64 = (attrs.iter().flat_map(|a| &a.causes))
        .filter(|row| cause_fix::hits(t, row.kind, &row.cause))
        .map(|row| row.total_ns)
        .sum();
    Some(hit as f64 * 100.0 / total as f64)
}

/// Orders `steps` by `share` of each, largest first; those without one keep their
/// (severity) order after them. Stable, so equal shares keep the audit's order.
pub fn order(steps: &mut [Step], share: impl Fn(&Step) -> Option<f64>) {
    let key = |s: &Step| std::cmp::Reverse(share(s).map(|p| (p * 1000.0).round() as i64));
    steps.sort_by_cached_key(key);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::causes::{CauseKind, CauseRow};

    fn row(kind: CauseKind, cause: &str, total_ns: u64) -> CauseRow {
        CauseRow {
            median_ns: total_ns,
            max_ns: total_ns,
            ..CauseRow::made_up(kind, cause, 1, 0, total_ns)
        }
    }

    fn attribution(causes: Vec<CauseRow>) -> Attribution {
        let lost = causes.iter().map(|c| c.total_ns).sum();
        Attribution::of_causes(causes, 1, lost)
    }

    fn step(id: &str) -> Step {
        Step {
            id: id.into(),
            ..Step::sham()
        }
    }

    #[test]
    fn shares_pool_the_blocks_and_match_by_kind_and_name() {
        let a = attribution(vec![
            row(
                CauseKind::Throttling,
                "real-time throttling (kernel.sched_rt_runtime_us = 950000 of 1000000)",
                600,
            ),
            row(
                CauseKind::Task,
                "task kworker/1:1:57 (SCHED_OTHER nice 0) vmstat_update",
                100,
            ),
            row(CauseKind::Vector, "vector local_timer", 200),
            row(CauseKind::Softirq, "softirq RCU", 100),
        ]);
        let k = attribution(vec![
            row(
                CauseKind::Task,
                "task rcu_preempt:16 (SCHED_OTHER nice 0)",
                300,
            ),
            row(
                CauseKind::Task,
                "task kworker/1:1:57 (SCHED_OTHER nice 0)",
                100,
            ),
            row(CauseKind::Softirq, "softirq RCU", 100),
        ]);
        // Kernel threads other than kworkers: not the RCU softirq, not a kworker.
        assert_eq!(share_of("kthreads-on-measured", &[&k]), Some(60.0));
        let b = attribution(vec![row(CauseKind::Irq, "irq 36 virtio1-req.0", 1000)]);
        let both = [&a, &b];
        assert_eq!(share_of("rt-throttling-on", &both), Some(30.0));
        assert_eq!(share_of("irq-on-measured-cpus", &both), Some(50.0));
        assert_eq!(share_of("timer-migration-on", &both), Some(10.0));
        // The vmstat work runs on a kworker: both steps see it.
        assert_eq!(share_of("stat-interval-short", &both), Some(5.0));
        assert_eq!(share_of("workqueue-on-measured", &both), Some(5.0));
        assert_eq!(share_of("idle-haltpoll", &both), None);
        assert_eq!(share_of("rt-throttling-on", &[]), None);
    }

    #[test]
    fn steps_go_largest_share_first_and_the_rest_keep_their_order() {
        // In severity order, as the plan gives them.
        let mut steps: Vec<Step> = [
            "irq-on-measured-cpus",
            "idle-haltpoll",
            "stat-interval-short",
            "rt-throttling-on",
            "pm-qos-unset",
            "timer-migration-on",
            "workqueue-on-measured",
        ]
        .map(step)
        .to_vec();
        let shares = |s: &Step| match s.id.as_str() {
            "irq-on-measured-cpus" => Some(3.0),
            "stat-interval-short" => Some(12.5),
            "rt-throttling-on" => Some(80.0),
            "timer-migration-on" => Some(3.0),
            "workqueue-on-measured" => Some(0.0),
            _ => None,
        };
        order(&mut steps, shares);
        let ids: Vec<&str> = steps.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "rt-throttling-on",
                "stat-interval-short",
                "irq-on-measured-cpus",
                "timer-migration-on",
                "workqueue-on-measured",
                "idle-haltpoll",
                "pm-qos-unset",
            ]
        );
    }
}
