//! Connections of their own, for optimistic transactions.
//!
//! WATCH is per connection: on a connection other tasks share (the store's), one
//! task's MULTI/EXEC would run under another's WATCH, or unguarded (redis-rs
//! documents this). So each transaction takes a connection nobody else uses while
//! it runs. They are plain multiplexed connections, which never reconnect: a
//! connection that broke between WATCH and EXEC fails the EXEC instead of sending it
//! unguarded on a fresh socket. A connection goes back to the idle list only after
//! a clean end (EXEC or UNWATCH answered); one that failed is dropped.

use std::sync::{Arc, Mutex};

use redis::AsyncConnectionConfig;
use redis::aio::MultiplexedConnection;

use super::target::Target;
use super::{CONNECT_TIMEOUT, RESPONSE_TIMEOUT};
use crate::error::{Error, Result};

/// Idle connections kept for the next transactions: enough for a few concurrent
/// ones without a new handshake each; more are opened and closed as needed.
const MAX_IDLE: usize = 8;

/// The idle dedicated connections of a store; clones share them.
#[derive(Clone, Default)]
pub(crate) struct Dedicated {
    idle: Arc<Mutex<Vec<DedicatedConn>>>,
}

/// A connection of its own, and the server it goes to (behind Sentinel: the primary
/// it was named when it connected; `None` otherwise).
pub(crate) struct DedicatedConn {
    pub(crate) conn: MultiplexedConnection,
    server: Option<String>,
}

impl DedicatedConn {
    /// Whether it goes to `primary`, the server named the primary now (`None`
    /// behind Sentinel when none could be reached, and for other targets, whose
    /// connections record no server: they always match).
    pub(crate) fn goes_to(&self, primary: Option<&str>) -> bool {
        self.server.as_deref() == primary
    }
}

impl Dedicated {
    /// An idle connection, or a new one to `target`'s server. Behind Sentinel,
    /// `primary` is the server named the primary now: idle connections to another
    /// (the old primary after a failover, still a writable master until the
    /// Sentinels demote it, seconds later), or all of them when it is unknown, are
    /// dropped, for what they commit there the demotion throws away.
    pub(crate) async fn take(
        &self,
        target: Option<&Target>,
        node: &str,
        primary: Option<String>,
    ) -> Result<DedicatedConn> {
        {
            let mut idle = self.lock();
            if idle.iter().any(|taken| !taken.goes_to(primary.as_deref())) {
                idle.clear();
            }
            if let Some(conn) = idle.pop() {
                return Ok(conn);
            }
        }
        let target = match target {
            Some(Target::Cluster(_)) => {
                return Err(Error::InvalidArgument(
                    "optimistic transactions need one Redis server or a Sentinel-managed primary; on a cluster, WATCH needs a connection to the slot's node, which latchkey does not open yet".into(),
                ));
            }
            Some(target) => target,
            None => {
                return Err(Error::InvalidArgument(
                    "optimistic transactions open connections of their own: make the client from a URL (Client::open), not from a connection".into(),
                ));
            }
        };
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_response_timeout(Some(RESPONSE_TIMEOUT));
        let client = target
            .client()
            .await
            .map_err(|e| Error::from_redis(e, node, ""))?;
        let server = target
            .follows_failover()
            .then(|| client.get_connection_info().addr().to_string());
        let conn = client
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .map_err(|e| Error::from_redis(e, node, ""))?;
        Ok(DedicatedConn { conn, server })
    }

    /// Keeps `conn` for the next transaction. Only for a connection whose last
    /// command (EXEC or UNWATCH) answered: it watches nothing.
    pub(crate) fn give_back(&self, conn: DedicatedConn) {
        let mut idle = self.lock();
        if idle.len() < MAX_IDLE {
            idle.push(conn);
        }
    }

    /// Drops every idle connection: one turned out broken or stale (a restart, a
    /// failover), and the others were made at the same time, to the same server.
    pub(crate) fn clear(&self) {
        self.lock().clear();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<DedicatedConn>> {
        self.idle.lock().unwrap_or_else(|p| p.into_inner())
    }
}
