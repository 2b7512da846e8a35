//! The causes of the CPUs' gaps (noise) or late wake-ups (timer), as measured from kernel
//! trace events: what `noise --trace`, `timer --trace` and `report` of their results show,
//! from one function each, so that a saved run reads back as the live one printed it.
//!
//! On a few CPUs (up to `group::EACH_UP_TO`), or with `--per-cpu`, each CPU has its own
//! cause table, its notes, and its largest gaps broken down part by part. On more, one
//! cross-CPU view, whose size does not grow with the CPUs:
//! - one table of causes × CPU groups (the groups of the probe's own tables,
//!   `report::terminal::group`), each cell the cause's share of a CPU's interrupted time, lowest to
//!   highest over the CPUs that saw it; a per-CPU kernel thread is one cause on every
//!   CPU ("kworker/N:*", N its own CPU);
//! - the notes said once for every CPU (gaps coincident across CPUs, lost events, steal);
//! - one list of the largest gaps across CPUs, each with its CPU.

use crate::probes::noise::NoiseEntry;
use crate::probes::timer::TimerEntry;
use crate::report::ResultFile;
use crate::report::terminal::cause_matrix::{CrossCause, by_key};
use crate::report::terminal::cause_names::{cause_key, quota_count_note, shown_causes};
use crate::report::terminal::group::{self, Grouping, Row};
use crate::report::terminal::table::{Layout, Tab, core, cut, wrap};
use crate::stats::causes::{Attribution, CauseKind, CauseRow, GapBreakdown};
use crate::system::counters::CgroupDelta;

/// Causes the cross-CPU table shows (the unaccounted time aside); the result file holds
/// them all, and `--per-cpu` shows each CPU's.
const CAUSES_SHOWN: usize = 12;
/// Rows of the grouping shown as columns of their own in the cross-CPU table.
const GROUP_COLUMNS: usize = 4;
/// The parts of a gap shown, its largest (every one with `--wide`).
const PARTS_SHOWN: usize = 10;

/// One traced CPU: its number and its attribution.
struct Traced<'a> {
    cpu: usize,
    a: &'a Attribution,
}

/// What was attributed, in words.
pub(crate) struct Words {
    /// "gap", "late wake-up".
    pub(crate) gap: &'static str,
    /// Whether the notes set the CPU's steal beside the unaccounted time.
    pub(crate) steal: bool,
    /// What a cause's share is of: "interrupted time", "lateness".
    pub(crate) of: &'static str,
}

pub(crate) const NOISE: Words = Words {
    gap: "gap",
    steal: true,
    of: "interrupted time",
};
pub(crate) const TIMER: Words = Words {
    gap: "late wake-up",
    steal: false,
    of: "lateness",
};

/// The causes of every traced noise entry's gaps, and the `top` largest gaps broken down;
/// `g` groups the entries as the noise tables do.
pub fn noise_attribution(r: &ResultFile, g: &Grouping, top: usize) -> String {
    let entries = r.entries::<NoiseEntry>();
    let traced = entries.map(|e| (e.cpu, e.attribution.as_ref()));
    attribution(r, traced.collect(), g, top, &NOISE)
}

/// The causes of every traced timer entry's late wake-ups, and its `top` latest ones;
/// `g` groups the entries as the timer tables do.
pub fn timer_attribution(r: &ResultFile, g: &Grouping, top: usize) -> String {
    let entries = r.entries::<TimerEntry>();
    let traced = entries.map(|e| (e.cpu, e.attribution.as_ref()));
    attribution(r, traced.collect(), g, top, &TIMER)
}

