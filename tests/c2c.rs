//! Issue 4: `jitterscope c2c`, run as the real binary: a full matrix with plausible
//! values in both modes, a result file that reads back, preheat that really spins, a
//! Ctrl-C that saves what was measured, and one-line refusals of bad input.
//!
//! The topology side (grouping order and locality on a fake 2-socket SMT machine) is
//! tested beside the code, in `report::c2c_table`, since it needs no real CPUs.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use jitterscope::engine::cpu::{CpuList, CpuUniverse};
use jitterscope::engine::topology::Topology;
use jitterscope::probes::c2c::{C2cEntry, Mode};
use jitterscope::report::{ProbeEntry, ResultFile};
use jitterscope::stats::LatencyHistogram;
use rustix::process::{Pid, Signal, kill_process};

use crate::util::{bin, jitterscope, measuring, skip, stderr_lines};

/// The CPUs to measure: every usable one on a small machine (the default selection, so
/// no `-a`), else the first three (a matrix of every CPU would take too long).
fn selection(test: &str) -> Option<(CpuList, Vec<String>)> {
    let usable = CpuUniverse::detect().ok()?.usable();
    match usable.len() {
        0 | 1 => {
            skip(test, "needs 2 usable CPUs");
            None
        }
        2..=4 => Some((usable, vec![])),
        _ => {
            let three = CpuList::from_cpus(usable.cpus()[..3].to_vec());
            let flag = vec!["-a".to_string(), three.to_string()];
            Some((three, flag))
        }
    }
}

fn c2c_entries(r: &ResultFile) -> Vec<&C2cEntry> {
    (r.probes.iter())
        .map(|p| match p {
            ProbeEntry::C2c(e) => &**e,
            other => panic!("a c2c run holds c2c entries only, got {other:?}"),
        })
        .collect()
}

/// Every unordered pair of `cpus` has exactly one complete, plausible entry.
fn check_full_matrix(r: &ResultFile, cpus: &CpuList, mode: Mode, samples: u64) {
    let entries = c2c_entries(r);
    let c = cpus.cpus();
    let n = c.len();
    assert_eq!(entries.len(), n * (n - 1) / 2, "one entry per pair");
    let topo = Topology::detect(cpus);
    for (i, &a) in c.iter().enumerate() {
        for &b in &c[i + 1..] {
            let e = (entries.iter())
                .find(|e| (e.cpu_a, e.cpu_b) == (a, b))
                .unwrap_or_else(|| panic!("pair {a}-{b} missing"));
            assert_eq!(e.config.mode, mode);
            assert_eq!(e.samples, samples, "pair {a}-{b} completed every sample");
            assert_eq!(e.summary.count, samples);
            let (min, med) = (e.min_ns.unwrap(), e.median_ns.unwrap());
            assert!(min > 0.0, "pair {a}-{b}: min {min} ns");
            assert!(min <= med, "pair {a}-{b}: min {min} above median {med}");
            assert!(
                med < 100_000.0,
                "pair {a}-{b}: median {med} ns is not plausible"
            );
            // The stored histogram is HdrHistogram V2 and holds every sample.
            let h = LatencyHistogram::decode_base64(&e.histogram.data).unwrap();
            assert_eq!(h.len(), samples);
            // The places and locality are this machine's.
            assert_eq!(e.locality, topo.locality(a, b));
            assert_eq!(&e.place_a, topo.place(a).unwrap());
            assert_eq!(&e.place_b, topo.place(b).unwrap());
        }
    }
    assert!(!r.run.interrupted);
    assert_eq!(&r.run.cpus.measured, cpus);
}

#[test]
fn c2c_gives_a_full_matrix_and_a_result_file_that_reads_back() {
    let test = "c2c_gives_a_full_matrix_and_a_result_file_that_reads_back";
    let Some((cpus, flag)) = selection(test) else {
        return;
    };
    let _m = measuring();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c2c.json");
    let mut args = vec![
        "c2c",
        "--samples",
        "50",
        "-r",
        "50",
        "--preheat",
        "10ms",
        "-o",
    ];
    args.push(path.to_str().unwrap());
    args.extend(flag.iter().map(String::as_str));
    let out = jitterscope(&args);
    assert_eq!(out.status.code(), Some(0), "{:?}", stderr_lines(&out));
    let r = ResultFile::read(&path).expect("the saved result parses");
    check_full_matrix(&r, &cpus, Mode::Load, 50);

    // The table shows both matrices, every CPU as a column, and the topology.
    let text = String::from_utf8_lossy(&out.stdout);
    for heading in [
        "Median one-way latency (ns)",
        "Minimum one-way latency (ns)",
        "Topology",
    ] {
        assert!(text.contains(heading), "missing {heading:?} in\n{text}");
    }
    let header_row = text
        .lines()
        .find(|l| l.trim_start().starts_with("CPU") && !l.contains("package"))
        .unwrap();
    let columns: Vec<&str> = header_row.split_whitespace().skip(1).collect();
    let want: Vec<String> = cpus.cpus().iter().map(|c| c.to_string()).collect();
    assert_eq!(columns, want, "matrix columns");
}

