//! The time source of every hot loop, and its conversion to nanoseconds.
//!
//! On x86-64 the loops read the TSC. Its frequency must be the kernel's own, or every
//! figure is off by a constant factor; so it is taken, in order, from sysfs
//! `tsc_freq_khz`, from the perf_event mmap page (the kernel's cyc2ns mult/shift), or by
//! calibrating against CLOCK_MONOTONIC_RAW with the tightest bracket (exact when the
//! clocksource is `tsc`, because RAW is then the TSC scaled by the kernel). The kernel's
//! boot line and the CPUID leaves serve as cross-checks; "cpu MHz" never does, because it
//! is the current core clock, not the TSC's.
//!
//! Elsewhere the loops read CLOCK_MONOTONIC in ns.
#![allow(unsafe_code)]

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Reads the counter: the TSC on x86-64, CLOCK_MONOTONIC ns elsewhere. Unordered, as the
/// noise loop wants it: consecutive reads on one CPU are monotone, which is all it needs.
#[inline(always)]
pub fn now() -> u64 {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: rdtsc has no preconditions; every x86-64 CPU has it.
    unsafe {
        core::arch::x86_64::_rdtsc()
    }
    #[cfg(not(target_arch = "x86_64"))]
    monotonic_ns()
}

/// Reads the counter after every earlier instruction has completed, and before any later
/// one starts: for the edges of timed sections.
#[inline(always)]
pub fn now_ordered() -> u64 {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: lfence and rdtsc have no preconditions on x86-64 (SSE2 is baseline).
    unsafe {
        use core::arch::x86_64::{_mm_lfence, _rdtsc};
        _mm_lfence();
        let t = _rdtsc();
        _mm_lfence();
        t
    }
    #[cfg(not(target_arch = "x86_64"))]
    monotonic_ns()
}

/// Reads the counter with RDTSCP, which waits for earlier instructions to complete (but
/// not for later ones to wait for it). 0 where there is no TSC.
#[inline(always)]
pub fn now_rdtscp() -> u64 {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: rdtscp writes the processor id into a local we own; every x86-64 CPU this
    // runs on has it (the `rdtscp` flag, checked by callers that care).
    unsafe {
        let mut aux = 0u32;
        core::arch::x86_64::__rdtscp(&mut aux)
    }
    #[cfg(not(target_arch = "x86_64"))]
    0
}

/// Whether this CPU has RDTSCP (CPUID 0x8000_0001, EDX bit 27). False off x86-64.
pub fn has_rdtscp() -> bool {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: cpuid has no preconditions on x86-64 (the intrinsic is safe from Rust 1.89,
    // unsafe before: hence the allow). Leaf 0x8000_0000 says which extended leaves exist
    // before 0x8000_0001 is read.
    #[allow(unused_unsafe)]
    unsafe {
        use core::arch::x86_64::__cpuid;
        __cpuid(0x8000_0000).eax >= 0x8000_0001 && __cpuid(0x8000_0001).edx & (1 << 27) != 0
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Stamps an event the thread has just seen (a load that returned) or is about to cause
/// (a store that follows): RDTSCP where `rdtscp` is true, which waits for the load before
/// it and whose value a later store depends on, so one instruction orders both edges;
/// otherwise the fenced read. Costs one counter read, where `now_ordered` costs a read
/// and two fences: on the pingpong's critical path that difference is most of the gap
/// to a bare loop (bench/pingpong_floor.sh).
#[inline(always)]
pub fn now_edge(rdtscp: bool) -> u64 {
    if rdtscp { now_rdtscp() } else { now_ordered() }
}

/// CLOCK_MONOTONIC in ns (through the vDSO).
pub fn monotonic_ns() -> u64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Busy-waits `ticks` of the counter: the pause between samples that keeps the CPU
/// awake, as a sleep would not.
#[inline(always)]
pub fn spin_for(ticks: u64) {
    let until = now() + ticks;
    while now() < until {
        std::hint::spin_loop();
    }
}

/// CLOCK_REALTIME in ns since the epoch (through the vDSO).
pub fn realtime_ns() -> u64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::Realtime);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn monotonic_raw_ns() -> u64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::MonotonicRaw);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Counter ticks to ns as the kernel does it: `ns = ticks * mult >> shift`, in 128 bits
/// so that no run length overflows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Scale {
    pub mult: u64,
    pub shift: u32,
}

