//! A synchronous API for code without an async runtime, like `reqwest::blocking`.
//!
//! Each [`Client`] runs a small tokio runtime (one worker thread) and blocks the
//! calling thread on it. It works on any thread, including inside
//! `tokio::task::spawn_blocking`, tokio's home for synchronous code. From async code
//! prefer the async API: a blocking call blocks the executor thread it runs on, as
//! `std::sync::Mutex` would.
//!
//! ```no_run
//! use std::time::Duration;
//!
//! let client = latchkey::blocking::Client::open("redis://127.0.0.1:6379")?;
//! let guard = client.mutex("nightly")?.lock_timeout(Duration::from_secs(5))?;
//! println!("fence {}", guard.fence()?);
//! guard.release()?;
//! # Ok::<(), latchkey::Error>(())
//! ```
//!
//! What is here, with the same names and meanings as in the async API:
//!
//! - **Clients** for every deployment: one server ([`Client::open`],
//!   [`Client::from_redis_client`], [`Client::with_wait_replicas`]), Redis Cluster
//!   ([`Client::open_cluster`]), Sentinel ([`Client::open_sentinel`]) and a quorum of
//!   independent masters ([`Client::open_quorum`], whose client has locks only, as
//!   the async one does).
//! - **Locks**: [`Mutex`] and [`MutexGuard`], [`Client::list`], and holds handed
//!   between processes ([`MutexGuard::detach`], [`Mutex::adopt`],
//!   [`Mutex::extend_held`], [`Mutex::release_held`]).
//! - **Looking at every primitive**: [`Client::inspect`], [`Client::list_all`],
//!   [`Client::force_release`].
//! - **Semaphores** ([`Semaphore`], whose permits are [`SemaphorePermit`]s: blocking
//!   guards over the semaphore's store) and **read-write locks** ([`RwLock`]), on one
//!   Redis deployment.
//! - **Rate limits**: [`RateLimiter`].
//!
//! What differs, because synchronous code cannot do the same thing:
//!
//! - [`Mutex::with_lock`] takes a closure and cannot cancel it when the lease is
//!   lost (synchronous code cannot be interrupted): check
//!   [`MutexGuard::is_lost`] between steps; the result is [`Error::LeaseLost`] if
//!   the lease was lost by the time the closure returned.
//! - A guard has no `lost()` future: poll [`MutexGuard::is_lost`], or hand
//!   [`MutexGuard::lost_token`] to another thread.
//! - Dropping a [`MutexGuard`] releases the lock *before* the drop returns (the
//!   async guard releases in the background).
//! - A waiting call cannot be cancelled from outside: use
//!   [`Mutex::lock_timeout`] to bound it.
//!
//! What is missing, and why:
//!
//! - **Optimistic transactions** (`Client::transaction`, `MutexGuard::transaction`).
//!   The body of [`Transaction::run`](crate::transaction::Transaction::run) is an
//!   async closure that reads through [`Reads`](crate::transaction::Reads) while
//!   the transaction runs, between WATCH and EXEC on the attempt's own connection.
//!   A synchronous body would have to block inside that running future, and each
//!   of its reads would then need a thread of its own to wait on the client's
//!   runtime. Run transactions with the async API on a runtime of your own
//!   (`tokio::runtime::Runtime::block_on`) instead.
//! - **Your own store or connection** (`Client::with_store`,
//!   `Client::from_connection`, `Client::store`, `Mutex::new`). A blocking client
//!   makes its store on its own runtime, from URLs or a redis-rs client; a
//!   connection made elsewhere is driven by the runtime it was made on, which
//!   synchronous code does not have.
//!
//! Waiting, leases, fencing and the behaviour under faults are those of the async API:
//! see the [crate docs](crate#leases). Every fallible call returns the errors of its
//! async twin (linked from its `# Errors` section), and [`Error::Runtime`] if the
//! client's runtime has shut down or the call panicked on it.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::runtime::{Handle, Runtime};
use tokio_util::sync::CancellationToken;

use crate::HoldToken;
use crate::error::{Error, Result};
use crate::inspect::Primitive;
use crate::key::{Kind, LockKey, Prefix};
use crate::lease::{Lease, Ttl};
use crate::lock::Fairness;
use crate::quorum::QuorumStore;
use crate::ratelimit::{Decision, Headers, Policy};
use crate::semaphore::PermitStore;
use crate::store::{Inspect, LockStatus, Pass, RedisStore, WakeUps};
use crate::token::OwnerToken;

mod election;
mod latch;
mod multilock;
mod upgradeable;

pub use election::{Election, Leadership, Observer};
pub use latch::{Barrier, Latch};
pub use multilock::{MultiLock, MultiLockGuard};
pub use upgradeable::UpgradeableRead;

/// Blocking twin of [`crate::Client`].
///
/// ```no_run
/// let client = latchkey::blocking::Client::open("redis://127.0.0.1:6379")?.with_prefix("app:")?;
/// # Ok::<(), latchkey::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Client<S = RedisStore> {
    inner: crate::Client<S>,
    runtime: Arc<OwnedRuntime>,
}

impl Client<RedisStore> {
    /// Connects to one Redis server by URL (see [`crate::Client::open`]).
    ///
    /// # Errors
    ///
    /// As [`crate::Client::open`], and [`Error::Runtime`] if the runtime cannot start.
    ///
    /// ```no_run
    /// let client = latchkey::blocking::Client::open("redis://127.0.0.1:6379")?;
    /// # Ok::<(), latchkey::Error>(())
    /// ```
    pub fn open(url: &str) -> Result<Self> {
        Client::start(crate::Client::open(url))
    }

    /// Connects to a Redis Cluster through `seeds`, the URLs of some of its nodes
    /// (see [`crate::Client::open_cluster`]).
    ///
    /// # Errors
    ///
    /// As [`crate::Client::open_cluster`], and [`Error::Runtime`] if the runtime
    /// cannot start.
    ///
    /// ```no_run
    /// let client = latchkey::blocking::Client::open_cluster(&["redis://10.0.0.1:6379", "redis://10.0.0.2:6379"])?;
    /// # Ok::<(), latchkey::Error>(())
    /// ```
    pub fn open_cluster(seeds: &[impl AsRef<str>]) -> Result<Self> {
        let seeds = owned(seeds);
        Client::start(crate::Client::open_cluster(&seeds))
    }

    /// Connects to the primary Redis Sentinel names for `master`, asking the
    /// Sentinels at `sentinels` (see [`crate::Client::open_sentinel`]).
    ///
    /// # Errors
    ///
    /// As [`crate::Client::open_sentinel`], and [`Error::Runtime`] if the runtime
    /// cannot start.
    ///
    /// ```no_run
    /// let client = latchkey::blocking::Client::open_sentinel("mymaster", &["redis://10.0.0.1:26379"])?;
    /// # Ok::<(), latchkey::Error>(())
    /// ```
    pub fn open_sentinel(master: &str, sentinels: &[impl AsRef<str>]) -> Result<Self> {
        let sentinels = owned(sentinels);
        Client::start(crate::Client::open_sentinel(master, &sentinels))
    }

