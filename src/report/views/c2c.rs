//! The `c2c` tables: the core-to-core matrix (median, then minimum one-way time per CPU
//! pair) when it fits the terminal, the summary by locality (`c2c_locality`), the pairs'
//! distributions on small machines, and the topology the matrix was read against.
//!
//! Everything is built from the result file alone. The topology comes back from the
//! places stored in each pair's entry, so `--group` orders a saved result just as it
//! ordered the live one, and `report` classes its pairs as the live run did.
//! `Matrix::build` is the one place that turns a topology and the entries into rows and
//! columns, so it can be tested with a fake topology.
//!
//! Output stays bounded whatever the CPU count: the matrices are printed whole or not at
//! all (never wrapped or cut, which would misread as other numbers), and the summary is a
//! few lines per locality class.

use std::collections::BTreeMap;

use crate::engine::topology::{CpuPlace, Locality, Topology};
use crate::probes::c2c::C2cEntry;
use crate::report::ResultFile;
use crate::report::result::dist::{Dist, Entry, serde_name};
use crate::report::result::figure::{Chart, Figure, Heatmap, file_safe};
use crate::report::terminal::table::{Layout, Tab, core, wide, wrap};
use crate::report::views::c2c_locality::{self, Class, Pair, Summary};
use crate::report::views::{EntryView, Kind, KindView};

impl EntryView for C2cEntry {
    fn kind(&self) -> Kind {
        Kind::C2c
    }

    fn dists<'a>(&'a self, out: &mut Vec<Dist<'a>>) {
        let key = format!("{}-{}", self.cpu_a, self.cpu_b);
        let en = Entry::new("c2c", key, format!("{},{}", self.cpu_a, self.cpu_b));
        out.push(en.dist("one-way", &self.summary, &self.histogram));
    }
}

impl KindView for C2cEntry {
    /// In CPU order: `report` has no `--group` (the c2c command's own output may group).
    fn tables(r: &ResultFile) -> String {
        c2c_tables(r, false)
    }

    /// One heat map of median one-way latency per mode (a result normally holds one).
    fn figures(r: &ResultFile) -> Vec<Figure> {
        let entries = c2c_entries(r);
        let mut modes: Vec<String> = Vec::new();
        for m in entries.iter().map(|e| serde_name(&e.config.mode)) {
            if !modes.contains(&m) {
                modes.push(m);
            }
        }
        let several = modes.len() > 1;
        (modes.into_iter())
            .map(|mode| {
                let pairs = (entries.iter())
                    .filter(|e| serde_name(&e.config.mode) == mode)
                    .map(|e| (e.cpu_a, e.cpu_b, e.median_ns));
                Figure {
                    name: match several {
                        true => file_safe(&format!("c2c-{mode}-heatmap")),
                        false => "c2c-heatmap".into(),
                    },
                    source: String::new(),
                    chart: Chart::Heatmap(Heatmap::new(mode.clone(), pairs)),
                }
            })
            .collect()
    }
}

/// Up to this many pairs (8 CPUs) the per-pair distribution table is shown; beyond, it
/// would bury the matrix, and the result file holds it.
const PAIR_TABLE_MAX: usize = 28;

/// Up to this many CPUs the figures keep one decimal; beyond, whole ns. The decimal says
/// nothing there: two runs of the same 16-CPU guest put its median pair at 169 and 193
/// ns, and c2clat beside them at 176 and 172.5, so a tenth of a ns is a thousandth of
/// what a rerun moves; and whole ns keep a cell to 3 digits, which is what lets 16 CPUs
/// fit 80 columns. On a few CPUs the width is free, and SMT siblings' few ns keep a
/// meaningful tenth.
const DECIMALS_UP_TO: usize = 4;

/// Pairs named in the slowest and in the fastest list.
const EXTREMES_SHOWN: usize = 3;
/// Pairs named per class as outside it, without `--wide` (which names every one).
const OUTSIDE_SHOWN: usize = 6;

/// One cell of the matrix: a measured pair.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cell {
    pub median_ns: Option<f64>,
    pub min_ns: Option<f64>,
    pub locality: Locality,
}

/// The matrix as displayed: rows and columns in `cpus` order, symmetric (a round trip
/// stands for both directions), `None` on the diagonal and for pairs not measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Matrix {
    pub cpus: Vec<usize>,
    pub cells: Vec<Vec<Option<Cell>>>,
}

impl Matrix {
    /// The matrix over `topo`'s CPUs, ordered by locality when `grouped`, else by CPU.
    pub fn build(topo: &Topology, entries: &[&C2cEntry], grouped: bool) -> Matrix {
        let cpus = match grouped {
            true => topo.grouped_order(),
            false => {
                let mut c: Vec<usize> = topo.cpus.iter().map(|p| p.cpu).collect();
                c.sort_unstable();
                c
            }
        };
        let index: BTreeMap<usize, usize> = cpus.iter().enumerate().map(|(i, &c)| (c, i)).collect();
        let mut cells = vec![vec![None; cpus.len()]; cpus.len()];
        for e in entries {
            let (Some(&i), Some(&j)) = (index.get(&e.cpu_a), index.get(&e.cpu_b)) else {
                continue;
            };
            let cell = Some(Cell {
                median_ns: e.median_ns,
                min_ns: e.min_ns,
                locality: topo.locality(e.cpu_a, e.cpu_b),
            });
            cells[i][j] = cell;
            cells[j][i] = cell;
        }
        Matrix { cpus, cells }
    }

