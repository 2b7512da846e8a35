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
    // A recorded tree has no kernel to ask: the refusal, with no errno made up.
    assert!(
        c.contains("not applicable") && c.contains("refuses writes") && !c.contains("EIO"),
        "{c}"
    );
    assert!(class_of(&managed, "irq-on-measured-cpus").contains("applies now"));
    assert!(class_of(&managed, "managed-irq-not-isolated").contains("boot-time only"));
    let nohz = plan("no-nohz-full");
    let c = class_of(&nohz, "nohz-full-unsupported");
    assert!(
        c.contains("needs another kernel") && c.contains("CONFIG_NO_HZ_FULL=y"),
        "{c}"
    );
    assert!(class_of(&nohz, "isolated-missing").contains("isolcpus=1"));
    // The governor step, where the guest has no cpufreq driver.
    let guest = plan("guest-no-cpufreq");
    let c = class_of(&guest, "cpufreq-none");
    assert!(
        c.contains("not applicable") && c.contains("no cpufreq") && c.contains("ENOENT"),
        "{c}"
    );
}

/// Each movable kernel thread's allowed CPUs, by pid and start time (a pid the kernel
/// reuses meanwhile is another thread).
fn kthread_masks() -> BTreeMap<(u32, String), String> {
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let read =
            |f: &str| std::fs::read_to_string(format!("/proc/{pid}/{f}")).unwrap_or_default();
        let status = read("status");
        let field = |n: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(n))
                .map(str::trim)
        };
        if field("PPid:") != Some("2") {
            continue;
        }
        let start = read("stat")
            .rsplit_once(')')
            .map_or(String::new(), |(_, r)| {
                r.split_whitespace().nth(19).unwrap_or("").to_string()
            });
        out.insert(
            (pid, start),
            field("Cpus_allowed_list:").unwrap_or("").to_string(),
        );
    }
    out
}

#[test]
fn issue23_kthreads_are_moved_and_moved_back() {
    if !is_root() {
        return skip("issue23 kthreads", "needs root");
    }
    let _m = measuring();
    let before = kthread_masks();
    let r = util::json_result(&[
        "tune",
        "-a",
        "1",
        "--step",
        "kthreads-on-measured",
        "--block",
        "300ms",
        "--blocks",
        "5",
        "--rest",
        "100ms",
        "--yes",
    ]);
    let after = kthread_masks();
    let t = r.tune.expect("a tune entry");
    let Some(step) = t.steps.first() else {
        return skip("issue23 kthreads", "no kernel thread may run on CPU 1 here");
    };
    eprintln!(
        "kthreads-on-measured: {}, {} reverts",
        step.step.class,
        t.restored.len()
    );
    assert!(step.judgement.is_some(), "judged: {:?}", step.step.class);
    assert!(t.restored.iter().all(|r| r.ok), "{:?}", t.restored);
    // Threads that lived through the run have their masks back.
    for (k, mask) in &before {
        if let Some(now) = after.get(k) {
            assert_eq!(now, mask, "pid {} restored", k.0);
        }
    }
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
    // The errno quoted is the one the kernel gives this test for the same write (of the
    // value the file holds, which changes nothing): EIO or EPERM, by kernel version.
    let file = c
        .split_whitespace()
        .find(|w| w.starts_with("/proc/irq/"))
        .map(|w| w.trim_end_matches(':'))
        .unwrap_or_else(|| panic!("no IRQ file in {c}"));
    let now = std::fs::read_to_string(file).unwrap();
    let errno = std::fs::write(file, now.trim())
        .expect_err("the kernel refuses a managed IRQ")
        .raw_os_error()
        .unwrap();
    let name = jitterscope::probes::ptp::errno_name(errno);
    eprintln!("{file}: the kernel answers {name}");
    assert!(
        c.contains(&format!("the kernel answers {name} (")),
        "{name}: {c}"
    );
    assert!(class_of(&plan, "nohz-full-unsupported").contains("needs another kernel"));
}

