//! Applying and reverting steps, through the journal.
//!
//! [`Applied`] is the guard of every change `tune` makes: each write is journaled and
//! synced first, reverted in reverse order by `revert_to` or `restore_all`, and on drop
//! (a panic, an early return) whatever is still applied is reverted. PM QoS requests are
//! held as open files and lapse when they close. [`restore_stale`] reverts the journal a
//! killed run left.

use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::journal::{self, Journal, JournalError, Target};
use super::{Change, Step, holds, normalize, thread, under};
use crate::engine::errno::answer;
use crate::engine::pmqos::{DEVICE, DmaLatencyGuard};

/// A file read back after a revert.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Readback {
    pub path: String,
    /// What was written back.
    pub expected: String,
    /// What the file reads now.
    pub now: String,
    pub ok: bool,
}

/// Why a step could not be applied.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// The kernel refused the write (or the read): its answer, for the step's class.
    #[error("{path}: {answer}")]
    Refused { path: String, answer: String },
    #[error(transparent)]
    Journal(#[from] JournalError),
}

enum Undo {
    Change {
        seq: u64,
        target: Target,
        old: String,
    },
    PmQos(#[allow(dead_code)] DmaLatencyGuard),
}

/// Everything applied, in order; reverts what is left on drop.
pub struct Applied {
    root: PathBuf,
    journal: Option<Journal>,
    stack: Vec<Undo>,
    /// Readbacks of the reverts made so far.
    pub readbacks: Vec<Readback>,
    /// Left applied on purpose (`--keep`): drop reverts nothing.
    kept: bool,
}

impl Applied {
    /// Starts a journal below `root`.
    pub fn new(root: &Path) -> Result<Applied, JournalError> {
        Ok(Applied {
            root: root.to_path_buf(),
            journal: Some(Journal::create(root)?),
            stack: Vec::new(),
            readbacks: Vec::new(),
            kept: false,
        })
    }

    /// How many changes are applied: a mark for `revert_to`.
    pub fn mark(&self) -> usize {
        self.stack.len()
    }

    /// The journal's path.
    pub fn journal_path(&self) -> PathBuf {
        journal::path(&self.root)
    }

    /// Applies every change of `step`; on a refusal, reverts the ones made and returns
    /// the kernel's answer. Returns each written file's value before and after.
    pub fn apply(&mut self, step: &Step) -> Result<Vec<(String, String, String)>, ApplyError> {
        let mark = self.mark();
        let mut seen = Vec::new();
        for c in &step.changes {
            match self.apply_one(&step.name(), c) {
                Ok(Some(row)) => seen.push(row),
                Ok(None) => {}
                Err(e) => {
                    self.revert_to(mark);
                    return Err(e);
                }
            }
        }
        Ok(seen)
    }

    fn apply_one(
        &mut self,
        step: &str,
        c: &Change,
    ) -> Result<Option<(String, String, String)>, ApplyError> {
        match c {
            Change::PmQos { value_us } => {
                let guard = DmaLatencyGuard::set(Path::new(DEVICE), *value_us).map_err(|e| {
                    ApplyError::Refused {
                        path: DEVICE.into(),
                        answer: e.to_string(),
                    }
                })?;
                self.stack.push(Undo::PmQos(guard));
                Ok(None)
            }
            Change::Write { path, value } => {
                let file = under(&self.root, path);
                let refused = |e: std::io::Error| ApplyError::Refused {
                    path: path.clone(),
                    answer: e.to_string(),
                };
                let old = normalize(&read_text(&file).map_err(refused)?);
                let journal = self.journal.as_mut().expect("journal open while applying");
                let seq = journal.will_write(step, path, &old, value)?;
                if let Err(e) = fs::write(&file, as_written(path, value)) {
                    // Nothing changed: the journal says so at once.
                    journal.restored(seq)?;
                    return Err(refused(e));
                }
                self.stack.push(Undo::Change {
                    seq,
                    target: Target::File(path.clone()),
                    old: old.clone(),
                });
                let now = read_text(&file).map(|t| normalize(&t));
                Ok(Some((path.clone(), old, now.unwrap_or_default())))
            }
            Change::Affinity { pid, cpus, .. } => self.move_thread(step, *pid, cpus),
        }
    }

