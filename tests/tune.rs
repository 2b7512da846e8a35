//! `tune` (issue 23): classification on recorded trees, restoration after a run is
//! killed, and the ground truth that turning RT throttling off is kept.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::{self, bin, is_root, jitterscope, measuring, skip};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/audit")
        .join(name)
}

/// The plan line of `id` and the detail line under it.
fn class_of(plan: &str, id: &str) -> String {
    let lines: Vec<&str> = plan.lines().collect();
    let i = lines
        .iter()
        .position(|l| l.split_whitespace().nth(1) == Some(id))
        .unwrap_or_else(|| panic!("{id} is not in the plan:\n{plan}"));
    format!("{} | {}", lines[i], lines.get(i + 1).unwrap_or(&""))
}

#[test]
fn issue23_each_class_on_recorded_trees() {
    let out = jitterscope(&["tune", "--dry-run", "-a", "1", "--root"])
        .status
        .code();
    assert_eq!(out, Some(2), "--root needs a value");
    let plan = |name: &str| {
        let root = fixture(name);
        let o = jitterscope(&[
            "tune",
            "--dry-run",
            "-a",
            "1",
            "--root",
            root.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).unwrap()
    };
    let managed = plan("managed-irq");
    let c = class_of(&managed, "irq-managed-on-measured");
    assert!(c.contains("not applicable") && c.contains("EIO"), "{c}");
    assert!(class_of(&managed, "irq-on-measured-cpus").contains("applies now"));
    assert!(class_of(&managed, "managed-irq-not-isolated").contains("boot-time only"));
    let nohz = plan("no-nohz-full");
    let c = class_of(&nohz, "nohz-full-unsupported");
    assert!(
        c.contains("needs another kernel") && c.contains("CONFIG_NO_HZ_FULL=y"),
        "{c}"
    );
    assert!(class_of(&nohz, "isolated-missing").contains("isolcpus=1"));
}

#[test]
fn issue23_on_this_host_the_managed_irq_gets_the_kernels_answer() {
    if !is_root() {
        return skip("issue23 managed irq", "needs root to ask the kernel");
    }
    let o = jitterscope(&["tune", "--dry-run", "-a", "1"]);
    assert!(o.status.success());
    let plan = String::from_utf8(o.stdout).unwrap();
    if !plan.contains("irq-managed-on-measured") {
        return skip(
            "issue23 managed irq",
            "no managed IRQ on the measured CPU here",
        );
    }
    let c = class_of(&plan, "irq-managed-on-measured");
    assert!(
        c.contains("not applicable") && c.contains("the kernel answers"),
        "{c}"
    );
    assert!(class_of(&plan, "nohz-full-unsupported").contains("needs another kernel"));
}

/// Every file of a tree, by path.
fn snapshot(root: &Path) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else {
                out.insert(p.clone(), std::fs::read_to_string(&p).unwrap_or_default());
            }
        }
    }
    out
}

fn copy_tree(from: &Path, to: &Path) {
    for (p, text) in snapshot(from) {
        let dest = to.join(p.strip_prefix(from).unwrap());
        std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
        std::fs::write(dest, text).unwrap();
    }
    // Settings the steps write, as a live kernel shows them.
    for (p, v) in [
        ("proc/sys/kernel/sched_rt_runtime_us", "950000\n"),
        ("proc/sys/kernel/timer_migration", "1\n"),
        ("proc/sys/vm/stat_interval", "1\n"),
        (
            "sys/kernel/mm/transparent_hugepage/enabled",
            "always [madvise] never\n",
        ),
    ] {
        let dest = to.join(p);
        std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
        std::fs::write(dest, v).unwrap();
    }
}

