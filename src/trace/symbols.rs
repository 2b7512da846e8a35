//! Kernel function addresses in trace events (work functions, hrtimer callbacks) named
//! from /proc/kallsyms, which shows real addresses to root only.

use std::collections::HashMap;

/// The sorted text symbols of the running kernel.
#[derive(Debug, Default)]
pub struct Symbols {
    sorted: Vec<(u64, String)>,
}

impl Symbols {
    /// /proc/kallsyms, or none (its addresses read 0 without root).
    pub fn load() -> Symbols {
        std::fs::read_to_string("/proc/kallsyms")
            .map(|t| Symbols::parse(&t))
            .unwrap_or_default()
    }

    /// `ffffffff81000000 T _stext` lines; data symbols and zero addresses are left out.
    pub fn parse(text: &str) -> Symbols {
        let mut sorted: Vec<(u64, String)> = text
            .lines()
            .filter_map(|l| text_symbol(l).map(|(a, n)| (a, n.to_string())))
            .collect();
        sorted.sort_unstable();
        Symbols { sorted }
    }

    /// The function that contains `addr`, or its address in hex.
    pub fn name(&self, addr: u64) -> String {
        let i = self.sorted.partition_point(|(a, _)| *a <= addr);
        match i.checked_sub(1).map(|i| &self.sorted[i]) {
            Some((a, name)) if *a == addr => name.clone(),
            Some((a, name)) if addr - a < 1 << 16 => format!("{name}+{:#x}", addr - a),
            _ => format!("{addr:#x}"),
        }
    }

    /// Names for each of these addresses.
    pub fn names(&self, addrs: impl Iterator<Item = u64>) -> HashMap<u64, String> {
        addrs.map(|a| (a, self.name(a))).collect()
    }

    /// Names for these addresses, read from /proc/kallsyms line by line: a reader that
    /// runs for hours names a new function now and then, and the whole table (about
    /// 6 MB for 120 000 symbols) is not worth holding for that.
    pub fn resolve(addrs: impl Iterator<Item = u64>) -> HashMap<u64, String> {
        match std::fs::File::open("/proc/kallsyms") {
            Ok(f) => Self::resolve_from(std::io::BufReader::new(f), addrs),
            Err(_) => Symbols::default().names(addrs),
        }
    }

    /// As `resolve`, from kallsyms text read from `text`: what `names` gives, holding
    /// only the best symbol so far for each address.
    pub fn resolve_from(
        mut text: impl std::io::BufRead,
        addrs: impl Iterator<Item = u64>,
    ) -> HashMap<u64, String> {
        let mut wanted: Vec<u64> = addrs.collect();
        wanted.sort_unstable();
        wanted.dedup();
        let last = wanted.last().copied().unwrap_or(0);
        let mut best: Vec<Option<(u64, String)>> = vec![None; wanted.len()];
        let mut line = String::new();
        while !wanted.is_empty() && matches!(text.read_line(&mut line), Ok(n) if n > 0) {
            let Some((addr, name)) = text_symbol(&line) else {
                line.clear();
                continue;
            };
            // The kernel's own symbols come first, in address order (its lookups search
            // them so), then the modules', tagged and above the kernel's text: past the
            // last address wanted, no later line names one. Most of a read's 75–110 ms
            // is the kernel writing the lines (issue 35).
            if addr > last && !line.contains('[') {
                break;
            }
            let from = wanted.partition_point(|&w| w < addr);
            for (w, b) in wanted[from..].iter().zip(&mut best[from..]) {
                if w - addr >= 1 << 16 {
                    break;
                }
                // Of names at one address, the last in `parse`'s sorted table wins.
                let better = match b {
                    None => true,
                    Some((a, n)) => addr > *a || (addr == *a && name > n.as_str()),
                };
                if better {
                    *b = Some((addr, name.to_string()));
                }
            }
            line.clear();
        }
        let sorted = best.into_iter().flatten().collect();
        let found = Symbols { sorted };
        wanted.into_iter().map(|a| (a, found.name(a))).collect()
    }
}

/// Names the kernel functions of `events` (work, hrtimer callbacks, cross-CPU calls) not
/// in `symbols` yet, reading kallsyms (line by line) only when one is new: a handful of
/// times a run, the kernel's set being fixed.
pub fn name_functions<'e>(
    symbols: &mut HashMap<u64, String>,
    events: impl IntoIterator<Item = &'e super::event::Event>,
) {
    name_functions_with(symbols, events, |new| Symbols::resolve(new.into_iter()));
}

/// As `name_functions`, of function addresses rather than the events that carry them
/// (a follower's `new_functions`, found as it read).
pub fn name_addresses(symbols: &mut HashMap<u64, String>, addrs: Vec<u64>) {
    name_new(symbols, addrs, |new| Symbols::resolve(new.into_iter()));
}

/// As `name_functions`, with the names of new addresses from `resolve` (a table held
/// whole, for `watch` and `monitor`).
pub fn name_functions_with<'e>(
    symbols: &mut HashMap<u64, String>,
    events: impl IntoIterator<Item = &'e super::event::Event>,
    resolve: impl FnOnce(std::collections::HashSet<u64>) -> HashMap<u64, String>,
) {
    let addrs = events.into_iter().filter_map(|e| e.kind.function());
    name_new(symbols, addrs, resolve);
}

