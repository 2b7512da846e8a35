//! Issue 48, item 6 and done-when 4, in the lab (`tests/lab.rs`): `timer --engine
//! timerlat` and `--engine both` on Debian's PREEMPT_RT kernel with CPU 1 isolated, beside
//! `rtla timerlat top` and `rtla timerlat hist` on the same guest (one boot). Behaviour
//! only (TCG's timing means nothing): the same CPUs, each of rtla's figures with its
//! counterpart in our result, sample counts of the same order, valid files in `report`,
//! `compare` and the page, and the tracer left as found after a run and after a SIGINT.
//!
//! rtla's outputs are parsed here (test code: what a user compares against); the parsers
//! are tested on the lab's own captures in `tests/fixtures/timerlat/`.

use std::sync::Arc;

use jitterscope::engine::sched::Policy;
use jitterscope::probes::timer::TimerEntry;
use jitterscope::probes::timerlat::TimerlatEntry;

use crate::lab::{self, Boot, Guest};

/// What the tracer's global state is: `current_tracer`, the instances, every osnoise file.
/// One boot: the RT kernel, 2 vCPUs, CPU 1 isolated, rtla in the guest.
fn rt(test: &str) -> Option<Arc<Guest>> {
    lab::guest(test, "rt-timerlat", || Boot {
        kernel: "rt",
        cpus: 2,
        cmdline: "isolcpus=1 nohz_full=1 rcu_nocbs=1".into(),
        flags: &["--rtla"],
        script: [
            lab::TRACER_STATE.to_string(),
            lab::part("state-before", "state"),
            lab::part(
                "timerlat",
                "jitterscope timer --engine timerlat -a 1 -D 3s -o tl.json --html tl.html",
            ),
            lab::part("state-timerlat", "state"),
            lab::part(
                "both",
                "jitterscope timer --engine both -a 1 -D 2s -o both.json",
            ),
            lab::part("state-both", "state"),
            lab::part(
                "prio",
                "jitterscope timer --engine timerlat -a 1 -D 1s --policy rr -p 40 -o prio.json",
            ),
            lab::part(
                "rtla-top",
                "timeout -s INT 30 rtla timerlat top -c 1 -d 3s -q -n",
            ),
            lab::part(
                "rtla-hist",
                "timeout -s INT 30 rtla timerlat hist -c 1 -d 3s -n",
            ),
            lab::part(
                "sigint",
                "jitterscope timer --engine timerlat -a 1 -D 60s -o int.json & P=$!\n\
                 sleep 4; kill -INT $P; wait $P",
            ),
            lab::part("state-sigint", "state"),
            lab::part("report", "jitterscope report tl.json both.json"),
            lab::part("csv", "jitterscope report --format csv tl.json both.json"),
            lab::part("compare", "jitterscope compare tl.json int.json"),
            lab::part(
                "page",
                "jitterscope report --format html -o page.html tl.json both.json",
            ),
        ]
        .concat(),
    })
}

/// One CPU's figures as rtla gives them, in ns (`-n`).
#[derive(Debug, PartialEq)]
pub struct RtlaCpu {
    pub cpu: usize,
    /// IRQ, then thread: (count, min, avg, max).
    pub irq: (u64, u64, u64, u64),
    pub thread: (u64, u64, u64, u64),
}

/// `rtla timerlat top -q`'s rows: `CPU #COUNT | cur min avg max | cur min avg max`.
pub fn rtla_top(text: &str) -> Vec<RtlaCpu> {
    let mut rows = Vec::new();
    for line in text.lines() {
        let cols: Vec<&str> = line.split('|').collect();
        let [head, irq, thread] = cols[..] else {
            continue;
        };
        let mut h = head.split_whitespace();
        let (Some(cpu), Some(count)) = (h.next(), h.next()) else {
            continue;
        };
        let (Ok(cpu), Some(Ok(count))) = (
            cpu.parse::<usize>(),
            count.strip_prefix('#').map(str::parse::<u64>),
        ) else {
            continue;
        };
        let four = |s: &str| -> Option<(u64, u64, u64, u64)> {
            let v: Vec<u64> = s
                .split_whitespace()
                .filter_map(|w| w.parse().ok())
                .collect();
            // cur min avg max: the count stands where cur stood.
            (v.len() == 4).then(|| (count, v[1], v[2], v[3]))
        };
        if let (Some(irq), Some(thread)) = (four(irq), four(thread)) {
            rows.push(RtlaCpu { cpu, irq, thread });
        }
    }
    rows
}

