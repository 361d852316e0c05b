//! The traits a store implements: the atomic core every lock needs, and the
//! capabilities that make it faster or easier to look at, each with a default.

use std::future::Future;

use super::{AcquireRequest, AllOrNone, Attempt, LockStatus, Watch};
use crate::error::Result;
use crate::key::LockKey;
use crate::lease::Ttl;
use crate::token::OwnerToken;

/// The atomic core of a lock: take, release, extend, read the holder.
///
/// Like `lock_api`'s `RawMutex`, it does only the atomic work; the guard, waiting and
/// cancellation logic of [`Mutex`](crate::Mutex) is written once on top of it. The
/// capabilities a [`Mutex`](crate::Mutex) also uses, [`Pass`] and [`WakeUps`], have
/// default bodies: a store without them implements them empty, and its waiters
/// re-check on timers instead of being woken.
///
/// Every method is one atomic step on the server side; implementations map server
/// errors to [`crate::Error`] with the node and key for context. The methods do not
/// retry and do not release anything when dropped: that is the job of
/// [`Mutex`](crate::Mutex). A caller that drives a store directly owns the cleanup:
/// after a `try_acquire` whose answer it did not get, it must `release` with the
/// same owner token.
///
/// Each step either ran whole on the server or not at all, so dropping one of its
/// futures leaves the store consistent; the caller just does not learn which
/// happened. The `# Errors` sections below say what the Redis stores return; the
/// errors every reply can carry are [`Error::Unreachable`](crate::Error::Unreachable),
/// [`Error::AuthFailed`](crate::Error::AuthFailed),
/// [`Error::AclDenied`](crate::Error::AclDenied),
/// [`Error::NotRedis`](crate::Error::NotRedis), [`Error::Tls`](crate::Error::Tls) and
/// [`Error::Redis`](crate::Error::Redis).
///
/// ```no_run
/// use latchkey::store::{AcquireRequest, Attempt, LockStore, RedisStore};
/// use latchkey::{LockKey, OwnerToken, Prefix, Ttl};
///
/// # async fn demo() -> latchkey::Result<()> {
/// let store = RedisStore::open("redis://127.0.0.1:6379").await?;
/// let key = LockKey::new(&Prefix::default(), "raw-demo")?;
/// let me = OwnerToken::generate()?;
/// if let Attempt::Acquired { fence, .. } = store.try_acquire(&key, &me, AcquireRequest::new(Ttl::DEFAULT)).await? {
///     println!("fence {fence:?}"); // None: ask `store.fence` when needed
///     store.release(&key, &me, None).await?;
/// }
/// # Ok(()) }
/// ```
pub trait LockStore: Clone + Send + Sync + 'static {
    /// The `deployment` label of the metrics of locks on this store (see
    /// [`crate::metrics`]): `single`, `sentinel`, `cluster`, `quorum`; `custom`
    /// unless a store of your own says otherwise.
    ///
    /// ```no_run
    /// # use latchkey::store::{LockStore, RedisStore};
    /// # async fn demo() -> latchkey::Result<()> {
    /// let store = RedisStore::open("redis://127.0.0.1:6379").await?;
    /// assert_eq!(store.deployment(), "single");
    /// # Ok(()) }
    /// ```
    fn deployment(&self) -> &'static str {
        "custom"
    }

    /// What one grant holds, for the `latchkey_held` metric: 1 for a lock, the
    /// weight for a grant of a semaphore's permits.
    ///
    /// ```no_run
    /// # use latchkey::store::{LockStore, RedisStore};
    /// # async fn demo() -> latchkey::Result<()> {
    /// let store = RedisStore::open("redis://127.0.0.1:6379").await?;
    /// assert_eq!(store.units(), 1);
    /// # Ok(()) }
    /// ```
    fn units(&self) -> u64 {
        1
    }

    /// Sets `owner` on `key` if the key is free (and, for a fair request, nobody
    /// waits ahead); otherwise queues `owner` if asked to. A key that already holds
    /// `owner` (an earlier attempt whose reply was lost, or a release that handed it
    /// the lock) is claimed too, with a new lease and fencing token.
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`](crate::Error::WrongType) if a key of the lock holds
    /// another type, [`Error::ReadOnly`](crate::Error::ReadOnly) on a replica,
    /// [`Error::TooFewReplicas`](crate::Error::TooFewReplicas) from a store that
    /// waits for replicas (the grant was undone), and the errors every reply can
    /// carry. A busy lock is not an error: [`Attempt::Busy`].
    ///
    /// # Cancel safety
    ///
    /// Dropping the future may leave the lock set to `owner`, or `owner` in the
    /// queue: release with `leaving` set to undo either.
    ///
    /// ```no_run
    /// # use latchkey::store::{AcquireRequest, Attempt, LockStore, RedisStore};
    /// # async fn demo(store: RedisStore, key: latchkey::LockKey, me: latchkey::OwnerToken) -> latchkey::Result<()> {
    /// match store.try_acquire(&key, &me, AcquireRequest::new(latchkey::Ttl::DEFAULT)).await? {
    ///     Attempt::Acquired { fence, .. } => println!("ours, fence {fence:?}"),
    ///     Attempt::Busy { pttl, .. } => println!("busy for {pttl:?}"),
    ///     _ => {}
    /// }
    /// # Ok(()) }
    /// ```
    fn try_acquire(
        &self,
        key: &LockKey,
        owner: &OwnerToken,
        request: AcquireRequest,
    ) -> impl Future<Output = Result<Attempt>> + Send;

    /// Frees `key` if it holds `owner`; true when it was `owner`'s. A store with a
    /// wait queue grants the lock (with a fencing token) to the oldest live waiter,
    /// plain or fair, and tells that one through its [`Watch`]; otherwise it deletes
    /// the key. With `leaving`, the lease `owner` asked for when it queued
    /// ([`AcquireRequest::ttl`]), it first takes `owner` out of the wait queue (a
    /// waiter that gives up or is cancelled). A harmless no-op otherwise, so it is
    /// safe to repeat.
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
    /// # use latchkey::store::{LockStore, RedisStore};
    /// # async fn demo(store: RedisStore, key: latchkey::LockKey, me: latchkey::OwnerToken) -> latchkey::Result<()> {
    /// let was_ours = store.release(&key, &me, None).await?;
    /// # Ok(()) }
    /// ```
    fn release(
        &self,
        key: &LockKey,
        owner: &OwnerToken,
        leaving: Option<Ttl>,
    ) -> impl Future<Output = Result<bool>> + Send;

    /// The common release, made cheap: frees `key` if it holds `owner` and nobody
    /// waits in its queue. `Ok(Some(was_ours))` when it did (or the lock was not
    /// `owner`'s); `Ok(None)` when others are queued and nothing was done: call
    /// [`release`](Self::release), which hands the lock over. The default always
    /// answers `None`.
    ///
    /// # Errors
    ///
    /// As [`release`](Self::release).
    ///
    /// # Cancel safety
    ///
    /// Dropping the future may or may not have released: call it (or `release`)
    /// again.
    ///
    /// ```no_run
    /// # use latchkey::store::{LockStore, RedisStore};
    /// # async fn demo(store: RedisStore, key: latchkey::LockKey, me: latchkey::OwnerToken) -> latchkey::Result<()> {
    /// let was_ours = match store.release_alone(&key, &me).await? {
    ///     Some(was_ours) => was_ours,
    ///     None => store.release(&key, &me, None).await?,
    /// };
    /// # Ok(()) }
    /// ```
    fn release_alone(
        &self,
        key: &LockKey,
        owner: &OwnerToken,
    ) -> impl Future<Output = Result<Option<bool>>> + Send {
        let _ = (key, owner);
        async { Ok(None) }
    }

    /// Takes every one of `takes` (a lock, its owner, what it asks for) if every one
    /// is free, in one atomic step, or none: what a [`MultiLock`](crate::MultiLock)
    /// tries first, so that it never holds part of its set. `Ok(None)` when the store
    /// cannot for these locks (the default), and the caller tries them one by one.
    /// On Redis it can when every key is in one hash slot (always on one server),
    /// no request joins a queue or asks for a fence, the store waits for no
    /// replicas, and no lock is already the owner's or a fair lock with waiters.
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`](crate::Error::WrongType) if a lock key holds another
    /// type, and the errors every reply can carry.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future may leave every lock set to its owner: release each to
    /// undo it.
    ///
    /// ```no_run
    /// # use latchkey::store::{AcquireRequest, AllOrNone, LockStore, RedisStore};
    /// # async fn demo(store: RedisStore, a: latchkey::LockKey, b: latchkey::LockKey) -> latchkey::Result<()> {
    /// let (me, also_me) = (latchkey::OwnerToken::generate()?, latchkey::OwnerToken::generate()?);
    /// let request = AcquireRequest::new(latchkey::Ttl::DEFAULT);
    /// match store.try_acquire_all(&[(&a, &me, request), (&b, &also_me, request)]).await? {
    ///     Some(AllOrNone::Taken) => println!("both ours"),
    ///     Some(AllOrNone::Busy { index, .. }) => println!("lock {index} is busy; none taken"),
    ///     _ => println!("not in one step: try them one by one"),
    /// }
    /// # Ok(()) }
    /// ```
    fn try_acquire_all(
        &self,
        takes: &[(&LockKey, &OwnerToken, AcquireRequest)],
    ) -> impl Future<Output = Result<Option<AllOrNone>>> + Send {
        let _ = takes;
        async { Ok(None) }
    }

    /// Whether `other` is this store (a clone of it, on the same connections and
    /// making the same requests), so that one
    /// [`try_acquire_all`](Self::try_acquire_all) on either may take the locks of
    /// both. The default: never.
    ///
    /// ```no_run
    /// # use latchkey::store::{LockStore, RedisStore};
    /// # async fn demo() -> latchkey::Result<()> {
    /// let store = RedisStore::open("redis://127.0.0.1:6379").await?;
    /// assert!(store.is_same_store(&store.clone()));
    /// let other = RedisStore::open("redis://127.0.0.1:6379/1").await?;
    /// assert!(!store.is_same_store(&other));
    /// # Ok(()) }
    /// ```
    fn is_same_store(&self, other: &Self) -> bool {
        let _ = other;
        false
    }

    /// Resets `key`'s lease to `ttl` if it holds `owner`; true when it did.
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`](crate::Error::WrongType),
    /// [`Error::ReadOnly`](crate::Error::ReadOnly),
    /// [`Error::TooFewReplicas`](crate::Error::TooFewReplicas) from a store that
    /// waits for replicas (the lease was reset on the primary only), and the errors
    /// every reply can carry.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future may or may not have reset the lease.
    ///
    /// ```no_run
    /// # use latchkey::store::{LockStore, RedisStore};
    /// # async fn demo(store: RedisStore, key: latchkey::LockKey, me: latchkey::OwnerToken) -> latchkey::Result<()> {
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
    /// # use latchkey::store::{LockStore, RedisStore};
    /// # async fn demo(store: RedisStore, key: latchkey::LockKey) -> latchkey::Result<()> {
    /// let holder: Option<String> = store.owner(&key).await?;
    /// # Ok(()) }
    /// ```
    fn owner(&self, key: &LockKey) -> impl Future<Output = Result<Option<String>>> + Send;

    /// Whether `owner` holds `key` now. The default asks [`owner`](Self::owner); a
    /// store whose key has several holders (a semaphore's permits) looks for
    /// `owner` among them.
    ///
    /// # Errors
    ///
    /// As [`owner`](Self::owner).
    ///
    /// # Cancel safety
    ///
    /// It only reads: dropping the future has no effect.
    ///
    /// ```no_run
    /// # use latchkey::store::{LockStore, RedisStore};
    /// # async fn demo(store: RedisStore, key: latchkey::LockKey, me: latchkey::OwnerToken) -> latchkey::Result<()> {
    /// let mine: bool = store.holds(&key, &me).await?;
    /// # Ok(()) }
    /// ```
    fn holds(
        &self,
        key: &LockKey,
        owner: &OwnerToken,
    ) -> impl Future<Output = Result<bool>> + Send {
        async move { Ok(self.owner(key).await?.as_deref() == Some(owner.as_str())) }
    }

    /// The fencing token of the hold `owner` has on `key`, for a grant that came
    /// without one ([`Attempt::Acquired`] with `fence: None`): strictly larger than
    /// every token handed out for `key` before, computed only if `key` still holds
    /// `owner` (`Ok(None)` if not). Holds of one lock never overlap, so tokens computed
    /// while holding come in the order of the holds. Asking again hands out a new,
    /// larger token. The default refuses: a store that always fences its grants is
    /// never asked.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) from a store that
    /// fences only with its grants, [`Error::WrongType`](crate::Error::WrongType),
    /// [`Error::ReadOnly`](crate::Error::ReadOnly), and the errors every reply can
    /// carry.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future may have moved the lock's counter on: harmless, since
    /// tokens only need to grow.
    ///
    /// ```no_run
    /// # use latchkey::store::{LockStore, RedisStore};
    /// # async fn demo(store: RedisStore, key: latchkey::LockKey, me: latchkey::OwnerToken) -> latchkey::Result<()> {
    /// match store.fence(&key, &me).await? {
    ///     Some(fence) => println!("write with fence {fence}"),
    ///     None => println!("no longer ours"),
    /// }
    /// # Ok(()) }
    /// ```
    fn fence(
        &self,
        key: &LockKey,
        owner: &OwnerToken,
    ) -> impl Future<Output = Result<Option<u64>>> + Send {
        let _ = (key, owner);
        async {
            Err(crate::Error::InvalidArgument(
                "this store hands out fencing tokens only with its grants".to_owned(),
            ))
        }
    }

    /// Where this store keeps its locks (an address, never with credentials), for
    /// errors the caller reports itself, such as a wait whose requests all went
    /// unanswered until its deadline.
    ///
    /// ```no_run
    /// # use latchkey::store::{LockStore, RedisStore};
    /// # fn demo(store: RedisStore) {
    /// println!("locks on {}", LockStore::node(&store));
    /// # }
    /// ```
    fn node(&self) -> &str;
}

