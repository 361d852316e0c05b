//! The watchdog: renews a lease in the background and says when it is lost.
//!
//! A renewed lease is extended every TTL/3. If an extend finds the lock no longer
//! ours, or Redis does not answer before the lease would end, the `lost` signal fires
//! at once and the watchdog stops. A fixed lease is only watched: `lost` fires when
//! it runs out. Either way the task ends the moment its guard is released or dropped.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::runtime::Handle;
use tokio_util::sync::{CancellationToken, DropGuard};

use super::held::LeaseState;
use crate::key::LockKey;
use crate::store::LockStore;
use crate::token::OwnerToken;

/// Starts watching (and, with `renew`, renewing) a lease. Returns the guard that
/// stops it, or `None` outside a runtime (then nothing renews the lease).
pub(crate) fn spawn<S: LockStore>(
    store: S,
    key: LockKey,
    owner: OwnerToken,
    lease: Arc<LeaseState>,
    renew: bool,
) -> Option<DropGuard> {
    let runtime = Handle::try_current().ok()?;
    let stop = CancellationToken::new();
    let watchdog = Watchdog {
        store,
        key,
        owner,
        lease,
        stop: stop.clone(),
    };
    runtime.spawn(watchdog.run(renew));
    Some(stop.drop_guard())
}

struct Watchdog<S: LockStore> {
    store: S,
    key: LockKey,
    owner: OwnerToken,
    lease: Arc<LeaseState>,
    stop: CancellationToken,
}

impl<S: LockStore> Watchdog<S> {
    async fn run(self, renew: bool) {
        let mut pause = self.renewal_period(renew);
        loop {
            let until = self.lease.valid_until();
            let wake = Instant::now()
                .checked_add(pause)
                .map_or(until, |at| at.min(until));
            tokio::select! {
                () = self.stop.cancelled() => return,
                () = tokio::time::sleep_until(wake.into()) => {}
            }
            if self.stop.is_cancelled() {
                return;
            }
            if self.lease.validity().is_zero() {
                tracing::warn!(key = %self.key, "lease ran out under its holder");
                self.lease.lose();
                return;
            }
            if !renew {
                continue;
            }
            pause = match self.renew().await {
                Renewal::Done => self.renewal_period(renew),
                Renewal::Retry => self.lease.ttl.as_duration() / 10,
                Renewal::Lost => {
                    self.lease.lose();
                    return;
                }
            };
        }
    }

    fn renewal_period(&self, renew: bool) -> Duration {
        match renew {
            true => self.lease.ttl.as_duration() / 3,
            false => Duration::MAX / 4,
        }
    }

    /// One extend, given no longer than what is left of the lease.
    async fn renew(&self) -> Renewal {
        let sent = Instant::now();
        let budget = self.lease.validity();
        let extend = self.store.extend(&self.key, &self.owner, self.lease.ttl);
        match tokio::time::timeout(budget, extend).await {
            Ok(Ok(true)) => {
                self.lease.renewed(self.lease.ttl, sent);
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
