//! The osnoise tracer's output, parsed into per-CPU figures for `noise --engine osnoise`.
//!
//! The kernel's osnoise thread spins on each traced CPU for `runtime_us` of every
//! `period_us`, and ends each period with one summary line: the runtime, the noise it
//! saw in all, the share of the CPU left to it, the longest single noise, and the
//! interference it counted entering (HW, NMI, IRQ, softirq, thread). Its events
//! (`osnoise:irq_noise` and the others) give each interference with its duration, already
//! net of what nested inside it, and `sample_threshold` each noise above
//! `tracing_thresh`. The figures below are the summaries' sums (what `rtla osnoise top`
//! shows) and the events' durations per kind.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::probes::record::HistogramRecord;
use crate::stats::{LatencyHistogram, Summary};

/// The events the engine enables.
pub const EVENTS: [&str; 5] = [
    "osnoise:sample_threshold",
    "osnoise:nmi_noise",
    "osnoise:irq_noise",
    "osnoise:softirq_noise",
    "osnoise:thread_noise",
];

/// How many sources of each kind an entry keeps (the ones with the most time).
pub const SOURCES_KEPT: usize = 5;

/// The tracer's settings for the run, as written or found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OsnoiseConfig {
    pub period_us: u64,
    pub runtime_us: u64,
    /// `tracing_thresh`: the shortest delta between two reads that counts as noise.
    pub threshold_us: u64,
    /// `osnoise/options` as the kernel listed them.
    pub options: String,
}

/// One kind of interference on one CPU.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Interference {
    /// How many the kernel counted entering, summed over the periods' summaries.
    pub count: u64,
    /// How many events of the kind the trace held over the same periods.
    pub events: u64,
    /// The events' durations (net of what nested inside), summed.
    pub total_ns: u64,
    /// The longest event.
    pub max_ns: u64,
}

/// The five kinds osnoise tells apart.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Interferences {
    /// Noise that no interference entered during: hardware, firmware, the hypervisor.
    pub hw: Interference,
    pub nmi: Interference,
    pub irq: Interference,
    pub softirq: Interference,
    pub thread: Interference,
}

impl Interferences {
    /// Each kind with its name, in the order rtla shows them.
    pub fn each(&self) -> [(&'static str, &Interference); 5] {
        [
            ("hw", &self.hw),
            ("nmi", &self.nmi),
            ("irq", &self.irq),
            ("softirq", &self.softirq),
            ("thread", &self.thread),
        ]
    }

    fn get_mut(&mut self, kind: Kind) -> &mut Interference {
        match kind {
            Kind::Hw => &mut self.hw,
            Kind::Nmi => &mut self.nmi,
            Kind::Irq => &mut self.irq,
            Kind::Softirq => &mut self.softirq,
            Kind::Thread => &mut self.thread,
        }
    }
}

/// An interference source: an IRQ (`local_timer:236`), a softirq (`TIMER:1`), a thread
/// (`kworker/1:1:95`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Source {
    pub kind: String,
    pub name: String,
    pub events: u64,
    pub total_ns: u64,
    pub max_ns: u64,
}

/// One CPU's osnoise figures: the `"probe": "osnoise"` entries of a result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OsnoiseEntry {
    pub cpu: usize,
    pub config: OsnoiseConfig,
    /// Summaries (periods) the run held.
    pub periods: u64,
    /// The osnoise thread's runtime over those periods.
    pub runtime_ns: u64,
    /// The noise it saw in them, in all.
    pub noise_ns: u64,
    /// The most noise of any one period (rtla's "Max Noise").
    pub max_period_noise_ns: u64,
    /// The longest single noise of any period.
    pub max_single_ns: u64,
    /// The CPU share left to the thread: `100 − noise_ns × 100 / runtime_ns`.
    pub available_pct: f64,
    pub interference: Interferences,
    /// The noise above the threshold, one sample per `sample_threshold` event.
    pub noise: Summary,
    pub histogram: HistogramRecord,
    /// The sources with the most time, at most [`SOURCES_KEPT`] of each kind.
    pub sources: Vec<Source>,
    /// Events the kernel overwrote or dropped (the figures above miss them).
    #[serde(default)]
    pub lost_events: u64,
}

impl OsnoiseEntry {
    /// Noise per second of runtime, in µs/s (= ppm of the CPU).
    pub fn noise_per_s_us(&self) -> f64 {
        match self.runtime_ns {
            0 => 0.0,
            r => self.noise_ns as f64 * 1e6 / r as f64,
        }
    }
}

/// The kinds of event lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Hw,
    Nmi,
    Irq,
    Softirq,
    Thread,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Hw => "hw",
            Kind::Nmi => "nmi",
            Kind::Irq => "irq",
            Kind::Softirq => "softirq",
            Kind::Thread => "thread",
        }
    }
}

