//! Leader election: among many candidates, one leader at a time, with a term that
//! grows from leader to leader, and followers told of every change.
//!
//! **The promise.** [`Election::campaign`] returns a [`Leadership`] once this
//! candidate holds the election's lock (a renewed lease, as a [`Mutex`]'s) and has
//! proclaimed itself: its value and its **term**, a fencing token greater than the
//! term of every earlier leader, across Redis restarts and failovers (it is the
//! lock's fencing token, taken with the grant). While the lease lasts nobody else
//! leads; a leader that crashes, freezes or loses the network stops renewing and
//! leads no longer than its lease, and its own [`Leadership::lost`] fires before the
//! lease could have ended in Redis, so a paused leader learns it lost no later than
//! the others may elect a successor. Pass the term to whatever the leader writes
//! (as a fencing token) and a deposed leader that wakes late is refused there.
//! [`Election::observe`] follows the leader without polling: proclaiming and
//! stepping down publish on the record's channel, and an observer re-reads only
//! then, when the leader's lease would end (a crash publishes nothing), and every
//! 10 s at most.
//!
//! What can break it, and what covers it: a crashed or paused leader (the lease, as
//! for a lock); a campaign or resignation cancelled at any await, or a
//! proclamation that fails (the hold steps down in the background however it ends:
//! lock released, record withdrawn, observers told; a record counts only while
//! the lock holds its writer's token); a record lost while the lock is kept (an
//! eviction, a failover: the leader's keeper writes it again within half a lease);
//! a failover that loses the lock (as for a lock; use `with_wait_replicas`). On a
//! quorum of independent masters there is no election yet: the record would need a
//! quorum of its own.
//!
//! ```no_run
//! # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
//! let election = client.election("nightly-report")?;
//! let leadership = election.campaign("host-a").await?;
//! println!("leading in term {}", leadership.term());
//! tokio::select! {
//!     _ = leadership.lost() => eprintln!("leadership lost: stop writing"),
//!     _ = tokio::time::sleep(std::time::Duration::from_secs(60)) => {}
//! }
//! leadership.resign().await?;
//! # Ok(()) }
//! ```

mod leadership;
mod observer;
mod record;

use std::time::Duration;

use crate::error::{Error, Result};
use crate::key::{Kind, LockKey};
use crate::lease::{Lease, Ttl};
use crate::lock::{Fencing, LocalLocks, Mutex, MutexGuard};
use crate::store::{LockStatus, RedisStore};
use crate::token::OwnerToken;

pub use leadership::Leadership;
use leadership::Proclaimed;
pub use observer::Observer;
use record::Record;

/// How long past a campaign's deadline a lock won just in time may take to be
/// proclaimed.
const PROCLAIM_GRACE: Duration = Duration::from_millis(100);

/// Longest value a candidate may campaign with, in bytes.
///
/// ```
/// let too_long = "x".repeat(latchkey::election::MAX_VALUE_LEN + 1);
/// assert!(latchkey::election::Election::check_value(&too_long).is_err());
/// ```
pub const MAX_VALUE_LEN: usize = 64 * 1024;

/// The companion of an election's lock that holds its leader record.
pub(crate) const LEADER_RECORD: &str = "leader";

/// Who leads: the value it campaigned with, and its term.
///
/// ```
/// let leader = latchkey::election::Leader { value: "host-a".to_owned(), term: 7 };
/// assert_eq!(leader.to_string(), "host-a (term 7)");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Leader {
    /// What the leader campaigned with (a host name, an address).
    pub value: String,
    /// Greater than every earlier leader's term.
    pub term: u64,
}

impl std::fmt::Display for Leader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (term {})", self.value, self.term)
    }
}

/// An election as it stands, read without writing: who leads, and how long its
/// lock's lease has left. What [`Client::inspect`](crate::Client::inspect) finds
/// of an election ([`Primitive::Election`](crate::inspect::Primitive::Election)).
///
/// ```
/// let status = latchkey::election::ElectionStatus::default();
/// assert!(status.leader.is_none() && !status.held);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ElectionStatus {
    /// The leader, once the lock's holder proclaimed itself.
    pub leader: Option<Leader>,
    /// Whether anyone holds the election's lock: a leader, a candidate that just
    /// won and has not proclaimed yet, or another library's holder.
    pub held: bool,
    /// What is left of the lock's lease: when a leader that stopped renewing is
    /// gone. `None` when the lock is free, or held without expiry.
    pub lease_left: Option<Duration>,
    /// Candidates waiting in line for the lock.
    pub waiters: u64,
}

