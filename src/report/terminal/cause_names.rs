//! Causes named alike across runs and CPUs: a task's pid differs from run to run, and a
//! per-CPU kernel thread's name holds its CPU ("kworker/3:1", "migration/3"), so that
//! `compare` and the cross-CPU views key causes by these names instead.

use crate::stats::causes::{CauseKind, quota_label};
use crate::system::counters::GroupStatDelta;

/// The kernel's own count beside a cause named a CFS quota (`stats::causes::quota_label`):
/// what `cpu.stat` of that group counted over `over` ("the run", "the watch"), its
/// throttled periods too when `periods`, and the `named_ns` named after it there, when
/// one figure is; `None` for any other cause.
pub fn quota_count_note(
    cause: &str,
    named_ns: Option<u64>,
    groups: &[GroupStatDelta],
    over: &str,
    periods: bool,
) -> Option<String> {
    let named =
        |g: &&GroupStatDelta| (g.quota.as_ref()).is_some_and(|q| cause == quota_label(q, &g.group));
    let g = groups.iter().find(named)?;
    let ms = |ns: u64| ns as f64 / 1e6;
    let beside = match named_ns {
        Some(n) => format!(", beside the {:.1} ms named its quota here", ms(n)),
        None => String::new(),
    };
    let periods = match periods {
        true => format!(
            "; {} of {} periods throttled",
            g.stat.nr_throttled, g.stat.nr_periods
        ),
        false => String::new(),
    };
    Some(format!(
        "cpu.stat: throttled {:.1} ms over {over} in {} (all its CPUs' run queues{periods}){beside}.",
        ms(g.stat.throttled_ns),
        g.group,
    ))
}

/// A task's cause without its pid: "task rustc:13225 (SCHED_OTHER nice 10)" →
/// "task rustc (SCHED_OTHER nice 10)". The pid is the digits after the last ':' that
/// is followed by digits and " (": a command name may itself hold a ':' (kworker/1:1).
pub fn without_pid(cause: &str) -> String {
    let at = (cause.match_indices(':')).map(|(i, _)| i).rfind(|&i| {
        let rest = &cause[i + 1..];
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        digits > 0 && rest[digits..].starts_with(" (")
    });
    match at {
        Some(i) => {
            let digits = cause[i + 1..]
                .bytes()
                .take_while(u8::is_ascii_digit)
                .count();
            format!("{}{}", &cause[..i], &cause[i + 1 + digits..])
        }
        None => cause.to_string(),
    }
}

/// A cause as one key across runs and threads: a task without its pid, any other cause
/// as named.
pub fn task_key(kind: CauseKind, cause: &str) -> String {
    match kind {
        CauseKind::Task => without_pid(cause),
        _ => cause.to_string(),
    }
}

/// A cause as one key across CPUs: a task without its pid, and a per-CPU kernel thread
/// ("kworker/3:1", "migration/3" on CPU 3) with its CPU written N and its worker number
/// * ("kworker/N:*", "migration/N"), so that CPUs' own threads line up.
pub fn cause_key(cpu: usize, kind: CauseKind, cause: &str) -> String {
    match kind {
        CauseKind::Task => per_cpu_key(cpu, &without_pid(cause)),
        _ => cause.to_string(),
    }
}

/// A task's cause already without its pid ("task kworker/3:1 (…)", as `compare` keys
/// it) with a per-CPU kernel thread's CPU written N, as `cause_key` does.
pub fn per_cpu_key(cpu: usize, cause: &str) -> String {
    let Some(rest) = cause.strip_prefix("task ") else {
        return cause.to_string();
    };
    let (comm, tail) = rest.split_at(rest.find(" (").unwrap_or(rest.len()));
    match per_cpu_thread(comm, cpu) {
        Some(comm) => format!("task {comm}{tail}"),
        None => cause.to_string(),
    }
}

/// A per-CPU kernel thread's name with its CPU as N: "kworker/3:1H" on CPU 3 →
/// "kworker/N:*H"; `None` for any other name.
fn per_cpu_thread(comm: &str, cpu: usize) -> Option<String> {
    let (base, rest) = comm.split_once('/')?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 || rest[..digits].parse::<usize>().ok()? != cpu {
        return None;
    }
    match &rest[digits..] {
        "" => Some(format!("{base}/N")),
        worker => {
            let n = worker.strip_prefix(':')?;
            let high = n.strip_suffix('H');
            let n = high.unwrap_or(n);
            let numbered = !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit());
            numbered.then(|| format!("{base}/N:*{}", if high.is_some() { "H" } else { "" }))
        }
    }
}

/// The causes a terminal shows of `causes` (largest first): the first `n` and the
/// unaccounted time wherever it falls; every one with `--wide`.
pub fn shown_causes<T>(causes: &[T], kind: impl Fn(&T) -> CauseKind, n: usize) -> Vec<&T> {
    let all = crate::report::terminal::table::Layout::current().wide;
    (causes.iter().enumerate())
        .filter(|(i, c)| all || *i < n || kind(c) == CauseKind::Unaccounted)
        .map(|(_, c)| c)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tasks_pid_is_dropped_and_only_its_pid() {
        assert_eq!(
            without_pid("task rustc:13225 (SCHED_OTHER nice 10)"),
            "task rustc (SCHED_OTHER nice 10)"
        );
        assert_eq!(
            without_pid("task kworker/1:1:57 (SCHED_OTHER nice 0) vmstat_update"),
            "task kworker/1:1 (SCHED_OTHER nice 0) vmstat_update"
        );
        assert_eq!(without_pid("task odd"), "task odd");
        assert_eq!(without_pid("task a:b (x)"), "task a:b (x)");
        assert_eq!(without_pid(":1 ("), " (");
    }

    #[test]
    fn per_cpu_threads_line_up_across_cpus() {
        let key = |cpu, c: &str| cause_key(cpu, CauseKind::Task, c);
        assert_eq!(
            key(1, "task kworker/1:1:156 (SCHED_OTHER nice 0) vmstat_update"),
            key(7, "task kworker/7:2:181 (SCHED_OTHER nice 0) vmstat_update"),
        );
        assert_eq!(
            key(8, "task kworker/8:0H:59 (SCHED_OTHER nice -20)"),
            "task kworker/N:*H (SCHED_OTHER nice -20)"
        );
        assert_eq!(
            key(3, "task migration/3:31 (real-time 99)"),
            "task migration/N (real-time 99)"
        );
        // Another CPU's thread, an unbound worker and a plain task keep their names.
        assert_eq!(
            key(3, "task kworker/4:1:179 (SCHED_OTHER nice 0)"),
            "task kworker/4:1 (SCHED_OTHER nice 0)"
        );
        assert_eq!(
            key(2, "task kworker/u64:2:107 (SCHED_OTHER nice 0)"),
            "task kworker/u64:2 (SCHED_OTHER nice 0)"
        );
        assert_eq!(
            key(1, "task tokio-rt-worker:226 (SCHED_OTHER nice 0)"),
            "task tokio-rt-worker (SCHED_OTHER nice 0)"
        );
        assert_eq!(
            cause_key(1, CauseKind::Softirq, "softirq SCHED"),
            "softirq SCHED"
        );
    }
}
