//! `monitor --watch-cgroup PATTERN`: the groups the patterns match, matched again every
//! [`LIST_EVERY`] as containers come and go, and each group's threads listed again with
//! them (v1 `tasks`, v2 `cgroup.threads`, the group's and every group's below), so that
//! threads that start or move in are followed and those that move out are not. The
//! watch's one follower (`watched`) keys each thread's figures by the group it is in.
//!
//! Series are bounded: the first [`MAX_GROUPS`] groups matched have their own (labelled
//! `cgroup`, and where the path holds them `container_id`, `pod_uid`, `unit`); groups
//! past the cap are summed into one `cgroup="dropped"` set and counted. A group that is
//! gone at a listing has every series removed there and then, and its threads' figures
//! are left out from then on, so its series are gone by the next scrape. A group whose
//! place frees up takes one of the cap's slots at the next listing.
//!
//! Beside the watch, each group's own throttling: `cpu.stat`'s throttled time and
//! periods, as counters from when it was first matched.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::system::cgroup::target::{self, Group};
use crate::system::cgroup::{self, CpuStat, Version, pattern};

use super::metrics::{GroupLabels, GroupMetrics};
use super::watch_books::Books;

/// Groups with series of their own; the rest are summed into `dropped`.
pub const MAX_GROUPS: usize = 64;
/// How often the patterns are matched and the groups' threads listed again.
pub const LIST_EVERY: Duration = Duration::from_millis(250);
/// `cpu.stat` is read every this many listings (once a second): throttling is a
/// counter, and a second is fresher than any scrape.
const STAT_EVERY: u64 = 4;
/// The `cgroup` label of the groups past the cap.
pub const DROPPED: &str = "dropped";

/// One group matched.
struct Matched {
    labels: GroupLabels,
    /// `cpu.stat` as last read (none where it holds no throttle counters).
    stat: Option<CpuStat>,
}

/// The groups being watched.
pub struct Groups {
    root: PathBuf,
    patterns: Vec<String>,
    version: Version,
    mount: String,
    /// Those with series of their own, by path (at most `MAX_GROUPS`).
    kept: BTreeMap<String, Matched>,
    /// Those past the cap, summed into `dropped`.
    over: BTreeMap<String, Matched>,
    /// Each thread in a group, and its group's labels (`dropped` past the cap).
    tids: HashMap<u32, GroupLabels>,
    dropped: GroupLabels,
    /// Listings made.
    lists: u64,
}

/// A group's labels, from its path.
pub fn labels_of(path: &str) -> GroupLabels {
    let ids = pattern::ids_of(path);
    GroupLabels {
        cgroup: path.to_string(),
        container_id: ids.container_id.unwrap_or_default(),
        pod_uid: ids.pod_uid.unwrap_or_default(),
        unit: ids.unit.unwrap_or_default(),
    }
}

/// The patterns given, checked.
pub fn patterns(given: &[String]) -> Result<Vec<String>, String> {
    let mut out: Vec<String> = Vec::new();
    for g in given {
        let p = pattern::check(g)?;
        if !out.contains(&p) {
            out.push(p);
        }
    }
    Ok(out)
}

impl Groups {
    /// Watches the groups `patterns` (checked) match in the host's first cgroup
    /// hierarchy (v1 `cpu`, else v2), under `root`.
    pub fn new(root: &Path, patterns: Vec<String>) -> Result<Groups, String> {
        let mountinfo = std::fs::read_to_string(root.join("proc/self/mountinfo"))
            .map_err(|e| format!("cannot read /proc/self/mountinfo: {e}"))?;
        let mounts = cgroup::parse_mountinfo(&mountinfo);
        let m = target::search_order(&mounts)
            .first()
            .copied()
            .ok_or("no cgroup hierarchy is mounted")?;
        Ok(Groups::at(root, m.version, &m.mount_point, patterns))
    }

    /// Watches the groups `patterns` match in the hierarchy mounted at `mount`.
    pub fn at(root: &Path, version: Version, mount: &str, patterns: Vec<String>) -> Groups {
        Groups {
            root: root.to_path_buf(),
            patterns,
            version,
            mount: mount.to_string(),
            kept: BTreeMap::new(),
            over: BTreeMap::new(),
            tids: HashMap::new(),
            dropped: GroupLabels {
                cgroup: DROPPED.into(),
                container_id: String::new(),
                pod_uid: String::new(),
                unit: String::new(),
            },
            lists: 0,
        }
    }

    /// Where the groups are looked for: `/sys/fs/cgroup/cpu` (v1).
    pub fn describe(&self) -> String {
        let v = match self.version {
            Version::V1 => "v1",
            Version::V2 => "v2",
        };
        format!("{} ({v})", self.mount)
    }

    /// The group's labels a thread is in now, if any.
    pub fn key(&self, tid: u32) -> Option<&GroupLabels> {
        self.tids.get(&tid)
    }

