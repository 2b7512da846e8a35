//! The page of saved results (`report --format html`, and `--html` on a measuring
//! command): per file, the verdict, a section per per-CPU probe kind (`page_cpus`: every
//! CPU at once, then each CPU folded), tune's staircase, a watched application, the
//! measurement tables, the other distributions' plots, then the run, the host and the
//! audit. Built as an `html::Page`, which `html::render` writes.

use std::path::Path;

use crate::report::export::{self, Dist, Loaded};
use crate::report::page::html::{Figure, Page, Section, Table};
use crate::report::page::page_cpus::{self, Drawer, GapKind};
use crate::report::result::dist::UNCONFIRMED_NOTE;
use crate::report::terminal::verdict::duration_words;
use crate::report::{ResultFile, export::plot};
use crate::system::HostInfo;
use crate::system::audit::{AuditReport, Severity};

/// The page of one or more results: per file, in the order a reader needs them (see the
/// module's doc). The page still renders when plots cannot be drawn: it says why.
pub fn result_page(results: &[Loaded]) -> anyhow::Result<Page> {
    let mut page = Page {
        title: "jitterscope report".into(),
        subtitle: Some(subtitle(results)),
        ..Page::default()
    };
    for loaded in results {
        let (path, r) = loaded;
        let file = path.display().to_string();
        for d in &r.run.degraded {
            page.warnings
                .push(format!("{file}: degraded: {}", d.message));
        }
        let named = |what: &str| match results.len() {
            1 => what.to_string(),
            _ => format!("{file}: {what}"),
        };
        if let Some(v) = stored_or_main_verdict(r) {
            page.sections.push(verdict_section(&named("Verdict"), &v));
        }
        // The distributions plotted are chosen first, so that only theirs are decoded.
        let (dists, unknown) = export::distributions(r);
        let (shown, plots_note) = plotted(&dists);
        let mut drawer = Drawer::default();
        let plots = match plot::plots_of(r, &shown) {
            Ok(p) => p,
            Err(e) => {
                page.warnings
                    .push(format!("{file}: the plots are left out: {e}"));
                Vec::new()
            }
        };
        page.sections
            .extend(page_cpus::kind_sections(r, &plots, &mut drawer, &named));
        page.sections.extend(osnoise_section(&named("osnoise"), r));
        if let Some(t) = &r.tune {
            page.sections
                .push(tune_section(&named("tune: staircase"), t));
        }
        if let Some(w) = &r.watch {
            page.sections
                .extend(watch_sections(r, w, &named, &mut page.warnings, &file));
        }
        let m = measurements(&named("Measurements"), r, &dists, unknown);
        // A heading stands only over content (a tune result has no summary tables).
        if !(m.text.is_empty() && m.tables.is_empty()) {
            page.sections.push(m);
        }
        // The other kinds' plots (pingpong, c2c …): the per-CPU kinds' are in their
        // sections.
        let distributions: Vec<Figure> = (plots.iter())
            .filter(|p| {
                !p.subject
                    .as_ref()
                    .is_some_and(|s| page_cpus::per_cpu(s.probe))
            })
            .filter_map(|p| drawer.figure(p, None))
            .collect();
        if let Some(why) = drawer.warning() {
            page.warnings.push(format!("{file}: {why}"));
        }
        if !distributions.is_empty() {
            page.sections.push(Section {
                heading: named("Distributions"),
                text: vec![
                    "Percentiles on log axes, HdrHistogram's style: the x axis runs to the \
                     nines the sample count resolves, the y axis spans the whole range, so \
                     that p50 and p99 stand apart under a long tail."
                        .into(),
                ]
                .into_iter()
                .chain(plots_note)
                .collect(),
                figures: distributions,
                ..Section::default()
            });
        }
        page.sections
            .push(host_section(&named("Run, host and audit"), path, r));
    }
    Ok(page)
}

/// `tune`'s staircase: the chart of p99 and max after each kept step, then the same
/// cells as the terminal, CSV and Markdown (`staircase_rows`), so that the figures agree,
/// and every step's decision (`step_rows`), the ones undone included.
/// The osnoise engine's figures (rtla's columns, then each kind's time), when the result
/// holds them.
fn osnoise_section(heading: &str, r: &ResultFile) -> Option<Section> {
    use crate::report::views::osnoise::{kinds_rows, settings_line, summary_rows};
    let entries: Vec<&crate::trace::tracer::osnoise::OsnoiseEntry> = r.entries().collect();
    let first = entries.first()?;
    let table = |caption: &str, (headers, rows): (Vec<&str>, Vec<Vec<String>>)| Table {
        caption: caption.into(),
        headers: headers
            .iter()
            .map(|h| h.trim_start_matches('*').to_string())
            .collect(),
        rows,
        note: None,
    };
    Some(Section {
        heading: heading.into(),
        text: vec![settings_line(first)],
        tables: vec![
            table(
                "osnoise: per CPU, as rtla osnoise top",
                summary_rows(&entries),
            ),
            table(
                "osnoise: interference by kind, from its events",
                kinds_rows(&entries),
            ),
        ],
        ..Section::default()
    })
}

