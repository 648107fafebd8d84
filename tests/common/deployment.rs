//! A deployment on the test broker: one learner and any number of
//! predictors on the same topics, group and model topic, killed if the
//! test fails before stopping them.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use super::*;

/// One deployment under test: its topics (4 input partitions), model
/// topic, group and the learner's checkpoint directory. Dropped by a
/// failing test, it kills the daemons it started, so none is left behind.
pub struct Deployment {
    pub topics: Topics,
    pub model_topic: String,
    pub group: String,
    pub tmp: tempfile::TempDir,
    /// The learner's checkpoint directory.
    pub dir: PathBuf,
    pids: std::cell::RefCell<Vec<u32>>,
}

impl Deployment {
    pub fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        Deployment {
            topics: Topics::create(4),
            model_topic: unique("model"),
            group: unique("g"),
            dir: tmp.path().join("learner"),
            tmp,
            pids: Default::default(),
        }
    }

    /// Starts the learner, with `extra` flags.
    pub fn learner(&self, extra: &[&str]) -> Child {
        self.spawn("learner", Some(&self.dir), extra)
    }

    /// Starts a predictor, with `extra` flags.
    pub fn predictor(&self, extra: &[&str]) -> Child {
        self.spawn("predictor", None, extra)
    }

    pub fn spawn(&self, role: &str, dir: Option<&Path>, extra: &[&str]) -> Child {
        let mut c = Command::new(BIN);
        c.arg("run")
            .args(["--brokers", &bootstrap(), "--group-id", &self.group, "--role", role])
            .args(["--model-topic", &self.model_topic])
            .args(self.topics.flags())
            .args(["-X", "session.timeout.ms=6000", "-X", "heartbeat.interval.ms=500"])
            .args([
                "--bits",
                "16",
                "--checkpoint-interval-secs",
                "1",
                "--model-publish-ms",
                "200",
            ])
            .args(extra)
            .env(
                "CLASSIFYD_LOG",
                std::env::var("CLASSIFYD_TEST_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdout(Stdio::null());
        if let Some(d) = dir {
            c.arg("--checkpoint-dir").arg(d);
        }
        let child = c.spawn().expect("spawn classifyd");
        self.pids.borrow_mut().push(child.id());
        child
    }
}

impl Drop for Deployment {
    fn drop(&mut self) {
        // A test that passed has stopped its daemons itself.
        if !std::thread::panicking() {
            return;
        }
        for &pid in self.pids.borrow().iter() {
            // SAFETY: kill(2) on a pid this test spawned (at worst it has exited).
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        }
    }
}
