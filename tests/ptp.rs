//! Issue 5: `jitterscope ptp`. The kernel ABI it speaks (request numbers and struct
//! sizes, checked from the outside against linux/ptp_clock.h and linux/ethtool.h), and
//! what the binary says and how it exits with no PTP clock, a missing one, an interface
//! without a PHC, and something that is not a PTP clock at all. Real PTP clocks are
//! measured when the host has one.

use std::path::Path;
use std::process::{Command, Output};

use jitterscope::engine::ptp_ioctl as ffi;
use jitterscope::report::{ProbeEntry, ResultFile};

use crate::util::{bin, jitterscope, measuring, skip, stderr_lines};

/// `_IOC(dir, type, nr, size)` of asm-generic/ioctl.h, written out independently:
/// dir << 30 | size << 16 | type << 8 | nr, with _IOC_WRITE = 1 and _IOC_READ = 2.
fn ioc(dir: u32, ty: u8, nr: u32, size: usize) -> u32 {
    (dir << 30) | ((size as u32) << 16) | ((ty as u32) << 8) | nr
}
const IOC_WRITE: u32 = 1;
const IOC_READ: u32 = 2;

#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
#[test]
fn ptp_request_numbers_are_the_kernels() {
    // linux/ptp_clock.h: PTP_CLK_MAGIC '='; PTP_SYS_OFFSET _IOW(.., 5, ptp_sys_offset);
    // PTP_SYS_OFFSET_PRECISE _IOWR(.., 8, ..precise); PTP_SYS_OFFSET_EXTENDED
    // _IOWR(.., 9, ..extended), with the structs 832, 64 and 1216 bytes.
    assert_eq!(ffi::PTP_CLK_MAGIC, b'=');
    assert_eq!(ffi::PTP_SYS_OFFSET, ioc(IOC_WRITE, b'=', 5, 832));
    assert_eq!(
        ffi::PTP_SYS_OFFSET_PRECISE,
        ioc(IOC_READ | IOC_WRITE, b'=', 8, 64)
    );
    assert_eq!(
        ffi::PTP_SYS_OFFSET_EXTENDED,
        ioc(IOC_READ | IOC_WRITE, b'=', 9, 1216)
    );
    assert_eq!(ffi::PTP_SYS_OFFSET, 0x4340_3d05);
    assert_eq!(ffi::PTP_SYS_OFFSET_PRECISE, 0xc040_3d08);
    assert_eq!(ffi::PTP_SYS_OFFSET_EXTENDED, 0xc4c0_3d09);
    // linux/sockios.h and linux/ethtool.h.
    assert_eq!(ffi::SIOCETHTOOL, 0x8946);
    assert_eq!(ffi::ETHTOOL_GET_TS_INFO, 0x41);
}

#[test]
fn ptp_struct_sizes_are_the_kernels() {
    assert_eq!(ffi::PTP_MAX_SAMPLES, 25);
    assert_eq!(size_of::<ffi::PtpClockTime>(), 16);
    assert_eq!(
        size_of::<ffi::PtpSysOffset>(),
        4 + 3 * 4 + (2 * 25 + 1) * 16
    );
    assert_eq!(size_of::<ffi::PtpSysOffset>(), 832);
    assert_eq!(
        size_of::<ffi::PtpSysOffsetExtended>(),
        4 + 4 + 2 * 4 + 25 * 3 * 16
    );
    assert_eq!(size_of::<ffi::PtpSysOffsetExtended>(), 1216);
    assert_eq!(size_of::<ffi::PtpSysOffsetPrecise>(), 3 * 16 + 4 * 4);
    assert_eq!(size_of::<ffi::PtpSysOffsetPrecise>(), 64);
    // cmd, so_timestamping, phc_index, tx_types, tx_reserved[3], rx_filters,
    // rx_reserved[3]: eleven 4-byte fields.
    assert_eq!(size_of::<ffi::EthtoolTsInfo>(), 11 * 4);
    assert_eq!(size_of::<ffi::EthtoolTsInfo>(), 44);
}

