//! One ring-buffer page, as `trace_pipe_raw` hands it over: a timestamp, a commit count
//! (with the missed-events flags), then compressed records. Each record has a 32-bit
//! header (type_len: 5 bits, time_delta: 27 bits): type_len 1–28 is a record of that many
//! 4-byte words, 0 a longer one whose length follows, 29 padding, 30 a time extension and
//! 31 an absolute timestamp (the kernel's `events/header_event` says the same).

use super::format::{PageLayout, read_u64};

const PADDING: u32 = 29;
const TIME_EXTEND: u32 = 30;
const TIME_STAMP: u32 = 31;
/// Commit flags: events were lost before this page, and their count is stored after it.
const MISSED_EVENTS: u64 = 1 << 31;
const MISSED_STORED: u64 = 1 << 30;
/// An absolute timestamp carries the low 59 bits.
const ABS_BITS: u64 = (1 << 59) - 1;

/// One record of a page: its timestamp on the trace clock and its payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    pub ts: u64,
    pub data: &'a [u8],
}

/// What a page held.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Page<'a> {
    pub records: Vec<Record<'a>>,
    /// Events lost before this page: `Some(n)` when counted, `Some(0)` when lost but not
    /// counted, `None` when none were lost.
    pub missed: Option<u64>,
    /// The page was cut short by a malformed record.
    pub malformed: bool,
}

/// Parses one page into `out` (its records), returning what it said about lost events.
pub fn parse_page<'a>(page: &'a [u8], layout: &PageLayout) -> Page<'a> {
    let mut out = Page::default();
    let (Some(mut ts), Some(commit)) = (
        read_u64(page, layout.timestamp_offset, 8),
        read_u64(page, layout.commit_offset, layout.commit_size),
    ) else {
        out.malformed = true;
        return out;
    };
    let len = (commit & !(MISSED_EVENTS | MISSED_STORED) & 0xffff_ffff) as usize;
    let start = layout.data_offset;
    // A layout from a damaged header_page may put the data past the address space.
    let Some(data) = start.checked_add(len).and_then(|end| page.get(start..end)) else {
        out.malformed = true;
        return out;
    };
    // Room for the most records the data can hold (8 bytes each at least): grown by
    // doubling, a page of a hundred records took six allocations (issue 35).
    out.records.reserve_exact(len / 8);
    if commit & MISSED_EVENTS != 0 {
        let stored = (commit & MISSED_STORED != 0)
            .then(|| read_u64(page, start + len, layout.commit_size))
            .flatten();
        out.missed = Some(stored.unwrap_or(0));
    }
    let mut at = 0usize;
    while at + 4 <= data.len() {
        let head = u32::from_le_bytes(data[at..at + 4].try_into().unwrap_or([0; 4]));
        let (type_len, delta) = (head & 0x1f, u64::from(head >> 5));
        let word = |i: usize| -> Option<u64> {
            data.get(at + 4 + 4 * i..at + 8 + 4 * i)
                .map(|b| u64::from(u32::from_le_bytes(b.try_into().unwrap_or([0; 4]))))
        };
        match type_len {
            PADDING => match (delta, word(0)) {
                // A null padding event: nothing more on this page.
                (0, _) | (_, None) => break,
                (_, Some(n)) => at += 4 + n as usize,
            },
            TIME_EXTEND => {
                let Some(hi) = word(0) else { break };
                if !advance(&mut ts, delta | (hi << 27)) {
                    out.malformed = true;
                    break;
                }
                at += 8;
            }
            TIME_STAMP => {
                let Some(hi) = word(0) else { break };
                ts = (ts & !ABS_BITS) | ((delta | (hi << 27)) & ABS_BITS);
                at += 8;
            }
            0 => {
                let Some(n) = word(0) else { break };
                let n = n as usize;
                let Some(payload) = data.get(at + 8..at + 4 + n) else {
                    out.malformed = true;
                    break;
                };
                if !advance(&mut ts, delta) {
                    out.malformed = true;
                    break;
                }
                out.records.push(Record { ts, data: payload });
                at += 4 + n.max(4);
            }
            words => {
                let end = at + 4 + 4 * words as usize;
                let Some(payload) = data.get(at + 4..end) else {
                    out.malformed = true;
                    break;
                };
                if !advance(&mut ts, delta) {
                    out.malformed = true;
                    break;
                }
                out.records.push(Record { ts, data: payload });
                at = end;
            }
        }
    }
    out
}

