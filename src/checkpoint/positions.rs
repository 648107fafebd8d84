//! Where each source stands, as a checkpoint records it: typed here (a
//! Kafka partition's next offset, a JSON-lines input's next line and the
//! mark of the line before it), a map of strings on disk, in the form every
//! checkpoint since per-input positions has (`topic/partition`,
//! `jsonl:<key>`, and the marks in `position_marks`), plus the single
//! `jsonl` key of older ones, which a restore still reads.

use std::collections::{BTreeMap, HashMap};
use std::fmt;

/// The prefix of a JSON-lines input's key on disk.
pub const LINES_PREFIX: &str = "jsonl:";
/// The one key of checkpoints written before inputs were told apart: the
/// next line of whatever input the daemon was given.
const LEGACY_LINES: &str = "jsonl";

/// A JSON-lines input's position.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinePosition {
    /// The next line to read (the lines before it are done).
    pub next: u64,
    /// The xxh3-64 of line `next - 1`, when known (checkpoints from
    /// before marks hold none): an input that begins like another but is
    /// not it shows another line there, and is refused rather than resumed.
    pub mark: Option<u64>,
}

/// Every source's position.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Positions {
    /// Next offset to read, by topic, then partition.
    kafka: BTreeMap<String, BTreeMap<i32, u64>>,
    /// By input key (`jsonl:` and its first line's hash, or `jsonl:name:`
    /// and its `--input-name`).
    lines: BTreeMap<String, LinePosition>,
    /// The next line of a checkpoint from before inputs were told apart.
    legacy_line: Option<u64>,
}

/// A key on disk that names no kind of position.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("position key {0:?} is neither a Kafka topic/partition nor a JSON-lines input")]
pub struct UnknownPosition(pub String);

impl Positions {
    pub fn is_empty(&self) -> bool {
        self.kafka.is_empty() && self.lines.is_empty() && self.legacy_line.is_none()
    }

    /// The next offset of `topic`'s `partition`, if recorded.
    pub fn offset(&self, topic: &str, partition: i32) -> Option<u64> {
        self.kafka.get(topic)?.get(&partition).copied()
    }

    /// Records `next` as the next offset of `topic`'s `partition`
    /// (allocating only for a topic not seen before).
    pub fn set_offset(&mut self, topic: &str, partition: i32, next: u64) {
        match self.kafka.get_mut(topic) {
            Some(parts) => {
                parts.insert(partition, next);
            }
            None => {
                self.kafka
                    .insert(topic.to_string(), BTreeMap::from([(partition, next)]));
            }
        }
    }

    /// JSON-lines input `key`'s position, if recorded.
    pub fn line(&self, key: &str) -> Option<LinePosition> {
        self.lines.get(key).copied()
    }

    /// Records JSON-lines input `key`'s position; a mark of `None` keeps
    /// the one recorded (it still describes line `next - 1` when no line
    /// was handled since).
    pub fn set_line(&mut self, key: &str, next: u64, mark: Option<u64>) {
        let mark = mark.or_else(|| self.lines.get(key).and_then(|p| p.mark));
        self.lines.insert(key.to_string(), LinePosition { next, mark });
    }

    /// The next line recorded by a checkpoint from before inputs were
    /// told apart.
    pub fn legacy_line(&self) -> Option<u64> {
        self.legacy_line
    }

    /// Forgets the legacy position (its input now has a key of its own).
    pub fn forget_legacy_line(&mut self) {
        self.legacy_line = None;
    }

    /// The positions as a checkpoint's two maps: positions and marks.
    pub fn to_maps(&self) -> (HashMap<String, u64>, HashMap<String, u64>) {
        let mut positions = HashMap::new();
        for (topic, parts) in &self.kafka {
            for (partition, &next) in parts {
                positions.insert(kafka_key(topic, *partition), next);
            }
        }
        let mut marks = HashMap::new();
        for (key, p) in &self.lines {
            positions.insert(key.clone(), p.next);
            if let Some(mark) = p.mark {
                marks.insert(key.clone(), mark);
            }
        }
        if let Some(next) = self.legacy_line {
            positions.insert(LEGACY_LINES.to_string(), next);
        }
        (positions, marks)
    }

    /// Reads a checkpoint's two maps; a key of no known kind is refused.
    pub fn from_maps(
        positions: impl IntoIterator<Item = (String, u64)>,
        marks: impl IntoIterator<Item = (String, u64)>,
    ) -> Result<Self, UnknownPosition> {
        let mut out = Positions::default();
        let mut marks: HashMap<String, u64> = marks.into_iter().collect();
        for (key, next) in positions {
            if key == LEGACY_LINES {
                out.legacy_line = Some(next);
            } else if key.starts_with(LINES_PREFIX) {
                let mark = marks.remove(&key);
                out.lines.insert(key, LinePosition { next, mark });
            } else {
                let (topic, partition) = parse_kafka_key(&key).ok_or(UnknownPosition(key.clone()))?;
                out.set_offset(topic, partition, next);
            }
        }
        Ok(out)
    }
}

/// Kafka topic names hold no `/`, so the last one splits the key.
fn kafka_key(topic: &str, partition: i32) -> String {
    format!("{topic}/{partition}")
}

fn parse_kafka_key(key: &str) -> Option<(&str, i32)> {
    let (topic, partition) = key.rsplit_once('/')?;
    let partition = partition.parse().ok()?;
    (!topic.is_empty()).then_some((topic, partition))
}

impl fmt::Display for Positions {
    /// One line per position, as `inspect` prints them.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (topic, parts) in &self.kafka {
            for (partition, next) in parts {
                writeln!(f, "  {topic}/{partition}: next offset {next}")?;
            }
        }
        for (key, p) in &self.lines {
            writeln!(f, "  {key}: next line {}", p.next)?;
        }
        if let Some(next) = self.legacy_line {
            writeln!(f, "  {LEGACY_LINES} (any input, an older checkpoint): next line {next}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kind of position goes to the checkpoint's maps and back; a
    /// key of no kind is refused.
    #[test]
    fn positions_round_trip_through_the_checkpoint_maps() {
        let mut p = Positions::default();
        p.set_offset("messages", 0, 42);
        p.set_offset("messages", 3, 7);
        p.set_offset("a.b-c_d", 1, 9);
        p.set_line("jsonl:00ff00ff00ff00ff", 12, Some(99));
        p.set_line("jsonl:name:day2", 3, None);
        let (positions, marks) = p.to_maps();
        assert_eq!(positions["messages/3"], 7);
        assert_eq!(positions["jsonl:name:day2"], 3);
        assert_eq!(marks.len(), 1);
        assert_eq!(Positions::from_maps(positions, marks), Ok(p.clone()));
        // A mark left out keeps the one recorded.
        p.set_line("jsonl:00ff00ff00ff00ff", 13, None);
        assert_eq!(
            p.line("jsonl:00ff00ff00ff00ff"),
            Some(LinePosition {
                next: 13,
                mark: Some(99)
            })
        );
        let legacy = Positions::from_maps([("jsonl".to_string(), 5)], []).unwrap();
        assert_eq!((legacy.legacy_line(), legacy.is_empty()), (Some(5), false));
        for bad in ["jsonlx", "topic/", "/3", "topic/x", "nothing"] {
            assert_eq!(
                Positions::from_maps([(bad.to_string(), 1)], []),
                Err(UnknownPosition(bad.to_string())),
                "{bad}"
            );
        }
    }
}
