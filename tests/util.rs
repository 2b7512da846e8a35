//! Shared helpers: the binary, the measurement lock, and skip conditions.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use jitterscope::engine::cpu::{CpuList, CpuPlan};
use jitterscope::engine::run::RunPlan;
use jitterscope::engine::sched::{Policy, SchedRequest};

/// Measuring tests run one at a time: on a 2-CPU machine two of them would measure each
/// other. The mutex orders the threads of this test binary; the file lock (flock on a
/// file in the temp directory) orders test binaries run at once from other checkouts.
pub fn measuring() -> Measuring {
    static LOCK: Mutex<()> = Mutex::new(());
    let guard = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let path = std::env::temp_dir().join("jitterscope-measuring.lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .ok();
    if let Some(f) = &file {
        // Blocks until no other process holds it; released when the file is closed.
        let _ = rustix::fs::flock(f, rustix::fs::FlockOperation::LockExclusive);
    }
    Measuring {
        _file: file,
        _guard: guard,
    }
}

/// Held while a test measures: the in-process mutex and the cross-process file lock.
pub struct Measuring {
    _file: Option<std::fs::File>,
    _guard: MutexGuard<'static, ()>,
}

pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_jitterscope"))
}

pub fn jitterscope(args: &[&str]) -> Output {
    Command::new(bin())
        .args(args)
        .output()
        .expect("the binary runs")
}

/// Prints why a test is skipped; the caller returns. Under `scripts/test`, which names a
/// directory in `JITTERSCOPE_SKIPS`, it also records the skip there, so that the test
/// command counts and lists it (a test that returns early is "ok" to cargo): one line
/// "test<TAB>label<TAB>needs<TAB>reason", the test being the harness's name of this
/// thread, and needs what [`needs`] finds in the reason.
pub fn skip(test: &str, why: &str) {
    eprintln!("SKIPPED {test}: {why}");
    let Some(dir) = std::env::var_os("JITTERSCOPE_SKIPS") else {
        return;
    };
    let thread = std::thread::current();
    let one_line = |s: &str| s.replace(['\t', '\n'], " ");
    let record = format!(
        "{}\t{}\t{}\t{}\n",
        thread.name().unwrap_or(test),
        one_line(test),
        needs(why).join(","),
        one_line(why)
    );
    // One write of one short line to a file opened for appending: whole, whichever test
    // binaries append at once.
    use std::io::Write;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(std::path::Path::new(&dir).join("skips.tsv"));
    if let Err(e) = file.and_then(|mut f| f.write_all(record.as_bytes())) {
        panic!("{test}: cannot record the skip in {dir:?}: {e}");
    }
}

/// What a host offers that tests skip without, each as `scripts/test-tally` names it and
/// the words of a skip's reason that say the test needs it. A skip whose every need the
/// host has fails the suite under CI (docs/guide/testing.md). "tool" is a program the
/// test command installs where it can, which the host is never said to have: a skip
/// that also needs one ("tuned is not installed (needs root and apt)") stays a skip.
pub const NEEDS: [(&str, &[&str]); 9] = [
    ("root", &["needs root", "need root", "(root)", "root only"]),
    ("tracefs", &["tracefs"]),
    ("fifo", &["SCHED_FIFO"]),
    ("cgroup1-cpu", &["cgroup v1", "real-time runtime"]),
    (
        "cpus2",
        &[
            "two CPUs",
            "two usable CPUs",
            "2 usable CPUs",
            "one usable CPU",
        ],
    ),
    ("podman", &["podman"]),
    ("chromium", &["chromium"]),
    ("promtool", &["prometheus", "promtool"]),
    ("tool", &["not installed", "is missing", "not on PATH"]),
];