/// Issue 23: `--probe timer` measures each block with cyclictest's loop; the entry says
/// so and each block has the wake-ups' figures. A sham step changes nothing, so the run
/// is safe on the live host; a block too short for its metric is bad input.
#[test]
fn issue23_tune_judges_with_the_timer_probe() {
    util::assert_bad_input(&[
        &[
            "tune",
            "--dry-run",
            "-a",
            "1",
            "--probe",
            "timer",
            "--block",
            "500ms",
            "--metric",
            "p99.9",
        ],
        &["tune", "--dry-run", "-a", "1", "--probe", "cyclic"],
        &[
            "tune",
            "--dry-run",
            "-a",
            "1",
            "--probe",
            "timer",
            "--trace",
        ],
    ]);
    if !is_root() {
        return skip("issue23 timer probe", "tune runs as root only");
    }
    let _m = measuring();
    let r = util::json_result(&[
        "tune", "--yes", "-a", "1", "--probe", "timer", "--step", "sham", "--metric", "p99",
        "--block", "200ms", "--blocks", "2", "--rest", "20ms",
    ]);
    let t = r.tune.expect("a tune entry");
    assert_eq!(t.probe, "timer");
    let sham = t
        .steps
        .iter()
        .find(|s| s.step.id == "sham")
        .expect("the sham step");
    assert_eq!(sham.blocks.len(), 4, "{sham:?}");
    for b in &sham.blocks {
        // One wake-up a ms: about 200 a block, each a few µs late at least.
        assert!((150..=210).contains(&b.wakeups), "{b:?}");
        assert!(
            b.p50_ns > 0 && b.p50_ns <= b.p99_ns && b.p99_ns <= b.max_ns,
            "{b:?}"
        );
        assert!(b.lost_ns_per_s > 0, "{b:?}");
    }
    assert!(sham.judgement.is_some(), "judged");
}

