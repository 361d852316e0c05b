//! An upgradeable read: a reader, one at a time, that can become the writer.

use std::future::Future;
use std::time::Duration;

use futures_util::future::{Either, select};

use crate::error::Result;
use crate::lock::Mutex;
use crate::semaphore::{MAX_PERMITS, PermitStore, SemaphorePermit};

/// The weight of an upgradeable read: more than half of the permits, so two never
/// hold at once and a writer (every permit) never comes in beside one, while
/// readers (one permit each) do.
pub(super) const UPGRADEABLE: u64 = MAX_PERMITS / 2 + 1;

/// A read of a [`RwLock`](crate::RwLock) that can become its write, from
/// [`RwLock::upgradeable_read`](crate::RwLock::upgradeable_read): readers come in
/// beside it, but no writer and no other upgradeable read.
/// [`upgrade`](Self::upgrade) waits until the readers are done, without letting a
/// writer in first (so it cannot deadlock with one), and then it holds the lock
/// alone; [`downgrade`](Self::downgrade) goes back to reading.
///
/// It is two holds of the lock's permits: the read, and while upgraded the rest of
/// the permits; each has a lease renewed by its own watchdog. Dropping it releases
/// both in the background.
///
/// ```no_run
/// # async fn demo(config: latchkey::RwLock) -> latchkey::Result<()> {
/// let mut guard = config.upgradeable_read().await?; // readers still come in
/// let stale = true; // ... read, and find the value needs refreshing ...
/// if stale {
///     guard.upgrade().await?; // waits for the readers; no writer gets in first
///     println!("writing under fence {}", guard.fence().await?);
/// }
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[must_use = "dropping the guard releases the lock at once"]
#[derive(Debug)]
pub struct UpgradeableRead {
    read: SemaphorePermit,
    /// The rest of the permits, while upgraded.
    write: Option<SemaphorePermit>,
    /// How the rest is taken: at the head of the line.
    rest: Mutex<PermitStore>,
}

impl UpgradeableRead {
    pub(super) fn new(read: SemaphorePermit, rest: Mutex<PermitStore>) -> Self {
        UpgradeableRead {
            read,
            write: None,
            rest,
        }
    }

    /// Whether it holds the lock alone now.
    ///
    /// ```no_run
    /// # async fn demo(config: latchkey::RwLock) -> latchkey::Result<()> {
    /// let guard = config.upgradeable_read().await?;
    /// assert!(!guard.is_upgraded());
    /// # Ok(()) }
    /// ```
    pub fn is_upgraded(&self) -> bool {
        self.write.is_some()
    }

    /// Waits until the readers are done and takes the rest of the permits: the lock
    /// is then this guard's alone, as a write guard's. It waits at the head of the
    /// line, so a writer that queued first waits behind it (it could not come in
    /// beside the upgradeable read anyway). Does nothing if already upgraded.
    ///
    /// # Errors
    ///
    /// As [`RwLock::write`](crate::RwLock::write). The read is still held.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: dropping the future leaves the guard a read, and what it may
    /// have taken is released in the background.
    ///
    /// ```no_run
    /// # async fn demo(config: latchkey::RwLock) -> latchkey::Result<()> {
    /// let mut guard = config.upgradeable_read().await?;
    /// guard.upgrade().await?;
    /// # Ok(()) }
    /// ```
    pub async fn upgrade(&mut self) -> Result<()> {
        if self.write.is_none() {
            self.write = Some(self.rest.lock().await?);
        }
        Ok(())
    }

