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
use super::local::{LocalLocks, Turn};
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

/// Takes the lock: from a task of this process that holds it (`local`, plain locks
/// only), or through Redis.
pub(crate) async fn acquire<S: LockStore>(
    store: &S,
    key: &LockKey,
    wait: Wait,
    local: Option<&LocalLocks>,
) -> Result<Won<S>> {
    let started = Instant::now();
    let owner = OwnerToken::generate()?;
    let may_wait = wait.deadline.is_none_or(|deadline| deadline > started);
    if let Some(local) = local.filter(|_| may_wait) {
        if let Some(won) = wait_for_local_pass(store, key, &owner, wait, local).await? {
            return Ok(won);
        }
    }
    let _counted = local.map(|local| local.redis_waiter(key));
    let won = acquire_in_redis(store, key, wait, owner, started).await?;
    if let Some(local) = local {
        local.mark_held(key);
    }
    Ok(won)
}

/// Waits behind the local holder, if this process has one. `None`: go through Redis.
async fn wait_for_local_pass<S: LockStore>(
    store: &S,
    key: &LockKey,
    owner: &OwnerToken,
    wait: Wait,
    local: &LocalLocks,
) -> Result<Option<Won<S>>> {
    let Some(mut turn) = local.wait_behind_holder(key, owner, wait.ttl) else {
        return Ok(None);
    };
    let started = Instant::now();
    let period = wait.waiter_lease.as_duration() / 3;
    loop {
        let now = Instant::now();
        if wait.deadline.is_some_and(|deadline| deadline <= now) {
            return Err(busy(key, started, None));
        }
        let pause = wait.deadline.map_or(period, |d| period.min(d - now));
        tokio::select! {
            told = &mut turn => return Ok(match told {
                Ok(Turn::Yours { fence, sent }) => {
                    let mut hold = ReleaseOnDrop::new(store.clone(), key.clone(), owner.clone());
                    hold.arm();
                    Some(Won { hold, fence, sent })
                }
                Ok(Turn::TryRedis) | Err(_) => None,
            }),
            () = tokio::time::sleep(pause) => {
                // Nobody here will pass it to us any more (a task died): go to Redis.
                if !local.is_represented(key) {
                    return Ok(None);
                }
            }
        }
    }
}

/// Attempts in Redis until the lock is ours or the deadline passes.
async fn acquire_in_redis<S: LockStore>(
    store: &S,
    key: &LockKey,
    wait: Wait,
    owner: OwnerToken,
    started: Instant,
) -> Result<Won<S>> {
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
            return Err(busy(key, started, pttl));
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

fn busy(key: &LockKey, started: Instant, retry_after: Option<Duration>) -> Error {
    Error::Busy {
        key: key.to_string(),
        waited: started.elapsed(),
        retry_after,
    }
}
