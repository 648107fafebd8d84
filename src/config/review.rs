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
    #[arg(long, env = "CLASSIFYD_REVIEW_BUDGET", default_value_t = 0.01)]
    pub review_budget: f64,
    /// Most messages sent for review per minute (default: no limit but the budget).
    #[arg(long, env = "CLASSIFYD_REVIEW_PER_MINUTE")]
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
    pub fn settings(&self) -> Result<ReviewConfig, String> {
        Ok(ReviewConfig {
            fraction: fraction("--review-budget", self.review_budget)?,
            per_minute: self.review_per_minute,
            ..ReviewConfig::default()
        })
    }
}

#[derive(Debug, Clone, Args)]
pub struct LabelBudgetArgs {
    /// Learn a labeled example only if the learner asks for it, within this
    /// share of the stream; every example is still predicted and counted.
    #[arg(long, env = "CLASSIFYD_LABEL_BUDGET")]
    pub label_budget: Option<f64>,
    /// Which examples to ask for under --label-budget: the least confident,
    /// or random ones (the baseline).
    #[arg(long, env = "CLASSIFYD_QUERY", value_enum, default_value = "uncertainty")]
    pub query: Query,
    /// Seed of --query random.
    #[arg(long, env = "CLASSIFYD_SEED", default_value_t = 0)]
    pub seed: u64,
}

impl LabelBudgetArgs {
    /// The review that chooses the labels, when there is a budget.
    pub fn settings(&self) -> Result<Option<ReviewConfig>, String> {
        let Some(budget) = self.label_budget else {
            return Ok(None);
        };
        Ok(Some(ReviewConfig {
            fraction: fraction("--label-budget", budget)?,
            per_minute: None,
            query: self.query,
            seed: self.seed,
        }))
    }
}

fn fraction(flag: &str, v: f64) -> Result<f64, String> {
    if (0.0..=1.0).contains(&v) {
        Ok(v)
    } else {
        Err(format!(
            "{flag} must be between 0 and 1 (a share of the messages), not {v}"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_are_shares() {
        let args = |b| LabelBudgetArgs {
            label_budget: Some(b),
            query: Query::Random,
            seed: 3,
        };
        assert_eq!(args(0.1).settings().unwrap().map(|c| c.fraction), Some(0.1));
        assert!(args(1.5).settings().unwrap_err().contains("--label-budget"));
        assert!(args(-0.1).settings().is_err());
        let review = ReviewArgs {
            review_budget: 2.0,
            review_per_minute: None,
            review_topic: None,
            review: None,
        };
        assert!(review.settings().unwrap_err().contains("--review-budget"));
    }
}
