//! `--policy deadline` as root with admission control on (issue 49, part 5): each measured
//! CPU gets a root domain of its own for the run and the host's cpusets read as before
//! after it; a group beside that holds the CPU blocks it, said in one line naming the
//! group; and a run killed with SIGKILL leaves its groups journaled, which `tune
//! --restore` removes. Each test holds the measuring lock (a deadline thread, and the
//! one journal `tune`'s live tests use too) and makes and removes its own groups.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::{bin, is_root, jitterscope, measuring, skip, stderr_lines, two_cpus};
use jitterscope::engine::cpu::CpuList;
use jitterscope::engine::deadline::Deadline;
use jitterscope::report::ResultFile;
use jitterscope::system::cgroup::{Cgroups, Version};
use jitterscope::system::tune::journal;
use jitterscope::system::tune::root_domain::{self, Layout};

const RT_RUNTIME: &str = "/proc/sys/kernel/sched_rt_runtime_us";

/// The run's parameters: `timer -a CPU --policy deadline --runtime 300us -i 1000`.
const DL: Deadline = Deadline {
    runtime_ns: 300_000,
    deadline_ns: 1_000_000,
    period_ns: 1_000_000,
    step_ns: 0,
};

/// The measured CPU (the second of two: the first is housekeeping's) and the layout the
/// tool would make for it here, or `None` after saying why the test is skipped.
fn host(test: &str) -> Option<(usize, Layout)> {
    if !is_root() {
        skip(test, "needs root: SCHED_DEADLINE and cgroup files");
        return None;
    }
    let Some((cpu, _)) = two_cpus() else {
        skip(test, "needs a housekeeping CPU beside the measured one");
        return None;
    };
    let rt = std::fs::read_to_string(RT_RUNTIME).unwrap_or_default();
    if rt.trim() == "-1" {
        skip(test, "admission control is off (sched_rt_runtime_us -1)");
        return None;
    }
    if journal::state(Path::new("/")).is_some() {
        skip(
            test,
            "a journal of host changes exists already (tune --restore)",
        );
        return None;
    }
    let cg = Cgroups::of_self().expect("the process's cgroups");
    let cpus = CpuList::from_cpus(vec![cpu]);
    match root_domain::plan(Path::new("/"), &cg, &cpus, std::process::id()) {
        Ok(layout) => Some((cpu, layout)),
        Err(why) => {
            skip(test, &format!("this host allows no root domain: {why}"));
            None
        }
    }
}

/// `host`, where a thread pinned to the CPU is refused as things are (else the run would
/// make no root domain, which the first test checks).
fn refused_host(test: &str) -> Option<(usize, Layout)> {
    let (cpu, layout) = host(test)?;
    if jitterscope::engine::sched::try_on(DL, Some(cpu)).is_ok() {
        skip(test, "the CPU has a root domain of its own already");
        return None;
    }
    Some((cpu, layout))
}

/// Every file of the hierarchy's root that a root domain may touch, the groups below it
/// by name, admission control and the journal: what "as it found it" means.
fn snapshot(l: &Layout) -> BTreeMap<String, String> {
    let top = Path::new(&l.mount);
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(top)
        .expect("the hierarchy's root")
        .flatten()
    {
        let name = e.file_name().to_string_lossy().into_owned();
        let path = e.path();
        if path.is_dir() {
            out.insert(format!("group {name}"), String::new());
        } else if (name.starts_with("cpuset.") && !name.contains("pressure"))
            || name == "cgroup.subtree_control"
        {
            out.insert(name, std::fs::read_to_string(&path).unwrap_or_default());
        }
    }
    for f in [RT_RUNTIME, journal::JOURNAL] {
        let text = std::fs::read_to_string(f).unwrap_or_else(|_| "absent".into());
        out.insert(f.to_string(), text);
    }
    out
}

/// The groups a run of process `pid` makes for `cpu`, by directory.
fn groups_of(l: &Layout, pid: u32, cpu: usize) -> PathBuf {
    Path::new(&l.mount).join(format!("jitterscope-dl-{pid}-cpu{cpu}"))
}

fn timer(cpu: usize, duration: &str) -> Command {
    let mut c = Command::new(bin());
    c.args(["timer", "-a", &cpu.to_string(), "--policy", "deadline"])
        .args(["--runtime", "300us", "-i", "1000", "-D", duration]);
    c
}

