//! The `ptp` probe: finds PTP hardware clocks (every `/dev/ptp*`, one named by path, or
//! the PHC of a named network interface) and reads each against CLOCK_REALTIME by every
//! method Linux offers, recording for each whether the device supports it, the PHC − system
//! offset, the window that brackets each reading, and what one reading costs.
//!
//! Each sample is one call that yields one reading: PTP_SYS_OFFSET and
//! PTP_SYS_OFFSET_EXTENDED are asked for a single sample, so a sample's cost is that of
//! the whole call, system-clock reads included, as a daemon asking for one reading pays
//! it. The dynamic-clock read is bracketed by two CLOCK_REALTIME reads here, in user
//! space, and its cost covers all three. Offsets are PHC − system: a PHC kept on TAI (as
//! ptp4l keeps it) reads about 37 s ahead of CLOCK_REALTIME.

use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use serde::{Deserialize, Serialize};

use crate::engine::clock::{Scale, now_ordered};
use crate::engine::ptp_ioctl::{
    self, PTP_MAX_SAMPLES, PtpSysOffset, PtpSysOffsetExtended, PtpSysOffsetPrecise,
};
use crate::probes::record::HistogramRecord;
use crate::stats::{LatencyHistogram, Summary};

/// Where PTP clock devices live.
pub const DEFAULT_DEV_DIR: &str = "/dev";

/// Calls made and thrown away after the support check, so that the first recorded one
/// does not pay for cold caches.
const WARMUP_CALLS: u32 = 10;

/// What the command line asked to measure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Every `ptp<N>` in the device directory.
    All,
    /// One device, by path.
    Path(PathBuf),
    /// The PHC of one network interface.
    Interface(String),
}

impl Target {
    /// A path if it starts with '/', holds one, or names an existing file; else an
    /// interface name.
    pub fn parse(arg: Option<&str>) -> Target {
        Target::classify(arg, |p| p.exists())
    }

    /// `parse`, with `exists` saying whether a file is there.
    fn classify(arg: Option<&str>, exists: impl Fn(&Path) -> bool) -> Target {
        match arg {
            None => Target::All,
            Some(a) if a.contains('/') || exists(Path::new(a)) => Target::Path(a.into()),
            Some(a) => Target::Interface(a.to_string()),
        }
    }
}

/// A PTP clock to measure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
    pub path: PathBuf,
    /// N of /dev/ptpN, when the path (or what it links to) is named so.
    pub clock_index: Option<u32>,
    /// The interface it was found through, if any.
    pub interface: Option<String>,
}

/// Why the devices to measure could not be found or opened; each names the input.
#[derive(Debug, thiserror::Error)]
pub enum PtpError {
    /// A device path that does not exist.
    #[error("{path}: no such PTP clock device ({present})", path = path.display())]
    NoSuchDevice { path: PathBuf, present: String },
    /// A path that exists but cannot be a clock.
    #[error("{path} is {kind}, not a PTP clock device (a character device such as /dev/ptp0)", path = path.display())]
    NotADevice { path: PathBuf, kind: &'static str },
    /// A character device of another kind: never opened.
    #[error(
        "{path} is not a PTP clock (it is a '{subsystem}' device); not opening it",
        path = path.display()
    )]
    NotAPtpDevice { path: PathBuf, subsystem: String },
    /// A name the kernel would never give an interface.
    #[error("'{name}' is neither a device path nor an interface name: {reason}")]
    BadInterfaceName { name: String, reason: &'static str },
    /// No interface of that name.
    #[error("no network interface named '{name}'{hint}")]
    NoSuchInterface { name: String, hint: String },
    /// The interface exists but has no PHC.
    #[error("interface {name} has no PTP hardware clock ({why})")]
    NoPhc { name: String, why: &'static str },
    /// The ethtool query failed for another reason.
    #[error("cannot ask interface {name} for its PTP clock: {source}")]
    InterfaceQuery { name: String, source: io::Error },
    /// The interface names a PHC whose device node is missing.
    #[error("interface {name} has PTP clock {index}, but {path} does not exist", path = path.display())]
    PhcMissing {
        name: String,
        index: u32,
        path: PathBuf,
    },
    /// The device directory could not be listed.
    #[error("cannot list {dir}: {source}", dir = dir.display())]
    ListDir { dir: PathBuf, source: io::Error },
    /// The device could not be opened (or examined).
    #[error("cannot open {path}: {source}{hint}", path = path.display())]
    Open {
        path: PathBuf,
        source: io::Error,
        hint: &'static str,
    },
}

/// Every `ptp<N>` in `dir`, by N. A missing directory holds none.
pub fn discover(dir: &Path) -> Result<Vec<Device>, PtpError> {
    let list = match std::fs::read_dir(dir) {
        Ok(l) => l,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(PtpError::ListDir {
                dir: dir.into(),
                source,
            });
        }
    };
    let mut found: Vec<Device> = list
        .filter_map(Result::ok)
        .filter_map(|e| {
            let index = ptp_index(e.file_name().to_str()?)?;
            Some(Device {
                path: e.path(),
                clock_index: Some(index),
                interface: None,
            })
        })
        .collect();
    found.sort_by_key(|d| d.clock_index);
    Ok(found)
}

