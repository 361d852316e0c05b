//! Leases: how long a lock is held before Redis frees it on its own.

use std::time::{Duration, Instant};

use crate::error::{Error, Given, Result};

/// Longest lease accepted: far beyond any sane lock, and well inside what Redis's
/// `PX` and our deadline arithmetic can represent.
pub(crate) const MAX_TTL: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// A validated lease length: at least 1 ms (Redis's `PX` resolution), at most ten years.
/// Sub-millisecond parts are dropped, as Redis counts whole milliseconds. Used for
/// waiter leases ([`Mutex::with_waiter_lease`](crate::Mutex::with_waiter_lease)) and
/// inside a [`Lease`].
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
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] below 1 ms or above ten years.
    ///
    /// ```
    /// let five = latchkey::Ttl::new(std::time::Duration::from_secs(5))?;
    /// assert_eq!(five.as_millis(), 5_000);
    /// # Ok::<(), latchkey::Error>(())
    /// ```
    pub fn new(ttl: Duration) -> Result<Self> {
        Ttl::named(ttl, format_args!("TTL"))
    }

    /// [`new`](Self::new), with `what` naming the value in the error.
    fn named(ttl: Duration, what: std::fmt::Arguments<'_>) -> Result<Self> {
        if ttl < Duration::from_millis(1) {
            return Err(Error::InvalidArgument(format!(
                "{what} {} is below 1ms, the smallest lease Redis's PX can set",
                Given(ttl)
            )));
        }
        if ttl > MAX_TTL {
            return Err(Error::InvalidArgument(format!(
                "{what} {ttl:?} is too large; the limit is {} days",
                MAX_TTL.as_secs() / 86_400
            )));
        }
        // Redis counts whole milliseconds; keep our own arithmetic on the same value.
        Ok(Ttl(Duration::from_millis(ttl.as_millis() as u64)))
    }

    /// Checks `ttl` as [`new`](Self::new) does, and that it is at least `min`
    /// (`what` names the value in the error).
    pub(crate) fn at_least(ttl: Duration, min: Duration, what: &str) -> Result<Self> {
        if ttl < min {
            return Err(Error::InvalidArgument(format!(
                "{what} of {} is too short; the least is {min:?}",
                Given(ttl)
            )));
        }
        Ttl::named(ttl, format_args!("{what} of"))
    }

    /// The lease in whole milliseconds (sub-millisecond parts are dropped).
    ///
    /// ```
    /// assert_eq!(latchkey::Ttl::DEFAULT.as_millis(), 30_000);
    /// ```
    pub fn as_millis(self) -> u64 {
        // Cannot truncate: MAX_TTL is far below u64::MAX milliseconds.
        self.0.as_millis() as u64
    }

    /// The lease as a `Duration`.
    ///
    /// ```
    /// let ttl = latchkey::Ttl::new(std::time::Duration::from_micros(1_500))?;
    /// assert_eq!(ttl.as_duration(), std::time::Duration::from_millis(1));
    /// # Ok::<(), latchkey::Error>(())
    /// ```
    pub fn as_duration(self) -> Duration {
        self.0
    }

    /// This lease with `more` added: what Redis keeps a lock for when a lock delay
    /// follows the holder's lease ([`Lease::with_lock_delay`]).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] when the sum is above ten years.
    pub(crate) fn plus(self, more: Duration) -> Result<Self> {
        match more.is_zero() {
            true => Ok(self),
            false => Ttl::new(self.0 + more),
        }
    }

    /// The end of the holder's lease, from the instant until which Redis surely
    /// keeps a lock it set for this lease plus `delay` (`in_redis.valid_until(sent)`):
    /// `sent + lease - drift(lease)`. The drift allowance is linear in the length, so
    /// the two ends are a fixed `delay - delay/100` apart whatever the lease (an
    /// extend may ask for another length); one µs more keeps the rounding of the
    /// divisions on the safe side.
    pub(crate) fn lease_end(redis_ends: Instant, delay: Duration) -> Instant {
        if delay.is_zero() {
            return redis_ends;
        }
        let apart = delay - delay / 100 + Duration::from_micros(1);
        redis_ends.checked_sub(apart).unwrap_or(redis_ends)
    }

    /// The allowance for clock-rate differences between us and Redis:
    /// 1 % of the lease plus 2 ms, as in the Redlock algorithm.
    pub(crate) fn drift(self) -> Duration {
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

/// How a lock is held: for a fixed lease, or for a lease a watchdog renews while
/// the guard lives (the default: 30 s, renewed every 10 s). Set with
/// [`Mutex::with_lease`](crate::Mutex::with_lease); see [Leases](crate#leases).
///
/// A renewed lease must be at least 100 ms: the watchdog renews every third of it,
/// and a shorter one would be lost to one slow round trip. A fixed lease must be at
/// least 10 ms, so it outlasts the drift allowance it is checked with.
///
/// ```
/// use std::time::Duration;
/// use latchkey::Lease;
///
/// let fixed = Lease::fixed(Duration::from_secs(5))?;
/// assert_eq!(fixed.ttl().as_millis(), 5_000);
/// assert!(!fixed.is_renewed());
/// assert_eq!(Lease::default(), Lease::renewed(Duration::from_secs(30))?);
/// assert!(Lease::renewed(Duration::from_millis(1)).is_err()); // too short to renew
/// # Ok::<(), latchkey::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lease {
    ttl: Ttl,
    renewed: bool,
    max_hold: Option<Duration>,
    lock_delay: Duration,
}

