//! The lock servers of a run: a primary and its replica behind the harness's proxy
//! (the default), a Redis Cluster (`--cluster`), or a quorum of independent
//! masters, each behind a proxy (`--quorum N`).

use crate::lock_cluster::ClusterServers;
use crate::lock_quorum::QuorumServers;
use crate::lock_servers::LockServers;
use crate::sampler;

pub enum Servers {
    Single(Box<LockServers>),
    Cluster(ClusterServers),
    Quorum(QuorumServers),
}

impl Servers {
    /// What workers pass to `--lock-url`.
    pub fn url(&self) -> String {
        match self {
            Servers::Single(servers) => servers.url(),
            Servers::Cluster(cluster) => cluster.url(),
            Servers::Quorum(quorum) => quorum.url(),
        }
    }

    /// Where the sampler reads who holds each lock.
    pub fn sampled(&self) -> sampler::Target {
        match self {
            Servers::Single(servers) => sampler::Target::Primary(servers.primary_port()),
            Servers::Cluster(cluster) => sampler::Target::Cluster(cluster.seeds()),
            Servers::Quorum(quorum) => sampler::Target::Quorum(quorum.ports()),
        }
    }
}
