//! Mail folders as a stream of raw messages, for `classifyd learn`: a
//! Maildir (its `cur/` and `new/`), an mbox file (messages after each
//! `From ` line, `>From ` unquoted as mboxrd writes it), or a folder of
//! message files (`.eml` or any name, walked in name order; a file that
//! starts with `From ` is read as an mbox). Reading is bounded: a message
//! over the size cap is reported by its length and never held whole.

use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::path::{Path, PathBuf};

/// One message of a folder.
#[derive(Debug, PartialEq)]
pub(crate) enum Item {
    /// Its id (the file, or `mbox#n`) and its bytes.
    Message { id: String, bytes: Vec<u8> },
    /// A message over the cap: its id and its length in bytes.
    TooLarge { id: String, length: u64 },
}

/// Calls `f` with every message under `path`, in order, each at most
/// `max_bytes` long; returns how many.
pub(crate) fn each_message(path: &Path, max_bytes: usize, f: &mut dyn FnMut(Item)) -> io::Result<u64> {
    let meta = std::fs::metadata(path)?;
    if !meta.is_dir() {
        return each_in_file(path, max_bytes, f);
    }
    let mut n = 0;
    let maildir = ["cur", "new"].map(|d| path.join(d));
    if maildir.iter().any(|d| d.is_dir()) {
        for d in maildir.iter().filter(|d| d.is_dir()) {
            for file in files_in(d, false)? {
                n += each_in_file(&file, max_bytes, f)?;
            }
        }
        return Ok(n);
    }
    for file in files_in(path, true)? {
        n += each_in_file(&file, max_bytes, f)?;
    }
    Ok(n)
}

/// Bytes of every file under `paths` (for a progress bar).
pub(crate) fn total_bytes(paths: &[PathBuf]) -> u64 {
    let mut total = 0;
    for p in paths {
        match std::fs::metadata(p) {
            Ok(m) if m.is_dir() => {
                let all = files_in(p, true).unwrap_or_default();
                total += all
                    .iter()
                    .filter_map(|f| std::fs::metadata(f).ok())
                    .map(|m| m.len())
                    .sum::<u64>();
            }
            Ok(m) => total += m.len(),
            Err(_) => {}
        }
    }
    total
}

