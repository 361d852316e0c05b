//! Watches who holds each lock in Redis itself, every 20 ms, on the current primary
//! (on a quorum, what a majority of the masters hold): the evidence for the "no
//! orphan holds" check.

use std::sync::Arc;
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::Duration;

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::cluster_async::ClusterConnection;
use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

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
    pub fn start(target: Target, locks: Vec<String>) -> Sampler {
        let (stop, stopped) = oneshot::channel();
        let task = tokio::spawn(sample(target, locks, stopped));
        Sampler { stop, task }
    }

    pub async fn stop(self) -> Vec<HoldRun> {
        let _ = self.stop.send(());
        self.task.await.unwrap_or_default()
    }
}

async fn sample(
    target: Target,
    locks: Vec<String>,
    mut stopped: oneshot::Receiver<()>,
) -> Vec<HoldRun> {
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
            Some(Sampled::Node(_, node)) => holders(node, &locks).await,
            Some(Sampled::Cluster(cluster)) => holders(cluster, &locks).await,
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
) -> Option<Vec<(Option<String>, i64)>> {
    let Target::Quorum(ports) = target else {
        return None;
    };
    let mut answers = Vec::new();
    for (conn, &port) in masters.iter_mut().zip(ports) {
        if conn.is_none() {
            *conn = connect_node(port).await;
        }
        let Some(node) = conn else { continue };
        match holders(node, locks).await {
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
                    let (token, pttl) = &seen[lock];
                    let token = token.as_deref()?;
                    let owner = token.split_once('/').map_or(token, |(_, owner)| owner);
                    Some((owner.to_owned(), *pttl))
                })
                .collect();
            majority_copy(copies, majority).map_or((None, -2), |(t, p)| (Some(t), p))
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

/// Every lock's holder token and PTTL, each lock's read atomically (on a cluster
/// the locks live on different shards).
async fn holders(
    conn: &mut impl ConnectionLike,
    locks: &[String],
) -> Option<Vec<(Option<String>, i64)>> {
    let mut seen = Vec::with_capacity(locks.len());
    for lock in locks {
        let mut pipe = redis::pipe();
        pipe.atomic().get(lock).pttl(lock);
        let reply = tokio::time::timeout(SAMPLE_TIMEOUT, pipe.query_async(conn)).await;
        let (token, pttl): (Option<String>, i64) = reply.ok()?.ok()?;
        seen.push((token, pttl));
    }
    Some(seen)
}

/// The runs seen so far: one open run per lock, and those that ended.
struct Runs {
    open: Vec<Option<HoldRun>>,
    done: Vec<HoldRun>,
}

impl Runs {
    fn new(locks: usize) -> Self {
        Runs {
            open: vec![None; locks],
            done: Vec::new(),
        }
    }

    /// A sample sent at `sent` and answered at `answered`.
    fn saw(
        &mut self,
        locks: &[String],
        holders: Vec<(Option<String>, i64)>,
        sent: u64,
        answered: u64,
    ) {
        for ((lock, open), (token, pttl)) in locks.iter().zip(&mut self.open).zip(holders) {
            match (open.as_mut(), &token) {
                (Some(run), Some(token)) if run.token == *token => {
                    run.last_us = sent;
                    continue;
                }
                _ => {}
            }
            self.done.extend(open.take());
            *open = token.map(|token| HoldRun {
                lock: lock.clone(),
                token,
                first_us: answered,
                first_sent_us: sent,
                last_us: sent,
                first_pttl_ms: pttl,
            });
        }
    }

    fn finish(mut self) -> Vec<HoldRun> {
        self.done.extend(self.open.into_iter().flatten());
        self.done
    }
}