impl Scale {
    /// The identity, for counters that already count ns.
    pub const NS: Scale = Scale { mult: 1, shift: 0 };

    /// The scale for a counter of `hz` ticks per second.
    pub fn from_hz(hz: f64) -> Scale {
        let shift = 32;
        Scale {
            mult: (1e9 * (1u64 << shift) as f64 / hz).round() as u64,
            shift,
        }
    }

    #[inline(always)]
    pub fn to_ns(&self, ticks: u64) -> u64 {
        ((ticks as u128 * self.mult as u128) >> self.shift) as u64
    }

    /// The inverse, for deadlines and thresholds given in ns.
    pub fn to_ticks(&self, ns: u64) -> u64 {
        let m = self.mult.max(1);
        // In 64 bits when the shifted value fits (any ns under about 4 s at a shift of
        // 32), the same quotient without a 128-bit division: the trace readers convert
        // every gap (issue 35).
        match ns.checked_shl(self.shift).filter(|s| s >> self.shift == ns) {
            Some(shifted) => shifted / m,
            None => (((ns as u128) << self.shift) / m as u128).min(u64::MAX as u128) as u64,
        }
    }

    /// `to_ticks` rounded up: `to_ns(to_ticks_ceil(ns)) >= ns`.
    pub fn to_ticks_ceil(&self, ns: u64) -> u64 {
        let m = self.mult.max(1) as u128;
        (((ns as u128) << self.shift).div_ceil(m)).min(u64::MAX as u128) as u64
    }

    pub fn hz(&self) -> f64 {
        1e9 * (1u64 << self.shift) as f64 / self.mult as f64
    }
}

/// Which counter the loops read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Counter {
    Tsc,
    ClockMonotonic,
}

/// Where the counter's frequency came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FrequencySource {
    /// `/sys/devices/system/cpu/cpu0/tsc_freq_khz`.
    SysfsTscFreqKhz,
    /// The perf_event mmap page's `time_mult`/`time_shift` (`cap_user_time`).
    PerfMmapPage,
    /// Calibrated against CLOCK_MONOTONIC_RAW.
    CalibratedMonotonicRaw,
    /// The kernel's `tsc: Detected/Refined … MHz` boot line.
    KernelLog,
    /// CPUID leaf 0x15 (TSC/crystal ratio).
    Cpuid15,
    /// CPUID leaf 0x40000010 (hypervisor TSC kHz).
    Cpuid40000010,
    /// The counter counts ns (CLOCK_MONOTONIC).
    Nanoseconds,
}

impl FrequencySource {
    /// Where the frequency came from, in words, for the terminal header.
    pub fn describe(self) -> &'static str {
        match self {
            FrequencySource::SysfsTscFreqKhz => "sysfs tsc_freq_khz",
            FrequencySource::PerfMmapPage => "perf_event mmap page",
            FrequencySource::CalibratedMonotonicRaw => "calibrated against CLOCK_MONOTONIC_RAW",
            FrequencySource::KernelLog => "the kernel's boot line",
            FrequencySource::Cpuid15 => "CPUID leaf 0x15",
            FrequencySource::Cpuid40000010 => "CPUID leaf 0x40000010 (hypervisor)",
            FrequencySource::Nanoseconds => "counts ns",
        }
    }
}

impl std::fmt::Display for FrequencySource {
    /// The same name as in the result file.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let v = serde_json::to_value(self).map_err(|_| std::fmt::Error)?;
        f.write_str(v.as_str().unwrap_or("unknown"))
    }
}

/// Another figure for the same frequency, and how far it is from the one used.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CrossCheck {
    pub source: FrequencySource,
    pub hz: f64,
    pub diff_ppm: f64,
}

/// Everything the result file records about the time source.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClockInfo {
    pub counter: Counter,
    pub frequency_hz: f64,
    pub frequency_source: FrequencySource,
    pub scale: Scale,
    /// When calibrated: a bound on the calibration's error in ppm, the mean width of its two
    /// (rdtsc, clock, rdtsc) brackets over the calibration window.
    pub calibration_uncertainty_ppm: Option<f64>,
    pub cross_checks: Vec<CrossCheck>,
    /// `/sys/devices/system/clocksource/clocksource0/current_clocksource`.
    pub clocksource: Option<String>,
    /// The TSC-related flags from /proc/cpuinfo that were present.
    pub tsc_flags: Vec<String>,
    /// constant_tsc and nonstop_tsc are both present.
    pub invariant: bool,
}