/// One line of osnoise's text output.
#[derive(Debug, Clone, PartialEq)]
pub enum Line {
    /// A period's summary.
    Summary { cpu: usize, s: PeriodSummary },
    /// An interference event, or a noise sample (`sample_threshold`).
    Event { cpu: usize, e: NoiseEvent },
}

/// One period's summary line, in the kernel's units.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PeriodSummary {
    pub runtime_us: u64,
    pub noise_us: u64,
    pub available_pct: f64,
    pub max_single_us: u64,
    /// HW, NMI, IRQ, softirq, thread.
    pub counts: [u64; 5],
}

/// One event line.
#[derive(Debug, Clone, PartialEq)]
pub struct NoiseEvent {
    /// `sample_threshold`, or the interference's kind.
    pub event: String,
    /// The source (`local_timer:236`); empty for NMIs and samples.
    pub name: String,
    pub duration_ns: u64,
    /// `sample_threshold`: how many interferences entered during the noise.
    pub interference: Option<u64>,
}

/// Parses one line of `trace`/`trace_pipe`; `None` for headers and other lines.
pub fn parse_line(line: &str) -> Option<Line> {
    let (cpu, after) = cpu_field(line)?;
    // After the CPU: the flags, the timestamp with its colon, then the payload.
    let rest = after.trim_start();
    let (_flags, rest) = rest.split_once(char::is_whitespace)?;
    let rest = rest.trim_start();
    let (stamp, payload) = rest.split_once(": ")?;
    stamp.parse::<f64>().ok()?;
    let payload = payload.trim();
    match payload.split_once(':') {
        Some((ev, body)) if ev.ends_with("_noise") || ev == "sample_threshold" => {
            let e = parse_event(ev, body.trim())?;
            Some(Line::Event { cpu, e })
        }
        _ => parse_summary(payload).map(|s| Line::Summary { cpu, s }),
    }
}

/// The `[NNN]` CPU field and what follows it. The task name before it may hold
/// anything, so the first bracketed number followed by a space is the CPU.
pub(crate) fn cpu_field(line: &str) -> Option<(usize, &str)> {
    let mut from = 0;
    while let Some(i) = line[from..].find('[') {
        let open = from + i;
        let close = open + line[open..].find(']')?;
        let inner = &line[open + 1..close];
        let after = &line[close + 1..];
        if !inner.is_empty() && inner.bytes().all(|b| b.is_ascii_digit()) && after.starts_with(' ')
        {
            return Some((inner.parse().ok()?, after));
        }
        from = open + 1;
    }
    None
}

/// `RUNTIME NOISE %AVAILABLE MAX_SINGLE HW NMI IRQ SIRQ THREAD`.
fn parse_summary(payload: &str) -> Option<PeriodSummary> {
    let f: Vec<&str> = payload.split_whitespace().collect();
    if f.len() != 9 {
        return None;
    }
    let n = |i: usize| f[i].parse::<u64>().ok();
    let mut counts = [0; 5];
    for (k, c) in counts.iter_mut().enumerate() {
        *c = n(4 + k)?;
    }
    Some(PeriodSummary {
        runtime_us: n(0)?,
        noise_us: n(1)?,
        available_pct: f[2].parse().ok()?,
        max_single_us: n(3)?,
        counts,
    })
}

/// `NAME:N start S.NNNNNNNNN duration D ns [interference K]`.
fn parse_event(event: &str, body: &str) -> Option<NoiseEvent> {
    let (name, rest) = match body.strip_prefix("start ") {
        Some(r) => ("", r),
        None => {
            let (n, r) = body.rsplit_once(" start ")?;
            (n.trim(), r)
        }
    };
    let mut words = rest.split_whitespace();
    let _start = words.next()?;
    (words.next()? == "duration").then_some(())?;
    let duration_ns = words.next()?.parse().ok()?;
    (words.next()? == "ns").then_some(())?;
    let interference = match words.next() {
        Some("interference") => Some(words.next()?.parse().ok()?),
        _ => None,
    };
    Some(NoiseEvent {
        event: event.to_string(),
        name: name.to_string(),
        duration_ns,
        interference,
    })
}

/// The running tally of one CPU.
#[derive(Debug, Default)]
struct CpuTally {
    periods: u64,
    runtime_us: u64,
    noise_us: u64,
    max_period_us: u64,
    max_single_us: u64,
    interference: Interferences,
    samples: LatencyHistogram,
    sources: BTreeMap<SourceKey, SourceTime>,
}

/// A source: its kind and name.
type SourceKey = (Kind, String);
/// A source's events, total and longest (ns).
type SourceTime = (u64, u64, u64);

