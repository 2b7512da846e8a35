//! tracefs: finding it, and freezing a trace when a latency limit is crossed (cyclictest's
//! breaktrace).
//!
//! The files are opened before the run, so that the moment a limit is crossed costs two
//! writes to already-open files and nothing else.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Where tracefs is mounted, from the mount table (`/sys/kernel/tracing` normally, or the
/// old `/sys/kernel/debug/tracing`); `None` when it is not mounted.
pub fn tracefs_root() -> Option<PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
    tracefs_in_mounts(&mounts)
}

/// The first tracefs mount point in a mount table's text.
pub fn tracefs_in_mounts(mounts: &str) -> Option<PathBuf> {
    mounts.lines().find_map(|line| {
        let mut f = line.split_whitespace();
        let (_dev, dir, fstype) = (f.next()?, f.next()?, f.next()?);
        (fstype == "tracefs").then(|| PathBuf::from(unescape_mount(dir)))
    })
}

/// The mount table writes spaces and tabs in paths as octal escapes (`\040`).
fn unescape_mount(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('\\') {
        out.push_str(&rest[..i]);
        let code = rest.get(i + 1..i + 4);
        match code.and_then(|c| u8::from_str_radix(c, 8).ok()) {
            Some(b) => {
                out.push(b as char);
                rest = &rest[i + 4..];
            }
            None => {
                out.push('\\');
                rest = &rest[i + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// What the breaktrace did: the timer probe's record of it.
pub use crate::probes::timer::BreakAction as TraceAction;

/// The two tracefs files a breaktrace writes, opened ahead of time.
#[derive(Debug)]
pub struct BreakTracer {
    root: Option<PathBuf>,
    marker: Option<File>,
    tracing_on: Option<File>,
}

impl BreakTracer {
    /// Opens `trace_marker` and `tracing_on` under `root`, if given.
    pub fn open(root: Option<&Path>) -> BreakTracer {
        let open = |name: &str| {
            root.and_then(|r| {
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(r.join(name))
                    .ok()
            })
        };
        BreakTracer {
            root: root.map(Path::to_path_buf),
            marker: open("trace_marker"),
            tracing_on: open("tracing_on"),
        }
    }

    /// The tracefs root, when one was found.
    pub fn root(&self) -> Option<&Path> {
        self.root.as_deref()
    }

    /// Writes `line` to the trace, then stops tracing, so the buffer ends at the event.
    pub fn fire(&self, line: &str) -> TraceAction {
        if self.root.is_none() {
            return TraceAction::NoTracefs;
        }
        let (Some(mut marker), Some(mut on)) = (self.marker.as_ref(), self.tracing_on.as_ref())
        else {
            return TraceAction::Failed;
        };
        let marked = marker.write_all(line.as_bytes()).is_ok();
        let stopped = on.write_all(b"0").is_ok();
        match marked && stopped {
            true => TraceAction::MarkedAndStopped,
            false => TraceAction::Failed,
        }
    }
}

impl crate::probes::timer::BreakHook for BreakTracer {
    fn fire(&self, line: &str) -> TraceAction {
        BreakTracer::fire(self, line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_tracefs_in_a_mount_table() {
        let table = "sysfs /sys sysfs rw 0 0\n\
                     tracefs /sys/kernel/tracing tracefs rw,nosuid 0 0\n";
        assert_eq!(
            tracefs_in_mounts(table),
            Some(PathBuf::from("/sys/kernel/tracing"))
        );
        assert_eq!(tracefs_in_mounts("sysfs /sys sysfs rw 0 0\n"), None);
        let spaced = "none /mnt/my\\040trace tracefs rw 0 0\n";
        assert_eq!(
            tracefs_in_mounts(spaced),
            Some(PathBuf::from("/mnt/my trace"))
        );
    }

    #[test]
    fn fire_writes_the_marker_and_turns_tracing_off() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("trace_marker"), "").unwrap();
        std::fs::write(dir.path().join("tracing_on"), "1").unwrap();
        let t = BreakTracer::open(Some(dir.path()));
        assert_eq!(t.fire("hit 2000 > 1000 us"), TraceAction::MarkedAndStopped);
        let marker = std::fs::read_to_string(dir.path().join("trace_marker")).unwrap();
        assert_eq!(marker, "hit 2000 > 1000 us");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("tracing_on")).unwrap(),
            "0"
        );
        assert_eq!(BreakTracer::open(None).fire("x"), TraceAction::NoTracefs);
        let empty = tempfile::tempdir().unwrap();
        assert_eq!(
            BreakTracer::open(Some(empty.path())).fire("x"),
            TraceAction::Failed
        );
    }
}
