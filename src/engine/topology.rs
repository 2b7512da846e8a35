//! CPU topology from sysfs: which CPUs are SMT siblings, which share a last-level cache,
//! which share a package, and which NUMA node each belongs to. `c2c` classes its pairs by
//! it and orders rows by it; every path is read under a root so that tests can give a
//! fake tree.
//!
//! Read by hand: no maintained crate reads these few files without pulling in hwloc.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::cpu::CpuList;

/// Where one CPU sits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuPlace {
    pub cpu: usize,
    /// `topology/physical_package_id` (the socket).
    pub package: Option<u32>,
    /// `topology/die_id`, where the kernel has it.
    pub die: Option<u32>,
    /// `topology/core_id`: unique within a package only.
    pub core: Option<u32>,
    /// `topology/thread_siblings_list`: the CPUs sharing this one's core, itself included.
    pub smt_siblings: CpuList,
    /// The NUMA node whose `cpulist` holds this CPU.
    pub node: Option<u32>,
    /// The last-level cache: absent when not known (results made before it was
    /// recorded, a kernel without `cache/` in sysfs), so that older results read back
    /// and write out unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llc: Option<LastLevelCache>,
}

impl CpuPlace {
    /// A CPU of which nothing is known but its number.
    pub fn unknown(cpu: usize) -> CpuPlace {
        CpuPlace {
            cpu,
            package: None,
            die: None,
            core: None,
            smt_siblings: CpuList::from_cpus(vec![cpu]),
            node: None,
            llc: None,
        }
    }
}

/// A CPU's last-level cache: the highest-level data or unified cache under
/// `cpuN/cache/index*/` (L3 on most x86 servers, one per package or per CCX).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastLevelCache {
    /// `level`.
    pub level: u8,
    /// `id`, where the kernel has it (unique among the caches of that level).
    pub id: Option<u32>,
    /// `shared_cpu_list`: the CPUs sharing the cache, this one included.
    pub cpus: CpuList,
}

/// How close two CPUs are: the closest thing they share, from the core outwards.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Locality {
    SameCpu,
    /// Two hardware threads of one core.
    SmtSiblings,
    /// Different cores sharing the last-level cache.
    SameLlc,
    /// Different cores of one package and NUMA node (or the node is not known), not
    /// sharing the last-level cache (or it is not known).
    SamePackage,
    /// One package, two NUMA nodes (sub-NUMA clustering).
    OtherNode,
    /// Different packages.
    CrossPackage,
    /// The kernel did not say (and, reading a result, a class this version does not
    /// know).
    #[serde(other)]
    Unknown,
}

impl std::fmt::Display for Locality {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Locality::SameCpu => "same CPU",
            Locality::SmtSiblings => "SMT siblings",
            Locality::SameLlc => "same LLC",
            Locality::SamePackage => "same package",
            Locality::OtherNode => "same package, other node",
            Locality::CrossPackage => "cross-package",
            Locality::Unknown => "unknown",
        })
    }
}

/// The places of a set of CPUs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Topology {
    pub cpus: Vec<CpuPlace>,
}

impl Topology {
    /// Reads the places of `cpus` from the live `/sys`.
    pub fn detect(cpus: &CpuList) -> Topology {
        Topology::read(Path::new("/sys"), cpus)
    }

    /// Reads the places of `cpus` from `sys` (a directory laid out like `/sys`). A file
    /// that is missing or unreadable leaves its field empty: the kernel may not have it.
    pub fn read(sys: &Path, cpus: &CpuList) -> Topology {
        let cpu_dir = sys.join("devices/system/cpu");
        let nodes = read_nodes(&sys.join("devices/system/node"));
        let places = cpus
            .cpus()
            .iter()
            .map(|&cpu| {
                let topo = cpu_dir.join(format!("cpu{cpu}/topology"));
                let number = |name: &str| read_trimmed(&topo.join(name))?.parse::<u32>().ok();
                let siblings = read_trimmed(&topo.join("thread_siblings_list"))
                    .and_then(|s| CpuList::parse_kernel(&s).ok())
                    .unwrap_or_else(|| CpuList::from_cpus(vec![cpu]));
                CpuPlace {
                    cpu,
                    package: number("physical_package_id"),
                    die: number("die_id"),
                    core: number("core_id"),
                    smt_siblings: siblings,
                    node: nodes
                        .iter()
                        .find(|(_, list)| list.contains(cpu))
                        .map(|(n, _)| *n),
                    llc: read_llc(&cpu_dir.join(format!("cpu{cpu}/cache"))),
                }
            })
            .collect();
        Topology { cpus: places }
    }