    /// Writes `value` to `path` (absolute, below the root), its old value journaled first;
    /// returns the file's value before and after.
    pub fn write(
        &mut self,
        step: &str,
        path: &str,
        value: &str,
    ) -> Result<(String, String, String), ApplyError> {
        let change = Change::Write {
            path: path.to_string(),
            value: value.to_string(),
        };
        let row = self.apply_one(step, &change)?;
        Ok(row.expect("a write reads its file back"))
    }

    /// Makes the cgroup directory `dir` (absolute, below the root), journaled first: a
    /// revert moves whatever tasks it holds to its parent and removes it.
    pub fn make_group(&mut self, step: &str, dir: &str) -> Result<(), ApplyError> {
        let refused = |e: std::io::Error| ApplyError::Refused {
            path: dir.to_string(),
            answer: answer(&e),
        };
        let journal = self.journal.as_mut().expect("journal open while applying");
        let seq = journal.will_make_group(step, dir)?;
        if let Err(e) = fs::create_dir(under(&self.root, dir)) {
            journal.restored(seq)?;
            return Err(refused(e));
        }
        self.stack.push(Undo::Change {
            seq,
            target: Target::Group(dir.to_string()),
            old: journal::ABSENT.to_string(),
        });
        Ok(())
    }

    /// Enables controller `name` for the children of cgroup `dir` (its
    /// `cgroup.subtree_control`), journaled first, unless it is enabled already.
    pub fn enable_controller(
        &mut self,
        step: &str,
        dir: &str,
        name: &str,
    ) -> Result<(), ApplyError> {
        let file = under(&self.root, dir).join("cgroup.subtree_control");
        let path = format!("{dir}/cgroup.subtree_control");
        let refused = |e: std::io::Error| ApplyError::Refused {
            path: path.clone(),
            answer: answer(&e),
        };
        if enabled(&file, name).map_err(refused)? {
            return Ok(());
        }
        let journal = self.journal.as_mut().expect("journal open while applying");
        let seq = journal.will_enable(step, dir, name)?;
        if let Err(e) = fs::write(&file, format!("+{name}")) {
            journal.restored(seq)?;
            return Err(refused(e));
        }
        let target = Target::Controller {
            dir: dir.to_string(),
            name: name.to_string(),
        };
        self.stack.push(Undo::Change {
            seq,
            target,
            old: format!("-{name}"),
        });
        Ok(())
    }

    /// Journals thread `pid`'s allowed CPUs before the kernel changes them on its own
    /// (`new` says how), so that a revert sets them back. A thread that has exited is
    /// skipped.
    pub fn keep_affinity(&mut self, step: &str, pid: u32, new: &str) -> Result<(), ApplyError> {
        let (Ok(old), Some(start)) = (
            thread::allowed(&self.root, pid),
            thread::start_time(&self.root, pid),
        ) else {
            return Ok(());
        };
        let journal = self.journal.as_mut().expect("journal open while applying");
        let seq = journal.will_move(step, (pid, start), &old, new)?;
        self.stack.push(Undo::Change {
            seq,
            target: Target::Thread { pid, start },
            old,
        });
        Ok(())
    }

