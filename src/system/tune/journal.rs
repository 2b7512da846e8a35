//! The journal of host changes: `/run/jitterscope/tune.journal` (below `--root` in a
//! tree), JSON lines. `tune` writes it, and so does a deadline run that makes a root
//! domain of its own (`root_domain`): one journal, so that one `tune --restore` reverts
//! whatever a killed run left.
//!
//! The first line names the process that writes it. Before each write to the host, a
//! `write` line with the old value is appended and synced (the file, and the directory
//! when the file is new), so that whatever kills the process, the journal knows every
//! change that may have been made. A `restored` line follows each revert. When every
//! change is reverted the file is removed; a journal that outlives its process is stale,
//! and `tune --restore` reverts whatever it still lists. /run is a tmpfs: a reboot,
//! which resets every run-time setting anyway, clears the journal too.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The journal's place below the root.
pub const JOURNAL: &str = "/run/jitterscope/tune.journal";

/// Errors of the journal, each naming the file.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error(
        "{path} exists: another jitterscope run (pid {pid}: tune, or a deadline run's root \
         domain) is changing this host, or one was killed; if none runs, `jitterscope tune \
         --restore` reverts what it left"
    )]
    Exists { path: PathBuf, pid: u32 },
    #[error("cannot write the journal {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("{path}: line {line} is not a journal entry: {why}")]
    Corrupt {
        path: PathBuf,
        line: usize,
        why: String,
    },
}

/// One line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "entry", rename_all = "kebab-case")]
pub enum Entry {
    /// Who writes this journal.
    Header { pid: u32, start_time: String },
    /// `path` held `old` (as written back) before `new` was written, for `step`.
    Write {
        seq: u64,
        step: String,
        path: String,
        old: String,
        new: String,
    },
    /// Thread `pid`, started at `start` (stat's field 22), was allowed `old` before it
    /// was moved to `new`, for `step`.
    Affinity {
        seq: u64,
        step: String,
        pid: u32,
        start: u64,
        old: String,
        new: String,
    },
    /// The cgroup directory `dir` is about to be made, for `step`: reverted by moving
    /// whatever tasks it holds to its parent and removing it.
    Group { seq: u64, step: String, dir: String },
    /// The controller `name` is about to be enabled in `dir`'s `cgroup.subtree_control`,
    /// for `step`: reverted by writing `-name` there.
    Controller {
        seq: u64,
        step: String,
        dir: String,
        name: String,
    },
    /// The write `seq` was reverted (or never happened: the kernel refused it).
    Restored { seq: u64 },
}

/// An open journal.
#[derive(Debug)]
pub struct Journal {
    path: PathBuf,
    file: File,
    next: u64,
}

/// The journal's path below `root`.
pub fn path(root: &Path) -> PathBuf {
    super::under(root, JOURNAL)
}

