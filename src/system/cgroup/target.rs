//! Finding a cgroup to watch (`watch --cgroup/--container/--pod/--unit`) and naming the
//! container, pod or unit a task lives in. Pure functions of a directory tree and of
//! `/proc/PID/cgroup`'s text, read below a root (`/` live, a tempdir in tests).
//!
//! A group is searched in one hierarchy at a time, in this order: the v1 `cpu` one
//! (where quotas and RT runtime live), the v2 unified one, systemd's named v1 one, then
//! any other; the first where the target is found is used. Its threads are the `tasks`
//! (v1) or `cgroup.threads` (v2) files of the group and every group below it, listed
//! again by the caller as tasks start, move in and out.
//!
//! Container runtimes name a container's group after its 64-digit id:
//! `docker-ID.scope`, `libpod-ID.scope`, `cri-containerd-ID.scope`, `crio-ID.scope`
//! (systemd driver), or `docker/ID`, `libpod_parent/libpod-ID`, `…/pod<uid>/ID`
//! (cgroupfs driver). Kubernetes names a pod's group `pod<uid>` (cgroupfs) or
//! `kubepods-<qos>-pod<uid with _ for ->.slice` (systemd); podman names its pods' groups
//! after the pod's 64-digit id, bare under `libpod_parent` (cgroupfs: seen with podman 4.3,
//! `libpod_parent/<pod id>/libpod-<container id>` and `…/<pod id>/conmon`) or
//! `machine-libpod_pod_<pod id>.slice` (systemd). A pod made with `--infra=false` gets no
//! group of its own (its containers sit beside the others'), so it cannot be found by its
//! cgroup. Runtimes' monitor processes (`libpod-conmon-ID.scope`, `crio-conmon-ID.scope`)
//! are not the container.

use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};

use super::{CgroupMount, Version, host_path, parse_proc_cgroup};

/// What to watch, as given on the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selector {
    /// A group's path, relative to a cgroup mount or absolute (`/sys/fs/cgroup/cpu/x`).
    Path(String),
    /// A container's id or a unique prefix of it.
    Container(String),
    /// A Kubernetes pod's uid (dashes or underscores), or a podman pod's id or a unique
    /// prefix of it.
    Pod(String),
    /// A systemd service, scope or slice (`.service` assumed when no suffix is given).
    Unit(String),
}

impl Selector {
    /// The option and value, as said in messages: `--container 3f2a`.
    pub fn describe(&self) -> String {
        match self {
            Selector::Path(p) => format!("--cgroup {p}"),
            Selector::Container(c) => format!("--container {c}"),
            Selector::Pod(p) => format!("--pod {p}"),
            Selector::Unit(u) => format!("--unit {u}"),
        }
    }
}

/// One group found, in one hierarchy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    pub version: Version,
    /// The hierarchy's mount point: `/sys/fs/cgroup/cpu`.
    pub mount: String,
    /// The group's path in its hierarchy: `/machine.slice/libpod-3f2a….scope`.
    pub path: String,
}

impl Group {
    /// Its directory under `root`.
    pub fn dir(&self, root: &Path) -> PathBuf {
        host_path(
            root,
            &format!("{}{}", self.mount.trim_end_matches('/'), self.path),
        )
    }
}

/// What a task's cgroup says it belongs to, most specific first.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Owner {
    /// A container, by its id (in full).
    Container(String),
    /// A pod, by its Kubernetes uid or podman id (in full), for a task in its group but
    /// no container's.
    Pod(String),
    /// A systemd service or scope.
    Unit(String),
    /// None of those: the host.
    Host,
}

impl Owner {
    /// As appended to a task's name: `container 3f2a1b2c3d4e`, `pod 7c0e…`, `unit
    /// sshd.service`, `host`. Ids are cut to 12 digits, as `docker ps` shows them.
    pub fn label(&self) -> String {
        match self {
            Owner::Container(id) => format!("container {}", id.get(..12).unwrap_or(id)),
            Owner::Pod(uid) if is_id(uid) => format!("pod {}", &uid[..12]),
            Owner::Pod(uid) => format!("pod {uid}"),
            Owner::Unit(u) => format!("unit {u}"),
            Owner::Host => "host".into(),
        }
    }
}

/// The runtimes' prefixes of a container's group name (systemd driver), and of
/// libpod's cgroupfs one.
const CONTAINER_PREFIXES: &[&str] = &[
    "docker-",
    "libpod-",
    "cri-containerd-",
    "crio-",
    "containerd-",
];

