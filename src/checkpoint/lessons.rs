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
//! A crash in the middle of an append leaves a torn last line: it was never
//! synced, so never answered; it is cut off at the next open, never half
//! learned.

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
    /// The label it teaches; `None`: forget the id's label.
    pub learn: Option<String>,
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
            forget: self.learn.is_none(),
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
        if l.forget == l.learn.is_some() {
            return None;
        }
        Some(Recorded {
            id: l.id,
            learn: l.learn,
            user: l.user,
            reporter: l.reporter,
            email: B64.decode(l.email_base64.as_bytes()).ok()?,
            text: l.text,
        })
    }
}

/// The log of a checkpoint directory, open for appending. A directory
/// whose daemon was never taught has no log file, and its checkpoints no
/// lessons position.
#[derive(Debug)]
pub struct LessonsLog {
    dir: PathBuf,
    generation: u64,
    /// This generation's file, made at its first lesson.
    file: Option<File>,
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
    /// synced) at the first lesson.
    fn file(&mut self) -> io::Result<&mut File> {
        if self.file.is_none() {
            let path = path_of(&self.dir, self.generation);
            let file = OpenOptions::new().create(true).append(true).open(&path)?;
            File::open(&self.dir)?.sync_all()?;
            (self.file, self.used) = (Some(file), true);
        }
        // Set just above when it was not.
        self.file.as_mut().ok_or_else(|| io::Error::other("no lessons file"))
    }

    /// Appends `lessons` and syncs them to disk (one sync for them all):
    /// once it returns, a crash loses none of them.
    pub fn append(&mut self, lessons: &[Recorded]) -> io::Result<()> {
        if lessons.is_empty() {
            return Ok(());
        }
        let bytes: Vec<u8> = lessons.iter().flat_map(Recorded::line).collect();
        let file = self.file()?;
        file.write_all(&bytes)?;
        file.sync_data()
    }

    /// The lessons position a checkpoint of the model as it stands
    /// records: the generation after this one (every lesson appended so
    /// far is learned); none while the directory never held a lesson.
    pub fn position(&self) -> Option<u64> {
        self.used.then_some(self.generation + 1)
    }

    /// After a checkpoint recorded [`LessonsLog::position`]: appends to
    /// that generation from now on (its file made at its first lesson)
    /// and removes the older files.
    pub fn rotate(&mut self) -> io::Result<()> {
        if !self.used {
            return Ok(());
        }
        let next = self.generation + 1;
        self.file = None;
        for g in generations(&self.dir)?.into_iter().filter(|&g| g < next) {
            fs::remove_file(path_of(&self.dir, g))?;
        }
        self.generation = next;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lesson(id: &str, learn: Option<&str>) -> Recorded {
        Recorded {
            id: id.into(),
            learn: learn.map(str::to_string),
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
        log.rotate().unwrap();
        let (a, b) = (lesson("a", Some("spam")), lesson("b", None));
        log.append(&[a.clone(), b.clone()]).unwrap();
        drop(log);
        // A crash: the checkpoint (none) says 0; both come back.
        let (mut log, replay) = LessonsLog::open(dir.path(), 0).unwrap();
        assert_eq!(replay, [a.clone(), b.clone()]);
        let c = lesson("c", Some("ham"));
        log.append(std::slice::from_ref(&c)).unwrap();
        drop(log);
        // A restart from a checkpoint before them: all three come back.
        let (mut log, replay) = LessonsLog::open(dir.path(), 0).unwrap();
        assert_eq!(replay, [a, b, c]);
        // A checkpoint of the model with them records the next generation;
        // once saved, the log moves there and the older file goes.
        let saved = log.position().expect("a log that held lessons has a position");
        log.rotate().unwrap();
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

    /// A torn last line (a crash mid-append: never synced, never answered)
    /// is cut off and never learned; the lessons before it are.
    #[test]
    fn a_torn_last_lesson_is_cut_off() {
        let dir = tempfile::tempdir().unwrap();
        let (mut log, _) = LessonsLog::open(dir.path(), 0).unwrap();
        let a = lesson("a", Some("spam"));
        log.append(std::slice::from_ref(&a)).unwrap();
        let whole = lesson("b", Some("ham")).line();
        log.file().unwrap().write_all(&whole[..whole.len() / 2]).unwrap();
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
