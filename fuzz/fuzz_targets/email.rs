//! The e-mail path: any bytes as a raw message are rendered (bounded) or
//! refused, and parse as an "email_base64" message or a Kafka e-mail
//! record into an example or bad input, never a panic. (What the pipeline
//! does with a parsed example is the `message` target's.)
#![no_main]

use classifyd::email::{self, Views};
use classifyd::message::{self, Reading};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(r) = email::render(data, Views::default()) {
        assert!(r.text.len() <= 4 * email::RAW_PREFIX_BYTES + email::MAX_BODY_BYTES + 256 * 200);
    }
    let reading = Reading::new(1 << 20);
    let _ = message::parse_email(data, None, Some(b"spam"), &reading);
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD.encode(data);
    let line = format!(r#"{{"id": "m", "email_base64": "{b64}", "label": "ham"}}"#);
    let _ = message::parse_with(line.as_bytes(), &reading);
});
