//! The main job's verdict in plain words: the noisiest and quietest CPU, what dominates
//! the noise (what was measured joined to what the audit found), and the top fixes ranked
//! by the share of the measured noise they would remove.
//!
//! # How noise is split into causes
//!
//! From each CPU's event log (the first interruptions, with their start times):
//! - **the timer tick**: interruptions with another one tick period (1, 3.33, 4 or 10 ms,
//!   for HZ 1000, 300, 250 or 100) before or after them, within 2 µs (0.2 % of longer
//!   periods). The tick is an hrtimer at a fixed period, so a precise train at one of those
//!   periods is its signature. The period is found first: the shortest one that clearly
//!   more interruptions match than random arrivals at the same rate would (5 % beyond
//!   chance, and at least 20), so a burst of unrelated interruptions does not make one.
//! - **long stalls** of 50 µs or more, on the tick train or not: on a virtual
//!   machine, the hypervisor descheduling the vCPU (an interrupt handler or the tick take
//!   a few µs); on bare metal, SMIs, long IRQ handlers or kernel work.
//! - **everything else**: device IRQs, softirqs, kernel threads, RCU.
//! - with `--trace` only, **RT throttling** and **the fair server**: the time the kernel
//!   held a runnable real-time loop off its CPU (`trace::attribute`), whose fixes are
//!   `kernel.sched_rt_runtime_us` and the fair server's runtime.
//! - with `--trace` on a nohz_full CPU, **the residual tick** and **a tick kept on**, as
//!   the trace's `timer:tick_stop` told them apart from the periodic tick (`nohz`).
//!
//! A cause's share is the time it took over the time all interruptions took, over every
//! measured CPU. Each cause is matched to the audit findings that would remove it; a fix's
//! share is its cause's share. Findings no measured cause points to follow, bad before
//! warn, with their share marked as not measured.

use crate::engine::sched::Policy;
use crate::probes::noise::NoiseEntry;
use crate::probes::pingpong::PingpongEntry;
use crate::probes::record::ThreadRecord;
use crate::probes::timer::TimerEntry;
use crate::report::{ResultFile, terminal::audit_table, terminal::group};
use crate::system::audit::{Finding, FindingId, Severity};

mod nohz;

/// Tick periods of the usual CONFIG_HZ values, ns.
const TICK_PERIODS_NS: [(u64, u32); 4] = [
    (1_000_000, 1000),
    (3_333_333, 300),
    (4_000_000, 250),
    (10_000_000, 100),
];
/// Share of interruptions, beyond chance, that must be followed by another one tick
/// period later for the tick to be found; and the fewest such interruptions.
const TICK_MIN_EXCESS: f64 = 0.05;
const TICK_MIN_EVENTS: usize = 20;
/// Shortest interruption counted as a long stall.
pub const LONG_STALL_NS: u64 = 50_000;

/// The causes and the findings that address each live in `system::cause_fix`, which
/// watch's cause table and tune's step order read too.
pub use crate::system::cause_fix::{Cause, matching};

/// How one CPU's logged interruptions split into causes, ns of interruption each.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Split {
    pub tick_ns: u64,
    pub long_ns: u64,
    pub other_ns: u64,
    /// Held off by RT throttling, and by the fair server (measured from a trace only).
    pub rt_ns: u64,
    pub fair_ns: u64,
    /// Held off by a cgroup's CFS quota (measured from a trace only).
    pub cfs_ns: u64,
    /// On a nohz_full CPU, the residual tick and the tick kept on (measured from a trace
    /// only), with the dependencies that kept it on (`SCHED`).
    pub residual_ns: u64,
    pub kept_ns: u64,
    pub kept_by: Vec<String>,
    /// The CPU is nohz_full: its tick should be stopped.
    pub nohz: bool,
    /// The largest traced row of "other" (its kind, its name, ns), for the sentence and
    /// the fix it points at.
    pub other_row: Option<(crate::stats::causes::CauseKind, String, u64)>,
    /// The tick period found, ns, and its HZ.
    pub tick: Option<(u64, u32)>,
    /// Measured from kernel trace events (`--trace`), not inferred from the gaps'
    /// timing; then `long_ns` is the unaccounted time (on a VM, mostly the hypervisor).
    pub measured: bool,
}

impl Split {
    fn total(&self) -> u64 {
        self.tick_ns
            + self.long_ns
            + self.other_ns
            + self.rt_ns
            + self.fair_ns
            + self.cfs_ns
            + self.residual_ns
            + self.kept_ns
    }
}

/// Splits interruptions (start ns, duration ns) into causes.
pub fn split(starts: &[u64], durations: &[u64]) -> Split {
    // An event log is in start order; a result file from elsewhere need not be.
    let mut events: Vec<(u64, u64)> = starts
        .iter()
        .copied()
        .zip(durations.iter().copied())
        .collect();
    events.sort_unstable();
    let (starts, durations): (Vec<u64>, Vec<u64>) = events.into_iter().unzip();
    let (starts, durations) = (&starts[..], &durations[..]);
    let tick = tick_period(starts);
    let mut s = Split {
        tick,
        ..Split::default()
    };
    for (i, &d) in durations.iter().enumerate() {
        let on_tick = tick.is_some_and(|(p, _)| {
            let t = starts[i];
            has_event_near(starts, t.saturating_add(p), p)
                || t.checked_sub(p)
                    .is_some_and(|b| has_event_near(starts, b, p))
        });
        // A long stall that begins at a tick (a hypervisor often deschedules a vCPU at a
        // timer interrupt) is the stall's, not the tick handler's.
        match (d >= LONG_STALL_NS, on_tick) {
            (true, _) => s.long_ns += d,
            (false, true) => s.tick_ns += d,
            (false, false) => s.other_ns += d,
        }
    }
    s
}

/// How far from a whole period a tick may land: the tick is an hrtimer, and the loop
/// sees it start within a few µs.
fn tolerance(period_ns: u64) -> u64 {
    (period_ns / 500).max(2_000)
}

/// Whether an interruption starts within the tolerance of `at`.
fn has_event_near(starts: &[u64], at: u64, period_ns: u64) -> bool {
    let tol = tolerance(period_ns);
    let i = starts.partition_point(|&s| s < at.saturating_sub(tol));
    starts.get(i).is_some_and(|&s| s <= at.saturating_add(tol))
}

