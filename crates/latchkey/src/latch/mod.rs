//! Count-down latches and barriers: processes wait until N events have happened,
//! or until N parties have arrived, woken by pub/sub.
//!
//! **The promise.** A [`Latch`] of count N opens exactly once: when the N-th
//! [`count_down`](Latch::count_down) lands, and never before; once open it stays
//! open until its key expires ([`Latch::with_lifetime`], one hour after the last
//! count down by default, at least a minute). Counting down an open latch leaves
//! it open (and keeps it another lifetime). Waiters
//! ([`wait`](Latch::wait)) return once it is open: the count down that opens it
//! publishes on its channel, and a waiter that missed it (its subscriber
//! connection was down) re-reads every second while unsubscribed and every 10 s
//! at most otherwise. Every process must give the same count; a latch in use with
//! another count is a clear error. A [`Barrier`] of N parties is a latch of count N
//! whose [`arrive_and_wait`](Barrier::arrive_and_wait) counts down and waits: it
//! is used once (name each round, `stage:{round}`), and each party arrives once
//! (to wait again after a timeout, wait on [`Barrier::latch`]: arriving again would
//! count the party twice).
//!
//! What can break it: a count down is not idempotent (one whose reply was lost may
//! have counted: do not retry it blindly); a restart or failover that loses the
//! latch key loses its count, as for a lock (count downs do not wait for replicas),
//! and a count down after an open latch expired starts it again from N. Waits ride
//! out transient errors (a restart, a failover) until their deadline. Counts are
//! kept in one key per latch, `{name}:lk:latch` (or `name:lk:latch` for a name
//! with a `{tag}`).
//!
//! ```no_run
//! # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
//! let loaded = client.latch("nightly:shards-loaded", 3)?;
//! // on each of three loader hosts:
//! loaded.count_down().await?;
//! // on the host that merges:
//! loaded.wait().await?;
//! # Ok(()) }
//! ```

use std::time::Duration;

use tokio::time::Instant;

use crate::error::{Error, Result};
use crate::key::LockKey;
use crate::scripts::{self, ScriptCall};
use crate::store::{RECHECK_UNSUBSCRIBED, RedisStore, WakeUps};
use crate::token::OwnerToken;

/// How long a latch's key lives after its last count down, by default.
pub const DEFAULT_LIFETIME: Duration = Duration::from_secs(3600);
/// The shortest lifetime: well above a waiter's longest re-read (10 s), so a waiter
/// that missed the opening still finds the latch open.
pub const MIN_LIFETIME: Duration = Duration::from_secs(60);
/// The longest lifetime.
pub const MAX_LIFETIME: Duration = Duration::from_secs(365 * 24 * 3600);
/// The largest count a latch may have (Lua counts in doubles).
pub const MAX_COUNT: u64 = 1 << 40;

/// A count-down latch, from [`Client::latch`](crate::Client::latch). Nothing is
/// sent to Redis until it is counted down or read.
///
/// ```no_run
/// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
/// let ready = client.latch("deploy:42:hosts-ready", 5)?;
/// ready.count_down().await?;
/// if ready.wait_timeout(std::time::Duration::from_secs(60)).await? {
///     println!("all five hosts are ready");
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Latch {
    store: RedisStore,
    key: LockKey,
    count: u64,
    lifetime: Duration,
}

/// What a count down did.
///
/// ```
/// let counted = latchkey::latch::CountedDown { left: 0, opened: true };
/// assert!(counted.opened);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CountedDown {
    /// The count left after it (0: open).
    pub left: u64,
    /// Whether this count down opened the latch: true for one call per opening
    /// (a latch that expired, or lost its key, opens again).
    pub opened: bool,
}

/// A latch as it stands, read without writing: what
/// [`Client::inspect`](crate::Client::inspect) finds of a latch
/// ([`Primitive::Latch`](crate::inspect::Primitive::Latch)) once it was counted
/// down.
///
/// ```
/// let status = latchkey::latch::LatchStatus { left: 0, count: 3 };
/// assert!(status.is_open());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LatchStatus {
    /// The count left (0: open).
    pub left: u64,
    /// The count it was made with.
    pub count: u64,
}

impl LatchStatus {
    /// Whether the latch is open (its last count down landed).
    ///
    /// ```
    /// assert!(!latchkey::latch::LatchStatus { left: 1, count: 3 }.is_open());
    /// ```
    pub fn is_open(&self) -> bool {
        self.left == 0
    }

    /// From `look/latch.lua`'s reply `{left, count}`; `None` for no latch.
    pub(crate) fn from_reply((left, count): (i64, i64)) -> Option<Self> {
        Some(LatchStatus {
            left: u64::try_from(left).ok()?,
            count: u64::try_from(count).ok()?,
        })
    }
}

