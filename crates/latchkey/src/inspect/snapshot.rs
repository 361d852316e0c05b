//! One name's primitives, read in one script call; and a rate limit's reset.

use std::time::Duration;

use super::Primitive;
use crate::election::{ElectionReply, ElectionStatus, LEADER_RECORD};
use crate::error::{Error, Result};
use crate::key::{Kind, LockKey};
use crate::latch::LatchStatus;
use crate::ratelimit::RateLimitStatus;
use crate::scripts::{self, ScriptCall};
use crate::semaphore::{PERMITS, PermitsReply, SemaphoreStatus};
use crate::store::{LockReply, LockStatus, RedisStore};

/// The rate limiters' companions, one per algorithm, as `status.lua` takes them:
/// fixed window, cooldown, sliding window (log, tally), GCRA.
const RATE_COMPANIONS: [&str; 5] = ["rate", "cooldown", "log", "tally", "gcra"];

/// The algorithm whose state each of [`RATE_COMPANIONS`] holds, as `status.lua`
/// names it (it is told these, and each key's type from `key.rs`).
const RATE_ALGORITHMS: [&str; 5] = ["fixed", "cooldown", "sliding", "sliding", "gcra"];

/// `status.lua`'s reply: lock, semaphore, read-write lock, `(algorithm, pttl,
/// used)` for each rate limiter's state, election, latch, and the keys it left
/// out for another application's data in them.
type StatusReply = (
    Option<LockReply>,
    Option<PermitsReply>,
    Option<PermitsReply>,
    Vec<(String, i64, i64)>,
    Option<ElectionReply>,
    Option<(i64, i64)>,
    Vec<String>,
);

/// Where `status.lua` finds a rate limiter's keys among the name's (its KEYS[12..16]).
const RATE_KEYS: std::ops::Range<usize> = 11..16;

/// Everything under the plain (lock) key `key`, as primitives; a lock only when
/// anything of it is there (a holder, waiters, a fencing counter). A
/// [`Error::WrongType`] when nothing of latchkey's is there but another
/// application's data under one of the name's keys.
pub(super) async fn read(store: &RedisStore, key: &LockKey) -> Result<Vec<Primitive>> {
    let keys = name_keys(key);
    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    let mut call = ScriptCall::new(&scripts::STATUS, &keys);
    call.arg(SemaphoreStatus::HOLDERS_SHOWN);
    for algorithm in RATE_ALGORITHMS {
        call.arg(algorithm);
    }
    for rate in &keys[RATE_KEYS] {
        call.arg(crate::key::redis_type(rate));
    }
    let (found, foreign) = primitives(key, store.run(&call, key).await?);
    match foreign.first() {
        Some(first) if found.is_empty() => Err(foreign_data(store, key, &keys, first).await),
        _ => Ok(found),
    }
}

/// Every key of the name of `key` that `status.lua` reads, in its KEYS order.
fn name_keys(key: &LockKey) -> Vec<String> {
    let mut keys = Vec::from([key.as_str(), key.fence(), key.queue()].map(str::to_owned));
    for kind in [Kind::Semaphore, Kind::RwLock] {
        let holders = key.sibling(kind);
        let permits = holders.companion(PERMITS);
        keys.extend(
            [holders.as_str(), holders.fence(), holders.queue(), &permits].map(str::to_owned),
        );
    }
    keys.extend(RATE_COMPANIONS.map(|kind| key.companion(kind)));
    // The recipes' keys, as `Client::election` and `Client::latch` name them.
    let election = key.companion_key(Kind::Election.companion());
    let record = election.companion(LEADER_RECORD);
    let latch = key.companion(Kind::Latch.companion());
    keys.extend([election.as_str(), &record, &latch, election.queue()].map(str::to_owned));
    keys
}