    /// Connects through a redis-rs client the application already configured (a
    /// private CA, a client certificate …); see [`crate::Client::from_redis_client`].
    ///
    /// # Errors
    ///
    /// As [`crate::Client::from_redis_client`], and [`Error::Runtime`].
    ///
    /// ```no_run
    /// let redis = latchkey::redis::Client::open("redis://127.0.0.1:6379")?;
    /// let client = latchkey::blocking::Client::from_redis_client(redis)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_redis_client(client: redis::Client) -> Result<Self> {
        Client::start(crate::Client::from_redis_client(client))
    }

    /// The same client (sharing its connections and runtime), whose locks wait for
    /// `replicas` replicas to confirm every grant and renewal (see
    /// [`crate::Client::with_wait_replicas`]).
    ///
    /// # Errors
    ///
    /// As [`crate::Client::with_wait_replicas`]: [`Error::InvalidArgument`] for a
    /// `timeout` under 1 ms or over 500 ms.
    ///
    /// ```no_run
    /// # fn demo(client: latchkey::blocking::Client) -> latchkey::Result<()> {
    /// let safer = client.with_wait_replicas(1, std::time::Duration::from_millis(100))?;
    /// let guard = safer.mutex("payout")?.lock()?;
    /// println!("{:?} replicas have it", guard.replicas());
    /// # Ok(()) }
    /// ```
    pub fn with_wait_replicas(mut self, replicas: u32, timeout: Duration) -> Result<Self> {
        self.inner = self.inner.with_wait_replicas(replicas, timeout)?;
        Ok(self)
    }

    /// A counting semaphore on `name` with `permits` permits (see
    /// [`crate::Client::semaphore`]). Nothing is sent to Redis until it is used.
    ///
    /// # Errors
    ///
    /// As [`crate::Client::semaphore`]: [`Error::InvalidArgument`] for an invalid
    /// name, or 0 permits or more than 2^50.
    ///
    /// ```no_run
    /// # fn demo(client: latchkey::blocking::Client) -> latchkey::Result<()> {
    /// let checkout = client.semaphore("checkout", 3)?;
    /// let permit = checkout.acquire(1)?;
    /// # Ok(()) }
    /// ```
    pub fn semaphore(&self, name: &str, permits: u64) -> Result<Semaphore> {
        Ok(Semaphore {
            inner: self.inner.semaphore(name, permits)?,
            runtime: self.runtime.clone(),
        })
    }

    /// The leader election called `name` (see [`crate::Client::election`]).
    ///
    /// # Errors
    ///
    /// As [`crate::Client::election`]: [`Error::InvalidArgument`] for an invalid name.
    ///
    /// ```no_run
    /// # fn demo(client: latchkey::blocking::Client) -> latchkey::Result<()> {
    /// let leadership = client.election("scheduler")?.campaign("host-a")?;
    /// # Ok(()) }
    /// ```
    pub fn election(&self, name: &str) -> Result<Election> {
        Ok(Election {
            inner: self.inner.election(name)?,
            runtime: self.runtime.clone(),
        })
    }

    /// The count-down latch called `name`, of `count` (see [`crate::Client::latch`]).
    ///
    /// # Errors
    ///
    /// As [`crate::Client::latch`].
    ///
    /// ```no_run
    /// # fn demo(client: latchkey::blocking::Client) -> latchkey::Result<()> {
    /// client.latch("nightly:shards-loaded", 3)?.count_down()?;
    /// # Ok(()) }
    /// ```
    pub fn latch(&self, name: &str, count: u64) -> Result<Latch> {
        Ok(Latch {
            inner: self.inner.latch(name, count)?,
            runtime: self.runtime.clone(),
        })
    }

    /// A barrier called `name` of `parties` (see [`crate::Client::barrier`]).
    ///
    /// # Errors
    ///
    /// As [`crate::Client::barrier`].
    ///
    /// ```no_run
    /// # fn demo(client: latchkey::blocking::Client) -> latchkey::Result<()> {
    /// client.barrier("migration:stage-1", 4)?.arrive_and_wait()?;
    /// # Ok(()) }
    /// ```
    pub fn barrier(&self, name: &str, parties: u64) -> Result<Barrier> {
        Ok(Barrier {
            inner: self.inner.barrier(name, parties)?,
            runtime: self.runtime.clone(),
        })
    }

    /// A read-write lock on `name`: many readers or one writer, writers first (see
    /// [`crate::Client::rw_lock`]).
    ///
    /// # Errors
    ///
    /// As [`crate::Client::rw_lock`]: [`Error::InvalidArgument`] for an invalid name.
    ///
    /// ```no_run
    /// # fn demo(client: latchkey::blocking::Client) -> latchkey::Result<()> {
    /// let config = client.rw_lock("config")?;
    /// let read = config.read()?;
    /// # Ok(()) }
    /// ```
    pub fn rw_lock(&self, name: &str) -> Result<RwLock> {
        Ok(RwLock {
            inner: self.inner.rw_lock(name)?,
            runtime: self.runtime.clone(),
        })
    }

    /// A rate limiter on `name` under `policy` (see [`crate::Client::rate_limiter`]).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for an invalid name.
    ///
    /// ```no_run
    /// use latchkey::ratelimit::Policy;
    /// # fn demo(client: latchkey::blocking::Client) -> latchkey::Result<()> {
    /// let sms = client.rate_limiter("sms:+15551234567", Policy::cooldown(std::time::Duration::from_secs(60))?)?;
    /// if !sms.check(1)?.allowed { println!("too soon"); }
    /// # Ok(()) }
    /// ```
    pub fn rate_limiter(&self, name: &str, policy: Policy) -> Result<RateLimiter> {
        Ok(RateLimiter {
            inner: self.inner.rate_limiter(name, policy)?,
            runtime: self.runtime.clone(),
        })
    }

    /// Everything latchkey keeps under `name` (see [`crate::Client::inspect`]).
    ///
    /// # Errors
    ///
    /// As [`crate::Client::inspect`], and [`Error::Runtime`].
    ///
    /// ```no_run
    /// # fn demo(client: latchkey::blocking::Client) -> latchkey::Result<()> {
    /// for found in client.inspect("pool")? { println!("{}", found.kind()); }
    /// # Ok(()) }
    /// ```
    pub fn inspect(&self, name: &str) -> Result<Vec<Primitive>> {
        block_on(&self.runtime, self.inner.inspect(name))?
    }

    /// Every primitive in use under the prefix (see [`crate::Client::list_all`]).
    ///
    /// # Errors
    ///
    /// As [`crate::Client::list_all`], and [`Error::Runtime`].
    ///
    /// ```no_run
    /// # fn demo(client: latchkey::blocking::Client) -> latchkey::Result<()> {
    /// for (name, found) in client.list_all("*")? { println!("{name}: {}", found.kind()); }
    /// # Ok(()) }
    /// ```
    pub fn list_all(&self, pattern: &str) -> Result<Vec<(String, Primitive)>> {
        block_on(&self.runtime, self.inner.list_all(pattern))?
    }

    /// Breaks the primitive of `kind` under `name` (see
    /// [`crate::Client::force_release`]).
    ///
    /// # Errors
    ///
    /// As [`crate::Client::force_release`], and [`Error::Runtime`].
    ///
    /// ```no_run
    /// # fn demo(client: latchkey::blocking::Client) -> latchkey::Result<()> {
    /// client.force_release("pool", latchkey::Kind::Semaphore)?;
    /// # Ok(()) }
    /// ```
    pub fn force_release(&self, name: &str, kind: Kind) -> Result<Option<Primitive>> {
        block_on(&self.runtime, self.inner.force_release(name, kind))?
    }
}

impl Client<QuorumStore> {
    /// A client whose locks are held by a majority of independent Redis masters
    /// (Redlock; N odd, at least 3); see [`crate::Client::open_quorum`]. As in the
    /// async API, it has locks only: semaphores, read-write locks and rate limits
    /// need one Redis deployment.
    ///
    /// # Errors
    ///
    /// As [`crate::Client::open_quorum`], and [`Error::Runtime`] if the runtime
    /// cannot start.
    ///
    /// ```no_run
    /// let client = latchkey::blocking::Client::open_quorum(&[
    ///     "redis://10.0.0.1:6379",
    ///     "redis://10.0.0.2:6379",
    ///     "redis://10.0.0.3:6379",
    /// ])?;
    /// let guard = client.mutex("nightly-report")?.lock()?;
    /// # Ok::<(), latchkey::Error>(())
    /// ```
    pub fn open_quorum(urls: &[impl AsRef<str>]) -> Result<Self> {
        let urls = owned(urls);
        Client::start(crate::Client::open_quorum(&urls))
    }
}

