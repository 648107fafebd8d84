//! Accuracy by user, in bands of how many labels the user had given when
//! the example came: who gains from personal features, the users with
//! many labels or the many with few. The pipeline keeps it for every
//! labeled message that names a user (its first label, inline or late);
//! `eval --json` reports it as `users`, the daemon exports it with a label
//! per band, never per user (Prometheus keeps a bounded label set), and
//! checkpoints carry it. Its counts also tell learning when a user's
//! personal copies start to learn (the pipeline's `PERSONAL_AFTER`).
//!
//! Memory is bounded whatever the number of users: each user's label
//! count is a counter in a fixed table of [`SLOTS`], found by the user's
//! key, allocated at the first user. Users whose keys share a slot share
//! a count, so past tens of thousands of users some are put in a band
//! above their own (with 10,000 users, about 4 % share a slot).

/// The bands' lower bounds, in labels the user had given before.
pub(crate) const BANDS: [u64; 3] = [0, 50, 500];

/// The counters of users' labels: 2^18 (1 MiB).
pub(crate) const SLOTS: usize = 1 << 18;

/// Counts per band.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct UserBands {
    /// Labels seen per slot so far; empty until the first user.
    seen: Vec<u32>,
    /// Per band: examples and correct predictions.
    counts: [(u64, u64); BANDS.len()],
}

/// One band of the report.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Band {
    /// "0-50", "50-500", "500+": the user's labels before the example.
    pub band: String,
    pub examples: u64,
    pub correct: u64,
    pub accuracy: f64,
    /// Users with at least one example in the band (users sharing a
    /// counter count once).
    pub users: u64,
}

impl UserBands {
    /// Counts a labeled example of the user of key `user`
    /// (the key `features::user_key` gives), predicted `correct`ly or not.
    pub fn record(&mut self, user: u64, correct: bool) {
        if self.seen.is_empty() {
            self.seen = vec![0; SLOTS];
        }
        // SLOTS is a power of two: the low bits of a hash pick the slot.
        let seen = &mut self.seen[user as usize & (SLOTS - 1)];
        let before = u64::from(*seen);
        *seen = seen.saturating_add(1);
        let band = BANDS.iter().rposition(|&lo| before >= lo).unwrap_or(0);
        let (examples, right) = &mut self.counts[band];
        *examples += 1;
        *right += u64::from(correct);
    }

    /// The labeled messages counted for the user of key `user` (with
    /// those of any user whose key shares its counter).
    pub fn labels(&self, user: u64) -> u32 {
        self.seen.get(user as usize & (SLOTS - 1)).copied().unwrap_or(0)
    }

    /// Whether any example named a user.
    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }

    /// Per band, in order, its name, labeled messages and correct
    /// predictions (without the users, which take a pass over the table).
    pub fn tallies(&self) -> impl Iterator<Item = (String, u64, u64)> + '_ {
        self.counts.iter().enumerate().map(|(i, &(e, c))| (band_name(i), e, c))
    }

    /// The bands, in order.
    pub fn report(&self) -> Vec<Band> {
        BANDS
            .iter()
            .enumerate()
            .map(|(i, &lo)| {
                let (examples, correct) = self.counts[i];
                let users = self.seen.iter().filter(|&&n| u64::from(n) > lo).count() as u64;
                let accuracy = if examples > 0 {
                    correct as f64 / examples as f64
                } else {
                    f64::NAN
                };
                Band {
                    band: band_name(i),
                    examples,
                    correct,
                    accuracy,
                    users,
                }
            })
            .collect()
    }

    /// What a checkpoint keeps: the slots that counted a label and their
    /// counts, then each band's examples and correct predictions.
    pub fn parts(&self) -> (Vec<u32>, Vec<u32>, Vec<(u64, u64)>) {
        let (slots, counts) = self
            .seen
            .iter()
            .enumerate()
            .filter(|&(_, &n)| n > 0)
            .map(|(s, &n)| (s as u32, n))
            .unzip();
        (slots, counts, self.counts.to_vec())
    }

    /// Rebuilds the tally from [`UserBands::parts`].
    pub fn from_parts(slots: &[u32], counts: &[u32], bands: &[(u64, u64)]) -> Result<Self, String> {
        if slots.len() != counts.len() || bands.len() != BANDS.len() {
            return Err(format!(
                "user bands: {} slots with {} counts and {} bands, expected as many slots as counts and {} bands",
                slots.len(),
                counts.len(),
                bands.len(),
                BANDS.len()
            ));
        }
        let mut b = UserBands::default();
        b.counts.copy_from_slice(bands);
        if !slots.is_empty() || bands.iter().any(|&(e, _)| e > 0) {
            b.seen = vec![0; SLOTS];
        }
        for (&s, &n) in slots.iter().zip(counts) {
            let slot = b
                .seen
                .get_mut(s as usize)
                .ok_or_else(|| format!("user bands: slot {s} out of range"))?;
            *slot = n;
        }
        Ok(b)
    }
}

/// The name of band `i`: "0-50", "50-500", "500+".
pub(crate) fn band_name(i: usize) -> String {
    match BANDS.get(i + 1) {
        Some(hi) => format!("{}-{hi}", BANDS[i]),
        None => format!("{}+", BANDS[i]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_example_counts_in_the_band_of_the_labels_before_it() {
        let mut b = UserBands::default();
        assert!(b.is_empty());
        for i in 0..60 {
            b.record(7, i % 2 == 0);
        }
        b.record(8, false);
        let r = b.report();
        assert_eq!((r[0].examples, r[1].examples, r[2].examples), (51, 10, 0));
        assert_eq!(r[0].accuracy, 25.0 / 51.0);
        assert_eq!((r[0].correct, r[1].correct), (25, 5));
        assert_eq!((r[0].users, r[1].users), (2, 1));
        assert!(r[2].accuracy.is_nan());
        assert_eq!(r[2].band, "500+");
    }

    #[test]
    fn parts_round_trip_and_bad_parts_are_refused() {
        let mut b = UserBands::default();
        for (u, ok) in [(1u64, true), (1, false), (u64::MAX, true)] {
            b.record(u, ok);
        }
        let (slots, counts, bands) = b.parts();
        assert_eq!(slots.len(), 2);
        assert_eq!(UserBands::from_parts(&slots, &counts, &bands), Ok(b));
        assert_eq!(UserBands::from_parts(&[], &[], &[(0, 0); 3]), Ok(UserBands::default()));
        assert!(UserBands::from_parts(&[1], &[], &bands).is_err());
        assert!(UserBands::from_parts(&[SLOTS as u32], &[1], &bands).is_err());
        assert!(UserBands::from_parts(&[], &[], &[(0, 0)]).is_err());
    }
}
