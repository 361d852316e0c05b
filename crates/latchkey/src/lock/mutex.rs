//! The handle to one named lock.

use std::time::{Duration, Instant};

use super::fairness::Fairness;
use super::fencing::Fencing;
use super::guard::{MutexGuard, can_hand_off};
use super::hold_token::HoldToken;
use super::local::LocalLocks;
use super::release_on_drop::{HoldState, ReleaseOnDrop};
use super::section;
use super::waiter::{self, Wait, Won};
use crate::error::{Error, Result};
use crate::key::LockKey;
use crate::lease::{Lease, Ttl};
use crate::metrics::{Acquisition, Meter};
use crate::store::{AcquireRequest, Inspect, LockStatus, Pass, RedisStore, WakeUps};
use crate::token::{OwnerToken, mask_owner};
use tracing::Instrument;

/// How long a queued waiter counts as alive without trying again. It tries again at
/// least every third of this, and a try that gets no reply within the response
/// timeout (1 s) is retried at once, so renewals land at most a third of the lease
/// plus two response timeouts apart: a live waiter keeps its place through a slow
/// reply, and only a dead (or frozen) waiter outlives its lease.
pub(crate) const DEFAULT_WAITER_LEASE: Ttl = Ttl::from_millis_const(5_000);

/// A lock changing hands this often while being broken is being fought over.
const FORCE_ATTEMPTS: usize = 5;

/// A distributed mutex: a handle to one named lock, cheap to clone.
///
/// Like `tokio::sync::Mutex`, taking it returns a guard whose life is the critical
/// section. Unlike an in-process mutex, the hold is a *lease*: Redis frees the lock
/// when it runs out, so a crashed holder cannot block everybody forever. By default a
/// watchdog renews the 30 s lease while the guard lives;
/// [`with_lease`](Self::with_lease) sets another [`Lease`].
///
/// Waiters do not poll: they queue in Redis, and a release hands the lock to the
/// oldest live waiter and wakes just that one through pub/sub (see
/// [Waiting](crate#waiting)). By default the lock is *plain*: a newcomer may take a
/// *free* lock without queueing, and while a task of this process holds it, other
/// tasks of the process queue locally and get it passed on in one round trip (while
/// tasks of other processes wait, for at most 10 ms before they get it). [`Fairness::Fair`] makes it
/// strictly FIFO across all processes: no newcomer takes a free lock that a live
/// waiter is owed, and no local passing (see [Plain or fair](crate#plain-or-fair)).
///
/// The settings ([`with_lease`](Self::with_lease),
/// [`with_fairness`](Self::with_fairness), [`with_waiter_lease`](Self::with_waiter_lease))
/// belong to the handle, not to the lock in Redis: each handle takes the lock its
/// own way.
///
/// ```no_run
/// use std::time::Duration;
///
/// # async fn demo() -> latchkey::Result<()> {
/// let client = latchkey::Client::open("redis://127.0.0.1:6379").await?;
/// let mutex = client.mutex("reports:nightly")?.with_fairness(latchkey::Fairness::Fair);
///
/// let guard = mutex.lock_timeout(Duration::from_secs(5)).await?;
/// println!("fencing token {}", guard.fence().await?);
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Mutex<S = RedisStore> {
    store: S,
    key: LockKey,
    lease: Lease,
    fairness: Fairness,
    fencing: Fencing,
    waiter_lease: Ttl,
    local: LocalLocks,
}

impl<S: Pass + WakeUps> Mutex<S> {
    /// A handle to the lock at `key`: plain, with a renewed 30 s lease.
    /// Usually made by [`Client::mutex`](crate::Client::mutex).
    ///
    /// Handles made by one [`Client`](crate::Client) (and clones of one handle)
    /// pass the lock between their tasks without freeing it; see [`Mutex`]. A handle
    /// made here has a local line of its own: other handles made with `new` take the
    /// lock through Redis, as another process would.
    ///
    /// ```no_run
    /// # async fn demo() -> latchkey::Result<()> {
    /// use latchkey::{LockKey, Mutex, Prefix, store::RedisStore};
    ///
    /// let store = RedisStore::open("redis://127.0.0.1:6379").await?;
    /// let mutex = Mutex::new(store, LockKey::new(&Prefix::default(), "reindex")?);
    /// # Ok(()) }
    /// ```
    pub fn new(store: S, key: LockKey) -> Self {
        Self::with_local(store, key, LocalLocks::default())
    }