/// What `status.lua` found, as primitives (those in use, a lock only when anything
/// of it is there), and the keys it left out for another application's data.
fn primitives(key: &LockKey, reply: StatusReply) -> (Vec<Primitive>, Vec<String>) {
    let (lock, semaphore, rw_lock, rates, election, latch, foreign) = reply;
    let lock = lock
        .map(LockStatus::from_reply)
        .filter(|status| status.is_held() || status.fence.is_some() || status.waiters > 0);
    let found = lock.map(Primitive::Lock).into_iter();
    let semaphore = semaphore.map(|s| Primitive::Semaphore(SemaphoreStatus::from_reply(s)));
    let rw_lock = rw_lock.map(|s| Primitive::RwLock(SemaphoreStatus::from_reply(s)));
    let rates = rates.into_iter().map(|(algorithm, pttl, used)| {
        let used = u64::try_from(used).ok();
        let gcra = algorithm == "gcra";
        Primitive::RateLimit(RateLimitStatus {
            resets_in: u64::try_from(pttl).ok().map(Duration::from_millis),
            used: used.filter(|_| !gcra),
            ahead: used.filter(|_| gcra).map(Duration::from_micros),
            algorithm,
        })
    });
    // A record whose term is no number (written by something else) hides the
    // leader, not the name: `list` goes on.
    let name = key.companion_key(Kind::Election.companion());
    let election = election
        .map(|reply| {
            ElectionStatus::from_reply(reply.clone(), name.name()).unwrap_or(ElectionStatus {
                held: reply.0 != 0,
                waiters: reply.4,
                ..ElectionStatus::default()
            })
        })
        .filter(|status| status.held || status.waiters > 0)
        .map(Primitive::Election);
    let latch = latch
        .and_then(LatchStatus::from_reply)
        .map(Primitive::Latch);
    let found = found
        .chain(semaphore)
        .chain(rw_lock)
        .chain(rates)
        .chain(election)
        .chain(latch)
        .collect();
    (found, foreign)
}

/// The error for a name where nothing is latchkey's but another application's
/// data is: it names the key of another type if one is (`TYPE` over every key of
/// the name), else `first`, the one `status.lua` found whose content is not
/// latchkey's.
async fn foreign_data(store: &RedisStore, key: &LockKey, keys: &[&str], first: &str) -> Error {
    let typed = match store.foreign_keys(keys).await {
        Ok(typed) => typed,
        Err(error) => return store.error(error, key.as_str()),
    };
    Error::WrongType {
        key: typed.first().copied().unwrap_or(first).to_owned(),
    }
}

/// [`read`], with nothing found where only another application's data is: for a
/// break, which leaves that alone.
pub(super) async fn read_ours(store: &RedisStore, key: &LockKey) -> Result<Vec<Primitive>> {
    match read(store, key).await {
        Err(Error::WrongType { .. }) => Ok(Vec::new()),
        found => found,
    }
}

/// Deletes every rate limiter's state under `key` that [`read`] found (a key of
/// another application's under a companion's name is left alone); returns what
/// there was (the first algorithm's), if any.
pub(super) async fn reset_rates(
    store: &RedisStore,
    key: &LockKey,
) -> Result<Option<RateLimitStatus>> {
    let found: Vec<RateLimitStatus> = read_ours(store, key)
        .await?
        .into_iter()
        .filter_map(|found| match found {
            Primitive::RateLimit(status) => Some(status),
            _ => None,
        })
        .collect();
    let companions: Vec<String> = RATE_COMPANIONS
        .iter()
        .zip(RATE_ALGORITHMS)
        .filter(|(_, algorithm)| found.iter().any(|f| f.algorithm == *algorithm))
        .map(|(kind, _)| key.companion(kind))
        .collect();
    if companions.is_empty() {
        return Ok(None);
    }
    // A sliding window is found by either of its keys: the other may be another
    // application's, and stays.
    let named: Vec<&str> = companions.iter().map(String::as_str).collect();
    let foreign = store.foreign_keys(&named).await;
    let foreign = foreign.map_err(|error| store.error(error, key.as_str()))?;
    let ours: Vec<&str> = named
        .into_iter()
        .filter(|each| !foreign.contains(each))
        .collect();
    if !ours.is_empty() {
        let deleted = store.query::<u64>(redis::cmd("DEL").arg(&ours)).await;
        deleted.map_err(|error| store.error(error, key.as_str()))?;
    }
    Ok(found.into_iter().next())
}
