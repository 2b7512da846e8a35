//! c2c's summary by locality: the pairs in classes (SMT siblings, same last-level cache,
//! same package, other node, cross-package), each class with its count and the spread of
//! its pairs' median one-way latency; the slowest and fastest pairs; the pairs far from
//! their class; and how each CPU fares over its pairs.
//!
//! This is what c2c shows when its matrix does not fit the terminal, and what a matrix
//! of 192 CPUs cannot show at all: where latency changes with distance, and which pairs
//! do not follow their class. Pure: built from (pair, figure, class) triples, so that it
//! is tested on a made-up topology.

use std::collections::BTreeMap;

use crate::engine::topology::Locality;
use crate::probes::c2c::median;

/// How far out a pair must lie, in MADs scaled to a normal σ, to be named as outside its
/// class: 3 σ, the usual robust cut (a normal class would put 0.3 % of its pairs there).
pub const OUTSIDE_MADS: f64 = 3.0;
/// MAD × this estimates σ for normally distributed figures.
pub use crate::stats::rank::MAD_TO_SIGMA;
/// …and at least this share of the class's median away. Two runs of the same 16-CPU
/// guest put its median pair at 169 and 193 ns: a pair within 10 % of its class is
/// within what a rerun moves, however tight the class (a class of equal figures has a
/// MAD of 0).
pub const OUTSIDE_SHARE: f64 = 0.10;

/// One measured pair and its figure (the pair's median one-way latency, ns).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pair {
    pub a: usize,
    pub b: usize,
    pub ns: f64,
    pub class: Locality,
}

/// One class of pairs.
#[derive(Debug, Clone, PartialEq)]
pub struct Class {
    pub class: Locality,
    pub pairs: usize,
    pub median: f64,
    /// The 10th and 90th percentiles (nearest rank).
    pub p10: f64,
    pub p90: f64,
    pub min: f64,
    pub max: f64,
    /// The median absolute deviation from `median`.
    pub mad: f64,
    /// How far from `median` a pair may lie and still be in the class:
    /// `max(OUTSIDE_MADS × MAD_TO_SIGMA × mad, OUTSIDE_SHARE × median)`.
    pub reach: f64,
    /// Pairs beyond `median ± reach`, farthest first.
    pub outside: Vec<Pair>,
}

/// Every class, the extremes and the per-CPU spread.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// In locality order, closest first.
    pub classes: Vec<Class>,
    /// Every pair, slowest first.
    pub by_latency: Vec<Pair>,
    /// Per CPU, the median of its pairs' figures, slowest first.
    pub per_cpu: Vec<(usize, f64)>,
}

impl Summary {
    /// The summary of `pairs` (pairs without a figure left out by the caller).
    pub fn of(pairs: &[Pair]) -> Summary {
        let mut by: BTreeMap<Locality, Vec<Pair>> = BTreeMap::new();
        for p in pairs {
            by.entry(p.class).or_default().push(*p);
        }
        let classes = by.into_iter().map(|(c, ps)| class(c, ps)).collect();
        let mut by_latency = pairs.to_vec();
        by_latency.sort_by(|x, y| y.ns.total_cmp(&x.ns).then((x.a, x.b).cmp(&(y.a, y.b))));
        Summary {
            classes,
            by_latency,
            per_cpu: per_cpu(pairs),
        }
    }

    /// The `n` slowest pairs, slowest first.
    pub fn slowest(&self, n: usize) -> &[Pair] {
        &self.by_latency[..n.min(self.by_latency.len())]
    }

    /// The `n` fastest pairs, fastest first (ties in CPU order, as for the slowest).
    pub fn fastest(&self, n: usize) -> Vec<Pair> {
        let mut v = self.by_latency.clone();
        v.sort_by(|x, y| x.ns.total_cmp(&y.ns).then((x.a, x.b).cmp(&(y.a, y.b))));
        v.truncate(n);
        v
    }
}

fn class(c: Locality, pairs: Vec<Pair>) -> Class {
    let mut v: Vec<f64> = pairs.iter().map(|p| p.ns).collect();
    v.sort_by(f64::total_cmp);
    let m = median(&v).unwrap_or(f64::NAN);
    let deviations: Vec<f64> = v.iter().map(|x| (x - m).abs()).collect();
    let mad = median(&deviations).unwrap_or(0.0);
    let reach = (OUTSIDE_MADS * MAD_TO_SIGMA * mad).max(OUTSIDE_SHARE * m);
    let mut outside: Vec<Pair> = (pairs.iter())
        .filter(|p| (p.ns - m).abs() > reach)
        .copied()
        .collect();
    outside.sort_by(|x, y| (y.ns - m).abs().total_cmp(&(x.ns - m).abs()));
    Class {
        class: c,
        pairs: pairs.len(),
        median: m,
        p10: nearest_rank(&v, 0.10),
        p90: nearest_rank(&v, 0.90),
        min: v[0],
        max: v[v.len() - 1],
        mad,
        reach,
        outside,
    }
}

/// The `q` quantile of sorted `v` by nearest rank: the smallest value with at least
/// q × n values at or below it.
fn nearest_rank(v: &[f64], q: f64) -> f64 {
    let rank = (q * v.len() as f64).ceil() as usize;
    v[rank.clamp(1, v.len()) - 1]
}

