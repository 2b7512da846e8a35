//! CPU lists and the CPUs a run may use.
//!
//! One parser serves both the user's `-a/--cpus` lists and the kernel's own list files in
//! sysfs (`online`, `isolated`, `nohz_full`), so the two can never disagree on syntax.
//! Parsing is strict: a typo in a CPU list must never turn into a silently different set.

use std::fmt;
use std::path::Path;

/// The largest CPU number a thread can be pinned to (rustix's `CpuSet` holds 1024).
pub const MAX_CPUS: usize = 1024;

/// Why a CPU list was rejected. Each variant names the offending part of the input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CpuListError {
    /// The list was empty or only whitespace.
    #[error("empty CPU list; expected a list like 0-3,5,7-8")]
    Empty,
    /// One comma-separated part is empty (`1,,2` or a trailing comma).
    #[error("empty entry in CPU list '{list}'; expected a list like 0-3,5,7-8")]
    EmptyEntry { list: String },
    /// A part is not a number or a range of numbers.
    #[error("'{part}' in CPU list '{list}' is not a CPU number or a range like 2-5")]
    NotANumber { list: String, part: String },
    /// A range runs backwards (`3-1`).
    #[error("'{part}' in CPU list '{list}' is a reversed range; write it as {lo}-{hi}")]
    Reversed {
        list: String,
        part: String,
        lo: usize,
        hi: usize,
    },
    /// A CPU is named twice.
    #[error("CPU {cpu} appears more than once in CPU list '{list}'")]
    Duplicate { list: String, cpu: usize },
    /// A CPU number beyond what any thread can be pinned to, or beyond what the kernel knows.
    #[error("CPU {cpu} in CPU list '{list}' is out of range (this system has CPUs 0-{max})")]
    OutOfRange {
        list: String,
        cpu: usize,
        max: usize,
    },
    /// A CPU that exists but is offline.
    #[error("CPU {cpu} in CPU list '{list}' is not online (online CPUs: {online})")]
    Offline {
        list: String,
        cpu: usize,
        online: CpuList,
    },
    /// A CPU the kernel will not pin this process's threads to: outside its cgroup's
    /// cpuset (the one real refusal: isolcpus and taskset only narrow the default mask).
    #[error(
        "CPU {cpu} in CPU list '{list}' is outside the cpuset of cgroup {group} (its CPUs: \
         {allowed}), so no thread of this process may run there; run it in a cgroup whose \
         cpuset.cpus holds CPU {cpu}"
    )]
    NotAllowed {
        list: String,
        cpu: usize,
        allowed: CpuList,
        group: String,
    },
}

/// A sorted set of CPU numbers without duplicates.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(into = "String", try_from = "String")]
pub struct CpuList(Vec<usize>);

impl CpuList {
    /// Parses a user-supplied list strictly: duplicates are an error.
    pub fn parse_strict(list: &str) -> Result<CpuList, CpuListError> {
        let cpus = parse_parts(list)?;
        let mut sorted = cpus.clone();
        sorted.sort_unstable();
        if let Some(w) = sorted.windows(2).find(|w| w[0] == w[1]) {
            return Err(CpuListError::Duplicate {
                list: list.to_string(),
                cpu: w[0],
            });
        }
        Ok(CpuList(sorted))
    }

    /// Parses a kernel list file's content, where an empty list is valid (e.g. `isolated`).
    pub fn parse_kernel(list: &str) -> Result<CpuList, CpuListError> {
        if list.trim().is_empty() {
            return Ok(CpuList::default());
        }
        let mut cpus = parse_parts(list)?;
        cpus.sort_unstable();
        cpus.dedup();
        Ok(CpuList(cpus))
    }

    pub fn from_cpus(mut cpus: Vec<usize>) -> CpuList {
        cpus.sort_unstable();
        cpus.dedup();
        CpuList(cpus)
    }

