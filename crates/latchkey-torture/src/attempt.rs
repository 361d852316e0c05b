//! One acquisition, asked for in a mode picked at random, most of them cancelling
//! the request somewhere: a deadline, a dropped future, an aborted task.

use std::time::Duration;

use latchkey::election::{Election, Leadership};
use latchkey::semaphore::PermitStore;
use latchkey::store::{Pass, RedisStore, WakeUps};
use latchkey::{Error, Fairness, MultiLock, MultiLockGuard, Mutex, MutexGuard, RwLock, Semaphore};
use rand::Rng;
use rand::rngs::StdRng;

use crate::record::{Mode, Outcome, now_us};

/// The wait of an acquisition whose release is aborted, as before this harness
/// cancelled anything.
const PLAIN_WAIT: Duration = Duration::from_secs(2);

/// What an acquisition gives: a guard, or what holds one (a leadership), and how
/// it is let go.
pub trait Hold<S: Pass + WakeUps>: Send + Sync + 'static {
    fn guard(&self) -> &MutexGuard<S>;
    fn release(self) -> impl Future<Output = latchkey::Result<bool>> + Send + 'static;
    /// When the hold began (wall µs), if before its attempt returned: a read a
    /// write was downgraded to holds the lock from the write's grant on.
    fn held_since_us(&self) -> Option<u64> {
        None
    }
}

impl<S: Pass + WakeUps> Hold<S> for MutexGuard<S> {
    fn guard(&self) -> &MutexGuard<S> {
        self
    }

    fn release(self) -> impl Future<Output = latchkey::Result<bool>> + Send + 'static {
        MutexGuard::release(self)
    }
}

impl Hold<RedisStore> for Leadership {
    fn guard(&self) -> &MutexGuard<RedisStore> {
        Leadership::guard(self)
    }

    fn release(self) -> impl Future<Output = latchkey::Result<bool>> + Send + 'static {
        self.resign()
    }
}

/// Several locks held together: the checkers see each lock's own guard (the
/// multi-lock workload runs each lock's section apart, from `into_guards`); as one
/// hold, it is its first lock's.
impl<S: Pass + WakeUps> Hold<S> for MultiLockGuard<S> {
    fn guard(&self) -> &MutexGuard<S> {
        &self.guards()[0]
    }

    fn release(self) -> impl Future<Output = latchkey::Result<bool>> + Send + 'static {
        MultiLockGuard::release(self)
    }
}

/// What an attempt asks for: a lock, permits of a semaphore, a leadership. What it
/// gets holds a `MutexGuard<S>` either way.
pub trait Acquire<S: Pass + WakeUps>: Clone + Send + Sync + 'static {
    type Held: Hold<S>;
    fn lock(&self) -> impl Future<Output = latchkey::Result<Self::Held>> + Send;
    fn lock_timeout(
        &self,
        wait: Duration,
    ) -> impl Future<Output = latchkey::Result<Self::Held>> + Send;
    /// A fair lock's: its attempts stand in one strict line.
    fn fair(&self) -> bool {
        false
    }
}

impl<S: Pass + WakeUps> Acquire<S> for Mutex<S> {
    type Held = MutexGuard<S>;

    fn lock(&self) -> impl Future<Output = latchkey::Result<MutexGuard<S>>> + Send {
        Mutex::lock(self)
    }

    fn lock_timeout(
        &self,
        wait: Duration,
    ) -> impl Future<Output = latchkey::Result<MutexGuard<S>>> + Send {
        Mutex::lock_timeout(self, wait)
    }

    fn fair(&self) -> bool {
        self.fairness() == Fairness::Fair
    }
}

impl<S: Pass + WakeUps> Acquire<S> for MultiLock<S> {
    type Held = MultiLockGuard<S>;

    fn lock(&self) -> impl Future<Output = latchkey::Result<MultiLockGuard<S>>> + Send {
        MultiLock::lock(self)
    }

    fn lock_timeout(
        &self,
        wait: Duration,
    ) -> impl Future<Output = latchkey::Result<MultiLockGuard<S>>> + Send {
        MultiLock::lock_timeout(self, wait)
    }
}

/// `weight` permits of a semaphore.
#[derive(Clone)]
pub struct Permits {
    pub semaphore: Semaphore,
    pub weight: u64,
}

impl Acquire<PermitStore> for Permits {
    type Held = MutexGuard<PermitStore>;

