//! Counting semaphores: up to N permits held at once, across every process.

mod status;
mod store;

use std::time::Duration;

pub(crate) use status::PermitsReply;
pub use status::{PermitHolder, SemaphoreStatus};
use store::Look;
pub(crate) use store::PERMITS;
pub use store::PermitStore;

use crate::error::{Error, Result};
use crate::key::LockKey;
use crate::lease::{Lease, Ttl};
use crate::lock::{Fairness, Fencing, Mutex, MutexGuard};
use crate::store::RedisStore;

/// The most permits a semaphore may have: Lua counts in doubles, exact to 2^53.
pub(crate) const MAX_PERMITS: u64 = 1 << 50;

/// Permits held from a [`Semaphore`] (or a [`RwLock`](crate::RwLock)): a guard
/// whose life is the time they are held, with everything a lock's guard has: its
/// own owner token, a lease the watchdog renews, a fencing token
/// ([`fence`](MutexGuard::fence)), [`lost`](MutexGuard::lost) when the lease is
/// lost, and a release in the background when dropped.
///
/// ```no_run
/// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
/// let permit: latchkey::SemaphorePermit = client.semaphore("checkout", 3)?.acquire(1).await?;
/// println!("checking out, fence {}", permit.fence().await?);
/// permit.release().await?;
/// # Ok(()) }
/// ```
pub type SemaphorePermit = MutexGuard<PermitStore>;

/// A counting semaphore in Redis: at most `permits` units held at once by every
/// process using the name. Made by [`Client::semaphore`](crate::Client::semaphore).
///
/// - **Leases.** Each acquisition is a lease with its own owner token, renewed by a
///   watchdog while its [`SemaphorePermit`] lives (30 s by default, see
///   [`with_lease`](Self::with_lease)), so a holder that crashes gives its permits
///   back within one lease.
/// - **Weights.** [`acquire(n)`](Self::acquire) takes `n` permits at once, all or
///   nothing.
/// - **FIFO, without polling.** Waiters stand in one line in Redis and are woken
///   (pub/sub) when a release or an expired lease makes room for them, in order of
///   arrival: a request for many permits is never starved by a stream of small
///   ones, which queue behind it.
/// - **Fencing.** Every permit can have a fencing token from one counter per
///   semaphore, larger than every one handed out before (across restarts too, as
///   for locks): computed when the holder first asks
///   ([`MutexGuard::fence`](crate::MutexGuard::fence)), unless the semaphore asks
///   for it with every grant ([`with_fencing`](Self::with_fencing)). A permit
///   handed over from the line comes with its token.
/// - **Live counts.** [`available`](Self::available) counts the leases live at
///   the server's time of reading: a crashed holder's permits count as free the
///   moment its lease ends.
///
/// Every process must use the same number of permits for a name. The state lives in
/// the companion key `{name}:lk:sem` and its own companions, never a lock's keys.
///
/// ```no_run
/// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
/// let checkout = client.semaphore("flash-sale:checkout", 3)?;
/// let permit = checkout.acquire(1).await?; // waits in line for one of 3
/// println!("{} free now", checkout.available().await?);
/// drop(permit); // given back in the background
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Semaphore {
    store: RedisStore,
    key: LockKey,
    permits: u64,
    lease: Lease,
    waiter_lease: Option<Ttl>,
    fencing: Fencing,
}

impl Semaphore {
    /// Checks a permit count without a server: a semaphore has 1 to 2^50 permits.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] outside that range.
    ///
    /// ```
    /// assert!(latchkey::Semaphore::check_permits(3).is_ok());
    /// assert!(latchkey::Semaphore::check_permits(0).is_err());
    /// ```
    pub fn check_permits(permits: u64) -> Result<()> {
        if permits == 0 || permits > MAX_PERMITS {
            return Err(Error::InvalidArgument(format!(
                "a semaphore has 1 to 2^50 permits, not {permits}"
            )));
        }
        Ok(())
    }

    pub(crate) fn new(store: RedisStore, key: LockKey, permits: u64) -> Result<Self> {
        Self::check_permits(permits)?;
        Ok(Semaphore {
            store,
            key,
            permits,
            lease: Lease::default(),
            waiter_lease: None,
            fencing: Fencing::OnDemand,
        })
    }

    /// The same semaphore whose permits are held for `lease` (default: 30 s,
    /// renewed while the permit lives). See [Leases](crate#leases).
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// use latchkey::Lease;
    /// let jobs = client.semaphore("jobs", 4)?.with_lease(Lease::renewed(std::time::Duration::from_secs(5))?);
    /// # Ok(()) }
    /// ```
    pub fn with_lease(mut self, lease: Lease) -> Self {
        self.lease = lease;
        self
    }

    /// The same semaphore with another waiter lease: how long a waiter that stops
    /// renewing its place (a crashed process) keeps it (see
    /// [`Mutex::with_waiter_lease`]).
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// let lease = latchkey::Ttl::new(std::time::Duration::from_secs(3))?;
    /// let jobs = client.semaphore("jobs", 4)?.with_waiter_lease(lease);
    /// # Ok(()) }
    /// ```
    pub fn with_waiter_lease(mut self, lease: Ttl) -> Self {
        self.waiter_lease = Some(lease);
        self
    }

    /// The same semaphore with another [`Fencing`]: [`Fencing::OnGrant`] computes
    /// every permit's fencing token with its grant, so asking for it never costs a
    /// round trip; the default computes it when first asked for.
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// let writers = client.semaphore("ledger-writers", 2)?.with_fencing(latchkey::Fencing::OnGrant);
    /// let permit = writers.acquire(1).await?;
    /// assert!(permit.known_fence().is_some());
    /// # Ok(()) }
    /// ```
    pub fn with_fencing(mut self, fencing: Fencing) -> Self {
        self.fencing = fencing;
        self
    }