    /// The cell of CPUs `a` and `b`.
    pub fn get(&self, a: usize, b: usize) -> Option<Cell> {
        let i = self.cpus.iter().position(|&c| c == a)?;
        let j = self.cpus.iter().position(|&c| c == b)?;
        self.cells[i][j]
    }

    /// Every measured pair once (upper triangle), with its median.
    fn pairs(&self) -> Vec<Pair> {
        let mut out = Vec::new();
        for (i, row) in self.cells.iter().enumerate() {
            for (j, cell) in row.iter().enumerate().skip(i + 1) {
                if let Some(Cell {
                    median_ns: Some(ns),
                    locality,
                    ..
                }) = cell
                {
                    let (a, b) = (
                        self.cpus[i].min(self.cpus[j]),
                        self.cpus[i].max(self.cpus[j]),
                    );
                    out.push(Pair {
                        a,
                        b,
                        ns: *ns,
                        class: *locality,
                    });
                }
            }
        }
        out
    }

    /// One matrix of `value` per cell, at its natural width: never shrunk, so that no
    /// figure is ever wrapped or cut. Each column is as wide as its widest figure, one
    /// space apart, ruled as the other tables are. Drawn here rather than by
    /// `report::terminal::table`: a matrix is a grid of like figures whose point is to fit many
    /// columns, and a table's padding (two spaces between columns) would take 16 CPUs of
    /// 3-digit figures from 68 columns to 85, past an 80-column terminal.
    fn table(&self, value: impl Fn(&Cell) -> Option<f64>, fmt: Ns) -> String {
        let mut grid: Vec<Vec<String>> = vec![self.cpus.iter().map(|c| c.to_string()).collect()];
        for (i, row) in self.cells.iter().enumerate() {
            grid.push(
                (row.iter().enumerate())
                    .map(|(j, cell)| match cell {
                        _ if i == j => "·".to_string(),
                        Some(c) => fmt.cell(value(c)),
                        None => "-".to_string(),
                    })
                    .collect(),
            );
        }
        let chars = |s: &String| s.chars().count();
        let widths: Vec<usize> = (0..self.cpus.len())
            .map(|j| grid.iter().map(|r| chars(&r[j])).max().unwrap_or(0))
            .collect();
        let labels =
            std::iter::once("CPU".to_string()).chain(self.cpus.iter().map(|c| c.to_string()));
        let label_width = labels.clone().map(|l| l.chars().count()).max().unwrap_or(3);
        let line = |label: String, row: &[String]| -> String {
            let mut l = format!(" {label:<label_width$}");
            for (cell, w) in row.iter().zip(&widths) {
                l.push_str(&format!(" {}{cell}", " ".repeat(w - chars(cell))));
            }
            l
        };
        let lines: Vec<String> = labels.zip(&grid).map(|(l, r)| line(l, r)).collect();
        let width = 1 + label_width + widths.iter().map(|w| w + 1).sum::<usize>();
        let (thin, thick) = ("─".repeat(width), "═".repeat(width));
        format!(
            "{thin}\n{}\n{thick}\n{}\n{thin}",
            lines[0],
            lines[1..].join("\n")
        )
    }
}

/// How c2c's figures are written: whole ns, or with one decimal on a few CPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Ns {
    decimals: usize,
}

impl Ns {
    fn for_cpus(n: usize) -> Ns {
        Ns {
            decimals: usize::from(n <= DECIMALS_UP_TO),
        }
    }

    /// The figure alone; "-" when absent.
    fn cell(self, v: Option<f64>) -> String {
        v.map_or_else(|| "-".into(), |v| format!("{v:.*}", self.decimals))
    }

    /// The figure with its unit.
    fn with_unit(self, v: f64) -> String {
        format!("{v:.*} ns", self.decimals)
    }

    /// `lo–hi`.
    fn range(self, lo: f64, hi: f64) -> String {
        format!("{lo:.*}–{hi:.*}", self.decimals, self.decimals)
    }
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| "-".into(), |v| v.to_string())
}

/// The widest line of `text`, in characters.
fn text_width(text: &str) -> usize {
    text.lines().map(|l| l.chars().count()).max().unwrap_or(0)
}

/// Every c2c entry of a result.
pub fn c2c_entries(r: &ResultFile) -> Vec<&C2cEntry> {
    r.entries().collect()
}

