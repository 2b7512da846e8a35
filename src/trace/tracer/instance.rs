//! A kernel tracer (osnoise, timerlat, hwlat) run in a tracefs instance of ours,
//! `instances/jitterscope-PID-TRACER`, so that the global trace (someone else's) is left
//! alone.
//!
//! The tracers' configuration is global, not per instance (`osnoise/*`,
//! `tracing_thresh`, `hwlat_detector/*`): each such file is journaled in `tune`'s journal
//! (old value, synced) before it is written, and so is the instance itself, so that a
//! SIGKILLed run leaves a journal that `jitterscope tune --restore`, or the next tracer
//! run, reverts; the stale-instance cleanup of the trace session removes the instance
//! too. `stop` and `Drop` (which the normal end, Ctrl-C, SIGTERM and an unwinding panic
//! all reach) stop the tracer, remove the instance and restore every global file.
//!
//! A tracer a kernel will not run in an instance (hwlat before instances were allowed
//! it; Debian 12's 6.1 runs it in one, seen in the lab) is started with
//! [`TracerInstance::start_global`]: the top-level `current_tracer` and
//! `tracing_cpumask` are then journaled and restored as the other global files are.

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::engine::cpu::CpuList;
use crate::engine::sched;
use crate::system::tune::apply::{self, Applied, ApplyError, Readback};
use crate::system::tune::journal::{self, TRACER_STEP};

use super::super::session::{self, PREFIX, TraceError};

/// Per-CPU buffer of an instance: as the trace session's.
pub const BUFFER_KIB: u64 = 4096;

/// The tracers this kernel has (`available_tracers`), mounting nothing: none when tracefs
/// is not mounted.
pub fn available_tracers() -> Result<Vec<String>, TraceError> {
    if !rustix::process::geteuid().is_root() {
        return Err(TraceError::NotRoot);
    }
    let root = match session::tracefs_mount() {
        Some((r, _)) => r,
        None => return Ok(Vec::new()),
    };
    tracers_at(&root)
}

/// The tracers listed under the tracefs root `root`.
pub fn tracers_at(root: &Path) -> Result<Vec<String>, TraceError> {
    let p = root.join("available_tracers");
    let text = std::fs::read_to_string(&p).map_err(|source| TraceError::Io { path: p, source })?;
    Ok(text.split_whitespace().map(str::to_string).collect())
}

/// Where the tracer runs: an instance of ours, or the top level (hwlat).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    Instance,
    Global,
}

/// A tracer running, until stopped or dropped.
pub struct TracerInstance {
    /// The tracefs root (absolute on the host).
    pub root: PathBuf,
    /// Where the tracer's own files are: the instance, or the root for a global tracer.
    pub dir: PathBuf,
    pub tracer: String,
    pub cpus: CpuList,
    /// Every global file written: its path, the value it held and the value written.
    pub globals: Vec<(String, String, String)>,
    /// The events that could not be enabled (this kernel lacks them).
    pub missing: Vec<String>,
    /// Instances of killed runs removed before this one was made, by name.
    pub removed_stale: Vec<String>,
    /// A killed tracer run's journal reverted before this one started, in words.
    pub reverted_stale: Option<String>,
    host: PathBuf,
    place: Place,
    applied: Option<Applied>,
    reader: Option<LineReader>,
    mounted: bool,
    closed: bool,
}

/// What `stop` found: each global file's readback, and whether all were put back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stopped {
    pub readbacks: Vec<Readback>,
    /// Every global file reads back as before, and the instance is gone.
    pub restored: bool,
    /// Lines the reader handed over (0 without one).
    pub lines: u64,
}

impl TracerInstance {
    /// Starts `tracer` in an instance of ours tracing `cpus`, after writing each of
    /// `globals` (path below the tracefs root, value) and enabling `events`
    /// ("osnoise:irq_noise"). Refuses when the kernel lacks the tracer.
    pub fn start(
        tracer: &str,
        cpus: &CpuList,
        globals: &[(&str, String)],
        events: &[&str],
    ) -> Result<TracerInstance, TraceError> {
        let root = live_root()?;
        Self::start_in(
            Path::new("/"),
            &root.0,
            root.1,
            tracer,
            cpus,
            globals,
            events,
        )
    }

