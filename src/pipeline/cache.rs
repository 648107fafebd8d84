//! The late-label join cache: the texts (and what was published for them)
//! of recent messages, by id, under an entry cap, a byte cap and a TTL,
//! oldest out first. Owns only the cache; the pipeline decides what goes
//! in and what a joined label does.
//!
//! One structure, keyed by id and kept in insertion order (a linked hash
//! map): a message cached again under an id already there replaces it and
//! moves to the back, so the cache holds one entry per id whatever the
//! stream repeats, and its size is bounded by the caps alone.
//!
//! Texts are held LZ4-compressed ([`Packed`]) when that makes them
//! smaller, and the byte cap counts the bytes held: a text is read back
//! only when its late label comes.

use hashlink::LinkedHashMap;

use super::PipelineConfig;

/// A cached text: as it came, until the cache takes it
/// ([`Packed::packed`]: LZ4-compressed when that saves an eighth or more
/// of it; short texts and already compressed ones stay as they came).
#[derive(Clone, Debug, PartialEq)]
pub enum Packed {
    Plain(String),
    /// The block format, its decoded length first.
    Lz4(Box<[u8]>),
}

impl Packed {
    /// Texts shorter than this are kept as they are: too short to gain.
    const MIN_LEN: usize = 128;

    /// This text as the cache holds it.
    pub fn packed(self) -> Self {
        match self {
            Packed::Plain(text) if text.len() >= Self::MIN_LEN => {
                let packed = lz4_flex::block::compress_prepend_size(text.as_bytes());
                if packed.len() <= text.len() - text.len() / 8 {
                    Packed::Lz4(packed.into_boxed_slice())
                } else {
                    Packed::Plain(text)
                }
            }
            other => other,
        }
    }

