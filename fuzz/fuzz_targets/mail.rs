//! The mail protocols' parsers: spamd's request heads (any bytes are a
//! request or a refusal with a status and a reason, whose answer is one
//! status line), rspamd's envelope user, what a message is keyed by, and
//! address blocks; nothing panics.
#![no_main]

use classifyd::mail::{Cidr, message_key, rspamd, spamd};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let head = &data[..spamd::head_end(data).unwrap_or(data.len())];
    if let Err(refusal) = spamd::parse_head(head) {
        let answer = spamd::refusal(&refusal);
        let first = answer.iter().position(|&b| b == b'\n').expect("a status line");
        assert_eq!(&answer[first + 1..], b"\r\n", "one status line, then the blank line");
    }
    let _ = message_key(data);
    if let Ok(s) = std::str::from_utf8(data) {
        let _ = Cidr::parse(s);
        let mut parts = s.splitn(3, '\n');
        let (a, b, c) = (parts.next(), parts.next(), parts.next());
        if let Ok(Some(user)) = rspamd::user_of(a, b, c) {
            assert!(!user.is_empty());
        }
    }
});
