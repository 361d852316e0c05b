//! The faults: chosen at random from a printed seed, injected into real processes
//! and the network between them.

use std::io;
use std::time::Duration;

use latchkey_testkit::{FaultProxy, NewConnections, RedisServer, Restart};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::Workload;
use crate::lock_cluster::ClusterServers;
use crate::lock_quorum::QuorumServers;
use crate::lock_sentinel::SentinelServers;
use crate::lock_servers::LockServers;
use crate::record::now_us;
use crate::sampler::Keys;
use crate::servers::Servers;
use crate::transactions::tx_lock;
use crate::workers::Workers;

/// A kind of fault.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "snake_case")]
pub enum Fault {
    /// SIGKILL a worker and start a new one in its slot.
    KillWorker,
    /// SIGSTOP a worker for three leases, then SIGCONT.
    PauseWorker,
    /// SIGSTOP the lock server for three leases, then SIGCONT.
    PauseRedis,
    /// Kill the lock server and restart it empty after the documented delay
    /// (longer than the largest lease).
    RestartRedisLate,
    /// Kill the lock server and restart it empty at once.
    RestartRedisNow,
    /// CLIENT KILL every worker connection (commands and subscribers).
    ClientKill,
    /// SAVE a snapshot, so a later snapshot restart brings back older state.
    Snapshot,
    /// Kill the lock server and restart it at once from its last snapshot.
    RestartFromSnapshot,
    /// Kill the lock server and restart it at once from its append-only file.
    RestartFromAof,
    /// Promote the replica, 0–300 ms later kill the primary (the replica misses the
    /// writes of that time), move the proxy to the new primary; the old one comes
    /// back empty as the new replica.
    Failover,
    /// Every connection stops forwarding for three leases, then resumes (half the
    /// time followed by a reset).
    StallNetwork,
    /// New connections are black-holed and existing ones reset, for three leases.
    BlackHole,
    /// 20–150 ms more each way, for three leases.
    Latency,
    /// Every connection closed with a TCP RST.
    ResetConnections,
    /// Cut the replication link (a proxy between replica and primary stalls) for
    /// 100–600 ms while the primary goes on granting, then fail over to the
    /// replica, which really missed those writes.
    PartitionReplica,
    /// (`--cluster`) `CLUSTER FAILOVER` on the replica of a lock's shard: the
    /// replica catches up first, so nothing is lost.
    ClusterFailover,
    /// (`--cluster`) SIGKILL the primary of a lock's shard; its replica takes over,
    /// maybe without the last writes; the old one rejoins empty as a replica.
    KillPrimary,
    /// (`--cluster`) SIGSTOP the primary of a lock's shard until its replica took
    /// over (its connections stall: no reset), then SIGCONT: it rejoins as a replica.
    PausePrimary,
    /// (`--cluster`) Move a lock's hash slot to another primary while it is in use
    /// (`SETSLOT … MIGRATING/IMPORTING`, its keys moved one `MIGRATE` at a time, as
    /// `redis-cli --cluster reshard` does): clients meet `ASK` and `TRYAGAIN`, and
    /// nothing is lost.
    MigrateSlot,
    /// (`--quorum`) SIGSTOP one master for three leases.
    PauseMaster,
    /// (`--quorum`) SIGSTOP as many masters as the quorum can lose for three leases.
    PauseMinority,
    /// (`--quorum`) Kill one master and restart it empty after the documented delay
    /// (three leases and the clock step).
    RestartMasterLate,
    /// (`--quorum`) Kill one master and restart it at once from its append-only file.
    KillMaster,
    /// (`--sentinel`) `SENTINEL FAILOVER`: the replica is promoted at once, maybe
    /// without the primary's last writes.
    SentinelFailover,
    /// (`--sentinel`) The Sentinels failed over on their own: seen, not injected
    /// (with a down-after time of 1 s, a Sentinel slowed by the load, or one that
    /// lost sight of a primary it had just promoted, starts another failover).
    /// Recorded so that the checkers treat it as the failover it is.
    UnaskedFailover,
    /// An operator breaks a random lock (`latchkey release --force`): its holder must
    /// learn it at its next renewal, and nothing may take the lock back.
    ForceRelease,
    /// (one server) The server's clock jumps forward by one `--ttl`, as seen by the
    /// holds (`clock_jump.lua`): every lease ends that much sooner, the short ones at
    /// once, with no release. Nothing can prevent the overlap that follows (the
    /// fence refuses the stale holder's write); a renewing holder must hear of it
    /// at its next renewal.
    ClockJump,
}

