//! The command line. clap structs live here and nowhere else: the command layer turns
//! them into validated configs, and probes never see them.
//!
//! Value parsers are strict and their messages name what was wrong and what is accepted,
//! because a mistyped flag must never become a silently different measurement.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::engine::sched::Policy;
use crate::probes::timer::TimerClock;
use crate::report::result::gate::Gate;

mod parse;
#[cfg(test)]
mod tests;
mod time_flags;

pub use parse::*;
pub use time_flags::*;

/// Latency and jitter toolkit for tuning Linux hosts.
///
/// With no subcommand, runs the main job (`jitterscope run`): the audit, noise, timer and
/// pingpong in about 30 s, a verdict with the top fixes, and a saved result and HTML page.
#[derive(Debug, Parser)]
#[command(name = "jitterscope", version = crate::LONG_VERSION, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Each subcommand's flags are built only when that subcommand is parsed (or when help,
/// completions or the manual ask for all of them): a `noise` run then never runs the
/// builders of the other fifteen, whose code would count in its resident set (issue 15).
/// Deferred, the flags are added after the variant's own attributes, so what changes a
/// shared flag for one command (`mut_arg`) sits on that command's `Args` struct, and
/// every `Args` struct here (flattened ones too) carries plain comments: a doc comment
/// would become the command's `about` and cover the variant's.
#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub enum Command {
    /// OS noise: how long, how often and how much the system takes each CPU away from a
    /// thread that polls the TSC in a tight loop.
    Noise(NoiseArgs),
    /// Timer wake-up latency, cyclictest's method: each thread sleeps to an absolute
    /// deadline with clock_nanosleep and records how late it woke.
    #[command(disable_help_flag = true)]
    Timer(TimerArgs),
    /// Thread-to-thread notification latency: two pinned threads pass a token back and
    /// forth over each mechanism (spin, futex, condvar, semaphores, pipe, eventfd, …);
    /// round trip and one-way, side by side.
    Pingpong(PingpongArgs),
    /// Core-to-core cache-line latency: a matrix over CPU pairs, with the topology.
    C2c(C2cArgs),
    /// Producer → consumer transit latency through a ring buffer (perf-workshop's
    /// application): an accumulator and a journaller record transit and inter-message time.
    Queue(QueueArgs),
    /// Execution-time jitter of one fixed action (a calibrated busy loop, a memmove, a
    /// syscall, a UDP send), timed N times with the TSC: the Ultra Messaging jitter
    /// tools' job.
    Work(WorkArgs),
    /// The cost of single syscalls, vDSO clock reads and counter reads, in ns.
    Syscalls(SyscallsArgs),
    /// PTP hardware clocks: which offset ioctls each supports, the PHC − system offset,
    /// the read window and the call's cost.
    Ptp(PtpArgs),
    /// Read-only checks of the host's latency tuning: each finding with its severity, the
    /// value seen, why it matters and the exact fix.
    Audit(AuditArgs),
    /// Show saved results again, or export them: tables, Markdown, CSV, an HdrHistogram
    /// interval log, gnuplot data, SVG or PNG plots, or one HTML page.
    Report(ReportArgs),
    /// The main job: the audit, then noise, timer and a short pingpong, a verdict in
    /// plain words with the top fixes, and a result file and HTML page saved (about 30 s;
    /// also what a bare `jitterscope` runs).
    Run(MainArgs),
    /// Check the tool on this host (about 10 s): the counter, and that noise and timer
    /// find holds of known length injected by a real-time thread of its own; exit 1 if a
    /// check fails, 3 if none failed but one could not judge on the host's background,
    /// 4 if no check with holds could judge (nothing about the tool was shown).
    Selftest(SelftestArgs),
    /// Print a shell completion script for SHELL (bash, zsh, fish, elvish, powershell):
    /// `source <(jitterscope completions bash)`.
    Completions(CompletionsArgs),
    /// Print a manual page (roff): jitterscope(1), or with COMMAND its own
    /// (jitterscope-noise(1), …): `jitterscope man noise > n.1; man -l n.1`.
    Man(ManArgs),
    /// Set saved runs side by side: the same probe and CPU in each, the change from the
    /// first run, a verdict per row, and overlaid plots.
    Compare(CompareArgs),
    /// Rank a fleet's saved results: hosts whose figures agree said once as a group, the
    /// worst, the best and every outlier named with what sets it apart, and every host
    /// whose kernel, boot options, audit findings or degradations drifted from the
    /// majority's, whatever its figures; a directory or many files.
    Fleet(FleetArgs),
    /// Always-on timer latency (and optional noise sweeps) served as Prometheus /
    /// OpenMetrics on --listen, with an HdrHistogram interval log; runs until SIGTERM.
    Monitor(MonitorArgs),
    /// Did the change help? Applies the audit's run-time fixes one at a time, judges each
    /// in pairs of baseline/step blocks (paired signed-rank test, more pairs while
    /// undecided, Hodges–Lehmann shift), keeps or reverts it, and restores everything at
    /// the end (root only).
    Tune(TuneArgs),
    /// Why were my application's threads late? Traces every CPU and follows the threads of
    /// a process (--pid), given threads (--tid) or every task of a name (--comm): each
    /// thread's wake-up delay (run-queue latency), time preempted and time lost to IRQs,
    /// and what ran instead during its delays over -T. Needs root and tracefs.
    Watch(WatchArgs),
    /// A test aid, hidden from --help and the manual: a SCHED_FIFO thread that takes a CPU
    /// for --busy every --period (the holds selftest injects), for ground truth where only
    /// this binary is at hand (an image FROM scratch). It starves that CPU's other work on
    /// purpose.
    #[command(hide = true)]
    Hold(HoldArgs),
}

// `jitterscope hold` (hidden).
#[derive(Debug, Clone, Args)]
pub struct HoldArgs {
    /// The CPU to hold.
    #[arg(short = 'a', long = "cpu", value_name = "CPU")]
    pub cpu: usize,

    /// One hold every this long (a bare number is µs).
    #[arg(long, value_name = "US", default_value = "10ms", value_parser = parse_us)]
    pub period: u64,

    /// How long each hold busy-waits (a bare number is µs); shorter than --period.
    #[arg(long, value_name = "US", default_value = "1500us", value_parser = parse_us)]
    pub busy: u64,

    /// The holder's SCHED_FIFO priority, 1-99.
    #[arg(short = 'p', long, value_name = "PRIO", default_value = "10",
          value_parser = clap::value_parser!(u8).range(1..=99))]
    pub priority: u8,

    /// How long to go on holding.
    #[arg(short = 'D', long, value_name = "DURATION", default_value = "5s", value_parser = parse_duration)]
    pub duration: Duration,
}

