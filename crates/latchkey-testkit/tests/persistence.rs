//! Snapshots, append-only files, restarts from each, replication and promotion.

use std::time::{Duration, Instant};

use latchkey_testkit::{RedisServer, Restart};
use redis::Commands;

fn set(server: &RedisServer, key: &str) {
    let () = server.connection().unwrap().set(key, "1").unwrap();
}

fn has(server: &RedisServer, key: &str) -> bool {
    server.connection().unwrap().exists(key).unwrap()
}

fn role(server: &RedisServer) -> String {
    let info: String = redis::cmd("INFO")
        .arg("replication")
        .query(&mut server.connection().unwrap())
        .unwrap();
    let role = info.lines().find_map(|l| l.strip_prefix("role:"));
    role.unwrap().trim().to_owned()
}

/// Writes "saved", snapshots, writes "later", restarts from the snapshot: only
/// "saved" is back.
fn restart_from_a_snapshot_between_two_writes(server: &mut RedisServer) {
    set(server, "saved");
    server.save().unwrap();
    set(server, "later");
    server.restart_from(Restart::Snapshot).unwrap();
    assert!(has(server, "saved"));
    assert!(!has(server, "later"));
}

#[test]
fn an_empty_restart_forgets_even_a_saved_snapshot() {
    let mut server = RedisServer::start().unwrap();
    set(&server, "saved");
    server.save().unwrap();
    server.restart_from(Restart::Empty).unwrap();
    assert!(!has(&server, "saved"));
    set(&server, "again");
    server.save().unwrap();
    server.restart().unwrap();
    assert!(!has(&server, "again"));
}

#[test]
fn a_snapshot_restart_brings_back_only_what_was_saved() {
    let mut server = RedisServer::start().unwrap();
    restart_from_a_snapshot_between_two_writes(&mut server);
}

#[test]
fn a_snapshot_restart_of_an_aof_server_ignores_the_aof_then_keeps_one() {
    let mut server = RedisServer::builder().aof().start().unwrap();
    restart_from_a_snapshot_between_two_writes(&mut server);
    // The append-only file is on again, rewritten from the snapshot's data.
    set(&server, "after");
    std::thread::sleep(Duration::from_millis(1500));
    server.restart_from(Restart::Aof).unwrap();
    assert!(has(&server, "saved"));
    assert!(has(&server, "after"));
    assert!(!has(&server, "later"));
}

#[test]
fn an_aof_restart_keeps_writes_older_than_the_fsync_interval() {
    let mut server = RedisServer::builder().aof().start().unwrap();
    set(&server, "old");
    std::thread::sleep(Duration::from_millis(1500));
    server.restart_from(Restart::Aof).unwrap();
    assert!(has(&server, "old"));
}

#[test]
fn an_aof_restart_needs_an_aof_server() {
    let mut server = RedisServer::start().unwrap();
    let error = server.restart_from(Restart::Aof).unwrap_err();
    assert_eq!(error.kind(), std::io::ErrorKind::InvalidInput);
}

#[test]
fn a_replica_follows_and_a_promoted_one_takes_writes() {
    let primary = RedisServer::start().unwrap();
    let replica = RedisServer::start().unwrap();
    set(&primary, "before");
    replica.replicate(&primary).unwrap();
    assert!(has(&replica, "before"));
    set(&primary, "after");
    let started = Instant::now();
    while !has(&replica, "after") {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "never replicated"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let refused: redis::RedisResult<()> = replica.connection().unwrap().set("mine", "1");
    assert!(refused.is_err(), "a replica must be read-only");
    replica.promote().unwrap();
    assert_eq!(role(&replica), "master");
    set(&replica, "mine");
}

#[test]
fn a_restarted_replica_comes_back_as_a_primary() {
    let primary = RedisServer::start().unwrap();
    let mut replica = RedisServer::start().unwrap();
    replica.replicate(&primary).unwrap();
    assert_eq!(role(&replica), "slave");
    replica.restart_from(Restart::Empty).unwrap();
    assert_eq!(role(&replica), "master");
}