    /// As `start`, in the top-level trace, for a tracer that cannot run in an instance
    /// (hwlat): `current_tracer` and `tracing_cpumask` are journaled global files then.
    pub fn start_global(
        tracer: &str,
        cpus: &CpuList,
        globals: &[(&str, String)],
    ) -> Result<TracerInstance, TraceError> {
        let root = live_root()?;
        let mut t = Self::prepare(Path::new("/"), &root.0, root.1, tracer, cpus, Place::Global)?;
        t.set_up_global(globals)?;
        Ok(t)
    }

    /// `start` on the tracefs at `tracefs` (absolute) of the host tree under `host`: the
    /// live host is `/`; a test passes a made-up tree.
    pub fn start_in(
        host: &Path,
        tracefs: &Path,
        mounted: bool,
        tracer: &str,
        cpus: &CpuList,
        globals: &[(&str, String)],
        events: &[&str],
    ) -> Result<TracerInstance, TraceError> {
        let mut t = Self::prepare(host, tracefs, mounted, tracer, cpus, Place::Instance)?;
        t.set_up_instance(globals, events)?;
        Ok(t)
    }

    /// Checks the tracer is there, reverts a killed run's journal and instances, and
    /// opens a journal of our own. Dropping what it returns undoes whatever was made.
    fn prepare(
        host: &Path,
        tracefs: &Path,
        mounted: bool,
        tracer: &str,
        cpus: &CpuList,
        place: Place,
    ) -> Result<TracerInstance, TraceError> {
        let on_host = host.join(tracefs.strip_prefix("/").unwrap_or(tracefs));
        let have = tracers_at(&on_host)?;
        if !have.iter().any(|t| t == tracer) {
            return Err(TraceError::NoTracer {
                tracer: tracer.to_string(),
                available: have.join(" "),
            });
        }
        let reverted_stale = revert_stale(host)?;
        let applied = Applied::new(host).map_err(|e| TraceError::Journal(e.to_string()))?;
        let dir = match place {
            Place::Instance => on_host
                .join("instances")
                .join(format!("{PREFIX}{}-{tracer}", std::process::id())),
            Place::Global => on_host.clone(),
        };
        Ok(TracerInstance {
            removed_stale: session::remove_stale(&on_host),
            root: on_host,
            dir,
            tracer: tracer.to_string(),
            cpus: cpus.clone(),
            globals: Vec::new(),
            missing: Vec::new(),
            reverted_stale,
            host: host.to_path_buf(),
            place,
            applied: Some(applied),
            reader: None,
            mounted,
            closed: false,
        })
    }

    fn set_up_instance(
        &mut self,
        globals: &[(&str, String)],
        events: &[&str],
    ) -> Result<(), TraceError> {
        for (file, value) in globals {
            self.write_global(file, value)?;
        }
        // Journaled as a made directory: a revert (tune --restore) removes it, which
        // stops its tracer.
        let dir = self.host_path(&self.dir);
        let made = self.applied().make_group(TRACER_STEP, &dir);
        made.map_err(|e| refused(&self.dir, e))?;
        self.write("tracing_cpumask", &session::cpumask(&self.cpus))?;
        // A new instance's buffer is small: a noisy CPU's events would overwrite the
        // periods' summaries before they are read.
        let _ = self.write("buffer_size_kb", &BUFFER_KIB.to_string());
        self.enable(events);
        self.write("current_tracer", &self.tracer.clone())?;
        self.write("tracing_on", "1")
    }

    fn set_up_global(&mut self, globals: &[(&str, String)]) -> Result<(), TraceError> {
        // Off first: the tracer starts when it is set, with the settings it finds.
        self.write_global("current_tracer", "nop")?;
        self.write_global("tracing_cpumask", &session::cpumask(&self.cpus))?;
        for (file, value) in globals {
            self.write_global(file, value)?;
        }
        let tracer = self.tracer.clone();
        self.write_global("current_tracer", &tracer)?;
        self.write_global("tracing_on", "1")
    }