/// Degradations the clock found; turned into `Degraded` entries by the caller.
#[derive(Debug, Clone, PartialEq)]
pub enum ClockProblem {
    NotInvariant { missing: Vec<String> },
    ClocksourceNotTsc { current: String },
    FrequencyMismatch { other: FrequencySource, ppm: f64 },
    NoCycleCounter,
}

/// Largest disagreement between frequency sources that is still accepted silently.
pub const MISMATCH_PPM: f64 = 100.0;

impl ClockInfo {
    /// Finds the counter's frequency and cross-checks it. Takes about 50 ms (calibration).
    pub fn detect() -> (ClockInfo, Vec<ClockProblem>) {
        #[cfg(target_arch = "x86_64")]
        {
            detect_tsc()
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let info = ClockInfo {
                counter: Counter::ClockMonotonic,
                frequency_hz: 1e9,
                frequency_source: FrequencySource::Nanoseconds,
                scale: Scale::NS,
                calibration_uncertainty_ppm: None,
                cross_checks: vec![],
                clocksource: read_trimmed(
                    "/sys/devices/system/clocksource/clocksource0/current_clocksource",
                ),
                tsc_flags: vec![],
                invariant: false,
            };
            (info, vec![ClockProblem::NoCycleCounter])
        }
    }
}