/// The needs a skip's reason names (`NEEDS`); none for a reason about anything else (a
/// tool the test command installs, a kernel option, a busy host).
pub fn needs(why: &str) -> Vec<&'static str> {
    (NEEDS.iter())
        .filter(|(_, words)| words.iter().any(|w| why.contains(w)))
        .map(|(need, _)| *need)
        .collect()
}

pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// A CPU to measure and a different one for the coordinator, when there are two.
pub fn two_cpus() -> Option<(usize, usize)> {
    let u = jitterscope::engine::cpu::CpuUniverse::detect().ok()?;
    // The CPUs a default run spans (the mask, and a tuned host's isolated CPUs).
    let spans = u.default_cpus();
    let cpus = spans.cpus();
    (cpus.len() >= 2).then(|| (cpus[cpus.len() - 1], cpus[0]))
}

/// Whether this process may use SCHED_FIFO at all.
pub fn fifo_available() -> Result<(), String> {
    use jitterscope::engine::sched::{Policy, SchedRequest, preflight};
    preflight(SchedRequest {
        policy: Policy::Fifo,
        priority: 1,
    })
}

pub fn stderr_lines(o: &Output) -> Vec<String> {
    String::from_utf8_lossy(&o.stderr)
        .lines()
        // A tune test running beside (it holds the measuring lock, this need not) makes
        // every command warn that the host is being changed: its line, not this one's.
        .filter(|l| !l.contains("is changing this host's settings now"))
        .map(str::to_string)
        .collect()
}

/// A run plan that measures `cpus.0` at SCHED_FIFO 1, with the coordinator on `cpus.1`.
pub fn fifo1_plan(cpus: (usize, usize), duration: Duration) -> RunPlan {
    RunPlan {
        cpus: CpuPlan {
            measured: CpuList::from_cpus(vec![cpus.0]),
            housekeeping: CpuList::from_cpus(vec![cpus.1]),
        },
        sched: SchedRequest {
            policy: Policy::Fifo,
            priority: 1,
        },
        mlock: true,
        duration,
        priospread: false,
        setup_timeout: Duration::from_secs(10),
    }
}

/// The binary run unprivileged: as user 65534 through setpriv when the suite is root;
/// as the suite's own user when that is unprivileged already (it may not use SCHED_FIFO);
/// else `None`, with the reason printed.
pub fn as_nobody(test: &str) -> Option<Command> {
    if !is_root() {
        if fifo_available().is_ok() {
            skip(
                test,
                "this user may use SCHED_FIFO (RLIMIT_RTPRIO or CAP_SYS_NICE), so is not \
                 unprivileged, and only root can switch to one that is",
            );
            return None;
        }
        return Some(Command::new(bin()));
    }
    if Command::new("setpriv").arg("--version").output().is_err() {
        skip(test, "setpriv (util-linux) is not installed");
        return None;
    }
    let mut c = Command::new("setpriv");
    c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(bin());
    Some(c)
}

/// Whether user 65534 could not even start the binary (a directory on its path is
/// closed to it): the caller skips.
pub fn nobody_cannot_reach(test: &str, out: &Output) -> bool {
    let unreachable = stderr_lines(out)
        .iter()
        .any(|l| l.contains("Permission denied") && l.contains("jitterscope"))
        && out.stdout.is_empty();
    if unreachable {
        skip(
            test,
            "the binary is not reachable by user 65534 (directory permissions)",
        );
    }
    unreachable
}

/// Runs the binary with `args` and `--json`, expects exit 0, and returns the result.
pub fn json_result(args: &[&str]) -> jitterscope::report::ResultFile {
    let mut all = args.to_vec();
    all.push("--json");
    let out = jitterscope(&all);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    jitterscope::report::ResultFile::parse(&String::from_utf8_lossy(&out.stdout)).expect("JSON")
}

