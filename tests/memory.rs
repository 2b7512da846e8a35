//! What a `noise` run costs the host in memory: its private memory, which must stay small
//! and flat over the run. Measured on the release binary, the one users run (it is built
//! if missing or stale: a no-op when fresh, a few minutes from nothing on 2 CPUs).
//!
//! Private memory is `Anonymous` + `Swap` from /proc/PID/smaps_rollup: the heap, the
//! threads' stacks, and the pages copied on write when relocations were applied. Only this
//! process holds them and only its exit frees them. Not counted: code and read-only data,
//! which are clean file pages the kernel can drop and read again, and which every
//! process running the binary shares. `Private_Dirty` is not used: it also counts page-cache
//! pages of the binary that have not been written back yet (a binary fresh from the
//! linker showed 3.7 MiB of them against 0.75 MiB anonymous), a cost of the file system,
//! not of the run; for a process that does not fork, anonymous pages are exactly its
//! private dirty ones once the binary is on disk. Peak RSS (VmHWM) is printed for
//! information: mlockall faults in the whole binary, so it mostly measures code size.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::util;

/// The limit on private memory, in KiB (1.5 MiB), for one measured CPU and for two.
/// Measured here (2-vCPU Xeon KVM guest, dynamically linked release build, as root with
/// mlockall): 768 KiB for `noise -a 1`, 1 200 KiB for `noise -a 0-1 --force`.
const PRIVATE_LIMIT_KIB: u64 = 1_536;
/// How much private memory may grow between the samples at 1 s and 3 s, in KiB. The
/// histograms, series and event buffers are sized at start, so the growth measured is 0;
/// the margin is for the allocator rounding one late small allocation up to a page.
const GROWTH_LIMIT_KIB: u64 = 64;

/// One look at a running process: private memory and the peak resident set so far.
#[derive(Debug, Clone, Copy)]
struct Sample {
    private_kib: u64,
    peak_rss_kib: u64,
}

/// `Anonymous` + `Swap` from smaps_rollup, in KiB (the module doc says why these).
fn private_kib(pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
    let field = |name: &str| {
        text.lines().find_map(|l| {
            l.strip_prefix(name)?
                .trim()
                .strip_suffix("kB")?
                .trim()
                .parse::<u64>()
                .ok()
        })
    };
    Some(field("Anonymous:")? + field("Swap:").unwrap_or(0))
}

/// VmHWM from /proc/PID/status, in KiB.
fn peak_rss_kib(pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    text.lines().find_map(|l| {
        l.strip_prefix("VmHWM:")?
            .trim()
            .strip_suffix("kB")?
            .trim()
            .parse()
            .ok()
    })
}

/// `None` once the process is gone.
fn sample(child: &Child) -> Option<Sample> {
    let pid = child.id();
    Some(Sample {
        private_kib: private_kib(pid)?,
        peak_rss_kib: peak_rss_kib(pid)?,
    })
}

/// Builds the release binary (cargo decides whether anything changed) and returns it.
fn release_binary() -> Result<PathBuf, String> {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["build", "--release", "--quiet", "--bin", "jitterscope"])
        .current_dir(manifest)
        .output()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cargo build --release failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| manifest.join("target"));
    Ok(target.join("release").join("jitterscope"))
}

/// Runs `noise` with `args` for 4 s and samples it at 1 s and at 3 s, well inside the
/// measurement (start-up, calibration and warm-up take about 0.3 s).
fn samples(bin: &Path, args: &[&str]) -> (Sample, Sample) {
    let child = Command::new(bin)
        .arg("noise")
        .args(args)
        .args(["-D", "4s"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the release binary runs");
    std::thread::sleep(Duration::from_secs(1));
    let early = sample(&child);
    std::thread::sleep(Duration::from_secs(2));
    let late = sample(&child);
    let out = child.wait_with_output().expect("noise ends");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "noise {args:?} failed: {stderr}");
    match (early, late) {
        (Some(early), Some(late)) => (early, late),
        _ => panic!("noise {args:?} ended before its 3 s sample: {stderr}"),
    }
}

/// Checks one configuration against the limits, printing its figures.
fn check(bin: &Path, args: &[&str]) {
    let (early, late) = samples(bin, args);
    eprintln!(
        "noise {}: private memory {} KiB at 1 s, {} KiB at 3 s (limit {PRIVATE_LIMIT_KIB} KiB); \
         peak RSS {} KiB (information only)",
        args.join(" "),
        early.private_kib,
        late.private_kib,
        late.peak_rss_kib
    );
    for s in [early, late] {
        assert!(
            s.private_kib <= PRIVATE_LIMIT_KIB,
            "noise {args:?}: private memory {} KiB > {PRIVATE_LIMIT_KIB} KiB",
            s.private_kib
        );
    }
    let growth = late.private_kib.saturating_sub(early.private_kib);
    assert!(
        growth <= GROWTH_LIMIT_KIB,
        "noise {args:?}: private memory grew {growth} KiB from 1 s to 3 s (limit {GROWTH_LIMIT_KIB} KiB)"
    );
}

#[test]
fn noise_private_memory_is_small_and_flat() {
    let test = "noise_private_memory_is_small_and_flat";
    if private_kib(std::process::id()).is_none() {
        return util::skip(
            test,
            "no /proc/PID/smaps_rollup (Linux 4.14 or newer has it)",
        );
    }
    let bin = release_binary().unwrap();
    let universe = jitterscope::engine::cpu::CpuUniverse::detect().unwrap();
    let usable = universe.usable();
    let cpus = usable.cpus();
    let _m = util::measuring();
    check(&bin, &["-a", &cpus[cpus.len() - 1].to_string()]);
    if cpus.len() < 2 {
        return util::skip(&format!("{test} (two CPUs)"), "one usable CPU");
    }
    // --force: on a 2-CPU machine no housekeeping CPU is left.
    check(
        &bin,
        &["-a", &format!("{},{}", cpus[0], cpus[1]), "--force"],
    );
}