fn tune_section(heading: &str, t: &crate::system::tune::record::TuneEntry) -> Section {
    use crate::report::views::tune::{staircase_rows, step_rows};
    let (header, rows) = staircase_rows(&t.staircase);
    let (step_header, steps) = step_rows(t);
    let kept = t.staircase.len().saturating_sub(1);
    let mut section = Section {
        heading: heading.into(),
        text: vec![format!(
            "{} step(s) judged on {}, {kept} kept. Each stair: the medians over its blocks \
             [distribution-free interval], after the kept steps up to it. Under it, every \
             step with its decision: kept when p is below {} (each look's share of \
             it, for the paired test) and the shift's whole interval below zero, \
             reverted when p is below it and the interval above zero, inconclusive \
             otherwise.",
            t.steps.iter().filter(|s| s.judgement.is_some()).count(),
            t.metric.name(),
            t.alpha
        )],
        tables: vec![
            Table {
                caption: "tune: staircase (µs, median [interval] over blocks)".into(),
                headers: header.into_iter().map(String::from).collect(),
                rows,
                note: None,
            },
            Table {
                caption: format!(
                    "tune: each step's decision (shift: step − baseline over its pairs \
                     of blocks, at least {}, Hodges–Lehmann; negative is better)",
                    t.pairs
                ),
                headers: step_header,
                rows: steps,
                note: None,
            },
        ],
        ..Section::default()
    };
    if !t.staircase.is_empty() {
        section.lead.push(Figure {
            caption: "Median p99 and median per-block max after each kept step (log scale)".into(),
            svg: crate::report::export::staircase::staircase_svg(&t.staircase),
            series: false,
        });
    }
    section
}

/// A main job's verdict: the one stored, or for an older main-job file one made now.
fn stored_or_main_verdict(r: &ResultFile) -> Option<crate::report::terminal::verdict::Verdict> {
    if let Some(v) = &r.verdict {
        return Some(v.clone());
    }
    let sub = r.run.command_line.get(1).map(String::as_str);
    matches!(sub, None | Some("run")).then(|| crate::report::terminal::verdict::verdict(r))
}

/// The verdict's sentences and its top fixes.
fn verdict_section(heading: &str, v: &crate::report::terminal::verdict::Verdict) -> Section {
    use crate::report::terminal::verdict::share_words;
    let rows = (v.fixes.iter().enumerate())
        .map(|(i, f)| {
            let fix = match &f.tune {
                Some(cmd) => format!("{} (try it: {cmd})", f.fix),
                None => f.fix.clone(),
            };
            let cells = [(i + 1).to_string(), fix, f.finding.clone()];
            cells.into_iter().chain([share_words(f.share)]).collect()
        })
        .collect();
    Section {
        heading: heading.into(),
        text: v.lines.clone(),
        tables: vec![Table {
            caption: "Top fixes, ranked by the share of measured noise they would remove".into(),
            headers: ["#", "fix", "audit finding", "share"]
                .map(String::from)
                .to_vec(),
            rows,
            note: None,
        }],
        ..Section::default()
    }
}

// ---------------------------------------------------------------------------------------
// A watched application's threads (`watch`)

