//! The transaction workload: every task runs optimistic transactions that read a
//! counter and write it back one higher, and append the transaction's own id to a
//! log, in one MULTI/EXEC. Half of them run under a lock (`guard.transaction`), some
//! after that lock's lease has run out. The log read back after the run shows every
//! write that landed, exactly once each.
//!
//! The lock is held on the run's `--ttl`, renewed, as the lock workload's are: a
//! hold that outlives its holder (a release a failover threw away, a grant to an
//! attempt that was cancelled) then blocks the lock for that long, not for the
//! default 30 s lease, and the liveness check can hold every worker to taking it.

use std::time::Duration;

use latchkey::store::RedisStore;
use latchkey::{Client, Error, Lease};
use rand::Rng;
use rand::rngs::StdRng;
use serde::{Deserialize, Serialize};

use crate::record::{Holder, now_us};

/// How a transaction ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TxOutcome {
    /// EXEC ran: its writes are in.
    Committed,
    /// Given up on conflicts, or the lock was lost first: nothing was written.
    NotWritten,
    /// The connection failed at the EXEC, or before it: it may or may not have run.
    Unknown,
}

/// One transaction, as a worker logs it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Tx {
    pub holder: Holder,
    pub lock: String,
    /// The id it appends to the log.
    pub id: String,
    /// Run under a lock (`guard.transaction`).
    pub guarded: bool,
    /// Under a lock: whether it was taken (within [`LOCK_TIMEOUT`]). `None` in logs
    /// written before this was recorded (and for transactions without a lock).
    #[serde(default)]
    pub locked: Option<bool>,
    pub sent_us: u64,
    pub recv_us: u64,
    pub outcome: TxOutcome,
}

/// The counter and the log of `lock`, in its hash slot.
pub fn keys(lock: &str) -> (String, String) {
    (format!("{{{lock}}}:count"), format!("{{{lock}}}:log"))
}

/// Runs one transaction on `lock` with id `id`, under a lock one time in two, held
/// on a lease of `ttl` renewed (and then, one time in five, only after that lock's
/// fixed 50 ms lease has run out).
pub async fn run_one(
    client: &Client<RedisStore>,
    holder: Holder,
    lock: &str,
    ttl: Duration,
    rng: &mut StdRng,
) -> Tx {
    let id = format!(
        "{}.{}.{}.{}",
        holder.worker, holder.incarnation, holder.task, holder.seq
    );
    let guarded = rng.random_bool(0.5);
    let outlive = rng.random_bool(0.2);
    let sent_us = now_us();
    let (outcome, locked) = match guarded {
        false => (unguarded(client, lock, &id).await, None),
        true => {
            let (outcome, locked) = guarded_by_lock(client, lock, &id, ttl, outlive).await;
            (outcome, Some(locked))
        }
    };
    Tx {
        holder,
        lock: lock.to_owned(),
        id,
        guarded,
        locked,
        sent_us,
        recv_us: now_us(),
        outcome,
    }
}

async fn unguarded(client: &Client<RedisStore>, lock: &str, id: &str) -> TxOutcome {
    let (count, log) = keys(lock);
    let Ok(tx) = client.transaction(&[&count, &log]) else {
        return TxOutcome::NotWritten;
    };
    outcome(
        tx.run(|reads| increment(reads, count.clone(), log.clone(), id.to_owned()))
            .await,
    )
}

/// How long a transaction waits for its lock before it gives up, writing nothing.
pub const LOCK_TIMEOUT: Duration = Duration::from_secs(2);

/// The lock a transaction on `lock`'s counter runs under (in its slot).
pub fn tx_lock(lock: &str) -> String {
    format!("{{{lock}}}:tx")
}

/// Under the lock [`tx_lock`], held on `ttl` renewed; with `outlive`, on a fixed
/// 50 ms lease instead, and the transaction starts only after it ran out: it must
/// then write nothing. Returns the outcome and whether the lock was taken.
async fn guarded_by_lock(
    client: &Client<RedisStore>,
    lock: &str,
    id: &str,
    ttl: Duration,
    outlive: bool,
) -> (TxOutcome, bool) {
    let lease = match outlive {
        true => Lease::fixed(Duration::from_millis(50)),
        false => Lease::renewed(ttl),
    };
    let Ok(mutex) = client
        .mutex(&tx_lock(lock))
        .and_then(|m| lease.map(|l| m.with_lease(l)))
    else {
        return (TxOutcome::NotWritten, false);
    };
    let Ok(guard) = mutex.lock_timeout(LOCK_TIMEOUT).await else {
        return (TxOutcome::NotWritten, false);
    };
    (under(guard, lock, id, outlive).await, true)
}

/// The transaction of [`guarded_by_lock`] once the lock is taken.
async fn under(
    guard: latchkey::MutexGuard<RedisStore>,
    lock: &str,
    id: &str,
    outlive: bool,
) -> TxOutcome {
    let (count, log) = keys(lock);
    if outlive {
        tokio::time::sleep(Duration::from_millis(80)).await;
    }
    let Ok(tx) = guard.transaction(&[&count, &log]) else {
        return TxOutcome::NotWritten;
    };
    let result = tx
        .run(|reads| increment(reads, count.clone(), log.clone(), id.to_owned()))
        .await;
    let _ = guard.release().await;
    outcome(result)
}

/// Reads the counter, writes it one higher and logs `id`.
async fn increment(
    reads: latchkey::transaction::Reads,
    count: String,
    log: String,
    id: String,
) -> latchkey::Result<Option<redis::Pipeline>> {
    let now: Option<i64> = reads.get(&count).await?;
    let mut writes = latchkey::redis::pipe();
    writes
        .set(&count, now.unwrap_or(0) + 1)
        .ignore()
        .rpush(&log, id)
        .ignore();
    Ok(Some(writes))
}

fn outcome(result: latchkey::Result<Option<()>>) -> TxOutcome {
    match result {
        Ok(_) => TxOutcome::Committed,
        Err(Error::Contended { .. } | Error::LeaseLost { .. }) => TxOutcome::NotWritten,
        Err(_) => TxOutcome::Unknown,
    }
}

/// The log of every lock after the run: (counter, ids in order), read from the
/// lock server at `url`; `None` for a lock whose keys could not be read.
pub async fn read_logs(
    url: &str,
    locks: &[String],
) -> std::collections::BTreeMap<String, (i64, Vec<String>)> {
    let mut logs = std::collections::BTreeMap::new();
    let Ok(client) = redis::Client::open(url) else {
        return logs;
    };
    let Ok(mut conn) = client.get_multiplexed_async_connection().await else {
        return logs;
    };
    for lock in locks {
        let (count, log) = keys(lock);
        let read: redis::RedisResult<(Option<i64>, Vec<String>)> = redis::pipe()
            .get(&count)
            .lrange(&log, 0, -1)
            .query_async(&mut conn)
            .await;
        if let Ok((count, ids)) = read {
            logs.insert(lock.clone(), (count.unwrap_or(0), ids));
        }
    }
    logs
}
