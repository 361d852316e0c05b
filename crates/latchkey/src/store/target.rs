//! Where the connections a store makes go: one server, or whichever server Redis
//! Sentinel names the primary now.

use std::sync::Arc;

use redis::sentinel::SentinelClient;
use redis::{ErrorKind, RedisError, RedisResult, ServerErrorKind};

use super::CONNECT_TIMEOUT;
use crate::error::connection_failed;

/// The server behind a connection of ours; cheap to clone.
#[derive(Clone)]
pub(crate) enum Target {
    /// One address, for good.
    Server(Box<redis::Client>),
    /// The primary of a master name, as the Sentinels say at each (re)connect.
    Sentinel(Arc<tokio::sync::Mutex<SentinelClient>>),
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Server(client) => write!(f, "Server({})", client.get_connection_info().addr()),
            Target::Sentinel(_) => f.write_str("Sentinel"),
        }
    }
}

impl Target {
    /// A client for the server to connect to now (for Sentinel, after asking them:
    /// at most two connect timeouts).
    pub(crate) async fn client(&self) -> RedisResult<redis::Client> {
        match self {
            Target::Server(client) => Ok((**client).clone()),
            Target::Sentinel(sentinel) => {
                let ask = async { sentinel.lock().await.async_get_client().await };
                match tokio::time::timeout(CONNECT_TIMEOUT * 2, ask).await {
                    Ok(Ok(client)) => Ok(client),
                    // A primary that is down (or a name no Sentinel knows) is not
                    // named until a failover picks another: unreachable for now.
                    Ok(Err(error)) if error.kind() == ErrorKind::MasterNameNotFoundBySentinel => {
                        Err(unreachable(
                            "no Sentinel names a reachable primary for this master",
                        ))
                    }
                    Ok(Err(error)) => Err(error),
                    Err(_) => Err(unreachable("no Sentinel named the primary in time")),
                }
            }
        }
    }

    /// Whether `error` says the connection should be made afresh: a reply that timed
    /// out (the path may have stalled); behind Sentinel, also a lost connection or a
    /// server that is a replica now (a failover moved the primary elsewhere).
    pub(crate) fn must_reconnect(&self, error: &RedisError) -> bool {
        let moved = matches!(self, Target::Sentinel(_))
            && (connection_failed(error)
                || error.kind() == ErrorKind::Server(ServerErrorKind::ReadOnly));
        error.is_timeout() || moved
    }
}

/// An error that reads as Redis being unreachable (transient: waits retry it).
fn unreachable(why: &'static str) -> RedisError {
    RedisError::from((ErrorKind::Io, why))
}
