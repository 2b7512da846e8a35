//! Issue 48, item 3: every command right on a tuned host. Debian's PREEMPT_RT kernel in
//! the lab, 2 vCPUs, `isolcpus=1 nohz_full=1 rcu_nocbs=1`: the shell's affinity leaves CPU
//! 1 out, yet `-a 1` measures it; with no `-a` the commands measure the isolated CPU and
//! keep the coordinator on CPU 0; no fix advises isolating CPU 0, the last housekeeping
//! CPU. Behaviour only: TCG's timing means nothing.

use std::process::Command;
use std::sync::Arc;

use jitterscope::report::ResultFile;
use jitterscope::system::audit::{AuditReport, Remedy};

use crate::lab::{self, Boot, Guest};
use crate::util::{self, bin, is_root, skip, stderr_lines};

const ISOLATED: &str = "isolcpus=1 nohz_full=1 rcu_nocbs=1";

/// The RT kernel with CPU 1 isolated: each command once, short.
fn isolated(test: &str) -> Option<Arc<Guest>> {
    let parts = [
        ("affinity", "taskset -p $$"),
        ("noise-a1", "jitterscope noise -a 1 -D 1s -o noise-a1.json"),
        ("noise", "jitterscope noise -D 1s -o noise.json"),
        ("timer", "jitterscope timer -D 1s -o timer.json"),
        (
            "timer-a1",
            "jitterscope timer -a 1 -p 90 -D 1s -o timer-a1.json",
        ),
        (
            "pingpong",
            "jitterscope pingpong --mech futex -D 1s -o pingpong.json",
        ),
        ("c2c", "jitterscope c2c -n 20 -r 20 -o c2c.json"),
        ("work", "jitterscope work -a 1 -n 2000 -o work.json"),
        (
            "syscalls",
            "jitterscope syscalls -a 1 --only getppid -D 200ms -o syscalls.json",
        ),
        (
            "queue",
            "jitterscope queue --producer-cpu 1 -D 1s --no-journal -o queue.json",
        ),
        ("audit", "jitterscope audit --json > audit.json"),
        ("audit-a0", "jitterscope audit -a 0 --json > audit-a0.json"),
        ("selftest", "jitterscope selftest --quick -o selftest.json"),
        (
            "nobody",
            "/usr/bin/setpriv --reuid 65534 --regid 65534 --clear-groups \
             jitterscope noise -a 1 -D 1s --json > nobody.json",
        ),
        ("run", "jitterscope run --quick --no-trace -o run.json"),
        ("tune-plan", "jitterscope tune --dry-run"),
        (
            "monitor",
            "jitterscope monitor -D 8s --listen 127.0.0.1:9753 & sleep 2; \
             for i in $(seq 60); do \
               wget -q -O metrics.txt http://127.0.0.1:9753/metrics && break; sleep 0.1; \
             done; wait",
        ),
        (
            "refused",
            "mkdir /sys/fs/cgroup/box && echo +cpuset > /sys/fs/cgroup/cgroup.subtree_control && echo 0 > /sys/fs/cgroup/box/cpuset.cpus && echo 0 > /sys/fs/cgroup/box/cgroup.procs && jitterscope noise -a 1 -D 1s",
        ),
    ];
    lab::guest(test, "rt-isolated", || Boot {
        kernel: "rt",
        cpus: 2,
        cmdline: ISOLATED.into(),
        flags: &[],
        script: parts.iter().map(|(n, c)| lab::part(n, c)).collect(),
    })
}

fn cpus(r: &ResultFile) -> (String, String) {
    (
        r.run.cpus.measured.to_string(),
        r.run.cpus.housekeeping.to_string(),
    )
}

fn one_and_zero() -> (String, String) {
    ("1".into(), "0".into())
}

macro_rules! guest {
    ($name:ident) => {
        let Some($name) = isolated(concat!(module_path!(), "::", stringify!($name))) else {
            return;
        };
    };
}

#[test]
fn issue48_noise_a1_measures_the_isolated_cpu_whatever_the_shells_affinity() {
    guest!(g);
    let affinity = g.part_exit("affinity", 0);
    assert!(
        affinity.trim_end().ends_with(": 1"),
        "the shell's mask is CPU 0 alone: {affinity}"
    );
    g.part_exit("noise-a1", 0);
    assert_eq!(cpus(&g.result("noise-a1.json")), one_and_zero());
    // Unprivileged, the same.
    g.part_exit("nobody", 0);
    let text = g.text("nobody.json");
    let r = ResultFile::parse(&text).expect("a result");
    assert!(!r.run.privileges.root);
    assert_eq!(cpus(&r), one_and_zero());
}

