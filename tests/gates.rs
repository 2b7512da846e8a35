//! Issue 15, item 6: `--fail-above METRIC=VALUE` on noise, timer and the main job: exit 1
//! with one line naming the figure and the limit, the result saved first; exit 0 under
//! the limit; bad gates refused before measuring.

use crate::util::{assert_bad_input, jitterscope, measuring, stderr_lines};

fn crossed_lines(out: &std::process::Output) -> Vec<String> {
    stderr_lines(out)
        .into_iter()
        .filter(|l| l.contains("limit crossed"))
        .collect()
}

#[test]
fn a_crossed_limit_exits_1_after_saving_and_names_the_figure() {
    let _m = measuring();
    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("noise.json");
    let saved_arg = saved.to_str().unwrap();
    // Every run has a largest interruption above 1 ns: the gate must fire.
    let out = jitterscope(&[
        "noise",
        "-D",
        "300ms",
        "-a",
        "0",
        "-q",
        "-o",
        saved_arg,
        "--fail-above",
        "max=1ns",
    ]);
    assert_eq!(out.status.code(), Some(1), "{:?}", stderr_lines(&out));
    let lines = crossed_lines(&out);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].starts_with("jitterscope: limit crossed: noise CPU 0 max ")
            && lines[0].ends_with("> 1 ns"),
        "{lines:?}"
    );
    let r = jitterscope::report::ResultFile::parse(&std::fs::read_to_string(&saved).unwrap());
    assert!(r.is_ok(), "the result is saved before the gate");
    // An hour is above anything a 300 ms run can see; 100 % of the time is never lost.
    let out = jitterscope(&[
        "noise",
        "-D",
        "300ms",
        "-a",
        "0",
        "-q",
        "--fail-above",
        "max=1s",
        "--fail-above",
        "lost=100%",
    ]);
    assert_eq!(out.status.code(), Some(0), "{:?}", stderr_lines(&out));
    assert!(crossed_lines(&out).is_empty());
    let out = jitterscope(&[
        "timer",
        "-l",
        "20",
        "-i",
        "500",
        "-a",
        "0",
        "-q",
        "--no-dma-latency",
        "--fail-above",
        "p50=1ns",
    ]);
    assert_eq!(out.status.code(), Some(1), "{:?}", stderr_lines(&out));
    assert!(crossed_lines(&out)[0].contains("timer CPU 0 p50 "));
}

#[test]
fn the_main_job_gates_its_merged_result() {
    let _m = measuring();
    let dir = tempfile::tempdir().unwrap();
    let out = jitterscope(&[
        "run",
        "--step-time",
        "200ms",
        "--out-dir",
        dir.path().to_str().unwrap(),
        "--fail-above",
        "max=1ns",
    ]);
    assert_eq!(out.status.code(), Some(1), "{:?}", stderr_lines(&out));
    assert_eq!(crossed_lines(&out).len(), 1);
    let saved: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(saved.len(), 2, "the .json and the .html are saved first");
}

#[test]
fn bad_gates_are_refused_before_measuring() {
    assert_bad_input(&[
        &["noise", "--fail-above", "p98=1us"],
        &["noise", "--fail-above", "p99=50"],
        &["noise", "--fail-above", "lost=1us"],
        &["noise", "--fail-above", "p99"],
        &["timer", "--fail-above", "lost=1%"],
        &["run", "--fail-above", "max=soon"],
    ]);
}
