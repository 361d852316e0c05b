//! Read-write locks: many readers or one writer, across every process.

use std::time::Duration;

use crate::error::Result;
use crate::key::LockKey;
use crate::lease::{Lease, Ttl};
use crate::semaphore::{MAX_PERMITS, Semaphore, SemaphorePermit};
use crate::store::RedisStore;

/// A read-write lock in Redis: any number of readers at once, or one writer.
/// Made by [`Client::rw_lock`](crate::Client::rw_lock).
///
/// It is a [`Semaphore`] with every permit a writer's: a reader takes one, a writer
/// takes them all. So it has a semaphore's guarantees: leases renewed by a watchdog
/// (a crashed reader or writer blocks others for at most one lease), waiting
/// without polling, cancel safety, and strict FIFO order, which gives **writer
/// preference**: once a writer waits, readers that come after it queue behind it,
/// so a stream of readers never starves a writer.
///
/// Read and write guards both carry a fencing token from one counter: a writer that
/// came in after a reader's guard was granted has a larger one. A reader that
/// stamps what it read with its [`fence`](crate::MutexGuard::fence) can tell
/// whether a writer came in between.
///
/// ```no_run
/// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
/// let config = client.rw_lock("config")?;
/// {
///     let read = config.read().await?; // shared with other readers
///     println!("reading under fence {}", read.fence().await?);
/// }
/// let write = config.write().await?; // alone
/// write.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct RwLock {
    all: Semaphore,
}

impl RwLock {
    pub(crate) fn new(store: RedisStore, key: LockKey) -> Result<Self> {
        Ok(RwLock {
            all: Semaphore::new(store, key, MAX_PERMITS)?,
        })
    }

    /// The same lock with another [`Lease`] for every guard (default: 30 s,
    /// renewed while the guard lives).
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// let config = client.rw_lock("config")?.with_lease(latchkey::Lease::renewed(std::time::Duration::from_secs(5))?);
    /// # Ok(()) }
    /// ```
    pub fn with_lease(self, lease: Lease) -> Self {
        RwLock {
            all: self.all.with_lease(lease),
        }
    }

    /// The same lock with another waiter lease (see
    /// [`Mutex::with_waiter_lease`](crate::Mutex::with_waiter_lease)).
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// let lease = latchkey::Ttl::new(std::time::Duration::from_secs(3))?;
    /// let config = client.rw_lock("config")?.with_waiter_lease(lease);
    /// # Ok(()) }
    /// ```
    pub fn with_waiter_lease(self, lease: Ttl) -> Self {
        RwLock {
            all: self.all.with_waiter_lease(lease),
        }
    }

    /// The same lock with another [`Fencing`](crate::Fencing) for every guard (see
    /// [`Semaphore::with_fencing`](crate::Semaphore::with_fencing)).
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// let config = client.rw_lock("config")?.with_fencing(latchkey::Fencing::OnGrant);
    /// # Ok(()) }
    /// ```
    pub fn with_fencing(self, fencing: crate::Fencing) -> Self {
        RwLock {
            all: self.all.with_fencing(fencing),
        }
    }

    /// Takes a read guard, waiting as long as it takes (behind a writer that holds
    /// or waits).
    ///
    /// # Errors
    ///
    /// As [`Mutex::lock`](crate::Mutex::lock).
    ///
    /// # Cancel safety
    ///
    /// As [`Mutex::lock`](crate::Mutex::lock).
    ///
    /// ```no_run
    /// # async fn demo(config: latchkey::RwLock) -> latchkey::Result<()> {
    /// let read = config.read().await?;
    /// # Ok(()) }
    /// ```
    pub async fn read(&self) -> Result<SemaphorePermit> {
        self.all.acquire(1).await
    }

