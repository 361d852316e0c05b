//! Moving a hash slot between primaries while clients use it, as
//! `redis-cli --cluster reshard` does: the window in which clients meet `ASK`
//! redirections and, for commands and scripts on several keys of which some moved
//! already, `TRYAGAIN`.

use std::io;
use std::time::Duration;

use crate::{RedisCluster, RedisServer};

/// Keys moved per `MIGRATE`: one, so that a lock's keys (lock, queue, fence) are
/// split between the nodes for a while.
const KEYS_PER_MIGRATE: usize = 1;

/// How many batches at most: a slot whose keys keep coming back is given up on
/// (the slot is assigned anyway, which would lose them; never seen).
const MAX_BATCHES: usize = 10_000;

impl RedisCluster {
    /// Moves the hash slot of `key` to another primary: `IMPORTING` on the target,
    /// `MIGRATING` on the source, its keys moved one `MIGRATE` at a time with
    /// `between` in between (clients meet `ASK` and `TRYAGAIN` meanwhile), then
    /// `SETSLOT … NODE` on every primary. Returns the slot and the target's port.
    ///
    /// ```no_run
    /// let cluster = latchkey_testkit::RedisCluster::start()?;
    /// let (slot, port) = cluster.migrate_slot("orders", std::time::Duration::from_millis(5))?;
    /// println!("slot {slot} now on port {port}");
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn migrate_slot(&self, key: &str, between: Duration) -> io::Result<(i64, u16)> {
        let nodes = self.nodes();
        let source = &nodes[self.primary_of(key)?];
        let slot: i64 = source.admin(redis::cmd("CLUSTER").arg("KEYSLOT").arg(key))?;
        let primaries = self.primaries()?;
        let target = primaries
            .iter()
            .map(|&index| &nodes[index])
            .find(|node| node.port() != source.port())
            .ok_or_else(|| io::Error::other("no other primary to move the slot to"))?;
        let (source_id, target_id) = (node_id(source)?, node_id(target)?);
        setslot(target, slot, &["IMPORTING", &source_id])?;
        setslot(source, slot, &["MIGRATING", &target_id])?;
        for _ in 0..MAX_BATCHES {
            let keys: Vec<String> = source.admin(
                redis::cmd("CLUSTER")
                    .arg("GETKEYSINSLOT")
                    .arg(slot)
                    .arg(KEYS_PER_MIGRATE),
            )?;
            if keys.is_empty() {
                break;
            }
            migrate(source, target, &keys)?;
            std::thread::sleep(between);
        }
        // The target first, as redis-cli does: then the source, then the others.
        setslot(target, slot, &["NODE", &target_id])?;
        setslot(source, slot, &["NODE", &target_id])?;
        for &index in &primaries {
            let node = &nodes[index];
            if node.port() != source.port() && node.port() != target.port() {
                setslot(node, slot, &["NODE", &target_id])?;
            }
        }
        Ok((slot, target.port()))
    }
}

fn node_id(node: &RedisServer) -> io::Result<String> {
    node.admin(redis::cmd("CLUSTER").arg("MYID"))
}

fn setslot(node: &RedisServer, slot: i64, how: &[&str]) -> io::Result<()> {
    node.admin(redis::cmd("CLUSTER").arg("SETSLOT").arg(slot).arg(how))
}

/// `MIGRATE` of `keys` from `source` to `target` (atomic per call: each key is on
/// one node or the other, with its expiry). A key gone meanwhile is not an error.
fn migrate(source: &RedisServer, target: &RedisServer, keys: &[String]) -> io::Result<()> {
    source.admin::<redis::Value>(
        redis::cmd("MIGRATE")
            .arg("127.0.0.1")
            .arg(target.port())
            .arg("")
            .arg(0)
            .arg(5_000)
            .arg("KEYS")
            .arg(keys),
    )?;
    Ok(())
}
