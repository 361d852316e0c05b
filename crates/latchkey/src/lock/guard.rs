//! The guard: proof of holding a lock, for as long as it lives.

use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::held::{Held, LeaseState};
use super::hold_token::HoldToken;
use super::waiter::Won;
use super::watchdog::{self, Renewals};
use crate::error::{Error, Result};
use crate::key::LockKey;
use crate::lease::{Lease, Ttl};
use crate::store::{Pass, RedisStore, WakeUps};
use crate::token::OwnerToken;
use crate::transaction::{Held as HeldLock, Transaction};

/// A held lock. Its life is the critical section.
///
/// Call [`release`](Self::release) to free the lock and learn whether it was still
/// ours. Dropping the guard instead releases it in the background on the runtime it
/// was taken on: the drop never blocks and never panics (see
/// [Cancel safety](crate#cancel-safety)). While the guard lives, a watchdog renews a
/// renewed lease; [`lost`](Self::lost) says when the lease is gone (see
/// [Leases](crate#leases)).
///
/// ```no_run
/// # async fn demo(mutex: latchkey::Mutex) -> latchkey::Result<()> {
/// let guard = mutex.lock().await?;
/// let token = guard.fence().await?; // hand this to the resource you write to
/// tokio::select! {
///     () = guard.lost() => eprintln!("lease lost: stop writing"),
///     () = tokio::time::sleep(std::time::Duration::from_secs(1)) => {}
/// }
/// let was_ours = guard.release().await?;
/// # Ok(()) }
/// ```
#[must_use = "dropping the guard releases the lock at once"]
pub struct MutexGuard<S: Pass + WakeUps = RedisStore> {
    held: Arc<Held<S>>,
}

