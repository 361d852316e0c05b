//! Blocking twins of [`crate::multilock`]'s types.

use std::sync::Arc;
use std::time::Duration;

use super::{OwnedRuntime, block_on};
use crate::error::Result;
use crate::key::LockKey;
use crate::lease::{Lease, Ttl};
use crate::lock::{Fairness, Fencing};
use crate::store::{Pass, RedisStore, WakeUps};

/// Blocking twin of [`crate::MultiLock`], from
/// [`Client::multi_lock`](super::Client::multi_lock).
///
/// ```no_run
/// # fn demo(client: latchkey::blocking::Client) -> latchkey::Result<()> {
/// let both = client.multi_lock(["account:1", "account:2"])?.lock()?;
/// both.release()?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct MultiLock<S: Pass + WakeUps = RedisStore> {
    pub(super) inner: crate::MultiLock<S>,
    pub(super) runtime: Arc<OwnedRuntime>,
}

impl<S: Pass + WakeUps> MultiLock<S> {
    /// See [`crate::MultiLock::with_lease`].
    ///
    /// ```no_run
    /// # fn demo(locks: latchkey::blocking::MultiLock) -> latchkey::Result<()> {
    /// let locks = locks.with_lease(latchkey::Lease::renewed(std::time::Duration::from_secs(10))?);
    /// # Ok(()) }
    /// ```
    pub fn with_lease(mut self, lease: Lease) -> Self {
        self.inner = self.inner.with_lease(lease);
        self
    }

    /// See [`crate::MultiLock::with_fairness`].
    ///
    /// ```no_run
    /// # fn demo(locks: latchkey::blocking::MultiLock) {
    /// let locks = locks.with_fairness(latchkey::Fairness::Fair);
    /// # }
    /// ```
    pub fn with_fairness(mut self, fairness: Fairness) -> Self {
        self.inner = self.inner.with_fairness(fairness);
        self
    }

    /// See [`crate::MultiLock::with_fencing`].
    ///
    /// ```no_run
    /// # fn demo(locks: latchkey::blocking::MultiLock) {
    /// let locks = locks.with_fencing(latchkey::Fencing::OnGrant);
    /// # }
    /// ```
    pub fn with_fencing(mut self, fencing: Fencing) -> Self {
        self.inner = self.inner.with_fencing(fencing);
        self
    }

    /// See [`crate::MultiLock::with_waiter_lease`].
    ///
    /// ```no_run
    /// # fn demo(locks: latchkey::blocking::MultiLock) -> latchkey::Result<()> {
    /// let locks = locks.with_waiter_lease(latchkey::Ttl::new(std::time::Duration::from_secs(5))?);
    /// # Ok(()) }
    /// ```
    pub fn with_waiter_lease(mut self, lease: Ttl) -> Self {
        self.inner = self.inner.with_waiter_lease(lease);
        self
    }

    /// The locks' keys, in the order they are taken.
    ///
    /// ```no_run
    /// # fn demo(locks: latchkey::blocking::MultiLock) {
    /// for key in locks.keys() { println!("{key}"); }
    /// # }
    /// ```
    pub fn keys(&self) -> impl Iterator<Item = &LockKey> {
        self.inner.keys()
    }

    /// Takes every lock if all are free, else none (see
    /// [`crate::MultiLock::try_lock`]).
    ///
    /// # Errors
    ///
    /// As [`crate::MultiLock::try_lock`], and [`crate::Error::Runtime`].
    ///
    /// ```no_run
    /// # fn demo(locks: latchkey::blocking::MultiLock) -> latchkey::Result<()> {
    /// let both = locks.try_lock()?;
    /// # Ok(()) }
    /// ```
    pub fn try_lock(&self) -> Result<MultiLockGuard<S>> {
        self.guard(block_on(&self.runtime, self.inner.try_lock())??)
    }

    /// Blocks until every lock is held (see [`crate::MultiLock::lock`]). Nothing can
    /// interrupt it: prefer [`lock_timeout`](Self::lock_timeout).
    ///
    /// # Errors
    ///
    /// As [`crate::MultiLock::lock`], and [`crate::Error::Runtime`].
    ///
    /// ```no_run
    /// # fn demo(locks: latchkey::blocking::MultiLock) -> latchkey::Result<()> {
    /// let both = locks.lock()?;
    /// # Ok(()) }
    /// ```
    pub fn lock(&self) -> Result<MultiLockGuard<S>> {
        self.guard(block_on(&self.runtime, self.inner.lock())??)
    }