/// The container id a group's name holds, if any: a runtime's scope, or a bare 64-digit
/// id (cgroupfs driver). A runtime's monitor (`…-conmon-ID`) holds none.
pub fn container_id(name: &str) -> Option<&str> {
    let base = name.strip_suffix(".scope").unwrap_or(name);
    let id = (CONTAINER_PREFIXES.iter())
        .find_map(|p| base.strip_prefix(p))
        .unwrap_or(base);
    is_id(id).then_some(id)
}

/// Whether `s` is a runtime's id: 64 hex digits.
fn is_id(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The podman pod id a group's name holds, given its parent's name: bare under
/// `libpod_parent` (cgroupfs driver; podman's containers there are `libpod-ID`, never
/// bare), or `machine-libpod_pod_ID.slice` (systemd driver).
pub fn podman_pod_id<'a>(parent: &str, name: &'a str) -> Option<&'a str> {
    let id = match name.strip_prefix("machine-libpod_pod_") {
        Some(rest) => rest.strip_suffix(".slice")?,
        None if parent == "libpod_parent" => name,
        None => return None,
    };
    is_id(id).then_some(id)
}

/// The pod the last level of a group path is, if any: a Kubernetes uid or a podman id.
fn pod_of(path: &str) -> Option<String> {
    let mut parts = path.rsplit('/');
    let name = parts.next()?;
    let parent = parts.next().unwrap_or("");
    pod_uid(name).or_else(|| podman_pod_id(parent, name).map(str::to_string))
}

/// The container the last level of a group path is, if any (a podman pod's bare id is
/// none).
fn container_of(path: &str) -> Option<&str> {
    let mut parts = path.rsplit('/');
    let name = parts.next()?;
    let parent = parts.next().unwrap_or("");
    match podman_pod_id(parent, name) {
        Some(_) => None,
        None => container_id(name),
    }
}

/// The pod uid a group's name holds, with dashes: `pod<uid>` (cgroupfs) or
/// `kubepods-<qos>-pod<uid_with_underscores>.slice` (systemd).
pub fn pod_uid(name: &str) -> Option<String> {
    // cgroupfs keeps the uid's dashes; systemd's slice names use them as separators.
    let uid = match name.strip_prefix("pod") {
        Some(uid) => uid,
        None => name
            .strip_suffix(".slice")?
            .rsplit('-')
            .next()?
            .strip_prefix("pod")?,
    };
    let uid = uid.replace('_', "-").to_ascii_lowercase();
    // A uid is 36 characters of hex and dashes (8-4-4-4-12).
    let ok = uid.len() == 36 && uid.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-');
    ok.then_some(uid)
}

/// The systemd unit a group's name is (a service or a scope), if any.
pub fn unit_name(name: &str) -> Option<&str> {
    (name.ends_with(".service") || name.ends_with(".scope")).then_some(name)
}

/// Who a group path's task belongs to: the deepest container, else the deepest pod,
/// else the deepest unit, else the host.
pub fn owner_of_path(path: &str) -> Owner {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    // Each level's path from the top, deepest first.
    let levels: Vec<String> = (1..=parts.len())
        .rev()
        .map(|n| parts[..n].join("/"))
        .collect();
    if let Some(id) = levels.iter().find_map(|l| container_of(l)) {
        return Owner::Container(id.to_string());
    }
    if let Some(pod) = levels.iter().find_map(|l| pod_of(l)) {
        return Owner::Pod(pod);
    }
    let deepest = |f: &dyn Fn(&str) -> Option<String>| parts.iter().rev().find_map(|p| f(p));
    match deepest(&|p| unit_name(p).map(str::to_string)) {
        Some(u) => Owner::Unit(u),
        None => Owner::Host,
    }
}

/// Who a task belongs to, from its `/proc/PID/cgroup` text: judged on the v1 `cpu`
/// hierarchy's path, else the unified one's, else systemd's, the first that names more
/// than the host.
pub fn owner_of(proc_cgroup: &str) -> Owner {
    let members = parse_proc_cgroup(proc_cgroup);
    let rank = |m: &super::Membership| match () {
        _ if m.controllers.iter().any(|c| c == "cpu") => 0,
        _ if m.controllers.is_empty() => 1,
        _ if m.controllers.iter().any(|c| c == "name=systemd") => 2,
        _ => 3,
    };
    let mut ranked: Vec<&super::Membership> = members.iter().collect();
    ranked.sort_by_key(|m| rank(m));
    (ranked.iter())
        .map(|m| owner_of_path(&m.path))
        .find(|o| *o != Owner::Host)
        .unwrap_or(Owner::Host)
}