/// Each of `cases` is bad input: exit 2 and one line on stderr, starting `jitterscope: `.
pub fn assert_bad_input(cases: &[&[&str]]) {
    for args in cases {
        let out = jitterscope(args);
        let lines = stderr_lines(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {lines:?}");
        assert_eq!(lines.len(), 1, "{args:?}: {lines:?}");
        assert!(lines[0].starts_with("jitterscope: "), "{args:?}: {lines:?}");
    }
}

/// The frozen fixture: one `jitterscope/1` result with an entry of every probe kind, made
/// once by real short runs (tests/fixtures/README.md, scripts/make-fixture). Tests read
/// it and measure nothing. Relative to the package root, where cargo runs the tests.
pub const FROZEN: &str = "tests/fixtures/all-probes.json";

pub fn frozen() -> jitterscope::report::ResultFile {
    jitterscope::report::ResultFile::read(std::path::Path::new(FROZEN)).expect("the fixture")
}

/// A copy of the frozen fixture at `path` holding only the entries of the probe kinds
/// named (as `probe` names them in the JSON), in the fixture's order.
pub fn frozen_part(path: &std::path::Path, kinds: &[&str]) -> PathBuf {
    let text = std::fs::read_to_string(FROZEN).expect("the fixture");
    let mut v: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    let probes = v["probes"].as_array_mut().expect("probes");
    probes.retain(|p| kinds.contains(&p["probe"].as_str().unwrap_or("")));
    assert!(!probes.is_empty(), "the fixture holds {kinds:?}");
    std::fs::write(path, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    path.to_path_buf()
}

/// Whether a trace session of our own can be made here (root, and tracefs mounted or
/// mountable): tried for real, then removed.
pub fn tracefs_usable() -> bool {
    use jitterscope::engine::cpu::CpuList;
    use jitterscope::trace::session::TraceSession;
    is_root()
        && TraceSession::start(&CpuList::from_cpus(vec![0]), 64)
            .map(|mut s| s.close())
            .is_ok()
}

/// Our tracefs instances now (none when tracefs is not mounted).
pub fn our_instances() -> Vec<String> {
    let Some(root) = jitterscope::trace::tracefs_root() else {
        return Vec::new();
    };
    std::fs::read_dir(root.join("instances"))
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|n| n.starts_with("jitterscope-"))
                .collect()
        })
        .unwrap_or_default()
}

