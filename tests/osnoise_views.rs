//! Issue 48, item 6: a result holding the osnoise engine's entries (made from a real lab
//! capture, `tests/fixtures/osnoise/`) and the TSC loop's, as `noise --engine both`
//! writes it, read back and shown by `report` (table, CSV, HTML) and `compare`, on any
//! host: the lab test (`lab_engines.rs`) runs the engine itself.

use jitterscope::report::{ProbeEntry, ResultFile};
use jitterscope::trace::tracer::osnoise::{OsnoiseConfig, OsnoiseEntry, Tally};

use crate::util::{frozen, run_ok};

const CAPTURE: &str = "tests/fixtures/osnoise/instance-trace-6.1-rt.txt";

/// CPU 1's entry from the capture.
fn entry() -> OsnoiseEntry {
    let mut t = Tally::new();
    for l in std::fs::read_to_string(CAPTURE).unwrap().lines() {
        t.line(l);
    }
    let config = OsnoiseConfig {
        period_us: 1_000_000,
        runtime_us: 1_000_000,
        threshold_us: 5,
        options: "DEFAULTS OSNOISE_WORKLOAD".into(),
    };
    t.entries(&[1], &config).remove(0)
}

/// The frozen fixture's noise entries with the capture's osnoise entry before them.
fn both(path: &std::path::Path) -> ResultFile {
    let mut r = frozen();
    r.probes.retain(|p| matches!(p, ProbeEntry::Noise(_)));
    r.probes.insert(0, ProbeEntry::Osnoise(Box::new(entry())));
    r.write_atomic(path).unwrap();
    r
}

#[test]
fn issue48_osnoise_entries_round_trip_and_show_in_every_view() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("both.json");
    let written = both(&path);
    let read = ResultFile::read(&path).unwrap();
    let e: Vec<&OsnoiseEntry> = read.entries().collect();
    let w: Vec<&OsnoiseEntry> = written.entries().collect();
    // Every integer figure exactly (a float's last digit may not survive JSON).
    let ints = |e: &OsnoiseEntry| {
        let i = &e.interference;
        (
            e.periods,
            e.runtime_ns,
            e.noise_ns,
            e.max_single_ns,
            e.max_period_noise_ns,
        ) == (
            w[0].periods,
            w[0].runtime_ns,
            w[0].noise_ns,
            w[0].max_single_ns,
            w[0].max_period_noise_ns,
        ) && *i == w[0].interference
            && e.sources == w[0].sources
            && e.noise.count == w[0].noise.count
            && e.histogram == w[0].histogram
    };
    assert!(ints(e[0]), "the entry reads back as written");
    assert_eq!(
        (e.len(), e[0].periods, e[0].interference.irq.count),
        (1, 3, 77)
    );
    let p = path.to_str().unwrap();
    let table = run_ok(&["report", p, "--wide"]);
    for want in [
        "osnoise (the kernel's tracer): period 1000000 µs, runtime 1000000 µs, threshold 5 µs",
        "max single (µs)",
        "1109701.00",
        "call_function_single:251",
        "Interruption durations",
    ] {
        assert!(table.contains(want), "report lacks '{want}':\n{table}");
    }
    let csv = run_ok(&["report", p, "--format", "csv"]);
    let row = (csv.lines())
        .find(|l| l.starts_with("osnoise,"))
        .unwrap_or_else(|| panic!("no osnoise row:\n{csv}"));
    assert!(row.contains(",cpu1,noise,1,1726,"), "{row}");
    let html = run_ok(&["report", p, "--format", "html"]);
    assert!(html.contains("osnoise") && html.contains("call_function_single:251"));
    let compare = run_ok(&["compare", p, p]);
    assert!(
        compare.contains("osnoise") && compare.contains("cpu1"),
        "{compare}"
    );
}
