//! How long a step's blocks are: a whole number of its cause's periods, after a lead-in.
//!
//! RT throttling takes its window once every `sched_rt_period_us` (1 s): a block of
//! 1.2 s that starts at the wrong moment holds no window at all, and its baseline reads
//! as if the step had nothing to remove. The probe's thread runs one period first (the
//! lead-in, its warm-up), so the throttle has settled into its period, and then each
//! block measures a whole number of periods: whatever the phase, a periodic loss of W
//! a period is k·W in every block of k periods. Lead-in and block together stay within
//! the cap a real-time spinner may hold a CPU.

use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::under;
use crate::system::audit::FindingId;

/// One step's block timing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timing {
    /// The measured part of each block.
    pub block_ns: u64,
    /// The probe's thread runs this long before each block (its warm-up).
    pub lead_in_ns: u64,
    /// The cause's period, and where it was read.
    pub period_ns: u64,
    pub period_source: String,
    /// Whole periods in a block (0: the period did not fit the cap; not aligned).
    pub periods: u64,
}

impl Timing {
    pub fn block(&self) -> Duration {
        Duration::from_nanos(self.block_ns)
    }

    pub fn lead_in(&self) -> Duration {
        Duration::from_nanos(self.lead_in_ns)
    }

    /// "1000 ms blocks after a 1000 ms lead-in: 1 period of sched_rt_period_us (1000 ms)".
    pub fn describe(&self) -> String {
        let ms = |ns: u64| format!("{:.0} ms", ns as f64 / 1e6);
        let what = if self.periods == 0 {
            format!(
                "not aligned: {} ({}) does not fit the cap",
                self.period_source,
                ms(self.period_ns)
            )
        } else {
            format!(
                "{} period{} of {} ({})",
                self.periods,
                if self.periods == 1 { "" } else { "s" },
                self.period_source,
                ms(self.period_ns)
            )
        };
        format!(
            "{} blocks after a {} lead-in: {what}",
            ms(self.block_ns),
            ms(self.lead_in_ns)
        )
    }
}

/// The timing for a `requested` block of a cause of `period`: the lead-in is the
/// probe's `warmup` or one period, whichever is longer; the block the whole number of
/// periods nearest `requested` (at least one) for which lead-in and block fit `cap`
/// (a real-time probe's limit; none for SCHED_OTHER). A period too long for the cap
/// leaves the requested block, cut to the cap, unaligned.
pub fn align(
    requested: Duration,
    period: Duration,
    source: &str,
    warmup: Duration,
    cap: Option<Duration>,
) -> Timing {
    let p = period.as_nanos().max(1) as u64;
    let lead = warmup.max(period).as_nanos() as u64;
    let cap = cap.map(|c| c.as_nanos() as u64);
    let mut k = ((requested.as_nanos() as u64 + p / 2) / p).max(1);
    if let Some(cap) = cap {
        while k > 1 && lead + k * p > cap {
            k -= 1;
        }
    }
    let timing = |block_ns, lead_in_ns, periods| Timing {
        block_ns,
        lead_in_ns,
        period_ns: p,
        period_source: source.to_string(),
        periods,
    };
    match cap {
        Some(cap) if lead + k * p > cap => {
            let w = warmup.as_nanos() as u64;
            let block = (requested.as_nanos() as u64).min(cap.saturating_sub(w));
            timing(block, w, 0)
        }
        _ => timing(k * p, lead, k),
    }
}

