//! The late-label join cache: the texts (and what was published for them)
//! of recent messages, by id, under an entry cap, a byte cap and a TTL,
//! oldest out first. Owns only the cache; the pipeline decides what goes
//! in and what a joined label does.
//!
//! One structure, keyed by id and kept in insertion order (a linked hash
//! map): a message cached again under an id already there replaces it and
//! moves to the back (keeping the label learned for it, when it is the
//! same text), so the cache holds one entry per id whatever the stream
//! repeats, and its size is bounded by the caps alone. It is also the
//! record of what each learned message taught ([`Taught`]: a label can be
//! replaced or forgotten while its message is here; docs/feedback.md).
//!
//! Texts come in as they are. Only when the bytes held reach the byte cap
//! are the oldest texts LZ4-compressed ([`Packed`]), down to seven eighths
//! of the cap, before any entry is dropped: a cache under its cap costs no
//! CPU (compressing every text cost `eval` a fifth of its time, issue 41),
//! and a full one holds as many messages as compressing all would. The
//! byte cap counts the bytes held; a text is read back only when its late
//! label comes.

use std::borrow::Cow;

use hashlink::LinkedHashMap;
use hashlink::linked_hash_map::Entry;

use super::PipelineConfig;
use crate::model::Lesson;

/// A cached text: as it came, until the cache is full
/// ([`Packed::packed`]: LZ4-compressed when that saves an eighth or more
/// of it; short texts and incompressible ones are marked as tried).
#[derive(Clone, Debug)]
pub enum Packed {
    /// As it came, not yet tried.
    Plain(String),
    /// As it came, tried: compressing would not save.
    Stored(String),
    /// The block format, its decoded length first.
    Lz4(Box<[u8]>),
}