fn read_trimmed(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

const TSC_FLAGS: [&str; 6] = [
    "tsc",
    "rdtscp",
    "constant_tsc",
    "nonstop_tsc",
    "tsc_known_freq",
    "tsc_reliable",
];

/// The TSC flags present in /proc/cpuinfo's first `flags` line.
pub fn cpuinfo_tsc_flags(cpuinfo: &str) -> Vec<String> {
    let flags: Vec<&str> = cpuinfo
        .lines()
        .find(|l| l.starts_with("flags"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.split_whitespace().collect())
        .unwrap_or_default();
    TSC_FLAGS
        .iter()
        .filter(|f| flags.contains(f))
        .map(|f| f.to_string())
        .collect()
}

#[cfg(target_arch = "x86_64")]
fn detect_tsc() -> (ClockInfo, Vec<ClockProblem>) {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let tsc_flags = cpuinfo_tsc_flags(&cpuinfo);
    let missing: Vec<String> = ["constant_tsc", "nonstop_tsc"]
        .iter()
        .filter(|f| !tsc_flags.iter().any(|g| g == *f))
        .map(|f| f.to_string())
        .collect();
    let clocksource =
        read_trimmed("/sys/devices/system/clocksource/clocksource0/current_clocksource");

    let calibration = calibrate_against_monotonic_raw(Duration::from_millis(50));
    let mut candidates: Vec<(FrequencySource, Scale)> = Vec::new();
    if let Some(khz) = sysfs_tsc_khz() {
        candidates.push((
            FrequencySource::SysfsTscFreqKhz,
            Scale::from_hz(khz as f64 * 1e3),
        ));
    }
    if let Some(scale) = perf_page_scale() {
        candidates.push((FrequencySource::PerfMmapPage, scale));
    }
    candidates.push((
        FrequencySource::CalibratedMonotonicRaw,
        Scale::from_hz(calibration.hz),
    ));
    let (frequency_source, scale) = candidates[0];
    let hz = scale.hz();

    let mut others: Vec<(FrequencySource, f64)> = candidates[1..]
        .iter()
        .map(|(s, sc)| (*s, sc.hz()))
        .collect();
    others.extend(kernel_log_tsc_hz().map(|h| (FrequencySource::KernelLog, h)));
    others.extend(cpuid_tsc_hz());
    let cross_checks: Vec<CrossCheck> = others
        .into_iter()
        .map(|(source, other)| CrossCheck {
            source,
            hz: other,
            diff_ppm: (other - hz) / hz * 1e6,
        })
        .collect();

    let mut problems = Vec::new();
    if !missing.is_empty() {
        problems.push(ClockProblem::NotInvariant { missing });
    }
    if let Some(cs) = clocksource.as_deref().filter(|cs| *cs != "tsc") {
        problems.push(ClockProblem::ClocksourceNotTsc {
            current: cs.to_string(),
        });
    }
    for c in &cross_checks {
        if c.diff_ppm.abs() > MISMATCH_PPM {
            problems.push(ClockProblem::FrequencyMismatch {
                other: c.source,
                ppm: c.diff_ppm,
            });
        }
    }
    let info = ClockInfo {
        counter: Counter::Tsc,
        frequency_hz: hz,
        frequency_source,
        scale,
        calibration_uncertainty_ppm: (frequency_source == FrequencySource::CalibratedMonotonicRaw)
            .then_some(calibration.uncertainty_ppm),
        cross_checks,
        clocksource,
        invariant: problems
            .iter()
            .all(|p| !matches!(p, ClockProblem::NotInvariant { .. })),
        tsc_flags,
    };
    (info, problems)
}

fn sysfs_tsc_khz() -> Option<u64> {
    read_trimmed("/sys/devices/system/cpu/cpu0/tsc_freq_khz")?
        .parse()
        .ok()
        .filter(|&k| k > 0)
}

/// The result of a calibration against CLOCK_MONOTONIC_RAW.
#[derive(Debug, Clone, Copy)]
pub struct Calibration {
    pub hz: f64,
    pub uncertainty_ppm: f64,
}

/// One (counter, RAW ns) pair, with the width of the counter bracket around the clock read.
#[derive(Debug, Clone, Copy)]
struct Bracket {
    ticks_mid: u64,
    raw_ns: u64,
    width: u64,
}

/// The tightest of many brackets: the one least disturbed by interrupts and the vDSO's
/// own variance.
fn tightest_bracket() -> Bracket {
    let mut best = Bracket {
        ticks_mid: 0,
        raw_ns: 0,
        width: u64::MAX,
    };
    for _ in 0..200 {
        let t0 = now_ordered();
        let raw = monotonic_raw_ns();
        let t1 = now_ordered();
        let width = t1.wrapping_sub(t0);
        if width < best.width {
            best = Bracket {
                ticks_mid: t0 + width / 2,
                raw_ns: raw,
                width,
            };
        }
    }
    best
}

/// Measures the counter's rate against CLOCK_MONOTONIC_RAW over `window`.
pub fn calibrate_against_monotonic_raw(window: Duration) -> Calibration {
    let a = tightest_bracket();
    std::thread::sleep(window);
    let b = tightest_bracket();
    let ticks = (b.ticks_mid - a.ticks_mid) as f64;
    let ns = (b.raw_ns - a.raw_ns) as f64;
    let uncertainty = (a.width + b.width) as f64 / 2.0;
    Calibration {
        hz: ticks / ns * 1e9,
        uncertainty_ppm: uncertainty / ticks * 1e6,
    }
}

/// Parses the kernel's own TSC figure out of kernel log lines. A "Refined" line overrides
/// the "Detected" one, as it does in the kernel.
pub fn parse_kernel_log_tsc_hz<'a>(lines: impl Iterator<Item = &'a str>) -> Option<f64> {
    let mut detected = None;
    let mut refined = None;
    for line in lines {
        let mhz = |marker: &str| -> Option<f64> {
            let rest = &line[line.find(marker)? + marker.len()..];
            rest.split_whitespace().next()?.parse::<f64>().ok()
        };
        if let Some(m) = mhz("tsc: Refined TSC clocksource calibration: ") {
            refined = Some(m * 1e6);
        } else if let Some(m) = mhz("tsc: Detected ")
            && (line.contains("MHz processor") || line.contains("MHz TSC"))
        {
            detected = Some(m * 1e6);
        }
    }
    refined.or(detected)
}

/// Reads the kernel log through /dev/kmsg without blocking (needs root where
/// dmesg_restrict is set; absent otherwise).
fn kernel_log_tsc_hz() -> Option<f64> {
    use rustix::fs::{Mode, OFlags, open};
    let fd = open(
        "/dev/kmsg",
        OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()?;
    let mut records = String::new();
    let mut buf = vec![0u8; 8192];
    loop {
        match rustix::io::read(&fd, &mut buf) {
            Ok(0) => break,
            Ok(n) => {
                records.push_str(&String::from_utf8_lossy(&buf[..n]));
                records.push('\n');
            }
            // EPIPE: a record was overwritten while we read; the next read continues.
            Err(rustix::io::Errno::PIPE) => continue,
            Err(_) => break,
        }
    }
    parse_kernel_log_tsc_hz(records.lines())
}

#[cfg(target_arch = "x86_64")]
fn cpuid_tsc_hz() -> Vec<(FrequencySource, f64)> {
    use core::arch::x86_64::__cpuid;
    let mut out = Vec::new();
    let max_leaf = __cpuid(0).eax;
    if max_leaf >= 0x15 {
        let l = __cpuid(0x15);
        if l.eax != 0 && l.ebx != 0 && l.ecx != 0 {
            out.push((
                FrequencySource::Cpuid15,
                l.ecx as f64 * l.ebx as f64 / l.eax as f64,
            ));
        }
    }
    let hypervisor = __cpuid(1).ecx & (1 << 31) != 0;
    if hypervisor && __cpuid(0x4000_0000).eax >= 0x4000_0010 {
        let khz = __cpuid(0x4000_0010).eax;
        if khz != 0 {
            out.push((FrequencySource::Cpuid40000010, khz as f64 * 1e3));
        }
    }
    out
}

#[cfg(target_arch = "x86_64")]
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;

/// The kernel's cyc2ns scale from the perf_event mmap page, when it publishes one
/// (`cap_user_time`; guests with kvm-clock as sched_clock do not).
#[cfg(target_arch = "x86_64")]
fn perf_page_scale() -> Option<Scale> {
    // perf_event_attr: type, size, config, then flags at offset 40.
    let mut attr = [0u8; 64];
    attr[0..4].copy_from_slice(&1u32.to_ne_bytes()); // PERF_TYPE_SOFTWARE
    attr[4..8].copy_from_slice(&64u32.to_ne_bytes()); // PERF_ATTR_SIZE_VER0
    attr[8..16].copy_from_slice(&9u64.to_ne_bytes()); // PERF_COUNT_SW_DUMMY
    let flags: u64 = 1 | (1 << 5) | (1 << 6); // disabled, exclude_kernel, exclude_hv
    attr[40..48].copy_from_slice(&flags.to_ne_bytes());
    // SAFETY: attr is a valid, fully initialised perf_event_attr of the size it declares.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            attr.as_ptr(),
            0,
            -1,
            -1,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if fd < 0 {
        return None;
    }
    let fd = fd as libc::c_int;
    let page = 4096;
    // SAFETY: mapping one read-only shared page of a perf fd we own; checked for failure.
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            page,
            libc::PROT_READ,
            libc::MAP_SHARED,
            fd,
            0,
        )
    };
    let result = if ptr == libc::MAP_FAILED {
        None
    } else {
        // SAFETY: the page is mapped, readable and at least 80 bytes long; the kernel
        // updates it under the seqlock at offset 8, which we re-check around the reads.
        let fields = unsafe {
            let base = ptr as *const u8;
            let lock = base.add(8) as *const u32;
            loop {
                let seq = std::ptr::read_volatile(lock);
                std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
                let caps = std::ptr::read_volatile(base.add(40) as *const u64);
                let shift = std::ptr::read_volatile(base.add(50) as *const u16);
                let mult = std::ptr::read_volatile(base.add(52) as *const u32);
                std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
                if std::ptr::read_volatile(lock) == seq {
                    break (caps, shift, mult);
                }
            }
        };
        // SAFETY: unmapping the page mapped above.
        unsafe { libc::munmap(ptr, page) };
        let (caps, shift, mult) = fields;
        let cap_user_time = caps & (1 << 3) != 0;
        (cap_user_time && mult != 0).then_some(Scale {
            mult: mult as u64,
            shift: shift as u32,
        })
    };
    // SAFETY: closing the fd we opened.
    unsafe { libc::close(fd) };
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_converts_both_ways() {
        let s = Scale::from_hz(2_596_138_000.0);
        // Truncating, as the kernel's mult/shift does: within 1 ns per second.
        assert!(s.to_ns(2_596_138_000).abs_diff(1_000_000_000) <= 1);
        assert!((s.hz() - 2_596_138_000.0).abs() < 1.0);
        let ticks = s.to_ticks(1_000_000);
        assert!((s.to_ns(ticks) as i64 - 1_000_000).abs() <= 1);
        // An hour of ticks does not overflow.
        assert!(s.to_ns(2_596_138_000 * 3600).abs_diff(3_600_000_000_000) <= 3600);
        assert_eq!(Scale::NS.to_ns(12345), 12345);
    }

    /// The 64-bit path gives the 128-bit quotient, on both sides of where it stops fitting.
    #[test]
    fn to_ticks_is_the_wide_quotient_at_any_ns() {
        for hz in [1e9, 2_596_138_000.0, 3.7e9] {
            let s = Scale::from_hz(hz);
            let limit = u64::MAX >> s.shift;
            for ns in [
                0,
                1,
                999,
                1_000_000_007,
                limit - 1,
                limit,
                limit + 1,
                u64::MAX,
            ] {
                let wide = (((ns as u128) << s.shift) / s.mult as u128).min(u64::MAX as u128);
                assert_eq!(s.to_ticks(ns) as u128, wide, "{hz} Hz, {ns} ns");
            }
        }
    }

    #[test]
    fn reads_the_kernel_boot_lines() {
        let log = [
            "6,120,62,-;tsc: Detected 2596.138 MHz processor",
            "6,500,9,-;other",
        ];
        assert_eq!(
            parse_kernel_log_tsc_hz(log.into_iter()),
            Some(2_596_138_000.0)
        );
        let log = [
            "[0.000] tsc: Detected 2400.000 MHz processor",
            "[1.2] tsc: Refined TSC clocksource calibration: 2399.987 MHz",
        ];
        assert_eq!(
            parse_kernel_log_tsc_hz(log.into_iter()),
            Some(2_399_987_000.0)
        );
        assert_eq!(
            parse_kernel_log_tsc_hz(["cpu MHz : 3000"].into_iter()),
            None
        );
    }

    #[test]
    fn finds_tsc_flags() {
        let info = "processor : 0\nflags : fpu tsc msr rdtscp constant_tsc nonstop_tsc\n";
        assert_eq!(
            cpuinfo_tsc_flags(info),
            ["tsc", "rdtscp", "constant_tsc", "nonstop_tsc"]
        );
    }

    /// Ground truth: the scale must turn a known sleep into the same number of ns as the
    /// kernel's clock within a few hundred ppm plus the clock reads' cost. The kernel's
    /// clock is CLOCK_MONOTONIC_RAW read in the tightest of many brackets: MONOTONIC is
    /// slewed by NTP (chrony slews at up to 83 333 ppm while it corrects an offset), and a
    /// single unbracketed read on a noisy CI host can be preempted between the two clocks.
    #[test]
    fn detected_scale_agrees_with_the_kernel_clock() {
        let (info, _) = ClockInfo::detect();
        let a = tightest_bracket();
        std::thread::sleep(Duration::from_millis(30));
        let b = tightest_bracket();
        let ours = info.scale.to_ns(b.ticks_mid - a.ticks_mid) as f64;
        let kernel = (b.raw_ns - a.raw_ns) as f64;
        let reads = info.scale.to_ns(a.width + b.width) as f64;
        assert!(
            (ours - kernel).abs() < kernel * 300e-6 + reads + 1_000.0,
            "ours {ours} ns, kernel {kernel} ns, brackets {reads} ns"
        );
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn calibration_matches_the_kernel_log_when_clocksource_is_tsc() {
        let (info, _) = ClockInfo::detect();
        if info.clocksource.as_deref() != Some("tsc") {
            eprintln!("skipped: clocksource is not tsc, calibration is only an estimate");
            return;
        }
        let Some(log) = info
            .cross_checks
            .iter()
            .find(|c| c.source == FrequencySource::KernelLog)
        else {
            eprintln!("skipped: the kernel log is not readable (not root?)");
            return;
        };
        // The boot line has 1 kHz resolution: 0.4 ppm at 2.6 GHz. Allow 20 ppm.
        assert!(log.diff_ppm.abs() < 20.0, "{log:?}");
    }
}
