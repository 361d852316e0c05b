//! The one place that frees a lock: explicitly, or when nobody else will.
//!
//! A waiting future (queued, or with a request in flight) and a held lock both own an
//! armed [`ReleaseOnDrop`]. [`release`](ReleaseOnDrop::release) passes the lock to a
//! local waiter of this process if there is one (see [`super::local`]), else runs the
//! release script: it leaves the wait queue, frees or hands over the lock if it is
//! ours, and is a harmless no-op otherwise. Dropping the hold armed runs the same
//! release in a task on the runtime the lock was taken on: it never blocks the
//! executor. Commands on one connection run in order, so it lands after any acquire
//! still in flight.

use std::time::Instant;

use tokio::runtime::Handle;

use super::local::{LocalLocks, Turn};
use crate::error::Result;
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
    /// Set on a held plain lock: local waiters to pass it to.
    pub(crate) local: Option<LocalLocks>,
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
            local: None,
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

    /// Passes the lock to a local waiter, or releases it in Redis; disarms once done.
    /// Returns whether the lock was ours. On error the hold stays armed, so its drop
    /// tries again.
    pub(crate) async fn release(&mut self) -> Result<bool> {
        if let Some(local) = self.local.clone() {
            if self.pass_locally(&local).await? {
                self.disarm();
                return Ok(true);
            }
            local.released(&self.key);
        }
        let released = self
            .store
            .release(&self.key, &self.owner, self.queued)
            .await?;
        self.queued = false;
        self.disarm();
        Ok(released)
    }

    /// Tries the local waiters in turn; true once one of them holds the lock. A waiter
    /// that left after the pass landed leaves the lock under its token, which we then
    /// hold (and pass on, or release) in its place.
    async fn pass_locally(&mut self, local: &LocalLocks) -> Result<bool> {
        while let Some(next) = local.next_waiter(&self.key) {
            let sent = Instant::now();
            let passed = self
                .store
                .pass(&self.key, &self.owner, &next.owner, next.ttl)
                .await;
            let fence = match passed {
                Ok(Some(fence)) => fence,
                // Not ours any more, or others wait in Redis: they come first. The
                // waiter keeps its place here; `released` sends it to Redis if nobody
                // of this process is there to pass it the lock later.
                Ok(None) => {
                    local.put_back(&self.key, next);
                    return Ok(false);
                }
                Err(error) => {
                    local.put_back(&self.key, next);
                    local.released(&self.key);
                    return Err(error);
                }
            };
            let owner = next.owner.clone();
            if next.tell(Turn::Yours { fence, sent }).is_ok() {
                return Ok(true);
            }
            self.owner = owner;
        }
        Ok(false)
    }

    /// A hold with the same lock and owner, armed, to move into a background task.
    fn take(&mut self) -> Self {
        ReleaseOnDrop {
            store: self.store.clone(),
            key: self.key.clone(),
            owner: self.owner.clone(),
            queued: self.queued,
            local: self.local.take(),
            runtime: None,
            armed: true,
        }
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
        let mut hold = self.take();
        // A runtime that is shutting down drops the task instead of running it; the
        // lease then ends on its own. Spawning itself never panics.
        runtime.spawn(async move {
            match hold.release().await {
                Ok(released) => tracing::debug!(key = %hold.key, released, "released a dropped lock"),
                Err(error) => {
                    hold.disarm();
                    tracing::warn!(key = %hold.key, %error, "could not release a dropped lock; it frees itself when its lease ends");
                }
            }
        });
    }
}
