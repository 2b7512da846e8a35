//! `tune --export DIR`: the steps a run kept, as files that tools already apply at boot.
//!
//! A run's settings are all reverted at its end (or left applied until the next reboot
//! with `--keep`); to keep them for good they must be written where the boot applies
//! them. Each change goes where an existing tool already applies it:
//!
//! - `jitterscope/tuned.conf`, a tuned profile: sysctls (`[sysctl]`), other /sys files
//!   (`[sysfs]`) and the PM QoS request (`[cpu] force_latency`, which tuned holds open
//!   itself, as tune does);
//! - `sysctl.d/90-jitterscope.conf`: the sysctls, for hosts without tuned;
//! - `systemd/jitterscope-tune.service` and `jitterscope-tune.sh`: what neither covers
//!   (IRQ affinity, the workqueue mask, PM QoS per CPU), as a oneshot unit;
//! - `kernel-cmdline.txt`: the boot-only fixes' fragment, never measured (tune cannot
//!   apply them at run time), for the boot loader.
//!
//! Only what was kept is exported: a run's own figures are the reason to keep it. The
//! export is pure text here; `app::tune` writes it.

use super::record::TuneEntry;
use super::{Change, Class};
use crate::system::audit::merged_option;
use crate::system::tune::experiment::Decision;

/// Where the unit expects its script (the unit names it through /bin/sh, so that
/// `systemd-analyze verify` accepts the unit before the script is installed).
pub const SCRIPT_INSTALL_PATH: &str = "/usr/local/sbin/jitterscope-tune.sh";

/// One exported file: its path below DIR and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct File {
    pub path: &'static str,
    pub text: String,
    /// The file is a script to run.
    pub executable: bool,
}

/// The kept changes, sorted by the tool that applies them.
#[derive(Debug, Default, PartialEq, Eq)]
struct Sorted {
    /// (key, value) of /proc/sys writes.
    sysctls: Vec<(String, String)>,
    /// (path, value) of /sys writes tuned's sysfs plugin applies.
    sysfs: Vec<(String, String)>,
    /// (path, value) of writes only a script makes (IRQ affinity, the workqueue mask).
    script: Vec<(String, String)>,
    /// (thread name, CPUs) of kernel threads moved: a pid lasts one boot, a name more.
    threads: Vec<(String, String)>,
    pm_qos_us: Option<i32>,
    /// (step id, fragment) of the boot-only fixes.
    boot: Vec<(String, String)>,
    kept: Vec<String>,
}

/// The sysctl key of a /proc/sys path.
pub fn sysctl_key(path: &str) -> Option<String> {
    path.strip_prefix("/proc/sys/").map(|k| k.replace('/', "."))
}

fn sort(t: &TuneEntry) -> Sorted {
    let mut s = Sorted::default();
    for run in &t.steps {
        match &run.step.class {
            Class::BootOnly { fragment } | Class::NeedsKernel { fragment, .. } => {
                s.boot.push((run.step.id.clone(), fragment.clone()));
                continue;
            }
            _ => {}
        }
        let kept = run.judgement.is_some_and(|j| j.decision == Decision::Kept);
        // The sham step changes nothing: a kept sham is a false keep, not a setting.
        if !kept || run.step.changes.is_empty() {
            continue;
        }
        s.kept.push(run.step.id.clone());
        for c in &run.step.changes {
            match c {
                Change::PmQos { value_us } => {
                    s.pm_qos_us = Some(s.pm_qos_us.map_or(*value_us, |v| v.min(*value_us)))
                }
                Change::Affinity { comm, cpus, .. } => s.threads.push((comm.clone(), cpus.clone())),
                Change::Write { path, value } => {
                    let pair = (path.clone(), value.clone());
                    if let Some(key) = sysctl_key(path) {
                        s.sysctls.push((key, value.clone()));
                    } else if path.starts_with("/sys/") && !path.contains("/workqueue/") {
                        s.sysfs.push(pair);
                    } else {
                        // /proc/irq/*: tuned's irq handling is per device name, not per
                        // IRQ; the workqueue mask must follow the isolated CPUs at boot.
                        s.script.push(pair);
                    }
                }
            }
        }
    }
    s
}

