//! Issue 7: `jitterscope audit`. Every check is run against fixture trees (a small /proc,
//! /sys and /etc under a temporary directory, read through `--root`): a host tuned for
//! latency, an untuned one, one whose isolation settings contradict each other, one with
//! garbage in its files and an empty one; the exact ids and severities are asserted.
//! The binary is run on fixtures (JSON and table), with bad input, and as user 65534 on
//! the real host, where what it cannot read must be marked, not left out.

use std::fs;
use std::path::Path;

use jitterscope::engine::cpu::CpuList;
use jitterscope::system::audit::{Finding, Host, Severity, audit};
use tempfile::TempDir;

use crate::util::{as_nobody, jitterscope, nobody_cannot_reach, stderr_lines};

use Severity::{Bad, Info, Ok, Warn};

/// Writes `text` to `rel` under `root`, creating the directories.
fn put(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
    fs::write(path, format!("{text}\n")).expect("write");
}

/// A four-CPU host (0-3) tuned for measuring CPUs 1-3, or the opposite.
fn fixture(tuned: bool) -> TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let r = dir.path();
    let pick = |good: &'static str, bad: &'static str| if tuned { good } else { bad };
    let cpu = "sys/devices/system/cpu";
    put(r, &format!("{cpu}/online"), "0-3");
    put(
        r,
        "proc/cmdline",
        pick(
            "ro quiet isolcpus=1-3 nohz_full=1-3 rcu_nocbs=1-3 tsc=reliable",
            "ro quiet",
        ),
    );
    put(r, &format!("{cpu}/isolated"), pick("1-3", "(null)"));
    put(r, &format!("{cpu}/nohz_full"), pick("1-3", "(null)"));
    irq_files(r, tuned);
    put(r, "proc/1/comm", "systemd");
    put(
        r,
        "proc/1/status",
        "Name:\tsystemd\nPPid:\t0\nCpus_allowed_list:\t0",
    );
    put(r, "proc/15/comm", "rcu_preempt");
    put(
        r,
        "proc/15/status",
        pick(
            "Name:\trcu_preempt\nPPid:\t2\nCpus_allowed_list:\t0",
            "Name:\trcu_preempt\nPPid:\t2\nCpus_allowed_list:\t0-3",
        ),
    );
    put(r, "proc/30/comm", "kworker/1:0");
    put(
        r,
        "proc/30/status",
        "Name:\tkworker/1:0\nPPid:\t2\nCpus_allowed_list:\t1",
    );
    if !tuned {
        put(r, "proc/900/comm", "irqbalance");
        put(
            r,
            "proc/900/status",
            "Name:\tirqbalance\nPPid:\t1\nCpus_allowed_list:\t0-3",
        );
    }
    for n in 0..4 {
        power_files(r, n, tuned);
    }
    put(r, &format!("{cpu}/intel_pstate/no_turbo"), pick("1", "0"));
    put(r, &format!("{cpu}/smt/active"), pick("0", "1"));
    let thp = "sys/kernel/mm/transparent_hugepage";
    put(
        r,
        &format!("{thp}/enabled"),
        pick("always madvise [never]", "[always] madvise never"),
    );
    put(
        r,
        &format!("{thp}/defrag"),
        pick(
            "always defer defer+madvise [madvise] never",
            "[always] defer defer+madvise madvise never",
        ),
    );
    let swaps = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority";
    put(
        r,
        "proc/swaps",
        &if tuned {
            swaps.to_string()
        } else {
            format!("{swaps}\n/dev/sda2 partition 2097148 0 -2")
        },
    );
    let sys = "proc/sys";
    put(r, &format!("{sys}/vm/stat_interval"), pick("10", "1"));
    put(r, &format!("{sys}/kernel/numa_balancing"), pick("0", "1"));
    put(
        r,
        &format!("{sys}/kernel/sched_rt_runtime_us"),
        pick("-1", "950000"),
    );
    put(r, &format!("{sys}/kernel/timer_migration"), pick("0", "1"));
    put(r, &format!("{sys}/kernel/nmi_watchdog"), pick("0", "1"));
    put(r, &format!("{sys}/kernel/watchdog"), pick("0", "1"));
    put(r, &format!("{sys}/kernel/watchdog_cpumask"), "0-3");
    put(
        r,
        "proc/version",
        "Linux version 6.8.0 (gcc) #1 SMP PREEMPT_DYNAMIC Mon Jan 1 00:00:00 UTC 2024",
    );
    put(
        r,
        "sys/kernel/debug/sched/preempt",
        pick("none voluntary (full)", "none (voluntary) full"),
    );
    put(
        r,
        "sys/devices/system/clocksource/clocksource0/current_clocksource",
        pick("tsc", "hpet"),
    );
    let flags = pick("fpu tsc constant_tsc nonstop_tsc", "fpu tsc hypervisor");
    put(
        r,
        "proc/cpuinfo",
        &format!("processor\t: 0\nflags\t\t: {flags}\n"),
    );
    let steal = pick("0", "1539");
    let stat: String = (0..4)
        .map(|n| format!("cpu{n} 100 0 50 1000 3 0 2 {steal} 0 0\n"))
        .collect();
    put(
        r,
        "proc/stat",
        &format!("cpu 400 0 200 4000 12 0 8 0 0 0\n{stat}intr 0"),
    );
    let vuln = pick("Not affected", "Mitigation: Retpolines");
    put(r, &format!("{cpu}/vulnerabilities/spectre_v2"), vuln);
    put(
        r,
        &format!("{cpu}/vulnerabilities/meltdown"),
        "Not affected",
    );
    put(r, "sys/devices/virtual/workqueue/cpumask", pick("1", "f"));
    put(
        r,
        "sys/devices/virtual/workqueue/writeback/cpumask",
        pick("1", "f"),
    );
    put(
        r,
        "sys/devices/virtual/workqueue/blkcg_punt_bio/cpumask",
        pick("1", "f"),
    );
    put(r, "sys/kernel/mm/ksm/run", pick("0", "1"));
    put(r, "sys/kernel/mm/damon/admin/kdamonds/nr_kdamonds", "1");
    put(
        r,
        "sys/kernel/mm/damon/admin/kdamonds/0/state",
        pick("off", "on"),
    );
    put(
        r,
        "etc/tuned/active_profile",
        pick("cpu-partitioning", "balanced"),
    );
    dir
}

