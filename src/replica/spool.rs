//! Where a version of the model waits as bytes, in memory while small,
//! then in an unnamed temporary file (in `$TMPDIR`, gone when dropped): a
//! replica's pieces of a full version or of a large delta while they
//! arrive ([`Spool`]), and a learner's encoding of a full version while it
//! is cut into records ([`Tape`]). So that neither holds a version beside
//! the model, however large (docs/scaling.md); a delta is decoded from
//! its spool a block at a time ([`BlockBuf`]). Should no temporary file be
//! possible (a read-only file system), the bytes stay in memory, with a
//! warning.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, Ordering};

use prost::bytes::Buf;

/// Past this many bytes in memory, the bytes go to a file: a full version
/// of a small model (SMS's is 0.5 MB) never touches the disk. The unit
/// tests spill at 1 KiB, so that every replica test reads its versions
/// from a file.
pub(super) const SPILL_AT: usize = if cfg!(test) { 1 << 10 } else { 4 << 20 };

/// Bytes appended, then read at any offset.
#[derive(Debug)]
pub(super) struct Tape {
    /// The bytes while in memory.
    memory: Vec<u8>,
    /// The file, once the bytes went there.
    file: Option<File>,
    len: u64,
    spill_at: usize,
}

impl Tape {
    /// A tape that goes to a file past `spill_at` bytes.
    pub(super) fn new(spill_at: usize) -> Self {
        Tape {
            memory: Vec::new(),
            file: None,
            len: 0,
            spill_at,
        }
    }

    /// A tape holding `bytes`, in memory (they are already).
    pub(super) fn from_bytes(bytes: Vec<u8>) -> Self {
        Tape {
            len: bytes.len() as u64,
            memory: bytes,
            file: None,
            spill_at: usize::MAX,
        }
    }

    /// Bytes appended so far.
    pub(super) fn len(&self) -> u64 {
        self.len
    }

    pub(super) fn append(&mut self, data: &[u8]) -> io::Result<()> {
        if self.file.is_none() && self.memory.len() + data.len() > self.spill_at {
            self.spill();
        }
        match &mut self.file {
            Some(f) => f.write_all(data)?,
            None => self.memory.extend_from_slice(data),
        }
        self.len += data.len() as u64;
        Ok(())
    }

    /// Moves the bytes in memory to a temporary file, if one can be made.
    fn spill(&mut self) {
        static WARNED: AtomicBool = AtomicBool::new(false);
        let made = tempfile::tempfile().and_then(|mut f| f.write_all(&self.memory).map(|()| f));
        match made {
            Ok(f) => {
                self.file = Some(f);
                self.memory = Vec::new();
            }
            Err(error) if !WARNED.swap(true, Ordering::Relaxed) => {
                tracing::warn!(%error, dir = %std::env::temp_dir().display(),
                    "no temporary file for a model version; keeping it in memory");
            }
            Err(_) => {}
        }
    }

    /// Reads into `buf` from offset `at`; fewer bytes only at the end.
    pub(super) fn read_at(&self, buf: &mut [u8], at: u64) -> io::Result<usize> {
        let want = buf.len().min(self.len.saturating_sub(at) as usize);
        match &self.file {
            Some(f) => {
                f.read_exact_at(&mut buf[..want], at)?;
            }
            None => {
                // In bounds: `at + want <= len`, the bytes in memory.
                let start = at as usize;
                buf[..want].copy_from_slice(&self.memory[start..start + want]);
            }
        }
        Ok(want)
    }

    /// Whether the bytes went to a file.
    #[cfg(test)]
    fn on_disk(&self) -> bool {
        self.file.is_some()
    }
}

/// The pieces of one whole, in any order, read back in index order.
#[derive(Debug)]
pub(super) struct Spool {
    /// Where piece `i` lies on the tape (offset, length), once it came.
    spans: Vec<Option<(u64, u32)>>,
    tape: Tape,
}

impl Spool {
    /// A spool for `count` pieces.
    pub(super) fn new(count: usize) -> Self {
        Self::with_spill(count, SPILL_AT)
    }

