//! HTTP header values for a rate-limit decision.

use super::{Decision, Policy};

/// The HTTP response header values for one decision: `RateLimit` and
/// `RateLimit-Policy` as in the IETF draft "RateLimit header fields for HTTP"
/// (draft-ietf-httpapi-ratelimit-headers, structured-field form), and `Retry-After`
/// (RFC 9110) when the call was denied. Times are whole seconds, rounded up, so a
/// client that waits what they say is not refused for being early.
///
/// ```
/// use std::time::Duration;
/// use latchkey::ratelimit::{Decision, Headers, Policy};
///
/// let policy = Policy::fixed_window(5, Duration::from_secs(600))?.named("downloads")?;
/// let denied = Decision::new(false, 5, 0, Some(Duration::from_millis(1500)), Duration::from_millis(1500));
/// let headers = Headers::new(&policy, &denied);
/// assert_eq!(headers.rate_limit_policy, r#""downloads";q=5;w=600"#);
/// assert_eq!(headers.rate_limit, r#""downloads";r=0;t=2"#);
/// assert_eq!(headers.retry_after.as_deref(), Some("2"));
/// # Ok::<(), latchkey::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Headers {
    /// The `RateLimit` value: units left (`r`) and seconds until the limit is full
    /// again (`t`).
    pub rate_limit: String,
    /// The `RateLimit-Policy` value: the quota (`q`) per window of `w` seconds.
    pub rate_limit_policy: String,
    /// The `Retry-After` value in seconds, for a denied call (with status 429).
    pub retry_after: Option<String>,
}

impl Headers {
    /// The header values for `decision`, made under `policy`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use latchkey::ratelimit::{Decision, Headers, Policy};
    ///
    /// let policy = Policy::cooldown(Duration::from_secs(60))?;
    /// let ok = Decision::new(true, 1, 0, None, Duration::from_secs(60));
    /// assert_eq!(Headers::new(&policy, &ok).retry_after, None);
    /// # Ok::<(), latchkey::Error>(())
    /// ```
    pub fn new(policy: &Policy, decision: &Decision) -> Self {
        let name = policy.name();
        Headers {
            rate_limit: format!(
                "\"{name}\";r={};t={}",
                decision.remaining,
                seconds_up(decision.reset_after)
            ),
            rate_limit_policy: format!(
                "\"{name}\";q={};w={}",
                policy.quota(),
                seconds_up(policy.period())
            ),
            retry_after: decision
                .retry_after
                .map(|wait| seconds_up(wait).to_string()),
        }
    }

    /// The headers as (name, value) pairs, ready for any HTTP library.
    ///
    /// ```
    /// use std::time::Duration;
    /// use latchkey::ratelimit::{Decision, Headers, Policy};
    ///
    /// let policy = Policy::gcra(100, Duration::from_secs(1), 20)?;
    /// let ok = Decision::new(true, 21, 20, None, Duration::from_millis(10));
    /// for (name, value) in Headers::new(&policy, &ok).pairs() {
    ///     println!("{name}: {value}");
    /// }
    /// # Ok::<(), latchkey::Error>(())
    /// ```
    pub fn pairs(&self) -> impl Iterator<Item = (&'static str, &str)> {
        [
            ("RateLimit-Policy", Some(self.rate_limit_policy.as_str())),
            ("RateLimit", Some(self.rate_limit.as_str())),
            ("Retry-After", self.retry_after.as_deref()),
        ]
        .into_iter()
        .filter_map(|(name, value)| Some((name, value?)))
    }
}

/// Whole seconds, rounded up (a wait beyond u64 seconds says the most it can,
/// never a wrapped "retry at once").
fn seconds_up(time: std::time::Duration) -> u64 {
    u64::try_from(time.as_micros().div_ceil(1_000_000)).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A wait longer than u64 seconds says the most it can, never "retry at once".
    #[test]
    fn the_longest_wait_is_not_wrapped_to_zero() {
        assert_eq!(seconds_up(Duration::MAX), u64::MAX);
        assert_eq!(seconds_up(Duration::from_millis(1_001)), 2);
    }
}