/// IRQ 24 delivered to CPU 1 when untuned, IRQ 25 delivered to CPU 0 but allowed on all.
fn irq_files(r: &Path, tuned: bool) {
    let (aff24, eff24, aff25) = if tuned {
        ("0", "0", "0")
    } else {
        ("0-3", "1", "0-3")
    };
    for (irq, aff, eff) in [("24", aff24, eff24), ("25", aff25, "0")] {
        put(r, &format!("proc/irq/{irq}/smp_affinity_list"), aff);
        put(r, &format!("proc/irq/{irq}/effective_affinity_list"), eff);
    }
    put(r, "proc/irq/default_smp_affinity", "f");
    put(
        r,
        "proc/interrupts",
        "     CPU0 CPU1 CPU2 CPU3\n 24:  5 7 0 0  IO-APIC  5-edge  eth0\n 25:  1 0 0 0  IO-APIC  6-edge  nvme0q0\nNMI: 0 0 0 0 Non-maskable interrupts",
    );
}

/// cpufreq and three idle states (POLL, C1 at 1 µs, C6 at 133 µs, disabled when tuned).
fn power_files(r: &Path, n: usize, tuned: bool) {
    let cpu = format!("sys/devices/system/cpu/cpu{n}");
    put(
        r,
        &format!("{cpu}/cpufreq/scaling_governor"),
        if tuned { "performance" } else { "powersave" },
    );
    put(r, &format!("{cpu}/cpufreq/scaling_driver"), "intel_pstate");
    for (k, name, lat, off) in [
        (0, "POLL", "0", "0"),
        (1, "C1", "1", "0"),
        (2, "C6", "133", if tuned { "1" } else { "0" }),
    ] {
        let s = format!("{cpu}/cpuidle/state{k}");
        put(r, &format!("{s}/name"), name);
        put(r, &format!("{s}/latency"), lat);
        put(r, &format!("{s}/disable"), off);
    }
}

fn run_audit(root: &Path) -> Vec<Finding> {
    let online = CpuList::parse_kernel("0-3").expect("list");
    let measured = CpuList::parse_kernel("1-3").expect("list");
    audit(&Host::new(root, measured, &online))
}

fn ids(findings: &[Finding]) -> Vec<(String, Severity)> {
    findings
        .iter()
        .map(|f| (f.id.to_string(), f.severity))
        .collect()
}

/// Each (id, severity) is among the findings.
fn has_all(f: &[Finding], want: &[(&str, Severity)]) {
    let got = ids(f);
    for (id, sev) in want {
        assert!(
            got.iter().any(|(g, s)| g == id && s == sev),
            "{id} ({sev}) not in {got:?}"
        );
    }
}

/// Every finding names its value and why; every finding that is not ok has a fix.
fn assert_complete(findings: &[Finding]) {
    for f in findings {
        assert!(!f.value.is_empty() && !f.why.is_empty(), "{f:?}");
        assert!(f.severity <= Info || !f.fix.is_empty(), "no fix: {f:?}");
    }
}

#[test]
fn audit_of_a_tuned_host_is_all_ok() {
    let dir = fixture(true);
    let f = run_audit(dir.path());
    assert_complete(&f);
    for x in &f {
        assert!(x.severity <= Info, "{x:?}");
    }
    has_all(
        &f,
        &[
            ("isolated-ok", Ok),
            ("nohz-full-ok", Ok),
            ("rcu-nocbs-ok", Ok),
            ("irq-effective-ok", Ok),
            ("irq-affinity-ok", Ok),
            ("irqbalance-not-running", Ok),
            ("governor-performance", Ok),
            ("turbo-off", Ok),
            ("idle-states-shallow", Ok),
            ("smt-off", Ok),
            ("thp-never", Ok),
            ("thp-defrag-ok", Ok),
            ("swap-off", Ok),
            ("stat-interval-ok", Ok),
            ("numa-balancing-off", Ok),
            ("rt-throttling-off", Ok),
            ("preempt-full", Ok),
            ("timer-migration-off", Ok),
            ("nmi-watchdog-off", Ok),
            ("soft-watchdog-off", Ok),
            ("clocksource-ok", Ok),
            ("tsc-invariant", Ok),
            ("tsc-reliable-set", Ok),
            ("bare-metal", Ok),
            ("steal-none", Ok),
            ("mitigations-none", Ok),
            ("workqueue-ok", Ok),
            ("kthreads-ok", Ok),
            ("tuned-latency-profile", Ok),
        ],
    );
}

