//! Several locks at once, all or nothing: [`MultiLock`] and its [`MultiLockGuard`].
//!
//! ```no_run
//! # async fn demo() -> latchkey::Result<()> {
//! let client = latchkey::Client::open("redis://127.0.0.1:6379").await?;
//! let accounts = client.multi_lock(["account:7", "account:3"])?;
//! let both = accounts.lock().await?;
//! println!("fences {:?}", both.fences().await?); // one per lock, in key order
//! both.release().await?;
//! # Ok(()) }
//! ```
//!
//! # The promise
//!
//! When `lock`, `lock_timeout` or `try_lock` returns a guard, every lock of the set
//! is held, each with its own lease, watchdog and fencing token. When it returns an
//! error, none is held: the locks it had taken on the way are released before it
//! returns (or, if Redis does not answer within 50 ms, in the background, as a
//! dropped guard is). Dropping the call's future leaves nothing held either: what it
//! held is released in the background.
//!
//! Callers that name the same locks in different orders do not deadlock, because a
//! multi-lock never waits while it holds a lock: it waits, holding nothing, for one
//! busy lock, then tries the others at once, and if one of them is busy it gives
//! everything back and waits for that one. No caller holds a lock while it waits
//! for another, so no cycle of waits can form (C++'s `std::lock` works this way).
//! Nor does a caller that waits for its last lock hold up the others it needs, as
//! one taking its locks one by one in a fixed order would. That holds among callers
//! that take the locks through multi-locks, or one lock at a time; a task that
//! already holds one of the locks and then asks for a multi-lock with it waits for
//! itself, as with any lock that is not re-entered.
//!
//! # How it takes them
//!
//! The first try takes every lock in one step, all or none, when they are on one
//! server (on a cluster, in one hash slot: give them a common hash tag, such as
//! `{bank}:7` and `{bank}:3`): one script, `take_all.lua`, that sets every lock if
//! every one is free and touches none otherwise, so the set is never held in part,
//! not even for a round trip. Otherwise (locks across slots, nodes or quorum
//! servers; a lock that takes its fencing token with the grant; a fair lock with
//! waiters; a store that waits for replicas) it sends a `try_lock` for every lock
//! at once (on one server, one round trip on the client's connection; on a cluster,
//! one per node, in parallel), and gives back what it took if one is busy. When
//! all are free, that is the whole cost. When some are busy, it waits for the first
//! busy one (in key order), as
//! [`Mutex::lock`] does: in the lock's queue, woken by its
//! release, with the same fairness, waiter leases and cancel safety. Once that one
//! is its, it tries the others again, all at once (in one step, as above, where it
//! can). A set on a Redis Cluster may span
//! slots and nodes; a quorum works too. Under heavy contention a caller may go round
//! more than once (each round waits in the queue of a lock someone holds, so it is
//! woken, not polling); a deadline bounds it. Prefer plain locks (the default) in a
//! multi-lock: a fair lock's try fails while anyone waits in its line, so with
//! steady lines on two fair locks of a set, every round may go back to waiting.
//!
//! # Fault classes
//!
//! - **A holder crashes or pauses** while it holds locks: it blocks the others for
//!   at most one lease per lock held, as a single lock does.
//! - **A call is cancelled or times out**: what it held is released (at once on an
//!   error, in the background on a drop).
//! - **One lease is lost** (an operator broke it, Redis failed over, a pause
//!   outlived it): [`MultiLockGuard::lost`] fires and
//!   [`MultiLockGuard::is_lost`] turns true; the other locks stay held until the
//!   guard is released.
//! - **A release meets a reset connection**: each lock's release is retried in the
//!   background, as a [`MutexGuard`]'s is.

mod at_once;
mod guard;

pub use guard::MultiLockGuard;

use std::time::{Duration, Instant};

use futures_util::future::join_all;

use crate::error::{Error, Result};
use crate::key::LockKey;
use crate::lease::{Lease, Ttl};
use crate::lock::{Fairness, Fencing, Mutex, MutexGuard, section};
use crate::store::{Pass, RedisStore, WakeUps};

/// How long a failed call waits for the locks it took to be released before it
/// leaves that to the background, as a lock's waiter does when it leaves its queue.
const GIVE_BACK_WAIT: Duration = Duration::from_millis(50);

/// A set of locks taken together: all of them, or none. Made by
/// [`Client::multi_lock`](crate::Client::multi_lock), or from
/// [`Mutex`] handles with [`MultiLock::new`]; see the
/// [module docs](self) for the promise and how it waits.
///
/// ```no_run
/// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
/// let transfer = client.multi_lock(["account:1", "account:2"])?;
/// let guard = transfer.lock().await?;
/// // move money between the two accounts
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct MultiLock<S: Pass + WakeUps = RedisStore> {
    /// Sorted (by key, then store), each lock once.
    mutexes: Vec<Mutex<S>>,
}