/// The `watch` section: what was watched and what it cost, a row per thread; then per
/// thread its wake-up delay distribution, its causes with the audit finding whose fix
/// would remove each, and its worst delays part by part.
fn watch_sections(
    r: &ResultFile,
    w: &crate::report::terminal::watch::WatchRecord,
    named: &dyn Fn(&str) -> String,
    warnings: &mut Vec<String>,
    file: &str,
) -> Vec<Section> {
    use crate::report::terminal::table::us;
    let secs = r.run.actual_duration_ns as f64 / 1e9;
    let cpu_ms_per_s = match secs > 0.0 {
        true => w.tool_cpu_ns as f64 / 1e6 / secs,
        false => 0.0,
    };
    let th_us = w.threshold_ns as f64 / 1e3;
    let mut out = vec![Section {
        heading: named(&format!("watch: {}", w.target)),
        facts: vec![
            fact("Watched", &w.target),
            fact(
                "For",
                format!("{} ({})", seconds(r.run.actual_duration_ns), w.ended),
            ),
            fact("Delays attributed", format!("at or above {th_us} µs")),
            fact("Method", &w.method),
            fact("Filtering", &w.filtering),
            fact(
                "Cost",
                format!(
                    "{} trace events read, {} lost; jitterscope used {:.1} ms of CPU per s \
                     ({:.3} s in all)",
                    w.events_read,
                    w.events_lost,
                    cpu_ms_per_s,
                    w.tool_cpu_ns as f64 / 1e9
                ),
            ),
        ],
        text: vec![
            "Wake-up delay: from the thread's sched_wakeup to the sched_switch that ran it \
             (run-queue latency). Preempted: time switched out while runnable. IRQ time: \
             interrupt contexts while it ran."
                .into(),
        ],
        tables: vec![watch_summary_table(w)],
        ..Section::default()
    }];
    if w.events_lost > 0 {
        warnings.push(format!(
            "{file}: {} trace events were lost: delays in those stretches may be missing or \
             misread",
            w.events_lost
        ));
    }
    let dists = crate::report::terminal::watch::wakeup_dists(w);
    let mut failed = None;
    for (th, d) in w.threads.iter().zip(&dists) {
        let who = format!("{}:{}", th.comm, th.tid);
        let mut lead = Vec::new();
        match wakeup_figures(d, &who) {
            Ok(f) => lead.extend(f),
            Err(e) => failed = failed.or(Some(e)),
        }
        let mut text = vec![format!(
            "{} wake-ups: p50 {}, p99 {}, max {} µs.",
            th.wakeup.count,
            us(th.wakeup.p50_ns),
            us(th.wakeup.p99_ns),
            us(th.wakeup.max_ns)
        )];
        let mut tables = Vec::new();
        match &th.attribution {
            None => text.push(format!(
                "No delay reached {th_us} µs, so none is attributed."
            )),
            Some(a) => {
                text.push(format!(
                    "{} delays at or above {th_us} µs, {} in all; what ran instead on the \
                     CPU, as shares of their time.",
                    a.gaps,
                    duration_words(a.interrupted_ns)
                ));
                if r.host.audit.is_none() {
                    text.push(format!(
                        "Fixes: {} — no finding can be named for this host.",
                        crate::report::terminal::watch::NO_AUDIT
                    ));
                }
                if !a.causes.is_empty() {
                    tables.push(watch_cause_table(r, &who, a));
                }
                if !a.top.is_empty() {
                    let gaps: Vec<_> = a.top.iter().map(|g| (None, g)).collect();
                    tables.push(page_cpus::top_parts_table(
                        GapKind::Wakeup,
                        &format!("watch {who}"),
                        &gaps,
                    ));
                }
            }
        }
        out.push(Section {
            heading: named(&format!("watch: thread {who}")),
            text,
            lead,
            tables,
            ..Section::default()
        });
    }
    if let Some(e) = failed {
        warnings.push(format!("{file}: the wake-up delay plots are left out: {e}"));
    }
    out
}

/// A thread's wake-up delays by percentile and as a histogram, drawn as probes'
/// distributions are (`figure::Curves`, `plot::Plot`); none when nothing was recorded.
fn wakeup_figures(d: &Dist, who: &str) -> Result<Vec<Figure>, String> {
    use crate::report::result::figure::{Curves, DistId};
    let Some(curves) = Curves::of(d)? else {
        return Ok(Vec::new());
    };
    let id = DistId::of(d);
    let figures = [
        id.percentiles(vec![curves.percentiles]),
        id.histogram(vec![curves.bins]),
    ];
    figures
        .iter()
        .map(|f| {
            let p = plot::Plot::of(f);
            Ok(Figure {
                caption: format!("{} — thread {who}", p.title),
                svg: p.svg().map_err(|e| e.to_string())?,
                series: false,
            })
        })
        .collect()
}

