//! The result room: the schema and the data every other room reads from a result (its
//! distributions, its figures as data, the gate); nothing here prints or draws, and it
//! imports no other room but the two records the terminal's verdict and watch make.
//!
//! The result file: the contract between measuring and reporting.
//!
//! One JSON document per run, with a `schema` field (`jitterscope/1`), the host, the run
//! (with every degradation), and one entry per probe and CPU. docs/result-format.md
//! documents every field. Files are written atomically: a temporary file in the same
//! directory, flushed, then renamed over the target.

pub mod dist;
pub mod figure;
pub mod gate;

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::degraded::DegradedRecord;
use crate::engine::cpu::CpuList;
use crate::probes::c2c::C2cEntry;
use crate::probes::noise::NoiseEntry;
use crate::probes::pingpong::PingpongEntry;
use crate::probes::ptp::PtpEntry;
use crate::probes::queue::QueueEntry;
use crate::probes::syscalls::SyscallEntry;
use crate::probes::timer::TimerEntry;
use crate::probes::timerlat::TimerlatEntry;
use crate::probes::work::WorkEntry;
use crate::system::HostInfo;

/// The schema this version writes.
pub const SCHEMA: &str = "jitterscope/1";
const SCHEMA_MAJOR: u32 = 1;

/// Errors reading or writing a result file; each names the file.
#[derive(Debug, thiserror::Error)]
pub enum ResultError {
    #[error("cannot write result file {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot read result file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not a jitterscope result file: {reason}")]
    NotAResult { path: PathBuf, reason: String },
    #[error(
        "{path} has schema '{found}', which this jitterscope cannot read (it reads \
         jitterscope/1); use a newer jitterscope"
    )]
    UnknownSchema { path: PathBuf, found: String },
}

/// The whole document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResultFile {
    pub schema: String,
    pub host: HostInfo,
    pub run: RunInfo,
    pub probes: Vec<ProbeEntry>,
    /// The main job's verdict and top fixes, as it printed them; absent from the results
    /// of single commands and of versions before it was stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<crate::report::terminal::verdict::Verdict>,
    /// `tune`'s steps, decisions and staircase; absent from every other command's result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tune: Option<crate::system::tune::record::TuneEntry>,
    /// `jitterscope watch`: another application's threads, watched; absent from every
    /// other command's results and from versions before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watch: Option<crate::report::terminal::watch::WatchRecord>,
}

/// `run`: how this result was produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunInfo {
    pub tool_version: String,
    /// The git commit the tool was built from ("unknown" for a build outside git);
    /// absent in results written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_commit: Option<String>,
    /// The full command line, one element per argument.
    pub command_line: Vec<String>,
    /// RFC 3339, UTC.
    pub start_time: String,
    pub requested_duration_ns: u64,
    /// From the common start to the end of the measurement.
    pub actual_duration_ns: u64,
    /// Stopped by a signal before the requested duration.
    pub interrupted: bool,
    pub privileges: Privileges,
    pub cpus: RunCpus,
    /// Every reason a figure may be worse than it should be.
    pub degraded: Vec<DegradedRecord>,
    /// Things worth knowing that do not degrade the figures.
    pub warnings: Vec<String>,
    /// Peak resident memory of the jitterscope process.
    pub peak_rss_kib: u64,
    /// What the kernel's counters on the measured CPUs did over the run: interrupts per
    /// IRQ and vector, softirqs, steal and kernel threads' CPU time (absent when they
    /// could not be read, and in results from before they were recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counters: Option<crate::system::counters::CounterDelta>,
    /// The root domain a SCHED_DEADLINE run made for its CPUs and removed (absent when
    /// it made none, and in results from before it could).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root_domain: Option<crate::system::tune::root_domain::Record>,
}

