//! The fleet in the terminal: a line saying what was read, one table row per group of
//! hosts that agree (two lines: each figure's lowest and highest), a row per outlier, the
//! worst and the best host, each outlier with what sets it apart from the majority, then
//! the hosts whose configuration drifted from the majority's whatever their figures.
//! Its length depends on the groups, never on the host count; its width on the layout
//! (`COLUMNS`), cells and lines cut with "…" as every table does.

use crate::report::fleet::drift;
use crate::report::fleet::rank::Fleet;
use crate::report::fleet::summary::{FIGURES, HostSummary, short_cause};
use crate::report::terminal::group::{self, Cell, Row};
use crate::report::terminal::table::{Layout, Tab, core, cut, wrap};

/// The most lines an outlier's differences take; the CSV and the page hold them whole.
const OUTLIER_LINES: usize = 3;

/// The lines of a screen, that the drift is cut to fit in after the table and outliers.
const SCREEN: usize = 60;

/// The most drift entries said, the lines each takes and the hosts each names (the CSV and
/// the page hold every one).
const DRIFT_ENTRIES: usize = 8;
const DRIFT_LINES: usize = 2;
const DRIFT_NAMES: usize = 6;

/// The whole text; `source` says where the results came from ("DIR", "12 files"), and
/// `notes` are lines said after the first (files skipped).
pub fn text(fleet: &Fleet, source: &str, notes: &[String]) -> String {
    let width = Layout::current().wrap_width();
    let mut out = String::new();
    let mut say = |line: String| {
        out.push_str(&wrap(&line, width, "  "));
        out.push('\n');
    };
    say(format!(
        "Fleet of {} results from {source} ({}): each host's figures are its worst CPU's.",
        fleet.hosts.len(),
        kinds(&fleet.hosts)
    ));
    for n in notes {
        say(n.clone());
    }
    if fleet.hosts.is_empty() {
        return out;
    }
    out.push_str(&table(fleet).to_string());
    out.push('\n');
    let mut say = |line: String| {
        out.push_str(&wrap(&line, width, "  "));
        out.push('\n');
    };
    if fleet.grouping.grouped() {
        say(
            "A group's two lines give each figure's lowest (low) and highest (high) over its \
             hosts; --per-host shows each."
                .into(),
        );
    }
    if let Some(line) = extremes(fleet) {
        say(line);
    }
    if let Some(line) = degraded(&fleet.hosts) {
        say(line);
    }
    out.push_str(&outliers(fleet, width));
    let room = SCREEN.saturating_sub(out.lines().count());
    out.push_str(&drift(fleet, width, room));
    out
}

