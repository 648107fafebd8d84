//! What the daemon asks of its allocator (mimalloc, set in src/main.rs)
//! beyond allocating: freed memory handed back to the OS at once, not a
//! second later. mimalloc (v3) purges freed memory after a delay of
//! 1,000 ms; meanwhile what a process freed stays resident beside what it
//! allocates next: a whole model replaced by a predictor's new full
//! version (hundreds of MB, docs/scaling.md), or the decoded deltas and
//! buffers of the last second.

use libmimalloc_sys::mi_option_t;

/// mimalloc's `mi_option_purge_delay` (ms), which libmimalloc-sys names
/// no constant for: 15 in v3's `mi_option_e`, between
/// `mi_option_eager_commit_delay` (14) and `mi_option_use_numa_nodes`
/// (16), which it does name. The test below checks the index against the
/// library linked.
const PURGE_DELAY: mi_option_t = 15;

/// Has freed memory purged at once rather than after mimalloc's delay:
/// 8-24 MB less peak RSS on 20 Newsgroups' `run` and SpamAssassin's
/// `eval` (docs/checkpoints.md), no measurable cost in speed. Called
/// first thing by the binary.
pub fn purge_at_once() {
    // SAFETY: mi_option_set only stores the value; options may be set at
    // any time, from any thread.
    unsafe { libmimalloc_sys::mi_option_set(PURGE_DELAY, 0) };
}

/// Returns the memory freed so far to the OS now. Harmless when the
/// global allocator is another (the tests, the fuzz targets): mimalloc's
/// own heap is then empty.
pub fn return_freed() {
    // SAFETY: mi_collect has no preconditions; it may be called from any
    // thread at any time (it collects the calling thread's heap and purges
    // the arenas' freed memory).
    unsafe { libmimalloc_sys::mi_collect(true) };
}

#[cfg(test)]
mod tests {
    /// Index 15 is the purge delay: its v3 default, 1,000 ms, and a value
    /// set reads back (the neighbours' defaults are 1 and 0).
    #[test]
    fn the_purge_delay_option_is_the_one_set() {
        // SAFETY: as in `purge_at_once`; mi_option_get only reads.
        let default = unsafe { libmimalloc_sys::mi_option_get(super::PURGE_DELAY) };
        assert_eq!(default, 1000);
        super::purge_at_once();
        // SAFETY: as above.
        assert_eq!(unsafe { libmimalloc_sys::mi_option_get(super::PURGE_DELAY) }, 0);
    }
}