/// The libc crate transcribes linux/ptp_clock.h too: a second source for the same facts.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[test]
fn ptp_abi_agrees_with_the_libc_crate() {
    assert_eq!(ffi::PTP_SYS_OFFSET as libc::Ioctl, libc::PTP_SYS_OFFSET);
    assert_eq!(
        ffi::PTP_SYS_OFFSET_PRECISE as libc::Ioctl,
        libc::PTP_SYS_OFFSET_PRECISE
    );
    assert_eq!(
        ffi::PTP_SYS_OFFSET_EXTENDED as libc::Ioctl,
        libc::PTP_SYS_OFFSET_EXTENDED
    );
    assert_eq!(ffi::SIOCETHTOOL as libc::c_ulong, libc::SIOCETHTOOL);
    assert_eq!(
        size_of::<ffi::PtpSysOffset>(),
        size_of::<libc::ptp_sys_offset>()
    );
    assert_eq!(
        size_of::<ffi::PtpSysOffsetExtended>(),
        size_of::<libc::ptp_sys_offset_extended>()
    );
    assert_eq!(
        size_of::<ffi::PtpSysOffsetPrecise>(),
        size_of::<libc::ptp_sys_offset_precise>()
    );
}

/// The C compiler's own sizeof and request values from the installed UAPI headers: a
/// third source, skipped where there is no compiler or no kernel headers.
#[test]
fn ptp_abi_agrees_with_the_system_headers() {
    let test = "ptp_abi_agrees_with_the_system_headers";
    if !Path::new("/usr/include/linux/ptp_clock.h").exists() {
        return skip(test, "no /usr/include/linux/ptp_clock.h (kernel headers)");
    }
    // Compiling takes a CPU for a moment: not while another test measures.
    let _m = measuring();
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("abi.c");
    let exe = dir.path().join("abi");
    std::fs::write(
        &src,
        r#"#include <stdio.h>
#include <linux/ethtool.h>
#include <linux/ptp_clock.h>
#include <linux/sockios.h>
int main(void) {
    printf("%zu %zu %zu %zu %zu %lu %lu %lu %lu %lu\n",
        sizeof(struct ptp_clock_time), sizeof(struct ptp_sys_offset),
        sizeof(struct ptp_sys_offset_extended), sizeof(struct ptp_sys_offset_precise),
        sizeof(struct ethtool_ts_info), (unsigned long)PTP_SYS_OFFSET,
        (unsigned long)PTP_SYS_OFFSET_PRECISE, (unsigned long)PTP_SYS_OFFSET_EXTENDED,
        (unsigned long)SIOCETHTOOL, (unsigned long)ETHTOOL_GET_TS_INFO);
    return 0;
}
"#,
    )
    .unwrap();
    let built = Command::new("cc").arg(&src).arg("-o").arg(&exe).output();
    match built {
        Ok(b) if b.status.success() => {}
        Ok(b) => return skip(test, &String::from_utf8_lossy(&b.stderr)),
        Err(e) => return skip(test, &format!("no C compiler (cc): {e}")),
    }
    let out = Command::new(&exe).output().unwrap();
    let got: Vec<u64> = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(|v| v.parse().unwrap())
        .collect();
    let ours = [
        size_of::<ffi::PtpClockTime>() as u64,
        size_of::<ffi::PtpSysOffset>() as u64,
        size_of::<ffi::PtpSysOffsetExtended>() as u64,
        size_of::<ffi::PtpSysOffsetPrecise>() as u64,
        size_of::<ffi::EthtoolTsInfo>() as u64,
        ffi::PTP_SYS_OFFSET as u64,
        ffi::PTP_SYS_OFFSET_PRECISE as u64,
        ffi::PTP_SYS_OFFSET_EXTENDED as u64,
        ffi::SIOCETHTOOL as u64,
        ffi::ETHTOOL_GET_TS_INFO as u64,
    ];
    assert_eq!(got, ours);
}

