//! The handle to one named lock.

use std::time::{Duration, Instant};

use super::backoff::Backoff;
use super::guard::MutexGuard;
use super::release_on_drop::ReleaseOnDrop;
use crate::error::{Error, Result};
use crate::key::LockKey;
use crate::lease::Ttl;
use crate::store::{Attempt, LockStore, SingleNode};
use crate::token::OwnerToken;

/// A distributed mutex: a handle to one named lock, cheap to clone.
///
/// Like `tokio::sync::Mutex`, taking it returns a guard whose life is the critical
/// section. Unlike an in-process mutex, the hold is a *lease*: Redis frees the lock
/// when the TTL ends, so a crashed holder cannot block everybody forever.
///
/// ```no_run
/// use std::time::Duration;
///
/// # async fn demo() -> latchkey::Result<()> {
/// let client = latchkey::Client::open("redis://127.0.0.1:6379").await?;
/// let mutex = client.mutex("reports:nightly")?.with_ttl(Duration::from_secs(60))?;
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
    ttl: Ttl,
}

impl<S: LockStore> Mutex<S> {
    /// A handle to the lock at `key` with the default lease ([`Ttl::DEFAULT`]).
    /// Usually made by [`Client::mutex`](crate::Client::mutex).
    pub fn new(store: S, key: LockKey) -> Self {
        Mutex {
            store,
            key,
            ttl: Ttl::DEFAULT,
        }
    }

    /// The same lock with another lease length.
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// let mutex = client.mutex("cart:42")?.with_ttl(std::time::Duration::from_millis(500))?;
    /// # Ok(()) }
    /// ```
    pub fn with_ttl(mut self, ttl: Duration) -> Result<Self> {
        self.ttl = Ttl::new(ttl)?;
        Ok(self)
    }

    /// The lock's Redis key.
    pub fn key(&self) -> &LockKey {
        &self.key
    }

    /// The lease each acquisition gets.
    pub fn ttl(&self) -> Ttl {
        self.ttl
    }

    /// Takes the lock if it is free, in one round trip; [`Error::Busy`] if not.
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
    /// Cancel-safe: dropping the future (for example under `tokio::time::timeout`)
    /// leaves no lock behind, even if the acquire had already reached Redis.
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
    /// stayed held. Cancel-safe like [`lock`](Self::lock).
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

    /// Attempts until the lock is ours or `deadline` passes, sleeping with backoff
    /// in between.
    async fn acquire(&self, deadline: Option<Instant>) -> Result<MutexGuard<S>> {
        let started = Instant::now();
        let owner = OwnerToken::generate()?;
        let mut hold = ReleaseOnDrop::new(self.store.clone(), self.key.clone(), owner);
        let mut backoff = Backoff::default();
        loop {
            // Armed while a request is in flight: if this future is dropped (or the
            // reply is lost) the SET may have landed, and the drop must undo it.
            hold.arm();
            let sent = Instant::now();
            let attempt = match self
                .store
                .try_acquire(&self.key, &hold.owner, self.ttl)
                .await
            {
                Ok(attempt) => attempt,
                Err(error) => {
                    if !error.outcome_unknown() {
                        hold.disarm();
                    }
                    return Err(error);
                }
            };
            let pttl = match attempt {
                Attempt::Acquired { fence } => {
                    return Ok(MutexGuard::new(hold, fence, self.ttl, sent));
                }
                Attempt::Busy { pttl } => pttl,
            };
            hold.disarm();
            let pause = backoff.next_pause(pttl);
            let now = Instant::now();
            let pause = match deadline {
                None => pause,
                Some(deadline) if deadline <= now => {
                    return Err(Error::Busy {
                        key: self.key.to_string(),
                        waited: started.elapsed(),
                        retry_after: pttl,
                    });
                }
                Some(deadline) => pause.min(deadline - now),
            };
            tokio::time::sleep(pause).await;
        }
    }
}
