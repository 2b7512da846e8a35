//! One self-contained HTML page (maud): no external assets, no JavaScript, plots inline
//! as SVG. It reads on a laptop screen and prints: an embedded style sheet with a
//! max-width layout, right-aligned numbers, and print rules that keep figures and
//! tables whole.
//!
//! `render` escapes every text (maud does); only `Figure::svg`, which our own plotter
//! draws, goes in as markup.

use std::path::Path;

use maud::{DOCTYPE, Markup, PreEscaped, html};

use crate::report::dist::UNCONFIRMED_NOTE;
use crate::report::export::{self, Dist, Loaded};
use crate::report::verdict::duration_words;
use crate::report::{ResultFile, plot};
use crate::system::HostInfo;
use crate::system::audit::{AuditReport, Severity};

/// A page: a title, warnings shown first, then sections.
#[derive(Debug, Clone, Default)]
pub struct Page {
    pub title: String,
    pub subtitle: Option<String>,
    /// Degradations and differences the reader must see first.
    pub warnings: Vec<String>,
    pub sections: Vec<Section>,
}

#[derive(Debug, Clone, Default)]
pub struct Section {
    pub heading: String,
    /// Label and value pairs (host facts).
    pub facts: Vec<(String, String)>,
    /// Paragraphs of plain text.
    pub text: Vec<String>,
    /// Figures shown before the tables (an overview the tables then detail).
    pub lead: Vec<Figure>,
    pub tables: Vec<Table>,
    pub figures: Vec<Figure>,
}

#[derive(Debug, Clone, Default)]
pub struct Table {
    pub caption: String,
    pub headers: Vec<String>,
    pub rows: Vec<Vec<String>>,
    pub note: Option<String>,
}

#[derive(Debug, Clone, Default)]
pub struct Figure {
    pub caption: String,
    /// A complete `<svg>` element.
    pub svg: String,
    /// A time series (shown before the tables), not a distribution.
    pub series: bool,
}

