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
//! println!("fence {}", guard.fence());
//! guard.release()?;
//! # Ok::<(), latchkey::Error>(())
//! ```
//!
//! Every method of the async API is here, with the same name and meaning, except
//! where synchronous code cannot do the same thing:
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
//! - The store is always a [`RedisStore`](crate::store::RedisStore) opened by URL or
//!   from a redis-rs client.
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

use crate::error::{Error, Result};
use crate::key::{LockKey, Prefix};
use crate::lease::{Lease, Ttl};
use crate::lock::Fairness;
use crate::ratelimit::{Decision, Policy};
use crate::store::LockStatus;
use crate::token::OwnerToken;

/// Blocking twin of [`crate::Client`].
///
/// ```no_run
/// let client = latchkey::blocking::Client::open("redis://127.0.0.1:6379")?.with_prefix("app:")?;
/// # Ok::<(), latchkey::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Client {
    inner: crate::Client,
    runtime: Arc<OwnedRuntime>,
}

impl Client {
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
        let runtime = Arc::new(OwnedRuntime::start()?);
        let inner = block_on(&runtime, crate::Client::open(url))??;
        Ok(Client { inner, runtime })
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
        let runtime = Arc::new(OwnedRuntime::start()?);
        let inner = block_on(&runtime, crate::Client::from_redis_client(client))??;
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
    pub fn mutex(&self, name: &str) -> Result<Mutex> {
        Ok(Mutex {
            inner: self.inner.mutex(name)?,
            runtime: self.runtime.clone(),
        })
    }

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
pub struct Mutex {
    inner: crate::Mutex,
    runtime: Arc<OwnedRuntime>,
}

impl Mutex {
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
    pub fn try_lock(&self) -> Result<MutexGuard> {
        self.guard(block_on(&self.runtime, self.inner.try_lock())?)
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
    pub fn lock(&self) -> Result<MutexGuard> {
        self.guard(block_on(&self.runtime, self.inner.lock())?)
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
    pub fn lock_timeout(&self, wait: Duration) -> Result<MutexGuard> {
        self.guard(block_on(&self.runtime, self.inner.lock_timeout(wait))?)
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
    /// let fence = mutex.with_lock(|guard| guard.fence())?;
    /// # Ok(()) }
    /// ```
    pub fn with_lock<T>(&self, work: impl FnOnce(&MutexGuard) -> T) -> Result<T> {
        let guard = self.lock()?;
        let value = work(&guard);
        if guard.is_lost() || !guard.release()? {
            return Err(Error::LeaseLost {
                key: self.key().to_string(),
            });
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

    fn guard(&self, taken: Result<crate::MutexGuard>) -> Result<MutexGuard> {
        Ok(MutexGuard {
            inner: Some(taken?),
            runtime: self.runtime.clone(),
        })
    }
}

/// Blocking twin of [`crate::MutexGuard`]. Dropping it releases the lock before
/// the drop returns.
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
pub struct MutexGuard {
    // `Some` for the guard's whole life: only `release` and `drop` take it, and
    // neither leaves a guard behind.
    inner: Option<crate::MutexGuard>,
    runtime: Arc<OwnedRuntime>,
}

impl MutexGuard {
    fn inner(&self) -> &crate::MutexGuard {
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

    /// The fencing token (see [`crate::MutexGuard::fence`]).
    ///
    /// ```no_run
    /// # fn demo(guard: latchkey::blocking::MutexGuard) {
    /// println!("write with fence {}", guard.fence());
    /// # }
    /// ```
    pub fn fence(&self) -> u64 {
        self.inner().fence()
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
}

impl Drop for MutexGuard {
    fn drop(&mut self) {
        let Some(guard) = self.inner.take() else {
            return;
        };
        if let Ok(Err(error)) = block_on(&self.runtime, guard.release()) {
            tracing::warn!(%error, "could not release a dropped lock; it frees itself when its lease ends");
        }
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