impl Fault {
    pub const ALL: [Fault; 17] = [
        Fault::ClockJump,
        Fault::PartitionReplica,
        Fault::ForceRelease,
        Fault::KillWorker,
        Fault::PauseWorker,
        Fault::PauseRedis,
        Fault::RestartRedisLate,
        Fault::RestartRedisNow,
        Fault::ClientKill,
        Fault::Snapshot,
        Fault::RestartFromSnapshot,
        Fault::RestartFromAof,
        Fault::Failover,
        Fault::StallNetwork,
        Fault::BlackHole,
        Fault::Latency,
        Fault::ResetConnections,
    ];

    /// The faults of a `--cluster` run (the network faults need the proxy, which a
    /// cluster run has not: cluster clients must reach every node by its address).
    pub const CLUSTER: [Fault; 8] = [
        Fault::ForceRelease,
        Fault::MigrateSlot,
        Fault::KillWorker,
        Fault::PauseWorker,
        Fault::ClientKill,
        Fault::ClusterFailover,
        Fault::KillPrimary,
        Fault::PausePrimary,
    ];

    /// The faults of a `--sentinel` run.
    pub const SENTINEL: [Fault; 6] = [
        Fault::ForceRelease,
        Fault::KillWorker,
        Fault::PauseWorker,
        Fault::SentinelFailover,
        Fault::KillPrimary,
        Fault::PausePrimary,
    ];

    /// The faults of a `--quorum` run: the network faults hit the proxy of one
    /// master (a connection reset hits them all).
    pub const QUORUM: [Fault; 12] = [
        Fault::ForceRelease,
        Fault::KillWorker,
        Fault::PauseWorker,
        Fault::ClientKill,
        Fault::PauseMaster,
        Fault::PauseMinority,
        Fault::RestartMasterLate,
        Fault::KillMaster,
        Fault::StallNetwork,
        Fault::BlackHole,
        Fault::Latency,
        Fault::ResetConnections,
    ];

    /// The faults a deployment can be given.
    pub fn of(servers: &Servers) -> &'static [Fault] {
        match servers {
            Servers::Single(_) => &Fault::ALL,
            Servers::Cluster(_) => &Fault::CLUSTER,
            Servers::Quorum(_) => &Fault::QUORUM,
            Servers::Sentinel(_) => &Fault::SENTINEL,
        }
    }

    /// One of `faults`, at random.
    pub fn pick(rng: &mut impl Rng, faults: &[Fault]) -> Fault {
        faults[rng.random_range(0..faults.len())]
    }

    /// Whether the lock server may forget grants it made: leases believed by their
    /// holders are then no longer known to Redis. AOF restarts count too, though a
    /// SIGKILL loses nothing the OS had been handed (a machine crash would lose up
    /// to a second).
    pub fn forgets(self) -> bool {
        matches!(
            self,
            Fault::ForceRelease
                | Fault::ClockJump
                | Fault::RestartRedisNow
                | Fault::RestartFromSnapshot
                | Fault::RestartFromAof
                | Fault::Failover
                | Fault::PartitionReplica
                | Fault::SentinelFailover
                | Fault::UnaskedFailover
                | Fault::KillPrimary
                | Fault::PausePrimary
        )
    }

    /// Whether it promotes the replica in place of the primary (and nothing else
    /// forgets): grants the replica confirmed (`WAIT`) survive it.
    pub fn promotes_replica(self) -> bool {
        matches!(
            self,
            Fault::Failover
                | Fault::PartitionReplica
                | Fault::SentinelFailover
                | Fault::UnaskedFailover
                | Fault::KillPrimary
                | Fault::PausePrimary
        )
    }

    /// Whether the server may lose data written before it: every fault that forgets
    /// grants, and a restart that comes back empty only after the leases ran out
    /// (harmless to locks, not to a counter or a rate limit's state).
    pub fn loses_data(self) -> bool {
        self.forgets() || matches!(self, Fault::RestartRedisLate | Fault::RestartMasterLate)
    }

    /// Whether it hits the lock server or the network to it (rather than a worker
    /// process, or nothing at once, as a snapshot).
    pub fn hits_redis(self) -> bool {
        !matches!(
            self,
            Fault::KillWorker
                | Fault::PauseWorker
                | Fault::Snapshot
                | Fault::ForceRelease
                | Fault::ClockJump
        )
    }

    /// Whether the lock server comes back from older state: a snapshot or AOF, or a
    /// replica promoted. The state may be newer than the last `Snapshot` fault: a
    /// replica stores every full sync it receives as its own `dump.rdb`.
    pub fn restores_older_state(self) -> bool {
        matches!(
            self,
            Fault::RestartFromSnapshot
                | Fault::RestartFromAof
                | Fault::Failover
                | Fault::PartitionReplica
                | Fault::SentinelFailover
                | Fault::UnaskedFailover
                | Fault::KillPrimary
                | Fault::PausePrimary
        )
    }
}