/// The embedded style sheet: the page must need nothing else.
pub const STYLE: &str = r#"
:root { color-scheme: light; }
body { margin: 0; background: #fff; color: #1b1b1b;
  font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
main { max-width: 75rem; margin: 0 auto; padding: 1.5rem 2rem 3rem; }
h1 { font-size: 1.7rem; margin: 0 0 .2rem; }
.subtitle { color: #555; margin: 0 0 1rem; }
h2 { font-size: 1.3rem; margin: 2.2rem 0 .8rem; padding-bottom: .2rem; border-bottom: 2px solid #d0d0d0;
  overflow-wrap: anywhere; }
.warnings { border-left: 4px solid #c25e00; background: #fff4e5; padding: .6rem 1rem; margin: 1rem 0; }
.warnings h2 { border: 0; margin: 0 0 .3rem; font-size: 1.1rem; }
.warnings ul { margin: 0; padding-left: 1.2rem; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: .15rem 1.2rem; margin: 0 0 1rem; }
dl.facts dt { font-weight: 600; color: #444; }
dl.facts dd { margin: 0; overflow-wrap: anywhere; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; margin: 1rem 0 .4rem; font-variant-numeric: tabular-nums; }
caption { caption-side: top; text-align: left; font-weight: 600; padding: 0 0 .35rem; }
th, td { padding: .22rem .65rem; border-bottom: 1px solid #ddd; vertical-align: top; text-align: left; }
td { overflow-wrap: break-word; }
th.wide, td.wide { min-width: 13rem; overflow-wrap: anywhere; }
thead th { background: #f2f2f2; border-bottom: 2px solid #bbb; }
th.num, td.num { text-align: right; white-space: nowrap; }
.note { font-size: .9rem; color: #555; margin: .2rem 0 1rem; }
figure { margin: 1.5rem 0; }
figure svg { display: block; max-width: 100%; height: auto; }
figcaption { font-size: .9rem; color: #444; margin-top: .3rem; }
@media print {
  body { font-size: 10pt; }
  main { max-width: none; padding: 0; }
  figure, table.keep, dl.facts, .warnings { break-inside: avoid; page-break-inside: avoid; }
  tr { break-inside: avoid; page-break-inside: avoid; }
  thead { display: table-header-group; }
  h2, caption { break-after: avoid; page-break-after: avoid; }
  section.part + section.part { break-before: page; }
  .warnings, thead th { background: none; }
  .scroll { overflow: visible; }
}
"#;

/// The page as HTML text.
pub fn render(page: &Page) -> String {
    let markup = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (page.title) }
                style { (PreEscaped(STYLE)) }
            }
            body { main {
                h1 { (page.title) }
                @if let Some(s) = &page.subtitle { p.subtitle { (s) } }
                (warnings(&page.warnings))
                @for s in &page.sections { (section(s)) }
            } }
        }
    };
    markup.into_string()
}

fn warnings(list: &[String]) -> Markup {
    html! {
        @if !list.is_empty() {
            section.warnings {
                h2 { "Warnings" }
                ul { @for w in list { li { (w) } } }
            }
        }
    }
}

fn section(s: &Section) -> Markup {
    html! {
        section.part {
            h2 { (s.heading) }
            @if !s.facts.is_empty() {
                dl.facts { @for (k, v) in &s.facts { dt { (k) } dd { (v) } } }
            }
            @for p in &s.text { p { (p) } }
            @for f in &s.lead { (figure(f)) }
            @for t in &s.tables { (table(t)) }
            @for f in &s.figures { (figure(f)) }
        }
    }
}

fn table(t: &Table) -> Markup {
    let classes = column_classes(t);
    let class = |i: usize| classes.get(i).copied().flatten();
    html! {
        div.scroll {
            // A long table would only be pushed to the next page, then break anyway.
            table class=[(t.rows.len() <= KEEP_ROWS).then_some("keep")] {
                caption { (t.caption) }
                thead { tr { @for (i, h) in t.headers.iter().enumerate() { th class=[class(i)] { (h) } } } }
                tbody {
                    @for row in &t.rows {
                        tr { @for (i, c) in row.iter().enumerate() { td class=[class(i)] { (c) } } }
                    }
                }
            }
        }
        @if let Some(n) = &t.note { p.note { (n) } }
    }
}

/// Tables of up to this many rows are kept on one printed page.
const KEEP_ROWS: usize = 20;

/// Prose longer than this makes a column `wide`: it gets a minimum width, so that the
/// table's layout does not squeeze it into a word per line.
const WIDE_CHARS: usize = 40;

/// Each column's class: `num` where every non-empty cell is a number (or `-`), so that
/// digits line up on the right; `wide` for prose.
fn column_classes(t: &Table) -> Vec<Option<&'static str>> {
    (0..t.headers.len())
        .map(|i| {
            let cells: Vec<&String> = (t.rows.iter())
                .filter_map(|r| r.get(i))
                .filter(|c| !c.trim().is_empty())
                .collect();
            if !cells.is_empty() && cells.iter().all(|c| is_number(c)) {
                Some("num")
            } else if cells.iter().any(|c| c.chars().count() > WIDE_CHARS) {
                Some("wide")
            } else {
                None
            }
        })
        .collect()
}

fn is_number(cell: &str) -> bool {
    let c = cell.trim().trim_end_matches(['%', '*']).trim_end();
    c == "-" || (!c.is_empty() && c.parse::<f64>().is_ok())
}

fn figure(f: &Figure) -> Markup {
    html! {
        figure {
            // Our own plotter's SVG: markup, not text.
            (PreEscaped(inline_svg(&f.svg)))
            figcaption { (f.caption) }
        }
    }
}

/// The `<svg>` element alone: an XML declaration or doctype has no place inside HTML.
fn inline_svg(svg: &str) -> &str {
    svg.find("<svg").map_or(svg, |i| &svg[i..])
}

// ---------------------------------------------------------------------------------------
// The page of saved results

/// The page of one or more results. Per file, in the order a reader needs them: the
/// verdict (a main job's, stored or made now), the per-CPU time series with the largest
/// events, what each traced CPU's gaps were made of, the measurement tables, the distributions, then the run, the host and the
/// audit's findings.
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
        let (figures, failure) = figures(loaded);
        if let Some(why) = failure {
            page.warnings.push(format!("{file}: {why}"));
        }
        let (series, distributions): (Vec<Figure>, Vec<Figure>) =
            figures.into_iter().partition(|f| f.series);
        let named = |what: &str| match results.len() {
            1 => what.to_string(),
            _ => format!("{file}: {what}"),
        };
        if let Some(v) = stored_or_main_verdict(r) {
            page.sections.push(verdict_section(&named("Verdict"), &v));
        }
        if !series.is_empty() {
            page.sections.push(Section {
                heading: named("Over time, per CPU"),
                figures: series,
                ..Section::default()
            });
        }
        let events = largest_tables(r);
        if !events.is_empty() {
            page.sections.push(Section {
                heading: named("Largest events"),
                text: vec![
                    "Each entry's largest events, when each began (seconds from the start of \
                     the run, and the counter's value, the timebase of x86-tsc traces)."
                        .into(),
                ],
                tables: events,
                ..Section::default()
            });
        }
        if let Some(t) = &r.tune {
            page.sections
                .push(tune_section(&named("tune: staircase"), t));
        }
        page.sections
            .extend(attribution_sections(r, &named, &mut page.warnings, &file));
        if let Some(w) = &r.watch {
            page.sections
                .extend(watch_sections(r, w, &named, &mut page.warnings, &file));
        }
        page.sections.push(measurements(&named("Measurements"), r));
        if !distributions.is_empty() {
            page.sections.push(Section {
                heading: named("Distributions"),
                text: vec![
                    "Percentiles on log axes, HdrHistogram's style: the x axis runs to the \
                     nines the sample count resolves, the y axis spans the whole range, so \
                     that p50 and p99 stand apart under a long tail."
                        .into(),
                ],
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
/// cells as the terminal, CSV and Markdown (`staircase_rows`), so that the figures agree.
fn tune_section(heading: &str, t: &crate::system::tune::record::TuneEntry) -> Section {
    let (header, rows) = crate::report::views::tune::staircase_rows(&t.staircase);
    let kept = t.staircase.len().saturating_sub(1);
    let mut section = Section {
        heading: heading.into(),
        text: vec![format!(
            "{} step(s) judged on {}, {kept} kept. Each stair: the medians over its blocks \
             [distribution-free interval], after the kept steps up to it.",
            t.steps.iter().filter(|s| s.judgement.is_some()).count(),
            t.metric.name()
        )],
        tables: vec![Table {
            caption: "tune: staircase (µs, median [interval] over blocks)".into(),
            headers: header.into_iter().map(String::from).collect(),
            rows,
            note: None,
        }],
        ..Section::default()
    };
    if !t.staircase.is_empty() {
        section.lead.push(Figure {
            caption: "Median p99 and median per-block max (µs) after each kept step".into(),
            svg: crate::report::plot::staircase_svg(&t.staircase),
            series: false,
        });
    }
    section
}

/// A main job's verdict: the one stored, or for an older main-job file one made now.
fn stored_or_main_verdict(r: &ResultFile) -> Option<crate::report::verdict::Verdict> {
    if let Some(v) = &r.verdict {
        return Some(v.clone());
    }
    let sub = r.run.command_line.get(1).map(String::as_str);
    matches!(sub, None | Some("run")).then(|| crate::report::verdict::verdict(r))
}

/// The verdict's sentences and its top fixes.
fn verdict_section(heading: &str, v: &crate::report::verdict::Verdict) -> Section {
    use crate::report::verdict::share_words;
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

/// Each series entry's largest events, largest first, with when each began.
fn largest_tables(r: &ResultFile) -> Vec<Table> {
    let mut out = Vec::new();
    for s in r.probes.iter().filter_map(|e| e.view()?.series()) {
        if s.largest.is_empty() {
            continue;
        }
        let u = export::unit_of(s.probe);
        let mut events: Vec<_> = s.largest.iter().collect();
        events.sort_by_key(|e| std::cmp::Reverse(e.duration_ns));
        out.push(Table {
            caption: format!(
                "{} CPU {}: the {} largest events ({}), largest first",
                s.probe,
                s.cpu,
                events.len(),
                s.gap
            ),
            headers: vec![
                "#".into(),
                "at (s from the start)".into(),
                u.header("duration"),
                "TSC at start".into(),
            ],
            rows: (events.iter().enumerate())
                .map(|(i, e)| {
                    vec![
                        (i + 1).to_string(),
                        format!("{:.6}", e.start_ns as f64 / 1e9),
                        u.cell(Some(e.duration_ns)),
                        e.start_tsc.to_string(),
                    ]
                })
                .collect(),
            note: None,
        });
    }
    out
}

// ---------------------------------------------------------------------------------------
// Why each gap happened (`attribution`)

/// One section per traced noise or timer entry, in file order: its bar of cause shares,
/// its cause table and its largest gaps part by part. A bar that cannot be drawn (no
/// font) leaves a warning and the tables.
fn attribution_sections(
    r: &ResultFile,
    named: &dyn Fn(&str) -> String,
    warnings: &mut Vec<String>,
    file: &str,
) -> Vec<Section> {
    use crate::probes::{noise::NoiseEntry, timer::TimerEntry};
    let noise = (r.entries::<NoiseEntry>())
        .filter_map(|e| Some((GapKind::Noise, e.cpu, e.attribution.as_ref()?)));
    let timer = (r.entries::<TimerEntry>())
        .filter_map(|e| Some((GapKind::Timer, e.cpu, e.attribution.as_ref()?)));
    let mut out = Vec::new();
    let mut failed = None;
    for (what, cpu, a) in noise.chain(timer) {
        let (section, error) = attribution_section(r, what, cpu, a, named);
        failed = failed.or(error);
        out.push(section);
    }
    if let Some(e) = failed {
        warnings.push(format!(
            "{file}: the bars of cause shares are left out: {e}"
        ));
    }
    out
}

/// Whose gaps an attribution splits: noise's interruptions or timer's late wake-ups.
#[derive(Clone, Copy, PartialEq, Eq)]
enum GapKind {
    Noise,
    Timer,
    /// A watched thread's wake-up delays (`watch`).
    Wakeup,
}

impl GapKind {
    fn probe(self) -> &'static str {
        match self {
            GapKind::Noise => "noise",
            GapKind::Timer => "timer",
            GapKind::Wakeup => "watch",
        }
    }

    /// What one of its gaps is called.
    fn gap(self) -> &'static str {
        match self {
            GapKind::Noise => "gap",
            GapKind::Timer => "late wake-up",
            GapKind::Wakeup => "delay",
        }
    }

    fn heading(self, cpu: usize) -> String {
        match self {
            GapKind::Noise => format!("Why each gap happened: noise CPU {cpu}"),
            GapKind::Timer => format!("What made the wake-ups late: timer CPU {cpu}"),
            GapKind::Wakeup => format!("What delayed the wake-ups: CPU {cpu}"),
        }
    }
}

/// One traced entry's section, and why its bar is missing when it is.
fn attribution_section(
    r: &ResultFile,
    what: GapKind,
    cpu: usize,
    a: &crate::stats::causes::Attribution,
    named: &dyn Fn(&str) -> String,
) -> (Section, Option<String>) {
    let probe = what.probe();
    let mut text = vec![format!(
        "{} {}s attributed, {} of interrupted time in all. Method: {}",
        a.gaps,
        what.gap(),
        duration_words(a.interrupted_ns),
        a.method
    )];
    let steal = what == GapKind::Noise;
    text.extend(crate::report::views::attribution::notes(
        r,
        cpu,
        a,
        what.gap(),
        steal,
    ));
    let segments = crate::report::figure::cause_shares(a);
    let total: f64 = segments.iter().map(|s| s.share_pct).sum();
    let mut lead = Vec::new();
    let mut error = None;
    if segments.is_empty() || total <= 0.0 || a.interrupted_ns == 0 {
        text.push(format!(
            "No interrupted time was attributed to a cause on CPU {cpu}, so there is no bar \
             of shares."
        ));
    } else {
        let title = format!("{probe} CPU {cpu}: share of interrupted time by cause (%)");
        let bar = plot::Plot::cause_shares(&format!("{probe}-cpu{cpu}-causes"), &title, segments);
        match bar.svg() {
            Ok(svg) => lead.push(Figure {
                caption: format!(
                    "{title}. Each kind of cause has its colour (the legend names every \
                     segment); causes under {} % are grouped as other.",
                    crate::report::figure::SMALL_SHARE_PCT
                ),
                svg,
                series: false,
            }),
            Err(e) => error = Some(e.to_string()),
        }
    }
    let mut tables = Vec::new();
    if !a.causes.is_empty() {
        tables.push(cause_table(what, cpu, a));
    }
    if !a.top.is_empty() {
        tables.push(top_gaps_table(what, cpu, a));
    }
    let section = Section {
        heading: named(&what.heading(cpu)),
        text,
        lead,
        tables,
        ..Section::default()
    };
    (section, error)
}

/// The cause table: one row per cause, largest total first, as stored.
fn cause_table(what: GapKind, cpu: usize, a: &crate::stats::causes::Attribution) -> Table {
    use crate::report::table::us;
    let rows = (a.causes.iter())
        .map(|c| {
            vec![
                c.cause.clone(),
                crate::report::export::serde_name(&c.kind),
                c.gaps.to_string(),
                c.occurrences.to_string(),
                us(Some(c.total_ns)),
                format!("{:.1}", c.share_pct),
                us(Some(c.median_ns)),
                us(Some(c.max_ns)),
                c.period_ns
                    .map_or("-".into(), |p| format!("{:.3}", p as f64 / 1e6)),
            ]
        })
        .collect();
    Table {
        caption: format!(
            "{} CPU {cpu}: the causes of {} {}s, largest total first",
            what.probe(),
            a.gaps,
            what.gap()
        ),
        headers: [
            "cause",
            "kind",
            &format!("{}s", what.gap()),
            "times run",
            "total (µs)",
            "share (%)",
            "median (µs)",
            "max (µs)",
            "period (ms)",
        ]
        .map(String::from)
        .to_vec(),
        rows,
        note: Some(format!(
            "Share: of the interrupted time of every attributed {gap}. Median and max: the \
             cause's time in one {gap} it took part in. Times run: how often it ran inside \
             them (one interrupt, one time slice). Period: the interval its {gap}s recur at, \
             when most recur at one. Unaccounted: the time no event covers (interrupt entry \
             and exit, the hypervisor, SMIs).",
            gap = what.gap()
        )),
    }
}

/// The largest gaps, each broken down: a row per part, the gap's own cells on its first.
fn top_gaps_table(what: GapKind, cpu: usize, a: &crate::stats::causes::Attribution) -> Table {
    top_parts_table(what, &format!("{} CPU {cpu}", what.probe()), a)
}

/// The largest gaps of `subject` ("noise CPU 1", "watch js-fixture:22388"), part by part.
fn top_parts_table(what: GapKind, subject: &str, a: &crate::stats::causes::Attribution) -> Table {
    use crate::report::table::us;
    use crate::stats::causes::CauseKind;
    let mut rows = Vec::new();
    for (i, g) in a.top.iter().enumerate() {
        let gap_cells = [
            (i + 1).to_string(),
            format!("{:.6}", g.start_ns as f64 / 1e9),
            us(Some(g.duration_ns)),
        ];
        let blank = || vec![String::new(); 3];
        if g.parts.is_empty() {
            let mut row = gap_cells.to_vec();
            row.extend(["no event".into(), "-".into(), "-".into()]);
            rows.push(row);
        }
        for (k, p) in g.parts.iter().enumerate() {
            let mut row = if k == 0 { gap_cells.to_vec() } else { blank() };
            let offset = match p.kind {
                // The time no event covers, summed over the gap: it has no one offset.
                CauseKind::Unaccounted => "-".into(),
                _ => us(Some(p.offset_ns)),
            };
            row.extend([p.cause.clone(), offset, us(Some(p.duration_ns))]);
            rows.push(row);
        }
    }
    let gap = what.gap();
    let start = match what {
        GapKind::Noise => "at (s from the start)",
        GapKind::Timer => "deadline (s from the start)",
        GapKind::Wakeup => "woken at (s from the start)",
    };
    Table {
        caption: format!(
            "{subject}: the {} largest {gap}s, part by part in time order",
            a.top.len()
        ),
        headers: [
            "#",
            start,
            &format!("{gap} (µs)"),
            "part",
            "offset (µs)",
            "duration (µs)",
        ]
        .map(String::from)
        .to_vec(),
        rows,
        note: Some(format!(
            "Offset: from the {gap}'s start. The unaccounted part is the {gap}'s time that no \
             event covers, summed over the {gap}, so it has no offset."
        )),
    }
}

// ---------------------------------------------------------------------------------------
// A watched application's threads (`watch`)

/// The `watch` section: what was watched and what it cost, a row per thread; then per
/// thread its wake-up delay distribution, its causes with the audit finding whose fix
/// would remove each, and its worst delays part by part.
fn watch_sections(
    r: &ResultFile,
    w: &crate::report::watch::WatchRecord,
    named: &dyn Fn(&str) -> String,
    warnings: &mut Vec<String>,
    file: &str,
) -> Vec<Section> {
    use crate::report::table::us;
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
    let dists = crate::report::watch::wakeup_dists(w);
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
                        crate::report::watch::NO_AUDIT
                    ));
                }
                if !a.causes.is_empty() {
                    tables.push(watch_cause_table(r, &who, a));
                }
                if !a.top.is_empty() {
                    tables.push(top_parts_table(GapKind::Wakeup, &format!("watch {who}"), a));
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
    use crate::report::figure::{Curves, DistId};
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
fn watch_summary_table(w: &crate::report::watch::WatchRecord) -> Table {
    use crate::report::table::us;
    let ms = |ns: u64| format!("{:.3}", ns as f64 / 1e6);
    let rows = (w.threads.iter())
        .map(|th| {
            vec![
                format!("{}:{}", th.comm, th.tid),
                crate::report::watch::policy_cell(th),
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
    use crate::report::table::us;
    let rows = (a.causes.iter())
        .map(|c| {
            let fix = match crate::report::watch::cause_findings(r, c).as_deref() {
                None => crate::report::watch::NO_AUDIT.to_string(),
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
            let fix = match crate::report::watch::pinned_note(r, c) {
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
fn measurements(heading: &str, r: &ResultFile) -> Section {
    let mut text: Vec<String> = r.run.warnings.clone();
    let (dists, unknown) = export::distributions(r);
    if unknown > 0 {
        text.push(format!(
            "{unknown} entries of a probe kind this version does not know were skipped \
             (a newer jitterscope wrote them)."
        ));
    }
    Section {
        heading: heading.into(),
        text,
        tables: summary_tables(&dists),
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
    let mut duration = format!(
        "{} (requested {})",
        seconds(run.actual_duration_ns),
        seconds(run.requested_duration_ns)
    );
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
    vec![
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
    ]
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
    let mut kinds: Vec<&str> = Vec::new();
    for d in dists {
        if !kinds.contains(&d.probe) {
            kinds.push(d.probe);
        }
    }
    kinds
        .into_iter()
        .map(|k| {
            let of_kind: Vec<&Dist> = dists.iter().filter(|d| d.probe == k).collect();
            summary_table(k, &of_kind)
        })
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
    let rows: Vec<Vec<String>> = dists
        .iter()
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
    Table {
        caption: format!("{probe}: summary (times in {})", u.name()),
        headers,
        rows,
        note: untrusted.then(|| UNCONFIRMED_NOTE.to_string()),
    }
}

/// Every plot of one file as a figure, and why some or all are missing: the page still
/// renders when plotting fails (no font, say).
fn figures(loaded: &Loaded) -> (Vec<Figure>, Option<String>) {
    let plots = match plot::result_plots(std::slice::from_ref(loaded)) {
        Ok(p) => p,
        Err(e) => return (Vec::new(), Some(format!("the plots are left out: {e}"))),
    };
    let mut figures = Vec::new();
    let mut failed: Vec<(String, plot::PlotError)> = Vec::new();
    for p in plots {
        match p.svg() {
            Ok(svg) => figures.push(Figure {
                series: p.is_series(),
                caption: p.title,
                svg,
            }),
            Err(e) => failed.push((p.name, e)),
        }
    }
    // One warning for them all: a missing font fails every plot the same way.
    let why = failed.first().map(|(name, e)| match failed.len() {
        1 => format!("plot {name} is left out: {e}"),
        n => format!("{n} plots are left out (the first, {name}: {e})"),
    });
    (figures, why)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::causes::{Attribution, CauseKind, CauseRow, GapBreakdown, Part};

    fn page_with_host(host: &str) -> Page {
        Page {
            title: "t <b>".into(),
            subtitle: None,
            warnings: vec!["w & <i>".into()],
            sections: vec![Section {
                heading: "h".into(),
                facts: vec![("Host".into(), host.into())],
                text: vec!["\"quoted\" <p>".into()],
                tables: vec![Table {
                    caption: "c".into(),
                    headers: vec!["key".into(), "p50 (ns)".into()],
                    rows: vec![vec!["<k>".into(), "12".into()]],
                    note: None,
                }],
                ..Section::default()
            }],
        }
    }

    #[test]
    fn text_is_escaped() {
        let out = render(&page_with_host("<script>alert(1)</script>"));
        assert!(!out.contains("<script"), "{out}");
        assert!(
            out.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
            "{out}"
        );
        assert!(
            out.contains("t &lt;b&gt;") && out.contains("w &amp; &lt;i&gt;"),
            "{out}"
        );
        assert!(out.contains("&lt;k&gt;") && !out.contains("<k>"), "{out}");
    }

    #[test]
    fn figures_are_inlined_as_markup() {
        let svg = r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 10 10"><text>a &lt; b</text></svg>"#;
        let mut page = page_with_host("h");
        page.sections[0].figures.push(Figure {
            caption: "latency (ns) <x>".into(),
            svg: format!("<?xml version=\"1.0\"?>\n{svg}"),
            series: false,
        });
        let out = render(&page);
        assert!(out.contains(&format!("<figure>{svg}<figcaption>")), "{out}");
        assert!(out.contains("latency (ns) &lt;x&gt;"), "{out}");
        assert!(!out.contains("<?xml"), "{out}");
    }

    #[test]
    fn numbers_are_right_aligned() {
        let out = render(&page_with_host("h"));
        assert!(out.contains(r#"<th class="num">p50 (ns)</th>"#), "{out}");
        assert!(out.contains(r#"<td class="num">12</td>"#), "{out}");
        assert!(out.contains("<th>key</th>"), "{out}");
        assert!(is_number("-") && is_number("1.5%") && is_number("3 *"));
        assert!(!is_number("cpu1") && !is_number(""));
    }

    #[test]
    fn the_page_needs_nothing_outside_it() {
        let out = render(&page_with_host("h"));
        for banned in ["<script", "src=", "href=", "url(", "@import", "<link"] {
            assert!(!out.contains(banned), "{banned}: {out}");
        }
        assert!(out.contains("@media print"), "{out}");
    }

    fn attribution(causes: Vec<(CauseKind, &str, f64)>, interrupted_ns: u64) -> Attribution {
        let row = |(kind, cause, share_pct): (CauseKind, &str, f64)| CauseRow {
            kind,
            cause: cause.into(),
            gaps: 3,
            occurrences: 4,
            largest_in: 3,
            total_ns: (share_pct * 1000.0) as u64,
            share_pct,
            median_ns: 1500,
            max_ns: 2500,
            period_ns: Some(4_000_000),
            tasks: Vec::new(),
        };
        Attribution {
            method: "tracefs <x86-tsc>".into(),
            gaps: 3,
            interrupted_ns,
            causes: causes.into_iter().map(row).collect(),
            top: vec![GapBreakdown {
                start_ns: 1_500_000_000,
                start_tsc: 7,
                duration_ns: 9000,
                parts: vec![
                    Part {
                        kind: CauseKind::Irq,
                        cause: "irq 9 <b>".into(),
                        offset_ns: 1000,
                        duration_ns: 6000,
                    },
                    Part {
                        kind: CauseKind::Unaccounted,
                        cause: "unaccounted".into(),
                        offset_ns: 0,
                        duration_ns: 3000,
                    },
                ],
            }],
            coincident_gaps: 1,
            coincidence_window_ns: 5000,
            unattributed_gaps: 0,
            events_read: 10,
            events_lost: 2,
            trace_cost: None,
        }
    }

    fn bare_result() -> ResultFile {
        let r = crate::report::ResultFile::parse(
            &std::fs::read_to_string("tests/fixtures/all-probes.json").unwrap(),
        );
        r.unwrap()
    }

    #[test]
    fn an_attribution_section_escapes_causes_and_cuts_nothing_it_cannot_fit() {
        let long = format!("task {}:1 (SCHED_OTHER nice 0)", "x".repeat(300));
        let a = attribution(
            vec![
                (
                    CauseKind::Task,
                    "task <script>alert(1)</script>:5 (x)",
                    60.0,
                ),
                (CauseKind::Task, &long, 30.0),
                (CauseKind::Unaccounted, "unaccounted", 10.0),
            ],
            90_000,
        );
        let r = bare_result();
        let named = |s: &str| s.to_string();
        let (section, error) = attribution_section(&r, GapKind::Noise, 1, &a, &named);
        let page = Page {
            sections: vec![section],
            ..Page::default()
        };
        let out = render(&page);
        assert!(!out.contains("<script") && !out.contains("<b>"), "{out}");
        assert!(
            out.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
            "{out}"
        );
        assert!(out.contains("irq 9 &lt;b&gt;"), "{out}");
        assert!(out.contains("2 of 12 trace events were lost"), "{out}");
        if error.is_none() {
            // The legend's long cause is cut with an ellipsis; the table keeps it whole.
            assert!(out.contains("xxx…\n</text>"), "{out}");
            assert!(out.contains(&long), "the table holds the whole name");
        }
    }

    #[test]
    fn no_causes_or_no_interrupted_time_give_no_bar_and_no_panic() {
        let r = bare_result();
        let named = |s: &str| s.to_string();
        for a in [
            attribution(Vec::new(), 0),
            attribution(vec![(CauseKind::Irq, "irq 1", 0.0)], 0),
            attribution(vec![(CauseKind::Irq, "irq 1", f64::NAN)], 5),
        ] {
            let (s, error) = attribution_section(&r, GapKind::Timer, 3, &a, &named);
            assert!(error.is_none());
            assert!(s.lead.is_empty(), "{s:?}");
            assert!(s.text.iter().any(|t| t.contains("no bar")), "{s:?}");
            render(&Page {
                sections: vec![s],
                ..Page::default()
            });
        }
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
