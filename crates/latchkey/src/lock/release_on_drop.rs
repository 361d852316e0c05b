//! The one place that frees a lock: explicitly, or when nobody else will.
//!
//! A waiting future and a held lock both own a [`ReleaseOnDrop`], whose [`HoldState`]
//! says what this owner may have in Redis. [`release`](ReleaseOnDrop::release) undoes
//! exactly that: it passes a held lock to a local waiter of this process if there is
//! one (see [`super::local`]), else runs the release script, which leaves the wait
//! queue, frees or hands over the lock if it is ours, and is a harmless no-op
//! otherwise. Dropping the hold in any state but [`HoldState::Clear`] runs the same
//! release in a task on the runtime the lock was taken on: it never blocks the
//! executor. Commands on one connection run in order, so it lands after any acquire
//! still in flight on that connection.
//!
//! A release is retried on transient failures (a connection reset, a reply that
//! timed out, a server still loading its data), each time on a fresh connection,
//! with capped backoff, until it succeeds or what it would free has surely ended on
//! its own: the lease, or the waiter lease. The user-facing account is the crate
//! docs' `# Cancel safety` and `# Under faults` sections.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use tokio::runtime::Handle;
use tokio_util::task::TaskTracker;

use super::backoff::Backoff;
use super::held::LeaseState;
use super::local::{LocalLocks, LocalWaiter, Passed, Turn};
use super::watchdog::Stopper;
use crate::error::Result;
use crate::key::{Kind, LockKey};
use crate::lease::Ttl;
use crate::metrics::Meter;
use crate::store::{Pass, RESPONSE_TIMEOUT, WakeUps};
use crate::token::OwnerToken;

/// Pauses between tries of a release that failed: from 10 ms doubling to 250 ms, so
/// a release is done within a quarter of a second of Redis answering again.
const RETRY_FIRST: Duration = Duration::from_millis(10);
const RETRY_CAP: Duration = Duration::from_millis(250);
/// How long an explicit [`release`](ReleaseOnDrop::release) keeps trying before it
/// reports the failure (tries go on in the background until the lease ends).
const FOREGROUND_PATIENCE: Duration = Duration::from_secs(3);

/// What an owner may have in Redis, hence what giving up must undo.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HoldState {
    /// Nothing: giving up costs no round trip.
    Clear,
    /// An acquire is in flight, or its reply was lost: it may have set the lock.
    Trying,
    /// In the wait queue, asking for this lease, where a release may hand us the
    /// lock at any moment.
    Queued(Ttl),
    /// The lock is ours.
    Held,
}

/// A possible hold on a lock, released in the background if dropped while not clear.
pub(crate) struct ReleaseOnDrop<S: Pass + WakeUps> {
    pub(crate) store: S,
    pub(crate) key: LockKey,
    pub(crate) owner: OwnerToken,
    pub(crate) state: HoldState,
    /// Set on a held plain lock: local waiters to pass it to.
    pub(crate) local: Option<LocalLocks>,
    /// The local waiter a pass in flight is for. Kept here, not in the pass's
    /// future: a release dropped while its pass is in flight (which may land)
    /// leaves the waiter to the background release, which passes to it again
    /// (`pass.lua` finds a landed pass) and tells it. Dropped with the future, the
    /// waiter would leave unaware, the lock held under its token by nobody.
    passing: Option<LocalWaiter>,
    /// How long a pass of ours that may have landed (its reply lost, or its waiter
    /// gone) may keep the lock: its sending plus the waiter's lease. Retries go on
    /// until then, though our own lease ends sooner.
    passed_until: Option<Instant>,
    /// Others waited in Redis when the lock was granted: a pass to a local waiter
    /// goes ahead of them, which `LocalLocks::pass_ahead` bounds; past the bound the
    /// release goes straight to Redis.
    pub(crate) others_queued: bool,
    /// The longest lease any request of this owner asked for (a lock, or a place in
    /// the queue): nothing of ours outlives it by much, so retries stop after it.
    pub(crate) ttl: Ttl,
    /// The guard's lease, once there is a guard: retries of a held lock's release
    /// stop when it has surely ended.
    pub(crate) lease: Option<Arc<LeaseState>>,
    /// The guard's watchdog: a release stops it and waits out a renewal in flight.
    pub(crate) stopper: Option<Stopper>,
    /// When the guard got the lock, until the hold ends (for its metrics).
    held_since: Option<Instant>,
    /// The hold's `latchkey.hold` span (debug level), closed when it ends.
    span: tracing::Span,
    runtime: Option<Handle>,
}

