//! The guard of a multi-lock: every lock of the set, held together.

use std::future::Future;
use std::time::{Duration, Instant};

use futures_util::future::{join_all, select_all, try_join_all};

use crate::error::{Error, Result};
use crate::lock::MutexGuard;
use crate::store::{Pass, RedisStore, WakeUps};

/// Every lock of a [`MultiLock`](super::MultiLock), held. Its life is the critical
/// section, as a [`MutexGuard`]'s is: dropping it releases every lock in the
/// background; [`release`](Self::release) releases them and says whether all were
/// still ours.
///
/// ```no_run
/// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
/// let both = client.multi_lock(["account:1", "account:2"])?.lock().await?;
/// tokio::select! {
///     () = both.lost() => eprintln!("a lease was lost: stop writing"),
///     () = tokio::time::sleep(std::time::Duration::from_millis(10)) => {}
/// }
/// both.release().await?;
/// # Ok(()) }
/// ```
#[must_use = "dropping the guard releases every lock at once"]
pub struct MultiLockGuard<S: Pass + WakeUps = RedisStore> {
    /// In key order, at least one.
    guards: Vec<MutexGuard<S>>,
}

impl<S: Pass + WakeUps> MultiLockGuard<S> {
    pub(super) fn new(guards: Vec<MutexGuard<S>>) -> Self {
        MultiLockGuard { guards }
    }

    /// Each lock's guard, in key order.
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// let both = client.multi_lock(["a", "b"])?.lock().await?;
    /// for guard in both.guards() {
    ///     println!("{} valid for {:?}", guard.key(), guard.validity());
    /// }
    /// # Ok(()) }
    /// ```
    pub fn guards(&self) -> &[MutexGuard<S>] {
        &self.guards
    }

    /// The guard of the lock whose key is `key` (the client's prefix and the name:
    /// just the name with the default prefix), if it is one of the set.
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// let both = client.multi_lock(["from", "to"])?.lock().await?;
    /// let fence = both.get("to").expect("in the set").fence().await?;
    /// # Ok(()) }
    /// ```
    pub fn get(&self, key: &str) -> Option<&MutexGuard<S>> {
        self.guards.iter().find(|guard| guard.key().as_str() == key)
    }

    /// Each lock's fencing token, in key order (see [`MutexGuard::fence`]), computed
    /// together.
    ///
    /// # Errors
    ///
    /// As [`MutexGuard::fence`], for the first lock whose answer was an error (the
    /// others are not waited for).
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// let both = client.multi_lock(["a", "b"])?.lock().await?;
    /// let [a, b] = both.fences().await?[..] else { unreachable!() };
    /// # Ok(()) }
    /// ```
    pub async fn fences(&self) -> Result<Vec<u64>> {
        try_join_all(self.guards.iter().map(MutexGuard::fence)).await
    }

