//! What `latchkey status` shows of a rate limit.

use std::time::Duration;

/// The state a [`RateLimiter`](crate::ratelimit::RateLimiter) keeps under a name, as
/// [`Client::inspect`](crate::Client::inspect) finds it. The state alone does not
/// say how many calls are left (that depends on the policy): ask the limiter's
/// [`peek`](crate::ratelimit::RateLimiter::peek) for that.
///
/// ```
/// # fn show(status: &latchkey::ratelimit::RateLimitStatus) {
/// println!("{} window, full again in {:?}", status.algorithm, status.resets_in);
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
}
