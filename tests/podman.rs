//! Issue 34 with real podman containers, from the image `scripts/build-image --local`
//! makes (the static binary alone, FROM scratch; built once per test process and shared
//! with `image::`'s test). `watch --container`: A runs a 1 kHz SCHED_FIFO 5 sleeper
//! (`jitterscope timer`), B a SCHED_FIFO 10 hold of 1.5 ms every 10 ms (`jitterscope
//! hold`, hidden), both held to one CPU by `--cpuset-cpus`; B's task, named with B's
//! container, must be what ran instead in the delays the holds made. `watch --pod` on a
//! real `podman pod`: every container of it watched, one started during the watch
//! included, a container outside it not. Both need root, podman, tracefs and two CPUs;
//! with RT group scheduling (cgroup v1) podman's parent group is lent real-time time for
//! the run. Every container and pod is removed on every way out; the image is left, as
//! `image::` leaves it.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use jitterscope::report::ResultFile;

use crate::image::{Container, PODMAN_RT_PARENT, Podman, RtBudget, built_image, podman_text};
use crate::util::{Measuring, bin, is_root, measuring, skip};

/// B's hold is longer than A's period (1 ms): each hold delays one of A's wake-ups by
/// at least 0.5 ms.
const HOLD: &str = "1500us";
const PERIOD: &str = "10ms";
const THRESHOLD_US: u64 = 400;
/// Each container's share of the 500 ms/s lent to podman's parent group.
const A_RT_US: u64 = 100_000;
const B_RT_US: u64 = 250_000;
/// The pod test's watch (`-D 5s`), and when into it the pod's third container is started.
const WATCH: Duration = Duration::from_secs(5);
const MIDWAY: Duration = Duration::from_millis(1500);
/// The sleepers' period (`timer -i`).
const SLEEPER_PERIOD_US: u64 = 1000;

/// Root, podman, the image built, then (under the measuring lock, which the build takes
/// itself, and which keeps two tests from tracing at once) SCHED_FIFO, two CPUs and
/// tracefs: the lock, the measured CPU, the housekeeping one, the podman to run with and
/// the image's id.
fn ready(test: &str) -> Option<(Measuring, usize, usize, Podman, String)> {
    if !is_root() {
        skip(test, "needs root: podman as root, and tracefs instances");
        return None;
    }
    if Command::new("podman").arg("--version").output().is_err() {
        skip(test, "podman is not installed (apt-get install podman)");
        return None;
    }
    let (_, image) = built_image().unwrap();
    let m = measuring();
    let (cpu, hk) = crate::watch::can_watch(test)?;
    let podman = Podman::find(test, &image)?;
    Some((m, cpu, hk, podman, image))
}

