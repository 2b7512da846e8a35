//! Issue 48, item 3: every command right on a tuned host. Debian's PREEMPT_RT kernel in
//! the lab, 2 vCPUs, `isolcpus=1 nohz_full=1 rcu_nocbs=1`: the shell's affinity leaves CPU
//! 1 out, yet `-a 1` measures it, and with no `-a` the commands measure the isolated CPU
//! and keep the reader on CPU 0.

use std::sync::Arc;

use crate::lab::{self, Boot, Guest};

const ISOLATED: &str = "isolcpus=1 nohz_full=1 rcu_nocbs=1";

/// The RT kernel with CPU 1 isolated: each command once, short.
fn isolated(test: &str) -> Option<Arc<Guest>> {
    lab::guest(test, "rt-isolated", || Boot {
        kernel: "rt",
        cpus: 2,
        cmdline: ISOLATED.into(),
        flags: &[],
        script: [
            lab::part("affinity", "taskset -p $$"),
            lab::part("noise-a1", "jitterscope noise -a 1 -D 1s -o noise-a1.json"),
        ]
        .concat(),
    })
}

fn measured(g: &Guest, file: &str) -> String {
    g.result(file).run.cpus.measured.to_string()
}

#[test]
fn issue48_noise_a1_measures_the_isolated_cpu_whatever_the_shells_affinity() {
    const TEST: &str = "issue48_noise_a1_measures_the_isolated_cpu_whatever_the_shells_affinity";
    let Some(g) = isolated(TEST) else { return };
    let affinity = g.part_exit("affinity", 0);
    assert!(
        affinity.trim_end().ends_with(": 1"),
        "the shell's mask is CPU 0 alone: {affinity}"
    );
    g.part_exit("noise-a1", 0);
    assert_eq!(measured(&g, "noise-a1.json"), "1");
}
