//! The JSON-lines source: a file or stdin, read on its own thread so the
//! daemon's loop never blocks on input and can always react to a shutdown.
//! Positions are line numbers: the checkpoint holds the next line to read of
//! each input it has read, keyed by the input's first line (an
//! [`InputKey`]), and the mark of the line before it; the source skips the
//! lines a checkpoint holds and refuses an input that only begins like the
//! one checkpointed. Its thread reads the lines in batches
//! ([`super::ahead::Batch`]) and prepares them for the model; it does not
//! learn from them (the pipeline does) nor write outputs ([`super::sinks`]).

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

use super::ahead::{Batch, QUEUE};
use super::bounded::{Got, read_bounded};
use crate::checkpoint::{InputKey, LinePosition, Positions};
use crate::pipeline::Preparer;

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
    /// Sent once, when the first line has been read, before any lines:
    /// the input's key and the lines it skips.
    Start(Resume),
    /// Lines of the input, in order, from line `first` (0-based), and,
    /// when the source prepares ([`LineSource::open`]), the messages
    /// prepared of them. Given back with [`LineSource::done`].
    Lines(Batch),
    /// The input ended.
    End,
    /// Reading failed.
    Error(io::Error),
    /// Not the input's: an endpoint queued a lesson ([`LineSource::waker`]),
    /// for the loop to learn now rather than at its next tick.
    Woken,
}

/// Lines of a JSON-lines input, read ahead on a thread.
///
/// The thread hands lines over in batches: up to
/// [`super::ahead::BATCH_LINES`], or fewer when it has read all the input
/// it has been given so far, so a line that arrives alone (stdin from a
/// slow producer) is passed on at once, never held back to fill a batch.
/// One line per hand-over cost a thread wake-up per line: a quarter of the
/// CPU of `classifyd run` over SMS went to the scheduler. At most
/// [`QUEUE`] batches and [`READ_AHEAD_BYTES`] wait.
#[derive(Debug)]
pub(crate) struct LineSource {
    rx: Receiver<LineEvent>,
    /// The reader's channel, for [`LineSource::waker`] (so the channel
    /// never disconnects: the reader's end is seen by its last event, or
    /// by `reader` having finished).
    tx: mpsc::SyncSender<LineEvent>,
    reader: std::thread::JoinHandle<()>,
    /// Where batches go back to the reader once done with: reused, and
    /// freed by the thread that allocated them.
    spent: mpsc::Sender<Batch>,
    /// The read-ahead's bytes, and those of the batch in hand.
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

/// Most bytes of lines and their prepared messages read ahead (batches
/// sent and not yet taken, and the one in hand): 16 MiB. Counted in
/// batches alone (64 of them), 20 Newsgroups' prepared messages (their
/// character n-grams) held some 140 MB ahead, past the memory bound of
/// the configuration (docs/reliability.md).
pub(crate) const READ_AHEAD_BYTES: usize = 16 << 20;

/// The bytes read ahead, shared by the reader thread (which waits for
/// room before it sends a batch) and the source (which frees a batch's
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
    /// one batch over the budget still goes), then holds them; false when
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

impl LineSource {
    /// Opens `input` (a path, or "-" for stdin) and skips the lines that
    /// `positions` (a checkpoint's) hold of it, once its first line shows
    /// which input it is.
    /// `input_name`, if given, keys the input's position instead of its
    /// first line (`--input-name`).
    /// A line over `max_line` bytes is never held whole: see [`super::ahead::Line::Oversized`].
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
        let label = if input == "-" { "stdin" } else { input };
        Ok(Self::spawn(
            reader,
            (positions, input_name),
            (label, name),
            (max_line, preparer),
        ))
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
        Self::spawn(reader, (positions, input_name), (&name.clone(), name), (max_line, None))
    }

    fn spawn(
        reader: Box<dyn Read + Send>,
        (positions, input_name): (Positions, Option<String>),
        (label, name): (&str, String),
        (max_line, preparer): (usize, Option<Preparer>),
    ) -> Self {
        let (tx, rx) = mpsc::sync_channel(QUEUE);
        let (spent, spent_rx) = mpsc::channel();
        let budget = Arc::new(Budget::default());
        let mut reading = Reading {
            positions,
            label: label.to_string(),
            input_name,
            max_line,
            preparer,
            spent: spent_rx,
            budget: Arc::clone(&budget),
        };
        let to_loop = tx.clone();
        let reader = std::thread::Builder::new()
            .name("jsonl-reader".into())
            .spawn(move || read_lines(BufReader::with_capacity(1 << 16, reader), &mut reading, &tx))
            // Spawning fails only when the OS is out of threads: nothing sensible to do.
            .expect("cannot spawn the input reader thread");
        LineSource {
            rx,
            tx: to_loop,
            reader,
            spent,
            budget,
            in_hand: 0,
            name,
        }
    }