impl<S: Pass + WakeUps> ReleaseOnDrop<S> {
    /// A clear hold whose requests ask for leases of at most `ttl`; set
    /// [`state`](Self::state) before anything may set the lock.
    pub(crate) fn new(store: S, key: LockKey, owner: OwnerToken, ttl: Ttl) -> Self {
        ReleaseOnDrop {
            store,
            key,
            owner,
            state: HoldState::Clear,
            local: None,
            passing: None,
            passed_until: None,
            others_queued: false,
            ttl,
            lease: None,
            stopper: None,
            held_since: None,
            span: tracing::Span::none(),
            runtime: Handle::try_current().ok(),
        }
    }

    /// A hold on a lock that is ours for at most `ttl`, passed on to `local`'s
    /// waiters when released.
    pub(crate) fn held(
        store: S,
        key: LockKey,
        owner: OwnerToken,
        local: Option<LocalLocks>,
        ttl: Ttl,
    ) -> Self {
        let mut hold = Self::new(store, key, owner, ttl);
        hold.state = HoldState::Held;
        hold.local = local;
        hold
    }

    /// A guard holds the lock from now, with `fence` if the grant brought one: its
    /// metrics count it and its span lasts until the hold ends.
    pub(crate) fn began(&mut self, fence: Option<u64>) {
        self.held_since = Some(Instant::now());
        self.meter().began(self.units());
        self.span = tracing::debug_span!(
            "latchkey.hold",
            lock = self.key.name(),
            primitive = self.key.kind().label(),
            fence,
            held_ms = tracing::field::Empty,
        );
    }

    /// The guard's hold ended (released, dropped or detached), if it had begun.
    fn hold_ended(&mut self) {
        let Some(since) = self.held_since.take() else {
            return;
        };
        let held = since.elapsed();
        self.meter().ended(self.units(), held);
        self.span.record("held_ms", held.as_millis() as u64);
        self.span = tracing::Span::none();
    }

