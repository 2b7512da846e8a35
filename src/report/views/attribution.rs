//! The causes of each CPU's gaps, as measured from kernel trace events: a cause table
//! per CPU, then the largest gaps broken down, one line per part. Plain text that fits
//! 100 columns; causes too long for their column are cut with "…".

use crate::probes::noise::NoiseEntry;
use crate::report::ResultFile;
use crate::stats::causes::{Attribution, CauseKind, CauseRow, GapBreakdown};
use crate::system::counters::{CgroupDelta, GroupStatDelta};

/// Every traced noise entry's causes, and its `top` largest gaps broken down.
pub fn noise_attribution(r: &ResultFile, top: usize) -> String {
    let mut out = String::new();
    for e in r.entries::<NoiseEntry>() {
        if let Some(a) = &e.attribution {
            out.push('\n');
            out.push_str(&cause_table(e.cpu, a));
            out.push_str(&note_lines(notes(r, e.cpu, a, "gap", true)));
            out.push_str(&top_gaps(e.cpu, a, top));
        }
    }
    out
}

/// Every traced timer entry's causes of lateness, and its `top` latest wake-ups.
pub fn timer_attribution(r: &ResultFile, top: usize) -> String {
    let mut out = String::new();
    for e in r.entries::<crate::probes::timer::TimerEntry>() {
        if let Some(a) = &e.attribution {
            let title = format!(
                "What made CPU {}'s {} latest wake-ups late ({} µs in all), measured from \
                 kernel trace events",
                e.cpu,
                a.gaps,
                us(a.interrupted_ns)
            );
            out.push('\n');
            out.push_str(&cause_table_titled(&title, a));
            out.push_str(&note_lines(notes(r, e.cpu, a, "late wake-up", false)));
            out.push_str(&top_gaps(e.cpu, a, top));
        }
    }
    out
}

/// µs with one decimal: "12.3".
fn us(ns: u64) -> String {
    format!("{:.1}", ns as f64 / 1e3)
}

fn cut(s: &str, n: usize) -> String {
    match s.chars().count() > n {
        true => format!("{}…", s.chars().take(n - 1).collect::<String>()),
        false => s.to_string(),
    }
}

/// "Causes of CPU 1's 1234 gaps (12.3 ms), measured from kernel trace events".
fn cause_table(cpu: usize, a: &Attribution) -> String {
    let title = format!(
        "Causes of CPU {cpu}'s {} gaps ({} µs interrupted), measured from kernel trace events",
        a.gaps,
        us(a.interrupted_ns)
    );
    cause_table_titled(&title, a)
}

/// The table under its title.
fn cause_table_titled(title: &str, a: &Attribution) -> String {
    let mut t = format!("{title}\n");
    t.push_str(&format!(
        "{:<46} {:>6} {:>10} {:>6} {:>9} {:>9} {:>8}\n",
        "cause", "gaps", "total µs", "share", "median µs", "max µs", "period"
    ));
    for c in &a.causes {
        let period = c
            .period_ns
            .map_or(String::new(), |p| format!("{:.2} ms", p as f64 / 1e6));
        t.push_str(&format!(
            "{:<46} {:>6} {:>10} {:>5.1}% {:>9} {:>9} {:>8}\n",
            cut(&c.cause, 46),
            c.gaps,
            us(c.total_ns),
            c.share_pct,
            us(c.median_ns),
            us(c.max_ns),
            period
        ));
        // A throttle's row: its full name when cut (it names the setting to change),
        // then what ran while it held the measurer off, with its time.
        if !c.tasks.is_empty() && c.cause.chars().count() > 46 {
            t.push_str(&format!("  {}\n", c.cause));
        }
        // The few that took most of it; the rest (often dozens of short wake-ups) summed.
        const SHOWN: usize = 5;
        let ran = |what: &str, ns: u64| format!("  {:<51} {:>10}\n", cut(what, 51), us(ns));
        for task in c.tasks.iter().take(SHOWN) {
            t.push_str(&ran(&format!("ran: {}", task.task), task.total_ns));
        }
        if c.tasks.len() > SHOWN {
            let rest = &c.tasks[SHOWN..];
            let ns = rest.iter().map(|t| t.total_ns).sum();
            t.push_str(&ran(&format!("ran: {} other tasks", rest.len()), ns));
        }
    }
    t
}

