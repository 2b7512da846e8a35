//! Drains each traced CPU's `trace_pipe_raw` while the run goes on, from a thread the
//! caller pins to the housekeeping CPU, so that nothing is overwritten on long runs and
//! no reading happens on a measured CPU. Pages are parsed and decoded as they come.
//!
//! Memory is bounded: at most `MAX_EVENTS_PER_CPU` events are kept per CPU (48 bytes
//! each, about 48 MiB at most); later ones are counted as lost, as are events the kernel
//! overwrote before they were read.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::event::{Decoder, Event};
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

/// Reads until `stop`, then stops recording and drains what is left.
pub fn collect(session: &TraceSession, stop: &AtomicBool) -> Result<Collected, TraceError> {
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
            drain(*cpu, f, &mut page, session, &mut out);
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

/// Reads one CPU's pages until none is ready.
fn drain(cpu: usize, f: &mut File, page: &mut [u8], s: &TraceSession, out: &mut Collected) {
    loop {
        let n = match f.read(page) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let parsed = parse_page(&page[..n], &s.layout);
        let lost = out.lost.entry(cpu).or_default();
        *lost += parsed.missed.unwrap_or(0);
        out.malformed_pages += u64::from(parsed.malformed);
        let events = out.per_cpu.entry(cpu).or_default();
        *out.read.entry(cpu).or_default() += parsed.records.len() as u64;
        for r in parsed.records {
            match out.decoder.decode(r.ts, r.data) {
                Some(_) if events.len() >= MAX_EVENTS_PER_CPU => *lost += 1,
                Some(e) => events.push(e),
                None => {}
            }
        }
    }
}
