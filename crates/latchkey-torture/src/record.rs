//! What workers log, one JSON line per event, and the shared clock they log in.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// One line of a worker's log.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Record {
    /// An acquisition attempt ended, however it ended.
    Attempt {
        holder: Holder,
        lock: String,
        mode: Mode,
        /// When the attempt began and when the caller had its answer (or gave up).
        start_us: u64,
        end_us: u64,
        /// The wait asked of `lock_timeout`, if the attempt used it.
        timeout_us: Option<u64>,
        /// The lease it asked for (0 in logs from before it was logged: the run's).
        #[serde(default)]
        ttl_us: u64,
        outcome: Outcome,
        /// A fair (strict FIFO) lock's attempt, which queues in line with every
        /// other fair one (false in logs from before it was logged).
        #[serde(default)]
        fair: bool,
    },
    /// `lock()` returned: the holder knows it holds the lock from `at_us` on.
    Acquired {
        holder: Holder,
        lock: String,
        /// The owner token the lock key holds for this holder.
        owner: String,
        /// The fencing token, if it came with the grant or was asked for at once.
        fence: Option<u64>,
        /// When the attempt that won began (the grant happened after it).
        attempt_start_us: u64,
        at_us: u64,
        /// How long Redis keeps the lock: the lease it asked for and its lock delay
        /// (0 in logs from before it was logged: the run's).
        #[serde(default)]
        ttl_us: u64,
        /// Permits taken (1 for a lock).
        #[serde(default = "one")]
        weight: u64,
        /// Its lease's lock delay (`Lease::with_lock_delay`).
        #[serde(default)]
        lock_delay_us: u64,
        /// Taken by a fair lock's attempt of its own (not a multi-lock's).
        #[serde(default)]
        fair: bool,
    },
    /// A rate limiter's `check(cost)` answered (rate-limit workload).
    Call(Call),
    /// An optimistic transaction ended (transaction workload).
    Tx(crate::transactions::Tx),
    /// An election's observer returned a change (election workload).
    Observed(Observed),
    /// A latch's count down or wait returned (latch workload).
    Latch(LatchCall),
    /// The critical section ended and the guard was released.
    Ended {
        holder: Holder,
        lock: String,
        /// The fencing token, if the holder had one by the end of its section.
        fence: Option<u64>,
        /// Logged as fields of this line, as before it had a type of its own.
        #[serde(flatten)]
        end: HoldEnd,
    },
}

/// What an observer of an election returned.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Observed {
    /// The observing task (its `seq` is unused).
    pub holder: Holder,
    pub lock: String,
    /// When `changed()` returned: it read the record before.
    pub at_us: u64,
    /// The leader's value (the worker that campaigned, `w<slot>`) and term; `None`:
    /// nobody led.
    pub leader: Option<(String, u64)>,
}

/// One call on a latch: a count down, or a wait for it to open.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LatchCall {
    pub holder: Holder,
    /// The lock index's name (`torture:{l}`); the latch is `{lock}:{round}`.
    pub lock: String,
    pub round: u64,
    /// When the call was sent and when its answer came.
    pub sent_us: u64,
    pub recv_us: u64,
    pub call: LatchCallKind,
}

/// What a latch call was, and what it answered (`None`: it failed).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LatchCallKind {
    /// `count_down()`: the count left and whether this one opened the latch.
    CountDown { answer: Option<(u64, bool)> },
    /// `wait_timeout(d)`: whether the latch was open when it returned.
    Wait { timeout_us: u64, open: Option<bool> },
}

impl LatchCall {
    /// The latch's own name.
    pub fn latch(&self) -> String {
        format!("{}:{}", self.lock, self.round)
    }
}

/// One rate-limit call.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Call {
    pub holder: Holder,
    pub lock: String,
    /// When the call was sent and when its answer came: the server decided in
    /// between, on its own clock.
    pub sent_us: u64,
    pub recv_us: u64,
    pub cost: u64,
    /// `None`: the call failed (the server was down, the connection reset).
    pub allowed: Option<bool>,
}

/// How an acquisition ended.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct HoldEnd {
    /// The critical section, by the wall clock.
    pub section: (u64, u64),
    /// Until when the lease surely lasted, by the holder's clock.
    pub valid_until_us: u64,
    /// When the release was sent.
    pub release_us: u64,
    /// When it returned (or was aborted, for [`Mode::AbortRelease`]).
    pub release_end_us: u64,
    /// What the release said (`None`: it failed or was aborted).
    pub released: Option<bool>,
    /// Whether the release was aborted before it answered.
    #[serde(default)]
    pub release_aborted: bool,
    /// Whether the guard's `lost` signal had fired by then.
    pub lost: bool,
    /// The fenced write: accepted, rejected, or failed (`None`).
    pub write_accepted: Option<bool>,
    /// When the holder asked for a fencing token the grant had not brought, and
    /// when the server's answer (a token) came back: the server computed it in
    /// between, and must have done so only while the lock was this holder's.
    #[serde(default)]
    pub fence_computed: Option<(u64, u64)>,
    /// When the fenced write was sent, if it was.
    #[serde(default)]
    pub write_sent_us: Option<u64>,
}

/// How a worker asks for a lock, and where it cancels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// `lock_timeout(d)`, `d` from 5 ms to 2 s.
    Timeout,
    /// `lock()` raced against a 1–50 ms timer; the future is dropped if the timer wins.
    Select,
    /// `lock()` in a spawned task, aborted at a random moment.
    Abort,
    /// `lock_timeout(2 s)`; the release then runs in a spawned task aborted a few µs
    /// to ms later (the guard's drop must still free the lock).
    AbortRelease,
    /// `lock_timeout(2 s)`; before the release another task of this process queues
    /// behind the holder, the release passes the lock to it, and that task is aborted
    /// at once (what was passed to it must be passed on or released).
    AbortHandoff,
}

/// How an attempt ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Outcome {
    Acquired,
    /// Still held when the wait ran out.
    Busy,
    /// The library reported an error (its kind).
    Error {
        error: String,
    },
    /// The worker dropped or aborted the attempt before it answered.
    Cancelled,
}

/// Who held a lock: worker slot, incarnation (restarts), task, attempt number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Holder {
    pub worker: usize,
    pub incarnation: usize,
    pub task: usize,
    pub seq: u64,
}

impl Holder {
    /// The seed of this task's random choices in a run seeded with `run`.
    pub fn seed(self, run: u64) -> u64 {
        (run ^ (self.worker as u64) << 32) ^ ((self.incarnation as u64) << 16) ^ self.task as u64
    }
}

/// Microseconds since the Unix epoch: every process of one machine shares this clock.
pub fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

/// `instant` on the wall clock.
pub fn wall_us(instant: Instant) -> u64 {
    let now = Instant::now();
    let wall = now_us();
    match instant.checked_duration_since(now) {
        Some(ahead) => wall + micros(ahead),
        None => wall.saturating_sub(micros(now - instant)),
    }
}

/// A duration in µs, saturating.
pub fn micros(duration: std::time::Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}

/// The weight of a lock's acquisition, in logs from before weights were logged.
fn one() -> u64 {
    1
}
