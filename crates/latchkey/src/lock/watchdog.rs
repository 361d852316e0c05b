//! The watchdog: renews a lease in the background and says when it is lost.
//!
//! The lease is extended every TTL/3 (a lock a release handed over with only what was
//! left of the waiter lease first after a third of that; a fixed lease is then
//! extended just that once, to its full length). If an extend finds the lock no longer ours, or
//! Redis does not answer before the lease would end, the `lost` signal fires at once
//! and the watchdog stops. With a hold limit, renewals stop once the lease covers
//! the rest of it, and `lost` fires when it is reached. No renewal starts once its guard is released or dropped,
//! and the release waits for one already in flight (see [`Stopper`]).
//! The user-facing account is the crate docs' `# Leases` section.

use std::sync::Arc;
use std::time::Instant;

use tokio::runtime::Handle;
use tokio::sync::Mutex as AsyncMutex;
use tokio_util::sync::{CancellationToken, DropGuard};

use super::held::LeaseState;
use super::release_on_drop::ReleaseOnDrop;
use crate::key::LockKey;
use crate::metrics::Meter;
use crate::store::{Pass, WakeUps};
use crate::token::OwnerToken;

/// What the watchdog does for a lease.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Renewals {
    /// A renewed lease: renew it every third of its length while the guard lives;
    /// `top_up`: a handed-over lock, which starts with only what was left of the
    /// waiter lease, is first renewed after a third of that.
    Periodic { top_up: bool },
    /// A fixed lease handed over with only the waiter lease: extend it to the full
    /// lease once, after a third of what it started with.
    TopUpOnce,
}

/// Starts renewing the lease of `hold`, and gives `hold` the [`Stopper`] its release
/// waits on. Returns the guard that stops the renewals when dropped, or `None`
/// outside a runtime (then nothing renews the lease).
pub(crate) fn spawn<S: Pass + WakeUps>(
    hold: &mut ReleaseOnDrop<S>,
    lease: Arc<LeaseState>,
    renewals: Renewals,
) -> Option<DropGuard> {
    let runtime = Handle::try_current().ok()?;
    let stopper = Stopper {
        stop: CancellationToken::new(),
        renewing: Arc::new(AsyncMutex::new(())),
    };
    let watchdog = Watchdog {
        store: hold.store.clone(),
        key: hold.key.clone(),
        owner: hold.owner.clone(),
        lease,
        stopper: stopper.clone(),
        renewals,
    };
    runtime.spawn(watchdog.run());
    let stop = stopper.stop.clone();
    hold.stopper = Some(stopper);
    Some(stop.drop_guard())
}

/// Stops a watchdog for good. A renewal already sent is not cut off (on a quorum it
/// may be between rounds, with a take-back still to send): [`stop`](Self::stop)
/// waits for it to end, so a release sent afterwards can never be followed by a
/// renewal that recreates the lock.
#[derive(Clone, Debug)]
pub(crate) struct Stopper {
    stop: CancellationToken,
    /// Held by the watchdog for the whole of each renewal.
    renewing: Arc<AsyncMutex<()>>,
}

impl Stopper {
    /// Stops the renewals; once this returns, none is in flight and none will start.
    /// A renewal ends within its own deadline (the reply timeout, or a quorum's
    /// per-node deadlines), so this waits at most that long.
    pub(crate) async fn stop(&self) {
        self.stop.cancel();
        drop(self.renewing.lock().await);
    }
}

struct Watchdog<S: Pass + WakeUps> {
    store: S,
    key: LockKey,
    owner: OwnerToken,
    lease: Arc<LeaseState>,
    stopper: Stopper,
    renewals: Renewals,
}

impl<S: Pass + WakeUps> Watchdog<S> {
    async fn run(self) {
        let period = self.lease.ttl.as_duration() / 3;
        let mut pause = match self.renewals {
            Renewals::Periodic { top_up: false } => period,
            // A handed-over lock runs on what was left of the waiter lease: extend it
            // once a third of that has gone, as for any lease, so a short critical
            // section (the common case) costs no extension at all.
            Renewals::Periodic { top_up: true } | Renewals::TopUpOnce => {
                self.lease.lease_left() / 3
            }
        };
        loop {
            let until = self.lease.valid_until();
            let wake = Instant::now()
                .checked_add(pause)
                .map_or(until, |at| at.min(until));
            tokio::select! {
                () = self.stopper.stop.cancelled() => return,
                () = tokio::time::sleep_until(wake.into()) => {}
            }
            // Held through the renewal: a release waits for it (see `Stopper`).
            let _renewing = self.stopper.renewing.lock().await;
            if self.stopper.stop.is_cancelled() {
                return;
            }
            if self.lease.hold_limit_reached() {
                tracing::info!(key = %self.key, "hold limit reached: no more renewals, and `lost` fires");
                self.lease.lose();
                return;
            }
            if self.lease.lease_left().is_zero() {
                tracing::warn!(key = %self.key, "lease ran out under its holder");
                self.lost();
                return;
            }
            if self.lease.covers_the_hold() {
                // Wake at the hold limit (`valid_until` is capped by it), no sooner.
                pause = self.lease.validity();
                continue;
            }
            pause = match self.renew().await {
                Renewal::Done if matches!(self.renewals, Renewals::TopUpOnce) => return,
                Renewal::Done => period,
                Renewal::Retry => self.lease.ttl.as_duration() / 10,
                Renewal::Lost => {
                    self.lost();
                    return;
                }
            };
        }
    }

    /// The lease is gone under its holder: `lost` fires.
    fn lost(&self) {
        self.meter().lease_lost();
        self.lease.lose();
    }

    fn meter(&self) -> Meter<'_> {
        Meter::new(self.store.deployment(), &self.key)
    }

    /// One extend, given no longer than what is left of the lease.
    async fn renew(&self) -> Renewal {
        let sent = Instant::now();
        let budget = self.lease.lease_left();
        let extend = self
            .store
            .extend(&self.key, &self.owner, self.lease.in_redis);
        let renewed = tokio::time::timeout(budget, extend).await;
        self.meter().renewed(matches!(renewed, Ok(Ok(true))));
        match renewed {
            Ok(Ok(true)) => {
                self.lease.renewed(self.lease.in_redis, sent);
                Renewal::Done
            }
            Ok(Ok(false)) => {
                tracing::warn!(key = %self.key, "lease lost: the lock is no longer ours");
                Renewal::Lost
            }
            Ok(Err(error)) => {
                tracing::warn!(key = %self.key, %error, "lease renewal failed; retrying while the lease lasts");
                Renewal::Retry
            }
            Err(_) => {
                tracing::warn!(key = %self.key, "lease lost: Redis did not answer before it ran out");
                Renewal::Lost
            }
        }
    }
}

enum Renewal {
    Done,
    Retry,
    Lost,
}