impl<S: Pass + WakeUps> MultiLock<S> {
    /// The set of `mutexes`, each with its own settings. A lock named twice (the
    /// same key on the same store) is taken once, with the first handle's settings.
    /// The handles may be on different stores, even on separate Redis servers:
    /// the order is by key, then by the store's address.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for an empty set.
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// use latchkey::{Fairness, MultiLock};
    /// let both = MultiLock::new([
    ///     client.mutex("inventory:42")?.with_fairness(Fairness::Fair),
    ///     client.mutex("orders:42")?,
    /// ])?;
    /// # Ok(()) }
    /// ```
    pub fn new(mutexes: impl IntoIterator<Item = Mutex<S>>) -> Result<Self> {
        let mut mutexes: Vec<Mutex<S>> = mutexes.into_iter().collect();
        if mutexes.is_empty() {
            return Err(Error::InvalidArgument(
                "a multi-lock needs at least one lock".into(),
            ));
        }
        // Stable: of a lock named twice, the first handle stays.
        mutexes.sort_by(|a, b| order(a.key(), a.store()).cmp(&order(b.key(), b.store())));
        mutexes.dedup_by(|later, first| {
            order(later.key(), later.store()) == order(first.key(), first.store())
        });
        Ok(MultiLock { mutexes })
    }

    /// Sets every lock's lease (see [`Mutex::with_lease`]).
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// use std::time::Duration;
    /// let both = client
    ///     .multi_lock(["a", "b"])?
    ///     .with_lease(latchkey::Lease::renewed(Duration::from_secs(10))?);
    /// # Ok(()) }
    /// ```
    pub fn with_lease(self, lease: Lease) -> Self {
        self.map(|mutex| mutex.with_lease(lease))
    }

    /// Makes every lock plain or fair (see [`Mutex::with_fairness`]). Plain, the
    /// default, suits a multi-lock best: see [How it takes them](self#how-it-takes-them).
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// let both = client.multi_lock(["a", "b"])?.with_fairness(latchkey::Fairness::Fair);
    /// # Ok(()) }
    /// ```
    pub fn with_fairness(self, fairness: Fairness) -> Self {
        self.map(|mutex| mutex.with_fairness(fairness))
    }

    /// When every lock computes its fencing token (see [`Mutex::with_fencing`]).
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// let both = client.multi_lock(["a", "b"])?.with_fencing(latchkey::Fencing::OnGrant);
    /// # Ok(()) }
    /// ```
    pub fn with_fencing(self, fencing: Fencing) -> Self {
        self.map(|mutex| mutex.with_fencing(fencing))
    }

    /// Every lock's waiter lease (see [`Mutex::with_waiter_lease`]).
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// let both = client
    ///     .multi_lock(["a", "b"])?
    ///     .with_waiter_lease(latchkey::Ttl::new(std::time::Duration::from_secs(5))?);
    /// # Ok(()) }
    /// ```
    pub fn with_waiter_lease(self, lease: Ttl) -> Self {
        self.map(|mutex| mutex.with_waiter_lease(lease))
    }

    fn map(self, set: impl Fn(Mutex<S>) -> Mutex<S>) -> Self {
        MultiLock {
            mutexes: self.mutexes.into_iter().map(set).collect(),
        }
    }

    /// The locks' keys, in the order they are taken.
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// let both = client.multi_lock(["b", "a"])?;
    /// let keys: Vec<&str> = both.keys().map(|key| key.as_str()).collect();
    /// assert_eq!(keys, ["a", "b"]);
    /// # Ok(()) }
    /// ```
    pub fn keys(&self) -> impl Iterator<Item = &LockKey> {
        self.mutexes.iter().map(Mutex::key)
    }