    pub fn place(&self, cpu: usize) -> Option<&CpuPlace> {
        self.cpus.iter().find(|p| p.cpu == cpu)
    }

    /// How close `a` and `b` are.
    pub fn locality(&self, a: usize, b: usize) -> Locality {
        if a == b {
            return Locality::SameCpu;
        }
        let (Some(pa), Some(pb)) = (self.place(a), self.place(b)) else {
            return Locality::Unknown;
        };
        if pa.smt_siblings.contains(b) {
            return Locality::SmtSiblings;
        }
        if pa.llc.as_ref().is_some_and(|c| c.cpus.contains(b)) {
            return Locality::SameLlc;
        }
        let other_node = matches!((pa.node, pb.node), (Some(x), Some(y)) if x != y);
        match (pa.package, pb.package) {
            (Some(x), Some(y)) if x != y => Locality::CrossPackage,
            (Some(_), Some(_)) if other_node => Locality::OtherNode,
            (Some(_), Some(_)) => Locality::SamePackage,
            _ => Locality::Unknown,
        }
    }

    /// Whether every CPU's last-level cache is known, so that `SameLlc` was told apart
    /// from `SamePackage`.
    pub fn llc_known(&self) -> bool {
        !self.cpus.is_empty() && self.cpus.iter().all(|p| p.llc.is_some())
    }

    /// Whether any CPU's package is known: without one, every pair is `Unknown`.
    pub fn recorded(&self) -> bool {
        self.cpus.iter().any(|p| p.package.is_some())
    }

    /// The CPUs ordered by locality: node, package, die, last-level cache, core, then
    /// CPU number, so that SMT siblings sit side by side and each package and each cache
    /// forms one block.
    pub fn grouped_order(&self) -> Vec<usize> {
        let mut places: Vec<&CpuPlace> = self.cpus.iter().collect();
        places.sort_by_key(|p| {
            (
                p.node.unwrap_or(u32::MAX),
                p.package.unwrap_or(u32::MAX),
                p.die.unwrap_or(0),
                p.llc.as_ref().and_then(|c| c.cpus.cpus().first().copied()),
                p.core.unwrap_or(u32::MAX),
                p.cpu,
            )
        });
        places.iter().map(|p| p.cpu).collect()
    }
}

fn read_trimmed(path: &Path) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

/// The highest-level data or unified cache under `dir` (a CPU's `cache/`); none when the
/// kernel lists none or does not say which CPUs share it.
fn read_llc(dir: &Path) -> Option<LastLevelCache> {
    let entries = std::fs::read_dir(dir).ok()?;
    entries
        .filter_map(|e| {
            let path = e.ok()?.path();
            path.file_name()?.to_str()?.strip_prefix("index")?;
            if read_trimmed(&path.join("type"))? == "Instruction" {
                return None;
            }
            Some(LastLevelCache {
                level: read_trimmed(&path.join("level"))?.parse().ok()?,
                id: read_trimmed(&path.join("id")).and_then(|s| s.parse().ok()),
                cpus: CpuList::parse_kernel(&read_trimmed(&path.join("shared_cpu_list"))?).ok()?,
            })
        })
        .max_by_key(|c| c.level)
}

