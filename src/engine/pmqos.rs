//! `/dev/cpu_dma_latency`: the PM QoS request that keeps CPUs out of idle states slower
//! to leave than the value asked for.
//!
//! The kernel keeps a request only while the file stays open, and drops it when the file
//! is closed, whoever closes it: the guard's drop, or the kernel itself when the process
//! exits on any path, a second Ctrl-C or SIGKILL included. So the setting can never
//! outlive the run.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// The device, as the kernel names it.
pub const DEVICE: &str = "/dev/cpu_dma_latency";

/// Errors setting or reading the request; each names the file.
#[derive(Debug, thiserror::Error)]
pub enum PmQosError {
    #[error("cannot open {path}: {source}")]
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write {value} µs to {path}: {source}")]
    Write {
        path: PathBuf,
        value: i32,
        source: std::io::Error,
    },
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// An open request; dropping it withdraws it.
#[derive(Debug)]
pub struct DmaLatencyGuard {
    _file: File,
    pub value_us: i32,
    /// The effective value before this request was made.
    pub previous_us: Option<i32>,
}

impl DmaLatencyGuard {
    /// Asks for an idle exit latency of at most `value_us` µs for as long as the guard lives.
    pub fn set(path: &Path, value_us: i32) -> Result<DmaLatencyGuard, PmQosError> {
        let previous_us = read(path).ok();
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|source| PmQosError::Open {
                path: path.to_path_buf(),
                source,
            })?;
        // The kernel takes a 4-byte binary value (or a hex string); binary is unambiguous.
        file.write_all(&value_us.to_ne_bytes())
            .map_err(|source| PmQosError::Write {
                path: path.to_path_buf(),
                value: value_us,
                source,
            })?;
        Ok(DmaLatencyGuard {
            _file: file,
            value_us,
            previous_us,
        })
    }
}

/// The effective request now: the smallest value any open request holds, or the
/// kernel's default (2000 s) when none does.
pub fn read(path: &Path) -> Result<i32, PmQosError> {
    let err = |source| PmQosError::Read {
        path: path.to_path_buf(),
        source,
    };
    let mut buf = [0u8; 4];
    File::open(path)
        .and_then(|mut f| f.read_exact(&mut buf))
        .map_err(err)?;
    Ok(i32::from_ne_bytes(buf))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_device_is_a_clear_error() {
        let e = DmaLatencyGuard::set(Path::new("/nonexistent/cpu_dma_latency"), 0).unwrap_err();
        assert!(
            e.to_string().contains("/nonexistent/cpu_dma_latency"),
            "{e}"
        );
    }

    #[test]
    fn writes_the_value_in_binary_to_a_plain_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("qos");
        std::fs::write(&path, 2_000_000_000i32.to_ne_bytes()).unwrap();
        let g = DmaLatencyGuard::set(&path, 7).unwrap();
        assert_eq!(g.previous_us, Some(2_000_000_000));
        assert_eq!(read(&path).unwrap(), 7);
    }
}