impl<S: Pass + WakeUps> MutexGuard<S> {
    pub(crate) fn new(won: Won<S>, lease: Lease) -> Self {
        let Won {
            mut hold,
            fence,
            valid_until,
            top_up,
            replicas,
        } = won;
        let state = Arc::new(LeaseState::new(lease, valid_until));
        // A fixed lease needs no task (`lost()` watches the clock itself) unless it
        // was handed over with only the waiter lease and must be extended once.
        let renewals = match (lease.is_renewed(), top_up) {
            (true, top_up) => Some(Renewals::Periodic { top_up }),
            (false, true) => Some(Renewals::TopUpOnce),
            (false, false) => None,
        };
        hold.lease = Some(state.clone());
        hold.began(fence);
        let watchdog =
            renewals.and_then(|renewals| watchdog::spawn(&mut hold, state.clone(), renewals));
        MutexGuard {
            held: Arc::new(Held {
                watchdog,
                expiry_watch: OnceLock::new(),
                hold,
                fence: tokio::sync::OnceCell::new_with(fence),
                replicas,
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
    ///
    /// ```no_run
    /// # async fn demo(mutex: latchkey::Mutex) -> latchkey::Result<()> {
    /// let guard = mutex.lock().await?;
    /// assert_eq!(guard.hold_count(), 1);
    /// # Ok(()) }
    /// ```
    pub fn hold_count(&self) -> usize {
        Arc::strong_count(&self.held)
    }

    /// The fencing token: strictly larger than that of every earlier holder of this
    /// lock. Send it with every write to the protected resource and have the resource
    /// refuse tokens lower than the highest it has seen; a holder that stalled past
    /// its lease then cannot overwrite the next holder's work. See
    /// [Fencing](crate#fencing).
    ///
    /// The token comes with the grant when the mutex asked for it
    /// ([`Fencing::OnGrant`](crate::Fencing)), handovers and passes included; else
    /// the first call computes it in one round trip, checking in the same script that
    /// the lock is still ours, and later calls (and re-entered guards) reuse it.
    ///
    /// # Errors
    ///
    /// [`Error::LeaseLost`] if the lock is no longer ours (the lease ended or was
    /// broken) before a token was computed; the errors a reply can carry (a
    /// transient one may be retried).
    ///
    /// ```no_run
    /// # async fn demo(mutex: latchkey::Mutex) -> latchkey::Result<()> {
    /// # fn write_invoice(total: u64, fence: u64) {}
    /// let guard = mutex.lock().await?;
    /// // The store keeps the highest fence it accepted and refuses lower ones.
    /// write_invoice(120, guard.fence().await?);
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn fence(&self) -> Result<u64> {
        self.check_hold_limit()?;
        let held = &self.held;
        let computed = held.fence.get_or_try_init(|| async {
            let hold = &held.hold;
            if held.lease.is_lost() {
                return Err(Error::lease_lost(&hold.key));
            }
            match hold.store.fence(&hold.key, &hold.owner).await? {
                Some(fence) => Ok(fence),
                None => {
                    held.lease.lose();
                    Err(Error::lease_lost(&hold.key))
                }
            }
        });
        computed.await.copied()
    }

    /// The fencing token if it is known already (it came with the grant, or
    /// [`fence`](Self::fence) computed it), without a round trip.
    ///
    /// ```no_run
    /// # async fn demo(mutex: latchkey::Mutex) -> latchkey::Result<()> {
    /// let guard = mutex.with_fencing(latchkey::Fencing::OnGrant).lock().await?;
    /// assert!(guard.known_fence().is_some());
    /// # Ok(()) }
    /// ```
    pub fn known_fence(&self) -> Option<u64> {
        self.held.fence.get().copied()
    }

    /// How many replicas confirmed that they have this lock (`WAIT`), when the
    /// store was asked to wait for them
    /// ([`RedisStore::with_wait_replicas`](crate::store::RedisStore::with_wait_replicas));
    /// `None` otherwise, and for a lock another task of this process passed on.
    ///
    /// ```no_run
    /// # async fn demo() -> latchkey::Result<()> {
    /// let client = latchkey::Client::open("redis://127.0.0.1:6379").await?
    ///     .with_wait_replicas(1, std::time::Duration::from_millis(100))?;
    /// let guard = client.mutex("payout")?.lock().await?;
    /// assert!(guard.replicas() >= Some(1));
    /// # Ok(()) }
    /// ```
    pub fn replicas(&self) -> Option<u32> {
        self.held.replicas
    }

    /// The lock's Redis key.
    ///
    /// ```no_run
    /// # async fn demo(mutex: latchkey::Mutex) -> latchkey::Result<()> {
    /// let guard = mutex.lock().await?;
    /// assert_eq!(guard.key(), mutex.key());
    /// # Ok(()) }
    /// ```
    pub fn key(&self) -> &LockKey {
        &self.held.hold.key
    }

    /// This holder's owner token (its `Debug` output is masked). The lock key holds
    /// it while the lock is ours; on a [quorum](crate::quorum), each attempt writes
    /// `N/` and this token, so a late release of an earlier attempt deletes nothing
    /// of a later one.
    ///
    /// ```no_run
    /// # async fn demo(mutex: latchkey::Mutex) -> latchkey::Result<()> {
    /// let guard = mutex.lock().await?;
    /// println!("held by {}", guard.owner().masked());
    /// # Ok(()) }
    /// ```
    pub fn owner(&self) -> &OwnerToken {
        &self.held.hold.owner
    }

    /// How much longer the lease surely lasts, by our own clock: the TTL counted from
    /// when the acquire (or last renewal) was *sent*, less a 1 % + 2 ms drift
    /// allowance. Zero once that time has passed. No round trip. See
    /// [Leases](crate#leases).
    ///
    /// ```no_run
    /// # async fn demo(mutex: latchkey::Mutex) -> latchkey::Result<()> {
    /// let guard = mutex.lock().await?;
    /// if guard.validity() < std::time::Duration::from_secs(1) {
    ///     println!("too little time left to start another step");
    /// }
    /// # Ok(()) }
    /// ```
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

    /// Resolves as soon as the lease is known lost: a renewal or an
    /// [`extend`](Self::extend) found the lock taken, Redis did not answer before the
    /// lease ran out, or the lease ran out by our clock. Resolves at once if the lease
    /// is already lost, and never while it lasts. Select on it to stop work the lock no
    /// longer protects (see [Leases](crate#leases)), or use
    /// [`Mutex::with_lock`](crate::Mutex::with_lock), which does.
    ///
    /// The future does not borrow the guard (it is `Send + 'static`), so it can move
    /// into another task.
    ///
    /// # Cancel safety
    ///
    /// Dropping it has no effect on the lock or the lease; call `lost()` again to
    /// wait again.
    ///
    /// ```no_run
    /// # async fn demo(mutex: latchkey::Mutex) -> latchkey::Result<()> {
    /// # async fn rebuild_index() {}
    /// let guard = mutex.lock().await?;
    /// tokio::select! {
    ///     () = rebuild_index() => {}
    ///     () = guard.lost() => eprintln!("lease lost: stop writing"),
    /// }
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
        let lease = self.held.lease.clone();
        async move { lease.until_lost().await }
    }

    /// The `lost` signal as a token, to hand to code that takes a `CancellationToken`.
    /// It is cancelled when [`lost`](Self::lost) would resolve.
    ///
    /// With a fixed lease nothing renews, so the first call starts a small task that
    /// cancels the token when the lease runs out by our clock. That needs a tokio
    /// runtime: called on a thread outside one, the token is cancelled only when an
    /// [`extend`](Self::extend) finds the lock gone, so check
    /// [`is_lost`](Self::is_lost) as well.
    ///
    /// ```no_run
    /// # async fn demo(mutex: latchkey::Mutex) -> latchkey::Result<()> {
    /// let guard = mutex.lock().await?;
    /// let lost = guard.lost_token();
    /// tokio::spawn(async move {
    ///     while !lost.is_cancelled() {
    ///         // one step of work
    /// #       break;
    ///     }
    /// });
    /// # Ok(()) }
    /// ```
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

    /// Whether the lease is known lost or has run out by our clock. No round trip;
    /// [`is_held`](Self::is_held) asks Redis.
    ///
    /// ```no_run
    /// # async fn demo(mutex: latchkey::Mutex) -> latchkey::Result<()> {
    /// # async fn migrate_batch(batch: u32) {}
    /// let guard = mutex.lock().await?;
    /// for batch in 0..10 {
    ///     if guard.is_lost() {
    ///         break; // the lock no longer protects us
    ///     }
    ///     migrate_batch(batch).await;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn is_lost(&self) -> bool {
        self.held.lease.is_lost()
    }

    /// Whether the hold reached the limit its lease set
    /// ([`Lease::with_max_hold`]): then [`is_lost`](Self::is_lost) is true too, for
    /// this reason rather than a lost lease.
    ///
    /// ```no_run
    /// # async fn demo(mutex: latchkey::Mutex) -> latchkey::Result<()> {
    /// let guard = mutex.lock().await?;
    /// guard.lost().await;
    /// if guard.hold_limit_reached() {
    ///     eprintln!("held too long: giving up");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn hold_limit_reached(&self) -> bool {
        self.held.lease.hold_limit_reached()
    }

    /// Resets the lease to `ttl` from now (it is reset, not added to: extending a lease
    /// with 3 s left by 10 s leaves 10 s), if the lock is still ours. One round trip,
    /// not retried. The guard's [`validity`](Self::validity) then counts from when the
    /// request was sent.
    ///
    /// Meant for a fixed lease. With a renewed lease the watchdog keeps its own
    /// schedule: its next renewal resets the lease to the [`Lease`]'s TTL again, and an
    /// extend shorter than the time to that renewal lets the lease run out first.
    ///
    /// # Errors
    ///
    /// - [`Error::InvalidArgument`] for a `ttl` below 1 ms or above ten years (nothing
    ///   is sent). A `ttl` of a few milliseconds is accepted but runs out, by our
    ///   clock, almost at once;
    /// - [`Error::LeaseLost`] if the lock is no longer ours; the `lost` signal fires;
    /// - [`Error::Unreachable`] and the other errors a reply can carry. The lease may
    ///   or may not have been reset; the guard keeps its earlier idea of the lease,
    ///   and `lost` does not fire.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future may or may not have reset the lease in Redis. The guard
    /// keeps its earlier idea of the lease, which errs on the short side.
    ///
    /// ```no_run
    /// # async fn demo(mutex: latchkey::Mutex) -> latchkey::Result<()> {
    /// use std::time::Duration;
    ///
    /// let mutex = mutex.with_lease(latchkey::Lease::fixed(Duration::from_secs(5))?);
    /// let guard = mutex.lock().await?;
    /// // ... the work takes longer than planned:
    /// guard.extend(Duration::from_secs(5)).await?; // 5 s from now
    /// # Ok(()) }
    /// ```
    pub async fn extend(&self, ttl: Duration) -> Result<()> {
        let ttl = Ttl::at_least(ttl, Lease::MIN_FIXED, "an extension")?;
        self.check_hold_limit()?;
        let lease = &self.held.lease;
        // Never past the hold limit (by more than the shortest extension).
        let ttl = match lease.hold_left() {
            Some(left) if left < ttl.as_duration() => {
                Ttl::new(left.max(Lease::MIN_FIXED)).unwrap_or(ttl)
            }
            _ => ttl,
        };
        let in_redis = lease.in_redis_for(ttl)?;
        let sent = Instant::now();
        let hold = &self.held.hold;
        if !hold.store.extend(&hold.key, &hold.owner, in_redis).await? {
            lease.lose();
            return Err(Error::lease_lost(&hold.key));
        }
        lease.renewed(in_redis, sent);
        Ok(())
    }

    /// The error for a hold that ended under its holder: [`Error::HoldLimit`] if
    /// the limit ended it, else [`Error::LeaseLost`].
    pub(crate) fn lost_error(&self) -> Error {
        self.check_hold_limit()
            .err()
            .unwrap_or_else(|| Error::lease_lost(&self.held.hold.key))
    }

    /// [`Error::HoldLimit`] once the hold limit is reached.
    fn check_hold_limit(&self) -> Result<()> {
        let lease = &self.held.lease;
        match lease.hold_limit_reached() {
            true => Err(Error::hold_limit(&self.held.hold.key, lease.max_hold())),
            false => Ok(()),
        }
    }

    /// Asks Redis whether the lock still holds our owner token: one GET. It does not
    /// change the guard: a `false` here does not fire `lost`.
    ///
    /// # Errors
    ///
    /// [`Error::Unreachable`], [`Error::WrongType`] (someone replaced the key with a
    /// value of another type) and the other errors a reply can carry. Not retried.
    ///
    /// # Cancel safety
    ///
    /// It only reads: dropping the future has no effect.
    ///
    /// ```no_run
    /// # async fn demo(mutex: latchkey::Mutex) -> latchkey::Result<()> {
    /// let guard = mutex.lock().await?;
    /// assert!(guard.is_held().await?);
    /// # Ok(()) }
    /// ```
    pub async fn is_held(&self) -> Result<bool> {
        let hold = &self.held.hold;
        hold.store.holds(&hold.key, &hold.owner).await
    }

    /// Hands the hold off: stops renewing and returns the token with which any
    /// process can [`adopt`](crate::Mutex::adopt), [`extend`](crate::Mutex::extend_held)
    /// or [`release`](crate::Mutex::release_held) it. The lock stays held in Redis
    /// until one of those, or until its lease ends (a fixed lease's end, or at most
    /// one lease from the last renewal): nothing renews it meanwhile. Tasks of this
    /// process waiting for it wait in Redis from now on.
    ///
    /// Only a lock on one Redis deployment can be handed off: a quorum's values and a
    /// semaphore's permits are not what a token names.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] while other guards of this acquisition
    /// ([`reenter`](Self::reenter)) live (drop them first), or for a hold on a
    /// store that cannot hand one off (a quorum, a semaphore). The guard is then
    /// dropped, which releases the lock when the last of them goes.
    ///
    /// ```no_run
    /// # async fn demo(mutex: latchkey::Mutex) -> latchkey::Result<()> {
    /// let token = mutex.lock().await?.detach()?;
    /// println!("give this to the worker: {token}");
    /// # Ok(()) }
    /// ```
    pub fn detach(self) -> Result<HoldToken> {
        can_hand_off(&self.held.hold.store)?;
        self.check_hold_limit()?;
        let mut held = Arc::try_unwrap(self.held).map_err(|_| {
            Error::InvalidArgument(
                "cannot detach a hold that other guards (reenter) still share: drop them first"
                    .to_owned(),
            )
        })?;
        held.stop_renewing();
        held.hold.detach();
        Ok(HoldToken::new(
            held.hold.owner.clone(),
            held.fence.get().copied(),
        ))
    }

    /// Gives up this guard. The last guard of an acquisition stops the renewal and
    /// frees the lock: it passes it to a task of this process waiting for it (plain
    /// locks, when nobody waits in Redis), or hands it to the oldest live waiter in
    /// the Redis queue and wakes that one, or deletes the key. `Ok(true)` when it was
    /// still ours, `Ok(false)` when it had expired or been broken, i.e. the critical
    /// section ran (partly) unprotected.
    ///
    /// A re-entered guard that is not the last only drops its count, with no round
    /// trip; it answers `Ok(false)` if the lease is already known lost.
    ///
    /// Renewal stops first, and a renewal already in flight is waited for, so none
    /// runs after the release. A transient failure (a reset connection, a reply that
    /// timed out, a server loading its data) is retried on a fresh connection, with
    /// capped backoff (10 ms doubling to 250 ms), for up to 3 s while the lease lasts;
    /// a retry that finds the lock gone after a try whose reply was lost counts it
    /// as ours.
    ///
    /// # Errors
    ///
    /// [`Error::Unreachable`] and the other errors a reply can carry, once the 3 s
    /// have passed (or at once, for an error a retry cannot mend). The lock is then
    /// still released: the tries go on in the background until they land or the
    /// lease has ended ([`finish_background_releases`](crate::finish_background_releases)
    /// waits for them).
    ///
    /// # Cancel safety
    ///
    /// Dropping the future still releases the lock, in the background, as dropping
    /// the guard does.
    ///
    /// ```no_run
    /// # async fn demo(mutex: latchkey::Mutex) -> latchkey::Result<()> {
    /// let guard = mutex.lock().await?;
    /// // ... critical section ...
    /// if !guard.release().await? {
    ///     eprintln!("the lease ran out before we were done: check the work");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn release(self) -> Result<bool> {
        let mut held = match Arc::try_unwrap(self.held) {
            Ok(held) => held,
            Err(shared) => return Ok(!shared.lease.is_lost()),
        };
        held.stop_renewing();
        held.hold.release().await
    }
}

