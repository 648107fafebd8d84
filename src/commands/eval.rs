//! The `eval` command: progressive evaluation of a whole file on two
//! threads (a reader that parses and featurizes, the model's), the extra
//! passes and held-out test of a split stream, the label-budget simulation,
//! and the report (`--json` or readable).

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::time::Instant;

use indicatif::ProgressBar;
use serde::Serialize;

use super::{CommandError, io_at};
use crate::config::EvalArgs;
use crate::eval::Report;
use crate::eval::noise::LabelNoise;
use crate::features::FeatureConfig;
use crate::model::{Hyper, Model};
use crate::pipeline::{Driver, Entry, HeldExample, Outcome, Pipeline};
use crate::transport::ahead::{self, Batch, Line, Stopped};
use crate::transport::sinks::DeadLetterSink;

/// The result of `eval`, printed by `--json`.
#[derive(Debug, Serialize)]
pub struct EvalResult {
    /// Lines handled in the first pass (examples, requests, test lines,
    /// bad lines; not blank ones).
    pub examples: u64,
    pub seconds: f64,
    /// CPU time of the whole process over the same span (the reader thread
    /// and the model's), for throughput per core.
    pub cpu_seconds: f64,
    pub examples_per_second: f64,
    /// Bytes of input read.
    pub bytes: u64,
    pub megabytes_per_second: f64,
    /// Megabytes of input per CPU second.
    pub megabytes_per_cpu_second: f64,
    pub passes: usize,
    /// The hyperparameters in force (for the stream's task).
    pub model: Hyper,
    pub features: FeatureConfig,
    pub learned: u64,
    pub bad: u64,
    /// Mean non-zero features per featurized message.
    pub features_per_example: f64,
    pub progressive: Report,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub test: Option<Report>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub published: Option<Report>,
    /// A stream whose messages name a user: progressive accuracy by band
    /// of the user's labels before the example.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub users: Option<Vec<crate::eval::users::Band>>,
    /// Where the Page-Hinkley test found the progressive error rate rising:
    /// the labeled examples seen by then (the first hundred).
    pub drift_detections: Vec<u64>,
    /// `--label-budget`: how the labels were chosen and how many were asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label_budget: Option<LabelBudget>,
    /// `--feedback-noise`: the share asked for, the seed, and the labels
    /// the learner saw flipped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub feedback_noise: Option<FeedbackNoise>,
}

/// What `--feedback-noise` did.
#[derive(Debug, Serialize)]
pub struct FeedbackNoise {
    pub rate: f64,
    pub seed: u64,
    pub flipped: u64,
}

/// What `--label-budget` did: every labeled example was predicted and
/// counted; only the `asked` ones were learned.
#[derive(Debug, Serialize)]
pub struct LabelBudget {
    pub fraction: f64,
    pub query: crate::pipeline::Query,
    pub seed: u64,
    pub asked: u64,
    pub declined: u64,
}

