//! `timer --engine` on the host (issue 48, item 6): a kernel without the timerlat tracer
//! (this project's CI host) or a user who is not root gets one line saying so and the
//! nanosleep loop's result; timerlat's entries, folded from a real 6.1 RT trace, read back
//! in every view (`report`'s table, CSV, Markdown, HdrHistogram log, the page, `compare`).
//! The tracer itself runs in the lab (`tests/lab_timerlat.rs`).

use jitterscope::probes::timer::TimerEntry;
use jitterscope::probes::timerlat::TimerlatEntry;
use jitterscope::report::{ProbeEntry, ResultFile};
use jitterscope::trace::tracer::timerlat::Folds;

use crate::util::{self, jitterscope, skip, stderr_lines};

fn kernel_has_timerlat() -> bool {
    std::fs::read_to_string("/sys/kernel/tracing/available_tracers")
        .is_ok_and(|t| t.split_whitespace().any(|w| w == "timerlat"))
}

/// Done-when 4's fallback: one line, then the loop runs as without `--engine`.
#[test]
fn issue48_without_timerlat_one_line_says_so_and_the_loop_runs() {
    const TEST: &str = "issue48_without_timerlat_one_line_says_so_and_the_loop_runs";
    if kernel_has_timerlat() && util::is_root() {
        skip(
            TEST,
            "this kernel has the timerlat tracer and we are root: it would run",
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.json");
    let out = {
        let _m = util::measuring();
        jitterscope(&[
            "timer",
            "--engine",
            "timerlat",
            "-D",
            "300ms",
            "-o",
            path.to_str().unwrap(),
        ])
    };
    let lines = stderr_lines(&out);
    assert_eq!(out.status.code(), Some(0), "{lines:?}");
    let said: Vec<&String> = lines.iter().filter(|l| l.contains("timerlat")).collect();
    assert_eq!(said.len(), 1, "{lines:?}");
    let why = if util::is_root() {
        "has no timerlat tracer"
    } else {
        "needs root"
    };
    assert!(
        said[0].contains("timerlat cannot run here") && said[0].contains(why),
        "{}",
        said[0]
    );
    assert!(
        said[0].ends_with("the nanosleep loop runs instead"),
        "{}",
        said[0]
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.starts_with("timer (nanosleep loop): CPUs"),
        "{stdout}"
    );
    let r = ResultFile::read(&path).unwrap();
    assert!(r.entries::<TimerEntry>().next().is_some());
    assert!(r.entries::<TimerlatEntry>().next().is_none());
    assert!(
        r.run
            .warnings
            .iter()
            .any(|w| w.contains("timerlat cannot run here"))
    );
}

/// What timerlat cannot do is refused in one line before anything runs.
#[test]
fn timerlat_refuses_what_only_the_loop_does() {
    util::assert_bad_input(&[
        &["timer", "--engine", "timerlat", "-i", "50"],
        &["timer", "--engine", "both", "-i", "1500.5"],
        &["timer", "--engine", "timerlat", "--trace"],
        &["timer", "--engine", "timerlat", "-l", "100"],
        &["timer", "--engine", "timerlat", "--stop-above", "100"],
        &["timer", "--engine", "warp"],
    ]);
}

/// A result holding the frozen fixture's timer entry and a timerlat entry folded from the
/// lab's 6.1 RT trace (CPU 1, 1000 µs).
fn timerlat_result(dir: &std::path::Path) -> std::path::PathBuf {
    let mut r = util::frozen();
    r.probes.retain(|p| matches!(p, ProbeEntry::Timer(_)));
    let mut f = Folds::new([1]);
    f.feed(&std::fs::read_to_string("tests/fixtures/timerlat/trace-6.1-rt.txt").unwrap());
    let mut e = f.cpus.pop().unwrap().finish(1_000_000, true);
    e.duration_ns = 100_000_000;
    r.probes.push(ProbeEntry::Timerlat(Box::new(e)));
    let path = dir.join("tl.json");
    r.write_atomic(&path).unwrap();
    path
}

#[test]
fn issue48_a_timerlat_entry_shows_in_every_view() {
    let dir = tempfile::tempdir().unwrap();
    let p = timerlat_result(dir.path());
    let p = p.to_str().unwrap();
    let back = ResultFile::read(std::path::Path::new(p)).unwrap();
    let e = back.entries::<TimerlatEntry>().next().expect("read back");
    assert_eq!((e.version, e.cpu, e.period_ns), (1, 1, 1_000_000));
    let table = util::run_ok(&["report", p]);
    assert!(
        table.contains("timerlat tracer (period 1000 µs)")
            && table.contains("thread − IRQ")
            && table.contains("Wake-up latency"),
        "{table}"
    );
    let csv = util::run_ok(&["report", "--format", "csv", p]);
    for metric in ["irq", "thread", "thread-part"] {
        let row = (csv.lines())
            .find(|l| l.starts_with(&format!("timerlat,{p},cpu1,{metric},1,")))
            .unwrap_or_else(|| panic!("{metric}:\n{csv}"));
        let count: u64 = row.split(',').nth(5).unwrap().parse().unwrap();
        let want = match metric {
            "irq" => e.irq.count,
            "thread" => e.thread_latency.count,
            _ => e.thread_part.count,
        };
        assert_eq!(count, want, "{row}");
    }
    let md = util::run_ok(&["report", "--format", "markdown", p]);
    assert!(md.contains("thread-part"), "{md}");
    let hdr = util::run_ok(&["report", "--format", "hdr", p]);
    assert!(hdr.contains("timerlat"), "{hdr}");
    let page = dir.path().join("p.html");
    util::run_ok(&[
        "report",
        "--format",
        "html",
        "-o",
        page.to_str().unwrap(),
        p,
    ]);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("<caption>timerlat: summary (times in µs)</caption>"));
    for metric in ["irq", "thread", "thread-part"] {
        assert!(
            html.contains(&format!(">{metric}<")),
            "{metric} in the page's table"
        );
    }
    let cmp = util::run_ok(&["compare", p, p]);
    assert!(cmp.contains("thread-part"), "{cmp}");
}
