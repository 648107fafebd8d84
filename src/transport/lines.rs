//! The JSON-lines source: a file or stdin, read on its own thread so the
//! daemon's loop never blocks on input and can always react to a shutdown.
//! Positions are line numbers: the checkpoint holds the next line to read of
//! each input it has read, keyed by the input's first line (an
//! [`InputKey`]), and the mark of the line before it; the source skips the
//! lines a checkpoint holds and refuses an input that only begins like the
//! one checkpointed. It does not parse lines (the pipeline does) nor write
//! outputs ([`super::sinks`]).

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

use super::bounded::{Got, read_bounded};
use crate::checkpoint::{InputKey, LinePosition, Positions};
use crate::pipeline::{Prepared, Preparer};

/// Where an input starts, found from its first line (or the name it was
/// given) among a checkpoint's positions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Resume {
    /// The input's key.
    pub key: InputKey,
    /// Lines the checkpoint already holds (skipped).
    pub skip: u64,
    /// The position came from an older checkpoint's single position
    /// ([`Positions::legacy_line`]).
    pub legacy: bool,
    /// The mark of line `skip - 1` that the checkpoint holds, if any
    /// (checkpoints from before marks hold none).
    pub mark: Option<u64>,
}

impl Resume {
    /// The input with first line `first_line`, or named `name`: its own
    /// position if the checkpoint has one, else the legacy key's (a
    /// checkpoint from before inputs were told apart is assumed to be of
    /// this input, as it was then), else its first line.
    pub(crate) fn find(positions: &Positions, first_line: &[u8], name: Option<&str>) -> Self {
        let key = name.map_or_else(|| InputKey::first_line(first_line), InputKey::named);
        let (skip, legacy, mark) = match (positions.line(&key), positions.legacy_line()) {
            (Some(p), _) => (p.next, false, p.mark),
            (None, Some(n)) => (n, true, None),
            (None, None) => (0, false, None),
        };
        Resume {
            key,
            skip,
            legacy,
            mark,
        }
    }
}

/// What the reader thread sends.
#[derive(Debug)]
pub(crate) enum LineEvent {
    /// Sent once, when the first line has been read, before any `Line`:
    /// the input's key and the lines it skips.
    Start(Resume),
    /// Line `number` (0-based) of the input, without its newline; and,
    /// when the source prepares ([`LineSource::open`]), the index of its
    /// message in the chunk's [`LineSource::prepared`].
    Line {
        number: u64,
        bytes: Vec<u8>,
        prepared: Option<usize>,
    },
    /// Line `number`, longer than the cap: only its first bytes were kept
    /// (the rest was read past in chunks, never held), and its length.
    Oversized { number: u64, prefix: Vec<u8>, length: u64 },
    /// The input ended.
    End,
    /// Reading failed.
    Error(io::Error),
}

/// Lines of a JSON-lines input, read ahead on a thread.
///
/// The thread hands lines over in chunks: up to [`CHUNK_LINES`], or fewer
/// when it has read all the input it has been given so far, so a line that
/// arrives alone (stdin from a slow producer) is passed on at once, never
/// held back to fill a chunk. One line per hand-over cost a thread wake-up
/// per line: a quarter of the CPU of `classifyd run` over SMS went to the
/// scheduler.
#[derive(Debug)]
pub(crate) struct LineSource {
    rx: Receiver<Chunk>,
    /// Events received and not yet taken, in order.
    pending: std::vec::IntoIter<LineEvent>,
    /// The messages the reader prepared of those events' lines.
    prepared: Prepared,
    /// Where a chunk's prepared messages go back to the reader once the
    /// next chunk comes: reused, and freed by the thread that allocated
    /// them (fresh ones cost `run` over SMS a third more CPU in page
    /// faults and cross-thread frees).
    spent: mpsc::Sender<Prepared>,
    /// The read-ahead's bytes, and those of the chunk in hand.
    budget: Arc<Budget>,
    in_hand: usize,
    /// A short label for positions and default ids ("stdin" or the file name).
    pub name: String,
}

