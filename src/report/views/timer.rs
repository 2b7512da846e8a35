//! The `timer` view: per thread the wake-up latency and the same corrected for
//! coordinated omission, its series, the terminal tables, cyclictest's 1-µs histogram
//! layout, the spikes, and the live line.

use crate::probes::timer::{LiveSnapshot, TimerEntry};
use crate::report::ResultFile;
use crate::report::result::dist::SeriesView;
use crate::report::result::dist::{Dist, Entry};
use crate::report::terminal::cause_names::cause_key;
use crate::report::terminal::group::{self, Cell, Grouping, Member, num, text};
use crate::report::terminal::table::{
    Layout, Tab, core, distribution, distribution_cols, policy_cell, wide, wrap,
};
use crate::report::views::{EntryView, Kind, KindView};

impl EntryView for TimerEntry {
    fn kind(&self) -> Kind {
        Kind::Timer
    }

    fn dists<'a>(&'a self, out: &mut Vec<Dist<'a>>) {
        let en = Entry::new("timer", format!("cpu{}", self.cpu), self.cpu.to_string());
        let c = &self.corrected;
        out.push(Dist {
            series: self.series(),
            ..en.dist("latency", &self.summary, &self.histogram)
        });
        out.push(en.dist("latency-corrected", &c.summary, &c.histogram));
    }

    fn series(&self) -> Option<SeriesView<'_>> {
        Some(SeriesView {
            probe: "timer",
            cpu: self.cpu,
            series: &self.series,
            largest: &self.largest,
            gap: "largest latency",
            worst: "latest wake-up",
            time_lost: false,
        })
    }
}

impl KindView for TimerEntry {
    fn tables(r: &ResultFile) -> String {
        timer_text(r)
    }
}

/// What `timer` prints and `report` shows of its entries: the tables, then, for a traced
/// run, the causes of lateness (`attribution`), from one function for both.
pub fn timer_text(r: &ResultFile) -> String {
    format!(
        "{}{}",
        timer_tables(r),
        super::attribution::timer_attribution(r, &grouping(&timer_entries(r)), GAPS_SHOWN)
    )
}

fn timer_entries(r: &ResultFile) -> Vec<&TimerEntry> {
    r.entries().collect()
}

/// How many latest wake-ups the causes' view breaks down, part by part.
pub const GAPS_SHOWN: usize = 5;

/// The figure timer threads are grouped by: their p99 wake-up latency.
pub const TIMER_KEYS: [group::Key; 1] = [group::latency("p99")];

/// Each timer entry as a member to group: its largest traced cause of lateness (across
/// CPUs, `cause_names::cause_key`) and its p99 (ns).
pub fn timer_members(entries: &[&TimerEntry]) -> Vec<Member> {
    (entries.iter())
        .map(|e| Member {
            cause: (e.attribution.as_ref())
                .and_then(|a| a.causes.first())
                .map(|c| cause_key(e.cpu, c.kind, &c.cause)),
            figures: vec![e.summary.p99_ns.unwrap_or(0) as f64],
        })
        .collect()
}

/// How the timer threads group in the current layout: each on its own with `--per-cpu`.
pub fn grouping(entries: &[&TimerEntry]) -> Grouping {
    group::in_layout(&timer_members(entries), &TIMER_KEYS)
}

/// The timer tables: wake-up latency per thread, then the same corrected for
/// coordinated omission; threads that agree as one group unless `--per-cpu`.
pub fn timer_tables(r: &ResultFile) -> String {
    let entries = timer_entries(r);
    tables(&entries, &grouping(&entries))
}

/// A summary's distribution cells, in `distribution_cols`' order, as figures to group.
fn distribution_cells(
    s: &crate::stats::Summary,
    u: crate::report::terminal::table::Unit,
) -> Vec<Cell> {
    let texts = distribution(s, u);
    let values = [
        s.min_ns.map(|v| v as f64),
        s.p50_ns.map(|v| v as f64),
        s.p90_ns.map(|v| v as f64),
        s.p99_ns.map(|v| v as f64),
        s.p999_ns.map(|v| v as f64),
        s.p9999_ns.map(|v| v as f64),
        s.max_ns.map(|v| v as f64),
        s.mean_ns,
        s.mad_ns.map(|v| v as f64),
    ];
    (texts.into_iter().zip(values))
        .map(|(t, v)| match v {
            Some(v) => num(v, t),
            None => text(t),
        })
        .collect()
}

