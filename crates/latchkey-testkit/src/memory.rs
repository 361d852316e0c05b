//! A lock store in this process's memory: the proof that latchkey's seam takes a
//! backend other than Redis, and a fast store for tests of the logic above it.
//!
//! It keeps the core protocol (owner tokens, leases, fencing tokens that only grow,
//! a FIFO queue with waiter leases) and wakes the oldest waiter on release, but it
//! implements no [`Pass`] (tasks of one process take turns through release and
//! acquire) and its release does not hand the lock over: the woken waiter takes it
//! on its next try.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use latchkey::store::{
    AcquireRequest, Attempt, Inspect, LockStatus, LockStore, Notifier, Pass, WakeUps, Watch,
};
use latchkey::{LockKey, OwnerToken, Result, Ttl};

/// A store whose locks live in a `HashMap` behind a mutex; clones share it.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> latchkey::Result<()> {
/// let client = latchkey::Client::with_store(latchkey_testkit::MemoryStore::new());
/// let guard = client.mutex("report")?.try_lock().await?;
/// assert!(client.mutex("report")?.try_lock().await.is_err());
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, Default)]
pub struct MemoryStore {
    state: Arc<Mutex<State>>,
}

#[derive(Debug, Default)]
struct State {
    locks: HashMap<String, Lock>,
}

#[derive(Debug, Default)]
struct Lock {
    holder: Option<(String, Option<Instant>)>,
    /// The last fencing token handed out; never goes back.
    fence: u64,
    /// Waiters in order of arrival: owner, fair, when its waiter lease ends.
    queue: Vec<(String, bool, Instant)>,
    /// Who listens for a wake-up, by owner.
    watchers: HashMap<String, Notifier>,
}

impl Lock {
    /// Forgets an expired holder and waiters whose lease ran out.
    fn sweep(&mut self, now: Instant) {
        if self
            .holder
            .as_ref()
            .is_some_and(|(_, ends)| ends.is_some_and(|e| e <= now))
        {
            self.holder = None;
        }
        self.queue.retain(|(_, _, ends)| *ends > now);
        self.watchers.retain(|_, notifier| notifier.is_watched());
    }

    fn grant(&mut self, owner: &str, ttl: Ttl, now: Instant) -> Attempt {
        self.queue.retain(|(o, _, _)| o != owner);
        self.fence += 1;
        self.holder = Some((owner.to_owned(), Some(now + ttl.as_duration())));
        Attempt::acquired(self.fence, self.queue.len() as u64)
    }

    fn is_held_by(&self, owner: &str) -> bool {
        self.holder
            .as_ref()
            .is_some_and(|(holder, _)| holder == owner)
    }

    /// Whether a fair request by `owner` would overtake someone queued before it.
    fn someone_ahead(&self, owner: &str) -> bool {
        self.queue
            .first()
            .is_some_and(|(first, _, _)| first != owner)
    }

    fn busy(&self, now: Instant) -> Attempt {
        let (holder, pttl) = match &self.holder {
            Some((holder, ends)) => (Some(holder.clone()), ends.map(|e| e - now)),
            None => (None, None),
        };
        Attempt::busy(pttl, holder)
    }

    fn enqueue(&mut self, owner: &str, fair: bool, lease: Ttl, now: Instant) {
        let ends = now + lease.as_duration();
        match self.queue.iter_mut().find(|(o, _, _)| o == owner) {
            Some(waiter) => waiter.2 = ends,
            None => self.queue.push((owner.to_owned(), fair, ends)),
        }
    }

    fn wake_first(&self) {
        let first = self
            .queue
            .first()
            .and_then(|(o, _, _)| self.watchers.get(o));
        if let Some(notifier) = first {
            notifier.wake(None);
        }
    }
}

impl MemoryStore {
    /// An empty store.
    ///
    /// ```
    /// let store = latchkey_testkit::MemoryStore::new();
    /// ```
    pub fn new() -> Self {
        MemoryStore::default()
    }

