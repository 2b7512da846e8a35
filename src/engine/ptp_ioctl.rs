//! The raw kernel interface of `jitterscope ptp`: the PTP clock ioctls that read a PHC
//! against the system clock, the ethtool ioctl that finds a network interface's PHC, and
//! the dynamic-clock read, each behind a safe function.
//!
//! The layouts and request numbers are the kernel's UAPI: `include/uapi/linux/ptp_clock.h`
//! (PTP_CLK_MAGIC '=', PTP_MAX_SAMPLES, `struct ptp_clock_time`, `ptp_sys_offset`,
//! `ptp_sys_offset_extended`, `ptp_sys_offset_precise` and the `PTP_SYS_OFFSET*`
//! requests), `include/uapi/linux/ethtool.h` (`ETHTOOL_GET_TS_INFO`,
//! `struct ethtool_ts_info`), `include/uapi/linux/sockios.h` (`SIOCETHTOOL`) and
//! `include/uapi/asm-generic/ioctl.h` (the `_IOC` encoding). The tests check them against
//! the `_IOC` formula, the literal values and the libc crate's own definitions.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

use rustix::time::{DynamicClockId, Timespec};

/// `_IOC` direction bits and the width of the size field. asm-generic/ioctl.h gives
/// the common encoding; powerpc, mips and sparc override it in their asm/ioctl.h.
#[cfg(not(any(
    target_arch = "powerpc",
    target_arch = "powerpc64",
    target_arch = "mips",
    target_arch = "mips64",
    target_arch = "sparc",
    target_arch = "sparc64"
)))]
mod ioc {
    pub const WRITE: u32 = 1;
    pub const READ: u32 = 2;
    pub const SIZEBITS: u32 = 14;
}
#[cfg(any(
    target_arch = "powerpc",
    target_arch = "powerpc64",
    target_arch = "mips",
    target_arch = "mips64",
    target_arch = "sparc",
    target_arch = "sparc64"
))]
mod ioc {
    pub const WRITE: u32 = 4;
    pub const READ: u32 = 2;
    pub const SIZEBITS: u32 = 13;
}

/// `_IOC(dir, type, nr, size)`: nr in bits 0–7, type in 8–15, size from bit 16, the
/// direction above the size.
const fn ioc(dir: u32, ty: u8, nr: u8, size: usize) -> u32 {
    (dir << (16 + ioc::SIZEBITS)) | ((size as u32) << 16) | ((ty as u32) << 8) | nr as u32
}

/// The ioctl type of PTP clocks (ptp_clock.h: `#define PTP_CLK_MAGIC '='`).
pub const PTP_CLK_MAGIC: u8 = b'=';
/// Most samples one PTP_SYS_OFFSET(_EXTENDED) call takes (ptp_clock.h).
pub const PTP_MAX_SAMPLES: usize = 25;

/// `struct ptp_clock_time` (ptp_clock.h): `__s64 sec; __u32 nsec; __u32 reserved;`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PtpClockTime {
    pub sec: i64,
    pub nsec: u32,
    pub reserved: u32,
}

impl PtpClockTime {
    /// Nanoseconds since the clock's epoch; 128 bits, so no device value can overflow.
    pub fn ns(&self) -> i128 {
        self.sec as i128 * 1_000_000_000 + self.nsec as i128
    }
}

/// `struct ptp_sys_offset` (ptp_clock.h): `__u32 n_samples; __u32 rsv[3]; struct
/// ptp_clock_time ts[2 * PTP_MAX_SAMPLES + 1];` with ts = sys, phc, sys, phc, …, sys.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PtpSysOffset {
    pub n_samples: u32,
    pub rsv: [u32; 3],
    pub ts: [PtpClockTime; 2 * PTP_MAX_SAMPLES + 1],
}

/// `struct ptp_sys_offset_extended` (ptp_clock.h): `__u32 n_samples; __kernel_clockid_t
/// clockid; __u32 rsv[2]; struct ptp_clock_time ts[PTP_MAX_SAMPLES][3];` with each
/// triplet pre, phc, post. `clockid` is `rsv[0]` in older headers; 0 (CLOCK_REALTIME)
/// means the same on both.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PtpSysOffsetExtended {
    pub n_samples: u32,
    pub clockid: i32,
    pub rsv: [u32; 2],
    pub ts: [[PtpClockTime; 3]; PTP_MAX_SAMPLES],
}

/// `struct ptp_sys_offset_precise` (ptp_clock.h): the device's own cross-timestamp.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PtpSysOffsetPrecise {
    pub device: PtpClockTime,
    pub sys_realtime: PtpClockTime,
    pub sys_monoraw: PtpClockTime,
    pub rsv: [u32; 4],
}