    /// Blocks at most `wait` for every lock (see [`crate::MultiLock::lock_timeout`]).
    ///
    /// # Errors
    ///
    /// As [`crate::MultiLock::lock_timeout`], and [`crate::Error::Runtime`].
    ///
    /// ```no_run
    /// # fn demo(locks: latchkey::blocking::MultiLock) -> latchkey::Result<()> {
    /// let both = locks.lock_timeout(std::time::Duration::from_secs(5))?;
    /// # Ok(()) }
    /// ```
    pub fn lock_timeout(&self, wait: Duration) -> Result<MultiLockGuard<S>> {
        self.guard(block_on(&self.runtime, self.inner.lock_timeout(wait))??)
    }

    fn guard(&self, inner: crate::MultiLockGuard<S>) -> Result<MultiLockGuard<S>> {
        Ok(MultiLockGuard {
            inner: Some(inner),
            runtime: self.runtime.clone(),
        })
    }
}

/// Blocking twin of [`crate::MultiLockGuard`]. Dropping it releases every lock
/// before the drop returns.
///
/// ```no_run
/// # fn demo(client: latchkey::blocking::Client) -> latchkey::Result<()> {
/// let both = client.multi_lock(["a", "b"])?.lock()?;
/// println!("fences {:?}", both.fences()?);
/// assert!(both.release()?);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct MultiLockGuard<S: Pass + WakeUps = RedisStore> {
    // `Some` for the guard's whole life: only `release` and `drop` take it.
    inner: Option<crate::MultiLockGuard<S>>,
    runtime: Arc<OwnedRuntime>,
}

impl<S: Pass + WakeUps> MultiLockGuard<S> {
    fn inner(&self) -> &crate::MultiLockGuard<S> {
        self.inner
            .as_ref()
            .expect("a blocking guard holds its async guard until released or dropped")
    }

    /// Each lock's fencing token, in key order (see
    /// [`crate::MultiLockGuard::fences`]).
    ///
    /// # Errors
    ///
    /// As [`crate::MultiLockGuard::fences`], and [`crate::Error::Runtime`].
    ///
    /// ```no_run
    /// # fn demo(guard: latchkey::blocking::MultiLockGuard) -> latchkey::Result<()> {
    /// println!("{:?}", guard.fences()?);
    /// # Ok(()) }
    /// ```
    pub fn fences(&self) -> Result<Vec<u64>> {
        block_on(&self.runtime, self.inner().fences())?
    }

    /// Whether any lease is known lost (see [`crate::MultiLockGuard::is_lost`]).
    ///
    /// ```no_run
    /// # fn demo(guard: latchkey::blocking::MultiLockGuard) {
    /// assert!(!guard.is_lost());
    /// # }
    /// ```
    pub fn is_lost(&self) -> bool {
        self.inner().is_lost()
    }

    /// How long every lease surely lasts (see [`crate::MultiLockGuard::validity`]).
    ///
    /// ```no_run
    /// # fn demo(guard: latchkey::blocking::MultiLockGuard) {
    /// println!("{:?}", guard.validity());
    /// # }
    /// ```
    pub fn validity(&self) -> Duration {
        self.inner().validity()
    }

    /// Resets every lease to `ttl` from now (see [`crate::MultiLockGuard::extend`]).
    ///
    /// # Errors
    ///
    /// As [`crate::MultiLockGuard::extend`], and [`crate::Error::Runtime`].
    ///
    /// ```no_run
    /// # fn demo(guard: latchkey::blocking::MultiLockGuard) -> latchkey::Result<()> {
    /// guard.extend(std::time::Duration::from_secs(30))?;
    /// # Ok(()) }
    /// ```
    pub fn extend(&self, ttl: Duration) -> Result<()> {
        block_on(&self.runtime, self.inner().extend(ttl))?
    }

    /// Releases every lock; `Ok(true)` when all were still ours (see
    /// [`crate::MultiLockGuard::release`]).
    ///
    /// # Errors
    ///
    /// As [`crate::MultiLockGuard::release`], and [`crate::Error::Runtime`].
    ///
    /// ```no_run
    /// # fn demo(guard: latchkey::blocking::MultiLockGuard) -> latchkey::Result<()> {
    /// if !guard.release()? { eprintln!("a lease had run out"); }
    /// # Ok(()) }
    /// ```
    pub fn release(mut self) -> Result<bool> {
        let Some(guard) = self.inner.take() else {
            return Ok(false);
        };
        block_on(&self.runtime, guard.release())?
    }
}

impl<S: Pass + WakeUps> Drop for MultiLockGuard<S> {
    fn drop(&mut self) {
        let Some(guard) = self.inner.take() else {
            return;
        };
        if let Ok(Err(error)) = block_on(&self.runtime, guard.release()) {
            tracing::warn!(%error, "could not release a dropped multi-lock; its locks free themselves when their leases end");
        }
    }
}
