//! The one place that frees a lock nobody will free explicitly.
//!
//! A waiting future (queued, or with a request in flight) and a held lock both own an
//! armed [`ReleaseOnDrop`]. Dropping it armed spawns the release script on the runtime
//! the lock was taken on: it leaves the wait queue, frees or hands over the lock if it
//! is ours, and is a harmless no-op otherwise. It never blocks the executor. Commands
//! on one connection run in order, so it lands after any acquire still in flight.

use tokio::runtime::Handle;

use crate::key::LockKey;
use crate::store::LockStore;
use crate::token::OwnerToken;

/// A possible hold on a lock, released in the background if dropped while armed.
pub(crate) struct ReleaseOnDrop<S: LockStore> {
    pub(crate) store: S,
    pub(crate) key: LockKey,
    pub(crate) owner: OwnerToken,
    /// The owner may sit in the wait queue, and must leave it.
    pub(crate) queued: bool,
    runtime: Option<Handle>,
    armed: bool,
}

impl<S: LockStore> ReleaseOnDrop<S> {
    /// A disarmed hold; call [`arm`](Self::arm) before anything may set the lock.
    pub(crate) fn new(store: S, key: LockKey, owner: OwnerToken) -> Self {
        ReleaseOnDrop {
            store,
            key,
            owner,
            queued: false,
            runtime: Handle::try_current().ok(),
            armed: false,
        }
    }

    pub(crate) fn arm(&mut self) {
        self.armed = true;
    }

    pub(crate) fn disarm(&mut self) {
        self.armed = false;
    }

    /// Runs the release now; disarms once Redis confirmed it. Returns whether the lock
    /// was ours. On error the hold stays armed, so its drop tries again.
    pub(crate) async fn release(&mut self) -> crate::Result<bool> {
        let released = self
            .store
            .release(&self.key, &self.owner, self.queued)
            .await?;
        self.queued = false;
        self.disarm();
        Ok(released)
    }
}

impl<S: LockStore> Drop for ReleaseOnDrop<S> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let Some(runtime) = self.runtime.take() else {
            tracing::warn!(key = %self.key, "lock dropped outside a tokio runtime; it frees itself when its lease ends");
            return;
        };
        let (store, key, owner, queued) = (
            self.store.clone(),
            self.key.clone(),
            self.owner.clone(),
            self.queued,
        );
        // A runtime that is shutting down drops the task instead of running it; the
        // lease then ends on its own. Spawning itself never panics.
        runtime.spawn(async move {
            match store.release(&key, &owner, queued).await {
                Ok(released) => tracing::debug!(%key, released, "released a dropped lock"),
                Err(error) => tracing::warn!(%key, %error, "could not release a dropped lock; it frees itself when its lease ends"),
            }
        });
    }
}
