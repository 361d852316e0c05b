//! How a caller waits for a lock: without polling in a loop, and never past its
//! deadline.
//!
//! The first attempt just tries. If the lock is busy, the waiter subscribes to the
//! lock's channel (one shared connection per store), joins the wait queue and sleeps
//! until a release names it, or until a timer bounded by the holder's remaining lease
//! and a third of the waiter lease runs out (a lost message or a crashed holder costs
//! at most that). While the subscription is not confirmed (the subscriber connection
//! is down or stalled) the timer is short instead. Each attempt renews the waiter's
//! lease, so a waiter that dies is dropped from the queue within its lease.
//!
//! Every network step is cut off at the deadline, and a transient failure (the
//! connection dropped, a reply timed out, the server is loading its data) is retried
//! with capped backoff while the deadline allows: an attempt is idempotent, since it
//! carries the same owner token. Giving up or being dropped leaves the queue and
//! undoes whatever an attempt in flight may have done, passing on the lock if a
//! release had just handed it over.

use std::future::Future;
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use futures_util::future::Either;

use super::backoff::Backoff;
use super::local::{LocalLocks, Passed, Turn};
use super::local_turn::LocalTurn;
use super::release_on_drop::{HoldState, ReleaseOnDrop};
use crate::error::{Error, Result};
use crate::key::LockKey;
use crate::lease::Ttl;
use crate::metrics::Meter;
use crate::store::{AcquireRequest, Attempt, Pass, WakeUps, Watch};
use crate::token::{OwnerToken, is_latchkey_owner, mask_owner};

/// The shortest pause between attempts, so even a lease about to end never spins.
const MIN_PAUSE: Duration = Duration::from_millis(1);
/// How long a waiter that gives up waits for its queue entry to be removed before
/// leaving that to the background, so a stalled network cannot hold it past its
/// deadline by more than this.
const LEAVE_GRACE: Duration = Duration::from_millis(50);
/// Backoff between attempts that failed with a transient error.
const RETRY_FIRST: Duration = Duration::from_millis(10);
const RETRY_CAP: Duration = Duration::from_secs(1);
/// How often a waiter re-checks while another library (redis-py, redsync …) holds
/// the lock: its release publishes no wake-up, so only a re-check sees it.
const FOREIGN_RECHECK: Duration = Duration::from_millis(40);

/// What a waiter wants.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Wait {
    /// When the call began: a busy error says how long it waited from then.
    pub(crate) started: Instant,
    /// What Redis keeps the lock for: the lease and its lock delay.
    pub(crate) ttl: Ttl,
    /// The lock delay ([`Lease::with_lock_delay`](crate::Lease::with_lock_delay)).
    pub(crate) lock_delay: Duration,
    pub(crate) fair: bool,
    /// Ask for the fencing token with the grant (see [`crate::Fencing`]).
    pub(crate) fenced: bool,
    pub(crate) waiter_lease: Ttl,
    pub(crate) deadline: Option<Instant>,
}

impl Wait {
    /// What its first attempt asks for: a try, in no queue.
    pub(crate) fn first_try(&self) -> AcquireRequest {
        AcquireRequest {
            ttl: self.ttl,
            fair: self.fair,
            queue_lease: None,
            fenced: self.fenced,
        }
    }

    /// Whether a grant to a request sent at `sent` comes too late to be a hold: the
    /// lease the holder counts on (without the lock delay Redis adds to it) ended
    /// before the reply came. A guard would be born lost.
    fn granted_too_late(&self, sent: Instant) -> bool {
        Ttl::lease_end(self.ttl.valid_until(sent), self.lock_delay) <= Instant::now()
    }

    fn expired(&self) -> bool {
        self.deadline
            .is_some_and(|deadline| deadline <= Instant::now())
    }

    /// `pause`, shortened so it ends by the deadline.
    fn cap(&self, pause: Duration) -> Duration {
        self.deadline.map_or(pause, |deadline| {
            pause.min(deadline.saturating_duration_since(Instant::now()))
        })
    }

    /// Runs `step` until it completes or the deadline passes (`None`).
    ///
    /// Not an `async fn`: its future would keep `step` beside the timeout that runs
    /// it (rustc does not overlap an argument moved out of with the awaits after
    /// the move), and so would every future that awaits it, up to the lock call's:
    /// each is moved in memory as it starts, a cost in proportion to its size.
    fn within<F: Future>(&self, step: F) -> impl Future<Output = Option<F::Output>> + use<F> {
        match self.deadline {
            Some(deadline) => {
                let timed = tokio::time::timeout_at(deadline.into(), step);
                Either::Left(timed.map(Result::ok))
            }
            None => Either::Right(step.map(Some)),
        }
    }
}

