//! The fleet as CSV: one row a host, by design (a spreadsheet or a script sorts and
//! filters it), with the row of the text table it falls in, why it stands out, its
//! figures in whole units named in the headers, what sets it apart from the majority, and
//! its configuration drift (the differences without the top cause: empty for a host
//! configured as most are).

use crate::report::export::csv_row;
use crate::report::fleet::rank::Fleet;

/// The header.
pub const HEADER: &str = "host,file,kind,row,standing_out,lost_pct,max_gap_ns,timer_p99_ns,\
timer_max_ns,top_cause,top_cause_pct,kernel,differences,drift";

/// The CSV: the header, then a row per host in the order read.
pub fn csv(fleet: &Fleet) -> String {
    let mut row_of = vec![0usize; fleet.hosts.len()];
    for (n, r) in fleet.grouping.rows.iter().enumerate() {
        for m in r.members() {
            row_of[m] = n + 1;
        }
    }
    let outliers = fleet.outliers();
    let mut out = format!("{HEADER}\n");
    for (i, h) in fleet.hosts.iter().enumerate() {
        let why = outliers.iter().find(|o| o.0 == i).map(|o| o.1.clone());
        let figure = |f: usize| match (h.figures[f], f) {
            (None, _) => String::new(),
            (Some(v), 0) => format!("{v:.4}"),
            (Some(v), _) => format!("{v:.0}"),
        };
        let (cause, share) = match &h.top_cause {
            Some((c, s)) => (c.clone(), format!("{s:.1}")),
            None => (String::new(), String::new()),
        };
        out.push_str(&csv_row(&[
            h.label.clone(),
            h.path.display().to_string(),
            h.kind.clone(),
            row_of[i].to_string(),
            why.unwrap_or_default(),
            figure(0),
            figure(1),
            figure(2),
            figure(3),
            cause,
            share,
            h.kernel.clone(),
            fleet.majority.differences(h).join("; "),
            fleet.majority.drift_words(h).join("; "),
        ]));
    }
    out
}
