//! The lessons log: the lessons the mail protocols teach (spamd's `TELL`,
//! rspamd's `/learnspam`, `/learnham`, `/forget`), written to the
//! checkpoint directory and synced before they are learned and answered,
//! so that a lesson answered "learned" survives a crash before the next
//! checkpoint (docs/reliability.md).
//!
//! Lessons go to `lessons-<generation>.jsonl`, a JSON line each. A
//! checkpoint records the generation that starts after it (the
//! `lessons` position): every lesson of the generations before it is in
//! that checkpoint's model. Once the checkpoint is saved the log moves to
//! that generation and removes the older files ([`LessonsLog::rotate`]).
//! After a restart, the lessons of the recorded generation and later are
//! learned again, in order, before anything else ([`LessonsLog::open`]):
//! each is learned exactly once, by the checkpoint or by the replay.
//!
//! An append that fails (a full disk, an I/O error, a sync that fails)
//! is refused and leaves the file as it was: it is cut back to its length
//! before the append, and when even that fails the log moves to a new
//! file (the next generation), so no later lesson is ever glued onto a
//! torn one ([`append_synced`]). A crash in the middle of an append leaves
//! a torn last line: it was never synced, so never answered; it is cut off
//! at the next open, never half learned.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde::{Deserialize, Serialize};

/// A lesson as the log keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recorded {
    /// The message's id (its Message-ID, else a hash of its bytes).
    pub id: String,
    /// The label it teaches; `None`: forget the id's label (or, with
    /// `forget_reporter`, that reporter's labels).
    pub learn: Option<String>,
    /// Forget every label of this reporter's the record holds (no id).
    pub forget_reporter: Option<String>,
    pub user: Option<String>,
    pub reporter: Option<String>,
    /// The raw e-mail (empty for a forget, a text, or a label for the
    /// message the record knows by its id).
    pub email: Vec<u8>,
    /// The text it teaches, when it is no e-mail (the console's).
    pub text: Option<String>,
}

/// A lesson's line.
#[derive(Serialize, Deserialize)]
struct Line {
    id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    learn: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    forget: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    forget_reporter: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    user: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reporter: Option<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    email_base64: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    text: Option<String>,
}

impl Recorded {
    fn line(&self) -> Vec<u8> {
        let line = Line {
            id: self.id.clone(),
            learn: self.learn.clone(),
            forget: self.learn.is_none() && self.forget_reporter.is_none(),
            forget_reporter: self.forget_reporter.clone(),
            user: self.user.clone(),
            reporter: self.reporter.clone(),
            email_base64: B64.encode(&self.email),
            text: self.text.clone(),
        };
        // A struct of strings always serializes.
        let mut out = serde_json::to_vec(&line).unwrap_or_default();
        out.push(b'\n');
        out
    }

    /// The lesson of a whole line; `None` for a line that is not one.
    fn parse(line: &[u8]) -> Option<Self> {
        let l: Line = serde_json::from_slice(line).ok()?;
        // Exactly one of a label, a forget and a reporter's forget.
        if usize::from(l.forget) + usize::from(l.learn.is_some()) + usize::from(l.forget_reporter.is_some()) != 1 {
            return None;
        }
        Some(Recorded {
            id: l.id,
            learn: l.learn,
            forget_reporter: l.forget_reporter,
            user: l.user,
            reporter: l.reporter,
            email: B64.decode(l.email_base64.as_bytes()).ok()?,
            text: l.text,
        })
    }
}

/// What the log writes to: a file, or in tests one that fails.
trait Segment: Send {
    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()>;
    fn sync_data(&self) -> io::Result<()>;
    fn set_len(&self, len: u64) -> io::Result<()>;
}

impl Segment for File {
    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        Write::write_all(self, bytes)
    }
    fn sync_data(&self) -> io::Result<()> {
        File::sync_data(self)
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        File::set_len(self, len)
    }
}