/// `rtla timerlat hist`'s summary: `Index IRQ-001 Thr-001` and the `count:`, `min:`,
/// `avg:`, `max:` rows.
pub fn rtla_hist(text: &str) -> Vec<RtlaCpu> {
    let Some(index) = text.lines().find(|l| l.starts_with("Index")) else {
        return Vec::new();
    };
    let heads: Vec<&str> = index.split_whitespace().skip(1).collect();
    let row = |name: &str| -> Vec<u64> {
        (text.lines())
            .find(|l| l.starts_with(name))
            .map(|l| {
                l.split_whitespace()
                    .skip(1)
                    .filter_map(|w| w.parse().ok())
                    .collect()
            })
            .unwrap_or_default()
    };
    let (count, min, avg, max) = (row("count:"), row("min:"), row("avg:"), row("max:"));
    let at = |i: usize| (count[i], min[i], avg[i], max[i]);
    let mut rows = Vec::new();
    for (i, h) in heads.iter().enumerate() {
        let Some(cpu) = h.strip_prefix("IRQ-").and_then(|c| c.parse().ok()) else {
            continue;
        };
        let Some(t) = heads.iter().position(|x| *x == format!("Thr-{cpu:03}")) else {
            continue;
        };
        if [&count, &min, &avg, &max]
            .iter()
            .all(|v| v.len() > i.max(t))
        {
            rows.push(RtlaCpu {
                cpu,
                irq: at(i),
                thread: at(t),
            });
        }
    }
    rows
}

#[test]
fn rtla_outputs_of_the_lab_parse() {
    let f = |n: &str| std::fs::read_to_string(format!("tests/fixtures/timerlat/{n}")).unwrap();
    let top = rtla_top(&f("rtla-top-q-ns.txt"));
    let want = RtlaCpu {
        cpu: 1,
        irq: (2171, 24850, 529184, 12589450),
        thread: (2171, 65310, 601943, 12706280),
    };
    assert_eq!(top, vec![want]);
    let two = rtla_top(&f("rtla-top-q-cpus01.txt"));
    assert_eq!(two.iter().map(|r| r.cpu).collect::<Vec<_>>(), vec![0, 1]);
    assert_eq!(two[1].irq, (2656, 41, 261, 13502));
    let hist = rtla_hist(&f("rtla-hist-ns.txt"));
    let want = RtlaCpu {
        cpu: 1,
        irq: (2122, 21270, 521963, 23344140),
        thread: (2122, 49290, 585862, 23454550),
    };
    assert_eq!(hist, vec![want]);
    assert_eq!(
        rtla_hist(&f("rtla-hist-us.txt"))[0].thread,
        (2123, 102, 633, 24145)
    );
}

fn timerlat(g: &Guest, file: &str) -> Vec<TimerlatEntry> {
    g.result(file).entries::<TimerlatEntry>().cloned().collect()
}

/// Done-when 4: `--engine timerlat -a 1` measures CPU 1 with the kernel's tracer, every
/// activation's IRQ and thread latency and the split; `both` runs the loop and timerlat on
/// CPU 1, and its header says what ran.
#[test]
fn issue48_timer_from_timerlat_measures_cpu1_with_the_split() {
    const TEST: &str = "issue48_timer_from_timerlat_measures_cpu1_with_the_split";
    let Some(g) = rt(TEST) else { return };
    let out = g.part_exit("timerlat", 0);
    assert!(
        out.contains("timer (timerlat, the kernel's tracer): CPUs 1 (isolcpus, nohz_full) for")
            && out.contains("PREEMPT_RT")
            && out.contains("period 1000 µs")
            && out.contains("timerlat/1 at SCHED_FIFO"),
        "the header:\n{out}"
    );
    assert!(out.contains("thread − IRQ"), "{out}");
    let r = g.result("tl.json");
    assert_eq!(r.run.cpus.measured.cpus(), &[1]);
    assert!(r.entries::<TimerEntry>().next().is_none());
    let tl = timerlat(&g, "tl.json");
    assert_eq!(tl.iter().map(|e| e.cpu).collect::<Vec<_>>(), vec![1]);
    let e = &tl[0];
    assert!(e.irq.count > 100 && e.thread_latency.count > 100, "{e:?}");
    // Each activation's thread sample follows its IRQ sample: the split holds them all
    // but the few at the ends, and the thread's latency includes the IRQ's.
    assert!(e.thread_part.count + 2 >= e.thread_latency.count, "{e:?}");
    assert!(e.thread_latency.min_ns >= e.irq.min_ns, "{e:?}");
    let both = g.part_exit("both", 0);
    assert!(
        both.contains("timer (nanosleep loop): CPUs 1 (isolcpus, nohz_full) for")
            && both.contains(
                "timer (timerlat, the kernel's tracer), after the nanosleep loop: CPUs 1"
            ),
        "the header:\n{both}"
    );
    let b = g.result("both.json");
    assert_eq!(
        b.entries::<TimerEntry>().map(|e| e.cpu).collect::<Vec<_>>(),
        vec![1]
    );
    assert_eq!(
        timerlat(&g, "both.json")
            .iter()
            .map(|e| e.cpu)
            .collect::<Vec<_>>(),
        vec![1]
    );
}