/// The shortest tick period that clearly more interruptions than chance are followed by
/// another one period later. Chance is what events arriving at random at the same rate
/// would give; the shortest period wins because a 1 ms train also matches at 4 and 10 ms.
fn tick_period(starts: &[u64]) -> Option<(u64, u32)> {
    let n = starts.len();
    let span = starts.last()?.saturating_sub(*starts.first()?);
    if n < TICK_MIN_EVENTS || span == 0 {
        return None;
    }
    let rate = n as f64 / span as f64;
    TICK_PERIODS_NS.iter().copied().find(|&(p, _)| {
        let matched = starts
            .iter()
            .filter(|&&t| has_event_near(starts, t.saturating_add(p), p))
            .count();
        let chance = 1.0 - (-rate * 2.0 * tolerance(p) as f64).exp();
        let excess = (matched as f64 / n as f64 - chance) / (1.0 - chance);
        matched >= TICK_MIN_EVENTS && excess >= TICK_MIN_EXCESS
    })
}

/// One ranked fix.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Fix {
    pub finding: String,
    pub fix: String,
    /// Share of the measured interruption time it would remove (0..=1), when measured.
    pub share: Option<f64>,
    /// The `tune` command that would try the fix, where a tune step applies it at run time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tune: Option<String>,
    /// The fix typed, as the audit's finding holds it: printed remedy by remedy, each
    /// command and boot option whole on a line of its own (`audit_table::remedy`).
    /// Empty in results from before it was stored: then `fix` is printed as it is.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remedies: Vec<crate::system::audit::Remedy>,
}

/// The verdict, as the main job stores it in its result (`verdict`).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Verdict {
    /// Plain sentences, most important first.
    pub lines: Vec<String>,
    pub fixes: Vec<Fix>,
}

/// The verdict on a main-job result: its sentences bounded whatever the CPU count, CPUs
/// whose figures and causes agree said once (`report::terminal::group`).
pub fn verdict(r: &ResultFile) -> Verdict {
    let noise: Vec<&NoiseEntry> = r.entries().collect();
    let findings: Vec<&Finding> = r
        .host
        .audit
        .as_ref()
        .map(|a| a.findings.iter().collect())
        .unwrap_or_default();
    let hz = config_hz(&findings);
    let splits: Vec<Option<Split>> = (noise.iter())
        .map(|e| entry_split(e, &r.host.isolation.nohz_full))
        .collect();
    let grouping = group::group(&members_of(&noise, &splits, hz), &NOISE_KEYS);
    let mut lines = extremes(&noise, &grouping);
    lines.extend(nohz::preempt_rt_line(r));
    let rows = Rows {
        noise: &noise,
        splits: &splits,
        grouping: &grouping,
    };
    lines.extend(dominant(&rows, &findings, r.host.virtualization.as_deref()));
    lines.extend(coverage(&noise));
    lines.extend(other_probes(r));
    if !r.run.degraded.is_empty() {
        lines.push(format!(
            "{} degradation(s) apply to these figures; see the warnings.",
            r.run.degraded.len()
        ));
    }
    let judged: Vec<(usize, Split)> = (noise.iter().zip(&splits))
        .filter_map(|(e, s)| Some((e.cpu, without_foreign_tick(s.as_ref()?, hz))))
        .collect();
    let cpus: Vec<usize> = judged.iter().map(|s| s.0).collect();
    Verdict {
        lines,
        fixes: ranked_fixes(&judged, &findings, measured_steal_ns(r, &cpus)),
    }
}

/// The figures noise CPUs are grouped by: the share of time lost, then the p99
/// interruption (`report::terminal::group`).
pub const NOISE_KEYS: [group::Key; 2] = [group::share("share lost"), group::latency("p99")];

/// Each noise entry as a member to group: its largest cause as the verdict names it
/// (none when nothing split its time), its share of time lost (%) and its p99 (ns).
pub fn noise_members(r: &ResultFile) -> Vec<group::Member> {
    let noise: Vec<&NoiseEntry> = r.entries().collect();
    let findings: Vec<&Finding> = (r.host.audit.iter())
        .flat_map(|a| a.findings.iter())
        .collect();
    let splits: Vec<Option<Split>> = (noise.iter())
        .map(|e| entry_split(e, &r.host.isolation.nohz_full))
        .collect();
    members_of(&noise, &splits, config_hz(&findings))
}

fn members_of(
    noise: &[&NoiseEntry],
    splits: &[Option<Split>],
    hz: Option<u32>,
) -> Vec<group::Member> {
    (noise.iter().zip(splits))
        .map(|(e, s)| group::Member {
            cause: s.as_ref().map(|s| format!("{:?}", largest(s, hz).cause)),
            figures: vec![e.interrupted_pct, e.summary.p99_ns.unwrap_or(0) as f64],
        })
        .collect()
}

/// The noise entries, their splits and how they group: what the sentences are made of.
struct Rows<'a> {
    noise: &'a [&'a NoiseEntry],
    splits: &'a [Option<Split>],
    grouping: &'a group::Grouping,
}

/// Steal on `cpus` over the run, from the /proc/stat deltas the run stored (a main job
/// stores its noise step's); `None` when the run stored none.
fn measured_steal_ns(r: &ResultFile, cpus: &[usize]) -> Option<u64> {
    let c = r.run.counters.as_ref()?;
    let on = c.steal.iter().filter(|s| cpus.contains(&s.cpu));
    Some(on.map(|s| s.steal_ms * 1_000_000).sum())
}

/// How much of each run the causes rest on, when less than all of it, said once for
/// every CPU concerned: an untraced CPU whose event log filled up (its causes are
/// inferred from the interruptions the log kept), or a traced CPU whose trace did not
/// attribute every gap. A CPU whose trace attributed every gap gets no sentence,
/// whatever its event log kept: the causes rest on the trace, not the log.
fn coverage(noise: &[&NoiseEntry]) -> Vec<String> {
    let traced: Vec<(usize, u64, u64)> = (noise.iter())
        .filter_map(|e| {
            let a = e.attribution.as_ref()?;
            (a.gaps < e.interruptions).then_some((e.cpu, a.gaps, e.interruptions))
        })
        .collect();
    let logged: Vec<(usize, u64, u64, u64)> = (noise.iter())
        .filter(|e| e.attribution.is_none())
        .filter_map(|e| {
            let log = e.events.as_ref().filter(|l| l.dropped > 0)?;
            let kept = log.start_ns.len() as u64;
            let span = log.start_ns.last().copied().unwrap_or(0);
            Some((e.cpu, kept, kept + log.dropped, span))
        })
        .collect();
    let ints =
        |v: &mut dyn Iterator<Item = u64>| group::range(v.map(|n| n as f64), |n| format!("{n:.0}"));
    let mut out = Vec::new();
    match traced.as_slice() {
        [] => {}
        [(cpu, kept, of)] => out.push(format!(
            "CPU {cpu}'s causes rest on the {kept} of its {of} interruptions that the trace \
             attributed."
        )),
        many => out.push(format!(
            "The causes of {} rest on the interruptions the trace attributed: {} of {} each.",
            group::cpus_words(&many.iter().map(|t| t.0).collect::<Vec<_>>()),
            ints(&mut many.iter().map(|t| t.1)),
            ints(&mut many.iter().map(|t| t.2)),
        )),
    }
    match logged.as_slice() {
        [] => {}
        [(cpu, kept, of, span)] => out.push(format!(
            "CPU {cpu}'s causes rest on its first {kept} of {of} interruptions (the first {}).",
            duration_words(*span)
        )),
        many => {
            let spans = many.iter().map(|t| t.3 as f64);
            out.push(format!(
                "The causes of {} rest on the first {} of {} interruptions each (the first {}).",
                group::cpus_words(&many.iter().map(|t| t.0).collect::<Vec<_>>()),
                ints(&mut many.iter().map(|t| t.1)),
                ints(&mut many.iter().map(|t| t.2)),
                group::range(spans, |ns| duration_words(ns as u64)),
            ))
        }
    }
    out
}