    fn meter(&self) -> Meter<'_> {
        Meter::new(self.store.deployment(), &self.key)
    }

    /// What this hold counts for in `latchkey_held`: a semaphore grant its weight;
    /// a read-write lock's read or write one (its permit weights are internal).
    fn units(&self) -> u64 {
        match self.key.kind() {
            Kind::RwLock => 1,
            _ => self.store.units(),
        }
    }

    /// Lets go of the hold without releasing it: the lock stays in Redis (until its
    /// lease ends, or a release by token), and this process's waiters go there.
    pub(crate) fn detach(&mut self) {
        self.hold_ended();
        self.state = HoldState::Clear;
        if let Some(local) = self.local.take() {
            local.released(&self.key);
        }
    }

    /// An attempt came back without the lock: only a queued waiter keeps anything.
    pub(crate) fn not_taken(&mut self) {
        if self.state == HoldState::Trying {
            self.state = HoldState::Clear;
        }
    }

    /// Passes the lock to a local waiter, or releases it in Redis; clear once done.
    /// Returns whether the lock was ours. Transient failures are retried for up to
    /// [`FOREGROUND_PATIENCE`] while the lease lasts; on error the state stays, so
    /// dropping the hold goes on trying in the background.
    pub(crate) async fn release(&mut self) -> Result<bool> {
        let patience = Instant::now() + FOREGROUND_PATIENCE;
        self.release_until(Some(patience)).await
    }

    /// Stops the watchdog (waiting out a renewal in flight), then releases, trying
    /// again on transient failures until it succeeds, `give_up_at` passes, or what
    /// it would free has surely ended on its own.
    async fn release_until(&mut self, give_up_at: Option<Instant>) -> Result<bool> {
        self.hold_ended();
        if let Some(stopper) = self.stopper.take() {
            stopper.stop().await;
        }
        let ended = self.surely_ended_by();
        let mut backoff = Backoff::new(RETRY_FIRST, RETRY_CAP);
        // An earlier try may have freed the lock with its reply lost: a later try
        // then finds it not ours. Sent while the lease surely lasted, it was ours.
        let mut freed_unseen = false;
        loop {
            let sent_while_ours = self.surely_ours();
            let error = match self.release_once().await {
                Ok(released) => return Ok(released || freed_unseen),
                Err(error) => error,
            };
            freed_unseen |= sent_while_ours && error.outcome_unknown();
            let pause = backoff.next_pause(None);
            // A pass that may have landed, or a lock taken over from a waiter,
            // lives on the waiter's lease, not ours.
            let ended = self.passed_until.map_or(ended, |until| until.max(ended));
            let give_up_at = give_up_at.map_or(ended, |at| at.min(ended));
            if !error.is_transient() || Instant::now() + pause >= give_up_at {
                return Err(error);
            }
            tracing::debug!(key = %self.key, %error, "release failed; trying again on a fresh connection");
            self.meter().release_retried();
            tokio::time::sleep(pause).await;
        }
    }

    /// Whether the lock is held and its lease surely lasts, by our clock.
    fn surely_ours(&self) -> bool {
        self.state == HoldState::Held && self.lease.as_ref().is_some_and(|lease| !lease.is_lost())
    }

    /// When whatever this owner may hold has surely ended by itself: a held lock's
    /// lease (the reply that last set it came within the reply timeout of its
    /// sending, and Redis's clock may run a little slow), else the longest lease a
    /// request in flight or a place in the queue may have.
    fn surely_ended_by(&self) -> Instant {
        let now = Instant::now();
        let by_lease = self
            .lease
            .as_ref()
            .filter(|_| self.state == HoldState::Held)
            .map(|lease| lease.redis_ends() + lease.in_redis.drift() * 2 + RESPONSE_TIMEOUT);
        let by_ttl = now + self.ttl.as_duration() + self.ttl.drift() + RESPONSE_TIMEOUT;
        by_lease.unwrap_or(by_ttl).max(now)
    }

    /// One try: a pass to a local waiter, or the release in Redis.
    async fn release_once(&mut self) -> Result<bool> {
        let leaving = match self.state {
            HoldState::Clear => return Ok(false),
            HoldState::Queued(ttl) => Some(ttl),
            HoldState::Trying | HoldState::Held => None,
        };
        if let Some(local) = self.local.clone().filter(|_| self.state == HoldState::Held) {
            // Ahead of other processes only a bounded number of times in a row.
            let ahead = self.others_queued;
            // A pass already sent must be seen through, ahead or not.
            let go_on = self.passing.is_some() || !ahead || local.pass_ahead(&self.key);
            if go_on && self.pass_locally(&local, ahead).await? {
                self.state = HoldState::Clear;
                return Ok(true);
            }
            local.released(&self.key);
        }
        let released = self.release_in_store(leaving).await?;
        self.state = HoldState::Clear;
        Ok(released)
    }

    /// The release in the store: the cheap one for a hold that saw nobody queued,
    /// then (or else) the one that hands the lock to the queue or leaves it.
    async fn release_in_store(&self, leaving: Option<Ttl>) -> Result<bool> {
        if leaving.is_none() && !self.others_queued {
            if let Some(released) = self.store.release_alone(&self.key, &self.owner).await? {
                return Ok(released);
            }
        }
        self.store.release(&self.key, &self.owner, leaving).await
    }

    /// Tries the local waiters in turn; true once one of them holds the lock. A waiter
    /// that left after the pass landed leaves the lock under its token, which we then
    /// hold (and pass on, or release) in its place.
    async fn pass_locally(&mut self, local: &LocalLocks, ahead: bool) -> Result<bool> {
        // The waiter of a pass a dropped release cut off goes first.
        while let Some(next) = self.passing.take().or_else(|| local.next_waiter(&self.key)) {
            let sent = Instant::now();
            let next = &*self.passing.insert(next);
            let passed = pass_to(&self.store, &self.key, &self.owner, next, ahead).await;
            let Some(next) = self.passing.take() else {
                return Ok(false);
            };
            let fence = match passed {
                Ok(Some(fence)) => fence,
                // Not ours any more, or others wait in Redis (and we may not pass
                // ahead of them, or a fair waiter heads the line): they come first. The
                // waiter keeps its place here; `released` sends it to Redis if nobody
                // of this process is there to pass it the lock later.
                Ok(None) => {
                    local.put_back(&self.key, next);
                    return Ok(false);
                }
                // It may have landed: the waiter stays ours to see through (the next
                // try passes to it again), and the line stays represented.
                Err(error) if error.outcome_unknown() => {
                    self.may_have_passed(sent, next.ttl);
                    self.passing = Some(next);
                    return Err(error);
                }
                Err(error) => {
                    local.put_back(&self.key, next);
                    local.released(&self.key);
                    return Err(error);
                }
            };
            let (owner, ttl) = (next.owner.clone(), next.ttl);
            let turn = Turn::Yours(Passed {
                fence,
                sent,
                others_queued: ahead,
            });
            if next.tell(turn).is_ok() {
                return Ok(true);
            }
            // The waiter left: the lock is ours again, under its token and lease.
            self.may_have_passed(sent, ttl);
            self.owner = owner;
            self.ttl = ttl;
            self.lease = None;
        }
        Ok(false)
    }

    /// A pass sent at `sent` for a waiter's lease `ttl` may keep the lock until
    /// then (see `passed_until`).
    fn may_have_passed(&mut self, sent: Instant, ttl: Ttl) {
        let until = sent + ttl.as_duration() + ttl.drift() + RESPONSE_TIMEOUT;
        self.passed_until = Some(self.passed_until.map_or(until, |before| before.max(until)));
    }

    /// A hold with the same lock, owner and state, to move into a background task.
    fn take(&mut self) -> Self {
        ReleaseOnDrop {
            store: self.store.clone(),
            key: self.key.clone(),
            owner: self.owner.clone(),
            state: std::mem::replace(&mut self.state, HoldState::Clear),
            local: self.local.take(),
            passing: self.passing.take(),
            passed_until: self.passed_until,
            others_queued: self.others_queued,
            ttl: self.ttl,
            lease: self.lease.take(),
            stopper: self.stopper.take(),
            held_since: None,
            span: tracing::Span::none(),
            runtime: None,
        }
    }
}