impl<S> Client<S> {
    /// Starts the client's runtime and opens the async client on it.
    fn start<F>(open: F) -> Result<Self>
    where
        F: Future<Output = Result<crate::Client<S>>> + Send,
        S: Send,
    {
        let runtime = Arc::new(OwnedRuntime::start()?);
        let inner = block_on(&runtime, open)??;
        Ok(Client { inner, runtime })
    }

    /// The same client with every lock name prefixed by `prefix`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a prefix [`Prefix`] refuses.
    ///
    /// ```no_run
    /// # fn demo(client: latchkey::blocking::Client) -> latchkey::Result<()> {
    /// let client = client.with_prefix("billing:")?;
    /// # Ok(()) }
    /// ```
    pub fn with_prefix(mut self, prefix: &str) -> Result<Self> {
        self.inner = self.inner.with_prefix(prefix)?;
        Ok(self)
    }

    /// The key prefix.
    ///
    /// ```no_run
    /// # fn demo(client: latchkey::blocking::Client) {
    /// println!("locks live under {:?}", client.prefix().as_str());
    /// # }
    /// ```
    pub fn prefix(&self) -> &Prefix {
        self.inner.prefix()
    }
}

impl<S: Pass + WakeUps> Client<S> {
    /// A handle to the lock called `name` (see [`crate::Client::mutex`]).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for an invalid name.
    ///
    /// ```no_run
    /// # fn demo(client: latchkey::blocking::Client) -> latchkey::Result<()> {
    /// let mutex = client.mutex("deploy")?;
    /// # Ok(()) }
    /// ```
    pub fn mutex(&self, name: &str) -> Result<Mutex<S>> {
        Ok(Mutex {
            inner: self.inner.mutex(name)?,
            runtime: self.runtime.clone(),
        })
    }

    /// Several locks taken together, all or none (see
    /// [`crate::Client::multi_lock`]).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for no name or an invalid one.
    ///
    /// ```no_run
    /// # fn demo(client: latchkey::blocking::Client) -> latchkey::Result<()> {
    /// let both = client.multi_lock(["account:1", "account:2"])?.lock()?;
    /// # Ok(()) }
    /// ```
    pub fn multi_lock<N: AsRef<str>>(
        &self,
        names: impl IntoIterator<Item = N>,
    ) -> Result<MultiLock<S>> {
        Ok(MultiLock {
            inner: self.inner.multi_lock(names)?,
            runtime: self.runtime.clone(),
        })
    }
}

impl<S: Pass + WakeUps + Inspect> Client<S> {
    /// The locks whose names match `pattern`, with their status (see
    /// [`crate::Client::list`]).
    ///
    /// # Errors
    ///
    /// As [`crate::Client::list`], and [`Error::Runtime`].
    ///
    /// ```no_run
    /// # fn demo(client: latchkey::blocking::Client) -> latchkey::Result<()> {
    /// for (name, status) in client.list("*")? {
    ///     println!("{name}: held {}", status.is_held());
    /// }
    /// # Ok(()) }
    /// ```
    pub fn list(&self, pattern: &str) -> Result<Vec<(String, LockStatus)>> {
        block_on(&self.runtime, self.inner.list(pattern))?
    }
}

/// Blocking twin of [`crate::ratelimit::RateLimiter`].
///
/// ```no_run
/// use latchkey::ratelimit::Policy;
/// # fn demo(client: latchkey::blocking::Client) -> latchkey::Result<()> {
/// let quota = client.rate_limiter("downloads:10.0.0.7", Policy::fixed_window(5, std::time::Duration::from_secs(600))?)?;
/// let decision = quota.check(1)?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct RateLimiter {
    inner: crate::ratelimit::RateLimiter,
    runtime: Arc<OwnedRuntime>,
}

impl RateLimiter {
    /// Asks to make one call costing `cost` units, and counts it if allowed (see
    /// [`crate::ratelimit::RateLimiter::check`]).
    ///
    /// # Errors
    ///
    /// As [`crate::ratelimit::RateLimiter::check`], and [`Error::Runtime`]. When it
    /// fails, the call may or may not have been counted.
    ///
    /// ```no_run
    /// # fn demo(quota: latchkey::blocking::RateLimiter) -> latchkey::Result<()> {
    /// let decision = quota.check(1)?;
    /// println!("{} left", decision.remaining);
    /// # Ok(()) }
    /// ```
    pub fn check(&self, cost: u64) -> Result<Decision> {
        block_on(&self.runtime, self.inner.check(cost))?
    }

    /// What a call of cost 1 would get now, counting nothing (see
    /// [`crate::ratelimit::RateLimiter::peek`]).
    ///
    /// # Errors
    ///
    /// As [`crate::ratelimit::RateLimiter::peek`], and [`Error::Runtime`].
    ///
    /// ```no_run
    /// # fn demo(quota: latchkey::blocking::RateLimiter) -> latchkey::Result<()> {
    /// println!("{} left", quota.peek()?.remaining);
    /// # Ok(()) }
    /// ```
    pub fn peek(&self) -> Result<Decision> {
        block_on(&self.runtime, self.inner.peek())?
    }

    /// Waits until a call costing `cost` is allowed, and counts it (see
    /// [`crate::ratelimit::RateLimiter::acquire`]).
    ///
    /// # Errors
    ///
    /// As [`crate::ratelimit::RateLimiter::acquire`], and [`Error::Runtime`].
    ///
    /// ```no_run
    /// # fn demo(quota: latchkey::blocking::RateLimiter) -> latchkey::Result<()> {
    /// assert!(quota.acquire(1)?.allowed);
    /// # Ok(()) }
    /// ```
    pub fn acquire(&self, cost: u64) -> Result<Decision> {
        block_on(&self.runtime, self.inner.acquire(cost))?
    }

    /// [`acquire`](Self::acquire), waiting at most `wait`: the allowed decision, or
    /// the last denied one (see [`crate::ratelimit::RateLimiter::acquire_timeout`]).
    ///
    /// # Errors
    ///
    /// As [`crate::ratelimit::RateLimiter::acquire_timeout`], and [`Error::Runtime`].
    ///
    /// ```no_run
    /// # fn demo(quota: latchkey::blocking::RateLimiter) -> latchkey::Result<()> {
    /// let decision = quota.acquire_timeout(1, std::time::Duration::from_secs(2))?;
    /// println!("allowed: {}", decision.allowed);
    /// # Ok(()) }
    /// ```
    pub fn acquire_timeout(&self, cost: u64, wait: std::time::Duration) -> Result<Decision> {
        block_on(&self.runtime, self.inner.acquire_timeout(cost, wait))?
    }

    /// The HTTP header values for `decision` under this limiter's policy (see
    /// [`crate::ratelimit::RateLimiter::headers`]).
    ///
    /// ```no_run
    /// # fn demo(api: latchkey::blocking::RateLimiter) -> latchkey::Result<()> {
    /// let decision = api.check(1)?;
    /// for (name, value) in api.headers(&decision).pairs() {
    ///     println!("{name}: {value}");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn headers(&self, decision: &Decision) -> Headers {
        self.inner.headers(decision)
    }

    /// The policy.
    ///
    /// ```no_run
    /// # fn demo(api: latchkey::blocking::RateLimiter) {
    /// println!("{} per {:?}", api.policy().quota(), api.policy().period());
    /// # }
    /// ```
    pub fn policy(&self) -> &Policy {
        self.inner.policy()
    }

    /// The limiter's name as given (with the client's prefix).
    ///
    /// ```no_run
    /// # fn demo(api: latchkey::blocking::RateLimiter) {
    /// println!("limiting {}", api.name());
    /// # }
    /// ```
    pub fn name(&self) -> &str {
        self.inner.name()
    }
}

/// Blocking twin of [`crate::Mutex`].
///
/// ```no_run
/// # fn demo(client: latchkey::blocking::Client) -> latchkey::Result<()> {
/// let lease = latchkey::Lease::fixed(std::time::Duration::from_secs(5))?;
/// let mutex = client.mutex("cart:1")?.with_lease(lease);
/// let guard = mutex.try_lock()?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Mutex<S = RedisStore> {
    inner: crate::Mutex<S>,
    runtime: Arc<OwnedRuntime>,
}