/// Issue 23: with `--trace`, a traced baseline block orders the steps by the share of
/// the lost time their causes take, and each measured step records that share before
/// and after. Two sysctl steps at SCHED_OTHER, in short blocks; both are reverted.
#[test]
fn issue23_traced_tune_shows_each_steps_cause_share() {
    // Held before tracefs is tried (as in tests/trace.rs).
    let _m = measuring();
    if !is_root() || !util::tracefs_usable() {
        return skip("issue23 traced tune", "needs root and tracefs");
    }
    let steps = "stat-interval-short,timer-migration-on";
    let o = jitterscope(&[
        "tune", "--yes", "-a", "1", "--policy", "other", "--trace", "--step", steps, "--block",
        "300ms", "--blocks", "2", "--rest", "20ms", "--json",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let r = jitterscope::report::ResultFile::parse(&String::from_utf8_lossy(&o.stdout)).unwrap();
    let t = r.tune.expect("a tune entry");
    let measured: Vec<_> = t.steps.iter().filter(|s| !s.blocks.is_empty()).collect();
    if measured.is_empty() {
        return skip(
            "issue23 traced tune",
            "neither sysctl step applies on this host",
        );
    }
    let order = err
        .lines()
        .find(|l| l.starts_with("by traced cause share: "))
        .unwrap_or_else(|| panic!("no order line:\n{err}"));
    eprintln!("{order}");
    for s in &measured {
        let (b, a) = (s.share_before_pct, s.share_after_pct);
        eprintln!("{}: {b:?} → {a:?}", s.step.id);
        for p in [b, a] {
            let p = p.unwrap_or_else(|| panic!("{}: no share: {s:?}", s.step.id));
            assert!((0.0..=100.0).contains(&p), "{p}");
        }
        assert!(err.contains("of lost time"), "{err}");
    }
    // The steps ran in the order the line gives.
    let ids: Vec<&str> = t.steps.iter().map(|s| s.step.id.as_str()).collect();
    let listed: Vec<&str> = order["by traced cause share: ".len()..]
        .split(", ")
        .map(|x| x.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(ids, listed, "{order}");
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
        // A movable kernel thread, for the kthread step: in a tree its status file's
        // mask stands in for the kernel's.
        (
            "proc/20/status",
            "Name:\tkhugepaged\nPPid:\t2\nCpus_allowed_list:\t0-1\n",
        ),
        (
            "proc/20/stat",
            "20 (khugepaged) S 2 0 0 0 -1 2129984 0 0 0 0 0 0 0 0 0 0 0 0 1020\n",
        ),
        ("proc/20/comm", "khugepaged\n"),
    ] {
        let dest = to.join(p);
        std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
        std::fs::write(dest, v).unwrap();
    }
}

/// The ids of the steps that apply now on the tree at `root`.
fn applying_steps(root: &Path) -> Vec<String> {
    let o = jitterscope(&[
        "tune",
        "--dry-run",
        "-a",
        "1",
        "--root",
        root.to_str().unwrap(),
    ]);
    let plan = String::from_utf8_lossy(&o.stdout).to_string();
    let ids: Vec<String> = plan
        .lines()
        .filter(|l| l.ends_with("applies now"))
        .filter_map(|l| l.split_whitespace().nth(1).map(String::from))
        .collect();
    assert!(ids.iter().any(|i| i == "kthreads-on-measured"), "{plan}");
    ids
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
        // A random step of the tree's plan, as issue 23 asks: each is reached, the
        // kthread move included, rather than only the first few the plan lists.
        let steps = applying_steps(dir.path());
        let step = &steps[next() as usize % steps.len()];
        let signal = ["INT", "TERM", "KILL"][trial % 3];
        // One step runs about 1 s here: the kill lands while it runs, or just after.
        let wait = Duration::from_millis(150 + next() % 1000);
        let mut child = Command::new(bin())
            .args([
                "tune", "--yes", "-a", "1", "--policy", "other", "--block", "100ms",
            ])
            .args(["--blocks", "2", "--rest", "20ms", "--step", step, "--root"])
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
        eprintln!("trial {trial}: {step}, {signal} at {wait:?}: {status}");
        assert!(started.elapsed() < Duration::from_secs(10));
        if signal == "KILL" {
            let o = jitterscope(&["tune", "--restore", "--root", dir.path().to_str().unwrap()]);
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        }
        let after = snapshot(dir.path());
        let journal = dir.path().join("run/jitterscope/tune.journal");
        assert!(
            !journal.exists(),
            "trial {trial} ({step}, {signal} at {wait:?}): a journal remains"
        );
        // As the kernel reads them: a sysfs or procfs file prints its value with a
        // newline (and a choice list with the choice bracketed) whatever was written.
        let value = |t: &str| jitterscope::system::tune::normalize(t);
        for (p, text) in &before {
            assert_eq!(
                after.get(p).map(|t| value(t)),
                Some(value(text)),
                "trial {trial} ({step}, {signal} at {wait:?}, {status}): {} changed",
                p.display()
            );
        }
    }
}

/// Ground truth: with noise at SCHED_FIFO on one CPU, RT throttling takes about 50 ms of
/// every second; turning it off must be kept, the per-block max falling from tens of ms.
/// As a user runs it: the step's blocks are one throttling period after a period of
/// lead-in, judged on the per-block max (the step's own metric), 8 pairs and more while
/// undecided (issue 49).
#[test]
#[ignore = "on 6.12+ kernels the fair server (dl_server) still takes up to 50 ms/s from a \
            SCHED_FIFO spinner whenever a fair task waits on its CPU, so with other tests \
            around a step block shows tens of ms too; scripts/test runs it alone"]
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
    // Tasks running or runnable, sampled through the run (/proc/stat's procs_running):
    // more than the CPUs means a task waited; then the fair server lends waiting fair
    // tasks 50 ms/s whatever RT throttling is, and the step cannot help.
    let done = std::sync::atomic::AtomicBool::new(false);
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    let (r, crowded) = std::thread::scope(|s| {
        let sampler = s.spawn(|| {
            let mut over = (0u32, 0u32);
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
                let running: usize = (stat.lines())
                    .find_map(|l| l.strip_prefix("procs_running "))
                    .and_then(|n| n.trim().parse().ok())
                    .unwrap_or(0);
                // The sampler itself is one of them.
                over.0 += u32::from(running > cpus + 1);
                over.1 += 1;
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            over
        });
        let r = util::json_result(&["tune", "-a", "1", "--step", "rt-throttling-on", "--yes"]);
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        let (over, all) = sampler.join().unwrap();
        (r, over as f64 / all.max(1) as f64)
    });
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
    eprintln!(
        "more tasks runnable than CPUs in {:.0} % of the samples",
        crowded * 100.0
    );
    let helped =
        j.decision == jitterscope::system::tune::experiment::Decision::Kept && j.step_median < 5e6;
    // Crowded most of the run: a fair task waited nearly every period.
    if !helped && crowded > 0.5 {
        return skip(
            "issue23 rt throttling",
            &format!(
                "more tasks were runnable than CPUs in {:.0} % of the run (a build beside?): \
                 the fair server lends waiting fair tasks 50 ms/s with or without RT \
                 throttling, so the step could not help here",
                crowded * 100.0
            ),
        );
    }
    assert_eq!(
        j.decision,
        jitterscope::system::tune::experiment::Decision::Kept
    );
    assert!(j.baseline_median > 10e6, "the throttle shows: {j:?}");
    // Crowded part of the run (41 % beside a build loop): the throttle goes, and the fair
    // server's share for the waiting fair tasks stays (16 ms of 48 ms there).
    if crowded > 0.1 {
        eprintln!("crowded: the step must halve the per-block max at least");
        assert!(j.step_median * 2.0 <= j.baseline_median, "and goes: {j:?}");
    } else {
        assert!(j.step_median < 5e6, "and goes: {j:?}");
    }
    assert!(t.restored.iter().all(|r| r.ok));
    assert_eq!(
        stalls(),
        stalls_before,
        "no soft lockup or RCU stall in the kernel log"
    );
}