fn tables(entries: &[&TimerEntry], g: &Grouping) -> String {
    let u = Kind::Timer.unit();
    let ids: Vec<usize> = entries.iter().map(|e| e.cpu).collect();
    let head = vec![
        wide("policy").text(),
        wide(u.header("interval")),
        core("wake-ups"),
        core("overruns"),
    ];
    let cols = [head, distribution_cols(u)].concat();
    let mut t = Tab::new(&group::columns(g, core("CPU"), cols));
    let cells: Vec<Vec<Cell>> = (entries.iter())
        .map(|e| {
            let mut row = vec![
                text(policy_cell(e.thread.policy, e.thread.priority)),
                num(
                    e.config.interval_ns as f64,
                    u.cell(Some(e.config.interval_ns)),
                ),
                num(e.wakeups as f64, e.wakeups.to_string()),
                num(e.overruns as f64, e.overruns.to_string()),
            ];
            row.extend(distribution_cells(&e.summary, u));
            row
        })
        .collect();
    for row in group::table_rows(g, &ids, &cells) {
        t.row(row);
    }
    let same = entries.iter().all(|e| e.corrected.summary == e.summary);
    let corrected = if same {
        let same = "Corrected for coordinated omission: the same (no wake-up came a whole \
                    interval late, so none was hidden)";
        format!("{}\n", wrap(same, Layout::current().wrap_width(), "  "))
    } else {
        let cols = [vec![core("count")], distribution_cols(u)].concat();
        let mut c = Tab::new(&group::columns(g, core("CPU"), cols));
        let cells: Vec<Vec<Cell>> = (entries.iter())
            .map(|e| {
                let s = &e.corrected.summary;
                let mut row = vec![num(s.count as f64, s.count.to_string())];
                row.extend(distribution_cells(s, u));
                row
            })
            .collect();
        for row in group::table_rows(g, &ids, &cells) {
            c.row(row);
        }
        let what = wrap(
            "Corrected for coordinated omission: one wake-up added back for each deadline a \
             stall skipped, with the latency it would have had (HdrHistogram's \
             expected-interval correction)",
            Layout::current().wrap_width(),
            "",
        );
        format!("{what}\n{c}\n")
    };
    let legend = group::legend_block(&group::legend(
        g,
        &TIMER_KEYS,
        &ids,
        &|i| format!("p99 {} µs", u.cell(entries[i].summary.p99_ns)),
        "--per-cpu",
    ));
    format!("Wake-up latency\n{t}\n{legend}\n{corrected}")
}

/// cyclictest's histogram layout: a row per non-empty 1-µs bucket, a column per thread,
/// comment lines starting with '#', so gnuplot plots it as it is.
pub fn timer_buckets(r: &ResultFile) -> String {
    let entries: Vec<&TimerEntry> = timer_entries(r)
        .into_iter()
        .filter(|e| e.histogram_1us.is_some())
        .collect();
    let Some(n) = entries
        .first()
        .and_then(|e| e.histogram_1us.as_ref())
        .map(|h| h.buckets)
    else {
        return String::new();
    };
    let mut rows = vec![vec![0u64; entries.len()]; n];
    for (col, e) in entries.iter().enumerate() {
        for [bucket, count] in &e.histogram_1us.as_ref().expect("filtered").counts {
            if let Some(row) = rows.get_mut(*bucket as usize) {
                row[col] = *count;
            }
        }
    }
    let cpus: Vec<String> = entries.iter().map(|e| format!("CPU {}", e.cpu)).collect();
    let mut out = format!(
        "# Histogram: wake-up latency in 1-µs buckets; columns: bucket (µs), then \
         wake-ups on {}\n",
        cpus.join(", ")
    );
    for (bucket, row) in rows.iter().enumerate() {
        if row.iter().any(|&c| c > 0) {
            let cells: Vec<String> = row.iter().map(|c| format!("{c:06}")).collect();
            out.push_str(&format!("{bucket:06} {}\n", cells.join(" ")));
        }
    }
    let col = |f: &dyn Fn(&TimerEntry) -> String| -> String {
        entries.iter().map(|e| f(e)).collect::<Vec<_>>().join(" ")
    };
    out.push_str(&format!(
        "# Total: {}\n",
        col(&|e| format!("{:09}", e.wakeups))
    ));
    out.push_str(&format!(
        "# Overflows (≥ {n} µs): {}\n",
        col(&|e| format!("{:09}", e.histogram_1us.as_ref().map_or(0, |h| h.overflows)))
    ));
    out
}

/// How many spikes per thread the text shows; the result file holds them all.
const SPIKES_SHOWN: usize = 20;