/// An entry's split; `nohz_full`, the host's nohz_full CPUs.
fn entry_split(e: &NoiseEntry, nohz_full: &crate::engine::cpu::CpuList) -> Option<Split> {
    let nohz = nohz_full.contains(e.cpu);
    if let Some(a) = &e.attribution {
        return Some(measured_split(a, nohz)).filter(|s| s.total() > 0);
    }
    let log = e.events.as_ref()?;
    let s = Split {
        nohz,
        ..split(&log.start_ns, &log.duration_ns)
    };
    (s.total() > 0).then_some(s)
}

/// The causes as the trace measured them: the tick is the local timer vector running the
/// tick's hrtimer (on a nohz_full CPU, the residual tick or one kept on where the trace
/// said so: `nohz`); what no event covered is set where long stalls go.
fn measured_split(a: &crate::stats::causes::Attribution, nohz: bool) -> Split {
    let of = |c: &&crate::stats::causes::CauseRow| nohz::row_cause(c, nohz);
    let sum = |cause: Cause| -> u64 {
        (a.causes.iter())
            .filter(|c| of(c) == cause)
            .map(|c| c.total_ns)
            .sum()
    };
    let tick_row = a.causes.iter().find(|c| of(c) == Cause::Tick);
    let (tick_ns, long_ns) = (sum(Cause::Tick), sum(Cause::LongStall));
    let (rt_ns, fair_ns) = (sum(Cause::RtThrottling), sum(Cause::FairServer));
    let cfs_ns = sum(Cause::CfsQuota);
    let (residual_ns, kept_ns) = (sum(Cause::ResidualTick), sum(Cause::TickKept));
    let other_row = (a.causes.iter())
        .filter(|c| of(c) == Cause::Other)
        .max_by_key(|c| c.total_ns)
        .map(|c| (c.kind, c.cause.clone(), c.total_ns));
    Split {
        tick_ns,
        long_ns,
        other_ns: a
            .interrupted_ns
            .saturating_sub(tick_ns + long_ns + rt_ns + fair_ns + cfs_ns + residual_ns + kept_ns),
        rt_ns,
        fair_ns,
        cfs_ns,
        residual_ns,
        kept_ns,
        kept_by: nohz::kept_by(a.causes.iter().filter(|c| of(c) == Cause::TickKept)),
        nohz,
        other_row,
        tick: tick_row
            .and_then(|r| r.period_ns)
            .filter(|p| *p > 0)
            .map(|p| (p, (1e9 / p as f64).round() as u32)),
        measured: true,
    }
}

/// The split with a "tick" that is not this kernel's (another HZ) counted as other
/// noise: the guest's nohz_full could not remove it.
fn without_foreign_tick(s: &Split, hz: Option<u32>) -> Split {
    match (s.tick, hz) {
        (Some((_, h)), Some(hz)) if hz.abs_diff(h) * 50 > hz => Split {
            other_ns: s.other_ns + s.tick_ns,
            tick_ns: 0,
            tick: None,
            ..s.clone()
        },
        _ => s.clone(),
    }
}

/// CONFIG_HZ as the audit read it, from its hz-tick finding ("CONFIG_HZ=250: …").
fn config_hz(findings: &[&Finding]) -> Option<u32> {
    let tick = findings.iter().find(|f| f.id == FindingId::HzTick)?;
    tick.value
        .strip_prefix("CONFIG_HZ=")
        .and_then(|v| v.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok())
}

/// The noisiest and quietest CPU, by the share of time lost (the grouping's, whose first
/// figure it is): one sentence.
fn extremes(noise: &[&NoiseEntry], grouping: &group::Grouping) -> Vec<String> {
    let (worst, best) = match (noise, grouping.noisiest.zip(grouping.quietest)) {
        ([], _) => return vec!["No noise was measured.".into()],
        ([one], _) => (*one, *one),
        (_, Some((hi, lo))) => (noise[hi], noise[lo]),
        (_, None) => return vec!["No noise was measured.".into()],
    };
    if noise.len() == 1 {
        return vec![format!(
            "CPU {} lost {:.3} % of its time to {:.0} interruptions a second, the longest {} \
             (noise loop at {}).",
            worst.cpu,
            worst.interrupted_pct,
            worst.rate_per_s,
            figure_words(worst.summary.max_ns),
            sched_words(&worst.thread)
        )];
    }
    let loops = match (sched_words(&worst.thread), sched_words(&best.thread)) {
        (a, b) if a == b => format!("noise loops at {a}"),
        (a, b) => format!("noise loops at {a} and {b}"),
    };
    vec![format!(
        "Noisiest: CPU {} lost {:.3} % of its time to {:.0} interruptions a second, the \
         longest {}; quietest: CPU {}, {:.3} % to {:.0} a second, the longest {} ({loops}).",
        worst.cpu,
        worst.interrupted_pct,
        worst.rate_per_s,
        figure_words(worst.summary.max_ns),
        best.cpu,
        best.interrupted_pct,
        best.rate_per_s,
        figure_words(best.summary.max_ns),
    )]
}

/// How many rows of the grouping the verdict gives a sentence of their own.
const SENTENCES: usize = 3;

/// The cause that took most of a CPU's lost time.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Largest {
    cause: Cause,
    /// Of the CPU's lost time, %.
    share: f64,
    /// This kernel's tick, when the split found it.
    tick: Option<(u64, u32)>,
}

