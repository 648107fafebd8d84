//! A batch of records prepared ahead: a helper thread parses, renders,
//! tokenizes, hashes and counts the batch's messages, a few at a time,
//! while the daemon's loop hands those already prepared to the pipeline,
//! in the batch's order. The model stays the loop's alone; the helper
//! needs none ([`Preparer`]).
//!
//! The helper lives for one batch (a scoped thread), so the records it
//! reads are the transport's own, borrowed, never copied, and nothing is
//! in flight between two batches: what happens between them (a Kafka
//! rebalance's checkpoint, a predictor's new model) sees every record
//! taken either handled or not begun. JSON lines prepare on their reader
//! thread instead (`super::lines`), which reads ahead on its own.

use std::sync::{Mutex, PoisonError, mpsc};
use std::thread;

use crate::pipeline::{Prepared, Preparer};

/// Messages the helper prepares before it hands them over: enough that a
/// hand-over costs little beside them, few enough that the loop starts
/// soon after the batch does.
const CHUNK: usize = 4;

/// Chunks the helper may prepare ahead of the loop (memory in flight: at
/// most this many and one in hand, each of `CHUNK` messages).
const AHEAD: usize = 4;

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
/// prepared (`prepare`, with `preparer`) on a helper thread while the
/// records before it are handled; `handle` gets the prepared messages and
/// the record's index among them. A batch of one, or a helper that cannot
/// be started, is prepared on the calling thread. Stops at the first error
/// of `handle`, which it returns; the records after it are not handled.
pub(crate) fn handle_ahead<R: Sync, E>(
    preparer: &mut Preparer,
    records: &[R],
    prepare: impl Fn(&mut Preparer, &R, &mut Prepared) + Sync,
    mut handle: impl FnMut(&R, (&mut Prepared, usize)) -> Result<(), E>,
) -> Result<(), E> {
    let prepare = &prepare;
    if records.len() < 2 {
        return handle_inline(preparer, records, prepare, &mut handle);
    }
    // The helper's for the batch; the loop's only if no helper starts.
    let preparer = Mutex::new(preparer);
    thread::scope(|scope| {
        let (ready_tx, ready) = mpsc::sync_channel::<Prepared>(AHEAD);
        let (spent, spent_rx) = mpsc::channel::<Prepared>();
        let lent = &preparer;
        let helper = thread::Builder::new()
            .name("prepare-ahead".into())
            .spawn_scoped(scope, move || {
                let mut preparer = lent.lock().unwrap_or_else(PoisonError::into_inner);
                for chunk in records.chunks(CHUNK) {
                    let mut p = spent_rx.try_recv().unwrap_or_default();
                    p.clear();
                    for r in chunk {
                        prepare(&mut preparer, r, &mut p);
                    }
                    // The loop stopped (an error): nothing more to do.
                    if ready_tx.send(p).is_err() {
                        return;
                    }
                }
            });
        if helper.is_err() {
            // No thread to be had (the process's limit): the batch on this one.
            let mut preparer = preparer.lock().unwrap_or_else(PoisonError::into_inner);
            return handle_inline(&mut preparer, records, prepare, &mut handle);
        }
        for chunk in records.chunks(CHUNK) {
            // An error only if the helper panicked, which the scope's end
            // passes on.
            let Ok(mut p) = ready.recv() else {
                break;
            };
            for (i, r) in chunk.iter().enumerate() {
                // On an error the receiver is dropped with this closure's
                // frame, so the helper's next send fails and it ends.
                handle(r, (&mut p, i))?;
            }
            let _ = spent.send(p);
        }
        Ok(())
    })
}

/// [`handle_ahead`] on the calling thread alone.
fn handle_inline<R, E>(
    preparer: &mut Preparer,
    records: &[R],
    prepare: &impl Fn(&mut Preparer, &R, &mut Prepared),
    handle: &mut impl FnMut(&R, (&mut Prepared, usize)) -> Result<(), E>,
) -> Result<(), E> {
    let mut p = Prepared::default();
    for r in records {
        p.clear();
        prepare(preparer, r, &mut p);
        handle(r, (&mut p, 0))?;
    }
    Ok(())
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
}