    pub fn cpus(&self) -> &[usize] {
        &self.0
    }
    pub fn len(&self) -> usize {
        self.0.len()
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    pub fn contains(&self, cpu: usize) -> bool {
        self.0.binary_search(&cpu).is_ok()
    }
    pub fn first(&self) -> Option<usize> {
        self.0.first().copied()
    }

    /// The CPUs in `self` that are not in `other`.
    pub fn without(&self, other: &CpuList) -> CpuList {
        CpuList(
            self.0
                .iter()
                .copied()
                .filter(|c| !other.contains(*c))
                .collect(),
        )
    }

    /// The CPUs in both.
    pub fn intersect(&self, other: &CpuList) -> CpuList {
        CpuList(
            self.0
                .iter()
                .copied()
                .filter(|c| other.contains(*c))
                .collect(),
        )
    }
}

fn parse_parts(list: &str) -> Result<Vec<usize>, CpuListError> {
    let trimmed = list.trim();
    if trimmed.is_empty() {
        return Err(CpuListError::Empty);
    }
    let mut cpus = Vec::new();
    for part in trimmed.split(',') {
        let part = part.trim();
        if part.is_empty() {
            return Err(CpuListError::EmptyEntry {
                list: list.to_string(),
            });
        }
        let number = |s: &str| -> Result<usize, CpuListError> {
            let s = s.trim();
            if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
                return Err(CpuListError::NotANumber {
                    list: list.to_string(),
                    part: part.to_string(),
                });
            }
            let n: usize = s.parse().map_err(|_| CpuListError::OutOfRange {
                list: list.to_string(),
                cpu: usize::MAX,
                max: MAX_CPUS - 1,
            })?;
            if n >= MAX_CPUS {
                return Err(CpuListError::OutOfRange {
                    list: list.to_string(),
                    cpu: n,
                    max: MAX_CPUS - 1,
                });
            }
            Ok(n)
        };
        match part.split_once('-') {
            None => cpus.push(number(part)?),
            Some((a, b)) => {
                let (lo, hi) = (number(a)?, number(b)?);
                if lo > hi {
                    return Err(CpuListError::Reversed {
                        list: list.to_string(),
                        part: part.to_string(),
                        lo: hi,
                        hi: lo,
                    });
                }
                cpus.extend(lo..=hi);
            }
        }
    }
    Ok(cpus)
}

impl fmt::Display for CpuList {
    /// The kernel's compact form: `0-3,5,7-8`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("none");
        }
        let mut first = true;
        let mut i = 0;
        while i < self.0.len() {
            let start = self.0[i];
            let mut end = start;
            while i + 1 < self.0.len() && self.0[i + 1] == end + 1 {
                i += 1;
                end = self.0[i];
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if start == end {
                write!(f, "{start}")?;
            } else {
                write!(f, "{start}-{end}")?;
            }
            i += 1;
        }
        Ok(())
    }
}

impl From<CpuList> for String {
    fn from(l: CpuList) -> String {
        if l.is_empty() {
            String::new()
        } else {
            l.to_string()
        }
    }
}

impl TryFrom<String> for CpuList {
    type Error = CpuListError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        CpuList::parse_kernel(&s)
    }
}

/// The CPUs this process may use right now: online, possible and allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuUniverse {
    /// `/sys/devices/system/cpu/online`.
    pub online: CpuList,
    /// The highest CPU number the kernel can have (`possible`), bounded by `MAX_CPUS`.
    pub max_cpu: usize,
    /// The CPUs the kernel lets this process's threads be pinned to: its cgroup's cpuset.
    /// `isolcpus` takes the isolated CPUs out of every process's default affinity, not out
    /// of this, so a shell's mask never decides what `-a` may name.
    pub allowed: CpuList,
    /// The process's affinity mask when it started (isolcpus, systemd's CPUAffinity,
    /// taskset): where the coordinator and the reader go by default.
    pub affinity: CpuList,
    /// The CPUs the host set apart for latency work, within `allowed`.
    pub tuned: Tuned,
    /// The cgroup whose cpuset bounds `allowed` ("/" for the root), for a refusal.
    pub cpuset_group: String,
}

/// The CPUs a tuned host set apart: `isolcpus` (the scheduler domain's `isolated`),
/// `nohz_full`, and cgroup v2 cpuset partitions of type `isolated` (which a run can only
/// pin to from inside: a partition's CPUs leave its parent's effective cpuset).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tuned {
    pub cpus: CpuList,
}