/// `-a` for the commands that measure a set of CPUs.
const CPUS_MEASURED: &str = "CPUs to measure, e.g. 1-3,5 [default: the CPUs the host isolated (isolcpus, nohz_full, an isolated cpuset partition); on a host without, every CPU of this process's mask but one, kept for housekeeping]";
/// `-a` for the commands that run on one CPU.
const CPU_ONE: &str = "The CPU to run on [default: the first CPU a measuring command would take]";

// Where a measuring command's result goes.
#[derive(Debug, Clone, Default, Args)]
pub struct SaveArgs {
    /// Write the whole result as JSON to stdout (and no table); --json=FILE writes it to
    /// FILE instead, as cyclictest and oslat do, and prints the table.
    #[arg(long, value_name = "FILE", num_args = 0..=1, require_equals = true)]
    pub json: Option<Option<PathBuf>>,

    /// Save the result to FILE (written atomically).
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<PathBuf>,

    /// Also write the result as a self-contained HTML page (tables and plots) to PATH.
    #[arg(long, value_name = "PATH")]
    pub html: Option<PathBuf>,

    /// Print no table.
    #[arg(short = 'q', long)]
    pub quiet: bool,

    /// Every table column, whatever the terminal's width (the files always hold them).
    #[arg(long)]
    pub wide: bool,

    /// Each CPU its own rows, causes and largest gaps (each watched thread, for watch),
    /// rather than CPUs whose figures and causes agree said once as a group, with the
    /// outliers named.
    #[arg(long)]
    pub per_cpu: bool,
}

impl SaveArgs {
    /// `--json` alone: the JSON goes to stdout instead of the table.
    pub fn json_on_stdout(&self) -> bool {
        matches!(self.json, Some(None))
    }

    /// Whether the whole result leaves the process: saved (`-o`, `--json=FILE`), printed
    /// as JSON, or drawn on an HTML page. Without any of these only the table is shown.
    pub fn keeps_result(&self) -> bool {
        self.output.is_some() || self.json.is_some() || self.html.is_some()
    }
}

// Options every measuring command shares.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// CPUs to measure, e.g. 1-3,5.
    #[arg(short = 'a', long = "cpus", value_name = "LIST")]
    pub cpus: Option<String>,

    /// The CPU left unmeasured for the coordinator [default: the lowest CPU of this
    /// process's mask that the host did not isolate].
    #[arg(long, value_name = "CPU")]
    pub housekeeping: Option<usize>,

    /// Real-time priority 1-99 of the measuring threads; implies --policy fifo.
    #[arg(short = 'p', long, value_name = "PRIO", value_parser = clap::value_parser!(u8).range(1..=99))]
    pub priority: Option<u8>,

    /// Scheduling policy of the measuring threads: other, fifo, rr, or deadline (timer and
    /// noise, with --runtime; as root each measured CPU gets a root domain of its own for
    /// the run where admission control needs one) [default: other, or fifo with -p]. fifo
    /// and rr without -p use priority 1.
    #[arg(long, value_name = "POLICY", value_parser = parse_policy)]
    pub policy: Option<Policy>,

    /// How long to measure: 500ms, 10s, 5m, 2h (a bare number is seconds).
    #[arg(short = 'D', long, value_name = "DURATION", value_parser = parse_duration)]
    pub duration: Option<Duration>,

    /// Lock all memory with mlockall (the default).
    #[arg(short = 'm', long, overrides_with = "no_mlock")]
    pub mlock: bool,

    /// Do not lock memory (page faults may then land inside the measurement).
    #[arg(long, overrides_with = "mlock")]
    pub no_mlock: bool,

    /// Allow real-time spinners on every CPU, leaving none for housekeeping. This can
    /// starve the kernel's own work for the whole run.
    #[arg(long)]
    pub force: bool,

    #[command(flatten)]
    pub save: SaveArgs,
}

// `jitterscope noise`.
#[derive(Debug, Clone, Args)]
#[command(
    mut_arg("cpus", |a| a.help(CPUS_MEASURED)),
    mut_arg("duration", |a| a.help("How long to measure: 500ms, 10s, 5m, 2h (a bare number is seconds) [default: 10s]")),
)]
pub struct NoiseArgs {
    #[command(flatten)]
    pub run: RunArgs,

    /// A step longer than this is an interruption: µs as in oslat and rtla (a bare 5 is
    /// 5 µs), or with a unit (500ns, 2us, 1ms); at least 100 ns.
    #[arg(short = 'T', long, value_name = "TIME", default_value = "1us",
          value_parser = parse_noise_threshold, allow_hyphen_values = true)]
    pub threshold: u64,

    /// Spin this long before measuring, to warm caches and measure the loop's own period.
    #[arg(long, value_name = "DURATION", default_value = "100ms", value_parser = parse_warmup)]
    pub warmup: Duration,

    /// How many of the largest interruptions to keep per CPU, with their timestamps.
    #[arg(long, value_name = "K", default_value_t = crate::probes::noise::DEFAULT_LARGEST,
          value_parser = parse_top)]
    pub top: usize,

    /// Keep every interruption with its timestamp in the result, up to N per CPU (16
    /// bytes each, preallocated); later ones are counted as dropped. --trace needs none:
    /// it attributes every gap as it comes.
    #[arg(long, value_name = "N", default_value_t = 0, value_parser = parse_event_log)]
    pub event_log: usize,

    /// Attribute each interruption to its causes from kernel trace events (root and
    /// tracefs): IRQs, softirqs, vectors, NMIs, tasks, and what no event covers.
    #[arg(long)]
    pub trace: bool,

    /// What measures: `tsc`, pinned threads reading the TSC back to back (as sysjitter and
    /// oslat do); `osnoise`, the kernel's osnoise tracer (root, a kernel built with it),
    /// which also counts the IRQs, softirqs, threads and NMIs it saw; `both`, osnoise then
    /// the TSC loop, each for half the duration on the same CPUs. Without the tracer one
    /// line says so and the TSC loop runs.
    #[arg(long, value_enum, default_value = "tsc")]
    pub engine: NoiseEngine,

    /// Instead of measuring, check the hardware and firmware with the kernel's hwlat
    /// tracer: it spins with interrupts off on each CPU in turn, and any gap it sees is
    /// the machine's own (SMIs, a hypervisor). It stalls the CPUs it runs on, so it runs
    /// alone, never beside a measurement.
    #[arg(long, conflicts_with_all = ["trace", "engine"])]
    pub hwlat: bool,

    #[command(flatten)]
    pub deadline: DeadlineArgs,

    /// With --policy deadline: the period, µs or with a unit (rtla's -P d:runtime:period).
    #[arg(long, value_name = "US", value_parser = parse_us)]
    pub period: Option<u64>,

    /// Exit 1 (after saving) if a figure of any CPU is above this limit: p50, p90, p99,
    /// p99.9, p99.99, max or mean with a time unit (p99=50us, max=1ms), lost (lost=0.5%, the share of time
    /// interrupted) or rate (rate=100/s). Repeat for
    /// several.
    #[arg(long = "fail-above", value_name = "METRIC=VALUE", value_parser = Gate::parse)]
    pub fail_above: Vec<Gate>,
}