/// Progressive evaluation of a whole file, then extra passes over its
/// training lines and the held-out test metrics when it has a split.
pub fn eval(args: &EvalArgs) -> Result<(EvalResult, Pipeline), CommandError> {
    let (features, choice) = args.model.settings()?;
    let mut cfg = args.pipeline.settings();
    cfg.limits = args.model.limits(&features)?;
    let review = args.labels.settings();
    let mut driver = EvalDriver {
        keep_train: args.passes > 1,
        budget: review.is_some(),
        noise: args.labels.noise(),
        ..EvalDriver::default()
    };
    if let Some(review) = review {
        cfg.review = review;
    }
    cfg.name_features = false;
    let path = args.input.display().to_string();
    let file = File::open(&args.input).map_err(io_at(&path))?;
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    let mut pipeline = Pipeline::new(Model::new(choice, features), cfg);
    pipeline.track_members();
    let start = Instant::now();
    let cpu_start = process_cpu_seconds();
    let mut pass = FirstPass {
        curve: args.plot.as_ref().map(|_| crate::plot::Curve::default()),
        // About 400 points along the stream (the file's line count is unknown: sample by bytes).
        plot_every: (size / 400).max(1),
        ..FirstPass::default()
    };
    let mut dead = DeadLetterSink::open(args.dead_letter.as_deref()).map_err(CommandError::Output)?;
    let progress = progress_bar(size);
    let reader = BufReader::with_capacity(1 << 16, file);
    pass.run(args, &path, reader, (&mut pipeline, &mut driver), &mut dead, &progress)?;
    let (train, test) = (std::mem::take(&mut driver.train), std::mem::take(&mut driver.test));
    // Extra passes only serve the held-out test: a stream without one is
    // reported from its progressive pass, and the model is not kept.
    let passes = if test.is_empty() { 1 } else { args.passes };
    for _ in 1..passes {
        for held in &train {
            pipeline.relearn(held);
        }
    }
    drop(train);
    for held in &test {
        pipeline.score_test(held);
    }
    progress.finish_and_clear();
    if let (Some(c), Some(plot)) = (&mut pass.curve, &args.plot) {
        draw(c, &pipeline, &args.input, plot)?;
    }
    dead.flush().map_err(CommandError::Output)?;
    let timing = (start.elapsed().as_secs_f64(), process_cpu_seconds() - cpu_start);
    let result = report((&pipeline, &driver), &pass, passes, timing);
    Ok((result, pipeline))
}

/// What `eval` asks of the pipeline beyond a daemon's work: a label
/// budget (`--label-budget`: a labeled example is learned only if the
/// review asks for it), label noise (`--feedback-noise`), the learned
/// train-split examples kept for the extra passes, the test-split
/// examples scored after all training.
#[derive(Debug, Default)]
struct EvalDriver {
    budget: bool,
    noise: Option<LabelNoise>,
    keep_train: bool,
    train: Vec<HeldExample>,
    test: Vec<HeldExample>,
}

impl Driver for EvalDriver {
    fn budgets_labels(&self) -> bool {
        self.budget
    }

    fn seen_class(&mut self, n: u64, class: usize, classes: usize) -> usize {
        self.noise.map_or(class, |noise| noise.class(n, class, classes))
    }

    fn keeps_train(&self) -> bool {
        self.keep_train
    }

    fn learned(&mut self, example: HeldExample) {
        self.train.push(example);
    }

    fn test(&mut self, example: HeldExample) -> Option<HeldExample> {
        self.test.push(example);
        None
    }
}

/// The first, progressive pass over a file and what it keeps for later.
#[derive(Default)]
struct FirstPass {
    /// Lines and bytes read.
    number: u64,
    bytes: u64,
    curve: Option<crate::plot::Curve>,
    plot_every: u64,
    next_plot: u64,
}

impl FirstPass {
    /// Reads, parses and featurizes on `--threads` threads (no model
    /// needed) while this one runs the model, a batch of lines at a time,
    /// in order ([`super::ahead`]).
    fn run(
        &mut self,
        args: &EvalArgs,
        path: &str,
        reader: impl BufRead + Send,
        (pipeline, driver): (&mut Pipeline, &mut EvalDriver),
        dead: &mut DeadLetterSink,
        progress: &ProgressBar,
    ) -> Result<(), CommandError> {
        let threads = args.threads.unwrap_or_else(ahead::default_threads);
        let preparer = pipeline.preparer();
        let batches = ahead::each_batch(reader, (args.limit, threads), preparer, |batch| {
            self.batch(batch, path, (&mut *pipeline, &mut *driver), dead)?;
            progress.set_position(self.bytes);
            Ok(())
        });
        batches.map_err(|stopped| match stopped {
            Stopped::Each(e) => e,
            Stopped::Read(e) => io_at(path)(e),
            Stopped::Spawn(e) => io_at("a thread to read ahead")(e),
        })
    }