/// Each CPU's own view when the grouping grouped nothing, else the cross-CPU one; nothing
/// when no entry was traced. `entries` (each CPU and its attribution) is indexed as the
/// grouping's members are.
fn attribution(
    r: &ResultFile,
    entries: Vec<(usize, Option<&Attribution>)>,
    g: &Grouping,
    top: usize,
    w: &Words,
) -> String {
    let traced: Vec<Option<Traced>> = (entries.into_iter())
        .map(|(cpu, a)| a.map(|a| Traced { cpu, a }))
        .collect();
    let traced = &traced[..];
    let mut out = String::new();
    if traced.iter().all(Option::is_none) {
        return out;
    }
    if !g.grouped() {
        for t in traced.iter().flatten() {
            out.push('\n');
            out.push_str(&cause_table(&title(&[t], w), t.a));
            out.push_str(&note_lines(notes(r, &[(t.cpu, t.a)], w.gap, w.steal)));
            out.push_str(&largest(&[t], top, w, false));
        }
        return out;
    }
    let all: Vec<&Traced> = traced.iter().flatten().collect();
    out.push('\n');
    out.push_str(&title(&all, w));
    out.push('\n');
    out.push_str(&cross_table(traced, g, w));
    let cpus: Vec<(usize, &Attribution)> = all.iter().map(|t| (t.cpu, t.a)).collect();
    out.push_str(&note_lines(notes(r, &cpus, w.gap, w.steal)));
    out.push_str(&largest(&all, top, w, true));
    out
}

/// The title over the causes of `cpus`.
fn title(cpus: &[&Traced], w: &Words) -> String {
    let gaps: u64 = cpus.iter().map(|t| t.a.gaps).sum();
    let ns: u64 = cpus.iter().map(|t| t.a.interrupted_ns).sum();
    let ids: Vec<usize> = cpus.iter().map(|t| t.cpu).collect();
    let lost = match w.steal {
        true => "interrupted",
        false => "late",
    };
    match ids.as_slice() {
        [one] => format!(
            "Causes of CPU {one}'s {gaps} {}s ({} µs {lost}), measured from kernel trace events",
            w.gap,
            us(ns)
        ),
        _ => wrap(
            &format!(
                "Causes of the {gaps} {}s on {} ({} {lost} in all), measured from kernel trace \
                 events",
                w.gap,
                group::cpus_words(&ids),
                crate::report::terminal::verdict::duration_words(ns)
            ),
            Layout::current().wrap_width(),
            "  ",
        ),
    }
}

/// µs with one decimal: "12.3".
fn us(ns: u64) -> String {
    format!("{:.1}", ns as f64 / 1e3)
}

/// One CPU's cause table under its title: its largest causes (every one with `--wide`)
/// and the unaccounted time.
fn cause_table(title: &str, a: &Attribution) -> String {
    let mut t = Tab::new(&[
        core("cause").text(),
        core("gaps"),
        core("total (µs)"),
        core("share (%)"),
        core("median (µs)").spare(),
        core("max (µs)"),
        core("period (ms)").spare(),
    ]);
    let shown = shown_causes(&a.causes, |c| c.kind, CAUSES_SHOWN);
    for c in &shown {
        let period = c
            .period_ns
            .map_or(String::new(), |p| format!("{:.2}", p as f64 / 1e6));
        t.row(vec![
            c.cause.clone(),
            c.gaps.to_string(),
            us(c.total_ns),
            format!("{:.1}", c.share_pct),
            us(c.median_ns),
            us(c.max_ns),
            period,
        ]);
        // What ran while a throttle held the measurer off: the few that took most of
        // it; the rest (often dozens of short wake-ups) summed.
        const SHOWN: usize = 5;
        let mut ran = |what: String, ns: u64| {
            let mut row = vec![format!("  ran: {what}"), String::new(), us(ns)];
            row.extend(std::iter::repeat_n(String::new(), 4));
            t.row(row);
        };
        for task in c.tasks.iter().take(SHOWN) {
            ran(task.task.clone(), task.total_ns);
        }
        if c.tasks.len() > SHOWN {
            let rest = &c.tasks[SHOWN..];
            ran(
                format!("{} other tasks", rest.len()),
                rest.iter().map(|t| t.total_ns).sum(),
            );
        }
    }
    // A throttle's name, cut in its cell, names the setting to change: whole below.
    let width = Layout::current().wrap_width();
    let mut whole = String::new();
    for c in shown.iter().filter(|c| !c.tasks.is_empty()) {
        whole.push_str(&wrap(&format!("  {}", c.cause), width, "    "));
        whole.push('\n');
    }
    if a.causes.len() > shown.len() {
        let left = format!(
            "  {} smaller causes left out: --wide shows every one (the result file holds \
             them all).",
            a.causes.len() - shown.len()
        );
        whole.push_str(&wrap(&left, width, "    "));
        whole.push('\n');
    }
    format!("{title}\n{t}\n{whole}")
}