/// Writes records (stamp, payload of whole 4-byte words) into pages as the kernel lays
/// them out, for replays of recorded pages and for tests (the kernel writes the real
/// ones): each page stamped with its first record, deltas of 27 bits or a time extension
/// before a longer one. Records are in time order; a payload that is not a multiple of
/// 4 bytes is padded.
pub fn write_pages(
    records: &[(u64, &[u8])],
    page_size: usize,
    layout: &PageLayout,
) -> Vec<Vec<u8>> {
    let mut pages = Vec::new();
    let room = page_size.saturating_sub(layout.data_offset + layout.commit_size);
    let mut body: Vec<u8> = Vec::new();
    let mut first = 0u64;
    let mut last = 0u64;
    let mut flush = |body: &mut Vec<u8>, first: u64| {
        if !body.is_empty() {
            let mut p = vec![0u8; page_size];
            p[layout.timestamp_offset..layout.timestamp_offset + 8]
                .copy_from_slice(&first.to_le_bytes());
            let commit = (body.len() as u64).to_le_bytes();
            p[layout.commit_offset..layout.commit_offset + layout.commit_size]
                .copy_from_slice(&commit[..layout.commit_size]);
            p[layout.data_offset..layout.data_offset + body.len()].copy_from_slice(body);
            pages.push(p);
            body.clear();
        }
    };
    for &(ts, data) in records {
        let words = data.len().div_ceil(4);
        let delta = ts.saturating_sub(last);
        let extend = !body.is_empty() && delta >= 1 << 27;
        let need = 4 * words + if words > 28 { 8 } else { 4 } + if extend { 8 } else { 0 };
        if body.len() + need > room {
            flush(&mut body, first);
        }
        let mut delta = match body.is_empty() {
            true => {
                first = ts;
                0
            }
            false => delta,
        };
        if delta >= 1 << 27 {
            let head = TIME_EXTEND | (((delta & ((1 << 27) - 1)) as u32) << 5);
            body.extend(head.to_le_bytes());
            body.extend(((delta >> 27) as u32).to_le_bytes());
            delta = 0;
        }
        let mut payload = data.to_vec();
        payload.resize(4 * words, 0);
        match words {
            1..=28 => body.extend((words as u32 | ((delta as u32) << 5)).to_le_bytes()),
            _ => {
                body.extend(((delta as u32) << 5).to_le_bytes());
                body.extend((4 + payload.len() as u32).to_le_bytes());
            }
        }
        body.extend(payload);
        last = ts;
    }
    flush(&mut body, first);
    pages
}

/// Marks `page` as following `missed` events the kernel lost, as the kernel does when the
/// reader fell behind a whole buffer (the count stored after the data, when it fits).
pub fn mark_missed(page: &mut [u8], layout: &PageLayout, missed: u64) {
    let Some(commit) = read_u64(page, layout.commit_offset, layout.commit_size) else {
        return;
    };
    let len = (commit & 0xffff_ffff & !(MISSED_EVENTS | MISSED_STORED)) as usize;
    let at = layout.data_offset + len;
    let mut flags = MISSED_EVENTS;
    if let Some(room) = page.get_mut(at..at + layout.commit_size) {
        room.copy_from_slice(&missed.to_le_bytes()[..layout.commit_size]);
        flags |= MISSED_STORED;
    }
    let c = (commit | flags).to_le_bytes();
    page[layout.commit_offset..layout.commit_offset + layout.commit_size]
        .copy_from_slice(&c[..layout.commit_size]);
}