    fn applied(&mut self) -> &mut Applied {
        self.applied
            .as_mut()
            .expect("the journal is open until closed")
    }

    /// `p` (below the host tree) as the host names it.
    fn host_path(&self, p: &Path) -> String {
        let rel = p.strip_prefix(&self.host).unwrap_or(p);
        format!("/{}", rel.display()).replace("//", "/")
    }

    /// Writes a global file below the tracefs root, its old value journaled first.
    fn write_global(&mut self, file: &str, value: &str) -> Result<(), TraceError> {
        let path = self.host_path(&self.root.join(file));
        let (p, old, _now) = (self.applied().write(TRACER_STEP, &path, value))
            .map_err(|e| refused(&self.root.join(file), e))?;
        self.globals.push((p, old, value.to_string()));
        Ok(())
    }

    /// Enables each event in the instance; those the kernel lacks are noted.
    fn enable(&mut self, events: &[&str]) {
        for name in events {
            let (sys, ev) = name.split_once(':').unwrap_or(("", name));
            let file = self.dir.join("events").join(sys).join(ev).join("enable");
            if std::fs::write(&file, "1").is_err() {
                self.missing.push(name.to_string());
            }
        }
    }

    fn write(&self, file: &str, value: &str) -> Result<(), TraceError> {
        let p = self.dir.join(file);
        std::fs::write(&p, value).map_err(|source| TraceError::Io { path: p, source })
    }

    /// The tracer's text output (`trace_pipe`, read once).
    pub fn trace_pipe(&self) -> PathBuf {
        self.dir.join("trace_pipe")
    }

    /// The tracer's text output as it stands (`trace`, read again and again).
    pub fn trace_file(&self) -> PathBuf {
        self.dir.join("trace")
    }

    /// Events the kernel overwrote or dropped on `cpu` so far.
    pub fn lost(&self, cpu: usize) -> u64 {
        session::lost_in(&self.dir, cpu)
    }

    /// A tracer file's path: `osnoise/cpus` and the like are below the tracefs root.
    pub fn global_file(&self, file: &str) -> PathBuf {
        self.root.join(file)
    }

    /// Starts a thread, pinned to `cpu` when given (a housekeeping CPU: off the traced
    /// ones), that hands each line of `trace_pipe` to `on_line` until `stop`. One reader
    /// per instance; a second call replaces nothing and returns false.
    pub fn read_lines(
        &mut self,
        cpu: Option<usize>,
        on_line: impl FnMut(&str) + Send + 'static,
    ) -> bool {
        if self.reader.is_some() {
            return false;
        }
        self.reader = LineReader::spawn(self.trace_pipe(), cpu, on_line).ok();
        self.reader.is_some()
    }

    /// Stops the tracer, drains the reader, removes the instance and restores every
    /// global file, reading each back.
    pub fn stop(mut self) -> Stopped {
        self.close()
    }

    /// Writes one of the instance's own files (none in the global place, whose files the
    /// journal restores).
    fn write_own(&self, file: &str, value: &str) {
        if self.place != Place::Instance {
            return;
        }
        // tracefs makes no files: a write that would create one is no write.
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(self.dir.join(file));
        let _ = f.and_then(|mut f| std::io::Write::write_all(&mut f, value.as_bytes()));
    }