impl<S: Pass + WakeUps> super::section::Hold for MutexGuard<S> {
    fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
        MutexGuard::lost(self)
    }

    fn lost_error(&self) -> Error {
        MutexGuard::lost_error(self)
    }

    fn release(self) -> impl Future<Output = Result<bool>> + Send {
        MutexGuard::release(self)
    }
}

/// What a trade of a hold for another needs (a read-write lock's downgrade).
impl<S: Pass + WakeUps> MutexGuard<S> {
    /// The store the lock is held in.
    pub(crate) fn store(&self) -> &S {
        &self.held.hold.store
    }

    /// The hold itself, its renewals stopped; dropped, it still releases the lock.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] while other guards of this acquisition
    /// ([`reenter`](Self::reenter)) live.
    pub(crate) fn into_held(self) -> Result<Held<S>> {
        let mut held = Arc::try_unwrap(self.held).map_err(|_| {
            Error::InvalidArgument(
                "cannot trade a hold that other guards (reenter) still share: drop them first"
                    .to_owned(),
            )
        })?;
        held.stop_renewing();
        Ok(held)
    }
}

/// Transactions fenced by Redis itself, for a lock on one Redis deployment.
impl MutexGuard<RedisStore> {
    /// An optimistic [`Transaction`] on `keys` that also WATCHes this lock's key
    /// and its fencing counter, and checks after the WATCH that the lock is still
    /// ours. If the lease ran out, the lock was broken or changed hands before the
    /// EXEC, Redis refuses the EXEC and the run ends with [`Error::LeaseLost`]:
    /// fencing enforced by the server, when the data the lock protects lives in the
    /// same Redis.
    ///
    /// The keys and the lock must share a Redis Cluster hash slot: name the lock
    /// and the keys with one `{tag}` (lock `{acct:7}:lock`, data `{acct:7}:balance`).
    /// A renewal by the watchdog touches the lock key too, so an attempt that
    /// overlaps one is tried again.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for no keys, or keys outside the lock's slot.
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// let guard = client.mutex("{acct:7}:lock")?.lock().await?;
    /// let written: Option<()> = guard
    ///     .transaction(&["{acct:7}:balance"])?
    ///     .run(|reads| async move {
    ///         let balance: i64 = reads.get("{acct:7}:balance").await?;
    ///         let mut writes = latchkey::redis::pipe();
    ///         writes.set("{acct:7}:balance", balance + 5).ignore();
    ///         Ok(Some(writes))
    ///     })
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn transaction(&self, keys: &[&str]) -> Result<Transaction> {
        let hold = &self.held.hold;
        let held = HeldLock {
            key: hold.key.as_str().to_owned(),
            owner: hold.owner.as_str().to_owned(),
        };
        let lock_keys = vec![hold.key.as_str().to_owned(), hold.key.fence().to_owned()];
        Transaction::new(hold.store.clone(), keys, Some((held, lock_keys)))
    }
}

impl<S: Pass + WakeUps> std::fmt::Debug for MutexGuard<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MutexGuard")
            .field("key", &self.key().as_str())
            .field("owner", self.owner())
            .field("fence", &self.known_fence())
            .field("validity", &self.validity())
            .field("lost", &self.is_lost())
            .finish()
    }
}

/// Refuses a hand-off on a store whose holds a token cannot name.
pub(crate) fn can_hand_off(store: &impl Pass) -> Result<()> {
    match store.hands_over() {
        true => Ok(()),
        false => Err(Error::InvalidArgument(
            "this hold cannot be handed to another process: only locks on one Redis \
             deployment can (not a quorum's, not a semaphore's permits)"
                .to_owned(),
        )),
    }
}