impl Default for PtpSysOffset {
    fn default() -> Self {
        PtpSysOffset {
            n_samples: 0,
            rsv: [0; 3],
            ts: [PtpClockTime::default(); 2 * PTP_MAX_SAMPLES + 1],
        }
    }
}

impl Default for PtpSysOffsetExtended {
    fn default() -> Self {
        PtpSysOffsetExtended {
            n_samples: 0,
            clockid: 0,
            rsv: [0; 2],
            ts: [[PtpClockTime::default(); 3]; PTP_MAX_SAMPLES],
        }
    }
}

/// `PTP_SYS_OFFSET = _IOW(PTP_CLK_MAGIC, 5, struct ptp_sys_offset)` (ptp_clock.h).
pub const PTP_SYS_OFFSET: u32 = ioc(ioc::WRITE, PTP_CLK_MAGIC, 5, size_of::<PtpSysOffset>());
/// `PTP_SYS_OFFSET_PRECISE = _IOWR(PTP_CLK_MAGIC, 8, struct ptp_sys_offset_precise)`.
pub const PTP_SYS_OFFSET_PRECISE: u32 = ioc(
    ioc::READ | ioc::WRITE,
    PTP_CLK_MAGIC,
    8,
    size_of::<PtpSysOffsetPrecise>(),
);
/// `PTP_SYS_OFFSET_EXTENDED = _IOWR(PTP_CLK_MAGIC, 9, struct ptp_sys_offset_extended)`.
pub const PTP_SYS_OFFSET_EXTENDED: u32 = ioc(
    ioc::READ | ioc::WRITE,
    PTP_CLK_MAGIC,
    9,
    size_of::<PtpSysOffsetExtended>(),
);

/// `SIOCETHTOOL` (linux/sockios.h): the ethtool request on a socket.
pub const SIOCETHTOOL: u32 = 0x8946;
/// `ETHTOOL_GET_TS_INFO` (linux/ethtool.h): time stamping and PHC information.
pub const ETHTOOL_GET_TS_INFO: u32 = 0x0000_0041;

/// `struct ethtool_ts_info` (linux/ethtool.h): `__u32 cmd; __u32 so_timestamping; __s32
/// phc_index; __u32 tx_types; __u32 tx_reserved[3]; __u32 rx_filters; __u32
/// rx_reserved[3];`: 11 × 4 = 44 bytes. `phc_index` is −1 when the interface has no PHC.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EthtoolTsInfo {
    pub cmd: u32,
    pub so_timestamping: u32,
    pub phc_index: i32,
    pub tx_types: u32,
    pub tx_reserved: [u32; 3],
    pub rx_filters: u32,
    pub rx_reserved: [u32; 3],
}

/// `IFNAMSIZ` (linux/if.h): an interface name and its NUL.
pub const IFNAMSIZ: usize = 16;

/// One ioctl whose argument is `arg`, read and written by the kernel.
fn ioctl_with<T>(fd: BorrowedFd<'_>, request: u32, arg: &mut T) -> io::Result<()> {
    // SAFETY: `fd` is a live descriptor for the duration of the borrow; `arg` is an
    // exclusive reference to a `#[repr(C)]` value of exactly the size encoded in
    // `request` (checked against the UAPI in the tests), so the kernel reads and writes
    // only memory we own. An ioctl the descriptor does not know fails with ENOTTY.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), request as _, arg as *mut T) };
    match rc {
        -1 => Err(io::Error::last_os_error()),
        _ => Ok(()),
    }
}

/// PTP_SYS_OFFSET with `n` samples (clamped to 1..=PTP_MAX_SAMPLES).
pub fn sys_offset(fd: BorrowedFd<'_>, n: u32) -> io::Result<PtpSysOffset> {
    let mut buf = PtpSysOffset {
        n_samples: n.clamp(1, PTP_MAX_SAMPLES as u32),
        ..Default::default()
    };
    ioctl_with(fd, PTP_SYS_OFFSET, &mut buf)?;
    Ok(buf)
}

/// PTP_SYS_OFFSET_EXTENDED with `n` samples (clamped to 1..=PTP_MAX_SAMPLES) against
/// CLOCK_REALTIME.
pub fn sys_offset_extended(fd: BorrowedFd<'_>, n: u32) -> io::Result<PtpSysOffsetExtended> {
    let mut buf = PtpSysOffsetExtended {
        n_samples: n.clamp(1, PTP_MAX_SAMPLES as u32),
        clockid: libc::CLOCK_REALTIME,
        ..Default::default()
    };
    ioctl_with(fd, PTP_SYS_OFFSET_EXTENDED, &mut buf)?;
    Ok(buf)
}

/// PTP_SYS_OFFSET_PRECISE: the device's hardware cross-timestamp.
pub fn sys_offset_precise(fd: BorrowedFd<'_>) -> io::Result<PtpSysOffsetPrecise> {
    let mut buf = PtpSysOffsetPrecise::default();
    ioctl_with(fd, PTP_SYS_OFFSET_PRECISE, &mut buf)?;
    Ok(buf)
}

