//! The three implementations every scenario runs, behind one small interface.

use std::sync::Arc;
use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use serde::{Deserialize, Serialize};

use crate::BenchError;

/// Lease used by every implementation.
const TTL: Duration = Duration::from_secs(30);
/// How often the raw recipe retries a busy lock (the seed blog's 10 ms).
const RAW_RETRY: Duration = Duration::from_millis(10);

/// Compare-and-delete, the release every correct SET NX lock needs.
static RAW_RELEASE: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0",
    )
});

/// The raw recipe's acquire with a fencing token, the least a fenced lock that keeps
/// the plain key layout (the key holds only the owner) asks of Redis: one script that
/// takes the lock if free and hands out max(last + 1, server µs), as latchkey does.
static RAW_FENCED_TAKE: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        "if redis.call('GET', KEYS[1]) then return 0 end \
         local last = tonumber(redis.call('GET', KEYS[2]) or 0) \
         local t = redis.call('TIME') \
         redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) \
         local fence = math.max(last + 1, tonumber(t[1]) * 1000000 + tonumber(t[2])) \
         redis.call('SET', KEYS[2], string.format('%d', fence), 'PX', ARGV[2]) \
         return fence",
    )
});

/// Which lock a figure is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Impl {
    /// This library (plain mode).
    Latchkey,
    /// This library in fair (strict FIFO) mode.
    #[serde(rename = "latchkey-fair")]
    LatchkeyFair,
    /// This library (plain mode) computing the fencing token with every grant
    /// (`Fencing::OnGrant`). Only in the cost scenario (its passes and handovers
    /// under contention also compute one: three more commands a pass, two a handover).
    #[serde(rename = "latchkey-fenced")]
    LatchkeyFenced,
    /// The bare commands: `SET key token NX PX`, retried every 10 ms when busy, and
    /// a Lua compare-and-delete release. No fencing, no waiting but polling.
    Raw,
    /// The same with a fencing token: the acquire is one script (GET, GET, TIME,
    /// SET, SET), the floor of what a fenced lock costs.
    #[serde(rename = "raw-fenced")]
    RawFenced,
    /// rslock 0.10 with its default retry (3 tries, random 0–200 ms apart, looped).
    Rslock,
}

impl Impl {
    /// All of them the timed scenarios compare, in report order.
    pub const ALL: [Impl; 5] = [
        Impl::Latchkey,
        Impl::LatchkeyFair,
        Impl::Raw,
        Impl::RawFenced,
        Impl::Rslock,
    ];

    /// The name used in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Impl::Latchkey => "latchkey",
            Impl::LatchkeyFair => "latchkey-fair",
            Impl::LatchkeyFenced => "latchkey-fenced",
            Impl::Raw => "raw",
            Impl::RawFenced => "raw-fenced",
            Impl::Rslock => "rslock",
        }
    }
}

/// One implementation's lock, shared by a scenario's tasks like one process's client.
#[derive(Clone)]
pub(crate) enum Locker {
    Latchkey {
        client: latchkey::Client,
        fairness: latchkey::Fairness,
        fencing: latchkey::Fencing,
    },
    Raw {
        conn: MultiplexedConnection,
        fenced: bool,
    },
    Rslock(Arc<rslock::LockManager>),
}

/// A held lock of any implementation.
pub(crate) enum Held {
    Latchkey(latchkey::MutexGuard),
    Raw { key: String, token: u64 },
    Rslock(rslock::Lock),
}

impl Locker {
    pub(crate) async fn new(which: Impl, url: &str) -> Result<Self, BenchError> {
        Ok(match which {
            Impl::Latchkey | Impl::LatchkeyFair | Impl::LatchkeyFenced => Locker::Latchkey {
                client: latchkey::Client::open(url).await?,
                fairness: match which {
                    Impl::LatchkeyFair => latchkey::Fairness::Fair,
                    _ => latchkey::Fairness::Plain,
                },
                fencing: match which {
                    Impl::LatchkeyFenced => latchkey::Fencing::OnGrant,
                    _ => latchkey::Fencing::OnDemand,
                },
            },
            Impl::Raw | Impl::RawFenced => Locker::Raw {
                conn: crate::connect(url).await?,
                fenced: which == Impl::RawFenced,
            },
            Impl::Rslock => {
                Locker::Rslock(Arc::new(rslock::LockManager::new(vec![url.to_owned()])))
            }
        })
    }

    /// Waits for `key`, each implementation its own way.
    pub(crate) async fn lock(&self, key: &str) -> Result<Held, BenchError> {
        match self {
            Locker::Latchkey {
                client,
                fairness,
                fencing,
            } => {
                let mutex = client
                    .mutex(key)?
                    .with_lease(latchkey::Lease::fixed(TTL)?)
                    .with_fairness(*fairness)
                    .with_fencing(*fencing);
                Ok(Held::Latchkey(mutex.lock().await?))
            }
            Locker::Raw { conn, fenced } => raw_lock(conn.clone(), key, *fenced).await,
            Locker::Rslock(manager) => manager
                .acquire_no_guard(key.as_bytes(), TTL)
                .await
                .map(Held::Rslock)
                .map_err(|e| BenchError::Rslock(e.to_string())),
        }
    }

    pub(crate) async fn unlock(&self, held: Held) -> Result<(), BenchError> {
        match (self, held) {
            (_, Held::Latchkey(guard)) => {
                if !guard.release().await? {
                    return Err(BenchError::Check(
                        "a latchkey lease ran out mid-section".into(),
                    ));
                }
            }
            (Locker::Raw { conn, .. }, Held::Raw { key, token }) => {
                let _: i64 = RAW_RELEASE
                    .key(key)
                    .arg(token)
                    .invoke_async(&mut conn.clone())
                    .await?;
            }
            (Locker::Rslock(manager), Held::Rslock(lock)) => manager.unlock(&lock).await,
            _ => unreachable!("a lock is released by the locker that took it"),
        }
        Ok(())
    }
}

async fn raw_lock(
    mut conn: MultiplexedConnection,
    key: &str,
    fenced: bool,
) -> Result<Held, BenchError> {
    // Unique per acquisition across the bench's processes: enough for a benchmark.
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let token = (u64::from(std::process::id()) << 40) | NEXT.fetch_add(1, Ordering::Relaxed);
    let ttl = TTL.as_millis() as u64;
    loop {
        let taken = match fenced {
            false => redis::cmd("SET")
                .arg(key)
                .arg(token)
                .arg("NX")
                .arg("PX")
                .arg(ttl)
                .query_async::<Option<String>>(&mut conn)
                .await?
                .is_some(),
            true => {
                RAW_FENCED_TAKE
                    .key(key)
                    .key(format!("{key}:fence"))
                    .arg(token)
                    .arg(ttl)
                    .invoke_async::<u64>(&mut conn)
                    .await?
                    > 0
            }
        };
        if taken {
            return Ok(Held::Raw {
                key: key.to_owned(),
                token,
            });
        }
        tokio::time::sleep(RAW_RETRY).await;
    }
}
