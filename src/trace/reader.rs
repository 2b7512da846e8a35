//! Drains each traced CPU's `trace_pipe_raw` while the run goes on, from a thread the
//! caller pins to the housekeeping CPU, so that nothing is overwritten on long runs and
//! no reading happens on a measured CPU. Pages are parsed and decoded as they come.
//!
//! Memory is bounded: at most `MAX_EVENTS_PER_CPU` events are kept per CPU (40 bytes
//! each, about 40 MB at most); later ones are counted as lost, as are events the kernel
//! overwrote before they were read.
//!
//! A run that attributes as it goes (`noise --trace`, `timer --trace`, `monitor --trace`,
//! `watch`) follows the trace instead (`Follower`): each pass drains the buffers into a
//! sliding window per CPU, bounded by count, from which the caller forgets what no
//! waiting gap needs; an event pushed out by the bound before that is counted as lost.
//! Each window also keeps the spans of time whose events were lost (a page the kernel
//! flagged, an event pushed out), so that no gap overlapping one is named by the events
//! around the hole. A follower reads any `Read` that hands over one page per read: the
//! kernel's `trace_pipe_raw`, or recorded pages replayed (`bench/trace_replay.rs`).

use std::collections::{BTreeMap, VecDeque};
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::event::{Decoder, Event};
use super::format::PageLayout;
use super::ring::parse_page;
use super::session::{TraceError, TraceSession};

/// The most events kept per CPU.
pub const MAX_EVENTS_PER_CPU: usize = 1_000_000;
/// How long the reader sleeps between passes over the buffers.
const PASS: Duration = Duration::from_millis(20);

/// Everything read: the events of each CPU in time order, and what was lost.
#[derive(Debug, Default)]
pub struct Collected {
    pub per_cpu: BTreeMap<usize, Vec<Event>>,
    pub decoder: Decoder,
    /// Per CPU, events lost: overwritten by the kernel, flagged on a page, or beyond
    /// the bound; and events read.
    pub lost: BTreeMap<usize, u64>,
    pub read: BTreeMap<usize, u64>,
    /// Pages cut short by a malformed record.
    pub malformed_pages: u64,
}

/// Each traced CPU's `trace_pipe_raw`, opened not to block.
fn open_pipes(session: &TraceSession) -> Result<Vec<(usize, File)>, TraceError> {
    let mut pipes = Vec::new();
    for &cpu in session.cpus.cpus() {
        let path = session.pipe(cpu);
        let f = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&path)
            .map_err(|source| TraceError::Io { path, source })?;
        pipes.push((cpu, f));
    }
    Ok(pipes)
}

/// Reads until `stop`, then stops recording and drains what is left.
pub fn collect(session: &TraceSession, stop: &AtomicBool) -> Result<Collected, TraceError> {
    let mut pipes = open_pipes(session)?;
    let mut out = Collected {
        decoder: Decoder::new(&session.formats),
        ..Collected::default()
    };
    let mut page = vec![0u8; session.page_size];
    loop {
        let last = stop.load(Ordering::Relaxed);
        if last {
            session.stop_recording();
        }
        for (cpu, f) in &mut pipes {
            drain(*cpu, f, &mut page, session, &mut out)?;
        }
        if last {
            break;
        }
        std::thread::sleep(PASS);
    }
    drop(pipes);
    for &c in session.cpus.cpus() {
        *out.lost.entry(c).or_default() += session.lost(c);
    }
    Ok(out)
}

/// What draining one CPU's pages counted.
#[derive(Debug, Default, Clone, Copy)]
struct Drained {
    /// Records read, and events the pages said were lost before them.
    read: u64,
    missed: u64,
    malformed_pages: u64,
    /// Pages were left unread.
    stopped: bool,
}

/// What a page hands over: an event, or the stamp of the first record after events the
/// kernel lost (the page's own stamp when it holds none).
pub enum Item {
    Event(Event),
    LostBefore(u64),
}

