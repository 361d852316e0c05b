//! A rate limiter on one key.

use std::time::{Duration, Instant};

use super::{Decision, Headers, Policy};
use crate::error::Result;
use crate::key::LockKey;
use crate::metrics::Meter;
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

    /// The same limiter, with its name as a `name` label on its metrics (see
    /// [`crate::metrics`]): for limiters whose names are few (one per API, not one
    /// per client address).
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// use latchkey::ratelimit::Policy;
    /// let search = client
    ///     .rate_limiter("search-api", Policy::gcra(100, std::time::Duration::from_secs(1), 20)?)?
    ///     .with_named_metrics();
    /// # Ok(()) }
    /// ```
    pub fn with_named_metrics(mut self) -> Self {
        self.key = self.key.with_named_metrics();
        self
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
        let decision = self
            .store
            .decide(&self.key, &self.policy, cost, true)
            .await?;
        Meter::new(self.store.deployment(), &self.key).decided(&self.policy, decision.allowed);
        Ok(decision)
    }

    /// Waits until a call costing `cost` is allowed, and counts it. When denied, it
    /// sleeps until the decision's `retry_after` (plus a little jitter, so waiters
    /// denied together do not all come back at once) and asks again: no polling.
    /// Transient failures (Redis unreachable, failing over) are retried with capped
    /// backoff. Others may get in first: the wait is as long as the limit makes it.
    ///
    /// # Errors
    ///
    /// As [`check`](Self::check), for a failure a retry cannot mend.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future while it sleeps counts nothing; while it asks, the call
    /// may or may not have been counted (as for [`check`](Self::check)).
    ///
    /// ```no_run
    /// # async fn demo(api: latchkey::ratelimit::RateLimiter) -> latchkey::Result<()> {
    /// let decision = api.acquire(1).await?; // returns once allowed
    /// assert!(decision.allowed);
    /// # Ok(()) }
    /// ```
    pub async fn acquire(&self, cost: u64) -> Result<Decision> {
        self.acquire_until(cost, None).await
    }

    /// [`acquire`](Self::acquire), waiting at most `wait`. Returns the decision: an
    /// allowed one (counted), or, once the wait is over (or when the limit says the
    /// call cannot pass before it is), the last denied one, with its `retry_after`.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire); a transient failure that lasts the whole wait
    /// is returned.
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](Self::acquire).
    ///
    /// ```no_run
    /// # async fn demo(api: latchkey::ratelimit::RateLimiter) -> latchkey::Result<()> {
    /// let decision = api.acquire_timeout(1, std::time::Duration::from_secs(2)).await?;
    /// if !decision.allowed {
    ///     println!("still over the limit; allowed in {:?}", decision.retry_after);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn acquire_timeout(&self, cost: u64, wait: Duration) -> Result<Decision> {
        self.acquire_until(cost, Instant::now().checked_add(wait))
            .await
    }

    /// Asks until allowed, sleeping as each denial says, until `deadline` if any.
    async fn acquire_until(&self, cost: u64, deadline: Option<Instant>) -> Result<Decision> {
        self.policy.check_cost(cost)?;
        let mut failed_pause = Duration::from_millis(10);
        loop {
            let (pause, last) = match self.check(cost).await {
                Ok(decision) if decision.allowed => return Ok(decision),
                Ok(decision) => match decision.retry_after {
                    Some(after) => (with_jitter(after), Ok(decision)),
                    // Denied with no time given: waiting would not help.
                    None => return Ok(decision),
                },
                Err(error) if error.is_transient() => {
                    let pause = failed_pause;
                    failed_pause = (failed_pause * 2).min(Duration::from_secs(1));
                    (pause, Err(error))
                }
                Err(error) => return Err(error),
            };
            let after_pause = Instant::now().checked_add(pause);
            if deadline.is_some_and(|deadline| after_pause.is_none_or(|at| at > deadline)) {
                return last;
            }
            tokio::time::sleep(pause).await;
        }
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

/// `after`, plus up to a tenth of it (at most 50 ms) at random, so waiters denied
/// together spread out.
fn with_jitter(after: Duration) -> Duration {
    let spread = (after / 10).min(Duration::from_millis(50));
    after + spread.mul_f64(rand::random::<f64>())
}