impl std::fmt::Debug for LessonsLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LessonsLog")
            .field("dir", &self.dir)
            .field("generation", &self.generation)
            .field("length", &self.file.as_ref().map(|(_, len)| len))
            .field("used", &self.used)
            .finish()
    }
}

/// Why an append failed, and whether its file is as it was before it.
struct Failed {
    error: io::Error,
    cut_back: bool,
}

/// Writes `bytes` at the end of `file` (`len` bytes long) and syncs
/// them. On any failure (some bytes written, or all of them but not
/// synced) the file is cut back to `len` and synced, so that neither a
/// later lesson nor a restart sees any of them.
fn append_synced(file: &mut dyn Segment, len: u64, bytes: &[u8]) -> Result<(), Failed> {
    let error = match file.write_all(bytes).and_then(|()| file.sync_data()) {
        Ok(()) => return Ok(()),
        Err(error) => error,
    };
    let cut_back = file.set_len(len).and_then(|()| file.sync_data()).is_ok();
    Err(Failed { error, cut_back })
}

/// The log of a checkpoint directory, open for appending. A directory
/// whose daemon was never taught has no log file, and its checkpoints no
/// lessons position.
pub struct LessonsLog {
    dir: PathBuf,
    generation: u64,
    /// This generation's file, made at its first lesson, and its length
    /// after the last append that succeeded.
    file: Option<(Box<dyn Segment>, u64)>,
    /// Whether the directory has held lessons (so checkpoints record the
    /// lessons position).
    used: bool,
}

/// A generation's file.
fn path_of(dir: &Path, generation: u64) -> PathBuf {
    dir.join(format!("lessons-{generation:012}.jsonl"))
}

/// The generations whose files are in `dir`, ascending.
fn generations(dir: &Path) -> io::Result<Vec<u64>> {
    let mut found: Vec<u64> = fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            name.strip_prefix("lessons-")?.strip_suffix(".jsonl")?.parse().ok()
        })
        .collect();
    found.sort_unstable();
    Ok(found)
}

/// The whole lessons of `path`, in order; a torn or unreadable last line
/// is cut off the file (it was never synced, so never answered). A bad
/// line before the last is an error: the file was damaged, not torn.
fn read_lessons(path: &Path) -> io::Result<Vec<Recorded>> {
    let mut lines = Vec::new();
    let mut reader = BufReader::new(File::open(path)?);
    let (mut good_end, mut at) = (0u64, 0u64);
    let mut torn = false;
    loop {
        let mut line = Vec::new();
        let n = reader.read_until(b'\n', &mut line)?;
        if n == 0 {
            break;
        }
        at += n as u64;
        let whole = line.last() == Some(&b'\n');
        match Recorded::parse(line.strip_suffix(b"\n").unwrap_or(&line)).filter(|_| whole) {
            Some(r) if !torn => {
                lines.push(r);
                good_end = at;
            }
            _ if torn => {
                let why = format!("lessons log {} is damaged before its last line", path.display());
                return Err(io::Error::new(io::ErrorKind::InvalidData, why));
            }
            _ => torn = true,
        }
    }
    if torn {
        tracing::warn!(path = %path.display(), kept = lines.len(), "a torn last lesson (never answered) was cut off the lessons log");
        OpenOptions::new().write(true).open(path)?.set_len(good_end)?;
    }
    Ok(lines)
}

impl LessonsLog {
    /// Opens the log of `dir` after a checkpoint whose lessons position is
    /// `from` (0 without one): the lessons to learn again (of generation
    /// `from` and later, in order), and the log, appending to the last of
    /// them. Older generations' files are removed (their lessons are in
    /// the checkpoint).
    pub fn open(dir: &Path, from: u64) -> io::Result<(LessonsLog, Vec<Recorded>)> {
        let mut replay = Vec::new();
        let (mut generation, mut used) = (from, from > 0);
        for g in generations(dir)? {
            if g < from {
                fs::remove_file(path_of(dir, g))?;
                continue;
            }
            replay.extend(read_lessons(&path_of(dir, g))?);
            (generation, used) = (g, true);
        }
        let log = LessonsLog {
            dir: dir.to_path_buf(),
            generation,
            file: None,
            used,
        };
        Ok((log, replay))
    }