/// The largest cause of a split. A train one "tick" apart that is not this kernel's tick
/// is not the tick: on a VM it is most likely the host's, and counts as other noise.
fn largest(s: &Split, hz: Option<u32>) -> Largest {
    let tick = s
        .tick
        .filter(|(_, h)| hz.is_none_or(|hz| hz.abs_diff(*h) * 50 <= hz));
    let (tick_ns, other_ns) = match (s.tick, tick) {
        (Some(_), None) => (0, s.other_ns + s.tick_ns),
        _ => (s.tick_ns, s.other_ns),
    };
    let parts = [
        (Cause::Tick, tick_ns),
        (Cause::LongStall, s.long_ns),
        (Cause::Other, other_ns),
        (Cause::RtThrottling, s.rt_ns),
        (Cause::FairServer, s.fair_ns),
        (Cause::CfsQuota, s.cfs_ns),
        (Cause::ResidualTick, s.residual_ns),
        (Cause::TickKept, s.kept_ns),
    ];
    let (cause, ns) = parts
        .into_iter()
        .fold(parts[0], |m, p| if p.1 > m.1 { p } else { m });
    Largest {
        cause,
        share: ns as f64 / s.total().max(1) as f64 * 100.0,
        tick,
    }
}

/// What dominates, said once per row of the grouping (a group of CPUs that agree, or a
/// CPU on its own), joined to the audit finding behind it: the largest rows first, at
/// most [`SENTENCES`] of them; the CPUs of the others are named in one more line.
fn dominant(rows: &Rows, findings: &[&Finding], hypervisor: Option<&str>) -> Vec<String> {
    let split_of = |i: usize| rows.splits.get(i).and_then(Option::as_ref);
    let mut order: Vec<(bool, Vec<usize>)> = (rows.grouping.rows.iter())
        .map(|r| {
            let members = r.members().into_iter().filter(|&i| split_of(i).is_some());
            (
                matches!(r, group::Row::Rest(_)),
                members.collect::<Vec<_>>(),
            )
        })
        .filter(|(_, m)| !m.is_empty())
        .collect();
    order.sort_by_key(|(rest, m)| (*rest, std::cmp::Reverse(m.len())));
    let (mut out, mut others) = (Vec::new(), Vec::new());
    for (rest, members) in order {
        let splits: Vec<(&NoiseEntry, &Split)> = (members.iter())
            .filter_map(|&i| Some((rows.noise[i], split_of(i)?)))
            .collect();
        match !rest && out.len() < SENTENCES {
            true => out.push(sentence(&splits, findings, hypervisor)),
            false => others.extend(splits.iter().map(|(e, _)| e.cpu)),
        }
    }
    if !others.is_empty() {
        others.sort_unstable();
        out.push(format!(
            "{} {} other largest causes or figures: the tables show each group, and \
             --per-cpu each CPU.",
            group::cpus_words(&others),
            if others.len() == 1 { "has" } else { "have" }
        ));
    }
    out
}

/// One sentence of what dominates on `cpus` (their entries and splits: one CPU, or CPUs
/// that share their largest cause), joined to the audit finding behind it.
fn sentence(
    cpus: &[(&NoiseEntry, &Split)],
    findings: &[&Finding],
    hypervisor: Option<&str>,
) -> String {
    let hz = config_hz(findings);
    let (first, s) = cpus[0];
    let l = largest(s, hz);
    let many = cpus.len() > 1;
    let share = group::range(cpus.iter().map(|(_, s)| largest(s, hz).share), |v| {
        format!("{v:.0}")
    });
    let (loses, is, its) = match many {
        true => ("lose", "are", "their"),
        false => ("loses", "is", "its"),
    };
    let subject = match many {
        true => {
            let ids: Vec<usize> = cpus.iter().map(|(e, _)| e.cpu).collect();
            let lost = group::range(cpus.iter().map(|(e, _)| e.interrupted_pct), |v| {
                format!("{v:.2}")
            });
            format!("{} ({lost} % lost)", group::cpus_words(&ids))
        }
        false => format!("CPU {}", first.cpu),
    };
    let how = match s.measured {
        true => "measured from kernel trace events",
        false => "inferred from the gaps' timing, not traced",
    };
    // On a nohz_full CPU the tick is named as the trace (or its absence) allows.
    let nohz_words = nohz::words(l.cause, l.tick, s, &share, (is, its));
    let what = nohz_words.unwrap_or_else(|| match (l.cause, l.tick, hypervisor, s.measured) {
        (Cause::Tick, Some((p, hz)), _, _) => format!(
            "{is} interrupted every {}: the timer tick (HZ={hz}), {share} % of {its} lost time",
            duration_words(p)
        ),
        (Cause::LongStall, _, Some(h), true) => format!(
            "{loses} most time ({share} %) where no kernel event ran: entry and exit, and the \
             {h} hypervisor holding the vCPU"
        ),
        (Cause::LongStall, _, None, true) => format!(
            "{loses} most time ({share} %) where no kernel event ran: entry and exit, SMIs or \
             the hardware"
        ),
        (Cause::LongStall, _, Some(h), false) => format!(
            "{loses} most time ({share} %) to stalls of {} or more: likely the {h} hypervisor \
             descheduling the vCPU",
            duration_words(LONG_STALL_NS)
        ),
        (Cause::LongStall, _, None, false) => format!(
            "{loses} most time ({share} %) to stalls of {} or more (long IRQ handlers, SMIs or \
             kernel work)",
            duration_words(LONG_STALL_NS)
        ),
        (Cause::RtThrottling, ..) => format!(
            "{loses} most time ({share} %) to real-time throttling: the kernel holds the \
             real-time loop off for the rest of each period (kernel.sched_rt_runtime_us)"
        ),
        (Cause::FairServer, ..) => format!(
            "{loses} most time ({share} %) to the fair server: the kernel runs normal tasks \
             for its runtime each period instead of the real-time loop"
        ),
        (Cause::CfsQuota, ..) => format!(
            "{loses} most time ({share} %) to {its} cgroup's CFS quota: the kernel holds the \
             group's threads off for the rest of each period once its quota is spent \
             (cpu.max, or cpu.cfs_quota_us)"
        ),
        _ => match &s.other_row {
            Some((_, row, _)) => format!(
                "{loses} most time ({share} %) to short interruptions off the tick's period \
                 (device IRQs, softirqs, kernel threads), the most to {row}"
            ),
            None => format!(
                "{loses} most time ({share} %) to short interruptions off the tick's period \
                 (device IRQs, softirqs, kernel threads)"
            ),
        },
    });
    let not_tick = match (s.tick, l.tick, hz) {
        (Some((p, _)), None, Some(hz)) => format!(
            " A train every {} is not this kernel's tick (CONFIG_HZ={hz}); on a VM it is most \
             likely the host's.",
            duration_words(p)
        ),
        _ => String::new(),
    };
    let fix = match (l.cause, &s.other_row) {
        // The largest row's own fix: an IRQ thread's is its IRQ's affinity.
        (Cause::Other, Some((kind, row, _))) => {
            crate::system::cause_fix::row_matching(*kind, row, findings)
                .first()
                .copied()
                .or_else(|| matching(l.cause, findings).first().copied())
        }
        _ => matching(l.cause, findings).first().copied(),
    };
    let why = match fix {
        Some(f) => format!("; audit {}: {}", f.id, f.why),
        None => String::new(),
    };
    format!("{subject} {what} ({how}){why}.{not_tick}")
}

