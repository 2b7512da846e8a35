//! Issue 24, item 3: the container image. It is built without network from
//! scripts/build-static's binary (`scripts/build-image --local`: the Containerfile's
//! scratch stage alone), holds that binary and nothing else, and runs as the DaemonSet
//! runs it: host network, every capability dropped but SYS_NICE and IPC_LOCK, no new
//! privileges, a read-only root, a volume for the interval log, 64 MiB and one CPU. A real
//! Prometheus scrapes it, and `selftest` passes in it with the same privileges. The files
//! that name the image and its command agree (checked without building anything).

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::monitor::{Prometheus, free_port, get, prometheus_tools};
use crate::util::{self, is_root, skip};

const REPO: &str = env!("CARGO_MANIFEST_DIR");
const VERSION: &str = env!("CARGO_PKG_VERSION");

/// How this host runs containers: the OCI runtime that works here (podman's own, or runc
/// where crun cannot, as on a host with cgroup v1 and v2 mounted side by side).
pub(crate) struct Podman {
    runtime: Option<&'static str>,
}

impl Podman {
    /// A podman that can run `image` here, or `None` with the reason printed.
    pub(crate) fn find(test: &str, image: &str) -> Option<Podman> {
        let mut first_error = None;
        for runtime in [None, Some("runc")] {
            let podman = Podman { runtime };
            let out = podman
                .run()
                .args(["--rm", image, "--version"])
                .output()
                .ok()?;
            if out.status.success() {
                return Some(podman);
            }
            let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
            first_error.get_or_insert(err);
        }
        let why = first_error.unwrap_or_default();
        skip(test, &format!("podman cannot run a container here: {why}"));
        None
    }

    /// `podman run` with this host's runtime. The open-file and process limits are set
    /// below this process's own: podman's defaults (a million open files) need
    /// CAP_SYS_RESOURCE to raise, which a sandboxed root may not have.
    pub(crate) fn run(&self) -> Command {
        let mut c = self.podman();
        c.args([
            "run",
            "--ulimit",
            "nofile=4096:4096",
            "--ulimit",
            "nproc=4096:4096",
        ]);
        c
    }

    /// `podman` with this host's runtime.
    pub(crate) fn podman(&self) -> Command {
        let mut c = Command::new("podman");
        if let Some(r) = self.runtime {
            c.args(["--runtime", r]);
        }
        c
    }

    /// `podman run` with the DaemonSet's securityContext (deploy/kubernetes), and its
    /// real-time share where the kernel asks for one (`RtBudget`).
    fn as_daemonset(&self, rt: &Option<RtBudget>) -> Command {
        let mut c = self.run();
        c.args(["--network", "host", "--user", "0", "--read-only"])
            .args([
                "--cap-drop",
                "ALL",
                "--cap-add",
                "SYS_NICE",
                "--cap-add",
                "IPC_LOCK",
            ])
            .args(["--security-opt", "no-new-privileges"]);
        if let Some(rt) = rt {
            c.arg(rt.runtime_arg(CONTAINER_RT_US));
        }
        c
    }
}

/// The image `scripts/build-image --local` makes, built once per test process (minutes)
/// and shared by every test that runs it: its name (`jitterscope:VERSION`) and its id,
/// read at once. Tests that only need the binary run it by id, as another checkout's build
/// may take the name meanwhile (those builds hold the measuring lock, as `build_with`
/// does, so not while ours runs).
pub(crate) fn built_image() -> Result<(String, String), String> {
    static BUILT: OnceLock<Result<(String, String), String>> = OnceLock::new();
    let build = || {
        let name = util::build_with("build-image", &["--local"])?;
        let id = podman_text(&["image", "inspect", "--format", "{{.Id}}", &name]);
        Ok((name, id))
    };
    BUILT.get_or_init(build).clone()
}

/// A container of the test's, removed however the test ends.
pub(crate) struct Container(pub(crate) String);

