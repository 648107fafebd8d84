//! The read-ahead: messages read and prepared (parsed, rendered, tokenized,
//! hashed, counted: no model needed) on other threads while the model's
//! thread learns and predicts, handed back in order. One machine for
//! `eval`, `run` on JSON lines and the Kafka daemon:
//!
//! - a [`Batch`] holds lines read from an input (bounded: a line over the
//!   cap keeps only its first bytes) and the messages prepared of them;
//! - [`in_order`] fills items on a thread of its own, optionally fans them
//!   out to several preparing threads, and hands them back to the calling
//!   thread in the order they were filled (`eval --threads N`; a Kafka
//!   batch's records, a few at a time). Spent items go back to be filled
//!   again, so their buffers are reused and freed by the thread that
//!   allocated them (fresh ones cost a third more CPU in page faults and
//!   cross-thread frees).
//!
//! The JSON-lines reader (`super::lines`) fills batches on its own
//! long-lived thread, since it must also find where its input resumes.

use std::io::{self, BufRead};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::Scope;

use super::bounded::{Got, read_bounded};
use crate::pipeline::{Prepared, Preparer};

/// Lines per batch (a batch also ends after `BATCH_BYTES` of text). Small,
/// since the batches in flight and their features are all held at once,
/// and fresh memory is dear (a page fault per 4 KiB).
pub(crate) const BATCH_LINES: usize = 64;
/// Text bytes after which a batch ends early.
const BATCH_BYTES: usize = 1 << 18;
/// Items a reading thread may run ahead of the model's. With the batches'
/// bounds, this bounds the memory in flight: 20 Newsgroups' prepared
/// messages (their character n-grams) are about 2 MB a batch.
pub(crate) const QUEUE: usize = 4;

/// Lines read together, and the messages prepared of them: handed over
/// in a few large pieces rather than one by one.
#[derive(Debug, Default)]
pub(crate) struct Batch {
    /// The lines' bytes, one after another (without their line ends).
    text: Vec<u8>,
    /// Per line: where it ends in `text` and the bytes it took in the input.
    lines: Vec<(usize, u64)>,
    /// The lines over the size cap (only their first bytes are in
    /// `text`): their index and whole length.
    oversized: Vec<(usize, u64)>,
    /// The number of the batch's first line in its input.
    pub(crate) first: u64,
    /// The messages prepared from the lines, in order (none when the
    /// reader does not prepare).
    pub(crate) prepared: Prepared,
}