/// A lock that is ours: the hold (held), its fencing token if the grant computed one,
/// and until when it surely is (counted from when the winning request was sent).
pub(crate) struct Won<S: Pass + WakeUps> {
    pub(crate) hold: ReleaseOnDrop<S>,
    pub(crate) fence: Option<u64>,
    pub(crate) valid_until: Instant,
    /// A release handed it over with only what was left of the waiter lease: the
    /// guard extends it to the mutex's lease.
    pub(crate) top_up: bool,
    /// Replicas that confirmed the grant, if the store waited for them.
    pub(crate) replicas: Option<u32>,
}

/// Takes the lock: from a task of this process that holds it (`local`, plain locks
/// only), or through Redis.
pub(crate) async fn acquire<S: Pass + WakeUps>(
    store: &S,
    key: &LockKey,
    wait: Wait,
    local: Option<&LocalLocks>,
) -> Result<Won<S>> {
    let started = wait.started;
    let mut owner = OwnerToken::generate()?;
    // A call that may not wait at all (`try_lock`) still makes its one attempt.
    let once = wait.expired();
    let mut likely_busy = false;
    if let Some(local) = local.filter(|_| !once) {
        match wait_for_local_pass(store, key, &owner, wait, local, started).await? {
            FromLocal::Passed(won) => {
                Meter::new(store.deployment(), key).handed_over("local");
                return Ok(*won);
            }
            FromLocal::ToRedis { after_release } => likely_busy = after_release,
            FromLocal::PassedTooLate => {
                // The lock under this owner is being given up in the background:
                // the attempts in Redis go under another, or that release could
                // free what they take.
                owner = OwnerToken::generate()?;
                likely_busy = true;
            }
        }
    }
    let counted = local.map(|local| local.redis_waiter(key));
    let won = acquire_in_redis(store, key, wait, owner, started, once, likely_busy).await?;
    if let Some(counted) = counted {
        counted.took_the_lock();
    }
    Ok(won)
}

/// How waiting behind this process's holder ended.
enum FromLocal<S: Pass + WakeUps> {
    /// The holder passed us the lock (boxed: a hold is large, the other variant tiny).
    Passed(Box<Won<S>>),
    /// Go to Redis; `after_release`: the holder released the lock there because
    /// other processes wait for it, so it is most likely held again already.
    ToRedis { after_release: bool },
    /// The holder passed us the lock, but the pass came back after the lease it
    /// set had ended (a stalled connection, a paused server): a guard would be born
    /// lost. The hold is given up as a dropped guard's is (passed on or released),
    /// and the call goes to Redis under a new owner token.
    PassedTooLate,
}

impl<S: Pass + WakeUps> FromLocal<S> {
    /// Nobody here passed us the lock: try in Redis.
    fn to_redis() -> Self {
        FromLocal::ToRedis {
            after_release: false,
        }
    }

    /// What the lock `turn` was passed is for this call: a hold, or one passed too
    /// late, dropped (with the local line attached, so it passes on or marks the
    /// lock released) as a dropped guard's hold is.
    fn passed(turn: &LocalTurn<S>, passed: Passed, wait: Wait) -> Self {
        let too_late = wait.granted_too_late(passed.sent);
        let mut hold = turn.hold(too_late);
        hold.others_queued = passed.others_queued;
        if too_late {
            return FromLocal::PassedTooLate;
        }
        FromLocal::Passed(Box::new(Won {
            hold,
            fence: passed.fence,
            valid_until: wait.ttl.valid_until(passed.sent),
            top_up: false,
            replicas: None,
        }))
    }
}