/// The top three fixes: measured causes first, by share; then other findings.
///
/// Long stalls are only what no event (or no other cause) explains: their share goes to
/// no finding by guess. Steal is the one part of them measured apart (/proc/stat over
/// the run): the steal-time fix is credited with that, at most the stalls' share, and
/// with nothing when the run saw no steal or stored no counters.
fn ranked_fixes(
    splits: &[(usize, Split)],
    findings: &[&Finding],
    steal_ns: Option<u64>,
) -> Vec<Fix> {
    let total: u64 = splits.iter().map(|s| s.1.total()).sum();
    let sum = |f: fn(&Split) -> u64| splits.iter().map(|s| f(&s.1)).sum::<u64>();
    let mut causes = [
        (Cause::Tick, sum(|s| s.tick_ns)),
        (Cause::LongStall, sum(|s| s.long_ns)),
        (Cause::Other, sum(|s| s.other_ns)),
        (Cause::RtThrottling, sum(|s| s.rt_ns)),
        (Cause::FairServer, sum(|s| s.fair_ns)),
        (Cause::CfsQuota, sum(|s| s.cfs_ns)),
        (Cause::ResidualTick, sum(|s| s.residual_ns)),
        (Cause::TickKept, sum(|s| s.kept_ns)),
    ];
    causes.sort_by_key(|c| std::cmp::Reverse(c.1));
    // The largest row of "other" over the CPUs: its own fix is the one named for it.
    let other_row = (splits.iter())
        .filter_map(|s| s.1.other_row.as_ref())
        .max_by_key(|r| r.2);
    let mut fixes: Vec<Fix> = Vec::new();
    let mut used: Vec<FindingId> = Vec::new();
    for (cause, ns) in causes {
        if ns == 0 || total == 0 {
            continue;
        }
        if cause == Cause::LongStall {
            let steal = findings.iter().find(|f| {
                f.id == FindingId::StealTime && matches!(f.severity, Severity::Warn | Severity::Bad)
            });
            if let (Some(f), Some(st)) = (steal, steal_ns.filter(|n| *n > 0)) {
                used.push(f.id);
                fixes.push(fix_of(f, Some(st.min(ns) as f64 / total as f64)));
            }
            continue;
        }
        let row_fix = match (cause, other_row) {
            (Cause::Other, Some((kind, row, _))) => {
                crate::system::cause_fix::row_matching(*kind, row, findings)
            }
            _ => Vec::new(),
        };
        if let Some(f) = (row_fix.into_iter())
            .chain(matching(cause, findings))
            .find(|f| !used.contains(&f.id))
        {
            used.push(f.id);
            fixes.push(fix_of(f, Some(ns as f64 / total as f64)));
        }
    }
    // By share: the steal fix may be credited less than its cause's whole share.
    fixes.sort_by(|a, b| b.share.unwrap_or(0.0).total_cmp(&a.share.unwrap_or(0.0)));
    let mut rest: Vec<&&Finding> = findings
        .iter()
        .filter(|f| matches!(f.severity, Severity::Warn | Severity::Bad) && !used.contains(&f.id))
        .collect();
    rest.sort_by_key(|f| std::cmp::Reverse(f.severity));
    fixes.extend(rest.into_iter().map(|f| fix_of(f, None)));
    fixes.truncate(3);
    fixes
}

fn fix_of(f: &Finding, share: Option<f64>) -> Fix {
    Fix {
        finding: f.id.to_string(),
        fix: f.fix.clone(),
        share,
        tune: crate::system::tune::try_it(f),
        remedies: f.remedies.clone(),
    }
}

/// The worst timer wake-up and the pingpong medians, in a line each.
fn other_probes(r: &ResultFile) -> Vec<String> {
    let mut out = Vec::new();
    let timers: Vec<&TimerEntry> = r.entries().collect();
    // The first of equals, as the tables name them.
    let worst_timer = (timers.iter().copied()).reduce(|a, b| {
        if b.summary.max_ns > a.summary.max_ns {
            b
        } else {
            a
        }
    });
    match (worst_timer, timers.len()) {
        (Some(t), 1) => out.push(format!(
            "A timer thread on CPU {} ({}, {}) woke up to {} late (p99 {}).",
            t.cpu,
            sched_words(&t.thread),
            slack_words(t.config.timer_slack_ns),
            figure_words(t.summary.max_ns),
            figure_words(t.summary.p99_ns)
        )),
        (Some(t), _) => {
            let ids: Vec<usize> = timers.iter().map(|t| t.cpu).collect();
            let how = group::distinct((timers.iter()).map(|t| {
                format!(
                    "{}, {}",
                    sched_words(&t.thread),
                    slack_words(t.config.timer_slack_ns)
                )
            }));
            let p99 = timers.iter().filter_map(|t| t.summary.p99_ns);
            out.push(format!(
                "Timer threads on {} ({how}) woke up to {} late (CPU {}), p99 {}.",
                group::cpus_words(&ids),
                figure_words(t.summary.max_ns),
                t.cpu,
                group::range(p99.map(|ns| ns as f64), |ns| duration_words(ns as u64)),
            ));
        }
        (None, _) => {}
    }
    for p in r.entries::<PingpongEntry>() {
        let sched = match (sched_words(&p.thread_a), sched_words(&p.thread_b)) {
            (a, b) if a == b => a,
            (a, b) => format!("{a} and {b}"),
        };
        out.push(format!(
            "A {} round trip between CPUs {} and {} ({sched}) takes {} (median), {} at p99.",
            p.mechanism,
            p.cpu_a,
            p.cpu_b,
            figure_words(p.rtt.summary.p50_ns),
            figure_words(p.rtt.summary.p99_ns)
        ));
    }
    out
}

/// The policy a figure was measured at, as the kernel's constants name it: a figure at
/// SCHED_OTHER measures the scheduler's fairness as much as the host.
fn sched_words(t: &ThreadRecord) -> String {
    match t.policy {
        Policy::Other => "SCHED_OTHER".into(),
        Policy::Fifo => format!("SCHED_FIFO {}", t.priority),
        Policy::Rr => format!("SCHED_RR {}", t.priority),
        Policy::Deadline(d) => format!("SCHED_DEADLINE {d}"),
    }
}

/// A timer thread's slack: up to this much of each wake-up's lateness is on purpose.
fn slack_words(ns: Option<u64>) -> String {
    match ns {
        Some(ns) => format!("timer slack {}", duration_words(ns)),
        None => "timer slack not recorded".into(),
    }
}

