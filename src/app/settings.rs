//! The settings every measuring command shares, checked once: apart from the pipeline,
//! so that what the pipeline calls (a deadline run's admission) may build on them.

use std::time::Duration;

use anyhow::bail;

use crate::cli::{RunArgs, SaveArgs};
use crate::engine::sched::{Policy, SchedRequest};
use crate::report::result::gate::Gate;

/// The settings every measuring command shares, validated: what `RunArgs` holds once the
/// policy and priority agree. The main job builds these directly.
#[derive(Debug, Clone)]
pub struct RunSettings {
    /// `-a`, as given: each kind reads it its own way (a list, a pair, one CPU).
    pub cpus: Option<String>,
    pub housekeeping: Option<usize>,
    pub sched: SchedRequest,
    pub duration: Option<Duration>,
    pub mlock: bool,
    pub force: bool,
    pub save: SaveArgs,
    /// `--fail-above`: limits checked once the result is saved.
    pub gates: Vec<Gate>,
    /// The caller reads the whole result itself (the main job judges and saves it), so
    /// it is completed even when these settings save nothing; see `keeps_result`.
    pub whole_result: bool,
}

impl RunSettings {
    /// The settings from the flags; refuses a priority without a real-time policy.
    pub fn from_args(args: &RunArgs) -> anyhow::Result<RunSettings> {
        Ok(RunSettings {
            cpus: args.cpus.clone(),
            housekeeping: args.housekeeping,
            sched: sched_request(args.policy, args.priority)?,
            duration: args.duration,
            mlock: !args.no_mlock,
            force: args.force,
            save: args.save.clone(),
            gates: Vec::new(),
            whole_result: false,
        })
    }

    /// Whether anything reads the result beyond the table: then it gets the parts only a
    /// reader of the file needs, the host's audit and each histogram encoded. A run that
    /// only prints its table skips both: they cost time and about 0.8 MiB of a `noise`
    /// run's peak RSS (docs/guide/noise.md; issue 15: the audit's code and buffers, and the deflate
    /// state and buffers of each histogram's encoding).
    pub fn keeps_result(&self) -> bool {
        self.whole_result || self.save.keeps_result()
    }

    /// SCHED_OTHER on the default CPUs for the default time, memory locked, saved nowhere
    /// and printed nowhere: what the main job (which also reads each result whole) and
    /// ptp start from.
    pub fn quiet() -> RunSettings {
        RunSettings {
            cpus: None,
            housekeeping: None,
            sched: SchedRequest::OTHER,
            duration: None,
            mlock: true,
            force: false,
            save: SaveArgs {
                quiet: true,
                ..SaveArgs::default()
            },
            gates: Vec::new(),
            whole_result: false,
        }
    }
}

/// The policy and priority asked for: `-p` alone means SCHED_FIFO, `--policy fifo|rr`
/// alone priority 1, and SCHED_OTHER takes no priority.
pub fn sched_request(policy: Option<Policy>, priority: Option<u8>) -> anyhow::Result<SchedRequest> {
    let policy = match (policy, priority) {
        (Some(p), _) => p,
        (None, Some(_)) => Policy::Fifo,
        (None, None) => Policy::Other,
    };
    match (policy, priority) {
        (Policy::Deadline(_), _) => {
            bail!("--policy deadline: only timer and noise measure under SCHED_DEADLINE")
        }
        (Policy::Other, Some(p)) => {
            bail!("-p/--priority {p} needs --policy fifo or rr; SCHED_OTHER has no priority")
        }
        (Policy::Other, None) => Ok(SchedRequest::OTHER),
        (p, prio) => Ok(SchedRequest {
            policy: p,
            priority: prio.unwrap_or(1),
        }),
    }
}
