//! Where each source stands, as a checkpoint records it: typed here (a
//! Kafka partition's next offset, a JSON-lines input's next line and the
//! mark of the line before it, the input known by an [`InputKey`]), a map
//! of strings on disk, in the form every checkpoint since per-input
//! positions has (`topic/partition`, `jsonl:<key>`, and the marks in
//! `position_marks`), plus the single `jsonl` key of older ones, which a
//! restore still reads. The on-disk forms exist only here.

use std::collections::{BTreeMap, HashMap};
use std::fmt;

/// The prefix of a JSON-lines input's key on disk.
const LINES_PREFIX: &str = "jsonl:";
/// After [`LINES_PREFIX`], the prefix of a named input's key on disk.
const NAMED_PREFIX: &str = "name:";

/// A JSON-lines input, as positions know it.
///
/// An input is known by its first line, not by its name: the same stream
/// resumes where it stopped whether it comes from a file, a renamed or
/// copied file, or stdin, and a file that only grows keeps its key, while
/// the next day's file (whose first line is another message, with its own
/// id) starts at its first line instead of skipping as many lines as the
/// previous file had. `--input-name` names one instead.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum InputKey {
    /// The xxh3-64 of its first line (without its line end).
    FirstLine(u64),
    /// The name it was given (`--input-name`).
    Named(String),
}

impl InputKey {
    /// The input whose first line (without its line end) is `line`.
    pub fn first_line(line: &[u8]) -> Self {
        InputKey::FirstLine(xxhash_rust::xxh3::xxh3_64(line))
    }

    /// The input named `name`.
    pub fn named(name: &str) -> Self {
        InputKey::Named(name.to_string())
    }

    /// Its key in a checkpoint's maps: `jsonl:` and the first line's hash
    /// in hex, or `jsonl:name:` and the name.
    pub fn on_disk(&self) -> String {
        self.to_string()
    }

    /// The key `on_disk` wrote (after its `jsonl:`).
    fn parse(rest: &str) -> Option<Self> {
        if let Some(name) = rest.strip_prefix(NAMED_PREFIX) {
            return Some(InputKey::Named(name.to_string()));
        }
        let hex = rest.len() == 16 && rest.bytes().all(|b| b.is_ascii_hexdigit());
        hex.then(|| u64::from_str_radix(rest, 16).ok())
            .flatten()
            .map(InputKey::FirstLine)
    }
}

impl fmt::Display for InputKey {
    /// The on-disk form (also how logs and `inspect` name the input).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InputKey::FirstLine(hash) => write!(f, "{LINES_PREFIX}{hash:016x}"),
            InputKey::Named(name) => write!(f, "{LINES_PREFIX}{NAMED_PREFIX}{name}"),
        }
    }
}
/// The one key of checkpoints written before inputs were told apart: the
/// next line of whatever input the daemon was given.
const LEGACY_LINES: &str = "jsonl";
/// The lessons log's position.
const LESSONS: &str = "lessons";

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

impl LinePosition {
    /// The mark of a line (without its line end).
    pub fn mark_of(line: &[u8]) -> u64 {
        xxhash_rust::xxh3::xxh3_64(line)
    }
}

/// The JSON-lines input being read: its next line, and the last line
/// handled, whose mark [`Positions::settle`] records (hashed then, once a
/// checkpoint, not once a line).
#[derive(Clone, Debug)]
struct Reading {
    input: InputKey,
    next: u64,
    last_line: Vec<u8>,
    /// Whether a line was handled (else the recorded mark still holds).
    handled: bool,
}

impl Reading {
    fn new(input: InputKey, next: u64) -> Self {
        Reading {
            input,
            next,
            last_line: Vec::new(),
            handled: false,
        }
    }
}

/// Every source's position (equal when what a checkpoint records is: the
/// line being read counts once settled).
#[derive(Clone, Debug, Default)]
pub struct Positions {
    /// Next offset to read, by topic, then partition.
    kafka: BTreeMap<String, BTreeMap<i32, u64>>,
    /// By input.
    lines: BTreeMap<InputKey, LinePosition>,
    /// The next line of a checkpoint from before inputs were told apart.
    legacy_line: Option<u64>,
    /// The lessons log's generation that starts after this checkpoint
    /// (`super::lessons`); none before the log.
    lessons: Option<u64>,
    /// The JSON-lines input being read, once it is known.
    reading: Option<Reading>,
}

impl PartialEq for Positions {
    fn eq(&self, other: &Self) -> bool {
        (self.kafka == other.kafka)
            && (self.lines == other.lines)
            && (self.legacy_line == other.legacy_line)
            && (self.lessons == other.lessons)
    }
}

impl Eq for Positions {}

/// Records input `key`'s position in `lines`; a mark of `None` keeps the
/// one recorded.
fn set_line(lines: &mut BTreeMap<InputKey, LinePosition>, key: &InputKey, next: u64, mark: Option<u64>) {
    match lines.get_mut(key) {
        Some(p) => {
            p.next = next;
            p.mark = mark.or(p.mark);
        }
        None => {
            lines.insert(key.clone(), LinePosition { next, mark });
        }
    }
}

