//! The interval log: one line per CPU per interval in HdrHistogram's interval-log format
//! (jHiccup's), so that HdrHistogram's own tools and `jitterscope report` read it back.
//!
//! The file is `monitor.hlog` in the log directory. Each line is tagged with its CPU
//! (`Tag=cpu1`), starts at a time relative to the header's BaseTime, and carries the
//! interval's maximum in ms (jHiccup's unit, as the MaxValueDivisor line says) and the
//! histogram in V2 compressed form, base64. When the file grows past its size limit it is
//! renamed `.1` (the older ones shifting up to `.N`, the oldest dropped) and a new file is
//! begun with its own header. `reopen` (SIGHUP) closes and reopens the path, so that a
//! logrotate that moved the file away gets a new one.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::stats::LatencyHistogram;

/// The log's file name in its directory.
pub const FILE_NAME: &str = "monitor.hlog";

/// Errors writing the interval log.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("cannot open the interval log {path}: {source}")]
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write the interval log {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot rotate the interval log {path}: {source}")]
    Rotate {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// An open interval log.
pub struct IntervalLog {
    path: PathBuf,
    file: File,
    bytes: u64,
    max_bytes: u64,
    keep: u32,
    /// Interval starts are written relative to this (seconds since the epoch).
    base_s: f64,
}

fn epoch_s(t: SystemTime) -> f64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

impl IntervalLog {
    /// Opens (appending to) `dir/monitor.hlog`; a new or empty file gets the header.
    pub fn open(
        dir: &Path,
        max_bytes: u64,
        keep: u32,
        start: SystemTime,
    ) -> Result<Self, LogError> {
        let path = dir.join(FILE_NAME);
        let (file, bytes) = open_append(&path)?;
        let mut log = IntervalLog {
            path,
            file,
            bytes,
            max_bytes,
            keep,
            base_s: epoch_s(start),
        };
        if log.bytes == 0 {
            log.header()?;
        }
        Ok(log)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn header(&mut self) -> Result<(), LogError> {
        let base = self.base_s;
        let when = humantime::format_rfc3339_millis(
            SystemTime::UNIX_EPOCH + std::time::Duration::from_secs_f64(base),
        );
        let text = format!(
            "#[Logged with jitterscope monitor {}]\n\
             #[Histogram log format version 1.3]\n\
             #[StartTime: {base:.3} (seconds since epoch), {when}]\n\
             #[BaseTime: {base:.3} (seconds since epoch)]\n\
             #[MaxValueDivisor: 1000000.000]\n\
             \"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"\n",
            env!("CARGO_PKG_VERSION")
        );
        self.append(text.as_bytes())
    }

    fn append(&mut self, bytes: &[u8]) -> Result<(), LogError> {
        self.file
            .write_all(bytes)
            .map_err(|source| LogError::Write {
                path: self.path.clone(),
                source,
            })?;
        self.bytes += bytes.len() as u64;
        Ok(())
    }

    /// Writes one interval of `cpu`: from `start` for `length_s` seconds. Rotates after
    /// the write if the file has grown past its limit.
    pub fn write(
        &mut self,
        cpu: usize,
        start: SystemTime,
        length_s: f64,
        hist: &LatencyHistogram,
    ) -> Result<(), LogError> {
        let line = format!(
            "Tag=cpu{cpu},{:.3},{:.3},{:.6},{}\n",
            (epoch_s(start) - self.base_s).max(0.0),
            length_s,
            hist.max_ns().unwrap_or(0) as f64 / 1e6,
            hist.encode_base64()
        );
        self.append(line.as_bytes())?;
        if self.bytes > self.max_bytes {
            self.rotate()?;
        }
        Ok(())
    }

    /// Pushes what was written to the kernel (each interval is one write already; this
    /// is for the last one before exit).
    pub fn flush(&mut self) -> Result<(), LogError> {
        self.file.flush().map_err(|source| LogError::Write {
            path: self.path.clone(),
            source,
        })
    }

    /// Closes and reopens the path (SIGHUP, after logrotate moved the file away).
    pub fn reopen(&mut self) -> Result<(), LogError> {
        let (file, bytes) = open_append(&self.path)?;
        self.file = file;
        self.bytes = bytes;
        if self.bytes == 0 {
            self.header()?;
        }
        Ok(())
    }

    /// `monitor.hlog` → `.1`, `.1` → `.2`, … up to `.keep`; then a new file.
    fn rotate(&mut self) -> Result<(), LogError> {
        let numbered = |n: u32| PathBuf::from(format!("{}.{n}", self.path.display()));
        let err = |source| LogError::Rotate {
            path: self.path.clone(),
            source,
        };
        let _ = std::fs::remove_file(numbered(self.keep));
        for n in (1..self.keep).rev() {
            match std::fs::rename(numbered(n), numbered(n + 1)) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(err(e)),
                _ => {}
            }
        }
        std::fs::rename(&self.path, numbered(1)).map_err(err)?;
        self.reopen()
    }
}

fn open_append(path: &Path) -> Result<(File, u64), LogError> {
    let err = |source| LogError::Open {
        path: path.to_path_buf(),
        source,
    };
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(err)?;
    let bytes = file.metadata().map_err(err)?.len();
    Ok((file, bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};

    #[test]
    fn hdrhistograms_own_parser_reads_what_is_written_and_rotation_keeps_n() {
        let dir = tempfile::tempdir().unwrap();
        let start = SystemTime::now();
        let mut log = IntervalLog::open(dir.path(), 2_000, 2, start).unwrap();
        let mut h = LatencyHistogram::new();
        h.record(1_500);
        h.record(2_500_000);
        log.write(1, start, 1.0, &h).unwrap();
        let text = std::fs::read(log.path()).unwrap();
        let entries: Vec<_> = IntervalLogIterator::new(&text)
            .collect::<Result<_, _>>()
            .unwrap();
        assert!(entries.iter().any(|e| matches!(e, LogEntry::StartTime(_))));
        let iv = entries
            .iter()
            .find_map(|e| match e {
                LogEntry::Interval(i) => Some(i),
                _ => None,
            })
            .expect("an interval");
        assert_eq!(iv.tag().unwrap().as_str(), "cpu1");
        assert!((iv.max() - 2.5).abs() < 1e-9, "{}", iv.max());
        let back = LatencyHistogram::decode_base64(iv.encoded_histogram()).unwrap();
        assert_eq!(back.len(), 2);
        // Past 2000 bytes the log rotates; only .1 and .2 are kept.
        for _ in 0..40 {
            log.write(1, start, 1.0, &h).unwrap();
        }
        assert!(dir.path().join("monitor.hlog.1").exists());
        assert!(dir.path().join("monitor.hlog.2").exists());
        assert!(!dir.path().join("monitor.hlog.3").exists());
        let fresh = std::fs::read_to_string(log.path()).unwrap();
        assert!(fresh.starts_with("#[Logged with jitterscope"));
    }
}