    /// Takes the write guard, waiting as long as it takes: until every reader and
    /// writer ahead of it is done.
    ///
    /// # Errors
    ///
    /// As [`Mutex::lock`](crate::Mutex::lock).
    ///
    /// # Cancel safety
    ///
    /// As [`Mutex::lock`](crate::Mutex::lock).
    ///
    /// ```no_run
    /// # async fn demo(config: latchkey::RwLock) -> latchkey::Result<()> {
    /// let write = config.write().await?;
    /// # Ok(()) }
    /// ```
    pub async fn write(&self) -> Result<SemaphorePermit> {
        self.all.acquire(MAX_PERMITS).await
    }

    /// [`read`](Self::read), waiting at most `wait`.
    ///
    /// # Errors
    ///
    /// [`Error::Busy`](crate::Error::Busy) if it did not come in time; otherwise as
    /// [`read`](Self::read).
    ///
    /// # Cancel safety
    ///
    /// As [`read`](Self::read).
    ///
    /// ```no_run
    /// # async fn demo(config: latchkey::RwLock) -> latchkey::Result<()> {
    /// let read = config.read_timeout(std::time::Duration::from_secs(1)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn read_timeout(&self, wait: Duration) -> Result<SemaphorePermit> {
        self.all.acquire_timeout(1, wait).await
    }

    /// [`write`](Self::write), waiting at most `wait`.
    ///
    /// # Errors
    ///
    /// [`Error::Busy`](crate::Error::Busy) if it did not come in time; otherwise as
    /// [`write`](Self::write).
    ///
    /// # Cancel safety
    ///
    /// As [`write`](Self::write).
    ///
    /// ```no_run
    /// # async fn demo(config: latchkey::RwLock) -> latchkey::Result<()> {
    /// let write = config.write_timeout(std::time::Duration::from_secs(1)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn write_timeout(&self, wait: Duration) -> Result<SemaphorePermit> {
        self.all.acquire_timeout(MAX_PERMITS, wait).await
    }

    /// A read guard if no writer holds or waits, in one round trip.
    ///
    /// # Errors
    ///
    /// [`Error::Busy`](crate::Error::Busy) if not; otherwise as [`read`](Self::read).
    ///
    /// # Cancel safety
    ///
    /// As [`Mutex::try_lock`](crate::Mutex::try_lock).
    ///
    /// ```no_run
    /// # async fn demo(config: latchkey::RwLock) -> latchkey::Result<()> {
    /// let read = config.try_read().await?;
    /// # Ok(()) }
    /// ```
    pub async fn try_read(&self) -> Result<SemaphorePermit> {
        self.all.try_acquire(1).await
    }

    /// The write guard if nobody holds or waits, in one round trip.
    ///
    /// # Errors
    ///
    /// [`Error::Busy`](crate::Error::Busy) if not; otherwise as [`write`](Self::write).
    ///
    /// # Cancel safety
    ///
    /// As [`Mutex::try_lock`](crate::Mutex::try_lock).
    ///
    /// ```no_run
    /// # async fn demo(config: latchkey::RwLock) -> latchkey::Result<()> {
    /// let write = config.try_write().await?;
    /// # Ok(()) }
    /// ```
    pub async fn try_write(&self) -> Result<SemaphorePermit> {
        self.all.try_acquire(MAX_PERMITS).await
    }

    /// Readers and writers waiting in line now.
    ///
    /// # Errors
    ///
    /// The errors a reply can carry.
    ///
    /// ```no_run
    /// # async fn demo(config: latchkey::RwLock) -> latchkey::Result<()> {
    /// println!("{} waiting", config.waiting().await?);
    /// # Ok(()) }
    /// ```
    pub async fn waiting(&self) -> Result<u64> {
        self.all.waiting().await
    }

    /// Readers holding the lock now (live leases at the server's time), or
    /// [`u64::MAX`] while a writer holds it.
    ///
    /// # Errors
    ///
    /// The errors a reply can carry.
    ///
    /// ```no_run
    /// # async fn demo(config: latchkey::RwLock) -> latchkey::Result<()> {
    /// println!("{} readers", config.readers().await?);
    /// # Ok(()) }
    /// ```
    pub async fn readers(&self) -> Result<u64> {
        let used = MAX_PERMITS - self.all.available().await?;
        Ok(if used >= MAX_PERMITS { u64::MAX } else { used })
    }
}