/// A row per watched thread: its wake-ups and what else it lost.
fn watch_summary_table(w: &crate::report::terminal::watch::WatchRecord) -> Table {
    use crate::report::terminal::table::us;
    let ms = |ns: u64| format!("{:.3}", ns as f64 / 1e6);
    let rows = (w.threads.iter())
        .map(|th| {
            vec![
                format!("{}:{}", th.comm, th.tid),
                crate::report::terminal::watch::policy_cell(th),
                th.wakeup.count.to_string(),
                us(th.wakeup.p50_ns),
                us(th.wakeup.p99_ns),
                us(th.wakeup.max_ns),
                th.preempted.count.to_string(),
                ms(th.preempted.sum_ns),
                ms(th.irq.sum_ns),
                (th.blocked.iter())
                    .map(|b| format!("{} {}", b.state, ms(b.summary.sum_ns)))
                    .collect::<Vec<_>>()
                    .join("; "),
                th.migrations.to_string(),
                th.involuntary_switches.to_string(),
                th.runs.to_string(),
                th.attribution.as_ref().map_or(0, |a| a.gaps).to_string(),
            ]
        })
        .collect();
    Table {
        caption: format!("watch: {} thread(s)", w.threads.len()),
        headers: [
            "thread (comm:tid)",
            "policy",
            "wake-ups",
            "p50 (µs)",
            "p99 (µs)",
            "max (µs)",
            "preempted",
            "preempted (ms)",
            "IRQ (ms)",
            "blocked by state (ms)",
            "migrations",
            "invol. switches",
            "runs",
            &format!("delays ≥ {} µs", w.threshold_ns as f64 / 1e3),
        ]
        .map(String::from)
        .to_vec(),
        rows,
        note: Some(
            "Wake-up percentiles in µs; preempted, IRQ and blocked time summed over the run, \
             in ms (blocked: S interruptible, D uninterruptible). \
             Policy: as the kernel gave it at the end, or as the trace showed it for a \
             thread that had ended; with the number of changes seen."
                .into(),
        ),
    }
}

/// A thread's causes, largest total first, each with the finding of this result's audit
/// whose fix would remove it (`watch::cause_findings`, the noise verdict's mapping).
fn watch_cause_table(r: &ResultFile, who: &str, a: &crate::stats::causes::Attribution) -> Table {
    use crate::report::terminal::table::us;
    let rows = (a.causes.iter())
        .map(|c| {
            let fix = match crate::report::terminal::watch::cause_findings(r, c).as_deref() {
                None => crate::report::terminal::watch::NO_AUDIT.to_string(),
                Some([]) => "-".into(),
                Some([first, more @ ..]) => {
                    let mut s = format!("audit {}: {}", first.id, first.fix);
                    if !more.is_empty() {
                        let ids: Vec<String> = more.iter().map(|f| f.id.to_string()).collect();
                        s.push_str(&format!(" (also: {})", ids.join(", ")));
                    }
                    s
                }
            };
            // As the terminal says it: pinned first, then what else would help.
            let fix = match crate::report::terminal::watch::pinned_note(r, c) {
                Some(note) if fix == "-" => format!("pinned: {note}"),
                Some(note) => format!("pinned: {note}; {fix}"),
                None => fix,
            };
            vec![
                c.cause.clone(),
                crate::report::export::serde_name(&c.kind),
                c.gaps.to_string(),
                c.largest_in.to_string(),
                us(Some(c.total_ns)),
                format!("{:.1}", c.share_pct),
                us(Some(c.max_ns)),
                fix,
            ]
        })
        .collect();
    Table {
        caption: format!(
            "watch {who}: the causes of {} delays, largest total first, and the fix",
            a.gaps
        ),
        headers: [
            "cause",
            "kind",
            "delays",
            "main cause of (delays)",
            "total (µs)",
            "share (%)",
            "max (µs)",
            "fix (audit finding)",
        ]
        .map(String::from)
        .to_vec(),
        rows,
        note: Some(
            "Share: of the time of every attributed delay. Main cause of: the delays where it \
             took the most time. Max: its time in one delay. Fix: the finding of this host's \
             audit, not ok, whose fix would remove the cause, worst and most specific first \
             (the mapping the noise verdict uses; the idle task's time is the CPU leaving \
             idle, which the idle-state findings address); '-' where the audit reported none."
                .into(),
        ),
    }
}

fn subtitle(results: &[Loaded]) -> String {
    match results {
        [(p, _)] => p.display().to_string(),
        _ => format!("{} result files", results.len()),
    }
}

/// The summary tables, one per probe kind, and what was left out.
fn measurements(heading: &str, r: &ResultFile, dists: &[Dist], unknown: usize) -> Section {
    let mut text: Vec<String> = r.run.warnings.clone();
    if unknown > 0 {
        text.push(format!(
            "{unknown} entries of a probe kind this version does not know were skipped \
             (a newer jitterscope wrote them)."
        ));
    }
    Section {
        heading: heading.into(),
        text,
        tables: summary_tables(dists),
        ..Section::default()
    }
}