/// The regular files in `dir` (and below, when `deep`), sorted by path;
/// hidden files (a Maildir's `.` files, editors' backups) left out.
fn files_in(dir: &Path, deep: bool) -> io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d)? {
            let entry = entry?;
            let p = entry.path();
            if entry.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            let kind = entry.file_type()?;
            if kind.is_dir() && deep {
                stack.push(p);
            } else if kind.is_file() {
                out.push(p);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// A file's messages: an mbox's, or the file as one message.
fn each_in_file(path: &Path, max_bytes: usize, f: &mut dyn FnMut(Item)) -> io::Result<u64> {
    let mut r = BufReader::new(File::open(path)?);
    let id = path.display().to_string();
    if r.fill_buf()?.starts_with(b"From ") {
        return each_in_mbox(r, &id, max_bytes, f);
    }
    let length = std::fs::metadata(path)?.len();
    if length > max_bytes as u64 {
        f(Item::TooLarge { id, length });
        return Ok(1);
    }
    let mut bytes = Vec::with_capacity(length as usize);
    io::Read::read_to_end(&mut r, &mut bytes)?;
    f(Item::Message { id, bytes });
    Ok(1)
}

/// The messages of an mbox: each starts after a `From ` line at the start
/// of the file or after an empty line.
fn each_in_mbox(mut r: impl BufRead, name: &str, max_bytes: usize, f: &mut dyn FnMut(Item)) -> io::Result<u64> {
    let mut line = Vec::new();
    let mut current: Option<Pending> = None;
    let mut n = 0u64;
    let mut after_blank = true;
    loop {
        line.clear();
        if r.read_until(b'\n', &mut line)? == 0 {
            break;
        }
        if after_blank && line.starts_with(b"From ") {
            if let Some(p) = current.take() {
                f(p.finish());
            }
            n += 1;
            current = Some(Pending::new(format!("{name}#{n}"), max_bytes));
            after_blank = false;
            continue;
        }
        after_blank = line == b"\n" || line == b"\r\n";
        if let Some(p) = &mut current {
            p.push(unquote(&line));
        }
    }
    if let Some(p) = current.take() {
        f(p.finish());
    }
    Ok(n)
}

/// `>From ` (and `>>From `, ...) lose one `>`, as mboxrd quotes them.
fn unquote(line: &[u8]) -> &[u8] {
    let quotes = line.iter().take_while(|&&b| b == b'>').count();
    if quotes > 0 && line[quotes..].starts_with(b"From ") {
        &line[1..]
    } else {
        line
    }
}

/// An mbox message being read: its bytes up to the cap, and its length.
struct Pending {
    id: String,
    bytes: Vec<u8>,
    length: u64,
    max_bytes: usize,
}

impl Pending {
    fn new(id: String, max_bytes: usize) -> Self {
        Pending {
            id,
            bytes: Vec::new(),
            length: 0,
            max_bytes,
        }
    }

    fn push(&mut self, line: &[u8]) {
        self.length += line.len() as u64;
        if self.length <= self.max_bytes as u64 {
            self.bytes.extend_from_slice(line);
        } else {
            // Over the cap: nothing more is held.
            self.bytes = Vec::new();
        }
    }

    fn finish(self) -> Item {
        // The line break before the next "From " line belongs to the mbox.
        let mut bytes = self.bytes;
        if bytes.ends_with(b"\r\n\r\n") {
            bytes.truncate(bytes.len() - 2);
        } else if bytes.ends_with(b"\n\n") {
            bytes.pop();
        }
        match self.length > self.max_bytes as u64 {
            true => Item::TooLarge {
                id: self.id,
                length: self.length,
            },
            false => Item::Message { id: self.id, bytes },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(path: &Path, max: usize) -> Vec<Item> {
        let mut out = Vec::new();
        each_message(path, max, &mut |i| out.push(i)).unwrap();
        out
    }

    #[test]
    fn an_mbox_splits_at_from_lines_and_unquotes() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("box");
        std::fs::write(
            &p,
            "From a@x Mon Jan 1 00:00:00 2024\nSubject: one\n\n>From here\nbody\n\nFrom b@x Mon Jan 1 00:00:01 2024\nSubject: two\n\nsecond\n",
        )
        .unwrap();
        let items = all(&p, 1000);
        let one = format!("{}#1", p.display());
        assert_eq!(items.len(), 2);
        assert_eq!(
            items[0],
            Item::Message {
                id: one,
                bytes: b"Subject: one\n\nFrom here\nbody\n".to_vec()
            }
        );
        let Item::Message { bytes, .. } = &items[1] else {
            panic!()
        };
        assert_eq!(bytes, b"Subject: two\n\nsecond\n");
        // Over the cap: its length, not its bytes.
        assert!(matches!(all(&p, 20)[0], Item::TooLarge { length: 30, .. }));
    }

    #[test]
    fn a_maildir_reads_cur_and_new_and_skips_tmp_and_dot_files() {
        let tmp = tempfile::tempdir().unwrap();
        for d in ["cur", "new", "tmp"] {
            std::fs::create_dir(tmp.path().join(d)).unwrap();
        }
        std::fs::write(tmp.path().join("cur/1:2,S"), "Subject: a\n\nx\n").unwrap();
        std::fs::write(tmp.path().join("new/2"), "Subject: b\n\ny\n").unwrap();
        std::fs::write(tmp.path().join("tmp/3"), "Subject: partial\n").unwrap();
        std::fs::write(tmp.path().join("cur/.hidden"), "no").unwrap();
        let ids: Vec<String> = all(tmp.path(), 1000)
            .into_iter()
            .map(|i| match i {
                Item::Message { id, .. } | Item::TooLarge { id, .. } => id,
            })
            .collect();
        assert_eq!(ids.len(), 2, "{ids:?}");
        assert!(ids[0].ends_with("cur/1:2,S") && ids[1].ends_with("new/2"), "{ids:?}");
        assert!(total_bytes(&[tmp.path().to_path_buf()]) > 0);
    }
}
