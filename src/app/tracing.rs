//! `--trace`: the app's side of attribution. It starts a tracefs session on the measured
//! CPUs, drains it from a thread on the housekeeping CPU while the probe runs, and hands
//! the probe's gaps and the trace's events to `trace::attribute`. Probes know nothing of
//! it; without root or tracefs it says so once (`trace-unavailable`) and the run goes on.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::degraded::Degraded;
use crate::engine::clock::Scale;
use crate::engine::sched;
use crate::probes::noise::NoiseEntry;
use crate::trace::attribute::{self, Context, Gap};
use crate::trace::reader::{self, Collected};
use crate::trace::session::TraceSession;
use crate::trace::symbols::Symbols;

use super::pipeline::Ctx;

/// Per-CPU trace buffer: a few seconds of a busy CPU's events even if the reader lags.
pub const BUFFER_KIB: u64 = 4096;
/// Gaps that start this close on two CPUs are flagged as coincident.
pub const COINCIDENCE_NS: u64 = 5_000;
/// How many of the largest gaps are broken down.
pub const TOP: usize = 10;

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

/// Runs `measure` with a trace of `cpus` read from the housekeeping CPU; `None` for the
/// trace when it could not be made (recorded as a degradation).
pub fn traced<T>(ctx: &mut Ctx<'_>, measure: impl FnOnce() -> T) -> (T, Option<Collected>) {
    let Some(mut session) = start(ctx) else {
        return (measure(), None);
    };
    let done = AtomicBool::new(false);
    let housekeeping = ctx.cpus.housekeeping.first();
    let (out, collected) = std::thread::scope(|s| {
        let reader = s.spawn(|| {
            // Off the measured CPUs, or reading would be noise there.
            if let Some(cpu) = housekeeping {
                let _ = sched::pin_to(cpu);
            }
            reader::collect(&session, &done)
        });
        let out = measure();
        done.store(true, Ordering::Relaxed);
        (out, reader.join())
    });
    session.close();
    match collected {
        Ok(Ok(c)) => {
            for (cpu, lost) in c.lost.iter().filter(|(_, n)| **n > 0) {
                ctx.note(format!(
                    "{lost} trace events were lost on CPU {cpu}: its gaps may show more \
                     unaccounted time than there was"
                ));
            }
            (out, Some(c))
        }
        Ok(Err(e)) => {
            ctx.degrade(Degraded::TraceUnavailable {
                reason: e.to_string(),
            });
            (out, None)
        }
        Err(_) => {
            ctx.degrade(Degraded::TraceUnavailable {
                reason: "the trace reader panicked".into(),
            });
            (out, None)
        }
    }
}

/// Work and hrtimer functions' names, for the addresses the trace holds.
pub fn symbols_for(c: &Collected) -> HashMap<u64, String> {
    let addrs = c
        .per_cpu
        .values()
        .flatten()
        .filter_map(|e| e.kind.function());
    Symbols::load().names(addrs)
}

/// Whose gaps are attributed: the CPU, its measuring thread, and the run's timebase.
struct OnCpu {
    cpu: usize,
    tid: Option<u32>,
    scale: Scale,
    run_start: u64,
    /// How many of the largest gaps to break down.
    top: usize,
}

impl OnCpu {
    /// `gaps` attributed to the CPU's events, with the trace's own counts for the CPU.
    fn attribute(
        &self,
        c: &Collected,
        symbols: &HashMap<u64, String>,
        gaps: &[(Gap, u64)],
        quiet_at_gap_start: bool,
    ) -> crate::stats::causes::Attribution {
        // noise's loop runs at each gap's start and spins; a timer thread sleeps.
        let spins = quiet_at_gap_start;
        let empty = Vec::new();
        let cx = Context {
            names: &c.decoder.names,
            symbols,
            scale: self.scale,
            run_start: self.run_start,
            measurer: self.tid.unwrap_or(0),
            top: self.top,
            quiet_at_gap_start,
            naming: attribute::Naming::Full,
            throttle: crate::system::throttle::read_for_self(self.cpu),
            measurer_spins: spins,
        };
        let mut a = attribute::attribute(gaps, c.per_cpu.get(&self.cpu).unwrap_or(&empty), &cx);
        a.events_read = c.read.get(&self.cpu).copied().unwrap_or(0);
        a.events_lost = c.lost.get(&self.cpu).copied().unwrap_or(0);
        a
    }
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
) -> Option<crate::stats::causes::Attribution> {
    attribute_one_noise(e, c, &symbols_for(c), scale, run_start, top)
}

