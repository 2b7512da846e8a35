//! `--trace`: the app's side of attribution. It starts a tracefs session on the measured
//! CPUs and, while the probe runs, follows it from reader threads on the housekeeping
//! CPUs, each owning some of the measured CPUs: every gap a measuring thread hands over
//! (through its `GapRing`) is attributed as it settles (`trace::stream`), and a noise
//! run's gaps are checked against the other CPUs' as they come (`stats::coincidence`).
//! Nothing is kept per gap, so memory and the result's size grow with neither the CPUs
//! times the run's length. Probes know nothing of it; without root or tracefs it says so
//! once (`trace-unavailable`) and the run goes on.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::degraded::Degraded;
use crate::engine::clock::Scale;
use crate::engine::run::{RunError, RunPlan};
use crate::engine::sched;
use crate::probes::noise::{self, NoiseConfig, NoiseEntry, NoiseRun};
use crate::stats::causes::{Attribution, ReaderBudget};
use crate::stats::coincidence::Coincidence;
use crate::stats::events::GapRing;
use crate::trace::attribute::{self, Context, Gap, Throttle};
use crate::trace::reader::{Collected, Follower};
use crate::trace::session::{TraceError, TraceSession};
use crate::trace::stream::{self, Budget, Lane, Reader};
use crate::trace::symbols::Symbols;

use super::pipeline::Ctx;

/// Per-CPU trace buffer: a few seconds of a busy CPU's events even if the reader lags.
pub const BUFFER_KIB: u64 = 4096;
/// Gaps that start this close on two CPUs are flagged as coincident.
pub const COINCIDENCE_NS: u64 = 5_000;
/// A gap's coincidence is decided at the latest this long after it began: exact for
/// every gap shorter than that (`stats::coincidence`).
pub const COINCIDENCE_HORIZON_NS: u64 = 1_000_000_000;

/// A trace session on the measured CPUs, or `None` with the reason recorded as a
/// degradation (the run goes on untraced).
fn start(ctx: &mut Ctx<'_>) -> Option<TraceSession> {
    match TraceSession::start(&ctx.cpus.measured, BUFFER_KIB) {
        Ok(s) => {
            for name in &s.removed_stale {
                ctx.note(stale_removed(name));
            }
            Some(s)
        }
        Err(e) => {
            ctx.degrade(Degraded::TraceUnavailable {
                reason: e.to_string(),
            });
            None
        }
    }
}

/// What a start that removed a killed run's instance says.
pub fn stale_removed(name: &str) -> String {
    format!("removed tracefs instance {name}, left by a run that was killed")
}

/// The names of the kernel functions the trace holds (work, hrtimer callbacks, cross-CPU
/// calls), read from kallsyms line by line: the whole table is about 6 MB.
fn symbols_for(c: &Collected) -> HashMap<u64, String> {
    let addrs = c
        .per_cpu
        .values()
        .flatten()
        .filter_map(|e| e.kind.function());
    Symbols::resolve(addrs)
}

/// A noise entry's logged gaps on the counter, each ending with the loop's own step, and
/// its interrupted time; `None` when it kept no log.
fn noise_gaps(e: &NoiseEntry, scale: Scale) -> Option<Vec<(Gap, u64)>> {
    let log = e.events.as_ref()?;
    let min_step = scale.to_ticks(e.loop_period.min_ns.round() as u64);
    let gaps = (log.start_tsc.iter().zip(&log.duration_ns)).map(|(&s, &d)| {
        (
            Gap {
                start: s,
                end: s + scale.to_ticks(d) + min_step,
            },
            d,
        )
    });
    Some(gaps.collect())
}

