//! How often and how long an optimistic transaction tries again.

use std::time::Duration;

use rand::Rng;

/// The first pause after a conflict; it doubles up to [`CAP`].
const FIRST: Duration = Duration::from_millis(1);
/// The longest pause between two attempts.
const CAP: Duration = Duration::from_millis(50);

/// Bounded retries with capped, fully jittered exponential pauses: contending
/// clients spread out instead of colliding again in lock step.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Retry {
    pub(crate) attempts: u32,
    pub(crate) deadline: Duration,
}

impl Default for Retry {
    fn default() -> Self {
        Retry {
            attempts: 16,
            deadline: Duration::from_secs(5),
        }
    }
}

impl Retry {
    /// The pause before attempt `next` (2, 3 …): uniform in [0, min(CAP, FIRST ×
    /// 2^(next-2))].
    pub(crate) fn pause(next: u32) -> Duration {
        let ceiling = FIRST
            .saturating_mul(1 << next.saturating_sub(2).min(16))
            .min(CAP);
        rand::rng().random_range(Duration::ZERO..=ceiling)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_grow_and_stay_under_the_cap() {
        for next in 2..40 {
            assert!(Retry::pause(next) <= CAP);
        }
        assert!(Retry::pause(2) <= FIRST);
    }
}
