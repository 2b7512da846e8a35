//! The causes of every traced CPU side by side: a row per CPU, a column per cause, each
//! cell the cause's share of that CPU's interrupted time. The columns are the causes
//! with the most time over all CPUs, at most [`MAX_CAUSES`], the rest summed as "other",
//! so that the matrix stays as wide at 192 CPUs as at 2.
//!
//! A cause is matched across CPUs by `cause_names::cause_key`: a task's pid dropped, a
//! per-CPU kernel thread's CPU written `N` (`kworker/N:*`, `ksoftirqd/N`): each CPU has
//! its own, and they are one cause.

use std::collections::HashMap;

use crate::report::cause_names::cause_key;
use crate::stats::causes::{Attribution, CauseKind};

/// The most causes a matrix names; the rest are summed as "other".
pub const MAX_CAUSES: usize = 8;

/// What the summed column is called.
pub const OTHER: &str = "other";

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
    /// `None` for [`OTHER`].
    pub kind: Option<CauseKind>,
    /// Over every CPU.
    pub total_ns: u64,
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
        let mut totals: HashMap<String, (CauseKind, u64)> = HashMap::new();
        for (cpu, a) in entries {
            for c in &a.causes {
                let key = cause_key(*cpu, c.kind, &c.cause);
                let t = totals.entry(key).or_insert((c.kind, 0));
                t.1 += c.total_ns;
            }
        }
        if totals.is_empty() {
            return None;
        }
        let mut ranked: Vec<(String, CauseKind, u64)> = (totals.into_iter())
            .map(|(k, (kind, ns))| (k, kind, ns))
            .collect();
        // Most time first; equal times by name, so that the order is stable.
        ranked.sort_by(|a, b| b.2.cmp(&a.2).then_with(|| a.0.cmp(&b.0)));
        let named = match ranked.len() {
            n if n <= MAX_CAUSES + 1 => n,
            _ => MAX_CAUSES,
        };
        let mut columns: Vec<CauseColumn> = (ranked.iter().take(named))
            .map(|(cause, kind, ns)| CauseColumn {
                cause: cause.clone(),
                kind: Some(*kind),
                total_ns: *ns,
            })
            .collect();
        if named < ranked.len() {
            columns.push(CauseColumn {
                cause: OTHER.into(),
                kind: None,
                total_ns: ranked[named..].iter().map(|r| r.2).sum(),
            });
        }
        let index: HashMap<&str, usize> = (columns.iter().take(named).enumerate())
            .map(|(i, c)| (c.cause.as_str(), i))
            .collect();
        let rows = (entries.iter())
            .map(|(cpu, a)| {
                let mut shares = vec![0.0; columns.len()];
                for c in &a.causes {
                    let key = cause_key(*cpu, c.kind, &c.cause);
                    let at = index.get(key.as_str()).copied();
                    shares[at.unwrap_or(named)] += c.share_pct;
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
        assert_eq!(m.columns.len(), MAX_CAUSES + 1);
        assert_eq!(m.columns[0].cause, "irq big");
        assert_eq!(m.columns[0].total_ns, 2000);
        // Each CPU's own kworker, one column.
        assert_eq!(m.columns[1].cause, "task kworker/N:* (SCHED_OTHER nice 0)");
        assert_eq!(m.columns.last().unwrap().cause, OTHER);
        // Ten causes a CPU, eight named: the two with least time are other.
        assert_eq!(m.columns.last().unwrap().total_ns, 2 * (10 + 11));
        for r in &m.rows {
            assert_eq!(r.shares[1], 25.0);
            assert_eq!(*r.shares.last().unwrap(), 5.0);
            let sum: f64 = r.shares.iter().sum();
            assert!((sum - 95.0).abs() < 1e-9, "{sum}");
        }
        assert!(CauseMatrix::of(&[(1, &attribution(Vec::new()))]).is_none());
    }

    #[test]
    fn nine_causes_need_no_other_column() {
        let causes: Vec<CauseRow> = (0..=MAX_CAUSES)
            .map(|i| row(CauseKind::Irq, &format!("irq {i}"), 1 + i as u64, 1.0))
            .collect();
        let a = attribution(causes);
        let m = CauseMatrix::of(&[(4, &a)]).unwrap();
        assert_eq!(m.columns.len(), MAX_CAUSES + 1);
        assert!(m.columns.iter().all(|c| c.kind.is_some()));
    }
}
