//! The handle to one named lock.

use std::time::{Duration, Instant};

use super::fairness::Fairness;
use super::guard::MutexGuard;
use super::local::LocalLocks;
use super::waiter::{self, Wait};
use crate::error::{Error, Result};
use crate::key::LockKey;
use crate::lease::{Lease, Ttl};
use crate::lock::LockStatus;
use crate::store::{LockStore, SingleNode};
use crate::token::OwnerToken;

/// How long a queued waiter counts as alive without trying again. It tries again at
/// least every third of this, and a try that gets no reply within the response
/// timeout (1 s) is retried at once, so renewals land at most a third of the lease
/// plus two response timeouts apart: a live waiter keeps its place through a slow
/// reply, and only a dead (or frozen) waiter outlives its lease.
pub(crate) const DEFAULT_WAITER_LEASE: Ttl = Ttl::from_millis_const(5_000);

/// A lock changing hands this often while being broken is being fought over.
const FORCE_ATTEMPTS: usize = 5;

/// A distributed mutex: a handle to one named lock, cheap to clone.
///
/// Like `tokio::sync::Mutex`, taking it returns a guard whose life is the critical
/// section. Unlike an in-process mutex, the hold is a *lease*: Redis frees the lock
/// when it runs out, so a crashed holder cannot block everybody forever. By default a
/// watchdog renews the 30 s lease while the guard lives;
/// [`with_lease`](Self::with_lease) sets another [`Lease`].
///
/// Waiters do not poll: they queue in Redis, and a release hands the lock to the
/// oldest live waiter and wakes just that one through pub/sub. By default the lock
/// is *plain*: a newcomer may take a *free* lock without queueing, and while a task
/// of this process holds it, other tasks of the process queue locally and get it
/// passed on in one round trip, unless tasks of other processes wait (they come
/// first). [`Fairness::Fair`] makes it strictly FIFO across all processes: no
/// newcomer takes a free lock that a live waiter is owed, and no local passing.
///
/// ```no_run
/// use std::time::Duration;
///
/// # async fn demo() -> latchkey::Result<()> {
/// let client = latchkey::Client::open("redis://127.0.0.1:6379").await?;
/// let mutex = client.mutex("reports:nightly")?.with_fairness(latchkey::Fairness::Fair);
///
/// let guard = mutex.lock_timeout(Duration::from_secs(5)).await?;
/// println!("fencing token {}", guard.fence());
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Mutex<S = SingleNode> {
    store: S,
    key: LockKey,
    lease: Lease,
    fairness: Fairness,
    waiter_lease: Ttl,
    local: LocalLocks,
}

impl<S: LockStore> Mutex<S> {
    /// A handle to the lock at `key`: plain, with a renewed 30 s lease.
    /// Usually made by [`Client::mutex`](crate::Client::mutex).
    ///
    /// Handles made by one [`Client`](crate::Client) (and clones of one handle)
    /// pass the lock between their tasks without freeing it; see [`Mutex`].
    pub fn new(store: S, key: LockKey) -> Self {
        Self::with_local(store, key, LocalLocks::default())
    }

    pub(crate) fn with_local(store: S, key: LockKey, local: LocalLocks) -> Self {
        Mutex {
            store,
            key,
            lease: Lease::default(),
            fairness: Fairness::Plain,
            waiter_lease: DEFAULT_WAITER_LEASE,
            local,
        }
    }

    /// The same lock with another [`Lease`]: how long each acquisition holds it,
    /// and whether a watchdog renews it (the default: 30 s, renewed).
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// use std::time::Duration;
    /// use latchkey::Lease;
    ///
    /// let cart = client.mutex("cart:42")?.with_lease(Lease::fixed(Duration::from_millis(500))?);
    /// let etl = client.mutex("etl")?.with_lease(Lease::renewed(Duration::from_secs(10))?);
    /// # Ok(()) }
    /// ```
    pub fn with_lease(mut self, lease: Lease) -> Self {
        self.lease = lease;
        self
    }