/// What `noise` measures with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum NoiseEngine {
    /// The TSC loop.
    #[default]
    Tsc,
    /// The kernel's osnoise tracer.
    Osnoise,
    /// osnoise, then the TSC loop, each for half the duration.
    Both,
}

// SCHED_DEADLINE's runtime and deadline, for `--policy deadline` (timer and noise). A
// plain comment, as on every `Args` struct here: a doc comment would become the `about` of
// each command that flattens it (noise's and timer's help opened with it, issue 49), and
// `#[command(about = None)]` would erase theirs.
#[derive(Debug, Clone, Default, Args)]
pub struct DeadlineArgs {
    /// With --policy deadline: the CPU time each period is guaranteed, µs or with a unit
    /// [timer's default: a tenth of the deadline].
    #[arg(long, value_name = "US", value_parser = parse_us)]
    pub runtime: Option<u64>,

    /// With --policy deadline: by when, after each period's start, the runtime is served
    /// (µs or with a unit) [default: the period].
    #[arg(long, value_name = "US", value_parser = parse_us)]
    pub deadline: Option<u64>,
}

/// The default run length.
pub const DEFAULT_DURATION: Duration = Duration::from_secs(10);

impl RunArgs {
    /// The requested duration, or the default.
    pub fn duration_or_default(&self) -> Duration {
        self.duration.unwrap_or(DEFAULT_DURATION)
    }
}

// `jitterscope timer`. Flags keep cyclictest's meanings; times are in µs unless a unit
// is given (250us, 1.5ms).
#[derive(Debug, Clone, Args)]
#[command(
    mut_arg("cpus", |a| a.help(CPUS_MEASURED)),
    mut_arg("duration", |a| a.help("How long to measure: 500ms, 10s, 5m, 2h (a bare number is seconds) [default: 10s, or with -l until every thread has woken that often]")),
    mut_arg("force", |a| a.help("Allow real-time timer threads at intervals under 100 µs on every CPU, leaving none for housekeeping")),
)]
pub struct TimerArgs {
    #[command(flatten)]
    pub run: RunArgs,

    /// Interval of the first thread, in µs (at most 1 s); with timerlat its period
    /// (osnoise/timerlat_period_us, whole µs from 100).
    #[arg(short = 'i', long, value_name = "US", default_value = "1000", value_parser = parse_interval)]
    pub interval: u64,

    /// What measures: nanosleep (our clock_nanosleep loop, as cyclictest's), timerlat
    /// (the kernel's timerlat tracer: each wake-up's IRQ and thread latency; root and a
    /// kernel that has it, else the loop runs and says why), or both: the loop, then
    /// timerlat, each for -D, on the same CPUs.
    #[arg(long, value_name = "ENGINE", default_value = "nanosleep", value_enum)]
    pub engine: TimerEngine,

    /// Each next thread's interval is longer by this, in µs (thread n sleeps
    /// interval + n × distance); with --policy deadline its deadline too (cyclicdeadline's
    /// -s/--step).
    #[arg(short = 'd', long, visible_alias = "step", value_name = "US", default_value = "500", value_parser = parse_distance)]
    pub distance: u64,

    /// Stop each thread after N wake-ups; without -D the run lasts until then.
    #[arg(short = 'l', long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub loops: Option<u64>,

    /// Give each next thread one priority less than the one before (at least 1).
    #[arg(long)]
    pub priospread: bool,

    /// The clock to sleep on and read: monotonic or realtime.
    #[arg(long, value_name = "CLOCK", default_value = "monotonic", value_parser = parse_clock)]
    pub clock: TimerClock,

    /// Relative sleeps (clock_nanosleep without TIMER_ABSTIME): each deadline is the
    /// clock before the sleep plus the interval.
    #[arg(short = 'r', long, conflicts_with = "aligned")]
    pub relative: bool,

    #[command(flatten)]
    pub deadline: DeadlineArgs,

    /// With --policy deadline: busy each period this long after waking (µs or with a
    /// unit), as the job a deadline thread does; longer than --runtime it overruns.
    #[arg(long, value_name = "US", value_parser = parse_us)]
    pub work: Option<u64>,

    /// Every thread wakes at the same instants (sets the distance to 0).
    #[arg(long, conflicts_with = "distance")]
    pub aligned: bool,

    /// Run the loop this long first and discard its samples (0 for none).
    #[arg(long, value_name = "DURATION", default_value = "0", value_parser = parse_timer_warmup)]
    pub warmup: Duration,

    /// The most idle exit latency allowed while measuring, in µs, written to
    /// /dev/cpu_dma_latency and withdrawn when the run ends (cyclictest's default 0).
    #[arg(long, value_name = "US", default_value_t = 0, value_parser = parse_dma_latency,
          allow_negative_numbers = true)]
    pub dma_latency: i32,

    /// Leave /dev/cpu_dma_latency alone: measure with whatever idle states the system
    /// allows.
    #[arg(long, conflicts_with = "dma_latency")]
    pub no_dma_latency: bool,

    /// Each thread's timer slack: ns, or with a unit (1ns, 50us), or `default` for the
    /// kernel's (50 µs for SCHED_OTHER threads, which then wake that much late on purpose).
    #[arg(long, value_name = "NS|default", default_value = "1", value_parser = parse_timer_slack)]
    pub timer_slack: TimerSlack,

    /// At the first wake-up later than this (µs), stop every thread, write a trace_marker
    /// line and turn tracing off if tracefs is mounted, report it and exit with 1
    /// (cyclictest's --breaktrace).
    #[arg(short = 'b', long, value_name = "US", value_parser = parse_us)]
    pub stop_above: Option<u64>,

    /// Keep every wake-up later than this (µs) with its timestamp.
    #[arg(long, value_name = "US", value_parser = parse_us)]
    pub spikes: Option<u64>,

    /// How many spikes to keep per thread; later ones are counted as dropped.
    #[arg(long, value_name = "N", default_value_t = crate::probes::timer::DEFAULT_SPIKE_CAPACITY,
          value_parser = parse_spike_nodes, requires = "spikes")]
    pub spike_nodes: usize,

    /// Also print a cyclictest-style histogram with this many 1-µs buckets, one column
    /// per thread (gnuplot reads it as is). -h is cyclictest's; help is --help.
    #[arg(short = 'h', long, value_name = "US", value_parser = parse_histogram_us)]
    pub histogram: Option<usize>,

    /// Split each late wake-up into what ran between its deadline and its waking, from
    /// kernel trace events (root and tracefs): idle (the IRQ delay), interrupts, the
    /// thread that held the CPU, and what no event covers.
    #[arg(long)]
    pub trace: bool,

    /// With --trace: the wake-ups at or above this (µs) are split [default: those at or
    /// above the p99 of the thread's wake-ups so far, as they come].
    #[arg(long, value_name = "US", value_parser = parse_us, requires = "trace")]
    pub trace_above: Option<u64>,

    /// Print help.
    #[arg(long, action = clap::ArgAction::Help)]
    pub help: Option<bool>,

    /// How many of the largest latencies to keep per thread, with their timestamps.
    #[arg(long, value_name = "K", default_value_t = crate::probes::noise::DEFAULT_LARGEST,
          value_parser = parse_top)]
    pub top: usize,

    /// Exit 1 (after saving) if a figure of any CPU is above this limit: p50, p90, p99,
    /// p99.9, p99.99, max or mean with a time unit (p99=50us, max=1ms). Repeat for
    /// several.
    #[arg(long = "fail-above", value_name = "METRIC=VALUE", value_parser = Gate::parse)]
    pub fail_above: Vec<Gate>,
}

