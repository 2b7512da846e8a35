//! One result reduced to what a fleet ranks and explains it by: the headline figures, the
//! host's facts (kernel, command line, audit findings by id, degradations) and its top
//! cause. A result of the main job holds histograms, series and largest events per CPU
//! (half a megabyte on 15 CPUs); a fleet of a thousand keeps none of them. The file is
//! parsed into a slim shape that names only these fields, so serde skips the rest without
//! building it, and the text is dropped before the next file is read.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::report::result::ResultError;
use crate::report::terminal::cause_names::cause_key;
use crate::report::terminal::group::{self, Key};
use crate::stats::causes::CauseKind;
use crate::system::audit::Severity;

/// A headline figure a host is ranked by.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Figure {
    /// The column's header, with its unit.
    pub header: &'static str,
    /// How the figure is compared (`report::terminal::group`), and named when a host stands out.
    pub key: Key,
    /// What it is, in words, for the legend and the guide.
    pub words: &'static str,
    /// ns figures are shown in µs; shares as they are, in %.
    pub ns: bool,
    /// Whether hosts are grouped by it. A maximum is one event: one hypervisor stall
    /// moves it by ×3 between hosts that are alike (on the grown fleet of the 16-CPU
    /// host, 1.5 to 4.7 ms), so the maxima are shown and their worst host named, but
    /// hosts are grouped by the share and the p99 (`report::terminal::group`'s own keys for CPUs).
    pub ranks: bool,
}

/// The figures, in order: the verdict's own headline (its noisiest CPU's share of time
/// lost, the longest gap) and timer's (p99, max), each the host's worst over its CPUs.
pub const FIGURES: [Figure; 4] = [
    Figure {
        header: "lost (%)",
        key: group::share("share lost"),
        words: "the noisiest CPU's share of time lost to noise",
        ns: false,
        ranks: true,
    },
    Figure {
        header: "max gap (µs)",
        key: group::latency("max gap"),
        words: "the longest noise gap on any CPU",
        ns: true,
        ranks: false,
    },
    Figure {
        header: "timer p99 (µs)",
        key: group::latency("timer p99"),
        words: "the worst CPU's timer wake-up latency p99",
        ns: true,
        ranks: true,
    },
    Figure {
        header: "timer max (µs)",
        key: group::latency("timer max"),
        words: "the longest timer wake-up latency on any CPU",
        ns: true,
        ranks: false,
    },
];

/// What a fleet keeps of one result.
#[derive(Debug, Clone, PartialEq)]
pub struct HostSummary {
    /// The host's name (the file's name when hostnames repeat: see `label_hosts`).
    pub label: String,
    pub hostname: String,
    pub path: PathBuf,
    /// The command that wrote it: "run" for the main job, else its subcommand.
    pub kind: String,
    pub kernel: String,
    pub cmdline: String,
    /// Every audit finding, by id, with its severity; `None` when the result holds no
    /// audit (older files), which is not an audit that found nothing.
    pub findings: Option<Vec<(String, Severity)>>,
    /// The cause that took most of the attributed noise, keyed alike across hosts (a task
    /// without its pid), and its share of the attributed time (%); `None` untraced.
    pub top_cause: Option<(String, f64)>,
    /// The kinds of the run's degradations.
    pub degraded: Vec<String>,
    /// Per [`FIGURES`]: `None` where the result has no such entry (a timer result has no
    /// noise figure).
    pub figures: [Option<f64>; 4],
}

// The slim shape of a result: only what a fleet reads (see the module's doc).

#[derive(Deserialize)]
struct Doc {
    schema: Option<String>,
    host: Option<Host>,
    run: Option<Run>,
    #[serde(default)]
    probes: Vec<Probe>,
}

#[derive(Deserialize)]
struct Host {
    hostname: String,
    kernel_release: String,
    cmdline: String,
    audit: Option<Audit>,
}

#[derive(Deserialize)]
struct Audit {
    findings: Vec<Finding>,
}

#[derive(Deserialize)]
struct Finding {
    id: String,
    severity: Severity,
}

#[derive(Deserialize)]
struct Run {
    command_line: Vec<String>,
    degraded: Vec<Degraded>,
}

#[derive(Deserialize)]
struct Degraded {
    kind: String,
}

#[derive(Deserialize)]
struct Probe {
    probe: String,
    cpu: Option<usize>,
    interrupted_pct: Option<f64>,
    summary: Option<Summary>,
    attribution: Option<Attribution>,
}

#[derive(Deserialize)]
struct Summary {
    p99_ns: Option<u64>,
    max_ns: Option<u64>,
}

#[derive(Deserialize)]
struct Attribution {
    interrupted_ns: u64,
    causes: Vec<Cause>,
}

#[derive(Deserialize)]
struct Cause {
    kind: CauseKind,
    cause: String,
    total_ns: u64,
}