/// Runs `podman run -d` with `args` (options, the image, its command): the container,
/// removed when dropped.
fn start(podman: &Podman, name: &str, args: &[String]) -> Container {
    let out = podman
        .run()
        .args(["-d", "--name", name])
        .args(args)
        .output()
        .expect("podman runs");
    // A refused run leaves its container created: removed with it.
    let _refused = (!out.status.success()).then(|| Container(name.to_string()));
    assert!(
        out.status.success(),
        "podman run {name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Container(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The host's id of the thread named `comm` in the container, once it is there (10 s).
fn thread_of(c: &Container, comm: &str) -> u32 {
    let pid = podman_text(&["inspect", "--format", "{{.State.Pid}}", &c.0]);
    let t0 = Instant::now();
    loop {
        let tasks = std::fs::read_dir(format!("/proc/{pid}/task"))
            .into_iter()
            .flatten();
        let found = tasks.flatten().find_map(|e| {
            let name = std::fs::read_to_string(e.path().join("comm")).ok()?;
            (name.trim() == comm).then(|| e.file_name().to_str()?.parse().ok())?
        });
        if let Some(tid) = found {
            return tid;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "no thread {comm} in container {} (pid {pid})",
            &c.0[..12]
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `podman stop`, then what the container printed on stdout.
fn stop_and_read(c: &Container) -> String {
    let _ = Command::new("podman")
        .args(["stop", "-t", "5", &c.0])
        .stdout(Stdio::null())
        .status();
    podman_text(&["logs", &c.0])
}

/// `jitterscope timer` at 1 kHz on `cpu`, in a container: the real-time one with
/// `--cpu-rt-runtime` and SYS_NICE, the others at SCHED_OTHER without privileges.
fn sleeper(cpu: usize, fifo: bool) -> Vec<String> {
    let period = SLEEPER_PERIOD_US.to_string();
    let mut a: Vec<String> = ["timer", "-a", &cpu.to_string(), "-i", &period]
        .into_iter()
        .map(String::from)
        .collect();
    if fifo {
        a.extend(["-p", "5"].map(String::from));
    }
    a.extend(["-D", "20s", "-q", "--no-dma-latency", "--no-mlock"].map(String::from));
    a
}

#[test]
#[ignore = "builds the static binary and an image (minutes): scripts/test runs it"]
fn issue34_watch_container_names_a_podman_neighbours_holds_by_its_container() {
    let test = "issue34_watch_container_names_a_podman_neighbours_holds_by_its_container";
    let Some((_m, cpu, hk, podman, image)) = ready(test) else {
        return;
    };
    let rt_group = Path::new(PODMAN_RT_PARENT).exists();
    let rt = RtBudget::lend(test);
    if rt_group && rt.is_none() {
        return skip(
            test,
            "podman's parent cgroup cannot be lent RT runtime (fifo)",
        );
    }
    let pid = std::process::id();
    // Held to the one CPU, allowed SCHED_FIFO, and given their share of real-time time
    // where the kernel groups it.
    let placed = |rt_us: u64| {
        let mut a = vec![format!("--cpuset-cpus={cpu}"), "--cap-add=SYS_NICE".into()];
        a.extend(rt.as_ref().map(|rt| rt.runtime_arg(rt_us)));
        a.push(image.clone());
        a
    };
    let mut a_args = placed(A_RT_US);
    a_args.extend(sleeper(cpu, true));
    let a = start(&podman, &format!("jsq34-a-{pid}"), &a_args);
    let sleeper_tid = thread_of(&a, &format!("measure-cpu{cpu}"));
    let mut b_args = placed(B_RT_US);
    let hold = [
        "hold",
        "-a",
        &cpu.to_string(),
        "--period",
        PERIOD,
        "--busy",
        HOLD,
    ];
    b_args.extend(
        hold.into_iter()
            .chain(["-p", "10", "-D", "20s"])
            .map(String::from),
    );
    let b = start(&podman, &format!("jsq34-b-{pid}"), &b_args);
    let holder = thread_of(&b, "jitterscope");
    let (a12, b12) = (a.0[..12].to_string(), b.0[..12].to_string());
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("watch.json");
    let out = Command::new(bin())
        .args(["watch", "--container", &a12, "-D", "3s", "-q"])
        .args(["-T", &format!("{THRESHOLD_US}us")])
        .args(["--housekeeping", &hk.to_string()])
        .arg(format!("--json={}", json.display()))
        .output()
        .expect("the binary runs");
    let said_b = stop_and_read(&b);
    let said_a = stop_and_read(&a);
    drop((a, b));
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        said_b.starts_with("hold: "),
        "B said: {said_b}; A said: {said_a}"
    );
    let w = ResultFile::read(&json)
        .expect("the result")
        .watch
        .expect("a watch section");
    assert!(
        w.target.starts_with(&format!("container {a12}")),
        "{}",
        w.target
    );
    let th = (w.threads.iter())
        .find(|t| t.tid == sleeper_tid)
        .expect("A's sleeper watched");
    let att = th.attribution.as_ref().expect("delays over the threshold");
    let neighbour = format!("task jitterscope:{holder} ");
    let hog = (att.causes.iter())
        .find(|c| c.cause.starts_with(&neighbour))
        .unwrap_or_else(|| panic!("B's holder among the causes: {:#?}", att.causes));
    assert!(
        hog.cause.ends_with(&format!("(container {b12})")),
        "named with B's container: {}",
        hog.cause
    );
    // A's own timer's coordinator shares the one CPU (--cpuset-cpus holds every thread of
    // A there): it may run a few µs inside a delay, as the sleeper's wake-up waits for the
    // next preemption point, but no delay may be named after it.
    let own = format!("(container {a12})");
    let own: Vec<_> = (att.causes.iter())
        .filter(|c| c.cause.ends_with(&own))
        .collect();
    assert!(
        own.iter().all(|c| c.largest_in == 0),
        "a delay named after a task of A's own: {own:#?}"
    );
    let own_ns: u64 = own.iter().map(|c| c.total_ns).sum();
    println!("{test}: A's own tasks ran {own_ns} ns inside its delays, the largest part of none");
    // Each delay ≥ 400 µs of a FIFO 5 sleeper is a hold's (only higher priorities and
    // interrupts hold it off, none that long here): B's task must be its largest part
    // in 99 % of them, judged as tests/containers.rs judges.
    let (n, named) = (att.gaps, hog.largest_in);
    println!(
        "{test}: B said \"{}\"; {n} of A's delays ≥ {THRESHOLD_US} µs in 3 s, B's task \
         ({}) the largest part of {named}",
        said_b.trim(),
        hog.cause
    );
    assert!(
        n >= 200,
        "only {n} delays over {THRESHOLD_US} µs in 3 s of holds every 10 ms"
    );
    let (ok, words) = jitterscope::stats::misses::judge((n - named) as usize, n as usize, 0.01);
    println!("{test}: delays not named after B: {words}");
    assert!(ok, "{words}; {:#?}", att.causes);
}

/// A podman pod, removed (with its containers) however the test ends.
struct Pod(String);

impl Pod {
    /// A pod whose infra container runs this image (podman's own pause image needs
    /// catatonit, which this host lacks): a 1 Hz timer at SCHED_OTHER, doing next to
    /// nothing. `podman pod create` takes no `--ulimit`, and the infra container's
    /// default limits need CAP_SYS_RESOURCE to set: they come from a containers.conf of
    /// the test's (`CONTAINERS_CONF`).
    fn create(podman: &Podman, image: &str, name: &str, conf: &Path) -> Pod {
        std::fs::write(
            conf,
            "[containers]\ndefault_ulimits = [\"nofile=4096:4096\", \"nproc=4096:4096\"]\n",
        )
        .unwrap();
        let infra = "/usr/bin/jitterscope timer -i 1000000 -D 60s -q --no-dma-latency --no-mlock";
        let out = podman
            .podman()
            .env("CONTAINERS_CONF", conf)
            .args(["pod", "create", "--name", name, "--infra-image", image])
            .args(["--infra-command", infra])
            .output()
            .expect("podman runs");
        assert!(
            out.status.success(),
            "podman pod create: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Pod(String::from_utf8_lossy(&out.stdout).trim().to_string())
    }
}

impl Drop for Pod {
    fn drop(&mut self) {
        let _ = Command::new("podman")
            .args(["pod", "rm", "-f", "-t", "0", &self.0])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

#[test]
#[ignore = "builds the static binary and an image (minutes): scripts/test runs it"]
fn issue34_watch_pod_follows_every_container_of_a_podman_pod() {
    let test = "issue34_watch_pod_follows_every_container_of_a_podman_pod";
    let Some((_m, cpu, hk, podman, image)) = ready(test) else {
        return;
    };
    let pid = std::process::id();
    let dir = tempfile::tempdir().unwrap();
    let pod = Pod::create(
        &podman,
        &image,
        &format!("jsq34-pod-{pid}"),
        &dir.path().join("containers.conf"),
    );
    let args = sleeper(cpu, false);
    let run = |name: &str, in_pod: bool| {
        let mut a: Vec<String> = Vec::new();
        a.extend(in_pod.then(|| format!("--pod={}", pod.0)));
        a.push(image.clone());
        a.extend(args.iter().cloned());
        start(&podman, &format!("jsq34-{name}-{pid}"), &a)
    };
    let measure = format!("measure-cpu{cpu}");
    let (c1, c2, outside) = (run("c1", true), run("c2", true), run("out", false));
    let first = [thread_of(&c1, &measure), thread_of(&c2, &measure)];
    let outsider = thread_of(&outside, &measure);
    let json = dir.path().join("watch.json");
    let watch = Command::new(bin())
        .args(["watch", "--pod", &pod.0[..12], "-D", "5s", "-q"])
        .args(["--housekeeping", &hk.to_string()])
        .arg(format!("--json={}", json.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    // The watch has begun once its tracefs instance is there.
    let instance = jitterscope::trace::tracefs_root()
        .expect("tracefs")
        .join(format!("instances/jitterscope-{}", watch.id()));
    let t0 = Instant::now();
    while !instance.exists() && t0.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(MIDWAY);
    let started = Instant::now();
    let c3 = run("c3", true);
    let late = thread_of(&c3, &measure);
    let in_after = started.elapsed();
    let out = watch.wait_with_output().unwrap();
    // The third was there for at most this much of the watch: from before its `podman run`
    // to after the watch had ended.
    let there = started.elapsed();
    drop((c1, c2, c3, outside));
    drop(pod);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let w = ResultFile::read(&json)
        .expect("the result")
        .watch
        .expect("a watch section");
    assert!(w.target.starts_with("pod "), "{}", w.target);
    let wakeups = |tid: u32| {
        (w.threads.iter())
            .find(|t| t.tid == tid)
            .map(|t| t.wakeup.count)
    };
    let seen: Vec<Option<u64>> = first.iter().chain([&late]).map(|t| wakeups(*t)).collect();
    // A 1 ms sleeper wakes at most once a period it was there, and one more: the third can
    // have been seen at most this often had it come in during the watch.
    let most = there.as_micros() as u64 / SLEEPER_PERIOD_US + 1;
    let whole = WATCH.as_micros() as u64 / SLEEPER_PERIOD_US;
    println!(
        "{test}: {} threads watched; wake-ups seen of the pod's sleepers {seen:?} (the third \
         started {MIDWAY:?} after the trace began, of {WATCH:?}, its thread there {} ms after \
         `podman run` began; there for at most {} ms of the watch: at most {most} wake-ups, \
         where {whole} are a whole watch's); {} events read, {} lost",
        w.threads.len(),
        in_after.as_millis(),
        there.as_millis(),
        w.events_read,
        w.events_lost
    );
    for (tid, n) in first.iter().chain([&late]).zip(&seen) {
        assert!(
            n.is_some_and(|n| n > 0),
            "sleeper {tid} of the pod not watched: {seen:?}"
        );
    }
    // The bound tells a late-comer from one there all along only while it is below a whole
    // watch's wake-ups.
    assert!(
        most < whole,
        "the third container came in too late to tell: {} ms before the end",
        there.as_millis()
    );
    assert!(
        seen[2].unwrap_or(0) <= most,
        "the third container was watched before it came in: {seen:?}, at most {most} possible"
    );
    assert_eq!(
        wakeups(outsider),
        None,
        "a container outside the pod watched"
    );
}