    pub(crate) fn with_local(store: S, key: LockKey, local: LocalLocks) -> Self {
        Mutex {
            store,
            key,
            lease: Lease::default(),
            fairness: Fairness::Plain,
            fencing: Fencing::OnDemand,
            waiter_lease: DEFAULT_WAITER_LEASE,
            local,
        }
    }

    /// The same lock with another [`Lease`]: how long each acquisition holds it,
    /// and whether a watchdog renews it (the default: 30 s, renewed). See
    /// [Leases](crate#leases).
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// use std::time::Duration;
    /// use latchkey::Lease;
    ///
    /// let cart = client.mutex("cart:42")?.with_lease(Lease::fixed(Duration::from_millis(500))?);
    /// let etl = client.mutex("etl")?.with_lease(Lease::renewed(Duration::from_secs(10))?);
    /// # Ok(()) }
    /// ```
    pub fn with_lease(mut self, lease: Lease) -> Self {
        self.lease = lease;
        self
    }

    /// The same lock with another [`Fairness`]: [`Fairness::Fair`] makes waiters get
    /// it in order of arrival, across processes. See
    /// [Plain or fair](crate#plain-or-fair).
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// let mutex = client.mutex("printer")?.with_fairness(latchkey::Fairness::Fair);
    /// # Ok(()) }
    /// ```
    pub fn with_fairness(mut self, fairness: Fairness) -> Self {
        self.fairness = fairness;
        self
    }

    /// The same lock with another [`Fencing`]: [`Fencing::OnGrant`] computes the
    /// fencing token with every grant, for holders that always write with it; the
    /// default computes it when first asked for. See [Fencing](crate#fencing).
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// let mutex = client.mutex("ledger")?.with_fencing(latchkey::Fencing::OnGrant);
    /// # Ok(()) }
    /// ```
    pub fn with_fencing(mut self, fencing: Fencing) -> Self {
        self.fencing = fencing;
        self
    }

    /// How long a waiter that stopped trying (it crashed or froze) keeps its place in
    /// the queue; default 5 s. A dead waiter delays the others by at most this. Keep
    /// it above 3 s: a live waiter renews every third of it, and a renewal whose
    /// reply is lost is retried after the 1 s response timeout. A lock handed to a
    /// waiter that died stays held for at most the rest of its waiter lease. See
    /// [Waiting](crate#waiting).
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// let lease = latchkey::Ttl::new(std::time::Duration::from_secs(10))?;
    /// let mutex = client.mutex("q")?.with_waiter_lease(lease);
    /// # Ok(()) }
    /// ```
    pub fn with_waiter_lease(mut self, lease: Ttl) -> Self {
        self.waiter_lease = lease;
        self
    }

    /// The same lock, with its name as a `name` label on its metrics (see
    /// [`crate::metrics`]). For locks whose names are few (a nightly job, a
    /// resource pool): a lock per order or per user would make a time series each.
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// let nightly = client.mutex("nightly-report")?.with_named_metrics();
    /// # Ok(()) }
    /// ```
    pub fn with_named_metrics(mut self) -> Self {
        self.key = self.key.with_named_metrics();
        self
    }

    /// The lock's Redis key.
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// assert_eq!(client.mutex("jobs")?.key().as_str(), "jobs");
    /// # Ok(()) }
    /// ```
    pub fn key(&self) -> &LockKey {
        &self.key
    }

    /// The lease each acquisition gets.
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// assert_eq!(client.mutex("jobs")?.lease(), latchkey::Lease::default());
    /// # Ok(()) }
    /// ```
    pub fn lease(&self) -> Lease {
        self.lease
    }

    /// Whether the lock is plain or fair.
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// assert_eq!(client.mutex("jobs")?.fairness(), latchkey::Fairness::Plain);
    /// # Ok(()) }
    /// ```
    pub fn fairness(&self) -> Fairness {
        self.fairness
    }

    /// When the fencing token is computed.
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// assert_eq!(client.mutex("jobs")?.fencing(), latchkey::Fencing::OnDemand);
    /// # Ok(()) }
    /// ```
    pub fn fencing(&self) -> Fencing {
        self.fencing
    }

    /// The store the lock is kept in.
    pub(crate) fn store(&self) -> &S {
        &self.store
    }

    fn is_fair(&self) -> bool {
        self.fairness == Fairness::Fair
    }