    /// Every thread in a matched group now.
    pub fn tids(&self) -> impl Iterator<Item = u32> + '_ {
        self.tids.keys().copied()
    }

    fn group(&self, path: &str) -> Group {
        Group {
            version: self.version,
            mount: self.mount.clone(),
            path: path.to_string(),
        }
    }

    fn cpu_stat(&self, path: &str) -> Option<CpuStat> {
        let dir = self.group(path).dir(&self.root);
        let text = std::fs::read_to_string(dir.join("cpu.stat")).ok()?;
        cgroup::parse_cpu_stat(&text)
    }

    /// Matches the patterns again: gone groups' series removed, new ones given series
    /// (or summed into `dropped` past the cap), the threads listed, and (every
    /// [`STAT_EVERY`] listings) each group's throttling since counted.
    pub fn list(&mut self, m: &GroupMetrics, books: &mut Books<GroupLabels>) {
        let now: std::collections::BTreeSet<String> = (self.patterns.iter())
            .flat_map(|p| pattern::matches(&self.root, &self.mount, p))
            .collect();
        let gone: Vec<String> = (self.kept.keys())
            .filter(|p| !now.contains(*p))
            .cloned()
            .collect();
        for p in gone {
            if let Some(g) = self.kept.remove(&p) {
                books.forget(&g.labels, &m.watch);
                m.throttled.remove(&g.labels);
                m.throttled_periods.remove(&g.labels);
            }
        }
        self.over.retain(|p, _| now.contains(p));
        for p in &now {
            if self.kept.contains_key(p) {
                continue;
            }
            let g = (self.over.remove(p)).unwrap_or_else(|| Matched {
                labels: labels_of(p),
                stat: self.cpu_stat(p),
            });
            if self.kept.len() < MAX_GROUPS {
                books.add(&g.labels, &m.watch);
                let _ = m.throttled.get_or_create(&g.labels);
                let _ = m.throttled_periods.get_or_create(&g.labels);
                self.kept.insert(p.clone(), g);
            } else {
                self.over.insert(p.clone(), g);
            }
        }
        if !self.over.is_empty() {
            books.add(&self.dropped, &m.watch);
            let _ = m.throttled.get_or_create(&self.dropped);
            let _ = m.throttled_periods.get_or_create(&self.dropped);
        }
        m.matched.set(now.len() as i64);
        m.dropped.set(self.over.len() as i64);
        if self.lists.is_multiple_of(STAT_EVERY) {
            self.count_throttling(m);
        }
        self.lists += 1;
        self.list_threads();
    }

    /// Each group's throttled time and periods since the last listing.
    fn count_throttling(&mut self, m: &GroupMetrics) {
        let stats: Vec<(String, Option<CpuStat>)> = (self.kept.keys().chain(self.over.keys()))
            .map(|p| (p.clone(), self.cpu_stat(p)))
            .collect();
        for (p, stat) in stats {
            let (g, labels) = match self.kept.get_mut(&p) {
                Some(g) => {
                    let l = g.labels.clone();
                    (g, l)
                }
                None => match self.over.get_mut(&p) {
                    Some(g) => (g, self.dropped.clone()),
                    None => continue,
                },
            };
            if let (Some(new), Some(old)) = (stat, g.stat) {
                let d = new.since(&old);
                (m.throttled.get_or_create(&labels)).inc_by(d.throttled_ns as f64 / 1e9);
                m.throttled_periods
                    .get_or_create(&labels)
                    .inc_by(d.nr_throttled);
            }
            if stat.is_some() {
                g.stat = stat;
            }
        }
    }

    /// Each thread of each group (and the groups below it) now: a deeper matched group
    /// wins over a matched parent; the groups past the cap are `dropped`.
    fn list_threads(&mut self) {
        self.tids.clear();
        let over: Vec<Group> = self.over.keys().map(|p| self.group(p)).collect();
        for t in target::threads(&self.root, &over).unwrap_or_default() {
            self.tids.insert(t, self.dropped.clone());
        }
        // Paths in order: a parent before its children, which then take its threads.
        for (p, g) in &self.kept {
            let group = self.group(p);
            for t in target::threads(&self.root, &[group]).unwrap_or_default() {
                self.tids.insert(t, g.labels.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::metrics::{Metrics, tests::config};
    use super::*;

    /// A v1 `cpu` tree under a tempdir with `n` containers' groups, each with one task
    /// and a cpu.stat.
    fn tree(n: usize) -> (tempfile::TempDir, Vec<String>) {
        let root = tempfile::tempdir().unwrap();
        let mut ids = Vec::new();
        for i in 0..n {
            let id = format!("{i:064x}");
            let dir = root
                .path()
                .join(format!("sys/fs/cgroup/cpu/machine.slice/libpod-{id}.scope"));
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("tasks"), format!("{}\n", 1000 + i)).unwrap();
            std::fs::write(
                dir.join("cpu.stat"),
                "nr_periods 0\nnr_throttled 0\nthrottled_time 0\n",
            )
            .unwrap();
            ids.push(id);
        }
        (root, ids)
    }

    fn watch(root: &Path) -> (Groups, Metrics, Books<GroupLabels>) {
        let g = Groups::at(
            root,
            Version::V1,
            "/sys/fs/cgroup/cpu",
            vec!["machine.slice/libpod-*.scope".into()],
        );
        let m = Metrics::new(&[1], &[100_000], config()).with_watch(&[], true, 10_000);
        (g, m, Books::new([]))
    }

    #[test]
    fn groups_past_the_cap_are_summed_and_counted() {
        let (root, ids) = tree(MAX_GROUPS + 6);
        let (mut g, m, mut b) = watch(root.path());
        g.list(&m.groups, &mut b);
        let (text, _) = m.encode(false);
        let count = "jitterscope_watch_cgroup_wakeup_delay_seconds_count{";
        let n = text.lines().filter(|l| l.starts_with(count)).count();
        assert_eq!(n, MAX_GROUPS + 1, "{text}");
        assert!(text.contains("cgroup=\"dropped\""));
        assert!(text.contains("jitterscope_watch_cgroups_matched 70"));
        assert!(text.contains("jitterscope_watch_cgroups_dropped 6"));
        // The first groups in path order have their own, with their ids as labels.
        let first = format!("/machine.slice/libpod-{}.scope", ids[0]);
        assert_eq!(g.key(1000).unwrap().cgroup, first);
        assert_eq!(g.key(1000).unwrap().container_id, ids[0]);
        assert_eq!(g.key(1000 + MAX_GROUPS as u32).unwrap().cgroup, DROPPED);
        assert_eq!(g.tids().count(), MAX_GROUPS + 6);
    }

    #[test]
    fn a_gone_group_loses_its_series_and_throttling_is_counted() {
        let (root, ids) = tree(2);
        let (mut g, m, mut b) = watch(root.path());
        g.list(&m.groups, &mut b);
        let dir = |i: usize| {
            root.path().join(format!(
                "sys/fs/cgroup/cpu/machine.slice/libpod-{}.scope",
                ids[i]
            ))
        };
        std::fs::write(
            dir(1).join("cpu.stat"),
            "nr_periods 10\nnr_throttled 4\nthrottled_time 250000000\n",
        )
        .unwrap();
        std::fs::remove_dir_all(dir(0)).unwrap();
        for _ in 0..STAT_EVERY {
            g.list(&m.groups, &mut b);
        }
        let (text, _) = m.encode(false);
        assert!(!text.contains(&ids[0]), "{text}");
        assert_eq!(g.key(1000), None);
        let l = format!(
            "{{cgroup=\"/machine.slice/libpod-{0}.scope\",container_id=\"{0}\",pod_uid=\"\",\
             unit=\"libpod-{0}.scope\"}}",
            ids[1]
        );
        assert!(
            text.contains(&format!(
                "jitterscope_watch_cgroup_throttled_seconds_total{l} 0.25"
            )),
            "{text}"
        );
        assert!(text.contains(&format!(
            "jitterscope_watch_cgroup_throttled_periods_total{l} 4"
        )));
    }

    /// v2: a group's threads are its `cgroup.threads` (its subgroups' too), and
    /// throttling is `throttled_usec`.
    #[test]
    fn v2_groups_are_listed_from_cgroup_threads() {
        let root = tempfile::tempdir().unwrap();
        let uid = "7c0e1d2a-1111-2222-3333-444455556666";
        let pod = format!(
            "sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{}.slice",
            uid.replace('-', "_")
        );
        let ctr = root
            .path()
            .join(&pod)
            .join(format!("cri-containerd-{}.scope", "ab".repeat(32)));
        std::fs::create_dir_all(&ctr).unwrap();
        std::fs::write(root.path().join(&pod).join("cgroup.threads"), "").unwrap();
        std::fs::write(ctr.join("cgroup.threads"), "77\n78\n").unwrap();
        std::fs::write(
            root.path().join(&pod).join("cpu.stat"),
            "usage_usec 5\nnr_periods 0\nnr_throttled 0\nthrottled_usec 0\n",
        )
        .unwrap();
        let mut g = Groups::at(
            root.path(),
            Version::V2,
            "/sys/fs/cgroup",
            vec!["kubepods.slice/kubepods-*.slice/kubepods-*-pod*.slice".into()],
        );
        let m = Metrics::new(&[1], &[100_000], config()).with_watch(&[], true, 10_000);
        let mut b = Books::new([]);
        g.list(&m.groups, &mut b);
        std::fs::write(
            root.path().join(&pod).join("cpu.stat"),
            "usage_usec 9\nnr_periods 5\nnr_throttled 2\nthrottled_usec 1500\n",
        )
        .unwrap();
        for _ in 0..STAT_EVERY {
            g.list(&m.groups, &mut b);
        }
        let l = g
            .key(78)
            .expect("a thread of the pod's container, listed from the pod");
        assert_eq!(l.pod_uid, uid);
        assert_eq!(l.container_id, "");
        let (text, _) = m.encode(false);
        let series = format!(
            "jitterscope_watch_cgroup_throttled_seconds_total{{cgroup=\"/{}\",container_id=\"\",pod_uid=\"{uid}\",unit=\"\"}} 0.0015",
            pod.trim_start_matches("sys/fs/cgroup/")
        );
        assert!(text.contains(&series), "{text}");
    }
}
