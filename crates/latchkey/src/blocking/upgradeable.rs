//! Blocking twin of [`crate::UpgradeableRead`].

use std::sync::Arc;
use std::time::Duration;

use super::{OwnedRuntime, block_on};
use crate::error::Result;

/// Blocking twin of [`crate::UpgradeableRead`], from
/// [`RwLock::upgradeable_read`](super::RwLock::upgradeable_read). Dropping it
/// releases what it holds before the drop returns.
///
/// ```no_run
/// # fn demo(config: latchkey::blocking::RwLock) -> latchkey::Result<()> {
/// let mut guard = config.upgradeable_read()?;
/// guard.upgrade()?;
/// println!("writing under fence {}", guard.fence()?);
/// guard.release()?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct UpgradeableRead {
    // `Some` for the guard's whole life: only `release` and `drop` take it.
    pub(super) inner: Option<crate::UpgradeableRead>,
    pub(super) runtime: Arc<OwnedRuntime>,
}

impl UpgradeableRead {
    fn inner(&mut self) -> &mut crate::UpgradeableRead {
        self.inner
            .as_mut()
            .expect("a blocking guard holds its async guard until released or dropped")
    }

    /// Whether it holds the lock alone now (see
    /// [`crate::UpgradeableRead::is_upgraded`]).
    ///
    /// ```no_run
    /// # fn demo(mut guard: latchkey::blocking::UpgradeableRead) {
    /// assert!(!guard.is_upgraded());
    /// # }
    /// ```
    pub fn is_upgraded(&mut self) -> bool {
        self.inner().is_upgraded()
    }

    /// Waits for the readers and takes the lock alone (see
    /// [`crate::UpgradeableRead::upgrade_timeout`]).
    ///
    /// # Errors
    ///
    /// As [`crate::UpgradeableRead::upgrade_timeout`], and
    /// [`crate::Error::Runtime`]. The read is still held.
    ///
    /// ```no_run
    /// # fn demo(mut guard: latchkey::blocking::UpgradeableRead) -> latchkey::Result<()> {
    /// guard.upgrade_timeout(std::time::Duration::from_secs(2))?;
    /// # Ok(()) }
    /// ```
    pub fn upgrade_timeout(&mut self, wait: Duration) -> Result<()> {
        let runtime = self.runtime.clone();
        block_on(&runtime, self.inner().upgrade_timeout(wait))?
    }

    /// Waits for the readers as long as it takes (see
    /// [`crate::UpgradeableRead::upgrade`]). Nothing can interrupt it: prefer
    /// [`upgrade_timeout`](Self::upgrade_timeout).
    ///
    /// # Errors
    ///
    /// As [`crate::UpgradeableRead::upgrade`], and [`crate::Error::Runtime`].
    ///
    /// ```no_run
    /// # fn demo(mut guard: latchkey::blocking::UpgradeableRead) -> latchkey::Result<()> {
    /// guard.upgrade()?;
    /// # Ok(()) }
    /// ```
    pub fn upgrade(&mut self) -> Result<()> {
        let runtime = self.runtime.clone();
        block_on(&runtime, self.inner().upgrade())?
    }

    /// Goes back to reading (see [`crate::UpgradeableRead::downgrade`]).
    ///
    /// # Errors
    ///
    /// As [`crate::UpgradeableRead::downgrade`], and [`crate::Error::Runtime`].
    ///
    /// ```no_run
    /// # fn demo(mut guard: latchkey::blocking::UpgradeableRead) -> latchkey::Result<()> {
    /// guard.downgrade()?;
    /// # Ok(()) }
    /// ```
    pub fn downgrade(&mut self) -> Result<()> {
        let runtime = self.runtime.clone();
        block_on(&runtime, self.inner().downgrade())?
    }

    /// The fencing token to write with (see [`crate::UpgradeableRead::fence`]).
    ///
    /// # Errors
    ///
    /// As [`crate::UpgradeableRead::fence`], and [`crate::Error::Runtime`].
    ///
    /// ```no_run
    /// # fn demo(mut guard: latchkey::blocking::UpgradeableRead) -> latchkey::Result<()> {
    /// println!("{}", guard.fence()?);
    /// # Ok(()) }
    /// ```
    pub fn fence(&mut self) -> Result<u64> {
        let runtime = self.runtime.clone();
        block_on(&runtime, self.inner().fence())?
    }

    /// Releases what it holds (see [`crate::UpgradeableRead::release`]).
    ///
    /// # Errors
    ///
    /// As [`crate::UpgradeableRead::release`], and [`crate::Error::Runtime`].
    ///
    /// ```no_run
    /// # fn demo(guard: latchkey::blocking::UpgradeableRead) -> latchkey::Result<()> {
    /// guard.release()?;
    /// # Ok(()) }
    /// ```
    pub fn release(mut self) -> Result<bool> {
        let Some(guard) = self.inner.take() else {
            return Ok(false);
        };
        block_on(&self.runtime, guard.release())?
    }
}

impl Drop for UpgradeableRead {
    fn drop(&mut self) {
        let Some(guard) = self.inner.take() else {
            return;
        };
        if let Ok(Err(error)) = block_on(&self.runtime, guard.release()) {
            tracing::warn!(%error, "could not release a dropped upgradeable read; it frees itself when its lease ends");
        }
    }
}