    /// Takes the lock if it is free, in one round trip; [`Error::Busy`] if not. The
    /// one attempt is not retried and never waits in a queue, not even behind a task
    /// of this process. It returns after at most about 3 s on a connection latchkey
    /// made (a 2 s connect timeout when the connection must be made again, then the
    /// 1 s reply timeout).
    ///
    /// # Errors
    ///
    /// - [`Error::Busy`] if someone holds the lock (for a fair lock: also if it is
    ///   free but owed to a live waiter); `retry_after` is the holder's remaining
    ///   lease, if it set one;
    /// - [`Error::Unreachable`] for a connection failure or a reply that timed out;
    /// - [`Error::WrongType`] if the key holds something that is not a lock;
    /// - [`Error::AuthFailed`], [`Error::AclDenied`], [`Error::ReadOnly`],
    ///   [`Error::NotRedis`], [`Error::Tls`], [`Error::Redis`] as the server answers;
    /// - [`Error::Entropy`] if no owner token could be drawn.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future leaves no lock behind: if the attempt may already have
    /// reached Redis, a release runs in the background (see
    /// [Cancel safety](crate#cancel-safety)).
    ///
    /// ```no_run
    /// # async fn demo(mutex: latchkey::Mutex) -> latchkey::Result<()> {
    /// match mutex.try_lock().await {
    ///     Ok(guard) => { /* critical section */ guard.release().await?; }
    ///     Err(latchkey::Error::Busy { .. }) => println!("someone else runs it"),
    ///     Err(other) => return Err(other),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_lock(&self) -> Result<MutexGuard<S>> {
        self.acquire(Some(Instant::now())).await
    }

    /// Waits until the lock is ours, for as long as it takes.
    ///
    /// Transient failures (a dropped connection, a reply that timed out, a server
    /// still loading its data after a restart) are retried with capped backoff and
    /// logged at `warn` level; only an error that retrying cannot fix (credentials,
    /// ACL, a key of another type) ends the wait.
    ///
    /// See [Waiting](crate#waiting) for how it waits.
    ///
    /// # Errors
    ///
    /// Never [`Error::Busy`], [`Error::Unreachable`] or [`Error::TooFewReplicas`]:
    /// those are waited or retried out (so with replicas that never confirm, it
    /// waits until they do: use [`lock_timeout`](Self::lock_timeout) to bound it). It returns [`Error::AuthFailed`], [`Error::AclDenied`],
    /// [`Error::WrongType`], [`Error::ReadOnly`], [`Error::NotRedis`], [`Error::Tls`]
    /// or an [`Error::Redis`] that is not transient, at the first attempt that meets
    /// one, and [`Error::Entropy`] if no owner token could be drawn.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: dropping the future (for example under `tokio::time::timeout` or
    /// in a `select!`) leaves no lock behind and leaves the wait queue, even if the
    /// acquire had already reached Redis or a release had just handed the lock over.
    /// What it may have had in Redis is undone by a release in the background; a lock
    /// handed to it goes on to the next waiter.
    ///
    /// ```no_run
    /// # async fn demo(mutex: latchkey::Mutex) -> latchkey::Result<()> {
    /// let guard = mutex.lock().await?;
    /// # Ok(()) }
    /// ```
    pub async fn lock(&self) -> Result<MutexGuard<S>> {
        self.acquire(None).await
    }

    /// Waits at most `wait` for the lock. Returns soon after `wait` whatever the
    /// network does: every round trip is cut off at the deadline (and undone in the
    /// background), and a waiter that gives up takes at most 50 ms more to leave the
    /// queue before it leaves it in the background. A zero `wait` makes one attempt,
    /// as [`try_lock`](Self::try_lock) does. Retries as for [`lock`](Self::lock); see
    /// [Waiting](crate#waiting).
    ///
    /// # Errors
    ///
    /// - [`Error::Busy`] with the time waited when the deadline passed and the last
    ///   attempt found the lock held. An attempt still unanswered at the deadline
    ///   (Redis paused, a stalled path) also ends in `Busy`, with `retry_after:
    ///   None`;
    /// - the last transient error ([`Error::Unreachable`], or an [`Error::Redis`] for
    ///   a server that is loading or failing over) when the last answered attempt
    ///   failed with one;
    /// - at once, the errors retrying cannot fix, as for [`lock`](Self::lock).
    ///
    /// # Cancel safety
    ///
    /// As for [`lock`](Self::lock): dropping the future leaves no lock behind and
    /// leaves the wait queue.
    ///
    /// ```no_run
    /// # async fn demo(mutex: latchkey::Mutex) -> latchkey::Result<()> {
    /// let guard = mutex.lock_timeout(std::time::Duration::from_secs(10)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn lock_timeout(&self, wait: Duration) -> Result<MutexGuard<S>> {
        // A wait too long to represent is a wait without deadline. The wait counts
        // from here: a busy error says it waited all of `wait`.
        let started = Instant::now();
        self.acquire_since(started, started.checked_add(wait)).await
    }

    /// Runs `work` under the lock and releases it after. If the lease is lost while
    /// `work` runs, `work` is cancelled (dropped at its next `.await`) and the result
    /// is [`Error::LeaseLost`]. Waits for the lock without limit, like [`lock`](Self::lock).
    ///
    /// # Errors
    ///
    /// - as [`lock`](Self::lock) while waiting;
    /// - [`Error::LeaseLost`] if the lease was lost while `work` ran (it was
    ///   cancelled) or the release found the lock no longer ours (`work` finished,
    ///   but partly unprotected); `work`'s value is dropped;
    /// - the release's error ([`Error::Unreachable`] …), with `work`'s value dropped;
    ///   the lock is then released in the background.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future while it waits is as for [`lock`](Self::lock); while `work`
    /// runs, it drops `work` and releases the lock in the background; during the
    /// release, the release still happens in the background.
    ///
    /// ```no_run
    /// # async fn demo(mutex: latchkey::Mutex) -> latchkey::Result<()> {
    /// let total = mutex.with_lock(async |guard| {
    ///     println!("fence {:?}", guard.fence().await);
    ///     42
    /// }).await?;
    /// # Ok(()) }
    /// ```
    pub async fn with_lock<T>(&self, work: impl AsyncFnOnce(&MutexGuard<S>) -> T) -> Result<T> {
        section::run_under(self.lock().await?, work).await
    }

    /// Whether anybody (latchkey or another library) holds the lock right now: one
    /// GET. A lock handed to a waiter counts as held, from the moment of the handover.
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`] if the key holds something that is not a string;
    /// [`Error::Unreachable`], [`Error::AclDenied`] and the other errors a reply can
    /// carry. Not retried.
    ///
    /// # Cancel safety
    ///
    /// It only reads: dropping the future has no effect.
    ///
    /// ```no_run
    /// # async fn demo(mutex: latchkey::Mutex) -> latchkey::Result<()> {
    /// if mutex.is_locked().await? { println!("busy"); }
    /// # Ok(()) }
    /// ```
    pub async fn is_locked(&self) -> Result<bool> {
        Ok(self.store.owner(&self.key).await?.is_some())
    }

    /// Takes over a hold another guard [`detach`](MutexGuard::detach)ed (in this
    /// process or another), in one round trip: the lock passes, still held, from the
    /// token's owner to a fresh owner of this process, with this mutex's lease and a
    /// new fencing token from the server (larger than the token's). The guard is
    /// renewed and released as if this process had taken the lock. The token is
    /// spent: a second adopt, an extend or a release by it finds the lock no longer
    /// its own.
    ///
    /// # Errors
    ///
    /// [`Error::LeaseLost`] if the lock is no longer held by the token (its lease
    /// ended, it was broken, or the token was adopted already);
    /// [`Error::InvalidArgument`] on a store that cannot hand a hold off (a quorum);
    /// the errors a reply can carry.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future may have passed the lock to an owner nobody holds a guard
    /// of: it is then free again when this mutex's lease ends.
    ///
    /// ```no_run
    /// # async fn demo(mutex: latchkey::Mutex, token: &str) -> latchkey::Result<()> {
    /// let guard = mutex.adopt(&token.parse()?).await?;
    /// // … the work, under guard.fence() …
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn adopt(&self, token: &HoldToken) -> Result<MutexGuard<S>> {
        can_hand_off(&self.store)?;
        let ttl = self.lease.in_redis();
        let owner = OwnerToken::generate()?;
        let sent = Instant::now();
        let passed = self
            .store
            .pass(&self.key, token.owner(), &owner, ttl, true)
            .await?;
        let Some(fence) = passed else {
            return Err(Error::lease_lost(&self.key));
        };
        let hold = ReleaseOnDrop::held(self.store.clone(), self.key.clone(), owner, None, ttl);
        let won = Won {
            hold,
            fence: Some(fence),
            valid_until: ttl.valid_until(sent),
            top_up: false,
            replicas: None,
        };
        Ok(MutexGuard::new(won, self.lease))
    }

    /// Resets the lease of a [`detach`](MutexGuard::detach)ed hold to `ttl` from
    /// now, from any process. One round trip, not retried.
    ///
    /// # Errors
    ///
    /// [`Error::LeaseLost`] if the lock is no longer held by the token;
    /// [`Error::InvalidArgument`] for a `ttl` under 10 ms, or on a store that cannot
    /// hand a hold off (a quorum); the errors a reply can carry.
    ///
    /// ```no_run
    /// # async fn demo(mutex: latchkey::Mutex, token: latchkey::HoldToken) -> latchkey::Result<()> {
    /// mutex.extend_held(&token, std::time::Duration::from_secs(60)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn extend_held(&self, token: &HoldToken, ttl: Duration) -> Result<()> {
        can_hand_off(&self.store)?;
        let ttl = Ttl::at_least(ttl, Lease::MIN_FIXED, "an extension")?;
        self.extend_or_lost(token, ttl).await
    }

    /// Releases a [`detach`](MutexGuard::detach)ed hold from any process, handing
    /// the lock to the oldest live waiter as a guard's release does; returns
    /// whether the lock was still held by the token. Transient failures are
    /// retried as a guard's release is (up to 3 s here, then in the background
    /// until the hold has surely ended).
    ///
    /// # Errors
    ///
    /// The errors a reply can carry, once retries are over.
    ///
    /// ```no_run
    /// # async fn demo(mutex: latchkey::Mutex, token: latchkey::HoldToken) -> latchkey::Result<()> {
    /// if !mutex.release_held(&token).await? {
    ///     eprintln!("the lease had ended: the work may overlap the next holder's");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn release_held(&self, token: &HoldToken) -> Result<bool> {
        can_hand_off(&self.store)?;
        let ttl = self.lease.in_redis();
        let owner = token.owner().clone();
        ReleaseOnDrop::held(self.store.clone(), self.key.clone(), owner, None, ttl)
            .release()
            .await
    }

    /// Extends the hold of `token` to `ttl` (and this mutex's lock delay), or says
    /// its lease is lost.
    async fn extend_or_lost(&self, token: &HoldToken, ttl: Ttl) -> Result<()> {
        let in_redis = ttl.plus(self.lease.lock_delay())?;
        if self
            .store
            .extend(&self.key, token.owner(), in_redis)
            .await?
        {
            return Ok(());
        }
        Err(Error::lease_lost(&self.key))
    }

    pub(crate) async fn acquire(&self, deadline: Option<Instant>) -> Result<MutexGuard<S>> {
        self.acquire_since(Instant::now(), deadline).await
    }

    /// Takes the lock for a call made at `started`, waiting until `deadline`.
    async fn acquire_since(
        &self,
        started: Instant,
        deadline: Option<Instant>,
    ) -> Result<MutexGuard<S>> {
        let wait = self.wait(started, deadline);
        let local = self.local();
        let acquisition = Acquisition::start(self.meter(), started, deadline);
        let result = waiter::acquire(&self.store, &self.key, wait, local)
            .instrument(acquisition.span().clone())
            .await;
        let mut won = acquisition.ended(result)?;
        won.hold.local = local.cloned();
        Ok(MutexGuard::new(won, self.lease))
    }

    /// What a call made at `started` wants, waiting until `deadline`.
    fn wait(&self, started: Instant, deadline: Option<Instant>) -> Wait {
        Wait {
            started,
            // What Redis keeps the lock for; the guard counts on the lease alone.
            ttl: self.lease.in_redis(),
            lock_delay: self.lease.lock_delay(),
            fair: self.is_fair(),
            fenced: self.fencing == Fencing::OnGrant,
            waiter_lease: self.waiter_lease,
            deadline,
        }
    }

    /// The tasks of this process it passes between: fair locks keep strict FIFO
    /// order in Redis, plain ones pass between local tasks.
    fn local(&self) -> Option<&LocalLocks> {
        (!self.is_fair()).then_some(&self.local)
    }
}

