//! Redis Cluster specifics: connecting from seed nodes, and walking every primary.

use std::sync::Arc;

use redis::cluster::{ClusterClient, ClusterClientBuilder};
use redis::{ConnectionInfo, ProtocolVersion, RedisResult, Value};
use tokio::sync::mpsc;

use super::subscriber::Source;
use super::{CONNECT_TIMEOUT, Connection, RESPONSE_TIMEOUT};
use crate::error::{Error, Result};

/// Attempts redis-rs makes for one command, following MOVED/ASK redirections and
/// waiting out a failover, before it reports an error; latchkey's waits retry on top
/// of that while their deadline allows.
const CLUSTER_RETRIES: u32 = 5;

/// What a cluster store is made of: the command connection, its name for errors,
/// and the source of its sharded wake-ups.
pub(super) struct Connected {
    pub(super) conn: Connection,
    pub(super) node: Arc<str>,
    pub(super) wakeups: Source,
}

/// Connects to the cluster that `seeds` (URLs of some of its nodes) belong to.
pub(super) async fn connect(seeds: &[ConnectionInfo]) -> Result<Connected> {
    let first = seeds.first().ok_or_else(|| {
        Error::InvalidArgument("a cluster needs at least one seed node URL".into())
    })?;
    let node: Arc<str> = match seeds.len() {
        1 => format!("cluster at {}", first.addr()),
        n => format!("cluster at {} (+{} seeds)", first.addr(), n - 1),
    }
    .into();
    let context = |e| Error::from_redis(e, &node, "");
    let commands = builder(seeds).build().map_err(context)?;
    let (pushes, received) = mpsc::unbounded_channel();
    let subscriber = builder(seeds)
        .use_protocol(ProtocolVersion::RESP3)
        .push_sender(pushes)
        .build()
        .map_err(context)?;
    let conn = tokio::time::timeout(CONNECT_TIMEOUT * 2, commands.get_async_connection())
        .await
        .map_err(|_| Error::no_reply(&node))?
        .map_err(context)?;
    Ok(Connected {
        conn: conn.into(),
        node,
        wakeups: Source::Cluster(subscriber, received),
    })
}

fn builder(seeds: &[ConnectionInfo]) -> ClusterClientBuilder {
    ClusterClient::builder(seeds.to_vec())
        .connection_timeout(CONNECT_TIMEOUT)
        .response_timeout(RESPONSE_TIMEOUT)
        .retries(CLUSTER_RETRIES)
}

/// The address of every primary, from `CLUSTER SLOTS`.
pub(super) async fn primaries(conn: &mut Connection) -> RedisResult<Vec<(String, u16)>> {
    let slots: Vec<Value> = redis::cmd("CLUSTER").arg("SLOTS").query_async(conn).await?;
    let mut primaries: Vec<(String, u16)> = slots.iter().filter_map(primary_of_range).collect();
    primaries.sort();
    primaries.dedup();
    Ok(primaries)
}

/// The primary of one `CLUSTER SLOTS` entry: `[first, last, [host, port, id], …]`.
fn primary_of_range(range: &Value) -> Option<(String, u16)> {
    let Value::Array(items) = range else {
        return None;
    };
    let Value::Array(primary) = items.get(2)? else {
        return None;
    };
    let host = match primary.first()? {
        Value::BulkString(bytes) => String::from_utf8_lossy(bytes).into_owned(),
        Value::SimpleString(text) => text.clone(),
        _ => return None,
    };
    let Value::Int(port) = primary.get(1)? else {
        return None;
    };
    Some((host, u16::try_from(*port).ok()?))
}