/// Reads one CPU's pages until none is ready, handing each decoded event to `keep`, and
/// reading a page only while `more` says so: the rest stays in the kernel's buffer
/// (`Drained::stopped`). A read that fails otherwise than "nothing ready" (the instance
/// removed under us, an I/O error) is an error: a trace that stops must not look like a
/// quiet CPU.
fn drain_into(
    f: &mut impl Read,
    page: &mut [u8],
    layout: &PageLayout,
    decoder: &mut Decoder,
    keep: &mut dyn FnMut(Item),
    more: &mut dyn FnMut() -> bool,
) -> std::io::Result<Drained> {
    use std::io::ErrorKind::{Interrupted, WouldBlock};
    let mut d = Drained::default();
    loop {
        if !more() {
            d.stopped = true;
            return Ok(d);
        }
        let n = match f.read(page) {
            Ok(0) => return Ok(d),
            Err(e) if matches!(e.kind(), WouldBlock | Interrupted) => return Ok(d),
            Err(e) => return Err(e),
            Ok(n) => n,
        };
        let parsed = parse_page(&page[..n], layout);
        if parsed.missed.is_some() {
            let page_ts = super::format::read_u64(page, layout.timestamp_offset, 8);
            let first = parsed.records.first().map(|r| r.ts).or(page_ts);
            keep(Item::LostBefore(first.unwrap_or(u64::MAX)));
        }
        d.missed += parsed.missed.unwrap_or(0);
        d.malformed_pages += u64::from(parsed.malformed);
        d.read += parsed.records.len() as u64;
        for r in parsed.records {
            if let Some(e) = decoder.decode(r.ts, r.data) {
                keep(Item::Event(e));
            }
        }
    }
}

/// Reads one CPU's pages until none is ready.
fn drain(
    cpu: usize,
    f: &mut File,
    page: &mut [u8],
    s: &TraceSession,
    out: &mut Collected,
) -> Result<(), TraceError> {
    let events = out.per_cpu.entry(cpu).or_default();
    let mut beyond = 0u64;
    let mut keep = |i| match i {
        Item::LostBefore(_) => {}
        Item::Event(_) if events.len() >= MAX_EVENTS_PER_CPU => beyond += 1,
        Item::Event(e) => events.push(e),
    };
    let d = drain_into(f, page, &s.layout, &mut out.decoder, &mut keep, &mut || {
        true
    })
    .map_err(|source| TraceError::Io {
        path: s.pipe(cpu),
        source,
    })?;
    *out.lost.entry(cpu).or_default() += d.missed + beyond;
    out.malformed_pages += d.malformed_pages;
    *out.read.entry(cpu).or_default() += d.read;
    Ok(())
}

/// One CPU's most recent events, in time order, at most `cap` of them, and the spans of
/// time whose events were lost.
///
/// The events are one `Vec` whose front is forgotten by moving `head`, not by moving the
/// events, so attribution reads them as one slice as they stand. A ring (`VecDeque`) had
/// to be made one slice each pass, moving the whole window once it wrapped: a fifth of a
/// 192-CPU replay's time (issue 35). The forgotten front is dropped once it is as long as
/// what is held, so each event is moved about once.
#[derive(Debug)]
pub struct EventWindow {
    pub cpu: usize,
    events: Vec<Event>,
    /// Events before this index were forgotten or pushed out.
    head: usize,
    cap: usize,
    min_cap: usize,
    /// Records read from this CPU's buffer.
    pub read: u64,
    /// Events pushed out by the bound before the caller forgot them: lost to it.
    pub evicted: u64,
    /// Events the buffer's pages said the kernel lost before them.
    pub missed: u64,
    /// [from, to] on the trace clock, oldest first: some events in them were lost.
    lost: VecDeque<(u64, u64)>,
    /// The newest event's stamp.
    last_ts: u64,
    /// Events before this were forgotten or pushed out.
    forgotten_to: u64,
}

impl EventWindow {
    /// An empty window; it grows as events come, up to `cap`.
    pub fn new(cpu: usize, cap: usize) -> EventWindow {
        EventWindow {
            cpu,
            events: Vec::new(),
            head: 0,
            cap: cap.max(1),
            min_cap: cap.max(1),
            read: 0,
            evicted: 0,
            missed: 0,
            lost: VecDeque::new(),
            last_ts: 0,
            forgotten_to: 0,
        }
    }

    /// Adds the newest event. A full window first pushes out its oldest sixteenth: their
    /// time, since the last one forgotten, is then a span with events lost. A sixteenth,
    /// not one: the room it leaves is made by moving what is held, once for that many
    /// events rather than once for each.
    pub fn push(&mut self, e: Event) {
        if self.len() >= self.cap {
            self.evict(self.cap.div_ceil(16));
        }
        if self.events.len() == self.events.capacity() {
            self.make_room();
        }
        self.last_ts = self.last_ts.max(e.ts);
        self.events.push(e);
    }