/// The run's and host's facts, then the audit's findings.
fn host_section(heading: &str, path: &Path, r: &ResultFile) -> Section {
    let mut facts = run_facts(path, r);
    facts.extend(host_facts(&r.host));
    let mut text = Vec::new();
    let mut tables = Vec::new();
    match &r.host.audit {
        Some(a) => match audit_table(a) {
            Some(t) => tables.push(t),
            None => text.push(format!(
                "The audit found nothing to change ({} checks).",
                a.findings.len()
            )),
        },
        None => text.push("This file holds no audit of the host.".into()),
    }
    Section {
        heading: heading.into(),
        facts,
        text,
        tables,
        ..Section::default()
    }
}

fn run_facts(path: &Path, r: &ResultFile) -> Vec<(String, String)> {
    let run = &r.run;
    let mut duration = match &r.tune {
        Some(t) => format!("{} ({})", seconds(run.actual_duration_ns), tune_plan(t)),
        None => format!(
            "{} (requested {})",
            seconds(run.actual_duration_ns),
            seconds(run.requested_duration_ns)
        ),
    };
    if run.interrupted {
        duration.push_str(", stopped early by a signal");
    }
    let p = &run.privileges;
    let privileges = format!(
        "euid {}{}, memory {}locked",
        p.euid,
        if p.root { " (root)" } else { "" },
        if p.memory_locked { "" } else { "not " }
    );
    vec![
        fact("File", path.display()),
        fact("Command", run.command_line.join(" ")),
        fact("Started", &run.start_time),
        fact("Duration", duration),
        fact("Tool version", run.tool()),
        fact("Privileges", privileges),
        fact("Measured CPUs", cpus_or_none(&run.cpus.measured)),
        fact("Housekeeping CPUs", cpus_or_none(&run.cpus.housekeeping)),
    ]
}

/// What a `tune` run's time was made of: its requested duration is one step's blocks,
/// which beside the whole run read as an overrun of as many times as there were steps.
fn tune_plan(t: &crate::system::tune::record::TuneEntry) -> String {
    let measured = t.steps.iter().filter(|s| !s.blocks.is_empty()).count();
    let more = if t.max_pairs > t.pairs {
        format!(", up to {} pairs for a step still undecided", t.max_pairs)
    } else {
        String::new()
    };
    format!(
        "{measured} step{} measured, each {} pairs of {} blocks: {} a step{more}",
        if measured == 1 { "" } else { "s" },
        t.pairs,
        seconds(t.block_ns),
        seconds(t.block_ns * 2 * u64::from(t.pairs))
    )
}

fn host_facts(h: &HostInfo) -> Vec<(String, String)> {
    let c = &h.clock;
    let counter = format!(
        "{} at {:.3} MHz (from {}){}",
        crate::report::export::serde_name(&c.counter),
        c.frequency_hz / 1e6,
        c.frequency_source,
        c.calibration_uncertainty_ppm
            .map_or_else(String::new, |u| format!(", ±{u:.1} ppm"))
    );
    let tsc = format!(
        "{}; invariant: {}",
        if c.tsc_flags.is_empty() {
            "none".into()
        } else {
            c.tsc_flags.join(" ")
        },
        if c.invariant { "yes" } else { "no" }
    );
    let mut facts = vec![
        fact("Host", &h.hostname),
        fact(
            "Kernel",
            format!("{} {}", h.kernel_release, h.kernel_version),
        ),
        fact("Kernel command line", &h.cmdline),
        fact("CPU model", &h.cpu_model),
        fact(
            "CPUs",
            format!("{} online ({})", h.cpu_count, h.cpus_online),
        ),
        fact("Isolated CPUs", cpus_or_none(&h.isolation.isolated)),
        fact("nohz_full CPUs", cpus_or_none(&h.isolation.nohz_full)),
        fact(
            "Virtualisation",
            h.virtualization.as_deref().unwrap_or("none detected"),
        ),
        fact(
            "Clocksource",
            h.clock.clocksource.as_deref().unwrap_or("unknown"),
        ),
        fact("Counter", counter),
        fact("TSC flags", tsc),
        fact(
            "sched_rt_runtime_us",
            h.sched_rt_runtime_us
                .map_or("unknown".into(), |v| v.to_string()),
        ),
    ];
    // Said only of an RT kernel: its IRQs, timers and RCU run in threads.
    if let Some(from) = h.preempt_rt() {
        facts.insert(2, fact("Preemption", format!("PREEMPT_RT ({from})")));
    }
    facts
}

fn fact(label: &str, value: impl std::fmt::Display) -> (String, String) {
    (label.to_string(), value.to_string())
}

fn cpus_or_none(c: &crate::engine::cpu::CpuList) -> String {
    let s = c.to_string();
    if s.is_empty() { "none".into() } else { s }
}

/// A duration in seconds, to the millisecond.
fn seconds(ns: u64) -> String {
    format!("{:.3} s", ns as f64 / 1e9)
}

