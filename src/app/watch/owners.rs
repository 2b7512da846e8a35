//! What ran instead, named with its container: under `watch --cgroup/--container/--pod/
//! --unit`, each task among a thread's causes gets the container, pod or unit its
//! `/proc/PID/cgroup` puts it in, or `host`, so that a noisy neighbour reads as one:
//! `task hog:812 (real-time 10) (container 3f2a9c1b7d4e)`.
//!
//! The reader notes each task it sees switched in (a set insert per switch, no I/O);
//! the housekeeping loop reads each new one's `/proc/PID/cgroup` once, every pass
//! (100 ms), so the trace reader never waits on /proc. Events are fed 300 ms after they
//! happen: a task that ended before its owner was read has no cgroup left to read, and
//! is said so, never guessed.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::stats::causes::{Attribution, CauseKind};
use crate::system::cgroup::target::owner_of;
use crate::trace::event::{Event, Kind};
use crate::trace::watch::ThreadFigures;

/// What is appended to a task that ended before its cgroup was read.
const ENDED: &str = "ended: cgroup unread";

/// The owner label of `pid` now, from `/proc/PID/cgroup` (thread ids have one too).
fn owner_label(pid: u32) -> String {
    match std::fs::read_to_string(format!("/proc/{pid}/cgroup")) {
        Ok(text) => owner_of(&text).label(),
        Err(_) => ENDED.into(),
    }
}

/// `cause` with its owner appended, when it is a task's (the idle task's excepted).
fn named(cause: &str, kind: CauseKind, labels: &mut HashMap<u32, String>) -> Option<String> {
    if kind != CauseKind::Task {
        return None;
    }
    let pid = crate::report::terminal::watch::task_pid(cause).filter(|&p| p != 0)?;
    let label = labels.entry(pid).or_insert_with(|| owner_label(pid));
    Some(format!("{cause} ({label})"))
}

/// The pid of a task cause named `task NAME:PID` and nothing after (the idle task's
/// excepted).
fn pid_of(cause: &str, kind: CauseKind) -> Option<u32> {
    if kind != CauseKind::Task || cause.contains(" (") {
        return None;
    }
    crate::report::terminal::watch::task_pid(cause).filter(|&p| p != 0)
}

/// Tasks seen to run, and their owners' labels once read.
#[derive(Default)]
pub struct Owners {
    /// Seen by the reader, not yet read.
    new: Mutex<Vec<u32>>,
    labels: Mutex<HashMap<u32, String>>,
}

impl Owners {
    /// The reader's part: notes the tasks switched in among `fed` not seen before.
    pub fn ran(&self, fed: &[(usize, &[Event])], known: &mut rustc_hash::FxHashSet<u32>) {
        let mut new = Vec::new();
        for e in fed.iter().flat_map(|(_, evs)| evs.iter()) {
            if let Kind::Switch { next, .. } = e.kind
                && next.pid != 0
                && known.insert(next.pid)
            {
                new.push(next.pid);
            }
        }
        if !new.is_empty() {
            lock(&self.new).extend(new);
        }
    }

    /// The housekeeping loop's part: reads the owners of the tasks noted since.
    pub fn read_new(&self) {
        let new = std::mem::take(&mut *lock(&self.new));
        let mut labels = lock(&self.labels);
        for pid in new {
            labels.entry(pid).or_insert_with(|| owner_label(pid));
        }
    }

    /// A task cause named with its pid (`task hog:812`, `Naming::StableWithPids`) as a
    /// counter's label: the pid dropped, its owner appended (`task hog (container
    /// 3f2a9c1b7d4e)`), read now if the reader did not note it. Other causes as given.
    pub fn stable(&self, cause: &str, kind: CauseKind) -> String {
        let Some(pid) = pid_of(cause, kind) else {
            return cause.to_string();
        };
        let mut labels = lock(&self.labels);
        let label = labels.entry(pid).or_insert_with(|| owner_label(pid));
        format!("{} ({label})", Owners::without_pid(cause, kind))
    }

    /// A task cause with its pid dropped (`task hog:812` → `task hog`).
    pub fn without_pid(cause: &str, kind: CauseKind) -> String {
        match pid_of(cause, kind) {
            Some(_) => cause.rsplit_once(':').map_or(cause, |(c, _)| c).to_string(),
            None => cause.to_string(),
        }
    }

    /// Forgets every task noted and read (a monitor's memory, kept flat).
    pub fn forget(&self) {
        lock(&self.new).clear();
        lock(&self.labels).clear();
    }

