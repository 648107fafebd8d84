//! The late-label join cache: the texts (and what was published for them)
//! of recent messages, by id, under an entry cap, a byte cap and a TTL,
//! oldest out first. Owns only the cache; the pipeline decides what goes
//! in and what a joined label does.

use std::collections::VecDeque;

use foldhash::HashMap;

use super::PipelineConfig;

/// A message waiting for its late label.
#[derive(Clone, Debug, PartialEq)]
pub struct CacheEntry {
    pub text: String,
    /// The labels published for it (unlabeled messages); `None` when no
    /// prediction of it is known here (a learner: its replicas predict).
    pub predicted: Option<Vec<String>>,
    /// The positive class's score that was published (binary tasks).
    pub score: Option<f32>,
    /// Its gold labels, once known.
    pub gold: Option<Vec<String>>,
    /// When it was cached (event time, ms).
    pub at_ms: u64,
}

/// The bounded join cache: a size cap, a byte cap and a TTL, oldest out first.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FeedbackCache {
    pub(crate) map: HashMap<String, (CacheEntry, u64)>,
    /// (id, generation) in insertion order; stale generations are skipped.
    pub(crate) order: VecDeque<(String, u64)>,
    pub(crate) generation: u64,
    pub(crate) bytes: usize,
    /// Entries dropped because their TTL passed.
    pub expired: u64,
    /// Entries dropped to respect the caps.
    pub evicted: u64,
}

impl FeedbackCache {
    pub(super) fn insert(&mut self, id: String, entry: CacheEntry, cfg: &PipelineConfig) {
        if cfg.cache_entries == 0 || entry.text.len() > cfg.cache_bytes {
            return;
        }
        self.generation += 1;
        self.bytes += entry.text.len();
        if let Some((old, _)) = self.map.insert(id.clone(), (entry, self.generation)) {
            self.bytes -= old.text.len();
        }
        self.order.push_back((id, self.generation));
        while self.map.len() > cfg.cache_entries || self.bytes > cfg.cache_bytes {
            if !self.pop_oldest() {
                break;
            }
            self.evicted += 1;
        }
    }

    /// Drops the oldest live entry; false when empty.
    fn pop_oldest(&mut self) -> bool {
        while let Some((id, generation)) = self.order.pop_front() {
            if self.map.get(&id).is_some_and(|e| e.1 == generation) {
                if let Some((e, _)) = self.map.remove(&id) {
                    self.bytes -= e.text.len();
                }
                return true;
            }
        }
        false
    }

    /// Drops entries older than the TTL at event time `now_ms`.
    pub(super) fn expire(&mut self, now_ms: u64, ttl_ms: u64) {
        while let Some((id, generation)) = self.order.front() {
            match self.map.get(id) {
                Some((e, g)) if g == generation => {
                    if now_ms.saturating_sub(e.at_ms) <= ttl_ms {
                        break;
                    }
                    self.pop_oldest();
                    self.expired += 1;
                }
                _ => {
                    self.order.pop_front();
                }
            }
        }
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Live entries, oldest first (for checkpoints).
    pub fn entries(&self) -> Vec<(&str, &CacheEntry)> {
        self.order
            .iter()
            .filter_map(|(id, g)| self.map.get(id).filter(|e| e.1 == *g).map(|e| (id.as_str(), &e.0)))
            .collect()
    }

    /// Rebuilds a cache from entries, oldest first.
    pub fn from_entries(entries: Vec<(String, CacheEntry)>, expired: u64, evicted: u64) -> Self {
        let mut c = FeedbackCache {
            expired,
            evicted,
            ..Default::default()
        };
        for (id, e) in entries {
            c.generation += 1;
            c.bytes += e.text.len();
            c.order.push_back((id.clone(), c.generation));
            c.map.insert(id, (e, c.generation));
        }
        c
    }
}