/// `-p` and `--policy` set the kernel's timerlat/N threads, as rtla's `-P` does, and the
/// header and the result say what they ran at (read back, not as asked). Without them,
/// the kernel's own SCHED_FIFO 95 stands.
#[test]
fn issue48_timerlat_threads_run_at_the_policy_asked() {
    const TEST: &str = "issue48_timerlat_threads_run_at_the_policy_asked";
    let Some(g) = rt(TEST) else { return };
    let out = g.part_exit("prio", 0);
    assert!(
        out.contains("timerlat/1 at SCHED_RR 40"),
        "the header:\n{out}"
    );
    let e = &timerlat(&g, "prio.json")[0];
    let t = e.thread.as_ref().expect("the thread was read");
    assert_eq!(
        (t.comm.as_str(), t.policy, t.priority),
        ("timerlat/1", Policy::Rr, 40)
    );
    assert!(e.irq.count > 10, "{e:?}");
    let kernel = &timerlat(&g, "tl.json")[0];
    let k = kernel.thread.as_ref().expect("the thread was read");
    assert_eq!(
        (k.policy, k.priority),
        (Policy::Fifo, 95),
        "no -p: the kernel's"
    );
}

/// Item 6: rtla's top and hist on the same guest report the same CPU, each of their
/// figures (IRQ and thread count, min, avg, max) has its counterpart in our entry, and
/// the counts are of the same order (both ran 3 s at the same period).
#[test]
fn issue48_timerlat_has_every_figure_rtla_gives() {
    const TEST: &str = "issue48_timerlat_has_every_figure_rtla_gives";
    let Some(g) = rt(TEST) else { return };
    let ours = &timerlat(&g, "tl.json")[0];
    for (part, rows) in [
        ("rtla-top", rtla_top(&g.part_exit("rtla-top", 0))),
        ("rtla-hist", rtla_hist(&g.part_exit("rtla-hist", 0))),
    ] {
        assert_eq!(
            rows.iter().map(|r| r.cpu).collect::<Vec<_>>(),
            vec![1],
            "{part}"
        );
        let theirs = &rows[0];
        for (what, (count, min, avg, max), s) in [
            ("IRQ", theirs.irq, &ours.irq),
            ("thread", theirs.thread, &ours.thread_latency),
        ] {
            eprintln!(
                "{part} {what}: rtla count {count} min {min} avg {avg} max {max} ns; ours \
                 count {} min {:?} avg {:?} max {:?} ns",
                s.count, s.min_ns, s.mean_ns, s.max_ns
            );
            assert!(s.min_ns.is_some() && s.mean_ns.is_some() && s.max_ns.is_some());
            assert!(min <= avg && avg <= max, "{part} {what}");
            let ratio = s.count as f64 / count.max(1) as f64;
            assert!(
                (0.2..5.0).contains(&ratio),
                "{part} {what}: {} vs {count}",
                s.count
            );
        }
    }
}

/// Done-when 4: the results read back in `report` (tables with the split), the CSV export
/// (a row per part), `compare` and the page.
#[test]
fn issue48_timerlat_results_show_in_every_view() {
    const TEST: &str = "issue48_timerlat_results_show_in_every_view";
    let Some(g) = rt(TEST) else { return };
    let report = g.part_exit("report", 0);
    assert!(
        report.contains("timerlat tracer") && report.contains("thread − IRQ"),
        "{report}"
    );
    assert!(report.contains("Wake-up latency"), "both's loop: {report}");
    let csv = g.part_exit("csv", 0);
    for metric in ["irq", "thread", "thread-part"] {
        let rows = (csv.lines())
            .filter(|l| l.starts_with("timerlat,") && l.contains(&format!(",{metric},")))
            .count();
        assert_eq!(rows, 2, "{metric} rows, one per file:\n{csv}");
    }
    let compare = g.part_exit("compare", 0);
    assert!(compare.contains("thread-part"), "{compare}");
    let page = g.text("page.html");
    assert!(page.contains("<caption>timerlat: summary") && page.contains(">thread-part<"));
    let own = g.text("tl.html");
    assert!(own.contains("thread-part"));
}

/// Item 6: the tracer is left as found (current_tracer, instances, every osnoise file)
/// after each run and after a SIGINT mid-run, whose result says it was interrupted.
#[test]
fn issue48_timerlat_leaves_the_tracer_as_found() {
    const TEST: &str = "issue48_timerlat_leaves_the_tracer_as_found";
    let Some(g) = rt(TEST) else { return };
    let before = lab::tracer_state(&g.part_exit("state-before", 0));
    assert!(
        before.iter().any(|l| l == "current_tracer=nop")
            && before.iter().any(|l| l.starts_with("osnoise/cpus=")),
        "{before:?}"
    );
    for part in ["state-timerlat", "state-both", "state-sigint"] {
        assert_eq!(lab::tracer_state(&g.part_exit(part, 0)), before, "{part}");
    }
    let (out, status) = g.part("sigint");
    assert_ne!(status, 0, "{out}");
    let r = g.result("int.json");
    assert!(r.run.interrupted, "{out}");
    assert!(r.run.actual_duration_ns < 30_000_000_000);
    assert_eq!(timerlat(&g, "int.json").len(), 1, "{out}");
}