    /// Ends the lease of whoever holds `key` now, as if it expired (a holder paused
    /// past its lease); the next holder gets a larger fencing token.
    ///
    /// ```
    /// # let key = latchkey::LockKey::new(&latchkey::Prefix::default(), "k").unwrap();
    /// latchkey_testkit::MemoryStore::new().expire(&key);
    /// ```
    pub fn expire(&self, key: &LockKey) {
        let mut state = self.lock();
        if let Some(lock) = state.locks.get_mut(key.as_str()) {
            lock.holder = None;
            lock.wake_first();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `step` on the swept state of `key`.
    fn with_lock<T>(&self, key: &LockKey, step: impl FnOnce(&mut Lock, Instant) -> T) -> T {
        let now = Instant::now();
        let mut state = self.lock();
        let lock = state.locks.entry(key.as_str().to_owned()).or_default();
        lock.sweep(now);
        step(lock, now)
    }
}

impl LockStore for MemoryStore {
    async fn try_acquire(
        &self,
        key: &LockKey,
        owner: &OwnerToken,
        request: AcquireRequest,
    ) -> Result<Attempt> {
        let owner = owner.as_str();
        Ok(self.with_lock(key, |lock, now| {
            let ours = lock.is_held_by(owner);
            let free = lock.holder.is_none() && !(request.fair && lock.someone_ahead(owner));
            if ours || free {
                return lock.grant(owner, request.ttl, now);
            }
            if let Some(lease) = request.queue_lease {
                lock.enqueue(owner, request.fair, lease, now);
            }
            lock.busy(now)
        }))
    }

    async fn release(
        &self,
        key: &LockKey,
        owner: &OwnerToken,
        leaving: Option<Ttl>,
    ) -> Result<bool> {
        let owner = owner.as_str();
        Ok(self.with_lock(key, |lock, _| {
            if leaving.is_some() {
                lock.queue.retain(|(o, _, _)| o != owner);
            }
            if !lock.is_held_by(owner) {
                return false;
            }
            lock.holder = None;
            lock.wake_first();
            true
        }))
    }

    async fn extend(&self, key: &LockKey, owner: &OwnerToken, ttl: Ttl) -> Result<bool> {
        let owner = owner.as_str();
        Ok(self.with_lock(key, |lock, now| match &mut lock.holder {
            Some((holder, ends)) if holder == owner => {
                *ends = Some(now + ttl.as_duration());
                true
            }
            _ => false,
        }))
    }

    async fn owner(&self, key: &LockKey) -> Result<Option<String>> {
        Ok(self.with_lock(key, |lock, _| lock.holder.as_ref().map(|(h, _)| h.clone())))
    }

    fn node(&self) -> &str {
        "memory"
    }
}

/// No passing ahead: the default.
impl Pass for MemoryStore {}

impl WakeUps for MemoryStore {
    async fn watch(&self, key: &LockKey, owner: &OwnerToken) -> Result<Watch> {
        let (watch, notifier) = Watch::pair();
        self.with_lock(key, |lock, _| {
            lock.watchers.insert(owner.as_str().to_owned(), notifier);
        });
        Ok(watch)
    }
}

impl Inspect for MemoryStore {
    async fn inspect(&self, key: &LockKey) -> Result<LockStatus> {
        Ok(self.with_lock(key, |lock, now| {
            let (holder, ttl) = match &lock.holder {
                Some((holder, ends)) => (Some(holder.clone()), ends.map(|e| e - now)),
                None => (None, None),
            };
            let fence = (lock.fence > 0).then_some(lock.fence);
            LockStatus::new(holder, ttl, fence, lock.queue.len() as u64)
        }))
    }

    async fn scan(&self, pattern: &str) -> Result<Vec<String>> {
        let now = Instant::now();
        let mut state = self.lock();
        let mut keys: Vec<String> = state
            .locks
            .iter_mut()
            .filter_map(|(key, lock)| {
                lock.sweep(now);
                lock.holder.as_ref()?;
                glob_matches(pattern.as_bytes(), key.as_bytes()).then(|| key.clone())
            })
            .collect();
        keys.sort_unstable();
        Ok(keys)
    }
}

/// Redis glob matching, for the `*`, `?` and `\\` escapes that `Client::list` uses:
/// the classic two-pointer walk (back to the last `*` on a mismatch), linear in
/// practice whatever the pattern.
fn glob_matches(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    // Where the last `*` was, and the text position it was tried from.
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match pattern.get(p) {
            Some(b'*') => {
                star = Some((p, t));
                p += 1;
                continue;
            }
            Some(b'?') => {
                (p, t) = (p + 1, t + 1);
                continue;
            }
            Some(b'\\') if pattern.get(p + 1) == Some(&text[t]) => {
                (p, t) = (p + 2, t + 1);
                continue;
            }
            Some(&literal) if literal != b'\\' && literal == text[t] => {
                (p, t) = (p + 1, t + 1);
                continue;
            }
            _ => {}
        }
        // A mismatch: let the last `*` take one more character, if there is one.
        let Some((star_p, star_t)) = star else {
            return false;
        };
        star = Some((star_p, star_t + 1));
        (p, t) = (star_p + 1, star_t + 1);
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::glob_matches;

    #[test]
    fn globs_match_like_redis() {
        assert!(glob_matches(b"app:*", b"app:deploy"));
        assert!(glob_matches(b"app:?", b"app:x"));
        assert!(!glob_matches(b"app:?", b"app:xy"));
        assert!(glob_matches(br"a\*:*", b"a*:z"));
        assert!(!glob_matches(br"a\*:*", b"ab:z"));
        assert!(glob_matches(b"*", b""));
        assert!(!glob_matches(b"a*b", b"a"));
        // Many stars against a long text that fails at the end: no blow-up.
        let long = vec![b'a'; 4096];
        assert!(!glob_matches(b"*a*a*a*a*a*a*a*a*b", &long));
    }
}
