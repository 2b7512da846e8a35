//! Issue 22: the run matrix. Every command runs under each condition a new user meets:
//! root; uid 65534 under a locked-memory limit of 64 KiB, 8 MiB and none; an affinity
//! mask without the housekeeping CPU; `stress-ng --cpu 2` alongside; no tracefs. Each run
//! ends with an exit code of the README's table (0, 1, 2, 3 or 130), never by a signal; a
//! refusal (2) is one line on stderr; a result, when one is written, is valid and lists
//! the degradations the condition must cause.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::Instant;

use jitterscope::report::ResultFile;

use crate::util::{bin, is_root, measuring, skip, stderr_lines, two_cpus};

/// One command of the matrix: its arguments (`{out}` is replaced by the result's path),
/// whether it writes a result there, whether it locks memory, and whether it asks for a
/// trace (`run` traces by default as root, which `judge` knows).
struct Case {
    args: &'static str,
    saves: bool,
    locks: bool,
    traces: bool,
}

const fn case(args: &'static str, saves: bool, locks: bool, traces: bool) -> Case {
    Case {
        args,
        saves,
        locks,
        traces,
    }
}

/// Every command, each kept to a second or two.
const CASES: &[Case] = &[
    case("noise -a {cpu} -D 300ms -q -o {out}", true, true, false),
    case(
        "noise -a {cpu} -D 300ms --trace -q -o {out}",
        true,
        true,
        true,
    ),
    case("timer -a {cpu} -D 300ms -q -o {out}", true, true, false),
    case(
        "pingpong -D 200ms --mech spin,futex -q -o {out}",
        true,
        true,
        false,
    ),
    case("c2c -q -o {out}", true, true, false),
    case("queue -D 300ms -q -o {out}", true, true, false),
    case("work -a {cpu} -n 20000 -r 1 -q -o {out}", true, true, false),
    case(
        "work -a {cpu} --action memmove:4096 -n 20000 -r 1 -q -o {out}",
        true,
        true,
        false,
    ),
    case(
        "work -a {cpu} --action syscall:getppid -n 20000 -r 1 -q -o {out}",
        true,
        true,
        false,
    ),
    case(
        "work -a {cpu} --action udp-send:64 -n 20000 -r 1 -q -o {out}",
        true,
        true,
        false,
    ),
    case("syscalls -D 300ms -q -o {out}", true, true, false),
    case("ptp -q", false, false, false),
    case("audit", false, false, false),
    case(
        "run --step-time 300ms -q -o {out} --out-dir {dir}",
        true,
        true,
        false,
    ),
    case("selftest --quick", false, true, true),
    case("monitor -D 2s --listen 127.0.0.1:0", false, true, false),
];

/// How a condition runs the binary.
#[derive(Clone, Copy, Debug)]
enum Condition {
    Root,
    /// uid 65534 under this RLIMIT_MEMLOCK (None: unlimited).
    Nobody(Option<u64>),
    /// Allowed only the measured CPU, not the housekeeping one.
    Taskset,
    /// Two CPU hogs alongside.
    Stress,
    /// A mount namespace with /sys/kernel hidden under an empty read-only tmpfs.
    NoTracefs,
}

impl Condition {
    fn command(self, cpu: usize) -> Command {
        let bin = bin();
        match self {
            Condition::Root | Condition::Stress => Command::new(bin),
            Condition::Nobody(limit) => {
                let l = limit.map_or("unlimited".to_string(), |b| b.to_string());
                let mut c = Command::new("prlimit");
                c.arg(format!("--memlock={l}:{l}"))
                    .args([
                        "setpriv",
                        "--reuid=65534",
                        "--regid=65534",
                        "--clear-groups",
                    ])
                    .arg(bin);
                c
            }
            Condition::Taskset => {
                let mut c = Command::new("taskset");
                c.args(["-c", &cpu.to_string()]).arg(bin);
                c
            }
            Condition::NoTracefs => {
                let mut c = Command::new("unshare");
                c.args(["-m", "sh", "-c", HIDE_TRACEFS]).arg(bin);
                c
            }
        }
    }

    /// Why it cannot run here, if it cannot.
    fn unavailable(self) -> Option<String> {
        let works = |c: &mut Command| c.output().is_ok_and(|o| o.status.success());
        match self {
            Condition::Root => None,
            Condition::Nobody(limit) => {
                let l = limit.map_or("unlimited".to_string(), |b| b.to_string());
                let probe = Command::new("prlimit")
                    .arg(format!("--memlock={l}:{l}"))
                    .args([
                        "setpriv",
                        "--reuid=65534",
                        "--regid=65534",
                        "--clear-groups",
                        "true",
                    ])
                    .output();
                match probe {
                    Ok(o) if o.status.success() => None,
                    Ok(o) => Some(format!(
                        "prlimit --memlock={l} with setpriv fails here: {}",
                        String::from_utf8_lossy(&o.stderr).trim()
                    )),
                    Err(e) => Some(format!("prlimit or setpriv is missing: {e}")),
                }
            }
            Condition::Taskset => (!works(Command::new("taskset").args(["-c", "0", "true"])))
                .then(|| "taskset is missing".into()),
            Condition::Stress => (!works(Command::new("stress-ng").arg("--version")))
                .then(|| "stress-ng is not installed (apt-get install stress-ng)".into()),
            Condition::NoTracefs => {
                let ok =
                    works(Command::new("unshare").args(["-m", "sh", "-c", HIDE_TRACEFS, "true"]));
                (!ok).then(|| "cannot make a mount namespace without tracefs (unshare -m)".into())
            }
        }
    }
}

