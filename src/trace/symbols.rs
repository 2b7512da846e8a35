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
            .filter_map(|l| {
                let mut f = l.split_whitespace();
                let addr = u64::from_str_radix(f.next()?, 16).ok()?;
                let kind = f.next()?;
                let name = f.next()?;
                (addr != 0 && matches!(kind, "t" | "T")).then(|| (addr, name.to_string()))
            })
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
}
