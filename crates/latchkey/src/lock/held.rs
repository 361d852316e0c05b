//! What every guard of one acquisition shares: the hold, the fence, the lease.

use std::sync::{Arc, Mutex as StdMutex, OnceLock};
use std::time::{Duration, Instant};

use tokio_util::sync::{CancellationToken, DropGuard};

use super::release_on_drop::ReleaseOnDrop;
use crate::lease::Ttl;
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

/// How long the lease surely lasts, and whether it was lost.
#[derive(Debug)]
pub(crate) struct LeaseState {
    pub(crate) ttl: Ttl,
    valid_until: StdMutex<Instant>,
    lost: CancellationToken,
}

impl LeaseState {
    /// A lease of `ttl` (renewals ask for that) that is surely ours until `valid_until`.
    pub(crate) fn new(ttl: Ttl, valid_until: Instant) -> Self {
        LeaseState {
            ttl,
            valid_until: StdMutex::new(valid_until),
            lost: CancellationToken::new(),
        }
    }

    pub(crate) fn valid_until(&self) -> Instant {
        *self.valid_until.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn validity(&self) -> Duration {
        self.valid_until().saturating_duration_since(Instant::now())
    }

    /// Redis reset the lease to `ttl` for a request sent at `sent`.
    pub(crate) fn renewed(&self, ttl: Ttl, sent: Instant) {
        *self.valid_until.lock().unwrap_or_else(|p| p.into_inner()) = ttl.valid_until(sent);
    }

    /// The lease is gone: tell the holder.
    pub(crate) fn lose(&self) {
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
    /// clock (then this fires the signal itself). A renewal in the meantime moves the
    /// end, and the wait goes on.
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