/// Unmounts tracefs and debugfs in the namespace and covers /sys/kernel, so that
/// tracefs can be neither found nor mounted; then runs "$0" "$@".
const HIDE_TRACEFS: &str = "umount -R /sys/kernel/tracing 2>/dev/null; \
     umount -R /sys/kernel/debug 2>/dev/null; \
     mount -t tmpfs -o ro none /sys/kernel && exec \"$0\" \"$@\"";

/// Runs every case under `cond`; returns the failures, in words.
fn run_matrix(name: &str, cond: Condition) {
    if !is_root() {
        return skip(
            name,
            "the matrix switches users and namespaces, which needs root",
        );
    }
    let Some((cpu, _)) = two_cpus() else {
        return skip(name, "needs two CPUs: one measured, one for housekeeping");
    };
    if let Some(why) = cond.unavailable() {
        return skip(name, &why);
    }
    let _m = measuring();
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let _stress = matches!(cond, Condition::Stress).then(StressGuard::start);
    let t0 = Instant::now();
    let mut failures = Vec::new();
    for (i, c) in CASES.iter().enumerate() {
        let out = dir.path().join(format!("{i}.json"));
        let args = c
            .args
            .replace("{cpu}", &cpu.to_string())
            .replace("{out}", out.to_str().unwrap())
            .replace("{dir}", dir.path().to_str().unwrap());
        let argv: Vec<&str> = args.split_whitespace().collect();
        let o = cond
            .command(cpu)
            .args(&argv)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        if let Err(e) = judge(cond, c, &o, &out) {
            failures.push(format!("{args}: {e}"));
        }
    }
    eprintln!(
        "{name}: {} commands under {cond:?} in {:.1} s",
        CASES.len(),
        t0.elapsed().as_secs_f64()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// One run's exit, stderr and result against what the condition must give.
fn judge(cond: Condition, c: &Case, o: &Output, out: &Path) -> Result<(), String> {
    let lines = stderr_lines(o);
    let code = o
        .status
        .code()
        .ok_or_else(|| format!("ended by a signal ({:?}); stderr: {lines:?}", o.status))?;
    match code {
        0 | 1 | 3 | 130 => {}
        2 => {
            let refused = lines.len() == 1 && lines[0].starts_with("jitterscope: ");
            // Refusing is right only where the condition leaves nothing to measure on:
            // a single allowed CPU, which a spinner would take from the coordinator.
            if !(refused && matches!(cond, Condition::Taskset)) {
                return Err(format!("exit 2: {lines:?}"));
            }
            return Ok(());
        }
        n => return Err(format!("exit {n}, not in the README's table: {lines:?}")),
    }
    if !c.saves {
        return Ok(());
    }
    let r = ResultFile::read(out).map_err(|e| format!("the result is not valid: {e}"))?;
    let kinds: Vec<&str> = r.run.degraded.iter().map(|d| d.kind.as_str()).collect();
    let must = match cond {
        Condition::Nobody(Some(_)) if c.locks => Some("mlock-failed"),
        Condition::NoTracefs if c.traces || c.args.starts_with("run") => Some("trace-unavailable"),
        Condition::Nobody(_) if c.traces => Some("trace-unavailable"),
        _ => None,
    };
    match must {
        Some(kind) if !kinds.contains(&kind) => {
            Err(format!("the result does not list {kind}: {kinds:?}"))
        }
        _ => Ok(()),
    }
}

/// `stress-ng --cpu 2`, stopped on drop.
struct StressGuard(Child);

impl StressGuard {
    fn start() -> StressGuard {
        let child = Command::new("stress-ng")
            .args(["--cpu", "2", "--timeout", "600", "--quiet"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("stress-ng starts");
        StressGuard(child)
    }
}

impl Drop for StressGuard {
    fn drop(&mut self) {
        // SIGTERM lets stress-ng stop its workers; then reap it.
        let pid = rustix::process::Pid::from_raw(self.0.id() as i32).unwrap();
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        let _ = self.0.wait();
    }
}

#[test]
fn issue22_matrix_as_root() {
    run_matrix("issue22_matrix_as_root", Condition::Root);
}

#[test]
fn issue22_matrix_as_nobody_with_64_kib_locked() {
    run_matrix(
        "issue22_matrix_as_nobody_with_64_kib_locked",
        Condition::Nobody(Some(64 * 1024)),
    );
}

#[test]
fn issue22_matrix_as_nobody_with_8_mib_locked() {
    run_matrix(
        "issue22_matrix_as_nobody_with_8_mib_locked",
        Condition::Nobody(Some(8 << 20)),
    );
}

#[test]
fn issue22_matrix_as_nobody_unlimited() {
    run_matrix(
        "issue22_matrix_as_nobody_unlimited",
        Condition::Nobody(None),
    );
}

#[test]
fn issue22_matrix_without_the_housekeeping_cpu() {
    run_matrix(
        "issue22_matrix_without_the_housekeeping_cpu",
        Condition::Taskset,
    );
}

#[test]
fn issue22_matrix_under_stress() {
    run_matrix("issue22_matrix_under_stress", Condition::Stress);
}

#[test]
fn issue22_matrix_without_tracefs() {
    run_matrix("issue22_matrix_without_tracefs", Condition::NoTracefs);
}