/// A line of a batch.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Line<'b> {
    /// The line, whole, without its line end.
    Whole(&'b [u8]),
    /// A line over the size cap: its first bytes and its whole length.
    Oversized { prefix: &'b [u8], length: u64 },
}

impl Batch {
    /// Lines held.
    pub(crate) fn len(&self) -> usize {
        self.lines.len()
    }

    /// Forgets every line, keeping the buffers; the next one read is line `first`.
    pub(crate) fn clear(&mut self, first: u64) {
        self.text.clear();
        self.lines.clear();
        self.oversized.clear();
        self.prepared.clear();
        self.first = first;
    }

    /// Appends a line [`read_bounded`] got (not `End`), `taken` bytes of input.
    pub(crate) fn push(&mut self, line: &[u8], got: &Got) {
        let taken = match *got {
            Got::Oversized { length, taken } => {
                // Read past, never held: its first bytes go to the dead letters.
                self.oversized.push((self.lines.len(), length));
                taken
            }
            Got::Line { taken } => taken,
            Got::End => return,
        };
        self.text.extend_from_slice(line);
        self.lines.push((self.text.len(), taken));
    }

    /// Reads lines of `reader` (a line over `max` bytes read past, its
    /// first bytes kept) until the batch is full, `limit` lines are held,
    /// or `pause` says to hand on what it holds (a JSON-lines reader whose
    /// buffer holds nothing more of what its input has given so far: a
    /// line that arrives alone is passed on at once). True when the input
    /// has ended; `line` is scratch.
    pub(crate) fn read<R: BufRead>(
        &mut self,
        reader: &mut R,
        (max, limit): (usize, usize),
        pause: impl Fn(&R) -> bool,
        line: &mut Vec<u8>,
    ) -> io::Result<bool> {
        while self.lines.len() < limit.min(BATCH_LINES) && self.text.len() < BATCH_BYTES {
            let got = read_bounded(reader, max, line)?;
            if got == Got::End {
                return Ok(true);
            }
            self.push(line, &got);
            if pause(reader) {
                break;
            }
        }
        Ok(false)
    }

    /// Prepares the lines not yet prepared (a line over the size cap is
    /// refused with its length); with `count`, repeated features are
    /// counted too.
    pub(crate) fn prepare(&mut self, preparer: &mut Preparer, count: bool) {
        let mut over = self.oversized.iter().peekable();
        for i in self.prepared.len()..self.lines.len() {
            let start = if i == 0 { 0 } else { self.lines[i - 1].0 };
            while over.next_if(|&&(at, _)| at < i).is_some() {}
            match over.next_if(|&&(at, _)| at == i) {
                Some(&(_, length)) => preparer.refuse_too_large(length, &mut self.prepared),
                None => preparer.prepare(&self.text[start..self.lines[i].0], count, &mut self.prepared),
            }
        }
    }

    /// Bytes held, as a read-ahead's budget counts them: the lines, the
    /// texts prepared of them, their features.
    pub(crate) fn bytes(&self) -> usize {
        2 * self.text.len() + self.prepared.feature_bytes()
    }

    /// Runs `f` on every line in order, with its number, the bytes it took
    /// in the input, and the prepared messages (the line's is at its index
    /// in the batch); stops at `f`'s first error.
    pub(crate) fn each<E>(
        &mut self,
        mut f: impl FnMut((u64, u64), Line<'_>, (&mut Prepared, usize)) -> Result<(), E>,
    ) -> Result<(), E> {
        let (mut start, mut over) = (0, self.oversized.iter().peekable());
        for (i, &(end, taken)) in self.lines.iter().enumerate() {
            let bytes = &self.text[start..end];
            start = end;
            let line = match over.next_if(|&&(at, _)| at == i) {
                Some(&(_, length)) => Line::Oversized { prefix: bytes, length },
                None => Line::Whole(bytes),
            };
            f((self.first + i as u64, taken), line, (&mut self.prepared, i))?;
        }
        Ok(())
    }
}

/// The threads that prepare ahead of the model's when `--threads` is not
/// given: the cores available but the model's own, at least one.
pub(crate) fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().saturating_sub(1).max(1))
}

/// Reads `reader` to its end (or `limit` lines) in batches, prepared on
/// `threads` threads ahead of this one ([`in_order`]: with one, the
/// reading thread prepares too), and runs `each` on every batch, in order,
/// on this one.
pub(crate) fn each_batch<E>(
    mut reader: impl BufRead + Send,
    (limit, threads): (Option<u64>, usize),
    mut preparer: Preparer,
    each: impl FnMut(&mut Batch) -> Result<(), E>,
) -> Result<(), Stopped<E>> {
    let max = preparer.max_message_bytes();
    let work: Vec<_> = (0..threads)
        .filter(|_| threads > 1)
        .map(|_| {
            let mut preparer = preparer.fresh();
            move |batch: &mut Batch, count| batch.prepare(&mut preparer, count)
        })
        .collect();
    let prepares = work.is_empty();
    let (mut number, mut ended, mut line) = (0, false, Vec::new());
    let feed = move |batch: &mut Batch, count| {
        let left = limit.map_or(usize::MAX, |l| usize::try_from(l - number).unwrap_or(usize::MAX));
        batch.clear(number);
        if ended || left == 0 {
            return Ok(false);
        }
        ended = batch.read(&mut reader, (max, left), |_| false, &mut line)?;
        number += batch.len() as u64;
        if prepares {
            batch.prepare(&mut preparer, count);
        }
        Ok(batch.len() > 0)
    };
    in_order("eval-reader", feed, work, each)
}

/// Records a Kafka batch's helper prepares before it hands them over:
/// enough that a hand-over costs little beside them, few enough that the
/// loop starts soon after the batch does.
const CHUNK: usize = 4;

/// Fewer payload bytes than this in a batch and a helper does not pay:
/// starting one and handing messages over costs more than preparing short
/// messages (Kafka on SMS: 64 records of about 100 bytes, where a helper
/// cut throughput by a quarter; docs/performance.md).
const AHEAD_MIN_BYTES: usize = 32 << 10;

/// Whether a batch of `records` with `bytes` of payload gains from a
/// helper ([`handle_ahead`]); if not, the caller handles its records as
/// they come.
pub(crate) fn worth_a_helper(records: usize, bytes: usize) -> bool {
    records > 1 && bytes >= AHEAD_MIN_BYTES
}