impl Latch {
    pub(crate) fn new(store: RedisStore, key: LockKey, count: u64) -> Result<Self> {
        if count == 0 || count > MAX_COUNT {
            return Err(Error::InvalidArgument(format!(
                "a latch's count must be between 1 and {MAX_COUNT}, not {count}"
            )));
        }
        Ok(Latch {
            store,
            key,
            count,
            lifetime: DEFAULT_LIFETIME,
        })
    }

    /// Keeps the latch's key for `lifetime` after each count down (one hour by
    /// default): an open latch stays open that long for late waiters, and a latch
    /// not counted down that long starts again from its count.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a lifetime under [`MIN_LIFETIME`] or over
    /// [`MAX_LIFETIME`].
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// let latch = client.latch("batch:7", 10)?.with_lifetime(std::time::Duration::from_secs(600))?;
    /// # Ok(()) }
    /// ```
    pub fn with_lifetime(mut self, lifetime: Duration) -> Result<Self> {
        if !(MIN_LIFETIME..=MAX_LIFETIME).contains(&lifetime) {
            return Err(Error::InvalidArgument(format!(
                "a latch's lifetime must be between {MIN_LIFETIME:?} and {MAX_LIFETIME:?}, not {lifetime:?}"
            )));
        }
        self.lifetime = lifetime;
        Ok(self)
    }

    /// The count it was made with.
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// assert_eq!(client.latch("batch:7", 10)?.count(), 10);
    /// # Ok(()) }
    /// ```
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Counts down by one: the count down that reaches zero opens the latch and
    /// wakes its waiters. An open latch stays open.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a latch in use with another count; the
    /// errors a reply can carry. A count down whose reply was lost may or may not
    /// have counted: do not retry it blindly.
    ///
    /// ```no_run
    /// # async fn demo(latch: latchkey::latch::Latch) -> latchkey::Result<()> {
    /// let counted = latch.count_down().await?;
    /// println!("{} to go", counted.left);
    /// # Ok(()) }
    /// ```
    pub async fn count_down(&self) -> Result<CountedDown> {
        let mut call = ScriptCall::new(
            &scripts::LATCH_COUNT_DOWN,
            &[self.key.as_str(), self.key.channel()],
        );
        call.arg(self.count)
            .arg(u64::try_from(self.lifetime.as_millis()).unwrap_or(u64::MAX))
            .arg(self.store.publish_mode());
        let counted = self.store.run(&call, &self.key).await;
        let (left, opened): (u64, u8) = counted.map_err(|error| self.other_count(error))?;
        Ok(CountedDown {
            left,
            opened: opened == 1,
        })
    }

    /// The count left now: the latch's count if nobody counted down yet (or its
    /// key expired), 0 once open.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a latch in use with another count; the
    /// errors a reply can carry.
    ///
    /// ```no_run
    /// # async fn demo(latch: latchkey::latch::Latch) -> latchkey::Result<()> {
    /// println!("{} to go", latch.left().await?);
    /// # Ok(()) }
    /// ```
    pub async fn left(&self) -> Result<u64> {
        let call = ScriptCall::new(&scripts::LATCH_LOOK, &[self.key.as_str()]);
        let reply = self.store.run(&call, &self.key).await?;
        let Some(status) = LatchStatus::from_reply(reply) else {
            return Ok(self.count);
        };
        if status.count != self.count {
            return Err(self.count_error(status.count));
        }
        Ok(status.left)
    }

    /// Waits until the latch is open.
    ///
    /// # Errors
    ///
    /// As [`left`](Self::left).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: waiting changes nothing in Redis.
    ///
    /// ```no_run
    /// # async fn demo(latch: latchkey::latch::Latch) -> latchkey::Result<()> {
    /// latch.wait().await?;
    /// # Ok(()) }
    /// ```
    pub async fn wait(&self) -> Result<()> {
        self.wait_until(None).await.map(|_| ())
    }