impl Tuned {
    /// Reads sysfs and the cgroup v2 tree under `root` (`/` for the live host).
    pub fn read(root: &Path) -> Tuned {
        let list = |rel: &str| {
            std::fs::read_to_string(root.join(rel))
                .ok()
                // Some kernels print an unset mask as "(null)", which parses as empty.
                .and_then(|t| CpuList::parse_kernel(t.trim().trim_matches(['(', ')'])).ok())
                .unwrap_or_default()
        };
        let sources = [
            list("sys/devices/system/cpu/isolated"),
            list("sys/devices/system/cpu/nohz_full"),
            isolated_partitions(&cgroup2_mount(root)),
        ];
        Tuned {
            cpus: CpuList::from_cpus(sources.iter().flat_map(|l| l.cpus().to_vec()).collect()),
        }
    }
}

/// Where cgroup v2 is mounted under `root`, from its mount table (`/sys/fs/cgroup` when
/// the table cannot be read).
fn cgroup2_mount(root: &Path) -> std::path::PathBuf {
    let mounts = std::fs::read_to_string(root.join("proc/self/mounts")).unwrap_or_default();
    let dir = mounts.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.get(2) == Some(&"cgroup2")).then(|| f[1].to_string())
    });
    root.join(
        dir.as_deref()
            .unwrap_or("/sys/fs/cgroup")
            .trim_start_matches('/'),
    )
}

/// The CPUs of every cgroup v2 partition of type `isolated` under `dir`. A partition's
/// parent is a partition root, so only partitions are descended into: a host with
/// thousands of groups costs a read per child of the root.
fn isolated_partitions(dir: &Path) -> CpuList {
    let mut cpus = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return CpuList::default();
    };
    for child in entries.filter_map(Result::ok).map(|e| e.path()) {
        let read = |f: &str| std::fs::read_to_string(child.join(f)).unwrap_or_default();
        // An invalid partition reads "isolated invalid (why)": it isolates nothing.
        let partition = read("cpuset.cpus.partition");
        let kind = partition.trim();
        if kind == "isolated" {
            let effective = read("cpuset.cpus.effective");
            cpus.extend_from_slice(CpuList::parse_kernel(&effective).unwrap_or_default().cpus());
        }
        if kind == "isolated" || kind == "root" {
            cpus.extend_from_slice(isolated_partitions(&child).cpus());
        }
    }
    CpuList::from_cpus(cpus)
}

/// The cgroup named for the process's cpuset in `/proc/self/cgroup`: the v1 `cpuset`
/// hierarchy's line, else the unified one's.
fn cpuset_group(text: &str) -> String {
    let mut unified = None;
    for line in text.lines() {
        let mut f = line.splitn(3, ':');
        let (_, controllers, path) = (f.next(), f.next().unwrap_or(""), f.next().unwrap_or(""));
        if controllers.split(',').any(|c| c == "cpuset") {
            return path.to_string();
        }
        if controllers.is_empty() {
            unified = Some(path.to_string());
        }
    }
    unified.unwrap_or_else(|| "/".into())
}

impl CpuUniverse {
    /// Reads the live system.
    pub fn detect() -> std::io::Result<CpuUniverse> {
        let root = Path::new("/sys/devices/system/cpu");
        let read = |name: &str| -> std::io::Result<CpuList> {
            let text = std::fs::read_to_string(root.join(name))?;
            CpuList::parse_kernel(&text)
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
        };
        let online = read("online")?;
        let possible = read("possible").unwrap_or_else(|_| online.clone());
        let max_cpu = possible
            .cpus()
            .last()
            .copied()
            .unwrap_or(0)
            .min(MAX_CPUS - 1);
        let affinity = current_affinity()?;
        let allowed = pinnable(&online, &affinity)?;
        let tuned = Tuned::read(Path::new("/"));
        Ok(CpuUniverse {
            online,
            max_cpu,
            tuned: Tuned {
                cpus: tuned.cpus.intersect(&allowed),
            },
            allowed,
            affinity,
            cpuset_group: cpuset_group(
                &std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default(),
            ),
        })
    }

    /// A universe of `online` CPUs where this process may use `allowed`, its mask as
    /// well, on an untuned host (for tests and recorded hosts).
    pub fn of(online: CpuList, allowed: CpuList) -> CpuUniverse {
        CpuUniverse {
            max_cpu: online.cpus().last().copied().unwrap_or(0),
            online,
            affinity: allowed.clone(),
            allowed,
            tuned: Tuned::default(),
            cpuset_group: "/".into(),
        }
    }