    /// The same semaphore, with its name as a `name` label on its metrics (see
    /// [`crate::metrics`]): for pools whose names are few.
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// let gpus = client.semaphore("gpus", 8)?.with_named_metrics();
    /// # Ok(()) }
    /// ```
    pub fn with_named_metrics(mut self) -> Self {
        self.key = self.key.with_named_metrics();
        self
    }

    /// The number of permits.
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// assert_eq!(client.semaphore("jobs", 4)?.permits(), 4);
    /// # Ok(()) }
    /// ```
    pub fn permits(&self) -> u64 {
        self.permits
    }

    /// Takes `weight` permits, waiting in line as long as it takes.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a weight of 0 or above the permits (it could
    /// never be granted); the errors of [`Mutex::lock`].
    ///
    /// # Cancel safety
    ///
    /// As [`Mutex::lock`]: dropping the future leaves the line, and gives back
    /// permits granted meanwhile, in the background.
    ///
    /// ```no_run
    /// # async fn demo(pool: latchkey::Semaphore) -> latchkey::Result<()> {
    /// let permit = pool.acquire(2).await?;
    /// # Ok(()) }
    /// ```
    pub async fn acquire(&self, weight: u64) -> Result<SemaphorePermit> {
        self.mutex(weight)?.lock().await
    }

    /// Takes `weight` permits, waiting in line at most `wait`.
    ///
    /// # Errors
    ///
    /// [`Error::Busy`] if none came in time; otherwise as [`acquire`](Self::acquire).
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](Self::acquire).
    ///
    /// ```no_run
    /// # async fn demo(pool: latchkey::Semaphore) -> latchkey::Result<()> {
    /// let permit = pool.acquire_timeout(1, std::time::Duration::from_secs(5)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn acquire_timeout(&self, weight: u64, wait: Duration) -> Result<SemaphorePermit> {
        self.mutex(weight)?.lock_timeout(wait).await
    }

    /// Takes `weight` permits if they are free now and nobody waits ahead, in one
    /// round trip.
    ///
    /// # Errors
    ///
    /// [`Error::Busy`] if not; otherwise as [`acquire`](Self::acquire).
    ///
    /// # Cancel safety
    ///
    /// As [`Mutex::try_lock`].
    ///
    /// ```no_run
    /// # async fn demo(pool: latchkey::Semaphore) -> latchkey::Result<()> {
    /// match pool.try_acquire(1).await {
    ///     Ok(permit) => println!("in, fence {}", permit.fence().await?),
    ///     Err(latchkey::Error::Busy { .. }) => println!("full"),
    ///     Err(other) => return Err(other),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_acquire(&self, weight: u64) -> Result<SemaphorePermit> {
        self.mutex(weight)?.try_lock().await
    }

    /// Permits free now: the permits less the weight of the leases live at the
    /// server's time of reading (never a stale count). One read-only round trip.
    ///
    /// # Errors
    ///
    /// The errors a reply can carry.
    ///
    /// ```no_run
    /// # async fn demo(pool: latchkey::Semaphore) -> latchkey::Result<()> {
    /// println!("{} of {} free", pool.available().await?, pool.permits());
    /// # Ok(()) }
    /// ```
    pub async fn available(&self) -> Result<u64> {
        Ok(self.permits.saturating_sub(self.look().await?.used))
    }

    /// Waiters in line now.
    ///
    /// # Errors
    ///
    /// The errors a reply can carry.
    ///
    /// ```no_run
    /// # async fn demo(pool: latchkey::Semaphore) -> latchkey::Result<()> {
    /// println!("{} waiting", pool.waiting().await?);
    /// # Ok(()) }
    /// ```
    pub async fn waiting(&self) -> Result<u64> {
        Ok(self.look().await?.waiting)
    }

    /// One read-only look at the holders and the line.
    async fn look(&self) -> Result<Look> {
        let store = PermitStore::new(self.store.clone(), self.permits, 1);
        store.look(&self.key, "").await
    }

    /// The lock-shaped handle for one acquisition of `weight`.
    pub(crate) fn mutex(&self, weight: u64) -> Result<Mutex<PermitStore>> {
        let store = PermitStore::new(self.store.clone(), self.permits, self.weight(weight)?);
        Ok(self.mutex_on(store))
    }

    /// The same, for an acquisition that waits at the head of the line (see
    /// [`PermitStore::at_the_front`]).
    pub(crate) fn mutex_at_the_front(&self, weight: u64) -> Result<Mutex<PermitStore>> {
        let store = PermitStore::new(self.store.clone(), self.permits, self.weight(weight)?);
        Ok(self.mutex_on(store.at_the_front()))
    }

    /// `weight`, if an acquisition can take that many.
    fn weight(&self, weight: u64) -> Result<u64> {
        if weight == 0 || weight > self.permits {
            return Err(Error::InvalidArgument(format!(
                "cannot take {weight} of a semaphore's {} permits; ask for 1 to {}",
                self.permits, self.permits
            )));
        }
        Ok(weight)
    }

    fn mutex_on(&self, store: PermitStore) -> Mutex<PermitStore> {
        let mutex = Mutex::new(store, self.key.clone())
            .with_lease(self.lease)
            .with_fairness(Fairness::Fair)
            .with_fencing(self.fencing);
        match self.waiter_lease {
            Some(lease) => mutex.with_waiter_lease(lease),
            None => mutex,
        }
    }
}
