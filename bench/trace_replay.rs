//! The trace pipeline on a big host, replayed (issue 29): real trace pages recorded on
//! this host, played back for 1 to 192 CPUs at the event rates this host's and the
//! 16-CPU host's traces show, through the very code `noise --trace` runs (the reader's
//! page parsing and decoding, the windows, the lanes' attribution, the coincidence
//! count: `app::tracing::read_pass`), on one core or spread over several.
//!
//! `record FILE [--cpu N] [--seconds S]` (root, tracefs): a noise loop on CPU N (the last
//!   one) for S s (5) under a trace of it, as `noise -a N --trace` runs it; saves every
//!   raw page `trace_pipe_raw` handed over, the loop's gaps, and the event formats.
//! `replay FILE [--cpus 1,16,64,192] [--rates R,...|host|host16] [--seconds S]
//!   [--readers 1|auto] [--pin 0,1] [--host16 FIXTURE] [--fixed yes] [--dump FILE]`: for
//!   each CPU count and rate, every CPU replays the recording re-timed to that rate (its
//!   records written into new pages, its gaps scaled alike). Time is simulated: each
//!   reader's pass comes after it worked for the CPU time its last pass took and paused
//!   for the rest of a `PASS` (`tracing::pause_after`), as the real loop does, so a
//!   reader too slow for its CPUs falls behind; each CPU's buffer holds what the kernel's
//!   does (`BUFFER_KIB`), and the pages it cannot hold are lost as the kernel loses them
//!   (the next page says how many). `host` is the recording's own rate, `host*K` K times
//!   it, `gaps=N` N gaps a second (the events re-timed alike), `gaps=N@R` N gaps a
//!   second of R events each (gaps without events added: `gaps_rate`), `host16` the 16-CPU
//!   host's (its fixture's `events_read` per CPU over its run). `--fixed yes` ignores the readers' work on the simulated clock, so
//!   that each run reads alike; `--dump FILE` then writes every CPU's attribution, to
//!   diff two builds'.
//!
//! Prints per run: events and gaps a second offered, each reader's load (CPU time over
//! the time simulated), the events a second one core keeps up with (events over reader
//! CPU time), what was lost (events, per CPU; gaps left unattributed over a loss), and
//! private memory (the process's anonymous memory grown over the run, the stand-in kernel
//! buffers drained and the allocator's free memory given back: the readers' windows,
//! lanes and the gap queues). With `TRACE_REPLAY_HEAP=1` it also counts the readers'
//! heap apart from the stand-in kernel buffers' (`replay_heap`): their peak and their
//! end, per CPU.

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Barrier, Mutex};
use std::time::Duration;

use base64::Engine;
use serde::{Deserialize, Serialize};

use jitterscope::app::tracing::{self, LaneOut};
use jitterscope::engine::clock::{ClockInfo, Scale};
use jitterscope::engine::cpu::{CpuList, CpuPlan};
use jitterscope::engine::run::RunPlan;
use jitterscope::engine::sched::{self, SchedRequest};
use jitterscope::probes::noise::{self, NoiseConfig};
use jitterscope::stats::coincidence::Coincidence;
use jitterscope::stats::events::{Event, GapRing};
use jitterscope::trace::attribute::Throttle;
use jitterscope::trace::format::{PageLayout, parse_event_format};
use jitterscope::trace::reader::{Follower, PageQueue};
use jitterscope::trace::ring::{mark_missed, parse_page, write_pages};
use jitterscope::trace::session::TraceSession;
use jitterscope::trace::stream::{Lane, Reader};

mod replay_heap;
use replay_heap::Tag;

#[global_allocator]
static HEAP: replay_heap::Counting = replay_heap::Counting;

