//! A tracefs session of our own: a private instance (`instances/jitterscope-PID`) that
//! traces only the measured CPUs, with the `x86-tsc` clock so its stamps are the very
//! counter the probes read. It mounts tracefs if it must, and on every way out (drop,
//! which the normal end, Ctrl-C, SIGTERM and an unwinding panic all reach) it removes the
//! instance and unmounts only what it mounted. An instance left by a killed run (its PID
//! gone) is removed on the next start. Global tracing settings are never touched.

use std::path::{Path, PathBuf};

use crate::engine::cpu::CpuList;

use super::event::EVENTS;
use super::format::{EventFormat, PageLayout, parse_event_format};

/// Where tracefs is mounted when we mount it.
pub const MOUNT_POINT: &str = "/sys/kernel/tracing";
/// The clock whose stamps are the TSC.
pub const CLOCK: &str = "x86-tsc";
/// Instances of ours start with this.
pub const PREFIX: &str = "jitterscope-";
/// The source name of a tracefs mount we make, so that one left by a killed run is
/// known as ours and removed by the next.
pub const MOUNT_SOURCE: &str = "jitterscope";

/// Why there is no trace.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// Only root may create tracefs instances.
    #[error("tracing needs root (tracefs instances are root's)")]
    NotRoot,
    /// tracefs is not mounted and could not be.
    #[error("tracefs is not mounted and could not be mounted at {MOUNT_POINT}: {0}")]
    Mount(std::io::Error),
    /// This kernel's trace has no x86-tsc clock (another architecture, or an old kernel).
    #[error("the trace has no {CLOCK} clock, so its stamps could not be set beside the loop's")]
    NoTscClock,
    /// This kernel was built without the tracer (`available_tracers` lacks it).
    #[error("this kernel has no {tracer} tracer; available_tracers lists: {available}")]
    NoTracer { tracer: String, available: String },
    /// The journal of host changes refused: another run changes the host now, or a
    /// killed `tune` left changes that `tune --restore` must revert first.
    #[error("{0}")]
    Journal(String),
    /// A tracefs file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> TraceError + '_ {
    move |source| TraceError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The instance, while it exists.
#[derive(Debug)]
pub struct TraceSession {
    /// The tracefs root.
    pub root: PathBuf,
    /// The instance's directory.
    pub dir: PathBuf,
    pub cpus: CpuList,
    pub buffer_kib: u64,
    /// The formats of the events enabled, and the names of those this kernel lacks.
    pub formats: Vec<EventFormat>,
    pub missing: Vec<String>,
    pub layout: PageLayout,
    /// The size of one page of `trace_pipe_raw`.
    pub page_size: usize,
    /// The instances of killed runs this start removed, by name: the caller says so.
    pub removed_stale: Vec<String>,
    mounted: bool,
    closed: bool,
}

impl TraceSession {
    /// Creates the instance on `cpus` with `buffer_kib` per CPU and starts tracing.
    pub fn start(cpus: &CpuList, buffer_kib: u64) -> Result<TraceSession, TraceError> {
        Self::start_with(cpus, buffer_kib, &[])
    }

    /// As `start`, with `extra` events ("system:event") enabled beside the usual ones
    /// (`watch` adds `sched:sched_wakeup_new` to see new threads' first wake-ups).
    pub fn start_with(
        cpus: &CpuList,
        buffer_kib: u64,
        extra: &[&str],
    ) -> Result<TraceSession, TraceError> {
        Self::start_tagged(cpus, buffer_kib, extra, "")
    }

    /// As `start_with`, in an instance named `jitterscope-PID-TAG`: a second session of
    /// the same process (`monitor --trace --watch-comm`), which the same cleanup knows.
    pub fn start_tagged(
        cpus: &CpuList,
        buffer_kib: u64,
        extra: &[&str],
        tag: &str,
    ) -> Result<TraceSession, TraceError> {
        if !rustix::process::geteuid().is_root() {
            return Err(TraceError::NotRoot);
        }
        // Another run of ours that ends between our finding its mount and our making an
        // instance unmounts it (it counted no instance but its own): mount again and make
        // the instance anew, a few times at most.
        let mut tries = 0;
        loop {
            match Self::start_once(cpus, buffer_kib, extra, tag) {
                Err(_) if tries < 3 && tracefs_mount().is_none() => tries += 1,
                got => return got,
            }
        }
    }