/// The findings that are not ok, worst first; `None` when every one is ok.
pub fn audit_table(a: &AuditReport) -> Option<Table> {
    let mut bad: Vec<_> = a
        .findings
        .iter()
        .filter(|f| f.severity != Severity::Ok)
        .collect();
    if bad.is_empty() {
        return None;
    }
    // Stable: findings of one severity keep the audit's own (area) order.
    bad.sort_by_key(|f| std::cmp::Reverse(f.severity));
    let rows = bad
        .iter()
        .map(|f| {
            let cells = [f.severity.to_string(), f.area.to_string(), f.id.to_string()];
            let rest = [f.value.clone(), f.why.clone(), f.fix.clone()];
            cells.into_iter().chain(rest).collect()
        })
        .collect();
    Some(Table {
        caption: format!(
            "Audit: {} of {} findings need attention (measured CPUs {})",
            bad.len(),
            a.findings.len(),
            cpus_or_none(&a.measured)
        ),
        headers: [
            "severity",
            "area",
            "finding",
            "value",
            "why it matters",
            "fix",
        ]
        .map(String::from)
        .to_vec(),
        rows,
        note: None,
    })
}

/// One table per probe kind, in the order the kinds first appear.
fn summary_tables(dists: &[Dist]) -> Vec<Table> {
    (by_kind(dists).into_iter())
        .map(|(k, of_kind)| summary_table(k, &of_kind))
        .collect()
}

fn summary_table(probe: &str, dists: &[&Dist]) -> Table {
    let u = export::unit_of(probe);
    let mut headers: Vec<String> = ["key", "metric", "cpu", "count"].map(String::from).to_vec();
    headers.extend(export::TIME_COLUMNS.iter().map(|c| u.header(c)));
    // The kinds whose entries have a rate (noise) get its two columns.
    let noise = dists.iter().any(|d| d.rate_per_s.is_some());
    if noise {
        headers.extend(["interruptions/s".into(), "interrupted (%)".into()]);
    }
    // A kind of thousands of rows (c2c's pairs at 64 CPUs and more): its extremes.
    let kept = match dists.len() > MAX_SUMMARY_ROWS {
        true => extremes(dists, MAX_SUMMARY_ROWS / 4),
        false => (0..dists.len()).collect(),
    };
    let rows: Vec<Vec<String>> = (kept.iter().map(|&i| dists[i]))
        .map(|d| {
            let mut row = vec![d.key.clone(), d.metric_label(), d.cpu.clone()];
            row.push(d.summary.count.to_string());
            row.extend(export::time_cells(&d.summary, u));
            if let (true, Some(rate), Some(pct)) = (noise, d.rate_per_s, d.interrupted_pct) {
                row.push(format!("{rate:.1}"));
                row.push(format!("{pct:.4}"));
            }
            row
        })
        .collect();
    let untrusted = dists.iter().any(|d| !d.trusted);
    let cut = (kept.len() < dists.len()).then(|| {
        format!(
            "{} of {} rows: the {} with the highest p50 and the {} with the lowest, in \
             order; `report --format csv` has every one.",
            kept.len(),
            dists.len(),
            MAX_SUMMARY_ROWS / 4,
            MAX_SUMMARY_ROWS / 4
        )
    });
    let note = [untrusted.then(|| UNCONFIRMED_NOTE.to_string()), cut];
    let note: Vec<String> = note.into_iter().flatten().collect();
    Table {
        caption: format!("{probe}: summary (times in {})", u.name()),
        headers,
        rows,
        note: (!note.is_empty()).then(|| note.join(" ")),
    }
}

/// A kind's summary table holds every row up to this many.
const MAX_SUMMARY_ROWS: usize = 400;

/// A kind's distributions are all plotted up to this many entries (keys).
const MANY_KEYS: usize = 8;

/// The indices of the `each` distributions with the highest p50 and the `each` with the
/// lowest, in their order.
fn extremes(dists: &[&Dist], each: usize) -> Vec<usize> {
    let mut by_p50: Vec<usize> = (0..dists.len()).collect();
    by_p50.sort_by_key(|&i| (dists[i].summary.p50_ns, i));
    let mut kept: Vec<usize> = (by_p50.iter().take(each))
        .chain(by_p50.iter().rev().take(each))
        .copied()
        .collect();
    kept.sort_unstable();
    kept.dedup();
    kept
}