    /// The locks' handles, in the order they are taken.
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// for mutex in client.multi_lock(["a", "b"])?.mutexes() {
    ///     println!("{} locked: {}", mutex.key(), mutex.is_locked().await?);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn mutexes(&self) -> &[Mutex<S>] {
        &self.mutexes
    }

    /// Takes every lock if every one is free, in one round trip per node; else takes
    /// none and returns [`Error::Busy`] naming the first busy lock (in key order).
    ///
    /// # Errors
    ///
    /// As [`Mutex::try_lock`], for the first lock (in key order) that failed.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future leaves no lock behind: what it took is released in the
    /// background.
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// match client.multi_lock(["a", "b"])?.try_lock().await {
    ///     Ok(both) => { /* both held */ both.release().await?; }
    ///     Err(latchkey::Error::Busy { name, .. }) => println!("{name} is busy"),
    ///     Err(other) => return Err(other),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_lock(&self) -> Result<MultiLockGuard<S>> {
        self.acquire(Some(Instant::now())).await
    }

    /// Waits until every lock is held, for as long as it takes. Transient failures
    /// are retried, as by [`Mutex::lock`].
    ///
    /// # Errors
    ///
    /// As [`Mutex::lock`]: only errors retrying cannot fix. None of the locks is
    /// held then.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: dropping the future leaves no lock behind and leaves every queue.
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// let both = client.multi_lock(["a", "b"])?.lock().await?;
    /// # Ok(()) }
    /// ```
    pub async fn lock(&self) -> Result<MultiLockGuard<S>> {
        self.acquire(None).await
    }

    /// Waits at most `wait` (in all) for every lock. Returns soon after `wait`
    /// whatever the network does: every round trip is cut off at the deadline, and
    /// leaving a queue (50 ms) and giving back what it took (50 ms) add at most
    /// about 100 ms; what is left goes on in the background.
    ///
    /// # Errors
    ///
    /// [`Error::Busy`] naming the lock it was waiting for when the deadline passed,
    /// with the whole time waited; otherwise as [`Mutex::lock_timeout`]. None of the
    /// locks is held then.
    ///
    /// # Cancel safety
    ///
    /// As for [`lock`](Self::lock).
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// use std::time::Duration;
    /// let both = client.multi_lock(["a", "b"])?.lock_timeout(Duration::from_secs(5)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn lock_timeout(&self, wait: Duration) -> Result<MultiLockGuard<S>> {
        self.acquire(Instant::now().checked_add(wait)).await
    }

    /// Runs `work` holding every lock, and releases them after. If a lease is lost
    /// while `work` runs, `work` is cancelled (dropped at its next `.await`) and the
    /// result is [`Error::LeaseLost`]. Waits without limit, like
    /// [`lock`](Self::lock).
    ///
    /// # Errors
    ///
    /// - as [`lock`](Self::lock) while waiting;
    /// - [`Error::LeaseLost`] (or [`Error::HoldLimit`]) if a lease was lost while
    ///   `work` ran, or the release found a lock no longer ours; `work`'s value is
    ///   dropped;
    /// - the release's error, with `work`'s value dropped (the locks are then
    ///   released in the background).
    ///
    /// # Cancel safety
    ///
    /// As [`Mutex::with_lock`]: what is held is released in the background.
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// # async fn move_money(from: u64, to: u64) {}
    /// let accounts = client.multi_lock(["account:7", "account:3"])?;
    /// accounts.with_lock(async |both| move_money(7, 3).await).await?;
    /// # Ok(()) }
    /// ```
    pub async fn with_lock<T>(&self, work: impl AsyncFnOnce(&MultiLockGuard<S>) -> T) -> Result<T> {
        section::run_under(self.lock().await?, work).await
    }

    async fn acquire(&self, deadline: Option<Instant>) -> Result<MultiLockGuard<S>> {
        let started = Instant::now();
        let mut taking = Taking::default();
        match self.take_all(&mut taking, deadline).await {
            Ok(()) => Ok(MultiLockGuard::new(taking.in_order())),
            Err(error) => Err(taking.give_back(error, started).await),
        }
    }

    /// Takes every lock into `taking`, in rounds: wait (holding nothing) for the
    /// lock a round found busy, then try all the others at once.
    async fn take_all(&self, taking: &mut Taking<S>, deadline: Option<Instant>) -> Result<()> {
        let expired = || deadline.is_some_and(|deadline| deadline <= Instant::now());
        let mut wait_for = None;
        loop {
            if let Some(busy) = wait_for {
                let mutex: &Mutex<S> = &self.mutexes[busy];
                taking.held.push(mutex.acquire(deadline).await?);
            }
            let failed = self.try_others(taking, wait_for, deadline).await;
            let Some((busy, error)) = failed.or_else(|| self.lost_while_taking(taking)) else {
                return Ok(());
            };
            if expired() || !error.is_transient() {
                return Err(error);
            }
            // Never wait while holding a lock: give everything back first.
            release_all(std::mem::take(&mut taking.held)).await;
            // Past the deadline now, the acquire would be one untimed try.
            if expired() {
                return Err(error);
            }
            wait_for = Some(busy);
        }
    }

    /// One `try_lock` of every lock but `except` (the one just waited for), all at
    /// once, cut off at `deadline` (dropped, each try is undone in the background);
    /// after a wait that won its lock at the deadline, 50 ms later. The locks won
    /// go into `taking`. The failure to report, if any: one retrying cannot fix
    /// first, else the first in key order.
    async fn try_others(
        &self,
        taking: &mut Taking<S>,
        except: Option<usize>,
        deadline: Option<Instant>,
    ) -> Option<(usize, Error)> {
        let others: Vec<usize> = (0..self.mutexes.len())
            .filter(|&i| Some(i) != except)
            .collect();
        let first_other = others.first().copied().unwrap_or(0);
        let now = Instant::now();
        let cut_off = match (deadline, except) {
            (Some(deadline), _) if deadline > now => Some(deadline),
            (Some(_), Some(_)) => Some(now + GIVE_BACK_WAIT),
            // `try_lock`: one untimed try of each, as `Mutex::try_lock`.
            _ => None,
        };
        if let Some(at_once) = self.take_at_once(taking, &others, cut_off).await {
            return at_once;
        }
        let tries = join_all(
            others
                .into_iter()
                .map(|i| async move { (i, self.mutexes[i].try_lock().await) }),
        );
        let tries = match cut_off {
            Some(at) => match tokio::time::timeout_at(at.into(), tries).await {
                Ok(tries) => tries,
                Err(_) => return Some((first_other, self.unanswered(first_other))),
            },
            None => tries.await,
        };
        let mut failures = Vec::new();
        for (i, attempt) in tries {
            match attempt {
                Ok(guard) => taking.held.push(guard),
                Err(error) => failures.push((i, error)),
            }
        }
        let lasting = failures.iter().position(|(_, error)| !error.is_transient());
        let pick = lasting.unwrap_or(0);
        (pick < failures.len()).then(|| failures.swap_remove(pick))
    }

    /// A lock whose lease had run out by the end of the round that took the last
    /// of them: one taken first, while the others were taken (a slow round trip),
    /// or one whose grant came back late from the round's one script. No call
    /// returns a guard already lost, so the round counts as failed on it, a
    /// transient failure (its index, and the error to report).
    fn lost_while_taking(&self, taking: &Taking<S>) -> Option<(usize, Error)> {
        let lost = taking.held.iter().find(|guard| guard.is_lost())?;
        let index = self
            .mutexes
            .iter()
            .position(|mutex| mutex.key() == lost.key());
        let error = Error::granted_too_late(lost.store().node());
        Some((index.unwrap_or(0), error))
    }

    /// Busy on lock `i` at the deadline, with no answer to say who holds it.
    fn unanswered(&self, i: usize) -> Error {
        Error::busy(self.mutexes[i].key(), Duration::ZERO, None, None)
    }
}