/// A recording, as saved.
#[derive(Serialize, Deserialize)]
struct Recording {
    schema: String,
    host: String,
    kernel: String,
    cpu: usize,
    seconds: f64,
    tsc_hz: f64,
    page_size: usize,
    header_page: String,
    /// ("system:event", its `format` file).
    formats: Vec<(String, String)>,
    /// Each page as read, base64.
    pages: Vec<String>,
    /// The loop's gaps: [start on the counter, interrupted ns].
    gaps: Vec<(u64, u64)>,
    /// The loop's shortest step, ticks; its thread id.
    loop_min: u64,
    tid: u32,
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let flag =
        |name: &str| (args.iter().position(|a| a == name)).and_then(|i| args.get(i + 1).cloned());
    let result = match (args.first().map(String::as_str), args.get(1)) {
        (Some("record"), Some(file)) => record(
            Path::new(file),
            flag("--cpu").and_then(|c| c.parse().ok()),
            flag("--seconds")
                .and_then(|s| s.parse().ok())
                .unwrap_or(5.0),
        ),
        (Some("replay"), Some(file)) => replay(Path::new(file), &flag),
        _ => Err(
            "usage: trace_replay record FILE [--cpu N] [--seconds S] | replay FILE \
                  [--cpus 1,16,64,192] [--rates host,host16] [--seconds S] [--readers 1|auto] \
                  [--pin 0,1] [--host16 FIXTURE]"
                .into(),
        ),
    };
    if let Err(e) = result {
        eprintln!("trace_replay: {e}");
        std::process::exit(2);
    }
}

// ---------------------------------------------------------------------------------------
// Recording

/// The pages read and the gaps handed over.
type Captured = (Vec<Vec<u8>>, Vec<(u64, u64)>);

