//! The `c2c` tables: the core-to-core matrix (median, then minimum one-way time per CPU
//! pair), a summary by locality, the pairs' distributions on small machines, and the
//! topology the matrix was read against.
//!
//! Everything is built from the result file alone. The topology comes back from the
//! places stored in each pair's entry, so `--group` orders a saved result just as it
//! ordered the live one. `Matrix::build` is the one place that turns a topology and the
//! entries into rows and columns, so it can be tested with a fake topology.

use std::collections::BTreeMap;

use crate::engine::topology::{CpuPlace, Locality, Topology};
use crate::probes::c2c::C2cEntry;
use crate::report::ResultFile;
use crate::report::dist::{Dist, Entry, serde_name};
use crate::report::figure::{Chart, Figure, Heatmap, file_safe};
use crate::report::table::{Layout, Tab, core, new_table, wide};
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

    /// One matrix table of `value` per cell.
    fn table(&self, value: impl Fn(&Cell) -> Option<f64>) -> String {
        let head: Vec<String> = std::iter::once("CPU".to_string())
            .chain(self.cpus.iter().map(|c| c.to_string()))
            .collect();
        let head: Vec<&str> = head.iter().map(String::as_str).collect();
        let mut t = new_table(&head);
        for (i, row) in self.cells.iter().enumerate() {
            let cells = row.iter().enumerate().map(|(j, cell)| match cell {
                _ if i == j => "·".to_string(),
                Some(c) => ns(value(c)),
                None => "-".to_string(),
            });
            t.add_row(std::iter::once(self.cpus[i].to_string()).chain(cells));
        }
        t.to_string()
    }
}

/// ns with one decimal; "-" when absent.
fn ns(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.1}"))
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| "-".into(), |v| v.to_string())
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
        places.entry(cpu).or_insert_with(|| CpuPlace {
            cpu,
            package: None,
            die: None,
            core: None,
            smt_siblings: crate::engine::cpu::CpuList::from_cpus(vec![cpu]),
            node: None,
        });
    }
    Topology {
        cpus: places.into_values().collect(),
    }
}

/// Every c2c table of a result: matrices, locality summary, pairs (when few), topology.
pub fn c2c_tables(r: &ResultFile, grouped: bool) -> String {
    let entries = c2c_entries(r);
    let topo = topology_of(r);
    let m = Matrix::build(&topo, &entries, grouped);
    let order = match grouped {
        true => "grouped by locality: node, package, core, SMT siblings side by side",
        false => "by CPU number",
    };
    let what = format!(
        "Median one-way latency (ns): median over samples of (sample time) / (2 × round \
         trips); rows and columns {order}"
    );
    let mut out = format!(
        "{}\n{}\n\nMinimum one-way latency (ns)\n{}\n",
        crate::report::table::wrap(&what, Layout::current().wrap_width(), "  "),
        m.table(|c| c.median_ns),
        m.table(|c| c.min_ns),
    );
    out.push_str(&format!("\nBy locality\n{}\n", locality_table(&m)));
    if entries.len() <= PAIR_TABLE_MAX {
        out.push_str(&format!(
            "\nPairs: one-way latency per sample (ns)\n{}\n",
            pair_table(&entries)
        ));
    } else {
        out.push_str(&format!(
            "\n{} pairs: each pair's full distribution is in the result (-o FILE or --json)\n",
            entries.len()
        ));
    }
    out.push_str(&format!("\nTopology\n{}\n", topology_table(&topo, &m.cpus)));
    out
}

/// Per locality class: how many pairs, and the spread of their medians and minima.
fn locality_table(m: &Matrix) -> String {
    let mut by: BTreeMap<Locality, Vec<Cell>> = BTreeMap::new();
    for (i, row) in m.cells.iter().enumerate() {
        for cell in row.iter().skip(i + 1).flatten() {
            by.entry(cell.locality).or_default().push(*cell);
        }
    }
    let h = |w: &str| Kind::C2c.unit().header(w);
    let mut t = Tab::new(&[
        core("locality"),
        core("pairs"),
        core(h("lowest min")),
        core(h("lowest median")),
        wide(h("median of medians")),
        core(h("highest median")),
    ]);
    for (loc, cells) in &by {
        let mut meds: Vec<f64> = cells.iter().filter_map(|c| c.median_ns).collect();
        meds.sort_by(f64::total_cmp);
        let min = cells.iter().filter_map(|c| c.min_ns).min_by(f64::total_cmp);
        t.row(vec![
            loc.to_string(),
            cells.len().to_string(),
            ns(min),
            ns(meds.first().copied()),
            ns(crate::probes::c2c::median(&meds)),
            ns(meds.last().copied()),
        ]);
    }
    t.to_string()
}

/// One row per pair with its distribution.
fn pair_table(entries: &[&C2cEntry]) -> String {
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
            e.locality.to_string(),
            samples,
            ns(e.min_ns),
            ns(e.median_ns),
            opt(s.p90_ns),
            opt(s.p99_ns),
            opt(s.max_ns),
            opt(s.mad_ns),
            switches.to_string(),
        ]);
    }
    t.to_string()
}

/// Where each CPU sits, in the matrix's order.
fn topology_table(topo: &Topology, order: &[usize]) -> String {
    let mut t = new_table(&["CPU", "package", "die", "core", "SMT siblings", "node"]);
    for p in order.iter().filter_map(|&c| topo.place(c)) {
        t.add_row(vec![
            p.cpu.to_string(),
            opt(p.package),
            opt(p.die),
            opt(p.core),
            p.smt_siblings.to_string(),
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
            Locality::SamePackage => 40.0,
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
        let text = c2c_tables(&r, true);
        assert!(text.contains("Median one-way latency (ns)"), "{text}");
        assert!(text.contains("Minimum one-way latency (ns)"), "{text}");
        assert!(text.contains("cross-package"), "{text}");
        // The topology table lists CPUs in the matrix's grouped order.
        let topo_part = text.split("Topology").nth(1).unwrap();
        let firsts: Vec<&str> = topo_part
            .lines()
            .filter_map(|l| l.split_whitespace().next())
            .filter(|w| w.parse::<usize>().is_ok())
            .collect();
        assert_eq!(firsts, ["0", "4", "1", "5", "2", "6", "3", "7"]);
        // Medians in the first matrix, minima (one less) in the second.
        assert!(text.contains("120.0") && text.contains("119.0"), "{text}");
    }

    /// A result holding `entries`, around this machine's host facts.
    fn result_with(entries: Vec<C2cEntry>) -> ResultFile {
        let (clock, _) = crate::engine::clock::ClockInfo::detect();
        let host = crate::system::HostInfo::collect(clock, CpuList::parse_kernel("0-7").unwrap());
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
                measured: CpuList::parse_kernel("0-7").unwrap(),
                housekeeping: CpuList::default(),
            },
            degraded: vec![],
            warnings: vec![],
            peak_rss_kib: 0,
            counters: None,
        };
        let probes = entries
            .into_iter()
            .map(|e| crate::report::ProbeEntry::C2c(Box::new(e)))
            .collect();
        ResultFile::new(host, run, probes)
    }
}