    /// Appends each task cause's owner, in the cause table and in the worst delays' parts.
    pub fn name(&self, figures: &mut [ThreadFigures]) {
        let mut labels = lock(&self.labels);
        let attributions = figures.iter_mut().filter_map(|f| f.attribution.as_mut());
        for a in attributions {
            name_in(a, &mut labels);
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn name_in(a: &mut Attribution, labels: &mut HashMap<u32, String>) {
    for row in &mut a.causes {
        if let Some(n) = named(&row.cause, row.kind, labels) {
            row.cause = n;
        }
    }
    for part in a.top.iter_mut().flat_map(|g| g.parts.iter_mut()) {
        if let Some(n) = named(&part.cause, part.kind, labels) {
            part.cause = n;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_cause_gets_its_owner_and_others_are_left() {
        let me = std::process::id();
        let mut labels = HashMap::from([(812, "container 3f2a9c1b7d4e".to_string())]);
        let hog = named("task hog:812 (real-time 10)", CauseKind::Task, &mut labels);
        assert_eq!(
            hog.as_deref(),
            Some("task hog:812 (real-time 10) (container 3f2a9c1b7d4e)")
        );
        assert_eq!(named("irq 30 eth0", CauseKind::Irq, &mut labels), None);
        assert_eq!(
            named("task swapper/1:0 (idle)", CauseKind::Task, &mut labels),
            None
        );
        // This test's own process is alive: its cgroup is read, whatever it is.
        let own = named(
            &format!("task t:{me} (SCHED_OTHER nice 0)"),
            CauseKind::Task,
            &mut labels,
        );
        assert!(!own.unwrap().ends_with(&format!("({ENDED})")));
        // A pid above the kernel's limit never lived.
        let gone = named(
            "task x:4294967294 (SCHED_OTHER nice 0)",
            CauseKind::Task,
            &mut labels,
        );
        assert!(gone.unwrap().ends_with(&format!("({ENDED})")));
    }

    /// `monitor --watch-cgroup`'s names: the pid goes, the owner stays; a kworker's or
    /// an IRQ's name is left.
    #[test]
    fn stable_names_drop_the_pid_and_keep_the_owner() {
        let owners = Owners::default();
        lock(&owners.labels).insert(812, "container 3f2a9c1b7d4e".into());
        let t = CauseKind::Task;
        assert_eq!(
            owners.stable("task hog:812", t),
            "task hog (container 3f2a9c1b7d4e)"
        );
        assert_eq!(Owners::without_pid("task hog:812", t), "task hog");
        assert_eq!(
            owners.stable("task kworker vmstat_update", t),
            "task kworker vmstat_update"
        );
        assert_eq!(owners.stable("irq 30 eth0", CauseKind::Irq), "irq 30 eth0");
        owners.forget();
        assert!(lock(&owners.labels).is_empty());
    }

    /// The reader notes each task switched in once (the idle task never); the
    /// housekeeping loop reads those noted, and the label stays when the task is gone.
    #[test]
    fn tasks_seen_to_run_are_noted_once_and_read_later() {
        use crate::trace::event::{Names, Task};
        let mut names = Names::default();
        let task = |pid, names: &mut Names| Task {
            pid,
            comm: names.intern("t"),
            prio: 120,
        };
        let me = std::process::id();
        let (idle, a, b) = (
            task(0, &mut names),
            task(me, &mut names),
            task(4_294_967_294, &mut names),
        );
        let switch = |ts, prev, next| Event {
            ts,
            kind: Kind::Switch {
                prev,
                prev_state: 0,
                next,
            },
        };
        let (cpu0, cpu1) = (
            [switch(1, idle, a), switch(2, a, idle), switch(3, idle, a)],
            [switch(4, idle, b)],
        );
        let fed: [(usize, &[Event]); 2] = [(0, &cpu0), (1, &cpu1)];
        let owners = Owners::default();
        let mut known = rustc_hash::FxHashSet::default();
        owners.ran(&fed, &mut known);
        owners.ran(&fed, &mut known);
        assert_eq!(
            *lock(&owners.new),
            vec![me, 4_294_967_294],
            "each once, idle never"
        );
        owners.read_new();
        assert!(lock(&owners.new).is_empty());
        let labels = lock(&owners.labels);
        assert_eq!(labels.len(), 2);
        assert_eq!(labels[&4_294_967_294], ENDED);
        assert_ne!(
            labels[&me], ENDED,
            "this process is alive: its cgroup was read"
        );
    }
}