/// A kept run, written by hand: three sysctls, an IRQ's affinity and PM QoS kept, one
/// step inconclusive, one boot-only. `--export` writes from such an entry.
fn kept_entry() -> jitterscope::system::tune::record::TuneEntry {
    use jitterscope::system::audit::Severity;
    use jitterscope::system::tune::experiment::{Decision, judge};
    use jitterscope::system::tune::record::{Metric, StepRun, TuneEntry};
    use jitterscope::system::tune::{Change, Class, Step};
    let kept = judge(&[9, 9, 9, 9, 9, 9], &[1, 1, 1, 1, 1, 1], 0.01);
    assert_eq!(kept.decision, Decision::Kept);
    let same = judge(&[1, 2, 3, 4, 5, 6], &[1, 2, 3, 4, 5, 6], 0.01);
    let step = |id: &str, changes: Vec<Change>, class: Class, j| StepRun {
        step: Step {
            id: id.into(),
            severity: Severity::Warn,
            seen: String::new(),
            changes,
            class,
            removes_safety_net: false,
        },
        values: Vec::new(),
        blocks: Vec::new(),
        judgement: j,
        share_before_pct: None,
        share_after_pct: None,
        timing: None,
        metric: None,
    };
    let w = |path: &str, value: &str| Change::Write {
        path: path.into(),
        value: value.into(),
    };
    TuneEntry {
        probe: "noise".into(),
        metric: Metric::Max,
        block_ns: 1_000_000_000,
        pairs: 6,
        max_pairs: 18,
        rest_ns: 300_000_000,
        alpha: 0.01,
        steps: vec![
            step(
                "rt-throttling-on",
                vec![w("/proc/sys/kernel/sched_rt_runtime_us", "-1")],
                Class::Applies,
                Some(kept),
            ),
            step(
                "timer-migration-on",
                vec![w("/proc/sys/kernel/timer_migration", "0")],
                Class::Applies,
                Some(kept),
            ),
            step(
                "stat-interval-short",
                vec![w("/proc/sys/vm/stat_interval", "10")],
                Class::Applies,
                Some(kept),
            ),
            step(
                "hung-task-on",
                vec![w("/proc/sys/kernel/hung_task_timeout_secs", "0")],
                Class::Applies,
                Some(same),
            ),
            step(
                "irq-on-measured-cpus",
                vec![w("/proc/irq/26/smp_affinity_list", "0")],
                Class::Applies,
                Some(kept),
            ),
            step(
                "idle-haltpoll",
                vec![Change::PmQos { value_us: 0 }],
                Class::Applies,
                Some(kept),
            ),
            step(
                "isolated-missing",
                Vec::new(),
                Class::BootOnly {
                    fragment: "isolcpus=1".into(),
                },
                None,
            ),
        ],
        staircase: Vec::new(),
        restored: Vec::new(),
        kept_applied: false,
    }
}