impl Journal {
    /// Creates the journal for this process; refuses when one exists.
    pub fn create(root: &Path) -> Result<Journal, JournalError> {
        let path = path(root);
        let io = |source| JournalError::Io {
            path: path.clone(),
            source,
        };
        if let Ok(entries) = read(&path) {
            let pid = entries
                .iter()
                .find_map(|e| match e {
                    Entry::Header { pid, .. } => Some(*pid),
                    _ => None,
                })
                .unwrap_or(0);
            return Err(JournalError::Exists { path, pid });
        }
        let dir = path.parent().expect("the journal has a directory");
        fs::create_dir_all(dir).map_err(io)?;
        let file = OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(&path)
            .map_err(io)?;
        let mut j = Journal {
            path: path.clone(),
            file,
            next: 0,
        };
        j.append(&Entry::Header {
            pid: std::process::id(),
            start_time: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
        })?;
        // The new name must survive a crash too.
        File::open(dir).and_then(|d| d.sync_all()).map_err(io)?;
        Ok(j)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Records a write about to be made; returns its sequence number. Synced on return.
    pub fn will_write(
        &mut self,
        step: &str,
        path: &str,
        old: &str,
        new: &str,
    ) -> Result<u64, JournalError> {
        self.record(|seq| Entry::Write {
            seq,
            step: step.to_string(),
            path: path.to_string(),
            old: old.to_string(),
            new: new.to_string(),
        })
    }

    /// Records a thread move about to be made; returns its sequence number. Synced on
    /// return.
    pub fn will_move(
        &mut self,
        step: &str,
        (pid, start): (u32, u64),
        old: &str,
        new: &str,
    ) -> Result<u64, JournalError> {
        self.record(|seq| Entry::Affinity {
            seq,
            step: step.to_string(),
            pid,
            start,
            old: old.to_string(),
            new: new.to_string(),
        })
    }

    /// Records a cgroup about to be made; returns its sequence number. Synced on return.
    pub fn will_make_group(&mut self, step: &str, dir: &str) -> Result<u64, JournalError> {
        self.record(|seq| Entry::Group {
            seq,
            step: step.to_string(),
            dir: dir.to_string(),
        })
    }

    /// Records a controller about to be enabled for `dir`'s children; returns its
    /// sequence number. Synced on return.
    pub fn will_enable(&mut self, step: &str, dir: &str, name: &str) -> Result<u64, JournalError> {
        self.record(|seq| Entry::Controller {
            seq,
            step: step.to_string(),
            dir: dir.to_string(),
            name: name.to_string(),
        })
    }

    /// Appends the change `entry` makes of the next sequence number, and returns it.
    fn record(&mut self, entry: impl FnOnce(u64) -> Entry) -> Result<u64, JournalError> {
        let seq = self.next;
        self.next += 1;
        self.append(&entry(seq))?;
        Ok(seq)
    }

    /// Records that write `seq` is undone.
    pub fn restored(&mut self, seq: u64) -> Result<(), JournalError> {
        self.append(&Entry::Restored { seq })
    }

    /// Removes the journal: everything it listed is restored.
    pub fn finish(self) -> Result<(), JournalError> {
        let io = |source| JournalError::Io {
            path: self.path.clone(),
            source,
        };
        fs::remove_file(&self.path).map_err(io)?;
        if let Some(dir) = self.path.parent() {
            File::open(dir).and_then(|d| d.sync_all()).map_err(io)?;
        }
        Ok(())
    }

    fn append(&mut self, e: &Entry) -> Result<(), JournalError> {
        let mut line = serde_json::to_string(e).expect("entries serialize");
        line.push('\n');
        self.file
            .write_all(line.as_bytes())
            .and_then(|_| self.file.sync_data())
            .map_err(|source| JournalError::Io {
                path: self.path.clone(),
                source,
            })
    }
}

/// Every entry of the journal at `path`. A torn last line (the process died while
/// appending it) is dropped: its write had not been made yet.
pub fn read(path: &Path) -> Result<Vec<Entry>, JournalError> {
    let text = fs::read_to_string(path).map_err(|source| JournalError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        match serde_json::from_str::<Entry>(l) {
            Ok(e) => out.push(e),
            Err(_) if i + 1 == lines.len() && !text.ends_with('\n') => {}
            Err(e) => {
                return Err(JournalError::Corrupt {
                    path: path.to_path_buf(),
                    line: i + 1,
                    why: e.to_string(),
                });
            }
        }
    }
    Ok(out)
}

/// What a journaled change changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A file (absolute, below the root in a tree).
    File(String),
    /// A thread's allowed CPUs: the pid and its start time.
    Thread { pid: u32, start: u64 },
    /// A cgroup made (its directory, absolute): the old state is its absence.
    Group(String),
    /// A controller enabled in a cgroup's `cgroup.subtree_control`.
    Controller { dir: String, name: String },
}

/// What a made group's revert puts back: its absence.
pub const ABSENT: &str = "absent";

/// The changes not yet restored, last first: the order to revert them in.
pub fn pending(entries: &[Entry]) -> Vec<(u64, Target, String)> {
    let restored: Vec<u64> = entries
        .iter()
        .filter_map(|e| match e {
            Entry::Restored { seq } => Some(*seq),
            _ => None,
        })
        .collect();
    let mut out: Vec<(u64, Target, String)> = entries
        .iter()
        .filter_map(|e| match e {
            Entry::Write { seq, path, old, .. } => {
                Some((*seq, Target::File(path.clone()), old.clone()))
            }
            Entry::Affinity {
                seq,
                pid,
                start,
                old,
                ..
            } => Some((
                *seq,
                Target::Thread {
                    pid: *pid,
                    start: *start,
                },
                old.clone(),
            )),
            Entry::Group { seq, dir, .. } => {
                Some((*seq, Target::Group(dir.clone()), ABSENT.into()))
            }
            Entry::Controller { seq, dir, name, .. } => Some((
                *seq,
                Target::Controller {
                    dir: dir.clone(),
                    name: name.clone(),
                },
                format!("-{name}"),
            )),
            _ => None,
        })
        .filter(|(seq, ..)| !restored.contains(seq))
        .collect();
    out.reverse();
    out
}

