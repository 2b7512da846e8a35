//! Issue 48, item 6 and done-when 4, in the lab (`tests/lab.rs`): the kernel's osnoise
//! and hwlat tracers as `noise`'s engine and check, on Debian's PREEMPT_RT kernel with
//! CPU 1 isolated, beside `rtla osnoise top` on the same guest. One boot: `noise
//! --engine osnoise`, `--engine both`, `--hwlat`, rtla, the views of the files, and the
//! tracer left as found after a run, a SIGINT mid-run, and a SIGKILL followed by the next
//! run or by `tune --restore`. TCG's timing means nothing: the figures are judged for
//! their presence, CPUs and order of magnitude only.

use std::sync::Arc;

use jitterscope::probes::noise::NoiseEntry;
use jitterscope::trace::tracer::hwlat::HwlatEntry;
use jitterscope::trace::tracer::osnoise::OsnoiseEntry;

use crate::lab::{self, Boot, Guest};

/// A run stopped by `signal` half a second after its instance appeared (a debug build
/// under TCG takes seconds to get there), the state read just before.
fn signalled(signal: &str, file: &str) -> String {
    format!(
        "jitterscope noise --engine osnoise -a 1 -D 6s -T 5us -o {file} & P=$!\n\
         n=0; until ls /sys/kernel/tracing/instances | grep -q jitterscope || [ $n -gt 300 ]; \
         do usleep 100000; n=$((n+1)); done; usleep 500000\n\
         echo '--- during'; state; kill -{signal} $P; wait $P; echo \"rc $?\"\n\
         echo '--- after'; state"
    )
}

fn guest(test: &str) -> Option<Arc<Guest>> {
    lab::guest(test, "rt-engines", || Boot {
        kernel: "rt",
        cpus: 2,
        cmdline: "isolcpus=1 nohz_full=1 rcu_nocbs=1".into(),
        flags: &["--rtla"],
        script: [
            lab::TRACER_STATE.to_string(),
            lab::part("before", "state"),
            lab::part(
                "osnoise",
                "jitterscope noise --engine osnoise -a 1 -D 3s -T 5us -o os.json \
                 --html os.html",
            ),
            lab::part("after-osnoise", "state"),
            lab::part(
                "both",
                "jitterscope noise --engine both -a 1 -D 4s -T 5us -o both.json",
            ),
            lab::part("hwlat", "jitterscope noise --hwlat -a 1 -D 2s -o hw.json"),
            lab::part("after-hwlat", "state"),
            lab::part("rtla", "rtla osnoise top -c 1 -d 3s -T 5 -q"),
            lab::part("after-rtla", "state"),
            lab::part("report", "jitterscope report os.json both.json hw.json"),
            lab::part("compare", "jitterscope compare os.json both.json"),
            lab::part(
                "exports",
                "jitterscope report both.json --format csv -o both.csv && \
                 jitterscope report both.json --format html -o both.html && \
                 jitterscope report hw.json --format csv",
            ),
            lab::part("sigint", &signalled("INT", "int.json")),
            lab::part("sigkill", &signalled("KILL", "killed.json")),
            lab::part(
                "next-run",
                "jitterscope noise --engine osnoise -a 1 -D 1s -T 5us -o next.json; state",
            ),
            lab::part("sigkill-again", &signalled("KILL", "killed2.json")),
            lab::part("restore", "jitterscope tune --restore; state"),
        ]
        .concat(),
    })
}

/// rtla osnoise top's row of a CPU: Period, Runtime, Noise, % CPU Aval, Max Noise, Max
/// Single, HW, NMI, IRQ, Softirq, Thread.
fn rtla_row(text: &str, cpu: usize) -> Vec<f64> {
    let row = (text.lines())
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.len() == 12 && f[0] == cpu.to_string() && f[1].starts_with('#'))
        .unwrap_or_else(|| panic!("no row of CPU {cpu} in rtla's output:\n{text}"));
    let mut v = vec![row[1].trim_start_matches('#').parse().unwrap()];
    v.extend(row[2..].iter().map(|x| x.parse::<f64>().unwrap()));
    v
}

