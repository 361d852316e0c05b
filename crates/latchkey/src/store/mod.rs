//! The store: the few atomic operations a lock needs, behind small traits.
//!
//! Like `lock_api`, the seam is one small core trait plus capabilities:
//!
//! - [`LockStore`]: take, release, extend, read the holder: what every lock needs;
//! - [`Pass`]: hand a held lock to another task of this process (default: never);
//! - [`WakeUps`]: wake a waiter when a release picks it (default: waiters re-check
//!   on timers);
//! - [`Inspect`]: status and listing, for `Mutex::status`, `Client::list` and the CLI;
//! - [`RateStore`]: the seam of its own under rate limits.
//!
//! The guard, waiting and cancellation logic of [`Mutex`](crate::Mutex) is written
//! once on top of them and does not know which store it talks to.
//!
//! [`RedisStore`] is the store on Redis: one server (or the primary of a
//! primary/replica set), or a Redis Cluster ([`RedisStore::open_cluster`]). Its
//! connections time out after 2 s to connect and 1 s for a reply, and the one it
//! makes itself is replaced after a reply timed out; a separate subscriber
//! connection wakes waiters (see
//! [Under faults](crate#under-faults)). Most code never touches a store: it uses
//! [`Client`](crate::Client), which makes one.

mod attempt;
mod cluster;
mod connection;
mod dedicated;
mod lock_store;
mod rate;
mod redis_store;
mod sentinel;
mod status;
mod subscriber;
mod target;
mod uncontended;
mod watch;

use std::time::Duration;

pub use attempt::{AcquireRequest, AllOrNone, Attempt};
pub use connection::Connection;
pub(crate) use dedicated::DedicatedConn;
pub use lock_store::{Inspect, LockStore, Pass, WakeUps};
pub use redis_store::RedisStore;
pub(crate) use redis_store::{KeyWalk, any_tls, invalid_url};

/// The store's name before it learned to talk to a cluster.
#[deprecated(note = "renamed `RedisStore`: one type for a single node, a cluster and Sentinel")]
pub type SingleNode = RedisStore;
pub use rate::RateStore;
pub(crate) use status::LockReply;
pub use status::LockStatus;
pub(crate) use watch::RECHECK_UNSUBSCRIBED;
pub use watch::{Handed, Notifier, Watch};

/// A fencing token from a script that answers 0 when it hands out none (the lock,
/// or the permit, is no longer the caller's): `fence.lua`, `pass.lua`.
pub(crate) fn fence_from(reply: u64) -> Option<u64> {
    (reply > 0).then_some(reply)
}

/// What a `release_alone.lua` (a lock's or a semaphore's) answered: 1 released, 0
/// not the caller's, -1 others are queued and nothing was done (`None`: run the
/// full release).
pub(crate) fn released_alone(reply: i64) -> Option<bool> {
    (reply >= 0).then_some(reply == 1)
}

/// How long to wait for a TCP (and TLS) connection before calling Redis unreachable.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// How long to wait for any reply before calling Redis unreachable (the connection is
/// then replaced). Well under a waiter lease: a live waiter renews its place every
/// third of its lease, so one slow reply must not outlast the rest of it.
pub(crate) const RESPONSE_TIMEOUT: Duration = Duration::from_secs(1);