    fn close(&mut self) -> Stopped {
        if self.closed {
            return Stopped {
                readbacks: Vec::new(),
                restored: true,
                lines: 0,
            };
        }
        self.closed = true;
        // Tracing off, the reader drains what is left, and only then the tracer goes:
        // setting it to nop empties the buffer, and with it the run's last lines.
        self.write_own("tracing_on", "0");
        let lines = self.reader.take().map_or(0, LineReader::finish);
        self.write_own("current_tracer", "nop");
        let (readbacks, journal_ok) = match self.applied.take() {
            Some(mut a) => {
                let ok = a.restore_all().is_ok();
                (std::mem::take(&mut a.readbacks), ok)
            }
            None => (Vec::new(), true),
        };
        if self.place == Place::Instance {
            session::remove_instance(&self.dir);
        }
        if self.mounted && session::live_instances(&self.root) == 0 {
            let _ = rustix::mount::unmount(&self.root, rustix::mount::UnmountFlags::empty());
        }
        let gone = self.place == Place::Global || !self.dir.exists();
        Stopped {
            restored: journal_ok && gone && readbacks.iter().all(|r| r.ok),
            readbacks,
            lines,
        }
    }
}

impl Drop for TracerInstance {
    fn drop(&mut self) {
        self.close();
    }
}

/// The live tracefs root and whether we mounted it (or a killed run of ours did).
fn live_root() -> Result<(PathBuf, bool), TraceError> {
    if !rustix::process::geteuid().is_root() {
        return Err(TraceError::NotRoot);
    }
    Ok(match session::tracefs_mount() {
        Some((r, source)) => (r, source == session::MOUNT_SOURCE),
        None => (session::mount()?, true),
    })
}

fn refused(path: &Path, e: ApplyError) -> TraceError {
    match e {
        ApplyError::Journal(j) => TraceError::Journal(j.to_string()),
        ApplyError::Refused { answer, .. } => TraceError::Io {
            path: path.to_path_buf(),
            source: std::io::Error::other(answer),
        },
    }
}

/// Reverts the journal a killed tracer run left, when it lists nothing else: what it
/// reverted, in words. Another run's live journal, or a stale one of `tune`'s or of a
/// deadline run's, refuses with the journal's own words.
fn revert_stale(host: &Path) -> Result<Option<String>, TraceError> {
    let path = journal::path(host);
    match journal::state(host) {
        None => return Ok(None),
        Some(Some(pid)) => {
            return Err(TraceError::Journal(format!(
                "another jitterscope run (pid {pid}) is changing this host now ({})",
                path.display()
            )));
        }
        Some(None) => {}
    }
    let entries = journal::read(&path).map_err(|e| TraceError::Journal(e.to_string()))?;
    if !journal::only_tracer(&entries) {
        return Err(TraceError::Journal(format!(
            "{}: a killed jitterscope run left changes to this host; `jitterscope tune \
             --restore` reverts them",
            path.display()
        )));
    }
    let back = apply::restore_stale(host)
        .map_err(|e| TraceError::Journal(e.to_string()))?
        .unwrap_or_default();
    let words: Vec<String> = (back.iter())
        .map(|r| format!("{} {}", r.path, r.now))
        .collect();
    if back.iter().any(|r| !r.ok) {
        return Err(TraceError::Journal(format!(
            "a killed tracer run's settings did not revert: {}",
            words.join("; ")
        )));
    }
    Ok(Some(format!(
        "reverted what a killed tracer run left: {}",
        words.join("; ")
    )))
}

/// A thread reading a `trace_pipe` without blocking, so that it can be stopped.
struct LineReader {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<u64>,
}

impl LineReader {
    fn spawn(
        pipe: PathBuf,
        cpu: Option<usize>,
        mut on_line: impl FnMut(&str) + Send + 'static,
    ) -> std::io::Result<LineReader> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
            .open(&pipe)?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::spawn(move || {
            if let Some(cpu) = cpu {
                let _ = sched::pin_to(cpu);
            }
            pump(file, &flag, &mut on_line)
        });
        Ok(LineReader { stop, handle })
    }

    /// Stops after one last read of what is there; the count of lines handed over.
    fn finish(self) -> u64 {
        self.stop.store(true, Ordering::Release);
        self.handle.join().unwrap_or(0)
    }
}

