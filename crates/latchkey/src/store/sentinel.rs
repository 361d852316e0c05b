//! Redis Sentinel specifics: the target that asks the Sentinels where the primary is.
//!
//! We ask every Sentinel (at once) rather than take the first answer, as redis-rs's
//! `SentinelClient` does: right after a failover, a Sentinel that has not heard of
//! it yet (they learn from each other within seconds) still names the old primary,
//! and the old primary still answers as a master until it is demoted. Taking that
//! answer sent `latchkey-torture --sentinel --wait-replicas` back and forth between
//! two primaries, two holders of one lock. Each Sentinel's answer carries the epoch
//! of the configuration it knows; every failover raises it, so the answer with the
//! highest epoch names the newest primary.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use redis::aio::MultiplexedConnection;
use redis::{
    AsyncConnectionConfig, ConnectionAddr, ConnectionInfo, ErrorKind, RedisError, RedisResult,
};

use super::CONNECT_TIMEOUT;
use super::target::{Target, unreachable};
use crate::error::{Error, Result};

/// How long a Sentinel may take to answer once connected. Every Sentinel is asked
/// and all answers are awaited, so one that stalled must not hold up the others'
/// answer for long.
const ASK_TIMEOUT: Duration = Duration::from_millis(500);

/// The primary of `master` as the Sentinels at `sentinels` name it, and the name to
/// show in errors. The first URL's user, password, database and TLS are used for
/// the primary too.
pub(super) fn target(master: &str, sentinels: Vec<ConnectionInfo>) -> Result<(Target, String)> {
    let Some(first) = sentinels.first() else {
        return Err(Error::InvalidArgument(
            "Sentinel needs at least one Sentinel URL".into(),
        ));
    };
    if master.is_empty() {
        return Err(Error::InvalidArgument(
            "the Sentinel master name is empty".into(),
        ));
    }
    let node = format!("{master} via Sentinel at {}", first.addr());
    let set = SentinelSet {
        master: master.to_owned(),
        primary: first.clone(),
        sentinels: sentinels
            .into_iter()
            .map(|info| {
                redis::Client::open(info)
                    .map(Sentinel::new)
                    .map_err(|e| Error::from_redis(e, &node, ""))
            })
            .collect::<Result<_>>()?,
    };
    Ok((Target::Sentinel(Arc::new(set)), node))
}

/// The Sentinels watching one master name.
pub(crate) struct SentinelSet {
    master: String,
    /// The first Sentinel URL's settings: the primary is reached with its user,
    /// password, database and TLS.
    primary: ConnectionInfo,
    sentinels: Vec<Sentinel>,
}

/// One Sentinel, and our connection to it once made.
struct Sentinel {
    client: redis::Client,
    conn: tokio::sync::Mutex<Option<MultiplexedConnection>>,
}

/// What one Sentinel says of the master name.
struct Named {
    host: String,
    port: u16,
    /// The epoch of the configuration the Sentinel knows (raised by every failover).
    epoch: u64,
}

impl SentinelSet {
    /// A client for the primary the Sentinels name now: of the Sentinels that
    /// answer, the one that knows the newest configuration (see the module docs).
    /// A primary a Sentinel sees as down is not named.
    pub(crate) async fn primary(&self) -> RedisResult<redis::Client> {
        let answers = join_all(self.sentinels.iter().map(|s| s.ask(&self.master))).await;
        let mut newest: Option<Named> = None;
        let mut last_error = None;
        for answer in answers {
            match answer {
                Ok(Some(named)) if newest.as_ref().is_none_or(|n| named.epoch > n.epoch) => {
                    newest = Some(named);
                }
                Ok(_) => {}
                Err(error) => last_error = Some(error),
            }
        }
        if let Some(named) = newest {
            return redis::Client::open(self.primary_at(named));
        }
        Err(last_error.unwrap_or_else(|| {
            unreachable("no Sentinel names a reachable primary for this master")
        }))
    }

    /// The first Sentinel URL's settings, at the primary's address.
    fn primary_at(&self, named: Named) -> ConnectionInfo {
        let addr = match self.primary.addr() {
            ConnectionAddr::TcpTls { insecure, .. } => ConnectionAddr::TcpTls {
                host: named.host,
                port: named.port,
                insecure: *insecure,
                tls_params: None,
            },
            _ => ConnectionAddr::Tcp(named.host, named.port),
        };
        self.primary.clone().set_addr(addr)
    }
}

impl Sentinel {
    fn new(client: redis::Client) -> Self {
        Sentinel {
            client,
            conn: tokio::sync::Mutex::new(None),
        }
    }

    /// `SENTINEL MASTER`: the primary this Sentinel names, if it names one it does
    /// not see as down. A connection that failed is made afresh next time.
    async fn ask(&self, master: &str) -> RedisResult<Option<Named>> {
        let mut conn = self.conn.lock().await;
        let mut live = match &*conn {
            Some(live) => live.clone(),
            None => {
                let config = AsyncConnectionConfig::new()
                    .set_connection_timeout(Some(CONNECT_TIMEOUT))
                    .set_response_timeout(Some(ASK_TIMEOUT));
                let fresh = self
                    .client
                    .get_multiplexed_async_connection_with_config(&config)
                    .await?;
                conn.insert(fresh).clone()
            }
        };
        // The address as `GET-MASTER-ADDR-BY-NAME` gives it: during a failover it
        // names the promoted replica, while `SENTINEL MASTER` still shows the old
        // primary until every replica was reconfigured.
        let reply: RedisResult<((String, u16), HashMap<String, String>)> = redis::pipe()
            .cmd("SENTINEL")
            .arg("GET-MASTER-ADDR-BY-NAME")
            .arg(master)
            .cmd("SENTINEL")
            .arg("MASTER")
            .arg(master)
            .query_async(&mut live)
            .await;
        match reply {
            Ok((address, fields)) => Ok(named(address, &fields)),
            // A server that does not know SENTINEL: the wrong address, said as
            // redis-rs says it.
            Err(error) if error.to_string().contains("unknown command") => Err(RedisError::from((
                ErrorKind::InvalidClientConfig,
                "Address does not point to a sentinel node",
            ))),
            // "No such master with that name": this Sentinel does not watch it.
            Err(error)
                if error.kind() == ErrorKind::Server(redis::ServerErrorKind::ResponseError) =>
            {
                Ok(None)
            }
            Err(error) => {
                *conn = None;
                Err(error)
            }
        }
    }
}

/// The primary at `address`, with the epoch of a `SENTINEL MASTER` reply, unless
/// that is the master the Sentinel sees as down (during a failover `address` is
/// the promoted replica's, and the flags still describe the old primary).
fn named((host, port): (String, u16), fields: &HashMap<String, String>) -> Option<Named> {
    let flags = fields.get("flags")?;
    let down = flags.contains("s_down") || flags.contains("o_down");
    let same = fields.get("ip") == Some(&host) && fields.get("port") == Some(&port.to_string());
    if down && same {
        return None;
    }
    Some(Named {
        host,
        port,
        epoch: fields.get("config-epoch")?.parse().ok()?,
    })
}