fn record(file: &Path, cpu: Option<usize>, seconds: f64) -> Result<(), String> {
    let n = std::thread::available_parallelism().map_or(1, |n| n.get());
    let cpu = cpu.unwrap_or(n - 1);
    let hk = if cpu == 0 { 1 } else { 0 };
    let session = TraceSession::start(&CpuList::from_cpus(vec![cpu]), tracing::BUFFER_KIB)
        .map_err(|e| e.to_string())?;
    let formats: Vec<(String, String)> = (session.formats.iter())
        .filter_map(|f| {
            let (sys, ev) = f.name.split_once(':')?;
            let path = session.dir.join("events").join(sys).join(ev).join("format");
            Some((f.name.clone(), std::fs::read_to_string(path).ok()?))
        })
        .collect();
    let header_page =
        std::fs::read_to_string(session.root.join("events/header_page")).unwrap_or_default();
    let (clock, _) = ClockInfo::detect();
    let plan = RunPlan {
        cpus: CpuPlan {
            measured: CpuList::from_cpus(vec![cpu]),
            housekeeping: CpuList::from_cpus(vec![hk]),
        },
        sched: SchedRequest::OTHER,
        mlock: true,
        duration: Duration::from_secs_f64(seconds),
        priospread: false,
        setup_timeout: Duration::from_secs(10),
    };
    let ring = [GapRing::new(tracing::STREAM_GAPS)];
    let done = AtomicBool::new(false);
    let (run, got) = std::thread::scope(|s| {
        let reader = s.spawn(|| -> Result<Captured, String> {
            let _ = sched::pin_to(hk);
            let mut pipe = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(session.pipe(cpu))
                .map_err(|e| e.to_string())?;
            let (mut pages, mut gaps) = (Vec::new(), Vec::new());
            let mut page = vec![0u8; session.page_size];
            loop {
                let last = done.load(Ordering::Acquire);
                loop {
                    match pipe.read(&mut page) {
                        Ok(0) => break,
                        Ok(n) => pages.push(page[..n].to_vec()),
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                        Err(e) => return Err(e.to_string()),
                    }
                }
                ring[0].drain(|e: Event| gaps.push((e.start_ticks, e.duration_ns)));
                if last {
                    return Ok((pages, gaps));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        let cfg = NoiseConfig::default();
        let never = AtomicBool::new(false);
        let h = noise::Histograms::Omitted;
        let run = noise::run_streaming(&cfg, &plan, &clock, &never, h, &ring);
        session.stop_recording();
        done.store(true, Ordering::Release);
        (run, reader.join())
    });
    let run = run.map_err(|e| e.to_string())?;
    let (pages, gaps) = got.map_err(|_| "the reader panicked".to_string())??;
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let rec = Recording {
        schema: "jitterscope-trace-recording/1".into(),
        host: host.trim().into(),
        kernel: kernel.trim().into(),
        cpu,
        seconds,
        tsc_hz: clock.scale.hz(),
        page_size: session.page_size,
        header_page,
        formats,
        pages: (pages.iter())
            .map(|p| base64::engine::general_purpose::STANDARD.encode(p))
            .collect(),
        loop_min: ring[0].loop_min(),
        tid: ring[0].tid(),
        gaps,
    };
    let records: usize = (pages.iter())
        .map(|p| parse_page(p, &layout_of(&rec)).records.len())
        .sum();
    std::fs::write(file, serde_json::to_vec(&rec).map_err(|e| e.to_string())?)
        .map_err(|e| format!("{}: {e}", file.display()))?;
    let interruptions = run.entries.first().map_or(0, |e| e.interruptions);
    println!(
        "recorded CPU {cpu} for {seconds} s on {} ({}): {} pages, {records} events \
         ({:.0}/s), {} gaps ({:.0}/s; the loop counted {interruptions}) -> {}",
        rec.host,
        rec.kernel,
        pages.len(),
        records as f64 / seconds,
        rec.gaps.len(),
        rec.gaps.len() as f64 / seconds,
        file.display()
    );
    Ok(())
}

fn layout_of(rec: &Recording) -> PageLayout {
    PageLayout::parse(&rec.header_page).unwrap_or(PageLayout::DEFAULT)
}

// ---------------------------------------------------------------------------------------
// Replay

/// The recording decoded once: its records (stamp, payload) and gaps, in time order.
#[derive(Clone)]
struct Source {
    layout: PageLayout,
    page_size: usize,
    formats: Vec<jitterscope::trace::format::EventFormat>,
    records: Vec<(u64, Vec<u8>)>,
    gaps: Vec<(u64, u64)>,
    /// The recording's first and last stamp.
    span: (u64, u64),
    scale: Scale,
    loop_min: u64,
    tid: u32,
    /// Events a second, per CPU, as recorded.
    rate: f64,
}

fn load(file: &Path) -> Result<Source, String> {
    let text = std::fs::read(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let rec: Recording = serde_json::from_slice(&text).map_err(|e| e.to_string())?;
    let layout = layout_of(&rec);
    let formats = (rec.formats.iter())
        .filter_map(|(n, t)| parse_event_format(n, t))
        .collect();
    let mut records = Vec::new();
    for p in &rec.pages {
        let page = base64::engine::general_purpose::STANDARD
            .decode(p)
            .map_err(|e| e.to_string())?;
        let parsed = parse_page(&page, &layout);
        records.extend(parsed.records.iter().map(|r| (r.ts, r.data.to_vec())));
    }
    records.sort_by_key(|r| r.0);
    let first = (records.first().map(|r| r.0).into_iter())
        .chain(rec.gaps.first().map(|g| g.0))
        .min()
        .ok_or("an empty recording")?;
    let scale = Scale::from_hz(rec.tsc_hz);
    let last = (records.last().map(|r| r.0).into_iter())
        .chain(rec.gaps.last().map(|g| g.0 + scale.to_ticks(g.1)))
        .max()
        .unwrap_or(first);
    let secs = scale.to_ns(last - first) as f64 / 1e9;
    Ok(Source {
        layout,
        page_size: rec.page_size,
        formats,
        rate: records.len() as f64 / secs.max(1e-9),
        records,
        gaps: rec.gaps,
        span: (first, last),
        scale,
        loop_min: rec.loop_min,
        tid: rec.tid,
    })
}

/// One replayed CPU's feed: the recording re-timed by `stretch` and cycled, from `base`.
struct Feed {
    next_record: usize,
    next_gap: usize,
    cycle: u64,
    /// Events the kernel's buffer could not hold, since the last page read.
    missed: u64,
    lost: u64,
}

/// What one reader saw.
#[derive(Default)]
struct ReaderFigures {
    busy_ns: u64,
    elapsed_ns: u64,
    events: u64,
    gaps: u64,
    peak_held: usize,
    /// Its longest pass, and how many took longer than a pass's pause (ns of CPU time).
    longest_ns: u64,
    long_passes: u64,
    /// Events each of its CPUs lost (the buffer full).
    lost: Vec<u64>,
    /// The process's anonymous memory at its end, KiB.
    anon_kib: u64,
}

struct Plan<'a> {
    src: &'a Source,
    /// Recorded ticks per replayed tick (the rate's factor).
    speed: f64,
    seconds: f64,
    base: u64,
    /// Pages a CPU's buffer holds.
    buffer_pages: usize,
    /// Each CPU's share of the readers' memory, as `noise --trace` gives it.
    budget: jitterscope::trace::stream::Budget,
    /// The simulated clock ignores the readers' work (a run that reads the same each time).
    fixed: bool,
}

impl Plan<'_> {
    /// A recorded stamp on the replay's clock, in cycle `c`.
    fn at(&self, ts: u64, c: u64) -> u64 {
        let cycle = ((self.src.span.1 - self.src.span.0) as f64 / self.speed) as u64 + 1;
        self.base + c * cycle + ((ts - self.src.span.0) as f64 / self.speed) as u64
    }

    /// Writes what CPU `feed` made up to `now` into its buffer, and its gaps that ended by
    /// then into its ring.
    fn make(
        &self,
        feed: &mut Feed,
        q: &mut PageQueue,
        ring: &mut jitterscope::stats::events::GapProducer<'_>,
        now: u64,
    ) {
        let src = self.src;
        let mut batch: Vec<(u64, &[u8])> = Vec::new();
        // Cycle after cycle, each once its records and gaps are all out.
        loop {
            while let Some((ts, data)) = src.records.get(feed.next_record) {
                let t = self.at(*ts, feed.cycle);
                if t > now {
                    break;
                }
                batch.push((t, data));
                feed.next_record += 1;
            }
            while let Some(&(s, ns)) = src.gaps.get(feed.next_gap) {
                let start = self.at(s, feed.cycle);
                let ns = (ns as f64 / self.speed) as u64;
                if start + src.scale.to_ticks(ns) > now {
                    break;
                }
                ring.push(Event {
                    start_ticks: start,
                    duration_ns: ns,
                });
                feed.next_gap += 1;
            }
            if feed.next_record < src.records.len() || feed.next_gap < src.gaps.len() {
                break;
            }
            feed.cycle += 1;
            feed.next_record = 0;
            feed.next_gap = 0;
        }
        for mut p in write_pages(&batch, src.page_size, &src.layout) {
            if feed.missed > 0 {
                mark_missed(&mut p, &src.layout, feed.missed);
                feed.missed = 0;
            }
            q.pages.push_back(p);
        }
        while q.pages.len() > self.buffer_pages {
            // The kernel overwrites the oldest page; the next one read says so.
            if let Some(old) = q.pages.pop_front() {
                let n = parse_page(&old, &src.layout).records.len() as u64;
                feed.missed += n;
                feed.lost += n;
            }
            if let Some(front) = q.pages.front_mut() {
                mark_missed(front, &src.layout, feed.missed);
                feed.missed = 0;
            }
        }
    }
}

/// One reader's replay of `lanes` (their indices among all), pinned to `pin`.
fn read_share(
    plan: &Plan<'_>,
    lanes: std::ops::Range<usize>,
    pin: Option<usize>,
    coincidence: &Mutex<Coincidence>,
    end_of_run: &Measured,
) -> (Vec<LaneOut>, ReaderFigures) {
    if let Some(cpu) = pin {
        let _ = sched::pin_to(cpu);
    }
    replay_heap::set(Tag::Reader);
    let src = plan.src;
    let n = lanes.len();
    let sources: Vec<(usize, PageQueue)> =
        lanes.clone().map(|i| (i, PageQueue::default())).collect();
    let follower = Follower::from_sources(
        sources,
        src.page_size,
        src.layout,
        &src.formats,
        plan.budget.window_events,
    );
    let ls = lanes
        .clone()
        .map(|i| {
            let mut l = Lane::noise(i, Throttle::default());
            l.bound(plan.budget);
            l
        })
        .collect();
    let mut reader = Reader::new(follower, ls);
    let rings: Vec<GapRing> = (0..n).map(|_| GapRing::new(tracing::STREAM_GAPS)).collect();
    let loop_min = (src.loop_min as f64 / plan.speed) as u64;
    let mut producers: Vec<_> = rings
        .iter()
        .map(|r| r.producer(src.tid, loop_min))
        .collect();
    let mut feeds: Vec<Feed> = (0..n)
        .map(|_| Feed {
            next_record: 0,
            next_gap: 0,
            cycle: 0,
            missed: 0,
            lost: 0,
        })
        .collect();
    let scale = src.scale;
    let end = plan.base + scale.to_ticks((plan.seconds * 1e9) as u64);
    let mut now = plan.base;
    let mut f = ReaderFigures::default();
    loop {
        let last = now >= end;
        for ((feed, q), p) in feeds
            .iter_mut()
            .zip(reader.follower.sources_mut())
            .zip(&mut producers)
        {
            replay_heap::set(Tag::Feed);
            plan.make(feed, q, p, now);
            replay_heap::set(Tag::Reader);
        }
        let cpu0 = thread_cpu_ns();
        tracing::read_pass(
            &mut reader,
            &rings,
            lanes.start,
            Some(coincidence),
            scale,
            now,
            last,
        )
        .expect("an in-memory read");
        let busy = thread_cpu_ns() - cpu0;
        f.busy_ns += busy;
        f.peak_held = f.peak_held.max(reader.held());
        f.longest_ns = f.longest_ns.max(busy);
        f.long_passes += u64::from(tracing::pause_after(Duration::from_nanos(busy)).is_zero());
        if last {
            f.elapsed_ns = scale.to_ns(now - plan.base) + busy;
            break;
        }
        // The real reader pauses for the rest of a pass after working; with `--fixed`
        // as if its work took no time, so that every run reads the same (`--dump`).
        let took = if plan.fixed { 0 } else { busy };
        let pause = tracing::pause_after(Duration::from_nanos(took)).as_nanos() as u64;
        now += scale.to_ticks(took + pause);
    }
    f.events = reader.follower.windows.iter().map(|w| w.read).sum();
    f.gaps = reader.lanes.iter().map(|l| l.offered).sum();
    f.lost = feeds.iter().map(|f| f.lost).collect();
    // The stand-in kernel buffers are drained, and their queues given back: what is
    // held now is the reader's.
    drop(feeds);
    for q in reader.follower.sources_mut() {
        q.pages = Default::default();
    }
    f.anon_kib = end_of_run.private_kib();
    (tracing::lane_outs(reader, &rings), f)
}

/// The private memory at the run's end, read once: after every reader has drained its
/// stand-in kernel buffers and while all still hold their windows and lanes. A reader
/// that read it alone, at its own end, counted the buffers of readers still running
/// (two readers of 192 CPUs read 113–471 MB so, against 64 MB held).
struct Measured {
    readers: Barrier,
    kib: AtomicU64,
}

impl Measured {
    fn new(readers: usize) -> Self {
        Measured {
            readers: Barrier::new(readers),
            kib: AtomicU64::new(0),
        }
    }

    /// Waits for every reader, reads once, and gives each the figure.
    fn private_kib(&self) -> u64 {
        if self.readers.wait().is_leader() {
            trim();
            self.kib.store(private_kib(), Ordering::Relaxed);
        }
        self.readers.wait();
        self.kib.load(Ordering::Relaxed)
    }
}

fn thread_cpu_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// The process's anonymous memory, KiB (what it holds privately; tests/memory.rs says why).
fn private_kib() -> u64 {
    let text = std::fs::read_to_string("/proc/self/smaps_rollup").unwrap_or_default();
    (text.lines())
        .find_map(|l| {
            l.strip_prefix("Anonymous:")?
                .trim()
                .strip_suffix("kB")?
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

/// The 16-CPU host's events a second per CPU, from its traced fixture.
fn host16_rate(fixture: &Path) -> Result<f64, String> {
    let f = std::fs::File::open(fixture).map_err(|e| format!("{}: {e}", fixture.display()))?;
    let v: serde_json::Value =
        serde_json::from_reader(flate2::read::GzDecoder::new(f)).map_err(|e| e.to_string())?;
    let probes = v["probes"].as_array().ok_or("no probes")?;
    let per_cpu: Vec<f64> = (probes.iter())
        .filter_map(|p| {
            let read = p["attribution"]["events_read"].as_f64()?;
            Some(read / (p["runtime_ns"].as_f64()? / 1e9))
        })
        .collect();
    if per_cpu.is_empty() {
        return Err("the fixture has no traced CPU".into());
    }
    Ok(per_cpu.iter().sum::<f64>() / per_cpu.len() as f64)
}

fn replay(file: &Path, flag: &dyn Fn(&str) -> Option<String>) -> Result<(), String> {
    let src = load(file)?;
    let list = |s: String| -> Vec<String> { s.split(',').map(str::to_string).collect() };
    let cpus: Vec<usize> = list(flag("--cpus").unwrap_or("1,16,64,192".into()))
        .iter()
        .filter_map(|c| c.parse().ok())
        .collect();
    let seconds: f64 = flag("--seconds")
        .and_then(|s| s.parse().ok())
        .unwrap_or(10.0);
    let fixture =
        flag("--host16").unwrap_or("tests/fixtures/host16/noise-traced-15cpu.json.gz".into());
    let pins: Vec<usize> = list(flag("--pin").unwrap_or("0".into()))
        .iter()
        .filter_map(|c| c.parse().ok())
        .collect();
    let readers = flag("--readers").unwrap_or("1".into());
    let opts = Opts {
        fixed: flag("--fixed").is_some_and(|f| f == "yes"),
        dump: flag("--dump").map(Into::into),
    };
    if let Some(d) = &opts.dump {
        std::fs::write(d, "").map_err(|e| format!("{}: {e}", d.display()))?;
    }
    let recorded_gaps =
        src.gaps.len() as f64 / (src.scale.to_ns(src.span.1 - src.span.0) as f64 / 1e9);
    println!(
        "recording: {} events, {} gaps over {:.2} s: {:.0} events/s and {:.0} gaps/s on one CPU",
        src.records.len(),
        src.gaps.len(),
        src.scale.to_ns(src.span.1 - src.span.0) as f64 / 1e9,
        src.rate,
        recorded_gaps
    );
    let mut rates = Vec::new();
    for r in list(flag("--rates").unwrap_or("host,host16".into())) {
        rates.push(match r.as_str() {
            "host" => ("this host", src.rate, 0.0),
            "host16" => ("16-CPU host", host16_rate(Path::new(&fixture))?, 0.0),
            x => match x.strip_prefix("host*").map(str::parse::<f64>) {
                Some(Ok(k)) => ("given", k * src.rate, 0.0),
                _ if x.starts_with("gaps=") => gaps_rate(x, src.rate, recorded_gaps)?,
                _ => (
                    "given",
                    x.parse::<f64>().map_err(|_| {
                        format!("--rates {x}: a number, host, host*K, gaps=N[@R] or host16")
                    })?,
                    0.0,
                ),
            },
        });
    }
    println!(
        "{seconds} s simulated per run; a reader pass every 20 ms after its work; {} KiB of \
         kernel buffer per CPU; readers pinned to CPUs {pins:?}",
        tracing::BUFFER_KIB
    );
    println!(
        "{:>5} {:>12} {:>7} {:>10} {:>9} {:>9} {:>13} {:>11} {:>18} {:>9} {:>10} {:>8}",
        "CPUs",
        "rate",
        "readers",
        "events/s",
        "gaps/s",
        "load",
        "events/s/core",
        "lost ev",
        "lost on CPUs",
        "unattr",
        "memory",
        "per CPU"
    );
    for &(what, rate, filler) in &rates {
        // Event-less gaps added, in the recording's own time (a replayed second is
        // `speed` recorded ones).
        let added = (filler > 0.0).then(|| src.with_filler(filler * src.rate / rate));
        let src = match &added {
            Some(a) => a.as_ref()?,
            None => &src,
        };
        for &n in &cpus {
            let groups = match readers.as_str() {
                "auto" => tracing::reader_groups(n, pins.len()),
                k => {
                    let k: usize = k.parse().map_err(|_| "--readers: 1, 2, … or auto")?;
                    let per = n.div_ceil(k.max(1));
                    (0..n)
                        .step_by(per.max(1))
                        .map(|a| a..(a + per).min(n))
                        .collect()
                }
            };
            run_one(src, n, (what, rate), seconds, &groups, &pins, &opts);
        }
    }
    Ok(())
}

/// `gaps=N`: N gaps a second, the events re-timed alike. `gaps=N@R`: N gaps a second
/// with R events a gap, as a host whose gaps are mostly the hypervisor's has them (the
/// issue-35 host: 932 events and 2 264 gaps a second, 0.41): the events re-timed to N×R a
/// second, and the gaps the recording lacks at that rate added without events. Gives
/// (label, events a second, event-less gaps a second added).
fn gaps_rate(x: &str, events: f64, gaps: f64) -> Result<(&'static str, f64, f64), String> {
    let bad = || format!("--rates {x}: gaps=N or gaps=N@R (R events a gap)");
    let (n, r) = match x[5..].split_once('@') {
        Some((n, r)) => (n, Some(r)),
        None => (&x[5..], None),
    };
    let n: f64 = n.parse().map_err(|_| bad())?;
    let Some(r) = r else {
        return Ok(("given", n * events / gaps, 0.0));
    };
    let r: f64 = r.parse().map_err(|_| bad())?;
    let rate = n * r;
    // The recording's own gaps, re-timed to that event rate.
    let own = gaps * rate / events;
    if !(r > 0.0 && n > 0.0) || own > n {
        return Err(format!(
            "--rates {x}: the recording has {:.2} events a gap; it can be given fewer \
             events a gap (gaps added without events), not more",
            events / gaps
        ));
    }
    Ok(("given", rate, n - own))
}

impl Source {
    /// The recording with `per_s` gaps a second (of its own time) added where no event
    /// and no recorded gap falls, each as long as one of the recorded gaps that holds no
    /// event (cycled): what a vCPU stopped by its hypervisor shows the loop.
    fn with_filler(&self, per_s: f64) -> Result<Source, String> {
        let ticks = |ns: u64| self.scale.to_ticks(ns);
        // The first event stamped in [t, t + d], if any.
        let holds_event = |t: u64, d: u64| {
            let i = self.records.partition_point(|r| r.0 < t);
            self.records.get(i).map(|r| r.0).filter(|&s| s <= t + d)
        };
        let span = self.span.1 - self.span.0;
        let n = (per_s * self.scale.to_ns(span) as f64 / 1e9) as u64;
        let step = span / n.max(1);
        // Those short enough to find room in their step: the hypervisor's blips, not
        // its long stops.
        let lens: Vec<u64> = (self.gaps.iter())
            .filter(|g| ticks(g.1) <= step / 4 && holds_event(g.0, ticks(g.1)).is_none())
            .map(|g| g.1)
            .collect();
        if lens.is_empty() {
            return Err("the recording has no gap without events short enough to copy".into());
        }
        let mut gaps = self.gaps.clone();
        let mut no_room = 0;
        for k in 0..n {
            let len = lens[k as usize % lens.len()];
            let d = ticks(len);
            let (mut t, limit) = (self.span.0 + k * step, self.span.0 + (k + 1) * step);
            loop {
                if t + d >= limit {
                    no_room += 1;
                    break;
                }
                if let Some(s) = holds_event(t, d) {
                    t = s + 1;
                    continue;
                }
                // The recorded gaps are in time order and apart.
                let j = self.gaps.partition_point(|g| g.0 + ticks(g.1) < t);
                match self.gaps.get(j) {
                    Some(g) if g.0 <= t + d => t = g.0 + ticks(g.1) + 1,
                    _ => {
                        gaps.push((t, len));
                        break;
                    }
                }
            }
        }
        gaps.sort_unstable();
        println!(
            "added {} gaps without events, each as long as one of the {} of {} recorded gaps \
             that hold none and are at most {} ns ({no_room} found no room)",
            n - no_room,
            lens.len(),
            self.gaps.len(),
            self.scale.to_ns(step / 4)
        );
        Ok(Source {
            gaps,
            ..self.clone()
        })
    }
}

/// Appends each CPU's attribution, whole but for the reader's budget, to `file`: what
/// two builds must attribute alike (`--fixed yes`).
fn dump(file: &Path, run: &str, outs: Vec<LaneOut>, scale: Scale) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(file)
        .expect("the dump");
    for o in outs {
        let mut a = o.attribution(scale, 0);
        a.reader_budget = None;
        let line = serde_json::to_string(&a).expect("json");
        writeln!(f, "{run}: {line}").expect("the dump");
    }
}

/// Gives the allocator's free memory back, so that the process's anonymous memory is
/// what is in use (the stand-in kernel buffers are the bench's, not the reader's).
fn trim() {
    // SAFETY: malloc_trim only releases free memory of the allocator.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// How a replay runs: `--fixed` and `--dump FILE`.
struct Opts {
    fixed: bool,
    dump: Option<std::path::PathBuf>,
}

fn run_one(
    src: &Source,
    n: usize,
    (what, rate): (&str, f64),
    seconds: f64,
    groups: &[std::ops::Range<usize>],
    pins: &[usize],
    opts: &Opts,
) {
    trim();
    let before = private_kib();
    replay_heap::reset_peak(Tag::Reader);
    replay_heap::reset_peak(Tag::Feed);
    let heap_before = replay_heap::live(Tag::Reader);
    let plan = Plan {
        src,
        speed: rate / src.rate,
        seconds,
        base: 1 << 40,
        buffer_pages: (tracing::BUFFER_KIB as usize * 1024) / src.page_size,
        budget: tracing::budget(n),
        fixed: opts.fixed,
    };
    let scale = src.scale;
    let coincidence = Mutex::new(tracing::coincidence(n, scale));
    let measured = Measured::new(groups.len());
    let results: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (groups.iter().enumerate())
            .map(|(k, g)| {
                let pin = (!pins.is_empty()).then(|| pins[k % pins.len()]);
                let (plan, coincidence, measured) = (&plan, &coincidence, &measured);
                s.spawn(move || read_share(plan, g.clone(), pin, coincidence, measured))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a reader"))
            .collect()
    });
    let mut outs: Vec<LaneOut> = Vec::new();
    let (mut busy, mut events, mut gaps, mut load, mut anon) = (0u64, 0u64, 0u64, 0f64, 0u64);
    let (mut lost_per_cpu, mut held) = (Vec::new(), 0);
    let (mut longest, mut long_passes) = (0u64, 0u64);
    let mut elapsed = 0u64;
    for (o, f) in results {
        anon = anon.max(f.anon_kib);
        lost_per_cpu.extend(f.lost);
        held += f.peak_held;
        longest = longest.max(f.longest_ns);
        long_passes += f.long_passes;
        outs.extend(o);
        busy += f.busy_ns;
        events += f.events;
        gaps += f.gaps;
        elapsed = elapsed.max(f.elapsed_ns);
        load = load.max(f.busy_ns as f64 / f.elapsed_ns.max(1) as f64);
    }
    // Lost: what the kernel's buffer could not hold, and what the window pushed out.
    for (l, o) in lost_per_cpu.iter_mut().zip(&outs) {
        *l += o.lost;
    }
    // Why gaps went unattributed: over lost events, past a lane's waiting gaps (shed),
    // past a whole gap queue (dropped).
    let sum = |f: fn(&tracing::LaneOut) -> u64| outs.iter().map(f).sum::<u64>();
    let why = (
        sum(|o| o.lane.in_lost_spans),
        sum(|o| o.lane.shed),
        sum(|o| o.dropped),
    );
    let unattributed = why.0 + why.1 + why.2;
    let coincident = coincidence
        .into_inner()
        .map(|c| c.finish().per_lane)
        .unwrap_or_default();
    let lost: u64 = lost_per_cpu.iter().sum();
    let lossy = lost_per_cpu.iter().filter(|&&l| l > 0).count();
    let secs = elapsed as f64 / 1e9;
    println!(
        "{:>5} {:>12} {:>7} {:>10.0} {:>9.0} {:>8.1}% {:>13.0} {:>11} {:>18} {:>9} {:>6} KiB {:>4} KiB",
        n,
        format!(
            "{rate:.0} ({})",
            if what == "this host" {
                "here"
            } else if what == "16-CPU host" {
                "host16"
            } else {
                "given"
            }
        ),
        groups.len(),
        events as f64 / secs,
        gaps as f64 / secs,
        100.0 * load,
        events as f64 / (busy as f64 / 1e9).max(1e-9),
        lost,
        format!(
            "{lossy} of {n} (max {})",
            lost_per_cpu.iter().max().unwrap_or(&0)
        ),
        unattributed,
        anon.saturating_sub(before),
        anon.saturating_sub(before) / n as u64,
    );
    if lossy > 0 {
        let each: Vec<String> = (lost_per_cpu.iter().enumerate())
            .filter(|(_, l)| **l > 0)
            .take(8)
            .map(|(i, l)| format!("CPU {i}: {l}"))
            .collect();
        println!(
            "      lost per CPU: {}{}",
            each.join(", "),
            if lossy > 8 { ", …" } else { "" }
        );
    }
    if replay_heap::on() {
        let (peak, end) = (
            replay_heap::peak(Tag::Reader).saturating_sub(heap_before),
            replay_heap::live(Tag::Reader).saturating_sub(heap_before),
        );
        println!(
            "      heap: the readers' {} KiB at their peak ({} KiB a CPU), {} KiB at the end \
             ({} KiB a CPU); the stand-in kernel buffers' {} KiB at their peak",
            peak >> 10,
            (peak / n) >> 10,
            end >> 10,
            (end / n) >> 10,
            replay_heap::peak(Tag::Feed) >> 10
        );
    }
    let attributed: u64 = outs.iter().map(|o| o.lane.attributed()).sum();
    if let Some(d) = &opts.dump {
        dump(d, &format!("{n} CPUs at {rate:.0}"), outs, scale);
        return;
    }
    let c: u64 = coincident.iter().sum();
    let rings = n * tracing::STREAM_GAPS * 16 / 1024;
    println!(
        "      {attributed} gaps attributed, {unattributed} unattributed ({} over a loss, {} \
         past the gaps a lane holds waiting, {} past a full queue), {c} coincident; at most \
         {held} events held in the windows; the longest pass {:.1} ms, {long_passes} passes \
         with no pause; memory: {rings} KiB of it the gap queues (16 B a slot)",
        why.0,
        why.1,
        why.2,
        longest as f64 / 1e6
    );
}
