//! Read-write locks: many readers or one writer, across every process.

mod downgrade;
mod upgradeable;

use upgradeable::UPGRADEABLE;
pub use upgradeable::UpgradeableRead;

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

    /// The same lock, with its name as a `name` label on its metrics (see
    /// [`crate::metrics`]).
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// let config = client.rw_lock("config")?.with_named_metrics();
    /// # Ok(()) }
    /// ```
    pub fn with_named_metrics(self) -> Self {
        RwLock {
            all: self.all.with_named_metrics(),
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

    /// Turns a write guard of this lock into a read guard, with no writer in
    /// between: in one script, the writer's permits give way to a reader's, and the
    /// readers at the head of the line come in at once, up to the first writer
    /// waiting (the line stays first come, first served). The read guard has a new
    /// owner token and a fresh lease (a hold limit counts again from now), and
    /// keeps the write's fencing token if it had one. With
    /// [`with_wait_replicas`](crate::Client::with_wait_replicas), replicas confirm
    /// the trade as they confirm a grant.
    ///
    /// # Errors
    ///
    /// - [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a guard that is
    ///   not a write guard of this lock, or that [`reenter`](crate::MutexGuard::reenter)ed
    ///   guards still share (the guard was moved in: it is dropped, which releases
    ///   what it held, as dropping it would);
    /// - [`Error::TooFewReplicas`](crate::Error::TooFewReplicas) with
    ///   `with_wait_replicas`, when the replicas did not confirm the trade in time
    ///   (the read is then released in the background);
    /// - [`Error::LeaseLost`](crate::Error::LeaseLost) if the write lease had ended
    ///   (nothing was held to downgrade);
    /// - the errors a reply can carry: whether the trade landed is unknown, so both
    ///   the write and the read are released in the background.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future releases whatever it holds then, write or read.
    ///
    /// ```no_run
    /// # async fn demo(config: latchkey::RwLock) -> latchkey::Result<()> {
    /// let write = config.write().await?;
    /// // ... update the configuration ...
    /// let read = config.downgrade(write).await?; // readers come in; writers wait
    /// // ... go on reading what was just written, with no writer in between ...
    /// read.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn downgrade(&self, write: SemaphorePermit) -> Result<SemaphorePermit> {
        downgrade::trade(write, &self.all.mutex(1)?).await
    }

    /// Takes an upgradeable read, waiting as long as it takes: a read that readers
    /// share, but no writer and no other upgradeable read, and that can
    /// [`upgrade`](UpgradeableRead::upgrade) to the write without deadlock. For
    /// read-then-maybe-write: check under the read, write only if needed.
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
    /// let mut guard = config.upgradeable_read().await?;
    /// guard.upgrade().await?;
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn upgradeable_read(&self) -> Result<UpgradeableRead> {
        let read = self.all.acquire(UPGRADEABLE).await?;
        self.upgradeable(read)
    }

    /// [`upgradeable_read`](Self::upgradeable_read), waiting at most `wait`.
    ///
    /// # Errors
    ///
    /// [`Error::Busy`](crate::Error::Busy) if it did not come in time; otherwise as
    /// [`upgradeable_read`](Self::upgradeable_read).
    ///
    /// # Cancel safety
    ///
    /// As [`Mutex::lock`](crate::Mutex::lock).
    ///
    /// ```no_run
    /// # async fn demo(config: latchkey::RwLock) -> latchkey::Result<()> {
    /// let guard = config.upgradeable_read_timeout(std::time::Duration::from_secs(1)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn upgradeable_read_timeout(&self, wait: Duration) -> Result<UpgradeableRead> {
        let read = self.all.acquire_timeout(UPGRADEABLE, wait).await?;
        self.upgradeable(read)
    }

    /// An upgradeable read if no writer or upgradeable read holds or waits, in one
    /// round trip.
    ///
    /// # Errors
    ///
    /// [`Error::Busy`](crate::Error::Busy) if not; otherwise as
    /// [`upgradeable_read`](Self::upgradeable_read).
    ///
    /// # Cancel safety
    ///
    /// As [`Mutex::try_lock`](crate::Mutex::try_lock).
    ///
    /// ```no_run
    /// # async fn demo(config: latchkey::RwLock) -> latchkey::Result<()> {
    /// let guard = config.try_upgradeable_read().await?;
    /// # Ok(()) }
    /// ```
    pub async fn try_upgradeable_read(&self) -> Result<UpgradeableRead> {
        let read = self.all.try_acquire(UPGRADEABLE).await?;
        self.upgradeable(read)
    }

    fn upgradeable(&self, read: SemaphorePermit) -> Result<UpgradeableRead> {
        let rest = self.all.mutex_at_the_front(MAX_PERMITS - UPGRADEABLE)?;
        Ok(UpgradeableRead::new(read, rest))
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

    /// Readers holding the lock now (live leases at the server's time; an
    /// upgradeable read counts as one), or [`u64::MAX`] while a writer (or an
    /// upgraded read) holds it.
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
        Ok(match used {
            MAX_PERMITS.. => u64::MAX,
            // An upgradeable read counts as one reader.
            UPGRADEABLE.. => used - UPGRADEABLE + 1,
            _ => used,
        })
    }
}