impl Lease {
    /// The shortest lease a watchdog renews: it renews every third of the lease,
    /// and a few tens of ms must be left for the round trip.
    pub const MIN_RENEWED: Duration = Duration::from_millis(100);
    /// The shortest fixed lease: it must outlast the drift allowance (2 ms + 1 %)
    /// it is checked with, or it would count as lost the moment it is granted.
    pub const MIN_FIXED: Duration = Duration::from_millis(10);

    /// A lease of `ttl` that runs out `ttl` after the acquire unless the holder
    /// extends it ([`MutexGuard::extend`](crate::MutexGuard::extend)); the guard's
    /// `lost` signal fires when it runs out.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] below [`MIN_FIXED`](Self::MIN_FIXED) or above ten years.
    ///
    /// ```
    /// let lease = latchkey::Lease::fixed(std::time::Duration::from_millis(500))?;
    /// # Ok::<(), latchkey::Error>(())
    /// ```
    pub fn fixed(ttl: Duration) -> Result<Self> {
        Ok(Lease {
            ttl: Ttl::at_least(ttl, Self::MIN_FIXED, "a fixed lease")?,
            renewed: false,
            max_hold: None,
            lock_delay: Duration::ZERO,
        })
    }

    /// A lease of `ttl` that a watchdog renews every `ttl / 3` for as long as the
    /// guard lives; if a renewal finds the lock gone, or Redis does not answer before
    /// the lease would end, the guard's `lost` signal fires.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] below [`MIN_RENEWED`](Self::MIN_RENEWED) or above ten years.
    ///
    /// ```
    /// let lease = latchkey::Lease::renewed(std::time::Duration::from_secs(10))?;
    /// assert!(lease.is_renewed());
    /// # Ok::<(), latchkey::Error>(())
    /// ```
    pub fn renewed(ttl: Duration) -> Result<Self> {
        Ok(Lease {
            ttl: Ttl::at_least(ttl, Self::MIN_RENEWED, "a renewed lease")?,
            renewed: true,
            max_hold: None,
            lock_delay: Duration::ZERO,
        })
    }

    /// The lease length.
    ///
    /// ```
    /// assert_eq!(latchkey::Lease::default().ttl(), latchkey::Ttl::DEFAULT);
    /// ```
    pub fn ttl(self) -> Ttl {
        self.ttl
    }

    /// Whether a watchdog renews the lease.
    ///
    /// ```
    /// assert!(latchkey::Lease::default().is_renewed());
    /// ```
    pub fn is_renewed(self) -> bool {
        self.renewed
    }

