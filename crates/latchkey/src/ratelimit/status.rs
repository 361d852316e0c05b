//! What `latchkey status` shows of a rate limit.

use std::time::Duration;

/// The state a [`RateLimiter`](crate::ratelimit::RateLimiter) keeps under a name, as
/// [`Client::inspect`](crate::Client::inspect) finds it. The state alone does not
/// say how many calls are left (that depends on the policy): ask the limiter's
/// [`peek`](crate::ratelimit::RateLimiter::peek) for that.
///
/// ```
/// # fn show(status: &latchkey::ratelimit::RateLimitStatus) {
/// println!("{} window, {:?} used, full again in {:?}", status.algorithm, status.used, status.resets_in);
/// # }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RateLimitStatus {
    /// The algorithm whose state it is: `fixed`, `cooldown`, `sliding` or `gcra`, as
    /// `latchkey throttle --algo` names them.
    pub algorithm: String,
    /// When the state expires, which is when the limit is full again; `None` if it
    /// has no expiry (something else wrote the key).
    pub resets_in: Option<Duration>,
    /// Cost units counted against the limit now: a fixed window's count, the
    /// sliding window's log, 1 during a cooldown; `None` for GCRA (see
    /// [`ahead`](Self::ahead)) or a key something else wrote. The limit itself is
    /// the callers' policy, not stored: compare with what they pass.
    pub used: Option<u64>,
    /// GCRA only: how far its theoretical arrival time is ahead of the server's
    /// clock. Zero is full capacity; a call is denied once this would pass the
    /// policy's tolerance (the period × burst).
    pub ahead: Option<Duration>,
}
