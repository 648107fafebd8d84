//! The one way into the pipeline: a message as its source gave it
//! ([`Raw`]: a JSON message with what a transport's headers say, or a raw
//! e-mail record), or one that a [`Preparer`] prepared apart (on a reader
//! thread, say): an [`Entry`], handled by [`super::Pipeline::handle_entry`]
//! with its driver. A request to predict is a [`Raw`] too.

use super::{EmailRecord, Prepared, Preparer};

/// A message as its source gave it.
#[derive(Clone, Copy, Debug)]
pub enum Raw<'a> {
    /// A message of the input's JSON contract, with the reporter of its
    /// label and its user as a transport's record headers name them (over
    /// the JSON's own fields: [`Prepared::set_headers`]).
    Json {
        raw: &'a [u8],
        reporter: Option<&'a [u8]>,
        user: Option<&'a [u8]>,
    },
    /// A raw e-mail, what its record says of it besides
    /// ([`crate::message::parse_email`]).
    Email { raw: &'a [u8], record: EmailRecord<'a> },
}

impl<'a> Raw<'a> {
    /// A JSON message with no headers.
    pub fn json(raw: &'a [u8]) -> Self {
        Raw::Json {
            raw,
            reporter: None,
            user: None,
        }
    }

    /// A raw e-mail named `id`, for `user` (a mail protocol's check).
    pub fn email(raw: &'a [u8], id: &'a str, user: Option<&'a str>) -> Self {
        let record = EmailRecord {
            id: Some(id),
            user: user.map(str::as_bytes),
            ..Default::default()
        };
        Raw::Email { raw, record }
    }

    /// Parses and hashes the message (and with `count`, counts its
    /// features' repeats) into `out`, appended.
    pub fn prepare(&self, preparer: &mut Preparer, count: bool, out: &mut Prepared) {
        match *self {
            Raw::Json { raw, reporter, user } => preparer.prepare_reported(raw, (reporter, user), count, out),
            Raw::Email { raw, record } => preparer.prepare_email_record(raw, record, count, out),
        }
    }
}

/// A message into the pipeline.
#[derive(Debug)]
pub enum Entry<'a, 'p> {
    /// Read and prepared by the pipeline's own front stage.
    Raw(Raw<'a>),
    /// Message `i` of what a [`Preparer`] for the pipeline's model
    /// prepared into the batch (the message is taken from it; a message
    /// taken already, or out of range, counts as blank).
    Prepared(&'p mut Prepared, usize),
}
