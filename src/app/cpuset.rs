//! The process's cgroup cpuset, as the plan uses it: the CPUs a run may use are those of
//! the group's effective cpuset (`cpuset.cpus.effective`, v1 `cpuset.effective_cpus`) as
//! well as of its affinity; the housekeeping CPU is one the group shares with other
//! groups where it has both kinds, so that the CPUs it has alone are the ones measured;
//! and a run in a cpuset group of its own says which measured CPUs are its alone.

use std::path::Path;
use std::sync::{Arc, OnceLock};

use crate::engine::cpu::{CpuList, CpuUniverse};
use crate::system::cgroup::{Cgroups, CpusetView, Sharers};

/// The live process's cpuset group (below the root), its effective CPUs and the groups
/// that may share them, read once a run: the plan, its housekeeping CPU and the run's
/// note all judge the same reading.
#[derive(Default, Clone)]
pub struct Cpuset {
    group: Option<Arc<(Cgroups, CpuList, Sharers)>>,
}

impl Cpuset {
    /// The live process's, read at the first call: a run's every step (the main job's
    /// too) and every call judge the one reading. None in the root cpuset (every CPU,
    /// shared by everything: nothing to narrow or say) or where the chain cannot be read.
    pub fn read() -> Cpuset {
        static ONCE: OnceLock<Cpuset> = OnceLock::new();
        ONCE.get_or_init(|| {
            let group = Cgroups::of_self().ok().and_then(|cg| {
                let chain = cg.cpuset().filter(|c| c.own().path != "/")?;
                let effective = chain.effective_cpus()?.clone();
                let sharers = Sharers::read(Path::new("/"), chain);
                Some(Arc::new((cg, effective, sharers)))
            });
            Cpuset { group }
        })
        .clone()
    }

    /// The universe with its allowed CPUs narrowed to the cgroup's effective cpuset (the
    /// kernel keeps a task's affinity inside it; this makes the plan say so even when a
    /// cpuset changed after the process started).
    pub fn narrowed(&self, universe: &CpuUniverse) -> CpuUniverse {
        match self.group.as_deref() {
            Some((_, effective, _)) if !universe.allowed.intersect(effective).is_empty() => {
                CpuUniverse {
                    allowed: universe.allowed.intersect(effective),
                    ..universe.clone()
                }
            }
            _ => universe.clone(),
        }
    }

    /// Which of `cpus` the group holds alone and which other groups' cpusets also hold.
    fn view(&self, cpus: &CpuList) -> Option<CpusetView> {
        let (cg, _, sharers) = self.group.as_deref()?;
        Some(CpusetView::of(cg.cpuset()?, sharers, cpus))
    }

    /// The housekeeping CPU for a default plan: the lowest usable CPU that other groups
    /// share, when the group also has CPUs of its own; `None` leaves the usual choice.
    pub fn housekeeping(&self, universe: &CpuUniverse) -> Option<usize> {
        let v = self.view(&universe.usable())?;
        if v.exclusive.is_empty() {
            return None;
        }
        v.shared.first()
    }

    /// What a run in a cpuset group of its own says about its measured CPUs, or `None`
    /// in the root cpuset.
    pub fn note(&self, measured: &CpuList) -> Option<String> {
        let v = self.view(measured)?;
        Some(format!("cpuset of cgroup {}: {}", v.group, v.words()))
    }
}
