//! Where the connections a store makes go: one server, whichever server Redis
//! Sentinel names the primary now, or a Redis Cluster.

use std::sync::Arc;

use redis::AsyncConnectionConfig;
use redis::aio::MultiplexedConnection;
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
    /// To one server. Once its socket drops it stays broken: the connection that
    /// holds it replaces it ([`Target::must_reconnect`]). redis-rs's
    /// `ConnectionManager` would reconnect by itself, but costs every command a
    /// boxed future, a shared connection future to clone and await and an
    /// `ArcSwap` load: about 1 000 client instructions (callgrind), 7 % of an
    /// uncontended lock cycle's, for what replacing the connection does anyway.
    Server(MultiplexedConnection),
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
    /// A connection to the target now (to one server, or to the primary Sentinel
    /// names, after asking them; or to a cluster). At most two connect timeouts;
    /// behind Sentinel, three (two to ask them, one to connect).
    /// Also returns the address connected to (none for a cluster).
    pub(crate) async fn connect(
        &self,
        config: &AsyncConnectionConfig,
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
        let connecting = client.get_multiplexed_async_connection_with_config(config);
        match tokio::time::timeout(CONNECT_TIMEOUT * 2, connecting).await {
            Ok(connected) => connected.map(|conn| (Live::Server(conn), Some(address))),
            Err(_) => Err(unreachable("the server did not answer in time")),
        }
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
    /// that owns the slot; to one server, a lost connection (it does not reconnect
    /// by itself: see [`Live::Server`]); behind Sentinel, also a server that is a
    /// replica now (a failover moved the primary elsewhere).
    pub(crate) fn must_reconnect(&self, error: &RedisError) -> bool {
        if error.is_timeout() {
            return true;
        }
        match self {
            // No connection to the slot's node: read the slot map afresh from the seeds.
            Target::Cluster(_) => error.kind() == ErrorKind::ClusterConnectionNotFound,
            Target::Server(_) => connection_failed(error),
            Target::Sentinel(_) => {
                connection_failed(error)
                    || error.kind() == ErrorKind::Server(ServerErrorKind::ReadOnly)
            }
        }
    }
}

/// An error that reads as Redis being unreachable (transient: waits retry it).
pub(super) fn unreachable(why: &'static str) -> RedisError {
    RedisError::from((ErrorKind::Io, why))
}
