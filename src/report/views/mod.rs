//! The views room: one view per probe kind, read by every room above it (export, page,
//! compare) for the kind's distributions; it uses the result and terminal rooms only.
//!
//! One view per probe kind: everything the report side shows of a kind lives in its own
//! file here. Each entry type implements [`EntryView`] (its distributions, which are the
//! export rows, compare rows and plots, and its series) and [`KindView`] (its terminal
//! tables over every entry of the kind, and the figures drawn across entries).
//!
//! `ProbeEntry::view` is the one place that turns an entry into its view; [`Kind`] is
//! the one list of kinds, in the order their tables are shown. Every match over kinds is
//! exhaustive, so a new probe kind is a compile error until it has a view: its file here,
//! a variant of [`Kind`] and of `ProbeEntry`, and an arm in each of their matches.

use std::any::Any;

use crate::probes::c2c::C2cEntry;
use crate::probes::noise::NoiseEntry;
use crate::probes::pingpong::PingpongEntry;
use crate::probes::ptp::PtpEntry;
use crate::probes::queue::QueueEntry;
use crate::probes::syscalls::SyscallEntry;
use crate::probes::timer::TimerEntry;
use crate::probes::timerlat::TimerlatEntry;
use crate::probes::work::WorkEntry;
use crate::report::result::dist::{Dist, SeriesView};
use crate::report::result::figure::Figure;
use crate::report::terminal::table::{Unit, hidden_note};
use crate::report::{ProbeEntry, ResultFile};
use crate::trace::tracer::hwlat::HwlatEntry;
use crate::trace::tracer::osnoise::OsnoiseEntry;

pub mod attribution;
pub mod c2c;
pub mod c2c_locality;
pub mod hwlat;
pub mod noise;
pub mod osnoise;
pub mod pingpong;
pub mod ptp;
pub mod queue;
pub mod syscalls;
pub mod timer;
pub mod timerlat;
pub mod tune;
pub mod work;

/// The probe kinds this version knows, in the order their tables are shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Noise,
    Timer,
    Timerlat,
    Pingpong,
    C2c,
    Queue,
    Work,
    Syscalls,
    Ptp,
    Osnoise,
    Hwlat,
}

impl Kind {
    /// Every kind, in table order.
    pub const ALL: [Kind; 11] = [
        Kind::Noise,
        Kind::Osnoise,
        Kind::Timer,
        Kind::Timerlat,
        Kind::Pingpong,
        Kind::C2c,
        Kind::Queue,
        Kind::Work,
        Kind::Syscalls,
        Kind::Ptp,
        Kind::Hwlat,
    ];

    /// The kind's name, as `probe` gives it in the result file.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Noise => "noise",
            Kind::Timer => "timer",
            Kind::Timerlat => "timerlat",
            Kind::Pingpong => "pingpong",
            Kind::C2c => "c2c",
            Kind::Queue => "queue",
            Kind::Work => "work",
            Kind::Syscalls => "syscalls",
            Kind::Ptp => "ptp",
            Kind::Osnoise => "osnoise",
            Kind::Hwlat => "hwlat",
        }
    }

    /// The kind whose entries `probe` (their JSON tag) names.
    pub fn of_probe(probe: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == probe)
    }

    /// The unit of this kind's times in every table of every format (terminal,
    /// Markdown, HTML, `compare`): µs for what runs from µs to ms (noise's
    /// interruptions, timer wake-ups), ns for what starts at tens of ns (a queue's
    /// transit, pingpong, c2c, work, syscalls, ptp). The CSV exports are one table of
    /// every kind, in ns, as their headers say.
    pub fn unit(self) -> Unit {
        match self {
            Kind::Noise | Kind::Timer | Kind::Timerlat | Kind::Osnoise | Kind::Hwlat => Unit::Us,
            Kind::Pingpong | Kind::C2c | Kind::Queue | Kind::Work | Kind::Syscalls => Unit::Ns,
            Kind::Ptp => Unit::Ns,
        }
    }

    /// The terminal tables of this kind's entries in `r`; `None` when it holds none.
    pub fn tables(self, r: &ResultFile) -> Option<String> {
        match self {
            Kind::Noise => tables_of::<NoiseEntry>(r),
            Kind::Timer => tables_of::<TimerEntry>(r),
            Kind::Timerlat => tables_of::<TimerlatEntry>(r),
            Kind::Pingpong => tables_of::<PingpongEntry>(r),
            Kind::C2c => tables_of::<C2cEntry>(r),
            Kind::Queue => tables_of::<QueueEntry>(r),
            Kind::Work => tables_of::<WorkEntry>(r),
            Kind::Syscalls => tables_of::<SyscallEntry>(r),
            Kind::Ptp => tables_of::<PtpEntry>(r),
            Kind::Osnoise => tables_of::<OsnoiseEntry>(r),
            Kind::Hwlat => tables_of::<HwlatEntry>(r),
        }
    }

    /// The figures drawn across this kind's entries in `r` (see `KindView::figures`).
    pub fn figures(self, r: &ResultFile) -> Vec<Figure> {
        match self {
            Kind::Noise => figures_of::<NoiseEntry>(r),
            Kind::Timer => figures_of::<TimerEntry>(r),
            Kind::Timerlat => figures_of::<TimerlatEntry>(r),
            Kind::Pingpong => figures_of::<PingpongEntry>(r),
            Kind::C2c => figures_of::<C2cEntry>(r),
            Kind::Queue => figures_of::<QueueEntry>(r),
            Kind::Work => figures_of::<WorkEntry>(r),
            Kind::Syscalls => figures_of::<SyscallEntry>(r),
            Kind::Ptp => figures_of::<PtpEntry>(r),
            Kind::Osnoise => figures_of::<OsnoiseEntry>(r),
            Kind::Hwlat => figures_of::<HwlatEntry>(r),
        }
    }
}

