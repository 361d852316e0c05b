//! How long a waiter sleeps between attempts.
//!
//! Capped, jittered exponential backoff: the first retry comes after a millisecond
//! or two, and the pause doubles up to a cap, each pause drawn at random from its
//! upper half so waiters that started together drift apart. A pause never outlasts
//! the holder's remaining lease, so a lock that frees itself is taken promptly.

use std::time::Duration;

const FIRST: Duration = Duration::from_millis(2);
const CAP: Duration = Duration::from_millis(100);
/// Even a lease that is about to end gets this much pause, so waiters never spin.
const FLOOR: Duration = Duration::from_millis(1);

/// The pauses of one waiter.
#[derive(Debug)]
pub(crate) struct Backoff {
    ceiling: Duration,
    cap: Duration,
}

impl Default for Backoff {
    /// Pauses between re-checks of a busy lock: from 2 ms up to 100 ms.
    fn default() -> Self {
        Backoff::new(FIRST, CAP)
    }
}

impl Backoff {
    /// Pauses from about `first` doubling up to `cap`.
    pub(crate) fn new(first: Duration, cap: Duration) -> Self {
        Backoff {
            ceiling: first,
            cap,
        }
    }

    /// The next pause, given the holder's remaining lease if Redis reported one.
    pub(crate) fn next_pause(&mut self, holder_pttl: Option<Duration>) -> Duration {
        let ceiling = self.ceiling;
        self.ceiling = (ceiling * 2).min(self.cap);
        let pause = rand::random_range(ceiling / 2..=ceiling);
        match holder_pttl {
            Some(pttl) => pause.min(pttl).max(FLOOR),
            None => pause,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_grow_to_the_cap_and_respect_the_lease() {
        let mut backoff = Backoff::default();
        let pauses: Vec<_> = (0..20).map(|_| backoff.next_pause(None)).collect();
        assert!(pauses[0] <= FIRST);
        assert!(pauses.iter().all(|p| *p <= CAP && *p >= FIRST / 2));
        assert!(pauses[19] >= CAP / 2);
        assert_eq!(backoff.next_pause(Some(Duration::ZERO)), FLOOR);
        assert!(backoff.next_pause(Some(Duration::from_millis(3))) <= Duration::from_millis(3));
    }
}
