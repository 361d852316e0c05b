//! A real Redis Cluster: three primaries and a replica each, from local processes.

use std::io;
use std::process::{Command, Stdio};

use crate::{RedisServer, ServerBuilder, not_installed, wait_for};

/// Primaries in a cluster.
const PRIMARIES: usize = 3;

/// Three primaries with one replica each, made with `redis-cli --cluster create`;
/// every node is killed on drop.
///
/// ```no_run
/// let cluster = latchkey_testkit::RedisCluster::start()?;
/// println!("seed nodes: {:?}", cluster.seeds());
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct RedisCluster {
    nodes: Vec<RedisServer>,
    /// Replicas per primary.
    replicas: usize,
}

impl RedisCluster {
    /// Starts six nodes, joins them into a cluster and waits until every node sees
    /// all 16384 slots served.
    pub fn start() -> io::Result<Self> {
        Self::start_with(RedisServer::builder())
    }

    /// As [`start`](Self::start), every node made from `node` (an ACL user, say).
    pub fn start_with(node: ServerBuilder) -> io::Result<Self> {
        Self::start_sized(node, 1)
    }

    /// Three primaries without replicas (a benchmark's cluster: nothing else runs).
    pub fn start_primaries_only() -> io::Result<Self> {
        Self::start_sized(RedisServer::builder(), 0)
    }

