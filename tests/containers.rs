//! Issue 34: `watch --container` against ground truth, with plain cgroups standing for
//! two containers (podman images FROM scratch take minutes to build; the cgroup tree is
//! what `--container` reads, so groups named as podman names them stand in): two v1
//! `cpu` groups named `libpod-<id>.scope`, A holding a 1 kHz SCHED_FIFO 5 sleeper, B a
//! SCHED_FIFO 10 hold of 1.5 ms every 10 ms on the same CPU. A hold is longer than the
//! sleeper's period, so each delays one wake-up by at least 0.5 ms. `watch --container
//! A` must name B's task, marked as B's container, as the largest part of those delays,
//! and never a task of A. Needs root, SCHED_FIFO, tracefs, two CPUs and cgroup v1's
//! `cpu` hierarchy with RT group scheduling; holds the measuring lock; the groups are
//! removed on every way out.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use jitterscope::engine::clock::Scale;
use jitterscope::engine::clock::{self, ClockInfo};
use jitterscope::report::ResultFile;
use jitterscope::stats::causes::{CauseKind, quota_label};
use jitterscope::system::cgroup::{CpuStat, parse_cpu_stat};
use rustix::time::{ClockId, Timespec};

use crate::injector::{Schedule, inject};
use crate::util::{bin, is_root, measuring, skip, tracefs_usable, two_cpus};

const CPU_MOUNT: &str = "/sys/fs/cgroup/cpu";
/// The hold is longer than the sleeper's period (1 ms): each hold delays a wake-up.
const HOLD: Duration = Duration::from_micros(1500);
const PERIOD: Duration = Duration::from_millis(10);
/// Delays at or above this are attributed: every hold's is (≥ 0.5 ms).
const THRESHOLD_US: u64 = 400;

/// Two `libpod-<id>.scope` groups under one parent, each with RT runtime (a child
/// without it refuses SCHED_FIFO tasks); tasks moved back to the root and the groups
/// removed when dropped.
struct Containers {
    parent: PathBuf,
    ids: [String; 2],
}

impl Containers {
    fn make() -> Result<Containers, String> {
        let pid = std::process::id();
        let parent = Path::new(CPU_MOUNT).join(format!("jsq-issue34-{pid}"));
        // The pid first: the 12 characters the tests give as the id are then this run's
        // alone, not shared with a group a killed run left.
        let ids = [
            format!("34a{pid:08x}{:053}", 0),
            format!("34b{pid:08x}{:053}", 0),
        ];
        let c = Containers { parent, ids };
        std::fs::create_dir(&c.parent).map_err(|e| format!("cannot make a cpu group: {e}"))?;
        c.write(&c.parent, "cpu.rt_runtime_us", "400000")?;
        for (id, runtime) in c.ids.iter().zip(["100000", "250000"]) {
            let dir = c.dir(id);
            std::fs::create_dir(&dir).map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
            c.write(&dir, "cpu.rt_runtime_us", runtime)?;
        }
        Ok(c)
    }

    fn dir(&self, id: &str) -> PathBuf {
        self.parent.join(format!("libpod-{id}.scope"))
    }

    fn write(&self, dir: &Path, file: &str, value: &str) -> Result<(), String> {
        let p = dir.join(file);
        std::fs::write(&p, value)
            .map_err(|e| format!("cannot write {value} to {}: {e}", p.display()))
    }

    /// Moves thread `tid` into container `i`.
    fn put(&self, i: usize, tid: u32) {
        self.write(&self.dir(&self.ids[i]), "tasks", &tid.to_string())
            .unwrap();
    }
}

impl Drop for Containers {
    fn drop(&mut self) {
        for id in &self.ids {
            crate::util::remove_cpu_group(&self.dir(id), Path::new(CPU_MOUNT));
        }
        let _ = std::fs::remove_dir(&self.parent);
    }
}

/// At SCHED_FIFO 5 on `cpu`, sleeps to deadlines 1 ms apart until `stop`.
fn sleeper(cpu: usize, tid: std::sync::mpsc::Sender<u32>, stop: &AtomicBool) {
    use jitterscope::engine::sched::{Policy, SchedRequest, set_policy};
    let fifo = SchedRequest {
        policy: Policy::Fifo,
        priority: 5,
    };
    set_policy(fifo).expect("SCHED_FIFO");
    sleep_1khz(cpu, tid, stop);
}