/// Waits behind the local holder, if this process has one.
async fn wait_for_local_pass<S: Pass + WakeUps>(
    store: &S,
    key: &LockKey,
    owner: &OwnerToken,
    wait: Wait,
    local: &LocalLocks,
    started: Instant,
) -> Result<FromLocal<S>> {
    let Some(turn) = local.wait_behind_holder(key, owner, (wait.ttl, wait.fenced)) else {
        return Ok(FromLocal::to_redis());
    };
    let mut turn = LocalTurn::new(turn, store, key, owner, local, wait.ttl);
    let period = wait.waiter_lease.as_duration() / 3;
    loop {
        tokio::select! {
            told = turn.told() => return Ok(match told {
                Some(Turn::Yours(passed)) => FromLocal::passed(&turn, passed, wait),
                Some(Turn::TryRedis) => FromLocal::ToRedis { after_release: true },
                None => FromLocal::to_redis(),
            }),
            () = tokio::time::sleep(wait.cap(period)) => {}
        }
        // A lock passed at the last moment is ours after all.
        if wait.expired() {
            let passed = turn
                .leave()
                .ok_or_else(|| busy(key, started.elapsed(), &Seen::nothing(started)))?;
            return Ok(FromLocal::passed(&turn, passed, wait));
        }
        // Nobody here will pass it to us any more (a task died): go to Redis.
        if !local.is_represented(key) {
            return Ok(match turn.leave() {
                Some(passed) => FromLocal::passed(&turn, passed, wait),
                None => FromLocal::to_redis(),
            });
        }
    }
}

/// Attempts in Redis until the lock is ours or the deadline passes; with `once`, the
/// first attempt runs to completion (bounded by the connection's own timeouts).
/// With `likely_busy`, it listens and queues at once, skipping a first try that
/// would most likely fail.
async fn acquire_in_redis<S: Pass + WakeUps>(
    store: &S,
    key: &LockKey,
    wait: Wait,
    owner: OwnerToken,
    started: Instant,
    once: bool,
    likely_busy: bool,
) -> Result<Won<S>> {
    let mut waiter = Attempts::new(store, key, wait, owner, started, once);
    waiter.join(likely_busy).await?;
    let mut first = true;
    loop {
        if !std::mem::take(&mut first) && wait.expired() {
            return Err(waiter.give_up().await);
        }
        match waiter.attempt().await? {
            Tried::Taken(grant) => return Ok(waiter.won(grant)),
            Tried::Again => continue,
            Tried::Busy => {}
        }
        if wait.expired() || !waiter.listening().await? {
            continue;
        }
        if let Some(grant) = waiter.sleep().await {
            Meter::new(store.deployment(), key).handed_over("redis");
            return Ok(waiter.won(grant));
        }
    }
}

/// One caller's attempts in Redis, and what they have learnt: the hold that undoes
/// them, the queue place and subscription, and why the lock is not ours yet.
struct Attempts<'a, S: Pass + WakeUps> {
    store: &'a S,
    key: &'a LockKey,
    wait: Wait,
    started: Instant,
    /// A try: its one attempt runs to completion, and it never says it waited.
    once: bool,
    hold: ReleaseOnDrop<S>,
    request: AcquireRequest,
    /// The lock's wake-ups, once listening (then the attempts queue too).
    watch: Option<Watch>,
    backoff: Backoff,
    retries: Backoff,
    /// Why the last attempt did not take the lock: busy (who held it, how long for),
    /// or a transient failure, reported as such if the wait ends on it.
    seen: Seen,
    failure: Option<Error>,
    /// An earlier request's outcome is unknown (its reply was lost, or it was cut
    /// off in flight): it may still land, so a later answer must not clear the hold.
    in_doubt: bool,
    answered: bool,
    /// The last answered attempt that (re)joined the queue: a release after it may
    /// hand us the lock.
    queued: Option<Queued>,
}

/// How one attempt ended.
enum Tried {
    /// The lock is ours.
    Taken(Grant),
    /// Busy: wait for a wake-up or the timer.
    Busy,
    /// No answer, or a transient failure (already paused for): try again.
    Again,
}

/// A lock that became ours, before the hold is handed to the guard.
struct Grant {
    fence: Option<u64>,
    valid_until: Instant,
    top_up: bool,
    replicas: Option<u32>,
    others_queued: bool,
}

impl<'a, S: Pass + WakeUps> Attempts<'a, S> {
    fn new(
        store: &'a S,
        key: &'a LockKey,
        wait: Wait,
        owner: OwnerToken,
        started: Instant,
        once: bool,
    ) -> Self {
        // A place in the queue may outlast the lock's lease: retries of leaving it too.
        let longest = wait.ttl.max(wait.waiter_lease);
        Attempts {
            store,
            key,
            wait,
            started,
            once,
            hold: ReleaseOnDrop::new(store.clone(), key.clone(), owner, longest),
            request: wait.first_try(),
            watch: None,
            backoff: Backoff::default(),
            retries: Backoff::new(RETRY_FIRST, RETRY_CAP),
            seen: Seen::nothing(started),
            failure: None,
            in_doubt: false,
            answered: false,
            queued: None,
        }
    }

