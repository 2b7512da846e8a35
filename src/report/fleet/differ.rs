//! What sets a host apart from the majority of its fleet: its kernel, the boot options
//! that differ (not the whole command line), the audit findings that differ by id, its
//! degradations and its top cause.
//!
//! The majority's value of a fact is the one more than half the hosts share. A boot
//! option is keyed by its name (`isolcpus` of `isolcpus=1-15`), and being absent is a
//! value too; an option whose value no majority shares (a `root=UUID=…` of every host's
//! own) is never called a difference. An audit finding is keyed by its id, its value its
//! severity (the finding's own text moves from run to run on an unchanged host: irq counts,
//! steal), absent a value too.

use std::collections::{BTreeMap, HashMap};

use crate::report::fleet::summary::{HostSummary, short_cause};
use crate::system::audit::Severity;

/// One fact's values over the fleet, by how many hosts hold each (`None`: absent).
type Tally<V> = BTreeMap<Option<V>, usize>;

/// What most hosts share.
#[derive(Debug, Clone, Default)]
pub struct Majority {
    /// Hosts counted.
    pub hosts: usize,
    pub kernel: Option<String>,
    /// By boot option's name, the value most hosts give it (`None`: most lack it); only
    /// options with a majority value.
    boot: HashMap<String, Option<String>>,
    /// By finding id, the severity most hosts have (`None`: most lack the finding).
    findings: HashMap<String, Option<Severity>>,
    /// By degradation kind, whether most hosts have it.
    degraded: HashMap<String, bool>,
    /// The top cause most hosts share.
    pub top_cause: Option<String>,
}

/// A host's boot options by name, each with its value(s): repeats are joined.
fn boot_options(cmdline: &str) -> HashMap<String, String> {
    let mut m: HashMap<String, String> = HashMap::new();
    for word in cmdline.split_whitespace() {
        let name = word.split('=').next().unwrap_or(word).to_string();
        let slot = m.entry(name).or_default();
        if !slot.is_empty() {
            slot.push(' ');
        }
        slot.push_str(word);
    }
    m
}

/// The value more than half of `n` hosts hold, `Some(None)` when most lack the fact;
/// `None` when no value has a majority.
fn majority_of<V: Clone + Ord>(t: &Tally<V>, n: usize) -> Option<Option<V>> {
    let present: usize = t.iter().filter(|(v, _)| v.is_some()).map(|(_, c)| c).sum();
    let absent = n.saturating_sub(present);
    if absent * 2 > n {
        return Some(None);
    }
    (t.iter())
        .find(|(v, c)| v.is_some() && **c * 2 > n)
        .map(|(v, _)| v.clone())
}

/// Each fact's majority value, for the facts that have one.
fn settled<V: Clone + Ord>(m: HashMap<String, Tally<V>>, n: usize) -> HashMap<String, Option<V>> {
    (m.into_iter())
        .filter_map(|(k, t)| Some((k, majority_of(&t, n)?)))
        .collect()
}

impl Majority {
    /// The majority of `hosts`.
    pub fn of(hosts: &[HostSummary]) -> Majority {
        let n = hosts.len();
        let mut kernels: Tally<String> = BTreeMap::new();
        let mut causes: Tally<String> = BTreeMap::new();
        let mut boot: HashMap<String, Tally<String>> = HashMap::new();
        let mut findings: HashMap<String, Tally<Severity>> = HashMap::new();
        let mut degraded: HashMap<String, usize> = HashMap::new();
        for h in hosts {
            *kernels.entry(Some(h.kernel.clone())).or_default() += 1;
            let cause = h.top_cause.as_ref().map(|c| c.0.clone());
            *causes.entry(cause).or_default() += 1;
            for (name, value) in boot_options(&h.cmdline) {
                *boot
                    .entry(name)
                    .or_default()
                    .entry(Some(value))
                    .or_default() += 1;
            }
            for (id, sev) in &h.findings {
                *(findings.entry(id.clone()).or_default())
                    .entry(Some(*sev))
                    .or_default() += 1;
            }
            for kind in &h.degraded {
                *degraded.entry(kind.clone()).or_default() += 1;
            }
        }
        Majority {
            hosts: n,
            kernel: majority_of(&kernels, n).flatten(),
            boot: settled(boot, n),
            findings: settled(findings, n),
            degraded: (degraded.into_iter())
                .map(|(k, c)| (k, c * 2 > n))
                .collect(),
            top_cause: majority_of(&causes, n).flatten(),
        }
    }