/// `look/election.lua`'s reply: state, pttl, term, value, candidates waiting.
pub(crate) type ElectionReply = (u8, i64, String, String, u64);

impl ElectionStatus {
    /// From `look/election.lua`'s reply for the election `name`.
    pub(crate) fn from_reply(
        (state, pttl, term, value, waiters): ElectionReply,
        name: &str,
    ) -> Result<Self> {
        let lease_left = u64::try_from(pttl).ok().map(Duration::from_millis);
        let leader = match state {
            1 => Some(Leader {
                term: term.parse().map_err(|_| {
                    Error::InvalidArgument(format!(
                        "the leader record of {name:?} holds the term {term:?}, not a number"
                    ))
                })?,
                value,
            }),
            _ => None,
        };
        Ok(ElectionStatus {
            leader,
            held: state != 0,
            lease_left,
            waiters,
        })
    }
}

/// An election by name, made by [`Client::election`](crate::Client::election).
/// Nothing is sent to Redis until a campaign or a read.
///
/// Its keys hang off the name, apart from a lock of the same name:
/// `{name}:lk:elect` (the lock, with its fence, queue and channel beside it) and
/// `{name}:lk:elect:lk:leader` (the leader record).
///
/// ```no_run
/// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
/// let election = client.election("scheduler")?;
/// match election.leader().await? {
///     Some(leader) => println!("{leader} leads"),
///     None => println!("nobody leads"),
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Election {
    mutex: Mutex<RedisStore>,
    record: Record,
}

impl Election {
    /// Candidates of one client share its local line, as its mutexes do: a
    /// leadership passes between its tasks without a round trip to Redis.
    pub(crate) fn new(store: RedisStore, key: LockKey, local: LocalLocks) -> Self {
        let mutex =
            Mutex::with_local(store.clone(), key.clone(), local).with_fencing(Fencing::OnGrant);
        Election {
            mutex,
            record: Record::new(store, key),
        }
    }

    /// Leads under `lease` (renewed 30 s by default, as a [`Mutex`]): how long a
    /// crashed leader keeps the others waiting, and how soon a paused one learns it
    /// lost. A hold limit ends the leadership at the limit.
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// use std::time::Duration;
    /// let election = client
    ///     .election("scheduler")?
    ///     .with_lease(latchkey::Lease::renewed(Duration::from_secs(5))?);
    /// # Ok(()) }
    /// ```
    pub fn with_lease(mut self, lease: Lease) -> Self {
        self.mutex = self.mutex.with_lease(lease);
        self
    }

    /// How long a candidate waiting in line keeps its place after it stops renewing
    /// it (see [`Mutex::with_waiter_lease`]).
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// let waiter_lease = latchkey::Ttl::new(std::time::Duration::from_secs(5))?;
    /// let election = client.election("scheduler")?.with_waiter_lease(waiter_lease);
    /// # Ok(()) }
    /// ```
    pub fn with_waiter_lease(mut self, lease: Ttl) -> Self {
        self.mutex = self.mutex.with_waiter_lease(lease);
        self
    }

    /// Checks a value a candidate would campaign with, as every campaign does before
    /// it sends anything: not empty, at most [`MAX_VALUE_LEN`] bytes, no control
    /// characters.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a value refused.
    ///
    /// ```
    /// use latchkey::election::Election;
    /// assert!(Election::check_value("10.0.0.7:8080").is_ok());
    /// assert!(Election::check_value("host-a\nhost-b term 1").is_err());
    /// assert!(Election::check_value("").is_err());
    /// ```
    pub fn check_value(value: &str) -> Result<()> {
        check_value(value)
    }