/// Trials of a tune run on a copy of a recorded tree, each stopped at a chosen moment by
/// SIGINT, SIGTERM or SIGKILL (then `tune --restore`): afterwards every file reads as
/// before and no journal remains. The tree is a copy, so no trial touches the host's
/// settings; the blocks still measure CPU 1 (at SCHED_OTHER).
#[test]
fn issue23_killed_runs_leave_every_file_as_before() {
    if !is_root() {
        return skip("issue23 restoration", "tune runs as root only");
    }
    let _m = measuring();
    let trials: usize = std::env::var("JITTERSCOPE_TUNE_TRIALS")
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or(6);
    let mut seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos() as u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for trial in 0..trials {
        let dir = tempfile::tempdir().unwrap();
        copy_tree(&fixture("managed-irq"), dir.path());
        let before = snapshot(dir.path());
        let signal = ["INT", "TERM", "KILL"][trial % 3];
        let wait = Duration::from_millis(150 + next() % 1500);
        let mut child = Command::new(bin())
            .args([
                "tune", "--yes", "-a", "1", "--policy", "other", "--block", "100ms",
            ])
            .args(["--blocks", "2", "--rest", "20ms", "--root"])
            .arg(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(wait);
        let _ = Command::new("kill")
            .args([format!("-{signal}"), child.id().to_string()])
            .status();
        let started = Instant::now();
        let status = child.wait().unwrap();
        assert!(started.elapsed() < Duration::from_secs(10));
        if signal == "KILL" {
            let o = jitterscope(&["tune", "--restore", "--root", dir.path().to_str().unwrap()]);
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        }
        let after = snapshot(dir.path());
        let journal = dir.path().join("run/jitterscope/tune.journal");
        assert!(
            !journal.exists(),
            "trial {trial} ({signal} at {wait:?}): a journal remains"
        );
        // As the kernel reads them: a sysfs or procfs file prints its value with a
        // newline (and a choice list with the choice bracketed) whatever was written.
        let value = |t: &str| jitterscope::system::tune::normalize(t);
        for (p, text) in &before {
            assert_eq!(
                after.get(p).map(|t| value(t)),
                Some(value(text)),
                "trial {trial} ({signal} at {wait:?}, {status}): {} changed",
                p.display()
            );
        }
    }
}

/// Ground truth: with noise at SCHED_FIFO on one CPU, RT throttling takes about 50 ms of
/// every second; turning it off must be kept, the per-block max falling from tens of ms.
/// Blocks of 2 s: a spinner that starts late in a throttling period only meets the
/// throttle in the next one, so shorter blocks miss it now and then.
#[test]
#[ignore = "on 6.12+ kernels the fair server (dl_server) still takes up to 50 ms/s from a \
            SCHED_FIFO spinner whenever a fair task waits on its CPU, so with other tests \
            around a step block shows tens of ms too; run alone with --ignored"]
fn issue23_turning_rt_throttling_off_is_kept() {
    if !is_root() {
        return skip("issue23 rt throttling", "needs root");
    }
    if let Err(why) = util::fifo_available() {
        return skip("issue23 rt throttling", &why);
    }
    let knob = "/proc/sys/kernel/sched_rt_runtime_us";
    let was = std::fs::read_to_string(knob).unwrap();
    if was.trim() == "-1" {
        return skip("issue23 rt throttling", "RT throttling is already off");
    }
    let stalls = || {
        let o = Command::new("dmesg")
            .output()
            .map(|o| o.stdout)
            .unwrap_or_default();
        let log = String::from_utf8_lossy(&o);
        log.matches("soft lockup").count()
            + log.matches("rcu_sched self-detected stall").count()
            + log.matches("rcu: INFO").count()
    };
    let stalls_before = stalls();
    let _m = measuring();
    let r = util::json_result(&[
        "tune",
        "-a",
        "1",
        "--step",
        "rt-throttling-on",
        "--metric",
        "max",
        "--block",
        "1100ms",
        "--blocks",
        "5",
        "--rest",
        "200ms",
        "--yes",
    ]);
    assert_eq!(std::fs::read_to_string(knob).unwrap(), was, "restored");
    let t = r.tune.expect("a tune entry");
    let step = &t.steps[0];
    let j = step.judgement.expect("judged");
    eprintln!(
        "rt-throttling-on: {:?}, per-block max {:.0} → {:.0} µs, p {:.4}",
        j.decision,
        j.baseline_median / 1e3,
        j.step_median / 1e3,
        j.p
    );
    assert_eq!(
        j.decision,
        jitterscope::system::tune::experiment::Decision::Kept
    );
    assert!(j.baseline_median > 10e6, "the throttle shows: {j:?}");
    assert!(j.step_median < 5e6, "and goes: {j:?}");
    assert!(t.restored.iter().all(|r| r.ok));
    assert_eq!(
        stalls(),
        stalls_before,
        "no soft lockup or RCU stall in the kernel log"
    );
}