    /// What sets `h` apart, in words, the facts first and its top cause last; each names
    /// what most hosts have.
    pub fn differences(&self, h: &HostSummary) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(k) = self.kernel.as_ref().filter(|k| **k != h.kernel) {
            out.push(format!("kernel {} (most: {k})", h.kernel));
        }
        if let Some(boot) = self.boot_words(h) {
            out.push(boot);
        }
        if let Some(audit) = self.audit_words(h) {
            out.push(audit);
        }
        if let Some(d) = self.degraded_words(h) {
            out.push(d);
        }
        out.push(self.cause_words(h));
        out
    }

    /// "boot options +nohz=off -psi=1": the options `h` adds or sets otherwise, and
    /// those most hosts have that it lacks.
    fn boot_words(&self, h: &HostSummary) -> Option<String> {
        let own = boot_options(&h.cmdline);
        let mut added: Vec<&str> = Vec::new();
        let mut removed: Vec<&str> = Vec::new();
        for (name, value) in &own {
            match self.boot.get(name) {
                Some(Some(v)) if v == value => {}
                Some(_) => added.push(value),
                None => {} // no majority value: every host its own
            }
        }
        for (name, most) in &self.boot {
            if let Some(v) = most.as_ref().filter(|_| !own.contains_key(name)) {
                removed.push(v);
            }
        }
        added.sort_unstable();
        removed.sort_unstable();
        let words: Vec<String> = (added.iter().map(|a| format!("+{a}")))
            .chain(removed.iter().map(|r| format!("-{r}")))
            .collect();
        (!words.is_empty()).then(|| format!("boot options {}", words.join(" ")))
    }

    /// "audit +irq-on-measured (bad) -thp-madvise": findings whose severity differs
    /// from most hosts' (or that most lack, or most have).
    fn audit_words(&self, h: &HostSummary) -> Option<String> {
        let mut words: Vec<String> = Vec::new();
        for (id, sev) in &h.findings {
            match self.findings.get(id) {
                Some(Some(s)) if s == sev => {}
                Some(Some(s)) => words.push(format!("{id} {sev} (most: {s})")),
                Some(None) => words.push(format!("+{id} ({sev})")),
                None => {}
            }
        }
        for (id, most) in &self.findings {
            if most.is_some() && !h.findings.iter().any(|f| f.0 == *id) {
                words.push(format!("-{id}"));
            }
        }
        words.sort_unstable();
        (!words.is_empty()).then(|| format!("audit {}", words.join(", ")))
    }

    /// "degraded +sched-refused": degradations `h` has that most hosts do not, and the
    /// reverse.
    fn degraded_words(&self, h: &HostSummary) -> Option<String> {
        let mut words: Vec<String> = (h.degraded.iter())
            .filter(|k| !self.degraded.get(*k).copied().unwrap_or(false))
            .map(|k| format!("+{k}"))
            .collect();
        for (kind, most) in &self.degraded {
            if *most && !h.degraded.contains(kind) {
                words.push(format!("-{kind}"));
            }
        }
        words.sort_unstable();
        (!words.is_empty()).then(|| format!("degraded {}", words.join(" ")))
    }

    /// "top cause task stress-ng-cpu (SCHED_OTHER nice 0) 74 % (most: unaccounted)", or
    /// "top cause as most (unaccounted 89 %)".
    fn cause_words(&self, h: &HostSummary) -> String {
        let Some((cause, share)) = &h.top_cause else {
            return "top cause not traced".into();
        };
        let short = short_cause(cause);
        match &self.top_cause {
            Some(m) if m == cause => format!("top cause as most ({short} {share:.0} %)"),
            Some(m) => format!("top cause {short} {share:.0} % (most: {})", short_cause(m)),
            None => format!("top cause {short} {share:.0} % (no majority)"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn host(kernel: &str, cmdline: &str, findings: &[(&str, Severity)]) -> HostSummary {
        HostSummary {
            label: "h".into(),
            hostname: "h".into(),
            path: PathBuf::new(),
            kind: "run".into(),
            kernel: kernel.into(),
            cmdline: cmdline.into(),
            findings: findings.iter().map(|(i, s)| (i.to_string(), *s)).collect(),
            top_cause: Some(("unaccounted".into(), 88.0)),
            degraded: vec!["virtual-machine".into()],
            figures: [Some(1.0), None, None, None],
        }
    }

    #[test]
    fn only_what_differs_from_the_majority_is_said() {
        use Severity::*;
        let mut hosts: Vec<HostSummary> = (0..5)
            .map(|i| {
                let cmd = format!("root=UUID={i} quiet psi=1");
                host("6.18", &cmd, &[("thp-madvise", Ok), ("smt-off", Ok)])
            })
            .collect();
        hosts.push(host(
            "6.19",
            "root=UUID=9 quiet nohz=off",
            &[("thp-always", Warn), ("smt-off", Bad)],
        ));
        let m = Majority::of(&hosts);
        assert!(m.differences(&hosts[0]) == ["top cause as most (unaccounted 88 %)"]);
        let d = m.differences(&hosts[5]);
        assert_eq!(d[0], "kernel 6.19 (most: 6.18)");
        assert_eq!(
            d[1], "boot options +nohz=off -psi=1",
            "root=UUID is each host's own"
        );
        assert_eq!(
            d[2],
            "audit +thp-always (warn), -thp-madvise, smt-off bad (most: ok)"
        );
    }
}