    /// Three primaries with `replicas` replicas each, made from `node`.
    fn start_sized(node: ServerBuilder, replicas: usize) -> io::Result<Self> {
        let nodes = (0..PRIMARIES * (1 + replicas))
            .map(|_| node.clone().cluster_node().start())
            .collect::<io::Result<Vec<_>>>()?;
        let addresses: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port()))
            .collect();
        let output = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(&addresses)
            .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| not_installed("redis-tools", &e))?;
        if !output.status.success() {
            return Err(io::Error::other(format!(
                "redis-cli --cluster create failed: {}",
                String::from_utf8_lossy(&output.stdout)
            )));
        }
        let cluster = RedisCluster { nodes, replicas };
        cluster.wait_healthy()?;
        cluster.wait_replicated()?;
        Ok(cluster)
    }

    /// `redis://` URLs of every node, to seed a cluster client.
    pub fn seeds(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }

    /// Every node, primaries and replicas, in start order.
    pub fn nodes(&self) -> &[RedisServer] {
        &self.nodes
    }

    /// Every node, to kill, pause or restart one.
    pub fn nodes_mut(&mut self) -> &mut [RedisServer] {
        &mut self.nodes
    }

    /// The index in [`nodes`](Self::nodes) of the primary that serves `key` now.
    pub fn primary_of(&self, key: &str) -> io::Result<usize> {
        let port = self.serving_port(key, 0)?;
        self.index_of(port)
    }

    /// The index of a replica of the primary that serves `key` now.
    pub fn replica_of(&self, key: &str) -> io::Result<usize> {
        let port = self.serving_port(key, 1)?;
        self.index_of(port)
    }

    /// Waits until every running node reports `cluster_state:ok` (after a failover,
    /// until the cluster agrees again).
    pub fn wait_healthy(&self) -> io::Result<()> {
        self.wait_healthy_without(usize::MAX)
    }

    /// As [`wait_healthy`](Self::wait_healthy), not asking node `skip` (one that is
    /// paused, say).
    pub fn wait_healthy_without(&self, skip: usize) -> io::Result<()> {
        wait_for("every cluster node reporting cluster_state:ok", || {
            let asked = self
                .nodes
                .iter()
                .enumerate()
                .filter(|(i, n)| *i != skip && n.pid().is_some());
            for (_, node) in asked {
                if node
                    .reply_field(redis::cmd("CLUSTER").arg("INFO"), "cluster_state")?
                    .as_deref()
                    != Some("ok")
                {
                    return Ok(false);
                }
            }
            Ok(true)
        })
    }

    /// Which port serves `key`'s slot: `role` 0 for the primary, 1 for its first
    /// replica (from `CLUSTER SLOTS`, asked of a running node).
    fn serving_port(&self, key: &str, role: usize) -> io::Result<u16> {
        let slot: i64 = self
            .running_node()?
            .admin(redis::cmd("CLUSTER").arg("KEYSLOT").arg(key))?;
        for (first, last, servers) in self.slot_ranges()? {
            if (first..=last).contains(&slot) {
                return servers.get(role).copied().ok_or_else(|| {
                    io::Error::other(format!("slot {slot} has no node of role {role}"))
                });
            }
        }
        Err(io::Error::other(format!("no node serves slot {slot}")))
    }

    /// `CLUSTER SLOTS` as a running node sees it: first slot, last slot, ports
    /// serving the range (primary first).
    fn slot_ranges(&self) -> io::Result<Vec<(i64, i64, Vec<u16>)>> {
        let ranges: Vec<redis::Value> = self
            .running_node()?
            .admin(redis::cmd("CLUSTER").arg("SLOTS"))?;
        ranges.into_iter().map(slot_range).collect()
    }

    /// Waits until every slot range is served by a primary and all its replicas
    /// (after a start, or once a failed primary rejoined as a replica).
    pub fn wait_replicated(&self) -> io::Result<()> {
        wait_for(
            "every slot range served by a primary and its replicas",
            || {
                let ranges = self.slot_ranges()?;
                let complete = |ports: &Vec<u16>| ports.len() == 1 + self.replicas;
                // A moved slot splits a range: count the primaries, not the ranges.
                let primaries: std::collections::BTreeSet<u16> = ranges
                    .iter()
                    .filter_map(|(_, _, ports)| ports.first().copied())
                    .collect();
                Ok(primaries.len() == PRIMARIES
                    && ranges.iter().all(|(_, _, ports)| complete(ports)))
            },
        )
    }

    /// Promotes node `replica` with `CLUSTER FAILOVER` (which loses nothing: the
    /// primary stops writes until the replica has caught up) and waits until it is
    /// the primary. The replica first waits for its replication link to be up, and
    /// the command is sent again, up to three times, if no promotion follows: Redis
    /// drops a manual failover the replica cannot finish in 5 s (one still catching
    /// up after an earlier fault, say), and in one local CI run no promotion came.
    pub fn fail_over_to(&self, replica: usize) -> io::Result<()> {
        let node = &self.nodes[replica];
        wait_for(
            &format!("replication link up on port {}", node.port()),
            || {
                Ok(node
                    .info_field("replication", "master_link_status")?
                    .as_deref()
                    == Some("up"))
            },
        )?;
        let mut last = None;
        for _ in 0..3 {
            node.admin::<()>(redis::cmd("CLUSTER").arg("FAILOVER"))?;
            match self.wait_promoted(replica) {
                Ok(()) => return Ok(()),
                Err(error) => last = Some(error),
            }
        }
        Err(last.unwrap_or_else(|| io::Error::other("no failover was tried")))
    }

    /// Waits until node `replica` has been promoted to primary (after its primary
    /// failed, or a `CLUSTER FAILOVER`).
    pub fn wait_promoted(&self, replica: usize) -> io::Result<()> {
        let node = &self.nodes[replica];
        wait_for(&format!("port {} promoted to primary", node.port()), || {
            Ok(node.info_field("replication", "role")?.as_deref() == Some("master"))
        })
    }

    /// The indexes of the primaries now.
    pub(crate) fn primaries(&self) -> io::Result<Vec<usize>> {
        let mut ports: Vec<u16> = self
            .slot_ranges()?
            .iter()
            .filter_map(|(_, _, ports)| ports.first().copied())
            .collect();
        ports.sort_unstable();
        ports.dedup();
        ports.into_iter().map(|port| self.index_of(port)).collect()
    }

    fn running_node(&self) -> io::Result<&RedisServer> {
        self.nodes
            .iter()
            .find(|n| n.pid().is_some())
            .ok_or_else(|| io::Error::other("no cluster node runs"))
    }

    fn index_of(&self, port: u16) -> io::Result<usize> {
        self.nodes
            .iter()
            .position(|n| n.port() == port)
            .ok_or_else(|| io::Error::other(format!("port {port} is not one of ours")))
    }
}

/// One entry of `CLUSTER SLOTS`: first slot, last slot, the ports serving it
/// (primary first).
fn slot_range(range: redis::Value) -> io::Result<(i64, i64, Vec<u16>)> {
    let unexpected = || io::Error::other("unexpected CLUSTER SLOTS reply");
    let redis::Value::Array(items) = range else {
        return Err(unexpected());
    };
    let [first, last, servers @ ..] = items.as_slice() else {
        return Err(unexpected());
    };
    let int = |v: &redis::Value| match v {
        redis::Value::Int(n) => Ok(*n),
        _ => Err(unexpected()),
    };
    let port = |server: &redis::Value| match server {
        redis::Value::Array(parts) => parts
            .get(1)
            .ok_or_else(unexpected)
            .and_then(int)
            .and_then(|p| u16::try_from(p).map_err(io::Error::other)),
        _ => Err(unexpected()),
    };
    let ports = servers.iter().map(port).collect::<io::Result<Vec<_>>>()?;
    Ok((int(first)?, int(last)?, ports))
}