    fn start_once(
        cpus: &CpuList,
        buffer_kib: u64,
        extra: &[&str],
        tag: &str,
    ) -> Result<TraceSession, TraceError> {
        let (root, mounted) = match tracefs_mount() {
            // Left by a run that was killed: ours to remove when done.
            Some((r, source)) => (r, source == MOUNT_SOURCE),
            None => (mount()?, true),
        };
        let mut s = TraceSession {
            dir: root.join("instances").join(match tag {
                "" => format!("{PREFIX}{}", std::process::id()),
                t => format!("{PREFIX}{}-{t}", std::process::id()),
            }),
            root,
            cpus: cpus.clone(),
            buffer_kib,
            formats: Vec::new(),
            missing: Vec::new(),
            layout: PageLayout::DEFAULT,
            page_size: 4096,
            removed_stale: Vec::new(),
            mounted,
            closed: false,
        };
        // From here on, dropping `s` cleans up whatever was made.
        s.removed_stale = remove_stale(&s.root);
        s.set_up(extra)?;
        Ok(s)
    }

    fn set_up(&mut self, extra: &[&str]) -> Result<(), TraceError> {
        std::fs::create_dir(&self.dir).map_err(io(&self.dir))?;
        let clocks = self.read("trace_clock")?;
        if !clocks
            .split_whitespace()
            .any(|c| c.trim_matches(['[', ']']) == CLOCK)
        {
            return Err(TraceError::NoTscClock);
        }
        self.write("trace_clock", CLOCK)?;
        self.write("tracing_cpumask", &cpumask(&self.cpus))?;
        self.write("buffer_size_kb", &self.buffer_kib.to_string())?;
        if let Ok(kb) = self.read("buffer_subbuf_size_kb") {
            self.page_size = kb.trim().parse::<usize>().map_or(4096, |k| k * 1024);
        }
        let header = std::fs::read_to_string(self.root.join("events/header_page"));
        self.layout = header
            .ok()
            .and_then(|t| PageLayout::parse(&t))
            .unwrap_or(PageLayout::DEFAULT);
        let mut wanted = wanted_events(&self.root);
        wanted.extend(extra.iter().map(|e| e.to_string()));
        for name in wanted {
            let (sys, ev) = name.split_once(':').unwrap_or(("", ""));
            let dir = self.dir.join("events").join(sys).join(ev);
            let format = std::fs::read_to_string(dir.join("format"))
                .ok()
                .and_then(|t| parse_event_format(&name, &t));
            match format {
                Some(f) if std::fs::write(dir.join("enable"), "1").is_ok() => self.formats.push(f),
                _ => self.missing.push(name),
            }
        }
        self.write("tracing_on", "1")
    }

    fn read(&self, file: &str) -> Result<String, TraceError> {
        let p = self.dir.join(file);
        std::fs::read_to_string(&p).map_err(io(&p))
    }

    fn write(&self, file: &str, value: &str) -> Result<(), TraceError> {
        let p = self.dir.join(file);
        std::fs::write(&p, value).map_err(io(&p))
    }

    /// `per_cpu/cpuN/trace_pipe_raw` of the instance.
    pub fn pipe(&self, cpu: usize) -> PathBuf {
        self.dir.join(format!("per_cpu/cpu{cpu}/trace_pipe_raw"))
    }

    /// Stops recording; what is in the buffers can still be read.
    pub fn stop_recording(&self) {
        let _ = self.write("tracing_on", "0");
    }

    /// Events the kernel overwrote or dropped on `cpu`, from its `stats`.
    pub fn lost(&self, cpu: usize) -> u64 {
        lost_in(&self.dir, cpu)
    }

    /// Removes the instance and unmounts what it mounted; safe to call again.
    pub fn close(&mut self) {
        if self.closed {
            return;
        }
        self.closed = true;
        remove_instance(&self.dir);
        // Not while another run of ours still uses it.
        if self.mounted && live_instances(&self.root) == 0 {
            let _ = rustix::mount::unmount(&self.root, rustix::mount::UnmountFlags::empty());
        }
    }
}

/// Events the kernel overwrote or dropped on `cpu` in the instance at `dir`, from its
/// `stats`.
pub(crate) fn lost_in(dir: &Path, cpu: usize) -> u64 {
    let p = dir.join(format!("per_cpu/cpu{cpu}/stats"));
    let text = std::fs::read_to_string(p).unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(':')?;
            matches!(k.trim(), "overrun" | "dropped events")
                .then(|| v.trim().parse::<u64>().ok())
                .flatten()
        })
        .sum()
}

impl Drop for TraceSession {
    fn drop(&mut self) {
        self.close();
    }
}

/// The first tracefs mount and its source ("nodev", or ours).
pub(crate) fn tracefs_mount() -> Option<(PathBuf, String)> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
    let root = super::tracefs_in_mounts(&mounts)?;
    let source = mounts.lines().find_map(|l| {
        let mut f = l.split_whitespace();
        let (src, _dir, fs) = (f.next()?, f.next()?, f.next()?);
        (fs == "tracefs").then(|| src.to_string())
    })?;
    Some((root, source))
}

