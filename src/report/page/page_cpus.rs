//! The page's section for each per-CPU probe kind (noise, timer), made to read the same
//! at 1 CPU and at 192: every CPU at once first, then each CPU's detail folded.
//!
//! - The CPU × time heat map of the largest gap per slice of time (`time_heatmap`), when
//!   the kind has two CPUs or more.
//! - The causes as one CPU × cause matrix (`cause_matrix`), when two CPUs or more were
//!   traced.
//! - The largest events of all CPUs as one table (each with its CPU and time), and the
//!   largest traced gaps of all CPUs part by part.
//! - Every CPU's percentile curve in one plot, the standouts in colour, above [`FEW`] CPUs.
//! - Per CPU, a `<details>` fold. Up to [`FEW`] CPUs, each has its plots (series,
//!   distribution, cause bar) and tables. Above, only the CPUs that stand out (the
//!   largest gap, the most and least time lost or the highest and lowest p99) have plots:
//!   the other CPUs' plots would repeat the heat map and the overlaid curves 191 times and
//!   make the page tens of megabytes. Their folds keep their cause tables.

use crate::probes::{noise::NoiseEntry, timer::TimerEntry};
use crate::report::ResultFile;
use crate::report::export;
use crate::report::export::plot::Plot;
use crate::report::page::html::{Figure, Fold, SHADES, Section, Shaded, Table};
use crate::report::page::time_heatmap::TimeHeatmap;
use crate::report::result::dist::Dist;
use crate::report::terminal::cause_matrix::{CauseMatrix, MAX_CAUSES};
use crate::report::terminal::group::{self, Grouping};
use crate::report::terminal::table::us;
use crate::report::terminal::verdict::{NOISE_KEYS, duration_words};
use crate::report::views::attribution::{self, Words, notes};
use crate::report::views::{self, EntryView, timer::TIMER_KEYS};
use crate::stats::causes::{Attribution, CauseKind, GapBreakdown};

/// Up to this many CPUs of a kind, every CPU's plots are drawn.
pub const FEW: usize = 4;
/// Rows of the table of the largest events across CPUs.
const LARGEST_ROWS: usize = 30;
/// Gaps in the table of the largest gaps part by part across CPUs.
const TOP_GAPS: usize = 10;
/// Causes in the table of a CPU that does not stand out.
const SHORT_CAUSES: usize = 12;

/// Draws plots into figures, remembering which could not be drawn.
#[derive(Default)]
pub struct Drawer {
    failed: Vec<(String, String)>,
}

impl Drawer {
    /// The plot as a figure (captioned with its title unless `caption` is given); `None`,
    /// remembered, when it cannot be drawn.
    pub fn figure(&mut self, p: &Plot, caption: Option<String>) -> Option<Figure> {
        match p.svg() {
            Ok(svg) => Some(Figure {
                caption: caption.unwrap_or_else(|| p.title.clone()),
                svg,
                series: p.is_series(),
            }),
            Err(e) => {
                self.failed.push((p.name.clone(), e.to_string()));
                None
            }
        }
    }

    /// One warning for every plot left out: a font that fails, fails them all alike.
    pub fn warning(&self) -> Option<String> {
        let (name, e) = self.failed.first()?;
        Some(match self.failed.len() {
            1 => format!("plot {name} is left out: {e}"),
            n => format!("{n} plots are left out (the first, {name}: {e})"),
        })
    }
}

/// The per-CPU kinds, which have a section each.
pub const KINDS: [GapKind; 2] = [GapKind::Noise, GapKind::Timer];

/// Whether the probe is one of [`KINDS`], whose plots are in its own section.
pub fn per_cpu(probe: &str) -> bool {
    GapKind::of_probe(probe).is_some()
}

/// Whose gaps an attribution splits: noise's interruptions, timer's late wake-ups, a
/// watched thread's delays.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum GapKind {
    Noise,
    Timer,
    /// A watched thread's wake-up delays (`watch`).
    Wakeup,
}

impl GapKind {
    /// The per-CPU kind (of [`KINDS`]) of the probe.
    pub fn of_probe(probe: &str) -> Option<GapKind> {
        KINDS.into_iter().find(|k| k.probe() == probe)
    }

    pub fn probe(self) -> &'static str {
        match self {
            GapKind::Noise => "noise",
            GapKind::Timer => "timer",
            GapKind::Wakeup => "watch",
        }
    }

    /// The terminal's words for the kind (`views::attribution`); a watched thread's
    /// delays are the page's alone.
    fn words(self) -> Option<&'static Words> {
        match self {
            GapKind::Noise => Some(&attribution::NOISE),
            GapKind::Timer => Some(&attribution::TIMER),
            GapKind::Wakeup => None,
        }
    }

    /// What one of its gaps is called.
    pub fn gap(self) -> &'static str {
        self.words().map_or("delay", |w| w.gap)
    }

    /// What its causes' shares are of: "interrupted time", "lateness", "delay".
    pub fn of(self) -> &'static str {
        self.words().map_or("delay", |w| w.of)
    }

    /// Whether its notes set a CPU's steal beside the unaccounted time.
    fn steal(self) -> bool {
        self.words().is_some_and(|w| w.steal)
    }
}