    /// The lines of one batch, in order, through the pipeline.
    fn batch(
        &mut self,
        batch: &mut Batch,
        path: &str,
        (pipeline, driver): (&mut Pipeline, &mut EvalDriver),
        dead: &mut DeadLetterSink,
    ) -> Result<(), CommandError> {
        batch.each(|(_, taken), line, prepared| {
            let (Line::Whole(line) | Line::Oversized { prefix: line, .. }) = line;
            self.bytes += taken;
            self.number += 1;
            let number = self.number;
            let id = || number.to_string();
            // The stream's clock: line n is n seconds in (messages carry
            // no time), so `--feedback-ttl-secs 60` is 60 lines.
            if let Outcome::Bad(bad) = pipeline.handle_entry(
                Entry::Prepared(prepared.0, prepared.1),
                &id,
                number.saturating_mul(1000),
                driver,
            ) {
                dead.write(&format!("{path}:{number}"), &bad, line)
                    .map_err(CommandError::Output)?;
            }
            if let Some(c) = &mut self.curve
                && self.bytes >= self.next_plot
            {
                c.sample(pipeline.progressive());
                self.next_plot = self.bytes + self.plot_every;
            }
            Ok(())
        })
    }
}

/// Draws the learning curve to `plot`, titled by the input's last two path parts.
fn draw(
    curve: &mut crate::plot::Curve,
    pipeline: &Pipeline,
    input: &std::path::Path,
    plot: &std::path::Path,
) -> Result<(), CommandError> {
    let m = pipeline.progressive();
    curve.sample(m);
    let support: Vec<u64> = m.total().per_class.iter().map(|x| x.tp + x.fn_).collect();
    // "sms_spam_collection/stream.jsonl" says more than "stream.jsonl".
    let parts: Vec<String> = input
        .iter()
        .rev()
        .take(2)
        .map(|s| s.to_string_lossy().into_owned())
        .collect();
    let title = parts.into_iter().rev().collect::<Vec<_>>().join("/");
    Ok(crate::plot::render(curve, m.labels(), &support, &title, plot)?)
}

/// The report of a finished evaluation; `timing` is (wall, CPU) seconds.
fn report(
    (pipeline, driver): (&Pipeline, &EvalDriver),
    pass: &FirstPass,
    passes: usize,
    (seconds, cpu_seconds): (f64, f64),
) -> EvalResult {
    let (number, bytes) = (pass.number, pass.bytes);
    // Blank lines are no examples.
    let examples = number - pipeline.counters().skipped;
    EvalResult {
        examples,
        seconds,
        examples_per_second: examples as f64 / seconds.max(1e-9),
        bytes,
        megabytes_per_second: bytes as f64 / 1e6 / seconds.max(1e-9),
        cpu_seconds,
        megabytes_per_cpu_second: bytes as f64 / 1e6 / cpu_seconds.max(1e-9),
        passes,
        model: pipeline.model().hyper().clone(),
        features: *pipeline.model().features(),
        learned: pipeline.counters().learned,
        bad: pipeline.counters().bad_total(),
        features_per_example: pipeline.counters().features as f64 / number.max(1) as f64,
        progressive: pipeline.progressive().report(),
        test: (pipeline.counters().test_scored > 0).then(|| pipeline.test_metrics().report()),
        published: (pipeline.published().total().examples > 0).then(|| pipeline.published().report()),
        users: (!pipeline.user_bands().is_empty()).then(|| pipeline.user_bands().report()),
        drift_detections: pipeline.drift().progressive_at.clone(),
        label_budget: driver.budget.then(|| {
            let review = pipeline.review().config();
            LabelBudget {
                fraction: review.fraction,
                query: review.query,
                seed: review.seed,
                asked: pipeline.counters().reviewed,
                declined: pipeline.counters().labels_declined,
            }
        }),
        feedback_noise: driver.noise.map(|n| FeedbackNoise {
            rate: n.rate,
            seed: n.seed,
            flipped: pipeline.counters().labels_flipped,
        }),
    }
}

