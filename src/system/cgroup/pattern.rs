//! `monitor --watch-cgroup PATTERN`: the groups a glob over cgroup paths matches now,
//! and what the ecosystem joins a group's series on (its container id, pod uid and
//! systemd unit). Pure functions of a directory tree, read below a root (`/` live, a
//! tempdir in tests).
//!
//! A pattern is a path relative to the cgroup mount whose components may hold `*` (any
//! run of characters but `/`) and `?` (one character): `kubepods.slice/*/*`,
//! `system.slice/*.service`, `machine.slice/libpod-*.scope`. It is expanded one
//! component at a time (a directory listing per wildcard component, never a walk of
//! the whole tree), in the first hierarchy of `target::search_order`: the v1 `cpu` one
//! where it is mounted (quotas, RT runtime and `cpu.stat` live there), else the v2 one.

use std::path::Path;

use super::host_path;
use super::target::{container_id, pod_uid, unit_name};

/// A pattern given, checked and made relative: no empty, `.` or `..` component.
pub fn check(given: &str) -> Result<String, String> {
    let rel = given.trim_matches('/');
    if rel.is_empty() {
        return Err(format!(
            "'{given}': give a path below the cgroup mount, e.g. 'kubepods.slice/*/*'"
        ));
    }
    if rel
        .split('/')
        .any(|c| c.is_empty() || c == "." || c == "..")
    {
        return Err(format!(
            "'{given}': a component is empty, '.' or '..'; give a path such as \
             'system.slice/*.service'"
        ));
    }
    if rel.chars().any(char::is_control) {
        return Err(format!(
            "'{}' holds control characters",
            given.escape_debug()
        ));
    }
    Ok(rel.to_string())
}

/// Whether `name` matches the one-component glob `pat` (`*` and `?`).
pub fn glob(pat: &str, name: &str) -> bool {
    let (p, n): (Vec<char>, Vec<char>) = (pat.chars().collect(), name.chars().collect());
    let (mut i, mut j) = (0, 0);
    // The last `*` seen, and where in `name` its run began: backtracked to on a miss.
    let mut star: Option<(usize, usize)> = None;
    while j < n.len() {
        match p.get(i) {
            Some('*') => {
                star = Some((i, j));
                i += 1;
            }
            Some(&c) if c == '?' || c == n[j] => {
                i += 1;
                j += 1;
            }
            _ => match star {
                Some((si, sj)) => {
                    (i, j) = (si + 1, sj + 1);
                    star = Some((si, sj + 1));
                }
                None => return false,
            },
        }
    }
    p[i..].iter().all(|&c| c == '*')
}

/// The groups `pattern` (checked) matches in the hierarchy mounted at `mount`, as
/// paths in it (`/machine.slice/libpod-….scope`), sorted.
pub fn matches(root: &Path, mount: &str, pattern: &str) -> Vec<String> {
    let mut found = vec![String::new()];
    for comp in pattern.split('/') {
        let wild = comp.contains(['*', '?']);
        let mut next = Vec::new();
        for parent in &found {
            let dir = host_path(root, &format!("{}{parent}", mount.trim_end_matches('/')));
            if !wild {
                if dir.join(comp).is_dir() {
                    next.push(format!("{parent}/{comp}"));
                }
                continue;
            }
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in entries.flatten() {
                let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
                if let (true, Some(name)) = (is_dir, e.file_name().to_str())
                    && glob(comp, name)
                {
                    next.push(format!("{parent}/{name}"));
                }
            }
        }
        found = next;
    }
    found.sort();
    found
}

/// What a group's path says it is, each where known: the deepest container id (in
/// full), pod uid and systemd unit (service or scope) among its components.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ids {
    pub container_id: Option<String>,
    pub pod_uid: Option<String>,
    pub unit: Option<String>,
}

pub fn ids_of(path: &str) -> Ids {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    let deepest = |f: &dyn Fn(&str) -> Option<String>| parts.iter().rev().find_map(|p| f(p));
    Ids {
        container_id: deepest(&|p| container_id(p).map(str::to_string)),
        pod_uid: deepest(&pod_uid),
        unit: deepest(&|p| unit_name(p).map(str::to_string)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_within_a_component() {
        assert!(glob("*", "anything"));
        assert!(glob("libpod-*.scope", "libpod-3f2a.scope"));
        assert!(!glob("libpod-*.scope", "libpod-conmon-3f2a.scope.x"));
        assert!(glob("*.service", "sshd.service"));
        assert!(!glob("*.service", "sshd.socket"));
        assert!(glob("pod?", "pod1"));
        assert!(!glob("pod?", "pod12"));
        assert!(glob("a*b*c", "axxbyyc"));
        assert!(!glob("a*b*c", "axxbyy"));
        assert!(glob("", ""));
        assert!(!glob("", "x"));
    }

    #[test]
    fn patterns_are_checked() {
        assert_eq!(check("/kubepods.slice/*/*/").unwrap(), "kubepods.slice/*/*");
        assert!(check("/").is_err());
        assert!(check("a//b").is_err());
        assert!(check("a/../b").is_err());
    }

    #[test]
    fn patterns_expand_component_by_component() {
        let root = tempfile::tempdir().unwrap();
        let id = "3f2a".repeat(16);
        let mk = |p: &str| std::fs::create_dir_all(root.path().join(p)).unwrap();
        mk(&format!(
            "sys/fs/cgroup/cpu/machine.slice/libpod-{id}.scope/container"
        ));
        mk(&format!(
            "sys/fs/cgroup/cpu/machine.slice/libpod-conmon-{id}.scope"
        ));
        mk("sys/fs/cgroup/cpu/system.slice/sshd.service");
        std::fs::write(
            root.path().join("sys/fs/cgroup/cpu/system.slice/x.service"),
            "",
        )
        .unwrap();
        let m = |p| matches(root.path(), "/sys/fs/cgroup/cpu", p);
        assert_eq!(
            m("machine.slice/libpod-*.scope"),
            vec![
                format!("/machine.slice/libpod-{id}.scope"),
                format!("/machine.slice/libpod-conmon-{id}.scope"),
            ]
        );
        // A file is no group.
        assert_eq!(
            m("system.slice/*.service"),
            vec!["/system.slice/sshd.service"]
        );
        assert_eq!(m("*/*/container").len(), 1);
        assert!(m("nothing/*").is_empty());
    }

    #[test]
    fn a_paths_ids_are_found_at_any_depth() {
        let id = "ab".repeat(32);
        let uid = "7c0e1d2a-1111-2222-3333-444455556666";
        let systemd = format!(
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{}.slice/\
             cri-containerd-{id}.scope",
            uid.replace('-', "_")
        );
        let i = ids_of(&systemd);
        assert_eq!(i.container_id.as_deref(), Some(id.as_str()));
        assert_eq!(i.pod_uid.as_deref(), Some(uid));
        assert_eq!(i.unit, Some(format!("cri-containerd-{id}.scope")));
        let cgroupfs = format!("/kubepods/besteffort/pod{uid}/{id}");
        let i = ids_of(&cgroupfs);
        assert_eq!(i.container_id.as_deref(), Some(id.as_str()));
        assert_eq!(i.pod_uid.as_deref(), Some(uid));
        assert_eq!(i.unit, None);
        assert_eq!(
            ids_of("/system.slice/sshd.service"),
            Ids {
                unit: Some("sshd.service".into()),
                ..Ids::default()
            }
        );
    }
}