/// A fault as it happened: when (wall µs) and, for worker faults, which slot.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FaultWindow {
    pub fault: Fault,
    pub from_us: u64,
    pub to_us: u64,
    pub worker: Option<usize>,
    /// `ForceRelease`: the owner token of the hold it broke, if it broke one.
    #[serde(default)]
    pub broke: Option<String>,
}

/// Injects `fault` and waits until it is over.
pub async fn inject(
    fault: Fault,
    (ttl, workload): (Duration, Workload),
    servers: &mut Servers,
    workers: &mut Workers,
    locks: &[String],
    rng: &mut impl Rng,
) -> io::Result<FaultWindow> {
    let from_us = now_us();
    let mut worker = None;
    let mut broke = None;
    match (fault, servers) {
        (Fault::ForceRelease, servers) => {
            let lock = &locks[rng.random_range(0..locks.len())];
            broke = force_release(&servers.url(), lock, workload).await;
        }
        (Fault::ClockJump, Servers::Single(servers)) => {
            clock_jump(servers.primary(), locks, workload, ttl)?;
        }
        (Fault::KillWorker, _) => worker = Some(workers.kill_one(rng).await),
        (Fault::PauseWorker, _) => worker = Some(pause_worker(ttl, workers, rng).await),
        (_, Servers::Single(servers)) => on_one_node(fault, ttl, servers, rng).await?,
        (_, Servers::Cluster(cluster)) => on_cluster(fault, cluster, rng).await?,
        (_, Servers::Quorum(quorum)) => on_quorum(fault, ttl, quorum, rng).await?,
        (_, Servers::Sentinel(set)) => on_sentinel(fault, set).await?,
    }
    Ok(FaultWindow {
        fault,
        from_us,
        to_us: now_us(),
        worker,
        broke,
    })
}

static CLOCK_JUMP: std::sync::LazyLock<redis::Script> =
    std::sync::LazyLock::new(|| redis::Script::new(include_str!("clock_jump.lua")));

/// Ends every lease of `locks` one `ttl` sooner, as a forward jump of the server's
/// clock would.
fn clock_jump(
    primary: &RedisServer,
    locks: &[String],
    workload: Workload,
    ttl: Duration,
) -> io::Result<()> {
    // A transaction's lease is its lock's; a rate limit's state is its own clock,
    // not a lease (no key).
    let keys: Vec<String> = locks
        .iter()
        .filter_map(|lock| match workload {
            Workload::Transaction => Some(tx_lock(lock)),
            _ => Keys::of(workload).key(lock),
        })
        .collect();
    tokio::task::block_in_place(|| {
        let mut conn = primary.connection().map_err(io::Error::other)?;
        let mut call = CLOCK_JUMP.prepare_invoke();
        for key in &keys {
            call.key(key);
        }
        call.arg(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX));
        // A server down for another fault's restart: nothing to jump.
        let _: redis::RedisResult<i64> = call.invoke(&mut conn);
        Ok(())
    })
}