/// Ground truth first: a thread of this process pinned to the CPU is refused (admission
/// control, the root domain spans both CPUs); then the run is admitted at SCHED_DEADLINE
/// with the parameters asked, admission control still on, its header and result name the
/// cpuset it made, and every cpuset file reads as before once it has ended.
#[test]
fn issue49_deadline_runs_with_admission_control_on_in_a_root_domain_of_its_own() {
    let test = "issue49_deadline_runs_with_admission_control_on_in_a_root_domain_of_its_own";
    let _m = measuring();
    let Some((cpu, layout)) = host(test) else {
        return;
    };
    let pinned = jitterscope::engine::sched::try_on(DL, Some(cpu));
    let before = snapshot(&layout);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("dl.json");
    let child = timer(cpu, "1s")
        .args(["-o", file.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{:?}", stderr_lines(&out));
    let r = ResultFile::parse(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let thread = r.probes[0].threads()[0].clone();
    assert_eq!(thread.policy.to_string(), "deadline", "{thread:?}");
    assert_eq!(
        serde_json::to_value(thread.policy).unwrap()["deadline"]["runtime_ns"],
        300_000
    );
    assert_eq!(
        snapshot(&layout),
        before,
        "the host's cpusets after the run"
    );
    let Err(refused) = pinned else {
        // The CPU has a root domain of its own already: none is made.
        assert!(r.run.root_domain.is_none(), "{:?}", r.run.root_domain);
        return;
    };
    assert!(refused.root_domain, "{}", refused.why);
    let made = r.run.root_domain.expect("the result names the root domain");
    let group = groups_of(&layout, pid, cpu);
    let name = group.file_name().unwrap().to_string_lossy().into_owned();
    assert_eq!(made.groups, [format!("/{name}")]);
    assert_eq!(made.cpus.cpus(), [cpu]);
    assert!(made.removed, "{made}");
    let line = text.lines().find(|l| l.starts_with("root domain: "));
    assert_eq!(line, Some(made.to_string().as_str()), "{text}");
    assert!(line.unwrap().ends_with("made for the run and removed"));
}

/// A group this test makes beside the root domain's, holding every CPU.
struct Beside {
    dir: PathBuf,
    /// cgroup v2: cpuset was enabled for the root's children to make it.
    enabled: Option<PathBuf>,
}

impl Beside {
    fn make(l: &Layout) -> std::io::Result<Beside> {
        let top = Path::new(&l.mount);
        let dir = top.join(format!("jsq-issue49-{}", std::process::id()));
        let mut b = Beside { dir, enabled: None };
        let control = top.join("cgroup.subtree_control");
        if l.version == Version::V2 && l.enable {
            std::fs::write(&control, "+cpuset")?;
            b.enabled = Some(control);
        }
        std::fs::create_dir(&b.dir)?;
        let all = std::fs::read_to_string(top.join(match l.version {
            Version::V1 => "cpuset.cpus",
            Version::V2 => "cpuset.cpus.effective",
        }))?;
        std::fs::write(b.dir.join("cpuset.cpus"), all.trim())?;
        if l.version == Version::V1 {
            std::fs::write(b.dir.join("cpuset.mems"), &l.mems)?;
            std::fs::write(b.dir.join("cpuset.cpu_exclusive"), "1")?;
        }
        Ok(b)
    }
}

impl Drop for Beside {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.dir);
        if let Some(control) = &self.enabled {
            let _ = std::fs::write(control, "-cpuset");
        }
    }
}

/// A group beside that holds the measured CPU (an exclusive cpuset of every CPU on v1, as
/// podman's libpod_parent holds them): refused in one line naming the group, exit 2,
/// nothing measured, nothing left behind.
#[test]
fn issue49_a_group_beside_holding_the_cpu_blocks_the_root_domain_in_one_line() {
    let test = "issue49_a_group_beside_holding_the_cpu_blocks_the_root_domain_in_one_line";
    let _m = measuring();
    let Some((cpu, layout)) = refused_host(test) else {
        return;
    };
    let before = snapshot(&layout);
    let beside = match Beside::make(&layout) {
        Ok(b) => b,
        Err(e) => return skip(test, &format!("cannot make a cpuset beside: {e}")),
    };
    let out = timer(cpu, "1s").output().unwrap();
    let lines = stderr_lines(&out);
    let name = format!("/{}", beside.dir.file_name().unwrap().to_string_lossy());
    drop(beside);
    assert_eq!(out.status.code(), Some(2), "{lines:?}");
    assert_eq!(lines.len(), 1, "{lines:?}");
    let line = &lines[0];
    assert!(line.starts_with("jitterscope: --policy deadline"), "{line}");
    assert!(
        line.contains(&format!("the cpuset {name} in {}", layout.mount)),
        "{line}"
    );
    assert!(line.contains("sched_rt_runtime_us=-1"), "{line}");
    assert!(out.stdout.is_empty());
    assert_eq!(
        snapshot(&layout),
        before,
        "the host's cpusets after the refusal"
    );
}

/// SIGKILL mid-run: the root domain's group is still there and the journal lists it;
/// `tune --restore` removes it and every cpuset file reads as before.
#[test]
fn issue49_a_killed_deadline_runs_root_domain_is_journaled_and_restored() {
    let test = "issue49_a_killed_deadline_runs_root_domain_is_journaled_and_restored";
    let _m = measuring();
    let Some((cpu, layout)) = refused_host(test) else {
        return;
    };
    let before = snapshot(&layout);
    let mut child = timer(cpu, "30s")
        .arg("-q")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("the binary runs");
    let group = groups_of(&layout, child.id(), cpu);
    let journal = Path::new(journal::JOURNAL);
    let listed = || {
        let text = std::fs::read_to_string(journal).unwrap_or_default();
        text.contains(&format!("\"dir\":\"{}\"", group.display()))
    };
    let since = Instant::now();
    while !(group.is_dir() && listed()) && since.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let made = group.is_dir() && listed();
    child.kill().unwrap();
    let status = child.wait().unwrap();
    if !made {
        let _ = jitterscope(&["tune", "--restore"]);
        panic!(
            "no root domain {} within 20 s (exit {status})",
            group.display()
        );
    }
    std::thread::sleep(Duration::from_millis(100));
    assert!(group.is_dir(), "the group outlives the killed run");
    assert!(listed(), "and the journal lists it");
    let out = jitterscope(&["tune", "--restore"]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{said} {:?}",
        stderr_lines(&out)
    );
    assert!(
        said.contains(&format!(
            "restored {} = absent (reads absent) ok",
            group.display()
        )),
        "{said}"
    );
    assert!(!group.exists());
    assert_eq!(
        snapshot(&layout),
        before,
        "the host's cpusets after --restore"
    );
}