impl Drop for LineSource {
    fn drop(&mut self) {
        self.budget.closed.store(true, Ordering::Release);
        self.budget.freed.notify_all();
    }
}

/// Events handed over at once, with the messages prepared of their lines.
#[derive(Debug, Default)]
struct Chunk {
    events: Vec<LineEvent>,
    prepared: Prepared,
    /// What it holds, as the read-ahead budget counts it.
    bytes: usize,
}

/// Most bytes of lines and their prepared messages read ahead (chunks
/// sent and not yet taken, and the one in hand): 16 MiB. Counted in
/// chunks alone (64 of them), 20 Newsgroups' prepared messages (their
/// character n-grams) held some 140 MB ahead, past the memory bound of
/// the configuration (docs/reliability.md).
pub(crate) const READ_AHEAD_BYTES: usize = 16 << 20;

/// The bytes read ahead, shared by the reader thread (which waits for
/// room before it sends a chunk) and the source (which frees a chunk's
/// bytes when it is done with it).
#[derive(Debug, Default)]
struct Budget {
    held: Mutex<usize>,
    freed: Condvar,
    /// The source has gone: the reader stops waiting.
    closed: AtomicBool,
}

impl Budget {
    /// Waits until `n` more bytes fit (always, when nothing is held:
    /// one chunk over the budget still goes), then holds them; false when
    /// the source has gone.
    fn take(&self, n: usize) -> bool {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        while *held > 0 && *held + n > READ_AHEAD_BYTES {
            if self.closed.load(Ordering::Acquire) {
                return false;
            }
            held = (self.freed.wait_timeout(held, Duration::from_millis(100)))
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        *held += n;
        true
    }

    /// Frees `n` bytes taken.
    fn free(&self, n: usize) {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        *held = held.saturating_sub(n);
        self.freed.notify_one();
    }
}

/// Most lines handed over at once.
pub(crate) const CHUNK_LINES: usize = 64;

impl LineSource {
    /// Opens `input` (a path, or "-" for stdin) and skips the lines that
    /// `positions` (a checkpoint's) hold of it, once its first line shows
    /// which input it is.
    /// `input_name`, if given, keys the input's position instead of its
    /// first line (`--input-name`).
    /// A line over `max_line` bytes is never held whole: see [`LineEvent::Oversized`].
    /// With `preparer`, the reader thread also prepares each line (parses,
    /// renders, tokenizes, hashes and counts: no model needed), so the
    /// daemon's loop only learns and predicts.
    pub(crate) fn open(
        input: &str,
        positions: Positions,
        input_name: Option<String>,
        (max_line, preparer): (usize, Option<Preparer>),
    ) -> io::Result<Self> {
        let (reader, name): (Box<dyn Read + Send>, String) = if input == "-" {
            (Box::new(io::stdin()), "stdin".to_string())
        } else {
            let f =
                File::open(input).map_err(|e| io::Error::new(e.kind(), format!("cannot open input {input}: {e}")))?;
            let name = Path::new(input)
                .file_name()
                .map_or(input.to_string(), |n| n.to_string_lossy().into_owned());
            (Box::new(f), name)
        };
        let label = if input == "-" {
            "stdin".to_string()
        } else {
            input.to_string()
        };
        let reading = Reading {
            positions,
            label,
            input_name,
            max_line,
            preparer,
            spent: None,
            budget: Arc::default(),
        };
        Ok(Self::spawn(reader, reading, name))
    }

    /// Reads lines from any reader (tests use in-memory ones); `input_name`
    /// as for [`LineSource::open`].
    #[cfg(test)]
    pub(crate) fn from_reader(
        reader: Box<dyn Read + Send>,
        positions: Positions,
        name: String,
        input_name: Option<String>,
        max_line: usize,
    ) -> Self {
        let reading = Reading {
            positions,
            label: name.clone(),
            input_name,
            max_line,
            preparer: None,
            spent: None,
            budget: Arc::default(),
        };
        Self::spawn(reader, reading, name)
    }

