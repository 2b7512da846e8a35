//! The replay's heap, counted by who allocated it (issue 35): the readers, or the
//! stand-in kernel buffers the bench feeds them. The process's anonymous memory mixes the
//! two (a 192-CPU replay's stand-in buffers hold hundreds of MB while the readers lag);
//! counting each allocation against the thread's current tag tells the readers' own bytes,
//! at their peak and at the end, whatever the allocator keeps besides.
//!
//! On only with `TRACE_REPLAY_HEAP=1` (read once, at the first allocation): each block
//! then carries a 16-byte header with its tag, which the plain runs' memory figures must
//! not include.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering::Relaxed};

/// Who allocates: the bench itself, the stand-in kernel buffers, a reader.
#[derive(Clone, Copy)]
pub enum Tag {
    Bench = 0,
    Feed = 1,
    Reader = 2,
}

const TAGS: usize = 3;
static LIVE: [AtomicUsize; TAGS] = [const { AtomicUsize::new(0) }; TAGS];
static PEAK: [AtomicUsize; TAGS] = [const { AtomicUsize::new(0) }; TAGS];
/// 0 not yet read, 1 off, 2 on.
static MODE: AtomicU8 = AtomicU8::new(0);

thread_local! {
    static TAG: Cell<u8> = const { Cell::new(Tag::Bench as u8) };
}

/// Charges what this thread allocates from now on to `tag`.
pub fn set(tag: Tag) {
    TAG.with(|t| t.set(tag as u8));
}

/// Whether counting is on.
pub fn on() -> bool {
    mode() == 2
}

/// Bytes in use by `tag` now, and at most since the last `reset_peak`.
pub fn live(tag: Tag) -> usize {
    LIVE[tag as usize].load(Relaxed)
}

pub fn peak(tag: Tag) -> usize {
    PEAK[tag as usize].load(Relaxed)
}

/// Starts `tag`'s peak afresh from what it holds now (a new run).
pub fn reset_peak(tag: Tag) {
    PEAK[tag as usize].store(live(tag), Relaxed);
}

fn mode() -> u8 {
    match MODE.load(Relaxed) {
        0 => {
            // SAFETY: getenv reads the environment without allocating; nothing sets it.
            let v = unsafe { libc::getenv(c"TRACE_REPLAY_HEAP".as_ptr()) };
            // SAFETY: a non-null getenv result is a NUL-terminated string.
            let on = !v.is_null() && unsafe { std::ffi::CStr::from_ptr(v) } == c"1";
            let m = if on { 2 } else { 1 };
            MODE.store(m, Relaxed);
            m
        }
        m => m,
    }
}

/// The header before each counted block: at least 16 bytes, as aligned as the block.
fn header(layout: Layout) -> usize {
    layout.align().max(16)
}

fn with_header(layout: Layout) -> Option<Layout> {
    let h = header(layout);
    Layout::from_size_align(layout.size().checked_add(h)?, h).ok()
}

fn charge(tag: u8, bytes: usize) {
    let now = LIVE[tag as usize].fetch_add(bytes, Relaxed) + bytes;
    PEAK[tag as usize].fetch_max(now, Relaxed);
}

/// The system allocator, counting each block against the tag of the thread that made it.
pub struct Counting;

// SAFETY: every block comes from `System` with a layout `dealloc` and `realloc` rebuild
// the same way (the header's size depends only on the alignment); with counting off,
// blocks are `System`'s own, and the mode never changes once read.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if mode() != 2 {
            // SAFETY: the caller's layout, as given.
            return unsafe { System.alloc(layout) };
        }
        let Some(full) = with_header(layout) else {
            return std::ptr::null_mut();
        };
        // SAFETY: a non-zero size (the header).
        let base = unsafe { System.alloc(full) };
        if base.is_null() {
            return base;
        }
        let tag = TAG.try_with(Cell::get).unwrap_or(Tag::Bench as u8);
        // SAFETY: the header lies inside the block, before the caller's part.
        unsafe {
            let p = base.add(header(layout));
            p.sub(1).write(tag);
            charge(tag, layout.size());
            p
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if mode() != 2 {
            // SAFETY: a block of `System`'s with this layout.
            return unsafe { System.dealloc(ptr, layout) };
        }
        // SAFETY: `ptr` came from `alloc` above with this layout: its header is before it.
        unsafe {
            let tag = ptr.sub(1).read();
            LIVE[tag as usize].fetch_sub(layout.size(), Relaxed);
            let full = with_header(layout).expect("as allocated");
            System.dealloc(ptr.sub(header(layout)), full);
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if mode() != 2 {
            // SAFETY: a block of `System`'s with this layout.
            return unsafe { System.realloc(ptr, layout, new_size) };
        }
        let h = header(layout);
        // SAFETY: `ptr` came from `alloc` above: the block starts `h` before it, and the
        // tag moves with it (the block stays charged to whoever made it).
        unsafe {
            let tag = ptr.sub(1).read();
            let full = with_header(layout).expect("as allocated");
            let base = System.realloc(ptr.sub(h), full, new_size + h);
            if base.is_null() {
                return base;
            }
            LIVE[tag as usize].fetch_sub(layout.size(), Relaxed);
            charge(tag, new_size);
            base.add(h)
        }
    }
}
