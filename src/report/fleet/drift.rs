//! Configuration drift: the hosts whose kernel, boot options, audit findings or
//! degradations differ from the majority's (`differ`), whatever their figures, grouped
//! so that a fleet of any size says it in a few entries. Hosts that differ alike are one
//! entry, a fact on which the odd hosts hold many values is one entry with their count,
//! and the differences that the same hosts share are one entry too (a host with two odd
//! boot options is one line, not two); a fact that no value has a majority of is one
//! entry with its values by count. The splits come first, then the largest groups.

use std::collections::BTreeMap;

use crate::report::fleet::differ::{Fact, Key, Majority, Values};
use crate::report::fleet::summary::HostSummary;

/// One thing that drifted.
#[derive(Debug, Clone, PartialEq)]
pub enum Entry {
    /// Hosts that differ alike: what they have (`differ::Diff::words`), and which.
    Odd {
        fact: Fact,
        items: Vec<String>,
        hosts: Vec<usize>,
    },
    /// A fact that no value has a majority of, with its values.
    Split {
        fact: Fact,
        key: String,
        values: Values,
    },
}

/// A fact's odd values in words, each with its hosts, and what most have.
type OddValues = (BTreeMap<String, Vec<usize>>, Option<String>);

/// A fact whose odd hosts hold more than this many values is one entry, its values
/// counted (30 hosts each on its own kernel are one line, not 30).
pub const MAX_VALUES: usize = 3;

/// The fleet's drift, in the order it is said.
pub fn entries(hosts: &[HostSummary], m: &Majority) -> Vec<Entry> {
    // By fact: each odd value in words, with its hosts; and what most have.
    let mut by_key: BTreeMap<Key, OddValues> = BTreeMap::new();
    for (i, h) in hosts.iter().enumerate() {
        for d in m.drift(h) {
            let (values, _) = (by_key.entry((d.fact, d.key.clone())))
                .or_insert_with(|| (BTreeMap::new(), d.most.clone()));
            values.entry(d.words()).or_default().push(i);
        }
    }
    // The items of one kind that the same hosts have, together.
    let mut shared: BTreeMap<(Fact, Vec<usize>), Vec<String>> = BTreeMap::new();
    for ((fact, key), (values, most)) in by_key {
        if values.len() > MAX_VALUES {
            let mut ids: Vec<usize> = values.values().flatten().copied().collect();
            ids.sort_unstable();
            let item = counted(fact, &key, values.len(), most.as_deref());
            shared.entry((fact, ids)).or_default().push(item);
            continue;
        }
        for (item, ids) in values {
            shared.entry((fact, ids)).or_default().push(item);
        }
    }
    let mut odd: Vec<Entry> = (shared.into_iter())
        .map(|((fact, hosts), mut items)| {
            items.sort_unstable();
            Entry::Odd { fact, items, hosts }
        })
        .collect();
    // Stable: within a count, kernel before boot options before audit before degraded.
    odd.sort_by_key(|e| std::cmp::Reverse(e.hosts().len()));
    let split = m.split().map(|((fact, key), values)| Entry::Split {
        fact: *fact,
        key: key.clone(),
        values: values.clone(),
    });
    split.chain(odd).collect()
}

/// A fact's odd values counted: "30 other releases (most: 6.1.0-18-amd64)", "rcu_nocbs: 12
/// other values (most: absent)".
fn counted(fact: Fact, key: &str, n: usize, most: Option<&str>) -> String {
    let most = most.unwrap_or("absent");
    match fact {
        Fact::Kernel => format!("{n} other releases (most: {most})"),
        Fact::Audit => format!("{key}: {n} other severities (most: {most})"),
        _ => format!("{key}: {n} other values (most: {most})"),
    }
}

impl Entry {
    /// The hosts that differ alike (none for a split).
    pub fn hosts(&self) -> &[usize] {
        match self {
            Entry::Odd { hosts, .. } => hosts,
            Entry::Split { .. } => &[],
        }
    }

