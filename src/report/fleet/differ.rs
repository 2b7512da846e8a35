//! What sets a host apart from the majority of its fleet: its kernel, the boot options
//! that differ (not the whole command line), the audit findings that differ by id, its
//! degradations and its top cause.
//!
//! Each is a fact keyed alike on every host ([`Fact`]): the kernel release; a boot option
//! by its name (`boot`: `isolcpus` of `isolcpus=1-15`, the options that name the host
//! itself left out); an audit finding by its id, its value its severity (the finding's
//! own text moves from run to run on an unchanged host: irq counts, steal); a degradation
//! by its kind. Lacking a fact is a value too. The majority's value of a fact is the one
//! more than half the hosts share (for findings, of the hosts whose result holds an
//! audit); a fact that no value has a majority of is split (`drift` says it so), never
//! called one host's difference.

use std::collections::BTreeMap;

use crate::report::fleet::boot;
use crate::report::fleet::summary::{HostSummary, short_cause};

/// A kind of fact hosts are compared by, in the order they are said.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Fact {
    Kernel,
    Boot,
    Audit,
    Degraded,
}

impl Fact {
    pub const ALL: [Fact; 4] = [Fact::Kernel, Fact::Boot, Fact::Audit, Fact::Degraded];

    /// The words that lead what is said of it.
    pub fn label(self) -> &'static str {
        match self {
            Fact::Kernel => "kernel",
            Fact::Boot => "boot options",
            Fact::Audit => "audit",
            Fact::Degraded => "degraded",
        }
    }

    /// Between the differences of one kind.
    pub fn joiner(self) -> &'static str {
        match self {
            Fact::Audit => ", ",
            _ => " ",
        }
    }
}

/// A fact's key: its kind and its name (a boot option's, a finding's id, a degradation's
/// kind; "" for the kernel).
pub type Key = (Fact, String);

/// One way a host differs from the majority: what it has and what most have (`None`:
/// lacking the fact).
#[derive(Debug, Clone, PartialEq)]
pub struct Diff {
    pub fact: Fact,
    pub key: String,
    pub theirs: Option<String>,
    pub most: Option<String>,
}

impl Diff {
    /// As it is said: `6.19 (most: 6.18)`, `+nohz=off` (most lack it), `-psi=1` (most
    /// have it), `isolcpus=1-3 (most: isolcpus=1-15)`, `+thp-always (warn)`,
    /// `-thp-madvise`, `smt-off bad (most: ok)`, `+mlock-failed`.
    pub fn words(&self) -> String {
        let key = &self.key;
        match (self.fact, self.theirs.as_deref(), self.most.as_deref()) {
            (Fact::Audit, Some(s), None) => format!("+{key} ({s})"),
            (Fact::Audit, Some(s), Some(m)) => format!("{key} {s} (most: {m})"),
            (Fact::Audit | Fact::Degraded, None, _) => format!("-{key}"),
            (Fact::Degraded, Some(_), _) => format!("+{key}"),
            (_, Some(t), None) => format!("+{t}"),
            (_, Some(t), Some(m)) => format!("{t} (most: {m})"),
            (_, None, m) => format!("-{}", m.unwrap_or_default()),
        }
    }
}

/// A fact's values over the hosts that hold it, by count, the most held first; `None`:
/// lacking it.
pub type Values = Vec<(Option<String>, usize)>;

/// What most hosts share.
#[derive(Debug, Clone, Default)]
pub struct Majority {
    /// Hosts counted.
    pub hosts: usize,
    /// Hosts whose result holds an audit, that findings are compared over.
    pub audited: usize,
    /// By fact, the value most hosts give it (`None`: most lack it).
    settled: BTreeMap<Key, Option<String>>,
    /// The facts no value has a majority of, with their values.
    split: BTreeMap<Key, Values>,
    /// The top cause most hosts share.
    pub top_cause: Option<String>,
}

/// A host's facts, by key, with their values; a fact it lacks is not there.
fn facts(h: &HostSummary) -> BTreeMap<Key, String> {
    let mut f = BTreeMap::new();
    f.insert((Fact::Kernel, String::new()), h.kernel.clone());
    for (name, words) in boot::options(&h.cmdline) {
        f.insert((Fact::Boot, name), words);
    }
    for (id, sev) in h.findings.iter().flatten() {
        f.insert((Fact::Audit, id.clone()), sev.to_string());
    }
    for kind in &h.degraded {
        f.insert((Fact::Degraded, kind.clone()), String::new());
    }
    f
}

/// The value more than half of `n` hosts hold, `Some(None)` when most lack the fact;
/// `None` when no value has a majority. `held` counts the hosts of each value held.
fn majority_of(held: &BTreeMap<String, usize>, n: usize) -> Option<Option<String>> {
    let absent = n.saturating_sub(held.values().sum());
    if absent * 2 > n {
        return Some(None);
    }
    (held.iter())
        .find(|(_, c)| **c * 2 > n)
        .map(|(v, _)| Some(v.clone()))
}

