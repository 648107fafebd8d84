//! Flags of the uncertainty review: where `run` writes the messages it asks
//! a person to label and under what budget, and `eval`'s simulation of a
//! label budget (`--label-budget`, `--query`).

use std::path::PathBuf;

use clap::Args;

use crate::pipeline::{Query, ReviewConfig};

#[derive(Debug, Clone, Args)]
pub struct ReviewArgs {
    /// Share of predictions in the uncertain band (marked "uncertain": true),
    /// and the most of the traffic sent for review (0 to 1).
    #[arg(long, env = "CLASSIFYD_REVIEW_BUDGET", default_value_t = 0.01, value_parser = share)]
    pub review_budget: f64,
    /// Most messages sent for review per minute (default: no limit but the budget).
    #[arg(long, env = "CLASSIFYD_REVIEW_PER_MINUTE", hide = true)]
    pub review_per_minute: Option<u32>,
    /// Topic that uncertain messages are written to, for a person to label
    /// (the labels come back on --feedback-topic). Default: none.
    #[arg(long, env = "CLASSIFYD_REVIEW_TOPIC")]
    pub review_topic: Option<String>,
    /// The same as a JSON-lines file (appended), when no brokers.
    #[arg(long, env = "CLASSIFYD_REVIEW")]
    pub review: Option<PathBuf>,
}

impl ReviewArgs {
    pub fn settings(&self) -> ReviewConfig {
        ReviewConfig {
            fraction: self.review_budget,
            per_minute: self.review_per_minute,
            ..ReviewConfig::default()
        }
    }
}

#[derive(Debug, Clone, Args)]
pub struct LabelBudgetArgs {
    /// Learn a labeled example only if the learner asks for it, within this
    /// share of the stream; every example is still predicted and counted.
    #[arg(long, env = "CLASSIFYD_LABEL_BUDGET", value_parser = share)]
    pub label_budget: Option<f64>,
    /// Which examples to ask for under --label-budget: the least confident,
    /// or random ones (the baseline).
    #[arg(long, env = "CLASSIFYD_QUERY", value_enum, default_value = "uncertainty")]
    pub query: Query,
    /// Seed of --query random and --feedback-noise.
    #[arg(long, env = "CLASSIFYD_SEED", default_value_t = 0)]
    pub seed: u64,
    /// Flip this share of the labels the learner sees (at random, from
    /// --seed; single-label streams); the metrics still score the
    /// stream's own labels.
    #[arg(long, env = "CLASSIFYD_FEEDBACK_NOISE", value_parser = share)]
    pub feedback_noise: Option<f64>,
}

impl LabelBudgetArgs {
    /// The review that chooses the labels, when there is a budget.
    /// The label flips of `--feedback-noise`, if asked for.
    pub fn noise(&self) -> Option<crate::eval::noise::LabelNoise> {
        Some(crate::eval::noise::LabelNoise {
            rate: self.feedback_noise?,
            seed: self.seed,
        })
    }

    pub fn settings(&self) -> Option<ReviewConfig> {
        Some(ReviewConfig {
            fraction: self.label_budget?,
            per_minute: None,
            query: self.query,
            seed: self.seed,
        })
    }
}

/// A share of the messages, from 0 to 1 (clap's parser of the budgets).
fn share(v: &str) -> Result<f64, String> {
    let v: f64 = v.parse().map_err(|e| format!("{e}"))?;
    if (0.0..=1.0).contains(&v) {
        Ok(v)
    } else {
        Err(format!("must be between 0 and 1 (a share of the messages), not {v}"))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn budgets_are_shares() {
        use clap::Parser;
        let parse = |args: &[&str]| {
            let all = [&["classifyd", "eval", "--input", "x"], args].concat();
            crate::config::Cli::try_parse_from(all)
        };
        let eval = |args: &[&str]| match parse(args).unwrap().command {
            crate::config::Command::Eval(e) => e,
            _ => panic!("not eval"),
        };
        assert_eq!(
            eval(&["--label-budget", "0.1"]).labels.settings().map(|c| c.fraction),
            Some(0.1)
        );
        assert_eq!(eval(&[]).labels.settings(), None);
        let err = parse(&["--label-budget", "1.5"]).unwrap_err().to_string();
        assert!(
            err.contains("--label-budget") && err.contains("between 0 and 1"),
            "{err}"
        );
        assert!(parse(&["--label-budget", "-0.1"]).is_err());
        let run = |b: &str| crate::config::Cli::try_parse_from(["classifyd", "run", "--review-budget", b]);
        assert!(run("2").unwrap_err().to_string().contains("--review-budget"));
        assert!(run("0.5").is_ok());
    }
}
