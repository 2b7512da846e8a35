//! CPU topology from sysfs: which CPUs are SMT siblings, which share a package, and
//! which NUMA node each belongs to. `c2c` shows it beside its matrix and orders rows by
//! it; every path is read under a root so that tests can give a fake tree.
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
}

/// How close two CPUs are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Locality {
    SameCpu,
    /// Two hardware threads of one core.
    SmtSiblings,
    /// Different cores of one package.
    SamePackage,
    /// Different packages.
    CrossPackage,
    /// The kernel did not say.
    Unknown,
}

impl std::fmt::Display for Locality {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Locality::SameCpu => "same CPU",
            Locality::SmtSiblings => "SMT siblings",
            Locality::SamePackage => "same package",
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
        match (pa.package, pb.package) {
            (Some(x), Some(y)) if x == y => Locality::SamePackage,
            (Some(_), Some(_)) => Locality::CrossPackage,
            _ => Locality::Unknown,
        }
    }

    /// The CPUs ordered by locality: node, package, die, core, then CPU number, so that
    /// SMT siblings sit side by side and each package forms one block.
    pub fn grouped_order(&self) -> Vec<usize> {
        let mut places: Vec<&CpuPlace> = self.cpus.iter().collect();
        places.sort_by_key(|p| {
            (
                p.node.unwrap_or(u32::MAX),
                p.package.unwrap_or(u32::MAX),
                p.die.unwrap_or(0),
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
        assert_eq!(t.locality(0, 1), Locality::Unknown);
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
        }
    }
}
