//! The `ptp` tables: one per device, under its name, with one row per method, saying whether the method works on
//! the device and, where it does, the PHC − system offset, the window that brackets a
//! reading and what a reading costs, all in ns.

use crate::probes::ptp::{MethodResult, MethodStatus, PtpEntry, errno_name};
use crate::report::ResultFile;
use crate::report::result::dist::{Dist, Entry, serde_name};
use crate::report::terminal::table::{Col, Tab, core, wide};
use crate::report::views::{EntryView, Kind, KindView};

impl EntryView for PtpEntry {
    fn kind(&self) -> Kind {
        Kind::Ptp
    }

    /// One distribution per method: its cost (without a histogram where the method was
    /// not measured).
    fn dists<'a>(&'a self, out: &mut Vec<Dist<'a>>) {
        for m in &self.methods {
            let key = format!("{}:{}", self.device, serde_name(&m.method));
            let en = Entry::new("ptp", key, String::new());
            out.push(en.maybe("cost", &m.cost, m.cost_histogram.as_ref()));
        }
    }
}

impl KindView for PtpEntry {
    fn tables(r: &ResultFile) -> String {
        ptp_table(r)
    }
}

/// The columns, in ns (the kind's unit): the offset's spread and the p99s with `--wide`.
fn columns() -> Vec<Col> {
    let h = |w: &str| Kind::Ptp.unit().header(w);
    vec![
        core("method"),
        core("supported"),
        core("samples"),
        wide(h("offset\nmin")),
        core(h("offset\np50")),
        wide(h("offset\nmax")),
        core(h("window\np50")),
        wide(h("window\np99")),
        core(h("cost\np50")),
        wide(h("cost\np99")),
    ]
}

/// TAI − UTC since 2017: the offset of a PHC kept on TAI from CLOCK_REALTIME.
const TAI_UTC_NS: i64 = 37_000_000_000;

fn cell<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| "-".into(), |v| v.to_string())
}

/// The device as a user knows it: path, then interface and driver's clock name.
fn device_cell(e: &PtpEntry) -> String {
    let about: Vec<&str> = [e.interface.as_deref(), e.clock_name.as_deref()]
        .into_iter()
        .flatten()
        .collect();
    match about.is_empty() {
        true => e.device.clone(),
        false => format!("{} ({})", e.device, about.join(", ")),
    }
}

fn status_cell(m: &MethodResult) -> String {
    let errno = m.errno.map(errno_name);
    match (m.status, errno) {
        (MethodStatus::Ok, _) => "yes".into(),
        (MethodStatus::NotSupported, Some(e)) => format!("no ({e})"),
        (MethodStatus::NotSupported, None) => "no".into(),
        (MethodStatus::Failed, Some(e)) => format!("failed ({e})"),
        (MethodStatus::Failed, None) => "failed".into(),
        (MethodStatus::Skipped, _) => "skipped".into(),
    }
}

fn row(m: &MethodResult) -> Vec<String> {
    let o = m.offset.as_ref();
    vec![
        m.method.label().into(),
        status_cell(m),
        m.samples.to_string(),
        cell(o.map(|o| o.min_ns)),
        cell(o.map(|o| o.p50_ns)),
        cell(o.map(|o| o.max_ns)),
        cell(m.window.p50_ns),
        cell(m.window.p99_ns),
        cell(m.cost.p50_ns),
        cell(m.cost.p99_ns),
    ]
}

/// The table, and a note under it for each failure and for a PHC that keeps TAI.
pub fn ptp_table(r: &ResultFile) -> String {
    let entries: Vec<&PtpEntry> = r.entries().collect();
    let mut text = String::new();
    let mut notes = Vec::new();
    for e in &entries {
        text.push_str(&format!("{}\n", device_cell(e)));
        let mut t = Tab::new(&columns());
        for m in &e.methods {
            t.row(row(m));
            if m.status == MethodStatus::Failed {
                let after = format!("after {} samples", m.samples);
                let why = m.error.as_deref().unwrap_or("unknown error");
                notes.push(format!("{} {}: failed {after}: {why}", e.device, m.method));
            }
        }
        text.push_str(&format!("{t}\n"));
        if keeps_tai(e) {
            notes.push(format!(
                "{}: offsets near +37 s: the PHC keeps TAI (as ptp4l sets it), \
                 CLOCK_REALTIME keeps UTC",
                e.device
            ));
        }
    }
    for n in notes {
        text.push_str(&n);
        text.push('\n');
    }
    text
}

/// Whether a working method puts the PHC within half a second of TAI.
fn keeps_tai(e: &PtpEntry) -> bool {
    e.methods
        .iter()
        .filter_map(|m| m.offset.as_ref())
        .any(|o| (o.p50_ns - TAI_UTC_NS).abs() < 500_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probes::ptp::{Method, OffsetSummary};
    use crate::stats::{LatencyHistogram, Summary};

    fn method(method: Method, status: MethodStatus, errno: Option<i32>) -> MethodResult {
        let mut h = LatencyHistogram::new();
        h.record(1500);
        let ok = status == MethodStatus::Ok;
        MethodResult {
            method,
            status,
            supported: ok,
            errno,
            error: errno.map(|e| std::io::Error::from_raw_os_error(e).to_string()),
            samples: if ok { 1 } else { 0 },
            offset: ok.then_some(OffsetSummary {
                min_ns: TAI_UTC_NS - 7,
                p1_ns: TAI_UTC_NS - 7,
                p50_ns: TAI_UTC_NS - 7,
                p99_ns: TAI_UTC_NS - 7,
                max_ns: TAI_UTC_NS - 7,
                mean_ns: (TAI_UTC_NS - 7) as f64,
                spread_ns: 0,
            }),
            window: if ok { h.summary() } else { Summary::default() },
            negative_windows: 0,
            cost: if ok { h.summary() } else { Summary::default() },
            cost_histogram: None,
        }
    }

    #[test]
    fn rows_say_what_works_and_name_the_errno() {
        let entry = PtpEntry {
            device: "/dev/ptp0".into(),
            clock_index: Some(0),
            clock_name: Some("mlx5_ptp".into()),
            interface: Some("eth0".into()),
            samples_requested: 1,
            methods: vec![
                method(Method::SysOffset, MethodStatus::Ok, None),
                method(
                    Method::SysOffsetPrecise,
                    MethodStatus::NotSupported,
                    Some(libc::EOPNOTSUPP),
                ),
                method(Method::ClockGettime, MethodStatus::Failed, Some(libc::EIO)),
            ],
        };
        let rows: Vec<Vec<String>> = entry.methods.iter().map(row).collect();
        assert_eq!(rows[0][1], "yes");
        assert_eq!(rows[0][4], (TAI_UTC_NS - 7).to_string());
        assert_eq!(rows[0][8], "1500");
        assert_eq!(rows[1][1], "no (EOPNOTSUPP)");
        assert_eq!(rows[1][4], "-");
        assert_eq!(rows[2][1], "failed (EIO)");
        assert_eq!(device_cell(&entry), "/dev/ptp0 (eth0, mlx5_ptp)");
        assert!(keeps_tai(&entry));
    }
}