/// N from "ptpN".
fn ptp_index(name: &str) -> Option<u32> {
    let digits = name.strip_prefix("ptp")?;
    match digits.bytes().all(|b| b.is_ascii_digit()) {
        true => digits.parse().ok(),
        false => None,
    }
}

/// The devices `target` names, with `dir` as the device directory (for `All` and for an
/// interface's /dev/ptpN). `All` may find none; the others find one or fail.
pub fn resolve(target: &Target, dir: &Path) -> Result<Vec<Device>, PtpError> {
    match target {
        Target::All => discover(dir),
        Target::Path(p) => named_device(p, dir).map(|d| vec![d]),
        Target::Interface(name) => interface_device(name, dir).map(|d| vec![d]),
    }
}

fn named_device(path: &Path, dir: &Path) -> Result<Device, PtpError> {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(PtpError::NoSuchDevice {
                path: path.into(),
                present: present_devices(dir),
            });
        }
        Err(source) => return Err(open_error(path, source)),
    };
    let ft = meta.file_type();
    if !ft.is_char_device() {
        let kind = match () {
            _ if ft.is_dir() => "a directory",
            _ if ft.is_file() => "a regular file",
            _ if ft.is_block_device() => "a block device",
            _ => "not a character device",
        };
        return Err(PtpError::NotADevice {
            path: path.into(),
            kind,
        });
    }
    if let Some(subsystem) = char_subsystem(&meta).filter(|s| s != "ptp") {
        return Err(PtpError::NotAPtpDevice {
            path: path.into(),
            subsystem,
        });
    }
    // /dev/ptp_hyperv and friends are links to a ptpN.
    let index = file_index(path).or_else(|| file_index(&std::fs::canonicalize(path).ok()?));
    Ok(Device {
        path: path.into(),
        clock_index: index,
        interface: None,
    })
}

/// The kernel subsystem of a character device (`ptp`, `mem`, `misc`, `tty`, …), from
/// /sys/dev/char/MAJOR:MINOR/subsystem; `None` where sysfs does not say. A device is
/// opened only when it is a PTP clock: opening some others has effects of its own
/// (/dev/watchdog arms the watchdog; a serial port may wait for its carrier).
fn char_subsystem(meta: &std::fs::Metadata) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let dev = meta.rdev();
    // glibc's gnu_dev_major / gnu_dev_minor.
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    let link = std::fs::read_link(format!("/sys/dev/char/{major}:{minor}/subsystem")).ok()?;
    Some(link.file_name()?.to_string_lossy().into_owned())
}

fn file_index(path: &Path) -> Option<u32> {
    ptp_index(path.file_name()?.to_str()?)
}

/// "this host has /dev/ptp0, /dev/ptp1", for an error about a missing one.
fn present_devices(dir: &Path) -> String {
    let found = discover(dir).unwrap_or_default();
    let names: Vec<String> = found.iter().map(|d| d.path.display().to_string()).collect();
    match names.is_empty() {
        true => format!("there are no {}/ptp* devices on this host", dir.display()),
        false => format!("this host has {}", names.join(", ")),
    }
}

fn interface_device(name: &str, dir: &Path) -> Result<Device, PtpError> {
    if let Some(reason) = ptp_ioctl::invalid_ifname(name) {
        return Err(PtpError::BadInterfaceName {
            name: name.into(),
            reason,
        });
    }
    let index = match ptp_ioctl::phc_index_of(name) {
        Ok(Some(i)) => i,
        Ok(None) => {
            return Err(PtpError::NoPhc {
                name: name.into(),
                why: "its driver reports PHC index -1",
            });
        }
        Err(e) => return Err(interface_error(name, dir, e)),
    };
    let path = dir.join(format!("ptp{index}"));
    if !path.exists() {
        return Err(PtpError::PhcMissing {
            name: name.into(),
            index,
            path,
        });
    }
    Ok(Device {
        path,
        clock_index: Some(index),
        interface: Some(name.into()),
    })
}