impl<S: Pass + WakeUps> Mutex<S> {
    /// The same lock with another [`Lease`] (see [`crate::Mutex::with_lease`]).
    ///
    /// ```no_run
    /// # fn demo(mutex: latchkey::blocking::Mutex) -> latchkey::Result<()> {
    /// let mutex = mutex.with_lease(latchkey::Lease::renewed(std::time::Duration::from_secs(10))?);
    /// # Ok(()) }
    /// ```
    pub fn with_lease(mut self, lease: Lease) -> Self {
        self.inner = self.inner.with_lease(lease);
        self
    }

    /// The same lock with another [`Fairness`] (see [`crate::Mutex::with_fairness`]).
    ///
    /// ```no_run
    /// # fn demo(mutex: latchkey::blocking::Mutex) {
    /// let mutex = mutex.with_fairness(latchkey::Fairness::Fair);
    /// # }
    /// ```
    pub fn with_fairness(mut self, fairness: Fairness) -> Self {
        self.inner = self.inner.with_fairness(fairness);
        self
    }

    /// The same lock with another [`Fencing`](crate::Fencing) (see
    /// [`crate::Mutex::with_fencing`]).
    ///
    /// ```no_run
    /// # fn demo(mutex: latchkey::blocking::Mutex) {
    /// let mutex = mutex.with_fencing(latchkey::Fencing::OnGrant);
    /// # }
    /// ```
    pub fn with_fencing(mut self, fencing: crate::Fencing) -> Self {
        self.inner = self.inner.with_fencing(fencing);
        self
    }

    /// How long a dead waiter keeps its place (see [`crate::Mutex::with_waiter_lease`]).
    ///
    /// ```no_run
    /// # fn demo(mutex: latchkey::blocking::Mutex) -> latchkey::Result<()> {
    /// let mutex = mutex.with_waiter_lease(latchkey::Ttl::new(std::time::Duration::from_secs(10))?);
    /// # Ok(()) }
    /// ```
    pub fn with_waiter_lease(mut self, lease: Ttl) -> Self {
        self.inner = self.inner.with_waiter_lease(lease);
        self
    }

    /// The lock's Redis key.
    ///
    /// ```no_run
    /// # fn demo(mutex: latchkey::blocking::Mutex) {
    /// println!("{}", mutex.key());
    /// # }
    /// ```
    pub fn key(&self) -> &LockKey {
        self.inner.key()
    }

    /// The lease each acquisition gets.
    ///
    /// ```no_run
    /// # fn demo(mutex: latchkey::blocking::Mutex) {
    /// println!("{:?}", mutex.lease().ttl());
    /// # }
    /// ```
    pub fn lease(&self) -> Lease {
        self.inner.lease()
    }

    /// Whether the lock is plain or fair.
    ///
    /// ```no_run
    /// # fn demo(mutex: latchkey::blocking::Mutex) {
    /// println!("{:?}", mutex.fairness());
    /// # }
    /// ```
    pub fn fairness(&self) -> Fairness {
        self.inner.fairness()
    }

    /// Takes the lock if it is free (see [`crate::Mutex::try_lock`]).
    ///
    /// # Errors
    ///
    /// As [`crate::Mutex::try_lock`]: [`Error::Busy`] if it is held,
    /// [`Error::Unreachable`] and the errors a reply can carry; and [`Error::Runtime`].
    ///
    /// ```no_run
    /// # fn demo(mutex: latchkey::blocking::Mutex) -> latchkey::Result<()> {
    /// match mutex.try_lock() {
    ///     Ok(guard) => { guard.release()?; }
    ///     Err(latchkey::Error::Busy { .. }) => println!("busy"),
    ///     Err(other) => return Err(other),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_lock(&self) -> Result<MutexGuard<S>> {
        acquire(&self.runtime, self.inner.try_lock())
    }

    /// Blocks until the lock is ours (see [`crate::Mutex::lock`]). Nothing can
    /// interrupt it: prefer [`lock_timeout`](Self::lock_timeout).
    ///
    /// # Errors
    ///
    /// As [`crate::Mutex::lock`]: only errors retrying cannot fix (credentials, ACL,
    /// a key of another type …); and [`Error::Runtime`].
    ///
    /// ```no_run
    /// # fn demo(mutex: latchkey::blocking::Mutex) -> latchkey::Result<()> {
    /// let guard = mutex.lock()?;
    /// # Ok(()) }
    /// ```
    pub fn lock(&self) -> Result<MutexGuard<S>> {
        acquire(&self.runtime, self.inner.lock())
    }

    /// Blocks at most `wait` for the lock (see [`crate::Mutex::lock_timeout`]).
    ///
    /// # Errors
    ///
    /// As [`crate::Mutex::lock_timeout`]: [`Error::Busy`] if it stayed held, the last
    /// transient error if Redis could not be reached as the wait ran out, at once the
    /// errors retrying cannot fix; and [`Error::Runtime`].
    ///
    /// ```no_run
    /// # fn demo(mutex: latchkey::blocking::Mutex) -> latchkey::Result<()> {
    /// let guard = mutex.lock_timeout(std::time::Duration::from_secs(10))?;
    /// # Ok(()) }
    /// ```
    pub fn lock_timeout(&self, wait: Duration) -> Result<MutexGuard<S>> {
        acquire(&self.runtime, self.inner.lock_timeout(wait))
    }

    /// Runs `work` under the lock and releases it after. Unlike the async
    /// [`crate::Mutex::with_lock`], `work` is not cancelled when the lease is lost:
    /// check [`MutexGuard::is_lost`] between its steps.
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock); [`Error::LeaseLost`] if the lease was lost before
    /// `work` returned or the release found the lock no longer ours (its result is
    /// dropped: it ran unprotected); the release's errors, with the result dropped.
    ///
    /// ```no_run
    /// # fn demo(mutex: latchkey::blocking::Mutex) -> latchkey::Result<()> {
    /// let fence = mutex.with_lock(|guard| guard.fence())??;
    /// # Ok(()) }
    /// ```
    pub fn with_lock<T>(&self, work: impl FnOnce(&MutexGuard<S>) -> T) -> Result<T> {
        let guard = self.lock()?;
        let value = work(&guard);
        let error = guard.inner().lost_error();
        if guard.is_lost() || !guard.release()? {
            return Err(error);
        }
        Ok(value)
    }

    /// Whether anybody (latchkey or another library) holds the lock right now (see
    /// [`crate::Mutex::is_locked`]).
    ///
    /// # Errors
    ///
    /// As [`crate::Mutex::is_locked`], and [`Error::Runtime`].
    ///
    /// ```no_run
    /// # fn demo(mutex: latchkey::blocking::Mutex) -> latchkey::Result<()> {
    /// if mutex.is_locked()? { println!("busy"); }
    /// # Ok(()) }
    /// ```
    pub fn is_locked(&self) -> Result<bool> {
        block_on(&self.runtime, self.inner.is_locked())?
    }

    /// Takes over a detached hold (see [`crate::Mutex::adopt`]).
    ///
    /// # Errors
    ///
    /// As [`crate::Mutex::adopt`]: [`Error::LeaseLost`] if the token no longer
    /// holds the lock, the errors a reply can carry; and [`Error::Runtime`].
    ///
    /// ```no_run
    /// # fn demo(mutex: latchkey::blocking::Mutex, token: latchkey::HoldToken) -> latchkey::Result<()> {
    /// let guard = mutex.adopt(&token)?;
    /// # Ok(()) }
    /// ```
    pub fn adopt(&self, token: &HoldToken) -> Result<MutexGuard<S>> {
        acquire(&self.runtime, self.inner.adopt(token))
    }

    /// Resets a detached hold's lease (see [`crate::Mutex::extend_held`]).
    ///
    /// # Errors
    ///
    /// As [`crate::Mutex::extend_held`], and [`Error::Runtime`].
    ///
    /// ```no_run
    /// # fn demo(mutex: latchkey::blocking::Mutex, token: latchkey::HoldToken) -> latchkey::Result<()> {
    /// mutex.extend_held(&token, std::time::Duration::from_secs(60))?;
    /// # Ok(()) }
    /// ```
    pub fn extend_held(&self, token: &HoldToken, ttl: Duration) -> Result<()> {
        block_on(&self.runtime, self.inner.extend_held(token, ttl))?
    }

    /// Releases a detached hold (see [`crate::Mutex::release_held`]).
    ///
    /// # Errors
    ///
    /// As [`crate::Mutex::release_held`], and [`Error::Runtime`].
    ///
    /// ```no_run
    /// # fn demo(mutex: latchkey::blocking::Mutex, token: latchkey::HoldToken) -> latchkey::Result<()> {
    /// assert!(mutex.release_held(&token)?);
    /// # Ok(()) }
    /// ```
    pub fn release_held(&self, token: &HoldToken) -> Result<bool> {
        block_on(&self.runtime, self.inner.release_held(token))?
    }
}