/// What the report side shows of one entry.
pub trait EntryView: Any {
    fn kind(&self) -> Kind;

    /// The entry's distributions, in order: each is one row of every export, one row of a
    /// comparison, and a percentile plot and a histogram.
    fn dists<'a>(&'a self, out: &mut Vec<Dist<'a>>);

    /// The per-interval series with the largest events, for the kinds that keep one.
    fn series(&self) -> Option<SeriesView<'_>> {
        None
    }
}

/// What the report side shows of every entry of one kind together.
pub trait KindView: EntryView + Sized {
    /// The kind's terminal tables, over every entry of the kind in `r` (it holds one at
    /// least).
    fn tables(r: &ResultFile) -> String;

    /// The figures drawn across the kind's entries in `r` (c2c's heat map); none unless
    /// the kind has some. Their names are the kind's own, without a file prefix.
    fn figures(_r: &ResultFile) -> Vec<Figure> {
        Vec::new()
    }
}

impl ProbeEntry {
    /// The entry's view; `None` for an entry of a kind this version does not know.
    pub fn view(&self) -> Option<&dyn EntryView> {
        match self {
            ProbeEntry::Noise(e) => Some(e.as_ref()),
            ProbeEntry::Timer(e) => Some(e.as_ref()),
            ProbeEntry::Timerlat(e) => Some(e.as_ref()),
            ProbeEntry::Pingpong(e) => Some(e.as_ref()),
            ProbeEntry::C2c(e) => Some(e.as_ref()),
            ProbeEntry::Queue(e) => Some(e.as_ref()),
            ProbeEntry::Work(e) => Some(e.as_ref()),
            ProbeEntry::Syscalls(e) => Some(e.as_ref()),
            ProbeEntry::Ptp(e) => Some(e.as_ref()),
            ProbeEntry::Osnoise(e) => Some(e.as_ref()),
            ProbeEntry::Hwlat(e) => Some(e.as_ref()),
            ProbeEntry::Unknown => None,
        }
    }

    /// The entry as a `T`, when it is one.
    pub fn get<T: EntryView>(&self) -> Option<&T> {
        let any: &dyn Any = self.view()?;
        any.downcast_ref()
    }
}

impl ResultFile {
    /// Every entry of the kind `T`, in file order.
    pub fn entries<T: EntryView>(&self) -> impl Iterator<Item = &T> {
        self.probes.iter().filter_map(ProbeEntry::get)
    }
}

fn tables_of<T: KindView>(r: &ResultFile) -> Option<String> {
    r.entries::<T>().next().is_some().then(|| T::tables(r))
}