/// What the reader must know beside the cause table: gaps on several CPUs at once, gaps
/// the log did not keep, lost events, and, with `steal`, the CPU's steal over the run
/// (/proc/stat), to set beside the unaccounted time. `gap` names what was attributed
/// ("gap", "late wake-up"). The terminal and the page say the same.
pub fn notes(r: &ResultFile, cpu: usize, a: &Attribution, gap: &str, steal: bool) -> Vec<String> {
    let mut out = Vec::new();
    if a.coincident_gaps > 0 {
        out.push(format!(
            "{} {gap}s began within {} µs of one on another measured CPU: the signature of an \
             SMI, a hypervisor stall, stop_machine or a TLB shootdown.",
            a.coincident_gaps,
            a.coincidence_window_ns / 1000
        ));
    }
    if a.unattributed_gaps > 0 {
        out.push(format!(
            "{} {gap}s were not attributed (the reader fell behind, or the log kept no more).",
            a.unattributed_gaps
        ));
    }
    if let Some(c) = &a.trace_cost {
        out.push(format!(
            "Tracing's own cost: each event takes up to {} ns (the closest two came), and \
             a {gap} held {:.1} on average: about {:.1} µs of each traced {gap} is the \
             trace's own, so these {gap}s read longer than untraced ones.",
            c.event_ns,
            c.events_per_gap,
            c.per_gap_ns / 1e3
        ));
    }
    if a.events_lost > 0 {
        out.push(format!(
            "{} of {} trace events were lost: {gap}s while they were lost may show more \
             unaccounted time.",
            a.events_lost,
            a.events_lost + a.events_read
        ));
    }
    let counters = r.run.counters.as_ref();
    out.extend(quota_notes(
        &a.causes,
        counters.and_then(|c| c.cgroup.as_ref()),
    ));
    let stolen = (r.run.counters.as_ref()).and_then(|c| c.steal.iter().find(|s| s.cpu == cpu));
    if let Some(s) = stolen.filter(|_| steal) {
        out.push(format!(
            "Steal on CPU {cpu} over the run (/proc/stat): {} ms ({:.2} %), to set beside \
             the unaccounted time.",
            s.steal_ms, s.steal_pct
        ));
    }
    out
}

/// For each CFS quota the causes name, the kernel's own count of its group's throttled
/// time over the run (`cpu.stat`, in the run's counters), to set beside it.
fn quota_notes(rows: &[CauseRow], c: Option<&CgroupDelta>) -> Vec<String> {
    let Some(c) = c else {
        return Vec::new();
    };
    let ms = |ns: u64| ns as f64 / 1e6;
    (rows.iter())
        .filter(|row| row.kind == CauseKind::Throttling)
        .filter_map(|row| {
            let named = |g: &&GroupStatDelta| {
                (g.quota.as_ref())
                    .is_some_and(|q| row.cause == format!("CFS quota: {q} of {}", g.group))
            };
            let g = c.cpu_stat.iter().find(named)?;
            Some(format!(
                "cpu.stat: throttled {:.1} ms over the run in {} (all its CPUs' run queues), \
                 beside the {:.1} ms named its quota here.",
                ms(g.stat.throttled_ns),
                g.group,
                ms(row.total_ns)
            ))
        })
        .collect()
}

/// The notes as indented lines, wrapped to the terminal.
fn note_lines(notes: Vec<String>) -> String {
    let width = crate::report::table::Layout::current().wrap_width();
    (notes.iter())
        .map(|n| crate::report::table::wrap(&format!("  {n}"), width, "    ") + "\n")
        .collect()
}

/// The `n` largest gaps, each with its parts.
fn top_gaps(cpu: usize, a: &Attribution, n: usize) -> String {
    let mut t = String::new();
    for (i, g) in a.top.iter().take(n).enumerate() {
        if i == 0 {
            t.push_str(&format!("Largest gaps on CPU {cpu}, part by part\n"));
        }
        t.push_str(&gap_lines(g));
    }
    t
}

fn gap_lines(g: &GapBreakdown) -> String {
    let mut t = format!(
        "  {} µs at {:.6} s (TSC {})\n",
        us(g.duration_ns),
        g.start_ns as f64 / 1e9,
        g.start_tsc
    );
    for p in &g.parts {
        let at = match p.kind {
            CauseKind::Unaccounted => "in all".to_string(),
            _ => format!("+{} µs", us(p.offset_ns)),
        };
        t.push_str(&format!(
            "    {at:>12} {:>9} µs  {}\n",
            us(p.duration_ns),
            cut(&p.cause, 70)
        ));
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::system::cgroup::{CpuStat, Version};

    /// Issue 30: a quota row is set beside its group's cpu.stat over the run; a group
    /// the causes do not name, or a row of another throttle, gets no note.
    #[test]
    fn issue30_a_named_quota_is_set_beside_its_groups_cpu_stat() {
        let row = |cause: &str, ns| CauseRow::made_up(CauseKind::Throttling, cause, 1, 1, ns);
        let group = |path: &str, quota: Option<&str>, throttled_ns: u64| GroupStatDelta {
            group: path.into(),
            version: Version::V2,
            quota: quota.map(str::to_string),
            cfs: None,
            stat: CpuStat {
                throttled_ns,
                ..CpuStat::default()
            },
        };
        let rows = [
            row("CFS quota: cpu.max 30000 100000 of /jsq", 1_103_600_000),
            row("real-time throttling", 5_000_000),
        ];
        let c = CgroupDelta {
            cpu_stat: vec![
                group("/", None, 0),
                group("/jsq", Some("cpu.max 30000 100000"), 1_115_500_000),
                group("/jsq/inner", Some("cpu.max 50000 100000"), 10_000_000),
            ],
            pressure: Vec::new(),
        };
        assert_eq!(
            quota_notes(&rows, Some(&c)),
            vec![
                "cpu.stat: throttled 1115.5 ms over the run in /jsq (all its CPUs' run \
                 queues), beside the 1103.6 ms named its quota here."
                    .to_string()
            ]
        );
        assert!(quota_notes(&rows, None).is_empty());
    }
}