/// Moves the page's clock on by `by`; false when that passes 64 bits, which no real
/// stamp does (the page is damaged), rather than wrapping to a time that looks valid.
fn advance(ts: &mut u64, by: u64) -> bool {
    match ts.checked_add(by) {
        Some(t) => {
            *ts = t;
            true
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A page with the given commit flags and record bytes.
    fn page(ts: u64, flags: u64, body: &[u8]) -> Vec<u8> {
        let mut p = vec![0u8; 4096];
        p[0..8].copy_from_slice(&ts.to_le_bytes());
        p[8..16].copy_from_slice(&(body.len() as u64 | flags).to_le_bytes());
        p[16..16 + body.len()].copy_from_slice(body);
        p
    }

    fn head(type_len: u32, delta: u32) -> [u8; 4] {
        (type_len | (delta << 5)).to_le_bytes()
    }

    #[test]
    fn records_extends_and_stamps_give_each_record_its_time() {
        let mut body = Vec::new();
        // A 2-word record 10 ticks after the page's stamp.
        body.extend(head(2, 10));
        body.extend([1, 2, 3, 4, 5, 6, 7, 8]);
        // A time extension of 5 + (1 << 27).
        body.extend(head(TIME_EXTEND, 5));
        body.extend(1u32.to_le_bytes());
        // A long record (type_len 0): its length word counts itself.
        body.extend(head(0, 1));
        body.extend(12u32.to_le_bytes());
        body.extend([9u8; 8]);
        // An absolute stamp, then a 1-word record at it.
        body.extend(head(TIME_STAMP, 7));
        body.extend(0u32.to_le_bytes());
        body.extend(head(1, 0));
        body.extend([0xaa; 4]);
        let p = page(1000, 0, &body);
        let got = parse_page(&p, &PageLayout::DEFAULT);
        assert!(!got.malformed);
        assert_eq!(got.missed, None);
        let times: Vec<u64> = got.records.iter().map(|r| r.ts).collect();
        assert_eq!(times, vec![1010, 1010 + 5 + (1 << 27) + 1, 7]);
        assert_eq!(got.records[0].data, &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(got.records[1].data, &[9u8; 8]);
        assert_eq!(got.records[2].data, &[0xaa; 4]);
    }

    #[test]
    fn lost_events_are_reported_and_padding_ends_the_page() {
        let mut body = Vec::new();
        body.extend(head(1, 3));
        body.extend([1u8; 4]);
        body.extend(head(PADDING, 0));
        body.extend([0u8; 4]);
        let mut p = page(0, MISSED_EVENTS | MISSED_STORED, &body);
        let at = 16 + body.len();
        p[at..at + 8].copy_from_slice(&42u64.to_le_bytes());
        let got = parse_page(&p, &PageLayout::DEFAULT);
        assert_eq!(got.missed, Some(42));
        assert_eq!(got.records.len(), 1);
        let truncated = parse_page(&p[..10], &PageLayout::DEFAULT);
        assert!(truncated.malformed);
    }

    /// Fuzzing (issue 22) found stamps that overflow 64 bits panicking the parser (in
    /// debug builds; release builds wrapped them to a plausible time).
    #[test]
    fn issue22_a_stamp_past_64_bits_marks_the_page_malformed() {
        let mut extend = Vec::new();
        extend.extend(head(TIME_EXTEND, 0));
        extend.extend(u32::MAX.to_le_bytes());
        extend.extend(head(1, 0));
        extend.extend([1u8; 4]);
        let mut long = Vec::new();
        long.extend(head(1, 5));
        long.extend([1u8; 4]);
        long.extend(head(0, 10));
        long.extend(8u32.to_le_bytes());
        long.extend([2u8; 4]);
        for body in [&extend, &long] {
            let p = page(u64::MAX - 6, 0, body);
            let got = parse_page(&p, &PageLayout::DEFAULT);
            assert!(got.malformed, "{body:?}");
            assert!(got.records.iter().all(|r| r.ts >= u64::MAX - 6), "{got:?}");
        }
        // The record before the overflow is kept with its time.
        let p = page(u64::MAX - 6, 0, &long);
        let got = parse_page(&p, &PageLayout::DEFAULT);
        assert_eq!(got.records.len(), 1);
        assert_eq!(got.records[0].ts, u64::MAX - 1);
    }

    /// Pages written for a replay read back as the records written, stamps and payloads,
    /// a long delta and a long record included; a page marked missed says so.
    #[test]
    fn written_pages_read_back_as_written() {
        let long = [7u8; 200];
        let recs: Vec<(u64, &[u8])> = (0..300u64)
            .map(|i| {
                let ts = 1_000
                    + i * 1_000
                    + if i == 150 { 1 << 30 } else { 0 }
                    + (i > 150) as u64 * (1 << 30);
                let data: &[u8] = if i % 50 == 0 {
                    &long
                } else {
                    &[1, 2, 3, 4, 5, 6, 7, 8]
                };
                (ts, data)
            })
            .collect();
        let layout = PageLayout::DEFAULT;
        let mut pages = write_pages(&recs, 4096, &layout);
        assert!(pages.len() > 1);
        mark_missed(&mut pages[1], &layout, 42);
        let mut back = Vec::new();
        for (i, p) in pages.iter().enumerate() {
            let got = parse_page(p, &layout);
            assert!(!got.malformed);
            assert_eq!(got.missed, (i == 1).then_some(42));
            back.extend(got.records.iter().map(|r| (r.ts, r.data.to_vec())));
        }
        let want: Vec<(u64, Vec<u8>)> = recs.iter().map(|(t, d)| (*t, d.to_vec())).collect();
        assert_eq!(back, want);
    }

    /// A layout parsed from a damaged header_page, with offsets near usize::MAX, found
    /// by fuzzing (issue 22): the page is malformed, not a panic.
    #[test]
    fn issue22_a_layout_with_absurd_offsets_marks_the_page_malformed() {
        let p = page(0, 0, &[]);
        for layout in [
            PageLayout {
                data_offset: usize::MAX,
                ..PageLayout::DEFAULT
            },
            PageLayout {
                commit_offset: usize::MAX - 2,
                ..PageLayout::DEFAULT
            },
            PageLayout {
                timestamp_offset: usize::MAX,
                ..PageLayout::DEFAULT
            },
        ] {
            assert!(parse_page(&p, &layout).malformed, "{layout:?}");
        }
    }
}