/// The topology of the measured CPUs, from the places stored in the entries; a measured
/// CPU that no entry covers (the run was stopped first) gets an empty place.
pub fn topology_of(r: &ResultFile) -> Topology {
    let mut places: BTreeMap<usize, CpuPlace> = BTreeMap::new();
    for e in c2c_entries(r) {
        places.entry(e.cpu_a).or_insert_with(|| e.place_a.clone());
        places.entry(e.cpu_b).or_insert_with(|| e.place_b.clone());
    }
    for &cpu in r.run.cpus.measured.cpus() {
        places.entry(cpu).or_insert_with(|| CpuPlace::unknown(cpu));
    }
    Topology {
        cpus: places.into_values().collect(),
    }
}

/// Every c2c table of a result, in the current layout: the two matrices when they fit
/// (always with `--wide`), the summary by locality, the pairs (when few), the topology.
///
/// Without `--wide`, a matrix wider than the terminal is left out, with a line saying
/// so, rather than shrunk: a wrapped or cut cell misreads as another number. At 192 CPUs
/// the matrix needs 772 columns and 194 lines per figure, unreadable in any terminal;
/// there the summary by locality is the view, and the matrix is for `--wide`, the HTML
/// heat map and the CSV. At 100 columns the matrix fits up to 24 CPUs (4 columns each).
pub fn c2c_tables(r: &ResultFile, grouped: bool) -> String {
    let layout = Layout::current();
    let entries = c2c_entries(r);
    let topo = topology_of(r);
    let m = Matrix::build(&topo, &entries, grouped);
    let fmt = Ns::for_cpus(m.cpus.len());
    let mut out = matrices(&m, grouped, fmt, layout);
    out.push_str(&locality_section(&m, &topo, fmt, layout));
    if entries.len() <= PAIR_TABLE_MAX {
        out.push_str(&format!(
            "\nPairs: one-way latency per sample (ns)\n{}\n",
            pair_table(&entries, &topo, fmt)
        ));
    } else {
        let line = format!(
            "{} pairs: each pair's full distribution is in the result (-o FILE or --json)",
            entries.len()
        );
        out.push_str(&format!("\n{}\n", wrap(&line, layout.wrap_width(), "  ")));
    }
    out.push_str(&topology_section(&topo, &m.cpus, layout));
    out
}

/// The summary by locality of a result's pairs (for other views of it, such as a page),
/// with the topology it was classed by; `None` when no pair has a figure.
pub fn locality_summary(r: &ResultFile) -> Option<(Topology, Summary)> {
    let topo = topology_of(r);
    let pairs = Matrix::build(&topo, &c2c_entries(r), false).pairs();
    (!pairs.is_empty()).then(|| (topo, Summary::of(&pairs)))
}

/// Both matrices, or the line saying why they are left out.
fn matrices(m: &Matrix, grouped: bool, fmt: Ns, layout: Layout) -> String {
    let order = match grouped {
        true => {
            "grouped by locality: node, package, last-level cache, core, SMT siblings side by side"
        }
        false => "by CPU number",
    };
    let median = m.table(|c| c.median_ns, fmt);
    let min = m.table(|c| c.min_ns, fmt);
    let need = text_width(&median).max(text_width(&min));
    let n = m.cpus.len();
    if layout.wide || need <= usize::from(layout.width) {
        let what = format!(
            "Median one-way latency (ns): median over samples of (sample time) / (2 × round \
             trips); rows and columns {order}"
        );
        return format!(
            "{}\n{median}\n\nMinimum one-way latency (ns)\n{min}\n",
            wrap(&what, layout.wrap_width(), "  "),
        );
    }
    let note = format!(
        "The {n} × {n} matrices of median and minimum one-way latency need {need} columns, \
         more than the {} here: --wide prints them whole; the HTML page (--html) draws the \
         median as a heat map, and the CSV export lists every pair.",
        layout.width
    );
    format!("{}\n", wrap(&note, layout.wrap_width(), "  "))
}

/// The summary by locality: a table of the classes, then what the topology could not
/// tell, the extremes, the pairs far outside their class and the spread over CPUs.
fn locality_section(m: &Matrix, topo: &Topology, fmt: Ns, layout: Layout) -> String {
    let pairs = m.pairs();
    if pairs.is_empty() {
        return "\nBy locality: no pair has a figure.\n".to_string();
    }
    let s = Summary::of(&pairs);
    let mut lines = topology_caveats(topo);
    // With one pair, the extremes and the per-CPU line would only repeat it.
    if pairs.len() > 1 {
        lines.push(format!(
            "Slowest pairs: {}.",
            named(s.slowest(EXTREMES_SHOWN), fmt)
        ));
        lines.push(format!(
            "Fastest pairs: {}.",
            named(&s.fastest(EXTREMES_SHOWN), fmt)
        ));
    }
    let outside = s.classes.iter().filter(|c| !c.outside.is_empty());
    lines.extend(outside.map(|c| outside_line(c, topo, fmt, layout.wide)));
    if pairs.len() > 1 {
        lines.extend(per_cpu_line(&s, fmt));
    }
    let mut out = format!(
        "\nBy locality: each pair's median one-way latency\n{}",
        class_table(&s, topo, fmt, layout)
    );
    for line in lines {
        out.push_str(&format!("{}\n", wrap(&line, layout.wrap_width(), "  ")));
    }
    out
}