/// The journal's writer, when the journal exists: `Some(Some(pid))` while that process
/// lives, `Some(None)` when it is stale. One `stat` when there is none, so every command
/// can afford to ask.
pub fn state(root: &Path) -> Option<Option<u32>> {
    let path = path(root);
    if fs::symlink_metadata(&path).is_err() {
        return None;
    }
    let pid = read(&path).ok().and_then(|es| {
        es.iter().find_map(|e| match e {
            Entry::Header { pid, .. } => Some(*pid),
            _ => None,
        })
    });
    let alive =
        pid.filter(|p| *p != std::process::id() && Path::new(&format!("/proc/{p}")).exists());
    Some(alive)
}

/// The step names of every change a journal lists.
fn steps(entries: &[Entry]) -> impl Iterator<Item = &str> {
    entries.iter().filter_map(|e| match e {
        Entry::Write { step, .. }
        | Entry::Affinity { step, .. }
        | Entry::Group { step, .. }
        | Entry::Controller { step, .. } => Some(step.as_str()),
        Entry::Header { .. } | Entry::Restored { .. } => None,
    })
}

/// The step name a deadline run's root domain is journaled under (`root_domain::STEP`).
pub const ROOT_DOMAIN_STEP: &str = "root-domain";

/// Whether every change the journal lists is a deadline run's root domain (and it lists
/// one at least): what such a run may revert by itself when its writer is gone.
pub fn only_root_domain(entries: &[Entry]) -> bool {
    only_step(entries, ROOT_DOMAIN_STEP)
}

/// The step name a kernel tracer's instance and the global tracefs files it writes are
/// journaled under (`trace::tracer::instance`).
pub const TRACER_STEP: &str = "tracer";

/// Whether every change the journal lists is a tracer run's (and it lists one at least):
/// what the next tracer run reverts by itself when its writer is gone.
pub fn only_tracer(entries: &[Entry]) -> bool {
    only_step(entries, TRACER_STEP)
}

fn only_step(entries: &[Entry], step: &str) -> bool {
    steps(entries).next().is_some() && steps(entries).all(|s| s == step)
}

/// Who wrote the journal and what it changes, in words: ("a tune run", "the settings
/// it changed") or a deadline run and its root domain.
fn writer(root: &Path) -> (&'static str, &'static str) {
    match read(&path(root)) {
        Ok(entries) if only_root_domain(&entries) => {
            ("a deadline run", "the root domain it made (cpusets)")
        }
        Ok(entries) if only_tracer(&entries) => (
            "a kernel tracer run",
            "the tracefs settings it changed (osnoise/*, its instance)",
        ),
        _ => ("a tune run", "the settings it changed"),
    }
}

/// The warning every other command prints when a journal is found.
pub fn warning(root: &Path) -> Option<String> {
    let (who, what) = writer(root);
    match state(root)? {
        Some(pid) => Some(format!(
            "{who} (pid {pid}) is changing this host's settings now: figures measured \
             meanwhile reflect {what}"
        )),
        None => Some(format!(
            "{who} was killed before it restored {what} ({}): `jitterscope tune --restore` \
             reverts them",
            path(root).display()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pending_writes_revert_last_first_and_skip_the_restored() {
        let dir = tempfile::tempdir().unwrap();
        let mut j = Journal::create(dir.path()).unwrap();
        let a = j.will_write("s", "/a", "1", "2").unwrap();
        let _b = j.will_write("s", "/b", "x", "y").unwrap();
        let _c = j.will_write("t", "/c", "p", "q").unwrap();
        let _d = j.will_move("k", (20, 1020), "0-1", "0").unwrap();
        j.restored(a).unwrap();
        let p = path(dir.path());
        let entries = read(&p).unwrap();
        let pend = pending(&entries);
        let file = |p: &str| Target::File(p.into());
        let thread = Target::Thread {
            pid: 20,
            start: 1020,
        };
        assert_eq!(
            pend,
            vec![
                (3, thread, "0-1".into()),
                (2, file("/c"), "p".into()),
                (1, file("/b"), "x".into())
            ]
        );
        // A second journal is refused while this one exists.
        assert!(matches!(
            Journal::create(dir.path()),
            Err(JournalError::Exists { .. })
        ));
        // Its own process is not "another run": the state says stale.
        assert_eq!(state(dir.path()), Some(None));
        j.finish().unwrap();
        assert_eq!(state(dir.path()), None);
    }

    #[test]
    fn a_torn_last_line_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("j");
        fs::write(
            &p,
            "{\"entry\":\"write\",\"seq\":0,\"step\":\"s\",\"path\":\"/a\",\"old\":\"1\",\"new\":\"2\"}\n{\"entry\":\"wri",
        )
        .unwrap();
        assert_eq!(read(&p).unwrap().len(), 1);
        fs::write(&p, "junk\n{}\n").unwrap();
        assert!(matches!(read(&p), Err(JournalError::Corrupt { .. })));
    }
}