/// `held` with the hosts of `n` that lack the fact, the most held first.
fn values_of(held: BTreeMap<String, usize>, n: usize) -> Values {
    let absent = n.saturating_sub(held.values().sum());
    let mut v: Values = held.into_iter().map(|(v, c)| (Some(v), c)).collect();
    if absent > 0 {
        v.push((None, absent));
    }
    v.sort_by_key(|(_, c)| std::cmp::Reverse(*c));
    v
}

impl Majority {
    /// The majority of `hosts`.
    pub fn of(hosts: &[HostSummary]) -> Majority {
        let n = hosts.len();
        let audited = hosts.iter().filter(|h| h.findings.is_some()).count();
        let mut held: BTreeMap<Key, BTreeMap<String, usize>> = BTreeMap::new();
        let mut causes: BTreeMap<String, usize> = BTreeMap::new();
        for h in hosts {
            for (key, value) in facts(h) {
                *held.entry(key).or_default().entry(value).or_default() += 1;
            }
            if let Some((cause, _)) = &h.top_cause {
                *causes.entry(cause.clone()).or_default() += 1;
            }
        }
        let (mut settled, mut split) = (BTreeMap::new(), BTreeMap::new());
        for (key, values) in held {
            let of = if key.0 == Fact::Audit { audited } else { n };
            match majority_of(&values, of) {
                Some(most) => {
                    settled.insert(key, most);
                }
                None => {
                    split.insert(key, values_of(values, of));
                }
            }
        }
        Majority {
            hosts: n,
            audited,
            settled,
            split,
            top_cause: majority_of(&causes, n).flatten(),
        }
    }

    /// The facts no value has a majority of, with their values.
    pub fn split(&self) -> impl Iterator<Item = (&Key, &Values)> {
        self.split.iter()
    }

    /// Where `h`'s facts differ from the majority's, in [`Fact`] order.
    pub fn drift(&self, h: &HostSummary) -> Vec<Diff> {
        let own = facts(h);
        (self.settled.iter())
            .filter(|(key, _)| key.0 != Fact::Audit || h.findings.is_some())
            .filter(|(key, most)| own.get(*key) != most.as_ref())
            .map(|(key, most)| Diff {
                fact: key.0,
                key: key.1.clone(),
                theirs: own.get(key).cloned(),
                most: most.clone(),
            })
            .collect()
    }

    /// `h`'s drift in words, a phrase a kind of fact: "kernel 6.19 (most: 6.18)", "boot
    /// options +nohz=off -psi=1", "audit +irq-on-measured (bad), -thp-madvise",
    /// "degraded +sched-refused".
    pub fn drift_words(&self, h: &HostSummary) -> Vec<String> {
        let diffs = self.drift(h);
        (Fact::ALL.iter())
            .filter_map(|&fact| {
                let mut items: Vec<String> = (diffs.iter())
                    .filter(|d| d.fact == fact)
                    .map(Diff::words)
                    .collect();
                items.sort_unstable();
                (!items.is_empty())
                    .then(|| format!("{} {}", fact.label(), items.join(fact.joiner())))
            })
            .collect()
    }

    /// What sets `h` apart, in words, the facts first and its top cause last; each names
    /// what most hosts have.
    pub fn differences(&self, h: &HostSummary) -> Vec<String> {
        let mut out = self.drift_words(h);
        out.push(self.cause_words(h));
        out
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
    use crate::system::audit::Severity;
    use std::path::PathBuf;

    fn host(kernel: &str, cmdline: &str, findings: &[(&str, Severity)]) -> HostSummary {
        HostSummary {
            label: "h".into(),
            hostname: "h".into(),
            path: PathBuf::new(),
            kind: "run".into(),
            kernel: kernel.into(),
            cmdline: cmdline.into(),
            findings: Some(findings.iter().map(|(i, s)| (i.to_string(), *s)).collect()),
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

    #[test]
    fn a_value_is_said_against_most_and_an_unaudited_host_is_not_called_clean() {
        let mut hosts: Vec<HostSummary> = (0..4)
            .map(|_| host("6.18", "isolcpus=1-15 quiet", &[("swap-off", Severity::Ok)]))
            .collect();
        hosts[1].cmdline = "quiet isolcpus=1-3".into();
        hosts[2].findings = None;
        hosts[3].degraded.push("mlock-failed".into());
        let m = Majority::of(&hosts);
        assert_eq!(m.audited, 3);
        assert_eq!(
            m.drift_words(&hosts[1]),
            ["boot options isolcpus=1-3 (most: isolcpus=1-15)"]
        );
        assert_eq!(
            m.drift(&hosts[2]),
            [],
            "no audit is not an audit that found nothing"
        );
        assert_eq!(m.drift_words(&hosts[3]), ["degraded +mlock-failed"]);
        assert_eq!(m.split().count(), 0);
        // Two against two: no majority, so neither pair is anyone's difference.
        hosts[0].kernel = "6.19".into();
        hosts[1].kernel = "6.19".into();
        let m = Majority::of(&hosts);
        assert!(m.drift(&hosts[0]).iter().all(|d| d.fact != Fact::Kernel));
        let split: Vec<_> = m.split().collect();
        assert_eq!(split.len(), 1, "{split:?}");
        assert_eq!(split[0].0.0, Fact::Kernel);
        assert_eq!(split[0].1.len(), 2);
    }
}