/// Capability: hand a held lock straight to another owner of this process, so the
/// tasks of one process take turns without a release and a new acquire each.
///
/// The default never passes (returns `Ok(None)`): the holder then releases and the
/// next task acquires as usual.
///
/// ```no_run
/// # use latchkey::store::{Pass, RedisStore};
/// # async fn demo(store: RedisStore, key: latchkey::LockKey, me: latchkey::OwnerToken) -> latchkey::Result<()> {
/// let next = latchkey::OwnerToken::generate()?;
/// if let Some(fence) = store.pass(&key, &me, &next, latchkey::Ttl::DEFAULT, false).await? {
///     println!("`next` holds it now, fence {fence}");
/// }
/// # Ok(()) }
/// ```
pub trait Pass: LockStore {
    /// Hands `key`, held by `owner`, straight to `next` with a lease of `ttl` and a
    /// new fencing token, unless anyone waits in the lock's queue and
    /// `ahead_of_queue` is false. Returns the new token, or `None` when the lock was
    /// not passed (not ours, or others wait). Repeating a pass whose reply was lost
    /// is safe: it finds `next` holding and claims the lock for it again.
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
    /// # use latchkey::store::{Pass, RedisStore};
    /// # async fn demo(store: RedisStore, key: latchkey::LockKey, me: latchkey::OwnerToken, next: latchkey::OwnerToken) -> latchkey::Result<()> {
    /// match store.pass(&key, &me, &next, latchkey::Ttl::DEFAULT, false).await? {
    ///     Some(fence) => println!("passed on, fence {fence}"),
    ///     None => println!("not passed: others wait, or it was not ours"),
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
    ) -> impl Future<Output = Result<Option<u64>>> + Send {
        let _ = (key, owner, next, ttl, ahead_of_queue);
        async { Ok(None) }
    }

    /// Whether [`pass`](Self::pass) hands a lock over: then a hold can also be handed
    /// to another process ([`MutexGuard::detach`](crate::MutexGuard::detach) and
    /// [`Mutex::adopt`](crate::Mutex::adopt)). False unless a store says so.
    ///
    /// ```
    /// # use latchkey::store::Pass;
    /// fn can_hand_off(store: &impl Pass) -> bool {
    ///     store.hands_over()
    /// }
    /// ```
    fn hands_over(&self) -> bool {
        false
    }

    /// [`pass`](Self::pass) for a next owner that asks for its fencing token only
    /// when it needs one ([`LockStore::fence`](super::LockStore::fence)): a store
    /// may then pass the lock without computing one. `None` when not passed;
    /// `Some(token)` when passed, with the token if the store computed one. The
    /// default passes with a token (and says so), for stores that hand tokens out
    /// only with their grants.
    ///
    /// ```no_run
    /// # use latchkey::store::{Pass, RedisStore};
    /// # async fn demo(store: RedisStore, key: latchkey::LockKey, me: latchkey::OwnerToken, next: latchkey::OwnerToken) -> latchkey::Result<()> {
    /// match store.pass_unfenced(&key, &me, &next, latchkey::Ttl::DEFAULT, false).await? {
    ///     Some(None) => println!("passed on; the next owner computes its token if it needs one"),
    ///     Some(Some(fence)) => println!("passed on, fence {fence}"),
    ///     None => println!("not passed: others wait, or it was not ours"),
    /// }
    /// # Ok(()) }
    /// ```
    fn pass_unfenced(
        &self,
        key: &LockKey,
        owner: &OwnerToken,
        next: &OwnerToken,
        ttl: Ttl,
        ahead_of_queue: bool,
    ) -> impl Future<Output = Result<Option<Option<u64>>>> + Send {
        let passed = self.pass(key, owner, next, ttl, ahead_of_queue);
        async move { Ok(passed.await?.map(Some)) }
    }
}

