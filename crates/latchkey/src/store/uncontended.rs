//! The uncontended first try, when it needs no fencing token: the most common call of
//! all, made as cheap as the plain `SET NX PX` pattern.
//!
//! A plain lock's is a bare `SET key token NX PX ttl GET`, the pattern's own command:
//! no script, no counter, nothing another library on the same key would not write.
//! `GET` makes the busy answer carry the holder in the same round trip, and raises
//! `WRONGTYPE` for a key of another type before anything is written. A fair lock's is
//! `scripts/lock/take_alone.lua`, which also checks that nobody waits. The fence, if
//! the holder wants one, is computed later by `scripts/lock/fence.lua`, while the
//! lock is still its own.
//!
//! Some answers go to the fenced take scripts instead (`None`): a lock that already
//! holds our token (an earlier try whose reply was lost set it, so its lease started
//! before this try was sent: the scripts reset it), a fair lock with a queue, and a
//! server older than Redis 7.0, which refuses `NX` with `GET` (remembered, so it is
//! asked once).
//!
//! Several locks at once (a multi-lock's try) are taken the same way, all or none,
//! by `scripts/lock/take_all.lua`, when their keys share a hash slot.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::{AcquireRequest, AllOrNone, Attempt, RedisStore};
use crate::error::Result;
use crate::key::LockKey;
use crate::scripts::{self, ScriptCall};
use crate::token::OwnerToken;

/// Whether the server refused `SET … NX … GET`, shared by a store's clones.
#[derive(Clone, Debug, Default)]
pub(crate) struct BareTake {
    refused: Arc<AtomicBool>,
}

impl RedisStore {
    /// An unfenced first try that joins no queue, as one command (plain) or one
    /// small script (fair); `None` when the fenced take script must answer instead
    /// (see the module docs).
    pub(crate) async fn uncontended_take(
        &self,
        key: &LockKey,
        owner: &OwnerToken,
        request: AcquireRequest,
    ) -> Result<Option<Attempt>> {
        let (taken, replicas) = match request.fair {
            false => self.bare_take(key, owner, request).await?,
            true => self.take_alone(key, owner, request).await?,
        };
        match taken {
            Taken::Ours => {
                let won = Attempt::unfenced(0);
                let request = (owner, request);
                Ok(Some(
                    self.confirmed_grant(self, key, request, won, replicas)
                        .await?,
                ))
            }
            Taken::Busy(attempt) => Ok(Some(attempt)),
            Taken::AskTheScript => Ok(None),
        }
    }

    /// `SET key token NX PX ttl GET`.
    async fn bare_take(
        &self,
        key: &LockKey,
        owner: &OwnerToken,
        request: AcquireRequest,
    ) -> Result<(Taken, Option<u32>)> {
        if self.0.bare_take.refused.load(Ordering::Relaxed) {
            return Ok((Taken::AskTheScript, None));
        }
        // Sized up front: grown arg by arg, its two buffers were reallocated as they
        // filled, 5 % of an uncontended cycle's client instructions (callgrind).
        // Besides the key and the token: SET, NX, PX, GET and at most 20 digits.
        let data = key.as_str().len() + owner.as_str().len() + 32;
        let mut set = redis::Cmd::with_capacity(7, data);
        set.arg("SET")
            .arg(key.as_str())
            .arg(owner.as_str())
            .arg("NX")
            .arg("PX")
            .arg(request.ttl.as_millis())
            .arg("GET");
        let reply = self.query_confirmed::<Option<String>>(&set).await;
        if reply.as_ref().is_err_and(is_syntax_error) {
            self.0.bare_take.refused.store(true, Ordering::Relaxed);
            return Ok((Taken::AskTheScript, None));
        }
        let (holder, replicas) = self.context(reply, key.as_str())?;
        let taken = match holder {
            None => Taken::Ours,
            Some(holder) if holder == owner.as_str() => Taken::AskTheScript,
            Some(holder) => {
                let mut pttl = redis::cmd("PTTL");
                pttl.arg(key.as_str());
                let left: i64 = self.context(self.query(&pttl).await, key.as_str())?;
                Taken::Busy(Attempt::busy(lease_left(left), Some(holder)))
            }
        };
        Ok((taken, replicas))
    }

    /// `scripts/lock/take_alone.lua`.
    async fn take_alone(
        &self,
        key: &LockKey,
        owner: &OwnerToken,
        request: AcquireRequest,
    ) -> Result<(Taken, Option<u32>)> {
        let mut call = ScriptCall::new(&scripts::TAKE_ALONE, &[key.as_str(), key.queue()]);
        call.arg(owner.as_str()).arg(request.ttl.as_millis());
        let (reply, replicas): (redis::Value, _) = self.run_confirmed(&call, key).await?;
        let taken = match reply {
            redis::Value::Int(1) => Taken::Ours,
            redis::Value::Int(_) => Taken::AskTheScript,
            busy => {
                let parsed = redis::from_redis_value(busy).map_err(redis::RedisError::from);
                let (pttl, holder) = self.context(parsed, key.as_str())?;
                Taken::Busy(Attempt::busy(lease_left(pttl), Some(holder)))
            }
        };
        Ok((taken, replicas))
    }
}

impl RedisStore {
    /// `scripts/lock/take_all.lua`, for locks in one hash slot that it can take
    /// (see [`LockStore::try_acquire_all`](super::LockStore::try_acquire_all));
    /// `None` for the others.
    pub(crate) async fn take_all(
        &self,
        takes: &[(&LockKey, &OwnerToken, AcquireRequest)],
    ) -> Result<Option<AllOrNone>> {
        let Some(&(first, _, _)) = takes.first() else {
            return Ok(None);
        };
        let simple = takes
            .iter()
            .all(|(_, _, request)| !request.fenced && request.queue_lease.is_none());
        if !simple {
            return Ok(None);
        }
        let locks = takes.iter().map(|(key, ..)| key.as_str());
        let queues = takes.iter().map(|(key, ..)| key.queue());
        let keys: Vec<&str> = locks.chain(queues).collect();
        let mut call = ScriptCall::new(&scripts::TAKE_ALL, &keys);
        for (_, owner, _) in takes {
            call.arg(owner.as_str());
        }
        for (_, _, request) in takes {
            call.arg(request.ttl.as_millis());
        }
        for (_, _, request) in takes {
            call.arg(if request.fair { "f" } else { "p" });
        }
        let reply: redis::Value = self.run(&call, first).await?;
        Ok(match reply {
            redis::Value::Int(0) => Some(AllOrNone::Taken),
            redis::Value::Int(_) => None,
            busy => {
                let parsed = redis::from_redis_value(busy).map_err(redis::RedisError::from);
                let (index, pttl, holder): (usize, i64, String) =
                    self.context(parsed, first.as_str())?;
                Some(AllOrNone::Busy {
                    index: index.saturating_sub(1),
                    pttl: lease_left(pttl),
                    holder: Some(holder),
                })
            }
        })
    }
}

/// What an uncontended try found.
enum Taken {
    Ours,
    Busy(Attempt),
    AskTheScript,
}

/// A busy lock's remaining lease from its `PTTL`: `None` when it has no expiry, zero
/// when it has just gone.
fn lease_left(pttl: i64) -> Option<Duration> {
    match pttl {
        -1 => None,
        left => Some(Duration::from_millis(u64::try_from(left).unwrap_or(0))),
    }
}

/// A server before Redis 7.0 answers `NX` with `GET` with a syntax error.
fn is_syntax_error(error: &redis::RedisError) -> bool {
    error.code() == Some("ERR") && error.detail().is_some_and(|d| d.contains("syntax error"))
}