fn attribute_one_noise(
    e: &NoiseEntry,
    c: &Collected,
    symbols: &HashMap<u64, String>,
    scale: Scale,
    run_start: u64,
    top: usize,
) -> Option<crate::stats::causes::Attribution> {
    let gaps = noise_gaps(e, scale)?;
    let on = OnCpu {
        cpu: e.cpu,
        tid: e.thread.tid,
        scale,
        run_start,
        top,
    };
    // The loop ran at each gap's start.
    let mut a = on.attribute(c, symbols, &gaps, true);
    a.unattributed_gaps = e.interruptions.saturating_sub(gaps.len() as u64);
    a.coincidence_window_ns = COINCIDENCE_NS;
    Some(a)
}

/// The late wake-ups of each timer entry (the spikes at or above `above_ns`, or above the
/// entry's p99 when none is given), from deadline to waking, attributed to the trace's
/// events on its CPU: the time the CPU idled before the timer's interrupt (the IRQ delay
/// from idle), interrupts and softirqs, the thread that held the CPU (blocking), and what
/// no event covers (the wake-up path and the hypervisor).
pub fn attribute_timer(
    entries: &mut [crate::probes::timer::TimerEntry],
    c: &Collected,
    scale: Scale,
    run_start: u64,
    above_ns: Option<u64>,
) {
    let symbols = symbols_for(c);
    for e in entries.iter_mut() {
        let Some(log) = &e.spikes else { continue };
        let floor = above_ns.or(e.summary.p99_ns).unwrap_or(0);
        let gaps: Vec<(Gap, u64)> = (log.start_tsc.iter().zip(&log.duration_ns))
            .filter(|(_, d)| **d >= floor)
            .map(|(&s, &d)| {
                let end = s + scale.to_ticks(d);
                (Gap { start: s, end }, d)
            })
            .collect();
        let on = OnCpu {
            cpu: e.cpu,
            tid: e.thread.tid,
            scale,
            run_start,
            top: TOP,
        };
        // The thread sleeps until its deadline: whatever ran then is the delay's.
        let mut a = on.attribute(c, &symbols, &gaps, false);
        a.method = format!(
            "kernel trace events on the counter (x86-tsc): each wake-up at or above {} µs \
             late, from its deadline to its waking, split by what ran",
            floor as f64 / 1e3
        );
        a.unattributed_gaps = log.dropped;
        e.attribution = Some(a);
    }
}

/// Each measured CPU's queue of noise gaps: 65 536 gaps (1 MiB) a CPU. The reader takes
/// them every `PASS`; it would have to fall a whole queue behind to drop one.
pub const STREAM_GAPS: usize = 65_536;
/// Events held per CPU while they wait for the gaps they cover (48 bytes each).
const STREAM_EVENTS: usize = 262_144;
/// How often the reader drains the trace and the gap queues.
const PASS: std::time::Duration = std::time::Duration::from_millis(20);
/// How long after a gap's end it is attributed: by then every event inside it has been
/// written to the trace and read.
const SETTLE: std::time::Duration = std::time::Duration::from_millis(50);
/// How long a loop may be held off its CPU with its gap still attributed whole: longer
/// than RT throttling's windows (50 ms by default) and a CFS period (at most 1 s).
const HOLD: std::time::Duration = std::time::Duration::from_secs(2);

/// From where a CPU's events must be kept: the first waiting gap's start; with none
/// waiting, the loop's last known run (the end of its last gap, `loop_ran`), never more
/// than `hold` before `settled`. A gap is known only once the loop runs again, so the
/// next one may have begun right after `loop_ran` and still go on: forgetting up to
/// `settled` lost the switch that opened a throttle window longer than SETTLE, and named
/// the window after the tasks and idle in it (issue 29).
fn keep_events_from(first_waiting: Option<u64>, loop_ran: u64, settled: u64, hold: u64) -> u64 {
    let from = first_waiting.unwrap_or(loop_ran.max(settled.saturating_sub(hold)));
    from.min(settled)
}