/// The distributions whose plots the page draws: every one of the per-CPU kinds (noise,
/// timer: their sections pick which to draw, and overlay every CPU's percentiles); of each
/// other kind, every one of up to [`MANY_KEYS`] entries (keys), and of more (c2c's pairs:
/// 18 336 at 192 CPUs) those of the highest and lowest p50, with a note of the rest.
fn plotted<'a, 'b>(dists: &'b [Dist<'a>]) -> (Vec<&'b Dist<'a>>, Option<String>) {
    let mut shown = Vec::new();
    let mut cut = Vec::new();
    for (kind, of_kind) in by_kind(dists) {
        let mut keys: Vec<&str> = of_kind.iter().map(|d| d.key.as_str()).collect();
        keys.sort_unstable();
        keys.dedup();
        if page_cpus::per_cpu(kind) || keys.len() <= MANY_KEYS {
            shown.extend(of_kind);
            continue;
        }
        let mut kept: Vec<&str> = (extremes(&of_kind, MANY_KEYS / 4).into_iter())
            .map(|i| of_kind[i].key.as_str())
            .collect();
        kept.dedup();
        shown.extend((of_kind.iter()).filter(|d| kept.contains(&d.key.as_str())));
        cut.push(format!(
            "{kind}: of {} entries, the plots of {} ({}) with the highest and lowest p50",
            keys.len(),
            kept.len(),
            kept.join(", ")
        ));
    }
    let note = (!cut.is_empty()).then(|| {
        format!(
            "Plots of many entries are bounded: {}. `report --format svg -o DIR` draws \
             every one.",
            cut.join("; ")
        )
    });
    (shown, note)
}

