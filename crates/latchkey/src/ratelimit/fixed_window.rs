//! N calls per fixed window, counted in Redis.

use std::time::Duration;

use crate::error::{Error, Result};
use crate::key::LockKey;
use crate::lease::Ttl;
use crate::store::{RedisStore, WindowCounter};

/// Allows `limit` calls per window of `per`, shared by every process using the key.
///
/// Each check counts as a call, allowed or not (a caller hammering a closed window
/// keeps it closed). The count and the window's expiry are set in one script, so a
/// crash between them cannot leave a counter that never resets. A window starts at
/// its first call and lasts `per`; so, as with every fixed window, up to twice the
/// limit can pass within `per` across the end of one window and the start of the
/// next. Made by [`Client::fixed_window`](crate::Client::fixed_window); the counter
/// is the string key prefix + name.
///
/// ```no_run
/// use std::time::Duration;
///
/// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
/// let sms = client.fixed_window("sms:+15551234567", 1, Duration::from_secs(60))?;
/// let decision = sms.check().await?;
/// if !decision.allowed {
///     println!("retry after {:?}", decision.retry_after);
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct FixedWindow<S = RedisStore> {
    store: S,
    // The count lives in the key's `:lk:rate` companion.
    key: LockKey,
    limit: u64,
    window: Ttl,
}

/// The outcome of one [`FixedWindow::check`].
///
/// ```
/// let d = latchkey::ratelimit::Decision::new(1, 5, std::time::Duration::from_secs(60));
/// assert!(d.allowed);
/// assert_eq!(d.remaining(), 4);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Decision {
    /// Whether this call is within the limit.
    pub allowed: bool,
    /// Calls counted in the current window, this one included.
    pub count: u64,
    /// The limit per window.
    pub limit: u64,
    /// When denied: how long until the window resets.
    pub retry_after: Option<Duration>,
    /// How long until the current window resets.
    pub resets_in: Duration,
}

impl Decision {
    /// The decision for call number `count` of a window that allows `limit` and
    /// resets in `resets_in`: allowed up to the limit, else retry after the reset.
    ///
    /// ```
    /// use std::time::Duration;
    /// let over = latchkey::ratelimit::Decision::new(6, 5, Duration::from_secs(3));
    /// assert_eq!(over.retry_after, Some(Duration::from_secs(3)));
    /// ```
    pub fn new(count: u64, limit: u64, resets_in: Duration) -> Self {
        let allowed = count <= limit;
        Decision {
            allowed,
            count,
            limit,
            retry_after: (!allowed).then_some(resets_in),
            resets_in,
        }
    }

    /// Calls still allowed in this window (zero once over the limit).
    ///
    /// ```
    /// use std::time::Duration;
    /// let over = latchkey::ratelimit::Decision::new(7, 5, Duration::from_secs(3));
    /// assert_eq!(over.remaining(), 0);
    /// ```
    pub fn remaining(&self) -> u64 {
        self.limit.saturating_sub(self.count)
    }
}

impl<S: WindowCounter> FixedWindow<S> {
    pub(crate) fn new(store: S, key: LockKey, limit: u64, per: Duration) -> Result<Self> {
        if limit == 0 {
            return Err(Error::InvalidArgument(
                "a rate limit of 0 allows nothing; use at least 1".into(),
            ));
        }
        Ok(FixedWindow {
            store,
            key,
            limit,
            window: Ttl::at_least(per, Duration::from_millis(1), "a rate-limit window")?,
        })
    }

    /// Counts one call and says whether it is allowed: one round trip, not retried.
    ///
    /// # Errors
    ///
    /// [`Error::Unreachable`], [`Error::AclDenied`], [`Error::ReadOnly`] (a replica),
    /// [`Error::WrongType`] if the key holds something other than a string, an
    /// [`Error::Redis`] if it holds a string that is not a count, and the other errors
    /// a reply can carry. When it fails, the call may or may not have been counted.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future may or may not have counted the call.
    ///
    /// ```no_run
    /// # async fn demo(quota: latchkey::ratelimit::FixedWindow) -> latchkey::Result<()> {
    /// let decision = quota.check().await?;
    /// if decision.allowed {
    ///     println!("{} calls left in this window", decision.remaining());
    /// } else {
    ///     println!("over the limit; the window resets in {:?}", decision.resets_in);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn check(&self) -> Result<Decision> {
        let seen = self.store.count_in_window(&self.key, self.window).await?;
        Ok(Decision::new(seen.count, self.limit, seen.resets_in))
    }
}