/// One per-CPU entry of a kind: its first distribution (the one with the series) and
/// its attribution when it was traced.
struct CpuEntry<'a> {
    cpu: usize,
    dist: Dist<'a>,
    attribution: Option<&'a Attribution>,
}

impl<'a> CpuEntry<'a> {
    fn of(e: &'a dyn EntryView, cpu: usize, attribution: Option<&'a Attribution>) -> Option<Self> {
        let mut dists = Vec::new();
        e.dists(&mut dists);
        let dist = dists.into_iter().next()?;
        Some(CpuEntry {
            cpu,
            dist,
            attribution,
        })
    }

    fn key(&self) -> &str {
        &self.dist.key
    }
}

/// The sections of `r`'s noise and timer entries, a section per kind that has any;
/// `plots` are the file's (undrawn), of which the per-CPU ones shown are drawn here.
pub fn kind_sections(
    r: &ResultFile,
    plots: &[Plot],
    drawer: &mut Drawer,
    named: &dyn Fn(&str) -> String,
) -> Vec<Section> {
    let noise: Vec<&NoiseEntry> = r.entries().collect();
    let timer: Vec<&TimerEntry> = r.entries().collect();
    let kinds = [
        (
            GapKind::Noise,
            (noise.iter())
                .filter_map(|e| CpuEntry::of(*e, e.cpu, e.attribution.as_ref()))
                .collect::<Vec<_>>(),
        ),
        (
            GapKind::Timer,
            (timer.iter())
                .filter_map(|e| CpuEntry::of(*e, e.cpu, e.attribution.as_ref()))
                .collect(),
        ),
    ];
    let mut out = Vec::new();
    for (kind, entries) in kinds {
        if entries.is_empty() {
            continue;
        }
        // The grouping of the terminal's tables, whose members are the entries in order.
        let grouping = match kind {
            GapKind::Timer => views::timer::grouping(&timer),
            _ => views::noise::grouping(r),
        };
        out.push(kind_section(
            r, kind, &entries, &grouping, plots, drawer, named,
        ));
    }
    out
}

fn kind_section(
    r: &ResultFile,
    kind: GapKind,
    entries: &[CpuEntry<'_>],
    grouping: &Grouping,
    plots: &[Plot],
    drawer: &mut Drawer,
    named: &dyn Fn(&str) -> String,
) -> Section {
    let probe = kind.probe();
    let cpus = crate::engine::cpu::CpuList::from_cpus(entries.iter().map(|e| e.cpu).collect());
    let many = entries.len() > FEW;
    let standouts = if many {
        standouts(kind, entries, grouping)
    } else {
        Vec::new()
    };
    let traced = entries.iter().filter(|e| e.attribution.is_some()).count();
    let mut s = Section {
        heading: named(&match cpus.len() {
            1 => format!("{probe}: CPU {cpus}"),
            n => format!("{probe}: CPUs {cpus} ({n} CPUs)"),
        }),
        ..Section::default()
    };
    if let Some(f) = heatmap_figure(kind, entries) {
        s.lead.push(f);
    }
    if traced >= 2
        && let Some(m) = matrix(kind, entries)
    {
        s.matrices.push(m);
    }
    let largest = largest_table(kind, entries);
    let gaps = (entries.iter())
        .filter_map(|e| Some((e.cpu, e.attribution?)))
        .collect::<Vec<_>>();
    if gaps.iter().any(|(_, a)| !a.top.is_empty()) && entries.len() > 1 {
        s.tables.push(parts_across_cpus(kind, &gaps));
    }
    if many {
        s.figures
            .extend(overlaid(kind, entries, &standouts, plots, drawer));
        s.text
            .push(intro(kind, entries.len(), traced, &standouts, entries));
        // Said once for every CPU (lost events, gaps not attributed …): only the
        // standouts' folds say their own.
        s.text.extend(notes(r, &gaps, kind.gap(), kind.steal()));
    }
    let mut rest = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        let reasons = standouts
            .iter()
            .find(|(j, _)| *j == i)
            .map(|(_, r)| r.as_slice());
        let full = !many || reasons.is_some();
        let fold = cpu_fold(r, kind, e, full, reasons.unwrap_or(&[]), plots, drawer);
        let fold = fold.map(|f| Fold {
            open: entries.len() == 1,
            ..f
        });
        match full {
            true => s.folds.extend(fold),
            false => rest.extend(fold),
        }
    }
    // One CPU: its plots first, in its open fold, then its largest events.
    match (entries.len(), s.folds.first_mut()) {
        (1, Some(only)) => only.tables.push(largest),
        _ => s.tables.insert(0, largest),
    }
    // The CPUs that do not stand out, in one fold: their list alone would be a screen
    // long at 192 CPUs.
    if !rest.is_empty() {
        s.folds.push(Fold {
            summary: format!("The other {} CPUs: each one's causes", rest.len()),
            folds: rest,
            ..Fold::default()
        });
    }
    s
}

