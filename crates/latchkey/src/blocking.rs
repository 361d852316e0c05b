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

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::runtime::{Handle, Runtime};

use crate::error::{Error, Result};
use crate::key::LockKey;
use crate::lock::LockStatus;

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
    /// Connects to one Redis server by URL.
    pub fn open(url: &str) -> Result<Self> {
        let runtime = Arc::new(OwnedRuntime::start()?);
        let inner = block_on(&runtime, crate::Client::open(url))??;
        Ok(Client { inner, runtime })
    }

    /// The same client with every lock name prefixed by `prefix`.
    pub fn with_prefix(mut self, prefix: &str) -> Result<Self> {
        self.inner = self.inner.with_prefix(prefix)?;
        Ok(self)
    }

    /// A handle to the lock called `name`.
    pub fn mutex(&self, name: &str) -> Result<Mutex> {
        Ok(Mutex {
            inner: self.inner.mutex(name)?,
            runtime: self.runtime.clone(),
        })
    }
}

/// Blocking twin of [`crate::Mutex`].
///
/// ```no_run
/// # fn demo(client: latchkey::blocking::Client) -> latchkey::Result<()> {
/// let mutex = client.mutex("cart:1")?.with_ttl(std::time::Duration::from_secs(5))?;
/// let guard = mutex.try_lock()?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Mutex {
    inner: crate::Mutex,
    runtime: Arc<OwnedRuntime>,
}

impl Mutex {
    /// The same lock with another lease length.
    pub fn with_ttl(mut self, ttl: Duration) -> Result<Self> {
        self.inner = self.inner.with_ttl(ttl)?;
        Ok(self)
    }

    /// The same lock with a lease renewed in the background every `ttl / 3`.
    pub fn with_watchdog(mut self, ttl: Duration) -> Result<Self> {
        self.inner = self.inner.with_watchdog(ttl)?;
        Ok(self)
    }

    /// The same lock, strictly FIFO across processes.
    pub fn fair(mut self) -> Self {
        self.inner = self.inner.fair();
        self
    }

    /// The lock's Redis key.
    pub fn key(&self) -> &LockKey {
        self.inner.key()
    }

    /// Holder (mask it before display), remaining lease, last fence, waiters.
    pub fn status(&self) -> Result<LockStatus> {
        block_on(&self.runtime, self.inner.status())?
    }

    /// Takes the lock if it is free; [`Error::Busy`] if not.
    pub fn try_lock(&self) -> Result<MutexGuard> {
        self.guard(block_on(&self.runtime, self.inner.try_lock())?)
    }

    /// Blocks until the lock is ours.
    pub fn lock(&self) -> Result<MutexGuard> {
        self.guard(block_on(&self.runtime, self.inner.lock())?)
    }

    /// Blocks at most `wait` for the lock.
    pub fn lock_timeout(&self, wait: Duration) -> Result<MutexGuard> {
        self.guard(block_on(&self.runtime, self.inner.lock_timeout(wait))?)
    }

    /// Whether anybody holds the lock right now.
    pub fn is_locked(&self) -> Result<bool> {
        block_on(&self.runtime, self.inner.is_locked())?
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
    // Always `Some` until `release` or `drop` takes it.
    inner: Option<crate::MutexGuard>,
    runtime: Arc<OwnedRuntime>,
}

impl MutexGuard {
    /// The fencing token (see [`crate::MutexGuard::fence`]).
    pub fn fence(&self) -> u64 {
        self.inner.as_ref().map_or(0, crate::MutexGuard::fence)
    }

    /// Whether the lease is known lost or has run out by our clock.
    pub fn is_lost(&self) -> bool {
        self.inner.as_ref().is_none_or(crate::MutexGuard::is_lost)
    }

    /// How much longer the lease surely lasts, by our clock.
    pub fn validity(&self) -> Duration {
        self.inner
            .as_ref()
            .map_or(Duration::ZERO, crate::MutexGuard::validity)
    }

    /// Resets the lease to `ttl`; [`Error::LeaseLost`] if the lock is gone.
    pub fn extend(&self, ttl: Duration) -> Result<()> {
        let guard = self.inner.as_ref().ok_or_else(released)?;
        block_on(&self.runtime, guard.extend(ttl))?
    }

    /// Asks Redis whether the lock is still ours.
    pub fn is_held(&self) -> Result<bool> {
        let guard = self.inner.as_ref().ok_or_else(released)?;
        block_on(&self.runtime, guard.is_held())?
    }

    /// Frees the lock; `Ok(true)` when it was still ours.
    pub fn release(mut self) -> Result<bool> {
        let guard = self.inner.take().ok_or_else(released)?;
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
            .map_err(|e| {
                Error::InvalidArgument(format!("could not start latchkey's runtime: {e}"))
            })?;
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
    let runtime = runtime.0.as_ref().ok_or_else(|| {
        Error::InvalidArgument("latchkey's blocking runtime has shut down".to_owned())
    })?;
    if Handle::try_current().is_err() {
        return Ok(runtime.block_on(future));
    }
    std::thread::scope(|scope| {
        scope
            .spawn(|| runtime.block_on(future))
            .join()
            .map_err(|_| Error::InvalidArgument("a latchkey blocking call panicked".to_owned()))
    })
}

fn released() -> Error {
    Error::InvalidArgument("the guard was already released".to_owned())
}
