//! The lock servers of a run: a primary and its replica behind the harness's proxy
//! (the default), a Redis Cluster (`--cluster`), a quorum of independent masters,
//! each behind a proxy (`--quorum N`), or a primary and replica under three
//! Sentinels (`--sentinel`).

use crate::faults::FaultWindow;
use crate::lock_cluster::ClusterServers;
use crate::lock_quorum::QuorumServers;
use crate::lock_sentinel::SentinelServers;
use crate::lock_servers::LockServers;
use crate::sampler;

pub enum Servers {
    Single(Box<LockServers>),
    Cluster(ClusterServers),
    Quorum(QuorumServers),
    Sentinel(SentinelServers),
}

impl Servers {
    /// What workers pass to `--lock-url`.
    pub fn url(&self) -> String {
        match self {
            Servers::Single(servers) => servers.url(),
            Servers::Cluster(cluster) => cluster.url(),
            Servers::Quorum(quorum) => quorum.url(),
            Servers::Sentinel(set) => set.url(),
        }
    }

    /// A plain `redis://` URL of where the data lives now (the primary), for reading
    /// it back after the run; `None` on a cluster or a quorum.
    pub fn data_url(&self) -> Option<String> {
        match self {
            Servers::Single(servers) => Some(servers.url()),
            Servers::Sentinel(set) => Some(format!(
                "redis://127.0.0.1:{}",
                set.primary_port()
                    .load(std::sync::atomic::Ordering::Relaxed)
            )),
            Servers::Cluster(_) | Servers::Quorum(_) => None,
        }
    }

    /// Where the sampler reads who holds each lock.
    pub fn sampled(&self) -> sampler::Target {
        match self {
            Servers::Single(servers) => sampler::Target::Primary(servers.primary_port()),
            Servers::Cluster(cluster) => sampler::Target::Cluster(cluster.seeds()),
            Servers::Quorum(quorum) => sampler::Target::Quorum(quorum.ports()),
            Servers::Sentinel(set) => sampler::Target::Primary(set.primary_port()),
        }
    }

    /// Failovers the servers made on their own, not among the faults `injected`
    /// (Sentinel's; a cluster's are not watched yet).
    pub fn unasked_failovers(&self, injected: &[FaultWindow]) -> Vec<FaultWindow> {
        match self {
            Servers::Sentinel(set) => set.unasked_failovers(injected),
            _ => Vec::new(),
        }
    }
}