/// The binary with `JITTERSCOPE_DEV_DIR` set to `dir`.
fn in_dev_dir(dir: &Path, args: &[&str]) -> Output {
    Command::new(bin())
        .env("JITTERSCOPE_DEV_DIR", dir)
        .args(args)
        .output()
        .expect("the binary runs")
}

/// Exit 2 and exactly one line on stderr, starting `jitterscope: ` and holding `want`.
fn assert_one_line_error(o: &Output, want: &str) {
    let lines = stderr_lines(o);
    assert_eq!(o.status.code(), Some(2), "{lines:?}");
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].starts_with("jitterscope: "), "{lines:?}");
    assert!(lines[0].contains(want), "{lines:?} should say {want:?}");
    assert!(o.stdout.is_empty());
}

#[test]
fn ptp_without_devices_says_so_in_one_line_and_exits_0() {
    // Runs the binary: not beside a measuring test.
    let _m = measuring();
    let empty = tempfile::tempdir().unwrap();
    // Other files in the directory are not PTP clocks.
    std::fs::write(empty.path().join("pps0"), b"").unwrap();
    let o = in_dev_dir(empty.path(), &["ptp"]);
    assert_eq!(o.status.code(), Some(0), "{:?}", stderr_lines(&o));
    let lines = stderr_lines(&o);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].contains("no PTP clock devices"), "{lines:?}");
    assert!(o.stdout.is_empty());
}

/// The same through the real /dev, when this host has no PTP clock.
#[test]
fn ptp_on_this_host_without_devices_exits_0() {
    // Runs the binary: not beside a measuring test.
    let _m = measuring();
    if has_ptp_devices() {
        return skip(
            "ptp_on_this_host_without_devices_exits_0",
            "this host has /dev/ptp*",
        );
    }
    let o = jitterscope(&["ptp", "--json"]);
    assert_eq!(o.status.code(), Some(0));
    let lines = stderr_lines(&o);
    assert_eq!(
        lines,
        vec!["jitterscope: no PTP clock devices (/dev/ptp*) on this host; nothing to measure"]
    );
}

fn has_ptp_devices() -> bool {
    let d = jitterscope::probes::ptp::discover(Path::new("/dev")).unwrap_or_default();
    !d.is_empty()
}

#[test]
fn ptp_missing_device_exits_2_in_one_line() {
    // Runs the binary: not beside a measuring test.
    let _m = measuring();
    let o = jitterscope(&["ptp", "/dev/ptp99"]);
    assert_one_line_error(&o, "/dev/ptp99: no such PTP clock device");
}

#[test]
fn ptp_missing_interface_exits_2_in_one_line() {
    // Runs the binary: not beside a measuring test.
    let _m = measuring();
    let o = jitterscope(&["ptp", "nosuchif0"]);
    let lines = stderr_lines(&o);
    // Without AF_INET sockets the query itself fails: still one line, exit 2.
    if lines.iter().any(|l| l.contains("cannot ask interface")) {
        return assert_one_line_error(&o, "nosuchif0");
    }
    assert_one_line_error(&o, "no network interface named 'nosuchif0'");
}

#[test]
fn ptp_interface_without_phc_exits_2_in_one_line() {
    // Runs the binary: not beside a measuring test.
    let _m = measuring();
    let o = jitterscope(&["ptp", "lo"]);
    if stderr_lines(&o).iter().any(|l| l.contains("cannot ask")) {
        return skip(
            "ptp_interface_without_phc_exits_2_in_one_line",
            "no AF_INET socket here",
        );
    }
    assert_one_line_error(&o, "interface lo has no PTP hardware clock");
}