// `jitterscope pingpong`. `-a A,B` names the two CPUs (the same one twice measures the
// wake-up path with a context switch); `-D` and `-l` apply to each mechanism.
#[derive(Debug, Clone, Args)]
#[command(
    mut_arg("per_cpu", |a| a.hide(true)),
    mut_arg("cpus", |a| a.help("The two CPUs, as A,B (the same one twice measures a context switch) [default: the first two CPUs a measuring command would take]")),
    mut_arg("duration", |a| a.help("How long to measure each mechanism: 500ms, 10s (a bare number is seconds) [default: 1s, or with -l until the round trips are done]")),
    mut_arg("force", |a| a.help("Allow real-time spinning mechanisms when no CPU is left for housekeeping")),
)]
pub struct PingpongArgs {
    #[command(flatten)]
    pub run: RunArgs,

    /// Mechanisms to measure, in this order: spin, spin-pause, futex, condvar, sem,
    /// sysv-sem, mutex, pipe, eventfd, unix, mq, signal, null, or all.
    #[arg(long = "mech", value_name = "LIST", default_value = "all")]
    pub mech: String,

    /// Busy-wait this long between round trips: ns, or with a unit.
    #[arg(long, value_name = "TIME", default_value = "2us", value_parser = parse_pause)]
    pub pause: u64,

    /// Pass the token this long first and discard what it measured, per mechanism.
    #[arg(long, value_name = "DURATION", default_value = "50ms", value_parser = parse_timer_warmup)]
    pub warmup: Duration,

    /// Stop each mechanism after N round trips; without -D it runs until then.
    #[arg(short = 'l', long = "loops", value_name = "N",
          value_parser = clap::value_parser!(u64).range(1..=1_000_000_000))]
    pub count: Option<u64>,
}

// `jitterscope c2c`. `-a` selects the CPUs [default: the isolated CPUs, or every CPU].
#[derive(Debug, Clone, Args)]
#[command(
    mut_arg("per_cpu", |a| a.hide(true)),
    mut_arg("cpus", |a| a.help("CPUs to pair, e.g. 0-7 [default: the CPUs the host isolated, when there are two or more; else every CPU of this process's mask and the isolated ones]")),
    mut_arg("duration", |a| a.hide(true)),
    mut_arg("force", |a| a.help("Allow real-time pairs when no CPU is left for housekeeping")),
)]
pub struct C2cArgs {
    #[command(flatten)]
    pub run: RunArgs,

    /// Bounce one line with compare-and-swap writes instead of two lines with loads and
    /// stores.
    #[arg(long)]
    pub cas: bool,

    /// Samples per CPU pair.
    #[arg(short = 'n', long, value_name = "N", default_value_t = 300,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub samples: u32,

    /// Round trips per sample.
    #[arg(short = 'r', long = "round-trips", value_name = "N", default_value_t = 100,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub round_trips: u32,

    /// Spin each CPU of a pair this long before measuring it, so that it runs at full
    /// clock (0 for none).
    #[arg(long, value_name = "DURATION", default_value = "50ms", value_parser = parse_timer_warmup)]
    pub preheat: Duration,

    /// Order rows and columns by locality (NUMA node, package, last-level cache, core,
    /// SMT sibling) rather than by CPU number.
    #[arg(long)]
    pub group: bool,
}

// `jitterscope queue`. Roles go on CPUs of their own with --producer-cpu,
// --accumulator-cpu and --journaller-cpu (`-a` is not used).
#[derive(Debug, Clone, Args)]
#[command(
    mut_arg("per_cpu", |a| a.hide(true)),
    mut_arg("cpus", |a| a.hide(true)),
    mut_arg("duration", |a| a.help("How long to measure after the warm-up: 500ms, 10s (a bare number is seconds) [default: 10s, or with -l until the messages are done]")),
    mut_arg("force", |a| a.help("Allow real-time roles that share a CPU, or leave none for housekeeping")),
)]
pub struct QueueArgs {
    #[command(flatten)]
    pub run: RunArgs,

    /// The producer's CPU.
    #[arg(long, value_name = "CPU")]
    pub producer_cpu: Option<usize>,

    /// The accumulator's CPU.
    #[arg(long, value_name = "CPU")]
    pub accumulator_cpu: Option<usize>,

    /// The journaller's CPU.
    #[arg(long, value_name = "CPU")]
    pub journaller_cpu: Option<usize>,

    /// Real-time priority of the producer (overrides -p for it).
    #[arg(long, value_name = "PRIO", value_parser = clap::value_parser!(u8).range(1..=99))]
    pub producer_priority: Option<u8>,

    /// Real-time priority of the accumulator (overrides -p for it).
    #[arg(long, value_name = "PRIO", value_parser = clap::value_parser!(u8).range(1..=99))]
    pub accumulator_priority: Option<u8>,

    /// Real-time priority of the journaller (overrides -p for it).
    #[arg(long, value_name = "PRIO", value_parser = clap::value_parser!(u8).range(1..=99))]
    pub journaller_priority: Option<u8>,

    /// Time between publications: µs, or with a unit (busy-waited by the producer).
    #[arg(short = 'i', long, value_name = "US", default_value = "10", value_parser = parse_us)]
    pub interval: u64,