/// Hands each record of `records` to `handle` in order, with its message
/// prepared (`prepare`, with `preparer`) on a helper thread, a few at a
/// time, while the records before it are handled: a transport's batch,
/// whose records are its own, borrowed, never copied. `handle` gets the
/// prepared messages and the record's index among them. The helper lives
/// for the batch, so nothing is in flight between two batches (what
/// happens between them, a rebalance's checkpoint or a new model, sees
/// every record taken either handled or not begun). A batch of one, or a
/// helper that cannot be started, is prepared on this thread. Stops at
/// `handle`'s first error, which it returns.
pub(crate) fn handle_ahead<R: Sync, E>(
    preparer: &mut Preparer,
    records: &[R],
    prepare: impl Fn(&mut Preparer, &R, &mut Prepared) + Sync,
    mut handle: impl FnMut(&R, (&mut Prepared, usize)) -> Result<(), E>,
) -> Result<(), E> {
    if records.len() > 1 {
        let (mut fed, mut done, lent) = (records.chunks(CHUNK), records.chunks(CHUNK), &mut *preparer);
        let feed = |out: &mut Prepared, _| {
            let Some(chunk) = fed.next() else {
                return Ok(false);
            };
            out.clear();
            chunk.iter().for_each(|r| prepare(lent, r, out));
            Ok(true)
        };
        let each = |out: &mut Prepared| {
            let chunk = done.next().unwrap_or_default();
            chunk.iter().enumerate().try_for_each(|(i, r)| handle(r, (out, i)))
        };
        match in_order("prepare-ahead", feed, Vec::<fn(&mut Prepared, bool)>::new(), each) {
            Err(Stopped::Each(e)) => return Err(e),
            // The feed never fails.
            Ok(()) | Err(Stopped::Read(_)) => return Ok(()),
            // No thread to be had: the batch on this one.
            Err(Stopped::Spawn(_)) => {}
        }
    }
    let mut out = Prepared::default();
    for r in records {
        out.clear();
        prepare(preparer, r, &mut out);
        handle(r, (&mut out, 0))?;
    }
    Ok(())
}

/// Why [`in_order`] stopped before its feed ended.
#[derive(Debug)]
pub(crate) enum Stopped<E> {
    /// A thread could not be started (the process's limit): nothing was
    /// handed on.
    Spawn(io::Error),
    /// The feed failed; every item before it was handed on.
    Read(io::Error),
    /// `each` failed on an item; none after it was handed on.
    Each(E),
}

/// What goes through the queues: an item, or the feed's error.
type Handed<T> = io::Result<T>;

/// Fills items with `feed` on a thread named `name` until it says the feed
/// has ended (false: the item was left unfilled), runs `work` on each (with several, item k on
/// `work[k mod n]`, each on a thread of its own; with none, the feeding
/// thread's items go on as they are), and `each` on every item, in the
/// order fed, on this thread. `feed` is given a spent item to reuse, or a
/// new one; it and `work` are told whether this thread lags (half the
/// items allowed ahead wait for it): work either side can do is then done
/// there. Nothing is left in flight when it returns.
pub(crate) fn in_order<T, W, E>(
    name: &str,
    feed: impl FnMut(&mut T, bool) -> io::Result<bool> + Send,
    work: Vec<W>,
    mut each: impl FnMut(&mut T) -> Result<(), E>,
) -> Result<(), Stopped<E>>
where
    T: Default + Send,
    W: FnMut(&mut T, bool) + Send,
{
    let queued = AtomicUsize::new(0);
    let (back, spent) = std::sync::mpsc::channel::<T>();
    std::thread::scope(|scope| {
        let queued = &queued;
        let outs = fan_out(scope, name, work, queued)?;
        let (ins, outs) = match outs {
            Some((ins, outs)) => (ins, outs),
            None => {
                let (tx, rx) = sync_channel(QUEUE);
                (vec![tx], vec![rx])
            }
        };
        spawn(scope, name.into(), move || fill(feed, &spent, ins, queued)).map_err(Stopped::Spawn)?;
        for k in 0.. {
            let Ok(item) = outs[k % outs.len()].recv() else {
                break;
            };
            queued.fetch_sub(1, Ordering::Relaxed);
            let mut item = item.map_err(Stopped::Read)?;
            // On an error the queues are dropped with this frame, so the
            // threads' next sends fail and they end.
            each(&mut item).map_err(Stopped::Each)?;
            // The feed may have ended: then the item is just dropped.
            let _ = back.send(item);
        }
        Ok(())
    })
}