impl<S: Pass + WakeUps + Inspect> Mutex<S> {
    /// Holder (mask it before display), remaining lease, last fence, waiters (see
    /// [`crate::Mutex::status`]).
    ///
    /// # Errors
    ///
    /// As [`crate::Mutex::status`]: [`Error::WrongType`] if the key is not a lock,
    /// the errors a reply can carry; and [`Error::Runtime`].
    ///
    /// ```no_run
    /// # fn demo(mutex: latchkey::blocking::Mutex) -> latchkey::Result<()> {
    /// println!("{} waiting", mutex.status()?.waiters);
    /// # Ok(()) }
    /// ```
    pub fn status(&self) -> Result<LockStatus> {
        block_on(&self.runtime, self.inner.status())?
    }

    /// Breaks the lock whoever holds it (see [`crate::Mutex::force_release`]).
    ///
    /// # Errors
    ///
    /// As [`crate::Mutex::force_release`]: [`Error::Busy`] if the lock kept changing
    /// hands, the errors a reply can carry; and [`Error::Runtime`].
    ///
    /// ```no_run
    /// # fn demo(mutex: latchkey::blocking::Mutex) -> latchkey::Result<()> {
    /// if let Some(was) = mutex.force_release()? {
    ///     println!("broke the lock of {:?}", was.masked_holder());
    /// }
    /// # Ok(()) }
    /// ```
    pub fn force_release(&self) -> Result<Option<LockStatus>> {
        block_on(&self.runtime, self.inner.force_release())?
    }
}

/// Blocks on `acquisition`, an async acquire, and wraps the guard it returns.
fn acquire<S: Pass + WakeUps>(
    runtime: &Arc<OwnedRuntime>,
    acquisition: impl Future<Output = Result<crate::MutexGuard<S>>> + Send,
) -> Result<MutexGuard<S>> {
    Ok(MutexGuard {
        inner: Some(block_on(runtime, acquisition)??),
        runtime: runtime.clone(),
    })
}

/// Blocking twin of [`crate::MutexGuard`]. Dropping it releases the lock before
/// the drop returns. Over a semaphore's store it is a [`SemaphorePermit`].
///
/// ```no_run
/// # fn demo(mutex: latchkey::blocking::Mutex) -> latchkey::Result<()> {
/// let guard = mutex.lock()?;
/// guard.extend(std::time::Duration::from_secs(30))?;
/// assert!(guard.release()?);
/// # Ok(()) }
/// ```
#[derive(Debug)]
#[must_use = "dropping the guard releases the lock at once"]
pub struct MutexGuard<S: Pass + WakeUps = RedisStore> {
    // `Some` for the guard's whole life: only `release` and `drop` take it, and
    // neither leaves a guard behind.
    inner: Option<crate::MutexGuard<S>>,
    runtime: Arc<OwnedRuntime>,
}

impl<S: Pass + WakeUps> MutexGuard<S> {
    fn inner(&self) -> &crate::MutexGuard<S> {
        self.inner
            .as_ref()
            .expect("a blocking guard holds its async guard until released or dropped")
    }

    /// Takes the lock again through this guard (see [`crate::MutexGuard::reenter`]).
    ///
    /// ```no_run
    /// # fn demo(mutex: latchkey::blocking::Mutex) -> latchkey::Result<()> {
    /// let outer = mutex.lock()?;
    /// let inner = outer.reenter();
    /// assert_eq!(outer.hold_count(), 2);
    /// # Ok(()) }
    /// ```
    pub fn reenter(&self) -> Self {
        MutexGuard {
            inner: Some(self.inner().reenter()),
            runtime: self.runtime.clone(),
        }
    }

    /// How many guards hold this acquisition (1 unless re-entered).
    ///
    /// ```no_run
    /// # fn demo(guard: latchkey::blocking::MutexGuard) {
    /// assert_eq!(guard.hold_count(), 1);
    /// # }
    /// ```
    pub fn hold_count(&self) -> usize {
        self.inner().hold_count()
    }

    /// The fencing token (see [`crate::MutexGuard::fence`]): computed in one round
    /// trip the first time it is asked for, unless the grant brought it.
    ///
    /// # Errors
    ///
    /// As [`crate::MutexGuard::fence`], and [`Error::Runtime`].
    ///
    /// ```no_run
    /// # fn demo(guard: latchkey::blocking::MutexGuard) -> latchkey::Result<()> {
    /// println!("write with fence {}", guard.fence()?);
    /// # Ok(()) }
    /// ```
    pub fn fence(&self) -> Result<u64> {
        block_on(&self.runtime, self.inner().fence())?
    }

    /// The fencing token if it is known already, without a round trip (see
    /// [`crate::MutexGuard::known_fence`]).
    ///
    /// ```no_run
    /// # fn demo(guard: latchkey::blocking::MutexGuard) {
    /// println!("{:?}", guard.known_fence());
    /// # }
    /// ```
    pub fn known_fence(&self) -> Option<u64> {
        self.inner().known_fence()
    }

    /// How many replicas confirmed the grant, when the client waits for replicas
    /// (see [`crate::MutexGuard::replicas`]); `None` otherwise.
    ///
    /// ```no_run
    /// # fn demo(guard: latchkey::blocking::MutexGuard) {
    /// println!("{:?} replicas have it", guard.replicas());
    /// # }
    /// ```
    pub fn replicas(&self) -> Option<u32> {
        self.inner().replicas()
    }

    /// The lock's Redis key.
    ///
    /// ```no_run
    /// # fn demo(guard: latchkey::blocking::MutexGuard) {
    /// println!("{}", guard.key());
    /// # }
    /// ```
    pub fn key(&self) -> &LockKey {
        self.inner().key()
    }

    /// This holder's owner token (its `Debug` output is masked).
    ///
    /// ```no_run
    /// # fn demo(guard: latchkey::blocking::MutexGuard) {
    /// println!("{:?}", guard.owner());
    /// # }
    /// ```
    pub fn owner(&self) -> &OwnerToken {
        self.inner().owner()
    }

    /// Whether the lease is known lost or has run out by our clock.
    ///
    /// ```no_run
    /// # fn demo(guard: latchkey::blocking::MutexGuard) {
    /// if guard.is_lost() { eprintln!("stop: the lock no longer protects us"); }
    /// # }
    /// ```
    pub fn is_lost(&self) -> bool {
        self.inner().is_lost()
    }

    /// Whether the hold reached the limit its lease set
    /// ([`Lease::with_max_hold`](crate::Lease::with_max_hold)); then
    /// [`is_lost`](Self::is_lost) is true too.
    ///
    /// ```no_run
    /// # fn demo(guard: latchkey::blocking::MutexGuard) {
    /// if guard.hold_limit_reached() { eprintln!("held too long: stop"); }
    /// # }
    /// ```
    pub fn hold_limit_reached(&self) -> bool {
        self.inner().hold_limit_reached()
    }