#[test]
fn audit_of_an_untuned_host_flags_every_check_with_its_fix() {
    let dir = fixture(false);
    let f = run_audit(dir.path());
    assert_complete(&f);
    has_all(
        &f,
        &[
            ("isolated-missing", Warn),
            ("nohz-full-missing", Warn),
            ("rcu-nocbs-missing", Warn),
            ("irq-on-measured-cpus", Bad),
            ("irq-affinity-includes-measured", Warn),
            ("irqbalance-running", Warn),
            ("governor-not-performance", Warn),
            ("turbo-on", Warn),
            ("idle-states-deep", Warn),
            ("smt-active", Warn),
            ("thp-always", Warn),
            ("thp-defrag-always", Warn),
            ("swap-on", Warn),
            ("stat-interval-short", Warn),
            ("numa-balancing-on", Warn),
            ("rt-throttling-on", Warn),
            ("preempt-limited", Warn),
            ("timer-migration-on", Warn),
            ("nmi-watchdog-on", Warn),
            ("soft-watchdog-on", Warn),
            ("clocksource-slow", Bad),
            ("tsc-not-invariant", Warn),
            ("tsc-reliable-unset", Warn),
            ("hypervisor-present", Info),
            ("steal-time", Warn),
            ("mitigations-on", Info),
            ("workqueue-on-measured", Warn),
            ("kthreads-on-measured", Warn),
            ("tuned-other-profile", Warn),
        ],
    );
    let get = |id: &str| f.iter().find(|x| x.id == id).expect(id);
    // The fixes are exact: the measured CPUs on the command line, the housekeeping CPU for
    // IRQs, threads and the workqueue mask.
    // A guest with no boot loader: its host sets the command line; no kernel config in
    // this fixture, so the option is marked unchecked.
    assert_eq!(
        get("isolated-missing").fix,
        "at boot: isolcpus=1-3 (set by this VM's host (Firecracker boot_args, QEMU -append): \
         change it there; not checked: no kernel config to read)"
    );
    // The count is what fired on the measured CPUs (7 on CPU 1; CPU 0's 5 are not).
    assert_eq!(get("irq-on-measured-cpus").value, "IRQ 24 (eth0) ×7");
    assert!(
        get("irq-on-measured-cpus")
            .fix
            .starts_with("now: for i in 24; do echo 0 > /proc/irq/$i/smp_affinity_list; done")
    );
    // IRQ 25 never fired on a measured CPU, and is not delivered there: a warning only
    // because it may move there.
    assert_eq!(
        get("irq-affinity-includes-measured").value,
        "IRQ 25 (nvme0q0) ×0"
    );
    assert_eq!(
        get("governor-not-performance").fix,
        "now: for c in cpu1 cpu2 cpu3; do echo performance > \
         /sys/devices/system/cpu/$c/cpufreq/scaling_governor; done"
    );
    assert_eq!(
        get("turbo-on").fix,
        "now: echo 1 > /sys/devices/system/cpu/intel_pstate/no_turbo"
    );
    assert!(get("idle-states-deep").value.contains("cpu1 C6 (133 µs)"));
    assert!(
        get("idle-states-deep")
            .fix
            .starts_with("now: echo 1 > /sys/devices/system/cpu/cpu1/cpuidle/state2/disable;")
    );
    assert!(
        get("thp-always")
            .fix
            .starts_with("now: echo never > /sys/kernel/mm/transparent_hugepage/enabled")
    );
    assert_eq!(get("swap-on").value, "/dev/sda2");
    assert!(
        get("nmi-watchdog-on")
            .fix
            .starts_with("now: sysctl -w kernel.nmi_watchdog=0; at boot: nmi_watchdog=0 (")
    );
    // 1539 of 1155 + 1539 ticks: the guest columns are not counted twice.
    assert!(
        get("steal-time")
            .value
            .starts_with("cpu1: 1539 ticks (57.13 % since boot)"),
        "{}",
        get("steal-time").value
    );
    assert_eq!(
        get("workqueue-on-measured").fix,
        "now: echo 1 > /sys/devices/virtual/workqueue/cpumask"
    );
    assert!(
        get("kthreads-on-measured")
            .value
            .contains("rcu_preempt (15: 0-3)")
    );
    assert!(
        get("kthreads-on-measured").fix.starts_with(
            "now: for p in 15; do if [ -d /proc/$p ]; then taskset -pc 0 $p; fi; done"
        )
    );
}

#[test]
fn audit_flags_isolation_settings_that_contradict_each_other() {
    let dir = fixture(true);
    let r = dir.path();
    put(
        r,
        "proc/cmdline",
        "isolcpus=domain,managed_irq,1-3 nohz_full=2-3 tsc=reliable",
    );
    put(r, "sys/devices/system/cpu/isolated", "1-2");
    put(r, "sys/devices/system/cpu/nohz_full", "2-3");
    let f = run_audit(r);
    has_all(
        &f,
        &[
            ("isolated-partial", Warn),
            ("nohz-full-partial", Warn),
            ("rcu-nocbs-missing", Warn),
            ("nohz-full-without-rcu-nocbs", Warn),
            ("isolated-not-nohz-full", Warn),
            ("isolcpus-not-in-force", Bad),
        ],
    );
}

