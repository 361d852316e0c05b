//! The one answer every rate-limit algorithm gives.

use std::time::Duration;

/// The outcome of one [`RateLimiter::check`](super::RateLimiter::check) or
/// [`peek`](super::RateLimiter::peek), whatever the algorithm.
///
/// ```
/// use std::time::Duration;
/// use latchkey::ratelimit::Decision;
///
/// let d = Decision::new(false, 5, 0, Some(Duration::from_secs(3)), Duration::from_secs(3));
/// assert!(!d.allowed);
/// assert_eq!(d.retry_after, Some(Duration::from_secs(3)));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Decision {
    /// Whether the call is within the limit (for a peek: whether a call of cost 1
    /// would be).
    pub allowed: bool,
    /// The most cost units the limit lets through at once: the limit per window, 1
    /// for a cooldown, `burst + 1` for GCRA.
    pub limit: u64,
    /// Cost units still allowed right now, after this call.
    pub remaining: u64,
    /// When denied: how long until the same call would be allowed (if nobody else
    /// gets in first). `None` when allowed.
    pub retry_after: Option<Duration>,
    /// How long until the limit is back to full: every unit counted so far has left.
    pub reset_after: Duration,
}

impl Decision {
    /// A decision, for stores that make their own.
    ///
    /// ```
    /// let d = latchkey::ratelimit::Decision::new(true, 5, 4, None, std::time::Duration::from_secs(60));
    /// assert_eq!(d.remaining, 4);
    /// ```
    pub fn new(
        allowed: bool,
        limit: u64,
        remaining: u64,
        retry_after: Option<Duration>,
        reset_after: Duration,
    ) -> Self {
        Decision {
            allowed,
            limit,
            remaining,
            retry_after,
            reset_after,
        }
    }
}