    /// Listens from the first attempt if others of this process already wait here
    /// (their subscription serves us too), or if the lock is `likely_busy`: a first
    /// try would most likely fail.
    async fn join(&mut self, likely_busy: bool) -> Result<()> {
        if !self.wait.expired() {
            self.watch = self.store.join_watch(self.key, &self.hold.owner);
        }
        if self.watch.is_none() && likely_busy {
            self.watch = listen(self.store, self.key, &self.hold.owner, &self.wait).await?;
        }
        self.request.queue_lease = self.watch.as_ref().map(|_| self.wait.waiter_lease);
        Ok(())
    }

    /// The deadline passed: leaves the queue, and says why the lock was not ours.
    async fn give_up(&mut self) -> Error {
        give_up(&mut self.hold).await;
        // A try (`once`) does not wait, however long its one attempt took.
        let waited = match self.once {
            true => Duration::ZERO,
            false => self.started.elapsed(),
        };
        self.failure
            .take()
            .unwrap_or_else(|| busy(self.key, waited, &self.seen))
    }

    /// One attempt, cut off at the deadline (unless a try). Errors that retrying
    /// cannot fix end the wait; transient ones are paused for and tried again.
    async fn attempt(&mut self) -> Result<Tried> {
        // A drop from here on must undo whatever the request does.
        self.hold.state = match self.request.queue_lease {
            Some(_) => HoldState::Queued(self.request.ttl),
            None => HoldState::Trying,
        };
        let sent = Instant::now();
        // The request's future is made where it is awaited: kept in a variable, it
        // would take room of its own in this future beside the one awaited.
        let (key, owner, request) = (self.key, &self.hold.owner, self.request);
        let answer = match self.once {
            true => Some(self.store.try_acquire(key, owner, request).await),
            false => {
                let attempt = self.store.try_acquire(key, owner, request);
                self.wait.within(attempt).await
            }
        };
        match answer {
            Some(answer) => self.answered(answer, sent).await,
            None => Ok(self.unanswered()),
        }
    }

    /// What an answer to the attempt sent at `sent` means for the wait.
    async fn answered(&mut self, answer: Result<Attempt>, sent: Instant) -> Result<Tried> {
        self.answered = true;
        self.in_doubt |= answer.as_ref().is_err_and(Error::outcome_unknown);
        let undo = self.hold.state;
        if !self.in_doubt {
            self.hold.not_taken();
        }
        match answer {
            Ok(Attempt::Acquired { .. }) if self.wait.granted_too_late(sent) => {
                Ok(self.granted_too_late(undo).await)
            }
            Ok(Attempt::Acquired {
                fence,
                queued,
                replicas,
            }) => Ok(Tried::Taken(Grant {
                fence,
                valid_until: self.wait.ttl.valid_until(sent),
                top_up: false,
                replicas,
                others_queued: queued > 0,
            })),
            Ok(Attempt::Busy {
                pttl,
                holder,
                fence_floor,
                waiter_lease_end,
            }) => {
                let seen = Seen {
                    pttl,
                    holder,
                    at: Instant::now(),
                };
                let queued = Queued {
                    sent,
                    fence_floor,
                    waiter_lease_end,
                };
                Ok(self.busy(seen, queued))
            }
            Err(error) if !error.is_transient() => {
                give_up(&mut self.hold).await;
                Err(error)
            }
            Err(error) => {
                tracing::warn!(key = %self.key, %error, "lock attempt failed; retrying while the wait allows");
                Ok(self.again_after(error).await)
            }
        }
    }

    /// Cut off at the deadline with the request in flight: it may still land, so the
    /// hold undoes it.
    fn unanswered(&mut self) -> Tried {
        self.in_doubt = true;
        // Never an answer: say Redis did not reply, not that the lock was busy.
        if !self.answered {
            let node = self.store.node();
            self.failure = self.failure.take().or_else(|| Some(Error::no_reply(node)));
        }
        Tried::Again
    }