    /// Room for one more event in at most `cap` slots, forgotten front included: grown
    /// while below `cap` and the forgotten front is shorter than what is held (forgetting
    /// drops it once it is as long), else the front dropped. Grown by hand: doubling would
    /// take a full window's memory to the next power of two, past its share of the budget.
    fn make_room(&mut self) {
        let len = self.events.len();
        let grow = len.max(16).min(self.cap.saturating_sub(len));
        if self.head > 0 && (self.head >= self.len() || grow == 0) {
            self.compact();
        } else {
            self.events.reserve_exact(grow.max(1));
        }
    }

    /// Drops the forgotten front, moving what is held to the start.
    fn compact(&mut self) {
        self.events.drain(..self.head);
        self.head = 0;
    }

    /// Pushes the oldest `n` events out: lost to the caller, their time since the last
    /// one forgotten a span with events lost.
    fn evict(&mut self, n: usize) {
        let n = n.min(self.len());
        if n == 0 {
            return;
        }
        let newest_out = self.events[self.head + n - 1].ts;
        self.head += n;
        self.evicted += n as u64;
        self.lose(self.forgotten_to, newest_out);
        self.forgotten_to = self.forgotten_to.max(newest_out);
    }

    /// The most events it holds.
    pub fn cap(&self) -> usize {
        self.cap
    }

    /// The fewest events it could hold at any time of the run.
    pub fn min_cap(&self) -> usize {
        self.min_cap
    }

    /// Holds at most `cap` events from now on (issue 35: a lane's tally grows into its
    /// window's share): past it the oldest are pushed out, lost, and the memory given
    /// back.
    pub fn set_cap(&mut self, cap: usize) {
        self.cap = cap.max(1);
        self.min_cap = self.min_cap.min(self.cap);
        self.evict(self.len().saturating_sub(self.cap));
        if self.events.capacity() > self.cap {
            self.compact();
            self.events.shrink_to(self.cap);
        }
    }

    /// The bytes its events take now (capacity, not length: what it holds from the
    /// allocator).
    pub fn bytes(&self) -> usize {
        self.events.capacity() * std::mem::size_of::<Event>()
    }

    /// The kernel lost events between the newest one held and `before`.
    pub fn lost_before(&mut self, before: u64) {
        self.lose(self.last_ts, before.max(self.last_ts));
    }

    fn lose(&mut self, from: u64, to: u64) {
        match self.lost.back_mut() {
            Some(last) if last.1 >= from => last.1 = last.1.max(to),
            _ => self.lost.push_back((from, to)),
        }
    }

    /// Whether events were lost anywhere in [start, end] (a gap's span).
    pub fn lost_within(&self, start: u64, end: u64) -> bool {
        self.lost
            .iter()
            .any(|&(from, to)| from <= end && to >= start)
    }

    /// Forgets the events stamped before `ts`, and the losses that ended before it. The
    /// memory a burst took is given back once the window is a quarter full.
    pub fn forget_before(&mut self, ts: u64) {
        self.head += self.events().partition_point(|e| e.ts < ts);
        self.forgot(ts);
    }

    /// The events stamped before `ts`, oldest first: for a caller that walks each event
    /// once (`watch`), then forgets them.
    pub fn before(&self, ts: u64) -> &[Event] {
        let events = self.events();
        &events[..events.partition_point(|e| e.ts < ts)]
    }

    fn forgot(&mut self, ts: u64) {
        self.forgotten_to = self.forgotten_to.max(ts);
        while self.lost.front().is_some_and(|l| l.1 < ts) {
            self.lost.pop_front();
        }
        if self.head >= self.len() {
            self.compact();
        }
        if self.events.capacity() > 4 * self.events.len().max(1024) {
            self.events.shrink_to(2 * self.events.len().max(1024));
        }
    }

    /// The newest event's stamp: every event before it has been read.
    pub fn newest_ts(&self) -> u64 {
        self.last_ts
    }

    /// Events stamped before this were forgotten or pushed out: a gap that began before
    /// it lacks some of its events.
    pub fn forgotten_to(&self) -> u64 {
        self.forgotten_to
    }