/// A noise entry's logged gaps attributed to the trace's events on its CPU, the `top`
/// largest broken down (the ground truth of `selftest` and the tests needs every one);
/// `None` when it kept no log.
pub fn attribute_noise_entry(
    e: &NoiseEntry,
    c: &Collected,
    scale: Scale,
    run_start: u64,
    top: usize,
) -> Option<Attribution> {
    let gaps = noise_gaps(e, scale)?;
    let symbols = symbols_for(c);
    let cx = Context {
        names: &c.decoder.names,
        symbols: &symbols,
        scale,
        run_start,
        measurer: e.thread.tid.unwrap_or(0),
        top,
        measurer_kind: attribute::MeasurerKind::Spins,
        naming: attribute::Naming::Full,
        throttle: &crate::system::throttle::read_for_self(&[e.cpu]).remove(0),
    };
    let events = c.per_cpu.get(&e.cpu).map_or(&[][..], Vec::as_slice);
    let mut a = attribute::attribute(&gaps, events, &cx);
    a.events_read = c.read.get(&e.cpu).copied().unwrap_or(0);
    a.events_lost = c.lost.get(&e.cpu).copied().unwrap_or(0);
    a.unattributed_gaps = e.interruptions.saturating_sub(gaps.len() as u64);
    a.coincidence_window_ns = COINCIDENCE_NS;
    Some(a)
}

/// Each measured CPU's queue of gaps: 4 096 (64 KiB, touched before measuring) a CPU. A
/// reader takes them every pass: it would have to fall 4 096 gaps behind to drop one,
/// 150 000 gaps a second at the 27 ms a pass of 192 CPUs took in the replay bench, eight
/// times the busiest host seen (18 000 a second).
pub const STREAM_GAPS: usize = 4_096;
/// Events a CPU's window holds at most (40 bytes each, 2.5 MiB). A window holds only what
/// waiting gaps need, about 90 ms of events (kilobytes at the rates seen here and on the
/// 16-CPU host), and gives a burst's memory back; the bound is for a reader held off
/// its CPU: a full test run beside builds starved one of 16 384 for long enough to push
/// a quarter of a 2 s run's gaps over a loss. Past it the oldest are pushed out, and
/// gaps over them counted unattributed.
pub const STREAM_EVENTS: usize = 65_536;

/// Holds each of `lanes` to its share of the readers' budget (issue 35); the budget.
fn bound(lanes: &mut [Lane]) -> Budget {
    let budget = budget(lanes.len());
    for l in lanes.iter_mut() {
        l.bound(budget);
    }
    budget
}

/// Each measured CPU's share of the readers' memory budget (`stream::BUDGET_BYTES`):
/// its window at most [`STREAM_EVENTS`], fewer on a host of many CPUs, once the fixed
/// per-CPU costs are counted: the gap queue; the coincidence count's held starts
/// ([`COINCIDENCE_HELD`], 8 bytes each); and [`REST_BYTES`].
pub fn budget(cpus: usize) -> Budget {
    let queue = STREAM_GAPS * std::mem::size_of::<crate::stats::events::Event>();
    let held = COINCIDENCE_HELD * std::mem::size_of::<u64>();
    Budget::for_cpus(cpus, queue + held + REST_BYTES, STREAM_EVENTS)
}

/// Starts the coincidence count holds per CPU at most: a reader hands it up to a queue of
/// each CPU's gaps a pass, and a quarter more. Past it the oldest are decided with what
/// is known: a CPU whose reader is behind holds the others' back only this far.
pub const COINCIDENCE_HELD: usize = STREAM_GAPS + STREAM_GAPS / 4;

/// The streaming coincidence count of `cpus` CPUs, its held starts within the budget.
pub fn coincidence(cpus: usize, scale: Scale) -> Coincidence {
    let (w, h) = (COINCIDENCE_NS, COINCIDENCE_HORIZON_NS);
    Coincidence::new(cpus, scale.to_ticks(w), scale.to_ticks(h), COINCIDENCE_HELD)
}

/// What else a reader holds, per CPU: the spans with events lost, the names and kernel
/// functions its events name, a pass's buffers, the coincidence count's chunk (24 bytes
/// for each of about 33 starts). A replay of 192 CPUs a queue behind held 290 KiB besides
/// the windows, waiting gaps, queues and coincidence count's held starts (issue 35).
pub const REST_BYTES: usize = 4 << 10;

