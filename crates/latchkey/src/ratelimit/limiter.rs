//! A rate limiter on one key.

use super::{Decision, Headers, Policy};
use crate::error::Result;
use crate::key::LockKey;
use crate::store::{RateStore, RedisStore};

/// A rate limit on one key, shared by every process that uses the same name and
/// [`Policy`]. Made by [`Client::rate_limiter`](crate::Client::rate_limiter); cheap
/// to clone. Nothing is sent to Redis until [`check`](Self::check) or
/// [`peek`](Self::peek).
///
/// ```no_run
/// use std::time::Duration;
/// use latchkey::ratelimit::Policy;
///
/// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
/// let downloads = client.rate_limiter("downloads:10.0.0.7", Policy::fixed_window(5, Duration::from_secs(600))?)?;
/// let decision = downloads.check(1).await?;
/// if decision.allowed {
///     println!("{} downloads left", decision.remaining);
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct RateLimiter<S = RedisStore> {
    store: S,
    key: LockKey,
    policy: Policy,
}

impl<S: RateStore> RateLimiter<S> {
    pub(crate) fn new(store: S, key: LockKey, policy: Policy) -> Self {
        RateLimiter { store, key, policy }
    }

    /// Asks to make one call costing `cost` units (1 for a plain call), and counts it
    /// if it is allowed. A denied call counts nothing. One round trip, not retried.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a cost of 0 or
    /// above the policy's [`capacity`](Policy::capacity) (it could never pass);
    /// nothing is sent then. [`Error::Unreachable`](crate::Error::Unreachable),
    /// [`Error::ReadOnly`](crate::Error::ReadOnly) (a replica),
    /// [`Error::WrongType`](crate::Error::WrongType) if a limiter key holds another
    /// type, and the other errors a reply can carry. When it fails, the call may or
    /// may not have been counted.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future may or may not have counted the call.
    ///
    /// ```no_run
    /// # async fn demo(api: latchkey::ratelimit::RateLimiter) -> latchkey::Result<()> {
    /// let decision = api.check(3).await?; // a batch of three
    /// if let Some(wait) = decision.retry_after {
    ///     println!("over the limit; retry in {wait:?}");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn check(&self, cost: u64) -> Result<Decision> {
        self.policy.check_cost(cost)?;
        self.store.decide(&self.key, &self.policy, cost, true).await
    }

    /// What a call of cost 1 would get now, counting nothing: `remaining` is what is
    /// left, `reset_after` when the limit is full again.
    ///
    /// # Errors
    ///
    /// As [`check`](Self::check), less the cost errors.
    ///
    /// ```no_run
    /// # async fn demo(api: latchkey::ratelimit::RateLimiter) -> latchkey::Result<()> {
    /// println!("{} calls left", api.peek().await?.remaining);
    /// # Ok(()) }
    /// ```
    pub async fn peek(&self) -> Result<Decision> {
        self.store.decide(&self.key, &self.policy, 1, false).await
    }

    /// The HTTP header values for `decision` under this limiter's policy.
    ///
    /// ```no_run
    /// # async fn demo(api: latchkey::ratelimit::RateLimiter) -> latchkey::Result<()> {
    /// let decision = api.check(1).await?;
    /// for (name, value) in api.headers(&decision).pairs() {
    ///     println!("{name}: {value}");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn headers(&self, decision: &Decision) -> Headers {
        Headers::new(&self.policy, decision)
    }

    /// The policy.
    ///
    /// ```no_run
    /// # fn demo(api: latchkey::ratelimit::RateLimiter) {
    /// println!("{} per {:?}", api.policy().quota(), api.policy().period());
    /// # }
    /// ```
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The limiter's name as given (with the client's prefix).
    ///
    /// ```no_run
    /// # fn demo(api: latchkey::ratelimit::RateLimiter) {
    /// println!("limiting {}", api.name());
    /// # }
    /// ```
    pub fn name(&self) -> &str {
        self.key.as_str()
    }
}
