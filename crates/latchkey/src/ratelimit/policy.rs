//! What a rate limit allows: the algorithm and its numbers, checked once.

use std::sync::Arc;
use std::time::Duration;

use redis::Script;

use super::Decision;
use crate::error::{Error, Given, Result};
use crate::key::LockKey;
use crate::lease::{MAX_TTL, Ttl};
use crate::scripts::{self, ScriptCall};

/// The largest limit, burst or cost: Lua counts in doubles, exact up to 2^53.
const MAX_UNITS: u64 = 1 << 50;

/// How a [`Policy`] counts. Read it back with [`Policy::algorithm`].
///
/// ```
/// use latchkey::ratelimit::{Algorithm, Policy};
///
/// let api = Policy::gcra(100, std::time::Duration::from_secs(1), 20)?;
/// assert_eq!(api.algorithm(), Algorithm::Gcra { burst: 20 });
/// # Ok::<(), latchkey::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Algorithm {
    /// One call, then nothing until the period has passed since it.
    Cooldown,
    /// Up to the limit per window; a window starts at its first allowed call. Up to
    /// twice the limit can pass within one period across two windows' boundary.
    FixedWindow,
    /// Up to the limit in any period ending now: exact, with a log of at most
    /// `limit` entries per key.
    SlidingWindow,
    /// The generic cell rate algorithm: calls spaced evenly at `limit` per period,
    /// and up to `burst` calls more in a burst after a quiet spell.
    Gcra {
        /// Calls allowed at once beyond the steady rate.
        burst: u64,
    },
}

impl Algorithm {
    /// The `algorithm` label of its metrics (see [`crate::metrics`]).
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    pub(crate) fn label(self) -> &'static str {
        match self {
            Algorithm::Cooldown => "cooldown",
            Algorithm::FixedWindow => "fixed_window",
            Algorithm::SlidingWindow => "sliding_window",
            Algorithm::Gcra { .. } => "gcra",
        }
    }

    /// The algorithm in words, for messages.
    fn describe(self) -> String {
        match self {
            Algorithm::Cooldown => "a cooldown".to_owned(),
            Algorithm::FixedWindow => "a fixed window".to_owned(),
            Algorithm::SlidingWindow => "a sliding window".to_owned(),
            Algorithm::Gcra { burst } => format!("GCRA with a burst of {burst}"),
        }
    }
}

/// A rate limit's rule: which [`Algorithm`], how many per how long.
///
/// Made by [`cooldown`](Self::cooldown), [`fixed_window`](Self::fixed_window),
/// [`sliding_window`](Self::sliding_window) or [`gcra`](Self::gcra), which check
/// their numbers; handed to [`Client::rate_limiter`](crate::Client::rate_limiter).
///
/// ```
/// use std::time::Duration;
/// use latchkey::ratelimit::Policy;
///
/// let downloads = Policy::sliding_window(5, Duration::from_secs(600))?;
/// assert_eq!(downloads.capacity(), 5);
/// assert!(Policy::fixed_window(0, Duration::from_secs(1)).is_err());
/// # Ok::<(), latchkey::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    algorithm: Algorithm,
    quota: u64,
    period: Ttl,
    name: Arc<str>,
}

impl Policy {
    /// One call per `period`: the SMS code case (one per phone per minute).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a period below 1 ms or above ten years.
    ///
    /// ```
    /// let sms = latchkey::ratelimit::Policy::cooldown(std::time::Duration::from_secs(60))?;
    /// assert_eq!(sms.capacity(), 1);
    /// # Ok::<(), latchkey::Error>(())
    /// ```
    pub fn cooldown(period: Duration) -> Result<Self> {
        Policy::new(Algorithm::Cooldown, 1, period)
    }

    /// Up to `limit` calls per window of `per`; a window starts at its first allowed
    /// call.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a limit of 0 or above 2^50, or a window below
    /// 1 ms or above ten years.
    ///
    /// ```
    /// let quota = latchkey::ratelimit::Policy::fixed_window(5, std::time::Duration::from_secs(600))?;
    /// # Ok::<(), latchkey::Error>(())
    /// ```
    pub fn fixed_window(limit: u64, per: Duration) -> Result<Self> {
        Policy::new(Algorithm::FixedWindow, limit, per)
    }