/// How often a reader drains the trace and the gap queues, at most.
const PASS: std::time::Duration = std::time::Duration::from_millis(20);
/// How long after a gap's end it is attributed: by then every event inside it has been
/// written to the trace and read.
pub const SETTLE: std::time::Duration = std::time::Duration::from_millis(50);

/// How long a reader pauses after a pass that took `busy`: the rest of [`PASS`]. A reader
/// is told how far behind it is by its own pass's length: as the host's rate grows it
/// reads as often, and once a pass takes a whole `PASS` it reads again at once, rather
/// than fall a pause further behind each pass (issue 35).
pub fn pause_after(busy: std::time::Duration) -> std::time::Duration {
    PASS.saturating_sub(busy)
}

/// What the readers attributed: each measured CPU's lane, in the rings' order, with what
/// its trace read and lost, and its coincident gaps when they were counted.
pub struct Streamed {
    pub per_cpu: Vec<LaneOut>,
}

/// One measured CPU's share of a streamed trace.
pub struct LaneOut {
    pub lane: Lane,
    pub read: u64,
    /// Events lost: overwritten by the kernel, or pushed out of the window.
    pub lost: u64,
    /// Gaps the CPU's queue dropped (the reader was a whole queue behind).
    pub dropped: u64,
    pub coincident: Option<u64>,
    /// What its window and lane could hold.
    pub budget: ReaderBudget,
}

impl LaneOut {
    /// The lane's attribution, with what the trace read and lost.
    pub fn attribution(self, scale: Scale, run_start: u64) -> Attribution {
        let mut a = self.lane.finish(scale, run_start);
        a.events_read = self.read;
        a.events_lost = self.lost;
        a.unattributed_gaps += self.dropped;
        a.reader_budget = Some(self.budget);
        if let Some(n) = self.coincident {
            a.coincident_gaps = n;
            a.coincidence_window_ns = COINCIDENCE_NS;
        }
        a
    }
}

/// A trace session started for a streamed run, with each measured CPU's throttle
/// settings (in the plan's order), read before it started.
pub struct Traced {
    session: TraceSession,
    throttles: Vec<Throttle>,
}

/// `start` for a streamed run: the throttle settings of every measured CPU first (once,
/// before the session: the read may mount debugfs), then the session with a gap queue
/// per measured CPU (in the plan's order), or `None` with the reason recorded. Queues
/// only under a session that started: no one would drain them.
pub fn start_streamed(ctx: &mut Ctx<'_>) -> Option<(Traced, Vec<GapRing>)> {
    let throttles = crate::system::throttle::read_for_self(ctx.cpus.measured.cpus());
    let session = start(ctx)?;
    let rings = (throttles.iter())
        .map(|_| GapRing::new(STREAM_GAPS))
        .collect();
    Some((Traced { session, throttles }, rings))
}

/// A noise run with each gap attributed as it settles (`stream_noise`), each CPU's
/// attribution on its entry; untraced when the session cannot start (the reason
/// recorded), keeping then an event log of at least `untraced_log` gaps.
pub fn run_noise_traced(
    ctx: &mut Ctx<'_>,
    cfg: &NoiseConfig,
    untraced_log: usize,
    plan: &RunPlan,
    histograms: noise::Histograms,
) -> Result<NoiseRun, RunError> {
    let (clock, stop) = (&ctx.host.clock, ctx.stop);
    let Some((traced, rings)) = start_streamed(ctx) else {
        let cfg = NoiseConfig {
            event_log: cfg.event_log.max(untraced_log),
            ..cfg.clone()
        };
        return noise::run_with(&cfg, plan, clock, stop, histograms);
    };
    let run = || noise::run_streaming(cfg, plan, clock, stop, histograms, &rings);
    let (run, streamed) = stream_noise(ctx, traced, &rings, clock.scale, run);
    let mut run = run?;
    if let (Some(s), Some(w)) = (streamed, run.outcome.window) {
        attach_streamed(&mut run.entries, s, clock.scale, w.start);
    }
    Ok(run)
}