    /// The `lost` signal as a token another thread can check or wait on (see
    /// [`crate::MutexGuard::lost_token`]).
    ///
    /// It is cancelled as the async guard's is: when the lease runs out by our clock
    /// (a fixed lease) or a renewal finds the lock gone.
    ///
    /// ```no_run
    /// # fn demo(guard: latchkey::blocking::MutexGuard) {
    /// let lost = guard.lost_token();
    /// std::thread::spawn(move || while !lost.is_cancelled() { /* work */ });
    /// # }
    /// ```
    pub fn lost_token(&self) -> CancellationToken {
        // A fixed lease's expiry is watched by a task: start it on our runtime, whatever
        // thread this is (a plain one has no runtime of its own).
        let _entered = self.runtime.0.as_ref().map(Runtime::enter);
        self.inner().lost_token()
    }

    /// How much longer the lease surely lasts, by our clock.
    ///
    /// ```no_run
    /// # fn demo(guard: latchkey::blocking::MutexGuard) {
    /// println!("{:?} left", guard.validity());
    /// # }
    /// ```
    pub fn validity(&self) -> Duration {
        self.inner().validity()
    }

    /// The instant until which the lease surely lasts, by our clock.
    ///
    /// ```no_run
    /// # fn demo(guard: latchkey::blocking::MutexGuard) {
    /// assert!(guard.valid_until() > std::time::Instant::now());
    /// # }
    /// ```
    pub fn valid_until(&self) -> Instant {
        self.inner().valid_until()
    }

    /// Resets the lease to `ttl` from now (see [`crate::MutexGuard::extend`]; with a
    /// renewed lease, the watchdog's next renewal resets it again).
    ///
    /// # Errors
    ///
    /// As [`crate::MutexGuard::extend`]: [`Error::LeaseLost`] if the lock is gone;
    /// [`Error::InvalidArgument`] for a `ttl` below 1 ms or above ten years; the
    /// errors a reply can carry, after which the lease may or may not have been
    /// reset; and [`Error::Runtime`].
    ///
    /// ```no_run
    /// # fn demo(guard: latchkey::blocking::MutexGuard) -> latchkey::Result<()> {
    /// guard.extend(std::time::Duration::from_secs(30))?;
    /// # Ok(()) }
    /// ```
    pub fn extend(&self, ttl: Duration) -> Result<()> {
        block_on(&self.runtime, self.inner().extend(ttl))?
    }

    /// Asks Redis whether the lock is still ours (see
    /// [`crate::MutexGuard::is_held`]).
    ///
    /// # Errors
    ///
    /// As [`crate::MutexGuard::is_held`], and [`Error::Runtime`].
    ///
    /// ```no_run
    /// # fn demo(guard: latchkey::blocking::MutexGuard) -> latchkey::Result<()> {
    /// assert!(guard.is_held()?);
    /// # Ok(()) }
    /// ```
    pub fn is_held(&self) -> Result<bool> {
        block_on(&self.runtime, self.inner().is_held())?
    }

    /// Frees the lock; `Ok(true)` when it was still ours (see
    /// [`crate::MutexGuard::release`]).
    ///
    /// # Errors
    ///
    /// As [`crate::MutexGuard::release`], and [`Error::Runtime`]. The lock is then
    /// still released: a second try runs in the background on the client's runtime,
    /// and if that fails too the lock frees itself when its lease ends.
    ///
    /// ```no_run
    /// # fn demo(guard: latchkey::blocking::MutexGuard) -> latchkey::Result<()> {
    /// if !guard.release()? { eprintln!("the lease had run out"); }
    /// # Ok(()) }
    /// ```
    pub fn release(mut self) -> Result<bool> {
        let Some(guard) = self.inner.take() else {
            return Ok(false);
        };
        block_on(&self.runtime, guard.release())?
    }

    /// Hands the hold off without releasing it (see [`crate::MutexGuard::detach`]).
    ///
    /// # Errors
    ///
    /// As [`crate::MutexGuard::detach`].
    ///
    /// ```no_run
    /// # fn demo(guard: latchkey::blocking::MutexGuard) -> latchkey::Result<()> {
    /// let token = guard.detach()?;
    /// # Ok(()) }
    /// ```
    pub fn detach(mut self) -> Result<HoldToken> {
        let Some(guard) = self.inner.take() else {
            return Err(Error::InvalidArgument(
                "the guard was already released".to_owned(),
            ));
        };
        guard.detach()
    }
}

impl<S: Pass + WakeUps> Drop for MutexGuard<S> {
    fn drop(&mut self) {
        let Some(guard) = self.inner.take() else {
            return;
        };
        if let Ok(Err(error)) = block_on(&self.runtime, guard.release()) {
            tracing::warn!(%error, "could not release a dropped lock; it frees itself when its lease ends");
        }
    }
}

/// Permits held from a blocking [`Semaphore`] or [`RwLock`]: the blocking twin of
/// [`crate::SemaphorePermit`], a [`MutexGuard`] over the semaphore's store. Dropping
/// it gives the permits back before the drop returns.
///
/// ```no_run
/// # fn demo(client: latchkey::blocking::Client) -> latchkey::Result<()> {
/// let permit: latchkey::blocking::SemaphorePermit = client.semaphore("checkout", 3)?.acquire(1)?;
/// println!("checking out, fence {}", permit.fence()?);
/// permit.release()?;
/// # Ok(()) }
/// ```
pub type SemaphorePermit = MutexGuard<PermitStore>;

/// Blocking twin of [`crate::Semaphore`]: at most `permits` units held at once by
/// every process using the name.
///
/// ```no_run
/// # fn demo(client: latchkey::blocking::Client) -> latchkey::Result<()> {
/// let checkout = client.semaphore("flash-sale:checkout", 3)?;
/// let permit = checkout.acquire(1)?; // waits in line for one of 3
/// println!("{} free now", checkout.available()?);
/// drop(permit); // given back before the drop returns
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Semaphore {
    inner: crate::Semaphore,
    runtime: Arc<OwnedRuntime>,
}

impl Semaphore {
    /// Checks a permit count without a server (see
    /// [`crate::Semaphore::check_permits`]).
    ///
    /// # Errors
    ///
    /// As [`crate::Semaphore::check_permits`]: [`Error::InvalidArgument`] for 0 or
    /// more than 2^50.
    ///
    /// ```
    /// assert!(latchkey::blocking::Semaphore::check_permits(3).is_ok());
    /// assert!(latchkey::blocking::Semaphore::check_permits(0).is_err());
    /// ```
    pub fn check_permits(permits: u64) -> Result<()> {
        crate::Semaphore::check_permits(permits)
    }

    /// The same semaphore whose permits are held for `lease` (see
    /// [`crate::Semaphore::with_lease`]).
    ///
    /// ```no_run
    /// # fn demo(client: latchkey::blocking::Client) -> latchkey::Result<()> {
    /// use latchkey::Lease;
    /// let jobs = client.semaphore("jobs", 4)?.with_lease(Lease::renewed(std::time::Duration::from_secs(5))?);
    /// # Ok(()) }
    /// ```
    pub fn with_lease(mut self, lease: Lease) -> Self {
        self.inner = self.inner.with_lease(lease);
        self
    }

    /// The same semaphore with another waiter lease (see
    /// [`crate::Semaphore::with_waiter_lease`]).
    ///
    /// ```no_run
    /// # fn demo(client: latchkey::blocking::Client) -> latchkey::Result<()> {
    /// let lease = latchkey::Ttl::new(std::time::Duration::from_secs(3))?;
    /// let jobs = client.semaphore("jobs", 4)?.with_waiter_lease(lease);
    /// # Ok(()) }
    /// ```
    pub fn with_waiter_lease(mut self, lease: Ttl) -> Self {
        self.inner = self.inner.with_waiter_lease(lease);
        self
    }

