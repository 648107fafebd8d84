//! A file's lines read and prepared (parsed, rendered, tokenized, hashed:
//! no model needed) ahead of the model's thread, in batches handed over
//! in order: `eval`'s front. With one thread, that thread reads and
//! prepares; with N, one thread reads and N prepare, each every Nth
//! batch, and the model's thread takes the batches back in turn, so the
//! order never changes (docs/performance.md, "More cores").

use std::io::{self, BufRead};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, sync_channel};
use std::thread::Scope;

use super::{CommandError, io_at};
use crate::pipeline::{Prepared, Preparer};
use crate::transport::bounded::{Got, read_bounded};

/// Lines read and prepared together: handed over in a few large pieces
/// rather than one by one.
pub(super) struct Batch {
    /// The lines' bytes, one after another (without their line ends).
    pub(super) text: Vec<u8>,
    /// Per line: where it ends in `text` and the bytes it took in the file.
    pub(super) lines: Vec<(usize, u64)>,
    /// The lines over the size cap (only their first bytes are in
    /// `text`): their index and whole length.
    oversized: Vec<(usize, u64)>,
    /// The messages prepared from the lines, in order.
    pub(super) prepared: Prepared,
}

/// Lines per batch (a batch also ends after `BATCH_BYTES` of text). Small,
/// since the batches in flight and their features are all held at once,
/// and fresh memory is dear (a page fault per 4 KiB).
const BATCH_LINES: usize = 64;
/// Text bytes after which a batch ends early.
const BATCH_BYTES: usize = 1 << 18;
/// Batches a thread may run ahead.
const QUEUE_BATCHES: usize = 4;

/// Batches in flight, or an error of the reader's.
type Handed = io::Result<Batch>;

/// The threads that prepare ahead of the model's when `--threads` is not
/// given: the cores available but the model's own, at least one.
pub(super) fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().saturating_sub(1).max(1))
}

/// Reads `reader` to its end (or `limit` lines) with `threads` threads
/// preparing ahead of this one, and runs `each` on every batch, in order,
/// on this one. Spent batches go back to the reader, so their buffers are
/// reused (and freed by the thread that allocated them).
pub(super) fn each_batch(
    reader: impl BufRead + Send,
    (limit, threads): (Option<u64>, usize),
    preparer: Preparer,
    path: &str,
    mut each: impl FnMut(&mut Batch) -> Result<(), CommandError>,
) -> Result<(), CommandError> {
    let queued = AtomicUsize::new(0);
    let (back_tx, spent) = std::sync::mpsc::channel();
    let source = (reader, limit, preparer.max_message_bytes());
    std::thread::scope(|scope| -> Result<(), CommandError> {
        let queued = &queued;
        let outs = if threads <= 1 {
            let (tx, rx) = sync_channel(QUEUE_BATCHES);
            let mut preparer = preparer;
            let send = move |batch| {
                queued.fetch_add(1, Ordering::Relaxed);
                tx.send(batch).is_ok()
            };
            // Named, so that a profile tells the threads apart
            // (scripts/profile_stages.py).
            spawn(scope, "eval-reader".into(), move || {
                read(source, &spent, |batch| prepare(&mut preparer, batch, queued), send);
            })?;
            vec![rx]
        } else {
            fan_out(scope, source, (preparer, threads), spent, queued)?
        };
        for k in 0.. {
            let Ok(batch) = outs[k % outs.len()].recv() else {
                break;
            };
            queued.fetch_sub(1, Ordering::Relaxed);
            let mut batch = batch.map_err(io_at(path))?;
            each(&mut batch)?;
            // The reader may have finished: then the batch is just dropped.
            let _ = back_tx.send(batch);
        }
        Ok(())
    })
}