    /// This generation's file, opened (and made, its directory entry
    /// synced) at the first lesson, and its length.
    fn file(&mut self) -> io::Result<&mut (Box<dyn Segment>, u64)> {
        if self.file.is_none() {
            let path = path_of(&self.dir, self.generation);
            let file = OpenOptions::new().create(true).append(true).open(&path)?;
            File::open(&self.dir)?.sync_all()?;
            let len = file.metadata()?.len();
            let segment: Box<dyn Segment> = Box::new(file);
            (self.file, self.used) = (Some((segment, len)), true);
        }
        // Set just above when it was not.
        self.file.as_mut().ok_or_else(|| io::Error::other("no lessons file"))
    }

    /// Appends `lessons` and syncs them to disk (one sync for them all):
    /// once it returns, a crash loses none of them. When it fails, none of
    /// them is in the log: the file is as it was, or (it could not be cut
    /// back) the log goes on in a new file.
    pub fn append(&mut self, lessons: &[Recorded]) -> io::Result<()> {
        if lessons.is_empty() {
            return Ok(());
        }
        let bytes: Vec<u8> = lessons.iter().flat_map(Recorded::line).collect();
        let (file, len) = self.file()?;
        match append_synced(file.as_mut(), *len, &bytes) {
            Ok(()) => {
                *len += bytes.len() as u64;
                Ok(())
            }
            Err(Failed { error, cut_back: true }) => Err(error),
            Err(Failed { error, cut_back: false }) => {
                // Its torn tail is the last line of its file: cut off at
                // the next open. Every lesson before it was learned, so
                // the position a checkpoint records stays right. (Were
                // whole lines of this batch written before the failure and
                // the cut then failed too, a restart before the next
                // checkpoint would learn them: docs/reliability.md.)
                tracing::error!(%error, generation = self.generation, "a failed append could not be cut back: the lessons log goes on in a new file");
                self.file = None;
                self.generation += 1;
                Err(error)
            }
        }
    }

    /// The lessons position a checkpoint of the model as it stands
    /// records: the generation after this one (every lesson appended so
    /// far is learned); none while the directory never held a lesson.
    pub fn position(&self) -> Option<u64> {
        self.used.then_some(self.generation + 1)
    }

