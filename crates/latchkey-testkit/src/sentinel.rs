//! Redis Sentinel: a primary, its replica, and three Sentinels watching them.

use std::collections::HashMap;
use std::io;

use crate::{RedisServer, wait_for};

/// The master name the Sentinels watch.
pub const MASTER_NAME: &str = "latchkey";

/// A primary, one replica and three Sentinels (quorum 2) that fail over to the
/// replica when the primary is down for a second or when asked; all killed on drop.
///
/// ```no_run
/// let set = latchkey_testkit::Sentinels::start()?;
/// println!("ask {:?} for {}", set.urls(), set.master_name());
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct Sentinels {
    /// The primary first, then the replica; which is the primary now, ask
    /// [`primary_port`](Self::primary_port).
    servers: Vec<RedisServer>,
    sentinels: Vec<RedisServer>,
}

impl Sentinels {
    /// Starts the primary, its replica and three Sentinels, and waits until every
    /// Sentinel knows the replica and the two other Sentinels (so a failover can be
    /// agreed on).
    pub fn start() -> io::Result<Self> {
        let primary = RedisServer::start()?;
        let replica = RedisServer::start()?;
        replica.replicate(&primary)?;
        let sentinels = (0..3)
            .map(|_| {
                RedisServer::builder()
                    .sentinel_for(MASTER_NAME, primary.port())
                    .start()
            })
            .collect::<io::Result<Vec<_>>>()?;
        let set = Sentinels {
            servers: vec![primary, replica],
            sentinels,
        };
        wait_for("Sentinels that know the replica and each other", || {
            for sentinel in &set.sentinels {
                let master = master_fields(sentinel)?;
                let field = |name: &str| master.get(name).map(String::as_str);
                if field("num-slaves") != Some("1") || field("num-other-sentinels") != Some("2") {
                    return Ok(false);
                }
            }
            Ok(true)
        })?;
        Ok(set)
    }

    /// The master name to ask the Sentinels for.
    pub fn master_name(&self) -> &str {
        MASTER_NAME
    }

    /// `redis://` URLs of the Sentinels.
    pub fn urls(&self) -> Vec<String> {
        self.sentinels.iter().map(RedisServer::url).collect()
    }

    /// The data servers: the first primary, then its replica.
    pub fn servers(&self) -> &[RedisServer] {
        &self.servers
    }

    /// The data servers, to kill or pause one.
    pub fn servers_mut(&mut self) -> &mut [RedisServer] {
        &mut self.servers
    }

    /// The port of the primary, as the first running Sentinel names it.
    pub fn primary_port(&self) -> io::Result<u16> {
        let sentinel = self
            .sentinels
            .iter()
            .find(|s| s.pid().is_some())
            .ok_or_else(|| io::Error::other("no Sentinel runs"))?;
        let (_, port): (String, u16) = sentinel.admin(
            redis::cmd("SENTINEL")
                .arg("GET-MASTER-ADDR-BY-NAME")
                .arg(MASTER_NAME),
        )?;
        Ok(port)
    }

    /// `SENTINEL FAILOVER`: promotes the replica without waiting for the primary to
    /// fail, and waits until the Sentinels name the new primary and it takes writes.
    pub fn failover(&self) -> io::Result<()> {
        let before = self.primary_port()?;
        // A replica still syncing (just restarted or demoted) is no good replica yet,
        // and a failover in progress refuses another: ask until one starts.
        wait_for("a replica the Sentinels can promote", || {
            let failover = redis::cmd("SENTINEL")
                .arg("FAILOVER")
                .arg(MASTER_NAME)
                .clone();
            match self.sentinels[0].admin::<()>(&failover) {
                Ok(()) => Ok(true),
                Err(e)
                    if ["NOGOODSLAVE", "INPROG"]
                        .iter()
                        .any(|c| e.to_string().contains(c)) =>
                {
                    Ok(false)
                }
                Err(e) => Err(e),
            }
        })?;
        self.wait_for_new_primary(before)
    }

    /// Waits until the Sentinels name a primary other than the one on `old_port`
    /// and that server answers as a primary.
    pub fn wait_for_new_primary(&self, old_port: u16) -> io::Result<()> {
        wait_for("the Sentinels naming a new primary", || {
            let port = self.primary_port()?;
            if port == old_port {
                return Ok(false);
            }
            let Some(server) = self.servers.iter().find(|s| s.port() == port) else {
                return Ok(false);
            };
            Ok(server.info_field("replication", "role")?.as_deref() == Some("master"))
        })
    }
}

impl Sentinels {
    /// Waits until the data server on `port` runs as a replica: the Sentinels
    /// demoted an old primary. Until then it still takes writes from the clients
    /// still connected to it (Sentinel's split brain after a failover).
    ///
    /// ```no_run
    /// # let set = latchkey_testkit::Sentinels::start()?;
    /// let old = set.primary_port()?;
    /// set.failover()?;
    /// set.wait_demoted(old)?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn wait_demoted(&self, port: u16) -> io::Result<()> {
        wait_for("the old primary demoted to a replica", || {
            let Some(server) = self.servers.iter().find(|s| s.port() == port) else {
                return Ok(true);
            };
            Ok(server.info_field("replication", "role")?.as_deref() == Some("slave"))
        })
    }
}

/// `SENTINEL MASTER name` as field → value.
fn master_fields(sentinel: &RedisServer) -> io::Result<HashMap<String, String>> {
    let flat: Vec<String> =
        sentinel.admin(redis::cmd("SENTINEL").arg("MASTER").arg(MASTER_NAME))?;
    Ok(flat
        .chunks(2)
        .filter_map(|pair| Some((pair.first()?.clone(), pair.get(1)?.clone())))
        .collect())
}
