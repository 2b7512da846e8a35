//! A thread's scheduling as `/proc/PID/stat` gives it: read by the audit (which kernel
//! threads outrank the measuring ones) and by the timerlat engine (its threads' policy).

/// A kernel thread's real-time policy and priority from `/proc/PID/stat`: field 18 is the
/// kernel's priority as ps shows it, −1 − rt_priority for SCHED_FIFO and SCHED_RR (−51 for
/// FIFO 50), −101 for SCHED_DEADLINE; field 19 the nice value (0 for them); field 41 the
/// policy (1 FIFO, 2 RR), where the kernel writes it.
pub fn rt_priority(stat: &str) -> Option<(&'static str, u8)> {
    let (_, rest) = stat.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // Field 3 is the first after the name.
    let field = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<i64>().ok());
    let (prio, _nice) = (field(18)?, field(19)?);
    let policy = match field(41) {
        Some(1) => "FIFO",
        Some(2) => "RR",
        _ => "FIFO/RR",
    };
    (-100..=-2)
        .contains(&prio)
        .then(|| (policy, (-prio - 1) as u8))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 48: /proc/PID/stat's fields 18 and 19 as Debian's 6.1 PREEMPT_RT kernel
    /// wrote them for its IRQ, timer and RCU threads, and for a SCHED_OTHER one.
    #[test]
    fn issue48_a_threads_real_time_priority_is_read_from_stat() {
        let stat = |comm: &str, prio: i64, nice: i64, policy: u32| {
            format!(
                "102 ({comm}) S 2 0 0 0 -1 2129984 0 0 0 0 0 3 0 0 {prio} {nice} 1 0 44 0 0 \
                 18446744073709551615 0 0 0 0 0 0 0 2147483647 0 0 0 0 17 1 50 {policy} 0 0 0"
            )
        };
        assert_eq!(
            rt_priority(&stat("irq/4-ttyS0", -51, 0, 1)),
            Some(("FIFO", 50))
        );
        assert_eq!(rt_priority(&stat("ktimers/1", -2, 0, 1)), Some(("FIFO", 1)));
        assert_eq!(rt_priority(&stat("rr", -100, 0, 2)), Some(("RR", 99)));
        assert_eq!(rt_priority(&stat("ksoftirqd/1", 20, 0, 0)), None);
        assert_eq!(rt_priority(&stat("deadline", -101, 0, 6)), None);
        // A name with spaces and parentheses; a stat cut before its policy.
        assert_eq!(rt_priority(&stat("a (b) c", -11, 0, 1)), Some(("FIFO", 10)));
        assert_eq!(
            rt_priority("7 (x) S 2 0 0 0 -1 0 0 0 0 0 0 0 0 0 -11 0 1"),
            Some(("FIFO/RR", 10))
        );
    }
}
