//! The `syscalls` table: one row per call, in ns.

use crate::probes::syscalls::{SyscallEntry, Via};
use crate::report::ResultFile;
use crate::report::dist::{Dist, Entry};
use crate::report::table::new_table;
use crate::report::views::{EntryView, Kind, KindView};

impl EntryView for SyscallEntry {
    fn kind(&self) -> Kind {
        Kind::Syscalls
    }

    fn dists<'a>(&'a self, out: &mut Vec<Dist<'a>>) {
        let en = Entry::new(
            "syscalls",
            self.call.name().to_string(),
            self.cpu.to_string(),
        );
        out.push(en.dist("cost", &self.summary, &self.histogram));
    }
}

impl KindView for SyscallEntry {
    fn tables(r: &ResultFile) -> String {
        syscalls_table(r)
    }
}

fn ns(v: Option<u64>) -> String {
    v.map_or_else(|| "-".into(), |v| v.to_string())
}

fn via(v: Via) -> &'static str {
    match v {
        Via::Instruction => "instruction",
        Via::Library => "library",
        Via::Vdso => "vDSO",
        Via::Syscall => "syscall",
        Via::Unknown => "?",
    }
}

/// Each call's cost per call: min, median, p99 and max, with how it got there.
pub fn syscalls_table(r: &ResultFile) -> String {
    let entries: Vec<&SyscallEntry> = r.entries().collect();
    let mut t = new_table(&[
        "call",
        "via",
        "batch",
        "samples",
        "min (ns)",
        "p50 (ns)",
        "p99 (ns)",
        "max (ns)",
        "mean (ns)",
    ]);
    let style = t.style().row_separator(comfy_table::LineStyle::none());
    t.load_style(style);
    for e in &entries {
        let s = &e.summary;
        t.add_row(vec![
            e.call.to_string(),
            via(e.via).to_string(),
            e.batch.to_string(),
            e.samples.to_string(),
            ns(s.min_ns),
            ns(s.p50_ns),
            ns(s.p99_ns),
            ns(s.max_ns),
            s.mean_ns.map_or("-".into(), |m| format!("{m:.1}")),
        ]);
    }
    let mut text = format!("{t}\n");
    if entries.iter().any(|e| e.via == Via::Unknown) {
        text.push_str(
            "? vDSO or syscall is decided against invalid-syscall, which was not measured \
             (add it to --only)\n",
        );
    }
    text
}