/// What a streamed trace attributed, per measured CPU in the rings' order.
pub struct Streamed {
    pub per_cpu: Vec<(usize, crate::trace::attribute::Tally)>,
    pub read: Vec<u64>,
    pub lost: Vec<u64>,
}

/// Runs `measure` (a noise run handing its gaps to `rings`, one per CPU of `cpus`) under
/// a trace of those CPUs, attributing each gap as it settles, from a reader on the
/// housekeeping CPU: every gap of a run of any length, in bounded memory (issue 22).
pub fn traced_stream<T>(
    ctx: &mut Ctx<'_>,
    rings: &[crate::stats::events::GapRing],
    scale: Scale,
    measure: impl FnOnce() -> T,
) -> (T, Option<Streamed>) {
    let cpus = ctx.cpus.measured.clone();
    let Some(mut session) = start(ctx) else {
        return (measure(), None);
    };
    let done = AtomicBool::new(false);
    let housekeeping = ctx.cpus.housekeeping.first();
    // Read before measuring: it may mount debugfs for the fair server's settings.
    let throttles: Vec<_> = (cpus.cpus().iter())
        .map(|&c| crate::system::throttle::read_for_self(c))
        .collect();
    let (out, streamed) = std::thread::scope(|s| {
        let reader = s.spawn(|| {
            if let Some(cpu) = housekeeping {
                let _ = sched::pin_to(cpu);
            }
            follow_gaps(&session, cpus.cpus(), &throttles, rings, scale, &done)
        });
        let out = measure();
        done.store(true, Ordering::Relaxed);
        (out, reader.join())
    });
    session.close();
    let reason = match streamed {
        Ok(Ok(s)) => {
            for (&(cpu, _), lost) in s.per_cpu.iter().zip(&s.lost).filter(|(_, n)| **n > 0) {
                ctx.note(format!(
                    "{lost} trace events were lost on CPU {cpu}: its gaps may show more \
                     unaccounted time than there was"
                ));
            }
            return (out, Some(s));
        }
        Ok(Err(e)) => e.to_string(),
        Err(_) => "the trace reader panicked".to_string(),
    };
    ctx.degrade(Degraded::TraceUnavailable { reason });
    (out, None)
}

/// The reader: drains the trace into a window per CPU and the gaps from their queues,
/// and attributes the gaps that have settled to the events around them, forgetting the
/// events no waiting gap needs.
fn follow_gaps(
    session: &TraceSession,
    cpus: &[usize],
    throttles: &[attribute::Throttle],
    rings: &[crate::stats::events::GapRing],
    scale: Scale,
    done: &AtomicBool,
) -> Result<Streamed, crate::trace::session::TraceError> {
    use crate::trace::attribute::Tally;
    use std::collections::VecDeque;
    let io = |source| crate::trace::session::TraceError::Io {
        path: session.pipe(cpus.first().copied().unwrap_or(0)),
        source,
    };
    let mut follower = reader::Follower::open(session, STREAM_EVENTS)?;
    let kallsyms = Symbols::load();
    let mut symbols: HashMap<u64, String> = HashMap::new();
    let mut pending: Vec<VecDeque<(Gap, u64)>> = rings.iter().map(|_| VecDeque::new()).collect();
    let mut tallies: Vec<Tally> = rings.iter().map(|_| Tally::new(TOP)).collect();
    // Where each loop last ran: the end of its last gap.
    let mut loop_ran: Vec<u64> = rings.iter().map(|_| 0).collect();
    let hold = scale.to_ticks(HOLD.as_nanos() as u64);
    loop {
        let last = done.load(Ordering::Relaxed);
        if last {
            session.stop_recording();
        }
        let settled = match last {
            true => u64::MAX,
            false => {
                crate::engine::clock::now().saturating_sub(scale.to_ticks(SETTLE.as_nanos() as u64))
            }
        };
        follower.pass().map_err(io)?;
        for (i, ring) in rings.iter().enumerate() {
            let min_step = ring.loop_min();
            ring.drain(|e| {
                let end = e.start_ticks + scale.to_ticks(e.duration_ns) + min_step;
                loop_ran[i] = loop_ran[i].max(end);
                pending[i].push_back((
                    Gap {
                        start: e.start_ticks,
                        end,
                    },
                    e.duration_ns,
                ));
            });
            let ready = pending[i].partition_point(|(g, _)| g.end <= settled);
            let Some(w) = follower
                .windows
                .iter_mut()
                .find(|w| Some(&w.cpu) == cpus.get(i))
            else {
                continue;
            };
            if ready > 0 {
                let batch: Vec<(Gap, u64)> = pending[i].drain(..ready).collect();
                let addrs = (w.events().iter())
                    .filter_map(|e| e.kind.function())
                    .filter(|f| !symbols.contains_key(f));
                let new = kallsyms.names(addrs.collect::<Vec<_>>().into_iter());
                symbols.extend(new);
                let cx = Context {
                    names: &follower.decoder.names,
                    symbols: &symbols,
                    scale,
                    run_start: 0,
                    measurer: ring.tid(),
                    top: TOP,
                    quiet_at_gap_start: true,
                    naming: attribute::Naming::Full,
                    throttle: throttles[i].clone(),
                    // noise's loop spins: it never leaves its CPU by itself.
                    measurer_spins: true,
                };
                tallies[i].add(&batch, w.events(), &cx);
            }
            // What the next waiting gap needs, or what the next one could.
            let first_waiting = pending[i].front().map(|(g, _)| g.start);
            w.forget_before(keep_events_from(first_waiting, loop_ran[i], settled, hold));
        }
        if last {
            break;
        }
        std::thread::sleep(PASS);
    }
    let lost = (follower.windows.iter())
        .map(|w| w.evicted + session.lost(w.cpu))
        .collect();
    let read = follower.windows.iter().map(|w| w.read).collect();
    Ok(Streamed {
        per_cpu: cpus.iter().copied().zip(tallies).collect(),
        read,
        lost,
    })
}