    /// What differs: "boot options +isolcpus=1-15 +nohz_full=1-15", or "kernel: no
    /// majority".
    pub fn what(&self) -> String {
        match self {
            Entry::Odd { fact, items, .. } => {
                format!("{} {}", fact.label(), items.join(fact.joiner()))
            }
            Entry::Split { fact, key, .. } => match key.is_empty() {
                true => format!("{}: no majority", fact.label()),
                false => format!("{} {key}: no majority", fact.label()),
            },
        }
    }

    /// The entry in one line: what differs and who, "kernel 6.2 (most: 6.1) on 12 hosts:
    /// node0001, node0002 and 10 more" ([`Entry::names`]), or a split with its values by
    /// count, "kernel: no majority (6.1 on 150 hosts, 6.2 on 150)" ([`Entry::values`]).
    pub fn line(&self, labels: &[String], names: Option<usize>) -> String {
        match self {
            Entry::Odd { hosts, .. } => format!(
                "{} on {}: {}",
                self.what(),
                hosts_word(hosts.len()),
                self.names(labels, names)
            ),
            Entry::Split { .. } => format!("{} ({})", self.what(), self.values(names)),
        }
    }

    /// The hosts that differ alike, at most `cap` named (every one with `None`): "node0001,
    /// node0002 and 10 more"; "" for a split.
    pub fn names(&self, labels: &[String], cap: Option<usize>) -> String {
        let hosts = self.hosts();
        let cap = cap.unwrap_or(usize::MAX);
        let named: Vec<&str> = (hosts.iter().take(cap))
            .map(|&i| labels[i].as_str())
            .collect();
        match hosts.len() - named.len() {
            0 => named.join(", "),
            n => format!("{} and {n} more", named.join(", ")),
        }
    }

    /// A split's values by count, at most `cap` said (every one with `None`): "6.1 on 150
    /// hosts, 6.2 on 100, 2 other values on 50"; "" for hosts that differ alike.
    pub fn values(&self, cap: Option<usize>) -> String {
        let Entry::Split { fact, values, .. } = self else {
            return String::new();
        };
        let said: Vec<String> = (values.iter().take(cap.unwrap_or(usize::MAX)).enumerate())
            .map(|(n, (v, c))| {
                let v = value_words(*fact, v.as_deref());
                match n {
                    0 => format!("{v} on {}", hosts_word(*c)),
                    _ => format!("{v} on {c}"),
                }
            })
            .collect();
        let rest = &values[said.len()..];
        match rest.iter().map(|(_, c)| c).sum::<usize>() {
            0 => said.join(", "),
            n => format!("{}, {} other values on {n}", said.join(", "), rest.len()),
        }
    }
}

/// "1 host", "12 hosts".
pub fn hosts_word(n: usize) -> String {
    format!("{n} host{}", if n == 1 { "" } else { "s" })
}