    /// After a checkpoint recorded [`LessonsLog::position`]: appends to
    /// that generation from now on (its file made at its first lesson)
    /// and removes the older files. The move comes first and cannot fail:
    /// a lesson appended after it must never land in a file the
    /// checkpoint says it holds. A file that cannot be removed is left
    /// for the next open, which removes it (logged).
    pub fn rotate(&mut self) {
        if !self.used {
            return;
        }
        let next = self.generation + 1;
        self.file = None;
        self.generation = next;
        let older = generations(&self.dir).map(|gs| gs.into_iter().filter(|&g| g < next).collect::<Vec<_>>());
        let removed = older.and_then(|gs| gs.into_iter().try_for_each(|g| fs::remove_file(path_of(&self.dir, g))));
        if let Err(error) = removed {
            tracing::warn!(%error, dir = %self.dir.display(), "older lessons files not removed (the next start removes them)");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lesson(id: &str, learn: Option<&str>) -> Recorded {
        Recorded {
            id: id.into(),
            learn: learn.map(str::to_string),
            forget_reporter: None,
            user: Some("u@x".into()),
            reporter: None,
            email: if learn.is_some() {
                b"Subject: hi\n\nbody\n".to_vec()
            } else {
                Vec::new()
            },
            text: None,
        }
    }

    /// Lessons appended are replayed after a restart until a checkpoint
    /// takes them; a rotation's older file goes; a restart from an older
    /// checkpoint (its rotation not done) replays what that one lacks.
    #[test]
    fn lessons_come_back_until_a_checkpoint_holds_them() {
        let dir = tempfile::tempdir().unwrap();
        let (mut log, replay) = LessonsLog::open(dir.path(), 0).unwrap();
        assert!(replay.is_empty());
        // Never taught: no file, no position.
        assert_eq!((log.position(), generations(dir.path()).unwrap()), (None, vec![]));
        log.rotate();
        let (a, mut b) = (lesson("a", Some("spam")), lesson("", None));
        b.forget_reporter = Some("flip".into());
        log.append(&[a.clone(), b.clone()]).unwrap();
        drop(log);
        // A crash: the checkpoint (none) says 0; both come back (a label,
        // and a reporter's forget).
        let (mut log, replay) = LessonsLog::open(dir.path(), 0).unwrap();
        assert_eq!(replay, [a.clone(), b.clone()]);
        let c = lesson("c", None);
        log.append(std::slice::from_ref(&c)).unwrap();
        drop(log);
        // A restart from a checkpoint before them: all three come back.
        let (mut log, replay) = LessonsLog::open(dir.path(), 0).unwrap();
        assert_eq!(replay, [a, b, c]);
        // A checkpoint of the model with them records the next generation;
        // once saved, the log moves there and the older file goes.
        let saved = log.position().expect("a log that held lessons has a position");
        log.rotate();
        assert!(generations(dir.path()).unwrap().is_empty());
        let d = lesson("d", Some("spam"));
        log.append(std::slice::from_ref(&d)).unwrap();
        assert_eq!(generations(dir.path()).unwrap(), [saved]);
        drop(log);
        let (_, replay) = LessonsLog::open(dir.path(), saved).unwrap();
        assert_eq!(replay, [d]);
        // A restart from a checkpoint that holds d too replays nothing,
        // removes its file, and still records its position.
        let (log, replay) = LessonsLog::open(dir.path(), saved + 1).unwrap();
        assert!(replay.is_empty() && generations(dir.path()).unwrap().is_empty());
        assert_eq!(log.position(), Some(saved + 2));
    }

    /// A file that takes `left` more bytes, then fails a write (or,
    /// when told to, its sync) once: a disk that was full for a moment.
    /// Its cut fails when told to.
    struct Failing {
        file: File,
        left: usize,
        sync_fails: std::sync::Mutex<bool>,
        cut_fails: bool,
    }

    impl Segment for Failing {
        fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
            let n = bytes.len().min(self.left);
            Write::write_all(&mut self.file, &bytes[..n])?;
            match n < bytes.len() {
                true => {
                    self.left = usize::MAX;
                    Err(io::Error::new(io::ErrorKind::StorageFull, "no space left on device"))
                }
                false => Ok(()),
            }
        }
        fn sync_data(&self) -> io::Result<()> {
            match std::mem::take(&mut *self.sync_fails.lock().unwrap()) {
                true => Err(io::Error::other("sync failed")),
                false => self.file.sync_data(),
            }
        }
        fn set_len(&self, len: u64) -> io::Result<()> {
            match self.cut_fails {
                true => Err(io::Error::other("cut failed")),
                false => self.file.set_len(len),
            }
        }
    }

    /// Makes the log's next append fail as told, after `left` bytes.
    fn fail_next(log: &mut LessonsLog, left: usize, sync_fails: bool, cut_fails: bool) {
        let len = log.file().unwrap().1;
        let path = path_of(&log.dir, log.generation);
        let file = OpenOptions::new().append(true).open(path).unwrap();
        let failing = Failing {
            file,
            left,
            sync_fails: std::sync::Mutex::new(sync_fails),
            cut_fails,
        };
        log.file = Some((Box::new(failing), len));
    }

    /// An append that fails after any number of bytes, or whose sync
    /// fails, leaves the file as it was: the next lessons are whole, and a
    /// restart (as after a kill -9: nothing but the files) gives back
    /// exactly the lessons whose append succeeded. When even the cut fails,
    /// the log goes on in a new file and a restart still gives back
    /// exactly those.
    #[test]
    fn a_failed_append_leaves_the_log_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let (mut log, _) = LessonsLog::open(dir.path(), 0).unwrap();
        let mut acknowledged = vec![lesson("a", Some("spam"))];
        log.append(&acknowledged).unwrap();
        let refused = [lesson("x", Some("ham")), lesson("y", None)];
        let whole: usize = refused.iter().map(|r| r.line().len()).sum();
        for (i, left) in [0, 1, whole / 2, whole - 1].into_iter().enumerate() {
            fail_next(&mut log, left, false, false);
            assert!(log.append(&refused).is_err(), "after {left} bytes");
            let next = lesson(&format!("ok-{i}"), Some("ham"));
            log.append(std::slice::from_ref(&next)).unwrap();
            acknowledged.push(next);
        }
        // Every byte written, the sync failed: refused, so cut back too.
        fail_next(&mut log, usize::MAX, true, false);
        assert!(log.append(&refused).is_err());
        let path = path_of(dir.path(), 0);
        let expected: Vec<u8> = acknowledged.iter().flat_map(Recorded::line).collect();
        assert_eq!(
            fs::read(&path).unwrap(),
            expected,
            "the file holds the acknowledged lessons alone"
        );
        drop(log);
        let (mut log, replay) = LessonsLog::open(dir.path(), 0).unwrap();
        assert_eq!(replay, acknowledged);
        // The cut fails too: the torn tail (inside its first line) stays,
        // the log moves on.
        fail_next(&mut log, 3, false, true);
        assert!(log.append(&refused).is_err());
        let later = lesson("later", Some("spam"));
        log.append(std::slice::from_ref(&later)).unwrap();
        acknowledged.push(later);
        assert_eq!(generations(dir.path()).unwrap(), [0, 1]);
        drop(log);
        let (log, replay) = LessonsLog::open(dir.path(), 0).unwrap();
        assert_eq!(
            replay, acknowledged,
            "the torn tail cut, every acknowledged lesson back"
        );
        // A checkpoint of the model after them covers both files.
        assert_eq!(log.position(), Some(2));
    }