    /// Slots in the ring (a power of two).
    #[arg(long, value_name = "N", default_value_t = 4096, value_parser = parse_ring_size)]
    pub ring_size: usize,

    /// Messages published and discarded before measuring.
    #[arg(long = "warmup-count", value_name = "N", default_value_t = 10_000,
          value_parser = clap::value_parser!(u64).range(0..=1_000_000_000))]
    pub warmup: u64,

    /// Stop after N measured messages; without -D the run lasts until then.
    #[arg(short = 'l', long = "loops", value_name = "N",
          value_parser = clap::value_parser!(u64).range(1..=10_000_000_000))]
    pub count: Option<u64>,

    /// The journal file [default: a temporary file, removed at the end].
    #[arg(long, value_name = "PATH", conflicts_with = "no_journal")]
    pub journal: Option<PathBuf>,

    /// Run without the journaller: the accumulator alone reads the ring.
    #[arg(long)]
    pub no_journal: bool,

    /// Run perf-workshop's perturbing spinners (3 ms busy, 30 ms asleep) on every
    /// usable CPU while measuring, to show what they cost.
    #[arg(long)]
    pub perturb: bool,
}

// `jitterscope work`. `-a` names the one CPU to run on [default: the first measured CPU].
#[derive(Debug, Clone, Args)]
#[command(
    mut_arg("per_cpu", |a| a.hide(true)),
    mut_arg("cpus", |a| a.help(CPU_ONE)),
    mut_arg("duration", |a| a.help("The longest the runs may take: 500ms, 10s (a bare number is seconds) [default: until the samples are done]")),
    mut_arg("force", |a| a.help("Allow a real-time run when no CPU is left for housekeeping")),
)]
pub struct WorkArgs {
    #[command(flatten)]
    pub run: RunArgs,

    /// The action to time: loop:N (a busy loop of N iterations), memmove:SIZE (oslat's
    /// workload: copy SIZE bytes, e.g. 4096 or 64K), syscall:NAME (see `jitterscope
    /// syscalls --list`), or udp-send:SIZE (a sendto of SIZE bytes).
    #[arg(long, value_name = "ACTION", default_value = "loop:100")]
    pub action: String,

    /// Calibrate the loop to take this long per sample instead of giving N: ns, or with a
    /// unit, at most 10ms (only with --action loop).
    #[arg(long, value_name = "TIME", value_parser = parse_loop_ns)]
    pub ns: Option<u64>,

    /// Samples per run.
    #[arg(short = 'n', long, value_name = "N", default_value_t = 200_000,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000_000))]
    pub samples: u64,

    /// Runs, each reported on its own (and with --baseline, each paired with its null
    /// loop). Each has a histogram of its own (260 KiB, locked), so at most 100.
    #[arg(short = 'r', long, value_name = "N", default_value_t = 3,
          value_parser = clap::value_parser!(u32).range(1..=100))]
    pub runs: u32,

    /// Samples timed and discarded before each run.
    #[arg(long = "warmup-count", value_name = "N", default_value_t = 10_000,
          value_parser = clap::value_parser!(u64).range(0..=1_000_000_000))]
    pub warmup: u64,

    /// Busy-wait between samples: ns, or with a unit (900 ns is one 1 KiB frame at 10 GbE).
    #[arg(long, value_name = "TIME", default_value = "900ns", value_parser = parse_pause)]
    pub pause: u64,

    /// Pair each run with a null loop calibrated to the action's mean time, and show both:
    /// the action's own jitter apart from the system's.
    #[arg(long)]
    pub baseline: bool,

    /// udp-send: send to ADDR:PORT instead of the tool's own loopback sink.
    #[arg(long, value_name = "ADDR:PORT")]
    pub dest: Option<String>,

    /// udp-send: send to this multicast group (needs --interface and --dest's port, or
    /// port 9999 by default).
    #[arg(long, value_name = "GROUP", requires = "interface")]
    pub multicast: Option<std::net::Ipv4Addr>,

    /// udp-send: the interface's IPv4 address that multicast leaves from.
    #[arg(long, value_name = "ADDR")]
    pub interface: Option<std::net::Ipv4Addr>,

    /// udp-send: multicast TTL.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(0..=255))]
    pub ttl: u32,
}

// `jitterscope syscalls`. `-a` names the one CPU to run on [default: the first measured
// CPU]; `-D` is the time spent on each call [default 200ms].
#[derive(Debug, Clone, Args)]
#[command(
    mut_arg("per_cpu", |a| a.hide(true)),
    mut_arg("cpus", |a| a.help(CPU_ONE)),
    mut_arg("duration", |a| a.help("How long to time each call: 200ms, 1s (a bare number is seconds) [default: 200ms]")),
    mut_arg("force", |a| a.help("Allow a real-time run when no CPU is left for housekeeping")),
)]
pub struct SyscallsArgs {
    #[command(flatten)]
    pub run: RunArgs,

    /// Measure only these, e.g. getppid,clock_gettime-monotonic (see --list).
    #[arg(long, value_name = "NAME,...")]
    pub only: Option<String>,

    /// List the calls that can be measured, and exit.
    #[arg(long)]
    pub list: bool,

    /// Calls per timed sample [default: enough for about 1 µs, at most 64]: the sample's
    /// value is its time divided by this, less the timing's own cost.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub batch: Option<u32>,
}

/// The formats `report` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ReportFormat {
    /// The summary tables the probes print.
    Table,
    /// The same tables in Markdown.
    Markdown,
    /// One row per probe entry (CPU, pair, mechanism …), every summary column, units in
    /// the headers; with --buckets, the histogram buckets as rows instead.
    Csv,
    /// An HdrHistogram interval log (what jHiccup writes and HistogramLogProcessor reads),
    /// one tagged histogram per entry.
    Hdr,
    /// Data files plus a gnuplot script that draws the plots (-o DIR).
    Gnuplot,
    /// The plots as SVG files, drawn by jitterscope itself (-o DIR).
    Svg,
    /// The plots as PNG files (-o DIR).
    Png,
    /// One self-contained HTML page: host, warnings, tables and every plot.
    Html,
}

// `jitterscope report`.
#[derive(Debug, Clone, Args)]
pub struct ReportArgs {
    /// Result files written with -o.
    #[arg(value_name = "RESULT", required = true)]
    pub results: Vec<PathBuf>,

    /// What to write.
    #[arg(long, value_enum, default_value = "table")]
    pub format: ReportFormat,

    /// Write to PATH instead of stdout (atomically); for gnuplot, svg and png, the
    /// directory to write the files into (required).
    #[arg(short = 'o', long = "output", value_name = "PATH")]
    pub output: Option<PathBuf>,

