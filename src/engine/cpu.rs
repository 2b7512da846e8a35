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
    /// A CPU outside the process's affinity mask (taskset, cgroup cpuset).
    #[error(
        "CPU {cpu} in CPU list '{list}' is not in this process's allowed set ({allowed}); \
         check taskset or the cgroup's cpuset"
    )]
    NotAllowed {
        list: String,
        cpu: usize,
        allowed: CpuList,
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
    /// The process's affinity mask when it started.
    pub allowed: CpuList,
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
        let allowed = current_affinity()?;
        Ok(CpuUniverse {
            online,
            max_cpu,
            allowed,
        })
    }

    /// CPUs that are both online and allowed.
    pub fn usable(&self) -> CpuList {
        self.online.intersect(&self.allowed)
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
    /// Chooses the measured set: the user's list, or every usable CPU but one housekeeping
    /// CPU (the lowest, or `housekeeping` when given). With a single usable CPU, that CPU
    /// is measured and the coordinator shares it.
    pub fn choose(
        universe: &CpuUniverse,
        requested: Option<(&str, CpuList)>,
        housekeeping: Option<usize>,
    ) -> Result<CpuPlan, CpuListError> {
        let usable = universe.usable();
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
            None if usable.len() <= 1 => usable.clone(),
            None => {
                let hk = housekeeping.or(usable.first()).unwrap_or(0);
                usable.without(&CpuList::from_cpus(vec![hk]))
            }
        };
        // A housekeeping CPU that is also measured is no housekeeping CPU.
        let housekeeping_set = match housekeeping {
            Some(hk) => CpuList::from_cpus(vec![hk]),
            None => usable.clone(),
        }
        .without(&measured);
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
        let online = CpuList::parse_kernel(online).unwrap();
        CpuUniverse {
            max_cpu: *online.cpus().last().unwrap(),
            online,
            allowed: CpuList::parse_kernel(allowed).unwrap(),
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
            online: CpuList::parse_kernel("0-1,3").unwrap(),
            max_cpu: 3,
            allowed: CpuList::parse_kernel("0,3").unwrap(),
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
