//! A leader's guard: the election's lock held, its record kept alive beside it,
//! and a step down (release, then withdrawal) however the leadership ends.

use std::time::Duration;

use tokio::runtime::Handle;
use tokio_util::sync::{CancellationToken, DropGuard};

use super::record::Record;
use super::{Leader, record_lifetime};
use crate::error::{Error, Result};
use crate::lease::Lease;
use crate::lock::{MutexGuard, spawn_release};
use crate::store::RedisStore;
use crate::token::OwnerToken;

/// Leadership of an election, from [`Election::campaign`](super::Election::campaign):
/// while it lives (and [`lost`](Self::lost) has not fired) this candidate leads.
/// Dropping it resigns in the background ([`finish_background_releases`] waits
/// for it); [`resign`](Self::resign) waits for it.
///
/// [`finish_background_releases`]: crate::finish_background_releases
///
/// ```no_run
/// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
/// let leadership = client.election("scheduler")?.campaign("host-a").await?;
/// let term = leadership.term(); // the fencing token of every write while leading
/// leadership.resign().await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
#[must_use = "dropping the leadership resigns at once"]
pub struct Leadership {
    hold: Proclaimed,
    leader: Leader,
    /// Stops the record's keeper when the leadership ends.
    _keeper: Option<DropGuard>,
}

impl Leadership {
    pub(super) fn new(hold: Proclaimed, leader: Leader, lease: Lease) -> Self {
        let keeper = hold.guard().map(|guard| Keeper {
            record: hold.record.clone(),
            owner: guard.owner().clone(),
            leader: leader.clone(),
            lost: guard.lost_token(),
            period: lease.ttl().as_duration() / 2,
            lifetime: record_lifetime(lease),
        });
        Leadership {
            _keeper: keeper.and_then(Keeper::spawn),
            hold,
            leader,
        }
    }

    /// This leader's term: greater than every earlier leader's. Pass it as the
    /// fencing token of what the leader writes.
    ///
    /// ```no_run
    /// # fn demo(leadership: latchkey::election::Leadership) {
    /// println!("term {}", leadership.term());
    /// # }
    /// ```
    pub fn term(&self) -> u64 {
        self.leader.term
    }

    /// The value this leader campaigned with.
    ///
    /// ```no_run
    /// # fn demo(leadership: latchkey::election::Leadership) {
    /// println!("{} leads", leadership.value());
    /// # }
    /// ```
    pub fn value(&self) -> &str {
        &self.leader.value
    }

    /// This leader, as observers see it.
    ///
    /// ```no_run
    /// # fn demo(leadership: latchkey::election::Leadership) {
    /// println!("{}", leadership.leader());
    /// # }
    /// ```
    pub fn leader(&self) -> &Leader {
        &self.leader
    }

    /// The hold of the election's lock under the leadership: its validity, its
    /// lease (extend it), a transaction fenced by it. Do not
    /// [`reenter`](MutexGuard::reenter) it: a re-entered guard keeps the lock
    /// after [`resign`](Self::resign), and the leadership with it.
    ///
    /// ```no_run
    /// # fn demo(leadership: latchkey::election::Leadership) {
    /// println!("leading for at least {:?} more", leadership.guard().validity());
    /// # }
    /// ```
    pub fn guard(&self) -> &MutexGuard<RedisStore> {
        self.hold
            .guard()
            .expect("a leadership holds its guard until resigned or dropped")
    }

    /// Resolves when the leadership is lost: the lease could not be renewed (a
    /// pause, a partition, Redis unreachable) or was found gone, before it could
    /// have ended in Redis. See [`MutexGuard::lost`].
    ///
    /// ```no_run
    /// # async fn demo(leadership: latchkey::election::Leadership) {
    /// leadership.lost().await;
    /// eprintln!("no longer the leader: stop");
    /// # }
    /// ```
    pub fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
        self.guard().lost()
    }

    /// Whether [`lost`](Self::lost) has fired.
    ///
    /// ```no_run
    /// # fn demo(leadership: latchkey::election::Leadership) {
    /// assert!(!leadership.is_lost());
    /// # }
    /// ```
    pub fn is_lost(&self) -> bool {
        self.guard().is_lost()
    }

    /// Steps down: releases the election's lock (the next candidate in line leads),
    /// withdraws the record and tells observers. Returns whether this candidate
    /// still led until then.
    ///
    /// # Errors
    ///
    /// As [`MutexGuard::release`]; the lock is released in the background anyway.
    ///
    /// # Cancel safety
    ///
    /// The step down runs to its end in the background however early the future
    /// is dropped.
    ///
    /// ```no_run
    /// # async fn demo(leadership: latchkey::election::Leadership) -> latchkey::Result<()> {
    /// if !leadership.resign().await? {
    ///     eprintln!("the leadership had been lost already");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn resign(mut self) -> Result<bool> {
        self.hold.step_down().await
    }
}

