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

/// Which lock a figure is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Impl {
    /// This library (plain mode).
    Latchkey,
    /// This library in fair (strict FIFO) mode.
    #[serde(rename = "latchkey-fair")]
    LatchkeyFair,
    /// The bare commands: `SET key token NX PX`, retried every 10 ms when busy, and
    /// a Lua compare-and-delete release. No fencing, no waiting but polling.
    Raw,
    /// rslock 0.10 with its default retry (3 tries, random 0–200 ms apart, looped).
    Rslock,
}

impl Impl {
    /// All of them, in report order.
    pub const ALL: [Impl; 4] = [Impl::Latchkey, Impl::LatchkeyFair, Impl::Raw, Impl::Rslock];

    /// The name used in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Impl::Latchkey => "latchkey",
            Impl::LatchkeyFair => "latchkey-fair",
            Impl::Raw => "raw",
            Impl::Rslock => "rslock",
        }
    }
}

/// One implementation's lock, shared by a scenario's tasks like one process's client.
#[derive(Clone)]
pub(crate) enum Locker {
    Latchkey {
        client: latchkey::Client,
        fair: bool,
    },
    Raw(MultiplexedConnection),
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
            Impl::Latchkey | Impl::LatchkeyFair => Locker::Latchkey {
                client: latchkey::Client::open(url).await?,
                fair: which == Impl::LatchkeyFair,
            },
            Impl::Raw => Locker::Raw(crate::connect(url).await?),
            Impl::Rslock => {
                Locker::Rslock(Arc::new(rslock::LockManager::new(vec![url.to_owned()])))
            }
        })
    }

    /// Waits for `key`, each implementation its own way.
    pub(crate) async fn lock(&self, key: &str) -> Result<Held, BenchError> {
        match self {
            Locker::Latchkey { client, fair } => {
                let mutex = client.mutex(key)?.with_lease(latchkey::Lease::fixed(TTL)?);
                let mutex = if *fair {
                    mutex.with_fairness(latchkey::Fairness::Fair)
                } else {
                    mutex
                };
                Ok(Held::Latchkey(mutex.lock().await?))
            }
            Locker::Raw(conn) => raw_lock(conn.clone(), key).await,
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
            (Locker::Raw(conn), Held::Raw { key, token }) => {
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

async fn raw_lock(mut conn: MultiplexedConnection, key: &str) -> Result<Held, BenchError> {
    // Unique per acquisition within this process: enough for a benchmark.
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let token = NEXT.fetch_add(1, Ordering::Relaxed);
    loop {
        let set: Option<String> = redis::cmd("SET")
            .arg(key)
            .arg(token)
            .arg("NX")
            .arg("PX")
            .arg(TTL.as_millis() as u64)
            .query_async(&mut conn)
            .await?;
        if set.is_some() {
            return Ok(Held::Raw {
                key: key.to_owned(),
                token,
            });
        }
        tokio::time::sleep(RAW_RETRY).await;
    }
}