/// Every cause of every traced CPU, by key, the largest total first (indexed as the
/// grouping's members).
fn cross_causes<'a>(traced: &[Option<Traced<'a>>]) -> Vec<CrossCause<'a>> {
    let members: Vec<Option<&Attribution>> =
        traced.iter().map(|t| t.as_ref().map(|t| t.a)).collect();
    by_key(&members, |i, c| {
        let cpu = traced[i].as_ref().map_or(0, |t| t.cpu);
        cause_key(cpu, c.kind, &c.cause)
    })
}

/// The table of causes × CPU groups: how many CPUs saw each cause, its share lowest to
/// highest over them, and, when the CPUs fall in several groups, the same per group
/// (the largest few groups, as the probe's tables group them).
fn cross_table(traced: &[Option<Traced>], g: &Grouping, w: &Words) -> String {
    let causes = cross_causes(traced);
    let n = traced.iter().flatten().count();
    let mut shown_rows: Vec<&Row> = g.rows.iter().collect();
    shown_rows.sort_by_key(|r| std::cmp::Reverse(r.members().len()));
    shown_rows.truncate(GROUP_COLUMNS);
    shown_rows.sort_by_key(|r| r.members()[0]);
    let per_group = g.rows.len() > 1;
    let mut cols = vec![core("cause").text(), core("CPUs"), core("share (%)")];
    let ids = |r: &Row| -> Vec<usize> {
        (r.members().iter())
            .filter_map(|&i| traced[i].as_ref().map(|t| t.cpu))
            .collect()
    };
    if per_group {
        for r in &shown_rows {
            cols.push(core(group::cpus_words(&ids(r)).replace(", ", ",")));
        }
    }
    let mut t = Tab::new(&cols);
    let shown = shown_causes(&causes, |c| c.kind, CAUSES_SHOWN);
    let count = shown.len();
    for c in shown {
        let saw = c.share.iter().flatten().count();
        let mut row = vec![
            c.key.clone(),
            format!("{saw}/{n}"),
            share_range(c.share.iter().flatten().copied()),
        ];
        if per_group {
            for r in &shown_rows {
                let of = r.members().into_iter().filter_map(|i| c.share[i]);
                row.push(share_range(of));
            }
        }
        t.row(row);
    }
    let mut out = format!("{t}\n");
    let width = Layout::current().wrap_width();
    let mut said = vec![format!(
        "Each cell: the cause's share of a CPU's {}, lowest–highest over the CPUs that saw \
         it; N in a thread's name is its own CPU.",
        w.of
    )];
    if causes.len() > count {
        said.push(format!(
            "{} smaller causes left out: --wide shows every one, --per-cpu each CPU's (the \
             result file holds them all).",
            causes.len() - count
        ));
    }
    if per_group && g.rows.len() > shown_rows.len() {
        said.push(format!(
            "{} smaller groups have no column of their own: --per-cpu shows each CPU.",
            g.rows.len() - shown_rows.len()
        ));
    }
    for s in said {
        out.push_str(&wrap(&format!("  {s}"), width, "    "));
        out.push('\n');
    }
    out
}