    /// The next event, or `None` if nothing came within `timeout`.
    pub(crate) fn next(&mut self, timeout: Duration) -> Option<LineEvent> {
        match self.rx.recv_timeout(timeout) {
            Ok(LineEvent::Lines(batch)) => {
                self.in_hand = batch.bytes();
                Some(LineEvent::Lines(batch))
            }
            Ok(event) => Some(event),
            // A reader that ended without its last event (it panicked).
            Err(RecvTimeoutError::Timeout) if self.reader.is_finished() => {
                Some(self.rx.try_recv().unwrap_or(LineEvent::End))
            }
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => Some(LineEvent::End),
        }
    }

    /// Wakes [`LineSource::next`] with [`LineEvent::Woken`] (when the
    /// queue has room: a full one wakes it anyway).
    pub(crate) fn waker(&self) -> Arc<dyn Fn() + Send + Sync> {
        let tx = self.tx.clone();
        Arc::new(move || {
            let _ = tx.try_send(LineEvent::Woken);
        })
    }

    /// Gives a batch of lines back to the reader, to be filled again.
    pub(crate) fn done(&mut self, batch: Batch) {
        self.budget.free(std::mem::take(&mut self.in_hand));
        // The reader may have finished: then it is just dropped.
        let _ = self.spent.send(batch);
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
    /// Batches the daemon is done with, to reuse.
    spent: Receiver<Batch>,
    /// The bytes read ahead.
    budget: Arc<Budget>,
}

impl Reading {
    /// The error for a failed read of the input.
    fn failed(&self, e: &io::Error) -> LineEvent {
        LineEvent::Error(io::Error::new(
            e.kind(),
            format!("cannot read input {}: {e}", self.label),
        ))
    }

    /// The error for an input that has the position key of one the
    /// checkpoint has read `skip` lines of, but is not it (`why`).
    fn another_input(&self, skip: u64, why: &str) -> LineEvent {
        let (under, remedy) = match &self.input_name {
            Some(name) => (format!("the name {name:?}"), "give it another --input-name"),
            None => (
                "the same first line".to_string(),
                "give it a name of its own with --input-name (or give its lines ids)",
            ),
        };
        LineEvent::Error(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "input {} is not the input the checkpoint has read {skip} lines of under {under}: {why}. Nothing \
                 of it was skipped or learned. To learn it beside that input, {remedy}",
                self.label
            ),
        ))
    }

    /// Reads past the lines the checkpoint holds (`resume`), `line` holding
    /// the first (as `got` says); the first line not held goes into
    /// `batch`. An input whose last skipped line is not the one its mark
    /// says the checkpoint learned is refused: it is another input with
    /// the same first line (or name). Returns the event that ends the
    /// input first, if one does.
    fn skip(
        &self,
        r: &mut impl io::BufRead,
        (resume, mut got): (&Resume, Got),
        line: &mut Vec<u8>,
        batch: &mut Batch,
    ) -> Option<LineEvent> {
        let (skip, mark) = (resume.skip, resume.mark);
        for number in 0.. {
            if number > 0 {
                got = match read_bounded(r, self.max_line, line) {
                    Ok(got) => got,
                    Err(e) => return Some(self.failed(&e)),
                };
            }
            match got {
                Got::End if number < skip && mark.is_some() => {
                    let why = format!("it has only {number} lines (unless that input was cut short)");
                    return Some(self.another_input(skip, &why));
                }
                Got::End if number < skip => {
                    // A checkpoint from before marks: the line to check against is not known.
                    tracing::warn!(
                        lines = number,
                        checkpoint_position = skip,
                        "the input ended before the line its checkpoint had reached: nothing new was read \
                         (was it cut short, or rewritten with the same first line?)"
                    );
                    return Some(LineEvent::End);
                }
                Got::End => return Some(LineEvent::End),
                _ if number >= skip => {
                    batch.clear(number);
                    batch.push(line, &got);
                    return None;
                }
                _ if number + 1 == skip && mark.is_some_and(|m| m != LinePosition::mark_of(line)) => {
                    let why = format!("its line {skip} differs from the one learned there");
                    return Some(self.another_input(skip, &why));
                }
                _ => {}
            }
        }
        None
    }
}