/// The files for the kept steps of `t`; empty when nothing was kept and no step is
/// boot-only.
pub fn files(t: &TuneEntry, command: &str) -> Vec<File> {
    let s = sort(t);
    let mut out = Vec::new();
    let head = |comment: &str| {
        format!(
            "{comment} Written by `{command}`.\n{comment} Kept by its measured runs: {}.\n",
            if s.kept.is_empty() {
                "none".to_string()
            } else {
                s.kept.join(", ")
            }
        )
    };
    if !s.sysctls.is_empty() || !s.sysfs.is_empty() || s.pm_qos_us.is_some() {
        let mut p = head("#");
        p.push_str("[main]\nsummary=jitterscope tune: the steps its runs kept\n");
        if let Some(us) = s.pm_qos_us {
            // tuned holds /dev/cpu_dma_latency open with this value, as tune did.
            p.push_str(&format!("\n[cpu]\nforce_latency={us}\n"));
        }
        if !s.sysctls.is_empty() {
            p.push_str("\n[sysctl]\n");
            for (k, v) in &s.sysctls {
                p.push_str(&format!("{k}={v}\n"));
            }
        }
        if !s.sysfs.is_empty() {
            p.push_str("\n[sysfs]\n");
            for (path, v) in &s.sysfs {
                p.push_str(&format!("{path}={v}\n"));
            }
        }
        out.push(File {
            path: "jitterscope/tuned.conf",
            text: p,
            executable: false,
        });
    }
    if !s.sysctls.is_empty() {
        let mut d = head("#");
        for (k, v) in &s.sysctls {
            d.push_str(&format!("{k} = {v}\n"));
        }
        out.push(File {
            path: "sysctl.d/90-jitterscope.conf",
            text: d,
            executable: false,
        });
    }
    if !s.script.is_empty() || !s.threads.is_empty() || s.pm_qos_us.is_some() {
        let mut sh = format!("#!/bin/sh\n{}", head("#"));
        sh.push_str("# A write the kernel refuses is reported, and the others still made.\nrc=0\n");
        for (path, v) in &s.script {
            sh.push_str(&format!(
                "echo {} > {path} || {{ echo \"jitterscope-tune: {path}: refused\" >&2; rc=1; }}\n",
                shell_word(v)
            ));
        }
        for (comm, cpus) in &s.threads {
            // By name among kthreadd's children: the pids of the run are this boot's only.
            sh.push_str(&format!(
                "for p in $(pgrep -P 2 -x {}); do taskset -pc {cpus} \"$p\" >/dev/null || rc=1; done\n",
                shell_word(comm)
            ));
        }
        if let Some(us) = s.pm_qos_us {
            // A oneshot cannot hold /dev/cpu_dma_latency open; the per-CPU resume
            // latency is the same request, and it stays without a process.
            let v = if us == 0 {
                "n/a".to_string()
            } else {
                us.to_string()
            };
            sh.push_str(&format!(
                "for f in /sys/devices/system/cpu/cpu[0-9]*/power/pm_qos_resume_latency_us; do\n  \
                 echo {v} > \"$f\" || rc=1\ndone\n"
            ));
        }
        sh.push_str("exit $rc\n");
        out.push(File {
            path: "jitterscope-tune.sh",
            text: sh,
            executable: true,
        });
        let mut unit = head("#");
        unit.push_str(&format!(
            "[Unit]\nDescription=jitterscope tune: kept IRQ affinity, workqueue and PM QoS \
             settings\n# After the devices' IRQs exist and before the measured application.\n\
             After=systemd-udev-settle.service\n\n\
             [Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart=/bin/sh {SCRIPT_INSTALL_PATH}\n\n\
             [Install]\nWantedBy=multi-user.target\n"
        ));
        out.push(File {
            path: "systemd/jitterscope-tune.service",
            text: unit,
            executable: false,
        });
    }
    if !s.boot.is_empty() {
        // One word per option: the kernel takes one isolcpus (and one nohz_full, one
        // rcu_nocbs), so two steps' lists become one.
        let mut line: Vec<String> = Vec::new();
        for (_, f) in &s.boot {
            for w in f.split_whitespace() {
                let same_key = line.iter().position(|l| merged_option(l, w).is_some());
                match same_key {
                    Some(i) => line[i] = merged_option(&line[i], w).unwrap_or_default(),
                    None if !line.iter().any(|l| l == w) => line.push(w.to_string()),
                    None => {}
                }
            }
        }
        out.push(File {
            path: "kernel-cmdline.txt",
            text: format!("{}\n", line.join(" ")),
            executable: false,
        });
    }
    if !out.is_empty() {
        out.push(File {
            path: "README.txt",
            text: readme(&s, &out),
            executable: false,
        });
    }
    out
}