/// Shares as "85.2–92.0" or "0.07–0.11" (two decimals below 1 %), "-" when none.
fn share_range(v: impl IntoIterator<Item = f64>) -> String {
    group::range(v, |s| match s < 1.0 {
        true => format!("{s:.2}"),
        false => format!("{s:.1}"),
    })
}

/// What the reader must know beside the cause table of `cpus` (one CPU, or every traced
/// CPU, each note said once with its range over them): gaps on several CPUs at once, gaps
/// not attributed, tracing's own cost, lost events, a CFS quota's own count and, with
/// `steal`, the CPUs' steal over the run (/proc/stat), to set beside the unaccounted
/// time. `gap` names what was attributed ("gap", "late wake-up"). The terminal and the
/// page say the same, from here.
pub fn notes(
    r: &ResultFile,
    cpus: &[(usize, &Attribution)],
    gap: &str,
    steal: bool,
) -> Vec<String> {
    let mut out = Vec::new();
    let many = cpus.len() > 1;
    let pct = |part: u64, of: u64| part as f64 * 100.0 / of.max(1) as f64;
    let on = |f: &dyn Fn(&Attribution) -> u64| -> (u64, Vec<usize>) {
        let with: Vec<usize> = (cpus.iter()).filter(|t| f(t.1) > 0).map(|t| t.0).collect();
        (cpus.iter().map(|t| f(t.1)).sum(), with)
    };
    let (coincident, _) = on(&|a| a.coincident_gaps);
    if coincident > 0 {
        let gaps: u64 = cpus.iter().map(|t| t.1.gaps).sum();
        let window = (cpus.iter().map(|t| t.1.coincidence_window_ns))
            .max()
            .unwrap_or(0);
        let share = group::range(
            cpus.iter().map(|t| pct(t.1.coincident_gaps, t.1.gaps)),
            |v| format!("{v:.0}"),
        );
        out.push(format!(
            "{coincident} of the {gaps} {gap}s ({share} %{}) began within {} µs of one on \
             another measured CPU: the signature of an SMI, a hypervisor stall, stop_machine \
             or a TLB shootdown.",
            if many { " on each CPU" } else { "" },
            window / 1000
        ));
    }
    let (unattributed, with) = on(&|a| a.unattributed_gaps);
    if unattributed > 0 {
        out.push(format!(
            "{unattributed} {gap}s on {} were not attributed: their events were lost, the \
             reader fell a queue of {gap}s behind, or they lasted longer than the reader keeps \
             events (2 s).",
            group::cpus_words(&with)
        ));
    }
    let costs: Vec<_> = cpus.iter().filter_map(|t| t.1.trace_cost).collect();
    if !costs.is_empty() {
        let range = |v: &dyn Fn(&crate::stats::causes::TraceCost) -> f64, digits: usize| {
            group::range(costs.iter().map(v), |x| format!("{x:.digits$}"))
        };
        out.push(format!(
            "Tracing's own cost: each event takes up to {} ns (the closest two came), and a \
             {gap} held {} events on average: about {} µs of each traced {gap} is the trace's \
             own, so these {gap}s read longer than untraced ones.",
            range(&|c| c.event_ns as f64, 0),
            range(&|c| c.events_per_gap, 1),
            range(&|c| c.per_gap_ns / 1e3, 1),
        ));
    }
    let (lost, with) = on(&|a| a.events_lost);
    if lost > 0 {
        let read: u64 = cpus.iter().map(|t| t.1.events_read).sum();
        out.push(format!(
            "{lost} of {} trace events were lost, on {}: {gap}s while they were lost may show \
             more unaccounted time.",
            lost + read,
            group::cpus_words(&with)
        ));
    }
    let stolen: Vec<_> = (r.run.counters.iter())
        .flat_map(|c| c.steal.iter())
        .filter(|s| steal && cpus.iter().any(|t| t.0 == s.cpu))
        .collect();
    if !stolen.is_empty() {
        let ids: Vec<usize> = stolen.iter().map(|s| s.cpu).collect();
        out.push(format!(
            "Steal on {} over the run (/proc/stat): {} ms ({} %){}, to set beside the \
             unaccounted time.",
            group::cpus_words(&ids),
            group::range(stolen.iter().map(|s| s.steal_ms as f64), |v| format!(
                "{v:.0}"
            )),
            group::range(stolen.iter().map(|s| s.steal_pct), |v| format!("{v:.2}")),
            if ids.len() > 1 { " each" } else { "" },
        ));
    }
    // A quota's time summed over the CPUs, beside its group's count (once a group).
    let mut rows: Vec<CauseRow> = Vec::new();
    for row in cpus.iter().flat_map(|t| &t.1.causes) {
        match rows.iter_mut().find(|r| r.cause == row.cause) {
            Some(r) => r.total_ns += row.total_ns,
            None => rows.push(row.clone()),
        }
    }
    let counters = r.run.counters.as_ref();
    out.extend(quota_notes(&rows, counters.and_then(|c| c.cgroup.as_ref())));
    out
}

