//! Helpers shared by the integration tests.
#![allow(dead_code)] // each test binary uses its own subset

pub mod turns;

use std::time::Duration;

use latchkey::{Client, Lease, Mutex};

/// The lock `name` with a fixed lease.
pub fn fixed(client: &Client, name: &str, ttl: Duration) -> Mutex {
    client
        .mutex(name)
        .unwrap()
        .with_lease(Lease::fixed(ttl).unwrap())
}

/// The lock `name` with a lease the watchdog renews.
pub fn renewed(client: &Client, name: &str, ttl: Duration) -> Mutex {
    client
        .mutex(name)
        .unwrap()
        .with_lease(Lease::renewed(ttl).unwrap())
}

/// What `client.list_all(pattern)` finds: each name with the kind found there.
pub async fn listed(client: &Client, pattern: &str) -> Vec<(String, latchkey::Kind)> {
    client
        .list_all(pattern)
        .await
        .unwrap()
        .into_iter()
        .map(|(name, found)| (name, found.kind()))
        .collect()
}

/// A fresh server and a client of it. Keep the server alive as long as the test.
pub async fn start() -> (latchkey_testkit::RedisServer, Client) {
    let server = latchkey_testkit::RedisServer::start().unwrap();
    let client = Client::open(&server.url()).await.unwrap();
    (server, client)
}

/// A plain multiplexed connection, for checking or poking at the server directly.
pub async fn connect(url: &str) -> redis::aio::MultiplexedConnection {
    redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

/// Resets every command connection of `server` (not pub/sub), as a proxy or load
/// balancer resetting idle sockets does; the caller's own connection is spared.
pub fn reset_connections(server: &latchkey_testkit::RedisServer) {
    let mut admin = server.connection().unwrap();
    let killed: u64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("normal")
        .query(&mut admin)
        .unwrap();
    assert!(killed >= 1, "no connection was reset");
}