/// A key on disk that names no kind of position.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("position key {0:?} is neither a Kafka topic/partition nor a JSON-lines input")]
pub struct UnknownPosition(pub String);

impl Positions {
    pub fn is_empty(&self) -> bool {
        self.kafka.is_empty() && self.lines.is_empty() && self.legacy_line.is_none() && self.lessons.is_none()
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
    pub fn line(&self, key: &InputKey) -> Option<LinePosition> {
        self.lines.get(key).copied()
    }

    /// Records JSON-lines input `key`'s position; a mark of `None` keeps
    /// the one recorded (it still describes line `next - 1` when no line
    /// was handled since).
    pub fn set_line(&mut self, key: &InputKey, next: u64, mark: Option<u64>) {
        set_line(&mut self.lines, key, next, mark);
    }

    /// A JSON-lines input starts being read: `input`, at line `next` (the
    /// lines before it a checkpoint holds).
    pub fn start_reading(&mut self, input: InputKey, next: u64) {
        self.reading = Some(Reading::new(input, next));
    }

    /// Line `number` of JSON-lines input `input`, whose bytes (or, over
    /// the size cap, first bytes) are `line`, is done: kept as it stands,
    /// recorded by the next [`Positions::settle`].
    pub fn line_done(&mut self, input: &InputKey, number: u64, line: &[u8]) {
        let at = match &mut self.reading {
            Some(at) if at.input == *input => at,
            other => other.insert(Reading::new(input.clone(), number)),
        };
        at.next = number + 1;
        at.last_line.clear();
        at.last_line.extend_from_slice(line);
        at.handled = true;
    }

    /// Records the input being read where it stands, with the mark of its
    /// last line handled: before a checkpoint.
    pub fn settle(&mut self) {
        if let Some(at) = &self.reading {
            let mark = at.handled.then(|| LinePosition::mark_of(&at.last_line));
            set_line(&mut self.lines, &at.input, at.next, mark);
        }
    }

    /// The next line recorded by a checkpoint from before inputs were
    /// told apart.
    pub fn legacy_line(&self) -> Option<u64> {
        self.legacy_line
    }

    /// Forgets the legacy position (its input now has a key of its own).
    /// The lessons log's generation that starts after this checkpoint (0
    /// without one: every lesson in the log is to be learned).
    pub fn lessons(&self) -> u64 {
        self.lessons.unwrap_or(0)
    }

    /// Records the lessons log's position.
    pub fn set_lessons(&mut self, generation: u64) {
        self.lessons = Some(generation);
    }

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
            let key = key.on_disk();
            if let Some(mark) = p.mark {
                marks.insert(key.clone(), mark);
            }
            positions.insert(key, p.next);
        }
        if let Some(next) = self.legacy_line {
            positions.insert(LEGACY_LINES.to_string(), next);
        }
        if let Some(g) = self.lessons {
            positions.insert(LESSONS.to_string(), g);
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
            } else if key == LESSONS {
                out.lessons = Some(next);
            } else if let Some(rest) = key.strip_prefix(LINES_PREFIX) {
                let input = InputKey::parse(rest).ok_or_else(|| UnknownPosition(key.clone()))?;
                let mark = marks.remove(&key);
                out.lines.insert(input, LinePosition { next, mark });
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
        if let Some(g) = self.lessons {
            writeln!(
                f,
                "  {LESSONS}: mail lessons from generation {g} on are not in this checkpoint"
            )?;
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
        let hashed = InputKey::FirstLine(0x00ff_00ff_00ff_00ff);
        p.set_line(&hashed, 12, Some(99));
        p.set_line(&InputKey::named("day2"), 3, None);
        let (positions, marks) = p.to_maps();
        assert_eq!(positions["messages/3"], 7);
        assert_eq!(positions["jsonl:name:day2"], 3);
        assert_eq!(positions["jsonl:00ff00ff00ff00ff"], 12);
        assert_eq!(marks.len(), 1);
        assert_eq!(Positions::from_maps(positions, marks), Ok(p.clone()));
        assert_eq!(InputKey::first_line(b"x").on_disk().len(), "jsonl:".len() + 16);
        // A mark left out keeps the one recorded.
        p.set_line(&hashed, 13, None);
        assert_eq!(
            p.line(&hashed),
            Some(LinePosition {
                next: 13,
                mark: Some(99)
            })
        );
        let legacy = Positions::from_maps([("jsonl".to_string(), 5)], []).unwrap();
        assert_eq!((legacy.legacy_line(), legacy.is_empty()), (Some(5), false));
        for bad in [
            "jsonlx",
            "topic/",
            "/3",
            "topic/x",
            "nothing",
            "jsonl:12",
            "jsonl:zz00ff00ff00ff00",
        ] {
            assert_eq!(
                Positions::from_maps([(bad.to_string(), 1)], []),
                Err(UnknownPosition(bad.to_string())),
                "{bad}"
            );
        }
    }
}