    /// Resolves when any lock's lease is lost (see [`MutexGuard::lost`]).
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// # async fn transfer() {}
    /// let both = client.multi_lock(["a", "b"])?.lock().await?;
    /// tokio::select! {
    ///     () = transfer() => {}
    ///     () = both.lost() => eprintln!("a lease was lost: roll back"),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
        let each: Vec<_> = self
            .guards
            .iter()
            .map(|guard| Box::pin(guard.lost()))
            .collect();
        async move {
            // Never empty (a multi-lock has at least one lock); if it were, never lost.
            if each.is_empty() {
                return std::future::pending().await;
            }
            select_all(each).await;
        }
    }

    /// The error for a hold that ended under its holder: the first lost lock's
    /// ([`Error::HoldLimit`](crate::Error::HoldLimit) or
    /// [`Error::LeaseLost`](crate::Error::LeaseLost)).
    pub(crate) fn lost_error(&self) -> crate::Error {
        let lost = self.guards.iter().find(|guard| guard.is_lost());
        lost.unwrap_or(&self.guards[0]).lost_error()
    }

    /// Whether any lock's hold limit was reached (see
    /// [`MutexGuard::hold_limit_reached`]).
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// let both = client.multi_lock(["a", "b"])?.lock().await?;
    /// assert!(!both.hold_limit_reached());
    /// # Ok(()) }
    /// ```
    pub fn hold_limit_reached(&self) -> bool {
        self.guards.iter().any(MutexGuard::hold_limit_reached)
    }

    /// Whether any lock's lease is known lost (see [`MutexGuard::is_lost`]).
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// let both = client.multi_lock(["a", "b"])?.lock().await?;
    /// assert!(!both.is_lost());
    /// # Ok(()) }
    /// ```
    pub fn is_lost(&self) -> bool {
        self.guards.iter().any(MutexGuard::is_lost)
    }

    /// How much longer every lease surely lasts: the shortest
    /// [`MutexGuard::validity`].
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// let both = client.multi_lock(["a", "b"])?.lock().await?;
    /// println!("safe for {:?}", both.validity());
    /// # Ok(()) }
    /// ```
    pub fn validity(&self) -> Duration {
        self.valid_until().saturating_duration_since(Instant::now())
    }

    /// The instant until which every lease surely lasts: the earliest
    /// [`MutexGuard::valid_until`].
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// let both = client.multi_lock(["a", "b"])?.lock().await?;
    /// assert!(both.valid_until() > std::time::Instant::now());
    /// # Ok(()) }
    /// ```
    pub fn valid_until(&self) -> Instant {
        self.guards
            .iter()
            .map(MutexGuard::valid_until)
            .min()
            .unwrap_or_else(Instant::now)
    }

    /// Resets every lease to `ttl` from now, together (see [`MutexGuard::extend`]).
    ///
    /// # Errors
    ///
    /// As [`MutexGuard::extend`]: [`Error::LeaseLost`](crate::Error::LeaseLost)
    /// when some lock is no longer ours, even if another lock's call failed (a
    /// hold known lost says more than one that cannot be told); else the error of
    /// the first lock that failed. The others were extended all the same.
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// let both = client.multi_lock(["a", "b"])?.lock().await?;
    /// both.extend(std::time::Duration::from_secs(30)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn extend(&self, ttl: Duration) -> Result<()> {
        let mut extended = join_all(self.guards.iter().map(|guard| guard.extend(ttl))).await;
        let lost = extended
            .iter()
            .position(|each| matches!(each, Err(Error::LeaseLost { .. })));
        match lost {
            Some(lost) => extended.swap_remove(lost),
            None => extended.into_iter().collect(),
        }
    }

    /// Releases every lock, together. `Ok(true)` when every one was still ours,
    /// `Ok(false)` when some lease had ended before (check the work done under it),
    /// even if the release of another lock failed: a hold known lost says more
    /// than one that cannot be told.
    ///
    /// # Errors
    ///
    /// As [`MutexGuard::release`], for the first lock whose release failed, when no
    /// other lock was found lost: that lock is still released, in the background.
    /// The others were released all the same.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future still releases every lock, in the background.
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// let both = client.multi_lock(["a", "b"])?.lock().await?;
    /// if !both.release().await? {
    ///     eprintln!("a lease ran out before we were done: check the work");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn release(self) -> Result<bool> {
        let released = join_all(self.guards.into_iter().map(MutexGuard::release)).await;
        if released.iter().any(|each| matches!(each, Ok(false))) {
            return Ok(false);
        }
        released.into_iter().collect::<Result<Vec<_>>>()?;
        Ok(true)
    }

    /// The guards, each to release on its own (say, the locks a step no longer
    /// needs), in key order.
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// let mut guards = client.multi_lock(["a", "b"])?.lock().await?.into_guards();
    /// let b = guards.pop().expect("two locks");
    /// b.release().await?; // done with b, still holding a
    /// # Ok(()) }
    /// ```
    pub fn into_guards(self) -> Vec<MutexGuard<S>> {
        self.guards
    }
}

impl<S: Pass + WakeUps> crate::lock::section::Hold for MultiLockGuard<S> {
    fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
        MultiLockGuard::lost(self)
    }

    fn lost_error(&self) -> crate::Error {
        MultiLockGuard::lost_error(self)
    }

    fn release(self) -> impl Future<Output = Result<bool>> + Send {
        MultiLockGuard::release(self)
    }
}

impl<S: Pass + WakeUps> std::fmt::Debug for MultiLockGuard<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(&self.guards).finish()
    }
}