    /// Moves kernel thread `pid` to `cpus`, its old mask journaled first. A thread that
    /// has exited since the plan is skipped, as the audit's own command skips it.
    fn move_thread(
        &mut self,
        step: &str,
        pid: u32,
        cpus: &str,
    ) -> Result<Option<(String, String, String)>, ApplyError> {
        let name = format!("pid {pid}");
        let refused = |e: std::io::Error| ApplyError::Refused {
            path: name.clone(),
            answer: answer(&e),
        };
        let (old, start) = match (
            thread::allowed(&self.root, pid),
            thread::start_time(&self.root, pid),
        ) {
            (Ok(old), Some(start)) => (old, start),
            (Err(e), _) if e.kind() != std::io::ErrorKind::NotFound => return Err(refused(e)),
            _ => return Ok(None),
        };
        let journal = self.journal.as_mut().expect("journal open while applying");
        let seq = journal.will_move(step, (pid, start), &old, cpus)?;
        if let Err(e) = thread::set(&self.root, pid, cpus) {
            journal.restored(seq)?;
            return Err(refused(e));
        }
        self.stack.push(Undo::Change {
            seq,
            target: Target::Thread { pid, start },
            old: old.clone(),
        });
        let now = thread::allowed(&self.root, pid).unwrap_or_default();
        Ok(Some((name, old, now)))
    }

    /// Reverts every change made after `mark`, last first, reading each file back.
    pub fn revert_to(&mut self, mark: usize) {
        while self.stack.len() > mark {
            match self.stack.pop() {
                Some(Undo::Change { seq, target, old }) => {
                    let back = revert(&self.root, &target, &old);
                    if back.ok
                        && let Some(j) = self.journal.as_mut()
                    {
                        // A failed revert stays pending, for `tune --restore`.
                        let _ = j.restored(seq);
                    }
                    self.readbacks.push(back);
                }
                Some(Undo::PmQos(guard)) => drop(guard),
                None => break,
            }
        }
    }

    /// Reverts everything and removes the journal when every revert read back right.
    pub fn restore_all(&mut self) -> Result<(), JournalError> {
        self.revert_to(0);
        self.close()
    }

    /// Leaves what is applied as it is (`--keep`) and removes the journal. Returns the
    /// shell commands that undo it, last change first, for the caller to print. PM QoS
    /// requests still lapse when the process exits.
    pub fn keep(mut self) -> Result<Vec<String>, JournalError> {
        let undo = self
            .stack
            .iter()
            .filter_map(|u| match u {
                Undo::Change { target, old, .. } => Some(undo_command(target, old)),
                Undo::PmQos(_) => None,
            })
            .rev()
            .collect();
        self.kept = true;
        self.close()?;
        Ok(undo)
    }

