//! The fleet ranked: hosts whose headline figures and top cause agree said once as a
//! group, the outliers named, by the same grouping the views use for a big host's CPUs
//! (`report::terminal::group`, with hosts for CPUs).
//!
//! Hosts are grouped only with hosts that have the same figures: a bare noise result has
//! no timer figure, and a missing figure is not a low one. Each such set (main jobs,
//! noise results, timer results …) is grouped on its own, the largest first.

use crate::report::fleet::differ::Majority;
use crate::report::fleet::summary::{FIGURES, HostSummary};
use crate::report::terminal::group::{self, Grouping, Member, Row, Why};

/// A fleet, read and ranked.
#[derive(Debug, Clone)]
pub struct Fleet {
    pub hosts: Vec<HostSummary>,
    /// The rows: groups, hosts on their own (and why), the rest.
    pub grouping: Grouping,
    /// The figures any host has (indices into [`FIGURES`]).
    pub shown: Vec<usize>,
    /// What most hosts share, that an outlier's differences are said against.
    pub majority: Majority,
}

impl Fleet {
    /// `hosts` ranked; each its own row with `per_host`.
    pub fn rank(hosts: Vec<HostSummary>, per_host: bool) -> Fleet {
        let shown: Vec<usize> = (0..FIGURES.len())
            .filter(|&f| hosts.iter().any(|h| h.figures[f].is_some()))
            .collect();
        let grouping = match per_host {
            true => Grouping::each(&members(&hosts.iter().collect::<Vec<_>>(), &[])),
            false => by_figure_set(&hosts),
        };
        Fleet {
            majority: Majority::of(&hosts),
            hosts,
            grouping,
            shown,
        }
    }

    /// The hosts named on their own because they stand out, each with why in words.
    pub fn outliers(&self) -> Vec<(usize, String)> {
        let keys: Vec<group::Key> = FIGURES.iter().map(|f| f.key).collect();
        (self.grouping.outliers().into_iter())
            .map(|(i, why)| {
                // Keys count among the host's own figures: map back to FIGURES.
                let why = match why {
                    Why::Figure { key, high } => Why::Figure {
                        key: own_figures(&self.hosts[i])[key],
                        high,
                    },
                    w => w,
                };
                (
                    i,
                    group::why_words(why, &keys).replace("largest cause", "top cause"),
                )
            })
            .collect()
    }

    /// The worst host and the best by figure `f` ([`FIGURES`]); `None` when fewer
    /// than two hosts have it.
    pub fn extremes(&self, f: usize) -> Option<(usize, usize)> {
        let with: Vec<usize> = (0..self.hosts.len())
            .filter(|&i| self.hosts[i].figures[f].is_some())
            .collect();
        let value = |i: &usize| self.hosts[*i].figures[f].unwrap_or(0.0);
        let worst = with.iter().max_by(|a, b| value(a).total_cmp(&value(b)))?;
        let best = with.iter().min_by(|a, b| value(a).total_cmp(&value(b)))?;
        (with.len() >= 2).then_some((*worst, *best))
    }
}

/// The figures a host has that hosts are grouped by (indices into [`FIGURES`]).
fn own_figures(h: &HostSummary) -> Vec<usize> {
    (0..FIGURES.len())
        .filter(|&f| FIGURES[f].ranks && h.figures[f].is_some())
        .collect()
}

/// Each host as a member to group: its top cause and the figures of `set`.
fn members(hosts: &[&HostSummary], set: &[usize]) -> Vec<Member> {
    (hosts.iter())
        .map(|h| Member {
            cause: h.top_cause.as_ref().map(|c| c.0.clone()),
            figures: set.iter().map(|&f| h.figures[f].unwrap_or(0.0)).collect(),
        })
        .collect()
}

/// Hosts grouped within each set of figures they have, the largest set first; the
/// rows of every set together, in host order.
fn by_figure_set(hosts: &[HostSummary]) -> Grouping {
    let mut sets: Vec<(Vec<usize>, Vec<usize>)> = Vec::new();
    for (i, h) in hosts.iter().enumerate() {
        let own = own_figures(h);
        match sets.iter_mut().find(|s| s.0 == own) {
            Some(s) => s.1.push(i),
            None => sets.push((own, vec![i])),
        }
    }
    sets.sort_by_key(|s| std::cmp::Reverse(s.1.len()));
    let mut rows: Vec<Row> = Vec::new();
    for (figures, ids) in &sets {
        let keys: Vec<group::Key> = figures.iter().map(|&f| FIGURES[f].key).collect();
        let subset: Vec<&HostSummary> = ids.iter().map(|&i| &hosts[i]).collect();
        let g = group::group(&members(&subset, figures), &keys);
        rows.extend(g.rows.into_iter().map(|r| renumber(r, ids)));
    }
    rows.sort_by_key(|r| r.members()[0]);
    Grouping {
        rows,
        noisiest: None,
        quietest: None,
    }
}

/// A row of a subset's grouping with its members numbered as in the whole fleet.
fn renumber(r: Row, ids: &[usize]) -> Row {
    let all = |m: Vec<usize>| m.into_iter().map(|i| ids[i]).collect();
    match r {
        Row::Group(m) => Row::Group(all(m)),
        Row::Rest(m) => Row::Rest(all(m)),
        Row::One(i, why) => Row::One(ids[i], why),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(n: usize, lost: f64, p99: Option<f64>) -> HostSummary {
        HostSummary {
            label: format!("node{n}"),
            hostname: format!("node{n}"),
            path: Default::default(),
            kind: if p99.is_some() { "run" } else { "noise" }.into(),
            kernel: "6.18".into(),
            cmdline: String::new(),
            findings: Some(Vec::new()),
            top_cause: Some(("tick".into(), 60.0)),
            degraded: Vec::new(),
            figures: [Some(lost), Some(4e6), p99, p99.map(|p| p * 10.0)],
        }
    }

    /// A missing figure is not a low one: noise-only hosts group among themselves, and
    /// only the host whose share lost is far above its peers stands out.
    #[test]
    fn hosts_group_within_the_figures_they_have() {
        let mut hosts: Vec<HostSummary> = (0..12)
            .map(|i| host(i, 1.0 + 0.05 * (i % 5) as f64, Some(5e4 + 1e3 * i as f64)))
            .collect();
        hosts.extend((12..18).map(|i| host(i, 1.1, None)));
        hosts[3].figures[0] = Some(9.0);
        let f = Fleet::rank(hosts, false);
        let out = f.outliers();
        assert_eq!(
            out,
            vec![(3, "share lost high".to_string())],
            "{:?}",
            f.grouping
        );
        let noise_only = Row::Group((12..18).collect());
        assert!(f.grouping.rows.contains(&noise_only), "{:?}", f.grouping);
        assert_eq!(f.extremes(0), Some((3, 0)));
        assert_eq!(f.extremes(2).map(|e| e.0), Some(11));
    }
}
