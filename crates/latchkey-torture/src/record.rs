//! What workers log, one JSON line per event, and the shared clock they log in.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// One line of a worker's log.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Record {
    /// `lock()` returned: the holder knows it holds the lock from `at_us` on.
    Acquired {
        holder: Holder,
        lock: String,
        fence: u64,
        at_us: u64,
    },
    /// The critical section ended and the guard was released.
    Ended {
        holder: Holder,
        lock: String,
        fence: u64,
        /// When `lock()` returned.
        acquired_us: u64,
        /// The critical section, by the wall clock.
        section: (u64, u64),
        /// Until when the lease surely lasted, by the holder's clock.
        valid_until_us: u64,
        /// When the release was sent.
        release_us: u64,
        /// What the release said (`None`: it failed).
        released: Option<bool>,
        /// Whether the guard's `lost` signal had fired by then.
        lost: bool,
        /// The fenced write: accepted, rejected, or failed (`None`).
        write_accepted: Option<bool>,
    },
}

/// Who held a lock: worker slot, incarnation (restarts), task, acquisition number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Holder {
    pub worker: usize,
    pub incarnation: usize,
    pub task: usize,
    pub seq: u64,
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
        Some(ahead) => wall + u64::try_from(ahead.as_micros()).unwrap_or(0),
        None => wall.saturating_sub(u64::try_from((now - instant).as_micros()).unwrap_or(0)),
    }
}
