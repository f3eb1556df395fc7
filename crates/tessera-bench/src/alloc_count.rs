//! A global allocator that counts the bytes Rust code holds, while asked to: for memory rows
//! (the live table's bytes per subscription). Off, it costs one relaxed load per allocation.
//! SQLite's own allocations (C `malloc`) are not counted.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicIsize, Ordering};

/// The system allocator, counting live bytes while [`counting`] is on.
pub struct Counting;

static ON: AtomicBool = AtomicBool::new(false);
static LIVE_BYTES: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call is forwarded to `System` unchanged; the counter is bookkeeping only.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if ON.load(Ordering::Relaxed) {
            LIVE_BYTES.fetch_add(layout.size() as isize, Ordering::Relaxed);
        }
        // SAFETY: the caller's contract for `alloc` is passed on as is.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if ON.load(Ordering::Relaxed) {
            LIVE_BYTES.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        }
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if ON.load(Ordering::Relaxed) {
            LIVE_BYTES.fetch_add(new_size as isize - layout.size() as isize, Ordering::Relaxed);
        }
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Runs `work` with counting on; returns its result and the bytes it left allocated (what it
/// allocated minus what it freed, of allocations made while counting: a block allocated
/// before and freed during `work` counts negative).
pub fn retained_bytes<R>(work: impl FnOnce() -> R) -> (R, isize) {
    LIVE_BYTES.store(0, Ordering::SeqCst);
    ON.store(true, Ordering::SeqCst);
    let result = work();
    ON.store(false, Ordering::SeqCst);
    (result, LIVE_BYTES.load(Ordering::SeqCst))
}