/// Two texts are equal when they read back the same, however held.
impl PartialEq for Packed {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Packed::Plain(a) | Packed::Stored(a), Packed::Plain(b) | Packed::Stored(b)) => a == b,
            (Packed::Lz4(a), Packed::Lz4(b)) => a == b,
            _ => self.text() == other.text(),
        }
    }
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
                    Packed::Stored(text)
                }
            }
            Packed::Plain(text) => Packed::Stored(text),
            other => other,
        }
    }

    /// Bytes held (what the byte cap counts).
    pub fn len(&self) -> usize {
        match self {
            Packed::Plain(t) | Packed::Stored(t) => t.len(),
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
    /// Borrowed unless it must be decompressed.
    pub fn text(&self) -> Option<Cow<'_, str>> {
        match self {
            Packed::Plain(t) | Packed::Stored(t) => Some(Cow::Borrowed(t)),
            Packed::Lz4(b) => {
                let bytes = lz4_flex::block::decompress_size_prepended(b).ok()?;
                String::from_utf8(bytes).ok().map(Cow::Owned)
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
    /// The label learned for it, once learned: what a relabel or a
    /// forget takes back (boxed: most entries wait for a label).
    pub taught: Option<Box<Taught>>,
    /// A label held, not learned (its reporter is not trusted), until
    /// another reporter confirms it.
    pub held: Option<Held>,
    /// When it was cached (event time, ms).
    pub at_ms: u64,
    /// Who it is for, if anyone said: its label learns their personal
    /// features too.
    pub user: Option<String>,
}

/// A label learned for a cached message (docs/feedback.md).
#[derive(Clone, Debug, PartialEq)]
pub struct Taught {
    pub labels: Vec<String>,
    /// Who gave it ("" when nobody said).
    pub reporter: String,
    /// Whether it counted in the reported-message vote.
    pub voted: bool,
    /// The step it took; `None` for a label restored from a checkpoint
    /// that did not keep it (then a relabel is learned on top of it).
    pub lesson: Option<Lesson>,
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
    /// Bytes held: texts (compressed) and the steps of learned labels
    /// (what `--feedback-cache-bytes` bounds).
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
    /// the same id); past the byte cap, compresses the oldest texts; then
    /// drops the oldest entries past the caps.
    pub(super) fn insert(&mut self, id: String, mut entry: CacheEntry, cfg: &PipelineConfig) {
        if cfg.cache_entries == 0 {
            return;
        }
        if entry.text.len() > cfg.cache_bytes {
            entry.text = entry.text.packed();
            if entry.text.len() > cfg.cache_bytes {
                return;
            }
        }
        let old = match self.map.entry(id) {
            Entry::Occupied(mut o) => {
                // The same message cached again under its id (a request
                // sent again) keeps what was learned or held of it: a label
                // is a fact about the message. Another text is a new one.
                let old = o.get();
                if (old.taught.is_some() || old.held.is_some()) && old.text == entry.text {
                    entry.taught.clone_from(&old.taught);
                    entry.held.clone_from(&old.held);
                }
                self.bytes += held(&entry);
                Some(o.insert(entry))
            }
            Entry::Vacant(v) => {
                self.bytes += held(&entry);
                v.insert(entry);
                None
            }
        };
        if let Some(old) = old {
            self.bytes -= held(&old);
        }
        if self.bytes > cfg.cache_bytes {
            self.compress_oldest(cfg.cache_bytes - cfg.cache_bytes / 8);
        }
        while self.map.len() > cfg.cache_entries || self.bytes > cfg.cache_bytes {
            if !self.pop_oldest() {
                break;
            }
            self.evicted += 1;
        }
    }

    /// Compresses the oldest texts not yet tried until the bytes held are
    /// at most `target` (or every text has been tried). The tried ones at
    /// the front are walked past again at the next call: a check each,
    /// once per eighth of the cap filled.
    fn compress_oldest(&mut self, target: usize) {
        for (_, e) in self.map.iter_mut() {
            if self.bytes <= target {
                return;
            }
            if let Packed::Plain(_) = e.text {
                let before = e.text.len();
                e.text = std::mem::replace(&mut e.text, Packed::Stored(String::new())).packed();
                self.bytes -= before - e.text.len();
            }
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
                self.bytes -= held(&e);
                true
            }
            None => false,
        }
    }

    /// Records the label learned for the message cached under `id` (its
    /// place in the cache kept); false when it is not cached.
    pub(super) fn teach(&mut self, id: &str, taught: Option<Box<Taught>>) -> bool {
        let Some(e) = self.map.get_mut(id) else {
            return false;
        };
        self.bytes -= held(e);
        e.taught = taught;
        e.held = None;
        self.bytes += held(e);
        true
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

    /// The text kept of message `id`, if it is kept.
    pub fn text_of(&self, id: &str) -> Option<Cow<'_, str>> {
        self.map.get(id)?.text.text()
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

    /// Rebuilds a cache from entries, oldest first, its texts compressed
    /// as a cache that had taken them would hold them under `cap` bytes.
    pub fn from_entries(entries: Vec<(String, CacheEntry)>, expired: u64, evicted: u64, cap: usize) -> Self {
        let mut c = FeedbackCache {
            expired,
            evicted,
            ..Default::default()
        };
        for (id, e) in entries {
            c.bytes += held(&e);
            if let Some(old) = c.map.insert(id, e) {
                c.bytes -= held(&old);
            }
        }
        if c.bytes > cap {
            c.compress_oldest(cap - cap / 8);
        }
        c
    }
}

/// Bytes an entry holds for the cap: its text as held, and its lesson.
fn held(e: &CacheEntry) -> usize {
    e.text.len()
        + e.taught
            .as_ref()
            .and_then(|t| t.lesson.as_ref())
            .map_or(0, Lesson::bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(text: &str, at_ms: u64) -> CacheEntry {
        CacheEntry {
            text: Packed::Plain(text.into()),
            predicted: None,
            score: None,
            taught: None,
            held: None,
            at_ms,
            user: None,
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

    /// The byte cap counts the steps of learned labels beside the texts:
    /// teaching an entry adds its step's bytes, a forget takes them away,
    /// and the next insert keeps the whole under the cap.
    #[test]
    fn learned_steps_count_toward_the_byte_cap() {
        let lesson = Lesson {
            weight: 1.0,
            rate: 0.5,
            moves: [(1, 0.25)].into_iter().collect(),
            added_steps: Default::default(),
            stack_step: Default::default(),
            shared_only: false,
        };
        let taught = || {
            Some(Box::new(Taught {
                labels: vec!["spam".into()],
                reporter: String::new(),
                voted: false,
                lesson: Some(lesson.clone()),
            }))
        };
        let step = lesson.bytes();
        let cfg = PipelineConfig {
            cache_bytes: 3 * (10 + step),
            ..PipelineConfig::default()
        };
        let mut c = FeedbackCache::default();
        for id in ["a", "b", "c"] {
            c.insert(id.into(), entry("0123456789", 0), &cfg);
            assert!(c.teach(id, taught()));
        }
        assert_eq!(c.bytes(), 3 * (10 + step));
        assert!(!c.teach("nobody", taught()));
        c.insert("d".into(), entry("0123456789", 1), &cfg);
        assert_eq!((c.len(), c.evicted), (3, 1));
        assert!(c.bytes() <= cfg.cache_bytes);
        // A label taken back gives its step's bytes back; the text stays.
        assert!(c.teach("b", None));
        assert_eq!(c.bytes(), 3 * 10 + step);
        assert!(c.get("b").is_some_and(|e| e.taught.is_none()));
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
            cfg.cache_bytes,
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
        let long = "spam spam spam lovely spam ".repeat(100);
        let cfg = PipelineConfig {
            cache_bytes: 3 * long.len(),
            ..PipelineConfig::default()
        };
        let mut c = FeedbackCache::default();
        // Under the cap, texts are held as they came.
        for id in ["a", "b"] {
            c.insert(id.into(), entry(&long, 0), &cfg);
        }
        assert_eq!(c.bytes(), 2 * long.len());
        assert!(matches!(c.get("a").unwrap().text, Packed::Plain(_)));
        // Past it, the oldest are compressed rather than dropped, and the
        // cap counts what is held: a fraction of the text here.
        for id in ["c", "d", "e", "f"] {
            c.insert(id.into(), entry(&long, 0), &cfg);
        }
        assert_eq!((c.len(), c.evicted), (6, 0));
        assert!(c.bytes() <= cfg.cache_bytes - cfg.cache_bytes / 8, "{}", c.bytes());
        assert!(matches!(c.get("a").unwrap().text, Packed::Lz4(_)));
        assert_eq!(c.get("a").and_then(|e| e.text.text()).as_deref(), Some(long.as_str()));
        // A restored cache is held the same way under the same cap.
        let entries = c.entries().into_iter().map(|(id, e)| {
            let text = Packed::Plain(e.text.text().unwrap().into_owned());
            (id.to_string(), CacheEntry { text, ..e.clone() })
        });
        let back = FeedbackCache::from_entries(entries.collect(), 0, 0, cfg.cache_bytes);
        assert_eq!((back.len(), back.bytes()), (6, c.bytes()));
    }
}