/// For each CFS quota the causes name, the kernel's own count of its group's throttled
/// time over the run (`cpu.stat`, in the run's counters), to set beside it.
fn quota_notes(rows: &[CauseRow], c: Option<&CgroupDelta>) -> Vec<String> {
    let Some(c) = c else {
        return Vec::new();
    };
    (rows.iter())
        .filter(|row| row.kind == CauseKind::Throttling)
        .filter_map(|row| {
            let over = "the run";
            quota_count_note(&row.cause, Some(row.total_ns), &c.cpu_stat, over, false)
        })
        .collect()
}

/// The notes as indented lines, wrapped to the terminal.
fn note_lines(notes: Vec<String>) -> String {
    let width = Layout::current().wrap_width();
    (notes.iter())
        .map(|n| wrap(&format!("  {n}"), width, "    ") + "\n")
        .collect()
}

/// The `n` largest gaps of `cpus`, each with its parts; with `across`, the largest of
/// all of them, each named with its CPU.
fn largest(cpus: &[&Traced], n: usize, w: &Words, across: bool) -> String {
    let mut gaps: Vec<(usize, &GapBreakdown)> = (cpus.iter())
        .flat_map(|t| t.a.top.iter().map(move |g| (t.cpu, g)))
        .collect();
    gaps.sort_by_key(|(_, g)| std::cmp::Reverse(g.duration_ns));
    gaps.truncate(n);
    let Some(first) = gaps.first() else {
        return String::new();
    };
    let mut t = match across {
        true => {
            let ids: Vec<usize> = cpus.iter().map(|t| t.cpu).collect();
            format!(
                "Largest {}s across {}, part by part\n",
                w.gap,
                group::cpus_words(&ids)
            )
        }
        false => format!("Largest {}s on CPU {}, part by part\n", w.gap, first.0),
    };
    for (cpu, g) in gaps {
        let on = if across {
            format!("CPU {cpu}: ")
        } else {
            String::new()
        };
        t.push_str(&gap_lines(&on, g));
    }
    t
}