/// Passes `owner`'s lock to `next`, with its fencing token if it wants it with the
/// lock: `Some(fence)` once passed (`Some(None)`: fenced on demand), `None` if not
/// passed (not ours, or others wait in Redis).
async fn pass_to<S: Pass>(
    store: &S,
    key: &LockKey,
    owner: &OwnerToken,
    next: &LocalWaiter,
    ahead: bool,
) -> Result<Option<Option<u64>>> {
    let (to, ttl) = (&next.owner, next.ttl);
    if next.fenced {
        return Ok(store.pass(key, owner, to, ttl, ahead).await?.map(Some));
    }
    store.pass_unfenced(key, owner, to, ttl, ahead).await
}

impl<S: Pass + WakeUps> Drop for ReleaseOnDrop<S> {
    fn drop(&mut self) {
        self.hold_ended();
        if self.state == HoldState::Clear {
            return;
        }
        let Some(runtime) = self.runtime.take() else {
            tracing::warn!(key = %self.key, "lock dropped outside a tokio runtime; it frees itself when its lease ends");
            // Local waiters must not wait behind a holder that is gone.
            if let Some(local) = self.local.take() {
                local.released(&self.key);
            }
            return;
        };
        let mut hold = self.take();
        // A runtime that is shutting down drops the task instead of running it; the
        // lease then ends on its own. Spawning itself never panics.
        background().spawn_on(async move {
            match hold.release_until(None).await {
                Ok(released) => tracing::debug!(key = %hold.key, released, "released a dropped lock"),
                Err(error) => {
                    hold.state = HoldState::Clear;
                    // Given up with a pass unresolved (the line was kept for it):
                    // the local waiters go to Redis, the one a pass may have reached
                    // (told nothing, as its place is dropped) under the token it was
                    // passed with, which claims a pass that landed.
                    if let Some(local) = hold.local.take().filter(|_| hold.passing.is_some()) {
                        local.released(&hold.key);
                    }
                    tracing::warn!(key = %hold.key, %error, "could not release a dropped lock; it frees itself when its lease ends");
                }
            }
        }, &runtime);
    }
}