fn interface_error(name: &str, dir: &Path, e: io::Error) -> PtpError {
    match e.raw_os_error() {
        Some(libc::ENODEV) => {
            let hint = match ptp_index(name) {
                Some(_) => format!(
                    " (a PTP clock is given by its path: {}/{name})",
                    dir.display()
                ),
                None => String::new(),
            };
            PtpError::NoSuchInterface {
                name: name.into(),
                hint,
            }
        }
        Some(libc::EOPNOTSUPP) => PtpError::NoPhc {
            name: name.into(),
            why: "its driver does not report time stamping information",
        },
        _ => PtpError::InterfaceQuery {
            name: name.into(),
            source: e,
        },
    }
}

fn open_error(path: &Path, source: io::Error) -> PtpError {
    let hint = match source.kind() {
        io::ErrorKind::PermissionDenied => {
            "; reading a PTP clock needs read access to its device (root, or its group)"
        }
        _ => "",
    };
    PtpError::Open {
        path: path.into(),
        source,
        hint,
    }
}

/// The ways of reading a PHC against the system clock, in the order they are tried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// PTP_SYS_OFFSET: sys, phc, sys.
    SysOffset,
    /// PTP_SYS_OFFSET_EXTENDED: the driver's own pre/post system reads around the PHC's.
    SysOffsetExtended,
    /// PTP_SYS_OFFSET_PRECISE: a hardware cross-timestamp, no window.
    SysOffsetPrecise,
    /// clock_gettime on the device as a dynamic POSIX clock, between two CLOCK_REALTIME
    /// reads.
    ClockGettime,
}

impl Method {
    pub const ALL: [Method; 4] = [
        Method::SysOffset,
        Method::SysOffsetExtended,
        Method::SysOffsetPrecise,
        Method::ClockGettime,
    ];

    /// The name a user knows it by.
    pub fn label(self) -> &'static str {
        match self {
            Method::SysOffset => "PTP_SYS_OFFSET",
            Method::SysOffsetExtended => "PTP_SYS_OFFSET_EXTENDED",
            Method::SysOffsetPrecise => "PTP_SYS_OFFSET_PRECISE",
            Method::ClockGettime => "clock_gettime(FD_TO_CLOCKID)",
        }
    }
}

impl std::fmt::Display for Method {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.label())
    }
}

/// How a method fared on a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MethodStatus {
    /// Measured (possibly fewer samples than asked, when interrupted).
    Ok,
    /// The device or its driver does not offer it (EOPNOTSUPP, ENOTTY or EINVAL).
    NotSupported,
    /// It failed with another error, at once or part-way.
    Failed,
    /// Not tried: the run was stopped first.
    Skipped,
}

/// One reading: PHC − system, and the system-clock window that brackets the PHC read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reading {
    pub offset_ns: i64,
    /// post − pre; below 0 only when the system clock stepped back inside the call.
    pub window_ns: i64,
}