/// The wake-ups above `--spikes`: when (from the start of the run) and how late, the
/// first `SPIKES_SHOWN` of them. Per thread on up to `group::EACH_UP_TO` threads, or with
/// `--per-cpu`; else one list across the threads in time order, each with its CPU, and
/// how many each kept.
pub fn timer_spikes(r: &ResultFile) -> String {
    let logged: Vec<(&TimerEntry, &crate::probes::record::EventLogRecord, u64)> = timer_entries(r)
        .into_iter()
        .filter_map(|e| Some((e, e.spikes.as_ref()?, e.config.spikes_above_ns?)))
        .collect();
    let each = group::each_alone(logged.len());
    let mut out = String::new();
    let sets: Vec<Vec<_>> = match each {
        true => logged.iter().map(|l| vec![*l]).collect(),
        false => vec![logged.clone()],
    };
    for set in sets.iter().filter(|s| !s.is_empty()) {
        let limit = set[0].2;
        let kept: usize = set.iter().map(|(_, log, _)| log.duration_ns.len()).sum();
        let dropped: u64 = set.iter().map(|(_, log, _)| log.dropped).sum();
        let cpus: Vec<usize> = set.iter().map(|(e, ..)| e.cpu).collect();
        let on = match each {
            true => format!("CPU {}", cpus[0]),
            false => group::cpus_words(&cpus),
        };
        out.push_str(&format!(
            "Spikes above {} µs on {on}: {kept} kept, {dropped} dropped\n",
            limit as f64 / 1e3,
        ));
        if !each {
            out.push_str(&format!(
                "  {} kept on each CPU; the first {SPIKES_SHOWN} across them:\n",
                group::range(
                    set.iter().map(|(_, log, _)| log.duration_ns.len() as f64),
                    |n| format!("{n:.0}")
                )
            ));
        }
        let mut spikes: Vec<(u64, u64, usize)> = (set.iter())
            .flat_map(|(e, log, _)| {
                (log.start_ns.iter().zip(&log.duration_ns))
                    .map(move |(at, late)| (*at, *late, e.cpu))
            })
            .collect();
        spikes.sort_by_key(|s| s.0);
        for (at, late, cpu) in spikes.iter().take(SPIKES_SHOWN) {
            let who = if each {
                String::new()
            } else {
                format!("CPU {cpu:>3}  ")
            };
            out.push_str(&format!(
                "  {who}at {:>12.6} s  {:>10.2} µs late\n",
                *at as f64 / 1e9,
                *late as f64 / 1e3
            ));
        }
        if kept > SPIKES_SHOWN {
            out.push_str(&format!(
                "  … {} more in the result file (-o FILE or --json)\n",
                kept - SPIKES_SHOWN
            ));
        }
    }
    out
}

/// One thread's live line, as cyclictest draws it, with units.
pub fn live_line(s: &LiveSnapshot) -> String {
    let v = |ns: Option<u64>| ns.map_or("-".to_string(), |n| format!("{:.1}", n as f64 / 1e3));
    let avg = s
        .avg_ns
        .map_or("-".to_string(), |a| format!("{:.1}", a / 1e3));
    let overruns = match s.overruns {
        0 => String::new(),
        n => format!("  overruns {n}"),
    };
    format!(
        "CPU {:>3}  {:<8}  I:{:>7} µs  C:{:>9}  Min:{:>8} µs  Act:{:>8} µs  Avg:{:>8} µs  \
         Max:{:>9} µs{overruns}",
        s.cpu,
        s.sched
            .map_or("-".into(), |p| policy_cell(p.policy, p.priority)),
        s.interval_ns as f64 / 1e3,
        s.count,
        v(s.min_ns),
        v(s.last_ns),
        avg,
        v(s.max_ns),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::sched::{Policy, SchedRequest};

    #[test]
    fn live_line_carries_units_and_says_dash_before_the_first_wakeup() {
        let fifo = SchedRequest {
            policy: Policy::Fifo,
            priority: 90,
        };
        let idle = LiveSnapshot {
            cpu: 1,
            interval_ns: 200_000,
            sched: Some(fifo),
            ..LiveSnapshot::default()
        };
        let line = live_line(&idle);
        assert!(
            line.contains("fifo 90") && line.contains("I:    200 µs"),
            "{line}"
        );
        assert!(line.contains("Min:       - µs"), "{line}");
        let busy = LiveSnapshot {
            cpu: 1,
            index: 0,
            interval_ns: 200_000,
            count: 12,
            min_ns: Some(8_100),
            last_ns: Some(12_340),
            avg_ns: Some(13_000.0),
            max_ns: Some(353_200),
            overruns: 2,
            sched: Some(fifo),
        };
        let line = live_line(&busy);
        for part in [
            "C:       12",
            "Min:     8.1 µs",
            "Act:    12.3 µs",
            "Max:    353.2 µs",
            "overruns 2",
        ] {
            assert!(line.contains(part), "{part:?} missing from {line}");
        }
    }
}