/// Capability: wake a waiter when a release picks it, instead of letting it
/// re-check on a timer.
///
/// The defaults return a [`Watch`] that never fires: waiters then re-check the lock
/// on a timer (a few ms, backing off to 100 ms).
///
/// ```no_run
/// # use latchkey::store::{RedisStore, WakeUps};
/// # async fn demo(store: RedisStore, key: latchkey::LockKey, me: latchkey::OwnerToken) -> latchkey::Result<()> {
/// let watch = match store.join_watch(&key, &me) {
///     Some(watch) => watch,
///     None => store.watch(&key, &me).await?,
/// };
/// # Ok(()) }
/// ```
pub trait WakeUps: LockStore {
    /// Starts listening for the wake-up a release sends `owner` on `key`. Returns
    /// once the subscription is confirmed, so no wake-up sent after it is missed
    /// while the subscriber connection lasts; when it is lost, the watch wakes its
    /// waiter to re-check and is not live until subscribed again.
    ///
    /// The Redis stores wait at most the 1 s reply timeout for the confirmation. If
    /// it does not come (the subscriber connection is down or stalled) the watch is
    /// returned anyway: [`Watch::is_live`] is then false until the subscription is
    /// confirmed, and the caller must re-check on its own meanwhile.
    ///
    /// # Errors
    ///
    /// The Redis stores return none: a subscriber connection that fails shows as a
    /// watch that is not live.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future unregisters the waiter; nothing stays behind.
    ///
    /// ```no_run
    /// # use latchkey::store::{RedisStore, WakeUps};
    /// # async fn demo(store: RedisStore, key: latchkey::LockKey, me: latchkey::OwnerToken) -> latchkey::Result<()> {
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
    ) -> impl Future<Output = Result<Watch>> + Send {
        let _ = (key, owner);
        async { Ok(Watch::never()) }
    }

    /// Like [`watch`](Self::watch), but only if that costs no round trip because
    /// this process already listens on `key` for other waiters. The default returns
    /// `None`: the caller then calls `watch`.
    ///
    /// ```no_run
    /// # use latchkey::store::{RedisStore, WakeUps};
    /// # fn demo(store: RedisStore, key: latchkey::LockKey, me: latchkey::OwnerToken) {
    /// if store.join_watch(&key, &me).is_none() {
    ///     println!("nobody here listens on this lock yet");
    /// }
    /// # }
    /// ```
    fn join_watch(&self, key: &LockKey, owner: &OwnerToken) -> Option<Watch> {
        let _ = (key, owner);
        None
    }
}