/// "1000 main jobs" or "990 main jobs, 10 noise".
pub fn kinds(hosts: &[HostSummary]) -> String {
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for h in hosts {
        match counts.iter_mut().find(|c| c.0 == h.kind) {
            Some(c) => c.1 += 1,
            None => counts.push((&h.kind, 1)),
        }
    }
    (counts.iter())
        .map(|(k, n)| match *k {
            "run" => format!("{n} main jobs"),
            k => format!("{n} {k}"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A figure of a host as its cell says it: a share with two decimals, ns in µs.
pub fn figure_text(f: usize, v: Option<f64>) -> String {
    match (v, FIGURES[f].ns) {
        (None, _) => "-".into(),
        (Some(v), false) => format!("{v:.2}"),
        (Some(v), true) => format!("{:.1}", v / 1e3),
    }
}

/// Each host's cells after the first column: its figures and top cause (its kernel, when
/// not the majority's, is said with the outliers).
pub fn cells(fleet: &Fleet) -> Vec<Vec<Cell>> {
    (fleet.hosts.iter())
        .map(|h| {
            let mut row: Vec<Cell> = (fleet.shown.iter())
                .map(|&f| match h.figures[f] {
                    Some(v) => group::num(v, figure_text(f, Some(v))),
                    None => group::text("-"),
                })
                .collect();
            let cause = h.top_cause.as_ref().map_or("not traced", |c| c.0.as_str());
            row.push(group::text(short_cause(cause)));
            row
        })
        .collect()
}

/// Each row's label: a host's name, or "412 hosts".
pub fn row_labels(fleet: &Fleet) -> Vec<String> {
    (fleet.grouping.rows.iter())
        .map(|r| match r {
            Row::One(i, _) => fleet.hosts[*i].label.clone(),
            r => format!("{} hosts", r.members().len()),
        })
        .collect()
}

/// The headers after the first column.
pub fn headers(fleet: &Fleet) -> Vec<String> {
    let mut h: Vec<String> = fleet
        .shown
        .iter()
        .map(|&f| FIGURES[f].header.into())
        .collect();
    h.push("top cause".to_string());
    h
}

fn table(fleet: &Fleet) -> Tab {
    let rest: Vec<_> = (headers(fleet).into_iter())
        .enumerate()
        .map(|(i, h)| match i < fleet.shown.len() {
            true => core(h),
            false => core(h).text(),
        })
        .collect();
    let cols = group::columns(&fleet.grouping, core("hosts").text(), rest);
    let mut t = Tab::new(&cols);
    let rows = group::rows_labelled(&fleet.grouping, &row_labels(fleet), &cells(fleet));
    for r in rows {
        t.row(r);
    }
    t
}

/// "Worst by share lost: node0412 (26.92 %), best node0007 (1.19 %); by max gap: …": the
/// worst host by each figure, and the best by those hosts are grouped by.
fn extremes(fleet: &Fleet) -> Option<String> {
    let said: Vec<String> = (fleet.shown.iter())
        .filter_map(|&f| {
            let (worst, best) = fleet.extremes(f)?;
            let fig = FIGURES[f];
            let unit = if fig.ns { "µs" } else { "%" };
            let v = |i: usize| figure_text(f, fleet.hosts[i].figures[f]);
            let name = |i: usize| &fleet.hosts[i].label;
            Some(match fig.ranks {
                true => format!(
                    "{}: {} ({} {unit}), best {} ({} {unit})",
                    fig.key.name,
                    name(worst),
                    v(worst),
                    name(best),
                    v(best)
                ),
                false => format!("{}: {} ({} {unit})", fig.key.name, name(worst), v(worst)),
            })
        })
        .collect();
    (!said.is_empty()).then(|| format!("Worst by {}.", said.join("; by ")))
}

/// "Degraded: virtual-machine on 1000 hosts.", every kind with its count; `None` when no
/// host was.
fn degraded(hosts: &[HostSummary]) -> Option<String> {
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for k in hosts.iter().flat_map(|h| &h.degraded) {
        match counts.iter_mut().find(|c| c.0 == k) {
            Some(c) => c.1 += 1,
            None => counts.push((k, 1)),
        }
    }
    let words: Vec<String> = (counts.iter())
        .map(|(k, n)| format!("{k} on {n} host{}", if *n == 1 { "" } else { "s" }))
        .collect();
    (!words.is_empty()).then(|| format!("Degraded: {}.", words.join(", ")))
}

/// Each outlier with why it stands out and what sets it apart from the majority, at most
/// [`OUTLIER_LINES`] lines each.
fn outliers(fleet: &Fleet, width: Option<usize>) -> String {
    let out = fleet.outliers();
    if out.is_empty() {
        return String::new();
    }
    let m = &fleet.majority;
    let mut text = format!(
        "\nStanding out, against the majority of the {} hosts:\n",
        m.hosts
    );
    for (i, why) in out {
        let h = &fleet.hosts[i];
        let line = format!("  {} ({why}): {}", h.label, m.differences(h).join("; "));
        text.push_str(&capped(&line, width, OUTLIER_LINES));
    }
    text
}

/// The hosts whose configuration drifted, whatever their figures: at most
/// [`DRIFT_ENTRIES`] entries of at most [`DRIFT_LINES`] lines, each naming at most
/// [`DRIFT_NAMES`] hosts, as many as fit in `room` lines (two at least), then a count of
/// the rest; or one line saying none did.
fn drift(fleet: &Fleet, width: Option<usize>, room: usize) -> String {
    let m = &fleet.majority;
    let entries = drift::entries(&fleet.hosts, m);
    let mut text = String::from("\n");
    let head = match entries.is_empty() {
        true => "No configuration drift: the hosts agree on kernel, boot options, audit \
                 findings and degradations."
            .to_string(),
        false => format!(
            "Configuration drift, against the majority of the {} hosts (+ added, - missing):",
            m.hosts
        ),
    };
    text.push_str(&capped(&head, width, DRIFT_LINES));
    if m.audited < m.hosts {
        let line = format!(
            "  {} results hold no audit: their findings are not compared.",
            m.hosts - m.audited
        );
        text.push_str(&capped(&line, width, DRIFT_LINES));
    }
    let labels: Vec<String> = fleet.hosts.iter().map(|h| h.label.clone()).collect();
    let mut said = 0;
    for (n, e) in entries.iter().enumerate().take(DRIFT_ENTRIES) {
        let line = format!("  {}", e.line(&labels, Some(DRIFT_NAMES)));
        let lines = capped(&line, width, DRIFT_LINES);
        // A line is kept for the count of the rest, if any remain.
        let more = usize::from(n + 1 < entries.len());
        let used = text.lines().count() + lines.lines().count() + more;
        if n >= 2 && used > room {
            break;
        }
        text.push_str(&lines);
        said += 1;
    }
    let rest = &entries[said..];
    if !rest.is_empty() {
        let mut hosts: Vec<usize> = rest.iter().flat_map(|e| e.hosts().to_vec()).collect();
        hosts.sort_unstable();
        hosts.dedup();
        let line = format!(
            "  … and {} more on {}: the CSV (column drift) and the page give each.",
            rest.len(),
            drift::hosts_word(hosts.len())
        );
        text.push_str(&capped(&line, width, DRIFT_LINES));
    }
    text
}

/// `line` wrapped to `width` (continued 4 columns in), at most `most` lines, the last
/// kept ending in "…" where more was cut.
fn capped(line: &str, width: Option<usize>, most: usize) -> String {
    let wrapped = wrap(line, width, "    ");
    let lines: Vec<&str> = wrapped.lines().collect();
    let mut text = String::new();
    for (n, l) in lines.iter().take(most).enumerate() {
        let last_kept = n + 1 == most && lines.len() > most;
        let l = match (width, last_kept) {
            (Some(w), true) => cut(&format!("{l} …"), w),
            (Some(w), false) => cut(l, w),
            (None, _) => l.to_string(),
        };
        text.push_str(&l);
        text.push('\n');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fleet::summary::HostSummary;
    use crate::report::terminal::table::Layout;

    fn host(n: usize) -> HostSummary {
        // Figures that agree within the grouping's tolerance, hosts alike.
        let lost = 1.0 + (n % 7) as f64 * 0.02;
        HostSummary {
            label: format!("node{n:04}"),
            hostname: format!("node{n:04}"),
            path: Default::default(),
            kind: "run".into(),
            kernel: "6.1.0-18-amd64".into(),
            cmdline: format!("root=UUID={n} quiet isolcpus=1-15"),
            findings: Some(Vec::new()),
            top_cause: Some(("tick".into(), 60.0)),
            degraded: Vec::new(),
            figures: [Some(lost), Some(4e4), Some(1e5), Some(1e6)],
        }
    }

    fn text_at_100(hosts: Vec<HostSummary>) -> String {
        let fleet = Fleet::rank(hosts, false);
        Layout::fixed(100, false).scoped(|| text(&fleet, "DIR", &[]))
    }

    /// 30 of 300 hosts each on a kernel of its own and with a value of rcu_nocbs of its
    /// own: a line for the kernels and one for the option, each counting its values.
    #[test]
    fn thirty_hosts_each_drifted_its_own_way_are_two_lines() {
        let mut hosts: Vec<HostSummary> = (0..300).map(host).collect();
        for (k, h) in hosts.iter_mut().skip(100).take(30).enumerate() {
            h.kernel = format!("6.1.0-{k}-rt-amd64");
            h.cmdline.push_str(&format!(" rcu_nocbs={k}"));
        }
        let text = text_at_100(hosts);
        let names = "on 30 hosts: node0100, node0101, node0102, node0103, node0104, node0105 \
                     and 24 more";
        for what in [
            "kernel 30 other releases (most: 6.1.0-18-amd64)",
            "boot options rcu_nocbs: 30 other values (most: absent)",
        ] {
            let said = format!("  {what} {names}");
            assert!(
                text.replace("\n    ", " ").contains(&said),
                "{said}\n{text}"
            );
        }
        assert!(text.lines().count() <= 30, "{text}");
    }

    /// Eight hosts standing out by their figures (a long table and outlier list) and 20
    /// each with a boot option of its own: within 60 lines of 100 columns, the entries
    /// that do not fit counted.
    #[test]
    fn drift_beyond_the_screen_is_counted() {
        let mut hosts: Vec<HostSummary> = (0..300).map(host).collect();
        for (k, h) in hosts.iter_mut().skip(10).take(8).enumerate() {
            h.figures[0] = Some(20.0 * (k + 1) as f64);
            h.top_cause = Some((format!("task hog{k} (SCHED_OTHER nice 0)"), 80.0));
        }
        for (k, h) in hosts.iter_mut().skip(100).take(20).enumerate() {
            h.cmdline.push_str(&format!(" option{k:02}=on"));
        }
        let text = text_at_100(hosts);
        assert!(
            text.lines().count() <= 60,
            "{}:\n{text}",
            text.lines().count()
        );
        assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");
        let said = text
            .lines()
            .filter(|l| l.contains("=on on 1 host: node01"))
            .count();
        let more = (text.lines())
            .find_map(|l| l.strip_prefix("  … and "))
            .unwrap_or_else(|| panic!("{text}"));
        let n: usize = more.split(' ').next().unwrap().parse().unwrap();
        assert!(said >= 2, "{text}");
        assert_eq!(said + n, 20, "every entry said or counted: {more}");
    }

    /// 30 drifted alike: one line for them, their count and the first names.
    #[test]
    fn thirty_hosts_drifted_alike_are_one_line() {
        let mut hosts: Vec<HostSummary> = (0..300).map(host).collect();
        for h in hosts.iter_mut().skip(200).take(30) {
            h.cmdline = h.cmdline.replace("isolcpus=1-15", "isolcpus=1-3");
        }
        let text = text_at_100(hosts);
        let lines: Vec<&str> = text.lines().filter(|l| l.contains("isolcpus")).collect();
        assert_eq!(
            lines,
            [
                "  boot options isolcpus=1-3 (most: isolcpus=1-15) on 30 hosts: node0200, node0201, node0202,",
            ],
            "{text}"
        );
        assert!(text.contains("node0205 and 24 more\n"), "{text}");
    }

    #[test]
    fn a_fleet_alike_says_so_in_one_line() {
        let text = text_at_100((0..20).map(host).collect());
        assert!(
            text.contains("\nNo configuration drift: the hosts agree"),
            "{text}"
        );
        assert!(!text.contains("no audit"), "{text}");
    }
}