fn clamp_i64(v: i128) -> i64 {
    v.clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

/// The reading from system times `pre` and `post` around PHC time `phc`, all in ns:
/// offset = phc − (pre + post) / 2, window = post − pre.
pub fn bracket(pre: i128, phc: i128, post: i128) -> Reading {
    Reading {
        offset_ns: clamp_i64(phc - (pre + post).div_euclid(2)),
        window_ns: clamp_i64(post - pre),
    }
}

/// Every reading a PTP_SYS_OFFSET answer holds: ts = [sys, phc, sys, phc, …, sys], so
/// reading i is (ts[2i], ts[2i+1], ts[2i+2]). `n_samples` beyond the buffer is clamped.
pub fn sys_offset_readings(buf: &PtpSysOffset) -> Vec<Reading> {
    let n = (buf.n_samples as usize).min(PTP_MAX_SAMPLES);
    (0..n)
        .map(|i| {
            let t = &buf.ts[2 * i..2 * i + 3];
            bracket(t[0].ns(), t[1].ns(), t[2].ns())
        })
        .collect()
}

/// Every reading a PTP_SYS_OFFSET_EXTENDED answer holds: triplets (pre, phc, post).
pub fn extended_readings(buf: &PtpSysOffsetExtended) -> Vec<Reading> {
    let n = (buf.n_samples as usize).min(PTP_MAX_SAMPLES);
    buf.ts[..n]
        .iter()
        .map(|[pre, phc, post]| bracket(pre.ns(), phc.ns(), post.ns()))
        .collect()
}

/// The reading of a PTP_SYS_OFFSET_PRECISE answer: the device and the system clock
/// sampled at one instant, so the window is 0.
pub fn precise_reading(buf: &PtpSysOffsetPrecise) -> Reading {
    Reading {
        offset_ns: clamp_i64(buf.device.ns() - buf.sys_realtime.ns()),
        window_ns: 0,
    }
}

/// One call of `method`, for one reading.
fn read_once(method: Method, fd: BorrowedFd<'_>) -> io::Result<Reading> {
    // The first sample only, decoded in place: nothing is allocated in the timed call, so
    // every method's cost means the same thing.
    let none = || io::Error::new(io::ErrorKind::InvalidData, "the answer held no sample");
    match method {
        Method::SysOffset => {
            let b = ptp_ioctl::sys_offset(fd, 1)?;
            if b.n_samples == 0 {
                return Err(none());
            }
            Ok(bracket(b.ts[0].ns(), b.ts[1].ns(), b.ts[2].ns()))
        }
        Method::SysOffsetExtended => {
            let b = ptp_ioctl::sys_offset_extended(fd, 1)?;
            if b.n_samples == 0 {
                return Err(none());
            }
            let [pre, phc, post] = &b.ts[0];
            Ok(bracket(pre.ns(), phc.ns(), post.ns()))
        }
        Method::SysOffsetPrecise => Ok(precise_reading(&ptp_ioctl::sys_offset_precise(fd)?)),
        Method::ClockGettime => {
            let pre = crate::engine::clock::realtime_ns() as i128;
            let phc = ptp_ioctl::read_dynamic_clock(fd)?;
            let post = crate::engine::clock::realtime_ns() as i128;
            let phc = phc.tv_sec as i128 * 1_000_000_000 + phc.tv_nsec as i128;
            Ok(bracket(pre, phc, post))
        }
    }
}

/// Whether an error means "this device does not offer that", rather than a failure.
fn is_unsupported(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EOPNOTSUPP | libc::ENOTTY | libc::EINVAL)
    )
}

/// The short name of an errno (`engine::errno::name`), as PTP results carry it.
pub use crate::engine::errno::name as errno_name;

/// The PHC − system offsets of a method's readings, in ns (signed). Percentiles are
/// exact (nearest rank over every reading); the spread, max − min, includes any drift
/// of the PHC against the system clock over the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OffsetSummary {
    pub min_ns: i64,
    pub p1_ns: i64,
    pub p50_ns: i64,
    pub p99_ns: i64,
    pub max_ns: i64,
    pub mean_ns: f64,
    pub spread_ns: u64,
}

impl OffsetSummary {
    /// The summary of `values`, `None` when there are none. Sorts them.
    pub fn of(values: &mut [i64]) -> Option<OffsetSummary> {
        values.sort_unstable();
        let (&min, &max) = (values.first()?, values.last()?);
        let n = values.len();
        // Nearest rank: the smallest value with at least q of them at or below it.
        let rank = |q: f64| values[((q * n as f64).ceil() as usize).clamp(1, n) - 1];
        let sum: i128 = values.iter().map(|&v| v as i128).sum();
        Some(OffsetSummary {
            min_ns: min,
            p1_ns: rank(0.01),
            p50_ns: rank(0.5),
            p99_ns: rank(0.99),
            max_ns: max,
            mean_ns: sum as f64 / n as f64,
            spread_ns: max.abs_diff(min),
        })
    }
}

/// One method on one device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MethodResult {
    pub method: Method,
    pub status: MethodStatus,
    /// The device answered the method's first call.
    pub supported: bool,
    /// The errno of the call that refused or failed, if one did.
    pub errno: Option<i32>,
    /// Its message.
    pub error: Option<String>,
    /// Readings recorded (one per call).
    pub samples: u64,
    /// PHC − CLOCK_REALTIME, signed.
    pub offset: Option<OffsetSummary>,
    /// Each reading's bracketing window, post − pre (0 for PTP_SYS_OFFSET_PRECISE).
    pub window: Summary,
    /// Windows below 0 (the system clock stepped back inside a call), recorded as 0.
    pub negative_windows: u64,
    /// Each call's cost, timed with the TSC around it.
    pub cost: Summary,
    pub cost_histogram: Option<HistogramRecord>,
}

impl MethodResult {
    fn empty(method: Method, status: MethodStatus) -> MethodResult {
        MethodResult {
            method,
            status,
            supported: false,
            errno: None,
            error: None,
            samples: 0,
            offset: None,
            window: Summary::default(),
            negative_windows: 0,
            cost: Summary::default(),
            cost_histogram: None,
        }
    }

