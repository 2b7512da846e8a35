//! The audit's findings as text: one table per area, worst findings first within it,
//! with the value seen, why it matters and the exact fix.

use comfy_table::{ContentArrangement, Table, presets};

use crate::system::audit::{AuditReport, Finding, Severity};

/// Wide enough for a fix command on one or two lines.
const WIDTH: u16 = 160;

/// Every area's table, then a one-line count by severity.
pub fn render(r: &AuditReport) -> String {
    let hk = if r.housekeeping.is_empty() {
        "none".to_string()
    } else {
        r.housekeeping.to_string()
    };
    let mut out = format!(
        "Audit of {} for measured CPUs {} (housekeeping: {hk})\n",
        r.root.display(),
        r.measured
    );
    let mut areas: Vec<_> = r.findings.iter().map(|f| f.area).collect();
    areas.dedup();
    for area in areas {
        let mut rows: Vec<&Finding> = r.findings.iter().filter(|f| f.area == area).collect();
        rows.sort_by_key(|f| std::cmp::Reverse(f.severity));
        out.push_str(&format!("\n{area}\n{}\n", table(&rows)));
    }
    let count = |s: Severity| r.findings.iter().filter(|f| f.severity == s).count();
    out.push_str(&format!(
        "\n{} bad, {} warn, {} info, {} ok\n",
        count(Severity::Bad),
        count(Severity::Warn),
        count(Severity::Info),
        count(Severity::Ok)
    ));
    out
}

fn table(rows: &[&Finding]) -> Table {
    let mut t = Table::new();
    t.load_style(presets::UTF8_HORIZONTAL_ONLY);
    t.set_content_arrangement(ContentArrangement::Dynamic);
    t.set_width(WIDTH);
    t.set_header(["id", "severity", "value", "why", "fix"]);
    for f in rows {
        let fix = if f.fix.is_empty() {
            "-"
        } else {
            f.fix.as_str()
        };
        t.add_row(vec![
            f.id.to_string(),
            f.severity.to_string(),
            f.value.clone(),
            f.why.clone(),
            fix.to_string(),
        ]);
    }
    t
}