/// A split fact's value as said: the release, the option's words or severity; "absent".
fn value_words(fact: Fact, v: Option<&str>) -> String {
    match (fact, v) {
        (_, None) => "absent".into(),
        (Fact::Degraded, Some(_)) => "present".into(),
        (_, Some(v)) => v.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::system::audit::Severity;

    fn host(n: usize, kernel: &str, cmdline: &str) -> HostSummary {
        HostSummary {
            label: format!("node{n:04}"),
            hostname: format!("node{n:04}"),
            path: Default::default(),
            kind: "run".into(),
            kernel: kernel.into(),
            cmdline: cmdline.into(),
            findings: Some(vec![("swap-off".into(), Severity::Ok)]),
            top_cause: None,
            degraded: vec!["virtual-machine".into()],
            figures: [Some(1.0), None, None, None],
        }
    }

    const BOOT: &str = "BOOT_IMAGE=/vmlinuz root=UUID=X quiet isolcpus=1-15 psi=1";

    /// 300 hosts, 30 drifted five ways: five entries, each with its count, whatever the
    /// hosts' own root= and BOOT_IMAGE=.
    #[test]
    fn thirty_drifted_hosts_of_300_are_five_entries() {
        let mut hosts: Vec<HostSummary> = (0..300)
            .map(|i| host(i, "6.1.0-18-amd64", &BOOT.replace('X', &i.to_string())))
            .collect();
        for h in &mut hosts[10..30] {
            h.kernel = "6.1.0-99-rt-amd64".into();
        }
        for h in &mut hosts[30..35] {
            h.cmdline = h.cmdline.replace("isolcpus=1-15", "isolcpus=1-3");
        }
        for h in &mut hosts[35..38] {
            h.cmdline.push_str(" nohz_full=1-15 rcu_nocbs=1-15");
        }
        hosts[38].degraded.push("sched-refused".into());
        hosts[39].findings = Some(vec![("swap-on".into(), Severity::Warn)]);
        let m = Majority::of(&hosts);
        let e = entries(&hosts, &m);
        let said: Vec<(String, usize)> = e.iter().map(|e| (e.what(), e.hosts().len())).collect();
        assert_eq!(
            said,
            [
                ("kernel 6.1.0-99-rt-amd64 (most: 6.1.0-18-amd64)".into(), 20),
                ("boot options isolcpus=1-3 (most: isolcpus=1-15)".into(), 5),
                ("boot options +nohz_full=1-15 +rcu_nocbs=1-15".into(), 3),
                ("audit +swap-on (warn), -swap-off".into(), 1),
                ("degraded +sched-refused".into(), 1),
            ]
        );
        let labels: Vec<String> = hosts.iter().map(|h| h.label.clone()).collect();
        assert_eq!(
            e[1].line(&labels, Some(2)),
            "boot options isolcpus=1-3 (most: isolcpus=1-15) on 5 hosts: node0030, node0031 \
             and 3 more"
        );
        assert_eq!(
            e[3].line(&labels, None),
            "audit +swap-on (warn), -swap-off on 1 host: node0039"
        );
    }

    /// A fleet split between two kernels, none on most: one entry with both, no host
    /// called odd for it.
    #[test]
    fn a_fact_without_a_majority_is_one_entry_with_its_values() {
        let mut hosts: Vec<HostSummary> = (0..10).map(|i| host(i, "6.1", "quiet")).collect();
        for h in &mut hosts[..6] {
            h.kernel = "6.2".into();
        }
        for h in &mut hosts[..3] {
            h.kernel = "6.3".into();
        }
        let m = Majority::of(&hosts);
        let e = entries(&hosts, &m);
        assert_eq!(e.len(), 1, "{e:?}");
        let labels: Vec<String> = hosts.iter().map(|h| h.label.clone()).collect();
        assert_eq!(
            e[0].line(&labels, None),
            "kernel: no majority (6.1 on 4 hosts, 6.2 on 3, 6.3 on 3)"
        );
        assert_eq!(e[0].values(Some(1)), "6.1 on 4 hosts, 2 other values on 6");
        assert!(m.drift(&hosts[0]).is_empty(), "no host is odd for it");
    }

    /// Hosts each on a kernel of its own: one entry that counts the releases.
    #[test]
    fn many_odd_values_of_one_fact_are_one_entry() {
        let mut hosts: Vec<HostSummary> = (0..100).map(|i| host(i, "6.1", "quiet")).collect();
        for (k, h) in hosts.iter_mut().skip(10).take(MAX_VALUES + 1).enumerate() {
            h.kernel = format!("6.2.{k}");
        }
        let e = entries(&hosts, &Majority::of(&hosts));
        assert_eq!(e.len(), 1, "{e:?}");
        assert_eq!(e[0].what(), "kernel 4 other releases (most: 6.1)");
        assert_eq!(e[0].hosts(), [10, 11, 12, 13]);
        hosts[13].kernel = "6.1".into();
        let e = entries(&hosts, &Majority::of(&hosts));
        assert_eq!(e.len(), MAX_VALUES, "few values are each said: {e:?}");
    }

    #[test]
    fn a_fleet_alike_has_no_drift() {
        let hosts: Vec<HostSummary> = (0..5)
            .map(|i| host(i, "6.1", &BOOT.replace('X', &i.to_string())))
            .collect();
        assert_eq!(entries(&hosts, &Majority::of(&hosts)), []);
    }
}