/// With no `-a`: noise, timer and run measure the isolated CPU, the coordinator on 0.
#[test]
fn issue48_with_no_a_the_isolated_cpu_is_measured() {
    guest!(g);
    for (part, file) in [
        ("noise", "noise.json"),
        ("timer", "timer.json"),
        ("timer-a1", "timer-a1.json"),
        ("run", "run.json"),
    ] {
        g.part_exit(part, 0);
        assert_eq!(cpus(&g.result(file)), one_and_zero(), "{part}");
    }
    // The main job's steps: every noise and timer entry on CPU 1.
    let run = g.result("run.json");
    use jitterscope::probes::noise::NoiseEntry;
    use jitterscope::probes::timer::TimerEntry;
    let noise: Vec<usize> = run.entries::<NoiseEntry>().map(|e| e.cpu).collect();
    let timer: Vec<usize> = run.entries::<TimerEntry>().map(|e| e.cpu).collect();
    assert_eq!((noise, timer), (vec![1], vec![1]));
}

/// The commands on one CPU take `-a 1`; pingpong and c2c pair CPU 1 with CPU 0 and
/// say why (the host isolated one CPU).
#[test]
fn issue48_every_command_that_takes_a_reaches_the_isolated_cpu() {
    guest!(g);
    for (part, file) in [("work", "work.json"), ("syscalls", "syscalls.json")] {
        g.part_exit(part, 0);
        assert_eq!(cpus(&g.result(file)).0, "1", "{part}");
    }
    g.part_exit("queue", 0);
    let q = g.result("queue.json");
    assert!(q.run.cpus.measured.contains(1), "{:?}", q.run.cpus);
    for (part, file) in [("pingpong", "pingpong.json"), ("c2c", "c2c.json")] {
        let text = g.part_exit(part, 0);
        assert_eq!(cpus(&g.result(file)).0, "0-1", "{part}");
        assert!(
            text.contains("the host set apart one CPU (1)"),
            "{part}: {text}"
        );
    }
    // Its timing checks mean nothing under TCG; where it measured is the point.
    let (text, _) = g.part("selftest");
    assert!(
        text.contains("selftest on CPU 1 (the holder's coordinator on CPU 0)"),
        "{text}"
    );
}

/// The audit is about the isolated CPU by default and finds it isolated; about CPU 0 it
/// never advises isolating it, and says to measure CPU 1; the main job's fixes neither.
#[test]
fn issue48_no_fix_isolates_the_last_housekeeping_cpu() {
    guest!(g);
    let read = |f: &str| -> AuditReport { serde_json::from_str(&g.text(f)).expect(f) };
    g.part_exit("audit", 0);
    let a = read("audit.json");
    assert_eq!(a.measured.to_string(), "1");
    let ok = |id: &str| a.findings.iter().any(|f| f.id == id);
    assert!(ok("isolated-ok") && ok("nohz-full-ok"), "{:?}", a.findings);
    g.part_exit("audit-a0", 0);
    let zero = read("audit-a0.json");
    let advises_zero = |r: &Remedy| match r {
        Remedy::Boot { options, .. } | Remedy::KernelBuild { options, .. } => {
            options.iter().any(|o| {
                (o.starts_with("isolcpus=") || o.starts_with("nohz_full=")) && o.contains('0')
            })
        }
        _ => false,
    };
    for f in &zero.findings {
        assert!(!f.remedies.iter().any(advises_zero), "{f:?}");
    }
    let isolated = zero.findings.iter().find(|f| f.id == "isolated-missing");
    assert!(
        isolated.is_some_and(|f| f.fix.contains("(-a 1)")),
        "{isolated:?}"
    );
    let run = g.result("run.json");
    let verdict = run.verdict.expect("run's verdict");
    for fix in &verdict.fixes {
        assert!(!fix.remedies.iter().any(advises_zero), "{fix:?}");
    }
}

/// A cpuset that really leaves CPU 1 out is the one refusal, naming its group.
#[test]
fn issue48_only_a_cpuset_refuses_the_isolated_cpu_and_names_its_group() {
    guest!(g);
    let text = g.part_exit("refused", 2);
    let line = text
        .lines()
        .find(|l| l.starts_with("jitterscope: "))
        .unwrap_or_default();
    assert!(
        line.contains("outside the cpuset of cgroup /box") && line.contains("CPU 1"),
        "{text}"
    );
}

/// `tune` on the isolated host plans for CPU 1, the coordinator on CPU 0.
#[test]
fn issue48_tune_on_a_tuned_host_plans_for_the_isolated_cpu() {
    guest!(g);
    let text = g.part_exit("tune-plan", 0);
    assert!(
        text.contains("tune plan for CPUs 1 (housekeeping 0)"),
        "{text}"
    );
}

