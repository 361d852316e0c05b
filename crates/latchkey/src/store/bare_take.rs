//! The uncontended take as a bare command: `SET key token NX PX ttl GET`.
//!
//! A plain first try that needs no fencing token (see
//! [`AcquireRequest::fenced`](super::AcquireRequest::fenced)) is the most common
//! call of all, and the plain `SET NX PX` pattern's own command does it: no script,
//! no counter, nothing another library on the same key would not write. `GET` makes
//! the busy answer carry the holder in the same round trip, and raises `WRONGTYPE`
//! for a key of another type before anything is written. The fence, if the holder
//! wants one, is computed later by `scripts/lock/fence.lua`, while the lock is still
//! its own.
//!
//! Two answers go to the fenced take script instead: a lock that already holds our
//! token (an earlier try whose reply was lost set it, when the lease started before
//! this try was sent: the script resets it), and a server older than Redis 7.0,
//! which refuses `NX` with `GET` (remembered, so it is asked once).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::{AcquireRequest, Attempt, RedisStore};
use crate::error::Result;
use crate::key::LockKey;
use crate::token::OwnerToken;

/// Whether the server refused `SET … NX … GET`, shared by a store's clones.
#[derive(Clone, Debug, Default)]
pub(crate) struct BareTake {
    refused: Arc<AtomicBool>,
}

impl RedisStore {
    /// A plain, unfenced first try as one `SET NX PX GET`; `None` when the fenced
    /// take script must answer instead (see the module docs).
    pub(crate) async fn bare_take(
        &self,
        key: &LockKey,
        owner: &OwnerToken,
        request: AcquireRequest,
    ) -> Result<Option<Attempt>> {
        if self.bare_take.refused.load(Ordering::Relaxed) {
            return Ok(None);
        }
        let mut set = redis::cmd("SET");
        set.arg(key.as_str())
            .arg(owner.as_str())
            .arg("NX")
            .arg("PX")
            .arg(request.ttl.as_millis())
            .arg("GET");
        let reply = self.query_confirmed::<Option<String>>(&set).await;
        if reply.as_ref().is_err_and(is_syntax_error) {
            self.bare_take.refused.store(true, Ordering::Relaxed);
            return Ok(None);
        }
        let (holder, replicas) = self.context(reply, key.as_str())?;
        match holder {
            None => {
                let won = Attempt::unfenced(0);
                let request = (owner, request);
                Ok(Some(
                    self.confirmed_grant(self, key, request, won, replicas)
                        .await?,
                ))
            }
            Some(holder) if holder == owner.as_str() => Ok(None),
            Some(holder) => Ok(Some(Attempt::busy(self.pttl(key).await?, Some(holder)))),
        }
    }

    /// The lease left on a lock seen busy: `None` when it has no expiry, zero when
    /// it has just gone.
    async fn pttl(&self, key: &LockKey) -> Result<Option<Duration>> {
        let mut pttl = redis::cmd("PTTL");
        pttl.arg(key.as_str());
        let left: i64 = self.context(self.query(&pttl).await, key.as_str())?;
        Ok(match left {
            -1 => None,
            left => Some(Duration::from_millis(u64::try_from(left).unwrap_or(0))),
        })
    }
}

/// A server before Redis 7.0 answers `NX` with `GET` with a syntax error.
fn is_syntax_error(error: &redis::RedisError) -> bool {
    error.code() == Some("ERR") && error.detail().is_some_and(|d| d.contains("syntax error"))
}