/// The senders to `work`'s threads and the receivers of what each did,
/// in its order; `None` without `work`.
type Queues<T> = Option<(Vec<SyncSender<Handed<T>>>, Vec<Receiver<Handed<T>>>)>;

/// Starts a thread for every part of `work`, each taking items from a
/// queue of its own and handing them on through another.
fn fan_out<'s, 'e: 's, T: Send + 's, W: FnMut(&mut T, bool) + Send + 's, E>(
    scope: &'s Scope<'s, 'e>,
    name: &str,
    work: Vec<W>,
    queued: &'e AtomicUsize,
) -> Result<Queues<T>, Stopped<E>> {
    if work.is_empty() {
        return Ok(None);
    }
    let (mut ins, mut outs) = (Vec::new(), Vec::new());
    for (i, mut work) in work.into_iter().enumerate() {
        // Each queue holds half as many: with N threads, N times as many
        // queues hold items in flight.
        let (in_tx, in_rx) = sync_channel::<Handed<T>>(QUEUE / 2);
        let (out_tx, out_rx) = sync_channel::<Handed<T>>(QUEUE / 2);
        let go = move || {
            for mut item in in_rx {
                if let Ok(item) = &mut item {
                    work(item, queued.load(Ordering::Relaxed) >= QUEUE / 2);
                }
                if out_tx.send(item).is_err() {
                    return;
                }
            }
        };
        spawn(scope, format!("{name}-{i}"), go).map_err(Stopped::Spawn)?;
        ins.push(in_tx);
        outs.push(out_rx);
    }
    Ok(Some((ins, outs)))
}

/// The feeding thread: fills items (spent ones when there are) and sends
/// item k to queue k mod n, until the feed ends, fails, or nobody takes
/// them any more.
fn fill<T: Default>(
    mut feed: impl FnMut(&mut T, bool) -> io::Result<bool>,
    spent: &Receiver<T>,
    ins: Vec<SyncSender<Handed<T>>>,
    queued: &AtomicUsize,
) {
    for k in 0.. {
        let mut item = spent.try_recv().unwrap_or_default();
        let (handed, more) = match feed(&mut item, queued.load(Ordering::Relaxed) >= QUEUE / 2) {
            Ok(true) => (Ok(item), true),
            Ok(false) => return,
            Err(e) => (Err(e), false),
        };
        queued.fetch_add(1, Ordering::Relaxed);
        if ins[k % ins.len()].send(handed).is_err() || !more {
            return;
        }
    }
}