/// Runs `measure` (a noise run handing its gaps to `rings`, one per measured CPU) under
/// the started trace, attributing each gap as it settles, from readers on the
/// housekeeping CPUs: every gap of a run of any length, in bounded memory (issues 22 and
/// 29).
fn stream_noise<T>(
    ctx: &mut Ctx<'_>,
    traced: Traced,
    rings: &[GapRing],
    scale: Scale,
    measure: impl FnOnce() -> T,
) -> (T, Option<Streamed>) {
    let cpus = ctx.cpus.measured.cpus().iter();
    let lanes = (cpus.zip(traced.throttles))
        .map(|(&c, t)| Lane::noise(c, t))
        .collect();
    follow(ctx, traced.session, rings, lanes, true, scale, measure)
}

/// Runs `measure` (a timer run handing its wake-ups to `rings`) under the started trace,
/// attributing the wake-ups each lane picks as they settle.
pub fn stream_timer<T>(
    ctx: &mut Ctx<'_>,
    traced: Traced,
    rings: &[GapRing],
    lanes: impl Fn(usize, usize, Throttle) -> Lane,
    scale: Scale,
    measure: impl FnOnce() -> T,
) -> (T, Option<Streamed>) {
    let cpus = ctx.cpus.measured.cpus().iter().enumerate();
    let lanes = (cpus.zip(traced.throttles))
        .map(|((i, &c), t)| lanes(i, c, t))
        .collect();
    follow(ctx, traced.session, rings, lanes, false, scale, measure)
}

/// The measured CPUs' lanes split among readers: contiguous groups, one reader per
/// housekeeping CPU (one when there is none), at most one per measured CPU. Each reader's
/// load follows the host's rate (events and gaps a second), which no count of CPUs a
/// reader foresees: spread over every housekeeping CPU, a busier host is read at the
/// same lag (issue 35: 192 CPUs at 20 000 gaps a second each loaded two readers 71-75 %).
pub fn reader_groups(cpus: usize, housekeeping: usize) -> Vec<std::ops::Range<usize>> {
    let readers = housekeeping.clamp(1, cpus.max(1));
    let per = cpus.div_ceil(readers).max(1);
    (0..cpus)
        .step_by(per)
        .map(|from| from..(from + per).min(cpus))
        .collect()
}