/// Writes the export of `kept_entry` to a fresh directory, one per test (they run at once).
fn exported(test: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("jitterscope-export-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    for f in jitterscope::system::tune::export::files(&kept_entry(), "jitterscope tune --export") {
        let p = dir.join(f.path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, f.text).unwrap();
    }
    dir
}

#[test]
fn issue23_export_needs_a_run() {
    let o = jitterscope(&["tune", "--dry-run", "--export", "/tmp/x", "-a", "1"]);
    assert_eq!(o.status.code(), Some(2));
    let err = util::stderr_lines(&o);
    assert_eq!(err.len(), 1, "{err:?}");
    assert!(err[0].starts_with("jitterscope: --export /tmp/x: a dry run keeps nothing"));
}

/// tuned ships no offline checker (`tuned-adm verify` asks the running daemon), so the
/// profile is loaded with tuned's own Loader, the code the daemon loads profiles with.
#[test]
fn issue23_tuned_loads_the_exported_profile() {
    let has_tuned = || {
        Command::new("/usr/bin/python3")
            .args(["-Es", "-c", "import tuned.profiles.loader"])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if !has_tuned() {
        if !is_root() || Command::new("apt-get").arg("--version").output().is_err() {
            return skip(
                "issue23 tuned profile",
                "tuned is not installed (needs root and apt)",
            );
        }
        let _ = Command::new("apt-get")
            .args(["install", "-y", "-q", "tuned"])
            .stdout(Stdio::null())
            .status();
        if !has_tuned() {
            return skip("issue23 tuned profile", "apt-get install tuned failed");
        }
    }
    let dir = exported("tuned");
    let script = "import sys\n\
        import tuned.profiles.locator as l, tuned.profiles.loader as d\n\
        import tuned.profiles.factory as f, tuned.profiles.merger as m\n\
        import tuned.profiles.variables as v\n\
        from tuned.utils.global_config import GlobalConfig\n\
        p = d.Loader(l.Locator([sys.argv[1]]), f.Factory(), m.Merger(), GlobalConfig(),\n\
        \x20   v.Variables()).load(['jitterscope'])\n\
        for n, u in p.units.items():\n\
        \x20   for k, x in u.options.items(): print(n, k, x)\n";
    let o = Command::new("/usr/bin/python3")
        .args(["-Es", "-c", script, dir.to_str().unwrap()])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for line in [
        "cpu force_latency 0",
        "sysctl kernel.sched_rt_runtime_us -1",
        "sysctl kernel.timer_migration 0",
        "sysctl vm.stat_interval 10",
    ] {
        assert!(out.lines().any(|l| l == line), "{line} not in:\n{out}");
    }
    assert!(!out.contains("hung_task"), "not kept:\n{out}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn issue23_systemd_accepts_the_exported_unit() {
    if Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_err()
    {
        return skip("issue23 unit", "no systemd-analyze here");
    }
    let dir = exported("unit");
    let unit = dir.join("systemd/jitterscope-tune.service");
    let o = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&unit)
        .output()
        .unwrap();
    // verify exits 0 on many warnings: a warning about the unit is a failure too.
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.success() && !err.contains("jitterscope-tune"),
        "{err}"
    );
    let sh = std::fs::read_to_string(dir.join("jitterscope-tune.sh")).unwrap();
    let o = Command::new("sh")
        .arg("-n")
        .arg(dir.join("jitterscope-tune.sh"))
        .output();
    assert!(o.unwrap().status.success(), "sh -n rejects:\n{sh}");
    let _ = std::fs::remove_dir_all(dir);
}