    /// A spool that goes to a file past `spill_at` bytes.
    pub(super) fn with_spill(count: usize, spill_at: usize) -> Self {
        Spool {
            spans: vec![None; count],
            tape: Tape::new(spill_at),
        }
    }

    /// Keeps piece `index` (a second copy of a piece replaces the first).
    pub(super) fn put(&mut self, index: usize, data: &[u8]) -> io::Result<()> {
        let len = u32::try_from(data.len()).map_err(io::Error::other)?;
        let at = self.tape.len();
        self.tape.append(data)?;
        if let Some(span) = self.spans.get_mut(index) {
            *span = Some((at, len));
        }
        Ok(())
    }

    /// How many pieces make the whole.
    pub(super) fn pieces(&self) -> usize {
        self.spans.len()
    }

    /// Whether every piece came.
    pub(super) fn complete(&self) -> bool {
        self.spans.iter().all(Option::is_some)
    }

    /// The whole's length: the sum of its pieces'.
    pub(super) fn len(&self) -> u64 {
        self.spans.iter().flatten().map(|&(_, n)| u64::from(n)).sum()
    }

    /// The CRC-32 of the whole, its pieces read in order.
    pub(super) fn crc(&self) -> io::Result<u32> {
        let mut crc = crc32fast::Hasher::new();
        let mut b = self.buf()?;
        while b.has_remaining() {
            let n = b.chunk().len();
            crc.update(b.chunk());
            b.advance(n);
        }
        b.error().map_or_else(|| Ok(crc.finalize()), Err)
    }

    /// The whole, its pieces read in order.
    pub(super) fn reader(&self) -> SpoolReader<'_> {
        SpoolReader {
            spool: self,
            piece: 0,
            at: 0,
        }
    }

    /// The whole as a [`Buf`] a block at a time (a delta, decoded
    /// without its encoding whole in memory).
    pub(super) fn buf(&self) -> io::Result<BlockBuf<SpoolReader<'_>>> {
        let len = usize::try_from(self.len()).map_err(io::Error::other)?;
        Ok(BlockBuf::new(self.reader(), len))
    }
}

/// Bytes read into a [`BlockBuf`] at a time (the unit tests cross blocks).
const BLOCK: usize = if cfg!(test) { 1000 } else { 1 << 16 };

/// `len` bytes of a reader as a [`Buf`], read a block at a time, so that
/// a protobuf message is decoded from a file without its encoding whole
/// in memory. A read error ends the bytes there (the decoder then fails
/// on a short message) and is kept ([`BlockBuf::error`]).
pub(super) struct BlockBuf<R> {
    reader: R,
    block: Vec<u8>,
    at: usize,
    /// Bytes left, those of the block included.
    remaining: usize,
    error: Option<io::Error>,
}

impl<R: Read> BlockBuf<R> {
    fn new(reader: R, len: usize) -> Self {
        let mut b = BlockBuf {
            reader,
            block: Vec::new(),
            at: 0,
            remaining: len,
            error: None,
        };
        b.fill();
        b
    }

    /// Reads the next block (none past the end).
    fn fill(&mut self) {
        self.block.resize(BLOCK.min(self.remaining), 0);
        self.at = 0;
        if let Err(e) = self.reader.read_exact(&mut self.block) {
            (self.remaining, self.error) = (0, Some(e));
            self.block.clear();
        }
    }

    /// The read error that cut the bytes short, if one did.
    pub(super) fn error(&mut self) -> Option<io::Error> {
        self.error.take()
    }
}

impl<R: Read> Buf for BlockBuf<R> {
    fn remaining(&self) -> usize {
        self.remaining
    }

    fn chunk(&self) -> &[u8] {
        &self.block[self.at..]
    }

    fn advance(&mut self, mut n: usize) {
        // The block never holds more than what remains.
        while n > 0 && self.remaining > 0 {
            let here = (self.block.len() - self.at).min(n);
            (self.at, self.remaining, n) = (self.at + here, self.remaining - here, n - here);
            if self.at == self.block.len() && self.remaining > 0 {
                self.fill();
            }
        }
    }
}