#[test]
fn audit_marks_garbage_as_unparseable_without_panicking() {
    let dir = fixture(true);
    let r = dir.path();
    put(r, "proc/sys/vm/stat_interval", "ten");
    put(
        r,
        "sys/kernel/mm/transparent_hugepage/enabled",
        "always madvise never",
    );
    put(r, "proc/stat", "cpu1 1 2 x");
    put(r, "sys/devices/virtual/workqueue/cpumask", "zz");
    put(r, "sys/devices/system/cpu/nohz_full", "1-");
    put(r, "sys/devices/system/cpu/cpu2/cpuidle/state1/latency", "");
    put(
        r,
        "proc/cmdline",
        "isolcpus=1-x rcu_nocbs=1-3 nohz_full=1-3",
    );
    let f = run_audit(r);
    for id in [
        "stat-interval-unparseable",
        "thp-unparseable",
        "steal-unparseable",
        "workqueue-unparseable",
        "nohz-full-unparseable",
        "idle-states-unparseable",
        "isolcpus-unparseable",
    ] {
        let found = f
            .iter()
            .find(|x| x.id == id)
            .unwrap_or_else(|| panic!("{id} in {:?}", ids(&f)));
        assert_eq!(found.severity, Info);
        assert!(found.value.starts_with("unparseable: "), "{found:?}");
    }
}

#[test]
fn audit_of_an_empty_tree_marks_every_check_unreadable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = run_audit(dir.path());
    assert!(f.len() >= 20, "{:?}", ids(&f));
    for x in &f {
        assert_eq!(x.severity, Info, "{x:?}");
        // No cpufreq directory reads as "no cpufreq driver", which is info too.
        let marked =
            x.value.starts_with("unreadable: ") || x.id == "tuned-absent" || x.id == "cpufreq-none";
        assert!(marked, "{x:?}");
    }
}