/// The hierarchies to search, in order: v1 `cpu`, v2, systemd's, the rest; one mount
/// each (a hierarchy mounted twice is searched once), only those showing their root.
pub fn search_order(mounts: &[CgroupMount]) -> Vec<&CgroupMount> {
    let rank = |m: &CgroupMount| match m.version {
        Version::V1 if m.controllers.iter().any(|c| c == "cpu") => 0,
        Version::V2 => 1,
        Version::V1 if m.controllers.iter().any(|c| c == "name=systemd") => 2,
        Version::V1 => 3,
    };
    let mut out: Vec<&CgroupMount> = Vec::new();
    for m in mounts.iter().filter(|m| m.root == "/") {
        let same = |o: &&CgroupMount| o.version == m.version && o.controllers == m.controllers;
        if !out.iter().any(same) {
            out.push(m);
        }
    }
    out.sort_by_key(|m| rank(m));
    out
}

/// How deep a search goes below a mount: kubepods' deepest is 5.
const MAX_DEPTH: usize = 12;

/// Every group below (and with) `path` in the hierarchy at `mount`, as paths, parents
/// before their children. Symbolic links are not followed.
fn groups_below(root: &Path, mount: &str, path: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut todo = vec![(path.to_string(), 0)];
    while let Some((p, depth)) = todo.pop() {
        let dir = host_path(root, &format!("{}{}", mount.trim_end_matches('/'), p));
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        out.push(p.clone());
        if depth >= MAX_DEPTH {
            continue;
        }
        for e in entries.flatten() {
            let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
            if let (true, Some(name)) = (is_dir, e.file_name().to_str()) {
                let child = format!("{}/{name}", p.trim_end_matches('/'));
                todo.push((child, depth + 1));
            }
        }
    }
    out
}

/// Keeps the groups that no other kept group holds (their threads are listed from above).
fn topmost(mut paths: Vec<String>) -> Vec<String> {
    paths.sort();
    let mut out: Vec<String> = Vec::new();
    for p in paths {
        let held = out
            .iter()
            .any(|o| p.starts_with(&format!("{o}/")) || *o == p);
        if !held {
            out.push(p);
        }
    }
    out
}

/// The groups `sel` names under `root`, or why none: the first hierarchy (in
/// `search_order`) that holds it. A container prefix that two containers share is an
/// error naming both.
pub fn resolve(root: &Path, mounts: &[CgroupMount], sel: &Selector) -> Result<Vec<Group>, String> {
    let order = search_order(mounts);
    if order.is_empty() {
        return Err("no cgroup hierarchy is mounted".into());
    }
    if let Selector::Path(p) = sel {
        return resolve_path(root, &order, p);
    }
    for m in &order {
        let all = groups_below(root, &m.mount_point, "");
        let found = match sel {
            Selector::Container(prefix) => containers(&all, prefix)?,
            Selector::Pod(given) => pods(&all, given)?,
            Selector::Unit(u) => units(&all, u),
            Selector::Path(_) => unreachable!("resolved above"),
        };
        if !found.is_empty() {
            let group = |path| Group {
                version: m.version,
                mount: m.mount_point.clone(),
                path,
            };
            return Ok(topmost(found).into_iter().map(group).collect());
        }
    }
    let places: Vec<&str> = order.iter().map(|m| m.mount_point.as_str()).collect();
    let what = match sel {
        Selector::Container(_) => "no container's cgroup has that id",
        Selector::Pod(_) => "no pod's cgroup has that uid or podman pod id",
        _ => "no such unit's cgroup",
    };
    Err(format!("{what} under {}", places.join(", ")))
}

/// The groups of the one container whose id starts with `prefix`.
fn containers(all: &[String], prefix: &str) -> Result<Vec<String>, String> {
    let prefix = prefix.to_ascii_lowercase();
    if prefix.is_empty() || !prefix.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!("'{prefix}' is no container id: give hex digits"));
    }
    let hits: Vec<(String, String)> = (all.iter())
        .filter_map(|p| Some((container_of(p)?.to_string(), p.clone())))
        .filter(|(i, _)| i.starts_with(&prefix))
        .collect();
    one_owner(hits, &prefix, "containers'")
}