    /// [`upgrade`](Self::upgrade), waiting at most `wait` for the readers.
    ///
    /// # Errors
    ///
    /// [`Error::Busy`](crate::Error::Busy) if they were not done in time; otherwise
    /// as [`upgrade`](Self::upgrade). The read is still held.
    ///
    /// # Cancel safety
    ///
    /// As [`upgrade`](Self::upgrade).
    ///
    /// ```no_run
    /// # async fn demo(config: latchkey::RwLock) -> latchkey::Result<()> {
    /// let mut guard = config.upgradeable_read().await?;
    /// guard.upgrade_timeout(std::time::Duration::from_secs(2)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn upgrade_timeout(&mut self, wait: Duration) -> Result<()> {
        if self.write.is_none() {
            self.write = Some(self.rest.lock_timeout(wait).await?);
        }
        Ok(())
    }

    /// Goes back to reading: gives the rest of the permits back, so readers (and,
    /// once it is released, writers) come in. Does nothing if not upgraded.
    ///
    /// # Errors
    ///
    /// As [`MutexGuard::release`](crate::MutexGuard::release); the permits are then
    /// released in the background.
    ///
    /// ```no_run
    /// # async fn demo(config: latchkey::RwLock) -> latchkey::Result<()> {
    /// let mut guard = config.upgradeable_read().await?;
    /// guard.upgrade().await?;
    /// guard.downgrade().await?; // readers come in again
    /// # Ok(()) }
    /// ```
    pub async fn downgrade(&mut self) -> Result<()> {
        if let Some(write) = self.write.take() {
            write.release().await?;
        }
        Ok(())
    }

    /// The hold to fence writes with: the rest of the permits while upgraded (its
    /// token is greater than every earlier one), else the read.
    ///
    /// ```no_run
    /// # async fn demo(config: latchkey::RwLock) -> latchkey::Result<()> {
    /// let guard = config.upgradeable_read().await?;
    /// println!("valid for {:?}", guard.guard().validity());
    /// # Ok(()) }
    /// ```
    pub fn guard(&self) -> &SemaphorePermit {
        self.write.as_ref().unwrap_or(&self.read)
    }

    /// The fencing token of [`guard`](Self::guard).
    ///
    /// # Errors
    ///
    /// As [`MutexGuard::fence`](crate::MutexGuard::fence).
    ///
    /// ```no_run
    /// # async fn demo(config: latchkey::RwLock) -> latchkey::Result<()> {
    /// let mut guard = config.upgradeable_read().await?;
    /// guard.upgrade().await?;
    /// println!("write under fence {}", guard.fence().await?);
    /// # Ok(()) }
    /// ```
    pub async fn fence(&self) -> Result<u64> {
        self.guard().fence().await
    }

    /// Resolves when a lease it holds is lost (the read's, or while upgraded the
    /// write's).
    ///
    /// ```no_run
    /// # async fn demo(config: latchkey::RwLock) -> latchkey::Result<()> {
    /// let guard = config.upgradeable_read().await?;
    /// tokio::select! {
    ///     () = guard.lost() => eprintln!("lease lost"),
    ///     () = tokio::time::sleep(std::time::Duration::from_millis(10)) => {}
    /// }
    /// # Ok(()) }
    /// ```
    pub fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
        let read = Box::pin(self.read.lost());
        let write = self.write.as_ref().map(|write| Box::pin(write.lost()));
        async move {
            match write {
                Some(write) => {
                    let (Either::Left(_) | Either::Right(_)) = select(read, write).await;
                }
                None => read.await,
            }
        }
    }

    /// Whether a lease it holds is known lost.
    ///
    /// ```no_run
    /// # async fn demo(config: latchkey::RwLock) -> latchkey::Result<()> {
    /// let guard = config.upgradeable_read().await?;
    /// assert!(!guard.is_lost());
    /// # Ok(()) }
    /// ```
    pub fn is_lost(&self) -> bool {
        self.read.is_lost() || self.write.as_ref().is_some_and(|w| w.is_lost())
    }

    /// Releases what it holds; `Ok(true)` when all of it was still ours.
    ///
    /// # Errors
    ///
    /// As [`MutexGuard::release`](crate::MutexGuard::release); what failed is
    /// released in the background.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future still releases everything, in the background.
    ///
    /// ```no_run
    /// # async fn demo(config: latchkey::RwLock) -> latchkey::Result<()> {
    /// let guard = config.upgradeable_read().await?;
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn release(self) -> Result<bool> {
        let wrote = match self.write {
            Some(write) => write.release().await?,
            None => true,
        };
        Ok(self.read.release().await? && wrote)
    }
}