/// Runs the binary with `args`, which must succeed; its stdout.
pub fn run_ok(args: &[&str]) -> String {
    let out = jitterscope(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

/// Runs `scripts/NAME ARGS` from the package root, holding the measuring lock (a release
/// build beside a timing test would spoil it): the last line of its stdout (what it made),
/// or why it failed.
pub fn build_with(script: &str, args: &[&str]) -> Result<String, String> {
    let _m = measuring();
    let out = Command::new(format!("scripts/{script}"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .map_err(|e| format!("cannot run scripts/{script}: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    match (out.status.success(), stdout.lines().last()) {
        (true, Some(last)) => Ok(last.to_string()),
        _ => Err(format!(
            "scripts/{script} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )),
    }
}

/// `selftest`, run by a fresh `cmd()` each time, passes in one of two attempts (a noisy
/// stretch of this shared VM can spoil one, as tests/selftest.rs allows): its output.
pub fn selftest_passes(test: &str, mut cmd: impl FnMut() -> Command) -> String {
    let _m = measuring();
    let mut text = String::new();
    for attempt in 1..=2 {
        let out = cmd().output().expect("selftest runs");
        text = String::from_utf8_lossy(&out.stdout).into_owned();
        eprintln!("{test}: selftest, attempt {attempt}:\n{text}");
        // 0: every check that ran passed (some may skip, saying why: no tracefs in a
        // container); 3: none failed, one could not be judged on this host's background.
        if matches!(out.status.code(), Some(0 | 3)) {
            assert!(
                text.contains("all checks passed")
                    || text.contains("all checks that ran passed")
                    || text.contains("no check failed; could not judge"),
                "{text}"
            );
            return text;
        }
        eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    }
    panic!("{test}: selftest failed twice:\n{text}");
}

/// Removes a cgroup v1 group made by a test, its tasks moved to `parent` first. A thread
/// that ends while it is moved is gone anyway: tries for about a second; false if the
/// group is still there.
pub fn remove_cpu_group(dir: &Path, parent: &Path) -> bool {
    for _ in 0..50 {
        let tasks = std::fs::read_to_string(dir.join("tasks")).unwrap_or_default();
        for tid in tasks.split_whitespace() {
            let _ = std::fs::write(parent.join("tasks"), tid);
        }
        if std::fs::remove_dir(dir).is_ok() || !dir.exists() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// Whether selftest's `check` passed, or could not judge on this host's background in a
/// run that says no check failed (exit 3): a "????" line is the host's, not the tool's.
pub fn check_judged(text: &str, check: &str) -> bool {
    let undecided_run = text.contains("no check failed; could not judge");
    text.lines().filter(|l| l.contains(check)).any(|l| {
        let l = l.trim_start();
        l.starts_with("pass")
            || (undecided_run && l.starts_with("????") && l.contains("could not judge: "))
    })
}

/// A result from the 16-CPU guest (tests/fixtures/host16/NAME.json.gz), as JSON text.
pub fn host16(name: &str) -> String {
    gunzipped(&format!("host16/{name}.json.gz"))
}

/// A gzipped fixture (tests/fixtures/PATH), as text.
pub fn gunzipped(path: &str) -> String {
    use std::io::Read;
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(path);
    let file = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut text = String::new();
    flate2::read::GzDecoder::new(file)
        .read_to_string(&mut text)
        .expect("a gzipped result");
    text
}

/// `json` (a result) grown to a host of `n` CPUs: each per-CPU noise and timer entry is
/// copied round-robin onto CPUs 1..n-1, and the host's CPU count and lists are set to
/// match (the figures are a real host's, only repeated: for how output scales). As
/// ../shared/tools/grow-result does, without its event lists.
pub fn grown(json: &str, n: usize) -> String {
    use serde_json::{Value, json};
    let mut d: Value = serde_json::from_str(json).expect("a result");
    let probes = d["probes"].as_array().cloned().unwrap_or_default();
    let per_cpu = |p: &Value| {
        matches!(p["probe"].as_str(), Some("noise" | "timer")) && p.get("cpu").is_some()
    };
    let mut out = Vec::new();
    for kind in ["noise", "timer"] {
        let entries: Vec<&Value> = (probes.iter())
            .filter(|p| per_cpu(p) && p["probe"] == kind)
            .collect();
        if entries.is_empty() {
            continue;
        }
        for (i, cpu) in (1..n).enumerate() {
            let mut e = entries[i % entries.len()].clone();
            e["cpu"] = json!(cpu);
            if e.get("thread_index").is_some() {
                e["thread_index"] = json!(i);
            }
            if let Some(o) = e.as_object_mut() {
                o.remove("events");
            }
            out.push(e);
        }
    }
    out.extend(probes.iter().filter(|p| !per_cpu(p)).cloned());
    d["probes"] = Value::Array(out);
    d["host"]["cpu_count"] = json!(n);
    d["host"]["cpus_online"] = json!(format!("0-{}", n - 1));
    d["run"]["cpus"] = json!({"measured": format!("1-{}", n - 1), "housekeeping": "0"});
    if d["host"]["audit"].is_object() {
        d["host"]["audit"]["measured"] = json!(format!("1-{}", n - 1));
    }
    serde_json::to_string(&d).expect("JSON")
}

/// Every line of `text` within `width` columns, or the test fails naming the lines over.
pub fn assert_fits(text: &str, width: usize) {
    let over: Vec<&str> = (text.lines())
        .filter(|l| l.chars().count() > width)
        .collect();
    assert!(over.is_empty(), "lines over {width} columns: {over:#?}");
}
