use super::*;

/// A 6.1 PREEMPT_RT guest's osnoise instance, 3 s on CPU 1 (the lab, TCG): 3 periods'
/// summaries, events enabled a little after the tracer started.
const INSTANCE: &str = include_str!("../../../../tests/fixtures/osnoise/instance-trace-6.1-rt.txt");
/// Its `trace_pipe`, task names unknown to the trace (`<...>`), flags `d..h1..`.
const PIPE: &str = include_str!("../../../../tests/fixtures/osnoise/trace-pipe-6.1-rt.txt");

fn config() -> OsnoiseConfig {
    OsnoiseConfig {
        period_us: 1_000_000,
        runtime_us: 1_000_000,
        threshold_us: 5,
        options: "DEFAULTS".into(),
    }
}

#[test]
fn summary_lines_parse_with_the_kernels_units() {
    let l = "       osnoise/1-145     [001] .......     7.068435: 1000000     488452  51.15480   \
             16123    462      0     76      0      1";
    let Some(Line::Summary { cpu, s }) = parse_line(l) else {
        panic!("not a summary")
    };
    assert_eq!(cpu, 1);
    assert_eq!(
        (s.runtime_us, s.noise_us, s.max_single_us),
        (1_000_000, 488_452, 16_123)
    );
    assert!((s.available_pct - 51.1548).abs() < 1e-9);
    assert_eq!(s.counts, [462, 0, 76, 0, 1]);
}

#[test]
fn each_event_parses_with_its_source() {
    let ev = |l: &str| match parse_line(l) {
        Some(Line::Event { e, .. }) => e,
        other => panic!("{l}: {other:?}"),
    };
    let irq = ev(
        "           <...>-162     [001] d..h1..    10.696913: irq_noise: \
                  call_function_single:251 start 10.696882432 duration 6309 ns",
    );
    assert_eq!(
        (irq.event.as_str(), irq.name.as_str(), irq.duration_ns),
        ("irq_noise", "call_function_single:251", 6309)
    );
    let s = ev(
        "osnoise/1-145 [001] ....... 6.432421: sample_threshold: start 6.427988954 \
                duration 4059952 ns interference 1",
    );
    assert_eq!(
        (s.name.as_str(), s.duration_ns, s.interference),
        ("", 4_059_952, Some(1))
    );
    let sirq =
        ev("osnoise/1-145 [001] ..s.... 6.5: softirq_noise:    TIMER:1 start 6.4 duration 2251 ns");
    assert_eq!(sirq.name, "TIMER:1");
    let th = ev(
        "osnoise/1-145 [001] d...... 6.5: thread_noise: kworker/1:1:95 start 6.4 duration 900 ns",
    );
    assert_eq!((th.name.as_str(), th.duration_ns), ("kworker/1:1:95", 900));
    let nmi = ev("osnoise/1-145 [001] d.Z.... 6.5: nmi_noise: start 6.4 duration 700 ns");
    assert_eq!((nmi.name.as_str(), nmi.duration_ns), ("", 700));
    for header in [
        "# tracer: osnoise",
        "#           TASK-PID      CPU# |||||||   TIMESTAMP",
        "",
    ] {
        assert_eq!(parse_line(header), None);
    }
}

/// The figures against the same file counted by hand (awk): the summaries' sums, and
/// the events up to the last summary.
#[test]
fn a_real_capture_tallies_as_counted_by_hand() {
    let mut t = Tally::new();
    for l in INSTANCE.lines() {
        t.line(l);
    }
    let e = &t.entries(&[1], &config())[0];
    assert_eq!(e.periods, 3);
    assert_eq!(e.runtime_ns, 3_000_000_000);
    assert_eq!(e.noise_ns, (488_452 + 359_113 + 262_136) * 1000);
    assert_eq!(e.max_period_noise_ns, 488_452_000);
    assert_eq!(e.max_single_ns, 20_107_000);
    assert!((e.available_pct - (100.0 - 1_109_701.0 * 100.0 / 3e6)).abs() < 1e-9);
    let i = &e.interference;
    assert_eq!(
        (
            i.hw.count,
            i.nmi.count,
            i.irq.count,
            i.softirq.count,
            i.thread.count
        ),
        (1848, 0, 77, 0, 1)
    );
    // sample_threshold lines up to the last summary: 1726, 1692 without interference.
    assert_eq!(e.noise.count, 1726);
    assert_eq!((i.hw.events, i.hw.total_ns), (1692, 754_936_914));
    assert_eq!(
        e.noise.max_ns.map(|m| m / 100_000),
        Some(20_107_317 / 100_000)
    );
    assert_eq!((i.irq.events, i.irq.total_ns), (16, 72_996));
    // Periods 2 and 3 had their events from the start: a noise sample for each HW count.
    let irq_sources: Vec<&str> = (e.sources.iter())
        .filter(|s| s.kind == "irq")
        .map(|s| s.name.as_str())
        .collect();
    assert_eq!(
        irq_sources,
        vec!["call_function_single:251", "local_timer:236"]
    );
}

#[test]
fn events_after_the_last_summary_are_left_out_with_their_period() {
    let mut t = Tally::new();
    for l in PIPE.lines() {
        t.line(l);
    }
    let e = &t.entries(&[0, 1], &config());
    assert_eq!(e[0].periods, 0);
    assert_eq!(e[0].available_pct, 100.0);
    assert_eq!(e[1].periods, 4);
    // The 17 call_function_single events came before the first summary.
    assert_eq!(e[1].interference.irq.events, 17);
    // The four summaries counted 65, 1, 0 and 1 IRQs.
    assert_eq!(e[1].interference.irq.count, 67);
    assert_eq!(e[1].runtime_ns, 4_005_137_000);
}
