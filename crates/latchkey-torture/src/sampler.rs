//! Watches who holds each lock in Redis itself, every 20 ms, on the current primary
//! (on a quorum, what a majority of the masters hold): the evidence for the "no
//! orphan holds" check. For a semaphore or read-write lock, every live permit's
//! owner is a holder.

use std::sync::Arc;
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::Duration;

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::cluster_async::ClusterConnection;
use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::Workload;
use crate::record::now_us;

/// Time between two samples.
pub const SAMPLE_EVERY: Duration = Duration::from_millis(20);
/// A sample not answered by then is skipped (the server is paused or gone).
const SAMPLE_TIMEOUT: Duration = Duration::from_millis(100);

/// One token seen in one lock key over consecutive answered samples.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct HoldRun {
    pub lock: String,
    pub token: String,
    /// When the first sample that saw it was answered (it was there by then).
    pub first_us: u64,
    /// When that sample was sent (it was read after that; 0 in runs from before it
    /// was recorded).
    #[serde(default)]
    pub first_sent_us: u64,
    /// When the last sample that saw it was sent (it was there at or after that).
    pub last_us: u64,
    /// Its PTTL in the first sample (-1: no expiry).
    pub first_pttl_ms: i64,
}

/// Where a lock's holders are.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Keys {
    /// The lock key: one owner token, with a PTTL.
    Lock,
    /// The lock of the election of the name (`{name}:lk:elect`), a lock key too.
    Elected,
    /// The holders set of the semaphore (`sem`) or read-write lock (`rw`) of the
    /// name: members `<weight>*<owner>` scored by lease end.
    Permits(&'static str),
    /// Nothing to sample (rate limits, transactions, latches).
    None,
}

impl Keys {
    /// Where `workload`'s holders are.
    pub fn of(workload: Workload) -> Keys {
        match workload {
            Workload::Mutex | Workload::MultiLock => Keys::Lock,
            Workload::Election => Keys::Elected,
            Workload::Semaphore => Keys::Permits("sem"),
            Workload::RwLock => Keys::Permits("rw"),
            Workload::RateLimit | Workload::Transaction | Workload::Latch => Keys::None,
        }
    }

    /// The key that holds `lock`'s holders (`None`: nothing to sample).
    pub fn key(self, lock: &str) -> Option<String> {
        match self {
            Keys::Lock => Some(lock.to_owned()),
            Keys::Elected => Some(format!("{{{lock}}}:lk:elect")),
            Keys::Permits(kind) => Some(format!("{{{lock}}}:lk:{kind}")),
            Keys::None => None,
        }
    }
}

/// Where the locks live.
pub enum Target {
    /// The primary on this port (it changes on a failover).
    Primary(Arc<AtomicU16>),
    /// A cluster, from its seed URLs (its clients follow failovers).
    Cluster(Vec<String>),
    /// A quorum's masters, by port: a lock is held when a majority holds it.
    Quorum(Vec<u16>),
}

/// A connection to where the locks live now.
enum Sampled {
    Node(u16, MultiplexedConnection),
    Cluster(ClusterConnection),
    /// One connection per master; `None` for one that is down now.
    Quorum(Vec<Option<MultiplexedConnection>>),
}

/// The running sampler; [`Sampler::stop`] returns what it saw.
pub struct Sampler {
    stop: oneshot::Sender<()>,
    task: JoinHandle<Vec<HoldRun>>,
}

impl Sampler {
    /// Samples `locks`, whose holders are in `keys` (the lock keys, or a
    /// semaphore's or read-write lock's holders sets).
    pub fn start(target: Target, locks: Vec<String>, keys: Keys) -> Sampler {
        let (stop, stopped) = oneshot::channel();
        let task = tokio::spawn(sample(target, (locks, keys), stopped));
        Sampler { stop, task }
    }

    pub async fn stop(self) -> Vec<HoldRun> {
        let _ = self.stop.send(());
        self.task.await.unwrap_or_default()
    }
}