/// On `cpu`, at the policy it has, sleeps to deadlines 1 ms apart until `stop`.
fn sleep_1khz(cpu: usize, tid: std::sync::mpsc::Sender<u32>, stop: &AtomicBool) {
    jitterscope::engine::sched::pin_to(cpu).expect("pinned");
    let _ = jitterscope::engine::calls::set_timer_slack(1);
    tid.send(rustix::thread::gettid().as_raw_nonzero().get() as u32)
        .unwrap();
    let mut next = clock::monotonic_ns();
    while !stop.load(Ordering::Relaxed) {
        next += 1_000_000;
        let ts = Timespec {
            tv_sec: (next / 1_000_000_000) as i64,
            tv_nsec: (next % 1_000_000_000) as i64,
        };
        let _ = rustix::thread::clock_nanosleep_absolute(ClockId::Monotonic, &ts);
    }
}

/// A 1 kHz sleeper put in container 0 and a SCHED_FIFO 10 neighbour holding `HOLD` every
/// `PERIOD`, put in container 1, both on `cpu`, while `during(sleeper's tid)` runs; then
/// both stopped. The neighbour's holds, and what `during` returned.
fn with_neighbours<T: Send>(
    cpu: usize,
    groups: &Containers,
    during: impl FnOnce(u32) -> T + Send,
) -> (Vec<crate::injector::Injection>, T) {
    let clock = ClockInfo::detect().0;
    let (stop, ready) = (AtomicBool::new(false), Barrier::new(2));
    std::thread::scope(|s| {
        let (tx, rx) = std::sync::mpsc::channel();
        let stop = &stop;
        let sleeper = std::thread::Builder::new()
            .name("js-sleeper".into())
            .spawn_scoped(s, move || sleeper(cpu, tx, stop))
            .unwrap();
        let sleeper_tid = rx.recv().unwrap();
        let schedule = Schedule {
            cpu,
            priority: 10,
            period: PERIOD,
            busy: HOLD,
            run_for: Duration::from_secs(20),
            count: usize::MAX,
        };
        let (ready, clock) = (&ready, &clock);
        let hog = std::thread::Builder::new()
            .name("js-neighbour".into())
            .spawn_scoped(s, move || inject(schedule, ready, stop, clock))
            .unwrap();
        ready.wait();
        groups.put(0, sleeper_tid);
        groups.put(1, thread_named("js-neighbour").expect("the hog's thread"));
        let out = during(sleeper_tid);
        stop.store(true, Ordering::Relaxed);
        sleeper.join().unwrap();
        (hog.join().unwrap(), out)
    })
}

/// The thread of this process named `comm`.
fn thread_named(comm: &str) -> Option<u32> {
    let tasks = std::fs::read_dir("/proc/self/task").ok()?;
    tasks.flatten().find_map(|e| {
        let name = std::fs::read_to_string(e.path().join("comm")).ok()?;
        (name.trim() == comm).then(|| e.file_name().to_str()?.parse().ok())?
    })
}

