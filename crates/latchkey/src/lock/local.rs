//! Local handoff: tasks of one process waiting for a lock another of its tasks holds.
//!
//! While a task of this process holds a plain lock (or waits for it in Redis), other
//! tasks of the process that want it queue here instead of in Redis. The holder's release then passes the lock
//! straight to the next of them in one script (new owner, new lease, new fencing
//! token), without freeing it: one round trip and five Redis commands per
//! acquisition instead of a release, a wake-up and a claim. A pass is refused while
//! anyone waits in the Redis queue, so other processes still get their turn after
//! at most one more critical section. Local waiters also re-check on a timer, so a
//! lost turn costs at most that.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex as StdMutex, MutexGuard as StdGuard};
use std::time::Instant;

use tokio::sync::oneshot;

use crate::key::LockKey;
use crate::lease::Ttl;
use crate::token::OwnerToken;

/// Which of a process's tasks hold or wait for which lock; shared by a client's
/// mutex handles.
#[derive(Clone, Debug, Default)]
pub(crate) struct LocalLocks(Arc<StdMutex<HashMap<String, Local>>>);

#[derive(Debug, Default)]
struct Local {
    /// A task of this process holds the lock.
    held: bool,
    /// Tasks of this process waiting for it through Redis.
    in_redis: usize,
    waiters: VecDeque<LocalWaiter>,
}

impl Local {
    fn is_idle(&self) -> bool {
        !self.represented() && self.waiters.is_empty()
    }

    /// A task of this process holds the lock or waits for it in Redis: queueing
    /// behind it costs Redis nothing, and it passes the lock on when done.
    fn represented(&self) -> bool {
        self.held || self.in_redis > 0
    }

    /// Sends the oldest live local waiter to Redis, so the process keeps competing
    /// once nobody represents it there.
    fn send_one_to_redis(&mut self) {
        if self.represented() {
            return;
        }
        while let Some(waiter) = self.waiters.pop_front() {
            if waiter.tell(Turn::TryRedis).is_ok() {
                return;
            }
        }
    }
}

/// A task waiting for a local pass.
#[derive(Debug)]
pub(crate) struct LocalWaiter {
    pub(crate) owner: OwnerToken,
    pub(crate) ttl: Ttl,
    reply: oneshot::Sender<Turn>,
}

/// What a local waiter is told.
#[derive(Debug)]
pub(crate) enum Turn {
    /// The lock is yours, passed with this fencing token by a request sent at `sent`.
    Yours { fence: u64, sent: Instant },
    /// Nobody here will pass it to you: take your turn through Redis.
    TryRedis,
}

impl LocalWaiter {
    /// Tells the waiter; gives the turn back if the waiter is gone.
    pub(crate) fn tell(self, turn: Turn) -> Result<(), Turn> {
        self.reply.send(turn)
    }
}

impl LocalLocks {
    fn entries(&self) -> StdGuard<'_, HashMap<String, Local>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `owner` behind this process's holder of `key` (or its task waiting in
    /// Redis), if there is one.
    pub(crate) fn wait_behind_holder(
        &self,
        key: &LockKey,
        owner: &OwnerToken,
        ttl: Ttl,
    ) -> Option<oneshot::Receiver<Turn>> {
        let mut entries = self.entries();
        let local = entries.get_mut(key.as_str()).filter(|l| l.represented())?;
        let (reply, turn) = oneshot::channel();
        local.waiters.push_back(LocalWaiter {
            owner: owner.clone(),
            ttl,
            reply,
        });
        Some(turn)
    }

    /// Whether a task of this process holds `key` or waits for it in Redis.
    pub(crate) fn is_represented(&self, key: &LockKey) -> bool {
        self.entries()
            .get(key.as_str())
            .is_some_and(Local::represented)
    }

    /// A task of this process took `key` through Redis.
    pub(crate) fn mark_held(&self, key: &LockKey) {
        self.entries()
            .entry(key.as_str().to_owned())
            .or_default()
            .held = true;
    }

    /// Counts a task of this process waiting for `key` through Redis, until dropped.
    pub(crate) fn redis_waiter(&self, key: &LockKey) -> RedisWaiter {
        self.entries()
            .entry(key.as_str().to_owned())
            .or_default()
            .in_redis += 1;
        RedisWaiter {
            locks: self.clone(),
            key: key.as_str().to_owned(),
        }
    }

    /// The oldest local waiter still waiting, for the holder to pass the lock to.
    pub(crate) fn next_waiter(&self, key: &LockKey) -> Option<LocalWaiter> {
        let mut entries = self.entries();
        let local = entries.get_mut(key.as_str())?;
        while let Some(waiter) = local.waiters.pop_front() {
            if !waiter.reply.is_closed() {
                return Some(waiter);
            }
        }
        None
    }

    /// Puts back at the head of the line a waiter the holder could not pass to.
    pub(crate) fn put_back(&self, key: &LockKey, waiter: LocalWaiter) {
        let mut entries = self.entries();
        let local = entries.entry(key.as_str().to_owned()).or_default();
        local.waiters.push_front(waiter);
    }

    /// This process no longer holds `key`. If none of its tasks waits through Redis,
    /// the oldest local waiter is sent there, so the process keeps competing.
    pub(crate) fn released(&self, key: &LockKey) {
        self.settle(key.as_str(), |local| local.held = false);
    }

    /// A waiter told to go to Redis left without going: send the next one instead.
    pub(crate) fn turn_unused(&self, key: &LockKey) {
        self.settle(key.as_str(), |_| {});
    }

    /// Applies `change` to `key`'s entry, then keeps the process competing (a local
    /// waiter goes to Redis if nobody here represents it there) and forgets the entry
    /// once nobody holds, waits or queues for the lock.
    fn settle(&self, key: &str, change: impl FnOnce(&mut Local)) {
        let mut entries = self.entries();
        let Some(local) = entries.get_mut(key) else {
            return;
        };
        change(local);
        local.send_one_to_redis();
        if local.is_idle() {
            entries.remove(key);
        }
    }

    /// Whether the process keeps no state for `key` (nobody holds, waits or queues).
    #[cfg(test)]
    pub(crate) fn is_forgotten(&self, key: &LockKey) -> bool {
        !self.entries().contains_key(key.as_str())
    }
}

/// A task of this process waiting through Redis; uncounted when dropped.
#[derive(Debug)]
pub(crate) struct RedisWaiter {
    locks: LocalLocks,
    key: String,
}

impl Drop for RedisWaiter {
    fn drop(&mut self) {
        self.locks.settle(&self.key, |local| {
            local.in_redis = local.in_redis.saturating_sub(1);
        });
    }
}