#[test]
fn cas_mode_with_json_and_grouping_also_gives_a_full_matrix() {
    let test = "cas_mode_with_json_and_grouping_also_gives_a_full_matrix";
    let Some((cpus, flag)) = selection(test) else {
        return;
    };
    let _m = measuring();
    let mut args = vec![
        "c2c",
        "--cas",
        "--group",
        "--json",
        "--samples",
        "40",
        "-r",
        "30",
    ];
    args.extend(flag.iter().map(String::as_str));
    let out = jitterscope(&args);
    assert_eq!(out.status.code(), Some(0), "{:?}", stderr_lines(&out));
    let r = ResultFile::parse(&String::from_utf8_lossy(&out.stdout)).expect("stdout is JSON");
    check_full_matrix(&r, &cpus, Mode::Cas, 40);
    for e in c2c_entries(&r) {
        assert_eq!(e.config.round_trips, 30);
        assert_eq!(e.config.preheat_ns, 50_000_000, "the default preheat");
    }
}

/// Preheat is real spinning: a single pair with a 300 ms preheat takes at least that long
/// (the pair itself takes a few ms); `--preheat 0` is recorded as none.
#[test]
fn preheat_spins_before_the_pair_is_measured() {
    let test = "preheat_spins_before_the_pair_is_measured";
    let Some((cpus, _)) = selection(test) else {
        return;
    };
    let _m = measuring();
    let pair = CpuList::from_cpus(cpus.cpus()[..2].to_vec()).to_string();
    let run = |preheat: &str| {
        let args = [
            "c2c",
            "-a",
            &pair,
            "-n",
            "20",
            "-r",
            "20",
            "--preheat",
            preheat,
        ];
        let out = jitterscope(&[&args[..], &["--json"]].concat());
        assert_eq!(out.status.code(), Some(0), "{:?}", stderr_lines(&out));
        ResultFile::parse(&String::from_utf8_lossy(&out.stdout)).unwrap()
    };
    let hot = run("300ms");
    assert!(
        hot.run.actual_duration_ns >= 300_000_000,
        "a 300 ms preheat took {} ns",
        hot.run.actual_duration_ns
    );
    assert_eq!(c2c_entries(&hot)[0].config.preheat_ns, 300_000_000);
    // Timing the run without preheat would only test how busy the machine is; what
    // matters is that 0 is taken as none.
    let cold = run("0");
    assert_eq!(c2c_entries(&cold)[0].config.preheat_ns, 0);
}

/// Ctrl-C mid-pair: exit 130, the table printed, and the pair measured so far saved with
/// fewer samples than asked and `interrupted: true`.
#[test]
fn sigint_saves_the_pairs_measured_so_far() {
    let test = "sigint_saves_the_pairs_measured_so_far";
    let Some((cpus, _)) = selection(test) else {
        return;
    };
    let _m = measuring();
    let pair = CpuList::from_cpus(cpus.cpus()[..2].to_vec()).to_string();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c2c.json");
    // 10^8 round trips: tens of seconds, far longer than the test waits.
    let child = Command::new(bin())
        .args(["c2c", "-a", &pair, "--samples", "1000000", "--preheat", "0"])
        .arg("-o")
        .arg(&path)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1000));
    let sent = Instant::now();
    kill_process(Pid::from_child(&child), Signal::INT).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        sent.elapsed() < Duration::from_secs(3),
        "took {:?} to stop",
        sent.elapsed()
    );
    assert_eq!(out.status.code(), Some(130), "{:?}", stderr_lines(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("(interrupted)"), "{text}");
    assert!(text.contains("Median one-way latency (ns)"), "{text}");
    let r = ResultFile::read(&path).unwrap();
    assert!(r.run.interrupted);
    let entries = c2c_entries(&r);
    assert_eq!(entries.len(), 1, "the pair that was running is saved");
    let e = entries[0];
    assert!(
        e.samples > 0 && e.samples < 1_000_000,
        "{} samples in about a second",
        e.samples
    );
    assert_eq!(e.summary.count, e.samples);
    assert!(e.median_ns.unwrap() < 100_000.0);
}

/// Each refusal: exit 2, nothing on stdout, one line on stderr naming the problem.
#[test]
fn bad_input_is_refused_in_one_line() {
    // Short runs of the binary, but not beside a measuring test.
    let _m = measuring();
    let Some(first) = CpuUniverse::detect().unwrap().usable().first() else {
        return;
    };
    let one = first.to_string();
    let out_of_range = format!("{first},99999");
    let cases: [(&[&str], &str); 5] = [
        (&["c2c", "-a", &one], "at least 2 CPUs"),
        (&["c2c", "-a", &out_of_range], "99999"),
        (&["c2c", "--samples", "0"], "--samples"),
        (&["c2c", "-r", "0"], "--round-trips"),
        (&["c2c", "-D", "1s"], "does not apply to c2c"),
    ];
    for (args, mention) in cases {
        let out = jitterscope(args);
        let lines = stderr_lines(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {lines:?}");
        assert!(out.stdout.is_empty(), "{args:?} printed to stdout");
        assert_eq!(lines.len(), 1, "{args:?}: {lines:?}");
        assert!(lines[0].starts_with("jitterscope: "), "{lines:?}");
        assert!(
            lines[0].contains(mention),
            "{args:?}: {lines:?} lacks {mention:?}"
        );
    }
}
