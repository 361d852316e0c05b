//! Looking at everything latchkey keeps under a name, and breaking it: what
//! `latchkey status`, `list` and `release --force` show and do, for every primitive.
//! A [`Survey`] keeps a whole deployment's state up to date in bounded steps, for
//! `latchkey top` and `latchkey exporter`.
//!
//! ```no_run
//! # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
//! for found in client.inspect("pool").await? {
//!     println!("pool is a {}; held: {}", found.kind(), found.is_held());
//! }
//! # Ok(()) }
//! ```

mod names;
pub(crate) use names::escape_glob;
mod snapshot;
mod survey;
pub use survey::{Budget, Refreshed, Sighting, Survey, Surveyed};

use crate::client::Client;
use crate::election::ElectionStatus;
use crate::error::{Error, Result};
use crate::key::{Kind, LockKey};
use crate::latch::LatchStatus;
use crate::ratelimit::RateLimitStatus;
use crate::semaphore::{PermitStore, SemaphoreStatus};
use crate::store::{LockStatus, RedisStore};

/// One primitive found under a name, with its state: what
/// [`Client::inspect`] and [`Client::list_all`] return.
///
/// ```
/// use latchkey::{Kind, LockStatus, inspect::Primitive};
/// let found = Primitive::Lock(LockStatus::new(None, None, Some(7), 0));
/// assert_eq!(found.kind(), Kind::Lock);
/// assert!(!found.is_held());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Primitive {
    /// A lock: latchkey's, or another library's plain `SET NX` lock.
    Lock(LockStatus),
    /// A [`Semaphore`](crate::Semaphore).
    Semaphore(SemaphoreStatus),
    /// A [`RwLock`](crate::RwLock): a semaphore whose writer holds every permit.
    RwLock(SemaphoreStatus),
    /// A [`RateLimiter`](crate::ratelimit::RateLimiter)'s state.
    RateLimit(RateLimitStatus),
    /// An [`Election`](crate::election::Election) whose lock is held: its leader.
    Election(ElectionStatus),
    /// A [`Latch`](crate::latch::Latch) counted down at least once.
    Latch(LatchStatus),
}

impl Primitive {
    /// What kind of primitive it is.
    ///
    /// ```
    /// # use latchkey::{Kind, inspect::Primitive, semaphore::SemaphoreStatus};
    /// assert_eq!(Primitive::RwLock(SemaphoreStatus::default()).kind(), Kind::RwLock);
    /// ```
    pub fn kind(&self) -> Kind {
        match self {
            Primitive::Lock(_) => Kind::Lock,
            Primitive::Semaphore(_) => Kind::Semaphore,
            Primitive::RwLock(_) => Kind::RwLock,
            Primitive::RateLimit(_) => Kind::RateLimit,
            Primitive::Election(_) => Kind::Election,
            Primitive::Latch(_) => Kind::Latch,
        }
    }

    /// Whether someone holds it: a lock's holder, a live permit, an election's
    /// lock. A rate limit or a latch is never held: its state is a count, not a
    /// hold.
    ///
    /// ```
    /// # use latchkey::{inspect::Primitive, semaphore::SemaphoreStatus};
    /// assert!(!Primitive::Semaphore(SemaphoreStatus::default()).is_held());
    /// ```
    pub fn is_held(&self) -> bool {
        match self {
            Primitive::Lock(status) => status.is_held(),
            Primitive::Semaphore(status) | Primitive::RwLock(status) => status.is_held(),
            Primitive::Election(status) => status.held,
            Primitive::RateLimit(_) | Primitive::Latch(_) => false,
        }
    }

    /// Whether anyone holds or waits for it.
    fn in_use(&self) -> bool {
        match self {
            Primitive::Lock(status) => status.is_held() || status.waiters > 0,
            Primitive::Semaphore(status) | Primitive::RwLock(status) => {
                status.is_held() || status.waiters > 0
            }
            Primitive::Election(status) => {
                status.held || status.leader.is_some() || status.waiters > 0
            }
            Primitive::RateLimit(_) | Primitive::Latch(_) => true,
        }
    }
}

/// Looking at every primitive, on one Redis deployment.
impl Client<RedisStore> {
    /// Everything latchkey keeps under `name` now: a lock (held, waited for, or
    /// with a fencing counter left from an earlier hold), a semaphore, a read-write
    /// lock, rate-limit state, an election whose lock is held, a latch. Read
    /// atomically, in one round trip. Empty when the name has nothing. A key of
    /// `name` that holds what latchkey does not write there (another application's
    /// hash, text where a count goes) is not reported as a primitive.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for an invalid name;
    /// [`Error::WrongType`](crate::Error::WrongType), naming the key, when nothing
    /// of latchkey's is under the name but another application's data is (with
    /// something of latchkey's beside it, that is reported and the data left out);
    /// and the errors a reply can carry.
    ///
    /// # Cancel safety
    ///
    /// It only reads: dropping the future has no effect.
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// use latchkey::inspect::Primitive;
    /// for found in client.inspect("pool").await? {
    ///     if let Primitive::Semaphore(pool) = found {
    ///         println!("{} of {:?} permits held, {} waiting", pool.used, pool.permits, pool.waiters);
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn inspect(&self, name: &str) -> Result<Vec<Primitive>> {
        let key = LockKey::new(self.prefix(), name)?;
        snapshot::read(self.store(), &key).await
    }

