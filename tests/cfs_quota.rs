//! Issue 30: a CFS quota's windows named as the quota, against the kernel's own count.
//!
//! The test makes a cgroup v1 `cpu` group with a quota, starts `noise --trace` inside
//! it, and once the measuring thread exists moves every other thread of the process to
//! the parent group (v1 moves threads one by one): the group then holds the loop alone,
//! so its `cpu.stat` throttled time, which sums every CPU's run queue of the group, is
//! the measured CPU's. That is the ground truth the named time is set beside. The group
//! is removed on every way out (`Group`'s drop). A v2-only host has no per-thread moves
//! outside threaded subtrees and names the setting `cpu.max`: the test skips there.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use jitterscope::engine::clock::{self, Scale};

use jitterscope::report::ResultFile;
use jitterscope::stats::causes::CauseKind;
use jitterscope::system::cgroup::{CpuStat, Version, parse_cpu_stat};
use jitterscope::system::kernel::KernelConfig;

use crate::util::{bin, is_root, measuring, skip, tracefs_usable, two_cpus};

/// A `cpu` group made for the test, under the test process's own group; its tasks are
/// moved back and the directory removed when it is dropped, on every way out.
struct Group {
    dir: PathBuf,
    parent: PathBuf,
    /// The group's path in its hierarchy, as attribution names it.
    path: String,
}

impl Group {
    fn make(quota_us: u64, period_us: u64) -> Result<Group, String> {
        let cg = jitterscope::system::cgroup::Cgroups::of_self().map_err(|e| e.to_string())?;
        let chain = (cg.cpu())
            .filter(|c| c.version == Version::V1)
            .ok_or("no cgroup v1 cpu controller (a v2-only host names the quota cpu.max)")?;
        let own = chain.own();
        let parent = PathBuf::from(&own.dir);
        if !parent.join("cpu.cfs_quota_us").exists() {
            return Err("the kernel has no CFS bandwidth control (cpu.cfs_quota_us)".into());
        }
        let name = format!("jsq-test-{}", std::process::id());
        let g = Group {
            dir: parent.join(&name),
            path: format!("{}/{name}", own.path.trim_end_matches('/')),
            parent,
        };
        std::fs::create_dir(&g.dir).map_err(|e| format!("mkdir {}: {e}", g.dir.display()))?;
        // Dropped from here on: removed whatever fails next.
        g.write("cpu.cfs_period_us", &period_us.to_string())?;
        g.write("cpu.cfs_quota_us", &quota_us.to_string())?;
        Ok(g)
    }

    fn write(&self, file: &str, value: &str) -> Result<(), String> {
        let p = self.dir.join(file);
        std::fs::write(&p, value).map_err(|e| format!("{}: {e}", p.display()))
    }

    fn stat(&self) -> CpuStat {
        let text = std::fs::read_to_string(self.dir.join("cpu.stat")).unwrap_or_default();
        parse_cpu_stat(&text).unwrap_or_default()
    }

    /// Moves every thread of `pid` but `keep` to the parent group.
    fn keep_only(&self, pid: u32, keep: u32) {
        for tid in tids(pid).into_iter().filter(|t| *t != keep) {
            let _ = std::fs::write(self.parent.join("tasks"), tid.to_string());
        }
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        if !crate::util::remove_cpu_group(&self.dir, &self.parent) {
            eprintln!("could not remove {}", self.dir.display());
        }
    }
}

/// The child, killed if the test ends before it does.
struct Running(Option<Child>);

impl Running {
    fn pid(&self) -> u32 {
        self.0.as_ref().map_or(0, Child::id)
    }

