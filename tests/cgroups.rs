//! Issue 30: runs inside cgroups made for the test under cgroup v1's `cpu` (and `cpuset`)
//! controller: a group with no real-time runtime (the audit names it, each printed fix
//! made real lets `chrt -f 1 true` succeed, timer's header says what ran, tune does not
//! judge RT throttling there), and a group with a CFS quota (the audit names it, the
//! result stores its throttling, the monitor exports it). Every group is removed by a
//! guard, on failure too, with its tasks moved back to the root first.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use jitterscope::report::ResultFile;
use jitterscope::system::audit::{AuditReport, Finding, FindingId, Remedy};

use crate::monitor::{free_port, get};
use crate::util::{self, bin, is_root, skip, stderr_lines};

const CPU: &str = "/sys/fs/cgroup/cpu";

/// Groups made for a test, top first, in one v1 hierarchy; removed on drop, bottom up,
/// after moving any task left in them back to the hierarchy's root.
struct Groups {
    mount: PathBuf,
    dirs: Vec<PathBuf>,
}

impl Groups {
    /// `names` nested under `mount` (`["a", "b"]`: a, a/b), named after the test and
    /// this process so that parallel runs never share one.
    fn make(mount: &str, test: &str, names: &[&str]) -> std::io::Result<Groups> {
        let mut g = Groups {
            mount: PathBuf::from(mount),
            dirs: Vec::new(),
        };
        let mut dir = g.mount.join(format!("jsq-{test}-{}", std::process::id()));
        for (i, name) in names.iter().enumerate() {
            if i > 0 {
                dir = dir.join(name);
            }
            std::fs::create_dir(&dir)?;
            g.dirs.push(dir.clone());
        }
        Ok(g)
    }

    fn top(&self) -> &Path {
        &self.dirs[0]
    }

    fn own(&self) -> &Path {
        self.dirs.last().expect("a group")
    }

    /// The group's path as /proc/PID/cgroup names it.
    fn path_of(&self, dir: &Path) -> String {
        format!("/{}", dir.strip_prefix(&self.mount).unwrap().display())
    }

    fn write(&self, dir: &Path, file: &str, value: &str) {
        std::fs::write(dir.join(file), value)
            .unwrap_or_else(|e| panic!("{}/{file} = {value}: {e}", dir.display()));
    }

    /// `sh -c 'echo $$ > OWN/cgroup.procs; SCRIPT'`: the script runs in the group.
    fn sh(&self, script: &str) -> Output {
        let procs = self.own().join("cgroup.procs");
        Command::new("sh")
            .arg("-c")
            .arg(format!("echo $$ > {}; {script}", procs.display()))
            .output()
            .expect("sh runs")
    }

    /// The binary with `args`, started in the group.
    fn jitterscope(&self, args: &[&str]) -> Output {
        self.sh(&format!("exec {} {}", bin().display(), args.join(" ")))
    }
}