/// Measures under the session, with readers following it; then closes it and says what
/// was lost, per CPU.
fn follow<T>(
    ctx: &mut Ctx<'_>,
    mut session: TraceSession,
    rings: &[GapRing],
    mut lanes: Vec<Lane>,
    coincide: bool,
    scale: Scale,
    measure: impl FnOnce() -> T,
) -> (T, Option<Streamed>) {
    let n = lanes.len();
    let budget = bound(&mut lanes);
    let housekeeping = ctx.cpus.housekeeping.cpus().to_vec();
    let groups = reader_groups(n, housekeeping.len());
    let coincidence = coincide.then(|| Mutex::new(coincidence(n, scale)));
    let done = AtomicBool::new(false);
    let mut shares: Vec<(std::ops::Range<usize>, Vec<Lane>)> = Vec::new();
    for g in groups.iter().rev() {
        shares.push((g.clone(), lanes.split_off(g.start)));
    }
    shares.reverse();
    let (out, results) = std::thread::scope(|s| {
        let readers: Vec<_> = (shares.into_iter().enumerate())
            .map(|(k, (range, lanes))| {
                let cpu = (!housekeeping.is_empty()).then(|| housekeeping[k % housekeeping.len()]);
                let (session, done, coincidence) = (&session, &done, coincidence.as_ref());
                let rings = &rings[range.clone()];
                s.spawn(move || {
                    // Off the measured CPUs, or reading would be noise there. At the
                    // default nice: at -10, beside a build on two CPUs, it pushed the
                    // build's tasks onto the measured CPU, where a SCHED_OTHER loop then
                    // waited up to 14 ms at a time (trace::issue29).
                    if let Some(cpu) = cpu {
                        let _ = sched::pin_to(cpu);
                    }
                    let watch = Watch {
                        session,
                        rings,
                        first: range.start,
                        coincidence,
                        scale,
                        done,
                        window: budget.window_events,
                    };
                    watch.run(lanes)
                })
            })
            .collect();
        let out = measure();
        session.stop_recording();
        done.store(true, Ordering::Release);
        let results: Vec<_> = readers.into_iter().map(|r| r.join()).collect();
        (out, results)
    });
    let mut per_cpu = Vec::with_capacity(n);
    let mut failed = None;
    for r in results {
        match r {
            Ok(Ok(lanes)) => per_cpu.extend(lanes),
            Ok(Err(e)) => failed = Some(e.to_string()),
            Err(_) => failed = Some("the trace reader panicked".to_string()),
        }
    }
    let counted = coincidence.and_then(|c| c.into_inner().ok().map(Coincidence::finish));
    for (i, l) in per_cpu.iter_mut().enumerate() {
        l.lost += session.lost(l.lane.cpu);
        l.coincident = counted.as_ref().and_then(|c| c.per_lane.get(i).copied());
    }
    session.close();
    if let Some(reason) = failed {
        ctx.degrade(Degraded::TraceUnavailable { reason });
        return (out, None);
    }
    // Gaps judged after their neighbours: a coincidence among them may be missed.
    let late = counted.as_ref().map_or(0, |c| c.late);
    let late = (late > 0).then(|| {
        format!(
            "{late} gaps were judged for coincidence across CPUs after the gaps around them \
             (gaps over {} s, or a reader held off its CPU): the coincident counts may be low",
            COINCIDENCE_HORIZON_NS / 1_000_000_000
        )
    });
    for note in [lost_note(&per_cpu), dropped_note(&per_cpu), late]
        .into_iter()
        .flatten()
    {
        ctx.note(note);
    }
    (out, Some(Streamed { per_cpu }))
}

/// One reader's share of the trace.
struct Watch<'a> {
    session: &'a TraceSession,
    rings: &'a [GapRing],
    /// The index of its first lane among all.
    first: usize,
    coincidence: Option<&'a Mutex<Coincidence>>,
    scale: Scale,
    done: &'a AtomicBool,
    /// Events each CPU's window holds at most.
    window: usize,
}

impl Watch<'_> {
    /// Follows its CPUs until the run is done, then drains what is left.
    fn run(&self, lanes: Vec<Lane>) -> Result<Vec<LaneOut>, TraceError> {
        let cpus: Vec<usize> = lanes.iter().map(|l| l.cpu).collect();
        let io = |source| TraceError::Io {
            path: self.session.pipe(cpus.first().copied().unwrap_or(0)),
            source,
        };
        let follower = Follower::open_cpus(self.session, &cpus, self.window)?;
        let mut reader = Reader::new(follower, lanes);
        loop {
            // Recording stops before `done` is set: what is read after it is all there is.
            let last = self.done.load(Ordering::Acquire);
            let began = std::time::Instant::now();
            let now = crate::engine::clock::now();
            let (rings, first, scale) = (self.rings, self.first, self.scale);
            read_pass(
                &mut reader,
                rings,
                first,
                self.coincidence,
                scale,
                now,
                last,
            )
            .map_err(io)?;
            if last {
                break;
            }
            std::thread::sleep(pause_after(began.elapsed()));
        }
        Ok(lane_outs(reader, self.rings))
    }
}

/// Follows `session` for `lanes` (one per ring, in order) until `done`, as a noise run's
/// reader does but for a caller with no command around it (`selftest`): the caller
/// runs it on a housekeeping CPU, stops the session's recording before setting `done`,
/// and adds the kernel's own losses.
pub fn follow_lanes(
    session: &TraceSession,
    rings: &[GapRing],
    mut lanes: Vec<Lane>,
    scale: Scale,
    done: &AtomicBool,
) -> Result<Vec<LaneOut>, TraceError> {
    // The same memory budget as a command's readers (issue 35).
    let budget = bound(&mut lanes);
    let watch = Watch {
        session,
        rings,
        first: 0,
        coincidence: None,
        scale,
        done,
        window: budget.window_events,
    };
    watch.run(lanes)
}

