//! `jitterscope audit`: chooses the CPUs the audit is about, runs the checks of
//! `system::audit` against the live host or a tree under `--root`, and prints the
//! findings as a table or as JSON. A finding, however bad, is not a failure: the exit is
//! 0 whenever the audit ran; only bad input (a CPU list, a missing root) exits 2.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

use crate::cli::AuditArgs;
use crate::engine::cpu::{CpuList, CpuListError, Tuned};
use crate::report::terminal::audit_table;
use crate::system::audit::AuditReport;

use super::Ending;

/// `jitterscope audit`.
pub fn run(args: &AuditArgs) -> anyhow::Result<Ending> {
    let root = args.root.clone().unwrap_or_else(|| PathBuf::from("/"));
    if !root.is_dir() {
        bail!("--root {}: no such directory", root.display());
    }
    let online = online_cpus(&root)?;
    let measured = measured_cpus(args.cpus.as_deref(), &online, &root)?;
    let report = AuditReport::of(&root, measured, &online);
    let text = if args.json {
        serde_json::to_string_pretty(&report)? + "\n"
    } else {
        audit_table::render(&report)
    };
    super::report::write_stdout(&text)?;
    Ok(Ending::Completed)
}

/// The online CPUs of the audited tree.
pub(crate) fn online_cpus(root: &Path) -> anyhow::Result<CpuList> {
    let path = root.join("sys/devices/system/cpu/online");
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    CpuList::parse_kernel(&text)
        .ok()
        .filter(|l| !l.is_empty())
        .with_context(|| format!("{}: not a CPU list: {:?}", path.display(), text.trim()))
}

/// `-a LIST`, every CPU of it online; by default the CPUs the audited host set apart
/// (isolcpus, nohz_full, an isolated cpuset partition) where it left others for
/// housekeeping, else every online CPU but the lowest, kept for housekeeping (all of them
/// on a one-CPU host).
fn measured_cpus(list: Option<&str>, online: &CpuList, root: &Path) -> anyhow::Result<CpuList> {
    let Some(text) = list else {
        let apart = Tuned::read(root).cpus.intersect(online);
        if !apart.is_empty() && apart != *online {
            return Ok(apart);
        }
        let rest = online.cpus().get(1..).unwrap_or_default().to_vec();
        return Ok(if rest.is_empty() {
            online.clone()
        } else {
            CpuList::from_cpus(rest)
        });
    };
    let cpus = CpuList::parse_strict(text).map_err(|e| anyhow::anyhow!("-a/--cpus: {e}"))?;
    if let Some(cpu) = cpus.without(online).first() {
        let e = CpuListError::Offline {
            list: text.to_string(),
            cpu,
            online: online.clone(),
        };
        bail!("-a/--cpus: {e}");
    }
    Ok(cpus)
}