/// A figure that may be absent (nothing recorded), in words with its unit.
fn figure_words(ns: Option<u64>) -> String {
    ns.map_or_else(|| "none recorded".into(), duration_words)
}

/// A duration with the unit that suits it.
pub fn duration_words(ns: u64) -> String {
    match ns {
        0..1_000 => format!("{ns} ns"),
        1_000..1_000_000 => format!("{:.1} µs", ns as f64 / 1e3),
        1_000_000..1_000_000_000 => format!("{:.2} ms", ns as f64 / 1e6),
        _ => format!("{:.2} s", ns as f64 / 1e9),
    }
}

/// The verdict as text, fixes numbered: each line wrapped to the current layout's width
/// (`report::terminal::table::Layout`), and each command in a fix on a line of its own, never
/// broken, so that it can be pasted as it is (`audit_table::fix_text`).
pub fn text(v: &Verdict) -> String {
    let width = crate::report::terminal::table::Layout::current().wrap_width();
    let wrap = |l: &str| crate::report::terminal::table::wrap(&format!("  {l}"), width, "    ");
    let mut out = String::from("Verdict\n");
    for l in &v.lines {
        out.push_str(&wrap(l));
        out.push('\n');
    }
    if v.fixes.is_empty() {
        out.push_str("  The audit found nothing to fix on the measured CPUs.\n");
        return out;
    }
    out.push_str("Top fixes\n");
    for (i, f) in v.fixes.iter().enumerate() {
        let head = format!("{}. {} ({}):", i + 1, f.finding, share_words(f.share));
        out.push_str(&wrap(&head));
        out.push('\n');
        out.push_str(&audit_table::fix_text(
            &f.fix,
            &f.remedies,
            width,
            FIX_INDENT,
        ));
        if let Some(cmd) = &f.tune {
            for line in command_lines("try it:", cmd, width, FIX_INDENT) {
                out.push_str(&line);
                out.push('\n');
            }
        }
    }
    out
}

/// Where a fix's lines begin, under its numbered head.
const FIX_INDENT: &str = "     ";

/// A command with its label ("now:", "try it:"): on one line when both fit, else the
/// label alone and the command under it; the command is never broken.
fn command_lines(label: &str, cmd: &str, width: Option<usize>, indent: &str) -> Vec<String> {
    let one = match label {
        "" => format!("{indent}{cmd}"),
        l => format!("{indent}{l} {cmd}"),
    };
    if label.is_empty() || width.is_none_or(|w| one.chars().count() <= w) {
        return vec![one];
    }
    vec![format!("{indent}{label}"), format!("{indent}  {cmd}")]
}