    fn spawn(reader: Box<dyn Read + Send>, mut reading: Reading, name: String) -> Self {
        // Up to 64 chunks read ahead, and at most READ_AHEAD_BYTES.
        let (tx, rx) = mpsc::sync_channel(64);
        let (spent, spent_rx) = mpsc::channel();
        reading.spent = Some(spent_rx);
        let budget = Arc::new(Budget::default());
        reading.budget = Arc::clone(&budget);
        std::thread::Builder::new()
            .name("jsonl-reader".into())
            .spawn(move || read_lines(BufReader::with_capacity(1 << 16, reader), &mut reading, &tx))
            // Spawning fails only when the OS is out of threads: nothing sensible to do.
            .expect("cannot spawn the input reader thread");
        LineSource {
            rx,
            pending: Vec::new().into_iter(),
            prepared: Prepared::default(),
            spent,
            budget,
            in_hand: 0,
            name,
        }
    }

    /// The messages prepared of the lines of the events taken since the
    /// last chunk came ([`LineEvent::Line`]'s `prepared`).
    pub(crate) fn prepared(&mut self) -> &mut Prepared {
        &mut self.prepared
    }

    /// The next event, or `None` if nothing came within `timeout`.
    pub(crate) fn next(&mut self, timeout: Duration) -> Option<LineEvent> {
        if let Some(ev) = self.pending.next() {
            return Some(ev);
        }
        match self.rx.recv_timeout(timeout) {
            Ok(chunk) => {
                self.pending = chunk.events.into_iter();
                // The chunk in hand is done with: its bytes are free.
                self.budget.free(std::mem::replace(&mut self.in_hand, chunk.bytes));
                let done = std::mem::replace(&mut self.prepared, chunk.prepared);
                // The reader may have finished: then it is just dropped.
                let _ = self.spent.send(done);
                // The reader never sends an empty chunk; were one to come, it is a quiet spell.
                self.pending.next()
            }
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => Some(LineEvent::End),
        }
    }
}

/// What the reader thread needs besides its input.
struct Reading {
    /// The checkpoint's positions (and marks), to find where the input resumes.
    positions: Positions,
    /// The input as the user gave it, for errors.
    label: String,
    /// `--input-name`: keys the input instead of its first line.
    input_name: Option<String>,
    /// The longest line held whole.
    max_line: usize,
    /// Prepares each line when given.
    preparer: Option<Preparer>,
    /// Prepared messages the daemon is done with, to reuse.
    spent: Option<mpsc::Receiver<Prepared>>,
    /// The bytes read ahead.
    budget: Arc<Budget>,
}

impl Reading {
    /// A chunk to fill: with a spent chunk's buffers when there is one.
    fn chunk(&self) -> Chunk {
        let mut prepared = self.spent.as_ref().and_then(|r| r.try_recv().ok()).unwrap_or_default();
        prepared.clear();
        Chunk {
            events: Vec::with_capacity(CHUNK_LINES),
            prepared,
            bytes: 0,
        }
    }
}

/// The error for an input that has the position key of one the checkpoint
/// has read `skip` lines of, but is not it (`why`).
fn another_input(reading: &Reading, skip: u64, why: &str) -> LineEvent {
    let (under, remedy) = match &reading.input_name {
        Some(name) => (format!("the name {name:?}"), "give it another --input-name"),
        None => (
            "the same first line".to_string(),
            "give it a name of its own with --input-name (or give its lines ids)",
        ),
    };
    LineEvent::Error(io::Error::new(
        io::ErrorKind::InvalidData,
        format!(
            "input {} is not the input the checkpoint has read {skip} lines of under {under}: {why}. Nothing of \
             it was skipped or learned. To learn it beside that input, {remedy}",
            reading.label
        ),
    ))
}

/// Line `number`'s event: an oversized line's first bytes and length, or
/// the line, prepared into `prepared` when there is a preparer (repeats
/// counted here: the reader's work, not the loop's).
fn line_event(
    got: Got,
    number: u64,
    buf: Vec<u8>,
    (preparer, prepared): (&mut Option<Preparer>, &mut Prepared),
) -> LineEvent {
    if let Got::Oversized { length, .. } = got {
        return LineEvent::Oversized {
            number,
            prefix: buf,
            length,
        };
    }
    let prepared = preparer.as_mut().map(|p| {
        p.prepare(&buf, true, prepared);
        prepared.len() - 1
    });
    LineEvent::Line {
        number,
        bytes: buf,
        prepared,
    }
}

/// The reader thread: on the first line, sends where the input resumes
/// (found in the positions), then `r`'s lines from there on, in chunks,
/// then `End` or the error that stopped it (naming the input); returns
/// early when the receiver has gone. An input whose last skipped line is
/// not the one its mark says the checkpoint learned is refused with an
/// error: it is another input with the same first line (or name).
/// A chunk is also sent once its lines hold this many bytes (a chunk's
/// share of [`READ_AHEAD_BYTES`]: 64 of them at once).
const CHUNK_BYTES: usize = 256 << 10;

fn read_lines(mut r: BufReader<Box<dyn Read + Send>>, reading: &mut Reading, tx: &mpsc::SyncSender<Chunk>) {
    let label = &reading.label;
    let mut number = 0u64;
    let mut skip = 0u64;
    let mut mark = None;
    let mut chunk = reading.chunk();
    // Bytes of the lines in `chunk`.
    let mut bytes = 0;
    loop {
        let mut buf = Vec::new();
        let last = match read_bounded(&mut r, reading.max_line, &mut buf) {
            Ok(Got::End) if number < skip && mark.is_some() => Some(another_input(
                reading,
                skip,
                &format!("it has only {number} lines (unless that input was cut short)"),
            )),
            Ok(Got::End) => {
                if number < skip {
                    // A checkpoint from before marks: the line to check against is not known.
                    tracing::warn!(
                        lines = number,
                        checkpoint_position = skip,
                        "the input ended before the line its checkpoint had reached: nothing new was read \
                         (was it cut short, or rewritten with the same first line?)"
                    );
                }
                Some(LineEvent::End)
            }
            Ok(got) => {
                // An oversized line is known by its prefix (its key, its mark).
                if number == 0 {
                    let resume = Resume::find(&reading.positions, &buf, reading.input_name.as_deref());
                    (skip, mark) = (resume.skip, resume.mark);
                    chunk.events.push(LineEvent::Start(resume));
                }
                if number + 1 == skip && mark.is_some_and(|m| m != LinePosition::mark_of(&buf)) {
                    Some(another_input(
                        reading,
                        skip,
                        &format!("its line {skip} differs from the one learned there"),
                    ))
                } else {
                    if number >= skip {
                        bytes += buf.len();
                        let event = line_event(got, number, buf, (&mut reading.preparer, &mut chunk.prepared));
                        chunk.events.push(event);
                    }
                    number += 1;
                    None
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => Some(LineEvent::Error(io::Error::new(
                e.kind(),
                format!("cannot read input {label}: {e}"),
            ))),
        };
        let done = last.is_some();
        chunk.events.extend(last);
        // Send when full, at the end, or before a read that may block: the
        // buffer holds nothing more of what the input has given so far.
        let n = chunk.events.len();
        if n > 0 && (done || n >= CHUNK_LINES || bytes >= CHUNK_BYTES || r.buffer().is_empty()) {
            let mut full = std::mem::replace(&mut chunk, reading.chunk());
            // The lines, the texts prepared of them, their features.
            full.bytes = 2 * bytes + full.prepared.feature_bytes();
            bytes = 0;
            if !reading.budget.take(full.bytes) || tx.send(full).is_err() {
                return; // the daemon has gone
            }
        }
        if done {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    /// The read-ahead budget lets one chunk through whatever its size,
    /// holds the next until bytes are freed, and lets go of a reader
    /// whose source has gone.
    #[test]
    fn the_read_ahead_waits_for_room_in_bytes() {
        let budget = Arc::new(Budget::default());
        assert!(
            budget.take(READ_AHEAD_BYTES * 2),
            "one chunk over the budget still goes"
        );
        let waiting = {
            let budget = Arc::clone(&budget);
            std::thread::spawn(move || (budget.take(1), std::time::Instant::now()))
        };
        std::thread::sleep(Duration::from_millis(150));
        let freed_at = std::time::Instant::now();
        budget.free(READ_AHEAD_BYTES * 2);
        let (took, at) = waiting.join().unwrap();
        assert!(
            took && at >= freed_at,
            "the second chunk waited for the first to be freed"
        );
        assert_eq!(*budget.held.lock().unwrap(), 1);
        assert!(budget.take(READ_AHEAD_BYTES - 1), "what fits goes at once");
        budget.closed.store(true, Ordering::Release);
        assert!(!budget.take(10), "a closed source lets the reader go");
    }

    /// Line numbers and bytes, as a source sends them.
    type Lines = Vec<(u64, Vec<u8>)>;

    /// What `source` sends until its end or its error: the one `Start`,
    /// which must come before any line, the lines, and the error.
    fn events(source: &mut LineSource) -> (Option<Resume>, Lines, Option<String>) {
        let (mut start, mut out) = (None, Vec::new());
        loop {
            match source.next(Duration::from_secs(10)) {
                Some(LineEvent::Start(r)) => {
                    assert!(start.is_none() && out.is_empty(), "Start comes once, before any line");
                    start = Some(r);
                }
                Some(LineEvent::Line { number, bytes, .. }) => out.push((number, bytes)),
                Some(LineEvent::Oversized { number, .. }) => out.push((number, b"(oversized)".to_vec())),
                Some(LineEvent::End) => return (start, out, None),
                Some(LineEvent::Error(e)) => return (start, out, Some(e.to_string())),
                None => panic!("the source went quiet"),
            }
        }
    }

    /// The lines `source` sends until its end, which must come without an
    /// error, and its `Start`.
    fn lines_of(source: &mut LineSource) -> (Option<Resume>, Lines) {
        let (start, lines, error) = events(source);
        assert_eq!(error, None);
        (start, lines)
    }

    /// The numbers of the lines `source` sends, and its error if any.
    fn lines_or_error(source: &mut LineSource) -> (Vec<u64>, Option<String>) {
        let (_, lines, error) = events(source);
        (lines.into_iter().map(|(n, _)| n).collect(), error)
    }

    /// The key of checkpoints from before inputs were told apart.
    const LEGACY_POSITION: &str = "jsonl";

    /// How these tests name the mark beside position `key`.
    fn mark_key(key: &str) -> String {
        format!("mark:{key}")
    }

    /// A source over `text` with a checkpoint's `positions` (marks under
    /// [`mark_key`]), named `name` (`--input-name`).
    fn named_source(text: &str, positions: &[(&str, u64)], name: Option<&str>) -> LineSource {
        let (marks, positions): (Vec<_>, Vec<_>) = positions
            .iter()
            .map(|&(k, v)| (k.to_string(), v))
            .partition(|(k, _)| k.starts_with("mark:"));
        let marks = marks.into_iter().map(|(k, v)| (k["mark:".len()..].to_string(), v));
        let positions = Positions::from_maps(positions, marks).expect("known keys");
        let reader = Box::new(io::Cursor::new(text.to_string()));
        LineSource::from_reader(reader, positions, "t".into(), name.map(String::from), 1 << 20)
    }

    fn source_of(text: &str, positions: &[(&str, u64)]) -> LineSource {
        named_source(text, positions, None)
    }

    #[test]
    fn lines_in_order_across_chunks_after_skipping() {
        let text: String = (0..1000).map(|i| format!("line {i}\r\n")).collect();
        let key = InputKey::first_line(b"line 0");
        let mut source = source_of(&text, &[(&key.on_disk(), 10)]);
        let (start, got) = lines_of(&mut source);
        assert_eq!(
            start,
            Some(Resume {
                key,
                skip: 10,
                legacy: false,
                mark: None
            })
        );
        assert_eq!(got.len(), 990);
        for (k, (number, bytes)) in got.iter().enumerate() {
            assert_eq!(*number, k as u64 + 10);
            assert_eq!(bytes, format!("line {}", k + 10).as_bytes());
        }
        // Past the end, the source stays ended.
        assert!(matches!(source.next(Duration::from_millis(10)), Some(LineEvent::End)));
    }

    #[test]
    fn an_input_resumes_by_its_first_line_whatever_else_the_checkpoint_holds() {
        let a = "{\"id\": \"a1\", \"text\": \"x\"}\na2\na3\na4\n";
        let b = "{\"id\": \"b1\", \"text\": \"x\"}\nb2\nb3\n";
        let (ka, kb) = (
            InputKey::first_line(b"{\"id\": \"a1\", \"text\": \"x\"}"),
            InputKey::first_line(b"{\"id\": \"b1\", \"text\": \"x\"}"),
        );
        assert_ne!(ka, kb);
        let (da, db) = (ka.on_disk(), kb.on_disk());
        let (ka_disk, kb_disk) = (da.as_str(), db.as_str());
        // A checkpoint that has read 3 lines of A: B is new to it and starts at its first line.
        let (start, got) = lines_of(&mut source_of(b, &[(ka_disk, 3)]));
        assert_eq!(
            start,
            Some(Resume {
                key: kb.clone(),
                skip: 0,
                legacy: false,
                mark: None
            })
        );
        assert_eq!(got.len(), 3);
        // A resumes at its line 3, also with B's position beside it; the key
        // is the first line's, a CR LF line end not included.
        let crlf = a.replace('\n', "\r\n");
        let (start, got) = lines_of(&mut source_of(&crlf, &[(ka_disk, 3), (kb_disk, 2)]));
        assert_eq!(start.map(|r| (r.key, r.skip)), Some((ka.clone(), 3)));
        assert_eq!(got, vec![(3, b"a4".to_vec())]);
        // A checkpoint from before keys told inputs apart: its one position
        // is taken to be this input's, and flagged.
        let (start, got) = lines_of(&mut source_of(a, &[(LEGACY_POSITION, 2)]));
        assert_eq!(
            start,
            Some(Resume {
                key: ka.clone(),
                skip: 2,
                legacy: true,
                mark: None
            })
        );
        assert_eq!(got.len(), 2);
        // An input's own key wins over the legacy one.
        let (start, _) = lines_of(&mut source_of(a, &[(LEGACY_POSITION, 2), (ka_disk, 4)]));
        assert_eq!(start.map(|r| (r.skip, r.legacy)), Some((4, false)));
        // An input shorter than its position sends nothing after Start, and ends.
        let (start, got) = lines_of(&mut source_of(a, &[(ka_disk, 9)]));
        assert_eq!(start.map(|r| r.skip), Some(9));
        assert!(got.is_empty());
        // An empty input sends no Start: there is no line to know it by.
        assert_eq!(lines_of(&mut source_of("", &[(ka_disk, 3)])), (None, vec![]));
    }

    /// What `source` sends until its end or its error: the lines, and the error.
    /// The mark beside a position tells an input from another that begins
    /// with the same line: the same input (grown, too) resumes, another is
    /// refused before any of its lines is sent; a name keys an input apart.
    #[test]
    fn an_input_that_only_begins_like_the_checkpointed_one_is_refused() {
        let day1 = "same first\nb\nc\n";
        let grown = "same first\nb\nc\nd\n";
        let day2 = "same first\nx\ny\nz\n";
        let key = InputKey::first_line(b"same first").on_disk();
        let mark = mark_key(&key);
        let read_3 = [(key.as_str(), 3), (mark.as_str(), LinePosition::mark_of(b"c"))];
        assert_eq!(lines_or_error(&mut named_source(day1, &read_3, None)), (vec![], None));
        assert_eq!(lines_or_error(&mut named_source(grown, &read_3, None)), (vec![3], None));
        let (lines, err) = lines_or_error(&mut named_source(day2, &read_3, None));
        assert!(lines.is_empty(), "{lines:?}");
        let err = err.expect("another input with the same first line is refused");
        assert!(err.contains("--input-name") && err.contains("line 3"), "{err}");
        // Named, it has a key of its own: read from its first line.
        let (lines, err) = lines_or_error(&mut named_source(day2, &read_3, Some("day2")));
        assert_eq!((lines, err), (vec![0, 1, 2, 3], None));
        let day2_key = InputKey::named("day2").on_disk();
        let day2_mark = mark_key(&day2_key);
        let positions = [
            (day2_key.as_str(), 2),
            (day2_mark.as_str(), LinePosition::mark_of(b"x")),
        ];
        assert_eq!(
            lines_or_error(&mut named_source(day2, &positions, Some("day2"))),
            (vec![2, 3], None)
        );
        // An input shorter than the position, with a mark to check, is refused too.
        let (lines, err) = lines_or_error(&mut named_source("same first\nb\n", &read_3, None));
        assert!(lines.is_empty() && err.is_some_and(|e| e.contains("only 2 lines")));
        // Without a mark (a checkpoint from before marks), no check, as before.
        assert_eq!(
            lines_or_error(&mut named_source(day2, &read_3[..1], None)),
            (vec![3], None)
        );
    }

    #[test]
    fn a_lone_line_is_passed_on_without_waiting_for_more() {
        let (reader, mut writer) = io::pipe().unwrap();
        let mut source = LineSource::from_reader(Box::new(reader), Positions::default(), "pipe".into(), None, 1 << 20);
        writer.write_all(b"{\"text\": \"first\"}\n").unwrap();
        // The writer stays open: a reader holding lines back to fill a chunk
        // would time out here.
        match source.next(Duration::from_secs(10)) {
            Some(LineEvent::Start(r)) => assert_eq!(r.skip, 0),
            other => panic!("expected the input's start, got {other:?}"),
        }
        match source.next(Duration::from_secs(10)) {
            Some(LineEvent::Line { number: 0, bytes, .. }) => assert_eq!(bytes, b"{\"text\": \"first\"}"),
            other => panic!("expected the first line, got {other:?}"),
        }
        assert!(source.next(Duration::from_millis(50)).is_none());
        writer.write_all(b"second\n").unwrap();
        drop(writer);
        assert_eq!(lines_of(&mut source), (None, vec![(1, b"second".to_vec())]));
    }

    /// The source hands an oversized line on as such, and the lines after it.
    #[test]
    fn the_source_passes_oversized_lines_on() {
        let input = format!("{{\"text\": \"{}\"}}\n{{\"text\": \"ok\"}}\n", "y".repeat(5000));
        let reader = Box::new(std::io::Cursor::new(input.into_bytes()));
        let mut source = LineSource::from_reader(reader, Positions::default(), "t".into(), None, 1000);
        let mut events = Vec::new();
        loop {
            match source.next(Duration::from_secs(10)) {
                Some(LineEvent::End) | None => break,
                Some(LineEvent::Oversized { number, prefix, length }) => {
                    events.push(format!("{number} over {length} {}", prefix.len()))
                }
                Some(LineEvent::Line { number, bytes, .. }) => {
                    events.push(format!("{number} {}", String::from_utf8(bytes).unwrap()))
                }
                Some(_) => {}
            }
        }
        assert_eq!(events, ["0 over 5012 1000", r#"1 {"text": "ok"}"#]);
    }
}