    /// Up to `limit` calls in any span of `per` ending now, counted exactly.
    ///
    /// # Errors
    ///
    /// As [`fixed_window`](Self::fixed_window).
    ///
    /// ```
    /// let quota = latchkey::ratelimit::Policy::sliding_window(5, std::time::Duration::from_secs(600))?;
    /// # Ok::<(), latchkey::Error>(())
    /// ```
    pub fn sliding_window(limit: u64, per: Duration) -> Result<Self> {
        Policy::new(Algorithm::SlidingWindow, limit, per)
    }

    /// A steady `rate` calls per `per`, plus bursts of up to `burst` calls more
    /// (redis-cell's `CL.THROTTLE key burst rate per`): after a quiet spell,
    /// `burst + 1` calls pass at once, then one every `per / rate`. The spacing is
    /// kept in whole µs, rounded up: a rate that does not divide `per` into whole
    /// µs is kept a little below, never above (300 000 a second: one every 4 µs).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a rate of 0, a period below 1 ms or above ten
    /// years, a `per / rate` below 1 µs, or a burst whose span (`(burst + 1) × per /
    /// rate`) is above ten years.
    ///
    /// ```
    /// let api = latchkey::ratelimit::Policy::gcra(100, std::time::Duration::from_secs(1), 20)?;
    /// assert_eq!(api.capacity(), 21);
    /// # Ok::<(), latchkey::Error>(())
    /// ```
    pub fn gcra(rate: u64, per: Duration, burst: u64) -> Result<Self> {
        let policy = Policy::new(Algorithm::Gcra { burst }, rate, per)?;
        if (policy.period.as_duration().as_micros() as u64) < rate {
            return invalid(format!(
                "a rate of {rate} per {} is more than one call per µs",
                Given(per)
            ));
        }
        let interval = policy.emission_interval_us();
        let span = burst.checked_add(1).and_then(|n| n.checked_mul(interval));
        if span.is_none_or(|span| span > MAX_TTL.as_micros() as u64) {
            return invalid(format!(
                "a burst of {burst} at {rate} per {} spans more than ten years",
                Given(per)
            ));
        }
        Ok(policy)
    }

    fn new(algorithm: Algorithm, quota: u64, period: Duration) -> Result<Self> {
        if quota == 0 {
            return invalid("a rate limit of 0 allows nothing; use at least 1".into());
        }
        if quota > MAX_UNITS {
            return invalid(format!("a rate limit of {quota} is above 2^50"));
        }
        Ok(Policy {
            algorithm,
            quota,
            period: Ttl::at_least(period, Duration::from_millis(1), "a rate-limit period")?,
            name: Arc::from("default"),
        })
    }

    /// The same policy under `name`, the name the HTTP [`Headers`](super::Headers)
    /// give it (default `default`).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for an empty name, or one with characters other
    /// than printable ASCII, or with `"` or `\`.
    ///
    /// ```
    /// let sms = latchkey::ratelimit::Policy::cooldown(std::time::Duration::from_secs(60))?.named("sms")?;
    /// assert_eq!(sms.name(), "sms");
    /// # Ok::<(), latchkey::Error>(())
    /// ```
    pub fn named(mut self, name: &str) -> Result<Self> {
        let printable = |c: char| c.is_ascii_graphic() || c == ' ';
        if name.is_empty() || !name.chars().all(|c| printable(c) && c != '"' && c != '\\') {
            return invalid(format!(
                "policy name {name:?} must be non-empty printable ASCII without '\"' or '\\'"
            ));
        }
        self.name = Arc::from(name);
        Ok(self)
    }

    /// The algorithm.
    ///
    /// ```
    /// use latchkey::ratelimit::{Algorithm, Policy};
    /// let sms = Policy::cooldown(std::time::Duration::from_secs(60))?;
    /// assert_eq!(sms.algorithm(), Algorithm::Cooldown);
    /// # Ok::<(), latchkey::Error>(())
    /// ```
    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    /// The limit per period (the rate, for GCRA; 1 for a cooldown).
    ///
    /// ```
    /// let api = latchkey::ratelimit::Policy::gcra(100, std::time::Duration::from_secs(1), 20)?;
    /// assert_eq!(api.quota(), 100);
    /// # Ok::<(), latchkey::Error>(())
    /// ```
    pub fn quota(&self) -> u64 {
        self.quota
    }

    /// The period (the window, the cooldown, or GCRA's `per`), in whole ms.
    ///
    /// ```
    /// let sms = latchkey::ratelimit::Policy::cooldown(std::time::Duration::from_secs(60))?;
    /// assert_eq!(sms.period().as_secs(), 60);
    /// # Ok::<(), latchkey::Error>(())
    /// ```
    pub fn period(&self) -> Duration {
        self.period.as_duration()
    }