/// Puts each CPU's streamed attribution on its noise entry: every gap the loop saw,
/// less those its queue dropped (`unattributed_gaps`). Coincidences with other CPUs are
/// counted over the gaps the entries' logs kept.
pub fn attach_streamed(entries: &mut [NoiseEntry], s: Streamed, scale: Scale, run_start: u64) {
    let per_cpu = s.per_cpu.into_iter().zip(s.read.into_iter().zip(s.lost));
    for ((cpu, tally), (read, lost)) in per_cpu {
        let Some(e) = entries.iter_mut().find(|e| e.cpu == cpu) else {
            continue;
        };
        let mut a = tally.finish(scale);
        for b in &mut a.top {
            b.start_ns = scale.to_ns(b.start_tsc.saturating_sub(run_start));
        }
        a.events_read = read;
        a.events_lost = lost;
        a.unattributed_gaps = e.interruptions.saturating_sub(a.gaps);
        a.coincidence_window_ns = COINCIDENCE_NS;
        e.attribution = Some(a);
    }
    let mut starts = Vec::new();
    for e in entries.iter() {
        if let Some(log) = &e.events {
            starts.push(log.start_tsc.clone());
        }
    }
    let counts = attribute::coincident(&starts, scale.to_ticks(COINCIDENCE_NS));
    let with_logs = entries.iter_mut().filter(|e| e.events.is_some());
    for (e, n) in with_logs.zip(counts) {
        if let Some(a) = &mut e.attribution {
            a.coincident_gaps = n;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::keep_events_from;

    /// Issue 29: a loop held off longer than SETTLE has reported no gap yet; the events
    /// since its last run are kept, so that the switch that opened the window is there
    /// when the gap is.
    #[test]
    fn issue29_events_since_the_loop_last_ran_are_kept_while_no_gap_waits() {
        let (settled, hold) = (10_000, 5_000);
        assert_eq!(keep_events_from(None, 7_000, settled, hold), 7_000);
        // Never more than `hold` back.
        assert_eq!(keep_events_from(None, 1_000, settled, hold), 5_000);
        assert_eq!(keep_events_from(None, 0, 3_000, hold), 0);
        // A waiting gap needs its events from its start.
        assert_eq!(keep_events_from(Some(4_000), 7_000, settled, hold), 4_000);
        assert_eq!(
            keep_events_from(Some(12_000), 7_000, settled, hold),
            settled
        );
    }
}
