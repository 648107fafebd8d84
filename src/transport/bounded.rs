//! Reading a line in bounded memory: a line longer than the cap is read
//! past in the reader's chunks, only its first bytes kept and its length
//! counted, so one bad producer cannot take the daemon's memory. Owns only
//! that; what a line means is the pipeline's. The one line reader of
//! `run` (JSON lines), `eval` and `predict`.

use std::io::{self, BufRead};

use super::sinks::DEAD_LETTER_PREFIX;

/// What [`read_bounded`] read.
#[derive(Debug, PartialEq)]
pub(crate) enum Got {
    /// The input has ended.
    End,
    /// A line, whole, without its line end; `taken` bytes of input with it.
    Line { taken: u64 },
    /// A line over the cap, of `length` bytes (without its line end), of
    /// which the buffer holds the first [`DEAD_LETTER_PREFIX`]; `taken`
    /// bytes of input with its line end.
    Oversized { length: u64, taken: u64 },
}

/// Reads one line into `buf` without its line end, holding at most
/// `max + 2` bytes of it at any time: a longer line is read to its end in
/// the reader's chunks, only its first bytes kept and its length counted,
/// so memory stays flat whatever a producer sends. `buf` is cleared first.
pub(crate) fn read_bounded(r: &mut impl BufRead, max: usize, buf: &mut Vec<u8>) -> io::Result<Got> {
    buf.clear();
    let mut length = 0u64;
    let mut over = false;
    let mut newline = false;
    loop {
        let available = match r.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available.is_empty() {
            if length == 0 {
                return Ok(Got::End);
            }
            break;
        }
        let (take, found) = match memchr::memchr(b'\n', available) {
            Some(i) => (i + 1, true),
            None => (available.len(), false),
        };
        length += take as u64;
        if !over {
            buf.extend_from_slice(&available[..take]);
            // Room for the line end ("\r\n") beside `max` bytes of message.
            if buf.len() > max.saturating_add(2) {
                over = true;
                buf.truncate(DEAD_LETTER_PREFIX.min(max));
            }
        }
        r.consume(take);
        if found {
            newline = true;
            break;
        }
    }
    if over {
        return Ok(Got::Oversized {
            length: length - newline as u64,
            taken: length,
        });
    }
    if buf.last() == Some(&b'\n') {
        buf.pop();
        if buf.last() == Some(&b'\r') {
            buf.pop();
        }
    }
    Ok(Got::Line { taken: length })
}

#[cfg(test)]
mod tests {
    use std::io::BufReader;

    use super::*;

    /// Lines longer than the cap are read past in the reader's chunks:
    /// a prefix kept, the length counted, the line end found; short lines
    /// whole, with "\n", "\r\n" or no end at all.
    #[test]
    fn a_long_line_is_read_past_not_held() {
        let long = "x".repeat(100_000);
        let input = format!("short\r\n{long}\nafter\n{long}");
        // A small buffer: the long lines come in many fills.
        let mut r = BufReader::with_capacity(7, input.as_bytes());
        let mut got = Vec::new();
        loop {
            let mut buf = Vec::new();
            match read_bounded(&mut r, 10, &mut buf).unwrap() {
                Got::End => break,
                g => got.push((g, String::from_utf8(buf).unwrap())),
            }
        }
        assert_eq!(
            got,
            vec![
                (Got::Line { taken: 7 }, "short".to_string()),
                (
                    Got::Oversized {
                        length: 100_000,
                        taken: 100_001
                    },
                    "x".repeat(10)
                ),
                (Got::Line { taken: 6 }, "after".to_string()),
                (
                    Got::Oversized {
                        length: 100_000,
                        taken: 100_000
                    },
                    "x".repeat(10)
                ),
            ]
        );
        // Within the cap (with its line end): whole.
        let mut r = BufReader::new("0123456789\r\n".as_bytes());
        let mut buf = Vec::new();
        assert_eq!(read_bounded(&mut r, 10, &mut buf).unwrap(), Got::Line { taken: 12 });
        assert_eq!(buf, b"0123456789");
    }
}