    /// The name the HTTP headers give this policy.
    ///
    /// ```
    /// let sms = latchkey::ratelimit::Policy::cooldown(std::time::Duration::from_secs(60))?;
    /// assert_eq!(sms.name(), "default");
    /// # Ok::<(), latchkey::Error>(())
    /// ```
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The name, shared (the `policy` label of its metrics).
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    pub(crate) fn shared_name(&self) -> Arc<str> {
        self.name.clone()
    }

    /// The most cost units that can pass at once, and so the largest cost a call
    /// may have: the limit, 1 for a cooldown, `burst + 1` for GCRA. It is the
    /// [`Decision::limit`].
    ///
    /// ```
    /// let quota = latchkey::ratelimit::Policy::fixed_window(5, std::time::Duration::from_secs(600))?;
    /// assert_eq!(quota.capacity(), 5);
    /// # Ok::<(), latchkey::Error>(())
    /// ```
    pub fn capacity(&self) -> u64 {
        match self.algorithm {
            Algorithm::Gcra { burst } => burst + 1,
            _ => self.quota,
        }
    }

    /// Checks, without a server, that one call may cost `cost` units under this
    /// policy: at least 1, and no more than it ever lets through at once.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) otherwise.
    ///
    /// ```
    /// let policy = latchkey::ratelimit::Policy::fixed_window(5, std::time::Duration::from_secs(60))?;
    /// assert!(policy.check_cost(5).is_ok());
    /// assert!(policy.check_cost(0).is_err() && policy.check_cost(6).is_err());
    /// # Ok::<(), latchkey::Error>(())
    /// ```
    pub fn check_cost(&self, cost: u64) -> Result<()> {
        if cost == 0 {
            return invalid(
                "a cost of 0: a call costs at least 1 (to look without counting, peek)".into(),
            );
        }
        if cost > self.capacity() {
            return invalid(format!(
                "a cost of {cost} can never pass: {} lets at most {} through at once",
                self.algorithm.describe(),
                self.capacity()
            ));
        }
        Ok(())
    }

    /// The script call that decides one call of `cost` on the limiter `key`;
    /// `consume` is false for a peek.
    pub(crate) fn invocation(
        &self,
        key: &LockKey,
        cost: u64,
        consume: bool,
    ) -> ScriptCall<'static> {
        let period_ms = self.period.as_millis();
        let consume = u64::from(consume);
        match self.algorithm {
            Algorithm::Cooldown => call(
                &scripts::COOLDOWN,
                &[key.companion("cooldown")],
                &[period_ms, consume],
            ),
            Algorithm::FixedWindow => call(
                &scripts::FIXED_WINDOW,
                &[key.companion("rate")],
                &[self.quota, period_ms, cost, consume],
            ),
            Algorithm::SlidingWindow => call(
                &scripts::SLIDING_WINDOW,
                &[key.companion("log"), key.companion("tally")],
                &[self.quota, period_ms * 1000, cost, consume],
            ),
            Algorithm::Gcra { burst } => {
                let interval = self.emission_interval_us();
                let tolerance = interval * (burst + 1);
                call(
                    &scripts::GCRA,
                    &[key.companion("gcra")],
                    &[
                        interval.saturating_mul(cost),
                        tolerance,
                        consume,
                        tolerance.div_ceil(1000),
                    ],
                )
            }
        }
    }

    /// The decision the script's reply to [`Policy::invocation`] for `cost` stands
    /// for.
    pub(crate) fn decision(&self, reply: ScriptReply, cost: u64) -> Decision {
        let micros = |us: i64| Duration::from_micros(us.max(0) as u64);
        let (allowed, remaining, retry_us, reset_us) = match reply {
            ScriptReply::Full(full) => full,
            ScriptReply::Ahead(ahead) => self.gcra_reply(ahead, cost),
        };
        Decision::new(
            allowed == 1,
            self.capacity(),
            remaining.max(0) as u64,
            (retry_us >= 0).then(|| micros(retry_us)),
            micros(reset_us),
        )
    }

    /// The full reply GCRA's one number stands for: how far ahead of the server
    /// clock its TAT is, or `-(ahead) - 1` when the call was denied (see
    /// `scripts/ratelimit/gcra.lua`).
    fn gcra_reply(&self, reply: i64, cost: u64) -> (i64, i64, i64, i64) {
        let interval = self.emission_interval_us() as i64;
        let tolerance = interval * self.capacity() as i64;
        let allowed = reply >= 0;
        // -(reply + 1): a denied reply is at most -1, so this cannot overflow, as
        // -reply - 1 did for the i64::MIN Redis makes of a huge Lua number.
        let ahead = if allowed { reply } else { -(reply + 1) };
        let remaining = (tolerance - ahead).max(0) / interval.max(1);
        let retry = match allowed {
            true => -1,
            false => {
                let increment = interval.saturating_mul(i64::try_from(cost).unwrap_or(i64::MAX));
                ahead.saturating_add(increment).saturating_sub(tolerance)
            }
        };
        (i64::from(allowed), remaining, retry, ahead)
    }

    /// GCRA's spacing between calls at the steady rate, in whole µs, rounded up:
    /// a rate that does not divide its period into whole µs is kept a little
    /// below, never above (500 001 a second would be 1 µs apart, twice the rate).
    fn emission_interval_us(&self) -> u64 {
        (self.period.as_duration().as_micros() as u64).div_ceil(self.quota)
    }
}

