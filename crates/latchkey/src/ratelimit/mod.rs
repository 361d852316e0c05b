//! Rate limits: how often something may happen, across every process.
//!
//! One [`RateLimiter`] per key, made by [`Client::rate_limiter`](crate::Client::rate_limiter)
//! with a [`Policy`]; every algorithm answers with the same [`Decision`]:
//!
//! | policy | for | counts |
//! |---|---|---|
//! | [`Policy::cooldown`] | one SMS code per phone per minute | one call per period |
//! | [`Policy::fixed_window`] | 5 downloads per IP per 10 minutes | calls per window, which starts at its first call |
//! | [`Policy::sliding_window`] | the same, exactly, over any 10 minutes | calls in the last `per`, logged |
//! | [`Policy::gcra`] | an API at 100 requests/s with bursts of 20 | a steady rate plus a burst (redis-cell's `CL.THROTTLE`) |
//!
//! ```no_run
//! use std::time::Duration;
//! use latchkey::ratelimit::Policy;
//!
//! # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
//! let sms = client.rate_limiter("sms:+15551234567", Policy::cooldown(Duration::from_secs(60))?)?;
//! let decision = sms.check(1).await?;
//! if !decision.allowed {
//!     println!("one code per minute; retry in {:?}", decision.retry_after);
//! }
//! # Ok(()) }
//! ```
//!
//! Every decision is one script on the server: atomic, on the server's clock (clients
//! with skewed clocks agree), one round trip. **Denied calls consume nothing**: a
//! client hammering a closed limit does not keep it closed, and a call that would
//! overshoot with its cost is refused whole. Every key a limiter writes expires once
//! the limit is back to full (GCRA's at most one burst later: it is kept for the
//! tolerance after the last call it counted, which spares a computed expiry on
//! every call), so per-phone or per-IP limiters leave nothing behind.
//!
//! A limiter named `N` keeps its state in companion keys of `N` (see
//! [`LockKey`](crate::LockKey)): `{N}:lk:cooldown`, `{N}:lk:rate` (fixed window),
//! `{N}:lk:log` and `{N}:lk:tally` (sliding window), `{N}:lk:gcra`. A lock and a
//! rate limiter of the same name never share a key, `list` never shows a limiter as
//! a lock, and each policy has its own key, so switching a name from one algorithm to
//! another starts it afresh.
//!
//! For HTTP APIs, [`Headers`] turns a decision into `RateLimit`, `RateLimit-Policy`
//! and `Retry-After` values.

mod decision;
mod headers;
mod limiter;
mod policy;
mod status;

pub use decision::Decision;
pub use headers::Headers;
pub use limiter::RateLimiter;
pub use policy::{Algorithm, Policy};
pub use status::RateLimitStatus;
