//! The model-free front of the pipeline: parse a message and hash its
//! text's features to buckets (optionally counting their repeats), into
//! shared buffers reused batch after batch. Knows no model and no
//! transport; [`super::Pipeline`] finishes what it prepares.

use std::ops::Range;

use crate::features::{FeatureConfig, Featurizer, SparseVec};
use crate::message::{self, Bad, Message, Reading};

/// What a raw e-mail record's key and headers say.
#[derive(Clone, Copy, Debug, Default)]
pub struct EmailRecord<'a> {
    /// Its id (the record key), if it has one.
    pub id: Option<&'a str>,
    /// Its label, from a record header.
    pub label: Option<&'a [u8]>,
    /// Who gave the label, from a record header.
    pub reporter: Option<&'a [u8]>,
    /// Who the message is for, from a record header.
    pub user: Option<&'a [u8]>,
}

/// Messages after the stages that need no model state: parsed, their
/// texts' features hashed to buckets and, optionally, their repeats counted
/// (IDF, normalisation and the bias follow in the pipeline). A transport
/// may run [`Preparer::prepare`] on another thread and hand the messages to
/// [`Pipeline::handle_entry`] in order; [`Pipeline::handle`] runs both
/// in turn. Counting may happen on either side: the result is the same, so
/// a transport lets whichever thread has time do it.
///
/// The features of all the messages lie one after another in shared
/// buffers, so a batch reused for message after message holds about what
/// its current messages need, not one buffer per slot each as large as the
/// largest message that slot ever held (20 MB of an `eval` of
/// SpamAssassin's 58 MB heap, in batches of 256 lines).
#[derive(Debug, Default)]
pub struct Prepared {
    pub(super) messages: Vec<PreparedMessage>,
    /// Every example's buckets, repeats and all, one example after another.
    pub(super) buckets: Vec<u32>,
    /// The counted raw features of the examples counted, one after another.
    pub(super) counted: SparseVec,
}

#[derive(Debug)]
pub(super) struct PreparedMessage {
    /// `None`: a blank message (skipped), or one already handled.
    pub(super) message: Option<Result<Message, Bad>>,
    /// Its range in `Prepared::buckets` (empty unless an example).
    pub(super) buckets: Range<usize>,
    /// Its range in `Prepared::counted`, when counted.
    pub(super) counted: Option<Range<usize>>,
}

impl Prepared {
    /// Bytes its features hold (the buckets and the counted features; the
    /// messages' texts are about their lines' size).
    pub fn feature_bytes(&self) -> usize {
        self.buckets.len() * 4 + self.counted.idx.len() * 8
    }

    /// Forgets every message, keeping the buffers.
    pub fn clear(&mut self) {
        self.messages.clear();
        self.buckets.clear();
        self.counted.idx.clear();
        self.counted.val.clear();
    }

    /// Messages prepared.
    pub fn len(&self) -> usize {
        self.messages.len()
    }

    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    /// Message `i`'s user, when it is an example that names one (for
    /// `eval`'s figures by user).
    pub fn user(&self, i: usize) -> Option<&str> {
        match self.messages.get(i)?.message.as_ref()? {
            Ok(Message::Example { user, .. }) => user.as_deref(),
            _ => None,
        }
    }

    /// Names who message `i` is for from a transport's record header (over
    /// the JSON field); a header that is no valid name makes the message
    /// bad input.
    pub fn set_user(&mut self, i: usize, header: &[u8]) {
        let Some(prepared) = self.messages.get_mut(i) else {
            return;
        };
        let Some(Ok(message)) = &mut prepared.message else {
            return;
        };
        match message::user_from_header(header) {
            Ok(name) => message.set_user(name),
            Err(bad) => prepared.message = Some(Err(bad)),
        }
    }

    /// Names message `i`'s reporter and user from a transport's record
    /// headers, when it has them ([`Prepared::set_reporter`],
    /// [`Prepared::set_user`]).
    pub fn set_headers(&mut self, i: usize, (reporter, user): (Option<&[u8]>, Option<&[u8]>)) {
        if let Some(header) = reporter {
            self.set_reporter(i, header);
        }
        if let Some(header) = user {
            self.set_user(i, header);
        }
    }