/// Reads until `stop` is set and the pipe is empty, handing over whole lines.
fn pump(mut file: std::fs::File, stop: &AtomicBool, on_line: &mut dyn FnMut(&str)) -> u64 {
    let (mut buf, mut pending) = (vec![0u8; 64 * 1024], Vec::<u8>::new());
    let mut lines = 0;
    loop {
        let stopping = stop.load(Ordering::Acquire);
        match file.read(&mut buf) {
            Ok(n) if n > 0 => {
                pending.extend_from_slice(&buf[..n]);
                lines += hand_over(&mut pending, on_line);
                continue;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) if e.kind() != std::io::ErrorKind::WouldBlock => break,
            _ => {}
        }
        if stopping {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    if !pending.is_empty() {
        on_line(String::from_utf8_lossy(&pending).trim_end());
        lines += 1;
    }
    lines
}

/// Hands over every whole line in `pending`, keeping the partial rest.
fn hand_over(pending: &mut Vec<u8>, on_line: &mut dyn FnMut(&str)) -> u64 {
    let Some(last) = pending.iter().rposition(|&b| b == b'\n') else {
        return 0;
    };
    let mut n = 0;
    for l in pending[..last].split(|&b| b == b'\n') {
        on_line(&String::from_utf8_lossy(l));
        n += 1;
    }
    pending.drain(..=last);
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A made-up host tree with a tracefs at /sys/kernel/tracing holding `osnoise`.
    fn tree() -> (tempfile::TempDir, PathBuf) {
        let host = tempfile::tempdir().unwrap();
        let t = host.path().join("sys/kernel/tracing");
        std::fs::create_dir_all(t.join("osnoise")).unwrap();
        std::fs::create_dir_all(t.join("instances")).unwrap();
        std::fs::write(t.join("available_tracers"), "timerlat osnoise hwlat nop\n").unwrap();
        std::fs::write(t.join("osnoise/cpus"), "0-1\n").unwrap();
        std::fs::write(t.join("osnoise/period_us"), "1000000\n").unwrap();
        std::fs::write(t.join("tracing_thresh"), "0\n").unwrap();
        std::fs::write(t.join("current_tracer"), "nop\n").unwrap();
        (host, t)
    }

    fn start(host: &Path, t: &Path, tracer: &str) -> Result<TracerInstance, TraceError> {
        let cpus = CpuList::parse_kernel("1").unwrap();
        let globals = [
            ("osnoise/cpus", "1".to_string()),
            ("tracing_thresh", "5".to_string()),
        ];
        let tracefs = Path::new("/sys/kernel/tracing");
        let _ = t;
        TracerInstance::start_in(
            host,
            tracefs,
            false,
            tracer,
            &cpus,
            &globals,
            &["osnoise:irq_noise"],
        )
    }

    #[test]
    fn globals_are_journaled_written_and_restored() {
        let (host, t) = tree();
        let inst = start(host.path(), &t, "osnoise").unwrap();
        assert_eq!(
            std::fs::read_to_string(t.join("osnoise/cpus")).unwrap(),
            "1\n"
        );
        assert_eq!(
            std::fs::read_to_string(t.join("tracing_thresh")).unwrap(),
            "5"
        );
        let name = format!("{PREFIX}{}-osnoise", std::process::id());
        assert!(t.join("instances").join(&name).is_dir());
        assert_eq!(
            std::fs::read_to_string(inst.dir.join("current_tracer")).unwrap(),
            "osnoise"
        );
        // The journal lists the instance and both files, as a tracer's.
        let entries = journal::read(&journal::path(host.path())).unwrap();
        assert!(journal::only_tracer(&entries));
        assert_eq!(journal::pending(&entries).len(), 3);
        assert_eq!(inst.missing, vec!["osnoise:irq_noise".to_string()]);
        // A made-up instance is a plain directory: empty it as rmdir would.
        for f in [
            "current_tracer",
            "tracing_cpumask",
            "tracing_on",
            "buffer_size_kb",
        ] {
            let _ = std::fs::remove_file(inst.dir.join(f));
        }
        let dir = inst.dir.clone();
        let s = inst.stop();
        assert!(s.restored, "{s:?}");
        assert_eq!(
            std::fs::read_to_string(t.join("osnoise/cpus")).unwrap(),
            "0-1\n"
        );
        assert_eq!(
            std::fs::read_to_string(t.join("tracing_thresh")).unwrap(),
            "0"
        );
        assert!(!dir.exists());
        assert!(!journal::path(host.path()).exists());
    }

    #[test]
    fn a_kernel_without_the_tracer_is_said_and_nothing_is_touched() {
        let (host, t) = tree();
        std::fs::write(t.join("available_tracers"), "function nop\n").unwrap();
        match start(host.path(), &t, "osnoise") {
            Err(TraceError::NoTracer { tracer, available }) => {
                assert_eq!(
                    (tracer.as_str(), available.as_str()),
                    ("osnoise", "function nop")
                );
            }
            other => panic!("{:?}", other.err()),
        }
        assert_eq!(
            std::fs::read_to_string(t.join("osnoise/cpus")).unwrap(),
            "0-1\n"
        );
        assert!(!journal::path(host.path()).exists());
    }

    /// Makes the journal under `root` a killed run's: its header names a pid no process has.
    fn orphan_journal(root: &Path) {
        let text = std::fs::read_to_string(journal::path(root)).unwrap();
        let dead = text.replacen(
            &format!("\"pid\":{}", std::process::id()),
            "\"pid\":999999999",
            1,
        );
        std::fs::write(journal::path(root), dead).unwrap();
    }

    #[test]
    fn a_killed_runs_journal_is_reverted_by_the_next_run() {
        let (host, t) = tree();
        // What a SIGKILLed run leaves: its journal, the files as it wrote them.
        let mut a = Applied::new(host.path()).unwrap();
        a.write(TRACER_STEP, "/sys/kernel/tracing/osnoise/cpus", "1")
            .unwrap();
        let entries = journal::read(&journal::path(host.path())).unwrap();
        std::mem::forget(a);
        orphan_journal(host.path());
        assert!(journal::only_tracer(&entries));
        let inst = start(host.path(), &t, "osnoise").unwrap();
        let words = inst.reverted_stale.clone().unwrap();
        assert!(words.contains("osnoise/cpus 0-1"), "{words}");
        for f in [
            "current_tracer",
            "tracing_cpumask",
            "tracing_on",
            "buffer_size_kb",
        ] {
            let _ = std::fs::remove_file(inst.dir.join(f));
        }
        assert!(inst.stop().restored);
        assert_eq!(
            std::fs::read_to_string(t.join("osnoise/cpus")).unwrap(),
            "0-1\n"
        );
    }

    #[test]
    fn a_stale_tune_journal_refuses() {
        let (host, t) = tree();
        let mut a = Applied::new(host.path()).unwrap();
        a.write("irq-affinity", "/sys/kernel/tracing/tracing_thresh", "9")
            .unwrap();
        std::mem::forget(a);
        orphan_journal(host.path());
        match start(host.path(), &t, "osnoise") {
            Err(TraceError::Journal(w)) => assert!(w.contains("tune --restore"), "{w}"),
            other => panic!("{:?}", other.err()),
        }
    }

    #[test]
    fn lines_are_handed_over_whole() {
        let mut got = Vec::new();
        let mut pending = b"a b\nc d\npart".to_vec();
        let n = hand_over(&mut pending, &mut |l| got.push(l.to_string()));
        assert_eq!(
            (n, got.clone()),
            (2, vec!["a b".to_string(), "c d".to_string()])
        );
        assert_eq!(pending, b"part");
    }

    #[test]
    fn the_reader_drains_a_file_and_stops() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("trace_pipe");
        std::fs::write(&p, "one\ntwo\nthree").unwrap();
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let s2 = seen.clone();
        let r =
            LineReader::spawn(p, None, move |l| s2.lock().unwrap().push(l.to_string())).unwrap();
        assert_eq!(r.finish(), 3);
        assert_eq!(*seen.lock().unwrap(), vec!["one", "two", "three"]);
    }
}
