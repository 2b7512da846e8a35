//! The audit from inside a container. The kernel's settings and counters are the node's
//! and mostly visible (/proc/cmdline, /proc/sys, /proc/irq, /sys), often read-only; the
//! node's processes are not (another PID namespace: irqbalance, kernel threads), nor its
//! /etc (tuned) or boot loader. So: a check that cannot see what it checks says so
//! (`Missing::Hidden`, never a pass); a fix that cannot be made from inside (a read-only
//! file, a boot option) says it is made on the node; and one finding names the runtime
//! and lists the checks that could not see.

use std::path::Path;

use super::{Area, Finding, FindingId as Id, Host, Remedy, Severity, finding};

/// The container runtime, when the audited tree is a container's: the evidence is a
/// PID namespace that hides the node's tasks, or a cgroup chain that does not reach the
/// real root (a marker file alone is not: a VM's root file system may come from an image
/// and keep docker's /.dockerenv). The name comes from podman's /run/.containerenv,
/// docker's /.dockerenv, a Kubernetes pod's environment or systemd's `container`.
pub(super) fn detect(
    root: &Path,
    cgroup_from_root: Option<bool>,
    tasks_hidden: bool,
) -> Option<String> {
    if !tasks_hidden && cgroup_from_root != Some(false) {
        return None;
    }
    let live = root == Path::new("/");
    let name = if root.join("run/.containerenv").exists() {
        "podman".to_string()
    } else if root.join(".dockerenv").exists() {
        "docker".to_string()
    } else if live && std::env::var_os("KUBERNETES_SERVICE_HOST").is_some() {
        "a Kubernetes pod".to_string()
    } else if let Some(c) = std::env::var("container").ok().filter(|_| live) {
        c
    } else if live {
        "a container".to_string()
    } else {
        // A recorded tree without /proc/2 is no evidence by itself.
        return None;
    };
    Some(name)
}

/// Whether the node's own tasks are out of sight: kthreadd (pid 2) is missing from /proc,
/// as in any PID namespace but the node's.
pub(super) fn host_tasks_hidden(root: &Path) -> bool {
    std::fs::read_to_string(root.join("proc/2/comm")).map_or(true, |c| c.trim() != "kthreadd")
}

/// What a hidden check's value begins with.
pub(super) const HIDDEN: &str = "not visible from inside";

/// After the checks: every fix that cannot be made from inside says it is the node's,
/// and a first finding names the runtime and the checks that could not see.
pub(super) fn adjust(h: &Host, runtime: &str, findings: &mut Vec<Finding>) {
    for f in findings.iter_mut() {
        let mut changed = false;
        for r in f.remedies.iter_mut() {
            let node = |how: &str| format!("on the node, not in this container: {how}");
            match r {
                Remedy::Runtime { command, effects } if !effects.iter().all(|e| can_make(h, e)) => {
                    *r = Remedy::Manual {
                        what: node(command),
                    };
                    changed = true;
                }
                Remedy::Boot { how, .. } | Remedy::KernelBuild { how, .. } => {
                    *how = node(how);
                    changed = true;
                }
                _ => {}
            }
        }
        if changed {
            f.render_fix();
        }
    }
    let hidden: Vec<String> = findings
        .iter()
        .filter(|f| f.value.starts_with(HIDDEN))
        .map(|f| f.id.to_string())
        .collect();
    let value = match hidden.is_empty() {
        true => format!("{runtime}: every check could see what it checks"),
        false => format!(
            "{runtime}: {} check(s) cannot see from inside: {}",
            hidden.len(),
            hidden.join(", ")
        ),
    };
    findings.insert(
        0,
        finding(Area::Cgroups, Id::InsideContainer, Severity::Info, value)
            .why(
                "inside a container the kernel's settings are the node's, mostly read-only, \
                 and the node's processes, /etc and boot loader are out of sight: what a \
                 check cannot see is said, not passed, and host settings are fixed on the \
                 node",
            )
            .manual("for the whole picture, audit the node itself: jitterscope audit on the host"),
    );
}

/// Whether a run-time fix's change can be made from here (a tree is taken as writable).
fn can_make(h: &Host, e: &super::Effect) -> bool {
    match e {
        super::Effect::Write { path, .. } => h.writable(path),
        // Another task's affinity: only a task this PID namespace shows.
        super::Effect::Affinity { pid, .. } => {
            h.root != Path::new("/") || Path::new("/proc").join(pid.to_string()).exists()
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::engine::cpu::CpuList;
    use crate::system::audit::{AuditReport, FindingId, Remedy};
    use crate::system::finding_id::Check;

    /// A podman container's view: the node's cmdline and IRQs, none of its processes.
    #[test]
    fn issue30_inside_a_container_the_unseen_checks_say_so_and_fixes_are_the_nodes() {
        let t = crate::system::cgroup::tree(&[
            ("run/.containerenv", "engine=\"podman-4.3.1\"\n"),
            ("proc/cmdline", "ro quiet\n"),
            ("proc/1/comm", "jitterscope\n"),
            ("proc/irq/24/smp_affinity_list", "0-3\n"),
            ("proc/irq/24/effective_affinity_list", "1\n"),
            (
                "proc/interrupts",
                "  CPU0 CPU1 CPU2 CPU3\n 24: 0 50 0 0 IO-APIC eth0\n",
            ),
        ]);
        let online = CpuList::from_cpus(vec![0, 1, 2, 3]);
        let r = AuditReport::of(t.path(), CpuList::from_cpus(vec![1]), &online);
        let find = |id: FindingId| r.findings.iter().find(|f| f.id == id);
        let inside = find(FindingId::InsideContainer).expect("inside-container");
        assert!(inside.value.starts_with("podman: "), "{inside:?}");
        for check in [Check::Irqbalance, Check::Kthreads, Check::Tuned] {
            let id = FindingId::Unreadable(check);
            let f = find(id).unwrap_or_else(|| panic!("no {id}"));
            assert!(
                f.value.starts_with("not visible from inside the container"),
                "{f:?}"
            );
            assert!(inside.value.contains(&id.to_string()), "{inside:?}");
        }
        // Not passed: no irqbalance-not-running, no kthreads-ok.
        assert!(find(FindingId::IrqbalanceNotRunning).is_none());
        assert!(find(FindingId::KthreadsOk).is_none());
        // The IRQ that fires on CPU 1 is seen (the node's /proc/irq is visible).
        assert!(find(FindingId::IrqOnMeasuredCpus).is_some());
        // Boot options are the node's.
        let boot = r
            .findings
            .iter()
            .flat_map(|f| &f.remedies)
            .find_map(|x| match x {
                Remedy::Boot { how, .. } => Some(how),
                _ => None,
            })
            .expect("a boot remedy");
        assert!(
            boot.starts_with("on the node, not in this container"),
            "{boot}"
        );
    }

    /// The same tree without a container's marker is a host's: nothing said hidden.
    #[test]
    fn a_tree_without_a_marker_is_no_container() {
        let t = crate::system::cgroup::tree(&[("proc/cmdline", "ro\n")]);
        let online = CpuList::from_cpus(vec![0, 1]);
        let r = AuditReport::of(t.path(), CpuList::from_cpus(vec![1]), &online);
        assert!(
            !r.findings
                .iter()
                .any(|f| f.id == FindingId::InsideContainer)
        );
        assert!(
            !r.findings
                .iter()
                .any(|f| f.value.starts_with(super::HIDDEN))
        );
    }
}
