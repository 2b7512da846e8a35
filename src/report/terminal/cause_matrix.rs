//! The causes of every traced CPU side by side: a row per CPU, a column per cause, each
//! cell the cause's share of that CPU's interrupted time. The columns are the causes
//! with the most time over all CPUs, at most [`MAX_CAUSES`], the rest summed as "other",
//! so that the matrix stays as wide at 192 CPUs as at 2.
//!
//! A cause is matched across CPUs by `cause_names::cause_key`: a task's pid dropped, a
//! per-CPU kernel thread's CPU written `N` (`kworker/N:*`, `ksoftirqd/N`): each CPU has
//! its own, and they are one cause.

use crate::report::terminal::cause_names::cause_key;
use crate::stats::causes::{Attribution, CauseKind, CauseRow};

/// The most causes a matrix names; the rest are summed as "other".
pub const MAX_CAUSES: usize = 8;

/// What the summed column is called.
pub const OTHER: &str = "other";

/// One cause across members (CPUs, or watched threads), merged by its key.
#[derive(Debug, Clone, PartialEq)]
pub struct CrossCause<'a> {
    pub key: String,
    pub kind: CauseKind,
    /// The first member's row of it (its whole name, and what its fixes are found by).
    pub row: &'a CauseRow,
    /// Its share (%) of each member's time, indexed as the members; `None` where the
    /// member had none. A share that is not a number (no time to share) counts 0.
    pub share: Vec<Option<f64>>,
    /// Over every member, ns.
    pub total_ns: u64,
    /// Over every member: the gaps (delays) it was the largest part of.
    pub largest_in: u64,
}

/// Every cause of `members` merged by `key` (of the member's index and its row), the
/// most time first, equal times by key: the one merge the terminal's cross-CPU table,
/// the page's matrix and watch's groups of threads share.
pub fn by_key<'a>(
    members: &[Option<&'a Attribution>],
    key: impl Fn(usize, &CauseRow) -> String,
) -> Vec<CrossCause<'a>> {
    let mut out: Vec<CrossCause<'a>> = Vec::new();
    let mut at: std::collections::HashMap<String, usize> = Default::default();
    for (i, a) in members.iter().enumerate() {
        let Some(a) = a else { continue };
        for c in &a.causes {
            let k = key(i, c);
            let j = *at.entry(k.clone()).or_insert_with(|| {
                out.push(CrossCause {
                    key: k,
                    kind: c.kind,
                    row: c,
                    share: vec![None; members.len()],
                    total_ns: 0,
                    largest_in: 0,
                });
                out.len() - 1
            });
            let x = &mut out[j];
            let share = if c.share_pct.is_finite() {
                c.share_pct
            } else {
                0.0
            };
            *x.share[i].get_or_insert(0.0) += share;
            x.total_ns += c.total_ns;
            x.largest_in += c.largest_in;
        }
    }
    out.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then_with(|| a.key.cmp(&b.key)));
    out
}

