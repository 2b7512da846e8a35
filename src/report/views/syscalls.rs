//! The `syscalls` table: one row per call, in ns.

use crate::probes::syscalls::{SyscallEntry, Via};
use crate::report::ResultFile;
use crate::report::result::dist::{Dist, Entry};
use crate::report::terminal::table::{Tab, core, wide};
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
    let u = Kind::Syscalls.unit();
    let h = |w: &str| u.header(w);
    let mut t = Tab::new(&[
        core("call"),
        core("via"),
        wide("batch"),
        core("samples"),
        core(h("min")),
        core(h("p50")),
        core(h("p99")),
        core(h("max")),
        core(h("mean")),
    ]);
    for e in &entries {
        let s = &e.summary;
        t.row(vec![
            e.call.to_string(),
            via(e.via).to_string(),
            e.batch.to_string(),
            e.samples.to_string(),
            u.cell(s.min_ns),
            u.cell(s.p50_ns),
            u.cell(s.p99_ns),
            u.cell(s.max_ns),
            u.cell_f(s.mean_ns),
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