impl RunInfo {
    /// The tool that wrote the result: its version, and its commit where recorded.
    pub fn tool(&self) -> String {
        match &self.tool_commit {
            Some(commit) => format!("{} ({commit})", self.tool_version),
            None => self.tool_version.clone(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Privileges {
    pub euid: u32,
    pub root: bool,
    /// mlockall was asked for and succeeded.
    pub memory_locked: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunCpus {
    pub measured: CpuList,
    /// Where the coordinator ran (empty: it shared a measured CPU).
    pub housekeeping: CpuList,
}

/// One entry per probe and CPU, tagged by `probe`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "probe", rename_all = "lowercase")]
pub enum ProbeEntry {
    Noise(Box<NoiseEntry>),
    Timer(Box<TimerEntry>),
    /// `timer --engine timerlat|both`: the kernel's timerlat tracer, one entry per CPU.
    Timerlat(Box<TimerlatEntry>),
    Pingpong(Box<PingpongEntry>),
    C2c(Box<C2cEntry>),
    Queue(Box<QueueEntry>),
    Work(Box<WorkEntry>),
    Syscalls(Box<SyscallEntry>),
    Ptp(Box<PtpEntry>),
    /// The kernel's osnoise tracer's figures of one CPU (`noise --engine osnoise`).
    Osnoise(Box<crate::trace::tracer::osnoise::OsnoiseEntry>),
    /// The kernel's hwlat tracer's check of one CPU (`noise --hwlat`).
    Hwlat(Box<crate::trace::tracer::hwlat::HwlatEntry>),
    /// A probe this version does not know (written by a newer jitterscope): kept as a
    /// placeholder so that the rest of the file still reads.
    #[serde(other)]
    Unknown,
}

impl ProbeEntry {
    /// The threads that measured this entry, as they ran (the policy each really had).
    pub fn threads(&self) -> Vec<&crate::probes::record::ThreadRecord> {
        match self {
            ProbeEntry::Noise(e) => vec![&e.thread],
            ProbeEntry::Timer(e) => vec![&e.thread],
            ProbeEntry::Pingpong(e) => vec![&e.thread_a, &e.thread_b],
            ProbeEntry::C2c(e) => vec![&e.thread_a, &e.thread_b],
            ProbeEntry::Queue(e) => vec![&e.producer.thread, &e.thread],
            ProbeEntry::Work(e) => vec![&e.thread],
            ProbeEntry::Syscalls(e) => vec![&e.thread],
            ProbeEntry::Ptp(_)
            | ProbeEntry::Osnoise(_)
            | ProbeEntry::Hwlat(_)
            | ProbeEntry::Timerlat(_)
            | ProbeEntry::Unknown => Vec::new(),
        }
    }
}

impl ResultFile {
    /// A result of the schema this version writes.
    pub fn new(host: HostInfo, run: RunInfo, probes: Vec<ProbeEntry>) -> ResultFile {
        ResultFile {
            schema: SCHEMA.to_string(),
            host,
            run,
            probes,
            verdict: None,
            tune: None,
            watch: None,
        }
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("result serializes")
    }

    /// Writes atomically: temporary file in the target's directory, then rename.
    pub fn write_atomic(&self, path: &Path) -> Result<(), ResultError> {
        let text = self.to_json() + "\n";
        write_atomic(path, text.as_bytes()).map_err(|source| ResultError::Write {
            path: path.to_path_buf(),
            source,
        })
    }

    /// Reads a result file, rejecting schemas of another major version with a clear error.
    pub fn read(path: &Path) -> Result<ResultFile, ResultError> {
        let text = std::fs::read_to_string(path).map_err(|source| ResultError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(&text).map_err(|e| e.with_path(path))
    }

    /// Parses a document (see `read`).
    pub fn parse(text: &str) -> Result<ResultFile, ResultError> {
        let not = |reason: String| ResultError::NotAResult {
            path: PathBuf::new(),
            reason,
        };
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| not(format!("invalid JSON: {e}")))?;
        let schema = value
            .get("schema")
            .and_then(|s| s.as_str())
            .ok_or_else(|| not("no 'schema' field".into()))?;
        let major = schema
            .strip_prefix("jitterscope/")
            .and_then(|v| v.split('.').next())
            .and_then(|v| v.parse::<u32>().ok())
            .ok_or_else(|| not(format!("schema '{schema}' is not jitterscope/N")))?;
        if major != SCHEMA_MAJOR {
            return Err(ResultError::UnknownSchema {
                path: PathBuf::new(),
                found: schema.into(),
            });
        }
        serde_json::from_value(value).map_err(|e| not(e.to_string()))
    }
}

/// Writes `bytes` to `path` so that a reader sees the old file or the whole new one:
/// a fresh temporary file in the same directory (created exclusively, so never through a
/// planted symlink), flushed, renamed over `path`, and the rename itself made durable.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a file name"))?;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let tmp = dir.join(format!(
        ".{}.{}.{nanos}.tmp",
        name.to_string_lossy(),
        std::process::id()
    ));
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        std::fs::File::open(&dir).and_then(|d| d.sync_all())
    };
    write().inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

impl ResultError {
    fn with_path(self, p: &Path) -> ResultError {
        match self {
            ResultError::NotAResult { reason, .. } => ResultError::NotAResult {
                path: p.to_path_buf(),
                reason,
            },
            ResultError::UnknownSchema { found, .. } => ResultError::UnknownSchema {
                path: p.to_path_buf(),
                found,
            },
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_other_major_versions_and_non_results() {
        let e = ResultFile::parse(r#"{"schema":"jitterscope/2","host":{}}"#).unwrap_err();
        assert!(matches!(e, ResultError::UnknownSchema { .. }), "{e}");
        assert!(e.to_string().contains("jitterscope/2"));
        let e = ResultFile::parse(r#"{"hello":1}"#).unwrap_err();
        assert!(e.to_string().contains("no 'schema' field"));
        assert!(ResultFile::parse("not json").is_err());
    }
}