/// A finished reader's lanes, with what each window read and pushed out and what each
/// ring dropped (the kernel's own losses are the caller's to add).
pub fn lane_outs<R>(reader: Reader<R>, rings: &[GapRing]) -> Vec<LaneOut> {
    let Reader {
        follower, lanes, ..
    } = reader;
    (lanes.into_iter().zip(&follower.windows).zip(rings))
        .map(|((lane, w), ring)| LaneOut {
            budget: ReaderBudget {
                total_bytes: stream::BUDGET_BYTES as u64,
                window_events: w.min_cap() as u64,
                pending_gaps: lane.max_pending() as u64,
            },
            lane,
            read: w.read,
            lost: w.evicted,
            dropped: ring.dropped(),
            coincident: None,
        })
        .collect()
}

/// One reader's pass at `now` on the counter: drains its CPUs' trace into their windows,
/// hands each lane the gaps its ring holds (and the coincidence count, lane `first` on),
/// and attributes the gaps that settled (all of them when `last`). The replay bench runs
/// the same pass on recorded pages.
pub fn read_pass<R: std::io::Read>(
    reader: &mut Reader<R>,
    rings: &[GapRing],
    first: usize,
    coincidence: Option<&Mutex<Coincidence>>,
    scale: Scale,
    now: u64,
    last: bool,
) -> std::io::Result<()> {
    let settle = scale.to_ticks(SETTLE.as_nanos() as u64);
    // A backlog (a pass held up, the reader held off its CPU) is taken a window's room
    // at a time: what is read is settled and forgotten before more is read, the rest
    // waiting in the kernel's buffers and the gap queues, none of it pushed out
    // (issue 35). Once a round frees nothing, the rest is read whole, as it comes.
    let mut bounded = true;
    loop {
        reader.read_within(bounded)?;
        let mut left = false;
        // Each gap goes to the count as it is taken: gathered first, a pass of 192 CPUs
        // a whole queue behind held 19 MB of them (issue 35).
        let mut counting = coincidence.and_then(|c| c.lock().ok());
        for (i, (lane, ring)) in reader.lanes.iter_mut().zip(rings).enumerate() {
            let room = if bounded { lane.room() } else { usize::MAX };
            left |= take_gaps(lane, ring, scale, room, |s, e| {
                if let Some(c) = counting.as_mut() {
                    c.add(first + i, s, e);
                }
            });
        }
        if let Some(c) = counting.as_mut() {
            c.advance(now);
        }
        drop(counting);
        let holding = reader.holding();
        reader.settle_read(scale, now.saturating_sub(settle), settle, last);
        if !(reader.behind() || left) {
            return Ok(());
        }
        bounded &= reader.holding() < holding;
    }
}

/// Hands at most `n` of the gaps queued on `ring` to `lane`, each from its start to its
/// end on the counter (a noise loop's gap ends with the loop's own step), and to `also`;
/// whether any were left queued.
fn take_gaps(
    lane: &mut Lane,
    ring: &GapRing,
    scale: Scale,
    n: usize,
    mut also: impl FnMut(u64, u64),
) -> bool {
    if lane.measurer == 0 {
        lane.measurer = ring.tid();
    }
    let min_step = ring.loop_min();
    ring.drain_at_most(n, |e| {
        let end = e.start_ticks + scale.to_ticks(e.duration_ns) + min_step;
        lane.offer(
            Gap {
                start: e.start_ticks,
                end,
            },
            e.duration_ns,
        );
        also(e.start_ticks, end);
    })
}

