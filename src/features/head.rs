//! The byte 4-grams of a document's head, for the model's byte LR: the TREC 2007 baseline's features, each distinct
//! 4-byte window of the first `HEAD_BYTES` bytes hashed to one of
//! `2^BYTE_LR_BITS` buckets (a multiplicative hash: the window's four
//! bytes are the whole key, so no seed or string hash is needed).

/// log2 of the buckets: 2^20 (4 MB of the byte LR's weights) ranks as
/// 2^22 does on both raw corpora (docs/accuracy.md).
pub const BYTE_LR_BITS: u32 = 20;
/// Bytes of the document's head read (the TREC baseline's 3,000).
pub const HEAD_BYTES: usize = 3000;

/// Finds a document's distinct head grams, reusing a bitmap of the
/// buckets seen (`2^BYTE_LR_BITS` bits, 128 KiB, made at the first use).
#[derive(Clone, Debug, Default)]
pub struct HeadGrams {
    seen: Vec<u64>,
}

impl HeadGrams {
    /// The distinct buckets of the 4-byte windows of `text`'s first
    /// `HEAD_BYTES` bytes, in order of first occurrence, into `out`
    /// (cleared first). A text shorter than four bytes is one window,
    /// padded with zeros; an empty one has none.
    pub fn grams(&mut self, text: &str, out: &mut Vec<u32>) {
        out.clear();
        let head = &text.as_bytes()[..text.len().min(HEAD_BYTES)];
        if head.is_empty() {
            return;
        }
        if self.seen.is_empty() {
            self.seen = vec![0; (1usize << BYTE_LR_BITS) / 64];
        }
        let mut push = |key: u32| {
            let b = bucket(key);
            let (word, bit) = (b as usize / 64, 1u64 << (b % 64));
            if self.seen[word] & bit == 0 {
                self.seen[word] |= bit;
                out.push(b);
            }
        };
        if head.len() < 4 {
            let mut key = [0u8; 4];
            key[..head.len()].copy_from_slice(head);
            push(u32::from_le_bytes(key));
        } else {
            for w in head.windows(4) {
                // A window of four bytes: the conversion cannot fail.
                push(u32::from_le_bytes([w[0], w[1], w[2], w[3]]));
            }
        }
        for &b in out.iter() {
            self.seen[b as usize / 64] = 0;
        }
    }
}

/// The bucket of a 4-byte window: Fibonacci hashing (the top bits of the
/// key times 2^64 over the golden ratio).
#[inline]
fn bucket(key: u32) -> u32 {
    ((u64::from(key)).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - BYTE_LR_BITS)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grams_are_the_distinct_windows_of_the_head() {
        let mut h = HeadGrams::default();
        let mut out = Vec::new();
        h.grams("abcdabcd", &mut out);
        // Windows abcd, bcda, cdab, dabc, abcd: four distinct.
        assert_eq!(out.len(), 4);
        assert!(out.iter().all(|&b| b < 1 << BYTE_LR_BITS));
        let first = out.clone();
        // The bitmap is clean again: the same text gives the same grams.
        h.grams("abcdabcd", &mut out);
        assert_eq!(out, first);
        h.grams("ab", &mut out);
        assert_eq!(out.len(), 1);
        h.grams("", &mut out);
        assert!(out.is_empty());
        // Only the head counts: what follows it adds nothing.
        let long = "x".repeat(HEAD_BYTES) + "something else entirely";
        h.grams(&long, &mut out);
        assert_eq!(out.len(), 1);
    }
}
