//! The store: the few atomic operations a lock needs, behind one small trait.
//!
//! Like `lock_api`'s raw traits, [`LockStore`] does only the atomic work; the guard,
//! waiting and cancellation logic of [`Mutex`](crate::Mutex) is written once on top of it and
//! does not know whether it talks to one node, a quorum or a cluster.

mod connection;
mod single_node;
mod subscriber;

use std::future::Future;
use std::time::Duration;

pub use connection::Connection;
pub use single_node::SingleNode;
pub use subscriber::Watch;

/// How long to wait for a TCP (and TLS) connection before calling Redis unreachable.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// How long to wait for any reply before calling Redis unreachable (the connection is
/// then replaced). Well under a waiter lease: a live waiter renews its place every
/// third of its lease, so one slow reply must not outlast the rest of it.
pub(crate) const RESPONSE_TIMEOUT: Duration = Duration::from_secs(1);

use crate::error::Result;
use crate::key::LockKey;
use crate::lease::Ttl;
use crate::lock::LockStatus;
use crate::token::OwnerToken;

/// What one acquire attempt found.
///
/// ```
/// use latchkey::store::Attempt;
/// let a = Attempt::Busy { pttl: None, holder: None };
/// assert!(!matches!(a, Attempt::Acquired { .. }));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Attempt {
    /// The lock is ours, with this fencing token.
    Acquired {
        /// Strictly larger than every token handed out for this lock before.
        fence: u64,
    },
    /// Someone else holds it.
    Busy {
        /// The holder's remaining lease; `None` when the holder set no expiry.
        pttl: Option<Duration>,
        /// The holder's owner value (full: mask it before showing it); `None` when
        /// the lock is free but owed to a fair waiter.
        holder: Option<String>,
    },
}

/// What one acquire attempt asks for.
///
/// ```
/// use latchkey::store::AcquireRequest;
/// let once = AcquireRequest { ttl: latchkey::Ttl::DEFAULT, fair: false, queue_lease: None };
/// assert!(once.queue_lease.is_none());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AcquireRequest {
    /// The lease to hold the lock for.
    pub ttl: Ttl,
    /// Fair (FIFO) waiters never overtake live waiters queued before them; plain
    /// ones may take a free lock whoever waits.
    pub fair: bool,
    /// `Some(lease)`: join (or stay in) the lock's wait queue, as a waiter that
    /// counts as dead if it does not try again within `lease`. `None`: just try.
    pub queue_lease: Option<Ttl>,
}

/// The atomic operations behind a lock.
///
/// Every method is one atomic step on the server side; implementations map server
/// errors to [`crate::Error`] with the node and key for context.
///
/// ```no_run
/// use latchkey::store::{AcquireRequest, Attempt, LockStore, SingleNode};
/// use latchkey::{LockKey, OwnerToken, Prefix, Ttl};
///
/// # async fn demo() -> latchkey::Result<()> {
/// let store = SingleNode::open("redis://127.0.0.1:6379").await?;
/// let key = LockKey::new(&Prefix::default(), "raw-demo")?;
/// let me = OwnerToken::generate()?;
/// let once = AcquireRequest { ttl: Ttl::DEFAULT, fair: false, queue_lease: None };
/// if let Attempt::Acquired { fence } = store.try_acquire(&key, &me, once).await? {
///     println!("fence {fence}");
///     store.release(&key, &me, false).await?;
/// }
/// # Ok(()) }
/// ```
pub trait LockStore: Clone + Send + Sync + 'static {
    /// Sets `owner` on `key` if the key is free (and, for a fair request, nobody
    /// waits ahead), or claims a lock a release handed to `owner`; otherwise queues
    /// `owner` if asked to.
    fn try_acquire(
        &self,
        key: &LockKey,
        owner: &OwnerToken,
        request: AcquireRequest,
    ) -> impl Future<Output = Result<Attempt>> + Send;

    /// Frees `key` if it holds `owner`, handing it to the oldest live fair waiter or
    /// waking one plain waiter; true when it was `owner`'s. With `leaving`, first
    /// takes `owner` out of the wait queue (a waiter that gives up or is cancelled).
    fn release(
        &self,
        key: &LockKey,
        owner: &OwnerToken,
        leaving: bool,
    ) -> impl Future<Output = Result<bool>> + Send;

    /// Hands `key`, held by `owner`, straight to `next` with a lease of `ttl` and a
    /// new fencing token, unless anyone waits in the lock's queue. Returns the new
    /// token, or `None` when the lock was not passed (not ours, or others wait).
    fn pass(
        &self,
        key: &LockKey,
        owner: &OwnerToken,
        next: &OwnerToken,
        ttl: Ttl,
    ) -> impl Future<Output = Result<Option<u64>>> + Send;

    /// Resets `key`'s lease to `ttl` if it holds `owner`; true when it did.
    fn extend(
        &self,
        key: &LockKey,
        owner: &OwnerToken,
        ttl: Ttl,
    ) -> impl Future<Output = Result<bool>> + Send;

    /// The value the lock key holds now (the holder's token), if any.
    fn owner(&self, key: &LockKey) -> impl Future<Output = Result<Option<String>>> + Send;

    /// Starts listening for the wake-up a release sends `owner` on `key`'s channel.
    /// Returns once the subscription is confirmed, so no wake-up sent after it is
    /// missed. A store without pub/sub returns a [`Watch`] that never fires; waiters
    /// then fall back to re-checking on a timer.
    fn watch(
        &self,
        key: &LockKey,
        owner: &OwnerToken,
    ) -> impl Future<Output = Result<Watch>> + Send;

    /// A consistent snapshot of the lock: holder, remaining lease, last fencing
    /// token, queue length.
    fn inspect(&self, key: &LockKey) -> impl Future<Output = Result<LockStatus>> + Send;

    /// The keys matching `pattern` (Redis glob syntax) that can be locks: strings,
    /// not latchkey's companion keys. Uses SCAN, never KEYS.
    fn scan(&self, pattern: &str) -> impl Future<Output = Result<Vec<String>>> + Send;

    /// Like [`watch`](Self::watch), but only if that costs no round trip because
    /// this process already listens on `key`'s channel for other waiters.
    fn join_watch(&self, key: &LockKey, owner: &OwnerToken) -> Option<Watch> {
        let _ = (key, owner);
        None
    }
}