    /// This lease, with every hold limited to `limit` from its grant: a cap on a
    /// holder that hangs, or loops, while its watchdog keeps the lock alive.
    ///
    /// At the limit the guard's [`lost`](crate::MutexGuard::lost) signal fires and
    /// [`is_lost`](crate::MutexGuard::is_lost) turns true, as when a lease is lost;
    /// [`fence`](crate::MutexGuard::fence), [`extend`](crate::MutexGuard::extend) and
    /// [`detach`](crate::MutexGuard::detach) then fail with [`Error::HoldLimit`], and
    /// an extend before it is cut to what is left of the limit. The watchdog stops
    /// renewing as soon as the lease in Redis covers the rest of the limit, so the
    /// lock ends by itself at most one lease (and the lock delay) after the limit if
    /// the holder never releases it (releasing it, or dropping the guard, frees it at
    /// once). The limit counts from when this process learned of the grant: Redis may
    /// have granted it up to a round trip earlier. A hold detached before the limit
    /// and adopted elsewhere gets the adopter's lease, and its limit counts afresh.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a limit of zero or above ten years.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// // Renewed every 10 s while held, but never held for more than 5 minutes.
    /// let lease = latchkey::Lease::renewed(Duration::from_secs(30))?
    ///     .with_max_hold(Duration::from_secs(300))?;
    /// assert_eq!(lease.max_hold(), Some(Duration::from_secs(300)));
    /// # Ok::<(), latchkey::Error>(())
    /// ```
    pub fn with_max_hold(self, limit: Duration) -> Result<Self> {
        let limit = Ttl::at_least(limit, Duration::from_millis(1), "a hold limit")?;
        Ok(Lease {
            max_hold: Some(limit.as_duration()),
            ..self
        })
    }

    /// This lease, with a lock delay (Consul's `lock-delay`): when a holder's lease
    /// runs out without a release (it crashed, froze or was cut off), nobody gets the
    /// lock for `delay` more. A holder paused past its lease that wakes and writes
    /// without checking its [fencing token](crate#fencing) then still finds no new
    /// holder in the middle of its work, if it wakes within the delay.
    ///
    /// The holder's own view does not change: its guard's
    /// [`validity`](crate::MutexGuard::validity) and `lost` signal follow the lease,
    /// not the delay. Redis keeps the lock for the lease plus the delay (so `status`
    /// shows that much left), and a release frees it at once, as always. Permits of a
    /// semaphore and holds of a read-write lock taken with this lease get the same
    /// delay. A detached hold ([`MutexGuard::detach`](crate::MutexGuard::detach))
    /// keeps it only if whoever extends it uses a mutex with the same delay. On a
    /// quorum, the per-node deadline (5 % of the lease) and the check that a grant
    /// did not come too late count the lease and the delay together.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] when the lease plus the delay is above ten years.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// // A crashed holder blocks others for 10 s of lease, then 15 s more.
    /// let lease = latchkey::Lease::renewed(Duration::from_secs(10))?
    ///     .with_lock_delay(Duration::from_secs(15))?;
    /// assert_eq!(lease.lock_delay(), Duration::from_secs(15));
    /// # Ok::<(), latchkey::Error>(())
    /// ```
    pub fn with_lock_delay(self, delay: Duration) -> Result<Self> {
        // Whole milliseconds, as Redis counts them (a sum above ten years is refused
        // below, so the milliseconds fit).
        let millis = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
        let whole = Duration::from_millis(millis.min(MAX_TTL.as_millis() as u64 + 1));
        if self.ttl.plus(whole).is_err() {
            // Named as given: the sum above is clamped.
            return Err(Error::InvalidArgument(format!(
                "a lock delay of {} after a lease of {:?} is too long; together they may be at most {} days",
                Given(delay),
                self.ttl.as_duration(),
                MAX_TTL.as_secs() / 86_400
            )));
        }
        Ok(Lease {
            lock_delay: whole,
            ..self
        })
    }

    /// The lock delay set with [`with_lock_delay`](Self::with_lock_delay) (zero by
    /// default).
    ///
    /// ```
    /// assert!(latchkey::Lease::default().lock_delay().is_zero());
    /// ```
    pub fn lock_delay(self) -> Duration {
        self.lock_delay
    }

    /// How long Redis keeps a lock taken with this lease: the lease and the lock
    /// delay.
    pub(crate) fn in_redis(self) -> Ttl {
        // Checked by `with_lock_delay`.
        self.ttl.plus(self.lock_delay).unwrap_or(self.ttl)
    }

    /// The hold limit, if one was set with [`with_max_hold`](Self::with_max_hold).
    ///
    /// ```
    /// assert_eq!(latchkey::Lease::default().max_hold(), None);
    /// ```
    pub fn max_hold(self) -> Option<Duration> {
        self.max_hold
    }
}

impl Default for Lease {
    fn default() -> Self {
        Lease {
            ttl: Ttl::DEFAULT,
            renewed: true,
            max_hold: None,
            lock_delay: Duration::ZERO,
        }
    }
}