    /// The same lock with another [`Fairness`]: [`Fairness::Fair`] makes waiters get
    /// it in order of arrival, across processes.
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// let mutex = client.mutex("printer")?.with_fairness(latchkey::Fairness::Fair);
    /// # Ok(()) }
    /// ```
    pub fn with_fairness(mut self, fairness: Fairness) -> Self {
        self.fairness = fairness;
        self
    }

    /// How long a waiter that stopped trying (it crashed or froze) keeps its place in
    /// the queue; default 5 s. A dead waiter delays the others by at most this. Keep
    /// it above 3 s: a live waiter renews every third of it, and a renewal whose
    /// reply is lost is retried after the 1 s response timeout.
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// let lease = latchkey::Ttl::new(std::time::Duration::from_secs(10))?;
    /// let mutex = client.mutex("q")?.with_waiter_lease(lease);
    /// # Ok(()) }
    /// ```
    pub fn with_waiter_lease(mut self, lease: Ttl) -> Self {
        self.waiter_lease = lease;
        self
    }

    /// The lock's Redis key.
    pub fn key(&self) -> &LockKey {
        &self.key
    }

    /// The lease each acquisition gets.
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// assert_eq!(client.mutex("jobs")?.lease(), latchkey::Lease::default());
    /// # Ok(()) }
    /// ```
    pub fn lease(&self) -> Lease {
        self.lease
    }

    /// Whether the lock is plain or fair.
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// assert_eq!(client.mutex("jobs")?.fairness(), latchkey::Fairness::Plain);
    /// # Ok(()) }
    /// ```
    pub fn fairness(&self) -> Fairness {
        self.fairness
    }

    fn is_fair(&self) -> bool {
        self.fairness == Fairness::Fair
    }