    /// Waits for it to end, with what it printed.
    fn output(mut self) -> std::process::Output {
        let child = self.0.take().expect("running");
        child.wait_with_output().expect("the run ends")
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut()
            && let Ok(None) = c.try_wait()
        {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn tids(pid: u32) -> Vec<u32> {
    let dir = std::fs::read_dir(format!("/proc/{pid}/task"));
    dir.map(|d| {
        d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .collect()
    })
    .unwrap_or_default()
}

/// The thread of `pid` whose name starts with `prefix`, once it exists.
fn thread_named(pid: u32, prefix: &str, within: Duration) -> Option<u32> {
    let until = Instant::now() + within;
    while Instant::now() < until {
        let found = tids(pid).into_iter().find(|t| {
            std::fs::read_to_string(format!("/proc/{pid}/task/{t}/comm"))
                .is_ok_and(|c| c.starts_with(prefix))
        });
        if found.is_some() {
            return found;
        }
        std::thread::sleep(Duration::from_micros(500));
    }
    None
}

/// Starts `args` inside `g` (a shell joins the group, then becomes the binary).
fn spawn_in(g: &Group, args: &[&str]) -> Running {
    let child = Command::new("sh")
        .arg("-c")
        .arg("echo $$ > \"$0\"/cgroup.procs && exec \"$@\"")
        .arg(&g.dir)
        .arg(bin())
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("sh runs");
    Running(Some(child))
}

/// The SCHED_OTHER loop in a group at 10 ms per 50 ms: the kernel throttles it about
/// 40 ms of every 50, and those windows are named the quota, with its setting and group,
/// for at least 95 % of the throttled time `cpu.stat` counts over the same run (and never
/// more than it counts).
#[test]
fn issue30_the_windows_a_cfs_quota_makes_are_named_as_the_quota() {
    let test = "issue30_the_windows_a_cfs_quota_makes_are_named_as_the_quota";
    if !is_root() {
        return skip(test, "making a cgroup and tracing need root");
    }
    let Some((cpu, _)) = two_cpus() else {
        return skip(test, "needs two usable CPUs");
    };
    // Held before tracefs is tried: a session another test closes may unmount it.
    let _m = measuring();
    if !tracefs_usable() {
        return skip(test, "tracefs cannot be mounted or used here");
    }
    // A fifth of a CPU: throttled even beside a build that leaves the loop a third.
    let (quota_us, period_us) = (10_000, 50_000);
    let g = match Group::make(quota_us, period_us) {
        Ok(g) => g,
        Err(why) => return skip(test, &why),
    };
    let cpu = cpu.to_string();
    // A 1 ms warm-up: the group's first quota is not used up before the loop measures.
    let args = [
        "noise", "-a", &cpu, "-D", "2s", "--warmup", "1ms", "--trace", "--json",
    ];
    let run = spawn_in(&g, &args);
    let pid = run.pid();
    let Some(loop_tid) = thread_named(pid, "measure-cpu", Duration::from_secs(10)) else {
        let out = run.output();
        panic!(
            "no measuring thread appeared: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    g.keep_only(pid, loop_tid);
    let before = g.stat();
    // The kernel's count as it grows (each unthrottle adds its window), sampled with the
    // counter, so that only the windows inside the measured run are set beside it.
    let done = AtomicBool::new(false);
    let (out, samples) = std::thread::scope(|s| {
        let sampler = s.spawn(|| {
            let mut v = Vec::new();
            while !done.load(Ordering::Relaxed) {
                v.push((clock::now(), g.stat().throttled_ns));
                std::thread::sleep(Duration::from_millis(1));
            }
            v
        });
        let out = run.output();
        done.store(true, Ordering::Relaxed);
        (out, sampler.join().expect("the sampler"))
    });
    let after = g.stat().since(&before);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = ResultFile::parse(&String::from_utf8_lossy(&out.stdout)).expect("JSON");
    let e = (r.entries::<jitterscope::probes::noise::NoiseEntry>())
        .next()
        .unwrap();
    let a = e.attribution.as_ref().expect("attributed");
    let label = format!(
        "CFS quota: cpu.cfs_quota_us {quota_us}, cpu.cfs_period_us {period_us} of {}",
        g.path
    );
    // Nothing left behind (issue 30): the group is gone once the run is over.
    let dir = g.dir.clone();
    drop(g);
    assert!(!dir.exists(), "{} left behind", dir.display());
    let named: u64 = (a.causes.iter())
        .filter(|c| c.kind == CauseKind::Throttling && c.cause == label)
        .map(|c| c.total_ns)
        .sum();
    let others: Vec<&str> = (a.causes.iter())
        .filter(|c| c.kind == CauseKind::Throttling && c.cause != label)
        .map(|c| c.cause.as_str())
        .collect();
    let scale = Scale::from_hz(r.host.clock.frequency_hz);
    let first = e
        .largest
        .first()
        .expect("a run that lost time has its largest gaps");
    let start = first.start_tsc - scale.to_ticks(first.start_ns);
    let end = start + scale.to_ticks(e.runtime_ns);
    let in_run = throttled_within(&samples, scale, start, end);
    let ms = |ns: u64| ns as f64 / 1e6;
    eprintln!(
        "{test}: lost {:.1} ms; named \"{label}\" {:.1} ms; cpu.stat: throttled {:.1} ms \
         inside the measured run, {:.1} ms in all ({} of {} periods; events lost: {})",
        ms(a.interrupted_ns),
        ms(named),
        ms(in_run),
        ms(after.throttled_ns),
        after.nr_throttled,
        after.nr_periods,
        a.events_lost
    );
    assert!(others.is_empty(), "other throttles named: {others:?}");
    if after.nr_throttled == 0 {
        return skip(
            test,
            "the kernel throttled nothing (the loop never used its quota: a host too busy?)",
        );
    }
    // The loop alone in the group: what the kernel counts is the measured CPU's windows.
    // Interrupts inside them stay their own causes; never more than the kernel's count
    // (a sample's millisecond at each end of the run aside), but for half a tick a window
    // either way: on the AMD guest (HZ 250) whole runs came out at 93.9 % and 106.1 % of
    // the count (38–41 windows: about 2 ms a window, one way in a run), others at
    // 97–99 %. The cause is not isolated; the kernel acts on a group's quota and on an
    // idle CPU's wake-up at its tick, and so may its count against the trace.
    let hz = KernelConfig::read(Path::new("/")).hz().unwrap_or(250);
    let tick_slack = after.nr_throttled as f64 * 0.5e9 / f64::from(hz);
    eprintln!(
        "{test}: half a tick (HZ {hz}) for each of {} windows: {:.1} ms",
        after.nr_throttled,
        ms(tick_slack as u64)
    );
    assert!(
        named as f64 >= 0.95 * in_run as f64 - tick_slack,
        "{:.1} of {:.1} ms throttled named as the quota: {:?}",
        ms(named),
        ms(in_run),
        a.causes
            .iter()
            .take(8)
            .map(|c| (&c.cause, c.total_ns))
            .collect::<Vec<_>>()
    );
    assert!(
        named as f64 <= 1.02 * in_run as f64 + 2e6 + tick_slack,
        "named {:.1} ms, more than the {:.1} ms the kernel throttled",
        ms(named),
        ms(in_run)
    );
    assert!(a.method.contains("CFS quota"), "{}", a.method);
}

/// The throttled time of `samples` ((counter, throttled ns) as the counter grows: each
/// unthrottle adds its window, ending at most a sample before it was seen) that fell
/// between ticks `start` and `end`.
fn throttled_within(samples: &[(u64, u64)], scale: Scale, start: u64, end: u64) -> u64 {
    (samples.windows(2))
        .filter(|w| w[1].1 > w[0].1)
        .map(|w| {
            let (seen, ns) = (w[1].0, w[1].1 - w[0].1);
            let (from, to) = (seen.saturating_sub(scale.to_ticks(ns)), seen);
            scale.to_ns(to.min(end).saturating_sub(from.max(start)))
        })
        .sum()
}