/// Lines in, per-CPU entries out. The events after a CPU's last summary belong to a
/// period the run did not finish, and are left out with it.
#[derive(Debug, Default)]
pub struct Tally {
    cpus: BTreeMap<usize, CpuTally>,
    /// Events of each CPU's period in progress, counted in once its summary comes.
    pending: BTreeMap<usize, Vec<NoiseEvent>>,
    /// Lines parsed, of either sort.
    pub lines: u64,
}

impl Tally {
    pub fn new() -> Tally {
        Tally::default()
    }

    /// Adds one line of the tracer's output; other lines are ignored.
    pub fn line(&mut self, text: &str) {
        match parse_line(text) {
            Some(Line::Summary { cpu, s }) => {
                self.lines += 1;
                let events = self.pending.remove(&cpu).unwrap_or_default();
                let t = self.cpus.entry(cpu).or_default();
                t.summary(&s);
                for e in &events {
                    t.event(e);
                }
            }
            Some(Line::Event { cpu, e }) => {
                self.lines += 1;
                self.pending.entry(cpu).or_default().push(e);
            }
            None => {}
        }
    }

    /// Summaries seen on `cpu` so far.
    pub fn periods(&self, cpu: usize) -> u64 {
        self.cpus.get(&cpu).map_or(0, |t| t.periods)
    }

    /// One entry per CPU in `cpus`, with `config`; a CPU with no summary has an entry
    /// of zeros (a run shorter than a period).
    pub fn entries(&self, cpus: &[usize], config: &OsnoiseConfig) -> Vec<OsnoiseEntry> {
        let none = CpuTally::default();
        (cpus.iter())
            .map(|&cpu| self.cpus.get(&cpu).unwrap_or(&none).entry(cpu, config))
            .collect()
    }
}

impl CpuTally {
    fn summary(&mut self, s: &PeriodSummary) {
        self.periods += 1;
        self.runtime_us += s.runtime_us;
        self.noise_us += s.noise_us;
        self.max_period_us = self.max_period_us.max(s.noise_us);
        self.max_single_us = self.max_single_us.max(s.max_single_us);
        let kinds = [Kind::Hw, Kind::Nmi, Kind::Irq, Kind::Softirq, Kind::Thread];
        for (k, c) in kinds.into_iter().zip(s.counts) {
            self.interference.get_mut(k).count += c;
        }
    }

    fn event(&mut self, e: &NoiseEvent) {
        let kind = match e.event.as_str() {
            "nmi_noise" => Kind::Nmi,
            "irq_noise" => Kind::Irq,
            "softirq_noise" => Kind::Softirq,
            "thread_noise" => Kind::Thread,
            // A noise sample: hardware's when no interference entered it.
            _ => {
                self.samples.record(e.duration_ns);
                match e.interference {
                    Some(0) => Kind::Hw,
                    _ => return,
                }
            }
        };
        let i = self.interference.get_mut(kind);
        i.events += 1;
        i.total_ns += e.duration_ns;
        i.max_ns = i.max_ns.max(e.duration_ns);
        if e.name.trim().is_empty() {
            return; // NMIs and HW noise name no source
        }
        let name = (e.name.split_whitespace().collect::<Vec<_>>()).join(" ");
        let s = self.sources.entry((kind, name)).or_default();
        s.0 += 1;
        s.1 += e.duration_ns;
        s.2 = s.2.max(e.duration_ns);
    }

    fn entry(&self, cpu: usize, config: &OsnoiseConfig) -> OsnoiseEntry {
        let (runtime_ns, noise_ns) = (self.runtime_us * 1000, self.noise_us * 1000);
        let available_pct = match runtime_ns {
            0 => 100.0,
            r => 100.0 - noise_ns as f64 * 100.0 / r as f64,
        };
        OsnoiseEntry {
            cpu,
            config: config.clone(),
            periods: self.periods,
            runtime_ns,
            noise_ns,
            max_period_noise_ns: self.max_period_us * 1000,
            max_single_ns: self.max_single_us * 1000,
            available_pct,
            interference: self.interference.clone(),
            noise: self.samples.summary(),
            histogram: HistogramRecord::from_hist(&self.samples),
            sources: self.top_sources(),
            lost_events: 0,
        }
    }

    /// The sources with the most time, at most `SOURCES_KEPT` of each kind.
    fn top_sources(&self) -> Vec<Source> {
        let mut all: Vec<(&SourceKey, &SourceTime)> = self.sources.iter().collect();
        all.sort_by_key(|((k, _), (_, ns, _))| (*k, std::cmp::Reverse(*ns)));
        let mut out: Vec<Source> = Vec::new();
        for ((k, name), (events, total_ns, max_ns)) in all {
            if out.iter().filter(|s| s.kind == k.name()).count() >= SOURCES_KEPT {
                continue;
            }
            out.push(Source {
                kind: k.name().to_string(),
                name: name.clone(),
                events: *events,
                total_ns: *total_ns,
                max_ns: *max_ns,
            });
        }
        out
    }
}

#[cfg(test)]
mod tests;
