//! The lock servers in `--cluster` mode: a Redis Cluster of three primaries with a
//! replica each, which the workers reach directly (cluster clients follow the
//! topology themselves, so there is no proxy). Faults fail over the shard of a
//! lock: asked for, by killing its primary, or by pausing it past the node timeout.

use std::io;
use std::time::Duration;

use latchkey_testkit::{RedisCluster, Restart};
use rand::Rng;

/// How long a paused primary stays paused after its replica took over: longer than
/// the clients' 1 s reply timeout, so every request still queued on it has been
/// given up by its sender (Redis would run them as the node wakes, before it learns
/// it was demoted: a split brain of Redis's own that no client can see).
const STALE_REQUESTS_GIVEN_UP: Duration = Duration::from_millis(1_500);

/// The pause between two keys of a migrating slot: long enough that clients meet
/// the slot half moved.
const MIGRATE_PAUSE: Duration = Duration::from_millis(50);

pub struct ClusterServers {
    cluster: RedisCluster,
    locks: Vec<String>,
}

impl ClusterServers {
    pub fn start(locks: Vec<String>) -> io::Result<Self> {
        Ok(ClusterServers {
            cluster: RedisCluster::start()?,
            locks,
        })
    }

    /// Where workers connect: `cluster:` and the seed URLs, comma-separated.
    pub fn url(&self) -> String {
        format!("cluster:{}", self.cluster.seeds().join(","))
    }

    pub fn seeds(&self) -> Vec<String> {
        self.cluster.seeds()
    }

    /// `CLUSTER FAILOVER` on the replica of a random lock's shard: the replica
    /// catches up first, so nothing is lost.
    pub async fn fail_over(&mut self, rng: &mut impl Rng) -> io::Result<()> {
        let (_, replica) = self.shard_of_a_lock(rng)?;
        tokio::task::block_in_place(|| {
            self.cluster.fail_over_to(replica)?;
            self.cluster.wait_healthy()
        })
    }

    /// SIGKILLs the primary of a random lock's shard; once its replica took over, it
    /// comes back empty and rejoins as the new primary's replica.
    pub async fn kill_primary(&mut self, rng: &mut impl Rng) -> io::Result<()> {
        let (primary, replica) = self.shard_of_a_lock(rng)?;
        tokio::task::block_in_place(|| {
            self.cluster.nodes_mut()[primary].kill()?;
            self.cluster.wait_promoted(replica)?;
            self.cluster.wait_healthy()?;
            self.cluster.nodes_mut()[primary].restart_from(Restart::Empty)?;
            self.cluster.wait_replicated()
        })
    }

    /// SIGSTOPs the primary of a random lock's shard until its replica took over
    /// (its sockets stay open: replies just stop), then lets it go on; it rejoins as
    /// a replica.
    pub async fn pause_primary(&mut self, rng: &mut impl Rng) -> io::Result<()> {
        let (primary, replica) = self.shard_of_a_lock(rng)?;
        self.cluster.nodes()[primary].pause()?;
        tokio::task::block_in_place(|| {
            self.cluster.wait_promoted(replica)?;
            self.cluster.wait_healthy_without(primary)
        })?;
        tokio::time::sleep(STALE_REQUESTS_GIVEN_UP).await;
        self.cluster.nodes()[primary].resume()?;
        tokio::task::block_in_place(|| self.cluster.wait_replicated())
    }

    /// Moves a random lock's hash slot to another primary, a key at a time with
    /// [`MIGRATE_PAUSE`] between (see `RedisCluster::migrate_slot`).
    pub async fn migrate_slot(&mut self, rng: &mut impl Rng) -> io::Result<()> {
        let lock = &self.locks[rng.random_range(0..self.locks.len())];
        tokio::task::block_in_place(|| {
            // An earlier fault may have left the cluster down for a moment (CI once
            // aborted a run on CLUSTERDOWN from the MIGRATE): wait for it, and ask
            // again while it recovers.
            self.cluster.wait_healthy()?;
            within_10s(|| self.cluster.migrate_slot(lock, MIGRATE_PAUSE).map(|_| ()))?;
            self.cluster.wait_healthy()
        })
    }

    /// CLIENT KILL every normal and pub/sub connection of every node.
    pub fn client_kill(&self) {
        self.cluster
            .nodes()
            .iter()
            .for_each(crate::faults::client_kill);
    }

    /// The primary and replica (node indexes) serving a random lock now.
    ///
    /// A node that just rejoined as a replica (after an earlier fault) may not be
    /// listed in `CLUSTER SLOTS` yet: asked again for up to 10 s before giving up
    /// (CI once aborted a run on "slot … has no node of role 1").
    fn shard_of_a_lock(&self, rng: &mut impl Rng) -> io::Result<(usize, usize)> {
        let lock = &self.locks[rng.random_range(0..self.locks.len())];
        tokio::task::block_in_place(|| {
            within_10s(|| {
                let primary = self.cluster.primary_of(lock)?;
                Ok((primary, self.cluster.replica_of(lock)?))
            })
        })
    }
}

/// `step`, asked again every 100 ms while it fails, for up to 10 s: a cluster that
/// an earlier fault shook settles within that.
fn within_10s<T>(mut step: impl FnMut() -> io::Result<T>) -> io::Result<T> {
    let started = std::time::Instant::now();
    loop {
        match step() {
            Err(_) if started.elapsed() < Duration::from_secs(10) => {
                std::thread::sleep(Duration::from_millis(100));
            }
            done => return done,
        }
    }
}