    /// Takes the lock if it is free, in one round trip; [`Error::Busy`] if not. The
    /// one attempt is not retried: a connection failure is returned as
    /// [`Error::Unreachable`], after at most about 3 s (a 2 s connect timeout when
    /// the connection must be made again, then the 1 s reply timeout).
    ///
    /// ```no_run
    /// # async fn demo(mutex: latchkey::Mutex) -> latchkey::Result<()> {
    /// match mutex.try_lock().await {
    ///     Ok(guard) => { /* critical section */ guard.release().await?; }
    ///     Err(latchkey::Error::Busy { .. }) => println!("someone else runs it"),
    ///     Err(other) => return Err(other),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_lock(&self) -> Result<MutexGuard<S>> {
        self.acquire(Some(Instant::now())).await
    }

    /// Waits until the lock is ours, for as long as it takes.
    ///
    /// Transient failures (a dropped connection, a reply that timed out, a server
    /// still loading its data after a restart) are retried with capped backoff and
    /// logged at `warn` level; only an error that retrying cannot fix (credentials,
    /// ACL, a key of another type) ends the wait.
    ///
    /// Cancel-safe: dropping the future (for example under `tokio::time::timeout`)
    /// leaves no lock behind and leaves the wait queue, even if the acquire had
    /// already reached Redis or a release had just handed the lock over.
    ///
    /// ```no_run
    /// # async fn demo(mutex: latchkey::Mutex) -> latchkey::Result<()> {
    /// let guard = mutex.lock().await?;
    /// # Ok(()) }
    /// ```
    pub async fn lock(&self) -> Result<MutexGuard<S>> {
        self.acquire(None).await
    }

    /// Waits at most `wait` for the lock; [`Error::Busy`] with the time waited if it
    /// stayed held, or the last transient error if Redis could not be reached as the
    /// wait ran out. Returns within `wait` plus a few milliseconds whatever the
    /// network does: every round trip is cut off at the deadline (and undone in the
    /// background). A zero `wait` makes one attempt, as [`try_lock`](Self::try_lock)
    /// does. Retries and cancel safety as for [`lock`](Self::lock).
    ///
    /// ```no_run
    /// # async fn demo(mutex: latchkey::Mutex) -> latchkey::Result<()> {
    /// let guard = mutex.lock_timeout(std::time::Duration::from_secs(10)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn lock_timeout(&self, wait: Duration) -> Result<MutexGuard<S>> {
        // A wait too long to represent is a wait without deadline.
        self.acquire(Instant::now().checked_add(wait)).await
    }

    /// Runs `work` under the lock and releases it after. If the lease is lost while
    /// `work` runs, `work` is cancelled (dropped at its next `.await`) and the result
    /// is [`Error::LeaseLost`]. Waits for the lock without limit, like [`lock`](Self::lock).
    ///
    /// ```no_run
    /// # async fn demo(mutex: latchkey::Mutex) -> latchkey::Result<()> {
    /// let total = mutex.with_lock(async |guard| {
    ///     println!("fence {}", guard.fence());
    ///     42
    /// }).await?;
    /// # Ok(()) }
    /// ```
    pub async fn with_lock<T>(&self, work: impl AsyncFnOnce(&MutexGuard<S>) -> T) -> Result<T> {
        let guard = self.lock().await?;
        let outcome = {
            let lost = guard.lost();
            let work = work(&guard);
            tokio::select! {
                biased;
                value = work => Some(value),
                () = lost => None,
            }
        };
        let key = self.key.to_string();
        match outcome {
            Some(value) if guard.release().await? => Ok(value),
            _ => Err(Error::LeaseLost { key }),
        }
    }

    /// Whether anybody (latchkey or another library) holds the lock right now.
    ///
    /// ```no_run
    /// # async fn demo(mutex: latchkey::Mutex) -> latchkey::Result<()> {
    /// if mutex.is_locked().await? { println!("busy"); }
    /// # Ok(()) }
    /// ```
    pub async fn is_locked(&self) -> Result<bool> {
        Ok(self.store.owner(&self.key).await?.is_some())
    }

    /// A consistent snapshot: holder (mask it before display), remaining lease,
    /// last fencing token, waiters.
    ///
    /// ```no_run
    /// # async fn demo(mutex: latchkey::Mutex) -> latchkey::Result<()> {
    /// let status = mutex.status().await?;
    /// println!("held by {:?}, {} waiting", status.masked_holder(), status.waiters);
    /// # Ok(()) }
    /// ```
    pub async fn status(&self) -> Result<LockStatus> {
        self.store.inspect(&self.key).await
    }

    /// Breaks the lock whoever holds it (an operator's tool, for a holder known to be
    /// gone). The next fair waiter gets it as after a release. Returns the status the
    /// lock had when broken, or `None` if it was free.
    ///
    /// ```no_run
    /// # async fn demo(mutex: latchkey::Mutex) -> latchkey::Result<()> {
    /// if let Some(was) = mutex.force_release().await? {
    ///     println!("broke the lock of {:?}", was.masked_holder());
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn force_release(&self) -> Result<Option<LockStatus>> {
        for _ in 0..FORCE_ATTEMPTS {
            let status = self.status().await?;
            let Some(holder) = &status.holder else {
                return Ok(None);
            };
            // Releasing as the holder hands the lock on exactly as its own release would.
            let holder = OwnerToken::from_stored(holder.clone());
            if self.store.release(&self.key, &holder, false).await? {
                return Ok(Some(status));
            }
        }
        Err(Error::Busy {
            key: self.key.to_string(),
            waited: Duration::ZERO,
            holder: None,
            retry_after: None,
        })
    }

    async fn acquire(&self, deadline: Option<Instant>) -> Result<MutexGuard<S>> {
        let wait = Wait {
            ttl: self.lease.ttl(),
            fair: self.is_fair(),
            waiter_lease: self.waiter_lease,
            deadline,
        };
        // Fair locks keep strict FIFO order in Redis; plain ones pass between local tasks.
        let local = (!self.is_fair()).then_some(&self.local);
        let mut won = waiter::acquire(&self.store, &self.key, wait, local).await?;
        won.hold.local = local.cloned();
        Ok(MutexGuard::new(won, self.lease))
    }
}
