//! What every guard of one acquisition shares: the hold, the fence, the lease.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex as StdMutex, OnceLock};
use std::time::{Duration, Instant};

use tokio_util::sync::{CancellationToken, DropGuard};

use super::release_on_drop::ReleaseOnDrop;
use crate::lease::{Lease, Ttl};
use crate::store::{Pass, WakeUps};

/// One acquisition. Reentrant guards share it through an `Arc`; the last one to go
/// releases the lock (explicitly, or in the background on drop).
pub(crate) struct Held<S: Pass + WakeUps> {
    // Declared first so they drop first: renewal stops before the release is sent.
    pub(crate) watchdog: Option<DropGuard>,
    /// Watches a fixed lease run out, started on the first `lost_token` call.
    pub(crate) expiry_watch: OnceLock<Option<DropGuard>>,
    pub(crate) hold: ReleaseOnDrop<S>,
    /// The fencing token: from the grant, or computed when first asked for.
    pub(crate) fence: tokio::sync::OnceCell<u64>,
    pub(crate) replicas: Option<u32>,
    pub(crate) lease: Arc<LeaseState>,
}

impl<S: Pass + WakeUps> Held<S> {
    /// Stops the watchdog at once; it sends no renewal after this returns.
    pub(crate) fn stop_renewing(&mut self) {
        drop(self.watchdog.take());
        drop(self.expiry_watch.take());
    }
}

/// How long the lease surely lasts, whether it was lost, and when the hold limit
/// (if any) ends the hold.
///
/// With a lock delay ([`Lease::with_lock_delay`](crate::Lease::with_lock_delay))
/// Redis keeps the lock for the lease plus the delay; the holder counts on the
/// lease alone.
#[derive(Debug)]
pub(crate) struct LeaseState {
    /// The holder's lease: renewals come every third of it.
    pub(crate) ttl: Ttl,
    /// What renewals ask Redis for: the lease and the lock delay.
    pub(crate) in_redis: Ttl,
    delay: Duration,
    /// When Redis frees the lock by itself at the earliest, by our clock.
    redis_ends: StdMutex<Instant>,
    /// The hold limit ([`Lease::with_max_hold`](crate::Lease::with_max_hold)), and
    /// when it ends.
    max_hold: Option<Duration>,
    hold_ends: Option<Instant>,
    /// The lease was lost before the hold limit came (so it is not why).
    lost_before_the_limit: AtomicBool,
    lost: CancellationToken,
}

impl LeaseState {
    /// The state of a hold taken with `lease` that Redis keeps at least until
    /// `redis_ends`.
    pub(crate) fn new(lease: Lease, redis_ends: Instant) -> Self {
        let max_hold = lease.max_hold();
        LeaseState {
            ttl: lease.ttl(),
            in_redis: lease.in_redis(),
            delay: lease.lock_delay(),
            redis_ends: StdMutex::new(redis_ends),
            max_hold,
            hold_ends: max_hold.and_then(|limit| Instant::now().checked_add(limit)),
            lost_before_the_limit: AtomicBool::new(false),
            lost: CancellationToken::new(),
        }
    }

    /// Until when the holder may count on the lock: the lease's end, or the hold
    /// limit's if that comes first.
    pub(crate) fn valid_until(&self) -> Instant {
        let lease_ends = self.lease_ends();
        self.hold_ends
            .map_or(lease_ends, |hold| hold.min(lease_ends))
    }

    pub(crate) fn validity(&self) -> Duration {
        self.valid_until().saturating_duration_since(Instant::now())
    }

    /// Until when the lock surely stays ours in Redis and the holder may count on
    /// it, hold limit or not: what a renewal has to beat.
    fn lease_ends(&self) -> Instant {
        Ttl::lease_end(self.redis_ends(), self.delay)
    }

    /// What is left of the lease, hold limit or not.
    pub(crate) fn lease_left(&self) -> Duration {
        self.lease_ends().saturating_duration_since(Instant::now())
    }

    /// When the lock has surely ended by itself in Redis, lock delay included.
    pub(crate) fn redis_ends(&self) -> Instant {
        *self.redis_ends.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The hold limit (zero when there is none).
    pub(crate) fn max_hold(&self) -> Duration {
        self.max_hold.unwrap_or_default()
    }

    /// Whether the hold limit has been reached (and the lease was not lost for
    /// another reason first).
    pub(crate) fn hold_limit_reached(&self) -> bool {
        self.limit_passed() && !self.lost_before_the_limit.load(Ordering::Relaxed)
    }

    fn limit_passed(&self) -> bool {
        self.hold_ends.is_some_and(|hold| hold <= Instant::now())
    }

    /// What is left of the hold limit, if there is one.
    pub(crate) fn hold_left(&self) -> Option<Duration> {
        self.hold_ends
            .map(|hold| hold.saturating_duration_since(Instant::now()))
    }

    /// Whether the lease as it stands covers the rest of the hold limit, so
    /// renewing it would keep the lock in Redis past the point where the holder
    /// stops counting on it.
    pub(crate) fn covers_the_hold(&self) -> bool {
        self.hold_ends.is_some_and(|hold| hold <= self.lease_ends())
    }

    /// What Redis keeps the lock for when the holder asks for `ttl`: that and the
    /// lock delay.
    pub(crate) fn in_redis_for(&self, ttl: Ttl) -> crate::Result<Ttl> {
        ttl.plus(self.delay)
    }

    /// Redis reset the lock's expiry to `in_redis` for a request sent at `sent`.
    pub(crate) fn renewed(&self, in_redis: Ttl, sent: Instant) {
        *self.redis_ends.lock().unwrap_or_else(|p| p.into_inner()) = in_redis.valid_until(sent);
    }

    /// The lease is gone: tell the holder.
    pub(crate) fn lose(&self) {
        if !self.lost.is_cancelled() && !self.limit_passed() {
            self.lost_before_the_limit.store(true, Ordering::Relaxed);
        }
        self.lost.cancel();
    }

    pub(crate) fn lost(&self) -> &CancellationToken {
        &self.lost
    }

    /// Whether the lease is known lost, or has run out by our clock.
    pub(crate) fn is_lost(&self) -> bool {
        self.lost.is_cancelled() || self.validity().is_zero()
    }

    /// Fires the `lost` signal when the lease runs out, from a task, without anyone
    /// awaiting [`until_lost`](Self::until_lost). Returns the guard that stops it, or
    /// `None` outside a runtime.
    pub(crate) fn watch_expiry(self: &Arc<Self>) -> Option<DropGuard> {
        let runtime = tokio::runtime::Handle::try_current().ok()?;
        let stop = CancellationToken::new();
        let (lease, stopped) = (self.clone(), stop.clone());
        runtime.spawn(async move {
            tokio::select! {
                () = stopped.cancelled() => {}
                () = lease.until_lost() => {}
            }
        });
        Some(stop.drop_guard())
    }

    /// Resolves once the lease is lost: the watchdog said so, or it ran out by our
    /// clock, or the hold limit was reached (then this fires the signal itself). A
    /// renewal in the meantime moves the end, and the wait goes on.
    pub(crate) async fn until_lost(&self) {
        loop {
            let until = self.valid_until();
            tokio::select! {
                () = self.lost.cancelled() => return,
                () = tokio::time::sleep_until(until.into()) => {}
            }
            if self.validity().is_zero() {
                self.lose();
                return;
            }
        }
    }
}