    /// csv: one row per histogram bucket instead of one per entry.
    #[arg(long)]
    pub buckets: bool,

    /// table: every column, whatever the terminal's width (the files always hold them).
    #[arg(long)]
    pub wide: bool,

    /// table: each CPU its own rows, causes and largest gaps (each watched thread its
    /// own), rather than CPUs whose figures and causes agree said once as a group.
    #[arg(long)]
    pub per_cpu: bool,

    /// table: also list the N largest events with their times (noise, timer): across
    /// the CPUs with the CPU of each (each CPU's own with --per-cpu, or up to 4 CPUs).
    #[arg(long, value_name = "N")]
    pub top: Option<usize>,
}

// `jitterscope run`, and a bare `jitterscope`.
#[derive(Debug, Clone, Default, Args)]
pub struct MainArgs {
    /// CPUs to measure, e.g. 1-3 [default: the CPUs the host isolated (isolcpus,
    /// nohz_full, an isolated cpuset partition); on a host without, every CPU but the
    /// lowest, kept for housekeeping].
    #[arg(short = 'a', long = "cpus", value_name = "LIST")]
    pub cpus: Option<String>,

    /// About 10 s instead of about 30 s.
    #[arg(long)]
    pub quick: bool,

    /// Measure each step this long instead (pingpong: half of it per mechanism).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, conflicts_with = "quick")]
    pub step_time: Option<Duration>,

    /// Where to save jitterscope-HOST-TIME.json and .html [default: the current
    /// directory].
    #[arg(long, value_name = "DIR")]
    pub out_dir: Option<PathBuf>,

    /// Infer the causes of the noise from its timing instead of measuring them from
    /// kernel trace events (which, as root, is the default).
    #[arg(long)]
    pub no_trace: bool,

    /// The CPU left unmeasured for the coordinator and the progress display [default: the
    /// lowest allowed CPU].
    #[arg(long, value_name = "CPU")]
    pub housekeeping: Option<usize>,

    /// Measure at SCHED_FIFO with this priority (as root) instead of SCHED_OTHER.
    #[arg(short = 'p', long, value_name = "PRIO", value_parser = clap::value_parser!(u8).range(1..=99))]
    pub priority: Option<u8>,

    /// Allow real-time spinners on every CPU, leaving none for housekeeping.
    #[arg(long)]
    pub force: bool,

    #[command(flatten)]
    pub save: SaveArgs,

    /// Exit 1 (after saving) if a figure of any CPU is above this limit: p50, p90, p99,
    /// p99.9, p99.99, max or mean with a time unit (p99=50us, max=1ms), lost or rate (noise). Repeat for
    /// several.
    #[arg(long = "fail-above", value_name = "METRIC=VALUE", value_parser = Gate::parse)]
    pub fail_above: Vec<Gate>,
}

// `jitterscope completions`.
#[derive(Debug, Clone, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_name = "SHELL")]
    pub shell: clap_complete::Shell,
}

// `jitterscope man`.
#[derive(Debug, Clone, Args)]
pub struct ManArgs {
    /// The command whose page to print (noise, timer, …) [default: the page of jitterscope
    /// itself, which lists them]
    #[arg(value_name = "COMMAND", conflicts_with = "dir")]
    pub command: Option<String>,

    /// Write every page into DIR instead: jitterscope.1 and jitterscope-COMMAND.1 for each
    /// command.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

// `jitterscope tune`.
#[derive(Debug, Clone, Args)]
#[command(mut_arg("per_cpu", |a| a.hide(true)))]
pub struct TuneArgs {
    // The CPUs to measure and tune for.
    #[arg(short = 'a', long = "cpus", value_name = "LIST", help = CPUS_MEASURED)]
    pub cpus: Option<String>,

    /// The CPU left unmeasured for the coordinator [default: the lowest CPU of this
    /// process's mask that the host did not isolate]
    #[arg(long, value_name = "CPU")]
    pub housekeeping: Option<usize>,

    /// The probe that measures each block: noise (a spinning thread's gaps) or timer
    /// (cyclictest's wake-up latency, at a 1 ms interval).
    #[arg(long, value_enum, default_value = "noise")]
    pub probe: TuneProbe,

    /// Trace the blocks (noise only; root and tracefs): a traced baseline block first
    /// orders the steps by the share of the lost time each one's cause takes, largest
    /// first, and each step shows that share before and after.
    #[arg(long)]
    pub trace: bool,

    /// Length of one block (at most 2s: with RT throttling off, no real-time spinner may
    /// hold a CPU longer).
    #[arg(long, value_name = "DURATION", default_value = "1200ms", value_parser = parse_duration)]
    pub block: Duration,

    /// Baseline/step pairs at a step's first look (8 or more can keep a step there); a
    /// step still undecided and leaning gets more, up to 3 times as many.
    #[arg(long, value_name = "PAIRS", default_value_t = 8,
          value_parser = clap::value_parser!(u32).range(1..=25))]
    pub blocks: u32,

    /// The CPU's rest between blocks.
    #[arg(long, value_name = "DURATION", default_value = "300ms", value_parser = parse_duration)]
    pub rest: Duration,

    /// What each step is judged on: lost (time per second), p99, p99.9 or max (per block)
    /// [default: per step, what its cause moves: the per-block max for RT throttling and
    /// the fair server, whose window is one long gap; lost time per second for the rest]
    #[arg(long, value_enum)]
    pub metric: Option<TuneMetric>,

    /// The measuring threads' priority (SCHED_FIFO unless --policy says otherwise).
    #[arg(short = 'p', long, value_name = "PRIO", value_parser = clap::value_parser!(u8).range(1..=99))]
    pub priority: Option<u8>,

    /// The measuring threads' policy: fifo (default), rr or other.
    #[arg(long, value_name = "POLICY", value_parser = parse_policy)]
    pub policy: Option<Policy>,

    /// Only these steps (finding ids, as the plan names them); repeat or comma-separate.
    #[arg(long, value_name = "ID", value_delimiter = ',')]
    pub step: Vec<String>,

    /// Add a sham step that changes no setting: a check that a step without effect is
    /// judged inconclusive.
    #[arg(long)]
    pub sham: bool,

    /// Print the plan and change nothing.
    #[arg(long)]
    pub dry_run: bool,

    /// Do not ask before the first change.
    #[arg(short = 'y', long)]
    pub yes: bool,

    /// Leave the kept steps applied at the end, and print how to undo them.
    #[arg(long)]
    pub keep: bool,

    /// Revert what a killed tune run, or a deadline run's root domain, left (the journal
    /// under /run/jitterscope), then exit.
    #[arg(long)]
    pub restore: bool,

    /// After the run, write the kept steps to DIR as a tuned profile, a sysctl.d file, a
    /// oneshot systemd unit with its script, and the boot-only kernel command line.
    #[arg(long, value_name = "DIR")]
    pub export: Option<PathBuf>,

    /// Read and write /proc and /sys under DIR instead of / (a recorded tree, for tests).
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,

    #[command(flatten)]
    pub save: SaveArgs,
}