/// What the section holds, for a kind of many CPUs.
fn intro(
    kind: GapKind,
    n: usize,
    traced: usize,
    standouts: &[(usize, Vec<String>)],
    entries: &[CpuEntry<'_>],
) -> String {
    let named: Vec<String> = (standouts.iter())
        .map(|(i, why)| format!("CPU {} ({})", entries[*i].cpu, why.join(", ")))
        .collect();
    let folds = match traced {
        0 => "only they have a fold".to_string(),
        _ => "every traced CPU's fold holds its cause table".to_string(),
    };
    format!(
        "{n} CPUs. The heat map shows every CPU over the whole run{}; the tables, the \
         largest {}s of all CPUs. Each CPU's detail is folded below. Plots are drawn for \
         the CPUs that stand out: {}; {folds}.",
        if traced >= 2 {
            ", the matrix the causes of every traced CPU"
        } else {
            ""
        },
        kind.gap(),
        named.join("; ")
    )
}

/// The CPUs that stand out, by index, each with why: the largest single gap; the
/// grouping's extremes by its first key, the most and least time lost (noise) or the
/// highest and lowest p99 (timer); and the grouping's outliers, which the terminal names
/// too (a largest cause no other CPU shares, a figure outside its group's band).
fn standouts(kind: GapKind, entries: &[CpuEntry<'_>], g: &Grouping) -> Vec<(usize, Vec<String>)> {
    let largest = (0..entries.len())
        .filter(|&i| entries[i].dist.summary.max_ns.is_some())
        .max_by_key(|&i| (entries[i].dist.summary.max_ns, std::cmp::Reverse(i)));
    let s = |i: usize| &entries[i].dist;
    let first = |i: usize| match kind {
        GapKind::Noise => format!("{:.2} %", s(i).interrupted_pct.unwrap_or(0.0)),
        _ => duration_words(s(i).summary.p99_ns.unwrap_or(0)),
    };
    let (most, least, keys) = match kind {
        GapKind::Noise => ("the most time lost", "the least time lost", &NOISE_KEYS[..]),
        _ => ("the highest p99", "the lowest p99", &TIMER_KEYS[..]),
    };
    let mut picks: Vec<(usize, String)> = Vec::new();
    picks.extend(largest.map(|i| {
        let max = duration_words(s(i).summary.max_ns.unwrap_or(0));
        (i, format!("the largest {}, {max}", kind.gap()))
    }));
    picks.extend(g.noisiest.map(|i| (i, format!("{most}, {}", first(i)))));
    picks.extend(g.quietest.map(|i| (i, format!("{least}, {}", first(i)))));
    picks.extend(
        (g.outliers().into_iter())
            .map(|(i, why)| (i, format!("an outlier, {}", group::why_words(why, keys)))),
    );
    let mut out: Vec<(usize, Vec<String>)> = Vec::new();
    for (i, why) in picks.into_iter().filter(|(i, _)| *i < entries.len()) {
        match out.iter_mut().find(|(j, _)| *j == i) {
            Some((_, reasons)) => reasons.push(why),
            None => out.push((i, vec![why])),
        }
    }
    out
}

/// The kind's heat map, when it has two CPUs or more.
fn heatmap_figure(kind: GapKind, entries: &[CpuEntry<'_>]) -> Option<Figure> {
    if entries.len() < 2 {
        return None;
    }
    let series: Vec<_> = entries.iter().filter_map(|e| e.dist.series).collect();
    let map = TimeHeatmap::of(&series)?;
    let title = format!(
        "{}: {} per {} of time, every CPU",
        kind.probe(),
        map.gap,
        crate::report::terminal::table::interval_words(map.column_ns)
    );
    let peak = map.peak().map_or_else(String::new, |(cpu, col, ns)| {
        let at = col as f64 * map.column_ns as f64 / 1e9;
        format!(
            " The largest: CPU {cpu}, {} at {at:.1} s.",
            duration_words(ns)
        )
    });
    Some(Figure {
        caption: format!(
            "{title} (colour, {}, on a log scale). A row per CPU, time across; a dark \
             vertical band is a stall that hit many CPUs at once, a dark row a CPU that \
             is noisy throughout.{peak}",
            map.unit()
        ),
        svg: map.svg(&title),
        series: true,
    })
}

/// The cause matrix of the kind's traced CPUs, cells shaded by share.
fn matrix(kind: GapKind, entries: &[CpuEntry<'_>]) -> Option<Shaded> {
    let traced: Vec<(usize, &Attribution)> = (entries.iter())
        .filter_map(|e| Some((e.cpu, e.attribution?)))
        .collect();
    let m = CauseMatrix::of(&traced)?;
    let gap = kind.gap();
    let mut headers = vec![
        "CPU".to_string(),
        format!("{gap}s"),
        format!("{} (ms)", kind.of()),
    ];
    headers.extend(m.columns.iter().map(|c| format!("{} (%)", c.cause)));
    let mut rows = Vec::new();
    let mut shades = Vec::new();
    for row in &m.rows {
        let mut cells = vec![
            row.cpu.to_string(),
            row.gaps.to_string(),
            format!("{:.3}", row.interrupted_ns as f64 / 1e6),
        ];
        cells.extend(row.shares.iter().map(|s| format!("{s:.1}")));
        rows.push(cells);
        let mut shade = vec![0u8; 3];
        shade.extend(row.shares.iter().map(|&s| share_shade(s)));
        shades.push(shade);
    }
    Some(Shaded {
        table: Table {
            caption: format!(
                "{}: the causes of every traced CPU, as shares of its {} (%)",
                kind.probe(),
                kind.of()
            ),
            headers,
            rows,
            note: Some(format!(
                "The columns are the {MAX_CAUSES} causes with the most time over all CPUs, \
                 most first; the rest are summed as other. A task's pid is left out, and a \
                 per-CPU kernel thread (kworker/N:*, ksoftirqd/N …) is one column, N being the \
                 row's CPU. Each CPU's whole cause table is in its fold below."
            )),
        },
        shades,
    })
}

/// The shade of a share: none, under 1 %, 5 %, 20 %, 50 %, and above.
fn share_shade(pct: f64) -> u8 {
    let edges = [0.0, 1.0, 5.0, 20.0, 50.0];
    let s = edges.iter().filter(|&&e| pct > e).count() as u8;
    s.min(SHADES - 1)
}

/// The largest events of every CPU of the kind, largest first, each with its CPU.
fn largest_table(kind: GapKind, entries: &[CpuEntry<'_>]) -> Table {
    let mut events: Vec<(usize, &crate::stats::events::EventOut)> = (entries.iter())
        .filter_map(|e| Some((e.cpu, e.dist.series.as_ref()?.largest)))
        .flat_map(|(cpu, l)| l.iter().map(move |ev| (cpu, ev)))
        .collect();
    // As the terminal merges them (`views::largest_events`): on a tie, in file order.
    events.sort_by_key(|(_, e)| std::cmp::Reverse(e.duration_ns));
    let kept = events.len();
    events.truncate(LARGEST_ROWS);
    let u = export::unit_of(kind.probe());
    let gap = entries
        .first()
        .and_then(|e| e.dist.series.as_ref())
        .map_or("events", |s| s.gap);
    let of = match entries.len() {
        1 => format!("CPU {}", entries[0].cpu),
        n => format!("all {n} CPUs"),
    };
    Table {
        caption: format!(
            "{}: the {} largest events of {of} ({gap}), largest first",
            kind.probe(),
            events.len()
        ),
        headers: vec![
            "#".into(),
            "CPU".into(),
            "at (s from the start)".into(),
            u.header("duration"),
            "TSC at start".into(),
        ],
        rows: (events.iter().enumerate())
            .map(|(i, (cpu, e))| {
                vec![
                    (i + 1).to_string(),
                    cpu.to_string(),
                    format!("{:.6}", e.start_ns as f64 / 1e9),
                    u.cell(Some(e.duration_ns)),
                    e.start_tsc.to_string(),
                ]
            })
            .collect(),
        note: Some(format!(
            "Of the {kept} largest events kept (each CPU keeps its largest); when each \
             began, in seconds from the start of the run and as the counter's value (the \
             timebase of x86-tsc traces)."
        )),
    }
}

/// The largest traced gaps of all CPUs, part by part, each with its CPU.
fn parts_across_cpus(kind: GapKind, traced: &[(usize, &Attribution)]) -> Table {
    let mut gaps: Vec<(Option<usize>, &GapBreakdown)> = (traced.iter())
        .flat_map(|(cpu, a)| a.top.iter().map(move |g| (Some(*cpu), g)))
        .collect();
    // As the terminal merges them (`views::attribution`): on a tie, in file order.
    gaps.sort_by_key(|(_, g)| std::cmp::Reverse(g.duration_ns));
    gaps.truncate(TOP_GAPS);
    top_parts_table(kind, &format!("{}, all traced CPUs", kind.probe()), &gaps)
}

/// Every CPU's percentile curve of the kind's first metric in one plot, the standouts
/// named in colour.
fn overlaid(
    kind: GapKind,
    entries: &[CpuEntry<'_>],
    standouts: &[(usize, Vec<String>)],
    plots: &[Plot],
    drawer: &mut Drawer,
) -> Option<Figure> {
    let metric = entries.first()?.dist.metric;
    let of = |key: &str| {
        plots.iter().find(|p| {
            p.is_percentiles()
                && p.subject.as_ref().is_some_and(|s| {
                    s.probe == kind.probe() && s.key == key && s.metric == Some(metric)
                })
        })
    };
    let all: Vec<&Plot> = entries.iter().filter_map(|e| of(e.key())).collect();
    let named: Vec<(String, &Plot)> = (standouts.iter())
        .filter_map(|(i, why)| {
            let e = &entries[*i];
            Some((format!("CPU {} ({})", e.cpu, why[0]), of(e.key())?))
        })
        .collect();
    let what = format!("{} {metric}, every CPU", kind.probe());
    let plot =
        Plot::percentiles_overlaid(&format!("{}-every-cpu", kind.probe()), &what, &all, &named)?;
    let caption = format!(
        "{}. Each CPU is a grey line, the CPUs that stand out are in colour; CPUs whose \
         curves agree lie on one another.",
        plot.title
    );
    drawer.figure(&plot, Some(caption))
}

/// A CPU's fold: with `full`, its plots and every table; else, when it was traced, its
/// cause table (none otherwise). `reasons`: why it stands out.
fn cpu_fold(
    r: &ResultFile,
    kind: GapKind,
    e: &CpuEntry<'_>,
    full: bool,
    reasons: &[String],
    plots: &[Plot],
    drawer: &mut Drawer,
) -> Option<Fold> {
    if !full && e.attribution.is_none() {
        return None;
    }
    let s = &e.dist.summary;
    let mut summary = format!(
        "CPU {}: p50 {}, p99 {}, max {}",
        e.cpu,
        s.p50_ns.map_or("-".into(), duration_words),
        s.p99_ns.map_or("-".into(), duration_words),
        s.max_ns.map_or("-".into(), duration_words),
    );
    if let Some(pct) = e.dist.interrupted_pct {
        summary.push_str(&format!(", {pct:.2} % of the time lost"));
    }
    if !reasons.is_empty() {
        summary.push_str(&format!(" (stands out: {})", reasons.join("; ")));
    }
    let mut fold = Fold {
        summary,
        ..Fold::default()
    };
    if full {
        let mine = (plots.iter()).filter(|p| {
            p.subject
                .as_ref()
                .is_some_and(|s| s.probe == kind.probe() && s.key == e.key())
        });
        // The series first, then the distributions.
        let (series, dists): (Vec<&Plot>, Vec<&Plot>) = mine.partition(|p| p.is_series());
        for p in series.into_iter().chain(dists) {
            fold.figures.extend(drawer.figure(p, None));
        }
    }
    if let Some(a) = e.attribution {
        let (text, bar, tables) = attribution_detail(r, kind, e.cpu, a, full, drawer);
        fold.text.extend(text);
        fold.figures.extend(bar);
        fold.tables.extend(tables);
    }
    Some(fold)
}

/// A traced CPU's detail: what was attributed and the notes, its bar of cause shares,
/// its cause table and (with `full`) its largest gaps part by part. Without `full`, the
/// first line and the cause table alone, its note left to the section's matrix.
fn attribution_detail(
    r: &ResultFile,
    what: GapKind,
    cpu: usize,
    a: &Attribution,
    full: bool,
    drawer: &mut Drawer,
) -> (Vec<String>, Option<Figure>, Vec<Table>) {
    let probe = what.probe();
    let mut text = vec![format!(
        "{} {}s attributed, {} of {} in all. Method: {}",
        a.gaps,
        what.gap(),
        duration_words(a.interrupted_ns),
        what.of(),
        a.method
    )];
    let mut tables = Vec::new();
    if !full {
        if !a.causes.is_empty() {
            tables.push(short_cause_table(what, cpu, a));
        }
        return (text, None, tables);
    }
    text.extend(notes(r, &[(cpu, a)], what.gap(), what.steal()));
    let segments = crate::report::result::figure::cause_shares(a);
    let total: f64 = segments.iter().map(|s| s.share_pct).sum();
    let mut bar = None;
    if segments.is_empty() || total <= 0.0 || a.interrupted_ns == 0 {
        text.push(format!(
            "No {} was attributed to a cause on CPU {cpu}, so there is no bar of shares.",
            what.of()
        ));
    } else {
        let title = format!("{probe} CPU {cpu}: share of {} by cause (%)", what.of());
        let plot = Plot::cause_shares(&format!("{probe}-cpu{cpu}-causes"), &title, segments);
        let caption = format!(
            "{title}. Each kind of cause has its colour (the legend names every segment); \
             causes under {} % are grouped as other.",
            crate::report::result::figure::SMALL_SHARE_PCT
        );
        bar = drawer.figure(&plot, Some(caption));
    }
    if !a.causes.is_empty() {
        tables.push(cause_table(what, cpu, a));
    }
    if !a.top.is_empty() {
        let gaps: Vec<(Option<usize>, &GapBreakdown)> = a.top.iter().map(|g| (None, g)).collect();
        tables.push(top_parts_table(what, &format!("{probe} CPU {cpu}"), &gaps));
    }
    (text, bar, tables)
}

/// The cause table: one row per cause, largest total first, as stored.
fn cause_table(what: GapKind, cpu: usize, a: &Attribution) -> Table {
    let rows = (a.causes.iter())
        .map(|c| {
            vec![
                c.cause.clone(),
                export::serde_name(&c.kind),
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
            "Share: of the {of} of every attributed {gap}. Median and max: the \
             cause's time in one {gap} it took part in. Times run: how often it ran inside \
             them (one interrupt, one time slice). Period: the interval its {gap}s recur at, \
             when most recur at one. Unaccounted: the time no event covers (interrupt entry \
             and exit, the hypervisor, SMIs).",
            gap = what.gap(),
            of = what.of()
        )),
    }
}

/// The cause table of a CPU that does not stand out: its [`SHORT_CAUSES`] causes with
/// the most time, in the columns the matrix leaves out (each cause's gaps, total and
/// largest), the rest counted in the note.
fn short_cause_table(what: GapKind, cpu: usize, a: &Attribution) -> Table {
    let rows = (a.causes.iter().take(SHORT_CAUSES))
        .map(|c| {
            let cells = [c.gaps.to_string(), us(Some(c.total_ns))];
            let cells = cells
                .into_iter()
                .chain([format!("{:.1}", c.share_pct), us(Some(c.max_ns))]);
            std::iter::once(c.cause.clone()).chain(cells).collect()
        })
        .collect();
    let rest = a.causes.get(SHORT_CAUSES..).unwrap_or_default();
    let gap = what.gap();
    Table {
        caption: format!(
            "{} CPU {cpu}: the causes of {} {gap}s",
            what.probe(),
            a.gaps
        ),
        headers: [
            "cause",
            &format!("{gap}s"),
            "total (µs)",
            "share (%)",
            "max (µs)",
        ]
        .map(String::from)
        .to_vec(),
        rows,
        note: (!rest.is_empty()).then(|| {
            let share: f64 = rest.iter().map(|c| c.share_pct).sum();
            format!(
                "And {} causes more, {share:.1} % of the time in all.",
                rest.len()
            )
        }),
    }
}

/// The largest gaps of `subject` ("noise CPU 1", "watch js-fixture:22388", "noise, all
/// traced CPUs"), part by part: a row per part, the gap's own cells on its first; with a
/// CPU column when the gaps come with their CPUs.
pub fn top_parts_table(
    what: GapKind,
    subject: &str,
    gaps: &[(Option<usize>, &GapBreakdown)],
) -> Table {
    let with_cpu = gaps.iter().any(|(cpu, _)| cpu.is_some());
    let mut rows = Vec::new();
    for (i, (cpu, g)) in gaps.iter().enumerate() {
        let mut gap_cells = vec![(i + 1).to_string()];
        if with_cpu {
            gap_cells.push(cpu.map_or_else(String::new, |c| c.to_string()));
        }
        gap_cells.push(format!("{:.6}", g.start_ns as f64 / 1e9));
        gap_cells.push(us(Some(g.duration_ns)));
        let blank = || vec![String::new(); gap_cells.len()];
        if g.parts.is_empty() {
            let mut row = gap_cells.clone();
            row.extend(["no event".into(), "-".into(), "-".into()]);
            rows.push(row);
        }
        for (k, p) in g.parts.iter().enumerate() {
            let mut row = if k == 0 { gap_cells.clone() } else { blank() };
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
    let mut headers = vec!["#".to_string()];
    if with_cpu {
        headers.push("CPU".into());
    }
    headers.extend(
        [
            start,
            &format!("{gap} (µs)"),
            "part",
            "offset (µs)",
            "duration (µs)",
        ]
        .map(String::from),
    );
    Table {
        caption: format!(
            "{subject}: the {} largest {gap}s, part by part in time order",
            gaps.len()
        ),
        headers,
        rows,
        note: Some(format!(
            "Offset: from the {gap}'s start. The unaccounted part is the {gap}'s time that no \
             event covers, summed over the {gap}, so it has no offset."
        )),
    }
}

/// The 16-CPU host's result `name` (`tests/fixtures/host16/NAME.json.gz`), with `edit`
/// applied to its JSON.
#[cfg(test)]
pub(crate) fn host16(name: &str, edit: impl FnOnce(&mut serde_json::Value)) -> ResultFile {
    use std::io::Read;
    let f = std::fs::File::open(format!("tests/fixtures/host16/{name}.json.gz")).unwrap();
    let mut text = String::new();
    flate2::read::GzDecoder::new(f)
        .read_to_string(&mut text)
        .unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    edit(&mut v);
    ResultFile::parse(&v.to_string()).unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::page::html::{Page, render};
    use crate::stats::causes::{CauseRow, Part};

    fn attribution(causes: Vec<(CauseKind, &str, f64)>, interrupted_ns: u64) -> Attribution {
        let row = |(kind, cause, share_pct): (CauseKind, &str, f64)| CauseRow {
            occurrences: 4,
            share_pct,
            median_ns: 1500,
            max_ns: 2500,
            period_ns: Some(4_000_000),
            ..CauseRow::made_up(kind, cause, 3, 3, (share_pct * 1000.0) as u64)
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

            reader_budget: None,
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
        let mut drawer = Drawer::default();
        let (text, bar, tables) = attribution_detail(&r, GapKind::Noise, 1, &a, true, &mut drawer);
        let drew = bar.is_some();
        let section = Section {
            text,
            figures: bar.into_iter().collect(),
            tables,
            ..Section::default()
        };
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
        assert_eq!(drew, drawer.warning().is_none());
        if drew {
            // The legend's long cause is cut with an ellipsis; the table keeps it whole.
            assert!(out.contains("xxx…\n</text>"), "{out}");
            assert!(out.contains(&long), "the table holds the whole name");
        }
    }

    #[test]
    fn no_causes_or_no_interrupted_time_give_no_bar_and_no_panic() {
        let r = bare_result();
        for a in [
            attribution(Vec::new(), 0),
            attribution(vec![(CauseKind::Irq, "irq 1", 0.0)], 0),
            attribution(vec![(CauseKind::Irq, "irq 1", f64::NAN)], 5),
        ] {
            let mut drawer = Drawer::default();
            let (text, bar, _) = attribution_detail(&r, GapKind::Timer, 3, &a, true, &mut drawer);
            assert!(drawer.warning().is_none());
            assert!(bar.is_none());
            assert!(text.iter().any(|t| t.contains("no bar")), "{text:?}");
        }
    }

    #[test]
    fn equal_events_across_cpus_are_listed_as_the_terminal_lists_them() {
        // The CPUs in the file 15 down to 1, each one's largest event and largest traced
        // gap of one length: the terminal keeps them in file order.
        let r = host16_traced_with(|v| {
            let probes = v["probes"].as_array_mut().unwrap();
            probes.reverse();
            for e in probes.iter_mut() {
                e["largest"][0]["duration_ns"] = 99_000_000.into();
                e["attribution"]["top"][0]["duration_ns"] = 99_000_000.into();
            }
        });
        let file_order: Vec<String> = (r.entries::<NoiseEntry>())
            .map(|e| e.cpu.to_string())
            .collect();
        assert_eq!(file_order[0], "15");
        let terminal = crate::report::views::largest_events(&r, 15);
        let terminal: Vec<String> = (terminal.lines())
            .filter_map(|l| {
                let mut cells = l.split_whitespace();
                cells.next()?.parse::<usize>().ok()?;
                cells.next().map(String::from)
            })
            .collect();
        assert_eq!(terminal, file_order, "the terminal's order");
        let plots = Vec::new();
        let mut drawer = Drawer::default();
        let sections = kind_sections(&r, &plots, &mut drawer, &|s: &str| s.to_string());
        let cpus = |t: &Table| -> Vec<String> {
            (t.rows.iter())
                .filter(|row| !row[0].is_empty())
                .map(|row| row[1].clone())
                .collect()
        };
        let largest = &sections[0].tables[0];
        assert_eq!(cpus(largest)[..15], file_order[..], "{}", largest.caption);
        let gaps = &sections[0].tables[1];
        assert_eq!(cpus(gaps)[..], file_order[..10], "{}", gaps.caption);
    }

    #[test]
    fn timer_causes_are_shares_of_lateness_not_interrupted_time() {
        let r = bare_result();
        let a = attribution(vec![(CauseKind::Irq, "irq 1", 60.0)], 90_000);
        let mut drawer = Drawer::default();
        let (text, bar, tables) = attribution_detail(&r, GapKind::Timer, 3, &a, true, &mut drawer);
        assert!(
            text[0].contains("90.0 µs of lateness in all"),
            "{}",
            text[0]
        );
        assert!(
            tables[0]
                .note
                .as_ref()
                .unwrap()
                .contains("Share: of the lateness")
        );
        if let Some(bar) = bar {
            assert!(
                bar.caption.contains("share of lateness by cause (%)"),
                "{}",
                bar.caption
            );
        }
        let t: &TimerEntry = r.entries().next().unwrap();
        let entries: Vec<CpuEntry> = (1..=2)
            .map(|cpu| CpuEntry::of(t, cpu, Some(&a)).unwrap())
            .collect();
        let m = matrix(GapKind::Timer, &entries).unwrap().table;
        assert_eq!(m.headers[2], "lateness (ms)");
        assert!(
            m.caption.ends_with("as shares of its lateness (%)"),
            "{}",
            m.caption
        );
        let all = format!("{text:?} {tables:?} {:?} {:?}", m.caption, m.headers);
        assert!(!all.contains("interrupted"), "{all}");
    }

    /// The 16-CPU host's traced noise (CPUs 1-15), as committed.
    fn host16_traced() -> ResultFile {
        host16_traced_with(|_| {})
    }

    /// The same with `edit` applied to its JSON.
    fn host16_traced_with(edit: impl FnOnce(&mut serde_json::Value)) -> ResultFile {
        host16("noise-traced-15cpu", edit)
    }

    #[test]
    fn issue29_the_page_names_the_groupings_outliers_as_the_terminal_does() {
        // One CPU's p99 a hundred times the others': the grouping sets it apart ("p99
        // high"), neither the most nor the least time lost nor the largest gap.
        let mut cpu = None;
        let r = host16_traced_with(|v| {
            let probes = v["probes"].as_array_mut().unwrap();
            let e = probes.iter_mut().find(|e| e["cpu"] == 7).unwrap();
            let p99 = e["summary"]["p99_ns"].as_u64().unwrap();
            e["summary"]["p99_ns"] = (p99 * 100).into();
            cpu = Some(7);
        });
        let cpu = cpu.unwrap();
        let g = views::noise::grouping(&r);
        let entries: Vec<&NoiseEntry> = r.entries().collect();
        let out = g.outliers();
        assert!(
            out.iter().any(|(i, _)| entries[*i].cpu == cpu),
            "the grouping names CPU {cpu}: {out:?}"
        );
        let plots =
            crate::report::export::plot::result_plots(&[("n.json".into(), r.clone())]).unwrap();
        let mut drawer = Drawer::default();
        let sections = kind_sections(&r, &plots, &mut drawer, &|s: &str| s.to_string());
        let s = &sections[0];
        let named = format!("CPU {cpu}: ");
        let fold = (s.folds.iter())
            .find(|f| f.summary.starts_with(&named))
            .unwrap_or_else(|| panic!("CPU {cpu} has a fold of its own"));
        assert!(
            fold.summary.contains("an outlier, p99 high"),
            "{}",
            fold.summary
        );
        assert!(s.text[0].contains("an outlier, p99 high)"), "{}", s.text[0]);
    }

    /// Review 2 of issue 29: above a few CPUs only the standouts' folds said their notes,
    /// so a CPU that did not stand out lost its trace events and unattributed gaps
    /// unsaid on the page (the terminal said them, across CPUs).
    #[test]
    fn a_page_of_many_cpus_says_every_cpus_lost_events() {
        let mut r = host16_traced();
        for p in r.probes.iter_mut() {
            if let crate::report::result::ProbeEntry::Noise(e) = p
                && e.cpu == 4
            {
                let a = e.attribution.as_mut().expect("traced");
                a.events_lost = 4321;
                a.unattributed_gaps = 77;
            }
        }
        let plots =
            crate::report::export::plot::result_plots(&[("n.json".into(), r.clone())]).unwrap();
        let mut drawer = Drawer::default();
        let sections = kind_sections(&r, &plots, &mut drawer, &|s: &str| s.to_string());
        let page = render(&Page {
            sections,
            ..Page::default()
        });
        assert!(page.contains("4321 of "), "lost events unsaid");
        assert!(
            page.contains("trace events were lost, on CPU 4"),
            "lost events unsaid"
        );
        assert!(
            page.contains("77 gaps on CPU 4 were not attributed"),
            "unattributed unsaid"
        );
    }

    #[test]
    fn fifteen_traced_cpus_give_a_heat_map_a_matrix_and_three_standouts() {
        let r = host16_traced();
        let plots =
            crate::report::export::plot::result_plots(&[("n.json".into(), r.clone())]).unwrap();
        let mut drawer = Drawer::default();
        let sections = kind_sections(&r, &plots, &mut drawer, &|s: &str| s.to_string());
        assert_eq!(sections.len(), 1, "noise only");
        let s = &sections[0];
        assert_eq!(s.heading, "noise: CPUs 1-15 (15 CPUs)");
        assert!(s.lead[0].svg.contains("crispEdges"), "the heat map leads");
        assert_eq!(s.matrices.len(), 1);
        assert_eq!(s.matrices[0].table.rows.len(), 15);
        // The largest events of all CPUs, then the largest gaps part by part.
        assert!(
            s.tables[0]
                .caption
                .contains("largest events of all 15 CPUs")
        );
        assert_eq!(s.tables[0].rows.len(), LARGEST_ROWS);
        assert!(s.tables[1].headers.contains(&"CPU".to_string()));
        // The standouts' folds, each saying why, then one fold of the twelve others.
        let (standouts, rest) = s.folds.split_at(s.folds.len() - 1);
        assert!((1..=3).contains(&standouts.len()), "{}", standouts.len());
        assert!(standouts.iter().all(|f| f.summary.contains("stands out: ")));
        assert_eq!(rest[0].folds.len(), 15 - standouts.len());
        assert!(
            rest[0]
                .folds
                .iter()
                .all(|f| f.figures.is_empty() && f.tables.len() == 1)
        );
        // The largest gap's CPU is named as such, with the figure stored for it.
        let worst = (r.entries::<NoiseEntry>())
            .max_by_key(|e| (e.summary.max_ns, std::cmp::Reverse(e.cpu)))
            .unwrap();
        let words = duration_words(worst.summary.max_ns.unwrap());
        let named = format!("CPU {}: ", worst.cpu);
        let fold = standouts
            .iter()
            .find(|f| f.summary.starts_with(&named))
            .unwrap();
        assert!(
            fold.summary.contains(&format!("the largest gap, {words}")),
            "{}",
            fold.summary
        );
        if drawer.warning().is_none() {
            assert!(!fold.figures.is_empty(), "a standout has its plots");
            assert!(s.figures.iter().any(|f| f.caption.contains("every CPU")));
        }
    }

    #[test]
    fn one_cpu_has_its_fold_open_and_no_heat_map() {
        let r = bare_result();
        let plots =
            crate::report::export::plot::result_plots(&[("r.json".into(), r.clone())]).unwrap();
        let mut drawer = Drawer::default();
        let sections = kind_sections(&r, &plots, &mut drawer, &|s: &str| s.to_string());
        assert_eq!(sections.len(), 2, "noise and timer");
        for s in &sections {
            assert!(s.lead.is_empty() && s.matrices.is_empty(), "{}", s.heading);
            assert_eq!(s.folds.len(), 1);
            assert!(s.folds[0].open);
            if drawer.warning().is_none() {
                assert_eq!(
                    s.folds[0].figures.len(),
                    3,
                    "series, percentiles, histogram"
                );
            }
        }
    }
}