/// Names those of `addrs` not in `symbols` yet, by `resolve`, called only if one is new.
fn name_new(
    symbols: &mut HashMap<u64, String>,
    addrs: impl IntoIterator<Item = u64>,
    resolve: impl FnOnce(std::collections::HashSet<u64>) -> HashMap<u64, String>,
) {
    let new: std::collections::HashSet<u64> = (addrs.into_iter())
        .filter(|f| !symbols.contains_key(f))
        .collect();
    if !new.is_empty() {
        symbols.extend(resolve(new));
    }
}

/// A text symbol's address and name from a kallsyms line.
fn text_symbol(line: &str) -> Option<(u64, &str)> {
    let mut f = line.split_whitespace();
    let addr = u64::from_str_radix(f.next()?, 16).ok()?;
    let kind = f.next()?;
    let name = f.next()?;
    (addr != 0 && matches!(kind, "t" | "T")).then_some((addr, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_name_their_functions() {
        let s = Symbols::parse(
            "ffffffff81000100 T vmstat_update\nffffffff81000000 t tick_nohz_handler\n\
             0000000000000000 T hidden\nffffffff81000200 D some_data\n",
        );
        assert_eq!(s.name(0xffffffff81000100), "vmstat_update");
        assert_eq!(s.name(0xffffffff81000010), "tick_nohz_handler+0x10");
        assert_eq!(s.name(0x10), "0x10");
    }

    /// Reading line by line names each address as the whole table does.
    #[test]
    fn resolving_line_by_line_names_as_the_table_does() {
        let text = "ffffffff81000100 T vmstat_update\nffffffff81000000 t tick_nohz_handler\n\
                    ffffffff81000100 t alias_later\nffffffff81000200 D some_data\n\
                    0000000000000000 T hidden\nffffffffc0001000 t mod_fn\t[kvm]\n";
        let addrs = [
            0xffffffff81000100,
            0xffffffff81000010,
            0xffffffff81000180,
            0xffffffffc0001004,
            0xffffffffd0000000,
            0x10,
        ];
        let table = Symbols::parse(text).names(addrs.into_iter());
        let streamed = Symbols::resolve_from(text.as_bytes(), addrs.into_iter());
        assert_eq!(streamed, table);
        assert_eq!(streamed[&0xffffffffc0001004], "mod_fn+0x4");
    }

    /// Issue 35: reading stops at the kernel's first symbol past the last address
    /// wanted (the kernel's come in address order); a module's address reads on into
    /// the modules, which come after the kernel's and are tagged.
    #[test]
    fn resolving_reads_no_further_than_the_last_address_wanted() {
        // A line out of order after the stop shows where reading stopped: a real table
        // has none.
        let text = "ffffffff81000000 t tick_nohz_handler\nffffffff81000200 T vmstat_update\n\
                    ffffffff81000100 t out_of_order\nffffffffc0001000 t mod_fn\t[kvm]\n";
        let low = 0xffffffff81000150;
        let names = Symbols::resolve_from(text.as_bytes(), [low].into_iter());
        assert_eq!(names[&low], "tick_nohz_handler+0x150");
        let module = 0xffffffffc0001004;
        let names = Symbols::resolve_from(text.as_bytes(), [low, module].into_iter());
        assert_eq!(names[&module], "mod_fn+0x4");
        assert_eq!(names[&low], "out_of_order+0x50", "read to the end");
    }

    /// Issue 30: the streaming lanes name every function an event carries, the
    /// cross-CPU call that lifts a CFS quota from another CPU (`__cfsb_csd_unthrottle`)
    /// with the work and hrtimer functions: unnamed, the quota window it ends is not
    /// told from time-sharing.
    #[test]
    fn issue30_the_lanes_name_a_cross_cpu_unthrottle_call() {
        use crate::trace::event::{Event, Kind};
        let text = "ffffffff81000100 t __cfsb_csd_unthrottle\n\
                    ffffffff81000200 T sched_cfs_period_timer\n\
                    ffffffff81000300 T vmstat_update\n";
        let events = [
            Event {
                ts: 1,
                kind: Kind::CsdEntry {
                    function: 0xffffffff81000100,
                },
            },
            Event {
                ts: 2,
                kind: Kind::HrtimerEntry {
                    function: 0xffffffff81000200,
                },
            },
            Event {
                ts: 3,
                kind: Kind::WorkStart {
                    function: 0xffffffff81000300,
                },
            },
        ];
        let mut known = HashMap::new();
        name_functions_with(&mut known, &events, |new| {
            Symbols::resolve_from(text.as_bytes(), new.into_iter())
        });
        assert_eq!(known[&0xffffffff81000100], "__cfsb_csd_unthrottle");
        assert_eq!(known[&0xffffffff81000200], "sched_cfs_period_timer");
        assert_eq!(known[&0xffffffff81000300], "vmstat_update");
    }
}