/// `timer --engine`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum TimerEngine {
    #[default]
    Nanosleep,
    Timerlat,
    Both,
}

/// The probes `tune` can judge with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TuneProbe {
    Noise,
    Timer,
}

/// `tune --metric`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TuneMetric {
    Lost,
    P99,
    #[value(name = "p99.9")]
    P999,
    Max,
}

// `jitterscope selftest`.
#[derive(Debug, Clone, Args)]
pub struct SelftestArgs {
    /// About 3 s instead of about 10 s, with fewer holds (a miss then weighs more).
    #[arg(long)]
    pub quick: bool,

    /// Also save the checks with the host's facts as JSON to FILE (atomically), to attach
    /// to a bug report.
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

// `jitterscope compare`.
#[derive(Debug, Clone, Args)]
pub struct CompareArgs {
    /// Result files; the first is the baseline.
    #[arg(value_name = "RESULT", num_args = 2.., required = true)]
    pub results: Vec<PathBuf>,

    /// A name for each run, in the order of the files (repeat the option) [default: the
    /// file names].
    #[arg(long = "label", value_name = "NAME")]
    pub labels: Vec<String>,

    /// What to write (hdr and gnuplot carry every run's data, not the verdicts).
    #[arg(long, value_enum, default_value = "table")]
    pub format: ReportFormat,

    /// Write to PATH instead of stdout (atomically); for gnuplot, svg and png, the
    /// directory to write the files into (required).
    #[arg(short = 'o', long = "output", value_name = "PATH")]
    pub output: Option<PathBuf>,

    /// table: every column, whatever the terminal's width (the files always hold them).
    #[arg(long)]
    pub wide: bool,

    /// table: each CPU its own rows and causes, rather than CPUs whose changes agree said
    /// once as a group.
    #[arg(long)]
    pub per_cpu: bool,
}

// `jitterscope audit`.
#[derive(Debug, Clone, Args)]
pub struct AuditArgs {
    /// The CPUs the audit is about, e.g. 1-3 [default: the CPUs the host isolated
    /// (isolcpus, nohz_full, an isolated cpuset partition); on a host without, every
    /// online CPU but the lowest, kept for housekeeping].
    #[arg(short = 'a', long = "cpus", value_name = "LIST")]
    pub cpus: Option<String>,

    /// Read /proc and /sys under DIR instead of / (a saved snapshot, or a test fixture).
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,

    /// Write the findings as JSON to stdout (and no table).
    #[arg(long)]
    pub json: bool,
}

// `jitterscope ptp`.
#[derive(Debug, Clone, Args)]
#[command(mut_arg("per_cpu", |a| a.hide(true)))]
pub struct PtpArgs {
    /// A PTP clock device (/dev/ptp0) or a network interface (eth0) whose PHC to read
    /// [default: every /dev/ptp*].
    #[arg(value_name = "DEVICE|INTERFACE")]
    pub device: Option<String>,

    /// Samples per method.
    #[arg(short = 'n', long, value_name = "N", default_value_t = 1000,
          value_parser = clap::value_parser!(u32).range(1..=10_000_000))]
    pub samples: u32,

    #[command(flatten)]
    pub save: SaveArgs,
}

impl Default for NoiseArgs {
    fn default() -> Self {
        match Cli::parse_from(["jitterscope", "noise"]).command {
            Some(Command::Noise(a)) => a,
            _ => unreachable!("'noise' parses to the noise command"),
        }
    }
}

// `jitterscope monitor`.
#[derive(Debug, Clone, Args)]
pub struct MonitorArgs {
    /// CPUs to measure [default: the CPUs the host isolated; on a host without, every
    /// CPU of this process's mask but one housekeeping CPU].
    #[arg(short = 'a', long = "cpus", value_name = "LIST")]
    pub cpus: Option<String>,

    /// The CPU left for the HTTP server and the bookkeeping [default: the lowest
    /// allowed CPU].
    #[arg(long, value_name = "CPU")]
    pub housekeeping: Option<usize>,

    /// Real-time priority 1-99 of the timer threads; implies --policy fifo.
    #[arg(short = 'p', long, value_name = "PRIO", value_parser = clap::value_parser!(u8).range(1..=99))]
    pub priority: Option<u8>,

    /// Scheduling policy of the timer threads: other, fifo or rr [default: fifo at
    /// priority 1 as root, other otherwise].
    #[arg(long, value_name = "POLICY", value_parser = parse_policy)]
    pub policy: Option<Policy>,

    /// Timer interval in µs (or with a unit), from 10 µs to 1 s.
    #[arg(short = 'i', long, value_name = "US", default_value = "1000", value_parser = parse_interval)]
    pub interval: u64,

    /// Stop after this long [default: run until SIGTERM or Ctrl-C].
    #[arg(short = 'D', long, value_name = "DURATION", value_parser = parse_duration)]
    pub duration: Option<Duration>,

    /// Where to serve /metrics. A non-loopback address exposes the metrics to anyone
    /// who can reach it.
    #[arg(long, value_name = "ADDR:PORT", default_value = "127.0.0.1:9464")]
    pub listen: std::net::SocketAddr,

    /// Count wake-ups later than each of these (up to 4, comma-separated; µs when bare).
    #[arg(long, value_name = "LIST", default_value = "100us,1ms", value_parser = parse_us_list)]
    pub late_above: UsList,

    /// Write an HdrHistogram interval log (jHiccup's format) in DIR.
    #[arg(long, value_name = "DIR")]
    pub log_dir: Option<PathBuf>,