/// Runs `release` (a release of something a caller let go: a lock, a leadership)
/// on `runtime` to its end, however early its caller stops waiting, among the
/// releases [`finish_background_releases`] waits for.
pub(crate) fn spawn_release<F>(release: F, runtime: &Handle) -> tokio::task::JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    background().spawn_on(release, runtime)
}

/// The releases running in the background, so a process can wait for them before it
/// exits (a runtime that shuts down drops them unfinished).
fn background() -> &'static TaskTracker {
    static BACKGROUND: OnceLock<TaskTracker> = OnceLock::new();
    BACKGROUND.get_or_init(TaskTracker::new)
}

/// Waits until every release this process started in the background has finished:
/// those of dropped guards and of waits that were cancelled or gave up. Call it
/// before the process exits (or its runtime shuts down), which would otherwise cut
/// them off and leave a lock held, or a queue entry, until its lease ends. Returns
/// `false` if some were still running after `timeout`.
///
/// # Cancel safety
///
/// Dropping the future stops only the waiting: the releases go on in the background.
///
/// ```no_run
/// # async fn demo(mutex: latchkey::Mutex) {
/// let waiting = mutex.lock();
/// tokio::select! {
///     _ = waiting => {}
///     _ = tokio::signal::ctrl_c() => {} // the wait is dropped: it leaves the queue in the background
/// }
/// latchkey::finish_background_releases(std::time::Duration::from_secs(2)).await;
/// # }
/// ```
pub async fn finish_background_releases(timeout: std::time::Duration) -> bool {
    let tracker = background();
    // `wait` needs a closed tracker; reopening lets later releases be tracked again.
    tracker.close();
    let finished = tokio::time::timeout(timeout, tracker.wait()).await.is_ok();
    tracker.reopen();
    finished
}