/// Capability: look at locks without taking them, for
/// [`Mutex::status`](crate::Mutex::status), [`Client::list`](crate::Client::list)
/// and the CLI's `status` and `list`.
///
/// ```no_run
/// # use latchkey::store::{Inspect, RedisStore};
/// # async fn demo(store: RedisStore, key: latchkey::LockKey) -> latchkey::Result<()> {
/// println!("{} waiting", store.inspect(&key).await?.waiters);
/// # Ok(()) }
/// ```
pub trait Inspect: LockStore {
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
    /// # use latchkey::store::{Inspect, RedisStore};
    /// # async fn demo(store: RedisStore, key: latchkey::LockKey) -> latchkey::Result<()> {
    /// let status = store.inspect(&key).await?;
    /// println!("held: {}, fence {:?}", status.is_held(), status.fence);
    /// # Ok(()) }
    /// ```
    fn inspect(&self, key: &LockKey) -> impl Future<Output = Result<LockStatus>> + Send;

    /// The keys matching `pattern` (Redis glob syntax) that can be locks: strings,
    /// not latchkey's companion keys. The Redis stores use SCAN, never KEYS (on a
    /// cluster, on every primary). Sorted, without duplicates.
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
    /// # use latchkey::store::{Inspect, RedisStore};
    /// # async fn demo(store: RedisStore) -> latchkey::Result<()> {
    /// for key in store.scan("app:*").await? {
    ///     println!("{key}");
    /// }
    /// # Ok(()) }
    /// ```
    fn scan(&self, pattern: &str) -> impl Future<Output = Result<Vec<String>>> + Send;
}
