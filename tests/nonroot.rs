//! Issue 2, item 7: as an unprivileged user, `noise -p 50` runs at SCHED_OTHER, warns
//! once, and says why in the result's `degraded` list.

use std::os::unix::fs::PermissionsExt;

use jitterscope::engine::sched::Policy;
use jitterscope::report::{ProbeEntry, ResultFile};

use crate::util::{as_nobody, measuring, nobody_cannot_reach, skip, stderr_lines, two_cpus};

#[test]
fn unprivileged_fifo_request_degrades_to_other_and_says_so() {
    const NAME: &str = "unprivileged_fifo_request_degrades_to_other_and_says_so";
    let Some(mut nobody) = as_nobody(NAME) else {
        return;
    };
    if two_cpus().is_none() {
        return skip(NAME, "-p 50 on a single CPU is refused without --force");
    }
    let _m = measuring();
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let path = dir.path().join("nobody.json");
    let out = nobody
        .args(["noise", "-p", "50", "-D", "300ms", "-q", "-o"])
        .arg(&path)
        .output()
        .unwrap();
    if nobody_cannot_reach(NAME, &out) {
        return;
    }
    let lines = stderr_lines(&out);
    assert_eq!(out.status.code(), Some(0), "{lines:?}");
    let refusals: Vec<_> = lines
        .iter()
        .filter(|l| l.contains("SCHED_FIFO 50 was refused"))
        .collect();
    assert_eq!(refusals.len(), 1, "warned exactly once: {lines:?}");
    assert!(refusals[0].starts_with("jitterscope: warning: ") && refusals[0].contains("EPERM"));

    let r = ResultFile::read(&path).unwrap();
    assert!(!r.run.privileges.root);
    let degraded: Vec<_> = r
        .run
        .degraded
        .iter()
        .filter(|d| d.kind == "sched-refused")
        .collect();
    assert_eq!(degraded.len(), 1, "{:?}", r.run.degraded);
    assert!(degraded[0].message.contains("SCHED_OTHER"));
    for p in &r.probes {
        let ProbeEntry::Noise(n) = p else {
            panic!("a noise run holds noise entries only")
        };
        assert_eq!(
            n.thread.policy,
            Policy::Other,
            "cpu {} ran at {:?}",
            n.cpu,
            n.thread.policy
        );
        assert_eq!(
            (n.config.policy, n.config.priority),
            (Policy::Fifo, 50),
            "the request is kept"
        );
        assert!(n.thread.sched_refused.is_some());
        assert!(n.runtime_ns > 200_000_000);
    }
}