    /// The election's name, prefix included.
    ///
    /// ```no_run
    /// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
    /// assert_eq!(client.election("scheduler")?.name(), "scheduler");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        self.mutex.key().name()
    }

    /// Waits until this candidate leads, then proclaims `value` with a new term.
    /// Candidates wait in the lock's queue, woken when a leader resigns.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a value [`check_value`](Self::check_value)
    /// refuses (before anything is sent); [`Error::LeaseLost`] if the lock was lost before the
    /// proclamation; the errors of [`Mutex::lock`].
    ///
    /// # Cancel safety
    ///
    /// As [`Mutex::lock`]: dropping the future leaves nothing held, and a record
    /// written for a hold that ended counts for nothing.
    ///
    /// ```no_run
    /// # async fn demo(election: latchkey::election::Election) -> latchkey::Result<()> {
    /// let leadership = election.campaign("host-a").await?;
    /// assert_eq!(leadership.value(), "host-a");
    /// # Ok(()) }
    /// ```
    pub async fn campaign(&self, value: &str) -> Result<Leadership> {
        check_value(value)?;
        self.proclaim(value, self.mutex.lock().await?).await
    }

    /// [`campaign`](Self::campaign), waiting at most `wait`.
    ///
    /// # Errors
    ///
    /// As [`campaign`](Self::campaign), and [`Error::Busy`] when another candidate
    /// still leads after `wait`; [`Error::Unreachable`] when the lock was won but
    /// Redis did not confirm the proclamation within 100 ms past `wait` (the lock
    /// is let go then). So it returns at most 100 ms later than
    /// [`Mutex::lock_timeout`] would, whatever Redis does.
    ///
    /// ```no_run
    /// # async fn demo(election: latchkey::election::Election) -> latchkey::Result<()> {
    /// let leadership = election.campaign_timeout("host-a", std::time::Duration::from_secs(5)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn campaign_timeout(&self, value: &str, wait: Duration) -> Result<Leadership> {
        check_value(value)?;
        let deadline = tokio::time::Instant::now().checked_add(wait);
        let guard = self.mutex.lock_timeout(wait).await.map_err(busy_election)?;
        let proclaiming = self.proclaim(value, guard);
        let Some(deadline) = deadline else {
            return proclaiming.await;
        };
        // A lock won at (or after) the deadline still gets the grace to proclaim.
        // Dropped, the proclamation steps down in the background.
        let cut_off = deadline.max(tokio::time::Instant::now());
        // A wait so long that the grace overflows the clock waits without cut-off.
        let Some(cut_off) = cut_off.checked_add(PROCLAIM_GRACE) else {
            return proclaiming.await;
        };
        tokio::time::timeout_at(cut_off, proclaiming)
            .await
            .unwrap_or_else(|_| {
                let node = self.record.store().node();
                Err(Error::no_reply_within(node, PROCLAIM_GRACE))
            })
    }

    /// Leads now if nobody does, without waiting.
    ///
    /// # Errors
    ///
    /// As [`campaign`](Self::campaign), and [`Error::Busy`] when another candidate
    /// leads.
    ///
    /// ```no_run
    /// # async fn demo(election: latchkey::election::Election) -> latchkey::Result<()> {
    /// match election.try_campaign("host-a").await {
    ///     Ok(leadership) => println!("leading, term {}", leadership.term()),
    ///     Err(latchkey::Error::Busy { .. }) => println!("someone else leads"),
    ///     Err(other) => return Err(other),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_campaign(&self, value: &str) -> Result<Leadership> {
        check_value(value)?;
        let guard = self.mutex.try_lock().await.map_err(busy_election)?;
        self.proclaim(value, guard).await
    }

    /// Who leads now: `None` when nobody holds the election, or its holder has not
    /// proclaimed itself yet (it won a moment ago).
    ///
    /// # Errors
    ///
    /// The errors a reply can carry ([`Error::Unreachable`] …).
    ///
    /// ```no_run
    /// # async fn demo(election: latchkey::election::Election) -> latchkey::Result<()> {
    /// if let Some(leader) = election.leader().await? {
    ///     println!("{} leads in term {}", leader.value, leader.term);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn leader(&self) -> Result<Option<Leader>> {
        Ok(self.status().await?.leader)
    }

    /// The election as it stands, in one read: who leads, whether anyone holds
    /// its lock, how long that lock's lease has left.
    ///
    /// # Errors
    ///
    /// As [`leader`](Self::leader).
    ///
    /// ```no_run
    /// # async fn demo(election: latchkey::election::Election) -> latchkey::Result<()> {
    /// let status = election.status().await?;
    /// if status.held && status.leader.is_none() {
    ///     println!("a candidate just won and has not proclaimed itself yet");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn status(&self) -> Result<ElectionStatus> {
        self.record.read().await
    }

    /// Follows the leader: each [`Observer::changed`] returns the leader once it
    /// differs from the last one returned (the first call returns the current one).
    ///
    /// # Errors
    ///
    /// [`Error::Entropy`] if the OS has no randomness for the observer's token.
    ///
    /// ```no_run
    /// # async fn demo(election: latchkey::election::Election) -> latchkey::Result<()> {
    /// let mut observer = election.observe()?;
    /// loop {
    ///     match observer.changed().await? {
    ///         Some(leader) => println!("{leader} leads"),
    ///         None => println!("nobody leads"),
    ///     }
    /// }
    /// # }
    /// ```
    pub fn observe(&self) -> Result<Observer> {
        Ok(Observer::new(self.record.clone(), OwnerToken::generate()?))
    }

    /// Deposes the leader, as an operator would: breaks the election's lock (the
    /// next candidate in line leads), withdraws the leader's record and tells
    /// observers. Returns the lock's status as it was, or `None` if nobody held it.
    /// The deposed leader learns it at its next renewal (its `lost` fires); its term
    /// is what keeps its late writes out.
    ///
    /// # Errors
    ///
    /// As [`Mutex::force_release`].
    ///
    /// ```no_run
    /// # async fn demo(election: latchkey::election::Election) -> latchkey::Result<()> {
    /// if let Some(was) = election.force_release().await? {
    ///     println!("deposed a leader with {:?} of its lease left", was.ttl);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn force_release(&self) -> Result<Option<LockStatus>> {
        let was = self.mutex.force_release().await?;
        if let Some(holder) = was.as_ref().and_then(|status| status.holder.clone()) {
            // The lock is broken already: an error here must not make a caller
            // that retries break the successor's too.
            let withdrawn = self.record.withdraw(&OwnerToken::from_stored(holder)).await;
            if let Err(error) = withdrawn {
                tracing::warn!(election = %self.name(), %error, "deposed the leader, but could not withdraw its record; observers see it gone on their timers");
            }
        }
        Ok(was)
    }

    /// Proclaims `value` under `guard`, a fresh hold of the election's lock; if
    /// that fails, or the future is dropped, the hold steps down (the lock let go,
    /// a record that landed withdrawn and observers told).
    async fn proclaim(&self, value: &str, guard: MutexGuard<RedisStore>) -> Result<Leadership> {
        let term = guard.fence().await?;
        let leader = Leader {
            value: value.to_owned(),
            term,
        };
        let lease = self.mutex.lease();
        let owner = guard.owner().clone();
        let mut hold = Proclaimed::new(guard, self.record.clone());
        let proclaimed = self
            .record
            .proclaim(&owner, &leader, record_lifetime(lease))
            .await;
        let lost = hold
            .guard()
            .and_then(|guard| guard.is_lost().then(|| guard.lost_error()));
        match (proclaimed, lost) {
            (Ok(true), None) => Ok(Leadership::new(hold, leader, lease)),
            (Ok(_), lost) => {
                let _ = hold.step_down().await;
                Err(lost.unwrap_or_else(|| Error::lease_lost(self.mutex.key())))
            }
            (Err(error), _) => {
                let _ = hold.step_down().await;
                Err(error)
            }
        }
    }
}

/// How long a leader record lives unless its keeper renews it (every half lease):
/// two leases and the lock delay, so it outlives every lease of its leader's lock.
fn record_lifetime(lease: Lease) -> Duration {
    lease.ttl().as_duration() * 2 + lease.lock_delay()
}

fn check_value(value: &str) -> Result<()> {
    if value.is_empty() {
        return Err(Error::InvalidArgument(
            "a candidate's value may not be empty: it is what tells who leads".to_owned(),
        ));
    }
    if value.len() > MAX_VALUE_LEN {
        return Err(Error::InvalidArgument(format!(
            "a candidate's value is {} bytes long; the limit is {MAX_VALUE_LEN}",
            value.len()
        )));
    }
    // A value is shown one per line (`latchkey leader --watch`): a line break in
    // it could forge another leader's line.
    if value.chars().any(char::is_control) {
        return Err(Error::InvalidArgument(format!(
            "a candidate's value may not contain control characters: {value:?}"
        )));
    }
    Ok(())
}

/// The election's lock busy is the election busy, for whoever reads the error.
fn busy_election(mut error: Error) -> Error {
    if let Error::Busy { kind, .. } = &mut error {
        *kind = Kind::Election;
    }
    error
}