pub fn share_words(share: Option<f64>) -> String {
    match share {
        // A measured share that rounds to 0 is still measured and not nothing.
        Some(s) if s * 100.0 < 0.5 => "under 1 % of the measured noise".into(),
        Some(s) => format!("about {:.0} % of the measured noise", s * 100.0),
        None => "share not measured".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fix_tune_can_try_ends_with_its_command() {
        let v = Verdict {
            lines: Vec::new(),
            fixes: vec![
                Fix {
                    finding: "rt-throttling-on".into(),
                    fix: "sysctl -w kernel.sched_rt_runtime_us=-1".into(),
                    share: None,
                    tune: Some("jitterscope tune --step rt-throttling-on".into()),
                    remedies: Vec::new(),
                },
                Fix {
                    finding: "isolated-missing".into(),
                    fix: "boot with isolcpus=1".into(),
                    share: None,
                    tune: None,
                    remedies: Vec::new(),
                },
            ],
        };
        let t = text(&v);
        assert!(
            t.contains(
                "     sysctl -w kernel.sched_rt_runtime_us=-1\n     \
                 try it: jitterscope tune --step rt-throttling-on\n  2."
            ),
            "{t}"
        );
        assert_eq!(t.matches("try it").count(), 1, "{t}");
    }

    /// Review 2 of issue 29: boot options and a command the verdict did not know by its
    /// first word were word-wrapped (at 80 columns "at boot: isolcpus=…" on one line,
    /// "nohz_full=… rcu_nocbs=…" on the next; "ethtool -C eth0 …" broken mid-command).
    /// The typed remedies are laid out as the audit does: each whole on a line.
    #[test]
    fn boot_options_and_commands_are_never_split() {
        use crate::system::audit::Remedy;
        let cpus = "1-3,5,7,9-11,13,15-47";
        let options = vec![
            format!("isolcpus=managed_irq,domain,{cpus}"),
            format!("nohz_full={cpus}"),
            format!("rcu_nocbs={cpus}"),
        ];
        let ethtool =
            "ethtool -C eth0 adaptive-rx off rx-usecs 0 rx-frames 1 tx-usecs 0 tx-frames 1";
        let remedies = vec![
            Remedy::Runtime {
                command: ethtool.into(),
                effects: Vec::new(),
            },
            Remedy::Boot {
                options: options.clone(),
                how: "on the kernel command line, then reboot".into(),
            },
        ];
        let fix = Fix {
            finding: "isolated-missing".into(),
            fix: format!("now: {ethtool}; at boot: {} (…)", options.join(" ")),
            share: Some(0.5),
            tune: None,
            remedies,
        };
        let v = Verdict {
            lines: Vec::new(),
            fixes: vec![fix],
        };
        let t = crate::report::terminal::table::Layout::fixed(80, false).scoped(|| text(&v));
        let pasted = |l: &str| t.lines().any(|line| line.trim() == l);
        assert!(pasted(&options.join(" ")), "{t}");
        assert!(pasted(ethtool), "{t}");
        // A fix stored before remedies were: a command that begins it kept whole, what
        // is said after it below.
        let cmd = "for i in 25 26 29 31 33 35; do echo 0 > /proc/irq/$i/smp_affinity_list; done";
        let old = Fix {
            remedies: Vec::new(),
            fix: format!("{cmd} (and boot with irqaffinity=0)"),
            ..v.fixes[0].clone()
        };
        let v = Verdict {
            lines: Vec::new(),
            fixes: vec![old],
        };
        let t = crate::report::terminal::table::Layout::fixed(80, false).scoped(|| text(&v));
        assert!(
            t.contains(&format!(
                "     {cmd}\n       (and boot with irqaffinity=0)\n"
            )),
            "{t}"
        );
    }

    /// The frozen main-job fixture with steal counters of `steal_ms` on CPU 1.
    fn fixture_with_steal(steal_ms: Option<u64>) -> ResultFile {
        let mut r =
            ResultFile::parse(include_str!("../../../tests/fixtures/all-probes.json")).unwrap();
        r.run.counters = steal_ms.map(|ms| crate::system::counters::CounterDelta {
            cpus: crate::engine::cpu::CpuList::from_cpus(vec![1]),
            elapsed_ns: 400_000_000,
            interrupts: Vec::new(),
            softirqs: Vec::new(),
            steal: vec![crate::system::counters::StealDelta {
                cpu: 1,
                steal_ms: ms,
                total_ms: 400,
                steal_pct: ms as f64 / 4.0,
            }],
            kthreads: Vec::new(),
            cgroup: None,
        });
        r
    }

    fn steal_fix(v: &Verdict) -> Option<&Fix> {
        v.fixes.iter().find(|f| f.finding == "steal-time")
    }

    /// Issue 15: the audit saw steal on the host, but the run measured none: the verdict
    /// credits the steal-time fix with no share; measured steal is credited as measured,
    /// at most the long stalls' share, and the shares still sum to at most the whole.
    #[test]
    fn issue15_steal_is_credited_only_as_measured() {
        for stored in [None, Some(0)] {
            let v = verdict(&fixture_with_steal(stored));
            assert!(
                steal_fix(&v).is_none_or(|f| f.share.is_none()),
                "{stored:?}: {:?}",
                v.fixes
            );
        }
        let r = fixture_with_steal(Some(2));
        let v = verdict(&r);
        let e = r.entries::<NoiseEntry>().next().unwrap();
        let s = entry_split(e, &Default::default()).unwrap();
        let want = (2_000_000u64.min(s.long_ns)) as f64 / s.total() as f64;
        let got = steal_fix(&v)
            .and_then(|f| f.share)
            .expect("steal is credited");
        assert!((got - want).abs() < 1e-9, "{got} vs {want}");
        let sum: f64 = v.fixes.iter().filter_map(|f| f.share).sum();
        assert!(sum <= 1.0 + 1e-9, "{:?}", v.fixes);
        let shares: Vec<f64> = v.fixes.iter().filter_map(|f| f.share).collect();
        assert!(shares.windows(2).all(|w| w[0] >= w[1]), "{shares:?}");
    }

    #[test]
    fn a_regular_train_is_the_tick() {
        // A 4 ms tick of 3 µs, with a 200 µs stall and a stray 2 µs IRQ between.
        let mut starts: Vec<u64> = (0..100).map(|i| i * 4_000_000).collect();
        let mut durs = vec![3_000; 100];
        starts.push(1_000_000);
        durs.push(200_000);
        starts.push(2_500_000);
        durs.push(2_000);
        let mut ev: Vec<(u64, u64)> = starts.into_iter().zip(durs).collect();
        ev.sort();
        let (s, d): (Vec<u64>, Vec<u64>) = ev.into_iter().unzip();
        let sp = split(&s, &d);
        assert_eq!(sp.tick, Some((4_000_000, 250)));
        assert_eq!(sp.long_ns, 200_000);
        assert_eq!(sp.other_ns, 2_000);
        assert_eq!(sp.tick_ns, 100 * 3_000);
    }

    /// Random arrivals at `per_s` over `secs`, from a fixed-seed LCG.
    fn poisson(per_s: f64, secs: f64, mut seed: u64) -> Vec<u64> {
        let mut t = 0.0;
        let mut out = Vec::new();
        loop {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let u = ((seed >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
            t += -u.ln() / per_s;
            if t >= secs {
                return out;
            }
            out.push((t * 1e9) as u64);
        }
    }

    #[test]
    fn a_1ms_tick_is_found_among_dense_noise_and_dense_noise_alone_is_not_a_tick() {
        let noise = poisson(8_000.0, 0.5, 7);
        assert_eq!(split(&noise, &vec![2_000; noise.len()]).tick, None);
        // 500 ticks at 1 ms with 1 µs of jitter, among 4000 random interruptions.
        let mut all: Vec<(u64, u64)> = noise.iter().map(|&t| (t, 2_000)).collect();
        all.extend((0..500u64).map(|i| (i * 1_000_000 + (i * 37 % 3) * 500, 5_000)));
        all.sort();
        let (s, d): (Vec<u64>, Vec<u64>) = all.into_iter().unzip();
        let sp = split(&s, &d);
        assert_eq!(sp.tick, Some((1_000_000, 1000)));
        // Every tick is on the train; a few random ones land on it by chance.
        assert!(sp.tick_ns >= 500 * 5_000, "{sp:?}");
        assert!(sp.tick_ns < 500 * 5_000 + 400 * 2_000, "{sp:?}");
    }

    #[test]
    fn random_arrivals_are_not_the_tick() {
        let mut t = 0u64;
        let mut starts = Vec::new();
        for i in 0..200u64 {
            t += 500_000 + (i * 7919 % 1000) * 7_000;
            starts.push(t);
        }
        let durs = vec![5_000; 200];
        let sp = split(&starts, &durs);
        assert_eq!(sp.tick, None);
        assert_eq!(sp.other_ns, 1_000_000);
    }

    fn finding(id: &str, severity: Severity) -> Finding {
        let id = id.parse().expect("a finding id");
        Finding::made_up(id, severity, &format!("fix {id}"))
    }

    #[test]
    fn fixes_rank_by_measured_share_then_severity() {
        let f = [
            finding("isolated-missing", Severity::Warn),
            finding("nohz-full-missing", Severity::Warn),
            finding("irq-on-measured-cpus", Severity::Bad),
            finding("swap-on", Severity::Bad),
            finding("thp-always", Severity::Warn),
            finding("governor-performance", Severity::Ok),
        ];
        let refs: Vec<&Finding> = f.iter().collect();
        // Issue 13: a 1 ms train on a kernel of CONFIG_HZ=250 is not its tick.
        let foreign = Split {
            tick_ns: 700,
            long_ns: 0,
            other_ns: 300,
            tick: Some((1_000_000, 1000)),
            measured: false,
            ..Split::default()
        };
        let judged = without_foreign_tick(&foreign, Some(250));
        assert_eq!(
            (judged.tick_ns, judged.other_ns, judged.tick),
            (0, 1000, None)
        );
        assert_eq!(without_foreign_tick(&foreign, Some(1000)), foreign);
        let splits = [(
            1,
            Split {
                tick_ns: 700,
                long_ns: 0,
                other_ns: 300,
                tick: Some((1_000_000, 1000)),
                measured: false,
                ..Split::default()
            },
        )];
        let fixes = ranked_fixes(&splits, &refs, None);
        let ids: Vec<&str> = fixes.iter().map(|f| f.finding.as_str()).collect();
        // The tick's most specific finding first, with its share; then the IRQs; then
        // the worst unmeasured finding, its share unknown.
        assert_eq!(
            ids,
            ["nohz-full-missing", "irq-on-measured-cpus", "swap-on"]
        );
        assert_eq!(fixes[0].share, Some(0.7));
        assert_eq!(fixes[1].share, Some(0.3));
        assert_eq!(fixes[2].share, None);
    }

    /// Issue 22: time the trace measured under RT throttling or the fair server points
    /// at the setting that controls it, with its share.
    #[test]
    fn issue22_measured_throttling_points_at_its_setting() {
        let f = [
            finding("irq-on-measured-cpus", Severity::Bad),
            finding("rt-throttling-on", Severity::Warn),
            finding("fair-server-on", Severity::Info),
        ];
        let refs: Vec<&Finding> = f.iter().collect();
        for (split, want) in [
            (
                Split {
                    other_ns: 100,
                    rt_ns: 900,
                    measured: true,
                    ..Split::default()
                },
                ("rt-throttling-on", "real-time throttling"),
            ),
            (
                Split {
                    other_ns: 100,
                    fair_ns: 900,
                    measured: true,
                    ..Split::default()
                },
                ("fair-server-on", "the fair server"),
            ),
        ] {
            let splits = [(1, split)];
            let fixes = ranked_fixes(&splits, &refs, None);
            assert_eq!(fixes[0].finding, want.0);
            assert_eq!(fixes[0].share, Some(0.9));
            assert_eq!(fixes[1].finding, "irq-on-measured-cpus");
            let r = fixture_with_steal(None);
            let e = r.entries::<NoiseEntry>().next().expect("a noise entry");
            let line = sentence(&[(e, &splits[0].1)], &refs, None);
            assert!(line.contains(want.1), "{line}");
        }
    }

    /// Review of issue 30: a run whose traced time went 98 % to a cgroup's CFS quota
    /// (2 % unaccounted), on a host whose audit warns of the quota and of IRQs on the
    /// measured CPUs. The verdict said "short interruptions off the tick's period
    /// (device IRQs …); audit irq-on-measured-cpus" and ranked that fix first at 98 %.
    #[test]
    fn a_cfs_quota_window_is_credited_to_the_quota() {
        use crate::stats::causes::{Attribution, CauseKind, CauseRow};
        let quota = "CFS quota: cpu.cfs_quota_us 35000, cpu.cfs_period_us 100000 of /jsq";
        let a = Attribution::of_causes(
            vec![
                CauseRow::made_up(CauseKind::Throttling, quota, 10, 0, 98_000_000),
                CauseRow::made_up(CauseKind::Unaccounted, "unaccounted", 10, 0, 2_000_000),
            ],
            20,
            100_000_000,
        );
        let s = measured_split(&a, false);
        assert_eq!((s.cfs_ns, s.other_ns), (98_000_000, 0), "{s:?}");
        let f = [
            finding("irq-on-measured-cpus", Severity::Bad),
            finding("cfs-quota", Severity::Warn),
        ];
        let refs: Vec<&Finding> = f.iter().collect();
        let fixes = ranked_fixes(&[(1, s.clone())], &refs, None);
        assert_eq!(fixes[0].finding, "cfs-quota");
        assert_eq!(fixes[0].share, Some(0.98));
        assert_eq!(fixes[1].share, None, "{fixes:?}");
        let r = fixture_with_steal(None);
        let e = r.entries::<NoiseEntry>().next().expect("a noise entry");
        let line = sentence(&[(e, &s)], &refs, None);
        assert!(
            line.contains("CFS quota") && line.contains("audit cfs-quota"),
            "{line}"
        );
        assert!(!line.contains("IRQ") && !line.contains("irq-on"), "{line}");
    }

    /// Issue 48, on a nohz_full CPU of a CONFIG_HZ=250 kernel: a traced tick row a second
    /// apart is the residual tick, never "not this kernel's tick" nor a tick at "HZ=1",
    /// and no nohz_full fix is credited with it; an IRQ thread's row, the largest of the
    /// rest, is named in the sentence and points at its IRQ's affinity, not isolation.
    #[test]
    fn issue48_the_residual_tick_and_an_irq_thread_are_named_as_what_they_are() {
        use crate::stats::causes::{Attribution, CauseKind, CauseRow};
        let tick = CauseRow {
            period_ns: Some(1_040_000_000),
            ..CauseRow::made_up(
                CauseKind::Vector,
                "vector local_timer: tick_sched_timer",
                3,
                3,
                60_000,
            )
        };
        let irq = "irq 4 ttyS0 (its thread irq/4-ttyS0, real-time 50)";
        let a = Attribution::of_causes(
            vec![
                tick,
                CauseRow::made_up(CauseKind::Irq, irq, 20, 20, 30_000),
                CauseRow::made_up(
                    CauseKind::Task,
                    "task cat:900 (SCHED_OTHER nice 0)",
                    2,
                    2,
                    10_000,
                ),
            ],
            25,
            100_000,
        );
        let s = measured_split(&a, true);
        assert_eq!(
            (s.residual_ns, s.tick_ns, s.tick),
            (60_000, 0, None),
            "{s:?}"
        );
        let hz = Finding {
            value: "CONFIG_HZ=250: a tick every 4 ms".into(),
            ..finding("hz-tick", Severity::Info)
        };
        let f = [
            hz,
            finding("nohz-full-missing", Severity::Warn),
            finding("isolated-missing", Severity::Warn),
            finding("irq-on-measured-cpus", Severity::Bad),
        ];
        let refs: Vec<&Finding> = f.iter().collect();
        let r = fixture_with_steal(None);
        let e = r.entries::<NoiseEntry>().next().expect("a noise entry");
        let line = sentence(&[(e, &s)], &refs, None);
        assert!(line.contains("residual tick"), "{line}");
        assert!(
            !line.contains("not this kernel's tick") && !line.contains("HZ=1)"),
            "{line}"
        );
        let fixes = ranked_fixes(&[(1, s.clone())], &refs, None);
        let nohz = fixes.iter().find(|f| f.finding == "nohz-full-missing");
        assert!(nohz.is_none_or(|f| f.share.is_none()), "{fixes:?}");
        assert_eq!(fixes[0].finding, "irq-on-measured-cpus", "{fixes:?}");
        // The IRQ thread leads what is left when the tick is gone.
        let rest = Split {
            residual_ns: 0,
            ..s
        };
        let line = sentence(&[(e, &rest)], &refs, None);
        assert!(
            line.contains(irq) && line.contains("audit irq-on-measured-cpus"),
            "{line}"
        );
    }

    #[test]
    fn a_small_measured_share_is_not_said_as_zero() {
        assert_eq!(share_words(Some(0.004)), "under 1 % of the measured noise");
        assert_eq!(share_words(Some(0.07)), "about 7 % of the measured noise");
        assert_eq!(share_words(None), "share not measured");
    }

    #[test]
    fn durations_read_well() {
        assert_eq!(duration_words(999), "999 ns");
        assert_eq!(duration_words(4_000_000), "4.00 ms");
        assert_eq!(duration_words(12_300), "12.3 µs");
    }
}
