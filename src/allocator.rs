//! What the daemon asks of its allocator (mimalloc, set in src/main.rs)
//! beyond allocating: memory freed in bulk, a whole model replaced by a
//! predictor's new full version, handed back to the OS at once. mimalloc
//! purges freed memory after a delay (10 ms, 100 ms for its arenas); a
//! model of hundreds of MB freed just before the next one is restored
//! would otherwise stay resident beside it (docs/scaling.md).

/// Returns the memory freed so far to the OS now. Harmless when the
/// global allocator is another (the tests, the fuzz targets): mimalloc's
/// own heap is then empty.
pub fn return_freed() {
    // SAFETY: mi_collect has no preconditions; it may be called from any
    // thread at any time (it collects the calling thread's heap and purges
    // the arenas' freed memory).
    unsafe { libmimalloc_sys::mi_collect(true) };
}