    fn close(&mut self) -> Result<(), JournalError> {
        if self.readbacks.iter().all(|r| r.ok)
            && let Some(j) = self.journal.take()
        {
            j.finish()?;
        }
        Ok(())
    }
}

impl Drop for Applied {
    fn drop(&mut self) {
        if !self.kept {
            let _ = self.restore_all();
        }
    }
}

/// Reverts a stale journal below `root`: every write it lists and does not mark
/// restored, last first, each read back; removes the journal when all read back right.
/// `None` when there is no journal.
pub fn restore_stale(root: &Path) -> Result<Option<Vec<Readback>>, JournalError> {
    let path = journal::path(root);
    if !path.exists() {
        return Ok(None);
    }
    let entries = journal::read(&path)?;
    let mut file = fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .map_err(|source| JournalError::Io {
            path: path.clone(),
            source,
        })?;
    let mut out = Vec::new();
    for (seq, target, old) in journal::pending(&entries) {
        let back = revert(root, &target, &old);
        if back.ok {
            use std::io::Write;
            let line = serde_json::to_string(&journal::Entry::Restored { seq })
                .expect("entries serialize");
            let _ = writeln!(file, "{line}").and_then(|_| file.sync_data());
        }
        out.push(back);
    }
    if out.iter().all(|r| r.ok) {
        fs::remove_file(&path).map_err(|source| JournalError::Io {
            path: path.clone(),
            source,
        })?;
    }
    Ok(Some(out))
}

/// A settings file's text, read in reads of 8 KiB. tracefs's `osnoise/cpus` refuses
/// (EINVAL) any read whose buffer is not longer than its whole text, and
/// `fs::read_to_string` reads a short file's end into what is left of a small buffer (a
/// 6.1 guest refused it so): a large buffer every time reads it.
pub fn read_text(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    let mut f = fs::File::open(path)?;
    let (mut out, mut chunk) = (Vec::new(), vec![0u8; 8192]);
    loop {
        match f.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    String::from_utf8(out).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

/// What to write to `path` for `value`. Kernels with "tracing/osnoise: Allow arbitrarily
/// long CPU string" and without its 2025 fix (Debian 12's 6.1.192 among them) parse a
/// write to tracefs's `osnoise/cpus` with no '\0' after it, so a CPU list without the
/// newline `echo` adds is refused with EINVAL (seen in the lab): give it one.
pub fn as_written(path: &str, value: &str) -> String {
    match path.ends_with("/osnoise/cpus") && !value.ends_with('\n') {
        true => format!("{value}\n"),
        false => value.to_string(),
    }
}

/// The shell command that puts `old` back.
fn undo_command(target: &Target, old: &str) -> String {
    match target {
        Target::File(path) => format!("echo {old} > {path}"),
        // A thread that has exited since has nothing to undo: taskset only fails.
        Target::Thread { pid, .. } => format!("taskset -pc {old} {pid}"),
        Target::Group(dir) => format!("rmdir {dir}"),
        Target::Controller { dir, .. } => format!("echo {old} > {dir}/cgroup.subtree_control"),
    }
}

/// Whether `name` is among the controllers a `cgroup.subtree_control` file enables.
fn enabled(file: &Path, name: &str) -> std::io::Result<bool> {
    Ok(fs::read_to_string(file)?
        .split_whitespace()
        .any(|c| c == name))
}

/// Reverts one change and reads it back.
fn revert(root: &Path, target: &Target, old: &str) -> Readback {
    let (path, wrote, now) = match target {
        Target::File(path) => {
            let file = under(root, path);
            let wrote = fs::write(&file, as_written(path, old)).is_ok();
            let now = read_text(&file).map(|t| normalize(&t));
            (path.clone(), wrote, now)
        }
        Target::Thread { pid, start } => return revert_thread(root, *pid, *start, old),
        Target::Group(dir) => return remove_group(root, dir),
        Target::Controller { dir, name } => return disable_controller(root, dir, name),
    };
    let now = now.unwrap_or_else(|e| format!("unreadable: {e}"));
    Readback {
        path,
        ok: wrote && (holds(&now, old) || thread::same(&now, old)),
        expected: old.to_string(),
        now,
    }
}

/// Removes a cgroup that was made: its tasks (threads on v2, whose threaded groups hold
/// them one by one) moved to the parent first, retried for up to a second while tasks
/// that are exiting still hold it. One already gone reads back right.
fn remove_group(root: &Path, dir: &str) -> Readback {
    let group = under(root, dir);
    let parent = group.parent().map(Path::to_path_buf).unwrap_or_default();
    let mut last = None;
    for _ in 0..50 {
        if !group.exists() {
            last = None;
            break;
        }
        for list in ["tasks", "cgroup.threads", "cgroup.procs"] {
            let ids = fs::read_to_string(group.join(list)).unwrap_or_default();
            for id in ids.split_whitespace() {
                let _ = fs::write(parent.join(list), id);
            }
        }
        match fs::remove_dir(&group) {
            Ok(()) => {
                last = None;
                break;
            }
            Err(e) => last = Some(answer(&e)),
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let now = match (&last, group.exists()) {
        (_, false) => journal::ABSENT.to_string(),
        (Some(why), true) => format!("present (rmdir: {why})"),
        (None, true) => "present".to_string(),
    };
    Readback {
        path: dir.to_string(),
        expected: journal::ABSENT.to_string(),
        ok: !group.exists(),
        now,
    }
}

/// Disables controller `name` for the children of `dir` again, read back.
fn disable_controller(root: &Path, dir: &str, name: &str) -> Readback {
    let file = under(root, dir).join("cgroup.subtree_control");
    let wrote = fs::write(&file, format!("-{name}"));
    let now = fs::read_to_string(&file);
    let ok = wrote.is_ok()
        && now
            .as_ref()
            .is_ok_and(|t| !t.split_whitespace().any(|c| c == name));
    let now = match (wrote, now) {
        (Err(e), _) => format!("unwritable: {}", answer(&e)),
        (Ok(()), Ok(t)) => t.trim().to_string(),
        (Ok(()), Err(e)) => format!("unreadable: {e}"),
    };
    Readback {
        path: format!("{dir}/cgroup.subtree_control"),
        expected: format!("without {name}"),
        now,
        ok,
    }
}

/// Moves a thread back to `old`. One that has exited (or whose pid a later thread
/// reuses, with another start time) has nothing to restore, even if it exits mid-way.
fn revert_thread(root: &Path, pid: u32, start: u64, old: &str) -> Readback {
    let gone = || thread::start_time(root, pid) != Some(start);
    let (now, ok) = if gone() {
        ("exited".to_string(), true)
    } else {
        match (thread::set(root, pid, old), thread::allowed(root, pid)) {
            (Ok(()), Ok(now)) => {
                let ok = thread::same(&now, old);
                (now, ok)
            }
            _ if gone() => ("exited".to_string(), true),
            (Err(e), _) | (_, Err(e)) => (format!("unwritable: {}", answer(&e)), false),
        }
    };
    Readback {
        path: format!("pid {pid} allowed CPUs"),
        expected: old.to_string(),
        now,
        ok,
    }
}

/// Asks the kernel whether `path` (an IRQ's smp_affinity_list) can be written, by
/// writing back the value it holds, which changes nothing: a managed IRQ is refused, and
/// the answer names the errno the kernel gave (EIO or EPERM, by kernel version).
/// `None` when the write is accepted.
pub fn probe(root: &Path, path: &str) -> Option<String> {
    let file = under(root, path);
    let now = match fs::read_to_string(&file) {
        Ok(t) => t.trim().to_string(),
        Err(e) => return Some(format!("{path}: {e}")),
    };
    fs::write(&file, &now)
        .err()
        .map(|e| format!("{path}: the kernel answers {}", answer(&e)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::system::audit::{FindingId, Severity};
    use crate::system::tune::Class;

    fn tree() -> (tempfile::TempDir, Step) {
        let dir = tempfile::tempdir().unwrap();
        let sys = dir.path().join("proc/sys/kernel");
        fs::create_dir_all(&sys).unwrap();
        fs::write(sys.join("sched_rt_runtime_us"), "950000\n").unwrap();
        fs::write(sys.join("timer_migration"), "1\n").unwrap();
        let step = Step {
            id: FindingId::RtThrottlingOn.to_string(),
            severity: Severity::Warn,
            seen: String::new(),
            changes: vec![
                Change::Write {
                    path: "/proc/sys/kernel/sched_rt_runtime_us".into(),
                    value: "-1".into(),
                },
                Change::Write {
                    path: "/proc/sys/kernel/timer_migration".into(),
                    value: "0".into(),
                },
            ],
            class: Class::Applies,
            removes_safety_net: true,
        };
        (dir, step)
    }

    #[test]
    fn drop_reverts_and_removes_the_journal() {
        let (dir, step) = tree();
        let f = dir.path().join("proc/sys/kernel/sched_rt_runtime_us");
        {
            let mut a = Applied::new(dir.path()).unwrap();
            let seen = a.apply(&step).unwrap();
            assert_eq!(seen[0].1, "950000");
            assert_eq!(fs::read_to_string(&f).unwrap(), "-1");
            assert!(journal::path(dir.path()).exists());
        }
        assert_eq!(fs::read_to_string(&f).unwrap(), "950000");
        assert!(!journal::path(dir.path()).exists());
    }

    #[test]
    fn a_stale_journal_is_restored() {
        let (dir, step) = tree();
        let mut a = Applied::new(dir.path()).unwrap();
        a.apply(&step).unwrap();
        // A crash: nothing runs the guard's drop.
        std::mem::forget(a);
        let back = restore_stale(dir.path()).unwrap().unwrap();
        assert_eq!(back.len(), 2);
        assert!(back.iter().all(|r| r.ok));
        assert_eq!(
            fs::read_to_string(dir.path().join("proc/sys/kernel/timer_migration")).unwrap(),
            "1"
        );
        assert!(!journal::path(dir.path()).exists());
        assert!(restore_stale(dir.path()).unwrap().is_none());
    }

    #[test]
    fn a_moved_thread_is_journaled_and_moved_back_even_after_a_crash() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        crate::system::tune::thread::tests::kthread(root, 20, "khugepaged", "0-1", 0x0020_8040);
        let step = Step {
            id: FindingId::KthreadsOnMeasured.to_string(),
            changes: vec![Change::Affinity {
                pid: 20,
                comm: "khugepaged".into(),
                cpus: "0".into(),
            }],
            ..Step::sham()
        };
        {
            let mut a = Applied::new(root).unwrap();
            let seen = a.apply(&step).unwrap();
            assert_eq!(seen, vec![("pid 20".into(), "0-1".into(), "0".into())]);
        }
        assert_eq!(thread::allowed(root, 20).unwrap(), "0-1");
        assert!(!journal::path(root).exists());
        let mut a = Applied::new(root).unwrap();
        a.apply(&step).unwrap();
        std::mem::forget(a);
        let text = fs::read_to_string(journal::path(root)).unwrap();
        assert!(
            text.contains("\"entry\":\"affinity\"") && text.contains("\"start\":1020"),
            "{text}"
        );
        let back = restore_stale(root).unwrap().unwrap();
        assert!(back.iter().all(|r| r.ok), "{back:?}");
        assert_eq!(thread::allowed(root, 20).unwrap(), "0-1");
        // A pid reused by a later thread after a crash is left alone.
        let mut a = Applied::new(root).unwrap();
        a.apply(&step).unwrap();
        std::mem::forget(a);
        crate::system::tune::thread::tests::kthread(root, 20, "kworker/u4:2", "0", 0x0020_8040);
        let s = root.join("proc/20/stat");
        fs::write(
            &s,
            fs::read_to_string(&s).unwrap().replace(" 1020", " 5000"),
        )
        .unwrap();
        let back = restore_stale(root).unwrap().unwrap();
        assert_eq!(back[0].now, "exited");
        assert_eq!(thread::allowed(root, 20).unwrap(), "0");
        assert!(!journal::path(root).exists());
    }

    #[test]
    fn kept_changes_print_the_commands_that_undo_them() {
        let (dir, mut step) = tree();
        crate::system::tune::thread::tests::kthread(dir.path(), 20, "ksmd", "0-1", 0x0020_8040);
        step.changes.push(Change::Affinity {
            pid: 20,
            comm: "ksmd".into(),
            cpus: "0".into(),
        });
        let mut a = Applied::new(dir.path()).unwrap();
        a.apply(&step).unwrap();
        let undo = a.keep().unwrap();
        assert_eq!(
            undo,
            [
                "taskset -pc 0-1 20",
                "echo 1 > /proc/sys/kernel/timer_migration",
                "echo 950000 > /proc/sys/kernel/sched_rt_runtime_us",
            ]
        );
        assert_eq!(thread::allowed(dir.path(), 20).unwrap(), "0");
        assert!(!journal::path(dir.path()).exists());
    }

    #[test]
    fn a_refused_write_reverts_the_step_and_gives_the_answer() {
        let (dir, mut step) = tree();
        step.changes.push(Change::Write {
            path: "/proc/irq/36/smp_affinity_list".into(),
            value: "0".into(),
        });
        let mut a = Applied::new(dir.path()).unwrap();
        let e = a.apply(&step).unwrap_err();
        assert!(e.to_string().contains("No such file"), "{e}");
        assert_eq!(
            fs::read_to_string(dir.path().join("proc/sys/kernel/sched_rt_runtime_us")).unwrap(),
            "950000"
        );
        a.restore_all().unwrap();
        assert!(!journal::path(dir.path()).exists());
    }
}