    /// A torn last line (a crash mid-append: never synced, never answered)
    /// is cut off and never learned; the lessons before it are.
    #[test]
    fn a_torn_last_lesson_is_cut_off() {
        let dir = tempfile::tempdir().unwrap();
        let (mut log, _) = LessonsLog::open(dir.path(), 0).unwrap();
        let a = lesson("a", Some("spam"));
        log.append(std::slice::from_ref(&a)).unwrap();
        let whole = lesson("b", Some("ham")).line();
        log.file().unwrap().0.write_all(&whole[..whole.len() / 2]).unwrap();
        drop(log);
        let path = path_of(dir.path(), 0);
        let (mut log, replay) = LessonsLog::open(dir.path(), 0).unwrap();
        assert_eq!(replay, std::slice::from_ref(&a));
        assert_eq!(fs::read(&path).unwrap(), a.line(), "the torn line is gone");
        let c = lesson("c", None);
        log.append(std::slice::from_ref(&c)).unwrap();
        let (_, replay) = LessonsLog::open(dir.path(), 0).unwrap();
        assert_eq!(replay, [a, c]);
        // A bad line before the last is damage, not a tear: refused.
        fs::write(&path, [b"not a lesson\n".to_vec(), lesson("d", None).line()].concat()).unwrap();
        let err = LessonsLog::open(dir.path(), 0).unwrap_err();
        assert!(err.to_string().contains("damaged"), "{err}");
    }
}