/// Done-when 5: the boot-only steps `tune` exports on an untuned host, booted, and the
/// audit there finds those findings met.
#[test]
fn issue48_tunes_boot_only_steps_exported_booted_and_found_met() {
    const TEST: &str = "tuned_host::issue48_tunes_boot_only_steps_exported_booted_and_found_met";
    const STEPS: [&str; 3] = ["isolated-missing", "nohz-full-missing", "rcu-nocbs-missing"];
    let steps: String = STEPS.iter().map(|s| format!(" --step {s}")).collect();
    let Some(untuned) = lab::guest(TEST, "rt-untuned", || Boot {
        kernel: "rt",
        cpus: 2,
        cmdline: String::new(),
        flags: &[],
        script: lab::part(
            "tune",
            &format!("jitterscope tune -a 1 --yes{steps} --export export"),
        ),
    }) else {
        return;
    };
    let text = untuned.part_exit("tune", 0);
    assert!(text.contains("exported to export"), "{text}");
    let cmdline = std::fs::read_to_string(untuned.file("export/kernel-cmdline.txt")).unwrap();
    for option in ["isolcpus=", "nohz_full=", "rcu_nocbs="] {
        assert!(
            cmdline.contains(&format!("{option}1")),
            "{option}: {cmdline}"
        );
    }
    let Some(tuned) = lab::guest(TEST, "rt-tuned-by-tune", || Boot {
        kernel: "rt",
        cpus: 2,
        cmdline: cmdline.trim().to_string(),
        flags: &[],
        script: lab::part("audit", "jitterscope audit -a 1 --json > audit.json"),
    }) else {
        return;
    };
    tuned.part_exit("audit", 0);
    let text = std::fs::read_to_string(tuned.file("audit.json")).unwrap();
    let a: AuditReport = serde_json::from_str(&text).unwrap();
    let ids: Vec<String> = a.findings.iter().map(|f| f.id.to_string()).collect();
    for met in ["isolated-ok", "nohz-full-ok", "rcu-nocbs-ok"] {
        assert!(ids.iter().any(|i| i == met), "{met} not in {ids:?}");
    }
}

/// `monitor` with no `-a` times the isolated CPU alone.
#[test]
fn issue48_monitor_measures_the_isolated_cpu() {
    guest!(g);
    g.part_exit("monitor", 0);
    let text = g.text("metrics.txt");
    assert!(text.contains("cpu=\"1\""), "{text}");
    assert!(!text.contains("cpu=\"0\""), "{text}");
}

/// On this host, as a user with a narrowed shell runs it: `taskset -c A` and `-a B`
/// measures B (only a cpuset limits `-a`; the mask is a default). An untuned host's
/// coordinator stays inside the mask.
#[test]
fn issue48_a_taskset_shell_may_name_any_cpu_of_its_cpuset() {
    const TEST: &str = "issue48_a_taskset_shell_may_name_any_cpu_of_its_cpuset";
    let Some((b, a)) = util::two_cpus() else {
        return skip(TEST, "needs two CPUs");
    };
    let _m = util::measuring();
    let out = Command::new("taskset")
        .args(["-c", &a.to_string()])
        .arg(bin())
        .args(["noise", "-a", &b.to_string(), "-D", "200ms", "--json"])
        .output()
        .expect("taskset runs");
    assert_eq!(out.status.code(), Some(0), "{:?}", stderr_lines(&out));
    let r = ResultFile::parse(&String::from_utf8_lossy(&out.stdout)).expect("a result");
    assert_eq!(cpus(&r), (b.to_string(), a.to_string()));
}

/// A cgroup v1 cpuset (this CI host's kind) that leaves the CPU out refuses it in one
/// line naming the group; the group is removed after.
#[test]
fn issue48_a_cpuset_that_leaves_the_cpu_out_is_refused_naming_it() {
    const TEST: &str = "issue48_a_cpuset_that_leaves_the_cpu_out_is_refused_naming_it";
    if !is_root() {
        return skip(TEST, "needs root: it makes a cpuset cgroup");
    }
    let Some((b, a)) = util::two_cpus() else {
        return skip(TEST, "needs two CPUs");
    };
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    let Some(mount) = mounts.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.get(2) == Some(&"cgroup")
            && f.get(3)
                .is_some_and(|o| o.split(',').any(|o| o == "cpuset")))
        .then(|| f[1].to_string())
    }) else {
        return skip(
            TEST,
            "no cpuset hierarchy of cgroup version 1 is mounted here",
        );
    };
    let name = format!("js48-{}", std::process::id());
    let dir = std::path::Path::new(&mount).join(&name);
    std::fs::create_dir(&dir).expect("the group");
    struct Gone(std::path::PathBuf);
    impl Drop for Gone {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir(&self.0);
        }
    }
    let _gone = Gone(dir.clone());
    let mems = std::fs::read_to_string(std::path::Path::new(&mount).join("cpuset.mems")).unwrap();
    std::fs::write(dir.join("cpuset.cpus"), a.to_string()).unwrap();
    std::fs::write(dir.join("cpuset.mems"), mems.trim()).unwrap();
    let tasks = dir.join("tasks");
    let out = Command::new("sh")
        .args(["-c", "echo $$ > \"$0\" && exec \"$@\""])
        .arg(&tasks)
        .arg(bin())
        .args(["noise", "-a", &b.to_string(), "-D", "200ms"])
        .output()
        .expect("sh runs");
    let lines = stderr_lines(&out);
    assert_eq!(out.status.code(), Some(2), "{lines:?}");
    let refusal: Vec<&String> = lines
        .iter()
        .filter(|l| l.starts_with("jitterscope: "))
        .collect();
    assert_eq!(refusal.len(), 1, "{lines:?}");
    assert!(
        refusal[0].contains(&format!("outside the cpuset of cgroup /{name}")),
        "{lines:?}"
    );
}