/// User + system CPU seconds of this process so far (0 where unknown).
fn process_cpu_seconds() -> f64 {
    #[cfg(unix)]
    {
        // SAFETY: getrusage only writes the struct it is given, which is
        // plain data for which all zeroes is a valid value.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } == 0 {
            let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
            return secs(ru.ru_utime) + secs(ru.ru_stime);
        }
    }
    0.0
}

/// A byte-progress bar on stderr; indicatif hides it when stderr is not a terminal.
pub(super) fn progress_bar(total: u64) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::with_draw_target(Some(total), indicatif::ProgressDrawTarget::stderr());
    if let Ok(style) =
        indicatif::ProgressStyle::with_template("{bar:40} {bytes}/{total_bytes} {bytes_per_sec} eta {eta}")
    {
        bar.set_style(style);
    }
    bar
}

impl EvalResult {
    /// The readable report.
    pub fn render(&self) -> String {
        let mut s = format!(
            "{} lines in {:.2} s ({:.0} lines/s, {:.1} MB/s); model {} ({} schedule, rate {}, l2 {}), {} bits\n",
            self.examples,
            self.seconds,
            self.examples_per_second,
            self.megabytes_per_second,
            self.model.learner,
            self.model.schedule,
            self.model.learning_rate,
            self.model.l2,
            self.features.bits
        );
        if self.bad > 0 {
            s.push_str(&format!("{} bad lines (see --dead-letter)\n", self.bad));
        }
        s.push_str(&self.progressive.render("progressive (test-then-train)"));
        if let Some(t) = &self.test {
            s.push_str(&t.render(&format!("held-out test after {} pass(es)", self.passes)));
        }
        if let Some(p) = &self.published {
            s.push_str(&p.render("published predictions judged by late labels"));
        }
        if let Some(bands) = &self.users {
            s.push_str("progressive accuracy by the user's labels before the example:\n");
            for b in bands {
                s.push_str(&format!(
                    "  {:>8} labels: {:>7} examples, accuracy {:.4}, {} users\n",
                    b.band, b.examples, b.accuracy, b.users
                ));
            }
        }
        if let Some(b) = &self.label_budget {
            s.push_str(&format!(
                "label budget {} ({:?} queries): {} labels asked for, {} declined\n",
                b.fraction, b.query, b.asked, b.declined
            ));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Cli, Command};
    use clap::Parser;

    /// `eval`, which prepares lines on a reader thread in batches, ends
    /// where handing the same lines to `Pipeline::handle` one by one does:
    /// same metrics, same counters, and bad lines dead-lettered under their
    /// own line numbers, across several batches.
    #[test]
    fn eval_on_the_reader_thread_equals_the_pipeline_line_by_line() {
        let tmp = tempfile::tempdir().unwrap();
        let input = tmp.path().join("stream.jsonl");
        let dead = tmp.path().join("dead.jsonl");
        let mut text = String::new();
        let mut bad_lines = Vec::new();
        for (i, line) in include_str!("../../tests/data/sms_head1000.jsonl")
            .lines()
            .take(700)
            .enumerate()
        {
            text.push_str(line);
            text.push('\n');
            if i % 97 == 5 {
                text.push_str("{\"text\": \n");
                bad_lines.push(text.lines().count());
            }
            if i % 89 == 7 {
                text.push('\n');
            }
        }
        std::fs::write(&input, &text).unwrap();
        let cli = Cli::parse_from([
            "classifyd".as_ref(),
            "eval".as_ref(),
            "--input".as_ref(),
            input.as_os_str(),
            "--dead-letter".as_ref(),
            dead.as_os_str(),
        ]);
        let Command::Eval(args) = cli.command else {
            panic!("not eval")
        };
        let (result, threaded) = eval(&args).unwrap();

        let (features, choice) = args.model.settings().unwrap();
        let mut inline = Pipeline::new(Model::new(choice, features), args.pipeline.settings());
        inline.track_members();
        for (n, line) in text.lines().enumerate() {
            let number = n as u64 + 1;
            inline.handle(line.as_bytes(), &|| number.to_string(), number);
        }
        // Blank lines are not counted.
        let blank = text.lines().filter(|l| l.trim().is_empty()).count();
        assert!(blank > 0);
        assert_eq!(result.examples, (text.lines().count() - blank) as u64);
        assert_eq!(threaded.progressive(), inline.progressive());
        assert_eq!(threaded.counters(), inline.counters());
        assert_eq!(threaded.model().version(), inline.model().version());
        let positions: Vec<String> = std::fs::read_to_string(&dead)
            .unwrap()
            .lines()
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()["position"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect();
        let expected: Vec<String> = bad_lines.iter().map(|n| format!("{}:{n}", input.display())).collect();
        assert_eq!(positions, expected);
        assert!(positions.len() >= 7);
    }

    /// `--feedback-noise`: the learner sees flipped labels (as many as
    /// asked, the same for the same seed), the metrics still score the
    /// stream's own labels, so the accuracy falls.
    #[test]
    fn feedback_noise_flips_what_the_learner_sees_not_what_is_scored() {
        let input = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/sms_head1000.jsonl");
        let run = |extra: &[&str]| {
            let mut all = vec!["classifyd", "eval", "--input", input.to_str().unwrap()];
            all.extend_from_slice(extra);
            let Command::Eval(args) = Cli::parse_from(all).command else {
                panic!("not eval")
            };
            eval(&args).unwrap().0
        };
        let clean = run(&[]);
        let noisy = run(&["--feedback-noise", "0.2", "--seed", "3"]);
        let again = run(&["--feedback-noise", "0.2", "--seed", "3"]);
        assert!(clean.feedback_noise.is_none());
        let flips = noisy.feedback_noise.as_ref().map(|n| n.flipped).unwrap();
        let share = flips as f64 / noisy.learned as f64;
        assert!((0.15..0.25).contains(&share), "{flips} of {}", noisy.learned);
        assert_eq!(again.feedback_noise.map(|n| n.flipped), Some(flips));
        assert_eq!(again.progressive.accuracy, noisy.progressive.accuracy);
        assert_eq!(noisy.progressive.examples, clean.progressive.examples);
        assert!(
            noisy.progressive.accuracy < clean.progressive.accuracy - 0.01,
            "noisy {} against clean {}",
            noisy.progressive.accuracy,
            clean.progressive.accuracy
        );
    }

    /// Any number of preparing threads gives the same result, in order:
    /// the report (but its timings), and the dead letters of lines over
    /// the size cap, line for line, over more batches than threads.
    #[test]
    fn threads_that_prepare_ahead_change_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let input = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/sms_head1000.jsonl");
        let run = |threads: &str| {
            let dead = dir.path().join(format!("dead-{threads}.jsonl"));
            let all = [
                "classifyd",
                "eval",
                "--input",
                input.to_str().unwrap(),
                "--max-message-bytes",
                "150",
                "--threads",
                threads,
                "--dead-letter",
                dead.to_str().unwrap(),
            ];
            let Command::Eval(args) = Cli::parse_from(all).command else {
                panic!("not eval")
            };
            let mut report = serde_json::to_value(eval(&args).unwrap().0).unwrap();
            for timing in [
                "seconds",
                "cpu_seconds",
                "examples_per_second",
                "megabytes_per_second",
                "megabytes_per_cpu_second",
            ] {
                report.as_object_mut().unwrap().remove(timing);
            }
            (report, std::fs::read_to_string(dead).unwrap())
        };
        let (one, dead_one) = run("1");
        assert!(dead_one.lines().count() > 20, "too few oversized lines to check");
        for threads in ["2", "3"] {
            let (many, dead_many) = run(threads);
            assert_eq!(many, one, "--threads {threads}");
            assert_eq!(dead_many, dead_one, "--threads {threads}");
        }
    }
}