    /// A method whose first call failed: unsupported, or failed for another reason.
    fn refused(method: Method, e: &io::Error) -> MethodResult {
        let status = match is_unsupported(e) {
            true => MethodStatus::NotSupported,
            false => MethodStatus::Failed,
        };
        MethodResult {
            errno: e.raw_os_error(),
            error: Some(e.to_string()),
            ..MethodResult::empty(method, status)
        }
    }
}

/// One device's results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PtpEntry {
    /// The device path measured.
    pub device: String,
    /// N of /dev/ptpN.
    pub clock_index: Option<u32>,
    /// The driver's name for the clock (/sys/class/ptp/ptpN/clock_name).
    pub clock_name: Option<String>,
    /// The network interface it was found through, when one was named.
    pub interface: Option<String>,
    /// Samples asked for per method (`-n`).
    pub samples_requested: u32,
    /// Every method, in the order tried.
    pub methods: Vec<MethodResult>,
}

impl PtpEntry {
    /// Every method was refused as unsupported: the device is no PTP clock.
    pub fn answered_nothing(&self) -> bool {
        self.methods
            .iter()
            .all(|m| m.status == MethodStatus::NotSupported)
    }
}

/// The measurement's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PtpConfig {
    /// Samples per method.
    pub samples: u32,
}

/// Opens `dev` and measures every method on it, `scale` converting counter ticks to ns.
/// Methods not reached before `stop` is set are skipped.
pub fn measure(
    dev: &Device,
    cfg: &PtpConfig,
    scale: Scale,
    stop: &AtomicBool,
) -> Result<PtpEntry, PtpError> {
    // Non-blocking: a PTP clock's ioctls do not care, and nothing else may wait in open.
    let file = {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&dev.path)
    }
    .map_err(|e| open_error(&dev.path, e))?;
    let methods = Method::ALL
        .iter()
        .map(|&m| match stop.load(Ordering::Relaxed) {
            true => MethodResult::empty(m, MethodStatus::Skipped),
            false => measure_method(m, file.as_fd(), cfg.samples, scale, stop),
        })
        .collect();
    Ok(PtpEntry {
        device: dev.path.display().to_string(),
        clock_index: dev.clock_index,
        clock_name: dev.clock_index.and_then(clock_name),
        interface: dev.interface.clone(),
        samples_requested: cfg.samples,
        methods,
    })
}

fn clock_name(index: u32) -> Option<String> {
    let text = std::fs::read_to_string(format!("/sys/class/ptp/ptp{index}/clock_name")).ok()?;
    Some(text.trim().to_string()).filter(|s| !s.is_empty())
}

/// What the recorded calls of one method gathered.
struct Samples {
    offsets: Vec<i64>,
    window: LatencyHistogram,
    negative_windows: u64,
    cost: LatencyHistogram,
}

/// One method on an open device.
fn measure_method(
    method: Method,
    fd: BorrowedFd<'_>,
    n: u32,
    scale: Scale,
    stop: &AtomicBool,
) -> MethodResult {
    sample(method, || read_once(method, fd), n, scale, stop)
}