impl Drop for Container {
    fn drop(&mut self) {
        let _ = Command::new("podman")
            .args(["rm", "-f", &self.0])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// podman's parent cgroup where the kernel has RT group scheduling (cgroup v1's
/// `cpu.rt_runtime_us`): a new cgroup there gets no real-time time, so SCHED_FIFO is
/// refused in every container whatever its capabilities. Distribution kernels, and so
/// Kubernetes nodes, are built without it; for this test the parent is lent some.
pub(crate) const PODMAN_RT_PARENT: &str = "/sys/fs/cgroup/cpu/libpod_parent/cpu.rt_runtime_us";
const PARENT_RT_US: u64 = 500_000;
const CONTAINER_RT_US: u64 = 400_000;

/// The real-time time lent to podman's parent cgroup, shared by the tests of this process
/// that run real-time containers: lent by the first, given back by the last (after its
/// containers, which are declared after it, are gone). One test giving it back while
/// another's containers held shares failed CI.
pub(crate) struct RtBudget;

/// How many tests hold the lent budget, and what the parent had before.
static LENT: Mutex<(usize, String)> = Mutex::new((0, String::new()));

impl RtBudget {
    pub(crate) fn lend(test: &str) -> Option<RtBudget> {
        let mut lent = LENT.lock().unwrap_or_else(|e| e.into_inner());
        if lent.0 == 0 {
            let old = std::fs::read_to_string(PODMAN_RT_PARENT).ok()?;
            std::fs::write(PODMAN_RT_PARENT, PARENT_RT_US.to_string()).ok()?;
            eprintln!(
                "{test}: RT group scheduling here: {PARENT_RT_US} µs/s lent to podman's \
                 cgroups (was {})",
                old.trim()
            );
            lent.1 = old.trim().to_string();
        }
        lent.0 += 1;
        Some(RtBudget)
    }

    /// `--cpu-rt-runtime=US` for a container, once podman's cgroups leave `us` of the
    /// lent time free (10 s at most): a `--rm` container's cgroup, and its share, outlive
    /// the container a little, and a container asking for more than is left is refused.
    pub(crate) fn runtime_arg(&self, us: u64) -> String {
        self.wait_for_room(us);
        format!("--cpu-rt-runtime={us}")
    }

    fn wait_for_room(&self, us: u64) {
        let t0 = Instant::now();
        while rt_taken_us() + us > PARENT_RT_US {
            if t0.elapsed() > Duration::from_secs(10) {
                // Said, for the failure that follows: a group left behind by a run that
                // was killed holds its share until it is removed (rmdir).
                return eprintln!(
                    "podman's cgroups still hold {} µs/s of real-time time, {us} wanted, \
                     {PARENT_RT_US} lent",
                    rt_taken_us()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// The real-time time podman's container cgroups hold now (µs a second).
fn rt_taken_us() -> u64 {
    let parent = Path::new(PODMAN_RT_PARENT).parent().expect("a directory");
    let Ok(dirs) = std::fs::read_dir(parent) else {
        return 0;
    };
    dirs.filter_map(|d| std::fs::read_to_string(d.ok()?.path().join("cpu.rt_runtime_us")).ok())
        .filter_map(|v| v.trim().parse::<u64>().ok())
        .sum()
}

impl Drop for RtBudget {
    /// The kernel refuses (EBUSY) while a container's cgroup still holds a share, and
    /// podman removes a `--rm` container's cgroup a little after the container exits.
    fn drop(&mut self) {
        let mut lent = LENT.lock().unwrap_or_else(|e| e.into_inner());
        lent.0 -= 1;
        if lent.0 > 0 {
            return;
        }
        let t0 = Instant::now();
        while std::fs::write(PODMAN_RT_PARENT, &lent.1).is_err() {
            if t0.elapsed() > Duration::from_secs(10) {
                return eprintln!(
                    "could not give back {PODMAN_RT_PARENT}: it is still {PARENT_RT_US}"
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

pub(crate) fn podman_text(args: &[&str]) -> String {
    let out = Command::new("podman")
        .args(args)
        .output()
        .expect("podman runs");
    assert!(
        out.status.success(),
        "podman {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The files in the image, from its exported filesystem.
fn image_files(image: &str) -> Vec<String> {
    let id = podman_text(&["create", image]);
    let _c = Container(id.clone());
    let tar = Command::new("podman")
        .args(["export", &id])
        .output()
        .expect("podman export");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fs.tar");
    std::fs::write(&path, tar.stdout).unwrap();
    let list = Command::new("tar").arg("tf").arg(&path).output().unwrap();
    String::from_utf8_lossy(&list.stdout)
        .lines()
        .map(|l| l.trim_end_matches('/').to_string())
        .collect()
}

/// The image's default command, with the listen address swapped for `listen`.
fn default_command(image: &str, listen: &str) -> Vec<String> {
    let cmd: Vec<String> = serde_json::from_str(&podman_text(&[
        "image",
        "inspect",
        "--format",
        "{{json .Config.Cmd}}",
        image,
    ]))
    .expect("the image's Cmd");
    cmd.into_iter()
        .map(|a| {
            if a == "127.0.0.1:9464" {
                listen.to_string()
            } else {
                a
            }
        })
        .collect()
}

/// Scrapes `addr` until it answers, within 15 s: the exposition text.
fn first_scrape(addr: SocketAddr) -> String {
    let t0 = Instant::now();
    loop {
        if let Ok((200, body)) = get(addr, "/metrics") {
            return body;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(15),
            "the container never served"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// promtool's verdict on an exposition text (lint warnings are printed, not failed on).
fn promtool_check(text: &str) {
    use std::io::Write;
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let said =
        String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
    assert!(!said.contains("error while linting"), "promtool: {said}");
    if !said.trim().is_empty() {
        eprintln!("promtool check metrics: {said}");
    }
}

/// Runs the image's monitor as the DaemonSet does, on a free port, scraped by Prometheus;
/// stops it with SIGTERM. Whether SCHED_FIFO was granted in the container.
fn monitor_in_container(podman: &Podman, image: &str, rt: &Option<RtBudget>) -> bool {
    let logs = tempfile::tempdir().unwrap();
    let listen = format!("127.0.0.1:{}", free_port());
    let name = format!("jitterscope-test-{}", std::process::id());
    let _m = util::measuring();
    let out = podman
        .as_daemonset(rt)
        .args(["-d", "--name", &name, "--memory", "64m", "--cpus", "1"])
        .arg("-v")
        .arg(format!("{}:/var/log/jitterscope", logs.path().display()))
        .arg(image)
        .args(default_command(image, &listen))
        .output()
        .expect("podman runs");
    // Removed however the test ends, a refused run's created container too.
    let container = Container(name.clone());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let addr: SocketAddr = listen.parse().unwrap();
    promtool_check(&first_scrape(addr));
    let prometheus = Prometheus::start(addr);
    let up = prometheus.wait_for("jitterscope_up", Duration::from_secs(30));
    assert_eq!(up, Some(1.0), "Prometheus scraped the container");
    let count = "sum(jitterscope_timer_wakeup_latency_seconds_count)";
    let count = prometheus.wait_for(count, Duration::from_secs(10));
    assert!(
        count.is_some_and(|c| c > 0.0),
        "wake-ups scraped: {count:?}"
    );
    drop(prometheus);
    // SIGTERM (podman stop) writes the last partial interval and exits 0.
    podman_text(&["stop", "-t", "10", &name]);
    let code = podman_text(&["inspect", "--format", "{{.State.ExitCode}}", &name]);
    // The container's stderr comes back on podman's.
    let logs_out = Command::new("podman")
        .args(["logs", &name])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&logs_out.stderr).to_string();
    eprintln!("monitor in the container said:\n{said}");
    drop(container);
    assert_eq!(code, "0", "{said}");
    let log = logs.path().join("monitor.hlog");
    assert!(
        log.metadata().is_ok_and(|m| m.len() > 0),
        "the interval log is written"
    );
    !said.contains("SCHED_FIFO 1 was refused")
}

/// Issue 30: the audit in the container, with the DaemonSet's privileges. The checks
/// that cannot see the node from inside (its processes: irqbalance, kernel threads; its
/// /etc: tuned) say so and are listed by `inside-container`; none of them is passed.
fn audit_in_container(podman: &Podman, image: &str) {
    let out = podman
        .as_daemonset(&None)
        .args(["--rm", image, "audit", "-a", "1", "--json"])
        .output()
        .expect("podman runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: jitterscope::system::audit::AuditReport =
        serde_json::from_slice(&out.stdout).expect("an audit report");
    let ids: Vec<String> = r.findings.iter().map(|f| f.id.to_string()).collect();
    let hidden: Vec<&str> = (r.findings.iter())
        .filter(|f| f.value.starts_with("not visible from inside"))
        .map(|f| f.value.as_str())
        .collect();
    eprintln!(
        "audit in the container: {} checks ran: {}\ncannot see from inside: {hidden:#?}",
        ids.len(),
        ids.join(", ")
    );
    let inside = (r.findings.iter())
        .find(|f| f.id == "inside-container")
        .expect("the audit knows it is in a container");
    for id in [
        "irqbalance-unreadable",
        "kthreads-unreadable",
        "tuned-unreadable",
    ] {
        assert!(ids.iter().any(|i| i == id), "{id}: {ids:?}");
        assert!(inside.value.contains(id), "{inside:?}");
    }
    for passed in ["irqbalance-not-running", "kthreads-ok"] {
        assert!(
            !ids.iter().any(|i| i == passed),
            "{passed} from inside: {ids:?}"
        );
    }
}

#[test]
#[ignore = "builds the static binary and an image (minutes): scripts/test runs it"]
fn the_image_serves_metrics_and_passes_selftest() {
    let test = "the_image_serves_metrics_and_passes_selftest";
    if !is_root() {
        return skip(
            test,
            "needs root: the DaemonSet's capabilities, and podman as root",
        );
    }
    if Command::new("podman").arg("--version").output().is_err() {
        return skip(
            test,
            "podman is not installed (apt-get install podman buildah)",
        );
    }
    if prometheus_tools(test).is_none() {
        return;
    }
    let (image, _) = built_image().unwrap();
    assert_eq!(image, format!("jitterscope:{VERSION}"));
    let Some(podman) = Podman::find(test, &image) else {
        return;
    };
    let bytes = podman_text(&["image", "inspect", "--format", "{{.Size}}", &image]);
    eprintln!("{test}: {image} is {bytes} bytes");
    assert_eq!(
        image_files(&image),
        ["usr", "usr/bin", "usr/bin/jitterscope"]
    );
    let version = podman
        .run()
        .args(["--rm", &image, "--version"])
        .output()
        .unwrap();
    let version = String::from_utf8_lossy(&version.stdout);
    assert!(
        version.starts_with(&format!("jitterscope {VERSION} (")),
        "{version}"
    );

    audit_in_container(&podman, &image);
    let rt = RtBudget::lend(test);
    let fifo = monitor_in_container(&podman, &image, &rt);
    let rt_group = Path::new("/sys/fs/cgroup/cpu/cpu.rt_runtime_us").exists();
    assert!(
        fifo || (rt_group && rt.is_none()),
        "SYS_NICE gave the monitor SCHED_FIFO"
    );
    // selftest without the 1-CPU limit: its noise check spins on one CPU while the holder
    // and the coordinator need another.
    let text = util::selftest_passes(test, || {
        let mut c = podman.as_daemonset(&rt);
        c.args(["--rm", &image, "selftest"]);
        c
    });
    let mut checks = vec!["counter", "safety"];
    if fifo {
        checks.extend(["noise detection", "timer detection"]);
    }
    for check in checks {
        assert!(util::check_judged(&text, check), "{check}: {text}");
    }
}

/// The image's command (Containerfile), the systemd unit's and the DaemonSet's are the
/// same monitor, and the DaemonSet names the image the build makes, with its version.
#[test]
fn the_image_runs_what_the_unit_and_the_daemonset_run() {
    let read = |p: &str| std::fs::read_to_string(Path::new(REPO).join(p)).unwrap();
    let containerfile = read("deploy/container/Containerfile");
    let cmd = containerfile
        .lines()
        .find_map(|l| l.strip_prefix("CMD "))
        .expect("a CMD");
    let image_cmd: Vec<String> = serde_json::from_str(cmd).expect("CMD in exec form");
    let unit = read("deploy/systemd/jitterscope-monitor.service");
    let exec = unit
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .expect("ExecStart");
    let unit_cmd: Vec<String> = exec.split_whitespace().skip(1).map(String::from).collect();
    let daemonset = read("deploy/kubernetes/daemonset.yaml");
    let ds_cmd: Vec<String> = daemonset
        .lines()
        .skip_while(|l| l.trim() != "args:")
        .skip(1)
        .map_while(|l| l.trim().strip_prefix("- "))
        .map(String::from)
        .collect();
    assert_eq!(normal(&image_cmd), normal(&unit_cmd));
    assert_eq!(normal(&ds_cmd), normal(&unit_cmd));
    let image = daemonset
        .lines()
        .find_map(|l| l.trim().strip_prefix("image: "))
        .expect("an image");
    assert!(
        image.ends_with(&format!("jitterscope:{VERSION}")),
        "the DaemonSet runs {image}, the build makes jitterscope:{VERSION}"
    );
}

/// A command line with one spelling per flag: `--flag=value` split, `-p` long.
fn normal(args: &[String]) -> Vec<String> {
    args.iter()
        .flat_map(|a| match a.split_once('=') {
            Some((flag, value)) if a.starts_with("--") => vec![flag.to_string(), value.to_string()],
            _ => vec![a.clone()],
        })
        .map(|a| {
            if a == "-p" {
                "--priority".to_string()
            } else {
                a
            }
        })
        .collect()
}
