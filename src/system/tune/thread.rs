//! Kernel threads' CPU affinity, for the kthread step.
//!
//! On the live host a thread is moved with sched_setaffinity and its mask read back from
//! `/proc/<pid>/status`. In a recorded tree there is no kernel: the `Cpus_allowed_list`
//! line of the tree's status file stands in for the mask, and a thread flagged
//! PF_NO_SETAFFINITY gets the EINVAL the kernel would give, so that classification,
//! journaling and restoration are tested on trees as the file steps are.

use std::io;
use std::path::Path;

use rustix::process::Pid;
use rustix::thread::{CpuSet, sched_setaffinity};

use super::under;
use crate::engine::cpu::CpuList;
use crate::engine::errno::answer;

/// PF_NO_SETAFFINITY: the kernel refuses sched_setaffinity for this thread.
const PF_NO_SETAFFINITY: u64 = 0x0400_0000;

fn live(root: &Path) -> bool {
    root == Path::new("/")
}

fn status(root: &Path, pid: u32) -> io::Result<String> {
    std::fs::read_to_string(under(root, &format!("/proc/{pid}/status")))
}

/// The fields of `/proc/<pid>/stat` after the comm (which may hold spaces).
fn stat_fields(root: &Path, pid: u32) -> io::Result<Vec<String>> {
    let stat = std::fs::read_to_string(under(root, &format!("/proc/{pid}/stat")))?;
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    Ok(rest.split_whitespace().map(str::to_string).collect())
}

/// The thread's allowed CPUs, as the kernel lists them.
pub fn allowed(root: &Path, pid: u32) -> io::Result<String> {
    let text = status(root, pid)?;
    text.lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .map(|v| v.trim().to_string())
        .ok_or_else(|| io::Error::other(format!("/proc/{pid}/status has no Cpus_allowed_list")))
}

/// The thread's name ("" when it has exited).
pub fn comm(root: &Path, pid: u32) -> String {
    std::fs::read_to_string(under(root, &format!("/proc/{pid}/comm")))
        .map(|c| c.trim().to_string())
        .unwrap_or_default()
}

/// The thread's start time (field 22 of stat): with the pid it names the thread, so a
/// restore after a crash never moves a later thread that reuses the pid.
pub fn start_time(root: &Path, pid: u32) -> Option<u64> {
    stat_fields(root, pid).ok()?.get(19)?.parse().ok()
}

fn flags(root: &Path, pid: u32) -> u64 {
    stat_fields(root, pid)
        .ok()
        .and_then(|f| f.get(6)?.parse().ok())
        .unwrap_or(0)
}

/// Sets the thread's allowed CPUs to `cpus` (a kernel CPU list).
pub fn set(root: &Path, pid: u32, cpus: &str) -> io::Result<()> {
    let list = CpuList::parse_kernel(cpus).map_err(|e| io::Error::other(e.to_string()))?;
    if live(root) {
        let mut set = CpuSet::new();
        list.cpus().iter().for_each(|c| set.set(*c));
        let pid =
            Pid::from_raw(pid as i32).ok_or_else(|| io::Error::from_raw_os_error(libc::ESRCH))?;
        return sched_setaffinity(Some(pid), &set).map_err(io::Error::from);
    }
    tree_check(root, pid)?;
    let text = status(root, pid)?;
    let out: Vec<String> = text
        .lines()
        .map(|l| match l.strip_prefix("Cpus_allowed_list:") {
            Some(_) => format!("Cpus_allowed_list:\t{list}"),
            None => l.to_string(),
        })
        .collect();
    std::fs::write(
        under(root, &format!("/proc/{pid}/status")),
        out.join("\n") + "\n",
    )
}

/// What the kernel would answer in a tree: EINVAL for PF_NO_SETAFFINITY.
fn tree_check(root: &Path, pid: u32) -> io::Result<()> {
    match flags(root, pid) & PF_NO_SETAFFINITY {
        0 => Ok(()),
        _ => Err(io::Error::from_raw_os_error(libc::EINVAL)),
    }
}

/// Whether the kernel lets the thread's allowed CPUs be set (no PF_NO_SETAFFINITY, as a
/// per-CPU kthread has).
pub fn settable(root: &Path, pid: u32) -> bool {
    flags(root, pid) & PF_NO_SETAFFINITY == 0
}

/// Whether two kernel CPU lists name the same CPUs ("0-1" and "0,1").
pub fn same(a: &str, b: &str) -> bool {
    matches!((CpuList::parse_kernel(a), CpuList::parse_kernel(b)), (Ok(x), Ok(y)) if x == y)
}

/// The kernel's answer when it refuses to move the thread, asked by setting the mask it
/// already has (which changes nothing where it is accepted); `None` when it accepts.
/// EINVAL for a per-CPU kthread (PF_NO_SETAFFINITY), ESRCH for one that has exited.
pub fn refusal(root: &Path, pid: u32) -> Option<String> {
    let now = match allowed(root, pid) {
        Ok(n) => n,
        Err(e) => return Some(format!("pid {pid}: {}", answer(&e))),
    };
    // A tree is only read here: the dry run of a recorded tree changes no file of it.
    let asked = if live(root) {
        set(root, pid, &now)
    } else {
        tree_check(root, pid)
    };
    asked
        .err()
        .map(|e| format!("pid {pid}: the kernel answers {}", answer(&e)))
}

#[cfg(test)]
pub mod tests {
    use super::*;

    /// A kernel thread in a tree: status and stat, with `flags`.
    pub fn kthread(root: &Path, pid: u32, comm: &str, cpus: &str, flags: u64) {
        let dir = under(root, &format!("/proc/{pid}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("status"),
            format!("Name:\t{comm}\nPPid:\t2\nCpus_allowed_list:\t{cpus}\n"),
        )
        .unwrap();
        std::fs::write(dir.join("comm"), format!("{comm}\n")).unwrap();
        // pid (comm) state ppid pgrp session tty tpgid flags … starttime (field 22).
        let mut fields = vec!["S", "2", "0", "0", "0", "-1"]
            .into_iter()
            .map(String::from)
            .collect::<Vec<_>>();
        fields.push(flags.to_string());
        fields.extend((0..12).map(|_| "0".to_string()));
        fields.push(format!("{}", 1000 + pid));
        std::fs::write(
            dir.join("stat"),
            format!("{pid} ({comm}) {}\n", fields.join(" ")),
        )
        .unwrap();
    }

    #[test]
    fn a_tree_thread_moves_and_a_per_cpu_one_refuses_with_einval() {
        let dir = tempfile::tempdir().unwrap();
        kthread(dir.path(), 20, "khugepaged", "0-1", 0x0020_8040);
        kthread(dir.path(), 21, "cpuhp/1", "1", 0x0420_8040);
        assert_eq!(start_time(dir.path(), 20), Some(1020));
        assert_eq!(refusal(dir.path(), 20), None);
        set(dir.path(), 20, "0").unwrap();
        assert_eq!(allowed(dir.path(), 20).unwrap(), "0");
        let r = refusal(dir.path(), 21).unwrap();
        assert!(r.contains("EINVAL (Invalid argument)"), "{r}");
        let gone = refusal(dir.path(), 22).unwrap();
        assert!(gone.contains("ENOENT"), "{gone}");
        assert!(same("0,1", "0-1") && !same("0", "0-1"));
    }
}
