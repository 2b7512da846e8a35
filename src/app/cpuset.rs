//! The process's cgroup cpuset, as the plan uses it: the CPUs a run may use are those of
//! the group's effective cpuset (`cpuset.cpus.effective`, v1 `cpuset.effective_cpus`) as
//! well as of its affinity; the housekeeping CPU is one the group shares with other
//! groups where it has both kinds, so that the CPUs it has alone are the ones measured;
//! and a run in a cpuset group of its own says which measured CPUs are its alone.

use std::path::Path;

use crate::engine::cpu::{CpuList, CpuUniverse};
use crate::system::audit::CpusetView;
use crate::system::cgroup::Cgroups;

/// The live process's cpuset group (below the root) and its effective CPUs.
fn group() -> Option<(Cgroups, CpuList)> {
    let cg = Cgroups::of_self().ok()?;
    let chain = cg.cpuset()?;
    let effective = chain.effective_cpus()?.clone();
    // The root cpuset is every CPU, and everything shares it: nothing to narrow or say.
    (chain.own().path != "/").then_some((cg, effective))
}

/// The universe with its allowed CPUs narrowed to the cgroup's effective cpuset (the
/// kernel keeps a task's affinity inside it; this makes the plan say so even when a
/// cpuset changed after the process started).
pub fn narrowed(universe: &CpuUniverse) -> CpuUniverse {
    match group() {
        Some((_, effective)) if !universe.allowed.intersect(&effective).is_empty() => CpuUniverse {
            allowed: universe.allowed.intersect(&effective),
            ..universe.clone()
        },
        _ => universe.clone(),
    }
}

/// Which of `cpus` the group holds alone and which other groups' cpusets also hold.
fn view(cpus: &CpuList) -> Option<CpusetView> {
    let (cg, _) = group()?;
    Some(CpusetView::of(Path::new("/"), cg.cpuset()?, cpus))
}

/// The housekeeping CPU for a default plan: the lowest usable CPU that other groups
/// share, when the group also has CPUs of its own; `None` leaves the usual choice.
pub fn housekeeping(universe: &CpuUniverse) -> Option<usize> {
    let v = view(&universe.usable())?;
    if v.exclusive.is_empty() {
        return None;
    }
    v.shared.first()
}

/// What a run in a cpuset group of its own says about its measured CPUs, or `None`
/// in the root cpuset.
pub fn note(measured: &CpuList) -> Option<String> {
    let v = view(measured)?;
    Some(format!("cpuset of cgroup {}: {}", v.group, v.words()))
}
