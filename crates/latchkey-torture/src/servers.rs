//! The lock servers of a run: a primary and its replica behind the harness's proxy
//! (the default), or a Redis Cluster (`--cluster`).

use crate::lock_cluster::ClusterServers;
use crate::lock_servers::LockServers;
use crate::sampler;

pub enum Servers {
    Single(Box<LockServers>),
    Cluster(ClusterServers),
}

impl Servers {
    /// What workers pass to `--lock-url`.
    pub fn url(&self) -> String {
        match self {
            Servers::Single(servers) => servers.url(),
            Servers::Cluster(cluster) => cluster.url(),
        }
    }

    /// Where the sampler reads who holds each lock.
    pub fn sampled(&self) -> sampler::Target {
        match self {
            Servers::Single(servers) => sampler::Target::Primary(servers.primary_port()),
            Servers::Cluster(cluster) => sampler::Target::Cluster(cluster.seeds()),
        }
    }

    pub fn is_cluster(&self) -> bool {
        matches!(self, Servers::Cluster(_))
    }
}
