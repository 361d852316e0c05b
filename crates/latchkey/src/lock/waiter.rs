//! How a caller waits for a lock: without polling in a loop.
//!
//! The first attempt just tries. If the lock is busy, the waiter subscribes to the
//! lock's channel (one shared connection per store), joins the wait queue and sleeps
//! until a release names it, or until a timer bounded by the holder's remaining lease
//! and a third of the waiter lease runs out (a lost message or a crashed holder costs
//! at most that). Each attempt renews the waiter's lease, so a waiter that dies is
//! dropped from the queue within its lease. Giving up or being dropped leaves the
//! queue at once, passing on the lock if a release had just handed it over.

use std::time::{Duration, Instant};

use super::backoff::Backoff;
use super::release_on_drop::ReleaseOnDrop;
use crate::error::{Error, Result};
use crate::key::LockKey;
use crate::lease::Ttl;
use crate::store::{AcquireRequest, Attempt, LockStore, Watch};
use crate::token::OwnerToken;

/// The shortest pause between attempts, so even a lease about to end never spins.
const MIN_PAUSE: Duration = Duration::from_millis(1);

/// What a waiter wants.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Wait {
    pub(crate) ttl: Ttl,
    pub(crate) fair: bool,
    pub(crate) waiter_lease: Ttl,
    pub(crate) deadline: Option<Instant>,
}

/// A lock that is ours: the hold (armed), its fencing token, and when the winning
/// request was sent (the lease counts from then).
pub(crate) struct Won<S: LockStore> {
    pub(crate) hold: ReleaseOnDrop<S>,
    pub(crate) fence: u64,
    pub(crate) sent: Instant,
}

/// Attempts until the lock is ours or the deadline passes.
pub(crate) async fn acquire<S: LockStore>(store: &S, key: &LockKey, wait: Wait) -> Result<Won<S>> {
    let started = Instant::now();
    let owner = OwnerToken::generate()?;
    let mut hold = ReleaseOnDrop::new(store.clone(), key.clone(), owner);
    let mut request = AcquireRequest {
        ttl: wait.ttl,
        fair: wait.fair,
        queue_lease: None,
    };
    // Others in this process already wait here: queue at once, skipping a try
    // that would most likely fail.
    let mut watch: Option<Watch> = match wait.deadline {
        Some(deadline) if deadline <= started => None,
        _ => store.join_watch(key, &hold.owner),
    };
    if watch.is_some() {
        request.queue_lease = Some(wait.waiter_lease);
    }
    let mut backoff = Backoff::default();
    loop {
        // Armed while a request is in flight or we sit in the queue: a drop now must
        // undo whatever the request did or a release handed us.
        hold.arm();
        hold.queued |= request.queue_lease.is_some();
        let sent = Instant::now();
        let pttl = match store.try_acquire(key, &hold.owner, request).await {
            Ok(Attempt::Acquired { fence }) => {
                hold.queued = false;
                return Ok(Won { hold, fence, sent });
            }
            Ok(Attempt::Busy { pttl }) => pttl,
            Err(error) => {
                if !error.outcome_unknown() && !hold.queued {
                    hold.disarm();
                }
                return Err(error);
            }
        };
        if !hold.queued {
            hold.disarm();
        }
        let now = Instant::now();
        if wait.deadline.is_some_and(|deadline| deadline <= now) {
            give_up(&mut hold).await;
            return Err(Error::Busy {
                key: key.to_string(),
                waited: started.elapsed(),
                retry_after: pttl,
            });
        }
        let Some(watch) = &watch else {
            // Busy: listen before queueing, so no wake-up can slip between the two.
            watch = Some(store.watch(key, &hold.owner).await?);
            request.queue_lease = Some(wait.waiter_lease);
            continue;
        };
        let pause = match watch.is_live() {
            true => pttl
                .unwrap_or(Duration::MAX)
                .min(wait.waiter_lease.as_duration() / 3),
            false => backoff.next_pause(pttl),
        };
        let pause = wait
            .deadline
            .map_or(pause, |deadline| pause.min(deadline - now))
            .max(MIN_PAUSE);
        tokio::select! {
            () = watch.notified() => {}
            () = tokio::time::sleep(pause) => {}
        }
    }
}

/// Leaves the queue now; if that fails, the armed hold retries when dropped.
async fn give_up<S: LockStore>(hold: &mut ReleaseOnDrop<S>) {
    if !hold.queued {
        return;
    }
    if let Err(error) = hold.release().await {
        tracing::warn!(key = %hold.key, %error, "could not leave the wait queue; retrying in the background");
    }
}
