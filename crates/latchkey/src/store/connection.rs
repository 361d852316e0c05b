//! The connection a single-node store talks through: ours, or the user's own.

use redis::aio::{ConnectionLike, ConnectionManager, MultiplexedConnection};
use redis::{Cmd, Pipeline, RedisFuture, Value};

/// A cloneable, multiplexed connection to one Redis server.
///
/// Build it from the connection your application already has, so latchkey shares its
/// socket instead of opening another:
///
/// ```no_run
/// # async fn demo() -> redis::RedisResult<()> {
/// let redis = redis::Client::open("redis://127.0.0.1:6379")?;
/// let manager = redis.get_connection_manager().await?;
/// let conn = latchkey::store::Connection::from(manager);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub enum Connection {
    /// Reconnects by itself after a server restart or a dropped socket.
    Manager(ConnectionManager),
    /// A plain multiplexed connection; once broken, it stays broken.
    Multiplexed(MultiplexedConnection),
}

impl From<ConnectionManager> for Connection {
    fn from(conn: ConnectionManager) -> Self {
        Connection::Manager(conn)
    }
}

impl From<MultiplexedConnection> for Connection {
    fn from(conn: MultiplexedConnection) -> Self {
        Connection::Multiplexed(conn)
    }
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Connection::Manager(c) => c.req_packed_command(cmd),
            Connection::Multiplexed(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Connection::Manager(c) => c.req_packed_commands(pipeline, offset, count),
            Connection::Multiplexed(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Connection::Manager(c) => c.get_db(),
            Connection::Multiplexed(c) => c.get_db(),
        }
    }
}