impl Drop for Groups {
    fn drop(&mut self) {
        let root_procs = self.mount.join("cgroup.procs");
        for dir in self.dirs.iter().rev() {
            let t0 = Instant::now();
            loop {
                let pids = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
                for pid in pids.lines() {
                    let _ = std::fs::write(&root_procs, pid);
                }
                // A child's runtime first, so that its parent's can be lowered.
                let _ = std::fs::write(dir.join("cpu.rt_runtime_us"), "0");
                if std::fs::remove_dir(dir).is_ok() || !dir.exists() {
                    break;
                }
                if t0.elapsed() > Duration::from_secs(5) {
                    eprintln!("could not remove {}", dir.display());
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

/// The v1 `cpu` controller with RT group scheduling, as root; else why not.
fn rt_groups_here(test: &str) -> bool {
    if !is_root() {
        skip(test, "needs root: it makes cgroups");
        return false;
    }
    if !Path::new(CPU).join("cpu.rt_runtime_us").exists() {
        skip(
            test,
            "no cgroup v1 cpu controller with RT group scheduling here",
        );
        return false;
    }
    let root_rt = std::fs::read_to_string(Path::new(CPU).join("cpu.rt_runtime_us"));
    if root_rt.is_ok_and(|r| r.trim() == "0") {
        skip(test, "the root cpu group itself has no real-time runtime");
        return false;
    }
    true
}

fn chrt_ok(out: &Output) -> bool {
    out.status.success()
}

fn audit_in(g: &Groups) -> AuditReport {
    let cpu = measured_cpu();
    let out = g.jitterscope(&["audit", "-a", &cpu, "--json"]);
    assert!(out.status.success(), "{:?}", stderr_lines(&out));
    serde_json::from_slice(&out.stdout).expect("an audit report")
}

fn the(r: &AuditReport, id: FindingId) -> &Finding {
    r.findings.iter().find(|f| f.id == id).unwrap_or_else(|| {
        panic!(
            "no {id}: {:?}",
            r.findings.iter().map(|f| f.id).collect::<Vec<_>>()
        )
    })
}

/// The highest usable CPU: measured, with a housekeeping CPU left below it.
fn measured_cpu() -> String {
    let cpus = jitterscope::engine::cpu::current_affinity().expect("affinity");
    cpus.cpus().last().copied().unwrap_or(0).to_string()
}

/// The shell command after `label` in one of the finding's manual remedies.
fn command_after(f: &Finding, label: &str) -> String {
    f.remedies
        .iter()
        .find_map(|r| match r {
            Remedy::Manual { what } => what.split_once(label).map(|(_, c)| c.to_string()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no remedy with '{label}': {f:?}"))
}

#[test]
fn issue30_a_group_without_rt_runtime_is_named_and_each_printed_fix_works() {
    let test = "issue30_a_group_without_rt_runtime_is_named_and_each_printed_fix_works";
    if !rt_groups_here(test) {
        return;
    }
    let g = Groups::make(CPU, "norun", &["top", "inner"]).expect("cgroups made");
    // New groups get no runtime: real-time is refused in them, even to root.
    assert!(!chrt_ok(&g.sh("exec chrt -f 1 true")), "chrt -f 1 ran");
    let r = audit_in(&g);
    let f = the(&r, FindingId::RtRuntimeCgroup);
    let top = g.path_of(g.top());
    assert!(
        f.value
            .starts_with(&format!("{top} has no real-time runtime")),
        "{f:?}"
    );
    assert!(f.value.contains("SCHED_FIFO 1 refused here"), "{f:?}");

    // Leave for the root cgroup: the printed command, run from the shell in the group.
    let to_root = command_after(f, "from the shell that starts the program: ");
    assert_eq!(to_root, format!("echo $$ > {CPU}/cgroup.procs"));
    assert!(
        chrt_ok(&g.sh(&format!("{to_root}; exec chrt -f 1 true"))),
        "chrt -f 1 after {to_root}"
    );

    // Or give the chain runtime, parents first: the printed writes, then real-time works
    // in the group itself.
    let shares = command_after(f, "parents first: ");
    let out = g.sh(&format!("{shares} && exec chrt -f 1 true"));
    assert!(
        chrt_ok(&out),
        "chrt -f 1 after {shares}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // And the audit now finds the group's runtime.
    let after = audit_in(&g);
    assert!(
        after
            .findings
            .iter()
            .any(|f| f.id == FindingId::RtRuntimeCgroupOk),
        "{:?}",
        after.findings.iter().map(|f| f.id).collect::<Vec<_>>()
    );
}

#[test]
fn issue30_timer_inside_a_group_without_rt_runtime_states_sched_other() {
    let test = "issue30_timer_inside_a_group_without_rt_runtime_states_sched_other";
    if !rt_groups_here(test) {
        return;
    }
    let g = Groups::make(CPU, "timer", &["top"]).expect("cgroup made");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.json");
    let cpu = measured_cpu();
    let out = {
        let _m = util::measuring();
        g.jitterscope(&[
            "timer",
            "-p",
            "90",
            "-a",
            &cpu,
            "-D",
            "300ms",
            "-o",
            file.to_str().unwrap(),
        ])
    };
    assert!(out.status.success(), "{:?}", stderr_lines(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    let header = text.lines().nth(1).unwrap_or_default();
    assert!(
        header.starts_with("SCHED_OTHER (SCHED_FIFO 90 refused)"),
        "{text}"
    );
    let warned = stderr_lines(&out).join("\n");
    assert!(
        warned.contains("SCHED_FIFO 90 was refused") && warned.contains("rt-runtime-cgroup"),
        "{warned}"
    );
    let r = ResultFile::read(&file).expect("the result");
    for p in &r.probes {
        for t in p.threads() {
            assert_eq!(t.policy.to_string(), "other", "{t:?}");
        }
    }
    let refused = r
        .run
        .degraded
        .iter()
        .find(|d| d.kind == "sched-refused")
        .expect("sched-refused in the result");
    assert!(refused.message.contains("rt-runtime-cgroup"), "{refused:?}");
}

/// Root without CAP_SYS_NICE (Docker's default set), in a cpu group with runtime (this
/// test's own): the refusal names the capability, not a cgroup without runtime.
#[test]
fn issue30_root_without_cap_sys_nice_is_not_blamed_on_the_cgroup() {
    let test = "issue30_root_without_cap_sys_nice_is_not_blamed_on_the_cgroup";
    if !rt_groups_here(test) {
        return;
    }
    let cpu = measured_cpu();
    let out = {
        let _m = util::measuring();
        Command::new("setpriv")
            .args(["--inh-caps=-sys_nice", "--bounding-set=-sys_nice"])
            .arg(bin())
            .args(["timer", "-p", "90", "-a", &cpu, "-D", "200ms"])
            .output()
    };
    let Ok(out) = out else {
        return skip(test, "no setpriv here");
    };
    assert!(out.status.success(), "{:?}", stderr_lines(&out));
    let warned = stderr_lines(&out).join("\n");
    assert!(warned.contains("root without CAP_SYS_NICE"), "{warned}");
    assert!(
        !warned.contains("rt_runtime") && !warned.contains("rt-runtime-cgroup"),
        "{warned}"
    );
}

/// pingpong, work and syscalls printed the policy of one recorded thread: the header
/// now states what ran with the refusal, as timer's does.
#[test]
fn issue30_pingpong_work_and_syscalls_headers_say_fifo_was_refused() {
    let test = "issue30_pingpong_work_and_syscalls_headers_say_fifo_was_refused";
    if !rt_groups_here(test) {
        return;
    }
    let g = Groups::make(CPU, "headers", &["top"]).expect("cgroup made");
    let cpu = measured_cpu();
    let pair = format!("{cpu},{cpu}");
    let runs: [&[&str]; 3] = [
        &["pingpong", "-a", &pair, "--mech", "futex", "-D", "100ms"],
        &[
            "work",
            "-a",
            &cpu,
            "-n",
            "2000",
            "-r",
            "1",
            "--warmup-count",
            "100",
        ],
        &["syscalls", "-a", &cpu, "--only", "rdtsc", "-D", "10ms"],
    ];
    for args in runs {
        let out = {
            let _m = util::measuring();
            g.jitterscope(&[args, &["-p", "90"]].concat())
        };
        assert!(out.status.success(), "{args:?}: {:?}", stderr_lines(&out));
        let text = String::from_utf8_lossy(&out.stdout);
        let header = text.lines().next().unwrap_or_default();
        assert!(
            header.ends_with("policy SCHED_OTHER (SCHED_FIFO 90 refused)"),
            "{args:?}: {text}"
        );
    }
}

#[test]
fn issue30_tune_dry_run_classes_rt_throttling_not_applicable_in_such_a_group() {
    let test = "issue30_tune_dry_run_classes_rt_throttling_not_applicable_in_such_a_group";
    if !rt_groups_here(test) {
        return;
    }
    let cpu = measured_cpu();
    let args = [
        "tune",
        "--dry-run",
        "-a",
        &cpu,
        "--step",
        "rt-throttling-on",
    ];
    let line_of = |out: &Output| {
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let i = text.lines().position(|l| l.contains("rt-throttling-on"))?;
        Some(text.lines().skip(i).take(5).collect::<Vec<_>>().join("\n"))
    };
    // Outside the group the step applies (else this host has nothing to show).
    let outside = util::jitterscope(&args);
    let Some(plain) = line_of(&outside) else {
        return skip(
            test,
            "no rt-throttling-on finding here (RT throttling is off)",
        );
    };
    assert!(plain.contains("applies now"), "{plain}");
    let g = Groups::make(CPU, "tune", &["top"]).expect("cgroup made");
    let inside = g.jitterscope(&args);
    assert!(inside.status.success(), "{:?}", stderr_lines(&inside));
    let step = line_of(&inside).expect("the step");
    assert!(step.contains("not applicable"), "{step}");
    assert!(
        step.contains("RT throttling only stops real-time threads")
            && step.contains("SCHED_FIFO 1 was refused")
            && step.contains("rt-runtime-cgroup"),
        "{step}"
    );
}

/// A CFS quota throttles only fair-class threads: in a group with a quota and
/// real-time runtime, tune's SCHED_FIFO probe cannot feel the cfs-quota step (not
/// applicable), and a SCHED_OTHER probe can (it applies).
#[test]
fn issue30_tune_dry_run_classes_cfs_quota_not_applicable_to_a_realtime_probe() {
    let test = "issue30_tune_dry_run_classes_cfs_quota_not_applicable_to_a_realtime_probe";
    if !rt_groups_here(test) || !Path::new(CPU).join("cpu.cfs_quota_us").exists() {
        return skip(
            test,
            "needs cgroup v1's cpu controller with both bandwidths",
        );
    }
    let g = Groups::make(CPU, "tunecfs", &["top"]).expect("cgroup made");
    g.write(g.top(), "cpu.rt_runtime_us", "10000");
    g.write(g.top(), "cpu.cfs_quota_us", "50000");
    let cpu = measured_cpu();
    let step = |policy: &str| {
        let args = [
            "tune",
            "--dry-run",
            "-a",
            &cpu,
            "--policy",
            policy,
            "--step",
            "cfs-quota",
        ];
        let out = g.jitterscope(&args);
        assert!(out.status.success(), "{:?}", stderr_lines(&out));
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let i = (text.lines().position(|l| l.contains("cfs-quota")))
            .unwrap_or_else(|| panic!("no cfs-quota step: {text}"));
        text.lines().skip(i).take(5).collect::<Vec<_>>().join("\n")
    };
    let fifo = step("fifo");
    assert!(fifo.contains("not applicable"), "{fifo}");
    assert!(
        fifo.contains("a CFS quota throttles only SCHED_OTHER threads"),
        "{fifo}"
    );
    let other = step("other");
    assert!(other.contains("applies now"), "{other}");
}

/// A spinner at SCHED_OTHER in a group held to 5 ms per 100 ms loses most of each
/// period: the audit names the quota and its counts, the result stores the group's
/// throttling over the run, and the lost time covers it. The quota is small so that it
/// bites whatever else runs: under a build beside, a spinner's fair share of its CPU can
/// fall to a third, below a 35 % quota, and then the quota never stops it.
#[test]
fn issue30_a_quota_group_is_audited_and_its_throttling_stored() {
    let test = "issue30_a_quota_group_is_audited_and_its_throttling_stored";
    if !is_root() || !Path::new(CPU).join("cpu.cfs_quota_us").exists() {
        return skip(
            test,
            "needs root and cgroup v1's cpu controller with CFS bandwidth",
        );
    }
    let g = Groups::make(CPU, "quota", &["top"]).expect("cgroup made");
    g.write(g.top(), "cpu.cfs_quota_us", "5000");
    let r = audit_in(&g);
    let f = the(&r, FindingId::CfsQuota);
    let top = g.path_of(g.top());
    assert!(
        f.value.starts_with(&format!(
            "{top}: cpu.cfs_quota_us 5000, cpu.cfs_period_us 100000 (0.05 CPUs)"
        )),
        "{f:?}"
    );
    let lift = format!("echo -1 > {}/cpu.cfs_quota_us", g.top().display());
    assert!(
        f.remedies
            .iter()
            .any(|r| matches!(r, Remedy::Runtime { command, .. } if *command == lift)),
        "{f:?}"
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("n.json");
    let cpu = measured_cpu();
    let out = {
        let _m = util::measuring();
        g.jitterscope(&[
            "noise",
            "-a",
            &cpu,
            "-D",
            "1s",
            "-o",
            file.to_str().unwrap(),
        ])
    };
    assert!(out.status.success(), "{:?}", stderr_lines(&out));
    let r = ResultFile::read(&file).expect("the result");
    let c = r.run.counters.as_ref().and_then(|c| c.cgroup.as_ref());
    let c = c.expect("the cgroup's counters in the result");
    let own = (c.cpu_stat.iter())
        .find(|s| s.group == top)
        .unwrap_or_else(|| panic!("{top} in {c:?}"));
    assert_eq!(
        own.quota.as_deref(),
        Some("cpu.cfs_quota_us 5000, cpu.cfs_period_us 100000")
    );
    let entry = r
        .probes
        .iter()
        .find_map(|p| p.get::<jitterscope::probes::noise::NoiseEntry>())
        .expect("a noise entry");
    let (lost, run) = (entry.interrupted_ns, entry.runtime_ns.max(1));
    eprintln!(
        "{test}: lost {:.0} ms of {:.0} ms; cpu.stat over the run: {} of {} periods \
         throttled, {:.0} ms",
        lost as f64 / 1e6,
        run as f64 / 1e6,
        own.stat.nr_throttled,
        own.stat.nr_periods,
        own.stat.throttled_ns as f64 / 1e6
    );
    // The spinner wants the whole CPU and may have 5 %: it is stopped in most periods
    // and loses at least half the run, and its CPU's run queue alone is throttled for
    // half the run or more. cpu.stat sums every CPU's run queue of the group (the
    // coordinator's too) over the counters' window, which holds the warm-up: at most
    // the window on each CPU.
    let window = r.run.counters.as_ref().map_or(0, |c| c.elapsed_ns);
    let cpus = jitterscope::engine::cpu::current_affinity().unwrap().len() as u64;
    assert!(own.stat.nr_throttled * 2 >= own.stat.nr_periods, "{own:?}");
    assert!(own.stat.nr_periods >= 5, "{own:?}");
    assert!(lost * 2 >= run, "lost {lost} of {run} ns");
    assert!(
        own.stat.throttled_ns * 2 >= run && own.stat.throttled_ns <= window * cpus,
        "throttled {} ns in a {window} ns window on {cpus} CPUs, run {run} ns",
        own.stat.throttled_ns
    );
    if Path::new("/proc/pressure/cpu").exists() {
        assert!(
            c.pressure
                .iter()
                .any(|p| p.resource == "cpu" && p.scope == "system"),
            "{c:?}"
        );
    }
}

/// The monitor in a quota group exports the quota, its throttle counters, the cpuset
/// and the pressure.
#[test]
fn issue30_the_monitor_exports_quota_throttling_cpuset_and_pressure() {
    let test = "issue30_the_monitor_exports_quota_throttling_cpuset_and_pressure";
    if !is_root() || !Path::new(CPU).join("cpu.cfs_quota_us").exists() {
        return skip(
            test,
            "needs root and cgroup v1's cpu controller with CFS bandwidth",
        );
    }
    let g = Groups::make(CPU, "monitor", &["top"]).expect("cgroup made");
    g.write(g.top(), "cpu.cfs_quota_us", "35000");
    let port = free_port();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let cpu = measured_cpu();
    let listen = addr.to_string();
    let _m = util::measuring();
    let procs = g.own().join("cgroup.procs");
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "echo $$ > {}; exec {} monitor -D 5s -a {cpu} --listen {listen}",
            procs.display(),
            bin().display()
        ))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("monitor starts");
    let t0 = Instant::now();
    let body = loop {
        if let Ok((200, body)) = get(addr, "/metrics") {
            break body;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the monitor never served"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let _ = child.kill();
    let _ = child.wait();
    let top = g.path_of(g.top());
    for want in [
        format!("jitterscope_cgroup_cpu_quota_cpus{{group=\"{top}\"}} 0.35"),
        format!("jitterscope_cgroup_cpu_periods_total{{group=\"{top}\"}}"),
        format!("jitterscope_cgroup_cpu_throttled_periods_total{{group=\"{top}\"}}"),
        format!("jitterscope_cgroup_cpu_throttled_seconds_total{{group=\"{top}\"}}"),
        "jitterscope_cgroup_cpuset_info{".to_string(),
    ] {
        assert!(body.contains(&want), "no {want} in:\n{body}");
    }
    if Path::new("/proc/pressure/cpu").exists() {
        let want = "jitterscope_pressure_stalled_seconds_total{resource=\"cpu\",kind=\"some\",scope=\"system\"}";
        assert!(body.contains(want), "no {want} in:\n{body}");
        assert!(body.contains("jitterscope_pressure_avg10_ratio{"), "{body}");
    }
}
