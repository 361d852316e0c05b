//! The guard: proof of holding a lock, for as long as it lives.

use std::time::{Duration, Instant};

use super::release_on_drop::ReleaseOnDrop;
use crate::error::{Error, Result};
use crate::key::LockKey;
use crate::lease::Ttl;
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
/// let mut guard = mutex.lock().await?;
/// let token = guard.fence(); // hand this to the resource you write to
/// if guard.validity() < std::time::Duration::from_secs(5) {
///     guard.extend(std::time::Duration::from_secs(30)).await?;
/// }
/// let was_ours = guard.release().await?;
/// # Ok(()) }
/// ```
#[must_use = "dropping the guard releases the lock at once"]
pub struct MutexGuard<S: LockStore = SingleNode> {
    hold: ReleaseOnDrop<S>,
    fence: u64,
    valid_until: Instant,
}

impl<S: LockStore> MutexGuard<S> {
    pub(crate) fn new(hold: ReleaseOnDrop<S>, fence: u64, ttl: Ttl, sent: Instant) -> Self {
        MutexGuard {
            hold,
            fence,
            valid_until: ttl.valid_until(sent),
        }
    }

    /// The fencing token: strictly larger than that of every earlier holder of this
    /// lock. Send it with every write to the protected resource and have the resource
    /// refuse tokens lower than the highest it has seen; a holder that stalled past
    /// its lease then cannot overwrite the next holder's work.
    pub fn fence(&self) -> u64 {
        self.fence
    }

    /// The lock's Redis key.
    pub fn key(&self) -> &LockKey {
        &self.hold.key
    }

    /// This holder's owner token (its `Debug` output is masked).
    pub fn owner(&self) -> &OwnerToken {
        &self.hold.owner
    }

    /// How much longer the lease surely lasts, by our own clock: the TTL counted from
    /// when the acquire (or last extend) was *sent*, less a 1 % + 2 ms drift allowance.
    /// Zero once that time has passed. No round trip.
    pub fn validity(&self) -> Duration {
        self.valid_until.saturating_duration_since(Instant::now())
    }

    /// Resets the lease to `ttl` from now (it is reset, not added to).
    /// [`Error::LeaseLost`] if the lock is no longer ours.
    pub async fn extend(&mut self, ttl: Duration) -> Result<()> {
        let ttl = Ttl::new(ttl)?;
        let sent = Instant::now();
        if !self
            .hold
            .store
            .extend(&self.hold.key, &self.hold.owner, ttl)
            .await?
        {
            return Err(Error::LeaseLost {
                key: self.hold.key.to_string(),
            });
        }
        self.valid_until = ttl.valid_until(sent);
        Ok(())
    }

    /// Asks Redis whether the lock still holds our owner token.
    pub async fn is_held(&self) -> Result<bool> {
        let holder = self.hold.store.owner(&self.hold.key).await?;
        Ok(holder.as_deref() == Some(self.hold.owner.as_str()))
    }

    /// Frees the lock. `Ok(true)` when it was still ours; `Ok(false)` when it had
    /// expired or been broken, i.e. the critical section ran (partly) unprotected.
    ///
    /// If this fails (Redis unreachable) or is cancelled, the guard still releases
    /// in the background when it is dropped.
    pub async fn release(mut self) -> Result<bool> {
        let released = self
            .hold
            .store
            .release(&self.hold.key, &self.hold.owner)
            .await?;
        self.hold.disarm();
        Ok(released)
    }
}

impl<S: LockStore> std::fmt::Debug for MutexGuard<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MutexGuard")
            .field("key", &self.hold.key.as_str())
            .field("owner", &self.hold.owner)
            .field("fence", &self.fence)
            .field("validity", &self.validity())
            .finish()
    }
}