    /// The events held, oldest first, as one slice.
    pub fn events(&self) -> &[Event] {
        &self.events[self.head..]
    }

    fn events_mut(&mut self) -> &mut [Event] {
        &mut self.events[self.head..]
    }

    pub fn len(&self) -> usize {
        self.events.len() - self.head
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Pages waiting to be read, one a read, as `trace_pipe_raw` hands them over ("nothing
/// ready" when empty): recorded pages replayed (`bench/trace_replay.rs`), and tests.
#[derive(Debug, Default)]
pub struct PageQueue {
    pub pages: VecDeque<Vec<u8>>,
}

impl Read for PageQueue {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let Some(p) = self.pages.pop_front() else {
            return Err(std::io::ErrorKind::WouldBlock.into());
        };
        let n = p.len().min(buf.len());
        buf[..n].copy_from_slice(&p[..n]);
        Ok(n)
    }
}

/// Interned names a follower keeps before it starts afresh: task names are interned as
/// they come, and a host that names its threads by a counter (or a build, whose
/// compiler threads are named by a hash) would make them grow for as long as it runs.
/// Starting afresh keeps the names the held events use.
pub const MAX_NAMES: usize = 50_000;

/// Follows a trace for as long as it runs: each `pass` drains what the kernel holds into
/// the windows (one per traced CPU, in the session's order). Read from one thread, which
/// the caller keeps off the measured CPUs.
#[derive(Debug)]
pub struct Follower<R = File> {
    pipes: Vec<(usize, R)>,
    page: Vec<u8>,
    layout: PageLayout,
    formats: Vec<super::format::EventFormat>,
    pub decoder: Decoder,
    pub windows: Vec<EventWindow>,
    /// Pages cut short by a malformed record.
    pub malformed_pages: u64,
    /// Interned names held before starting afresh.
    max_names: usize,
    /// Per window: the last pass left pages in its buffer (`pass_within`).
    pub behind: Vec<bool>,
    /// The kernel functions its events have named (work, hrtimer callbacks, cross-CPU
    /// calls), and those first seen since the caller last took them: found as each
    /// event is read, where a walk over a pass's events afterwards (out of the cache
    /// by then) was a twentieth of a 192-CPU replay's time (issue 35).
    functions: rustc_hash::FxHashSet<u64>,
    pub new_functions: Vec<u64>,
}

impl Follower {
    /// Opens the session's buffers; each window keeps at most `cap` events.
    pub fn open(session: &TraceSession, cap: usize) -> Result<Follower, TraceError> {
        Self::open_cpus(session, session.cpus.cpus(), cap)
    }

    /// Opens the buffers of `cpus` (of the session's), for one of several readers.
    pub fn open_cpus(
        session: &TraceSession,
        cpus: &[usize],
        cap: usize,
    ) -> Result<Follower, TraceError> {
        let mut pipes = open_pipes(session)?;
        pipes.retain(|(c, _)| cpus.contains(c));
        Ok(Follower::from_sources(
            pipes,
            session.page_size,
            session.layout,
            &session.formats,
            cap,
        ))
    }
}

impl<R: Read> Follower<R> {
    /// Follows `sources` (a CPU and what reads its pages, one page a read), pages of
    /// `page_size` laid out as `layout`, with events of `formats`.
    pub fn from_sources(
        sources: Vec<(usize, R)>,
        page_size: usize,
        layout: PageLayout,
        formats: &[super::format::EventFormat],
        cap: usize,
    ) -> Follower<R> {
        let n = sources.len();
        Follower {
            windows: (sources.iter())
                .map(|(c, _)| EventWindow::new(*c, cap))
                .collect(),
            pipes: sources,
            page: vec![0u8; page_size],
            layout,
            formats: formats.to_vec(),
            decoder: Decoder::new(formats),
            malformed_pages: 0,
            max_names: MAX_NAMES,
            behind: vec![false; n],
            functions: Default::default(),
            new_functions: Vec::new(),
        }
    }

    /// Starts afresh past `n` interned names rather than [`MAX_NAMES`] (a reader that
    /// holds a fraction of a second of events keeps few).
    pub fn set_max_names(&mut self, n: usize) {
        self.max_names = n;
    }

    /// The sources, to feed them (a replay).
    pub fn sources_mut(&mut self) -> impl Iterator<Item = &mut R> {
        self.pipes.iter_mut().map(|(_, r)| r)
    }

    /// Drains every buffer into its window. Past its limit of interned names it starts
    /// afresh: a new decoder, holding only the names of the events the windows hold
    /// (their names move to it). A buffer that cannot be read is an error.
    pub fn pass(&mut self) -> std::io::Result<()> {
        self.pass_within(false)
    }

    /// As `pass`; when `bounded`, a buffer is read only while its window has room for
    /// a page's events without pushing any out: the rest waits in the
    /// kernel's buffer, the window's CPU marked `behind`, for its caller to settle what
    /// the window holds and read on (issue 35: a pass held up by a kallsyms read, or a
    /// reader held off its CPU, read the backlog whole and pushed events out).
    pub fn pass_within(&mut self, bounded: bool) -> std::io::Result<()> {
        if self.decoder.names.len() > self.max_names {
            let old = std::mem::replace(&mut self.decoder, Decoder::new(&self.formats));
            let names = &mut self.decoder.names;
            let mut moved = |id| names.intern(old.names.get(id));
            for w in &mut self.windows {
                // What it holds, not its forgotten front: those names are not carried over.
                for e in w.events_mut() {
                    e.kind = e.kind.map_names(&mut moved);
                }
            }
            // Windows that name that many at once would start afresh every pass.
            if self.decoder.names.len() * 2 > self.max_names {
                self.max_names *= 2;
            }
        }
        // A record takes at least an 8-byte header and payload.
        let page_events = self.page.len() / 8;
        let pipes = self.pipes.iter_mut().zip(&mut self.windows);
        for (((_, f), w), behind) in pipes.zip(&mut self.behind) {
            // What the window has room for, as `keep` leaves it (it holds the window).
            let room = std::cell::Cell::new(w.cap().saturating_sub(w.len()));
            let page = page_events.min(w.cap() / 2);
            let d = drain_into(
                f,
                &mut self.page,
                &self.layout,
                &mut self.decoder,
                &mut |i| match i {
                    Item::Event(e) => {
                        if let Some(f) = e.kind.function()
                            && self.functions.insert(f)
                        {
                            self.new_functions.push(f);
                        }
                        w.push(e);
                        room.set(w.cap().saturating_sub(w.len()));
                    }
                    Item::LostBefore(ts) => w.lost_before(ts),
                },
                &mut || !bounded || room.get() >= page,
            )?;
            *behind = d.stopped;
            w.read += d.read;
            w.missed += d.missed;
            self.malformed_pages += d.malformed_pages;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::event::Kind;

    fn ev(ts: u64) -> Event {
        Event {
            ts,
            kind: Kind::WorkEnd,
        }
    }

    /// A buffer that fails otherwise than "nothing ready" is an error, not a quiet CPU.
    #[test]
    fn a_read_that_fails_is_an_error_and_an_empty_one_is_not() {
        let mut page = vec![0u8; 4096];
        let layout = PageLayout::DEFAULT;
        let mut decoder = Decoder::new(&[]);
        let mut read = |mut f: File| {
            drain_into(
                &mut f,
                &mut page,
                &layout,
                &mut decoder,
                &mut |_| {},
                &mut || true,
            )
        };
        // A directory reads as EISDIR.
        assert!(read(File::open("/").unwrap()).is_err());
        assert_eq!(read(tempfile::tempfile().unwrap()).unwrap().read, 0);
    }

    /// Issue 35: a window past its bound pushes its oldest sixteenth out, counts each
    /// event as lost, marks their span as one with events lost, and holds no more memory
    /// than its bound (not the next power of two).
    #[test]
    fn issue35_a_full_window_drops_the_oldest_counts_them_and_keeps_to_its_memory() {
        let mut w = EventWindow::new(1, 5_000);
        for t in 1..=12_000u64 {
            w.push(ev(t * 10));
            assert!(w.len() <= 5_000);
        }
        let held = w.len() as u64;
        assert!(
            held > 5_000 - 5_000 / 16,
            "{held}: more than a sixteenth out"
        );
        assert_eq!(
            w.evicted,
            12_000 - held,
            "every event pushed out is counted"
        );
        assert!(
            w.bytes() <= 5_000 * std::mem::size_of::<Event>(),
            "{}",
            w.bytes()
        );
        let oldest = (w.evicted + 1) * 10;
        assert_eq!(w.events()[0].ts, oldest, "the newest kept");
        assert_eq!(w.forgotten_to(), oldest - 10);
        assert!(w.lost_within(100, 200) && w.lost_within(oldest - 20, oldest - 5));
        assert!(!w.lost_within(oldest, 120_000), "what it holds is whole");
    }

    /// Issue 35: a window forgets by moving its start, and drops the forgotten front
    /// once it is as long as what is held: events stay in order through many passes,
    /// and the slots held stay within twice the events held plus a pass's pushes.
    #[test]
    fn issue35_a_window_forgotten_and_refilled_pass_by_pass_stays_in_order() {
        let mut w = EventWindow::new(1, 10_000);
        let mut next = 1_000u64;
        for pass in 0..200u64 {
            for _ in 0..(300 + pass % 7 * 50) {
                w.push(ev(next * 10));
                next += 1;
            }
            w.forget_before((next - 1_000) * 10);
            let ts: Vec<u64> = w.events().iter().map(|e| e.ts).collect();
            assert_eq!(ts.len(), 1_000.min(next as usize - 1_000));
            assert!(ts.windows(2).all(|p| p[1] == p[0] + 10), "pass {pass}");
            assert_eq!(ts[ts.len() - 1], (next - 1) * 10);
            assert!(w.events.len() <= 2 * 1_000 + 650, "{}", w.events.len());
        }
        assert_eq!(w.evicted, 0);
    }

    /// Issue 35: a window whose cap is lowered (its lane's tally grew) pushes its
    /// oldest events out at once, counted lost and their span marked, and gives the
    /// memory back; it states the fewest it could hold.
    #[test]
    fn issue35_a_lowered_cap_pushes_the_oldest_out_counted_and_gives_memory_back() {
        let mut w = EventWindow::new(1, 5_000);
        for t in 1..=5_000u64 {
            w.push(ev(t * 10));
        }
        w.set_cap(3_000);
        assert_eq!((w.len(), w.evicted, w.cap()), (3_000, 2_000, 3_000));
        assert!(
            w.bytes() <= 3_000 * std::mem::size_of::<Event>(),
            "{}",
            w.bytes()
        );
        assert_eq!(w.events()[0].ts, 20_010);
        assert!(w.lost_within(100, 200) && !w.lost_within(20_010, 50_000));
        w.set_cap(4_000);
        assert_eq!((w.cap(), w.min_cap()), (4_000, 3_000));
    }

    #[test]
    fn a_forgotten_and_refilled_window_hands_over_what_forgetting_drops_in_order() {
        let (mut taken, mut kept) = (EventWindow::new(1, 8), EventWindow::new(1, 8));
        // Pushed, half forgotten, pushed again: its start has moved.
        for w in [&mut taken, &mut kept] {
            (1..=6).for_each(|t| w.push(ev(t * 10)));
            w.forget_before(45);
            (7..=11).for_each(|t| w.push(ev(t * 10)));
        }
        let before: Vec<u64> = kept.events().iter().map(|e| e.ts).collect();
        let got: Vec<u64> = taken.before(95).iter().map(|e| e.ts).collect();
        taken.forget_before(95);
        kept.forget_before(95);
        assert_eq!(got, vec![50, 60, 70, 80, 90]);
        assert_eq!(before[..5], got[..]);
        let left = |w: &mut EventWindow| w.events().iter().map(|e| e.ts).collect::<Vec<_>>();
        assert_eq!(left(&mut taken), vec![100, 110]);
        assert_eq!(left(&mut taken), left(&mut kept));
        assert_eq!(taken.forgotten_to(), kept.forgotten_to());
    }

    #[test]
    fn a_window_is_bounded_by_count_and_forgets_by_time() {
        let mut w = EventWindow::new(1, 4);
        for t in 1..=6 {
            w.push(ev(t * 10));
        }
        assert_eq!(w.evicted, 2, "the two oldest were pushed out");
        let ts: Vec<u64> = w.events().iter().map(|e| e.ts).collect();
        assert_eq!(ts, vec![30, 40, 50, 60]);
        w.forget_before(45);
        let ts: Vec<u64> = w.events().iter().map(|e| e.ts).collect();
        assert_eq!(ts, vec![50, 60]);
        assert_eq!(w.evicted, 2, "forgetting is not losing");
        w.push(ev(70));
        assert_eq!(w.len(), 3);
    }
}