    fn lock(&self) -> impl Future<Output = latchkey::Result<MutexGuard<PermitStore>>> + Send {
        self.semaphore.acquire(self.weight)
    }

    fn lock_timeout(
        &self,
        wait: Duration,
    ) -> impl Future<Output = latchkey::Result<MutexGuard<PermitStore>>> + Send {
        self.semaphore.acquire_timeout(self.weight, wait)
    }
}

/// One side of a read-write lock: a read, a write, or a write downgraded to a read
/// as soon as it is granted.
#[derive(Clone)]
pub struct RwSide {
    pub lock: RwLock,
    pub side: Side,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Read,
    Write,
    /// `write()`, then `downgrade()` at once: the read that comes of it counts
    /// from the write's grant, so a writer let in between the two overlaps it.
    Downgrade,
}

/// A read-write lock's guard, and for a downgraded read, when its write was granted.
pub struct RwHeld {
    guard: MutexGuard<PermitStore>,
    since_us: Option<u64>,
}

impl Hold<PermitStore> for RwHeld {
    fn guard(&self) -> &MutexGuard<PermitStore> {
        &self.guard
    }

    fn release(self) -> impl Future<Output = latchkey::Result<bool>> + Send + 'static {
        self.guard.release()
    }

    fn held_since_us(&self) -> Option<u64> {
        self.since_us
    }
}

impl RwSide {
    /// The side asked for, from the write (or read) `taken`.
    async fn then(&self, taken: MutexGuard<PermitStore>) -> latchkey::Result<RwHeld> {
        if self.side != Side::Downgrade {
            return Ok(RwHeld {
                guard: taken,
                since_us: None,
            });
        }
        let since_us = Some(now_us());
        let guard = self.lock.downgrade(taken).await?;
        Ok(RwHeld { guard, since_us })
    }
}

impl Acquire<PermitStore> for RwSide {
    type Held = RwHeld;

    async fn lock(&self) -> latchkey::Result<RwHeld> {
        let taken = match self.side {
            Side::Read => self.lock.read().await?,
            Side::Write | Side::Downgrade => self.lock.write().await?,
        };
        self.then(taken).await
    }

    async fn lock_timeout(&self, wait: Duration) -> latchkey::Result<RwHeld> {
        let taken = match self.side {
            Side::Read => self.lock.read_timeout(wait).await?,
            Side::Write | Side::Downgrade => self.lock.write_timeout(wait).await?,
        };
        self.then(taken).await
    }
}

/// A candidate of an election, campaigning with its holder's name.
#[derive(Clone)]
pub struct Candidate {
    pub election: Election,
    pub value: String,
}

impl Acquire<RedisStore> for Candidate {
    type Held = Leadership;

    async fn lock(&self) -> latchkey::Result<Leadership> {
        self.election.campaign(&self.value).await
    }

    async fn lock_timeout(&self, wait: Duration) -> latchkey::Result<Leadership> {
        self.election.campaign_timeout(&self.value, wait).await
    }
}

/// What an attempt asked and got.
pub struct Attempted<H> {
    pub mode: Mode,
    pub timeout: Option<Duration>,
    /// When the answer came (wall µs): for a guard, when `lock()` returned it.
    pub end_us: u64,
    /// The guard (or leadership), or how the attempt ended.
    pub result: Result<H, Outcome>,
}

impl<H> Attempted<H> {
    pub fn outcome(&self) -> Outcome {
        match &self.result {
            Ok(_) => Outcome::Acquired,
            Err(outcome) => outcome.clone(),
        }
    }
}

/// Asks for `mutex` in a random mode.
pub async fn attempt<S: Pass + WakeUps, A: Acquire<S>>(
    mutex: &A,
    rng: &mut StdRng,
) -> Attempted<A::Held> {
    let mode = [
        Mode::Timeout,
        Mode::Select,
        Mode::Abort,
        Mode::AbortRelease,
        Mode::AbortHandoff,
    ][rng.random_range(0..5)];
    let (timeout, result) = match mode {
        Mode::Timeout => {
            let wait = Duration::from_millis(rng.random_range(5..=2_000));
            (Some(wait), timed(mutex, wait).await)
        }
        Mode::AbortRelease | Mode::AbortHandoff => {
            (Some(PLAIN_WAIT), timed(mutex, PLAIN_WAIT).await)
        }
        Mode::Select => {
            let timer = Duration::from_millis(rng.random_range(1..=50));
            let result = tokio::select! {
                locked = mutex.lock() => outcome(locked),
                () = tokio::time::sleep(timer) => Err(Outcome::Cancelled),
            };
            (None, result)
        }
        Mode::Abort => {
            let after = Duration::from_micros(rng.random_range(0..=20_000));
            (None, aborted(mutex, after).await)
        }
    };
    let (end_us, result) = match result {
        Ok((guard, at)) => (at, Ok(guard)),
        Err(outcome) => (now_us(), Err(outcome)),
    };
    Attempted {
        mode,
        timeout,
        end_us,
        result,
    }
}