/// Two counts of the same order: within ten times each other, or both under ten.
fn same_order(ours: u64, rtla: f64) -> bool {
    let (a, b) = (ours as f64, rtla);
    (a < 10.0 && b < 10.0) || (a <= b * 10.0 && b <= a * 10.0)
}

fn osnoise_cpu1(g: &Guest, file: &str) -> OsnoiseEntry {
    let r = g.result(file);
    assert_eq!(
        r.run.cpus.measured.to_string(),
        "1",
        "{file}: the CPUs measured"
    );
    let all: Vec<&OsnoiseEntry> = r.entries().collect();
    assert_eq!(all.len(), 1, "{file}: one osnoise entry, CPU 1's");
    assert_eq!(all[0].cpu, 1);
    all[0].clone()
}

/// Done-when 4: the osnoise engine measures CPU 1 and holds a counterpart of every
/// figure rtla shows, the counts of the same order as rtla's on the same guest.
#[test]
fn issue48_the_osnoise_engine_matches_rtla_on_the_same_cpus() {
    const TEST: &str = "issue48_the_osnoise_engine_matches_rtla_on_the_same_cpus";
    let Some(g) = guest(TEST) else { return };
    let out = g.part_exit("osnoise", 0);
    assert!(
        out.contains("noise: CPUs 1 (isolcpus, nohz_full) for ")
            && out.contains("engine osnoise (the kernel's tracer"),
        "the header says what ran:\n{out}"
    );
    assert!(!out.contains("could not run"), "{out}");
    let e = osnoise_cpu1(&g, "os.json");
    assert!(e.periods >= 2, "3 s of 1 s periods: {} periods", e.periods);
    assert_eq!(e.config.threshold_us, 5);
    assert!(e.runtime_ns > 0 && e.noise_ns > 0, "{e:?}");
    assert!(e.available_pct > 0.0 && e.available_pct < 100.0);
    assert!(e.max_single_ns > 0 && e.max_single_ns <= e.max_period_noise_ns);
    assert!(e.noise.count > 0, "noise samples from sample_threshold");
    let rtla = g.part_exit("rtla", 0);
    let row = rtla_row(&rtla, 1);
    assert!(row[0] >= 2.0, "rtla ran 2 periods or more: {row:?}");
    let i = &e.interference;
    // rtla's columns, each with its counterpart in the result.
    let ours = [
        ("runtime", e.runtime_ns / 1000, row[1]),
        ("noise", e.noise_ns / 1000, row[2]),
        ("max noise", e.max_period_noise_ns / 1000, row[4]),
        ("max single", e.max_single_ns / 1000, row[5]),
        ("HW", i.hw.count, row[6]),
        ("NMI", i.nmi.count, row[7]),
        ("IRQ", i.irq.count, row[8]),
        ("softirq", i.softirq.count, row[9]),
        ("thread", i.thread.count, row[10]),
    ];
    for (what, a, b) in ours {
        assert!(same_order(a, b), "{what}: ours {a}, rtla's {b}\n{rtla}");
    }
    assert!(
        (0.0..=100.0).contains(&row[3]),
        "rtla's % CPU available: {row:?}"
    );
    let page = g.text("os.html");
    assert!(page.contains("osnoise"), "the page shows the engine");
}