/// Reads one result file into its summary; the error names the file.
pub fn read(path: &Path) -> Result<HostSummary, ResultError> {
    let text = std::fs::read_to_string(path).map_err(|source| ResultError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse(&text, path)
}

/// Parses a result's text (see `read`).
pub fn parse(text: &str, path: &Path) -> Result<HostSummary, ResultError> {
    let not = |reason: String| ResultError::NotAResult {
        path: path.to_path_buf(),
        reason,
    };
    let doc: Doc = serde_json::from_str(text).map_err(|e| not(e.to_string()))?;
    let schema = doc.schema.ok_or_else(|| not("no 'schema' field".into()))?;
    let major = (schema.strip_prefix("jitterscope/"))
        .and_then(|v| v.split('.').next()?.parse::<u32>().ok())
        .ok_or_else(|| not(format!("schema '{schema}' is not jitterscope/N")))?;
    if major != 1 {
        return Err(ResultError::UnknownSchema {
            path: path.to_path_buf(),
            found: schema,
        });
    }
    let (Some(host), Some(run)) = (doc.host, doc.run) else {
        return Err(not("no 'host' or 'run' field".into()));
    };
    let kind = match run.command_line.get(1).map(String::as_str) {
        None | Some("run") => "run".to_string(),
        Some(sub) => sub.to_string(),
    };
    Ok(HostSummary {
        label: host.hostname.clone(),
        hostname: host.hostname,
        path: path.to_path_buf(),
        kind,
        kernel: host.kernel_release,
        cmdline: host.cmdline,
        findings: (host.audit)
            .map(|a| a.findings.into_iter().map(|f| (f.id, f.severity)).collect()),
        top_cause: top_cause(&doc.probes),
        degraded: run.degraded.into_iter().map(|d| d.kind).collect(),
        figures: figures(&doc.probes),
    })
}

/// The host's worst figures over its CPUs, per [`FIGURES`].
fn figures(probes: &[Probe]) -> [Option<f64>; 4] {
    let worst = |kind: &str, f: &dyn Fn(&Probe) -> Option<f64>| {
        (probes.iter().filter(|p| p.probe == kind))
            .filter_map(f)
            .reduce(f64::max)
    };
    let ns = |v: Option<u64>| v.map(|n| n as f64);
    [
        worst("noise", &|p| p.interrupted_pct),
        worst("noise", &|p| ns(p.summary.as_ref()?.max_ns)),
        worst("timer", &|p| ns(p.summary.as_ref()?.p99_ns)),
        worst("timer", &|p| ns(p.summary.as_ref()?.max_ns)),
    ]
}

/// The cause that took most of the traced noise over every CPU, and its share of it.
fn top_cause(probes: &[Probe]) -> Option<(String, f64)> {
    let mut totals: Vec<(String, u64)> = Vec::new();
    let mut all_ns = 0u64;
    for p in probes.iter().filter(|p| p.probe == "noise") {
        let Some(a) = &p.attribution else { continue };
        all_ns += a.interrupted_ns;
        for c in &a.causes {
            let key = cause_key(p.cpu.unwrap_or(0), c.kind, &c.cause);
            match totals.iter_mut().find(|t| t.0 == key) {
                Some(t) => t.1 += c.total_ns,
                None => totals.push((key, c.total_ns)),
            }
        }
    }
    let (cause, ns) = totals.into_iter().max_by_key(|t| t.1)?;
    Some((cause, ns as f64 / all_ns.max(1) as f64 * 100.0))
}

/// A cause as a cell says it: a task with its policy, any other without the words in
/// parentheses that explain it ("unaccounted (no event: …)" is "unaccounted").
pub fn short_cause(cause: &str) -> &str {
    match cause.starts_with("task ") {
        true => cause,
        false => cause.split(" (").next().unwrap_or(cause),
    }
}

/// Each host labelled by its hostname, or by its file's name where hostnames repeat (a
/// fleet of containers may all be called alike).
pub fn label_hosts(hosts: &mut [HostSummary]) {
    let mut names: Vec<&str> = hosts.iter().map(|h| h.hostname.as_str()).collect();
    names.sort_unstable();
    let repeated: Vec<String> = (names.windows(2))
        .filter(|w| w[0] == w[1])
        .map(|w| w[0].to_string())
        .collect();
    for h in hosts.iter_mut() {
        if repeated.binary_search(&h.hostname).is_ok() {
            let stem = h.path.file_stem().map(|s| s.to_string_lossy().into_owned());
            h.label = stem.unwrap_or_else(|| h.hostname.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_probe_kind_reads_and_non_results_are_refused() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let path = root.join("tests/fixtures/all-probes.json");
        let text = std::fs::read_to_string(&path).unwrap();
        let h = parse(&text, &path).unwrap();
        assert!(h.figures[0].is_some() && h.figures[2].is_some(), "{h:?}");
        let e = parse(r#"{"hello": 1}"#, &path).unwrap_err();
        assert!(e.to_string().contains("no 'schema' field"), "{e}");
        let e = parse(r#"{"schema": "jitterscope/2"}"#, &path).unwrap_err();
        assert!(matches!(e, ResultError::UnknownSchema { .. }), "{e}");
        assert!(parse("not json", &path).is_err());
    }
}
