//! The seam under rate limits: one atomic decision.

use std::future::Future;

use crate::error::Result;
use crate::key::LockKey;
use crate::ratelimit::{Decision, Policy};

/// A store that makes rate-limit decisions, for
/// [`RateLimiter`](crate::ratelimit::RateLimiter). Separate from
/// [`LockStore`](super::LockStore): a rate limit takes no lock, and a store may offer
/// one without the other.
///
/// ```no_run
/// use latchkey::ratelimit::Policy;
/// use latchkey::store::RateStore;
/// # async fn demo(store: latchkey::store::RedisStore, key: latchkey::LockKey) -> latchkey::Result<()> {
/// let policy = Policy::fixed_window(5, std::time::Duration::from_secs(60))?;
/// let decision = store.decide(&key, &policy, 1, true).await?;
/// println!("allowed: {}, {} left", decision.allowed, decision.remaining);
/// # Ok(()) }
/// ```
pub trait RateStore: Clone + Send + Sync + 'static {
    /// The `deployment` label of the rate limiters' metrics, as for
    /// [`LockStore::deployment`](crate::store::LockStore::deployment).
    ///
    /// ```no_run
    /// # use latchkey::store::{RateStore, RedisStore};
    /// # async fn demo() -> latchkey::Result<()> {
    /// let store = RedisStore::open("redis://127.0.0.1:6379").await?;
    /// assert_eq!(RateStore::deployment(&store), "single");
    /// # Ok(()) }
    /// ```
    fn deployment(&self) -> &'static str {
        "custom"
    }

    /// Decides one call of `cost` units on the limiter `key` under `policy`, in one
    /// atomic step, and counts it if it is allowed and `consume` is set (a peek
    /// counts nothing). The caller has checked the cost against the policy.
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`](crate::Error::WrongType) if a limiter key holds another
    /// type, [`Error::Redis`](crate::Error::Redis) if it holds a value that is not
    /// the limiter's, [`Error::ReadOnly`](crate::Error::ReadOnly), and the errors
    /// every reply can carry.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future may or may not have counted the call.
    fn decide(
        &self,
        key: &LockKey,
        policy: &Policy,
        cost: u64,
        consume: bool,
    ) -> impl Future<Output = Result<Decision>> + Send;
}
