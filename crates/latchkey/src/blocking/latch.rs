//! Blocking twins of [`crate::latch`]'s types.

use std::sync::Arc;
use std::time::Duration;

use super::{OwnedRuntime, block_on};
use crate::error::Result;
use crate::latch::CountedDown;

/// Blocking twin of [`crate::latch::Latch`], from
/// [`Client::latch`](super::Client::latch).
///
/// ```no_run
/// # fn demo(client: latchkey::blocking::Client) -> latchkey::Result<()> {
/// let loaded = client.latch("nightly:shards-loaded", 3)?;
/// loaded.count_down()?;
/// loaded.wait()?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Latch {
    pub(super) inner: crate::latch::Latch,
    pub(super) runtime: Arc<OwnedRuntime>,
}

impl Latch {
    /// See [`crate::latch::Latch::with_lifetime`].
    ///
    /// # Errors
    ///
    /// As [`crate::latch::Latch::with_lifetime`].
    ///
    /// ```no_run
    /// # fn demo(client: latchkey::blocking::Client) -> latchkey::Result<()> {
    /// let latch = client.latch("batch:7", 10)?.with_lifetime(std::time::Duration::from_secs(600))?;
    /// # Ok(()) }
    /// ```
    pub fn with_lifetime(mut self, lifetime: Duration) -> Result<Self> {
        self.inner = self.inner.with_lifetime(lifetime)?;
        Ok(self)
    }

    /// The count it was made with.
    ///
    /// ```no_run
    /// # fn demo(client: latchkey::blocking::Client) -> latchkey::Result<()> {
    /// assert_eq!(client.latch("batch:7", 10)?.count(), 10);
    /// # Ok(()) }
    /// ```
    pub fn count(&self) -> u64 {
        self.inner.count()
    }

    /// Counts down by one (see [`crate::latch::Latch::count_down`]).
    ///
    /// # Errors
    ///
    /// As [`crate::latch::Latch::count_down`], and [`crate::Error::Runtime`].
    ///
    /// ```no_run
    /// # fn demo(latch: latchkey::blocking::Latch) -> latchkey::Result<()> {
    /// println!("{} to go", latch.count_down()?.left);
    /// # Ok(()) }
    /// ```
    pub fn count_down(&self) -> Result<CountedDown> {
        block_on(&self.runtime, self.inner.count_down())?
    }

    /// The count left now (see [`crate::latch::Latch::left`]).
    ///
    /// # Errors
    ///
    /// As [`crate::latch::Latch::left`], and [`crate::Error::Runtime`].
    ///
    /// ```no_run
    /// # fn demo(latch: latchkey::blocking::Latch) -> latchkey::Result<()> {
    /// println!("{} to go", latch.left()?);
    /// # Ok(()) }
    /// ```
    pub fn left(&self) -> Result<u64> {
        block_on(&self.runtime, self.inner.left())?
    }

    /// Blocks until the latch is open (see [`crate::latch::Latch::wait`]).
    ///
    /// # Errors
    ///
    /// As [`crate::latch::Latch::wait`], and [`crate::Error::Runtime`].
    ///
    /// ```no_run
    /// # fn demo(latch: latchkey::blocking::Latch) -> latchkey::Result<()> {
    /// latch.wait()?;
    /// # Ok(()) }
    /// ```
    pub fn wait(&self) -> Result<()> {
        block_on(&self.runtime, self.inner.wait())?
    }

    /// Blocks at most `wait` for the latch to open: `true` if it did.
    ///
    /// # Errors
    ///
    /// As [`crate::latch::Latch::wait_timeout`], and [`crate::Error::Runtime`].
    ///
    /// ```no_run
    /// # fn demo(latch: latchkey::blocking::Latch) -> latchkey::Result<()> {
    /// let open = latch.wait_timeout(std::time::Duration::from_secs(30))?;
    /// # Ok(()) }
    /// ```
    pub fn wait_timeout(&self, wait: Duration) -> Result<bool> {
        block_on(&self.runtime, self.inner.wait_timeout(wait))?
    }
}

/// Blocking twin of [`crate::latch::Barrier`], from
/// [`Client::barrier`](super::Client::barrier).
///
/// ```no_run
/// # fn demo(client: latchkey::blocking::Client) -> latchkey::Result<()> {
/// client.barrier("migration:stage-1", 4)?.arrive_and_wait()?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Barrier {
    pub(super) inner: crate::latch::Barrier,
    pub(super) runtime: Arc<OwnedRuntime>,
}

impl Barrier {
    /// See [`crate::latch::Barrier::with_lifetime`].
    ///
    /// # Errors
    ///
    /// As [`crate::latch::Latch::with_lifetime`].
    ///
    /// ```no_run
    /// # fn demo(client: latchkey::blocking::Client) -> latchkey::Result<()> {
    /// let stage = client.barrier("stage-1", 4)?.with_lifetime(std::time::Duration::from_secs(600))?;
    /// # Ok(()) }
    /// ```
    pub fn with_lifetime(mut self, lifetime: Duration) -> Result<Self> {
        self.inner = self.inner.with_lifetime(lifetime)?;
        Ok(self)
    }

    /// The latch under it: to wait again after a timeout without arriving twice.
    ///
    /// ```no_run
    /// # fn demo(stage: latchkey::blocking::Barrier) -> latchkey::Result<()> {
    /// stage.latch().wait()?;
    /// # Ok(()) }
    /// ```
    pub fn latch(&self) -> Latch {
        Latch {
            inner: self.inner.latch().clone(),
            runtime: self.runtime.clone(),
        }
    }

    /// Arrives, then blocks until every party has.
    ///
    /// # Errors
    ///
    /// As [`crate::latch::Barrier::arrive_and_wait`], and [`crate::Error::Runtime`].
    ///
    /// ```no_run
    /// # fn demo(stage: latchkey::blocking::Barrier) -> latchkey::Result<()> {
    /// stage.arrive_and_wait()?;
    /// # Ok(()) }
    /// ```
    pub fn arrive_and_wait(&self) -> Result<()> {
        block_on(&self.runtime, self.inner.arrive_and_wait())?
    }

    /// Arrives, then blocks at most `wait`: `true` if every party arrived.
    ///
    /// # Errors
    ///
    /// As [`crate::latch::Barrier::arrive_and_wait_timeout`], and
    /// [`crate::Error::Runtime`].
    ///
    /// ```no_run
    /// # fn demo(stage: latchkey::blocking::Barrier) -> latchkey::Result<()> {
    /// let all = stage.arrive_and_wait_timeout(std::time::Duration::from_secs(60))?;
    /// # Ok(()) }
    /// ```
    pub fn arrive_and_wait_timeout(&self, wait: Duration) -> Result<bool> {
        block_on(&self.runtime, self.inner.arrive_and_wait_timeout(wait))?
    }
}