/// What a rate-limit script answers: the full reply `{allowed (1/0), remaining,
/// retry µs (-1: none), reset µs}`, or GCRA's one number (see
/// [`Policy::decision`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ScriptReply {
    Full((i64, i64, i64, i64)),
    Ahead(i64),
}

impl redis::FromRedisValue for ScriptReply {
    fn from_redis_value(v: redis::Value) -> std::result::Result<Self, redis::ParsingError> {
        match v {
            redis::Value::Int(ahead) => Ok(ScriptReply::Ahead(ahead)),
            full => Ok(ScriptReply::Full(redis::from_redis_value(full)?)),
        }
    }
}

/// `script` with its `keys` and `args`.
fn call(script: &'static Script, keys: &[String], args: &[u64]) -> ScriptCall<'static> {
    let mut call = ScriptCall::new(script, keys);
    for arg in args {
        call.arg(*arg);
    }
    call
}

fn invalid<T>(message: String) -> Result<T> {
    Err(Error::InvalidArgument(message))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gcra_s_one_number_gives_the_whole_decision() {
        // One call per 100 ms, bursts of 4 more: a tolerance of 500 ms.
        let policy = Policy::gcra(10, Duration::from_secs(1), 4).unwrap();
        let ms = Duration::from_millis;

        let first = policy.decision(ScriptReply::Ahead(100_000), 1);
        assert_eq!(first, Decision::new(true, 5, 4, None, ms(100)));

        // Denied 450 ms ahead: a call of 1 fits again in 50 ms, one of 2 in 150 ms.
        let denied = policy.decision(ScriptReply::Ahead(-450_001), 1);
        assert_eq!(denied, Decision::new(false, 5, 0, Some(ms(50)), ms(450)));
        let heavier = policy.decision(ScriptReply::Ahead(-450_001), 2);
        assert_eq!(heavier.retry_after, Some(ms(150)));

        // Full capacity: nothing ahead.
        let idle = policy.decision(ScriptReply::Ahead(0), 1);
        assert_eq!(idle, Decision::new(true, 5, 5, None, Duration::ZERO));
    }

    /// The spacing is rounded up, so the rate kept is never above the one given;
    /// more than one call a µs is refused; a denial as far ahead as Redis can say
    /// (i64::MIN, what it makes of a huge Lua number) is no overflow.
    #[test]
    fn gcra_never_keeps_more_than_its_rate() {
        let second = Duration::from_secs(1);
        let odd = Policy::gcra(500_001, second, 0).unwrap();
        assert_eq!(odd.emission_interval_us(), 2);
        assert_eq!(
            Policy::gcra(300_000, second, 0)
                .unwrap()
                .emission_interval_us(),
            4
        );
        assert_eq!(
            Policy::gcra(1_000_000, second, 0)
                .unwrap()
                .emission_interval_us(),
            1
        );
        assert!(Policy::gcra(1_000_001, second, 0).is_err());
        let denied = odd.decision(ScriptReply::Ahead(i64::MIN), 1);
        assert!(!denied.allowed);
        assert!(denied.retry_after.unwrap() > Duration::from_secs(86_400 * 365));
    }

    #[test]
    fn the_other_algorithms_reply_in_full() {
        let policy = Policy::fixed_window(5, Duration::from_secs(60)).unwrap();
        let reply = ScriptReply::Full((0, 0, 2_000_000, 3_000_000));
        let decision = policy.decision(reply, 1);
        let expected = Decision::new(
            false,
            5,
            0,
            Some(Duration::from_secs(2)),
            Duration::from_secs(3),
        );
        assert_eq!(decision, expected);
    }
}