#[test]
fn ptp_rejects_what_cannot_be_a_clock() {
    // Runs the binary: not beside a measuring test.
    let _m = measuring();
    let file = tempfile::NamedTempFile::new().unwrap();
    let path = file.path().to_str().unwrap();
    let o = jitterscope(&["ptp", path]);
    assert_one_line_error(&o, "is a regular file, not a PTP clock device");
    let o = jitterscope(&["ptp", "much-too-long-name0"]);
    assert_one_line_error(&o, "neither a device path nor an interface name");
    // A character device of another subsystem is never opened (opening /dev/watchdog
    // would arm it): named, that is bad input.
    let o = jitterscope(&["ptp", "/dev/null"]);
    assert_one_line_error(&o, "/dev/null is not a PTP clock (it is a 'mem' device)");
}

/// A discovered ptpN that is no clock is measured, shown as unsupported everywhere, and
/// warned about; the run itself succeeds and saves every method's errno.
#[test]
fn ptp_discovered_non_clock_is_reported_not_supported() {
    // Runs the binary: not beside a measuring test.
    let _m = measuring();
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink("/dev/null", dir.path().join("ptp0")).unwrap();
    let saved = dir.path().join("r.json");
    let o = in_dev_dir(
        dir.path(),
        &["ptp", "-n", "5", "-o", saved.to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(0), "{:?}", stderr_lines(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("PTP_SYS_OFFSET_EXTENDED"), "{text}");
    assert_eq!(text.matches("no (ENOTTY)").count(), 3, "{text}");
    assert!(text.contains("no (EINVAL)"), "{text}");
    assert!(
        stderr_lines(&o)
            .iter()
            .any(|l| l.contains("warning") && l.contains("is not a PTP clock")),
        "{:?}",
        stderr_lines(&o)
    );
    let r = ResultFile::read(&saved).unwrap();
    let [ProbeEntry::Ptp(e)] = r.probes.as_slice() else {
        panic!("one ptp entry: {:?}", r.probes);
    };
    assert_eq!(e.clock_index, Some(0));
    assert_eq!(e.samples_requested, 5);
    let errnos: Vec<Option<i32>> = e.methods.iter().map(|m| m.errno).collect();
    assert_eq!(
        errnos,
        vec![
            Some(libc::ENOTTY),
            Some(libc::ENOTTY),
            Some(libc::ENOTTY),
            Some(libc::EINVAL)
        ]
    );
    assert!(e.methods.iter().all(|m| !m.supported && m.samples == 0));
    let json = std::fs::read_to_string(&saved).unwrap();
    assert!(json.contains(r#""probe": "ptp""#), "tagged as ptp");
    assert!(json.contains(r#""status": "not_supported""#));
}

/// On a host with PTP clocks: every device answers at least PTP_SYS_OFFSET and the
/// dynamic clock read (any PHC driver offers gettime), with the samples asked for.
#[test]
fn ptp_real_devices_answer_the_basic_methods() {
    // Runs the binary: not beside a measuring test.
    let _m = measuring();
    if !has_ptp_devices() {
        return skip(
            "ptp_real_devices_answer_the_basic_methods",
            "this host has no /dev/ptp*",
        );
    }
    let o = jitterscope(&["ptp", "-n", "50", "--json"]);
    if o.status.code() == Some(2) {
        return skip(
            "ptp_real_devices_answer_the_basic_methods",
            &format!("the devices cannot be read: {:?}", stderr_lines(&o)),
        );
    }
    assert_eq!(o.status.code(), Some(0), "{:?}", stderr_lines(&o));
    let r = ResultFile::parse(&String::from_utf8_lossy(&o.stdout)).unwrap();
    for p in &r.probes {
        let ProbeEntry::Ptp(e) = p else { continue };
        for m in &e.methods {
            use jitterscope::probes::ptp::Method;
            if matches!(m.method, Method::SysOffset | Method::ClockGettime) {
                assert!(m.supported, "{}: {m:?}", e.device);
                assert_eq!(m.samples, 50);
                assert_eq!(m.cost.count, 50);
                assert!(m.cost.min_ns.unwrap() > 0);
            }
        }
    }
}