/// The reader thread: on the first line, sends where the input resumes
/// (found in the positions), then `r`'s lines from there on, in batches
/// (prepared when there is a preparer, repeats counted: the reader's
/// work, not the loop's), then `End` or the error that stopped it (naming
/// the input); returns early when the receiver has gone.
fn read_lines(mut r: BufReader<Box<dyn Read + Send>>, reading: &mut Reading, tx: &SyncSender<LineEvent>) {
    let mut line = Vec::new();
    // An oversized first line is known by its prefix (its key, its mark).
    let resume = match read_bounded(&mut r, reading.max_line, &mut line) {
        Err(e) => Err(reading.failed(&e)),
        Ok(Got::End) => Err(LineEvent::End),
        Ok(got) => Ok((
            Resume::find(&reading.positions, &line, reading.input_name.as_deref()),
            got,
        )),
    };
    let (resume, first) = match resume {
        Ok(found) => found,
        Err(last) => return drop(tx.send(last)),
    };
    let mut batch = Batch::default();
    let skipped = reading.skip(&mut r, (&resume, first), &mut line, &mut batch);
    if tx.send(LineEvent::Start(resume)).is_err() {
        return;
    }
    if let Some(last) = skipped {
        return drop(tx.send(last));
    }
    let last = loop {
        // The line after the skipped ones goes on alone if nothing more has come.
        let read = if batch.len() == 1 && r.buffer().is_empty() {
            Ok(false)
        } else {
            batch.read(
                &mut r,
                (reading.max_line, usize::MAX),
                |r| r.buffer().is_empty(),
                &mut line,
            )
        };
        let ended = match read {
            Ok(ended) => ended,
            Err(e) => break reading.failed(&e),
        };
        let next = batch.first + batch.len() as u64;
        if batch.len() > 0 {
            if let Some(p) = &mut reading.preparer {
                batch.prepare(p, true);
            }
            let full = std::mem::replace(&mut batch, reading.spent.try_recv().unwrap_or_default());
            if !reading.budget.take(full.bytes()) || tx.send(LineEvent::Lines(full)).is_err() {
                return; // the daemon has gone
            }
        }
        if ended {
            break LineEvent::End;
        }
        batch.clear(next);
    };
    let _ = tx.send(last);
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;
    use crate::transport::ahead::Line;

    /// The read-ahead budget lets one batch through whatever its size,
    /// holds the next until bytes are freed, and lets go of a reader
    /// whose source has gone.
    #[test]
    fn the_read_ahead_waits_for_room_in_bytes() {
        let budget = Arc::new(Budget::default());
        assert!(
            budget.take(READ_AHEAD_BYTES * 2),
            "one batch over the budget still goes"
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
            "the second batch waited for the first to be freed"
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
                Some(LineEvent::Lines(mut batch)) => {
                    lines_of_batch(&mut batch, &mut out);
                    source.done(batch);
                }
                Some(LineEvent::End) => return (start, out, None),
                Some(LineEvent::Error(e)) => return (start, out, Some(e.to_string())),
                Some(LineEvent::Woken) => panic!("woken with no waker given out"),
                None => panic!("the source went quiet"),
            }
        }
    }

    /// Appends the lines of `batch` to `out` (an oversized one as such).
    fn lines_of_batch(batch: &mut Batch, out: &mut Lines) {
        let each = batch.each(|(number, _), line, _| {
            out.push(match line {
                Line::Whole(bytes) => (number, bytes.to_vec()),
                Line::Oversized { prefix, length } => (number, format!("over {length} {}", prefix.len()).into()),
            });
            Ok::<_, ()>(())
        });
        assert_eq!(each, Ok(()));
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
    fn lines_in_order_across_batches_after_skipping() {
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
        // The writer stays open: a reader holding lines back to fill a batch
        // would time out here.
        match source.next(Duration::from_secs(10)) {
            Some(LineEvent::Start(r)) => assert_eq!(r.skip, 0),
            other => panic!("expected the input's start, got {other:?}"),
        }
        // The next batch `source` sends, within the test's patience.
        let next_lines = |source: &mut LineSource| match source.next(Duration::from_secs(10)) {
            Some(LineEvent::Lines(mut batch)) => {
                let mut lines = Vec::new();
                lines_of_batch(&mut batch, &mut lines);
                lines
            }
            other => panic!("expected a line, got {other:?}"),
        };
        assert_eq!(next_lines(&mut source), vec![(0, b"{\"text\": \"first\"}".to_vec())]);
        assert!(source.next(Duration::from_millis(50)).is_none());
        // So is a lone line later on.
        writer.write_all(b"second\n").unwrap();
        assert_eq!(next_lines(&mut source), vec![(1, b"second".to_vec())]);
        writer.write_all(b"third\n").unwrap();
        drop(writer);
        assert_eq!(lines_of(&mut source), (None, vec![(2, b"third".to_vec())]));
    }

    /// The source hands an oversized line on as such, and the lines after it.
    #[test]
    fn the_source_passes_oversized_lines_on() {
        let input = format!("{{\"text\": \"{}\"}}\n{{\"text\": \"ok\"}}\n", "y".repeat(5000));
        let reader = Box::new(std::io::Cursor::new(input.into_bytes()));
        let mut source = LineSource::from_reader(reader, Positions::default(), "t".into(), None, 1000);
        let lines: Vec<_> = lines_of(&mut source)
            .1
            .into_iter()
            .map(|(n, l)| format!("{n} {}", String::from_utf8_lossy(&l)))
            .collect();
        assert_eq!(lines, ["0 over 5012 1000", r#"1 {"text": "ok"}"#]);
    }
}