    /// Busy: who holds it (for the error if the wait ends here) and, from an attempt
    /// that queued, the place in line a release may hand us the lock after.
    fn busy(&mut self, seen: Seen, queued: Queued) -> Tried {
        if self.request.queue_lease.is_some() {
            self.queued = Some(queued);
        }
        (self.seen, self.failure) = (seen, None);
        self.retries = Backoff::new(RETRY_FIRST, RETRY_CAP);
        Tried::Busy
    }

    /// The lock is ours in Redis, but its grant's reply came after the lease counted
    /// from when the request was sent had ended (a connection made or a path stalled
    /// meanwhile): a guard would be born lost, and a fenced write from it would
    /// carry a token a later holder's writes had not yet outgrown. Like Redlock with
    /// no validity left, it does not count as acquired: the hold undoes it if the
    /// wait ends here (`undo`: what the attempt would have left), and the next
    /// attempt claims it afresh under the same token, its lease counted from its
    /// own send.
    async fn granted_too_late(&mut self, undo: HoldState) -> Tried {
        self.hold.state = undo;
        self.in_doubt = true;
        let node = self.store.node();
        tracing::warn!(key = %self.key, node, "a grant came back after its lease had ended; retrying while the wait allows");
        self.again_after(Error::granted_too_late(node)).await
    }

    /// A transient failure: paused for (backing off, within the wait), and kept to
    /// report if the wait ends on it.
    async fn again_after(&mut self, failure: Error) -> Tried {
        self.failure = Some(failure);
        let pause = self.retries.next_pause(None);
        tokio::time::sleep(self.wait.cap(pause)).await;
        Tried::Again
    }

    /// Whether it listens for wake-ups; if not yet, it starts to (and the next
    /// attempt queues), and returns false: try again at once.
    async fn listening(&mut self) -> Result<bool> {
        if self.watch.is_some() {
            return Ok(true);
        }
        self.watch = listen(self.store, self.key, &self.hold.owner, &self.wait).await?;
        self.request.queue_lease = self.watch.as_ref().map(|_| self.wait.waiter_lease);
        Ok(false)
    }

    /// Sleeps until a wake-up or the timer; the lock, if a release handed it over.
    async fn sleep(&mut self) -> Option<Grant> {
        let live = self.watch.as_ref()?.is_live();
        let pause = self.pause(live);
        let watch = self.watch.as_ref()?;
        tokio::select! {
            () = watch.notified() => {}
            () = tokio::time::sleep(self.wait.cap(pause).max(MIN_PAUSE)) => {}
        }
        let handover = handed(watch, self.queued.as_ref(), &self.wait)?;
        Some(Grant {
            fence: handover.fence,
            valid_until: handover.valid_until,
            top_up: !handover.in_full,
            replicas: None,
            // Who else waits is unknown: assume others do, so local passing stays
            // bounded.
            others_queued: true,
        })
    }

    /// How long to sleep before the next attempt. A confirmed subscription wakes us
    /// when a latchkey holder lets go; without one, or behind another library's
    /// holder, nothing will, so re-check often.
    fn pause(&mut self, live: bool) -> Duration {
        let pause = match live {
            true => self
                .seen
                .pttl
                .unwrap_or(Duration::MAX)
                .min(self.wait.waiter_lease.as_duration() / 3),
            false => self.backoff.next_pause(self.seen.pttl),
        };
        match self.seen.foreign() {
            true => pause.min(FOREIGN_RECHECK),
            false => pause,
        }
    }

    /// The lock is ours: the hold goes to the guard.
    fn won(mut self, grant: Grant) -> Won<S> {
        self.hold.state = HoldState::Held;
        self.hold.others_queued = grant.others_queued;
        Won {
            hold: self.hold,
            fence: grant.fence,
            valid_until: grant.valid_until,
            top_up: grant.top_up,
            replicas: grant.replicas,
        }
    }
}

/// An answered attempt that left us in the queue.
struct Queued {
    /// When it was sent: the waiter lease it set, and so a lock a release hands us
    /// after it, lasts at least the waiter lease from then.
    sent: Instant,
    /// Every fencing token granted after it is larger, and so is the server clock
    /// at every later handover (what a handover without a token tells instead).
    fence_floor: u64,
    /// When the waiter lease it set ends (server ms).
    waiter_lease_end: u64,
}

/// A lock a release handed us: its fencing token (`None` when fenced on demand),
/// until when it is surely ours, and whether the release could grant the whole
/// lease we asked for (else what was left of the waiter lease, to be extended).
struct Handover {
    fence: Option<u64>,
    valid_until: Instant,
    in_full: bool,
}

