//! The fleet as one HTML page (`report::page::html`): the text's table and its outliers with
//! every difference whole, the configuration drift with every host named, then a hosts ×
//! figure heat map: a row per host, grouped as the
//! table groups them, each figure's cell shaded by how far above the fleet's median it
//! lies, in steps of the figure's own tolerance (`report::terminal::group`: ×1.5 for a share, ×3
//! for a latency), so that a shade means a difference beyond run-to-run movement.

use crate::report::fleet::drift;
use crate::report::fleet::rank::Fleet;
use crate::report::fleet::summary::{FIGURES, short_cause};
use crate::report::fleet::text::{cells, figure_text, headers, kinds, row_labels};
use crate::report::page::html::{Page, SHADES, Section, Shaded, Table};
use crate::report::terminal::group::{self, Row};
use crate::stats::rank::median;

/// The page; `source` and `notes` as for the text.
pub fn page(fleet: &Fleet, source: &str, notes: &[String]) -> Page {
    let mut warnings = notes.to_vec();
    warnings.extend(degraded(fleet));
    Page {
        title: format!("jitterscope fleet: {} hosts", fleet.hosts.len()),
        subtitle: Some(format!("From {source} ({})", kinds(&fleet.hosts))),
        warnings,
        sections: vec![groups(fleet), drift(fleet), heat_map(fleet)],
    }
}

/// "12 of 30 hosts ran degraded: virtual-machine", one line a kind.
fn degraded(fleet: &Fleet) -> Vec<String> {
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for k in fleet.hosts.iter().flat_map(|h| &h.degraded) {
        match counts.iter_mut().find(|c| c.0 == k) {
            Some(c) => c.1 += 1,
            None => counts.push((k, 1)),
        }
    }
    (counts.iter())
        .map(|(k, n)| format!("{n} of {} hosts ran degraded: {k}", fleet.hosts.len()))
        .collect()
}

/// The groups' table (as the text's) and each outlier with all that differs.
fn groups(fleet: &Fleet) -> Section {
    let mut head = vec!["hosts".to_string()];
    if fleet.grouping.grouped() {
        head.push(group::OF_COLUMN.into());
    }
    head.extend(headers(fleet));
    let rows = group::rows_labelled(&fleet.grouping, &row_labels(fleet), &cells(fleet));
    let mut text: Vec<String> = FIGURES
        .iter()
        .map(|f| format!("{}: {}.", f.header, f.words))
        .collect();
    for (i, why) in fleet.outliers() {
        let h = &fleet.hosts[i];
        let diff = fleet.majority.differences(h).join("; ");
        text.push(format!("{} stands out ({why}): {diff}.", h.label));
    }
    Section {
        heading: "Hosts that agree, and those that stand out".into(),
        text,
        tables: vec![Table {
            caption: "Each host's figures are its worst CPU's; a group's two lines give each \
                      figure's lowest and highest over its hosts"
                .into(),
            headers: head,
            rows,
            note: None,
        }],
        ..Section::default()
    }
}

/// The drift, every entry with every host it names (the text caps both).
fn drift(fleet: &Fleet) -> Section {
    let m = &fleet.majority;
    let entries = drift::entries(&fleet.hosts, m);
    let labels: Vec<String> = fleet.hosts.iter().map(|h| h.label.clone()).collect();
    let mut text = vec![match entries.is_empty() {
        true => "No host differs from the majority in kernel, boot options, audit findings or \
                 degradations."
            .to_string(),
        false => format!(
            "Hosts whose kernel, boot options (init's after -- aside, and those that name the \
             host: root=, BOOT_IMAGE= …), audit findings or degradations differ from those of \
             the majority of the {} hosts, whatever their figures; + added, - missing.",
            m.hosts
        ),
    }];
    if m.audited < m.hosts {
        let n = m.hosts - m.audited;
        text.push(format!(
            "{n} results hold no audit: their findings are not compared."
        ));
    }
    let rows: Vec<Vec<String>> = (entries.iter())
        .map(|e| {
            let (count, which) = match e.hosts().len() {
                0 => ("no majority".to_string(), e.values(None)),
                n => (drift::hosts_word(n), e.names(&labels, None)),
            };
            vec![e.what(), count, which]
        })
        .collect();
    let tables = match rows.is_empty() {
        true => Vec::new(),
        false => vec![Table {
            caption: "Each difference the same hosts share, the largest first".into(),
            headers: vec!["what differs".into(), "hosts".into(), "which".into()],
            rows,
            note: None,
        }],
    };
    Section {
        heading: "Configuration drift".into(),
        text,
        tables,
        ..Section::default()
    }
}

/// The hosts × figure map: a row per host, the rows of one group together.
fn heat_map(fleet: &Fleet) -> Section {
    let medians: Vec<Option<f64>> = (fleet.shown.iter())
        .map(|&f| {
            let v: Vec<f64> = fleet.hosts.iter().filter_map(|h| h.figures[f]).collect();
            median(&v)
        })
        .collect();
    let mut headers = vec!["row".to_string(), "host".to_string()];
    headers.extend(fleet.shown.iter().map(|&f| FIGURES[f].header.to_string()));
    headers.push("top cause (%)".into());
    let (mut rows, mut shades) = (Vec::new(), Vec::new());
    for (n, r) in fleet.grouping.rows.iter().enumerate() {
        let label = match r {
            Row::One(_, group::Why::Few) | Row::Group(_) => format!("{}", n + 1),
            Row::One(..) => format!("{} (stands out)", n + 1),
            Row::Rest(_) => format!("{} (the rest)", n + 1),
        };
        for i in r.members() {
            let h = &fleet.hosts[i];
            let mut cells = vec![label.clone(), h.label.clone()];
            let mut shade = vec![0u8, 0];
            for (k, &f) in fleet.shown.iter().enumerate() {
                cells.push(figure_text(f, h.figures[f]));
                shade.push(shade_of(h.figures[f], medians[k], f));
            }
            cells.push(match &h.top_cause {
                Some((c, s)) => format!("{} ({s:.0})", short_cause(c)),
                None => "not traced".into(),
            });
            shade.push(0);
            rows.push(cells);
            shades.push(shade);
        }
    }
    Section {
        heading: "Hosts × figures".into(),
        matrices: vec![Shaded {
            table: Table {
                caption: "Every host, by the table's rows; a cell darker for each step of the \
                          figure's tolerance above the fleet's median"
                    .into(),
                headers,
                rows,
                note: None,
            },
            shades,
        }],
        ..Section::default()
    }
}

/// How many steps of the figure's tolerance `v` lies above the median (after raising
/// both to the figure's resolution), up to the darkest shade.
fn shade_of(v: Option<f64>, median: Option<f64>, f: usize) -> u8 {
    let (Some(v), Some(m)) = (v, median) else {
        return 0;
    };
    let key = FIGURES[f].key;
    let ratio = v.max(key.resolution) / m.max(key.resolution);
    let steps = (ratio.ln() / key.tolerance.ln()).floor();
    steps.clamp(0.0, f64::from(SHADES - 1)) as u8
}
