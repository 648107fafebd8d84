//! A bounded map from frequent hash buckets to a feature string that landed
//! in them, so `inspect` can show "free entry" instead of bucket 240187.
//!
//! It sees a sample of the learned documents (every one of the first
//! [`FULL_DOCS`], then one in [`SAMPLE_EVERY`]) and holds at most `cap`
//! buckets; when full it halves every count and drops the buckets seen once,
//! so frequent features stay and rare ones make room.

use foldhash::HashMap;

/// Documents observed in full before sampling starts.
pub const FULL_DOCS: u64 = 32;
/// After that, one document in this many is observed.
pub const SAMPLE_EVERY: u64 = 64;
/// Default bucket capacity.
pub const DEFAULT_CAP: usize = 100_000;

#[derive(Clone, Debug, PartialEq)]
pub struct NameSketch {
    /// bucket -> (a feature string, how often the bucket was seen).
    entries: HashMap<u32, (String, u32)>,
    cap: usize,
    /// Documents offered so far (observed or skipped).
    offered: u64,
}

impl Default for NameSketch {
    fn default() -> Self {
        NameSketch {
            entries: HashMap::default(),
            cap: DEFAULT_CAP,
            offered: 0,
        }
    }
}

impl NameSketch {
    /// Whether the next document should be observed (advances the sampler).
    pub fn wants_next(&mut self) -> bool {
        self.offered += 1;
        self.offered <= FULL_DOCS || self.offered.is_multiple_of(SAMPLE_EVERY)
    }

    /// Records the feature strings of one document.
    pub fn observe<'a>(&mut self, names: impl IntoIterator<Item = (u32, &'a str)>) {
        for (bucket, name) in names {
            self.entries
                .entry(bucket)
                .and_modify(|e| e.1 = e.1.saturating_add(1))
                .or_insert_with(|| (name.to_string(), 1));
        }
        if self.entries.len() > self.cap {
            self.entries.retain(|_, e| e.1 > 1);
            for e in self.entries.values_mut() {
                e.1 /= 2;
            }
        }
    }

    pub fn name(&self, bucket: u32) -> Option<&str> {
        self.entries.get(&bucket).map(|e| e.0.as_str())
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn offered(&self) -> u64 {
        self.offered
    }

    /// Entries sorted by bucket (for checkpoints).
    pub fn entries(&self) -> Vec<(u32, &str, u32)> {
        let mut v: Vec<_> = self.entries.iter().map(|(&b, (s, c))| (b, s.as_str(), *c)).collect();
        v.sort_unstable_by_key(|e| e.0);
        v
    }

    pub fn from_entries(entries: impl IntoIterator<Item = (u32, String, u32)>, offered: u64) -> Self {
        NameSketch {
            entries: entries.into_iter().map(|(b, s, c)| (b, (s, c))).collect(),
            cap: DEFAULT_CAP,
            offered,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stays_bounded_and_keeps_frequent_names() {
        let mut s = NameSketch {
            cap: 10,
            ..Default::default()
        };
        for round in 0..50u32 {
            s.observe([(1, "free"), (1000 + round, format!("rare{round}").as_str())]);
        }
        assert!(s.len() <= 11);
        assert_eq!(s.name(1), Some("free"));
    }
}
