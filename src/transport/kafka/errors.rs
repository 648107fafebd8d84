//! Consumer errors as the log tells them: a spell of errors while the
//! broker is away is logged at its start, every so often while it lasts
//! and at its end. Owns only that bookkeeping; the Kafka loop counts every
//! error in `classifyd_consumer_errors_total` itself.

use std::time::{Duration, Instant};

/// Consumer errors while the broker is away come every 100 ms, the pause
/// the loop takes after each: the log gets the first of a spell, then a
/// line every [`ErrorSpell::REPEAT`] with the count, and one when they have
/// stopped for [`ErrorSpell::QUIET`], instead of ten lines a second for as
/// long as an outage lasts. Every error is still counted, in
/// `classifyd_consumer_errors_total`.
#[derive(Debug, Default)]
pub(super) struct ErrorSpell {
    /// The spell going on, if errors have come within [`ErrorSpell::QUIET`].
    spell: Option<Spell>,
}

/// A run of consumer errors with no quiet gap of [`ErrorSpell::QUIET`].
#[derive(Debug, Clone, Copy)]
struct Spell {
    /// Its first error: how long it has lasted is counted from here.
    began: Instant,
    /// Its latest error: the spell ends [`ErrorSpell::QUIET`] after it.
    last_error: Instant,
    /// When it was last logged: the next line is due [`ErrorSpell::REPEAT`] later.
    logged: Instant,
    /// Errors so far, the first included.
    errors: u64,
}

/// What the log says of a spell of consumer errors.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum SpellNote {
    /// The first error of a spell.
    Began,
    /// Errors go on: so many since the spell began, over so long.
    GoesOn { errors: u64, seconds: u64 },
    /// No error for [`ErrorSpell::QUIET`]: the spell's count and length.
    Over { errors: u64, seconds: u64 },
}

impl ErrorSpell {
    /// How often a spell that goes on is logged.
    const REPEAT: Duration = Duration::from_secs(30);
    /// How long without an error ends a spell (messages may flow between
    /// errors when one broker of several is away: they do not end it).
    const QUIET: Duration = Duration::from_secs(5);

    /// An error at `now`: what to log, if anything.
    pub(super) fn error(&mut self, now: Instant) -> Option<SpellNote> {
        let Some(s) = &mut self.spell else {
            self.spell = Some(Spell {
                began: now,
                last_error: now,
                logged: now,
                errors: 1,
            });
            return Some(SpellNote::Began);
        };
        s.errors += 1;
        s.last_error = now;
        if now.duration_since(s.logged) < Self::REPEAT {
            return None;
        }
        s.logged = now;
        Some(SpellNote::GoesOn {
            errors: s.errors,
            seconds: now.duration_since(s.began).as_secs(),
        })
    }

    /// A tick at `now`: ends a spell whose last error is [`ErrorSpell::QUIET`] old.
    pub(super) fn tick(&mut self, now: Instant) -> Option<SpellNote> {
        let s = self.spell?;
        if now.duration_since(s.last_error) < Self::QUIET {
            return None;
        }
        self.spell = None;
        Some(SpellNote::Over {
            errors: s.errors,
            seconds: s.last_error.duration_since(s.began).as_secs(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An outage's errors, one every 100 ms for 95 s, then quiet: the
    /// first is logged, then one line every 30 s, then the end, once.
    #[test]
    fn a_spell_of_consumer_errors_is_logged_a_few_times() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut spell = ErrorSpell::default();
        let mut notes = Vec::new();
        for ms in (0..95_000).step_by(100) {
            notes.extend(spell.error(at(ms)).map(|n| (ms, n)));
            notes.extend(spell.tick(at(ms + 50)).map(|n| (ms + 50, n)));
        }
        for ms in (95_000..120_000).step_by(100) {
            notes.extend(spell.tick(at(ms)).map(|n| (ms, n)));
        }
        assert_eq!(
            notes,
            vec![
                (0, SpellNote::Began),
                (
                    30_000,
                    SpellNote::GoesOn {
                        errors: 301,
                        seconds: 30
                    }
                ),
                (
                    60_000,
                    SpellNote::GoesOn {
                        errors: 601,
                        seconds: 60
                    }
                ),
                (
                    90_000,
                    SpellNote::GoesOn {
                        errors: 901,
                        seconds: 90
                    }
                ),
                (
                    99_900,
                    SpellNote::Over {
                        errors: 950,
                        seconds: 94
                    }
                ),
            ]
        );
        // The next error begins a new spell.
        assert_eq!(spell.error(at(200_000)), Some(SpellNote::Began));
    }
}