/// Reads a [`Spool`]'s pieces in index order.
pub(super) struct SpoolReader<'a> {
    spool: &'a Spool,
    /// The piece being read, and how far into it.
    piece: usize,
    at: u32,
}

impl Read for SpoolReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let Some(span) = self.spool.spans.get(self.piece) else {
                return Ok(0);
            };
            let Some((offset, len)) = *span else {
                return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "a piece is missing"));
            };
            if buf.is_empty() {
                return Ok(0);
            }
            if self.at >= len {
                (self.piece, self.at) = (self.piece + 1, 0);
                continue;
            }
            let want = buf.len().min((len - self.at) as usize);
            let n = self.spool.tape.read_at(&mut buf[..want], offset + u64::from(self.at))?;
            if n == 0 {
                return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the spool is short"));
            }
            self.at += n as u32;
            return Ok(n);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces() -> Vec<Vec<u8>> {
        (0..5u8).map(|i| vec![i; 1000 + usize::from(i) * 37]).collect()
    }

    fn whole() -> Vec<u8> {
        pieces().concat()
    }

    #[test]
    fn pieces_in_any_order_read_back_in_index_order_in_memory_and_on_disk() {
        for spill_at in [usize::MAX, 2500, 0] {
            let mut s = Spool::with_spill(5, spill_at);
            for i in [3, 0, 4, 1] {
                s.put(i, &pieces()[i]).unwrap();
                assert!(!s.complete());
            }
            // A second copy of a piece replaces the first.
            s.put(1, &pieces()[1]).unwrap();
            s.put(2, &pieces()[2]).unwrap();
            assert!(s.complete());
            assert_eq!(s.tape.on_disk(), spill_at != usize::MAX);
            assert_eq!(s.len(), whole().len() as u64);
            assert_eq!(s.crc().unwrap(), crc32fast::hash(&whole()));
            // Small reads cross the pieces' bounds.
            let mut got = Vec::new();
            let mut buf = [0u8; 333];
            let mut r = s.reader();
            loop {
                let n = r.read(&mut buf).unwrap();
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
            }
            assert_eq!(got, whole());
            // As a Buf: odd reads cross the blocks' and the pieces' bounds.
            let mut b = s.buf().unwrap();
            let mut got = vec![0u8; 7];
            b.copy_to_slice(&mut got);
            b.advance(1500);
            got.extend_from_slice(&b.copy_to_bytes(b.remaining()));
            assert!(b.error().is_none());
            let mut want = whole();
            want.drain(7..1507);
            assert_eq!(got, want);
        }
    }

    #[test]
    fn a_tape_reads_back_what_was_appended_at_any_offset() {
        for spill_at in [usize::MAX, 1500, 0] {
            let mut t = Tape::new(spill_at);
            for p in pieces() {
                t.append(&p).unwrap();
            }
            assert_eq!(t.on_disk(), spill_at != usize::MAX);
            assert_eq!(t.len(), whole().len() as u64);
            for (at, n) in [(0, 10), (995, 20), (3000, 777), (whole().len() - 5, 100)] {
                let mut buf = vec![0u8; n];
                let got = t.read_at(&mut buf, at as u64).unwrap();
                let end = (at + n).min(whole().len());
                assert_eq!(got, end - at);
                assert_eq!(buf[..got], whole()[at..end]);
            }
        }
    }

    #[test]
    fn a_missing_piece_is_an_error_not_a_short_whole() {
        let mut s = Spool::with_spill(3, 0);
        s.put(0, b"abc").unwrap();
        s.put(2, b"ghi").unwrap();
        assert!(!s.complete());
        let mut r = s.reader();
        let err = r.read_to_end(&mut Vec::new()).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
        // As a Buf, the bytes stop at the error, which is kept.
        let mut b = s.buf().unwrap();
        assert_eq!(b.remaining(), 0);
        assert_eq!(b.error().map(|e| e.kind()), Some(io::ErrorKind::UnexpectedEof));
        assert_eq!(s.crc().unwrap_err().kind(), io::ErrorKind::UnexpectedEof);
    }
}