/// "7-15 31 ns, 7-12 31 ns".
fn named(pairs: &[Pair], fmt: Ns) -> String {
    let each: Vec<String> = (pairs.iter())
        .map(|p| format!("{}-{} {}", p.a, p.b, fmt.with_unit(p.ns)))
        .collect();
    each.join(", ")
}

/// The pairs outside a class: a few, or every one with `--wide`.
fn outside_line(c: &Class, topo: &Topology, fmt: Ns, wide: bool) -> String {
    let shown = match wide {
        true => c.outside.len(),
        false => OUTSIDE_SHOWN.min(c.outside.len()),
    };
    let more = match c.outside.len() - shown {
        0 => String::new(),
        n => format!(" and {n} more (--wide names every one)"),
    };
    format!(
        "Outside {}: more than {} from its median of {} ({} σ, σ = {} × MAD, or {} % if \
         larger): {}{more}.",
        class_label(c.class, topo),
        fmt.with_unit(c.reach),
        fmt.with_unit(c.median),
        c2c_locality::OUTSIDE_MADS,
        c2c_locality::MAD_TO_SIGMA,
        c2c_locality::OUTSIDE_SHARE * 100.0,
        named(&c.outside[..shown], fmt),
    )
}

/// How the CPUs compare over their pairs: a CPU slow with every partner shows here.
fn per_cpu_line(s: &Summary, fmt: Ns) -> Option<String> {
    let (slow, fast) = (s.per_cpu.first()?, s.per_cpu.last()?);
    let what = "Per CPU, the median of its pairs:";
    Some(match fmt.cell(Some(slow.1)) == fmt.cell(Some(fast.1)) {
        true => format!("{what} {} on every CPU.", fmt.with_unit(slow.1)),
        false => format!(
            "{what} {} ns; slowest CPU {} ({}), fastest CPU {} ({}).",
            fmt.range(fast.1, slow.1),
            slow.0,
            fmt.with_unit(slow.1),
            fast.0,
            fmt.with_unit(fast.1),
        ),
    })
}

/// One row per class, as a table when it fits the width, else as one line per class
/// (a table cell must never be shrunk into a cut figure).
fn class_table(s: &Summary, topo: &Topology, fmt: Ns, layout: Layout) -> String {
    let h = |w: &str| Kind::C2c.unit().header(w);
    let table = Layout::fixed(u16::MAX, true).scoped(|| {
        let mut t = Tab::new(&[
            core("locality"),
            core("pairs"),
            core(h("median")),
            core(h("p10–p90")),
            core(h("range")),
            core("outside"),
        ]);
        for c in &s.classes {
            t.row(vec![
                class_label(c.class, topo),
                c.pairs.to_string(),
                fmt.cell(Some(c.median)),
                fmt.range(c.p10, c.p90),
                fmt.range(c.min, c.max),
                c.outside.len().to_string(),
            ]);
        }
        t.to_string()
    });
    if layout.wide || text_width(&table) <= usize::from(layout.width) {
        return format!("{table}\n");
    }
    let lines = s.classes.iter().map(|c| {
        let line = format!(
            "{}: {} pairs, median {}, p10–p90 {} ns, range {} ns, {} outside.",
            class_label(c.class, topo),
            c.pairs,
            fmt.with_unit(c.median),
            fmt.range(c.p10, c.p90),
            fmt.range(c.min, c.max),
            c.outside.len()
        );
        format!("{}\n", wrap(&line, layout.wrap_width(), "  "))
    });
    lines.collect()
}

/// A class as the summary names it: the last-level cache by its level when the result
/// knows it ("same L3"), and "all pairs" when no topology was recorded.
fn class_label(l: Locality, topo: &Topology) -> String {
    let levels: std::collections::BTreeSet<u8> = (topo.cpus.iter())
        .filter_map(|p| p.llc.as_ref().map(|c| c.level))
        .collect();
    match l {
        Locality::SameLlc if levels.len() == 1 => {
            format!("same L{}", levels.first().copied().unwrap_or(3))
        }
        Locality::Unknown if !topo.recorded() => "all pairs".into(),
        other => other.to_string(),
    }
}

/// What the summary could not tell apart, said plainly: never guessed.
fn topology_caveats(topo: &Topology) -> Vec<String> {
    if !topo.recorded() {
        return vec![
            "The result records no topology (package, core, cache or node) for these CPUs, \
             so the pairs are summarised as one class."
                .into(),
        ];
    }
    if !topo.llc_known() {
        return vec![
            "The result records no last-level cache for these CPUs (results made before \
             jitterscope stored it, or a kernel without cache/ in sysfs): pairs that share \
             an L3 are counted under same package."
                .into(),
        ];
    }
    Vec::new()
}

