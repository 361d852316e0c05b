//! Leases: how long a lock is held before Redis frees it on its own.

use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// Longest lease accepted: far beyond any sane lock, and well inside what Redis's
/// `PX` and our deadline arithmetic can represent.
const MAX_TTL: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// A validated lease length: at least 1 ms (Redis's `PX` resolution), at most ten years.
///
/// ```
/// use std::time::Duration;
/// use latchkey::Ttl;
///
/// assert_eq!(Ttl::new(Duration::from_secs(30))?.as_millis(), 30_000);
/// assert!(Ttl::new(Duration::ZERO).is_err());
/// assert!(Ttl::new(Duration::from_micros(500)).is_err());
/// # Ok::<(), latchkey::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Ttl(Duration);

impl Ttl {
    /// The default lease: 30 s, as Redisson's watchdog and most peers use.
    pub const DEFAULT: Ttl = Ttl(Duration::from_secs(30));

    /// A lease of `millis` ms, for constants; `millis` must be at least 1.
    pub(crate) const fn from_millis_const(millis: u64) -> Self {
        Ttl(Duration::from_millis(millis))
    }

    /// Checks that `ttl` is a lease Redis can set.
    pub fn new(ttl: Duration) -> Result<Self> {
        if ttl < Duration::from_millis(1) {
            return Err(Error::InvalidArgument(format!(
                "TTL {ttl:?} is below 1ms, the smallest lease Redis's PX can set"
            )));
        }
        if ttl > MAX_TTL {
            return Err(Error::InvalidArgument(format!(
                "TTL {ttl:?} is too large; the limit is {} days",
                MAX_TTL.as_secs() / 86_400
            )));
        }
        // Redis counts whole milliseconds; keep our own arithmetic on the same value.
        Ok(Ttl(Duration::from_millis(ttl.as_millis() as u64)))
    }

    /// The lease in whole milliseconds (sub-millisecond parts are dropped).
    pub fn as_millis(self) -> u64 {
        // Cannot truncate: MAX_TTL is far below u64::MAX milliseconds.
        self.0.as_millis() as u64
    }

    /// The lease as a `Duration`.
    pub fn as_duration(self) -> Duration {
        self.0
    }

    /// The allowance for clock-rate differences between us and Redis:
    /// 1 % of the lease plus 2 ms, as in the Redlock algorithm.
    pub fn drift(self) -> Duration {
        self.0 / 100 + Duration::from_millis(2)
    }

    /// The instant until which a lease granted for a request sent at `sent` is surely
    /// still ours: the lease, less the drift allowance, counted from the send (not the
    /// reply), because Redis may have started the clock at any point in between.
    pub(crate) fn valid_until(self, sent: Instant) -> Instant {
        let usable = self.0.saturating_sub(self.drift());
        sent.checked_add(usable).unwrap_or(sent)
    }
}

impl Default for Ttl {
    fn default() -> Self {
        Ttl::DEFAULT
    }
}

impl TryFrom<Duration> for Ttl {
    type Error = Error;

    fn try_from(ttl: Duration) -> Result<Self> {
        Ttl::new(ttl)
    }
}

/// Whether a held lock's lease is renewed in the background.
///
/// ```
/// use std::time::Duration;
/// use latchkey::{LeaseMode, Ttl};
///
/// let fixed = LeaseMode::Fixed(Ttl::new(Duration::from_secs(5))?);
/// assert_eq!(fixed.ttl().as_millis(), 5_000);
/// assert_eq!(LeaseMode::default(), LeaseMode::Renewed(Ttl::DEFAULT));
/// # Ok::<(), latchkey::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeaseMode {
    /// The lease runs out `ttl` after the acquire unless the holder extends it.
    Fixed(Ttl),
    /// A watchdog renews the lease every `ttl / 3` for as long as the guard lives,
    /// and fires the guard's `lost` signal if a renewal fails.
    Renewed(Ttl),
}

impl LeaseMode {
    /// The lease length.
    pub fn ttl(self) -> Ttl {
        match self {
            LeaseMode::Fixed(ttl) | LeaseMode::Renewed(ttl) => ttl,
        }
    }
}

impl Default for LeaseMode {
    fn default() -> Self {
        LeaseMode::Renewed(Ttl::DEFAULT)
    }
}