/// Every `nodeN/cpulist` under `dir`, as (N, list).
fn read_nodes(dir: &Path) -> Vec<(u32, CpuList)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut nodes: Vec<(u32, CpuList)> = entries
        .filter_map(|e| {
            let e = e.ok()?;
            let n = e.file_name().to_str()?.strip_prefix("node")?.parse().ok()?;
            let list = CpuList::parse_kernel(&read_trimmed(&e.path().join("cpulist"))?).ok()?;
            Some((n, list))
        })
        .collect();
    nodes.sort_by_key(|(n, _)| *n);
    nodes
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A fake /sys of a 2-socket machine with 2 cores per socket and 2 threads per core,
    /// numbered as Intel servers number them: CPU n and n+4 are siblings, CPUs 0,1,4,5
    /// are socket 0 (node 0), CPUs 2,3,6,7 socket 1 (node 1).
    pub(crate) fn two_socket_smt(root: &Path) {
        let w = |rel: String, text: &str| {
            let p = root.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, format!("{text}\n")).unwrap();
        };
        for cpu in 0..8usize {
            let core = cpu % 4;
            let package = core / 2;
            let t = format!("devices/system/cpu/cpu{cpu}/topology");
            w(format!("{t}/physical_package_id"), &package.to_string());
            w(format!("{t}/die_id"), "0");
            w(format!("{t}/core_id"), &(core % 2).to_string());
            w(
                format!("{t}/thread_siblings_list"),
                &format!("{core},{}", core + 4),
            );
        }
        w("devices/system/node/node0/cpulist".into(), "0-1,4-5");
        w("devices/system/node/node1/cpulist".into(), "2-3,6-7");
        w("devices/system/node/possible".into(), "0-1");
    }

    /// A fake /sys of a 2-socket machine with two L3s per socket, two cores per L3 and
    /// two threads per core (16 CPUs), numbered as Intel servers number them: CPU n and
    /// n+8 are siblings, core c (CPUs c and c+8) is in package c / 4 and L3 c / 2. Each
    /// core also has its own L1d, L1i and L2, so the L3 must be picked as the last level.
    /// With `snc` each L3 is its own NUMA node (sub-NUMA clustering), else each package.
    pub(crate) fn two_sockets_two_llcs(root: &Path, snc: bool) {
        let w = |rel: String, text: &str| {
            let p = root.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, format!("{text}\n")).unwrap();
        };
        let cpus_of = |cores: std::ops::Range<usize>| {
            let mut c: Vec<usize> = cores.flat_map(|c| [c, c + 8]).collect();
            c.sort_unstable();
            CpuList::from_cpus(c).to_string()
        };
        for cpu in 0..16usize {
            let core = cpu % 8;
            let (package, llc) = (core / 4, core / 2);
            let t = format!("devices/system/cpu/cpu{cpu}/topology");
            w(format!("{t}/physical_package_id"), &package.to_string());
            w(format!("{t}/die_id"), "0");
            w(format!("{t}/core_id"), &(core % 4).to_string());
            w(
                format!("{t}/thread_siblings_list"),
                &cpus_of(core..core + 1),
            );
            let caches = [
                (1, "Data", core, cpus_of(core..core + 1)),
                (1, "Instruction", core, cpus_of(core..core + 1)),
                (2, "Unified", core, cpus_of(core..core + 1)),
                (3, "Unified", llc, cpus_of(llc * 2..llc * 2 + 2)),
            ];
            for (i, (level, kind, id, shared)) in caches.iter().enumerate() {
                let c = format!("devices/system/cpu/cpu{cpu}/cache/index{i}");
                w(format!("{c}/level"), &level.to_string());
                w(format!("{c}/type"), kind);
                w(format!("{c}/id"), &id.to_string());
                w(format!("{c}/shared_cpu_list"), shared);
            }
        }
        let nodes: Vec<std::ops::Range<usize>> = match snc {
            true => (0..4).map(|l| l * 2..l * 2 + 2).collect(),
            false => vec![0..4, 4..8],
        };
        for (n, cores) in nodes.into_iter().enumerate() {
            w(
                format!("devices/system/node/node{n}/cpulist"),
                &cpus_of(cores),
            );
        }
    }

    /// Pairs of the 16-CPU fake per locality, counted by hand: 8 sibling pairs; per L3
    /// 4 CPUs give 6 pairs, 2 of them siblings, so 4 × 4 same-L3; per package 8 CPUs
    /// give 28 pairs, 12 of them inside an L3, so 2 × 16 in the package across L3s; and
    /// 8 × 8 across the packages.
    #[test]
    fn classes_every_pair_of_two_sockets_with_two_llcs() {
        for snc in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            two_sockets_two_llcs(dir.path(), snc);
            let all = CpuList::parse_kernel("0-15").unwrap();
            let t = Topology::read(dir.path(), &all);
            assert!(t.llc_known() && t.recorded());
            let p9 = t.place(9).unwrap();
            let llc = p9.llc.as_ref().unwrap();
            assert_eq!((llc.level, llc.id), (3, Some(0)));
            assert_eq!(llc.cpus.to_string(), "0-1,8-9");
            let mut count: std::collections::BTreeMap<Locality, usize> = Default::default();
            for a in 0..16 {
                for b in a + 1..16 {
                    *count.entry(t.locality(a, b)).or_default() += 1;
                }
            }
            let across_llcs = match snc {
                true => Locality::OtherNode,
                false => Locality::SamePackage,
            };
            let want = [
                (Locality::SmtSiblings, 8),
                (Locality::SameLlc, 16),
                (across_llcs, 32),
                (Locality::CrossPackage, 64),
            ];
            assert_eq!(count, want.into_iter().collect(), "snc {snc}");
            assert_eq!(t.locality(0, 8), Locality::SmtSiblings);
            assert_eq!(t.locality(0, 9), Locality::SameLlc);
            assert_eq!(t.locality(1, 2), across_llcs);
            assert_eq!(t.locality(3, 4), Locality::CrossPackage);
            // Grouped: each L3's cores with their siblings side by side.
            let order = t.grouped_order();
            assert_eq!(&order[..8], &[0, 8, 1, 9, 2, 10, 3, 11]);
        }
    }

    #[test]
    fn reads_a_two_socket_smt_machine() {
        let dir = tempfile::tempdir().unwrap();
        two_socket_smt(dir.path());
        let all = CpuList::parse_kernel("0-7").unwrap();
        let t = Topology::read(dir.path(), &all);
        assert_eq!(t.cpus.len(), 8);
        let p6 = t.place(6).unwrap();
        assert_eq!((p6.package, p6.core, p6.node), (Some(1), Some(0), Some(1)));
        assert_eq!(p6.smt_siblings.to_string(), "2,6");
        assert_eq!(t.locality(0, 4), Locality::SmtSiblings);
        assert_eq!(t.locality(0, 1), Locality::SamePackage);
        assert_eq!(t.locality(1, 2), Locality::CrossPackage);
        assert_eq!(t.locality(3, 3), Locality::SameCpu);
        // Grouped: node 0's cores with their siblings side by side, then node 1's.
        assert_eq!(t.grouped_order(), vec![0, 4, 1, 5, 2, 6, 3, 7]);
    }

    #[test]
    fn missing_files_leave_fields_empty() {
        let dir = tempfile::tempdir().unwrap();
        let t = Topology::read(dir.path(), &CpuList::from_cpus(vec![0, 1]));
        assert_eq!(t.place(1).unwrap().package, None);
        assert_eq!(t.place(1).unwrap().smt_siblings.to_string(), "1");
        assert_eq!(t.place(1).unwrap().llc, None);
        assert_eq!(t.locality(0, 1), Locality::Unknown);
        assert!(!t.llc_known() && !t.recorded());
        assert_eq!(t.grouped_order(), vec![0, 1]);
    }

    #[test]
    fn reads_this_machine() {
        let u = crate::engine::cpu::CpuUniverse::detect().unwrap();
        let t = Topology::detect(&u.online);
        assert_eq!(t.cpus.len(), u.online.len());
        for p in &t.cpus {
            assert!(
                p.smt_siblings.contains(p.cpu),
                "cpu {} is its own sibling",
                p.cpu
            );
            // Where the kernel lists caches, the last level is read and shared with
            // this CPU at least.
            let cache = format!("/sys/devices/system/cpu/cpu{}/cache/index0", p.cpu);
            if Path::new(&cache).exists() {
                let llc = p.llc.as_ref().expect("the last-level cache");
                assert!(llc.level >= 1 && llc.cpus.contains(p.cpu), "{llc:?}");
            }
        }
    }
}
