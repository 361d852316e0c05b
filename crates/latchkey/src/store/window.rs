//! The seam under rate limits: a counter per fixed window.

use std::future::Future;
use std::time::Duration;

use crate::error::Result;
use crate::key::LockKey;
use crate::lease::Ttl;

/// A store that counts calls in fixed windows, for
/// [`FixedWindow`](crate::ratelimit::FixedWindow). Separate from [`LockStore`](super::LockStore):
/// a rate limit takes no lock, and a store may offer one without the other.
///
/// ```no_run
/// use latchkey::store::WindowCounter;
/// # async fn demo(store: latchkey::store::RedisStore, key: latchkey::LockKey) -> latchkey::Result<()> {
/// let seen = store.count_in_window(&key, latchkey::Ttl::DEFAULT).await?;
/// println!("call {} of this window, which resets in {:?}", seen.count, seen.resets_in);
/// # Ok(()) }
/// ```
pub trait WindowCounter: Clone + Send + Sync + 'static {
    /// Counts one call in the window of `key` (which starts at its first call and
    /// lasts `window`), atomically with setting the window's expiry.
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`](crate::Error::WrongType) if the counter holds another
    /// type, [`Error::Redis`](crate::Error::Redis) if it holds a string that is not a
    /// count, [`Error::ReadOnly`](crate::Error::ReadOnly), and the errors every
    /// reply can carry.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future may or may not have counted the call.
    fn count_in_window(
        &self,
        key: &LockKey,
        window: Ttl,
    ) -> impl Future<Output = Result<WindowCount>> + Send;
}

/// One call counted by [`WindowCounter::count_in_window`].
///
/// ```
/// let seen = latchkey::store::WindowCount::new(3, std::time::Duration::from_secs(20));
/// assert_eq!(seen.count, 3);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct WindowCount {
    /// Calls counted in the current window, this one included.
    pub count: u64,
    /// How long until the current window ends.
    pub resets_in: Duration,
}

impl WindowCount {
    /// `count` calls so far in a window that ends in `resets_in`.
    ///
    /// ```
    /// let seen = latchkey::store::WindowCount::new(1, std::time::Duration::from_secs(60));
    /// assert_eq!(seen.resets_in.as_secs(), 60);
    /// ```
    pub fn new(count: u64, resets_in: Duration) -> Self {
        WindowCount { count, resets_in }
    }
}
