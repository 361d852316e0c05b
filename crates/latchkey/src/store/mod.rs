//! The store: the few atomic operations a lock needs, behind one small trait.
//!
//! Like `lock_api`'s raw traits, [`LockStore`] does only the atomic work; the guard,
//! waiting and cancellation logic of [`Mutex`](crate::Mutex) is written once on top of it and
//! does not know whether it talks to one node, a quorum or a cluster.
//!
//! [`SingleNode`] is the store on one Redis server (or the primary of a
//! primary/replica set). Its connections time out after 2 s to connect and 1 s for a
//! reply, and the one it makes itself is replaced after a reply timed out; a
//! separate subscriber connection wakes waiters (see
//! [Under faults](crate#under-faults)). Most code never touches a store: it uses
//! [`Client`](crate::Client), which makes one.

mod connection;
mod single_node;
mod subscriber;

use std::future::Future;
use std::time::Duration;

pub use connection::Connection;
pub use single_node::SingleNode;
pub use subscriber::{Handed, Watch};

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
/// let a = Attempt::Busy { pttl: None, holder: None, fence_floor: 0, waiter_lease_end: 0 };
/// assert!(!matches!(a, Attempt::Acquired { .. }));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Attempt {
    /// The lock is ours, with this fencing token.
    Acquired {
        /// Strictly larger than every token handed out for this lock before.
        fence: u64,
        /// Others in the lock's wait queue when it was granted (0 when the attempt
        /// did not look): while they wait, a task of this process gets the lock only
        /// by a pass ahead of them (see [`LockStore::pass`]).
        queued: u64,
    },
    /// Someone else holds it.
    Busy {
        /// The holder's remaining lease; `None` when the holder set no expiry.
        pttl: Option<Duration>,
        /// The holder's owner value (full: mask it before showing it); `None` when
        /// the lock is free but owed to a fair waiter.
        holder: Option<String>,
        /// From an attempt that joined (or stayed in) the queue: every fencing token
        /// granted after it is larger, so a wake-up that hands this waiter a token at
        /// or below it is stale (the lock it handed has been lost since). 0 otherwise.
        fence_floor: u64,
        /// From an attempt that joined (or stayed in) the queue: when the waiter lease
        /// it set ends (server ms). A wake-up whose [`Handed::waiter_lease_end`] is
        /// older comes from a server that lost this attempt. 0 otherwise.
        waiter_lease_end: u64,
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
/// errors to [`crate::Error`] with the node and key for context. The methods do not
/// retry and do not release anything when dropped: that is the job of
/// [`Mutex`](crate::Mutex), built on top. A caller that drives a store directly
/// owns the cleanup: after a `try_acquire` whose answer it did not get, it must
/// `release` with the same owner token.
///
/// Each step either ran whole on the server or not at all, so dropping one of its
/// futures leaves Redis consistent; the caller just does not learn which happened.
/// The `# Errors` sections below say what [`SingleNode`] returns; the errors every
/// reply can carry are [`Error::Unreachable`](crate::Error::Unreachable),
/// [`Error::AuthFailed`](crate::Error::AuthFailed),
/// [`Error::AclDenied`](crate::Error::AclDenied),
/// [`Error::NotRedis`](crate::Error::NotRedis), [`Error::Tls`](crate::Error::Tls) and
/// [`Error::Redis`](crate::Error::Redis).
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
/// if let Attempt::Acquired { fence, .. } = store.try_acquire(&key, &me, once).await? {
///     println!("fence {fence}");
///     store.release(&key, &me, None).await?;
/// }
/// # Ok(()) }
/// ```
pub trait LockStore: Clone + Send + Sync + 'static {
    /// Sets `owner` on `key` if the key is free (and, for a fair request, nobody
    /// waits ahead), or claims a lock a release handed to `owner`; otherwise queues
    /// `owner` if asked to. A key that already holds `owner` (an earlier attempt
    /// whose reply was lost) is claimed too, with a new lease and fencing token.
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`](crate::Error::WrongType) if a key of the lock holds
    /// another type, [`Error::ReadOnly`](crate::Error::ReadOnly) on a replica, and the
    /// errors every reply can carry. A busy lock is not an error:
    /// [`Attempt::Busy`].
    ///
    /// # Cancel safety
    ///
    /// Dropping the future may leave the lock set to `owner`, or `owner` in the
    /// queue: release with `leaving` set to undo either.
    ///
    /// ```no_run
    /// # use latchkey::store::{AcquireRequest, Attempt, LockStore, SingleNode};
    /// # async fn demo(store: SingleNode, key: latchkey::LockKey, me: latchkey::OwnerToken) -> latchkey::Result<()> {
    /// let request = AcquireRequest { ttl: latchkey::Ttl::DEFAULT, fair: false, queue_lease: None };
    /// match store.try_acquire(&key, &me, request).await? {
    ///     Attempt::Acquired { fence, .. } => println!("ours, fence {fence}"),
    ///     Attempt::Busy { pttl, .. } => println!("busy for {pttl:?}"),
    /// }
    /// # Ok(()) }
    /// ```
    fn try_acquire(
        &self,
        key: &LockKey,
        owner: &OwnerToken,
        request: AcquireRequest,
    ) -> impl Future<Output = Result<Attempt>> + Send;

    /// Frees `key` if it holds `owner`, granting it (with a fencing token) to the
    /// oldest live waiter, plain or fair, and telling that one, or deleting the key
    /// when nobody waits; true when it was `owner`'s. With `leaving`, the lease
    /// `owner` asked for when it queued ([`AcquireRequest::ttl`]), first takes `owner`
    /// out of the wait queue (a waiter that gives up or is cancelled). A harmless
    /// no-op otherwise, so it is safe to repeat.
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`](crate::Error::WrongType),
    /// [`Error::ReadOnly`](crate::Error::ReadOnly), and the errors every reply can
    /// carry.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future may or may not have released: call it again.
    ///
    /// ```no_run
    /// # use latchkey::store::{LockStore, SingleNode};
    /// # async fn demo(store: SingleNode, key: latchkey::LockKey, me: latchkey::OwnerToken) -> latchkey::Result<()> {
    /// let was_ours = store.release(&key, &me, None).await?;
    /// # Ok(()) }
    /// ```
    fn release(
        &self,
        key: &LockKey,
        owner: &OwnerToken,
        leaving: Option<Ttl>,
    ) -> impl Future<Output = Result<bool>> + Send;

    /// Hands `key`, held by `owner`, straight to `next` with a lease of `ttl` and a
    /// new fencing token, unless anyone waits in the lock's queue and
    /// `ahead_of_queue` is false. Returns the new token, or `None` when the lock was
    /// not passed (not ours, or others wait).
    /// Repeating a pass whose reply was lost is safe: it finds `next` holding and
    /// claims the lock for it again.
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`](crate::Error::WrongType),
    /// [`Error::ReadOnly`](crate::Error::ReadOnly), and the errors every reply can
    /// carry.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future may or may not have passed the lock: it is then held by
    /// `owner` or by `next`, and one of them must release it.
    ///
    /// ```no_run
    /// # use latchkey::store::{LockStore, SingleNode};
    /// # async fn demo(store: SingleNode, key: latchkey::LockKey, me: latchkey::OwnerToken) -> latchkey::Result<()> {
    /// let next = latchkey::OwnerToken::generate()?;
    /// if let Some(fence) = store.pass(&key, &me, &next, latchkey::Ttl::DEFAULT, false).await? {
    ///     println!("`next` holds it now, fence {fence}");
    /// }
    /// # Ok(()) }
    /// ```
    fn pass(
        &self,
        key: &LockKey,
        owner: &OwnerToken,
        next: &OwnerToken,
        ttl: Ttl,
        ahead_of_queue: bool,
    ) -> impl Future<Output = Result<Option<u64>>> + Send;

    /// Resets `key`'s lease to `ttl` if it holds `owner`; true when it did.
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`](crate::Error::WrongType),
    /// [`Error::ReadOnly`](crate::Error::ReadOnly), and the errors every reply can
    /// carry.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future may or may not have reset the lease.
    ///
    /// ```no_run
    /// # use latchkey::store::{LockStore, SingleNode};
    /// # async fn demo(store: SingleNode, key: latchkey::LockKey, me: latchkey::OwnerToken) -> latchkey::Result<()> {
    /// let still_ours = store.extend(&key, &me, latchkey::Ttl::DEFAULT).await?;
    /// # Ok(()) }
    /// ```
    fn extend(
        &self,
        key: &LockKey,
        owner: &OwnerToken,
        ttl: Ttl,
    ) -> impl Future<Output = Result<bool>> + Send;

    /// The value the lock key holds now (the holder's token), if any.
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`](crate::Error::WrongType) if the key is not a string, and
    /// the errors every reply can carry.
    ///
    /// # Cancel safety
    ///
    /// It only reads: dropping the future has no effect.
    ///
    /// ```no_run
    /// # use latchkey::store::{LockStore, SingleNode};
    /// # async fn demo(store: SingleNode, key: latchkey::LockKey) -> latchkey::Result<()> {
    /// let holder: Option<String> = store.owner(&key).await?;
    /// # Ok(()) }
    /// ```
    fn owner(&self, key: &LockKey) -> impl Future<Output = Result<Option<String>>> + Send;

    /// Starts listening for the wake-up a release sends `owner` on `key`'s channel.
    /// Returns once the subscription is confirmed, so no wake-up sent after it is
    /// missed. A store without pub/sub returns a [`Watch`] that never fires; waiters
    /// then fall back to re-checking on a timer.
    ///
    /// [`SingleNode`] waits at most the 1 s reply timeout for the confirmation. If it
    /// does not come (the subscriber connection is down or stalled) the watch is
    /// returned anyway: [`Watch::is_live`] is then false until the subscription is
    /// confirmed, and the caller must re-check on its own meanwhile.
    ///
    /// # Errors
    ///
    /// [`SingleNode`] returns none: a subscriber connection that fails shows as a
    /// watch that is not live.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future unregisters the waiter; nothing stays behind.
    ///
    /// ```no_run
    /// # use latchkey::store::{LockStore, SingleNode};
    /// # async fn demo(store: SingleNode, key: latchkey::LockKey, me: latchkey::OwnerToken) -> latchkey::Result<()> {
    /// let watch = store.watch(&key, &me).await?;
    /// if !watch.is_live() {
    ///     println!("no wake-ups for now: re-check on a timer");
    /// }
    /// # Ok(()) }
    /// ```
    fn watch(
        &self,
        key: &LockKey,
        owner: &OwnerToken,
    ) -> impl Future<Output = Result<Watch>> + Send;

    /// A consistent snapshot of the lock: holder, remaining lease, last fencing
    /// token, queue length.
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`](crate::Error::WrongType) if a key of the lock holds
    /// another type, and the errors every reply can carry.
    ///
    /// # Cancel safety
    ///
    /// It only reads: dropping the future has no effect.
    ///
    /// ```no_run
    /// # use latchkey::store::{LockStore, SingleNode};
    /// # async fn demo(store: SingleNode, key: latchkey::LockKey) -> latchkey::Result<()> {
    /// println!("{} waiting", store.inspect(&key).await?.waiters);
    /// # Ok(()) }
    /// ```
    fn inspect(&self, key: &LockKey) -> impl Future<Output = Result<LockStatus>> + Send;

    /// The keys matching `pattern` (Redis glob syntax) that can be locks: strings,
    /// not latchkey's companion keys. Uses SCAN, never KEYS. Sorted, without
    /// duplicates.
    ///
    /// # Errors
    ///
    /// The errors every reply can carry.
    ///
    /// # Cancel safety
    ///
    /// It only reads: dropping the future has no effect.
    ///
    /// ```no_run
    /// # use latchkey::store::{LockStore, SingleNode};
    /// # async fn demo(store: SingleNode) -> latchkey::Result<()> {
    /// for key in store.scan("app:*").await? {
    ///     println!("{key}");
    /// }
    /// # Ok(()) }
    /// ```
    fn scan(&self, pattern: &str) -> impl Future<Output = Result<Vec<String>>> + Send;

    /// The server this store talks to (its address, never with credentials), for
    /// errors the caller reports itself, such as a wait whose requests all went
    /// unanswered until its deadline.
    ///
    /// ```no_run
    /// # use latchkey::store::{LockStore, SingleNode};
    /// # fn demo(store: SingleNode) {
    /// println!("locks on {}", LockStore::node(&store));
    /// # }
    /// ```
    fn node(&self) -> &str;

    /// Like [`watch`](Self::watch), but only if that costs no round trip because
    /// this process already listens on `key`'s channel for other waiters. The
    /// default returns `None`: the caller then calls `watch`.
    ///
    /// ```no_run
    /// # use latchkey::store::{LockStore, SingleNode};
    /// # async fn demo(store: SingleNode, key: latchkey::LockKey, me: latchkey::OwnerToken) -> latchkey::Result<()> {
    /// let watch = match store.join_watch(&key, &me) {
    ///     Some(watch) => watch,
    ///     None => store.watch(&key, &me).await?,
    /// };
    /// # Ok(()) }
    /// ```
    fn join_watch(&self, key: &LockKey, owner: &OwnerToken) -> Option<Watch> {
        let _ = (key, owner);
        None
    }
}