#[test]
fn issue34_watch_container_names_the_neighbours_holds_by_its_container() {
    let test = "issue34_watch_container_names_the_neighbours_holds_by_its_container";
    let _m = measuring();
    let Some((cpu, hk)) = crate::watch::can_watch(test) else {
        return;
    };
    if !Path::new(CPU_MOUNT).join("cpu.rt_runtime_us").exists() {
        skip(test, "no cgroup v1 cpu hierarchy with RT group scheduling");
        return;
    }
    let groups = match Containers::make() {
        Ok(g) => g,
        Err(e) => return skip(test, &e),
    };
    let (a, b) = (
        groups.ids[0][..12].to_string(),
        groups.ids[1][..12].to_string(),
    );
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("watch.json");
    let (holds, (status, sleeper_tid)) = with_neighbours(cpu, &groups, |sleeper_tid| {
        let out = Command::new(bin())
            .args(["watch", "--container", &a, "-D", "3s", "-q"])
            .args(["-T", &format!("{THRESHOLD_US}us")])
            .args(["--housekeeping", &hk.to_string()])
            .arg(format!("--json={}", json.display()))
            .output()
            .expect("the binary runs");
        (out, sleeper_tid)
    });
    drop(groups);
    assert_eq!(
        status.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    let r = ResultFile::read(&json).expect("the result");
    let w = r.watch.expect("a watch section");
    assert!(
        w.target.starts_with(&format!("container {a}")),
        "{}",
        w.target
    );
    let th = (w.threads.iter())
        .find(|t| t.tid == sleeper_tid)
        .expect("the sleeper, in container A, watched");
    let att = th.attribution.as_ref().expect("delays over the threshold");
    let hog = (att.causes.iter())
        .find(|c| c.cause.starts_with("task js-neighbour:"))
        .unwrap_or_else(|| panic!("the hog among the causes: {:#?}", att.causes));
    assert!(
        hog.cause.ends_with(&format!("(container {b})")),
        "named with B's container: {}",
        hog.cause
    );
    let own = format!("(container {a})");
    assert!(
        !att.causes.iter().any(|c| c.cause.ends_with(&own)),
        "a task of A's own named: {:#?}",
        att.causes
    );
    // Each delay ≥ 400 µs is a hold's, but for those a task of the host made: a FIFO 5
    // sleeper is held off by higher priorities and interrupts, and on a kernel that does
    // not preempt itself (preempt=none, this guest's) by any task until it leaves the
    // kernel (beside a build, a linker's system calls: 6 delays of 3 ms). The hog must be
    // the largest part of 99 % of the others; the host's at most 10 % of all.
    let (n, named) = (att.gaps, hog.largest_in);
    let host = host_made(&att.causes);
    let missed = n - named - host;
    println!(
        "{test}: {} holds made, {n} delays ≥ {THRESHOLD_US} µs, the neighbour's container \
         the largest part of {named}, a task of the host of {host}",
        holds.len()
    );
    assert!(
        n >= 200,
        "only {n} delays over {THRESHOLD_US} µs in 3 s of holds every 10 ms"
    );
    let (ok, words) = jitterscope::stats::misses::judge(host as usize, n as usize, 0.10);
    println!("{test}: delays a task of the host made: {words}");
    assert!(ok, "{words}; {:#?}", att.causes);
    let (ok, words) = jitterscope::stats::misses::judge(missed as usize, (n - host) as usize, 0.01);
    println!("{test}: the others not named after the neighbour: {words}");
    assert!(ok, "{words}; {:#?}", att.causes);
}

/// Delays whose largest part a task of the host (outside every container) made.
fn host_made(causes: &[jitterscope::stats::causes::CauseRow]) -> u64 {
    (causes.iter())
        .filter(|c| c.kind == CauseKind::Task && c.cause.ends_with("(host)"))
        .map(|c| c.largest_in)
        .sum()
}

/// A target that is not there, or a prefix that is no id: one line, exit 2, before any
/// tracing (so as any user).
#[test]
fn issue34_watch_refuses_targets_that_are_not_there() {
    crate::util::assert_bad_input(&[
        &["watch", "--container", "ffffffffffffffff"],
        &["watch", "--container", "not-hex"],
        &["watch", "--pod", "00000000-0000-0000-0000-000000000000"],
        &["watch", "--unit", "jitterscope-no-such-unit"],
        &["watch", "--cgroup", "jitterscope/no/such/group"],
        &["watch", "--container", "ff", "--pid", "1"],
    ]);
}

/// A `libpod-<id>.scope` group under a parent of its own, with a CFS quota; its tasks
/// moved back to the root and both removed when dropped.
struct QuotaGroup {
    parent: PathBuf,
    dir: PathBuf,
    /// Its path in the hierarchy, as `--cgroup` takes it and attribution names it.
    path: String,
}

impl QuotaGroup {
    fn make(tag: &str) -> Result<QuotaGroup, String> {
        let pid = std::process::id();
        let name = format!("jsq-issue34{tag}-{pid}");
        let scope = format!("libpod-34{pid:062x}.scope");
        let g = QuotaGroup {
            parent: Path::new(CPU_MOUNT).join(&name),
            dir: Path::new(CPU_MOUNT).join(&name).join(&scope),
            path: format!("/{name}/{scope}"),
        };
        std::fs::create_dir(&g.parent).map_err(|e| format!("cannot make a cpu group: {e}"))?;
        std::fs::create_dir(&g.dir).map_err(|e| format!("cannot make {}: {e}", g.path))?;
        Ok(g)
    }

    fn write(&self, file: &str, value: &str) {
        let p = self.dir.join(file);
        std::fs::write(&p, value).unwrap_or_else(|e| panic!("{value} to {}: {e}", p.display()));
    }

    fn quota(&self, quota_us: u64, period_us: u64) {
        self.write("cpu.cfs_period_us", &period_us.to_string());
        self.write("cpu.cfs_quota_us", &quota_us.to_string());
    }

    fn stat(&self) -> CpuStat {
        let text = std::fs::read_to_string(self.dir.join("cpu.stat")).unwrap_or_default();
        parse_cpu_stat(&text).unwrap_or_default()
    }
}

impl Drop for QuotaGroup {
    fn drop(&mut self) {
        for _ in 0..50 {
            let tasks = std::fs::read_to_string(self.dir.join("tasks")).unwrap_or_default();
            for t in tasks.split_whitespace() {
                let _ = std::fs::write(Path::new(CPU_MOUNT).join("tasks"), t);
            }
            if std::fs::remove_dir(&self.dir).is_ok() || !self.dir.exists() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = std::fs::remove_dir(&self.parent);
    }
}

/// What one `watch --cgroup` of a group holding a busy thread and a 1 kHz sleeper made:
/// the result, the sleeper's tid, and the group's throttled time as the kernel counted
/// it, sampled every millisecond on the trace's clock: (tick, throttled ns so far).
struct QuotaRun {
    result: ResultFile,
    sleeper: u32,
    samples: Vec<(u64, u64)>,
    delta: CpuStat,
}

/// A SCHED_OTHER busy thread and a SCHED_OTHER 1 kHz sleeper on `cpu`, both in `g`,
/// watched for `secs` with `watch --cgroup`.
fn watch_quota_group(g: &QuotaGroup, cpu: usize, hk: usize, secs: &str) -> QuotaRun {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("watch.json");
    let stop = AtomicBool::new(false);
    let (out, sleeper, samples, delta) = std::thread::scope(|s| {
        let stop = &stop;
        let (tx, rx) = std::sync::mpsc::channel();
        let sleeper = std::thread::Builder::new()
            .name("js-q-sleeper".into())
            .spawn_scoped(s, move || sleep_1khz(cpu, tx, stop))
            .unwrap();
        let (btx, brx) = std::sync::mpsc::channel();
        let busy = std::thread::Builder::new()
            .name("js-q-busy".into())
            .spawn_scoped(s, move || {
                jitterscope::engine::sched::pin_to(cpu).expect("pinned");
                btx.send(rustix::thread::gettid().as_raw_nonzero().get() as u32)
                    .unwrap();
                while !stop.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
            .unwrap();
        let sleeper_tid = rx.recv().unwrap();
        g.write("tasks", &sleeper_tid.to_string());
        g.write("tasks", &brx.recv().unwrap().to_string());
        let before = g.stat();
        let sampler = s.spawn(move || {
            let _ = jitterscope::engine::sched::pin_to(hk);
            let mut v = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                v.push((clock::now(), g.stat().throttled_ns));
                std::thread::sleep(Duration::from_millis(1));
            }
            v
        });
        let out = Command::new(bin())
            .args([
                "watch", "--cgroup", &g.path, "-D", secs, "-q", "-T", "100us",
            ])
            .args(["--housekeeping", &hk.to_string()])
            .arg(format!("--json={}", json.display()))
            .output()
            .expect("the binary runs");
        let delta = g.stat().since(&before);
        stop.store(true, Ordering::Relaxed);
        sleeper.join().unwrap();
        busy.join().unwrap();
        (out, sleeper_tid, sampler.join().unwrap(), delta)
    });
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let result = ResultFile::read(&json).expect("the result");
    QuotaRun {
        result,
        sleeper,
        samples,
        delta,
    }
}

/// The sampled throttlings ((tick seen, ns) for each growth of the counter: it grows at
/// each unthrottle by the window just ended) that lay wholly between ticks `start` and
/// `end`, summed; and those that overlapped it at all, summed whole.
fn throttled_between(samples: &[(u64, u64)], scale: Scale, start: u64, end: u64) -> (u64, u64) {
    let windows = (samples.windows(2)).filter(|w| w[1].1 > w[0].1).map(|w| {
        (
            w[1].0.saturating_sub(scale.to_ticks(w[1].1 - w[0].1)),
            w[1].0,
            w[1].1 - w[0].1,
        )
    });
    windows.fold((0, 0), |(inside, touching), (from, to, ns)| {
        let within = from >= start && to <= end;
        let touches = to > start && from < end;
        (inside + within as u64 * ns, touching + touches as u64 * ns)
    })
}

/// The time of `run`'s sleeper named as a CFS quota: (named as `label`, named as any).
fn named_quota(run: &QuotaRun, label: &str) -> (u64, u64) {
    let w = run.result.watch.as_ref().expect("a watch section");
    let th = (w.threads.iter()).find(|t| t.tid == run.sleeper);
    let causes = th
        .and_then(|t| t.attribution.as_ref())
        .map(|a| a.causes.as_slice());
    let quota = (causes.unwrap_or_default().iter()).filter(|c| c.kind == CauseKind::Throttling);
    quota.fold((0, 0), |(mine, any), c| {
        (
            mine + (c.cause == label) as u64 * c.total_ns,
            any + c.total_ns,
        )
    })
}

/// Issue 34, done-when 2: a container's CFS quota named as the cause of its sleeper's
/// delays. A `libpod-<id>.scope` v1 `cpu` group at 30 ms per 100 ms holds a busy thread
/// and a 1 kHz sleeper on one CPU: the kernel throttles the group each period, and the
/// sleeper, runnable, waits for the refill. The stretches `watch --cgroup` names the
/// group's quota must add up to at least 95 % of the throttled time the group's
/// `cpu.stat` counted in the windows wholly inside the trace (sampled every millisecond
/// on the trace's clock; one under way when the trace began cannot show the sleeper's
/// switch out, nor one under way at its end the refill), real-time tasks of the host
/// aside (other tests' holders: while they ran the sleeper waited for them, named so),
/// and never much more than it counted. A control run with the quota at two CPUs' worth (never reached on one CPU):
/// no delay named a quota.
#[test]
fn issue34_watch_names_the_containers_cfs_quota_for_its_throttled_time() {
    let test = "issue34_watch_names_the_containers_cfs_quota_for_its_throttled_time";
    if !is_root() {
        return skip(test, "making a cgroup and tracing need root");
    }
    let Some((cpu, hk)) = two_cpus() else {
        return skip(test, "needs two usable CPUs");
    };
    // Held before tracefs is tried: a session another test closes may unmount it.
    let _m = measuring();
    if !tracefs_usable() {
        return skip(test, "tracefs cannot be mounted or used here");
    }
    if !Path::new(CPU_MOUNT).join("cpu.cfs_quota_us").exists() {
        return skip(
            test,
            "no cgroup v1 cpu hierarchy with CFS bandwidth control",
        );
    }
    let g = match QuotaGroup::make("q") {
        Ok(g) => g,
        Err(e) => return skip(test, &e),
    };
    let (quota_us, period_us) = (30_000, 100_000);
    g.quota(quota_us, period_us);
    let run = watch_quota_group(&g, cpu, hk, "3s");
    let setting = format!("cpu.cfs_quota_us {quota_us}, cpu.cfs_period_us {period_us}");
    let label = quota_label(&setting, &g.path);
    let w = run.result.watch.as_ref().expect("a watch section");
    let [start, end] = w.traced_ticks.expect("the trace's span");
    let scale = Scale::from_hz(run.result.host.clock.frequency_hz);
    let (inside, touching) = throttled_between(&run.samples, scale, start, end);
    let (named, any) = named_quota(&run, &label);
    let ms = |ns: u64| ns as f64 / 1e6;
    let counted = w.quotas.iter().find(|q| q.group == g.path);
    println!(
        "{test}: named \"{label}\" {:.1} ms of the sleeper's delays; cpu.stat: throttled \
         {:.1} ms in windows wholly inside the trace, {:.1} ms touching it, {:.1} ms over the \
         whole command ({} of {} periods); watch's own count over the trace: {:?}",
        ms(named),
        ms(inside),
        ms(touching),
        ms(run.delta.throttled_ns),
        run.delta.nr_throttled,
        run.delta.nr_periods,
        counted.map(|q| (
            ms(q.stat.throttled_ns),
            q.stat.nr_throttled,
            q.stat.nr_periods
        )),
    );
    let counted = counted.expect("the group's cpu.stat deltas in the result");
    assert_eq!(counted.quota.as_deref(), Some(setting.as_str()));
    if inside == 0 {
        return skip(
            test,
            "the kernel throttled nothing inside the trace (a host too busy?)",
        );
    }
    assert_eq!(named, any, "another throttle named");
    let th = (w.threads.iter()).find(|t| t.tid == run.sleeper);
    let causes: Vec<(&str, f64)> = (th.and_then(|t| t.attribution.as_ref()).iter())
        .flat_map(|a| a.causes.iter().take(6))
        .map(|c| (c.cause.as_str(), ms(c.total_ns)))
        .collect();
    // A real-time task of the host (another test's holder) that ran on the CPU while the
    // group was throttled took that time from the sleeper whatever the quota: it is named
    // as itself, and set beside the kernel's count with the quota's.
    let rt: u64 = (th.and_then(|t| t.attribution.as_ref()).iter())
        .flat_map(|a| a.causes.iter())
        .filter(|c| c.kind == CauseKind::Task && c.cause.contains("(real-time "))
        .map(|c| c.total_ns)
        .sum();
    println!(
        "{test}: {:.1} ms of the sleeper's delays named real-time tasks",
        ms(rt)
    );
    assert!(
        (named + rt) as f64 >= 0.95 * inside as f64,
        "{:.1} of {:.1} ms throttled named as the quota; events lost {} (kernel {}, reader \
         {}); the sleeper's wake-up max {:?} ns, preempted {:?} ns in {} stretches, {} ends \
         unseen; its causes (ms): {causes:?}",
        ms(named),
        ms(inside),
        w.events_lost,
        w.events_lost_kernel,
        w.events_lost_reader,
        th.map(|t| t.wakeup.max_ns),
        th.map(|t| t.preempted.sum_ns),
        th.map_or(0, |t| t.preempted.count),
        th.map_or(0, |t| t.preempted_ends_unseen),
    );
    assert!(
        named as f64 <= 1.02 * touching as f64 + 2e6,
        "named {:.1} ms, more than the {:.1} ms the kernel throttled",
        ms(named),
        ms(touching)
    );
    // The control: a quota is set (watch looks for its throttling) but never reached.
    g.quota(2 * period_us, period_us);
    let control = watch_quota_group(&g, cpu, hk, "2s");
    let (_, any) = named_quota(&control, &label);
    println!(
        "{test}: control at two CPUs' worth: {} of {} periods throttled, {:.1} ms named a \
         quota",
        control.delta.nr_throttled,
        control.delta.nr_periods,
        ms(any)
    );
    assert_eq!(control.delta.nr_throttled, 0, "the control was throttled");
    assert_eq!(any, 0, "a delay named a quota that never throttled");
}

/// `EMPTY` more `libpod-<id>.scope` groups under the same parent, no task in them:
/// their ids sort after A's and B's, so that A and B are among the first 64 groups.
const EMPTY: usize = 100;

impl Containers {
    fn make_empty(&self) -> Result<(), String> {
        for i in 0..EMPTY {
            let dir = self.dir(&format!("34c{i:061x}"));
            std::fs::create_dir(&dir).map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
        }
        Ok(())
    }

    fn remove_empty(&self) {
        for i in 0..EMPTY {
            let _ = std::fs::remove_dir(self.dir(&format!("34c{i:061x}")));
        }
    }

    /// Container `i` removed: its tasks back to the root group, its group gone.
    fn remove(&self, i: usize) {
        let dir = self.dir(&self.ids[i]);
        let tasks = std::fs::read_to_string(dir.join("tasks")).unwrap_or_default();
        for t in tasks.split_whitespace() {
            let _ = std::fs::write(Path::new(CPU_MOUNT).join("tasks"), t);
        }
        std::fs::remove_dir(&dir).unwrap();
    }
}

/// Issue 34, `monitor --watch-cgroup`, scraped by a real Prometheus: the two stand-in
/// containers above (A: a 1 kHz SCHED_FIFO 5 sleeper; B: a SCHED_FIFO 10 hold of 1.5 ms
/// every 10 ms on the same CPU) and 100 empty ones, matched by one pattern. One series
/// set per group with its labels (A's `container_id` its id, `unit` its scope); the
/// hold's cause counter under A's labels, naming B's task with B's container, the main
/// cause of A's delays ≥ 400 µs at a 99 % rate (misses::judge); at most 64 groups with
/// series of their own and the other 38 summed into `cgroup="dropped"`; promtool
/// accepts the exposition and Prometheus answers a query of A's series; once A is
/// removed, its series are gone at the next scrape.
#[test]
fn issue34_monitor_watch_cgroup_exports_per_container_and_drops_a_gone_one() {
    let test = "issue34_monitor_watch_cgroup_exports_per_container_and_drops_a_gone_one";
    let _m = measuring();
    let Some((cpu, hk)) = crate::watch::can_watch(test) else {
        return;
    };
    if !Path::new(CPU_MOUNT).join("cpu.rt_runtime_us").exists() {
        skip(test, "no cgroup v1 cpu hierarchy with RT group scheduling");
        return;
    }
    if crate::monitor::prometheus_tools(test).is_none() {
        return;
    }
    let groups = match Containers::make() {
        Ok(g) => g,
        Err(e) => return skip(test, &e),
    };
    let made = groups.make_empty();
    if let Err(e) = made {
        groups.remove_empty();
        return skip(test, &e);
    }
    let parent = groups
        .parent
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    let pattern = format!("{parent}/libpod-*.scope");
    let label = |i: usize| {
        let id = &groups.ids[i];
        format!(
            "cgroup=\"/{parent}/libpod-{id}.scope\",container_id=\"{id}\",pod_uid=\"\",\
             unit=\"libpod-{id}.scope\""
        )
    };
    let (a, b) = (label(0), label(1));
    let hog_cause = format!(
        "kind=\"task\",cause=\"task js-neighbour (container {})\"",
        &groups.ids[1][..12]
    );
    let (holds, outcome) = with_neighbours(cpu, &groups, |_| {
        let (cpu_s, hk_s) = (cpu.to_string(), hk.to_string());
        let mon = crate::monitor::Monitor::start(&[
            "-a",
            &cpu_s,
            "--housekeeping",
            &hk_s,
            "--watch-cgroup",
            &pattern,
            "--watch-threshold",
            &format!("{THRESHOLD_US}us"),
            "-D",
            "60s",
        ]);
        let mon = crate::monitor::traced_or_skip(mon, test, "watch")?;
        let prom = crate::monitor::Prometheus::start(mon.addr);
        // 3 s of holds, walked 300 ms behind and drained every second.
        std::thread::sleep(Duration::from_secs(4));
        let (_, before) = crate::monitor::get(mon.addr, "/metrics").unwrap();
        let scraped_ns = jitterscope::engine::clock::monotonic_ns();
        let count_a = format!("jitterscope_watch_cgroup_wakeup_delay_seconds_count{{{a}}}");
        let queried = prom.wait_for(
            &format!(
                "jitterscope_watch_cgroup_late_wakeups_total{{container_id=\"{}\"}}",
                groups.ids[0]
            ),
            Duration::from_secs(10),
        );
        let series = prom.query("count(jitterscope_watch_cgroup_wakeup_delay_seconds_count)");
        groups.remove(0);
        // Listed every 250 ms: gone by the next scrape.
        std::thread::sleep(Duration::from_millis(600));
        let (_, after) = crate::monitor::get(mon.addr, "/metrics").unwrap();
        let gone_in_prom = {
            let q = format!("{count_a} > -1");
            let t0 = std::time::Instant::now();
            while prom.query(&q).is_some() && t0.elapsed() < Duration::from_secs(10) {
                std::thread::sleep(Duration::from_millis(200));
            }
            prom.query(&q).is_none()
        };
        let (code, err) = mon.terminate();
        Some((
            before,
            after,
            queried,
            series,
            gone_in_prom,
            code,
            err,
            scraped_ns,
        ))
    });
    // The holds made in the 4 s before the first scrape, for a failure's words.
    let before_scrape = |at: u64| {
        (holds.iter())
            .filter(|h| h.end_monotonic_ns <= at && h.start_monotonic_ns + 4_000_000_000 >= at)
            .count()
    };
    groups.remove_empty();
    drop(groups);
    let Some((before, after, queried, series, gone_in_prom, code, err, scraped_ns)) = outcome
    else {
        return;
    };
    let held_before = before_scrape(scraped_ns);
    let holds = holds.len();
    let s = |text: &str, q: &str| crate::monitor::sample(text, q).unwrap_or(0.0);
    let count = s(
        &before,
        &format!("jitterscope_watch_cgroup_wakeup_delay_seconds_count{{{a}}}"),
    );
    let late = s(
        &before,
        &format!("jitterscope_watch_cgroup_late_wakeups_total{{{a}}}"),
    );
    let main = s(
        &before,
        &format!("jitterscope_watch_cgroup_cause_main_total{{{a},{hog_cause}}}"),
    );
    let per_group = (before.lines())
        .filter(|l| l.starts_with("jitterscope_watch_cgroup_wakeup_delay_seconds_count{"))
        .count();
    let lines: Vec<&str> = (before.lines())
        .filter(|l| l.starts_with("jitterscope_watch_") && l.contains(&groups_id(&a)))
        .filter(|l| !l.contains("_bucket{"))
        .collect();
    let cpu_s = s(&before, "jitterscope_watch_reader_cpu_seconds_total");
    let events = s(&before, "jitterscope_watch_events_total");
    println!(
        "{test}: the reader (102 groups listed every 250 ms, every CPU traced): \
         {cpu_s:.3} s of CPU for {events} events in the first 4 s"
    );
    println!(
        "{test}: {holds} holds made; A: {count} wake-ups, {late} delays ≥ {THRESHOLD_US} µs, \
         B's task the main cause of {main}; {per_group} per-group series sets; Prometheus: \
         A's late counter {queried:?}, {series:?} series sets; A gone from Prometheus: \
         {gone_in_prom}\n{}",
        lines.join("\n")
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(count > 2_000.0, "A's sleeper: {count} wake-ups exported");
    // Each hold of 1.5 ms holds off at least one of the 1 kHz sleeper's wake-ups by 0.5 ms.
    assert!(
        late >= 200.0,
        "only {late} delays ≥ {THRESHOLD_US} µs in A, for {held_before} holds in the 4 s \
         before the scrape; {} events read, {} lost",
        s(&before, "jitterscope_watch_events_total"),
        s(&before, "jitterscope_watch_events_lost_total")
    );
    // As for watch: delays a task of the host made are its, at most 10 % of all; B's
    // task the main cause of 99 % of the others.
    let host = host_main(&before, &a);
    let (ok, words) = jitterscope::stats::misses::judge(host as usize, late as usize, 0.10);
    println!("{test}: A's delays a task of the host made: {words}");
    assert!(ok, "{words}");
    let (ok, words) = jitterscope::stats::misses::judge(
        (late - main - host) as usize,
        (late - host) as usize,
        0.01,
    );
    println!("{test}: A's other delays not named after B's task: {words}");
    assert!(ok, "{words}");
    // B has its own series set; its hog (FIFO 10) is the one holding, not held.
    assert!(before.contains(&format!(
        "jitterscope_watch_cgroup_wakeup_delay_seconds_count{{{b}}}"
    )));
    // The cap: 64 groups of their own and the dropped sum, of 102 matched.
    assert_eq!(per_group, 65, "{per_group} series sets");
    assert_eq!(s(&before, "jitterscope_watch_cgroups_matched"), 102.0);
    assert_eq!(s(&before, "jitterscope_watch_cgroups_dropped"), 38.0);
    assert!(before.contains("cgroup=\"dropped\""));
    assert_eq!(crate::monitor::promtool_complaints(&before), None);
    assert!(
        queried.is_some_and(|v| v > 0.0),
        "Prometheus has A's series"
    );
    assert_eq!(series, Some(65.0));
    // Gone at the next scrape, here and in Prometheus.
    assert!(
        !after.contains(&groups_id(&a)),
        "A's series remain after its removal"
    );
    assert!(after.contains(&b));
    assert!(gone_in_prom, "Prometheus still answers for A's series");
}

/// The container id in a label set.
fn groups_id(labels: &str) -> String {
    labels
        .split("container_id=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .unwrap_or_default()
        .to_string()
}

/// The delays of the group labelled `labels` whose main cause a task of the host made,
/// from the exposition's `cause_main_total` samples.
fn host_main(exposition: &str, labels: &str) -> f64 {
    let prefix = format!("jitterscope_watch_cgroup_cause_main_total{{{labels},kind=\"task\",");
    (exposition.lines())
        .filter(|l| l.starts_with(&prefix) && l.contains(" (host)\"}"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}
