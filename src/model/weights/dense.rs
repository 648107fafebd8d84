//! Helpers of the dense layout: re-laying rows out for more classes and
//! the step between a class and its mirror.

use crate::hugepages::zeroed;

/// Negates class 0's `v` and `A` in a row with `cap` floats per slot (its
/// sums of squares keep their sign): the step between a class and its
/// mirror. Zeros are left unwritten, so pages never touched stay unbacked.
pub(super) fn negate_class_0(row: &mut [f32], cap: usize, averaged: bool) {
    for s in 0..1 + averaged as usize {
        let x = &mut row[s * cap];
        if *x != 0.0 {
            *x = -*x;
        }
    }
}

/// Copies `[bucket][slot][class]` rows with `from` floats per slot into rows
/// with `to` per slot, keeping the first `k` classes of each slot. A row
/// may end with a tail of more floats (the document count, see
/// `counts.rs`): `(from, from_tail)`, `(to, to_tail)`; the tail is copied
/// when both rows have it, dropped when only the old ones do.
pub(super) fn relayout(
    buf: &[f32],
    buckets: usize,
    slots: usize,
    (from, from_tail): (usize, usize),
    (to, to_tail): (usize, usize),
    k: usize,
) -> Vec<f32> {
    let (src_len, dst_len) = (slots * from + from_tail, slots * to + to_tail);
    let tail = from_tail.min(to_tail);
    let mut out = zeroed(buckets * dst_len);
    if src_len == 0 || dst_len == 0 {
        return out;
    }
    for (dst, src) in out.chunks_exact_mut(dst_len).zip(buf.chunks_exact(src_len)) {
        // Rows never touched stay unwritten: the new buffer's pages are
        // only backed where there are weights to copy.
        // (By the bits: a small document count is a denormal's.)
        if src.iter().all(|&x| x.to_bits() << 1 == 0) {
            continue;
        }
        if k > 0 && from > 0 {
            for s in 0..slots {
                dst[s * to..s * to + k].copy_from_slice(&src[s * from..s * from + k]);
            }
        }
        dst[slots * to..slots * to + tail].copy_from_slice(&src[slots * from..slots * from + tail]);
    }
    out
}

/// Re-lays a `[bucket][k]` buffer out as `[bucket][k + 1]` with a zero new
/// column (naive Bayes counts).
pub fn widen_buffer(old: &[f32], buckets: usize, k: usize) -> Vec<f32> {
    let mut out = zeroed(buckets * (k + 1));
    if k > 0 {
        for (dst, src) in out.chunks_exact_mut(k + 1).zip(old.chunks_exact(k)) {
            dst[..k].copy_from_slice(src);
        }
    }
    out
}