    /// CPUs that are both online and allowed.
    pub fn usable(&self) -> CpuList {
        self.online.intersect(&self.allowed)
    }

    /// Where the tool's own threads (coordinator, reader, display) may go, best first:
    /// the mask's CPUs the host did not set apart; on a tuned host, any CPU it did not set
    /// apart (a shell put on an isolated CPU); the mask's CPUs. Never outside the mask on
    /// an untuned host (a taskset there is the user's), never on a CPU set apart but the
    /// mask's own.
    fn housekeeping_candidates(&self) -> [CpuList; 3] {
        let usable = self.usable();
        let mask = usable.intersect(&self.affinity);
        let spare = match self.tuned.cpus.is_empty() {
            true => mask.clone(),
            false => usable.without(&self.tuned.cpus),
        };
        [mask.without(&self.tuned.cpus), spare, mask]
    }

    /// The housekeeping CPUs: the first candidates that are not empty.
    pub fn housekeeping_pool(&self) -> CpuList {
        let [a, b, c] = self.housekeeping_candidates();
        [a, b].into_iter().find(|l| !l.is_empty()).unwrap_or(c)
    }

    /// Where the coordinator goes while `measured` is measured: the first candidates
    /// that are left once the measured CPUs are taken out; empty (it shares) when none.
    pub fn housekeeping_for(&self, measured: &CpuList) -> CpuList {
        (self.housekeeping_candidates().into_iter())
            .map(|l| l.without(measured))
            .find(|l| !l.is_empty())
            .unwrap_or_default()
    }

    /// The CPUs a default plan spans: the process's mask, and the CPUs the host set
    /// apart (which isolcpus leaves out of the mask).
    pub fn default_cpus(&self) -> CpuList {
        let mask = self.usable().intersect(&self.affinity);
        CpuList::from_cpus([mask.cpus(), self.tuned.cpus.cpus()].concat()).intersect(&self.usable())
    }

    /// What a run measures with no `-a`: on a tuned host, the CPUs it set apart (those of
    /// the process's mask, when the mask holds some: a shell put there chose them), less
    /// a named housekeeping CPU; otherwise every CPU of the mask but one for housekeeping
    /// (the named one, or the lowest), or the one CPU there is.
    pub fn default_measured(&self, housekeeping: Option<usize>) -> CpuList {
        let usable = self.usable();
        let named = CpuList::from_cpus(housekeeping.into_iter().collect());
        let tuned = self.tuned.cpus.intersect(&usable).without(&named);
        if !tuned.is_empty() && !usable.without(&self.tuned.cpus).is_empty() {
            let mine = tuned.intersect(&self.affinity);
            return if mine.is_empty() { tuned } else { mine };
        }
        let mask = usable.intersect(&self.affinity);
        if mask.len() <= 1 {
            return mask;
        }
        let hk = housekeeping.or(mask.first()).unwrap_or(0);
        mask.without(&CpuList::from_cpus(vec![hk]))
    }

    /// Checks every CPU of a parsed list against the system, naming the first bad one.
    pub fn validate(&self, list_text: &str, list: &CpuList) -> Result<(), CpuListError> {
        for &cpu in list.cpus() {
            if cpu > self.max_cpu {
                return Err(CpuListError::OutOfRange {
                    list: list_text.to_string(),
                    cpu,
                    max: self.max_cpu,
                });
            }
            if !self.online.contains(cpu) {
                return Err(CpuListError::Offline {
                    list: list_text.to_string(),
                    cpu,
                    online: self.online.clone(),
                });
            }
            if !self.allowed.contains(cpu) {
                return Err(CpuListError::NotAllowed {
                    list: list_text.to_string(),
                    cpu,
                    allowed: self.allowed.clone(),
                    group: self.cpuset_group.clone(),
                });
            }
        }
        Ok(())
    }

    /// Parses and validates a user's list in one step.
    pub fn parse_user_list(&self, text: &str) -> Result<CpuList, CpuListError> {
        let list = CpuList::parse_strict(text)?;
        self.validate(text, &list)?;
        Ok(list)
    }
}