/// `both`: osnoise then the TSC loop on the same CPU, each half the duration, side by
/// side in one file and its views.
#[test]
fn issue48_both_engines_run_side_by_side() {
    const TEST: &str = "issue48_both_engines_run_side_by_side";
    let Some(g) = guest(TEST) else { return };
    let out = g.part_exit("both", 0);
    assert!(
        out.contains("engines: osnoise for ") && out.contains(", then the TSC loop for "),
        "{out}"
    );
    let e = osnoise_cpu1(&g, "both.json");
    assert!(e.periods >= 1, "2 s of 1 s periods: {}", e.periods);
    let r = g.result("both.json");
    let tsc: Vec<&NoiseEntry> = r.entries().collect();
    assert_eq!(tsc.iter().map(|e| e.cpu).collect::<Vec<_>>(), vec![1]);
    // Half of 4 s each, give or take the start: never the whole duration.
    assert!(
        (1_500_000_000..3_000_000_000).contains(&tsc[0].runtime_ns),
        "the loop's half: {} ns",
        tsc[0].runtime_ns
    );
    let report = g.part_exit("report", 0);
    for want in [
        "osnoise (the kernel's tracer)",
        "hwlat (the kernel's tracer",
        "max single (µs)",
    ] {
        assert!(report.contains(want), "report lacks '{want}':\n{report}");
    }
    let compare = g.part_exit("compare", 0);
    assert!(
        compare.contains("osnoise") && compare.contains("noise"),
        "{compare}"
    );
    let exports = g.part_exit("exports", 0);
    let csv = g.text("both.csv");
    assert!(
        csv.lines().any(|l| l.starts_with("osnoise,"))
            && csv.lines().any(|l| l.starts_with("noise,")),
        "{csv}"
    );
    assert!(
        exports.lines().any(|l| l.starts_with("hwlat,")),
        "{exports}"
    );
    let page = g.text("both.html");
    assert!(page.contains("osnoise") && page.contains("noise"));
}

/// hwlat as a check alone: its entry of CPU 1, its figures in µs, said as the machine's.
#[test]
fn issue48_hwlat_checks_the_machine_alone() {
    const TEST: &str = "issue48_hwlat_checks_the_machine_alone";
    let Some(g) = guest(TEST) else { return };
    let out = g.part_exit("hwlat", 0);
    assert!(
        out.contains("noise --hwlat: CPUs 1 (isolcpus, nohz_full) for ")
            && out.contains("max inner (µs)"),
        "{out}"
    );
    let r = g.result("hw.json");
    let e: Vec<&HwlatEntry> = r.entries().collect();
    assert_eq!(e.iter().map(|e| e.cpu).collect::<Vec<_>>(), vec![1]);
    assert_eq!(
        r.entries::<NoiseEntry>().count(),
        0,
        "nothing measured beside it"
    );
    // Under TCG the emulator takes the vCPU away: the check sees it.
    assert!(e[0].samples > 0 && e[0].max_inner_ns.max(e[0].max_outer_ns) > 0);
}

/// The tracer left as found: after each run, after a SIGINT mid-run, and after a SIGKILL
/// by the next run and by `tune --restore`. rtla's own run is the reference for "found".
#[test]
fn issue48_the_tracers_are_left_as_found_after_any_ending() {
    const TEST: &str = "issue48_the_tracers_are_left_as_found_after_any_ending";
    let Some(g) = guest(TEST) else { return };
    let before = lab::tracer_state(&g.part_exit("before", 0));
    assert!(
        before.iter().any(|l| l == "current_tracer=nop"),
        "{before:?}"
    );
    for part in ["after-osnoise", "after-hwlat", "next-run", "restore"] {
        let (text, _) = g.part(part);
        assert_eq!(lab::tracer_state(&text), before, "{part}:\n{text}");
    }
    let int = g.part_exit("sigint", 0);
    let (during, after) = int.split_once("--- after").expect("both states");
    assert!(
        during.contains("instances=jitterscope-"),
        "mid-run: {during}"
    );
    assert!(during.contains("osnoise/cpus=1"), "mid-run: {during}");
    assert!(int.contains("rc 130"), "SIGINT ends as interrupted: {int}");
    assert_eq!(lab::tracer_state(after), before, "after SIGINT:\n{int}");
    let r = g.result("int.json");
    assert!(r.run.interrupted);
    // A SIGKILL leaves the instance and the journal; the next run, or tune --restore,
    // puts everything back.
    for part in ["sigkill", "sigkill-again"] {
        let kill = g.part_exit(part, 0);
        let (_, after) = kill.split_once("--- after").expect("both states");
        assert!(
            after.contains("journal=tune.journal") && after.contains("instances=jitterscope-"),
            "{part}: what a SIGKILL leaves:\n{kill}"
        );
    }
    let next = g.part_exit("next-run", 0);
    assert!(
        next.contains("reverted what a killed tracer run left"),
        "{next}"
    );
    let restore = g.part_exit("restore", 0);
    assert!(
        restore.contains("restored /sys/kernel/tracing/osnoise/cpus = 0-1"),
        "{restore}"
    );
}