    /// Bytes held (what the byte cap counts).
    pub fn len(&self) -> usize {
        match self {
            Packed::Plain(t) => t.len(),
            Packed::Lz4(b) => b.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The text. `None` only if compressed bytes fail to decode, which
    /// bytes compressed by [`Packed::packed`] in this process never do
    /// (the cache never holds bytes from elsewhere: checkpoints carry
    /// texts).
    pub fn text(&self) -> Option<String> {
        match self {
            Packed::Plain(t) => Some(t.clone()),
            Packed::Lz4(b) => {
                let bytes = lz4_flex::block::decompress_size_prepended(b).ok()?;
                String::from_utf8(bytes).ok()
            }
        }
    }
}

/// A message waiting for its late label.
#[derive(Clone, Debug, PartialEq)]
pub struct CacheEntry {
    pub text: Packed,
    /// The labels published for it (unlabeled messages); `None` when no
    /// prediction of it is known here (a learner: its replicas predict).
    pub predicted: Option<Vec<String>>,
    /// The positive class's score that was published (binary tasks).
    pub score: Option<f32>,
    /// Its gold labels, once learned.
    pub gold: Option<Vec<String>>,
    /// A label held, not learned (its reporter is not trusted), until
    /// another reporter confirms it.
    pub held: Option<Held>,
    /// When it was cached (event time, ms).
    pub at_ms: u64,
}

/// A label held on its message.
#[derive(Clone, Debug, PartialEq)]
pub struct Held {
    pub labels: Vec<String>,
    /// Who sent it ("" when nobody said).
    pub reporter: String,
}

/// The bounded join cache: a size cap, a byte cap and a TTL, oldest out first.
#[derive(Clone, Debug, Default)]
pub struct FeedbackCache {
    /// Entries by id, oldest first.
    map: LinkedHashMap<String, CacheEntry, foldhash::fast::RandomState>,
    /// Text bytes held, compressed (what `--feedback-cache-bytes` bounds).
    bytes: usize,
    /// Entries dropped because their TTL passed.
    pub expired: u64,
    /// Entries dropped to respect the caps.
    pub evicted: u64,
}

impl PartialEq for FeedbackCache {
    fn eq(&self, other: &Self) -> bool {
        self.expired == other.expired && self.evicted == other.evicted && self.map.iter().eq(other.map.iter())
    }
}

impl FeedbackCache {
    /// Caches `entry` under `id` as the newest entry (replacing one with
    /// the same id), then drops the oldest past the caps.
    /// Its text is compressed here, once the cache is known to keep it.
    pub(super) fn insert(&mut self, id: String, mut entry: CacheEntry, cfg: &PipelineConfig) {
        if cfg.cache_entries == 0 {
            return;
        }
        entry.text = entry.text.packed();
        if entry.text.len() > cfg.cache_bytes {
            return;
        }
        self.bytes += entry.text.len();
        if let Some(old) = self.map.insert(id, entry) {
            self.bytes -= old.text.len();
        }
        while self.map.len() > cfg.cache_entries || self.bytes > cfg.cache_bytes {
            if !self.pop_oldest() {
                break;
            }
            self.evicted += 1;
        }
    }

    /// The entry cached under `id`.
    pub(super) fn get(&self, id: &str) -> Option<&CacheEntry> {
        self.map.get(id)
    }

    /// The entry cached under `id`, to change in place (its age is kept).
    pub(super) fn get_mut(&mut self, id: &str) -> Option<&mut CacheEntry> {
        self.map.get_mut(id)
    }

    /// Drops the oldest entry; false when empty.
    fn pop_oldest(&mut self) -> bool {
        match self.map.pop_front() {
            Some((_, e)) => {
                self.bytes -= e.text.len();
                true
            }
            None => false,
        }
    }

    /// Drops entries older than the TTL at event time `now_ms`.
    pub(super) fn expire(&mut self, now_ms: u64, ttl_ms: u64) {
        while let Some((_, e)) = self.map.front() {
            if now_ms.saturating_sub(e.at_ms) <= ttl_ms {
                break;
            }
            self.pop_oldest();
            self.expired += 1;
        }
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Text bytes held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Live entries, oldest first (for checkpoints).
    pub fn entries(&self) -> Vec<(&str, &CacheEntry)> {
        self.map.iter().map(|(id, e)| (id.as_str(), e)).collect()
    }

    /// Rebuilds a cache from entries, oldest first.
    pub fn from_entries(entries: Vec<(String, CacheEntry)>, expired: u64, evicted: u64) -> Self {
        let mut c = FeedbackCache {
            expired,
            evicted,
            ..Default::default()
        };
        for (id, mut e) in entries {
            e.text = e.text.packed();
            c.bytes += e.text.len();
            if let Some(old) = c.map.insert(id, e) {
                c.bytes -= old.text.len();
            }
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(text: &str, at_ms: u64) -> CacheEntry {
        CacheEntry {
            text: Packed::Plain(text.into()),
            predicted: None,
            score: None,
            gold: None,
            held: None,
            at_ms,
        }
    }

    #[test]
    fn a_repeated_id_holds_one_entry_and_moves_to_the_back() {
        let cfg = PipelineConfig::default();
        let mut c = FeedbackCache::default();
        c.insert("a".into(), entry("first", 0), &cfg);
        c.insert("b".into(), entry("bb", 1), &cfg);
        for t in 2..10_000 {
            c.insert("a".into(), entry("again", t), &cfg);
        }
        assert_eq!(c.len(), 2);
        assert_eq!(c.bytes(), "bb".len() + "again".len());
        let ids: Vec<&str> = c.entries().iter().map(|(id, _)| *id).collect();
        assert_eq!(ids, ["b", "a"]);
        // "b" is now the oldest: the TTL drops it and keeps the repeated "a".
        c.expire(9_999 + 5, 10);
        assert_eq!(c.entries().iter().map(|(id, _)| *id).collect::<Vec<_>>(), ["a"]);
        assert_eq!(c.expired, 1);
    }

    #[test]
    fn the_caps_drop_the_oldest() {
        let cfg = PipelineConfig {
            cache_entries: 3,
            cache_bytes: 10,
            ..PipelineConfig::default()
        };
        let mut c = FeedbackCache::default();
        for (i, id) in ["a", "b", "c", "d"].iter().enumerate() {
            c.insert((*id).into(), entry("xx", i as u64), &cfg);
        }
        assert_eq!(
            c.entries().iter().map(|(id, _)| *id).collect::<Vec<_>>(),
            ["b", "c", "d"]
        );
        c.insert("e".into(), entry("xxxxxxxx", 9), &cfg);
        // 2 + 8 bytes fit the 10-byte cap only without "b" and "c".
        assert_eq!(c.entries().iter().map(|(id, _)| *id).collect::<Vec<_>>(), ["d", "e"]);
        assert_eq!((c.evicted, c.bytes()), (3, 10));
        let back = FeedbackCache::from_entries(
            c.entries()
                .into_iter()
                .map(|(id, e)| (id.to_string(), e.clone()))
                .collect(),
            c.expired,
            c.evicted,
        );
        assert_eq!(back, c);
    }

    #[test]
    fn texts_are_held_compressed_when_that_saves_and_read_back_whole() {
        let prose = "The quick brown fox jumps over the lazy dog, again and again. ".repeat(40);
        // Bytes that do not repeat: compressing them would not save.
        let mut x = 0x9e37_79b9_u32;
        let noise: String = (0..4096)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                char::from(b'!' + (x % 90) as u8)
            })
            .collect();
        for (text, packed) in [(prose, true), (noise, false), ("short, é ✓".to_string(), false)] {
            let p = Packed::Plain(text.clone()).packed();
            assert_eq!(matches!(p, Packed::Lz4(_)), packed, "{} bytes", text.len());
            assert!(p.len() <= text.len());
            assert_eq!(p.text().as_deref(), Some(text.as_str()));
        }
        let cfg = PipelineConfig::default();
        let mut c = FeedbackCache::default();
        let long = "spam spam spam lovely spam ".repeat(100);
        c.insert("a".into(), entry(&long, 0), &cfg);
        // The cap counts what is held: a fraction of the text here.
        assert!(c.bytes() < long.len() / 4, "{} of {}", c.bytes(), long.len());
        assert_eq!(c.get("a").and_then(|e| e.text.text()), Some(long));
    }
}