fn gap_lines(on: &str, g: &GapBreakdown) -> String {
    let mut t = format!(
        "  {on}{} µs at {:.6} s (TSC {})\n",
        us(g.duration_ns),
        g.start_ns as f64 / 1e9,
        g.start_tsc
    );
    let layout = Layout::current();
    let room = (layout.wrap_width()).map_or(usize::MAX, |w| w.saturating_sub(31).max(20));
    // A long gap on a busy CPU holds hundreds of parts: its largest, in time order (all
    // of them with --wide), the rest summed.
    let mut largest: Vec<&crate::stats::causes::Part> = g.parts.iter().collect();
    largest.sort_by_key(|p| std::cmp::Reverse(p.duration_ns));
    if !layout.wide {
        largest.truncate(PARTS_SHOWN);
    }
    let shown = |p: &&crate::stats::causes::Part| {
        p.kind == CauseKind::Unaccounted || largest.iter().any(|q| std::ptr::eq(*q, *p))
    };
    for p in g.parts.iter().filter(|p| shown(p)) {
        let at = match p.kind {
            CauseKind::Unaccounted => "in all".to_string(),
            _ => format!("+{} µs", us(p.offset_ns)),
        };
        t.push_str(&format!(
            "    {at:>12} {:>9} µs  {}\n",
            us(p.duration_ns),
            cut(&p.cause, room)
        ));
    }
    let rest: Vec<_> = g.parts.iter().filter(|p| !shown(p)).collect();
    if !rest.is_empty() {
        let ns = rest.iter().map(|p| p.duration_ns).sum();
        t.push_str(&format!(
            "    {:>12} {:>9} µs  {} smaller parts (--wide shows each)\n",
            "",
            us(ns),
            rest.len()
        ));
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::causes::quota_label;
    use crate::system::cgroup::{CpuStat, Version};
    use crate::system::counters::GroupStatDelta;

    /// Review 2 of issue 29: the notes were written twice, per CPU and across CPUs, and
    /// the copies differed: "a gap held 1.6 on average" (no unit), and "Steal on CPU 1
    /// … (0.23 %) each" for one CPU. One function says both, one CPU as CPU 7.
    #[test]
    fn one_cpus_notes_and_many_cpus_notes_say_the_same_things() {
        let mut r = ResultFile::parse(include_str!("../../../tests/fixtures/all-probes.json"))
            .expect("the frozen fixture");
        let steal = |cpu| crate::system::counters::StealDelta {
            cpu,
            steal_ms: 10,
            total_ms: 4000,
            steal_pct: 0.25,
        };
        r.run.counters = Some(crate::system::counters::CounterDelta {
            cpus: crate::engine::cpu::CpuList::from_cpus(vec![1, 2]),
            elapsed_ns: 4_000_000_000,
            interrupts: Vec::new(),
            softirqs: Vec::new(),
            steal: vec![steal(1), steal(2)],
            kthreads: Vec::new(),
            cgroup: None,
        });
        let a = Attribution {
            trace_cost: Some(crate::stats::causes::TraceCost {
                event_ns: 80,
                events_per_gap: 1.6,
                per_gap_ns: 128.0,
            }),
            events_lost: 5,
            events_read: 95,
            unattributed_gaps: 3,
            ..Attribution::of_causes(Vec::new(), 100, 1_000_000)
        };
        let one = notes(&r, &[(1, &a)], "gap", true).join("\n");
        assert!(one.contains("a gap held 1.6 events on average"), "{one}");
        assert!(one.contains("(0.25 %), to set beside"), "{one}");
        assert!(
            one.contains("Steal on CPU 1 over") && !one.contains("%) each"),
            "{one}"
        );
        assert!(one.contains("3 gaps on CPU 1 were not attributed"), "{one}");
        assert!(
            one.contains("5 of 100 trace events were lost, on CPU 1"),
            "{one}"
        );
        let many = notes(&r, &[(1, &a), (2, &a)], "gap", true).join("\n");
        assert!(many.contains("a gap held 1.6 events on average"), "{many}");
        assert!(
            many.contains("Steal on CPUs 1-2 over") && many.contains("%) each"),
            "{many}"
        );
        assert!(
            many.contains("6 gaps on CPUs 1-2 were not attributed"),
            "{many}"
        );
    }

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
        // The row as the attribution names it (the one label both sides make) is found.
        let named = [row(
            &quota_label("cpu.max 50000 100000", "/jsq/inner"),
            1_000_000,
        )];
        assert_eq!(quota_notes(&named, Some(&c)).len(), 1);
    }
}