/// Starts a thread named `name` (so that a profile tells the threads
/// apart: scripts/profile_stages.py) in `scope`.
fn spawn<'s, 'e: 's>(scope: &'s Scope<'s, 'e>, name: String, f: impl FnOnce() + Send + 's) -> io::Result<()> {
    std::thread::Builder::new().name(name).spawn_scoped(scope, f).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::{Daemon, Entry, Outcome, Pipeline, PipelineConfig, Raw};

    type Headed = (&'static [u8], Option<&'static [u8]>);

    fn pipeline() -> Pipeline {
        crate::pipeline::tests::pipeline(PipelineConfig::default())
    }

    fn records() -> Vec<Headed> {
        vec![
            (br#"{"text": "win win win cash prize now", "label": "spam"}"#, None),
            (
                br#"{"text": "lunch at noon? lunch is on me", "label": "ham"}"#,
                Some(b"ann"),
            ),
            (b"   ", None),
            (br#"{"id": "u-1", "text": "cash cash prize"}"#, Some(b"bob")),
            (br#"{"text": "not json"#, None),
            (br#"{"id": "u-1", "label": "spam"}"#, Some(b"bob")),
            (
                br#"{"text": "free entry: call now, win a prize!", "label": "spam"}"#,
                Some(b"ann"),
            ),
            (
                br#"{"text": "see you at the station at six", "label": "ham"}"#,
                Some(b"bad name\n"),
            ),
            (br#"{"id": "u-2", "text": "are we still on for lunch"}"#, None),
            (br#"{"id": "u-2", "label": "ham"}"#, None),
            (
                br#"{"text": "urgent: your prize is waiting, call call", "label": "spam"}"#,
                Some(b"cy"),
            ),
            (br#"{"id": "u-3", "text": "win a free lunch prize"}"#, Some(b"ann")),
        ]
    }

    fn prepare(prep: &mut Preparer, r: &Headed, out: &mut Prepared) {
        prep.prepare_reported(r.0, (None, r.1), true, out);
    }

    /// Batches of any size, prepared ahead (and counted there), handle
    /// exactly as records one at a time: the same outcomes, in order.
    #[test]
    fn batches_prepared_ahead_handle_like_records_one_at_a_time() {
        let records = records();
        let id = || "r".to_string();
        let mut one = pipeline();
        let want: Vec<Outcome> = records
            .iter()
            .map(|r| {
                let raw = Raw::Json {
                    raw: r.0,
                    reporter: None,
                    user: r.1,
                };
                one.handle_entry(Entry::Raw(raw), &id, 7, &mut Daemon)
            })
            .collect();
        for size in [1, 2, CHUNK, CHUNK + 1, 9, records.len()] {
            let mut ahead = pipeline();
            let mut prep = ahead.preparer();
            let mut got = Vec::new();
            for batch in records.chunks(size) {
                let handled = handle_ahead(&mut prep, batch, prepare, |_, (p, i)| {
                    got.push(ahead.handle_entry(Entry::Prepared(p, i), &id, 7, &mut Daemon));
                    Ok::<_, ()>(())
                });
                assert_eq!(handled, Ok(()));
            }
            assert_eq!(got, want, "batches of {size}");
        }
    }

    /// A helper only for a batch of several records with enough to prepare.
    #[test]
    fn a_helper_for_batches_of_long_messages_only() {
        assert!(!worth_a_helper(1, 1 << 20), "a lone record");
        assert!(!worth_a_helper(64, 64 * 100), "64 SMS messages");
        assert!(worth_a_helper(64, 64 * 2_300), "64 SpamAssassin messages");
        assert!(worth_a_helper(2, AHEAD_MIN_BYTES));
    }

    /// The first error stops the batch: it is returned, and no record
    /// after it is handled (the helper ends without waiting on the loop).
    #[test]
    fn an_error_stops_the_batch_at_its_record() {
        let records = records();
        let mut prep = pipeline().preparer();
        for stop in [0, 1, CHUNK, records.len() - 1] {
            let mut seen = Vec::new();
            let result = handle_ahead(&mut prep, &records, prepare, |r, _| {
                let n = records.iter().position(|x| std::ptr::eq(x, r)).unwrap_or(usize::MAX);
                seen.push(n);
                if n == stop { Err(n) } else { Ok(()) }
            });
            assert_eq!(result, Err(stop));
            assert_eq!(seen, (0..=stop).collect::<Vec<_>>());
        }
    }

    /// Items come back in the order fed, whatever the number of working
    /// threads, each worked on once; the feed's error comes after every
    /// item fed before it, and `each`'s error stops the rest.
    #[test]
    fn items_come_back_in_order_and_errors_stop_them_where_they_arose() {
        type Work = Box<dyn FnMut(&mut Vec<u64>, bool) + Send>;
        let square: fn() -> Work = || Box::new(|v: &mut Vec<u64>, _| v[0] *= v[0]);
        let feed = |fail_at: Option<u64>| {
            let mut n = 0;
            move |v: &mut Vec<u64>, _| {
                n += 1;
                v.clear();
                v.push(n);
                match fail_at {
                    Some(at) if n == at => Err(io::Error::other("read failed")),
                    _ => Ok(n <= 50),
                }
            }
        };
        for workers in [0, 1, 3] {
            let work: Vec<Work> = (0..workers).map(|_| square()).collect();
            let mut got = Vec::new();
            let done = in_order("t", feed(None), work, |v: &mut Vec<u64>| {
                got.push(v[0]);
                Ok::<_, ()>(())
            });
            assert!(done.is_ok(), "{workers} workers");
            let want: Vec<u64> = (1..=50).map(|n| if workers == 0 { n } else { n * n }).collect();
            assert_eq!(got, want, "{workers} workers");

            let work: Vec<Work> = (0..workers).map(|_| square()).collect();
            let mut got = Vec::new();
            let done = in_order("t", feed(Some(7)), work, |v: &mut Vec<u64>| {
                got.push(v[0]);
                Ok::<_, ()>(())
            });
            assert!(matches!(done, Err(Stopped::Read(_))), "{workers} workers");
            assert_eq!(got.len(), 6, "{workers} workers: the items before the error");

            let work: Vec<Work> = (0..workers).map(|_| square()).collect();
            let mut got = 0;
            let done = in_order("t", feed(None), work, |_: &mut Vec<u64>| {
                got += 1;
                if got == 9 { Err(got) } else { Ok(()) }
            });
            assert!(matches!(done, Err(Stopped::Each(9))), "{workers} workers");
            assert_eq!(got, 9, "{workers} workers");
        }
    }
}