    /// The same semaphore with another [`Fencing`](crate::Fencing) (see
    /// [`crate::Semaphore::with_fencing`]).
    ///
    /// ```no_run
    /// # fn demo(client: latchkey::blocking::Client) -> latchkey::Result<()> {
    /// let jobs = client.semaphore("jobs", 4)?.with_fencing(latchkey::Fencing::OnGrant);
    /// # Ok(()) }
    /// ```
    pub fn with_fencing(mut self, fencing: crate::Fencing) -> Self {
        self.inner = self.inner.with_fencing(fencing);
        self
    }

    /// The number of permits.
    ///
    /// ```no_run
    /// # fn demo(client: latchkey::blocking::Client) -> latchkey::Result<()> {
    /// assert_eq!(client.semaphore("jobs", 4)?.permits(), 4);
    /// # Ok(()) }
    /// ```
    pub fn permits(&self) -> u64 {
        self.inner.permits()
    }

    /// Blocks until `weight` permits are ours, waiting in line (see
    /// [`crate::Semaphore::acquire`]). Nothing can interrupt it: prefer
    /// [`acquire_timeout`](Self::acquire_timeout).
    ///
    /// # Errors
    ///
    /// As [`crate::Semaphore::acquire`]: [`Error::InvalidArgument`] for a weight of 0
    /// or above the permits, only errors retrying cannot fix otherwise; and
    /// [`Error::Runtime`].
    ///
    /// ```no_run
    /// # fn demo(pool: latchkey::blocking::Semaphore) -> latchkey::Result<()> {
    /// let permit = pool.acquire(2)?;
    /// # Ok(()) }
    /// ```
    pub fn acquire(&self, weight: u64) -> Result<SemaphorePermit> {
        acquire(&self.runtime, self.inner.acquire(weight))
    }

    /// Blocks at most `wait` for `weight` permits (see
    /// [`crate::Semaphore::acquire_timeout`]).
    ///
    /// # Errors
    ///
    /// As [`crate::Semaphore::acquire_timeout`]: [`Error::Busy`] if none came in
    /// time, otherwise as [`acquire`](Self::acquire).
    ///
    /// ```no_run
    /// # fn demo(pool: latchkey::blocking::Semaphore) -> latchkey::Result<()> {
    /// let permit = pool.acquire_timeout(1, std::time::Duration::from_secs(5))?;
    /// # Ok(()) }
    /// ```
    pub fn acquire_timeout(&self, weight: u64, wait: Duration) -> Result<SemaphorePermit> {
        acquire(&self.runtime, self.inner.acquire_timeout(weight, wait))
    }

    /// Takes `weight` permits if they are free now and nobody waits ahead, in one
    /// round trip (see [`crate::Semaphore::try_acquire`]).
    ///
    /// # Errors
    ///
    /// As [`crate::Semaphore::try_acquire`]: [`Error::Busy`] if not, otherwise as
    /// [`acquire`](Self::acquire).
    ///
    /// ```no_run
    /// # fn demo(pool: latchkey::blocking::Semaphore) -> latchkey::Result<()> {
    /// match pool.try_acquire(1) {
    ///     Ok(permit) => println!("in, fence {}", permit.fence()?),
    ///     Err(latchkey::Error::Busy { .. }) => println!("full"),
    ///     Err(other) => return Err(other),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_acquire(&self, weight: u64) -> Result<SemaphorePermit> {
        acquire(&self.runtime, self.inner.try_acquire(weight))
    }

    /// Permits free now, counting the leases live at the server's time of reading
    /// (see [`crate::Semaphore::available`]).
    ///
    /// # Errors
    ///
    /// As [`crate::Semaphore::available`], and [`Error::Runtime`].
    ///
    /// ```no_run
    /// # fn demo(pool: latchkey::blocking::Semaphore) -> latchkey::Result<()> {
    /// println!("{} of {} free", pool.available()?, pool.permits());
    /// # Ok(()) }
    /// ```
    pub fn available(&self) -> Result<u64> {
        block_on(&self.runtime, self.inner.available())?
    }

    /// Waiters in line now (see [`crate::Semaphore::waiting`]).
    ///
    /// # Errors
    ///
    /// As [`crate::Semaphore::waiting`], and [`Error::Runtime`].
    ///
    /// ```no_run
    /// # fn demo(pool: latchkey::blocking::Semaphore) -> latchkey::Result<()> {
    /// println!("{} waiting", pool.waiting()?);
    /// # Ok(()) }
    /// ```
    pub fn waiting(&self) -> Result<u64> {
        block_on(&self.runtime, self.inner.waiting())?
    }
}

/// Blocking twin of [`crate::RwLock`]: any number of readers at once, or one
/// writer, writers first. Read and write guards are [`SemaphorePermit`]s.
///
/// ```no_run
/// # fn demo(client: latchkey::blocking::Client) -> latchkey::Result<()> {
/// let config = client.rw_lock("config")?;
/// {
///     let read = config.read()?; // shared with other readers
///     println!("reading under fence {}", read.fence()?);
/// }
/// let write = config.write()?; // alone
/// write.release()?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct RwLock {
    inner: crate::RwLock,
    runtime: Arc<OwnedRuntime>,
}

impl RwLock {
    /// The same lock with another [`Lease`] for every guard (see
    /// [`crate::RwLock::with_lease`]).
    ///
    /// ```no_run
    /// # fn demo(client: latchkey::blocking::Client) -> latchkey::Result<()> {
    /// let config = client.rw_lock("config")?.with_lease(latchkey::Lease::renewed(std::time::Duration::from_secs(5))?);
    /// # Ok(()) }
    /// ```
    pub fn with_lease(mut self, lease: Lease) -> Self {
        self.inner = self.inner.with_lease(lease);
        self
    }

    /// The same lock with another waiter lease (see
    /// [`crate::RwLock::with_waiter_lease`]).
    ///
    /// ```no_run
    /// # fn demo(client: latchkey::blocking::Client) -> latchkey::Result<()> {
    /// let lease = latchkey::Ttl::new(std::time::Duration::from_secs(3))?;
    /// let config = client.rw_lock("config")?.with_waiter_lease(lease);
    /// # Ok(()) }
    /// ```
    pub fn with_waiter_lease(mut self, lease: Ttl) -> Self {
        self.inner = self.inner.with_waiter_lease(lease);
        self
    }

    /// The same lock with another [`Fencing`](crate::Fencing) (see
    /// [`crate::RwLock::with_fencing`]).
    ///
    /// ```no_run
    /// # fn demo(client: latchkey::blocking::Client) -> latchkey::Result<()> {
    /// let config = client.rw_lock("config")?.with_fencing(latchkey::Fencing::OnGrant);
    /// # Ok(()) }
    /// ```
    pub fn with_fencing(mut self, fencing: crate::Fencing) -> Self {
        self.inner = self.inner.with_fencing(fencing);
        self
    }

    /// Blocks until a read guard is ours, behind a writer that holds or waits (see
    /// [`crate::RwLock::read`]). Nothing can interrupt it: prefer
    /// [`read_timeout`](Self::read_timeout).
    ///
    /// # Errors
    ///
    /// As [`crate::RwLock::read`], and [`Error::Runtime`].
    ///
    /// ```no_run
    /// # fn demo(config: latchkey::blocking::RwLock) -> latchkey::Result<()> {
    /// let read = config.read()?;
    /// # Ok(()) }
    /// ```
    pub fn read(&self) -> Result<SemaphorePermit> {
        acquire(&self.runtime, self.inner.read())
    }

    /// Blocks until the write guard is ours: until every reader and writer ahead of
    /// it is done (see [`crate::RwLock::write`]). Nothing can interrupt it: prefer
    /// [`write_timeout`](Self::write_timeout).
    ///
    /// # Errors
    ///
    /// As [`crate::RwLock::write`], and [`Error::Runtime`].
    ///
    /// ```no_run
    /// # fn demo(config: latchkey::blocking::RwLock) -> latchkey::Result<()> {
    /// let write = config.write()?;
    /// # Ok(()) }
    /// ```
    pub fn write(&self) -> Result<SemaphorePermit> {
        acquire(&self.runtime, self.inner.write())
    }