/// Writes the sysctls back when dropped, so that a failed assertion restores them too.
struct Sysctls(Vec<(String, String)>);

impl Drop for Sysctls {
    fn drop(&mut self) {
        for (k, v) in &self.0 {
            let _ = Command::new("sysctl")
                .arg("-q")
                .arg(format!("{k}={v}"))
                .status();
        }
    }
}

fn sysctl(key: &str) -> String {
    let o = Command::new("sysctl").args(["-n", key]).output().unwrap();
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

#[test]
fn issue23_the_applied_sysctl_d_file_makes_its_steps_done() {
    if !is_root() || Command::new("sysctl").arg("--version").output().is_err() {
        return skip(
            "issue23 sysctl.d",
            "needs root and sysctl to apply the file",
        );
    }
    let _m = measuring();
    let dir = exported("sysctl");
    let keys = [
        "kernel.sched_rt_runtime_us",
        "kernel.timer_migration",
        "vm.stat_interval",
    ];
    let before: Vec<(String, String)> = keys.iter().map(|k| (k.to_string(), sysctl(k))).collect();
    {
        let _back = Sysctls(before.clone());
        let o = Command::new("sysctl")
            .arg("-p")
            .arg(dir.join("sysctl.d/90-jitterscope.conf"))
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(sysctl("kernel.sched_rt_runtime_us"), "-1");
        let o = jitterscope(&["tune", "--dry-run", "-a", "1"]);
        let plan = String::from_utf8_lossy(&o.stdout).to_string();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        // A fixed finding leaves the audit (and so the plan), or stays as already done.
        for id in [
            "rt-throttling-on",
            "timer-migration-on",
            "stat-interval-short",
        ] {
            let line = plan
                .lines()
                .find(|l| l.split_whitespace().nth(1) == Some(id));
            assert!(
                line.is_none_or(|l| l.contains("already done")),
                "{id} still to do:\n{plan}"
            );
        }
    }
    for (k, v) in &before {
        assert_eq!(&sysctl(k), v, "{k} not restored");
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// Issue 23: each fix a tune step applies at run time ends with the command that tries
/// it; the managed IRQ (no run-time fix) and boot-only fixes do not.
#[test]
fn issue23_audit_fixes_end_with_the_tune_command() {
    let root = fixture("managed-irq");
    let o = jitterscope(&["audit", "-a", "1", "--root", root.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8(o.stdout).unwrap();
    let after = |id: &str| -> Vec<String> {
        let mut lines = text
            .lines()
            .skip_while(|l| !l.contains(&format!(" {id}: ")));
        lines.next();
        lines
            .take_while(|l| l.starts_with("        "))
            .map(str::to_string)
            .collect()
    };
    let irq = after("irq-on-measured-cpus");
    assert_eq!(
        irq.last().map(String::as_str),
        Some("        try it: jitterscope tune --step irq-on-measured-cpus"),
        "{irq:?}"
    );
    for id in ["irq-managed-on-measured", "managed-irq-not-isolated"] {
        assert!(!after(id).iter().any(|l| l.contains("try it")), "{id}");
    }
}