/// Takes made outside [`Mutex::acquire`]: a multi-lock's one step for several locks.
impl<S: Pass + WakeUps> Mutex<S> {
    /// What this lock's first try asks for.
    pub(crate) fn first_try(&self) -> AcquireRequest {
        self.wait(Instant::now(), None).first_try()
    }

    /// A hold for a try about to be sent under a fresh owner: dropped before it is a
    /// guard, it undoes whatever the try did.
    pub(crate) fn trying(&self) -> Result<ReleaseOnDrop<S>> {
        let owner = OwnerToken::generate()?;
        let mut hold = ReleaseOnDrop::new(
            self.store.clone(),
            self.key.clone(),
            owner,
            self.lease.in_redis(),
        );
        hold.state = HoldState::Trying;
        Ok(hold)
    }

    /// The guard of the lock `hold` took in a try sent at `sent`, made as
    /// [`acquire`](Self::acquire) makes it, and counted as a granted call.
    pub(crate) fn taken(&self, mut hold: ReleaseOnDrop<S>, sent: Instant) -> MutexGuard<S> {
        Acquisition::start(self.meter(), sent, Some(sent)).granted();
        hold.state = HoldState::Held;
        if let Some(local) = self.local() {
            local.mark_held(&self.key);
        }
        hold.local = self.local().cloned();
        let won = Won {
            hold,
            fence: None,
            valid_until: self.lease.in_redis().valid_until(sent),
            top_up: false,
            replicas: None,
        };
        MutexGuard::new(won, self.lease)
    }