/// One line saying on which CPUs trace events were lost, and how many gaps that left
/// unattributed; `None` when nothing was lost.
fn lost_note(per_cpu: &[LaneOut]) -> Option<String> {
    let lossy: Vec<&LaneOut> = per_cpu.iter().filter(|l| l.lost > 0).collect();
    let each = each_cpu(&lossy, |l| count(l.lost, "event"))?;
    let gaps: u64 = lossy.iter().map(|l| l.lane.in_lost_spans).sum();
    Some(format!(
        "trace events were lost ({each}): the {gaps} gaps that overlap a loss are counted \
         unattributed, and the others may show more unaccounted time than there was"
    ))
}

/// One line saying on which CPUs the reader fell behind and how many gaps it dropped
/// there (counted unattributed): a whole gap queue behind (held off its CPU), or more gaps
/// waiting to settle than its share of the memory budget holds; `None` when it kept up.
fn dropped_note(per_cpu: &[LaneOut]) -> Option<String> {
    let behind: Vec<&LaneOut> = (per_cpu.iter())
        .filter(|l| l.dropped + l.lane.shed > 0)
        .collect();
    let each = each_cpu(&behind, |l| count(l.dropped + l.lane.shed, "gap"))?;
    let why = match behind.iter().map(|l| l.lane.shed).sum::<u64>() {
        0 => "a whole queue of gaps behind, held off its CPU".to_string(),
        _ => format!(
            "behind, held off its CPU: past a whole queue of gaps, or past the gaps its \
             share of the {} MiB reader budget holds waiting",
            stream::BUDGET_BYTES >> 20
        ),
    };
    Some(format!(
        "the trace reader fell {why} ({each}): those gaps are counted unattributed"
    ))
}

/// "12 events", "1 event".
fn count(n: u64, what: &str) -> String {
    match n {
        1 => format!("1 {what}"),
        n => format!("{n} {what}s"),
    }
}

/// "CPU 1: 12 events, CPU 3: 4 events" for the first few of `lanes`, then how many more;
/// `None` for none.
fn each_cpu(lanes: &[&LaneOut], what: impl Fn(&LaneOut) -> String) -> Option<String> {
    const SHOWN: usize = 8;
    if lanes.is_empty() {
        return None;
    }
    let mut each: Vec<String> = (lanes.iter().take(SHOWN))
        .map(|l| format!("CPU {}: {}", l.lane.cpu, what(l)))
        .collect();
    if lanes.len() > SHOWN {
        each.push(format!(
            "and {} more CPUs (each in the result)",
            lanes.len() - SHOWN
        ));
    }
    Some(each.join(", "))
}