/// The groups of the one pod `given` names: a Kubernetes uid in full (dashes or
/// underscores), or a unique prefix of a podman pod's id.
fn pods(all: &[String], given: &str) -> Result<Vec<String>, String> {
    let want = given.replace('_', "-").to_ascii_lowercase();
    let hex = !want.is_empty() && want.bytes().all(|b| b.is_ascii_hexdigit());
    let hits: Vec<(String, String)> = (all.iter())
        .filter_map(|p| Some((pod_of(p)?, p.clone())))
        .filter(|(id, _)| *id == want || (hex && is_id(id) && id.starts_with(&want)))
        .collect();
    one_owner(hits, &want, "pods'")
}

/// The paths of `hits` (owner id, path) when they are all one owner's; an error naming
/// some of them when `prefix` starts several owners' ids.
fn one_owner(
    hits: Vec<(String, String)>,
    prefix: &str,
    whose: &str,
) -> Result<Vec<String>, String> {
    let ids: BTreeSet<&str> = hits.iter().map(|(i, _)| i.as_str()).collect();
    if ids.len() > 1 {
        let some: Vec<&str> = ids
            .iter()
            .take(3)
            .map(|i| i.get(..12).unwrap_or(i))
            .collect();
        return Err(format!(
            "'{prefix}' starts {} {whose} ids ({}…): give more of it",
            ids.len(),
            some.join(", ")
        ));
    }
    Ok(hits.into_iter().map(|(_, p)| p).collect())
}

/// The groups named `unit`, or `unit.service` (then `.scope`, `.slice`) when it has no
/// suffix.
fn units(all: &[String], unit: &str) -> Vec<String> {
    let suffixed = [".service", ".scope", ".slice"]
        .iter()
        .any(|s| unit.ends_with(s));
    let names: Vec<String> = match suffixed {
        true => vec![unit.to_string()],
        false => [".service", ".scope", ".slice"]
            .iter()
            .map(|s| format!("{unit}{s}"))
            .collect(),
    };
    for n in names {
        let hits: Vec<String> = (all.iter())
            .filter(|p| p.rsplit('/').next() == Some(n.as_str()))
            .cloned()
            .collect();
        if !hits.is_empty() {
            return hits;
        }
    }
    Vec::new()
}

/// A path given to `--cgroup`: a directory under a mount point, or a path relative to
/// one (the first hierarchy that has it).
fn resolve_path(root: &Path, order: &[&CgroupMount], given: &str) -> Result<Vec<Group>, String> {
    let is_dir = |m: &CgroupMount, rel: &str| {
        let p = format!("{}{rel}", m.mount_point.trim_end_matches('/'));
        host_path(root, &p).is_dir()
    };
    let normal = |rel: &str| match rel.trim_matches('/') {
        "" => "/".to_string(),
        r => format!("/{r}"),
    };
    for m in order {
        let under = given.strip_prefix(m.mount_point.trim_end_matches('/'));
        if let Some(rel) = under.filter(|r| r.is_empty() || r.starts_with('/')) {
            let rel = normal(rel);
            return match is_dir(m, &rel) {
                true => Ok(vec![Group {
                    version: m.version,
                    mount: m.mount_point.clone(),
                    path: rel,
                }]),
                false => Err(format!("no such cgroup: {given} is no directory")),
            };
        }
    }
    let rel = normal(given);
    let found = order.iter().find(|m| is_dir(m, &rel)).ok_or_else(|| {
        let places: Vec<&str> = order.iter().map(|m| m.mount_point.as_str()).collect();
        format!("no such cgroup under {}", places.join(", "))
    })?;
    Ok(vec![Group {
        version: found.version,
        mount: found.mount_point.clone(),
        path: rel,
    }])
}

/// Every thread in `groups` and the groups below them now: v1 `tasks`, v2
/// `cgroup.threads`. Groups gone since are skipped; `None` when all are gone.
pub fn threads(root: &Path, groups: &[Group]) -> Option<HashSet<u32>> {
    let mut out = HashSet::new();
    let mut any = false;
    for g in groups {
        if !g.dir(root).is_dir() {
            continue;
        }
        any = true;
        let file = match g.version {
            Version::V1 => "tasks",
            Version::V2 => "cgroup.threads",
        };
        for p in groups_below(root, &g.mount, &g.path) {
            let dir = host_path(root, &format!("{}{p}", g.mount.trim_end_matches('/')));
            let text = std::fs::read_to_string(dir.join(file)).unwrap_or_default();
            out.extend(
                text.split_whitespace()
                    .filter_map(|t| t.parse::<u32>().ok()),
            );
        }
    }
    any.then_some(out)
}

#[cfg(test)]
mod tests;