    /// The error of a try sent at `sent` that found the lock held by `holder` (its
    /// owner token), for `pttl` more, counted as a busy call.
    pub(crate) fn found_busy(
        &self,
        sent: Instant,
        pttl: Option<Duration>,
        holder: Option<&str>,
    ) -> Error {
        let error = Error::busy(&self.key, Duration::ZERO, holder.map(mask_owner), pttl);
        Acquisition::start(self.meter(), sent, Some(sent)).failed(&error);
        error
    }

    fn meter(&self) -> Meter<'_> {
        Meter::new(self.store.deployment(), &self.key)
    }
}

/// Looking at a lock without taking it, on stores that can ([`Inspect`]).
impl<S: Pass + WakeUps + Inspect> Mutex<S> {
    /// A consistent snapshot, read in one script: holder (mask it before display),
    /// remaining lease, last fencing token, waiters. See [`LockStatus`].
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`] if the key (or one of its companion keys) holds something
    /// of another type; [`Error::Unreachable`], [`Error::AclDenied`] and the other
    /// errors a reply can carry. Not retried.
    ///
    /// # Cancel safety
    ///
    /// It only reads: dropping the future has no effect.
    ///
    /// ```no_run
    /// # async fn demo(mutex: latchkey::Mutex) -> latchkey::Result<()> {
    /// let status = mutex.status().await?;
    /// println!("held by {:?}, {} waiting", status.masked_holder(), status.waiters);
    /// # Ok(()) }
    /// ```
    pub async fn status(&self) -> Result<LockStatus> {
        self.store.inspect(&self.key).await
    }