/// Each state undoes exactly what it may have in Redis, against a store that records
/// the calls it gets.
#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use super::*;
    use crate::error::Error;
    use crate::key::Prefix;
    use crate::store::{AcquireRequest, Attempt, LockStore};

    /// What the store was asked: `release(leaving)` or `pass(to)`.
    #[derive(Clone, Debug, PartialEq, Eq)]
    enum Call {
        Release {
            owner: OwnerToken,
            leaving: Option<Ttl>,
        },
        Pass {
            to: OwnerToken,
        },
    }

    #[derive(Clone, Default)]
    struct Recording {
        calls: Arc<Mutex<Vec<Call>>>,
        /// Releases that fail (a bad argument: not worth another try) before one succeeds.
        failures: Arc<Mutex<usize>>,
        /// Releases that fail as a reset connection does (worth another try).
        resets: Arc<Mutex<usize>>,
        /// A local waiter that leaves while the first pass is in flight.
        leaves_during_pass: Arc<Mutex<Option<tokio::sync::oneshot::Receiver<Turn>>>>,
    }

    impl Recording {
        fn calls(&self) -> Vec<Call> {
            self.calls.lock().unwrap().clone()
        }

        fn record(&self, call: Call) {
            self.calls.lock().unwrap().push(call);
        }
    }

    fn unused<T>() -> crate::Result<T> {
        Err(Error::InvalidArgument("not used by these tests".into()))
    }

    impl LockStore for Recording {
        fn node(&self) -> &str {
            "recording"
        }

        async fn try_acquire(
            &self,
            _: &LockKey,
            _: &OwnerToken,
            _: AcquireRequest,
        ) -> crate::Result<Attempt> {
            unused()
        }

        async fn release(
            &self,
            _: &LockKey,
            owner: &OwnerToken,
            leaving: Option<Ttl>,
        ) -> crate::Result<bool> {
            self.record(Call::Release {
                owner: owner.clone(),
                leaving,
            });
            let mut resets = self.resets.lock().unwrap();
            if *resets > 0 {
                *resets -= 1;
                return Err(Error::no_reply("recording"));
            }
            let mut failures = self.failures.lock().unwrap();
            if *failures > 0 {
                *failures -= 1;
                return Err(Error::InvalidArgument("Redis is away".into()));
            }
            Ok(true)
        }

        async fn extend(&self, _: &LockKey, _: &OwnerToken, _: Ttl) -> crate::Result<bool> {
            unused()
        }

        async fn owner(&self, _: &LockKey) -> crate::Result<Option<String>> {
            unused()
        }
    }

    impl Pass for Recording {
        async fn pass(
            &self,
            _: &LockKey,
            _: &OwnerToken,
            next: &OwnerToken,
            _: Ttl,
            _: bool,
        ) -> crate::Result<Option<u64>> {
            self.record(Call::Pass { to: next.clone() });
            drop(self.leaves_during_pass.lock().unwrap().take());
            Ok(Some(7))
        }
    }

    /// No wake-ups: these tests never wait.
    impl WakeUps for Recording {}

    fn hold(store: &Recording, state: HoldState) -> ReleaseOnDrop<Recording> {
        let key = LockKey::new(&Prefix::default(), "states").unwrap();
        let owner = OwnerToken::generate().unwrap();
        let mut hold = ReleaseOnDrop::new(store.clone(), key, owner, Ttl::DEFAULT);
        hold.state = state;
        hold
    }

    /// The release each state must send: none, a plain one, or one leaving the queue.
    fn expected(state: HoldState, owner: &OwnerToken) -> Vec<Call> {
        let release = |leaving| {
            vec![Call::Release {
                owner: owner.clone(),
                leaving,
            }]
        };
        match state {
            HoldState::Clear => Vec::new(),
            HoldState::Trying | HoldState::Held => release(None),
            HoldState::Queued(ttl) => release(Some(ttl)),
        }
    }

    const STATES: [HoldState; 4] = [
        HoldState::Clear,
        HoldState::Trying,
        HoldState::Queued(Ttl::DEFAULT),
        HoldState::Held,
    ];

    #[tokio::test]
    async fn a_release_undoes_what_each_state_may_have_and_clears_it() {
        for state in STATES {
            let store = Recording::default();
            let mut hold = hold(&store, state);
            hold.release().await.unwrap();
            assert_eq!(store.calls(), expected(state, &hold.owner), "{state:?}");
            assert_eq!(hold.state, HoldState::Clear);
        }
    }

    #[tokio::test]
    async fn a_dropped_hold_is_released_in_the_background_unless_clear() {
        for state in STATES {
            let store = Recording::default();
            let hold = hold(&store, state);
            let owner = hold.owner.clone();
            drop(hold);
            tokio::time::sleep(Duration::from_millis(10)).await;
            assert_eq!(store.calls(), expected(state, &owner), "{state:?}");
        }
    }

    #[tokio::test]
    async fn a_failed_release_keeps_the_state_so_the_drop_tries_again() {
        let store = Recording::default();
        *store.failures.lock().unwrap() = 1;
        let mut hold = hold(&store, HoldState::Queued(Ttl::DEFAULT));
        assert!(hold.release().await.is_err());
        assert_eq!(hold.state, HoldState::Queued(Ttl::DEFAULT));
        let owner = hold.owner.clone();
        drop(hold);
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert_eq!(
            store.calls(),
            [
                expected(HoldState::Queued(Ttl::DEFAULT), &owner),
                expected(HoldState::Queued(Ttl::DEFAULT), &owner)
            ]
            .concat()
        );
    }

    #[tokio::test]
    async fn a_release_that_meets_reset_connections_is_tried_again_until_it_lands() {
        for state in [
            HoldState::Trying,
            HoldState::Queued(Ttl::DEFAULT),
            HoldState::Held,
        ] {
            let store = Recording::default();
            *store.resets.lock().unwrap() = 3;
            let mut hold = hold(&store, state);
            assert!(hold.release().await.unwrap(), "{state:?}");
            let tries: Vec<Call> = (0..4).flat_map(|_| expected(state, &hold.owner)).collect();
            assert_eq!(store.calls(), tries, "{state:?}");
            assert_eq!(hold.state, HoldState::Clear);
        }
    }

    #[tokio::test]
    async fn a_dropped_hold_keeps_trying_in_the_background() {
        let store = Recording::default();
        *store.resets.lock().unwrap() = 5;
        let hold = hold(&store, HoldState::Held);
        drop(hold);
        assert!(finish_background_releases(Duration::from_secs(5)).await);
        assert_eq!(store.calls().len(), 6);
        assert_eq!(*store.resets.lock().unwrap(), 0);
    }

    #[tokio::test]
    async fn retries_stop_once_the_lease_has_surely_ended() {
        let store = Recording::default();
        *store.resets.lock().unwrap() = usize::MAX;
        let key = LockKey::new(&Prefix::default(), "short").unwrap();
        let ttl = Ttl::new(Duration::from_millis(50)).unwrap();
        let mut hold = ReleaseOnDrop::new(store.clone(), key, OwnerToken::generate().unwrap(), ttl);
        hold.state = HoldState::Trying;
        let started = Instant::now();
        assert!(hold.release().await.is_err());
        // The lease, its drift allowance and one reply timeout: then nothing is left.
        assert!(
            started.elapsed() < Duration::from_millis(1_300),
            "{:?}",
            started.elapsed()
        );
        assert!(store.calls().len() > 1);
        assert_eq!(hold.state, HoldState::Trying);
    }

    #[tokio::test]
    async fn a_held_lock_goes_to_the_next_local_waiter_and_a_gone_one_is_released_in_its_name() {
        // A waiter that asks for its token on grant, and one that asks on demand: a
        // store that passes only with a token (this one, through the default
        // `pass_unfenced`) hands both the token it computed.
        for fenced in [true, false] {
            let store = Recording::default();
            let local = LocalLocks::default();
            let mut holder = hold(&store, HoldState::Held);
            holder.local = Some(local.clone());
            local.mark_held(&holder.key);
            let (gone, stays) = (
                OwnerToken::generate().unwrap(),
                OwnerToken::generate().unwrap(),
            );
            let first = local
                .wait_behind_holder(&holder.key, &gone, (Ttl::DEFAULT, fenced))
                .unwrap();
            let mut second = local
                .wait_behind_holder(&holder.key, &stays, (Ttl::DEFAULT, fenced))
                .unwrap();
            // The first waiter leaves while the pass to it is in flight: the lock is
            // then in Redis under its token, so the holder adopts that token and
            // passes on.
            *store.leaves_during_pass.lock().unwrap() = Some(first);
            assert!(holder.release().await.unwrap());
            assert_eq!(holder.owner, gone);
            assert_eq!(
                store.calls(),
                [Call::Pass { to: gone }, Call::Pass { to: stays }]
            );
            assert!(
                matches!(
                    second.try_recv(),
                    Ok(Turn::Yours(Passed { fence: Some(7), .. }))
                ),
                "fenced: {fenced}"
            );
        }
    }
}