/// A hold of an election's lock whose record may have been proclaimed: however it
/// ends (a resignation, a drop, a failed or cancelled proclamation), it steps down,
/// releasing the lock and then withdrawing the record, which tells observers. The
/// step down runs in the background, to its end, on the runtime the hold was made
/// on, among the releases [`crate::finish_background_releases`] waits for.
#[derive(Debug)]
pub(super) struct Proclaimed {
    /// `None` once stepped down.
    guard: Option<MutexGuard<RedisStore>>,
    record: Record,
    runtime: Option<Handle>,
}

impl Proclaimed {
    pub(super) fn new(guard: MutexGuard<RedisStore>, record: Record) -> Self {
        Proclaimed {
            guard: Some(guard),
            record,
            runtime: Handle::try_current().ok(),
        }
    }

    pub(super) fn guard(&self) -> Option<&MutexGuard<RedisStore>> {
        self.guard.as_ref()
    }

    /// Steps down, and waits for it; whether the lock was still held.
    pub(super) async fn step_down(&mut self) -> Result<bool> {
        let Some(stepping) = self.start_step_down() else {
            return Ok(false);
        };
        stepping
            .await
            .unwrap_or_else(|_| Err(Error::Runtime("the step down did not finish".to_owned())))
    }

    /// Starts stepping down in the background (`None`: done already, or no
    /// runtime: then the guard's own drop frees the lock, and a record counts for
    /// nothing once the lock is not its writer's).
    fn start_step_down(&mut self) -> Option<tokio::task::JoinHandle<Result<bool>>> {
        let guard = self.guard.take()?;
        let runtime = self.runtime.as_ref()?;
        let record = self.record.clone();
        Some(spawn_release(step_down(guard, record), runtime))
    }
}

impl Drop for Proclaimed {
    fn drop(&mut self) {
        drop(self.start_step_down());
    }
}

/// Releases the lock, then withdraws the record: in that order, so that no
/// observer woken by the withdrawal reads a leader that is about to go. A guard
/// re-entered elsewhere keeps the lock, and the record with it.
async fn step_down(guard: MutexGuard<RedisStore>, record: Record) -> Result<bool> {
    let owner = guard.owner().clone();
    let shared = guard.hold_count() > 1;
    let released = guard.release().await;
    if shared {
        return released;
    }
    if let Err(error) = record.withdraw(&owner).await {
        // The record counts for nothing now that the lock is not ours; observers
        // find that out on their timers instead of at once.
        tracing::debug!(election = %record.lock().name(), %error, "withdrawing the leader record failed");
    }
    released
}

/// Keeps a leader's record while its leader holds the lock: renews it, or writes
/// it again if it was lost (a restart, a failover, an eviction) meanwhile.
struct Keeper {
    record: Record,
    owner: OwnerToken,
    leader: Leader,
    /// The leadership's `lost`: nothing left to keep.
    lost: CancellationToken,
    period: Duration,
    lifetime: Duration,
}

impl Keeper {
    /// Starts keeping; dropping the returned guard stops it.
    fn spawn(self) -> Option<DropGuard> {
        let runtime = Handle::try_current().ok()?;
        let stop = CancellationToken::new();
        runtime.spawn(self.run(stop.clone()));
        Some(stop.drop_guard())
    }

    async fn run(self, stop: CancellationToken) {
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = self.lost.cancelled() => return,
                _ = tokio::time::sleep(self.period) => {}
            }
            let kept = self
                .record
                .proclaim(&self.owner, &self.leader, self.lifetime);
            if let Err(error) = kept.await {
                // The next round tries again; the record outlives two of them.
                tracing::debug!(election = %self.record.lock().name(), %error, "renewing the leader record failed");
            }
        }
    }
}