    /// [`read`](Self::read), blocking at most `wait` (see
    /// [`crate::RwLock::read_timeout`]).
    ///
    /// # Errors
    ///
    /// As [`crate::RwLock::read_timeout`]: [`Error::Busy`] if it did not come in
    /// time; and [`Error::Runtime`].
    ///
    /// ```no_run
    /// # fn demo(config: latchkey::blocking::RwLock) -> latchkey::Result<()> {
    /// let read = config.read_timeout(std::time::Duration::from_secs(1))?;
    /// # Ok(()) }
    /// ```
    pub fn read_timeout(&self, wait: Duration) -> Result<SemaphorePermit> {
        acquire(&self.runtime, self.inner.read_timeout(wait))
    }

    /// [`write`](Self::write), blocking at most `wait` (see
    /// [`crate::RwLock::write_timeout`]).
    ///
    /// # Errors
    ///
    /// As [`crate::RwLock::write_timeout`]: [`Error::Busy`] if it did not come in
    /// time; and [`Error::Runtime`].
    ///
    /// ```no_run
    /// # fn demo(config: latchkey::blocking::RwLock) -> latchkey::Result<()> {
    /// let write = config.write_timeout(std::time::Duration::from_secs(1))?;
    /// # Ok(()) }
    /// ```
    pub fn write_timeout(&self, wait: Duration) -> Result<SemaphorePermit> {
        acquire(&self.runtime, self.inner.write_timeout(wait))
    }

    /// A read guard if no writer holds or waits, in one round trip (see
    /// [`crate::RwLock::try_read`]).
    ///
    /// # Errors
    ///
    /// As [`crate::RwLock::try_read`]: [`Error::Busy`] if not; and
    /// [`Error::Runtime`].
    ///
    /// ```no_run
    /// # fn demo(config: latchkey::blocking::RwLock) -> latchkey::Result<()> {
    /// let read = config.try_read()?;
    /// # Ok(()) }
    /// ```
    pub fn try_read(&self) -> Result<SemaphorePermit> {
        acquire(&self.runtime, self.inner.try_read())
    }

    /// The write guard if nobody holds or waits, in one round trip (see
    /// [`crate::RwLock::try_write`]).
    ///
    /// # Errors
    ///
    /// As [`crate::RwLock::try_write`]: [`Error::Busy`] if not; and
    /// [`Error::Runtime`].
    ///
    /// ```no_run
    /// # fn demo(config: latchkey::blocking::RwLock) -> latchkey::Result<()> {
    /// let write = config.try_write()?;
    /// # Ok(()) }
    /// ```
    pub fn try_write(&self) -> Result<SemaphorePermit> {
        acquire(&self.runtime, self.inner.try_write())
    }

    /// Takes an upgradeable read (see [`crate::RwLock::upgradeable_read_timeout`]).
    ///
    /// # Errors
    ///
    /// As [`crate::RwLock::upgradeable_read_timeout`], and [`Error::Runtime`].
    ///
    /// ```no_run
    /// # fn demo(config: latchkey::blocking::RwLock) -> latchkey::Result<()> {
    /// let guard = config.upgradeable_read_timeout(std::time::Duration::from_secs(1))?;
    /// # Ok(()) }
    /// ```
    pub fn upgradeable_read_timeout(&self, wait: Duration) -> Result<UpgradeableRead> {
        let inner = block_on(&self.runtime, self.inner.upgradeable_read_timeout(wait))??;
        Ok(self.upgradeable(inner))
    }

    /// Takes an upgradeable read, blocking as long as it takes (see
    /// [`crate::RwLock::upgradeable_read`]).
    ///
    /// # Errors
    ///
    /// As [`crate::RwLock::upgradeable_read`], and [`Error::Runtime`].
    ///
    /// ```no_run
    /// # fn demo(config: latchkey::blocking::RwLock) -> latchkey::Result<()> {
    /// let guard = config.upgradeable_read()?;
    /// # Ok(()) }
    /// ```
    pub fn upgradeable_read(&self) -> Result<UpgradeableRead> {
        let inner = block_on(&self.runtime, self.inner.upgradeable_read())??;
        Ok(self.upgradeable(inner))
    }

    fn upgradeable(&self, inner: crate::UpgradeableRead) -> UpgradeableRead {
        UpgradeableRead {
            inner: Some(inner),
            runtime: self.runtime.clone(),
        }
    }

    /// Turns a write guard into a read guard with no writer in between (see
    /// [`crate::RwLock::downgrade`]).
    ///
    /// # Errors
    ///
    /// As [`crate::RwLock::downgrade`], and [`Error::Runtime`].
    ///
    /// ```no_run
    /// # fn demo(config: latchkey::blocking::RwLock) -> latchkey::Result<()> {
    /// let write = config.write()?;
    /// let read = config.downgrade(write)?;
    /// # Ok(()) }
    /// ```
    pub fn downgrade(&self, mut write: SemaphorePermit) -> Result<SemaphorePermit> {
        let Some(inner) = write.inner.take() else {
            return Err(Error::InvalidArgument(
                "the guard was already released".to_owned(),
            ));
        };
        acquire(&self.runtime, self.inner.downgrade(inner))
    }

    /// Readers holding the lock now, or [`u64::MAX`] while a writer holds it (see
    /// [`crate::RwLock::readers`]).
    ///
    /// # Errors
    ///
    /// As [`crate::RwLock::readers`], and [`Error::Runtime`].
    ///
    /// ```no_run
    /// # fn demo(config: latchkey::blocking::RwLock) -> latchkey::Result<()> {
    /// println!("{} readers", config.readers()?);
    /// # Ok(()) }
    /// ```
    pub fn readers(&self) -> Result<u64> {
        block_on(&self.runtime, self.inner.readers())?
    }

    /// Readers and writers waiting in line now (see [`crate::RwLock::waiting`]).
    ///
    /// # Errors
    ///
    /// As [`crate::RwLock::waiting`], and [`Error::Runtime`].
    ///
    /// ```no_run
    /// # fn demo(config: latchkey::blocking::RwLock) -> latchkey::Result<()> {
    /// println!("{} waiting", config.waiting()?);
    /// # Ok(()) }
    /// ```
    pub fn waiting(&self) -> Result<u64> {
        block_on(&self.runtime, self.inner.waiting())?
    }
}

/// The runtime a blocking client runs on.
///
/// tokio panics when a runtime is dropped inside an async context; this one shuts
/// down in the background instead, so dropping a blocking client anywhere is safe.
#[derive(Debug)]
struct OwnedRuntime(Option<Runtime>);

impl OwnedRuntime {
    fn start() -> Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("latchkey-blocking")
            .enable_all()
            .build()
            .map_err(|e| Error::Runtime(format!("could not start: {e}")))?;
        Ok(OwnedRuntime(Some(runtime)))
    }
}

impl Drop for OwnedRuntime {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

/// The URLs as owned strings, so a future that borrows them is `Send` whatever
/// the caller's string type.
fn owned(urls: &[impl AsRef<str>]) -> Vec<String> {
    urls.iter().map(|url| url.as_ref().to_owned()).collect()
}

/// Runs `future` on `runtime` and waits for it.
///
/// tokio's `block_on` panics on a thread that has entered a runtime (an async task,
/// or the thread of `spawn_blocking`); such a caller's future runs on a short-lived
/// thread of its own instead, which may block.
fn block_on<F>(runtime: &OwnedRuntime, future: F) -> Result<F::Output>
where
    F: Future + Send,
    F::Output: Send,
{
    let runtime = runtime
        .0
        .as_ref()
        .ok_or_else(|| Error::Runtime("it has shut down".to_owned()))?;
    if Handle::try_current().is_err() {
        return Ok(runtime.block_on(future));
    }
    std::thread::scope(|scope| {
        scope
            .spawn(|| runtime.block_on(future))
            .join()
            .map_err(|_| Error::Runtime("a blocking call panicked".to_owned()))
    })
}
