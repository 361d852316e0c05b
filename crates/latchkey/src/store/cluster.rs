//! Redis Cluster specifics: connecting from seed nodes, and walking every primary.

use std::sync::Arc;

use redis::cluster::{ClusterClient, ClusterClientBuilder};
use redis::{ConnectionInfo, ProtocolVersion, RedisResult, Value};
use tokio::sync::mpsc;

use super::subscriber::Source;
use super::target::Target;
use super::{CONNECT_TIMEOUT, Connection, RESPONSE_TIMEOUT};
use crate::error::{Error, Result};

/// Retries redis-rs makes for one command (to follow a MOVED or ASK redirection)
/// before it reports an error. Few: it also resends a command whose reply timed
/// out, which would run a script twice, and latchkey's waits retry whole requests
/// themselves while their deadline allows.
const CLUSTER_RETRIES: u32 = 1;

/// The shortest and longest pause (ms) before redis-rs's retry.
const CLUSTER_RETRY_WAIT_MS: (u64, u64) = (10, 100);

/// The cluster that `seeds` (URLs of some of its nodes) belong to, as a target for
/// commands and a source of sharded wake-ups, and its name for errors. Nothing is
/// sent yet.
pub(super) fn target(seeds: &[ConnectionInfo]) -> Result<(Target, Source, String)> {
    let first = seeds.first().ok_or_else(|| {
        Error::InvalidArgument("a cluster needs at least one seed node URL".into())
    })?;
    let node = match seeds.len() {
        1 => format!("{} (cluster seed)", first.addr()),
        n => format!("{} (cluster seed, +{} more)", first.addr(), n - 1),
    };
    let context = |e| Error::from_redis(e, &node, "");
    let commands = builder(seeds).build().map_err(context)?;
    let (pushes, received) = mpsc::unbounded_channel();
    let subscriber = builder(seeds)
        .use_protocol(ProtocolVersion::RESP3)
        .push_sender(pushes)
        .build()
        .map_err(context)?;
    let target = Target::Cluster(Arc::new(commands));
    Ok((target, Source::Cluster(subscriber, received), node))
}

fn builder(seeds: &[ConnectionInfo]) -> ClusterClientBuilder {
    ClusterClient::builder(seeds.to_vec())
        .connection_timeout(CONNECT_TIMEOUT)
        .response_timeout(RESPONSE_TIMEOUT)
        .retries(CLUSTER_RETRIES)
        // redis-rs waits 1.28 s or more before a retry by default: longer than the
        // reply timeout, so a `TRYAGAIN` during a slot migration (gone within
        // milliseconds) became a timeout (seen by
        // `a_slot_migration_is_ridden_out_by_try_lock_and_release`).
        .min_retry_wait(CLUSTER_RETRY_WAIT_MS.0)
        .max_retry_wait(CLUSTER_RETRY_WAIT_MS.1)
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