/// Breaks `lock` as an operator would, through the workers' `--lock-url`; the
/// owner token of the hold it broke. A lock that is free, or changed hands under
/// every try, or a server that does not answer: then the fault did nothing, which
/// is no failure of the run.
async fn force_release(url: &str, lock: &str, workload: Workload) -> Option<String> {
    let broken = match url.strip_prefix("quorum:") {
        Some(masters) => {
            let masters: Vec<&str> = masters.split(',').collect();
            match latchkey::Client::open_quorum(&masters).await {
                Ok(client) => break_lock(&client, lock).await,
                Err(error) => Err(error),
            }
        }
        None => {
            let client = crate::worker::open(url).await;
            match (client, workload) {
                (Ok(client), Workload::Mutex | Workload::MultiLock) => {
                    break_lock(&client, lock).await
                }
                // The leader is deposed: its lock broken, its record withdrawn.
                (Ok(client), Workload::Election) => match client.election(lock) {
                    Ok(election) => election
                        .force_release()
                        .await
                        .map(|was| was.and_then(|status| status.holder)),
                    Err(error) => Err(error),
                },
                // Every permit: their holders learn it at their next renewal. The
                // checkers that use the token read lock keys, which a semaphore has not.
                (Ok(client), Workload::Semaphore) => client
                    .force_release(lock, latchkey::Kind::Semaphore)
                    .await
                    .map(|_| None),
                (Ok(client), Workload::RwLock) => client
                    .force_release(lock, latchkey::Kind::RwLock)
                    .await
                    .map(|_| None),
                // An operator resets a rate limit: its state is gone, as after a
                // restart (an amnesia window for the checker).
                // Transactions have no hold to break: break their locks.
                (Ok(client), Workload::Transaction) => break_lock(&client, &tx_lock(lock)).await,
                // A latch has no holder to break.
                (Ok(_), Workload::Latch) => Ok(None),
                (Ok(client), Workload::RateLimit) => client
                    .force_release(lock, latchkey::Kind::RateLimit)
                    .await
                    .map(|_| None),
                (Err(error), _) => Err(error),
            }
        }
    };
    match broken {
        Ok(holder) => holder,
        Err(error) => {
            eprintln!("latchkey-torture: force_release of {lock} did nothing: {error}");
            None
        }
    }
}

/// Breaks `lock`; the owner token of the hold it broke (on a quorum, the value
/// less its attempt number, as the holder logged it).
async fn break_lock<S>(client: &latchkey::Client<S>, lock: &str) -> latchkey::Result<Option<String>>
where
    S: latchkey::store::Pass + latchkey::store::WakeUps + latchkey::store::Inspect,
{
    let was = client.mutex(lock)?.force_release().await?;
    Ok(was
        .and_then(|status| status.holder)
        .map(|value| match value.split_once('/') {
            Some((attempt, owner)) if attempt.bytes().all(|b| b.is_ascii_digit()) => {
                owner.to_owned()
            }
            _ => value,
        }))
}

/// SIGSTOPs a worker for three leases; returns its slot.
async fn pause_worker(ttl: Duration, workers: &mut Workers, rng: &mut impl Rng) -> usize {
    let (slot, pid) = workers.pick(rng);
    if let Some(pid) = pid.and_then(|pid| i32::try_from(pid).ok()) {
        let pid = Pid::from_raw(pid);
        let _ = kill(pid, Signal::SIGSTOP);
        tokio::time::sleep(ttl * 3).await;
        let _ = kill(pid, Signal::SIGCONT);
    }
    slot
}

async fn on_cluster(
    fault: Fault,
    cluster: &mut ClusterServers,
    rng: &mut impl Rng,
) -> io::Result<()> {
    match fault {
        Fault::ClusterFailover => cluster.fail_over(rng).await,
        Fault::KillPrimary => cluster.kill_primary(rng).await,
        Fault::PausePrimary => cluster.pause_primary(rng).await,
        Fault::MigrateSlot => cluster.migrate_slot(rng).await,
        Fault::ClientKill => {
            cluster.client_kill();
            Ok(())
        }
        other => Err(io::Error::other(format!(
            "{other:?} is not a cluster fault"
        ))),
    }
}