/// Per CPU, the median of the figures of the pairs it is in, slowest first.
fn per_cpu(pairs: &[Pair]) -> Vec<(usize, f64)> {
    let mut of: BTreeMap<usize, Vec<f64>> = BTreeMap::new();
    for p in pairs {
        of.entry(p.a).or_default().push(p.ns);
        of.entry(p.b).or_default().push(p.ns);
    }
    let mut out: Vec<(usize, f64)> = (of.into_iter())
        .filter_map(|(cpu, v)| Some((cpu, median(&v)?)))
        .collect();
    out.sort_by(|x, y| y.1.total_cmp(&x.1).then(x.0.cmp(&y.0)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::cpu::CpuList;
    use crate::engine::topology::Topology;

    /// The 16-CPU fake (2 packages, 2 L3s each, 2 cores per L3, SMT pairs) with a known
    /// latency per class, a small spread in each, and two planted pairs: 1-2 far too slow
    /// for its class, 3-4 far too fast.
    fn fake_pairs() -> (tempfile::TempDir, Vec<Pair>) {
        let dir = tempfile::tempdir().unwrap();
        crate::engine::topology::tests::two_sockets_two_llcs(dir.path(), false);
        let topo = Topology::read(dir.path(), &CpuList::parse_kernel("0-15").unwrap());
        let mut pairs = Vec::new();
        for a in 0..16 {
            for b in a + 1..16 {
                let class = topo.locality(a, b);
                let base = match class {
                    Locality::SmtSiblings => 10.0,
                    Locality::SameLlc => 40.0,
                    Locality::SamePackage => 70.0,
                    Locality::CrossPackage => 150.0,
                    other => panic!("the fake has no {other:?} pairs"),
                };
                // ±2 ns of spread, so that the MAD is not 0.
                let ns = match (a, b) {
                    (1, 2) => 300.0,
                    (3, 4) => 60.0,
                    _ => base + ((a + b) % 5) as f64 - 2.0,
                };
                pairs.push(Pair { a, b, ns, class });
            }
        }
        (dir, pairs)
    }

    #[test]
    fn classes_count_their_pairs_and_name_the_ones_far_outside() {
        let (_dir, pairs) = fake_pairs();
        let s = Summary::of(&pairs);
        let got: Vec<(Locality, usize)> = s.classes.iter().map(|c| (c.class, c.pairs)).collect();
        assert_eq!(
            got,
            [
                (Locality::SmtSiblings, 8),
                (Locality::SameLlc, 16),
                (Locality::SamePackage, 32),
                (Locality::CrossPackage, 64),
            ]
        );
        for c in &s.classes {
            let base = [10.0, 40.0, 70.0, 150.0][s.classes.iter().position(|x| x == c).unwrap()];
            assert!((c.median - base).abs() <= 2.0, "{c:?}");
            assert!(c.p10 >= base - 2.0 && c.p90 <= base + 2.0, "{c:?}");
        }
        // The planted pairs, each named in its own class and nowhere else.
        let same_package = &s.classes[2];
        assert_eq!(same_package.max, 300.0);
        let named: Vec<(usize, usize)> = same_package.outside.iter().map(|p| (p.a, p.b)).collect();
        assert_eq!(named, [(1, 2)]);
        let cross = &s.classes[3];
        assert_eq!(cross.min, 60.0);
        let named: Vec<(usize, usize)> = cross.outside.iter().map(|p| (p.a, p.b)).collect();
        assert_eq!(named, [(3, 4)]);
        assert!(s.classes[0].outside.is_empty() && s.classes[1].outside.is_empty());
        // The slowest pair overall is the planted one; the fastest are siblings.
        assert_eq!((s.slowest(1)[0].a, s.slowest(1)[0].b), (1, 2));
        let fastest = s.fastest(3);
        assert!(
            fastest.iter().all(|p| p.class == Locality::SmtSiblings),
            "{fastest:?}"
        );
        assert_eq!(fastest[0].ns, 8.0);
    }

    #[test]
    fn a_pair_within_a_tenth_of_its_class_is_never_outside() {
        // A class of equal figures has a MAD of 0: only the 10 % floor keeps 105 in.
        let mk = |i: usize, ns: f64| Pair {
            a: 0,
            b: i,
            ns,
            class: Locality::SamePackage,
        };
        let mut pairs: Vec<Pair> = (1..20).map(|i| mk(i, 100.0)).collect();
        pairs.push(mk(20, 109.0));
        pairs.push(mk(21, 111.0));
        let s = Summary::of(&pairs);
        let out: Vec<usize> = s.classes[0].outside.iter().map(|p| p.b).collect();
        assert_eq!(out, [21]);
        assert_eq!(s.classes[0].mad, 0.0);
    }

    #[test]
    fn per_cpu_medians_find_a_cpu_slow_with_everyone() {
        // CPU 3's pairs are all 200 ns, the others' 100 ns.
        let mut pairs = Vec::new();
        for a in 0..6 {
            for b in a + 1..6 {
                let ns = if a == 3 || b == 3 { 200.0 } else { 100.0 };
                let class = Locality::SamePackage;
                pairs.push(Pair { a, b, ns, class });
            }
        }
        let s = Summary::of(&pairs);
        assert_eq!(s.per_cpu[0], (3, 200.0));
        assert_eq!(s.per_cpu.last().unwrap().1, 100.0);
        assert_eq!(nearest_rank(&[1.0, 2.0, 3.0, 4.0], 0.1), 1.0);
        assert_eq!(nearest_rank(&[1.0, 2.0, 3.0, 4.0], 0.9), 4.0);
    }
}