/// The distributions by probe kind, the kinds in the order they first appear.
fn by_kind<'a, 'b>(dists: &'b [Dist<'a>]) -> Vec<(&'static str, Vec<&'b Dist<'a>>)> {
    let mut out: Vec<(&'static str, Vec<&Dist>)> = Vec::new();
    for d in dists {
        match out.iter_mut().find(|(k, _)| *k == d.probe) {
            Some((_, of)) => of.push(d),
            None => out.push((d.probe, vec![d])),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::page::html::render;

    #[test]
    fn issue29_the_page_decodes_only_the_distributions_it_plots() {
        // A pair of middling p50, whose plots the page leaves out, with a histogram that
        // does not decode: had the page decoded every pair's (18 336 at 192 CPUs, most of
        // its time), it would fail on this one and lose every plot.
        // The 16-CPU host's c2c result: 120 pairs.
        let r = page_cpus::host16("c2c-16cpu", |v| {
            let probes = v["probes"].as_array_mut().unwrap();
            let mut by_p50: Vec<usize> = (0..probes.len()).collect();
            by_p50.sort_by_key(|&i| probes[i]["summary"]["p50_ns"].as_u64());
            let middle = by_p50[by_p50.len() / 2];
            probes[middle]["histogram"]["data"] = "not a histogram".into();
        });
        let page = result_page(&[("c.json".into(), r)]).unwrap();
        assert!(
            !page.warnings.iter().any(|w| w.contains("left out")),
            "{:?}",
            page.warnings
        );
        let plots = (page.sections.iter())
            .find(|s| s.heading == "Distributions")
            .map_or(0, |s| s.figures.len());
        let drew = crate::report::export::plot::Plot::cause_shares("t", "t", Vec::new())
            .svg()
            .is_ok();
        if drew {
            // The heat map, then two pairs of the highest p50 and two of the lowest, two
            // plots each.
            assert_eq!(plots, 1 + 8);
        }
    }
    /// The tune fixture's kept step and three more: one reverted, one inconclusive and
    /// one the kernel refused (never measured).
    fn four_steps() -> ResultFile {
        use crate::system::tune::Class;
        use crate::system::tune::experiment::Decision;
        let fixture = include_str!("../../../tests/fixtures/tune.json");
        let mut r = ResultFile::parse(fixture).unwrap();
        let t = r.tune.as_mut().unwrap();
        let kept = t.steps[0].clone();
        let judged = [
            ("irq-affinity-spread", Decision::Reverted, 0.0079),
            ("timer-migration-on", Decision::Inconclusive, 0.42),
        ];
        for (id, decision, p) in judged {
            let mut s = kept.clone();
            s.step.id = id.into();
            let j = s.judgement.as_mut().unwrap();
            (j.decision, j.p) = (decision, p);
            t.steps.push(s);
        }
        let mut refused = kept;
        refused.step.id = "irq-12-affinity".into();
        refused.step.class = Class::NotApplicable {
            answer: "EIO (a managed IRQ)".into(),
        };
        (refused.blocks, refused.judgement) = (Vec::new(), None);
        t.steps.push(refused);
        r
    }

    fn tune_page(r: ResultFile) -> Page {
        result_page(&[("t.json".into(), r)]).unwrap()
    }

    /// Issue 38: the page said "4 step(s) judged … 1 kept" and showed only the kept one.
    #[test]
    fn issue38_the_tune_page_shows_every_steps_decision_with_its_p() {
        let page = tune_page(four_steps());
        let decisions = (page.sections.iter())
            .flat_map(|s| &s.tables)
            .find(|t| t.caption.starts_with("tune: each step's decision"))
            .expect("a table of every step's decision");
        let seen: Vec<(&str, &str, &str)> = (decisions.rows.iter())
            .map(|r| (r[0].as_str(), r[1].as_str(), r[4].as_str()))
            .collect();
        assert_eq!(
            seen,
            [
                ("rt-throttling-on", "kept", "0.0079"),
                ("irq-affinity-spread", "reverted", "0.0079"),
                ("timer-migration-on", "inconclusive", "0.4200"),
                (
                    "irq-12-affinity",
                    "not applicable: EIO (a managed IRQ)",
                    "—"
                ),
            ]
        );
        // The shift with its interval, in the metric's unit (per-block max: ms here).
        assert_eq!(decisions.rows[0][3], "-46.1 ms [-140.7 ms, -32.5 ms]");
        let html = render(&page);
        for (id, decision, _) in seen {
            assert!(html.contains(id) && html.contains(decision), "{id}");
        }
    }

    /// Issue 38: a tune result has no summary tables, and its page showed a bare
    /// "Measurements" heading. No section of the page stands without content.
    #[test]
    fn issue38_no_heading_of_the_tune_page_stands_empty() {
        let page = tune_page(four_steps());
        for s in &page.sections {
            let empty = s.facts.is_empty()
                && s.text.is_empty()
                && s.lead.is_empty()
                && s.matrices.is_empty()
                && s.tables.is_empty()
                && s.figures.is_empty()
                && s.folds.is_empty();
            assert!(!empty, "the section '{}' is empty", s.heading);
        }
        assert!(page.sections.iter().all(|s| s.heading != "Measurements"));
    }

    /// Issue 38: "Duration 244.776 s (requested 14.400 s)" read as an overrun of 17
    /// times; the 14.4 s was one step's blocks. The page says what the time was made of.
    #[test]
    fn issue38_the_tune_duration_says_what_its_time_was_made_of() {
        let page = tune_page(four_steps());
        let facts = &(page.sections.iter())
            .find(|s| s.heading == "Run, host and audit")
            .unwrap()
            .facts;
        let (_, duration) = facts.iter().find(|(k, _)| k == "Duration").unwrap();
        assert_eq!(
            duration,
            "20.000 s (3 steps measured, each 5 pairs of 2.000 s blocks: 20.000 s a step)"
        );
    }

    #[test]
    fn result_pages_escape_host_facts_and_show_degradations() {
        let (clock, _) = crate::engine::clock::ClockInfo::detect();
        let online = crate::engine::cpu::CpuList::parse_kernel("0-1").unwrap();
        let mut host = HostInfo::collect(clock, online.clone());
        host.hostname = "<script>alert('x')</script>".into();
        let run = crate::report::RunInfo {
            tool_version: "test".into(),
            tool_commit: None,
            command_line: vec!["jitterscope".into(), "noise".into()],
            start_time: "2024-01-01T00:00:00Z".into(),
            requested_duration_ns: 1_000_000_000,
            actual_duration_ns: 1_001_000_000,
            interrupted: false,
            privileges: crate::report::result::Privileges {
                euid: 1000,
                root: false,
                memory_locked: false,
            },
            cpus: crate::report::result::RunCpus {
                measured: online,
                housekeeping: Default::default(),
            },
            degraded: vec![crate::degraded::DegradedRecord {
                kind: "not_root".into(),
                message: "not root <sad>".into(),
                steps: Vec::new(),
            }],
            warnings: vec![],
            peak_rss_kib: 0,
            counters: None,
            root_domain: None,
        };
        let r = ResultFile::new(host, run, vec![crate::report::ProbeEntry::Unknown]);
        let page = result_page(&[("r.json".into(), r)]).unwrap();
        assert!(page.warnings.iter().any(|w| w.contains("not root <sad>")));
        let out = render(&page);
        assert!(!out.contains("<script"), "{out}");
        assert!(
            out.contains("&lt;script&gt;alert('x')&lt;/script&gt;"),
            "{out}"
        );
        assert!(out.contains("1.001 s (requested 1.000 s)"), "{out}");
        assert!(out.contains("1 entries of a probe kind"), "{out}");
    }
}