fn readme(s: &Sorted, files: &[File]) -> String {
    let has = |p: &str| files.iter().any(|f| f.path == p);
    let mut r = String::from(
        "jitterscope tune --export: the kept steps, for the boot to apply.\n\
         Use tuned OR sysctl.d for the sysctls, not both.\n\n",
    );
    if has("jitterscope/tuned.conf") {
        r.push_str(
            "tuned:    cp -r jitterscope /etc/tuned/ && tuned-adm profile jitterscope\n\
             \x20         (or add include=jitterscope to your own profile)\n",
        );
    }
    if has("sysctl.d/90-jitterscope.conf") {
        r.push_str("sysctl.d: cp sysctl.d/90-jitterscope.conf /etc/sysctl.d/ && sysctl --system\n");
    }
    if has("jitterscope-tune.sh") {
        r.push_str(&format!(
            "unit:     install -m 755 jitterscope-tune.sh {SCRIPT_INSTALL_PATH} &&\n\
             \x20         cp systemd/jitterscope-tune.service /etc/systemd/system/ &&\n\
             \x20         systemctl daemon-reload && systemctl enable --now jitterscope-tune\n"
        ));
    }
    if has("kernel-cmdline.txt") {
        let ids: Vec<&str> = s.boot.iter().map(|(id, _)| id.as_str()).collect();
        r.push_str(&format!(
            "boot:     add kernel-cmdline.txt's line to GRUB_CMDLINE_LINUX in /etc/default/grub,\n\
             \x20         then update-grub (or grub2-mkconfig) and reboot. Not measured: tune\n\
             \x20         cannot apply boot-only fixes ({}).\n",
            ids.join(", ")
        ));
    }
    r
}