/// The lock a release handed us after our last queued attempt, if it did: ours with
/// no claim and no round trip. `None` (the next attempt finds out) for a bare
/// wake-up, a handover older than that attempt (its lock has been lost since), one
/// from a server that lost that attempt (restarted from older state, so the waiter
/// lease it granted from may be shorter than we count on), or one with less than a
/// third of its lease left, too little to start work on: the next attempt finds the
/// lock under our token and grants it afresh.
fn handed(watch: &Watch, queued: Option<&Queued>, wait: &Wait) -> Option<Handover> {
    let handed = watch.take_handed()?;
    let queued = queued?;
    if handed.fence <= queued.fence_floor || handed.waiter_lease_end < queued.waiter_lease_end {
        return None;
    }
    // A waiter fenced on demand was told the handover's clock, not a token.
    let fence = handed.token();
    // The release granted the lease we asked for or what was left of the waiter lease
    // our last queued attempt (re)started, whichever was shorter: both count from
    // when that attempt was sent.
    let now = Instant::now();
    let waiter_lease_until = wait.waiter_lease.valid_until(queued.sent);
    let valid_until = waiter_lease_until.min(wait.ttl.valid_until(queued.sent));
    // The holder counts on the lease alone, not on the lock delay Redis adds to it.
    let holder_until = Ttl::lease_end(valid_until, wait.lock_delay);
    let lease = wait.ttl.as_duration().saturating_sub(wait.lock_delay);
    let shorter = lease.min(wait.waiter_lease.as_duration());
    if holder_until.saturating_duration_since(now) < shorter / 3 {
        return None;
    }
    // What was left of the waiter lease when the release ran covered the whole lease.
    let waiter_lease_left = waiter_lease_until.saturating_duration_since(now);
    let in_full = waiter_lease_left >= wait.ttl.as_duration();
    // A lock handed over with only the waiter lease has no lock delay behind it in
    // Redis: the next attempt claims it afresh, with the delay.
    if !in_full && !wait.lock_delay.is_zero() {
        return None;
    }
    Some(Handover {
        fence,
        valid_until,
        in_full,
    })
}

/// Listens for the lock's wake-ups, within the wait (`None` if its deadline cut the
/// subscription off). Callers listen before they queue, so no wake-up can slip
/// between the two.
async fn listen<S: Pass + WakeUps>(
    store: &S,
    key: &LockKey,
    owner: &OwnerToken,
    wait: &Wait,
) -> Result<Option<Watch>> {
    wait.within(store.watch(key, owner)).await.transpose()
}

/// Leaves the queue (and undoes an attempt in flight) now, or, if Redis does not
/// answer within [`LEAVE_GRACE`], in the background when the hold is dropped.
async fn give_up<S: Pass + WakeUps>(hold: &mut ReleaseOnDrop<S>) {
    if hold.state == HoldState::Clear {
        return;
    }
    // Boxed: rare (a wait that ends empty-handed, or an error), and every attempt's
    // future would otherwise keep room for it.
    match tokio::time::timeout(LEAVE_GRACE, Box::pin(hold.release())).await {
        Ok(Ok(_)) => {}
        Ok(Err(error)) => {
            tracing::warn!(key = %hold.key, %error, "could not leave the wait queue; retrying in the background")
        }
        Err(_) => {
            tracing::debug!(key = %hold.key, "leaving the wait queue in the background")
        }
    }
}

/// What the last busy attempt saw, and when.
struct Seen {
    pttl: Option<Duration>,
    holder: Option<String>,
    at: Instant,
}

impl Seen {
    /// Nothing seen yet, as of `at`.
    fn nothing(at: Instant) -> Self {
        Seen {
            pttl: None,
            holder: None,
            at,
        }
    }

    /// Held by another library, whose release wakes nobody.
    fn foreign(&self) -> bool {
        self.holder
            .as_deref()
            .is_some_and(|holder| !is_latchkey_owner(holder))
    }
}

fn busy(key: &LockKey, waited: Duration, seen: &Seen) -> Error {
    Error::busy(
        key,
        waited,
        seen.holder.as_deref().map(mask_owner),
        // The lease has run on since it was seen.
        seen.pttl.map(|left| left.saturating_sub(seen.at.elapsed())),
    )
}