/// The online CPUs the kernel lets this process's threads be pinned to. The kernel keeps
/// a thread's mask inside its cgroup's cpuset, dropping the CPUs outside it without an
/// error: so the calling thread asks for its mask and every other online CPU, reads back
/// what it got, and puts its mask back at once. Its own CPU stays in the mask meanwhile,
/// so it is never moved. That is the only limit: isolcpus leaves CPUs out of the default
/// mask, not out of reach, and a container's cpuset is found even where its cgroup files
/// are out of sight.
fn pinnable(online: &CpuList, affinity: &CpuList) -> std::io::Result<CpuList> {
    let mine = online.intersect(affinity);
    if online.without(affinity).is_empty() {
        return Ok(mine);
    }
    let set_of = |l: &[usize]| {
        let mut set = rustix::thread::CpuSet::new();
        l.iter().for_each(|&c| set.set(c));
        set
    };
    let wide = set_of(&[affinity.cpus(), online.cpus()].concat());
    if rustix::thread::sched_setaffinity(None, &wide).is_err() {
        return Ok(mine);
    }
    let got = current_affinity();
    // A run must not go on with a wider mask than it started with.
    rustix::thread::sched_setaffinity(None, &set_of(affinity.cpus()))?;
    Ok(got.map_or(mine, |g| g.intersect(online)))
}

/// How the measured CPUs and the coordinator's CPUs were chosen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuPlan {
    /// One measuring thread per CPU here.
    pub measured: CpuList,
    /// Where the coordinator runs: every usable CPU that is not measured. Empty when the
    /// coordinator has to share a measured CPU.
    pub housekeeping: CpuList,
}

impl CpuPlan {
    /// Chooses the measured set: the user's list, or the default one
    /// ([`CpuUniverse::default_measured`]); the coordinator gets `housekeeping` when given,
    /// else the housekeeping CPUs not measured. With a single usable CPU, that CPU is
    /// measured and the coordinator shares it.
    pub fn choose(
        universe: &CpuUniverse,
        requested: Option<(&str, CpuList)>,
        housekeeping: Option<usize>,
    ) -> Result<CpuPlan, CpuListError> {
        if let Some(hk) = housekeeping {
            let text = hk.to_string();
            universe.validate(&text, &CpuList::from_cpus(vec![hk]))?;
        }
        let measured = match requested {
            Some((text, list)) => {
                universe.validate(text, &list)?;
                if let Some(hk) = housekeeping.filter(|hk| list.contains(*hk)) {
                    return Err(CpuListError::Duplicate {
                        list: format!("{text} (measured) and --housekeeping {hk}"),
                        cpu: hk,
                    });
                }
                list
            }
            None => universe.default_measured(housekeeping),
        };
        // A housekeeping CPU that is also measured is no housekeeping CPU.
        let housekeeping_set = match housekeeping {
            Some(hk) => CpuList::from_cpus(vec![hk]).without(&measured),
            None => universe.housekeeping_for(&measured),
        };
        Ok(CpuPlan {
            measured,
            housekeeping: housekeeping_set,
        })
    }

    /// True when the coordinator has no CPU of its own.
    pub fn coordinator_shares(&self) -> bool {
        self.housekeeping.is_empty()
    }
}