/// One row per pair with its distribution.
fn pair_table(entries: &[&C2cEntry], topo: &Topology, fmt: Ns) -> String {
    let h = |w: &str| Kind::C2c.unit().header(w);
    let mut t = Tab::new(&[
        core("pair"),
        core("locality"),
        core("samples"),
        core(h("min")),
        core(h("median")),
        wide(h("p90")),
        core(h("p99")),
        core(h("max")),
        wide(h("MAD")),
        wide("invol. sw"),
    ]);
    for e in entries {
        let s = &e.summary;
        let samples = match e.samples < e.config.samples as u64 {
            true => format!("{} of {}", e.samples, e.config.samples),
            false => e.samples.to_string(),
        };
        let switches = e.thread_a.involuntary_switches + e.thread_b.involuntary_switches;
        t.row(vec![
            format!("{}-{}", e.cpu_a, e.cpu_b),
            match topo.locality(e.cpu_a, e.cpu_b) {
                Locality::Unknown => Locality::Unknown.to_string(),
                l => class_label(l, topo),
            },
            samples,
            fmt.cell(e.min_ns),
            fmt.cell(e.median_ns),
            opt(s.p90_ns),
            opt(s.p99_ns),
            opt(s.max_ns),
            opt(s.mad_ns),
            switches.to_string(),
        ]);
    }
    t.to_string()
}

/// The topology in a few lines: counts, then one line per package and node when there
/// are several; with `--wide`, also where each CPU sits, in the matrix's order.
fn topology_section(topo: &Topology, order: &[usize], layout: Layout) -> String {
    let width = layout.wrap_width();
    let mut out = format!("\n{}\n", wrap(&topology_line(topo), width, "  "));
    let domains = domains(topo);
    if domains.len() > 1 {
        for (key, places) in &domains {
            let line = format!("  {}", domain_line(*key, places));
            out.push_str(&format!("{}\n", wrap(&line, width, "    ")));
        }
    }
    if layout.wide {
        out.push_str(&format!("{}\n", topology_table(topo, order)));
    }
    out
}

/// "Topology: 16 CPUs on 16 cores (no SMT siblings), 1 package, 1 NUMA node; …".
fn topology_line(topo: &Topology) -> String {
    let n = topo.cpus.len();
    if !topo.recorded() {
        return format!("Topology: {n} CPUs, their places not recorded in this result.");
    }
    let count = |f: &dyn Fn(&CpuPlace) -> Option<String>| -> usize {
        let set: std::collections::BTreeSet<String> = topo.cpus.iter().filter_map(f).collect();
        set.len()
    };
    let cores = count(&|p| Some(format!("{:?}:{}", p.package, p.smt_siblings)));
    let threads = (topo.cpus.iter())
        .map(|p| p.smt_siblings.len())
        .max()
        .unwrap_or(1);
    let smt = match threads {
        1 => "no SMT siblings".to_string(),
        t => format!("up to {t} threads a core"),
    };
    let packages = plural(count(&|p| p.package.map(|x| x.to_string())), "package");
    let nodes = match count(&|p| p.node.map(|x| x.to_string())) {
        0 => "NUMA nodes not recorded".to_string(),
        k => plural(k, "NUMA node"),
    };
    let llcs = match topo.llc_known() {
        true => {
            let k = count(&|p| p.llc.as_ref().map(|c| c.cpus.to_string()));
            let level = topo.cpus[0].llc.as_ref().map_or(3, |c| c.level);
            format!("{} (the last level)", plural(k, &format!("L{level} cache")))
        }
        false => "last-level cache not recorded".into(),
    };
    format!("Topology: {n} CPUs on {cores} cores ({smt}), {packages}, {nodes}; {llcs}.")
}

/// "1 package", "2 packages".
fn plural(n: usize, what: &str) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}

/// The CPUs of each (package, node).
fn domains(topo: &Topology) -> BTreeMap<(Option<u32>, Option<u32>), Vec<&CpuPlace>> {
    let mut by: BTreeMap<(Option<u32>, Option<u32>), Vec<&CpuPlace>> = BTreeMap::new();
    for p in &topo.cpus {
        by.entry((p.package, p.node)).or_default().push(p);
    }
    by
}

/// "package 0, node 1: CPUs 0-3,8-11 (4 cores, 2 L3s)".
fn domain_line((package, node): (Option<u32>, Option<u32>), places: &[&CpuPlace]) -> String {
    let cpus = crate::engine::cpu::CpuList::from_cpus(places.iter().map(|p| p.cpu).collect());
    let cores: std::collections::BTreeSet<String> =
        places.iter().map(|p| p.smt_siblings.to_string()).collect();
    let llcs: std::collections::BTreeSet<String> = (places.iter())
        .filter_map(|p| p.llc.as_ref().map(|c| c.cpus.to_string()))
        .collect();
    let llcs = match llcs.len() {
        0 => String::new(),
        k => format!(", {k} last-level cache{}", if k == 1 { "" } else { "s" }),
    };
    format!(
        "package {}, node {}: CPUs {cpus} ({} cores{llcs})",
        opt(package),
        opt(node),
        cores.len()
    )
}

