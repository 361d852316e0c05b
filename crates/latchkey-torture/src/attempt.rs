//! One acquisition, asked for in a mode picked at random, most of them cancelling
//! the request somewhere: a deadline, a dropped future, an aborted task.

use std::time::Duration;

use latchkey::semaphore::PermitStore;
use latchkey::store::{Pass, WakeUps};
use latchkey::{Error, Mutex, MutexGuard, RwLock, Semaphore};
use rand::Rng;
use rand::rngs::StdRng;

use crate::record::{Mode, Outcome, now_us};

/// The wait of an acquisition whose release is aborted, as before this harness
/// cancelled anything.
const PLAIN_WAIT: Duration = Duration::from_secs(2);

/// What an attempt asks for: a lock, or permits of a semaphore. Its guard is a
/// `MutexGuard<S>` either way.
pub trait Acquire<S: Pass + WakeUps>: Clone + Send + Sync + 'static {
    fn lock(&self) -> impl Future<Output = latchkey::Result<MutexGuard<S>>> + Send;
    fn lock_timeout(
        &self,
        wait: Duration,
    ) -> impl Future<Output = latchkey::Result<MutexGuard<S>>> + Send;
}

impl<S: Pass + WakeUps> Acquire<S> for Mutex<S> {
    fn lock(&self) -> impl Future<Output = latchkey::Result<MutexGuard<S>>> + Send {
        Mutex::lock(self)
    }

    fn lock_timeout(
        &self,
        wait: Duration,
    ) -> impl Future<Output = latchkey::Result<MutexGuard<S>>> + Send {
        Mutex::lock_timeout(self, wait)
    }
}

/// `weight` permits of a semaphore.
#[derive(Clone)]
pub struct Permits {
    pub semaphore: Semaphore,
    pub weight: u64,
}

impl Acquire<PermitStore> for Permits {
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

/// One side of a read-write lock: a read, or a write.
#[derive(Clone)]
pub struct RwSide {
    pub lock: RwLock,
    pub write: bool,
}

impl Acquire<PermitStore> for RwSide {
    async fn lock(&self) -> latchkey::Result<MutexGuard<PermitStore>> {
        match self.write {
            true => self.lock.write().await,
            false => self.lock.read().await,
        }
    }

    async fn lock_timeout(&self, wait: Duration) -> latchkey::Result<MutexGuard<PermitStore>> {
        match self.write {
            true => self.lock.write_timeout(wait).await,
            false => self.lock.read_timeout(wait).await,
        }
    }
}

/// What an attempt asked and got.
pub struct Attempted<S: Pass + WakeUps> {
    pub mode: Mode,
    pub timeout: Option<Duration>,
    /// When the answer came (wall µs): for a guard, when `lock()` returned it.
    pub end_us: u64,
    /// The guard, or how the attempt ended.
    pub result: Result<MutexGuard<S>, Outcome>,
}

impl<S: Pass + WakeUps> Attempted<S> {
    pub fn outcome(&self) -> Outcome {
        match &self.result {
            Ok(_) => Outcome::Acquired,
            Err(outcome) => outcome.clone(),
        }
    }
}

/// Asks for `mutex` in a random mode.
pub async fn attempt<S: Pass + WakeUps>(mutex: &impl Acquire<S>, rng: &mut StdRng) -> Attempted<S> {
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

async fn timed<S: Pass + WakeUps>(
    mutex: &impl Acquire<S>,
    wait: Duration,
) -> Result<(MutexGuard<S>, u64), Outcome> {
    outcome(mutex.lock_timeout(wait).await)
}

/// `lock()` in its own task, aborted `after` (unless it won first).
async fn aborted<S: Pass + WakeUps>(
    mutex: &impl Acquire<S>,
    after: Duration,
) -> Result<(MutexGuard<S>, u64), Outcome> {
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
fn outcome<S: Pass + WakeUps>(
    locked: latchkey::Result<MutexGuard<S>>,
) -> Result<(MutexGuard<S>, u64), Outcome> {
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
    guard: MutexGuard<S>,
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
pub async fn release_to_aborted_waiter<S: Pass + WakeUps>(
    guard: MutexGuard<S>,
    mutex: &impl Acquire<S>,
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
