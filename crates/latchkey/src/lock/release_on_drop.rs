//! The one place that frees a lock nobody will free explicitly.
//!
//! Both a waiting future that is dropped mid-request and a guard that is dropped
//! without `release` hold an armed [`ReleaseOnDrop`]. Dropping it armed spawns a
//! compare-and-delete on the runtime the lock was taken on: it never blocks the
//! executor, and a token that was never set makes it a harmless no-op. Commands on
//! one connection run in order, so the release lands after any acquire still in flight.

use tokio::runtime::Handle;

use crate::key::LockKey;
use crate::store::LockStore;
use crate::token::OwnerToken;

/// A possible hold on a lock, released in the background if dropped while armed.
pub(crate) struct ReleaseOnDrop<S: LockStore> {
    pub(crate) store: S,
    pub(crate) key: LockKey,
    pub(crate) owner: OwnerToken,
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
        let (store, key, owner) = (self.store.clone(), self.key.clone(), self.owner.clone());
        // A runtime that is shutting down drops the task instead of running it; the
        // lease then ends on its own. Spawning itself never panics.
        runtime.spawn(async move {
            match store.release(&key, &owner).await {
                Ok(released) => tracing::debug!(%key, released, "released a dropped lock"),
                Err(error) => tracing::warn!(%key, %error, "could not release a dropped lock; it frees itself when its lease ends"),
            }
        });
    }
}