/// Where each CPU sits, in the matrix's order.
fn topology_table(topo: &Topology, order: &[usize]) -> String {
    // The sibling lists and caches are text, cut to fit as text is.
    let mut t = Tab::new(&[
        core("CPU"),
        core("package"),
        core("die"),
        core("core"),
        core("SMT siblings").text(),
        core("LLC").text(),
        core("node"),
    ]);
    for p in order.iter().filter_map(|&c| topo.place(c)) {
        let llc = p.llc.as_ref().map(|c| match c.id {
            Some(id) => format!("L{} #{id}", c.level),
            None => format!("L{} {}", c.level, c.cpus),
        });
        t.row(vec![
            p.cpu.to_string(),
            opt(p.package),
            opt(p.die),
            opt(p.core),
            p.smt_siblings.to_string(),
            opt(llc),
            opt(p.node),
        ]);
    }
    t.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::cpu::CpuList;
    use crate::engine::sched::Policy;
    use crate::probes::c2c::{C2cConfigRecord, HistogramRecord, Mode, ThreadRecord, pairs};
    use crate::stats::LatencyHistogram;

    /// A made-up latency per locality, so that each cell tells which class it fell in.
    fn made_up_ns(l: Locality) -> f64 {
        match l {
            Locality::SmtSiblings => 10.0,
            Locality::SameLlc => 25.0,
            Locality::SamePackage => 40.0,
            Locality::OtherNode => 80.0,
            Locality::CrossPackage => 120.0,
            _ => 999.0,
        }
    }

    fn thread() -> ThreadRecord {
        ThreadRecord {
            policy: Policy::Other,
            priority: 0,
            sched_refused: None,
            involuntary_switches: 0,
            voluntary_switches: 0,
            migrations: None,
            tid: None,
        }
    }

    /// An entry for the pair as the probe would write it, with made-up figures.
    fn entry(topo: &Topology, a: usize, b: usize) -> C2cEntry {
        let locality = topo.locality(a, b);
        let v = made_up_ns(locality);
        C2cEntry {
            cpu_a: a,
            cpu_b: b,
            locality,
            place_a: topo.place(a).unwrap().clone(),
            place_b: topo.place(b).unwrap().clone(),
            config: C2cConfigRecord {
                mode: Mode::Load,
                samples: 10,
                round_trips: 10,
                preheat_ns: 0,
                policy: Policy::Other,
                priority: 0,
            },
            thread_a: thread(),
            thread_b: thread(),
            samples: 10,
            min_ns: Some(v - 1.0),
            median_ns: Some(v),
            summary: LatencyHistogram::new().summary(),
            histogram: HistogramRecord::from_hist(&LatencyHistogram::new()),
        }
    }

    /// The fake 2-socket SMT machine: CPUs n and n+4 are siblings; 0,1,4,5 socket 0.
    fn fake() -> (tempfile::TempDir, Topology, Vec<C2cEntry>) {
        let dir = tempfile::tempdir().unwrap();
        crate::engine::topology::tests::two_socket_smt(dir.path());
        let all = CpuList::parse_kernel("0-7").unwrap();
        let topo = Topology::read(dir.path(), &all);
        let entries = pairs(&all)
            .iter()
            .map(|&(a, b)| entry(&topo, a, b))
            .collect();
        (dir, topo, entries)
    }

    #[test]
    fn grouping_orders_a_two_socket_smt_machine_by_locality() {
        let (_dir, topo, entries) = fake();
        let refs: Vec<&C2cEntry> = entries.iter().collect();
        let plain = Matrix::build(&topo, &refs, false);
        assert_eq!(plain.cpus, (0..8).collect::<Vec<_>>());
        let grouped = Matrix::build(&topo, &refs, true);
        assert_eq!(grouped.cpus, vec![0, 4, 1, 5, 2, 6, 3, 7]);
        // In grouped order, each sibling pair sits on the diagonal's neighbours and each
        // socket forms a 4 × 4 block: the first row reads sibling, same package ×2, then
        // cross-package ×4.
        let row0: Vec<Option<f64>> = grouped.cells[0]
            .iter()
            .map(|c| c.and_then(|c| c.median_ns))
            .collect();
        let mut want = vec![None, Some(10.0), Some(40.0), Some(40.0)];
        want.extend([Some(120.0); 4]);
        assert_eq!(row0, want);
    }

    #[test]
    fn every_cell_has_its_pairs_locality_and_is_symmetric() {
        let (_dir, topo, entries) = fake();
        let refs: Vec<&C2cEntry> = entries.iter().collect();
        let m = Matrix::build(&topo, &refs, true);
        // The fake's layout: CPU n is core n % 4, and core c is in package c / 2.
        let expect = |a: usize, b: usize| match () {
            _ if a % 4 == b % 4 => Locality::SmtSiblings,
            _ if (a % 4) / 2 == (b % 4) / 2 => Locality::SamePackage,
            _ => Locality::CrossPackage,
        };
        for a in 0..8 {
            assert_eq!(m.get(a, a), None, "diagonal {a}");
            for b in (0..8).filter(|&b| b != a) {
                let cell = m
                    .get(a, b)
                    .unwrap_or_else(|| panic!("pair {a}-{b} missing"));
                assert_eq!(cell.locality, expect(a, b), "pair {a}-{b}");
                assert_eq!(cell.median_ns, Some(made_up_ns(expect(a, b))));
                assert_eq!(m.get(b, a), Some(cell), "symmetric {a}-{b}");
            }
        }
        // 4 sibling pairs; per package 4 CPUs on 2 cores give 4 same-package pairs; the
        // remaining 4 × 4 cross the sockets.
        let count = |l| {
            (0..8)
                .flat_map(|a| (a + 1..8).map(move |b| (a, b)))
                .filter(|&(a, b)| m.get(a, b).unwrap().locality == l)
                .count()
        };
        assert_eq!(count(Locality::SmtSiblings), 4);
        assert_eq!(count(Locality::SamePackage), 8);
        assert_eq!(count(Locality::CrossPackage), 16);
    }

    #[test]
    fn tables_from_a_result_show_both_matrices_and_the_topology_in_order() {
        let (_dir, _topo, entries) = fake();
        let r = result_with(entries);
        // The topology comes back from the entries alone.
        let topo = topology_of(&r);
        assert_eq!(topo.grouped_order(), vec![0, 4, 1, 5, 2, 6, 3, 7]);
        let text = Layout::fixed(100, false).scoped(|| c2c_tables(&r, true));
        assert!(text.contains("Median one-way latency (ns)"), "{text}");
        assert!(text.contains("Minimum one-way latency (ns)"), "{text}");
        assert!(text.contains("cross-package"), "{text}");
        // 8 CPUs: whole ns, medians in the first matrix and minima (one less) in the
        // second.
        let second_row = |part: &str| -> Vec<String> {
            (part.lines())
                .filter(|l| l.starts_with(" 4 "))
                .flat_map(|l| l.split_whitespace().map(String::from))
                .collect()
        };
        let (med, min) = text.split_once("Minimum").unwrap();
        assert_eq!(
            second_row(med),
            ["4", "10", "·", "40", "40", "120", "120", "120", "120"]
        );
        let min_row = second_row(min.split("By locality").next().unwrap());
        assert_eq!(
            min_row,
            ["4", "9", "·", "39", "39", "119", "119", "119", "119"]
        );
        // With --wide, the topology table lists CPUs in the matrix's grouped order.
        let wide = Layout::fixed(100, true).scoped(|| c2c_tables(&r, true));
        let topo_part = wide.split("Topology").nth(1).unwrap();
        let firsts: Vec<&str> = topo_part
            .lines()
            .filter_map(|l| l.split_whitespace().next())
            .filter(|w| w.parse::<usize>().is_ok())
            .collect();
        assert_eq!(firsts, ["0", "4", "1", "5", "2", "6", "3", "7"]);
    }

    /// The 16-CPU fake of two packages with two L3s each, a made-up latency per class,
    /// and one planted pair (1-2, same package) at 300 ns.
    fn two_llcs(snc: bool) -> ResultFile {
        let dir = tempfile::tempdir().unwrap();
        crate::engine::topology::tests::two_sockets_two_llcs(dir.path(), snc);
        let all = CpuList::parse_kernel("0-15").unwrap();
        let topo = Topology::read(dir.path(), &all);
        let mut entries: Vec<C2cEntry> = pairs(&all)
            .iter()
            .map(|&(a, b)| entry(&topo, a, b))
            .collect();
        let planted = entries
            .iter_mut()
            .find(|e| (e.cpu_a, e.cpu_b) == (1, 2))
            .unwrap();
        planted.median_ns = Some(300.0);
        result_with(entries)
    }

    /// The words of `text`, one space apart (table cells side by side, wrapped lines
    /// joined).
    fn words(text: &str) -> String {
        text.split_whitespace().collect::<Vec<_>>().join(" ")
    }

    #[test]
    fn issue29_summary_classes_two_sockets_with_two_l3s_and_names_the_odd_pair() {
        let text = Layout::fixed(100, false).scoped(|| c2c_tables(&two_llcs(false), false));
        let w = words(&text);
        // Each class: its pair count, and (no spread in the made-up figures) its median
        // as its p10–p90 and its range; the planted pair widens same package's range.
        for row in [
            "SMT siblings 8 10 10–10 10–10 0",
            "same L3 16 25 25–25 25–25 0",
            "same package 32 40 40–40 40–300 1",
            "cross-package 64 120 120–120 120–120 0",
        ] {
            assert!(w.contains(row), "{row:?} in\n{text}");
        }
        assert!(
            w.contains("Slowest pairs: 1-2 300 ns, 0-4 120 ns"),
            "{text}"
        );
        assert!(w.contains("Fastest pairs: 0-8 10 ns, 1-9 10 ns"), "{text}");
        assert!(w.contains("Outside same package: more than 4 ns"), "{text}");
        assert!(
            w.contains("(3 σ, σ = 1.4826 × MAD, or 10 % if larger): 1-2 300 ns."),
            "{text}"
        );
        assert!(!w.contains("records no"), "nothing unknown: {text}");
        assert!(
            w.contains("2 packages, 2 NUMA nodes; 4 L3 caches (the last level)"),
            "{text}"
        );
        // Sub-NUMA clustering: the pairs across L3s are now across nodes.
        let snc = words(&Layout::fixed(100, false).scoped(|| c2c_tables(&two_llcs(true), false)));
        assert!(
            snc.contains("same package, other node 32 80 80–80 80–300 1"),
            "{snc}"
        );
    }

    #[test]
    fn the_summary_of_a_result_is_there_for_other_views() {
        let (topo, s) = locality_summary(&two_llcs(false)).unwrap();
        assert!(topo.llc_known());
        assert_eq!(s.classes.len(), 4);
        assert_eq!((s.slowest(1)[0].a, s.slowest(1)[0].b), (1, 2));
        assert_eq!(s.by_latency.len(), 120);
    }

    #[test]
    fn issue29_a_result_without_topology_is_one_class_and_says_so() {
        let (_dir, topo, entries) = fake();
        let bare: Vec<C2cEntry> = (entries.into_iter())
            .map(|mut e| {
                e.place_a = CpuPlace::unknown(e.cpu_a);
                e.place_b = CpuPlace::unknown(e.cpu_b);
                e
            })
            .collect();
        assert!(topo.recorded());
        let text = Layout::fixed(100, false).scoped(|| c2c_tables(&result_with(bare), false));
        let w = words(&text);
        assert!(w.contains("all pairs 28 "), "{text}");
        assert!(
            !w.contains("SMT siblings 4") && !w.contains("cross-package"),
            "{text}"
        );
        assert!(w.contains("The result records no topology"), "{text}");
        assert!(w.contains("their places not recorded"), "{text}");
    }

    #[test]
    fn issue29_a_matrix_wider_than_the_terminal_is_left_out_and_nothing_wraps_a_number() {
        let r = two_llcs(false);
        let text = Layout::fixed(50, false).scoped(|| c2c_tables(&r, false));
        assert!(!text.contains("Median one-way latency (ns)"), "{text}");
        let w = words(&text);
        assert!(w.contains("The 16 × 16 matrices of median and minimum one-way latency need 68 columns, more than the 50 here: --wide prints them whole"), "{text}");
        assert!(text.lines().all(|l| l.chars().count() <= 50), "{text}");
        // The class table does not fit 50 columns either: a line per class instead.
        assert!(
            w.contains("same L3: 16 pairs, median 25 ns, p10–p90 25–25 ns"),
            "{text}"
        );
        // --wide prints every matrix whole, whatever the width.
        let wide = Layout::fixed(50, true).scoped(|| c2c_tables(&r, false));
        assert!(wide.contains("Median one-way latency (ns)"), "{wide}");
    }

    #[test]
    fn figures_keep_a_decimal_on_a_few_cpus_only() {
        assert_eq!(Ns::for_cpus(4).cell(Some(10.0)), "10.0");
        assert_eq!(Ns::for_cpus(5).cell(Some(10.0)), "10");
        assert_eq!(Ns::for_cpus(16).range(30.6, 224.7), "31–225");
        assert_eq!(Ns::for_cpus(16).cell(None), "-");
    }

    /// The CPUs the entries pair.
    fn topology_cpus(entries: &[C2cEntry]) -> CpuList {
        CpuList::from_cpus(entries.iter().flat_map(|e| [e.cpu_a, e.cpu_b]).collect())
    }

    /// A result holding `entries`, around this machine's host facts.
    fn result_with(entries: Vec<C2cEntry>) -> ResultFile {
        let (clock, _) = crate::engine::clock::ClockInfo::detect();
        let cpus = topology_cpus(&entries);
        let host = crate::system::HostInfo::collect(clock, cpus.clone());
        let run = crate::report::RunInfo {
            tool_version: "test".into(),
            tool_commit: None,
            command_line: vec![],
            start_time: "2024-01-01T00:00:00Z".into(),
            requested_duration_ns: 0,
            actual_duration_ns: 0,
            interrupted: false,
            privileges: crate::report::result::Privileges {
                euid: 0,
                root: false,
                memory_locked: false,
            },
            cpus: crate::report::result::RunCpus {
                measured: cpus,
                housekeeping: CpuList::default(),
            },
            degraded: vec![],
            warnings: vec![],
            peak_rss_kib: 0,
            counters: None,
            root_domain: None,
        };
        let probes = entries
            .into_iter()
            .map(|e| crate::report::ProbeEntry::C2c(Box::new(e)))
            .collect();
        ResultFile::new(host, run, probes)
    }
}