/// Puts each CPU's streamed attribution on its noise entry: every gap the loop saw but
/// those its queue dropped and those over a loss (`unattributed_gaps`, counted by the
/// lane), and its gaps that coincided with another CPU's, counted as they came.
fn attach_streamed(entries: &mut [NoiseEntry], s: Streamed, scale: Scale, run_start: u64) {
    for out in s.per_cpu {
        if let Some(e) = entries.iter_mut().find(|e| e.cpu == out.lane.cpu) {
            e.attribution = Some(out.attribution(scale, run_start));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::attribute::Throttle;

    fn out(cpu: usize, lost: u64, dropped: u64) -> LaneOut {
        LaneOut {
            lane: Lane::noise(cpu, Throttle::default()),
            read: 1_000,
            lost,
            dropped,
            coincident: None,
            budget: ReaderBudget {
                total_bytes: 0,
                window_events: 0,
                pending_gaps: 0,
            },
        }
    }

    /// One CPU's reader, its window holding `window` events and its lane `pending` gaps,
    /// handed a backlog all at once: `gaps` tasks taking the CPU from its loop for 2 µs,
    /// one every 10 µs, their switches in the kernel's buffer and their gaps queued.
    /// What one pass long after made of it: the lane, and its window's events pushed out.
    fn backlog(window: usize, pending: usize, gaps: u64) -> (Lane, u64) {
        use crate::trace::format::PageLayout;
        use crate::trace::reader::PageQueue;
        use crate::trace::stream::tests::{switch, switch_format};
        const ME: u32 = 100;
        let scale = Scale::from_hz(1e9);
        let me = ("measure-cpu1", ME);
        let records: Vec<(u64, Vec<u8>)> = (0..gaps)
            .flat_map(|i| {
                let t = 1_000 + i * 10_000;
                let task = (["kworker", "ksoftirqd", "rcu_sched"][i as usize % 3], 7);
                [(t, switch(me, task)), (t + 2_000, switch(task, me))]
            })
            .collect();
        let refs: Vec<(u64, &[u8])> = records.iter().map(|(t, d)| (*t, &d[..])).collect();
        let pages = crate::trace::ring::write_pages(&refs, 4096, &PageLayout::DEFAULT);
        let queue = PageQueue {
            pages: pages.into(),
        };
        let f = Follower::from_sources(
            vec![(1, queue)],
            4096,
            PageLayout::DEFAULT,
            &[switch_format()],
            window,
        );
        let mut lane = Lane::noise(1, Throttle::default());
        lane.bound_pending(pending);
        let mut reader = Reader::new(f, vec![lane]);
        let rings = [GapRing::new(STREAM_GAPS)];
        let mut p = rings[0].producer(ME, 0);
        for i in 0..gaps {
            let start = 1_000 + i * 10_000 - 10;
            p.push(crate::stats::events::Event {
                start_ticks: start,
                duration_ns: 2_020,
            });
        }
        let now = gaps * 10_000 + 200_000_000;
        read_pass(&mut reader, &rings, 0, None, scale, now, false).unwrap();
        let evicted = reader.follower.windows[0].evicted;
        (reader.lanes.remove(0), evicted)
    }

    /// Issue 35: a backlog five times what a window holds (a pass held up by a kallsyms
    /// read, a reader held off its CPU) is read a window's room at a time, each round
    /// settled before the next is read: no event pushed out, no gap dropped, every gap
    /// named as a window that held the whole backlog names it.
    #[test]
    fn issue35_a_backlog_past_a_window_is_read_in_rounds_and_nothing_is_pushed_out() {
        let gaps = 2_500;
        let (small, evicted) = backlog(1_024, 256, gaps);
        assert_eq!(evicted, 0, "events pushed out of the window");
        assert_eq!((small.shed, small.in_lost_spans), (0, 0));
        assert_eq!(small.attributed(), gaps);
        let (whole, _) = backlog(65_536, 8_192, gaps);
        let scale = Scale::from_hz(1e9);
        let (small, whole) = (small.finish(scale, 0), whole.finish(scale, 0));
        assert_eq!(small.causes, whole.causes);
        let tasks =
            (small.causes.iter()).filter(|c| c.kind == crate::stats::causes::CauseKind::Task);
        assert_eq!(
            tasks.map(|c| c.gaps).sum::<u64>(),
            gaps,
            "{:?}",
            small.causes
        );
    }

    /// A reader that fell a whole gap queue behind says on which CPUs and how many gaps
    /// it dropped (counted unattributed), as a loss of events is said: neither is silent.
    #[test]
    fn a_reader_that_fell_behind_says_so_per_cpu() {
        let lanes = [out(1, 12, 0), out(2, 0, 282), out(3, 0, 0)];
        let lost = lost_note(&lanes).expect("a loss");
        assert!(lost.contains("(CPU 1: 12 events)"), "{lost}");
        let dropped = dropped_note(&lanes).expect("drops");
        assert!(dropped.contains("(CPU 2: 282 gaps)"), "{dropped}");
        let quiet = [out(3, 0, 0)];
        assert_eq!((lost_note(&quiet), dropped_note(&quiet)), (None, None));
        let many: Vec<LaneOut> = (0..10).map(|c| out(c, 0, 1)).collect();
        let note = dropped_note(&many).unwrap();
        assert!(note.contains("CPU 7: 1 gap, and 2 more CPUs"), "{note}");
    }
}
