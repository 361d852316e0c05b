//! The guard: proof of holding a lock, for as long as it lives.

use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::held::{Held, LeaseState};
use super::waiter::Won;
use super::watchdog;
use crate::error::{Error, Result};
use crate::key::LockKey;
use crate::lease::{Lease, Ttl};
use crate::store::{LockStore, SingleNode};
use crate::token::OwnerToken;

/// A held lock. Its life is the critical section.
///
/// Call [`release`](Self::release) to free the lock and learn whether it was still
/// ours. Dropping the guard instead releases it in the background on the runtime it
/// was taken on: the drop never blocks and never panics.
///
/// ```no_run
/// # async fn demo(mutex: latchkey::Mutex) -> latchkey::Result<()> {
/// let guard = mutex.lock().await?;
/// let token = guard.fence(); // hand this to the resource you write to
/// tokio::select! {
///     () = guard.lost() => eprintln!("lease lost: stop writing"),
///     () = tokio::time::sleep(std::time::Duration::from_secs(1)) => {}
/// }
/// let was_ours = guard.release().await?;
/// # Ok(()) }
/// ```
#[must_use = "dropping the guard releases the lock at once"]
pub struct MutexGuard<S: LockStore = SingleNode> {
    held: Arc<Held<S>>,
}

impl<S: LockStore> MutexGuard<S> {
    pub(crate) fn new(won: Won<S>, lease: Lease) -> Self {
        let Won { hold, fence, sent } = won;
        let state = Arc::new(LeaseState::new(lease.ttl(), sent));
        // A fixed lease needs no task: `lost()` watches the clock itself.
        let watchdog = match lease.is_renewed() {
            true => watchdog::spawn(&hold, state.clone()),
            false => None,
        };
        MutexGuard {
            held: Arc::new(Held {
                watchdog,
                expiry_watch: OnceLock::new(),
                hold,
                fence,
                lease: state,
            }),
        }
    }

    /// Takes the lock again through this guard: the same owner, no round trip. The
    /// lock is released when the last of the guards goes.
    ///
    /// "The same owner" in async code is whoever holds a guard, not a thread or a task
    /// (a task can move between threads, and one logical owner can span several
    /// tasks): to re-enter, pass the guard (or a reference to it) down the call chain.
    ///
    /// ```no_run
    /// # async fn demo(mutex: latchkey::Mutex) -> latchkey::Result<()> {
    /// let outer = mutex.lock().await?;
    /// let inner = outer.reenter();
    /// assert_eq!(outer.hold_count(), 2);
    /// inner.release().await?; // still held by `outer`
    /// outer.release().await?; // now free
    /// # Ok(()) }
    /// ```
    pub fn reenter(&self) -> Self {
        MutexGuard {
            held: self.held.clone(),
        }
    }

    /// How many guards hold this acquisition (1 unless re-entered).
    pub fn hold_count(&self) -> usize {
        Arc::strong_count(&self.held)
    }

    /// The fencing token: strictly larger than that of every earlier holder of this
    /// lock. Send it with every write to the protected resource and have the resource
    /// refuse tokens lower than the highest it has seen; a holder that stalled past
    /// its lease then cannot overwrite the next holder's work.
    pub fn fence(&self) -> u64 {
        self.held.fence
    }

    /// The lock's Redis key.
    pub fn key(&self) -> &LockKey {
        &self.held.hold.key
    }

    /// This holder's owner token (its `Debug` output is masked).
    pub fn owner(&self) -> &OwnerToken {
        &self.held.hold.owner
    }

    /// How much longer the lease surely lasts, by our own clock: the TTL counted from
    /// when the acquire (or last renewal) was *sent*, less a 1 % + 2 ms drift
    /// allowance. Zero once that time has passed. No round trip.
    pub fn validity(&self) -> Duration {
        self.held.lease.validity()
    }

    /// The instant until which the lease surely lasts, by our clock (see
    /// [`validity`](Self::validity)); in the past once it has run out. For logs and
    /// checkers that compare holders' lease windows.
    ///
    /// ```no_run
    /// # async fn demo(mutex: latchkey::Mutex) -> latchkey::Result<()> {
    /// let guard = mutex.lock().await?;
    /// assert!(guard.valid_until() > std::time::Instant::now());
    /// # Ok(()) }
    /// ```
    pub fn valid_until(&self) -> Instant {
        self.held.lease.valid_until()
    }

    /// Resolves as soon as the lease is known lost: a renewal found the lock taken,
    /// Redis did not answer before the lease ran out, or the lease ran out by our
    /// clock. Select on it to stop work the lock no longer protects.
    pub fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
        let lease = self.held.lease.clone();
        async move { lease.until_lost().await }
    }

    /// The `lost` signal as a token, to hand to code that takes a `CancellationToken`.
    pub fn lost_token(&self) -> CancellationToken {
        let held = &self.held;
        held.expiry_watch.get_or_init(|| {
            // A renewed lease has its watchdog; a fixed one gets a watcher now.
            held.watchdog
                .is_none()
                .then(|| held.lease.watch_expiry())
                .flatten()
        });
        held.lease.lost().clone()
    }

    /// Whether the lease is known lost or has run out by our clock.
    pub fn is_lost(&self) -> bool {
        self.held.lease.is_lost()
    }

    /// Resets the lease to `ttl` from now (it is reset, not added to).
    /// [`Error::LeaseLost`] if the lock is no longer ours.
    pub async fn extend(&self, ttl: Duration) -> Result<()> {
        let ttl = Ttl::new(ttl)?;
        let sent = Instant::now();
        let hold = &self.held.hold;
        if !hold.store.extend(&hold.key, &hold.owner, ttl).await? {
            self.held.lease.lose();
            return Err(Error::LeaseLost {
                key: hold.key.to_string(),
            });
        }
        self.held.lease.renewed(ttl, sent);
        Ok(())
    }

    /// Asks Redis whether the lock still holds our owner token.
    pub async fn is_held(&self) -> Result<bool> {
        let hold = &self.held.hold;
        let holder = hold.store.owner(&hold.key).await?;
        Ok(holder.as_deref() == Some(hold.owner.as_str()))
    }

    /// Gives up this guard. The last guard of an acquisition frees the lock (handing
    /// it to the next fair waiter, if any); `Ok(true)` when it was still ours,
    /// `Ok(false)` when it had expired or been broken, i.e. the critical section ran
    /// (partly) unprotected. A re-entered guard only drops its count.
    ///
    /// If this fails (Redis unreachable) or is cancelled, the lock is still released
    /// in the background.
    pub async fn release(self) -> Result<bool> {
        let mut held = match Arc::try_unwrap(self.held) {
            Ok(held) => held,
            Err(shared) => return Ok(!shared.lease.is_lost()),
        };
        held.stop_renewing();
        held.hold.release().await
    }
}

impl<S: LockStore> std::fmt::Debug for MutexGuard<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MutexGuard")
            .field("key", &self.key().as_str())
            .field("owner", self.owner())
            .field("fence", &self.fence())
            .field("validity", &self.validity())
            .field("lost", &self.is_lost())
            .finish()
    }
}
