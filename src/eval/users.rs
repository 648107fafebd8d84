//! Progressive accuracy by user, in bands of how many labels the user had
//! given when the example came (`eval` on a stream whose messages name a
//! `"user"`): who gains from personal features, the users with many
//! labels or the many with few. `eval` only: a daemon exports no series
//! per user (Prometheus keeps a bounded label set).

use foldhash::HashMap;

/// The bands' lower bounds, in labels the user had given before.
pub(crate) const BANDS: [u64; 3] = [0, 50, 500];

/// Counts per band.
#[derive(Clone, Debug, Default)]
pub(crate) struct UserBands {
    /// Labels seen per user so far.
    seen: HashMap<String, u64>,
    /// Per band: examples and correct predictions.
    counts: [(u64, u64); BANDS.len()],
}

/// One band of the report.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Band {
    /// "0-50", "50-500", "500+": the user's labels before the example.
    pub band: String,
    pub examples: u64,
    pub accuracy: f64,
    /// Users with at least one example in the band.
    pub users: u64,
}

impl UserBands {
    /// Counts a labeled example of `user`, predicted `correct`ly or not.
    pub(crate) fn record(&mut self, user: String, correct: bool) {
        let seen = self.seen.entry(user).or_default();
        let before = *seen;
        *seen += 1;
        let band = BANDS.iter().rposition(|&lo| before >= lo).unwrap_or(0);
        let (examples, right) = &mut self.counts[band];
        *examples += 1;
        *right += u64::from(correct);
    }

    /// Whether any example named a user.
    pub(crate) fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }

    /// The bands, in order.
    pub(crate) fn report(&self) -> Vec<Band> {
        BANDS
            .iter()
            .enumerate()
            .map(|(i, &lo)| {
                let (examples, right) = self.counts[i];
                let band = match BANDS.get(i + 1) {
                    Some(hi) => format!("{lo}-{hi}"),
                    None => format!("{lo}+"),
                };
                let users = self.seen.values().filter(|&&n| n > lo).count() as u64;
                let accuracy = if examples > 0 {
                    right as f64 / examples as f64
                } else {
                    f64::NAN
                };
                Band {
                    band,
                    examples,
                    accuracy,
                    users,
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_example_counts_in_the_band_of_the_labels_before_it() {
        let mut b = UserBands::default();
        for i in 0..60 {
            b.record("busy".into(), i % 2 == 0);
        }
        b.record("quiet".into(), false);
        let r = b.report();
        assert_eq!((r[0].examples, r[1].examples, r[2].examples), (51, 10, 0));
        assert_eq!(r[0].accuracy, 25.0 / 51.0);
        assert_eq!((r[0].users, r[1].users), (2, 1));
        assert!(r[2].accuracy.is_nan());
        assert_eq!(r[2].band, "500+");
    }
}