async fn timed<S: Pass + WakeUps, A: Acquire<S>>(
    mutex: &A,
    wait: Duration,
) -> Result<(A::Held, u64), Outcome> {
    outcome(mutex.lock_timeout(wait).await)
}

/// `lock()` in its own task, aborted `after` (unless it won first).
async fn aborted<S: Pass + WakeUps, A: Acquire<S>>(
    mutex: &A,
    after: Duration,
) -> Result<(A::Held, u64), Outcome> {
    let mutex = mutex.clone();
    let task = tokio::spawn(async move { outcome(mutex.lock().await) });
    tokio::time::sleep(after).await;
    task.abort();
    match task.await {
        Ok(result) => result,
        Err(e) if e.is_cancelled() => Err(Outcome::Cancelled),
        Err(_) => Err(Outcome::Error {
            error: "panic".into(),
        }),
    }
}

/// The library's answer, stamped with when it came.
fn outcome<H>(locked: latchkey::Result<H>) -> Result<(H, u64), Outcome> {
    let at = now_us();
    match locked {
        Ok(guard) => Ok((guard, at)),
        Err(Error::Busy { .. }) => Err(Outcome::Busy),
        Err(error) => Err(Outcome::Error {
            error: error_kind(&error),
        }),
    }
}

/// Releases `guard` in a spawned task aborted a few µs to ms later: what the release
/// answered (`None` if it failed or was aborted), and whether it was aborted. The
/// guard's drop must free the lock either way.
pub async fn release_aborted<S: Pass + WakeUps>(
    guard: impl Hold<S>,
    rng: &mut StdRng,
) -> (Option<bool>, bool) {
    let task = tokio::spawn(guard.release());
    match rng.random_range(0..3) {
        // Before the task has run at all.
        0 => {}
        // A few polls in: the release may be on the wire.
        1 => {
            for _ in 0..rng.random_range(1..=4) {
                tokio::task::yield_now().await;
            }
        }
        _ => tokio::time::sleep(Duration::from_micros(rng.random_range(1..=3_000))).await,
    }
    task.abort();
    match task.await {
        Ok(released) => (released.ok(), false),
        Err(_) => (None, true),
    }
}

/// Releases `guard` while another task of this process waits behind it, and aborts
/// that task right after the release passed it the lock, before or just after it
/// could hear so. What the release answered; the lock must not stay with the
/// aborted task.
pub async fn release_to_aborted_waiter<S: Pass + WakeUps, A: Acquire<S>>(
    guard: A::Held,
    mutex: &A,
    rng: &mut StdRng,
) -> Option<bool> {
    let waiter = {
        let mutex = mutex.clone();
        tokio::spawn(async move { drop(mutex.lock_timeout(PLAIN_WAIT).await) })
    };
    // Let it queue behind the holder (locally: this process holds the lock).
    tokio::time::sleep(Duration::from_millis(1)).await;
    let released = guard.release().await.ok();
    for _ in 0..rng.random_range(0..=1) {
        tokio::task::yield_now().await;
    }
    waiter.abort();
    let _ = waiter.await;
    released
}

/// A short name for an error, for the log; with what the server said for an error
/// reply (which one it was matters, and it names no port).
fn error_kind(error: &Error) -> String {
    let kind = match error {
        Error::Busy { .. } => "busy",
        Error::LeaseLost { .. } => "lease_lost",
        Error::Unreachable { .. } => "unreachable",
        Error::AuthFailed { .. } => "auth_failed",
        Error::AclDenied { .. } => "acl_denied",
        Error::WrongType { .. } => "wrong_type",
        Error::ReadOnly { .. } => "read_only",
        Error::InvalidArgument(_) => "invalid_argument",
        Error::Entropy(_) => "entropy",
        Error::Redis { source, .. } => return format!("redis: {source}"),
        _ => "other",
    };
    kind.to_owned()
}