/// The support check, the warm-up, then `n` timed calls of `read` (fewer if stopped or
/// failing).
fn sample(
    method: Method,
    mut read: impl FnMut() -> io::Result<Reading>,
    n: u32,
    scale: Scale,
    stop: &AtomicBool,
) -> MethodResult {
    if let Err(e) = read() {
        return MethodResult::refused(method, &e);
    }
    for _ in 0..WARMUP_CALLS {
        let _ = read();
    }
    let mut s = Samples {
        offsets: Vec::with_capacity(n as usize),
        window: LatencyHistogram::new(),
        negative_windows: 0,
        cost: LatencyHistogram::new(),
    };
    let mut failure = None;
    for _ in 0..n {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let t0 = now_ordered();
        let r = read();
        let t1 = now_ordered();
        match r {
            Ok(r) => record(&mut s, r, scale.to_ns(t1.saturating_sub(t0))),
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    finish(method, s, failure)
}

fn record(s: &mut Samples, r: Reading, cost_ns: u64) {
    s.offsets.push(r.offset_ns);
    if r.window_ns < 0 {
        s.negative_windows += 1;
    }
    s.window.record(r.window_ns.max(0) as u64);
    s.cost.record(cost_ns);
}

fn finish(method: Method, mut s: Samples, failure: Option<io::Error>) -> MethodResult {
    let status = match failure {
        Some(_) => MethodStatus::Failed,
        None => MethodStatus::Ok,
    };
    MethodResult {
        method,
        status,
        supported: true,
        errno: failure.as_ref().and_then(io::Error::raw_os_error),
        error: failure.as_ref().map(io::Error::to_string),
        samples: s.offsets.len() as u64,
        offset: OffsetSummary::of(&mut s.offsets),
        window: s.window.summary(),
        negative_windows: s.negative_windows,
        cost: s.cost.summary(),
        cost_histogram: (s.cost.count() > 0).then(|| HistogramRecord::from_hist(&s.cost)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::ptp_ioctl::PtpClockTime;

    fn t(ns: i64) -> PtpClockTime {
        PtpClockTime {
            sec: ns.div_euclid(1_000_000_000),
            nsec: ns.rem_euclid(1_000_000_000) as u32,
            reserved: 0,
        }
    }

    #[test]
    fn sys_offset_buffer_gives_offset_and_window_per_sample() {
        // Two samples: sys 1.000000000 s, phc 38.000000150, sys 1.000000200 (offset
        // 37 s − 100 ns + 150 ns = 37 s + 50 ns, window 200 ns); then phc 38.000000400,
        // sys 1.000000500 (offset 38.0000004 − 1.00000035 = 37 s + 50 ns, window 300).
        let mut buf = PtpSysOffset {
            n_samples: 2,
            ..Default::default()
        };
        buf.ts[0] = t(1_000_000_000);
        buf.ts[1] = t(38_000_000_150);
        buf.ts[2] = t(1_000_000_200);
        buf.ts[3] = t(38_000_000_400);
        buf.ts[4] = t(1_000_000_500);
        let r = sys_offset_readings(&buf);
        assert_eq!(
            r,
            vec![
                Reading {
                    offset_ns: 37_000_000_050,
                    window_ns: 200
                },
                Reading {
                    offset_ns: 37_000_000_050,
                    window_ns: 300
                },
            ]
        );
    }

    #[test]
    fn negative_offsets_and_a_sample_count_beyond_the_buffer() {
        let mut buf = PtpSysOffset {
            n_samples: 1000,
            ..Default::default()
        };
        buf.ts[0] = t(5_000);
        buf.ts[1] = t(1_000);
        buf.ts[2] = t(5_100);
        let r = sys_offset_readings(&buf);
        assert_eq!(r.len(), PTP_MAX_SAMPLES, "n_samples is clamped, no panic");
        assert_eq!(
            r[0],
            Reading {
                offset_ns: -4_050,
                window_ns: 100
            }
        );
    }

    #[test]
    fn extended_and_precise_buffers() {
        let mut buf = PtpSysOffsetExtended {
            n_samples: 1,
            ..Default::default()
        };
        buf.ts[0] = [t(2_000), t(2_500), t(2_040)];
        assert_eq!(
            extended_readings(&buf),
            vec![Reading {
                offset_ns: 480,
                window_ns: 40
            }]
        );
        let p = PtpSysOffsetPrecise {
            device: t(10_000_000_000),
            sys_realtime: t(10_000_000_123),
            ..Default::default()
        };
        assert_eq!(
            precise_reading(&p),
            Reading {
                offset_ns: -123,
                window_ns: 0
            }
        );
    }

    #[test]
    fn offset_summary_percentiles_are_exact_nearest_rank() {
        let mut v: Vec<i64> = (1..=100).rev().map(|x| x - 50).collect(); // -49..=50
        let s = OffsetSummary::of(&mut v).unwrap();
        assert_eq!((s.min_ns, s.max_ns), (-49, 50));
        assert_eq!(s.p1_ns, -49);
        assert_eq!(s.p50_ns, 0);
        assert_eq!(s.p99_ns, 49);
        assert_eq!(s.spread_ns, 99);
        assert_eq!(s.mean_ns, 0.5);
        assert_eq!(OffsetSummary::of(&mut []), None);
        let mut extremes = vec![i64::MIN, i64::MAX];
        assert_eq!(
            OffsetSummary::of(&mut extremes).unwrap().spread_ns,
            u64::MAX
        );
    }

    #[test]
    fn arguments_are_paths_or_interface_names() {
        assert_eq!(Target::parse(None), Target::All);
        assert_eq!(
            Target::parse(Some("/dev/ptp99")),
            Target::Path("/dev/ptp99".into())
        );
        assert_eq!(
            Target::parse(Some("dev/ptp0")),
            Target::Path("dev/ptp0".into())
        );
        assert_eq!(
            Target::parse(Some("eth0")),
            Target::Interface("eth0".into())
        );
        // An existing file named without a '/' is a path; a missing one an interface.
        let only_ptp0 = |p: &Path| p == Path::new("ptp0");
        assert_eq!(
            Target::classify(Some("ptp0"), only_ptp0),
            Target::Path("ptp0".into())
        );
        assert_eq!(
            Target::classify(Some("ptp1"), only_ptp0),
            Target::Interface("ptp1".into())
        );
    }

    #[test]
    fn discovery_finds_ptp_n_only_in_index_order() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["ptp10", "ptp2", "ptp_hyperv", "ptpx", "pps0", "ptp"] {
            std::fs::write(dir.path().join(name), b"").unwrap();
        }
        let found = discover(dir.path()).unwrap();
        let idx: Vec<Option<u32>> = found.iter().map(|d| d.clock_index).collect();
        assert_eq!(idx, vec![Some(2), Some(10)]);
        assert_eq!(found[0].path, dir.path().join("ptp2"));
        let empty = tempfile::tempdir().unwrap();
        assert_eq!(resolve(&Target::All, empty.path()).unwrap(), vec![]);
        assert_eq!(discover(&empty.path().join("gone")).unwrap(), vec![]);
    }

    #[test]
    fn missing_devices_and_regular_files_are_clear_errors() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("ptp3"), b"").unwrap();
        let missing = dir.path().join("ptp99");
        let e = resolve(&Target::Path(missing.clone()), dir.path()).unwrap_err();
        assert!(matches!(e, PtpError::NoSuchDevice { .. }), "{e}");
        let msg = e.to_string();
        assert!(msg.contains("ptp99") && msg.contains("ptp3"), "{msg}");
        assert!(!msg.contains('\n'));
        // ptp3 exists but is a regular file.
        let e = resolve(&Target::Path(dir.path().join("ptp3")), dir.path()).unwrap_err();
        assert!(msg_has(&e, "is a regular file"), "{e}");
        let e = resolve(&Target::Path(dir.path().into()), dir.path()).unwrap_err();
        assert!(msg_has(&e, "is a directory"), "{e}");
    }

    fn msg_has(e: &PtpError, s: &str) -> bool {
        e.to_string().contains(s)
    }

    #[test]
    fn interfaces_without_a_phc_or_that_do_not_exist() {
        let dir = tempfile::tempdir().unwrap();
        let lo = resolve(&Target::Interface("lo".into()), dir.path());
        match lo {
            Err(PtpError::NoPhc { name, .. }) => assert_eq!(name, "lo"),
            Err(PtpError::InterfaceQuery { source, .. }) => {
                eprintln!("SKIPPED loopback check: no AF_INET socket here: {source}")
            }
            other => panic!("lo: {other:?}"),
        }
        let e = resolve(&Target::Interface("nosuchif0".into()), dir.path()).unwrap_err();
        assert!(
            matches!(
                e,
                PtpError::NoSuchInterface { .. } | PtpError::InterfaceQuery { .. }
            ),
            "{e}"
        );
        let e = resolve(&Target::Interface("ptp0".into()), dir.path()).unwrap_err();
        if let PtpError::NoSuchInterface { hint, .. } = &e {
            assert!(hint.contains("ptp0"), "{e}");
        }
        let e = resolve(&Target::Interface("much-too-long-name".into()), dir.path());
        assert!(matches!(e, Err(PtpError::BadInterfaceName { .. })));
    }

    #[test]
    fn a_device_that_is_no_clock_answers_not_supported() {
        // A regular file opened as if it were a clock (the probe's own guard bypassed):
        // every ioctl is ENOTTY and the dynamic clock EINVAL, each "not supported".
        let file = tempfile::NamedTempFile::new().unwrap();
        let dev = Device {
            path: file.path().into(),
            clock_index: None,
            interface: None,
        };
        let stop = AtomicBool::new(false);
        let e = measure(&dev, &PtpConfig { samples: 5 }, Scale::NS, &stop).unwrap();
        assert_eq!(e.methods.len(), 4);
        for m in &e.methods {
            assert_eq!(m.status, MethodStatus::NotSupported, "{m:?}");
            assert!(!m.supported);
            assert_eq!(m.samples, 0);
            assert!(m.errno.is_some() && m.error.is_some());
        }
        assert_eq!(e.methods[0].errno, Some(libc::ENOTTY));
        assert_eq!(e.methods[3].errno, Some(libc::EINVAL));
        assert!(e.answered_nothing());
        // A stopped run skips every method.
        stop.store(true, Ordering::Relaxed);
        let e = measure(&dev, &PtpConfig { samples: 5 }, Scale::NS, &stop).unwrap();
        assert!(e.methods.iter().all(|m| m.status == MethodStatus::Skipped));
        assert!(!e.answered_nothing());
    }

    #[test]
    fn unsupported_errnos_are_told_from_failures() {
        for errno in [libc::EOPNOTSUPP, libc::ENOTTY, libc::EINVAL] {
            let r = MethodResult::refused(Method::SysOffset, &io::Error::from_raw_os_error(errno));
            assert_eq!(r.status, MethodStatus::NotSupported);
            assert_eq!(r.errno, Some(errno));
        }
        let r = MethodResult::refused(Method::SysOffset, &io::Error::from_raw_os_error(libc::EIO));
        assert_eq!(r.status, MethodStatus::Failed);
        assert_eq!(errno_name(libc::EOPNOTSUPP), "EOPNOTSUPP");
        assert_eq!(errno_name(9999), "errno 9999");
    }

    #[test]
    fn recorded_samples_become_a_result() {
        let mut s = Samples {
            offsets: Vec::new(),
            window: LatencyHistogram::new(),
            negative_windows: 0,
            cost: LatencyHistogram::new(),
        };
        for (off, win, cost) in [(-10, 100, 1000), (20, -5, 2000), (5, 300, 3000)] {
            let r = Reading {
                offset_ns: off,
                window_ns: win,
            };
            record(&mut s, r, cost);
        }
        let fail = io::Error::from_raw_os_error(libc::ENODEV);
        let m = finish(Method::SysOffsetExtended, s, Some(fail));
        assert_eq!(m.status, MethodStatus::Failed);
        assert!(m.supported);
        assert_eq!(m.errno, Some(libc::ENODEV));
        assert_eq!(m.samples, 3);
        let o = m.offset.unwrap();
        assert_eq!((o.min_ns, o.p50_ns, o.max_ns), (-10, 5, 20));
        assert_eq!(m.negative_windows, 1);
        assert_eq!((m.window.min_ns, m.window.max_ns), (Some(0), Some(300)));
        assert_eq!((m.cost.min_ns, m.cost.max_ns), (Some(1000), Some(3000)));
        assert!(m.cost_histogram.is_some());
    }

    /// A reader that answers `ok` readings (offset = call number) then fails with
    /// `then`, setting `stop` at call `stop_at`.
    fn scripted<'a>(
        ok: u32,
        then: i32,
        stop: &'a AtomicBool,
        stop_at: u32,
    ) -> impl FnMut() -> io::Result<Reading> + 'a {
        let mut calls = 0u32;
        move || {
            calls += 1;
            if calls == stop_at {
                stop.store(true, Ordering::Relaxed);
            }
            match calls <= ok {
                true => Ok(Reading {
                    offset_ns: calls as i64,
                    window_ns: 100,
                }),
                false => Err(io::Error::from_raw_os_error(then)),
            }
        }
    }

    #[test]
    fn the_sampling_loop_checks_support_warms_up_and_records_n() {
        let stop = AtomicBool::new(false);
        let m = Method::SysOffset;
        // The support check and the warm-up are not recorded: offsets start after them.
        let r = sample(m, scripted(u32::MAX, 0, &stop, 0), 100, Scale::NS, &stop);
        assert_eq!(
            (r.status, r.samples, r.cost.count),
            (MethodStatus::Ok, 100, 100)
        );
        let first = 1 + WARMUP_CALLS as i64 + 1;
        let o = r.offset.unwrap();
        assert_eq!((o.min_ns, o.max_ns), (first, first + 99));
        assert_eq!(r.window.p50_ns, Some(100));
        assert!(r.cost_histogram.is_some() && r.errno.is_none());
        // Refused at once: not supported, nothing recorded.
        let r = sample(
            m,
            scripted(0, libc::EOPNOTSUPP, &stop, 0),
            100,
            Scale::NS,
            &stop,
        );
        assert_eq!((r.status, r.samples), (MethodStatus::NotSupported, 0));
        assert_eq!(r.errno, Some(libc::EOPNOTSUPP));
        // Failing part-way keeps what was measured.
        let ok = 1 + WARMUP_CALLS + 7;
        let r = sample(m, scripted(ok, libc::EIO, &stop, 0), 100, Scale::NS, &stop);
        assert_eq!((r.status, r.samples), (MethodStatus::Failed, 7));
        assert!(r.supported);
        assert_eq!(r.errno, Some(libc::EIO));
        // A stop ends the loop early, without failing it.
        let at = 1 + WARMUP_CALLS + 20;
        let r = sample(m, scripted(u32::MAX, 0, &stop, at), 100, Scale::NS, &stop);
        assert_eq!((r.status, r.samples), (MethodStatus::Ok, 20));
    }
}