async fn sample(
    target: Target,
    (locks, keys): (Vec<String>, Keys),
    mut stopped: oneshot::Receiver<()>,
) -> Vec<HoldRun> {
    if keys == Keys::None {
        let _ = stopped.await;
        return Vec::new();
    }
    let mut runs = Runs::new(locks.len());
    let mut conn: Option<Sampled> = None;
    let mut tick = tokio::time::interval(SAMPLE_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = &mut stopped => break,
            _ = tick.tick() => {}
        }
        // A failover moved the primary: follow it.
        if let (Target::Primary(port), Some(Sampled::Node(was, _))) = (&target, &conn) {
            if port.load(Ordering::Relaxed) != *was {
                conn = None;
            }
        }
        if conn.is_none() {
            conn = connect(&target).await;
        }
        let sent = now_us();
        let seen = match &mut conn {
            Some(Sampled::Node(_, node)) => holders(node, &locks, keys).await,
            Some(Sampled::Cluster(cluster)) => holders(cluster, &locks, keys).await,
            Some(Sampled::Quorum(masters)) => majority_holders(&target, masters, &locks).await,
            None => continue,
        };
        match seen {
            Some(holders) => runs.saw(&locks, holders, sent, now_us()),
            None => conn = None,
        }
    }
    runs.finish()
}

async fn connect(target: &Target) -> Option<Sampled> {
    match target {
        Target::Primary(port) => {
            let port = port.load(Ordering::Relaxed);
            Some(Sampled::Node(port, connect_node(port).await?))
        }
        Target::Quorum(ports) => Some(Sampled::Quorum(vec![None; ports.len()])),
        Target::Cluster(seeds) => {
            let client = redis::cluster::ClusterClient::builder(seeds.clone())
                .response_timeout(SAMPLE_TIMEOUT)
                .retries(0)
                .build()
                .ok()?;
            let connecting = client.get_async_connection();
            let conn = tokio::time::timeout(SAMPLE_TIMEOUT * 5, connecting)
                .await
                .ok()?
                .ok()?;
            Some(Sampled::Cluster(conn))
        }
    }
}

async fn connect_node(port: u16) -> Option<MultiplexedConnection> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}")).ok()?;
    let connecting = client.get_multiplexed_async_connection();
    tokio::time::timeout(SAMPLE_TIMEOUT, connecting)
        .await
        .ok()?
        .ok()
}

/// What a majority of the masters hold for each lock, with the PTTL of the copy
/// whose end would leave fewer than a majority; `None` when fewer than a majority
/// answered. Each attempt on a quorum writes `N/` and its owner token: the token
/// is what the holder logged.
async fn majority_holders(
    target: &Target,
    masters: &mut [Option<MultiplexedConnection>],
    locks: &[String],
) -> Option<Vec<Vec<(String, i64)>>> {
    let Target::Quorum(ports) = target else {
        return None;
    };
    let mut answers = Vec::new();
    for (conn, &port) in masters.iter_mut().zip(ports) {
        if conn.is_none() {
            *conn = connect_node(port).await;
        }
        let Some(node) = conn else { continue };
        match holders(node, locks, Keys::Lock).await {
            Some(seen) => answers.push(seen),
            None => *conn = None,
        }
    }
    let majority = ports.len() / 2 + 1;
    if answers.len() < majority {
        return None;
    }
    let held = (0..locks.len())
        .map(|lock| {
            let copies: Vec<(String, i64)> = answers
                .iter()
                .filter_map(|seen| {
                    let (token, pttl) = seen[lock].first()?;
                    let owner = token
                        .split_once('/')
                        .map_or(token.as_str(), |(_, owner)| owner);
                    Some((owner.to_owned(), *pttl))
                })
                .collect();
            majority_copy(copies, majority).into_iter().collect()
        })
        .collect();
    Some(held)
}

