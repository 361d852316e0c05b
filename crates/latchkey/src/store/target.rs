//! Where the connections a store makes go: one server, whichever server Redis
//! Sentinel names the primary now, or a Redis Cluster.

use std::sync::Arc;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{ErrorKind, RedisError, RedisResult, ServerErrorKind};

use super::CONNECT_TIMEOUT;
use super::sentinel::SentinelSet;
use crate::error::connection_failed;

/// The server(s) behind a connection of ours; cheap to clone (a store, which holds
/// one, is cloned for every acquisition).
#[derive(Clone)]
pub(crate) enum Target {
    /// One address, for good.
    Server(Arc<redis::Client>),
    /// The primary of a master name, as the Sentinels say at each (re)connect.
    Sentinel(Arc<SentinelSet>),
    /// A cluster, from its seed nodes (the slot map is read at each connect).
    Cluster(Arc<ClusterClient>),
}

/// A connection made to a [`Target`].
#[derive(Clone)]
pub(crate) enum Live {
    /// To one server (reconnects by itself after a dropped socket).
    Server(ConnectionManager),
    /// To a cluster (routes by slot, follows MOVED/ASK, reconnects per node).
    Cluster(ClusterConnection),
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Server(client) => write!(f, "Server({})", client.get_connection_info().addr()),
            Target::Sentinel(_) => f.write_str("Sentinel"),
            Target::Cluster(_) => f.write_str("Cluster"),
        }
    }
}

impl Target {
    /// A connection to the target now: lazy for one server (and for the primary
    /// Sentinel names, after asking them); for a cluster, made at once. At most two
    /// connect timeouts.
    /// Also returns the address connected to (none for a cluster).
    pub(crate) async fn connect(
        &self,
        config: &ConnectionManagerConfig,
    ) -> RedisResult<(Live, Option<String>)> {
        if let Target::Cluster(client) = self {
            let connecting = client.get_async_connection();
            return match tokio::time::timeout(CONNECT_TIMEOUT * 2, connecting).await {
                Ok(connected) => connected.map(|conn| (Live::Cluster(conn), None)),
                Err(_) => Err(unreachable("no cluster node answered in time")),
            };
        }
        let client = self.client().await?;
        let address = client.get_connection_info().addr().to_string();
        let live = ConnectionManager::new_lazy_with_config(client, config.clone())?;
        Ok((Live::Server(live), Some(address)))
    }

    /// The address of the primary the Sentinels name now (`None` for another
    /// target, or when no Sentinel answers).
    pub(crate) async fn primary_now(&self) -> Option<String> {
        if !self.follows_failover() {
            return None;
        }
        let client = self.client().await.ok()?;
        Some(client.get_connection_info().addr().to_string())
    }

    /// A client for the one server to connect to now (for Sentinel, after asking
    /// them: at most two connect timeouts).
    pub(crate) async fn client(&self) -> RedisResult<redis::Client> {
        match self {
            Target::Server(client) => Ok((**client).clone()),
            Target::Sentinel(set) => {
                match tokio::time::timeout(CONNECT_TIMEOUT * 2, set.primary()).await {
                    Ok(named) => named,
                    Err(_) => Err(unreachable("no Sentinel named the primary in time")),
                }
            }
            Target::Cluster(_) => Err(RedisError::from((
                ErrorKind::InvalidClientConfig,
                "a cluster is not one server",
            ))),
        }
    }

    /// Whether the primary can move under this target (a failover behind Sentinel):
    /// a replica's `READONLY` then means "ask again", not "misconfigured".
    pub(crate) fn follows_failover(&self) -> bool {
        matches!(self, Target::Sentinel(_))
    }

    /// Whether `error` says the connection should be made afresh: a reply that timed
    /// out (the path may have stalled; on a cluster, redis-rs would keep the stalled
    /// node's socket and its old slot map); on a cluster, no connection to the node
    /// that owns the slot; behind Sentinel, a lost connection or a server that is a
    /// replica now (a failover moved the primary elsewhere).
    pub(crate) fn must_reconnect(&self, error: &RedisError) -> bool {
        let moved = self.follows_failover()
            && (connection_failed(error)
                || error.kind() == ErrorKind::Server(ServerErrorKind::ReadOnly));
        // No connection to the slot's node: read the slot map afresh from the seeds.
        let lost_node = matches!(self, Target::Cluster(_))
            && error.kind() == ErrorKind::ClusterConnectionNotFound;
        error.is_timeout() || moved || lost_node
    }
}

/// An error that reads as Redis being unreachable (transient: waits retry it).
pub(super) fn unreachable(why: &'static str) -> RedisError {
    RedisError::from((ErrorKind::Io, why))
}