/// Where the lock `key` on `store` stands in the one order every multi-lock
/// sorts its locks in: by key, then by the store's address.
fn order<'a, S: Pass + WakeUps>(key: &'a LockKey, store: &'a S) -> (&'a str, &'a str) {
    (key.as_str(), store.node())
}

/// The locks one call holds so far.
struct Taking<S: Pass + WakeUps> {
    held: Vec<MutexGuard<S>>,
}

impl<S: Pass + WakeUps> Default for Taking<S> {
    fn default() -> Self {
        Taking { held: Vec::new() }
    }
}

impl<S: Pass + WakeUps> Taking<S> {
    /// The guards, in the order the locks are taken (by key).
    fn in_order(mut self) -> Vec<MutexGuard<S>> {
        self.held
            .sort_by(|a, b| order(a.key(), a.store()).cmp(&order(b.key(), b.store())));
        self.held
    }

    /// Releases what this call took, and says why it failed: for a busy lock, after
    /// the whole time the call waited.
    async fn give_back(self, error: Error, started: Instant) -> Error {
        release_all(self.held).await;
        match error {
            Error::Busy {
                kind,
                name,
                key,
                holder,
                retry_after,
                ..
            } => Error::Busy {
                kind,
                name,
                key,
                waited: started.elapsed(),
                holder,
                retry_after,
            },
            other => other,
        }
    }
}

/// Releases `guards` together, waiting at most [`GIVE_BACK_WAIT`]: a release cut
/// off goes on in the background, as a dropped guard's does.
async fn release_all<S: Pass + WakeUps>(guards: Vec<MutexGuard<S>>) {
    if guards.is_empty() {
        return;
    }
    let releases = join_all(guards.into_iter().map(MutexGuard::release));
    let _ = tokio::time::timeout(GIVE_BACK_WAIT, releases).await;
}