/// The token at least `majority` of `copies` hold, and the PTTL that leaves
/// `majority` of them alive.
fn majority_copy(copies: Vec<(String, i64)>, majority: usize) -> Option<(String, i64)> {
    let token = copies
        .iter()
        .find(|(t, _)| copies.iter().filter(|(o, _)| o == t).count() >= majority)?
        .0
        .clone();
    let mut pttls: Vec<i64> = copies
        .iter()
        .filter(|(t, _)| *t == token)
        .map(|(_, p)| if *p < 0 { i64::MAX } else { *p })
        .collect();
    pttls.sort_unstable_by(|a, b| b.cmp(a));
    let pttl = pttls[majority - 1];
    Some((token, if pttl == i64::MAX { -1 } else { pttl }))
}

/// Every lock's holders (owner token and PTTL), each lock's read atomically (on a
/// cluster the locks live on different shards).
async fn holders(
    conn: &mut impl ConnectionLike,
    locks: &[String],
    keys: Keys,
) -> Option<Vec<Vec<(String, i64)>>> {
    let mut seen = Vec::with_capacity(locks.len());
    for lock in locks {
        let mut pipe = redis::pipe();
        let holders = match keys {
            Keys::Permits(_) => {
                let set = keys.key(lock).unwrap_or_default();
                pipe.atomic().cmd("TIME").zrange_withscores(&set, 0, -1);
                let reply = tokio::time::timeout(SAMPLE_TIMEOUT, pipe.query_async(conn)).await;
                let ((secs, micros), members): ((u64, u64), Vec<(String, i64)>) =
                    reply.ok()?.ok()?;
                let now_ms = i64::try_from(secs * 1000 + micros / 1000).ok()?;
                members
                    .into_iter()
                    .filter(|(_, ends)| *ends > now_ms)
                    .filter_map(|(member, ends)| {
                        let (_, owner) = member.split_once('*')?;
                        Some((owner.to_owned(), ends - now_ms))
                    })
                    .collect()
            }
            Keys::Lock | Keys::Elected | Keys::None => {
                let key = keys.key(lock).unwrap_or_else(|| lock.clone());
                pipe.atomic().get(&key).pttl(&key);
                let reply = tokio::time::timeout(SAMPLE_TIMEOUT, pipe.query_async(conn)).await;
                let (token, pttl): (Option<String>, i64) = reply.ok()?.ok()?;
                token.map(|token| (token, pttl)).into_iter().collect()
            }
        };
        seen.push(holders);
    }
    Some(seen)
}

/// The runs seen so far: the open runs of each lock (one per token seen in the
/// last sample), and those that ended.
struct Runs {
    open: Vec<Vec<HoldRun>>,
    done: Vec<HoldRun>,
}

impl Runs {
    fn new(locks: usize) -> Self {
        Runs {
            open: vec![Vec::new(); locks],
            done: Vec::new(),
        }
    }

    /// A sample sent at `sent` and answered at `answered`.
    fn saw(
        &mut self,
        locks: &[String],
        holders: Vec<Vec<(String, i64)>>,
        sent: u64,
        answered: u64,
    ) {
        for ((lock, open), seen) in locks.iter().zip(&mut self.open).zip(holders) {
            // Runs whose token is gone end; tokens still there go on.
            let (going_on, ended): (Vec<HoldRun>, Vec<HoldRun>) = std::mem::take(open)
                .into_iter()
                .partition(|run| seen.iter().any(|(token, _)| *token == run.token));
            self.done.extend(ended);
            *open = going_on;
            for (token, pttl) in seen {
                match open.iter_mut().find(|run| run.token == token) {
                    Some(run) => run.last_us = sent,
                    None => open.push(HoldRun {
                        lock: lock.clone(),
                        token,
                        first_us: answered,
                        first_sent_us: sent,
                        last_us: sent,
                        first_pttl_ms: pttl,
                    }),
                }
            }
        }
    }

    fn finish(mut self) -> Vec<HoldRun> {
        self.done.extend(self.open.into_iter().flatten());
        self.done
    }
}
