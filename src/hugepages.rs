//! Zeroed tables backed by transparent huge pages: the hashed-feature
//! tables (weights, document frequencies) are read and written at random,
//! and with 4 KiB pages nearly every touch of a multi-megabyte table is a
//! TLB miss. And the pages a shrunk table no longer uses, handed back.
//!
//! Only these tables ask for huge pages. The allocator's own arenas do not
//! (mimalloc is built with `no_thp`, Cargo.toml says why): there a 2 MiB
//! page is zeroed in full for the first byte touched in it, which made the
//! CPU time of an `eval` swing by a factor of two from run to run.

/// A number type whose all-zero bytes are its zero (so `vec![ZERO; n]`
/// takes zeroed memory from the allocator and touches none of it).
pub(crate) trait Zero: Copy {
    const ZERO: Self;
}

impl Zero for f32 {
    const ZERO: Self = 0.0;
}

impl Zero for u32 {
    const ZERO: Self = 0;
}

/// `n` zeros, backed by transparent huge pages where the OS offers them
/// (tables under 4 MiB are left to the allocator).
pub(crate) fn zeroed<T: Zero>(n: usize) -> Vec<T> {
    let mut v = vec![T::ZERO; n];
    advise(&mut v);
    v
}

#[cfg(target_os = "linux")]
fn advise<T>(v: &mut [T]) {
    const PAGE: usize = 4096;
    let bytes = std::mem::size_of_val(v);
    if bytes < 4 << 20 {
        return;
    }
    let start = v.as_mut_ptr() as usize;
    let aligned = start.next_multiple_of(PAGE);
    let len = (start + bytes - aligned) / PAGE * PAGE;
    // SAFETY: [aligned, aligned + len) lies inside `v`'s allocation, which we
    // borrow mutably; MADV_HUGEPAGE only changes how the kernel backs those
    // pages, never their contents. A failure (e.g. no THP support) is harmless.
    unsafe {
        libc::madvise(aligned as *mut libc::c_void, len, libc::MADV_HUGEPAGE);
    }
}

#[cfg(not(target_os = "linux"))]
fn advise<T>(_: &mut [T]) {}

/// Hands the pages of `v`'s spare capacity (past its length) back to the
/// OS: a table that shrank keeps its allocation, but not the memory it
/// touched past its new end. Its spare capacity reads as zeros after.
#[cfg(target_os = "linux")]
pub(crate) fn release_spare<T>(v: &mut Vec<T>) {
    const PAGE: usize = 4096;
    let spare = v.spare_capacity_mut();
    let start = spare.as_mut_ptr() as usize;
    let aligned = start.next_multiple_of(PAGE);
    let end = (start + std::mem::size_of_val(spare)) / PAGE * PAGE;
    if end <= aligned {
        return;
    }
    // SAFETY: [aligned, end) lies inside `v`'s spare capacity, which holds
    // no value (uninitialised as far as Rust knows) and which we borrow
    // mutably; MADV_DONTNEED on private anonymous memory drops its pages,
    // which read as zeros when next touched. A failure is harmless.
    unsafe {
        libc::madvise(aligned as *mut libc::c_void, end - aligned, libc::MADV_DONTNEED);
    }
}

#[cfg(not(target_os = "linux"))]
pub fn release_spare<T>(_: &mut Vec<T>) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zeroed_tables_are_zero_and_writable() {
        // Over the 4 MiB line, so the advice is taken.
        let mut w: Vec<f32> = zeroed(3 << 20);
        assert!(w.iter().all(|&x| x == 0.0));
        w[123_456] = 1.5;
        assert_eq!(w.iter().sum::<f32>(), 1.5);
        let d: Vec<u32> = zeroed(10);
        assert_eq!(d, vec![0; 10]);
    }

    /// A table shrunk and its spare pages released grows again as any
    /// vector does, its old values past the new end gone, those before kept.
    #[test]
    fn released_spare_capacity_grows_again() {
        let mut v: Vec<u32> = Vec::with_capacity(1 << 22);
        v.resize(1 << 22, 7);
        v.truncate(1000);
        release_spare(&mut v);
        assert_eq!(v.capacity(), 1 << 22);
        v.resize(1 << 21, 0);
        assert!(v[..1000].iter().all(|&x| x == 7));
        assert!(v[1000..].iter().all(|&x| x == 0));
    }
}