/// `clock_gettime(FD_TO_CLOCKID(fd))`, FD_TO_CLOCKID(fd) = ((~fd) << 3) | 3: the PHC read
/// as a POSIX dynamic clock. EINVAL when `fd` is not a clock device.
pub fn read_dynamic_clock(fd: BorrowedFd<'_>) -> io::Result<Timespec> {
    rustix::time::clock_gettime_dynamic(DynamicClockId::Dynamic(fd)).map_err(io::Error::from)
}

/// Why an interface name cannot be one (the kernel's `dev_valid_name`): empty, too long,
/// "." or "..", or holding '/', ':', whitespace or NUL.
pub fn invalid_ifname(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        Some("it is empty")
    } else if name.len() >= IFNAMSIZ {
        Some("interface names are at most 15 bytes")
    } else if name == "." || name == ".." {
        Some("'.' and '..' are not interface names")
    } else if name
        .chars()
        .any(|c| c == '/' || c == ':' || c == '\0' || c.is_whitespace())
    {
        Some("interface names hold no '/', ':' or whitespace")
    } else {
        None
    }
}

/// The PHC index of network interface `name` (ETHTOOL_GET_TS_INFO through SIOCETHTOOL on
/// an AF_INET datagram socket), `None` when it has none. ENODEV: no such interface.
pub fn phc_index_of(name: &str) -> io::Result<Option<u32>> {
    if invalid_ifname(name).is_some() {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    let sock = rustix::net::socket(
        rustix::net::AddressFamily::INET,
        rustix::net::SocketType::DGRAM,
        None,
    )?;
    let mut info = EthtoolTsInfo {
        cmd: ETHTOOL_GET_TS_INFO,
        ..Default::default()
    };
    // SAFETY: ifreq is plain old data (a name and a union of integers and pointers), for
    // which all zeroes is a valid value.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in ifr.ifr_name.iter_mut().zip(name.bytes()) {
        *dst = src as libc::c_char;
    }
    ifr.ifr_ifru.ifru_data = (&mut info as *mut EthtoolTsInfo).cast();
    // SAFETY: `sock` is open; `ifr` is a zeroed ifreq whose name is NUL-terminated (the
    // name is under IFNAMSIZ bytes) and whose data points at `info`, a live
    // `ethtool_ts_info` the kernel fills through it; both outlive the call.
    let rc = unsafe { libc::ioctl(sock.as_raw_fd(), SIOCETHTOOL as _, &mut ifr) };
    if rc == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok(u32::try_from(info.phc_index).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `_IOC` from asm-generic/ioctl.h written out again, independently of `ioc`.
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    fn ioc_generic(dir: u32, ty: u32, nr: u32, size: u32) -> u32 {
        const IOC_WRITE: u32 = 1;
        const IOC_READ: u32 = 2;
        let dir = match dir {
            1 => IOC_WRITE,
            3 => IOC_READ | IOC_WRITE,
            _ => unreachable!(),
        };
        (dir << 30) | (size << 16) | (ty << 8) | nr
    }

    #[test]
    fn struct_sizes_match_the_uapi() {
        assert_eq!(size_of::<PtpClockTime>(), 16);
        assert_eq!(size_of::<PtpSysOffset>(), 832);
        assert_eq!(size_of::<PtpSysOffsetExtended>(), 1216);
        assert_eq!(size_of::<PtpSysOffsetPrecise>(), 64);
        // 11 × 4 bytes, as gcc's sizeof gives from linux/ethtool.h (not 48).
        assert_eq!(size_of::<EthtoolTsInfo>(), 44);
        assert_eq!(PTP_MAX_SAMPLES, 25);
        assert_eq!(PTP_CLK_MAGIC, 0x3d);
        // Field offsets the kernel writes to.
        assert_eq!(std::mem::offset_of!(PtpSysOffset, ts), 16);
        assert_eq!(std::mem::offset_of!(PtpSysOffsetExtended, clockid), 4);
        assert_eq!(std::mem::offset_of!(PtpSysOffsetExtended, ts), 16);
        assert_eq!(std::mem::offset_of!(PtpSysOffsetPrecise, sys_monoraw), 32);
        assert_eq!(std::mem::offset_of!(EthtoolTsInfo, phc_index), 8);
        assert_eq!(std::mem::offset_of!(EthtoolTsInfo, rx_filters), 28);
    }

    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    #[test]
    fn request_numbers_match_the_ioc_formula_and_the_literals() {
        assert_eq!(PTP_SYS_OFFSET, ioc_generic(1, 0x3d, 5, 832));
        assert_eq!(PTP_SYS_OFFSET_PRECISE, ioc_generic(3, 0x3d, 8, 64));
        assert_eq!(PTP_SYS_OFFSET_EXTENDED, ioc_generic(3, 0x3d, 9, 1216));
        assert_eq!(PTP_SYS_OFFSET, 0x4340_3d05);
        assert_eq!(PTP_SYS_OFFSET_PRECISE, 0xc040_3d08);
        assert_eq!(PTP_SYS_OFFSET_EXTENDED, 0xc4c0_3d09);
        assert_eq!(SIOCETHTOOL, 0x8946);
        assert_eq!(ETHTOOL_GET_TS_INFO, 0x41);
    }

    /// The libc crate transcribes the same headers: a second, independent source.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn layouts_and_requests_match_the_libc_crate() {
        assert_eq!(PTP_SYS_OFFSET as libc::Ioctl, libc::PTP_SYS_OFFSET);
        assert_eq!(
            PTP_SYS_OFFSET_PRECISE as libc::Ioctl,
            libc::PTP_SYS_OFFSET_PRECISE
        );
        assert_eq!(
            PTP_SYS_OFFSET_EXTENDED as libc::Ioctl,
            libc::PTP_SYS_OFFSET_EXTENDED
        );
        assert_eq!(PTP_MAX_SAMPLES, libc::PTP_MAX_SAMPLES as usize);
        assert_eq!(SIOCETHTOOL as libc::c_ulong, libc::SIOCETHTOOL);
        assert_eq!(IFNAMSIZ, libc::IFNAMSIZ);
        assert_eq!(size_of::<PtpClockTime>(), size_of::<libc::ptp_clock_time>());
        assert_eq!(size_of::<PtpSysOffset>(), size_of::<libc::ptp_sys_offset>());
        assert_eq!(
            size_of::<PtpSysOffsetExtended>(),
            size_of::<libc::ptp_sys_offset_extended>()
        );
        assert_eq!(
            size_of::<PtpSysOffsetPrecise>(),
            size_of::<libc::ptp_sys_offset_precise>()
        );
        assert_eq!(
            std::mem::offset_of!(PtpSysOffsetExtended, clockid),
            std::mem::offset_of!(libc::ptp_sys_offset_extended, clockid)
        );
    }

    #[test]
    fn clock_time_converts_to_ns_without_overflow() {
        let t = PtpClockTime {
            sec: 37,
            nsec: 5,
            reserved: 0,
        };
        assert_eq!(t.ns(), 37_000_000_005);
        let huge = PtpClockTime {
            sec: i64::MAX,
            nsec: u32::MAX,
            reserved: 0,
        };
        assert!(huge.ns() > i64::MAX as i128);
    }

    #[test]
    fn interface_names_are_checked_like_the_kernel_does() {
        assert_eq!(invalid_ifname("eth0"), None);
        assert_eq!(invalid_ifname("enp1s0f0np0"), None);
        assert!(invalid_ifname("").is_some());
        assert!(invalid_ifname("a-name-of-16-chr").is_some());
        assert!(invalid_ifname("..").is_some());
        assert!(invalid_ifname("eth 0").is_some());
        assert!(invalid_ifname("eth0:1").is_some());
    }

    #[test]
    fn loopback_has_no_phc_and_a_missing_interface_is_enodev() {
        match phc_index_of("lo") {
            Ok(idx) => assert_eq!(idx, None, "the loopback device has no PHC"),
            // A sandbox without AF_INET sockets: nothing to check here.
            Err(e) => eprintln!("SKIPPED loopback check: {e}"),
        }
        if let Err(e) = phc_index_of("nosuchif0") {
            if e.raw_os_error() != Some(libc::EAFNOSUPPORT) {
                assert_eq!(e.raw_os_error(), Some(libc::ENODEV), "{e}");
            }
        } else {
            panic!("nosuchif0 was found");
        }
        assert_eq!(
            phc_index_of("bad/name").unwrap_err().raw_os_error(),
            Some(libc::EINVAL)
        );
    }

    #[test]
    fn a_file_that_is_not_a_clock_refuses_every_request() {
        let f = std::fs::File::open("/dev/null").unwrap();
        use std::os::fd::AsFd;
        let fd = f.as_fd();
        let errno = |e: io::Error| e.raw_os_error();
        assert_eq!(
            sys_offset(fd, 1).map_err(errno).err(),
            Some(Some(libc::ENOTTY))
        );
        assert_eq!(
            sys_offset_extended(fd, 1).map_err(errno).err(),
            Some(Some(libc::ENOTTY))
        );
        assert_eq!(
            sys_offset_precise(fd).map_err(errno).err(),
            Some(Some(libc::ENOTTY))
        );
        assert_eq!(
            read_dynamic_clock(fd).map_err(errno).err(),
            Some(Some(libc::EINVAL))
        );
    }
}