    /// One interval-log entry per CPU this often (whole seconds).
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_duration)]
    pub log_interval: Duration,

    /// Rotate the interval log when it grows past this many MiB.
    #[arg(long, value_name = "MIB", default_value_t = 64,
          value_parser = clap::value_parser!(u64).range(1..=65536))]
    pub log_max_mib: u64,

    /// How many rotated logs to keep (.1 … .N).
    #[arg(long, value_name = "N", default_value_t = 4,
          value_parser = clap::value_parser!(u32).range(1..=100))]
    pub log_keep: u32,

    /// Sweep for OS noise this often, on --noise-cpus only (a spinner at SCHED_OTHER).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, requires = "noise_cpus")]
    pub noise_every: Option<Duration>,

    /// How long each noise sweep spins.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_duration)]
    pub noise_for: Duration,

    /// The CPUs noise sweeps may spin on (measured CPUs only); required with
    /// --noise-every, so that no spinner runs on a CPU nobody named.
    #[arg(long, value_name = "LIST", requires = "noise_every")]
    pub noise_cpus: Option<String>,

    /// A noise sweep counts gaps longer than this (µs when bare, as noise's -T).
    #[arg(long, value_name = "TIME", default_value = "1us", value_parser = parse_noise_threshold)]
    pub noise_threshold: u64,

    /// Run the tuning audit again this often, so that a changed host shows.
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = parse_duration)]
    pub audit_every: Duration,

    /// Attribute each wake-up later than the lowest --late-above limit to its causes
    /// (IRQs, softirqs, the task that held the CPU, idle, unaccounted) from a kernel
    /// trace of the measured CPUs, exported as jitterscope_cause_* counters. Needs root
    /// and tracefs; without them it says so and measures on.
    #[arg(long)]
    pub trace: bool,

    /// Trace every thread of these names (comms, comma-separated or repeated, at most
    /// 16) as `watch --comm` does, and export per name their wake-up delay histogram,
    /// preempted and IRQ time, migrations, involuntary switches and the causes of their
    /// delays above --watch-threshold (jitterscope_watch_*). Needs root and tracefs;
    /// without them it says so and measures on.
    #[arg(long, value_name = "NAME,...", value_delimiter = ',', action = clap::ArgAction::Append)]
    pub watch_comm: Vec<String>,

    /// Trace every thread of the cgroups whose path (relative to the cgroup mount: the
    /// v1 cpu hierarchy, else v2) matches this glob, e.g. 'kubepods.slice/*/*',
    /// 'system.slice/*.service', 'machine.slice/libpod-*.scope' (* and ? within a path
    /// component; repeatable), matched again every 250 ms as containers come and go.
    /// Per group: the wake-up delay histogram, preempted and IRQ time, cpu.stat's
    /// throttled time and the causes of delays above --watch-threshold, the tasks that
    /// ran instead named with their container, pod or unit (jitterscope_watch_cgroup_*,
    /// labelled cgroup, container_id, pod_uid, unit). At most 64 groups have series of
    /// their own; the rest are summed into cgroup="dropped". Needs root and tracefs.
    #[arg(long, value_name = "PATTERN", action = clap::ArgAction::Append)]
    pub watch_cgroup: Vec<String>,

    /// With --watch-comm or --watch-cgroup: wake-up delays at or above this are split by what ran instead
    /// (µs when bare).
    #[arg(long, value_name = "TIME", default_value = "10us", value_parser = parse_us)]
    pub watch_threshold: u64,

    /// Do not lock memory (page faults may then land inside the measurement).
    #[arg(long)]
    pub no_mlock: bool,

    /// Allow the timer threads on every CPU, leaving none for the server.
    #[arg(long)]
    pub force: bool,
}

// `jitterscope watch`.
#[derive(Debug, Clone, Args)]
#[command(mut_arg("per_cpu", |a| a.long("per-thread").visible_alias("per-cpu").help("Each watched thread its own rows and causes, rather than threads whose figures and causes agree said once as a group, with the outliers named")))]
#[command(group(clap::ArgGroup::new("target").required(true).args(["pid", "tid", "comm", "cgroup", "container", "pod", "unit"])))]
pub struct WatchArgs {
    /// Watch every thread of process PID, those it starts later included.
    #[arg(long, value_name = "PID")]
    pub pid: Option<u32>,

    /// Watch these threads, e.g. 1234,1240.
    #[arg(long, value_name = "TID,...", value_delimiter = ',')]
    pub tid: Option<Vec<u32>>,

    /// Watch every task of this name (its comm, at most 15 bytes), new ones included.
    #[arg(long, value_name = "NAME")]
    pub comm: Option<String>,

    /// Watch every thread in this cgroup and below it, those that start or move in later
    /// included: a path relative to a cgroup mount (machine.slice/x.scope) or absolute
    /// (/sys/fs/cgroup/cpu/x).
    #[arg(long, value_name = "PATH")]
    pub cgroup: Option<String>,

    /// Watch a container: a Docker, podman, containerd or CRI-O id, or a unique prefix.
    #[arg(long, value_name = "ID")]
    pub container: Option<String>,

    /// Watch every container of a pod: a Kubernetes pod by its uid, or a podman pod by its
    /// id or a unique prefix.
    #[arg(long, value_name = "ID")]
    pub pod: Option<String>,

    /// Watch a systemd service, scope or slice (.service when no suffix is given).
    #[arg(long, value_name = "NAME")]
    pub unit: Option<String>,

    /// How long to watch: 500ms, 10s, 5m (a bare number is seconds) [default: until
    /// Ctrl-C or SIGTERM, or until the process ends].
    #[arg(short = 'D', long, value_name = "DURATION", value_parser = parse_duration)]
    pub duration: Option<Duration>,

    /// Wake-up delays at or above this are split by what ran instead: 10us, 1ms (a bare
    /// number is µs).
    #[arg(short = 'T', long, value_name = "TIME", default_value = "10us", value_parser = parse_us)]
    pub threshold: u64,

    /// The CPU the trace reader runs on [default: the lowest allowed CPU].
    #[arg(long, value_name = "CPU")]
    pub housekeeping: Option<usize>,

    #[command(flatten)]
    pub save: SaveArgs,
}

// `jitterscope fleet`.
#[derive(Debug, Clone, Args)]
pub struct FleetArgs {
    /// Result files, or directories of them (their *.json files are read; other files are
    /// skipped and counted).
    #[arg(value_name = "RESULT|DIR", required = true)]
    pub results: Vec<PathBuf>,

    /// What to write: text (the groups and outliers, fitted to the terminal), csv (one
    /// row a host) or html (one page with a hosts × figure heat map).
    #[arg(long, value_enum, default_value = "text")]
    pub format: FleetFormat,

    /// Write to PATH instead of stdout (atomically).
    #[arg(short = 'o', long = "output", value_name = "PATH")]
    pub output: Option<PathBuf>,

    /// text: each host its own row, rather than hosts whose figures agree said once.
    #[arg(long)]
    pub per_host: bool,

    /// text: every column and whole lines, whatever the terminal's width.
    #[arg(long)]
    pub wide: bool,
}

/// The formats `fleet` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FleetFormat {
    /// The groups, the outliers and what sets each apart, fitted to the terminal.
    Text,
    /// One row a host.
    Csv,
    /// One self-contained page: the same table and a hosts × figure heat map.
    Html,
}
