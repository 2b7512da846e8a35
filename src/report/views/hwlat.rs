//! The `hwlat` table (`noise --hwlat`): per CPU, the windows with a gap above the
//! threshold and the largest gaps, in µs.

use crate::report::ResultFile;
use crate::report::result::dist::{Dist, Entry};
use crate::report::terminal::table::{Layout, Tab, core, wide, wrap};
use crate::report::views::{EntryView, Kind, KindView};
use crate::trace::tracer::hwlat::HwlatEntry;

impl EntryView for HwlatEntry {
    fn kind(&self) -> Kind {
        Kind::Hwlat
    }

    /// One distribution: each window's largest gap.
    fn dists<'a>(&'a self, out: &mut Vec<Dist<'a>>) {
        let en = Entry::new("hwlat", format!("cpu{}", self.cpu), self.cpu.to_string());
        out.push(en.dist("gap", &self.latency, &self.histogram));
    }
}

impl KindView for HwlatEntry {
    fn tables(r: &ResultFile) -> String {
        hwlat_text(r)
    }
}

fn us(ns: u64) -> String {
    format!("{:.2}", ns as f64 / 1e3)
}

/// The settings, the table, and what it means.
pub fn hwlat_text(r: &ResultFile) -> String {
    let entries: Vec<&HwlatEntry> = r.entries().collect();
    let Some(first) = entries.first() else {
        return String::new();
    };
    let c = &first.config;
    let mut t = Tab::new(&[
        core("CPU"),
        core("windows over"),
        core("gaps"),
        core("max inner (µs)"),
        core("max outer (µs)"),
        wide("p50 (µs)"),
        core("NMIs"),
        wide("NMI time (µs)"),
    ]);
    for e in &entries {
        t.row(vec![
            e.cpu.to_string(),
            e.samples.to_string(),
            e.gaps.to_string(),
            us(e.max_inner_ns),
            us(e.max_outer_ns),
            e.latency.p50_ns.map_or_else(|| "-".into(), us),
            e.nmi_count.to_string(),
            us(e.nmi_total_ns),
        ]);
    }
    let worst = entries
        .iter()
        .map(|e| e.max_inner_ns.max(e.max_outer_ns))
        .max();
    let verdict = match worst {
        Some(w) if w > 0 => format!(
            "the machine itself stalled its CPUs for up to {} µs with interrupts off \
             (firmware SMIs, or a hypervisor taking the CPU back): no kernel or \
             application setting removes that",
            us(w)
        ),
        _ => format!(
            "no gap above {} µs: the hardware and firmware held still",
            c.threshold_us
        ),
    };
    let width = Layout::current().wrap_width();
    let settings = format!(
        "hwlat (the kernel's tracer, {}): {} µs with interrupts off in every {} µs, threshold {} µs",
        c.mode, c.width_us, c.window_us, c.threshold_us
    );
    format!(
        "{}\n{t}\n{}\n",
        wrap(&settings, width, "  "),
        wrap(&verdict, width, "  ")
    )
}