    /// Every name under this client's prefix matching `pattern` (Redis glob
    /// syntax, `*` for all) that something holds or waits for, with what:
    /// locks (latchkey's and other libraries'), semaphores, read-write locks,
    /// rate-limit state, elections, latches. Sorted by name. Uses SCAN (three passes, on a cluster on
    /// every primary), never KEYS, then reads each name as [`inspect`](Self::inspect)
    /// does: the list is not one snapshot, and a name whose keys change type in
    /// between is left out. Any string key under the prefix looks like a lock from
    /// outside (another library's, or not a lock at all): see
    /// [`LockStatus::is_held_by_latchkey`].
    ///
    /// # Errors
    ///
    /// The errors a reply can carry. Not retried.
    ///
    /// # Cancel safety
    ///
    /// It only reads: dropping the future has no effect.
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// for (name, found) in client.list_all("*").await? {
    ///     println!("{name}: {} (held: {})", found.kind(), found.is_held());
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn list_all(&self, pattern: &str) -> Result<Vec<(String, Primitive)>> {
        let prefix = self.prefix().as_str();
        let mut found = Vec::new();
        for full in names::matching(self.store(), prefix, pattern).await? {
            let Some(name) = full.strip_prefix(prefix) else {
                continue;
            };
            // Keys another application wrote may not be valid names; skip them.
            let Ok(key) = LockKey::new(self.prefix(), name) else {
                continue;
            };
            match snapshot::read(self.store(), &key).await {
                Ok(primitives) => found.extend(
                    primitives
                        .into_iter()
                        .filter(Primitive::in_use)
                        .map(|p| (name.to_owned(), p)),
                ),
                // Retyped between SCAN and the look: not ours now.
                Err(crate::Error::WrongType { .. }) => {}
                Err(error) => return Err(error),
            }
        }
        Ok(found)
    }

    /// Breaks the primitive of `kind` under `name`, whoever holds it, and returns
    /// what it was (`None` if nothing was held): a lock as
    /// [`Mutex::force_release`](crate::Mutex::force_release); every permit of a
    /// semaphore or read-write lock (their holders' next renewal finds the lease
    /// lost, the line is served at once); a rate limit's state (the limit is full
    /// again); an election's leader, deposed as
    /// [`Election::force_release`](crate::election::Election::force_release) does.
    /// For an operator clearing what a dead process left, never for normal
    /// releases.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for an invalid
    /// name, or for a latch (nobody holds a latch: it opens at its last count
    /// down, and its key expires on its own), and the errors a reply can carry.
    /// Not retried.
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// if let Some(was) = client.force_release("pool", latchkey::Kind::Semaphore).await? {
    ///     println!("broke {:?}", was);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn force_release(&self, name: &str, kind: Kind) -> Result<Option<Primitive>> {
        match kind {
            Kind::Lock => Ok(self
                .mutex(name)?
                .force_release()
                .await?
                .map(Primitive::Lock)),
            Kind::Semaphore | Kind::RwLock => {
                let plain = LockKey::new(self.prefix(), name)?;
                // The count, line and fence as they were just before; the holders
                // as the break found them.
                let before = snapshot::read_ours(self.store(), &plain).await?;
                let dropped =
                    PermitStore::force_release(self.store(), &plain.sibling(kind)).await?;
                let was = before
                    .into_iter()
                    .find(|found| found.kind() == kind)
                    .and_then(|found| match found {
                        Primitive::Semaphore(status) | Primitive::RwLock(status) => Some(status),
                        _ => None,
                    });
                let was = SemaphoreStatus {
                    holders: dropped.holders,
                    used: dropped.used,
                    live: dropped.live,
                    ..was.unwrap_or_default()
                };
                let was = match kind {
                    Kind::Semaphore => Primitive::Semaphore(was),
                    _ => Primitive::RwLock(was),
                };
                Ok(was.is_held().then_some(was))
            }
            Kind::RateLimit => {
                let key = LockKey::new(self.prefix(), name)?;
                Ok(snapshot::reset_rates(self.store(), &key)
                    .await?
                    .map(Primitive::RateLimit))
            }
            Kind::Election => {
                let election = self.election(name)?;
                // Who led just before; whether anyone held the lock, as the break
                // found it.
                let before = election.status().await.unwrap_or_default();
                let broken = election.force_release().await?;
                Ok(broken.map(|lock| {
                    Primitive::Election(ElectionStatus {
                        leader: before.leader,
                        held: true,
                        lease_left: lock.ttl,
                        waiters: lock.waiters,
                    })
                }))
            }
            Kind::Latch => Err(Error::InvalidArgument(format!(
                "latch {name:?} cannot be broken: nobody holds a latch (it opens at its last \
                 count down, and its key expires on its own)"
            ))),
        }
    }
}
