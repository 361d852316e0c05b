//! The value each quorum hold writes on its nodes: a fresh token per attempt.
//!
//! A single server reuses the caller's owner token on every try of one wait, so a
//! try whose reply was lost is claimed by the next. On a quorum that reuse is
//! unsafe: an attempt that failed is undone by a release on every node, and a
//! release stuck on a stalled node (its connection replaced since) can run there
//! *after* the next attempt's grant, and delete it, while we count that node in our
//! majority. So each attempt writes a value of its own, `N/` and the owner token
//! (N counts the store's attempts), and a late release of an earlier attempt finds
//! nothing of ours to delete. The value still ends with the owner token, so it is
//! recognisably latchkey's and whose.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::key::LockKey;
use crate::lease::Ttl;
use crate::token::OwnerToken;

/// What one owner's latest attempt on one lock wrote, and the token it got.
#[derive(Clone, Debug)]
pub(crate) struct Hold {
    pub(crate) value: OwnerToken,
    pub(crate) ttl: Ttl,
    /// The fencing token, once granted (0 before).
    pub(crate) fence: u64,
    /// Until when the lock is surely ours, by our clock, once granted: an extend
    /// takes the lock back on nodes that lost it only before then.
    pub(crate) valid_until: Option<Instant>,
}

/// The holds of one store's owners, by lock and owner.
#[derive(Clone, Debug, Default)]
pub(crate) struct Attempts(Arc<Inner>);

#[derive(Debug, Default)]
struct Inner {
    holds: Mutex<HashMap<(String, String), Hold>>,
    started: AtomicU64,
}

impl Attempts {
    /// Starts a new attempt of `owner` on `key`: a fresh value replaces the last.
    pub(crate) fn start(&self, key: &LockKey, owner: &OwnerToken, ttl: Ttl) -> Hold {
        let attempt = self.0.started.fetch_add(1, Ordering::Relaxed);
        let hold = Hold {
            value: OwnerToken::from_stored(format!("{attempt}/{}", owner.as_str())),
            ttl,
            fence: 0,
            valid_until: None,
        };
        self.lock().insert(entry(key, owner), hold.clone());
        hold
    }

    /// Records that `owner`'s attempt got `fence`, valid until `valid_until`.
    pub(crate) fn granted(
        &self,
        key: &LockKey,
        owner: &OwnerToken,
        fence: u64,
        valid_until: Instant,
    ) {
        if let Some(hold) = self.lock().get_mut(&entry(key, owner)) {
            hold.fence = fence;
            hold.valid_until = Some(valid_until);
        }
    }

    /// Records that `owner`'s lock carries `fence` now (computed on demand), so that
    /// renewals keep the nodes' counters at or above it.
    pub(crate) fn fenced(&self, key: &LockKey, owner: &OwnerToken, fence: u64) {
        if let Some(hold) = self.lock().get_mut(&entry(key, owner)) {
            hold.fence = fence;
        }
    }

    /// Records that `owner`'s lock was renewed on a majority, valid until `valid_until`.
    pub(crate) fn renewed(&self, key: &LockKey, owner: &OwnerToken, valid_until: Instant) {
        if let Some(hold) = self.lock().get_mut(&entry(key, owner)) {
            hold.valid_until = Some(valid_until);
        }
    }

    /// `owner`'s latest attempt on `key`, unless it released the lock (or never
    /// tried it here).
    pub(crate) fn get(&self, key: &LockKey, owner: &OwnerToken) -> Option<Hold> {
        self.lock().get(&entry(key, owner)).cloned()
    }

    /// `owner`'s latest attempt on `key`. An owner this store never saw (an operator
    /// breaking a lock with the value it read) is taken to be the value itself.
    pub(crate) fn latest(&self, key: &LockKey, owner: &OwnerToken) -> Hold {
        self.get(key, owner).unwrap_or_else(|| Hold {
            value: owner.clone(),
            ttl: Ttl::DEFAULT,
            fence: 0,
            valid_until: None,
        })
    }

    /// Forgets `owner`'s attempts on `key` (it released the lock).
    pub(crate) fn forget(&self, key: &LockKey, owner: &OwnerToken) {
        self.lock().remove(&entry(key, owner));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Hold>> {
        // A panic elsewhere while holding the lock leaves plain data; keep using it.
        self.0.holds.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The owner token in a value an attempt wrote (`N/` and the token); any other
/// value as it is.
pub(crate) fn owner_of(value: &str) -> &str {
    match value.split_once('/') {
        Some((attempt, owner)) if attempt.bytes().all(|b| b.is_ascii_digit()) => owner,
        _ => value,
    }
}

fn entry(key: &LockKey, owner: &OwnerToken) -> (String, String) {
    (key.as_str().to_owned(), owner.as_str().to_owned())
}
