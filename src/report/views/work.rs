//! The `work` table: one row per run (and per baseline run), in ns, and what became of
//! the datagrams of a `udp-send`.

use crate::probes::work::{Role, WorkEntry};
use crate::report::ResultFile;
use crate::report::result::dist::{Dist, Entry, serde_name};
use crate::report::terminal::table::{Layout, Tab, core, wide, wrap};
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

/// Each run's distribution, the baseline under its action.
pub fn work_table(r: &ResultFile) -> String {
    let entries: Vec<&WorkEntry> = r.entries().collect();
    let u = Kind::Work.unit();
    let h = |w: &str| u.header(w);
    let mut t = Tab::new(&[
        core("run"),
        core("what").text(),
        core("samples"),
        core(h("min")),
        core(h("p50")),
        wide(h("p90")),
        core(h("p99")),
        core(h("p99.9")),
        wide(h("p99.99")),
        core(h("max")),
        wide(h("mean")),
        wide(h("MAD")),
    ]);
    for e in &entries {
        let s = &e.summary;
        let what = match e.role {
            Role::Action => e.action.clone(),
            Role::Baseline => format!("baseline {}", e.action),
        };
        t.row(vec![
            e.run.to_string(),
            what,
            e.samples.to_string(),
            u.cell(s.min_ns),
            u.cell(s.p50_ns),
            u.cell(s.p90_ns),
            u.cell(s.p99_ns),
            u.cell(s.p999_ns),
            u.cell(s.p9999_ns),
            u.cell(s.max_ns),
            u.cell_f(s.mean_ns),
            u.cell(s.mad_ns),
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
        let line = format!(
            "udp-send to {}{}: {} datagrams sent (warm-up included), {} send errors{received}",
            u.dest,
            if u.loopback_sink {
                " (the tool's loopback sink)"
            } else {
                ""
            },
            u.sent,
            u.send_errors,
        );
        text.push_str(&wrap(&line, Layout::current().wrap_width(), "  "));
        text.push('\n');
    }
    text
}