    /// Waits at most `wait` for the latch to open: `true` if it did.
    ///
    /// # Errors
    ///
    /// As [`left`](Self::left).
    ///
    /// ```no_run
    /// # async fn demo(latch: latchkey::latch::Latch) -> latchkey::Result<()> {
    /// if !latch.wait_timeout(std::time::Duration::from_secs(30)).await? {
    ///     eprintln!("still closed after 30 s");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn wait_timeout(&self, wait: Duration) -> Result<bool> {
        self.wait_until(Instant::now().checked_add(wait)).await
    }

    /// Waits until open or `deadline`: listening before each read, so an opening
    /// after the read wakes the wait. A transient error (a restart, a failover)
    /// is waited out until the deadline.
    async fn wait_until(&self, deadline: Option<Instant>) -> Result<bool> {
        let me = OwnerToken::generate()?;
        loop {
            let waited = self.wait_once(&me, deadline).await;
            let passed = deadline.is_some_and(|deadline| Instant::now() >= deadline);
            match waited {
                Ok(Some(open)) => return Ok(open),
                Ok(None) => {}
                Err(error) if error.is_transient() && !passed => {
                    let pause = Instant::now() + RECHECK_UNSUBSCRIBED;
                    tokio::time::sleep_until(deadline.map_or(pause, |d| d.min(pause))).await;
                }
                Err(error) => return Err(error),
            }
        }
    }

    /// One listen-read-wait round: `Some(open)` once the answer is known (open, or
    /// the deadline passed), `None` to go round again.
    async fn wait_once(&self, me: &OwnerToken, deadline: Option<Instant>) -> Result<Option<bool>> {
        // Past the deadline (or about to be), only a read: no subscription.
        let listening = match deadline {
            Some(deadline) => tokio::time::timeout_at(deadline, self.store.watch(&self.key, me))
                .await
                .ok(),
            None => Some(self.store.watch(&self.key, me).await),
        };
        let open = self.left().await? == 0;
        let Some(watch) = listening.transpose()? else {
            return Ok(Some(open));
        };
        if open {
            return Ok(Some(true));
        }
        let wake_at = Instant::now() + watch.recheck_within();
        let wake_at = deadline.map_or(wake_at, |deadline| deadline.min(wake_at));
        tokio::select! {
            _ = watch.notified() => {}
            _ = tokio::time::sleep_until(wake_at) => {}
        }
        match deadline.is_some_and(|deadline| Instant::now() >= deadline) {
            true => Ok(Some(self.left().await? == 0)),
            false => Ok(None),
        }
    }

    /// A refusal for another count (`LKCOUNT n`) as a clear error; others as
    /// they are.
    fn other_count(&self, error: Error) -> Error {
        let text = error.to_string();
        let count = text
            .split_once("LKCOUNT ")
            .and_then(|(_, rest)| rest.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|n| n.parse().ok());
        match count {
            Some(count) => self.count_error(count),
            None => error,
        }
    }

    fn count_error(&self, in_use: u64) -> Error {
        Error::InvalidArgument(format!(
            "the latch {:?} is in use with count {in_use}, not {}: give every caller the same count",
            self.key.name(),
            self.count
        ))
    }
}

/// A barrier of N parties, from [`Client::barrier`](crate::Client::barrier): a
/// latch of count N that each party counts down on arrival, then waits on. Used
/// once: name each round apart (`stage:{round}`).
///
/// ```no_run
/// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
/// let stage = client.barrier("migration:stage-1", 4)?;
/// stage.arrive_and_wait().await?; // returns once all four have arrived
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Barrier {
    latch: Latch,
}

impl Barrier {
    pub(crate) fn new(latch: Latch) -> Self {
        Barrier { latch }
    }

    /// Keeps the barrier's latch for `lifetime` (see [`Latch::with_lifetime`]).
    ///
    /// # Errors
    ///
    /// As [`Latch::with_lifetime`].
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// let stage = client.barrier("migration:stage-1", 4)?.with_lifetime(std::time::Duration::from_secs(600))?;
    /// # Ok(()) }
    /// ```
    pub fn with_lifetime(mut self, lifetime: Duration) -> Result<Self> {
        self.latch = self.latch.with_lifetime(lifetime)?;
        Ok(self)
    }

    /// The latch under it (its count, what is left; to wait again after a
    /// timeout without arriving twice: `barrier.latch().wait()`).
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// let stage = client.barrier("migration:stage-1", 4)?;
    /// println!("{} yet to arrive", stage.latch().left().await?);
    /// # Ok(()) }
    /// ```
    pub fn latch(&self) -> &Latch {
        &self.latch
    }

    /// Arrives, then waits until every party has.
    ///
    /// # Errors
    ///
    /// As [`Latch::count_down`] and [`Latch::wait`].
    ///
    /// ```no_run
    /// # async fn demo(stage: latchkey::latch::Barrier) -> latchkey::Result<()> {
    /// stage.arrive_and_wait().await?;
    /// # Ok(()) }
    /// ```
    pub async fn arrive_and_wait(&self) -> Result<()> {
        self.latch.count_down().await?;
        self.latch.wait().await
    }

    /// Arrives, then waits at most `wait` for every party: `true` if all arrived.
    /// Once `false`, wait again on [`latch`](Self::latch), not by arriving again.
    ///
    /// # Errors
    ///
    /// As [`Latch::count_down`] and [`Latch::wait`].
    ///
    /// ```no_run
    /// # async fn demo(stage: latchkey::latch::Barrier) -> latchkey::Result<()> {
    /// if !stage.arrive_and_wait_timeout(std::time::Duration::from_secs(60)).await? {
    ///     eprintln!("not everyone arrived within a minute");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn arrive_and_wait_timeout(&self, wait: Duration) -> Result<bool> {
        let deadline = Instant::now().checked_add(wait);
        self.latch.count_down().await?;
        self.latch.wait_until(deadline).await
    }
}
