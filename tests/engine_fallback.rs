//! Issue 48, item 6: `noise --engine osnoise` where the tracer cannot run — a kernel
//! built without it (this project's CI host), or a user who is not root — says so in
//! one line, and the TSC loop measures as it always did; the result says so too
//! (`engine-unavailable`), and nothing of tracefs is left behind. `--hwlat`, a check with
//! nothing to fall back on, fails in one line. The lab (`tests/lab_engines.rs`) runs the
//! tracers where the kernel has them.

use std::os::unix::fs::PermissionsExt;
use std::process::Output;

use jitterscope::probes::noise::NoiseEntry;
use jitterscope::report::ResultFile;
use jitterscope::trace::tracer::osnoise::OsnoiseEntry;

use crate::util::{
    as_nobody, is_root, jitterscope, measuring, nobody_cannot_reach, our_instances, skip,
    stderr_lines,
};

/// Whether this kernel lists `tracer` (root reads tracefs; `None` when it cannot tell).
fn kernel_has(tracer: &str) -> Option<bool> {
    let root = jitterscope::trace::tracefs_root()?;
    let text = std::fs::read_to_string(root.join("available_tracers")).ok()?;
    Some(text.split_whitespace().any(|t| t == tracer))
}

/// The lines of stderr that speak of the engine.
fn engine_lines(out: &Output) -> Vec<String> {
    (stderr_lines(out).into_iter())
        .filter(|l| l.contains("osnoise"))
        .collect()
}

fn result(path: &std::path::Path) -> ResultFile {
    ResultFile::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// What every fallback holds: one line, the TSC loop's entries for the whole duration,
/// the degradation in the file, the header's engine line.
fn assert_fell_back(out: &Output, path: &std::path::Path, why: &str) {
    let lines = engine_lines(out);
    assert_eq!(out.status.code(), Some(0), "{:?}", stderr_lines(out));
    assert_eq!(lines.len(), 1, "one line says so: {lines:?}");
    assert!(
        lines[0].starts_with("jitterscope: warning: the osnoise engine could not run (")
            && lines[0].contains(why)
            && lines[0].ends_with("the TSC loop measured instead"),
        "{}",
        lines[0]
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("\nengine: the TSC loop (osnoise could not run)\n"),
        "{stdout}"
    );
    let r = result(path);
    let kinds: Vec<&str> = r.run.degraded.iter().map(|d| d.kind.as_str()).collect();
    assert!(kinds.contains(&"engine-unavailable"), "{kinds:?}");
    assert_eq!(r.entries::<OsnoiseEntry>().count(), 0);
    let tsc: Vec<&NoiseEntry> = r.entries().collect();
    assert!(!tsc.is_empty(), "the TSC loop measured");
    // The whole duration, not half of it (`both` gives the loop all of it too).
    for e in tsc {
        assert!(
            e.runtime_ns >= 300_000_000,
            "CPU {}: {} ns",
            e.cpu,
            e.runtime_ns
        );
    }
}

#[test]
fn issue48_a_kernel_without_osnoise_says_so_and_the_tsc_loop_runs() {
    const NAME: &str = "issue48_a_kernel_without_osnoise_says_so_and_the_tsc_loop_runs";
    if !is_root() {
        return skip(NAME, "reading available_tracers needs root");
    }
    match kernel_has("osnoise") {
        Some(false) => {}
        Some(true) => {
            return skip(
                NAME,
                "this kernel has the osnoise tracer (the lab tests it)",
            );
        }
        None => return skip(NAME, "tracefs is not mounted here"),
    }
    let _m = measuring();
    let dir = tempfile::tempdir().unwrap();
    for engine in ["osnoise", "both"] {
        let path = dir.path().join(format!("{engine}.json"));
        let p = path.to_str().unwrap();
        let out = jitterscope(&["noise", "--engine", engine, "-D", "300ms", "-o", p]);
        assert_fell_back(&out, &path, "this kernel has no osnoise tracer");
        assert!(our_instances().is_empty(), "{:?}", our_instances());
        assert!(!std::path::Path::new("/run/jitterscope/tune.journal").exists());
    }
    let hw = jitterscope(&["noise", "--hwlat", "-D", "300ms"]);
    let lines: Vec<String> = (stderr_lines(&hw).into_iter())
        .filter(|l| !l.contains("warning:"))
        .collect();
    assert_eq!(hw.status.code(), Some(2), "{lines:?}");
    assert_eq!(
        lines,
        vec![format!(
            "jitterscope: --hwlat: the hwlat tracer could not run: this kernel has no hwlat \
             tracer; available_tracers lists: {}",
            available()
        )]
    );
}

fn available() -> String {
    let root = jitterscope::trace::tracefs_root().unwrap();
    let text = std::fs::read_to_string(root.join("available_tracers")).unwrap();
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[test]
fn issue48_osnoise_without_root_says_so_and_the_tsc_loop_runs() {
    const NAME: &str = "issue48_osnoise_without_root_says_so_and_the_tsc_loop_runs";
    let Some(mut nobody) = as_nobody(NAME) else {
        return;
    };
    let _m = measuring();
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let path = dir.path().join("nobody.json");
    let out = nobody
        .args(["noise", "--engine", "osnoise", "-D", "300ms", "-o"])
        .arg(&path)
        .output()
        .unwrap();
    if nobody_cannot_reach(NAME, &out) {
        return;
    }
    assert_fell_back(&out, &path, "tracing needs root");
}
