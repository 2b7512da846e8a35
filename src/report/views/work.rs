//! The `work` table: one row per run (and per baseline run), in ns, and what became of
//! the datagrams of a `udp-send`.

use crate::probes::work::{Role, WorkEntry};
use crate::report::ResultFile;
use crate::report::dist::{Dist, Entry, serde_name};
use crate::report::table::new_table;
use crate::report::views::{EntryView, Kind, KindView};

impl EntryView for WorkEntry {
    fn kind(&self) -> Kind {
        Kind::Work
    }

    fn dists<'a>(&'a self, out: &mut Vec<Dist<'a>>) {
        let key = format!("{}:{}:run{}", self.action, serde_name(&self.role), self.run);
        let en = Entry::new("work", key, self.cpu.to_string());
        out.push(en.dist("duration", &self.summary, &self.histogram));
    }
}

impl KindView for WorkEntry {
    fn tables(r: &ResultFile) -> String {
        work_table(r)
    }
}

fn ns(v: Option<u64>) -> String {
    v.map_or_else(|| "-".into(), |v| v.to_string())
}

/// Each run's distribution, the baseline under its action.
pub fn work_table(r: &ResultFile) -> String {
    let entries: Vec<&WorkEntry> = r.entries().collect();
    let mut t = new_table(&[
        "run",
        "what",
        "samples",
        "min (ns)",
        "p50 (ns)",
        "p90 (ns)",
        "p99 (ns)",
        "p99.9 (ns)",
        "p99.99 (ns)",
        "max (ns)",
        "mean (ns)",
        "MAD (ns)",
    ]);
    let style = t.style().row_separator(comfy_table::LineStyle::none());
    t.load_style(style);
    for e in &entries {
        let s = &e.summary;
        let what = match e.role {
            Role::Action => e.action.clone(),
            Role::Baseline => format!("baseline {}", e.action),
        };
        t.add_row(vec![
            e.run.to_string(),
            what,
            e.samples.to_string(),
            ns(s.min_ns),
            ns(s.p50_ns),
            ns(s.p90_ns),
            ns(s.p99_ns),
            ns(s.p999_ns),
            ns(s.p9999_ns),
            ns(s.max_ns),
            s.mean_ns.map_or("-".into(), |m| format!("{m:.1}")),
            ns(s.mad_ns),
        ]);
    }
    let mut text = format!("{t}\n");
    if let Some(u) = entries.iter().find_map(|e| e.udp.as_ref()) {
        let received = match u.received {
            Some(n) if n == u.sent => format!("; the sink received all {n}"),
            Some(n) => format!(
                "; the sink received {n}, so {} were dropped on the way",
                u.sent.saturating_sub(n)
            ),
            None => String::new(),
        };
        text.push_str(&format!(
            "udp-send to {}{}: {} datagrams sent (warm-up included), {} send errors{received}\n",
            u.dest,
            if u.loopback_sink {
                " (the tool's loopback sink)"
            } else {
                ""
            },
            u.sent,
            u.send_errors,
        ));
    }
    text
}