#[derive(Debug, Clone, PartialEq)]
pub struct CauseMatrix {
    /// Most time over all CPUs first; [`OTHER`] last when there is one.
    pub columns: Vec<CauseColumn>,
    /// In the order given (by CPU).
    pub rows: Vec<MatrixRow>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct CauseColumn {
    pub cause: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct MatrixRow {
    pub cpu: usize,
    pub gaps: u64,
    pub interrupted_ns: u64,
    /// Per column, the share of this CPU's interrupted time (%), 0 where it had none.
    pub shares: Vec<f64>,
}

impl CauseMatrix {
    /// The matrix of `entries` (CPU and its attribution); `None` when none has a cause.
    pub fn of(entries: &[(usize, &Attribution)]) -> Option<CauseMatrix> {
        let ranked = by_key(&members(entries), |i, c| {
            cause_key(entries[i].0, c.kind, &c.cause)
        });
        if ranked.is_empty() {
            return None;
        }
        let named = match ranked.len() {
            n if n <= MAX_CAUSES + 1 => n,
            _ => MAX_CAUSES,
        };
        let mut columns: Vec<CauseColumn> = (ranked.iter().take(named))
            .map(|c| CauseColumn {
                cause: c.key.clone(),
            })
            .collect();
        if named < ranked.len() {
            columns.push(CauseColumn {
                cause: OTHER.into(),
            });
        }
        let rows = (entries.iter().enumerate())
            .map(|(i, (cpu, a))| {
                let mut shares = vec![0.0; columns.len()];
                for (j, c) in ranked.iter().enumerate() {
                    shares[j.min(named)] += c.share[i].unwrap_or(0.0);
                }
                MatrixRow {
                    cpu: *cpu,
                    gaps: a.gaps,
                    interrupted_ns: a.interrupted_ns,
                    shares,
                }
            })
            .collect();
        Some(CauseMatrix { columns, rows })
    }
}

/// Entries as the members `by_key` takes.
fn members<'a>(entries: &[(usize, &'a Attribution)]) -> Vec<Option<&'a Attribution>> {
    entries.iter().map(|(_, a)| Some(*a)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::causes::CauseRow;

    fn row(kind: CauseKind, cause: &str, total_ns: u64, share_pct: f64) -> CauseRow {
        CauseRow {
            share_pct,
            ..CauseRow::made_up(kind, cause, 1, 0, total_ns)
        }
    }

    fn attribution(causes: Vec<CauseRow>) -> Attribution {
        let interrupted_ns = causes.iter().map(|c| c.total_ns).sum();
        Attribution::of_causes(causes, 10, interrupted_ns)
    }

    #[test]
    fn columns_are_the_causes_with_most_time_and_the_rest_is_other() {
        let mut a = Vec::new();
        for cpu in 1..=2usize {
            let mut causes = vec![row(CauseKind::Irq, "irq big", 1000, 50.0)];
            causes.push(row(
                CauseKind::Task,
                &format!("task kworker/{cpu}:1:{} (SCHED_OTHER nice 0)", 100 + cpu),
                500,
                25.0,
            ));
            for i in 0..MAX_CAUSES {
                causes.push(row(
                    CauseKind::Softirq,
                    &format!("softirq S{i}"),
                    10 + i as u64,
                    2.5,
                ));
            }
            a.push((cpu, attribution(causes)));
        }
        let entries: Vec<(usize, &Attribution)> = a.iter().map(|(c, a)| (*c, a)).collect();
        let m = CauseMatrix::of(&entries).unwrap();
        let ranked = by_key(&members(&entries), |i, c| {
            cause_key(entries[i].0, c.kind, &c.cause)
        });
        assert_eq!(m.columns.len(), MAX_CAUSES + 1);
        assert_eq!(m.columns[0].cause, "irq big");
        assert_eq!(ranked[0].total_ns, 2000);
        // Each CPU's own kworker, one column.
        assert_eq!(m.columns[1].cause, "task kworker/N:* (SCHED_OTHER nice 0)");
        assert_eq!(m.columns.last().unwrap().cause, OTHER);
        // Ten causes a CPU, eight named: the two with least time are other.
        let other: u64 = ranked[MAX_CAUSES..].iter().map(|c| c.total_ns).sum();
        assert_eq!(other, 2 * (10 + 11));
        for r in &m.rows {
            assert_eq!(r.shares[1], 25.0);
            assert_eq!(*r.shares.last().unwrap(), 5.0);
            let sum: f64 = r.shares.iter().sum();
            assert!((sum - 95.0).abs() < 1e-9, "{sum}");
        }
        assert!(CauseMatrix::of(&[(1, &attribution(Vec::new()))]).is_none());
    }

    /// Review 2 of issue 29: the matrix added a raw share, so a cause whose share is
    /// not a number printed "NaN"; the terminal counted it 0. One merge, one guard; ties
    /// go by name on both.
    #[test]
    fn a_share_that_is_not_a_number_counts_nothing_and_ties_go_by_name() {
        let a = attribution(vec![
            row(CauseKind::Irq, "irq b", 100, f64::NAN),
            row(CauseKind::Irq, "irq a", 100, 50.0),
        ]);
        let m = CauseMatrix::of(&[(1, &a)]).unwrap();
        assert_eq!(m.columns[0].cause, "irq a");
        assert_eq!(m.rows[0].shares, vec![50.0, 0.0]);
    }

    #[test]
    fn nine_causes_need_no_other_column() {
        let causes: Vec<CauseRow> = (0..=MAX_CAUSES)
            .map(|i| row(CauseKind::Irq, &format!("irq {i}"), 1 + i as u64, 1.0))
            .collect();
        let a = attribution(causes);
        let m = CauseMatrix::of(&[(4, &a)]).unwrap();
        assert_eq!(m.columns.len(), MAX_CAUSES + 1);
        assert!(m.columns.iter().all(|c| c.cause != OTHER));
    }
}