fn figures_of<T: KindView>(r: &ResultFile) -> Vec<Figure> {
    match r.entries::<T>().next() {
        Some(_) => T::figures(r),
        None => Vec::new(),
    }
}

/// The tables of every kind the result holds, in [`Kind::ALL`]'s order, then a note of
/// the entries of a newer kind that were skipped.
pub fn tables(r: &ResultFile) -> String {
    crate::report::terminal::table::reset_hidden();
    let mut parts: Vec<String> = Kind::ALL.iter().filter_map(|k| k.tables(r)).collect();
    let unknown = r.probes.iter().filter(|e| e.view().is_none()).count();
    if unknown > 0 {
        parts.push(format!(
            "{unknown} entries of a newer probe kind were skipped\n"
        ));
    }
    let mut out = String::new();
    for p in parts {
        out.push_str(p.trim_end());
        out.push('\n');
    }
    if let Some(note) = hidden_note() {
        out.push_str(&crate::report::terminal::table::wrap(
            &note,
            crate::report::terminal::table::Layout::current().wrap_width(),
            "",
        ));
        out.push('\n');
    }
    out
}

/// The `n` largest events (noise interruptions, timer wake-ups), largest first, with
/// when they began: what `report --top N` prints. Per probe kind, one table across its
/// CPUs, each event with its CPU; each CPU's own table on up to `group::EACH_UP_TO`
/// CPUs, or with `--per-cpu`.
pub fn largest_events(r: &ResultFile, n: usize) -> String {
    use crate::report::terminal::table::{Tab, core};
    let series: Vec<SeriesView> = r.probes.iter().filter_map(|e| e.view()?.series()).collect();
    let mut out = String::new();
    let mut kinds: Vec<&'static str> = series.iter().map(|s| s.probe).collect();
    kinds.dedup();
    for probe in kinds {
        let of: Vec<&SeriesView> = series.iter().filter(|s| s.probe == probe).collect();
        let u = Kind::of_probe(probe).map_or(Unit::Ns, Kind::unit);
        let each = crate::report::terminal::group::each_alone(of.len());
        let sets: Vec<Vec<&SeriesView>> = match each {
            true => of.iter().map(|s| vec![*s]).collect(),
            false => vec![of.clone()],
        };
        for set in sets {
            let mut events: Vec<(usize, &crate::stats::events::EventOut)> = (set.iter())
                .flat_map(|s| s.largest.iter().map(move |e| (s.cpu, e)))
                .collect();
            events.sort_by_key(|(_, e)| std::cmp::Reverse(e.duration_ns));
            let mut cols = vec![core("#")];
            if !each {
                cols.push(core("CPU"));
            }
            cols.extend([core("at (s)"), core(u.header("duration"))]);
            let mut t = Tab::new(&cols);
            for (i, (cpu, e)) in events.iter().take(n).enumerate() {
                let mut row = vec![(i + 1).to_string()];
                if !each {
                    row.push(cpu.to_string());
                }
                row.extend([
                    format!("{:.6}", e.start_ns as f64 / 1e9),
                    u.cell(Some(e.duration_ns)),
                ]);
                t.row(row);
            }
            let cpus: Vec<usize> = set.iter().map(|s| s.cpu).collect();
            let whose = match each {
                true => format!("CPU {}", cpus[0]),
                false => crate::report::terminal::group::cpus_words(&cpus),
            };
            out.push_str(&format!(
                "{probe} {whose}: the {} largest of {} kept ({})\n{t}\n",
                n.min(events.len()),
                events.len(),
                set[0].gap
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kind's name is the tag serde gives its entries, and `ALL` lists each once.
    #[test]
    fn kind_names_are_the_json_tags() {
        for (i, k) in Kind::ALL.iter().enumerate() {
            assert!(!Kind::ALL[..i].contains(k), "{k:?} listed twice");
            let json = format!(r#"{{"probe":"{}"}}"#, k.name());
            // An entry of a known kind with no fields fails to parse as that kind, not
            // as `Unknown`: the tag is recognised.
            let parsed: Result<ProbeEntry, _> = serde_json::from_str(&json);
            assert!(parsed.is_err(), "{} is a known tag", k.name());
        }
        let other: ProbeEntry = serde_json::from_str(r#"{"probe":"teleport"}"#).unwrap();
        assert!(other.view().is_none());
    }
}