    /// Breaks the lock whoever holds it, latchkey or another library (an operator's
    /// tool, for a holder known to be gone). It releases the lock as its holder would,
    /// so the oldest live waiter gets it, as after a release. Returns the status the
    /// lock had when broken, or `None` if it was free.
    ///
    /// A latchkey holder learns of it at its next renewal or extend (its `lost`
    /// signal then fires), or when its release returns `false`; until then it may
    /// still be working. Its fencing token is what keeps its late writes out.
    ///
    /// # Errors
    ///
    /// [`Error::Busy`] (with `waited` zero) if the lock changed hands between reading
    /// the holder and breaking its hold five times in a row; [`Error::WrongType`],
    /// [`Error::Unreachable`], [`Error::AclDenied`], [`Error::ReadOnly`] and the other
    /// errors a reply can carry. Not retried.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future may or may not have broken the lock: check with
    /// [`status`](Self::status).
    ///
    /// ```no_run
    /// # async fn demo(mutex: latchkey::Mutex) -> latchkey::Result<()> {
    /// if let Some(was) = mutex.force_release().await? {
    ///     println!("broke the lock of {:?}", was.masked_holder());
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn force_release(&self) -> Result<Option<LockStatus>> {
        let mut last = None;
        for _ in 0..FORCE_ATTEMPTS {
            let status = self.status().await?;
            let Some(holder) = &status.holder else {
                return Ok(None);
            };
            // Releasing as the holder hands the lock on exactly as its own release would.
            let holder = OwnerToken::from_stored(holder.clone());
            if self.store.release(&self.key, &holder, None).await? {
                return Ok(Some(status));
            }
            last = Some(status);
        }
        // It changed hands under every attempt: busy, as its latest holder left it.
        Err(Error::busy(
            &self.key,
            Duration::ZERO,
            last.as_ref().and_then(LockStatus::masked_holder),
            last.and_then(|status| status.ttl),
        ))
    }
}