    /// Names the reporter of message `i`'s label from a transport's
    /// record header (over the JSON field); a header that is no valid
    /// name makes a labeled message bad input. Unlabeled messages are
    /// left alone: their header names nobody's label.
    pub fn set_reporter(&mut self, i: usize, header: &[u8]) {
        let Some(prepared) = self.messages.get_mut(i) else {
            return;
        };
        let Some(Ok(message)) = &mut prepared.message else {
            return;
        };
        if !message.has_label() {
            return;
        }
        match message::reporter_from_header(header) {
            Ok(name) => message.set_reporter(name),
            Err(bad) => prepared.message = Some(Err(bad)),
        }
    }
}

/// Parses and featurizes messages: the model-free front of the pipeline.
#[derive(Debug)]
pub struct Preparer {
    pub(super) featurizer: Featurizer,
    reading: Reading,
    /// One document's counted features, before they join a batch's.
    scratch: SparseVec,
}

impl Preparer {
    pub fn new(features: FeatureConfig, reading: Reading) -> Self {
        Preparer {
            featurizer: Featurizer::new(features),
            reading,
            scratch: SparseVec::default(),
        }
    }

    /// The features it hashes to.
    pub fn features(&self) -> &FeatureConfig {
        self.featurizer.config()
    }

    /// Another preparer like this one (for another thread).
    pub fn fresh(&self) -> Preparer {
        Preparer::new(*self.featurizer.config(), self.reading)
    }

    /// The longest message it parses (longer ones are bad input).
    pub fn max_message_bytes(&self) -> usize {
        self.reading.max_bytes
    }

    /// Appends a message that was refused before it could be read whole
    /// (a line over the size cap, of `length` bytes) to `out`, as bad input.
    pub fn refuse_too_large(&mut self, length: u64, out: &mut Prepared) {
        let at = out.buckets.len();
        out.messages.push(PreparedMessage {
            message: Some(Err(message::too_large(length, self.reading.max_bytes))),
            buckets: at..at,
            counted: None,
        });
    }

    /// Parses `raw` and appends it to `out`, with its text's features
    /// hashed and, when `count`, their repeats counted too.
    pub fn prepare(&mut self, raw: &[u8], count: bool, out: &mut Prepared) {
        if raw.iter().all(u8::is_ascii_whitespace) {
            let at = out.buckets.len();
            out.messages.push(PreparedMessage {
                message: None,
                buckets: at..at,
                counted: None,
            });
            return;
        }
        let message = message::parse_with(raw, &self.reading);
        self.prepare_parsed(message, count, out);
    }

    /// A transport's JSON record ([`Preparer::prepare`]), with the
    /// reporter and user its headers name ([`Prepared::set_headers`]).
    pub fn prepare_reported(
        &mut self,
        raw: &[u8],
        headers: (Option<&[u8]>, Option<&[u8]>),
        count: bool,
        out: &mut Prepared,
    ) {
        self.prepare(raw, count, out);
        out.set_headers(out.len() - 1, headers);
    }

    /// A transport's raw e-mail record, which the transport parsed itself
    /// ([`message::parse_email`]), appended to `out` as [`Preparer::prepare`]
    /// does, with the reporter and user its headers name.
    pub fn prepare_email_record(&mut self, raw: &[u8], record: EmailRecord<'_>, count: bool, out: &mut Prepared) {
        let id = record.id.map(str::to_string);
        let message = message::parse_email(raw, id, record.label, &self.reading);
        self.prepare_parsed(message, count, out);
        out.set_headers(out.len() - 1, (record.reporter, record.user));
    }

    fn prepare_parsed(&mut self, message: Result<Message, Bad>, count: bool, out: &mut Prepared) {
        let from = out.buckets.len();
        let mut prepared = PreparedMessage {
            message: None,
            buckets: from..from,
            counted: None,
        };
        if let Ok(Message::Example { text, .. }) = &message {
            self.featurizer.hash_buckets(text, &mut out.buckets);
            prepared.buckets = from..out.buckets.len();
            if count {
                self.featurizer
                    .count_buckets(&out.buckets[prepared.buckets.clone()], &mut self.scratch);
                let at = out.counted.idx.len();
                out.counted.idx.extend_from_slice(&self.scratch.idx);
                out.counted.val.extend_from_slice(&self.scratch.val);
                prepared.counted = Some(at..out.counted.idx.len());
            }
        }
        prepared.message = Some(message);
        out.messages.push(prepared);
    }
}