/// Instances of ours whose process still runs.
pub(crate) fn live_instances(root: &Path) -> usize {
    let stale = stale_instances(root);
    std::fs::read_dir(root.join("instances"))
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| e.file_name().to_string_lossy().starts_with(PREFIX))
                .filter(|e| !stale.contains(&e.path()))
                .count()
        })
        .unwrap_or(0)
}

/// Mounts tracefs at its usual place, under a source name of our own.
pub(crate) fn mount() -> Result<PathBuf, TraceError> {
    let at = Path::new(MOUNT_POINT);
    rustix::mount::mount(
        MOUNT_SOURCE,
        at,
        "tracefs",
        rustix::mount::MountFlags::empty(),
        None,
    )
    .map_err(|e| TraceError::Mount(e.into()))?;
    Ok(at.to_path_buf())
}

/// Every event to enable: the fixed list and each `irq_vectors` entry and exit.
fn wanted_events(root: &Path) -> Vec<String> {
    let mut names: Vec<String> = EVENTS.iter().map(|s| s.to_string()).collect();
    let mut vectors: Vec<String> = std::fs::read_dir(root.join("events/irq_vectors"))
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|n| n.ends_with("_entry") || n.ends_with("_exit"))
                .map(|n| format!("irq_vectors:{n}"))
                .collect()
        })
        .unwrap_or_default();
    vectors.sort();
    names.extend(vectors);
    names
}

/// The instances of ours whose process is gone: a run that was killed (SIGKILL) could
/// not remove its own.
pub fn stale_instances(root: &Path) -> Vec<PathBuf> {
    let Ok(dir) = std::fs::read_dir(root.join("instances")) else {
        return Vec::new();
    };
    dir.filter_map(|e| {
        let e = e.ok()?;
        let name = e.file_name().into_string().ok()?;
        // `jitterscope-PID`, or `jitterscope-PID-TAG`.
        let pid: u32 = name.strip_prefix(PREFIX)?.split('-').next()?.parse().ok()?;
        (!Path::new(&format!("/proc/{pid}")).exists()).then(|| e.path())
    })
    .collect()
}

/// Removes them, and names them.
pub(crate) fn remove_stale(root: &Path) -> Vec<String> {
    let stale = stale_instances(root);
    for dir in &stale {
        remove_instance(dir);
    }
    (stale.iter())
        .filter_map(|d| Some(d.file_name()?.to_string_lossy().into_owned()))
        .collect()
}

/// Turns an instance off and removes it; tracefs refuses while a file of it is open, so
/// it tries a few times.
pub(crate) fn remove_instance(dir: &Path) {
    let _ = std::fs::write(dir.join("tracing_on"), "0");
    for _ in 0..50 {
        match std::fs::remove_dir(dir) {
            Ok(()) => return,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(10)),
        }
    }
}

/// The kernel's cpumask text: hex, in comma-separated groups of 32 CPUs, highest first.
pub fn cpumask(cpus: &CpuList) -> String {
    let max = cpus.cpus().iter().copied().max().unwrap_or(0);
    let mut groups = vec![0u32; max / 32 + 1];
    for &c in cpus.cpus() {
        groups[c / 32] |= 1 << (c % 32);
    }
    let text: Vec<String> = groups.iter().rev().map(|g| format!("{g:08x}")).collect();
    text.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpumasks_are_hex_in_groups_of_32() {
        let l = |s| CpuList::parse_kernel(s).unwrap();
        assert_eq!(cpumask(&l("1")), "00000002");
        assert_eq!(cpumask(&l("0-3")), "0000000f");
        assert_eq!(cpumask(&l("1,33")), "00000002,00000002");
    }

    #[test]
    fn stale_instances_are_those_of_dead_processes() {
        let root = tempfile::tempdir().unwrap();
        let inst = root.path().join("instances");
        std::fs::create_dir(&inst).unwrap();
        let alive = inst.join(format!("{PREFIX}{}", std::process::id()));
        // Beyond pid_max (4194304 at most): no such process.
        let dead = inst.join(format!("{PREFIX}999999999"));
        let alive_tagged = inst.join(format!("{PREFIX}{}-watch", std::process::id()));
        let dead_tagged = inst.join(format!("{PREFIX}999999998-watch"));
        let other = inst.join("someone-else-1");
        for d in [&alive, &dead, &alive_tagged, &dead_tagged, &other] {
            std::fs::create_dir(d).unwrap();
        }
        let mut stale = stale_instances(root.path());
        stale.sort();
        assert_eq!(stale, vec![dead_tagged, dead]);
    }
}