/// `v` as one shell word: the values are numbers, CPU lists and masks, quoted if not.
fn shell_word(v: &str) -> String {
    if v.chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, ',' | '-' | '.' | '/'))
    {
        v.to_string()
    } else {
        format!("'{}'", v.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::system::audit::Severity;
    use crate::system::tune::Step;
    use crate::system::tune::experiment::Judgement;
    use crate::system::tune::record::{Metric, StepRun};

    fn run(id: &str, changes: Vec<Change>, class: Class, d: Option<Decision>) -> StepRun {
        StepRun {
            step: Step {
                id: id.into(),
                severity: Severity::Warn,
                seen: String::new(),
                changes,
                class,
                removes_safety_net: false,
            },
            values: Vec::new(),
            blocks: Vec::new(),
            judgement: d.map(|decision| Judgement {
                decision,
                p: 0.002,
                exact: true,
                shift: -1.0,
                ci_low: -2.0,
                ci_high: -0.5,
                baseline_median: 2.0,
                step_median: 1.0,
                alpha: 0.01,
                pairs: 8,
                better: 8,
                worse: 0,
                look: 1,
                paired: true,
            }),
            share_before_pct: None,
            share_after_pct: None,
            timing: None,
            metric: None,
        }
    }

    fn w(path: &str, value: &str) -> Change {
        Change::Write {
            path: path.into(),
            value: value.into(),
        }
    }

    fn entry(steps: Vec<StepRun>) -> TuneEntry {
        TuneEntry {
            probe: "noise".into(),
            metric: Metric::Max,
            block_ns: 1_000_000_000,
            pairs: 6,
            max_pairs: 18,
            rest_ns: 0,
            alpha: 0.01,
            steps,
            staircase: Vec::new(),
            restored: Vec::new(),
            kept_applied: false,
        }
    }

    #[test]
    fn each_kept_change_goes_to_the_tool_that_applies_it() {
        let t = entry(vec![
            run(
                "rt-throttling-on",
                vec![w("/proc/sys/kernel/sched_rt_runtime_us", "-1")],
                Class::Applies,
                Some(Decision::Kept),
            ),
            run(
                "timer-migration-on",
                vec![w("/proc/sys/kernel/timer_migration", "0")],
                Class::Applies,
                Some(Decision::Inconclusive),
            ),
            run(
                "ksm-on",
                vec![w("/sys/kernel/mm/ksm/run", "0")],
                Class::Applies,
                Some(Decision::Kept),
            ),
            run(
                "irq-on-measured",
                vec![
                    w("/proc/irq/24/smp_affinity_list", "0"),
                    w("/sys/devices/virtual/workqueue/cpumask", "1"),
                ],
                Class::Applies,
                Some(Decision::Kept),
            ),
            run(
                "idle-states-deep",
                vec![Change::PmQos { value_us: 0 }],
                Class::Applies,
                Some(Decision::Kept),
            ),
            run(
                "nohz-full-off",
                Vec::new(),
                Class::BootOnly {
                    fragment: "nohz_full=1 rcu_nocbs=1".into(),
                },
                None,
            ),
            run("sham", Vec::new(), Class::Applies, Some(Decision::Kept)),
        ]);
        let f = files(&t, "jitterscope tune --export out");
        let get = |p: &str| &f.iter().find(|x| x.path == p).unwrap().text;
        let tuned = get("jitterscope/tuned.conf");
        assert!(
            tuned.contains("[sysctl]\nkernel.sched_rt_runtime_us=-1\n"),
            "{tuned}"
        );
        assert!(
            tuned.contains("[sysfs]\n/sys/kernel/mm/ksm/run=0\n"),
            "{tuned}"
        );
        assert!(tuned.contains("[cpu]\nforce_latency=0\n"), "{tuned}");
        assert!(!tuned.contains("timer_migration"), "not kept: {tuned}");
        assert!(!tuned.contains("sham"), "{tuned}");
        let d = get("sysctl.d/90-jitterscope.conf");
        assert!(d.ends_with("kernel.sched_rt_runtime_us = -1\n"), "{d}");
        let sh = get("jitterscope-tune.sh");
        assert!(
            sh.contains("echo 0 > /proc/irq/24/smp_affinity_list"),
            "{sh}"
        );
        assert!(
            sh.contains("echo 1 > /sys/devices/virtual/workqueue/cpumask"),
            "{sh}"
        );
        assert!(sh.contains("echo n/a > \"$f\""), "{sh}");
        assert!(get("systemd/jitterscope-tune.service").contains("Type=oneshot"));
        assert_eq!(get("kernel-cmdline.txt"), "nohz_full=1 rcu_nocbs=1\n");
        assert!(get("README.txt").contains("nohz-full-off"));
    }

    #[test]
    fn kept_thread_moves_are_exported_by_name() {
        let moved = |pid, comm: &str| Change::Affinity {
            pid,
            comm: comm.into(),
            cpus: "0".into(),
        };
        let changes = vec![
            moved(15, "rcu_preempt"),
            moved(16, "rcu_exp_par_gp_kthread_worker/0"),
        ];
        let t = entry(vec![run(
            "kthreads-on-measured",
            changes,
            Class::Applies,
            Some(Decision::Kept),
        )]);
        let f = files(&t, "jitterscope tune");
        let sh = &f
            .iter()
            .find(|f| f.path == "jitterscope-tune.sh")
            .unwrap()
            .text;
        assert!(
            sh.contains("for p in $(pgrep -P 2 -x 'rcu_preempt'); do taskset -pc 0 \"$p\" >/dev/null || rc=1; done\n")
                && sh.contains("pgrep -P 2 -x 'rcu_exp_par_gp_kthread_worker/0')"),
            "{sh}"
        );
        assert!(
            f.iter()
                .any(|f| f.path == "systemd/jitterscope-tune.service")
        );
    }

    #[test]
    fn nothing_kept_exports_nothing() {
        let t = entry(vec![run(
            "rt-throttling-on",
            vec![w("/proc/sys/kernel/sched_rt_runtime_us", "-1")],
            Class::Applies,
            Some(Decision::Inconclusive),
        )]);
        assert!(files(&t, "x").is_empty());
        assert_eq!(shell_word("0-1,3"), "0-1,3");
        assert_eq!(shell_word("a b"), "'a b'");
    }
}