/// The calling thread's affinity mask.
pub fn current_affinity() -> std::io::Result<CpuList> {
    let set = rustix::thread::sched_getaffinity(None)?;
    Ok(CpuList::from_cpus(
        (0..MAX_CPUS).filter(|&c| set.is_set(c)).collect(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn universe(online: &str, allowed: &str) -> CpuUniverse {
        let list = |l: &str| CpuList::parse_kernel(l).unwrap();
        CpuUniverse::of(list(online), list(allowed))
    }

    /// A tuned host: `online` CPUs, `tuned` set apart, the process's mask `mask` (the
    /// cpuset allows every online CPU).
    fn tuned(online: &str, tuned: &str, mask: &str) -> CpuUniverse {
        let list = |l: &str| CpuList::parse_kernel(l).unwrap();
        CpuUniverse {
            affinity: list(mask),
            tuned: Tuned { cpus: list(tuned) },
            ..CpuUniverse::of(list(online), list(online))
        }
    }

    #[test]
    fn parses_the_usual_syntax() {
        let l = CpuList::parse_strict("0-3,5,7-8").unwrap();
        assert_eq!(l.cpus(), &[0, 1, 2, 3, 5, 7, 8]);
        assert_eq!(l.to_string(), "0-3,5,7-8");
        assert_eq!(CpuList::parse_strict(" 4 ").unwrap().cpus(), &[4]);
    }

    #[test]
    fn rejects_each_bad_form_with_its_own_message() {
        assert_eq!(CpuList::parse_strict(""), Err(CpuListError::Empty));
        assert!(matches!(
            CpuList::parse_strict("1,,2"),
            Err(CpuListError::EmptyEntry { .. })
        ));
        assert!(matches!(
            CpuList::parse_strict("1,"),
            Err(CpuListError::EmptyEntry { .. })
        ));
        let e = CpuList::parse_strict("3-1").unwrap_err();
        assert_eq!(
            e.to_string(),
            "'3-1' in CPU list '3-1' is a reversed range; write it as 1-3"
        );
        assert!(matches!(
            CpuList::parse_strict("a"),
            Err(CpuListError::NotANumber { .. })
        ));
        assert!(matches!(
            CpuList::parse_strict("-1"),
            Err(CpuListError::NotANumber { .. })
        ));
        assert!(matches!(
            CpuList::parse_strict("1-"),
            Err(CpuListError::NotANumber { .. })
        ));
        assert!(matches!(
            CpuList::parse_strict("+1"),
            Err(CpuListError::NotANumber { .. })
        ));
        let e = CpuList::parse_strict("0-2,1").unwrap_err();
        assert_eq!(
            e,
            CpuListError::Duplicate {
                list: "0-2,1".into(),
                cpu: 1
            }
        );
        assert!(matches!(
            CpuList::parse_strict("5000"),
            Err(CpuListError::OutOfRange { .. })
        ));
        assert!(matches!(
            CpuList::parse_strict("99999999999999999999999"),
            Err(CpuListError::OutOfRange { .. })
        ));
    }

    #[test]
    fn kernel_lists_may_be_empty() {
        assert!(CpuList::parse_kernel("\n").unwrap().is_empty());
        assert_eq!(CpuList::parse_kernel("0-1\n").unwrap().cpus(), &[0, 1]);
    }

    #[test]
    fn validation_names_offline_out_of_range_and_disallowed_cpus() {
        let u = CpuUniverse {
            cpuset_group: "/box".into(),
            ..universe("0-1,3", "0,3")
        };
        let err = |s: &str| u.parse_user_list(s).unwrap_err();
        assert!(matches!(
            err("99"),
            CpuListError::OutOfRange {
                cpu: 99,
                max: 3,
                ..
            }
        ));
        assert!(matches!(err("2"), CpuListError::Offline { cpu: 2, .. }));
        assert!(matches!(err("1"), CpuListError::NotAllowed { cpu: 1, .. }));
        assert_eq!(
            err("1").to_string(),
            "CPU 1 in CPU list '1' is outside the cpuset of cgroup /box (its CPUs: 0,3), so \
             no thread of this process may run there; run it in a cgroup whose cpuset.cpus \
             holds CPU 1"
        );
        assert_eq!(u.parse_user_list("0,3").unwrap().cpus(), &[0, 3]);
    }

    #[test]
    fn default_plan_keeps_the_lowest_cpu_for_housekeeping() {
        let u = universe("0-3", "0-3");
        let p = CpuPlan::choose(&u, None, None).unwrap();
        assert_eq!(p.measured.to_string(), "1-3");
        assert_eq!(p.housekeeping.to_string(), "0");
        let p = CpuPlan::choose(&u, None, Some(2)).unwrap();
        assert_eq!(p.measured.to_string(), "0-1,3");
        assert_eq!(p.housekeeping.to_string(), "2");
        // The housekeeping CPU is the lowest *allowed* one, not CPU 0.
        let u = universe("0-3", "2-3");
        assert_eq!(
            CpuPlan::choose(&u, None, None)
                .unwrap()
                .measured
                .to_string(),
            "3"
        );
    }

    #[test]
    fn a_single_cpu_is_measured_and_shared() {
        let u = universe("0", "0");
        let p = CpuPlan::choose(&u, None, None).unwrap();
        assert_eq!(p.measured.to_string(), "0");
        assert!(p.coordinator_shares());
        // Naming that same CPU for housekeeping does not make it one.
        assert!(
            CpuPlan::choose(&u, None, Some(0))
                .unwrap()
                .coordinator_shares()
        );
        // Nor does an online CPU outside the allowed set (taskset).
        let u = universe("0-3", "3");
        assert!(
            CpuPlan::choose(&u, None, None)
                .unwrap()
                .coordinator_shares()
        );
    }

    /// Issue 48: isolcpus=1 leaves CPU 1 out of every shell's mask; `-a 1` measures it,
    /// no `-a` measures it too, and the coordinator stays on CPU 0.
    #[test]
    fn a_tuned_host_measures_its_isolated_cpus_whatever_the_mask() {
        let u = tuned("0-1", "1", "0");
        let one = CpuList::parse_strict("1").unwrap();
        let p = CpuPlan::choose(&u, Some(("1", one)), None).unwrap();
        assert_eq!(
            (p.measured.to_string(), p.housekeeping.to_string()),
            ("1".into(), "0".into())
        );
        let p = CpuPlan::choose(&u, None, None).unwrap();
        assert_eq!(
            (p.measured.to_string(), p.housekeeping.to_string()),
            ("1".into(), "0".into())
        );
        // -a 0 measures the housekeeping CPU; the coordinator shares it rather than go
        // to the isolated CPU.
        let zero = CpuList::parse_strict("0").unwrap();
        let p = CpuPlan::choose(&u, Some(("0", zero)), None).unwrap();
        assert!(p.coordinator_shares(), "{p:?}");
        // 16 CPUs, 4-15 set apart, the shell on 0-3: 4-15 measured, 0-3 coordinate.
        let u = tuned("0-15", "4-15", "0-3");
        let p = CpuPlan::choose(&u, None, None).unwrap();
        assert_eq!(
            (p.measured.to_string(), p.housekeeping.to_string()),
            ("4-15".into(), "0-3".into())
        );
        // nohz_full alone leaves the CPUs in the mask: the same choice.
        let u = tuned("0-15", "4-15", "0-15");
        let p = CpuPlan::choose(&u, None, None).unwrap();
        assert_eq!(
            (p.measured.to_string(), p.housekeeping.to_string()),
            ("4-15".into(), "0-3".into())
        );
        // A shell put on isolated CPU 5 (taskset) chose it.
        let u = tuned("0-15", "4-15", "5");
        let p = CpuPlan::choose(&u, None, None).unwrap();
        assert_eq!(
            (p.measured.to_string(), p.housekeeping.to_string()),
            ("5".into(), "0-3".into())
        );
        // --housekeeping names a set-apart CPU: it is left out of the measured ones.
        let u = tuned("0-15", "4-15", "0-3");
        let p = CpuPlan::choose(&u, None, Some(4)).unwrap();
        assert_eq!(
            (p.measured.to_string(), p.housekeeping.to_string()),
            ("5-15".into(), "4".into())
        );
        // Everything set apart (a run inside an isolated partition): the untuned rule.
        let u = tuned("0-3", "0-3", "0-3");
        let p = CpuPlan::choose(&u, None, None).unwrap();
        assert_eq!(
            (p.measured.to_string(), p.housekeeping.to_string()),
            ("1-3".into(), "0".into())
        );
    }

    /// The pinning probe, on a thread narrowed to one CPU (as a taskset shell is): it
    /// finds pinnable every CPU this process may use, beyond the thread's own mask, and
    /// leaves that mask as it was.
    #[test]
    fn the_probe_sees_past_a_narrowed_mask_and_leaves_it() {
        let process = current_affinity().unwrap();
        let online = CpuUniverse::detect().unwrap().online;
        let first = CpuList::from_cpus(vec![process.intersect(&online).first().unwrap()]);
        let (found, after) = std::thread::spawn(move || {
            let mut one = rustix::thread::CpuSet::new();
            one.set(first.cpus()[0]);
            rustix::thread::sched_setaffinity(None, &one).unwrap();
            (
                pinnable(&online, &first).unwrap(),
                current_affinity().unwrap(),
            )
        })
        .join()
        .unwrap();
        let mask = process.intersect(&CpuUniverse::detect().unwrap().online);
        assert_eq!(
            found.intersect(&mask),
            mask,
            "found {found}, the process may use {mask}"
        );
        assert_eq!(after.len(), 1, "the mask is put back: {after}");
    }

    /// An untuned host where a shell was narrowed with taskset: the mask is the user's,
    /// so nothing runs outside it (the coordinator shares the one CPU, as before).
    #[test]
    fn an_untuned_taskset_mask_is_kept() {
        let u = CpuUniverse {
            affinity: CpuList::parse_kernel("0").unwrap(),
            ..universe("0-3", "0-3")
        };
        let p = CpuPlan::choose(&u, None, None).unwrap();
        assert_eq!(p.measured.to_string(), "0");
        assert!(p.coordinator_shares(), "{p:?}");
        let one = CpuList::parse_strict("1").unwrap();
        let p = CpuPlan::choose(&u, Some(("1", one)), None).unwrap();
        assert_eq!(p.housekeeping.to_string(), "0");
        let u = CpuUniverse {
            affinity: CpuList::parse_kernel("0-1").unwrap(),
            ..universe("0-3", "0-3")
        };
        let p = CpuPlan::choose(&u, None, None).unwrap();
        assert_eq!(
            (p.measured.to_string(), p.housekeeping.to_string()),
            ("1".into(), "0".into())
        );
        assert_eq!(u.default_cpus().to_string(), "0-1");
    }

    #[test]
    fn the_cpuset_group_is_read_from_proc_self_cgroup() {
        let v1 = "12:cpuset:/box\n11:cpu,cpuacct:/other\n0::/user.slice\n";
        assert_eq!(cpuset_group(v1), "/box");
        assert_eq!(
            cpuset_group("0::/machine.slice/pod\n"),
            "/machine.slice/pod"
        );
        assert_eq!(cpuset_group(""), "/");
    }

    /// sysfs's lists and a cgroup v2 tree with an isolated partition under a root one.
    #[test]
    fn tuned_cpus_come_from_isolcpus_nohz_full_and_isolated_partitions() {
        let d = tempfile::tempdir().unwrap();
        let put = |rel: &str, text: &str| {
            let p = d.path().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        put("sys/devices/system/cpu/isolated", "2\n");
        put("sys/devices/system/cpu/nohz_full", "(null)\n");
        put("proc/self/mounts", "cgroup2 /cg cgroup2 rw 0 0\n");
        put("cg/rt/cpuset.cpus.partition", "root\n");
        put("cg/rt/lat/cpuset.cpus.partition", "isolated\n");
        put("cg/rt/lat/cpuset.cpus.effective", "6-7\n");
        put("cg/member/cpuset.cpus.partition", "member\n");
        put("cg/member/deep/cpuset.cpus.partition", "isolated\n");
        put("cg/member/deep/cpuset.cpus.effective", "9\n");
        let t = Tuned::read(d.path());
        assert_eq!(t.cpus.to_string(), "2,6-7");
        // An invalid partition isolates nothing.
        put(
            "cg/rt/lat/cpuset.cpus.partition",
            "isolated invalid (Parent is not a partition root)\n",
        );
        assert_eq!(Tuned::read(d.path()).cpus.to_string(), "2");
    }

    #[test]
    fn measured_and_housekeeping_must_not_overlap() {
        let u = universe("0-3", "0-3");
        let l = CpuList::parse_strict("1-2").unwrap();
        assert!(CpuPlan::choose(&u, Some(("1-2", l)), Some(1)).is_err());
    }

    proptest! {
        #[test]
        fn display_round_trips(cpus in proptest::collection::btree_set(0usize..200, 1..40)) {
            let l = CpuList::from_cpus(cpus.into_iter().collect());
            prop_assert_eq!(CpuList::parse_strict(&l.to_string()).unwrap(), l);
        }

        #[test]
        fn parser_never_panics(s in ".{0,40}") {
            let _ = CpuList::parse_strict(&s);
            let _ = CpuList::parse_kernel(&s);
        }
    }
}