/// One reading thread and `threads` preparing ones: batch k goes to
/// preparer k mod `threads`; what each prepared comes out of its own
/// queue, returned in the preparers' order.
fn fan_out<'s, 'e: 's>(
    scope: &'s Scope<'s, 'e>,
    source: (impl BufRead + Send + 's, Option<u64>, usize),
    (preparer, threads): (Preparer, usize),
    spent: Receiver<Batch>,
    queued: &'e AtomicUsize,
) -> Result<Vec<Receiver<Handed>>, CommandError> {
    let (mut ins, mut outs) = (Vec::new(), Vec::new());
    // Each queue holds half as many: with N threads, N times as many
    // queues hold batches in flight.
    for i in 0..threads {
        let (in_tx, in_rx) = sync_channel::<Handed>(QUEUE_BATCHES / 2);
        let (out_tx, out_rx) = sync_channel::<Handed>(QUEUE_BATCHES / 2);
        let mut preparer = preparer.fresh();
        spawn(scope, format!("eval-prepare-{i}"), move || {
            for mut batch in in_rx {
                if let Ok(b) = &mut batch {
                    prepare(&mut preparer, b, queued);
                }
                queued.fetch_add(1, Ordering::Relaxed);
                if out_tx.send(batch).is_err() {
                    return;
                }
            }
        })?;
        ins.push(in_tx);
        outs.push(out_rx);
    }
    let mut k = 0;
    let send = move |batch| {
        let sent = ins[k % ins.len()].send(batch).is_ok();
        k += 1;
        sent
    };
    spawn(scope, "eval-reader".into(), move || read(source, &spent, |_| {}, send))?;
    Ok(outs)
}

/// Starts a thread named `name` in `scope`.
fn spawn<'s, 'e: 's>(scope: &'s Scope<'s, 'e>, name: String, f: impl FnOnce() + Send + 's) -> Result<(), CommandError> {
    std::thread::Builder::new()
        .name(name.clone())
        .spawn_scoped(scope, f)
        .map(drop)
        .map_err(io_at(name))
}

/// Prepares every line of `batch` (a line over the size cap is refused
/// with its length). While the model's thread lags (half a queue of
/// batches waits), repeated features are counted here too, work either
/// side can do; which side does it never changes the result.
fn prepare(preparer: &mut Preparer, batch: &mut Batch, queued: &AtomicUsize) {
    let count = queued.load(Ordering::Relaxed) >= QUEUE_BATCHES / 2;
    let (mut start, mut over) = (0, batch.oversized.iter().peekable());
    for (i, &(end, _)) in batch.lines.iter().enumerate() {
        match over.next_if(|&&(at, _)| at == i) {
            Some(&(_, length)) => preparer.refuse_too_large(length, &mut batch.prepared),
            None => preparer.prepare(&batch.text[start..end], count, &mut batch.prepared),
        }
        start = end;
    }
}

/// Reads `reader` to its end (or `limit` lines; a line over `max` bytes
/// is read past, its first bytes kept) in batches, each through `ready`
/// (preparing it, or not) and then `send` (false: nobody takes them any
/// more). Empty batches are never sent.
fn read(
    (mut reader, limit, max): (impl BufRead, Option<u64>, usize),
    spent: &Receiver<Batch>,
    mut ready: impl FnMut(&mut Batch),
    mut send: impl FnMut(Handed) -> bool,
) {
    let (mut number, mut eof, mut line) = (0u64, false, Vec::new());
    while !eof {
        let mut batch = spent.try_recv().unwrap_or_else(|_| Batch {
            text: Vec::with_capacity(1 << 16),
            lines: Vec::with_capacity(BATCH_LINES),
            oversized: Vec::new(),
            prepared: Prepared::default(),
        });
        batch.text.clear();
        batch.lines.clear();
        batch.oversized.clear();
        batch.prepared.clear();
        while batch.lines.len() < BATCH_LINES && batch.text.len() < BATCH_BYTES {
            if limit.is_some_and(|l| number >= l) {
                eof = true;
                break;
            }
            let taken = match read_bounded(&mut reader, max, &mut line) {
                Err(e) => {
                    send(Err(e));
                    return;
                }
                Ok(Got::End) => {
                    eof = true;
                    break;
                }
                Ok(Got::Line { taken }) => taken,
                Ok(Got::Oversized { length, taken }) => {
                    // Read past, never held: its first bytes go to the dead letters.
                    batch.oversized.push((batch.lines.len(), length));
                    taken
                }
            };
            number += 1;
            batch.text.extend_from_slice(&line);
            batch.lines.push((batch.text.len(), taken));
        }
        if batch.lines.is_empty() {
            break;
        }
        ready(&mut batch);
        if !send(Ok(batch)) {
            return;
        }
    }
}