#[test]
fn audit_json_from_a_root_lists_the_findings() {
    let dir = fixture(false);
    let root = dir.path().to_str().expect("utf-8");
    let out = jitterscope(&["audit", "--root", root, "--json"]);
    assert_eq!(out.status.code(), Some(0), "{:?}", stderr_lines(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(
        v["measured"], "1-3",
        "the lowest CPU is kept for housekeeping"
    );
    assert_eq!(v["housekeeping"], "0");
    let findings = v["findings"].as_array().expect("an array");
    let expected = run_audit(dir.path());
    assert_eq!(findings.len(), expected.len());
    for (j, f) in findings.iter().zip(&expected) {
        assert_eq!(j["id"], f.id.to_string());
        assert_eq!(
            j["severity"],
            serde_json::to_value(f.severity).expect("json")
        );
        for key in ["area", "value", "why", "fix"] {
            assert!(j[key].is_string(), "{key} in {j}");
        }
    }
}

#[test]
fn audit_table_groups_findings_by_area() {
    let dir = fixture(false);
    let root = dir.path().to_str().expect("utf-8");
    let out = jitterscope(&["audit", "--root", root, "-a", "2"]);
    assert_eq!(out.status.code(), Some(0), "{:?}", stderr_lines(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("measured CPUs 2 (housekeeping: 0-1,3)"),
        "{text}"
    );
    // IRQ 24 is delivered to CPU 1 and allowed on all: with -a 2 it may move there.
    for part in [
        "isolation and ticks",
        "interrupts",
        "power",
        "memory",
        "watchdogs",
        "irq-affinity-includes-measured",
        "idle-states-deep",
        "sysctl -w vm.stat_interval=10",
    ] {
        assert!(text.contains(part), "{part:?} missing from\n{text}");
    }
    assert!(!text.contains("irq-on-measured-cpus"), "{text}");
}

#[test]
fn audit_bad_input_is_one_line_and_exit_2() {
    let dir = fixture(true);
    let root = dir.path().to_str().expect("utf-8");
    for args in [
        vec!["audit", "--root", "/nonexistent/jitterscope-root"],
        vec!["audit", "--root", root, "-a", "1-x"],
        vec!["audit", "--root", root, "-a", "7"],
    ] {
        let out = jitterscope(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let lines = stderr_lines(&out);
        assert_eq!(lines.len(), 1, "{args:?}: {lines:?}");
        assert!(lines[0].starts_with("jitterscope: "), "{lines:?}");
        assert!(out.stdout.is_empty());
    }
}

#[test]
fn audit_as_nobody_marks_what_it_cannot_read() {
    let Some(mut cmd) = as_nobody("audit_as_nobody_marks_what_it_cannot_read") else {
        return;
    };
    let out = cmd.args(["audit", "--json"]).output().expect("runs");
    if nobody_cannot_reach("audit_as_nobody_marks_what_it_cannot_read", &out) {
        return;
    }
    assert_eq!(out.status.code(), Some(0), "{:?}", stderr_lines(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let findings = v["findings"].as_array().expect("an array");
    let ids: Vec<&str> = findings.iter().filter_map(|f| f["id"].as_str()).collect();
    // Every check is there, read or marked: none is left out.
    for check in [
        "isolated-",
        "nohz-full-",
        "irqbalance-",
        // A guest without a cpufreq driver has neither: the host owns the frequency.
        "governor-|cpufreq-none",
        "turbo-|cpufreq-none",
        "idle-states-|idle-haltpoll",
        "smt-",
        "thp-",
        "swap-",
        "stat-interval-",
        "numa-balancing-",
        "rt-throttling-",
        "preempt-",
        "timer-migration-",
        "nmi-watchdog-",
        "soft-watchdog-",
        "clocksource-",
        "steal-",
        "mitigations-",
        "workqueue-",
        "kthreads-",
        "tuned-",
    ] {
        assert!(
            check
                .split('|')
                .any(|c| ids.iter().any(|i| i.starts_with(c))),
            "no {check}* in {ids:?}"
        );
    }
    for f in findings {
        let value = f["value"].as_str().expect("value");
        if value.starts_with("unreadable: ") {
            assert_eq!(f["severity"], "info", "{f}");
            assert!(
                f["id"].as_str().is_some_and(|i| i.ends_with("-unreadable")),
                "{f}"
            );
        }
    }
}

/// Issue 7: the audit is stored in every result file, for the run's measured CPUs, and
/// reads back.
#[test]
fn every_result_file_carries_the_audit_of_its_measured_cpus() {
    let _m = crate::util::measuring();
    let r = crate::util::json_result(&["syscalls", "--only", "rdtsc", "-D", "10ms"]);
    let audit = r.host.audit.as_ref().expect("host.audit in the result");
    assert_eq!(audit.measured, r.run.cpus.measured);
    assert!(
        audit.findings.len() >= 20,
        "{} findings",
        audit.findings.len()
    );
    assert!(
        audit
            .findings
            .iter()
            .any(|f| f.id.to_string().starts_with("clocksource"))
    );
    // It survives the round trip a report or compare will make.
    let again =
        jitterscope::report::ResultFile::parse(&serde_json::to_string(&r).unwrap()).unwrap();
    assert_eq!(again.host.audit, r.host.audit);
}

/// Issue 18: the counters see a busy CPU's local timer tick at CONFIG_HZ. One thread
/// spins on the measured CPU for about a second between two snapshots; without
/// nohz_full a busy CPU takes the tick every 1/HZ, so LOC rises by about HZ per second.
/// The band is 0.8 to 2 × HZ × elapsed: below, because a tick that falls while the
/// hypervisor has descheduled the vCPU is not replayed (up to 20 % stolen is allowed);
/// above, because LOC counts every local APIC timer interrupt, and hrtimers other than
/// the tick (timers of other tasks, the scheduler's) expire on that CPU too.
#[test]
fn counters_see_the_local_timer_tick_of_a_busy_cpu_at_config_hz() {
    use jitterscope::system::counters;
    use jitterscope::system::kernel::KernelConfig;
    let test = "counters_see_the_local_timer_tick_of_a_busy_cpu_at_config_hz";
    let Some((cpu, _)) = crate::util::two_cpus() else {
        return crate::util::skip(test, "needs two usable CPUs");
    };
    let Some(hz) = KernelConfig::read(Path::new("/")).hz() else {
        return crate::util::skip(test, "no kernel config to read CONFIG_HZ from");
    };
    let nohz = fs::read_to_string("/sys/devices/system/cpu/nohz_full").unwrap_or_default();
    if CpuList::parse_kernel(nohz.trim()).is_ok_and(|l| l.contains(cpu)) {
        return crate::util::skip(test, "the CPU is nohz_full: a busy CPU has no tick");
    }
    let _lock = crate::util::measuring();
    let cpus = CpuList::from_cpus(vec![cpu]);
    let spin = || {
        std::thread::spawn(move || {
            jitterscope::engine::sched::pin_to(cpu).expect("pin");
            let end = std::time::Instant::now() + std::time::Duration::from_millis(1000);
            let mut n = 0u64;
            while std::time::Instant::now() < end {
                n = std::hint::black_box(n + 1);
            }
        })
        .join()
        .expect("spinner")
    };
    let background = idle_loc_per_s(cpu);
    let ((), delta) = counters::around(&cpus, spin);
    let delta = delta.expect("snapshots");
    let loc = delta.interrupts_on("LOC", cpu) as f64;
    let secs = delta.elapsed_ns as f64 / 1e9;
    let expected = f64::from(hz) * secs;
    let above = 2.0 * expected + background * secs;
    eprintln!(
        "LOC on CPU {cpu}: {loc} in {secs:.3} s; CONFIG_HZ={hz} gives {expected:.0}; the idle \
         CPU's own timers {background:.0}/s"
    );
    assert!(
        (0.8 * expected..=above).contains(&loc),
        "LOC {loc} outside 0.8 × {expected:.0} to 2 × it + the background; delta: {:?}",
        delta.interrupts.iter().take(5).collect::<Vec<_>>()
    );
    assert_eq!(delta.steal.len(), 1);
    assert!(delta.steal[0].total_ms >= 800, "{:?}", delta.steal);
}

// ---------------------------------------------------------------------------------------
// Issue 18: recorded trees of this VM's shape under tests/fixtures/audit/, read by the
// binary through --root. Each gives the right finding and a fix that the audited kernel
// accepts, placed where it applies.

use jitterscope::system::audit::{AuditReport, FindingId, Remedy};

fn audit_fixture(case: &str) -> AuditReport {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/audit")
        .join(case);
    let root = root.to_str().expect("utf-8");
    let out = jitterscope(&["audit", "--root", root, "-a", "1", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{:?}", stderr_lines(&out));
    serde_json::from_slice(&out.stdout).expect("an audit report")
}

fn the(r: &AuditReport, id: FindingId) -> &Finding {
    r.findings
        .iter()
        .find(|f| f.id == id)
        .unwrap_or_else(|| panic!("no {id} in {:?}", ids(&r.findings)))
}

fn boot_options(r: &AuditReport) -> Vec<&str> {
    r.findings
        .iter()
        .flat_map(|f| &f.remedies)
        .filter_map(|x| match x {
            Remedy::Boot { options, .. } => Some(options),
            _ => None,
        })
        .flatten()
        .map(String::as_str)
        .collect()
}

#[test]
fn issue18_a_managed_irq_gets_isolcpus_managed_irq_not_an_affinity_write() {
    let r = audit_fixture("managed-irq");
    let managed = the(&r, FindingId::IrqManagedOnMeasured);
    assert_eq!(managed.severity, Bad);
    assert_eq!(managed.value, "IRQ 36 (virtio1-req.0) ×80089");
    // The errno differs by kernel (EIO, EPERM): only tune's live answer names it.
    assert!(
        managed.why.contains("refuses writes") && !managed.why.contains("EIO"),
        "{managed:?}"
    );
    assert!(
        matches!(managed.remedies.as_slice(), [Remedy::Boot { options, how }]
            if options == &["isolcpus=managed_irq,1"] && how.contains("VM's host")),
        "{managed:?}"
    );
    // The movable IRQ that fires is bad and gets the write; IRQ 36 is in no write.
    let busy = the(&r, FindingId::IrqOnMeasuredCpus);
    assert_eq!(busy.severity, Bad);
    assert_eq!(busy.value, "IRQ 26 (ttyS0) ×14");
    for f in &r.findings {
        for x in &f.remedies {
            if let Remedy::Runtime { effects, .. } = x {
                assert!(
                    !effects.iter().any(|e| matches!(e, jitterscope::system::audit::Effect::Write { path, .. } if path.contains("/irq/36/"))),
                    "{f:?}"
                );
            }
        }
    }
    // Fired never (29) or once (35): info.
    let quiet = the(&r, FindingId::IrqQuietOnMeasured);
    assert_eq!(quiet.severity, Info);
    assert_eq!(
        quiet.value,
        "2 IRQs: 29 (virtio0-inflate) ×0, 35 (virtio1-config) ×1"
    );
}

#[test]
fn issue18_a_kernel_without_no_hz_full_gets_a_kernel_build_not_a_boot_option() {
    let r = audit_fixture("no-nohz-full");
    let nohz = the(&r, FindingId::NohzFullUnsupported);
    assert_eq!(nohz.severity, Warn);
    assert!(
        matches!(nohz.remedies.as_slice(), [Remedy::KernelBuild { config, options, .. }]
            if config == &["CONFIG_NO_HZ_FULL=y"] && options == &["nohz_full=1"]),
        "{nohz:?}"
    );
    // No boot option the kernel would reject: nohz_full nowhere, isolcpus and rcu_nocbs
    // (built in) with GRUB's instructions on this bare-metal host.
    let boot = boot_options(&r);
    assert!(!boot.iter().any(|o| o.starts_with("nohz_full")), "{boot:?}");
    assert!(
        boot.contains(&"isolcpus=1") && boot.contains(&"rcu_nocbs=1"),
        "{boot:?}"
    );
    let iso = the(&r, FindingId::IsolatedMissing);
    assert!(iso.fix.contains("GRUB_CMDLINE_LINUX"), "{iso:?}");
    assert_eq!(
        the(&r, FindingId::HzTick).value,
        "CONFIG_HZ=250: a tick every 4.00 ms (/boot/config-6.8.0-fixture)"
    );
}

#[test]
fn issue18_a_guest_without_cpufreq_is_told_the_host_owns_the_frequency() {
    let r = audit_fixture("guest-no-cpufreq");
    let f = the(&r, FindingId::CpufreqNone);
    assert_eq!(f.severity, Info);
    assert!(
        matches!(f.remedies.as_slice(), [Remedy::Host { .. }]),
        "{f:?}"
    );
    let got = ids(&r.findings);
    assert!(
        !got.iter()
            .any(|(i, _)| i.starts_with("governor") || i.starts_with("turbo")),
        "{got:?}"
    );
    assert!(
        !r.findings.iter().any(|f| f.fix.contains("as root")),
        "{got:?}"
    );
}

#[test]
fn issue18_haltpoll_without_polling_is_flagged_with_its_run_time_fix() {
    let r = audit_fixture("haltpoll");
    let idle = the(&r, FindingId::IdleHaltpoll);
    assert_eq!(idle.severity, Warn);
    assert!(idle.why.contains("VM exit") && idle.fix.contains("/dev/cpu_dma_latency"));
    // Not called a 1 µs shallow state.
    assert!(
        !ids(&r.findings)
            .iter()
            .any(|(i, _)| i == "idle-states-shallow")
    );
    let poll = the(&r, FindingId::HaltpollNoPoll);
    assert_eq!(poll.severity, Warn);
    assert_eq!(
        poll.value,
        "0 ns (haltpoll.guest_halt_poll_ns=0 on the command line)"
    );
    assert_eq!(
        poll.remedies[0],
        Remedy::Runtime {
            command: "echo 200000 > /sys/module/haltpoll/parameters/guest_halt_poll_ns".into(),
            effects: vec![jitterscope::system::audit::Effect::Write {
                path: "/sys/module/haltpoll/parameters/guest_halt_poll_ns".into(),
                value: "200000".into(),
            }],
        }
    );
    assert!(
        matches!(&poll.remedies[1], Remedy::Boot { options, .. }
            if options == &["haltpoll.guest_halt_poll_ns=200000"]),
        "{poll:?}"
    );
    let qos = the(&r, FindingId::PmQosUnset);
    assert_eq!(qos.severity, Warn);
    assert_eq!(
        qos.fix,
        "now: echo n/a > /sys/devices/system/cpu/cpu1/power/pm_qos_resume_latency_us"
    );
}

/// What a file reads as, for comparing with a value written: a choice file
/// ("always [madvise] never") reads as its bracketed word.
fn reads_as(path: &str) -> Option<String> {
    let text = fs::read_to_string(path).ok()?.trim().to_string();
    Some(
        text.split_whitespace()
            .find_map(|w| w.strip_prefix('[')?.strip_suffix(']'))
            .map_or(text.clone(), str::to_string),
    )
}

fn allowed_cpus(pid: u32) -> Option<String> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .map(|s| s.trim().to_string())
}

fn set_allowed(pid: u32, list: &str) -> bool {
    std::process::Command::new("taskset")
        .args(["-pc", list, &pid.to_string()])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Issue 18, done-when 1: on this host every run-time command the audit prints
/// succeeds, each change it makes is seen, and each is then reverted (and the revert
/// checked); every boot option it prints is one the running kernel supports, and every
/// kernel-build remedy names an option the running kernel lacks. Root only.
#[test]
fn issue18_every_fix_printed_for_this_host_works_here_and_is_reverted() {
    use jitterscope::system::audit::Effect;
    use jitterscope::system::kernel::{KernelConfig, Support};
    let test = "issue18_every_fix_printed_for_this_host_works_here_and_is_reverted";
    if !crate::util::is_root() {
        return crate::util::skip(test, "needs root to apply and revert the fixes");
    }
    let online = CpuList::parse_kernel(
        fs::read_to_string("/sys/devices/system/cpu/online")
            .expect("online")
            .trim(),
    )
    .expect("a list");
    if online.len() < 2 {
        return crate::util::skip(test, "needs a housekeeping CPU beside the measured one");
    }
    // Nothing measures while host settings are changed.
    let _lock = crate::util::measuring();
    let measured = CpuList::from_cpus(vec![*online.cpus().last().expect("a CPU")]);
    let report = AuditReport::of(Path::new("/"), measured, &online);
    let config = KernelConfig::read(Path::new("/"));
    assert!(
        config.known(),
        "no kernel config on this host to check boot options"
    );
    let mut log = Vec::new();
    for f in &report.findings {
        for r in &f.remedies {
            match r {
                Remedy::Boot { options, .. } => {
                    for o in options {
                        assert_eq!(config.supports(o), Support::Yes, "{}: {o}", f.id);
                        log.push(format!(
                            "{}: boot {o}: supported ({:?})",
                            f.id, config.source
                        ));
                    }
                }
                Remedy::KernelBuild {
                    options, config: c, ..
                } => {
                    for o in options {
                        assert!(
                            matches!(config.supports(o), Support::Missing(_)),
                            "{}: {o} is supported, yet a kernel build is asked for",
                            f.id
                        );
                        log.push(format!(
                            "{}: kernel build {c:?} for {o}: missing here",
                            f.id
                        ));
                    }
                }
                Remedy::Runtime { command, effects } => {
                    assert!(!effects.is_empty(), "{}: a command with no effect", f.id);
                    // Record.
                    let old: Vec<Option<String>> = effects
                        .iter()
                        .map(|e| match e {
                            Effect::Write { path, .. } => reads_as(path),
                            Effect::Affinity { pid, .. } => allowed_cpus(*pid),
                        })
                        .collect();
                    // Apply.
                    let out = std::process::Command::new("sh")
                        .args(["-c", command])
                        .output()
                        .expect("sh runs");
                    let applied = out.status.success();
                    // Check it took.
                    let mut took = Vec::new();
                    for (e, was) in effects.iter().zip(&old) {
                        let ok = match e {
                            // A kernel thread that exited meanwhile has nothing to check.
                            Effect::Affinity { pid, cpus } => match allowed_cpus(*pid) {
                                Some(now) => now == cpus.to_string(),
                                None => was.is_none() || allowed_cpus(*pid).is_none(),
                            },
                            Effect::Write { path, value } => {
                                reads_as(path).as_deref() == Some(value.as_str())
                            }
                        };
                        took.push(ok);
                    }
                    // Restore, then check the restore, whatever happened above.
                    let mut restored = Vec::new();
                    for (e, was) in effects.iter().zip(&old) {
                        let Some(was) = was else {
                            restored.push(true);
                            continue;
                        };
                        let ok = match e {
                            Effect::Write { path, .. } => {
                                let _ = fs::write(path, format!("{was}\n"));
                                reads_as(path).as_deref() == Some(was.as_str())
                            }
                            Effect::Affinity { pid, .. } => {
                                set_allowed(*pid, was);
                                allowed_cpus(*pid).is_none_or(|now| &now == was)
                            }
                        };
                        restored.push(ok);
                    }
                    log.push(format!(
                        "{}: `{command}`: exit {:?}, took {took:?}, restored {restored:?}",
                        f.id,
                        out.status.code()
                    ));
                    assert!(
                        applied,
                        "{}: `{command}` failed: {}",
                        f.id,
                        String::from_utf8_lossy(&out.stderr)
                    );
                    assert!(
                        took.iter().all(|t| *t),
                        "{}: `{command}` did not take: {took:?}",
                        f.id
                    );
                    assert!(
                        restored.iter().all(|t| *t),
                        "{}: not restored after `{command}`: {restored:?} (was {old:?})",
                        f.id
                    );
                }
                Remedy::Host { what } => {
                    log.push(format!("{}: on the host: {what} (not run here)", f.id));
                }
                Remedy::Manual { what } => {
                    log.push(format!("{}: by hand: {what} (not run)", f.id));
                }
            }
        }
    }
    for l in &log {
        eprintln!("{l}");
    }
}

/// Issue 17 item 5: every finding the verdict ties to a cause is one the audit gives, at
/// warn or bad, on one of the fixtures (the type says the id exists; this says the
/// audit really produces it where the verdict looks).
#[test]
fn every_finding_the_verdict_names_is_produced_at_warn_or_bad() {
    use jitterscope::report::terminal::verdict::Cause;
    let untuned = fixture(false);
    let contradict = fixture(true);
    let r = contradict.path();
    put(
        r,
        "proc/cmdline",
        "isolcpus=domain,managed_irq,1-3 nohz_full=2-3 rcu_nocbs=1 tsc=reliable",
    );
    put(r, "sys/devices/system/cpu/isolated", "1-2");
    put(r, "sys/devices/system/cpu/nohz_full", "2-3");
    // A process in a v1 cpu group with a CFS quota (a "CFS quota" row names cfs-quota).
    put(r, "proc/self/cgroup", "1:cpu:/jsq");
    put(
        r,
        "proc/self/mountinfo",
        "32 31 0:29 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu",
    );
    put(r, "sys/fs/cgroup/cpu/cgroup.sane_behavior", "0");
    put(r, "sys/fs/cgroup/cpu/jsq/cpu.cfs_quota_us", "35000");
    put(r, "sys/fs/cgroup/cpu/jsq/cpu.cfs_period_us", "100000");
    let mut seen: Vec<(FindingId, Severity)> = Vec::new();
    for root in [untuned.path(), contradict.path()] {
        seen.extend(run_audit(root).iter().map(|f| (f.id, f.severity)));
    }
    for case in [
        "managed-irq",
        "no-nohz-full",
        "guest-no-cpufreq",
        "haltpoll",
    ] {
        seen.extend(
            audit_fixture(case)
                .findings
                .iter()
                .map(|f| (f.id, f.severity)),
        );
    }
    for cause in Cause::ALL {
        // The fair server's finding is info (it matters only to a spinning loop); the
        // verdict names it where the trace measured the fair server taking the CPU.
        let floor = match cause {
            Cause::FairServer => Severity::Info,
            _ => Warn,
        };
        for id in cause.findings() {
            assert!(
                seen.iter().any(|(i, s)| i == id && *s >= floor),
                "{cause:?} names {id}, which no fixture gives at {floor:?} or above"
            );
        }
    }
}

/// The local timer interrupts a second on `cpu` while nothing of ours runs there: with
/// the tick stopped on an idle CPU (NO_HZ_IDLE), what other tasks' timers cost. A busy
/// CPU's count is judged above it (issue 22: a neighbour sleeping 1 ms at a time on the
/// CPU put LOC at 4.5 × HZ).
fn idle_loc_per_s(cpu: usize) -> f64 {
    let cpus = CpuList::from_cpus(vec![cpu]);
    let wait = || std::thread::sleep(std::time::Duration::from_millis(500));
    let ((), delta) = jitterscope::system::counters::around(&cpus, wait);
    let delta = delta.expect("snapshots");
    delta.interrupts_on("LOC", cpu) as f64 / (delta.elapsed_ns as f64 / 1e9)
}

/// Issue 18: a measuring run stores the counters' deltas on its measured CPUs, and a busy
/// run's local timer count rises by about CONFIG_HZ a second (the band of the test above).
#[test]
fn issue18_a_run_stores_its_counter_deltas() {
    use jitterscope::system::kernel::KernelConfig;
    let test = "issue18_a_run_stores_its_counter_deltas";
    let Some((cpu, _)) = crate::util::two_cpus() else {
        return crate::util::skip(test, "needs two usable CPUs");
    };
    let Some(hz) = KernelConfig::read(Path::new("/")).hz() else {
        return crate::util::skip(test, "no kernel config to read CONFIG_HZ from");
    };
    let nohz = fs::read_to_string("/sys/devices/system/cpu/nohz_full").unwrap_or_default();
    if CpuList::parse_kernel(nohz.trim()).is_ok_and(|l| l.contains(cpu)) {
        return crate::util::skip(test, "the CPU is nohz_full: a busy CPU has no tick");
    }
    let _lock = crate::util::measuring();
    let background = idle_loc_per_s(cpu);
    let r = crate::util::json_result(&["noise", "-D", "1s", "-a", &cpu.to_string()]);
    let delta = r.run.counters.expect("the run's counters are stored");
    assert_eq!(delta.cpus, CpuList::from_cpus(vec![cpu]));
    let loc = delta.interrupts_on("LOC", cpu) as f64;
    let secs = delta.elapsed_ns as f64 / 1e9;
    let expected = f64::from(hz) * secs;
    assert!(
        (0.8 * expected..=2.0 * expected + background * secs).contains(&loc),
        "LOC {loc} outside 0.8-2 × {expected:.0}"
    );
    assert_eq!(delta.steal.len(), 1, "steal over the run, per measured CPU");
}