/// The period of the cause a step removes, and where it comes from: RT throttling's
/// `sched_rt_period_us`, the fair server's period, a CFS quota's period (from what the
/// audit saw), else the tick (CONFIG_HZ; 250 Hz where the config is not readable).
pub fn cause_period(id: &str, seen: &str, root: &Path, cpu: usize) -> (Duration, String) {
    let read = |path: &str| -> Option<u64> {
        std::fs::read_to_string(under(root, path))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    if FindingId::RtThrottlingOn == id
        && let Some(us) = read("/proc/sys/kernel/sched_rt_period_us").filter(|us| *us > 0)
    {
        return (Duration::from_micros(us), "sched_rt_period_us".into());
    }
    if FindingId::FairServerOn == id {
        let path = format!("/sys/kernel/debug/sched/fair_server/cpu{cpu}/period");
        let ns = read(&path).filter(|ns| *ns > 0);
        return match ns {
            Some(ns) => (Duration::from_nanos(ns), "the fair server's period".into()),
            None => (
                Duration::from_secs(1),
                "the fair server's period (1 s, its default)".into(),
            ),
        };
    }
    if FindingId::CfsQuota == id
        && let Some(us) = cfs_period_us(seen)
    {
        return (Duration::from_micros(us), "the CFS quota's period".into());
    }
    match crate::system::kernel::KernelConfig::read(root).hz() {
        Some(hz) if hz > 0 => (
            Duration::from_nanos(1_000_000_000 / u64::from(hz)),
            format!("the tick at CONFIG_HZ={hz}"),
        ),
        _ => (
            Duration::from_millis(4),
            "the tick at CONFIG_HZ 250 (assumed: no config)".into(),
        ),
    }
}

/// The period in a CFS quota's setting as the audit words it: `cpu.max 30000 100000`
/// (v2) or `cpu.cfs_period_us 100000` (v1).
fn cfs_period_us(seen: &str) -> Option<u64> {
    let number = |rest: &str| {
        rest.split(|c: char| !c.is_ascii_digit())
            .find(|w| !w.is_empty())?
            .parse()
            .ok()
    };
    if let Some((_, rest)) = seen.split_once("cpu.cfs_period_us") {
        return number(rest);
    }
    let (_, rest) = seen.split_once("cpu.max ")?;
    let mut words = rest.split_whitespace();
    words.next()?;
    number(words.next()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn rt_throttling_blocks_are_one_period_after_a_period_of_lead_in() {
        let cap = Some(2000 * MS);
        // The default 1.2 s block: one period of 1 s, after 1 s of lead-in, 2 s in all.
        let t = align(1200 * MS, 1000 * MS, "sched_rt_period_us", 100 * MS, cap);
        assert_eq!(
            (t.block_ns, t.lead_in_ns, t.periods),
            (1_000_000_000, 1_000_000_000, 1)
        );
        // A 2 s block asked for: still one, since two would not fit the cap with the lead-in.
        let t = align(2000 * MS, 1000 * MS, "sched_rt_period_us", 100 * MS, cap);
        assert_eq!(t.periods, 1);
        // Half a second's period: two periods nearest 1.2 s... 1000 ms, lead-in 500 ms.
        let t = align(1200 * MS, 500 * MS, "sched_rt_period_us", 100 * MS, cap);
        assert_eq!(
            (t.block_ns, t.lead_in_ns, t.periods),
            (1_000_000_000, 500_000_000, 2)
        );
        assert!(t.block_ns + t.lead_in_ns <= 2_000_000_000);
        // A period longer than half the cap: not aligned, the block cut to fit.
        let t = align(1200 * MS, 1500 * MS, "sched_rt_period_us", 100 * MS, cap);
        assert_eq!(t.periods, 0);
        assert!(t.block_ns + t.lead_in_ns <= 2_000_000_000);
        assert!(t.describe().contains("not aligned"), "{}", t.describe());
    }

    #[test]
    fn a_tick_leaves_the_default_block_and_warmup_alone() {
        let t = align(1200 * MS, 4 * MS, "the tick", 100 * MS, Some(2000 * MS));
        assert_eq!(
            (t.block_ns, t.lead_in_ns, t.periods),
            (1_200_000_000, 100_000_000, 300)
        );
        // SCHED_OTHER has no cap: a CFS period of 150 ms gives 8 of them.
        let t = align(1200 * MS, 150 * MS, "cfs", 100 * MS, None);
        assert_eq!(
            (t.block_ns, t.lead_in_ns, t.periods),
            (1_200_000_000, 150_000_000, 8)
        );
    }

    /// Why a whole number of periods: a window of 50 ms every 1 s, at any phase, costs a
    /// block of one period exactly 50 ms; a block of 1.2 s from the same phases costs
    /// anything from 50 to 100 ms (and without the lead-in, a first period that does not
    /// throttle, 0).
    #[test]
    fn a_periodic_window_costs_every_aligned_block_the_same() {
        let lost = |start: u64, len: u64| -> u64 {
            // Windows [k·1000 + 950, (k+1)·1000) ms.
            (start..start + len).filter(|t| t % 1000 >= 950).count() as u64
        };
        let aligned: Vec<u64> = (0..1000).step_by(37).map(|s| lost(s, 1000)).collect();
        assert!(aligned.iter().all(|l| *l == 50), "{aligned:?}");
        let short: Vec<u64> = (0..1000).step_by(37).map(|s| lost(s, 1200)).collect();
        assert!(short.contains(&50) && short.contains(&100), "{short:?}");
    }

    #[test]
    fn the_cause_period_is_read_where_the_kernel_keeps_it() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let sys = root.join("proc/sys/kernel");
        std::fs::create_dir_all(&sys).unwrap();
        std::fs::write(sys.join("sched_rt_period_us"), "1000000\n").unwrap();
        let (p, src) = cause_period("rt-throttling-on", "", root, 1);
        assert_eq!(
            (p, src.as_str()),
            (Duration::from_secs(1), "sched_rt_period_us")
        );
        let (p, _) = cause_period("cfs-quota", "cpu.max 30000 150000 on /x", root, 1);
        assert_eq!(p, 150 * MS);
        assert_eq!(
            cfs_period_us("cpu.cfs_quota_us 30000, cpu.cfs_period_us 200000"),
            Some(200_000)
        );
        let (p, src) = cause_period("timer-migration-on", "", root, 1);
        assert_eq!(p, 4 * MS);
        assert!(src.starts_with("the tick"), "{src}");
    }
}