/// A failover of the Sentinel-watched pair.
async fn on_sentinel(fault: Fault, set: &mut SentinelServers) -> io::Result<()> {
    match fault {
        Fault::SentinelFailover => set.fail_over().await,
        Fault::KillPrimary => set.kill_primary().await,
        Fault::PausePrimary => set.pause_primary().await,
        other => Err(io::Error::other(format!(
            "{other:?} is not a Sentinel fault"
        ))),
    }
}

/// A fault of the quorum's masters, or of the network to one of them.
async fn on_quorum(
    fault: Fault,
    ttl: Duration,
    quorum: &mut QuorumServers,
    rng: &mut impl Rng,
) -> io::Result<()> {
    let long = ttl * 3;
    match fault {
        Fault::PauseMaster => quorum.pause_one(long, rng).await,
        Fault::PauseMinority => quorum.pause_minority(long, rng).await,
        Fault::RestartMasterLate => quorum.restart_late(ttl, rng).await,
        Fault::KillMaster => quorum.kill_one(rng).await,
        Fault::ClientKill => {
            quorum.client_kill();
            Ok(())
        }
        Fault::ResetConnections => {
            quorum.proxies().iter().for_each(FaultProxy::reset_all);
            Ok(())
        }
        other => {
            let master = quorum.pick(rng);
            on_network(other, long, quorum.proxy(master), rng).await
        }
    }
}

/// A fault of the primary/replica pair behind the proxy.
async fn on_one_node(
    fault: Fault,
    ttl: Duration,
    servers: &mut LockServers,
    rng: &mut impl Rng,
) -> io::Result<()> {
    let long = ttl * 3;
    match fault {
        Fault::PauseRedis => {
            servers.primary().pause()?;
            tokio::time::sleep(long).await;
            servers.primary().resume()?;
        }
        Fault::RestartRedisLate => {
            servers.primary().kill()?;
            tokio::time::sleep(long).await;
            servers.restart(Restart::Empty).await?;
        }
        Fault::RestartRedisNow => servers.restart(Restart::Empty).await?,
        Fault::RestartFromSnapshot => servers.restart(Restart::Snapshot).await?,
        Fault::RestartFromAof => servers.restart(Restart::Aof).await?,
        Fault::Snapshot => tokio::task::block_in_place(|| servers.primary().save())?,
        Fault::Failover => {
            let lag = Duration::from_millis(rng.random_range(0..=300));
            servers.fail_over(lag).await?
        }
        Fault::PartitionReplica => {
            let cut = Duration::from_millis(rng.random_range(100..=600));
            servers.fail_over_partitioned(cut).await?
        }
        Fault::ClientKill => client_kill(servers.primary()),
        other => on_network(other, long, servers.proxy(), rng).await?,
    }
    Ok(())
}

/// A fault of the network through `proxy`, for `long`.
async fn on_network(
    fault: Fault,
    long: Duration,
    proxy: &FaultProxy,
    rng: &mut impl Rng,
) -> io::Result<()> {
    match fault {
        Fault::StallNetwork => {
            proxy.stall_all();
            tokio::time::sleep(long).await;
            proxy.resume_all();
            if rng.random_bool(0.5) {
                proxy.reset_all();
            }
        }
        Fault::BlackHole => {
            proxy.set_new_connections(NewConnections::BlackHole);
            proxy.reset_all();
            tokio::time::sleep(long).await;
            proxy.set_new_connections(NewConnections::Forward);
        }
        Fault::Latency => {
            let mut delay = || Duration::from_millis(rng.random_range(20..=150));
            proxy.set_latency(delay(), delay());
            tokio::time::sleep(long).await;
            proxy.set_latency(Duration::ZERO, Duration::ZERO);
        }
        Fault::ResetConnections => proxy.reset_all(),
        other => {
            return Err(io::Error::other(format!(
                "{other:?} is not a fault of this deployment"
            )));
        }
    }
    Ok(())
}

/// CLIENT KILL every normal and pub/sub connection of `node` (the workers', and
/// the sampler's); the admin connection is spared.
pub fn client_kill(node: &RedisServer) {
    let Ok(mut admin) = node.connection() else {
        return;
    };
    for kind in ["normal", "pubsub"] {
        let _: redis::RedisResult<u64> = redis::cmd("CLIENT")
            .arg("KILL")
            .arg("TYPE")
            .arg(kind)
            .query(&mut admin);
    }
}
