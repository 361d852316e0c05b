//! Every command against a Redis Cluster (`--cluster`), through Sentinel
//! (`--sentinel MASTER`), with `--wait-replicas` and on a quorum of masters
//! (several `--redis`), through the built binary against real servers.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::{Running, SpawnRunning};
use common::{latchkey_ok, readme_acl_line};
use latchkey_testkit::{RedisCluster, RedisServer, Sentinels};

/// `latchkey` with `--redis` set to `urls` (comma-separated, as LATCHKEY_REDIS is).
fn latchkey(urls: &[String], args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_latchkey"))
        .env("LATCHKEY_REDIS", urls.join(","))
        .env_remove("LATCHKEY_PREFIX")
        .args(args)
        .output()
        .unwrap()
}

/// Starts `latchkey run NAME -- sleep 30` with `mode` and returns once it holds.
fn hold(urls: &[String], mode: &[&str], name: &str) -> Running {
    let dir = tempfile::tempdir().unwrap();
    let ready = dir.path().join("ready");
    let script = format!("touch {}; exec sleep 30", ready.display());
    let child = Command::new(env!("CARGO_BIN_EXE_latchkey"))
        .env("LATCHKEY_REDIS", urls.join(","))
        .env_remove("LATCHKEY_PREFIX")
        .args(mode)
        .args(["run", name, "--", "sh", "-c", &script])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn_running();
    let started = Instant::now();
    while !ready.exists() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{name} was never held"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    child
}

fn json(output: &Output) -> serde_json::Value {
    serde_json::from_str(stdout(output).trim())
        .unwrap_or_else(|e| panic!("{e}: {}", stdout(output)))
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Runs `run`, `status`, `list` and `release --force` with `mode` (the flags that
/// pick the deployment) on locks named `names`.
fn every_command(urls: &[String], mode: &[&str], names: &[&str]) {
    let with = |args: &[&str]| latchkey(urls, &[mode, args].concat());
    for name in names {
        let ran = with(&["run", name, "--", "sh", "-c", "echo fence=$LATCHKEY_FENCE"]);
        assert_eq!(ran.status.code(), Some(0), "{}", stderr(&ran));
        assert!(stdout(&ran).contains("fence="), "{}", stdout(&ran));
    }
    let mut holders: Vec<Running> = names.iter().map(|name| hold(urls, mode, name)).collect();
    let status = with(&["status", names[0], "--json"]);
    assert_eq!(status.status.code(), Some(0), "{}", stderr(&status));
    assert_eq!(json(&status)["held"], true, "{}", stdout(&status));
    let listed = with(&["list", "--json"]);
    assert_eq!(listed.status.code(), Some(0), "{}", stderr(&listed));
    for name in names {
        assert!(
            stdout(&listed).contains(&format!("\"{name}\"")),
            "{name} not listed: {}",
            stdout(&listed)
        );
    }
    let throttled = with(&["throttle", "sms:+1555", "--limit", "1", "--per", "60s"]);
    assert_eq!(throttled.status.code(), Some(0), "{}", stderr(&throttled));
    let again = with(&["throttle", "sms:+1555", "--limit", "1", "--per", "60s"]);
    assert_eq!(again.status.code(), Some(1), "{}", stderr(&again));
    let released = with(&["release", names[0], "--force"]);
    assert_eq!(released.status.code(), Some(0), "{}", stderr(&released));
    assert_eq!(json(&with(&["status", names[0], "--json"]))["held"], false);
    for holder in &mut holders {
        let _ = holder.kill();
        let _ = holder.wait();
    }
}

#[test]
fn every_command_works_on_a_cluster() {
    let cluster = RedisCluster::start().unwrap();
    // Names whose slots live on different primaries.
    let names = ["alpha", "bravo", "charlie", "delta", "echo"];
    let primaries: std::collections::HashSet<usize> = names
        .iter()
        .map(|n| cluster.primary_of(n).unwrap())
        .collect();
    assert!(primaries.len() > 1);
    // Held on several primaries at once: `list` walks them all.
    every_command(&cluster.seeds(), &["--cluster"], &names);
}

/// One cluster node given without `--cluster`: latchkey locks on its cluster, as
/// `redis-cli -c` would, instead of following MOVED for ever.
#[test]
fn one_cluster_node_without_cluster_locks_on_its_cluster() {
    let cluster = RedisCluster::start().unwrap();
    let one = vec![cluster.seeds()[0].clone()];
    // Keys on every primary, so most are MOVED from the node given.
    let names: Vec<String> = (0..12).map(|n| format!("job:{n}")).collect();
    for name in &names {
        let started = Instant::now();
        let ran = latchkey(&one, &["run", name, "--wait", "10s", "--", "true"]);
        assert_eq!(ran.status.code(), Some(0), "{name}: {}", stderr(&ran));
        assert!(started.elapsed() < Duration::from_secs(10), "{name} hung");
    }
    // Three nodes of one cluster are not a quorum: a clear usage error, at once.
    let three: Vec<String> = cluster.seeds().into_iter().take(3).collect();
    let quorum = latchkey(&three, &["run", "job", "--wait", "3s", "--", "true"]);
    assert_eq!(quorum.status.code(), Some(64), "{}", stderr(&quorum));
    assert!(
        stderr(&quorum).contains("Redis Cluster node"),
        "{}",
        stderr(&quorum)
    );
}

/// A quorum refuses a replica and a master given twice under two names.
#[test]
fn a_quorum_refuses_replicas_and_a_master_given_twice() {
    let masters: Vec<RedisServer> = (0..3).map(|_| RedisServer::start().unwrap()).collect();
    let replica = RedisServer::start().unwrap();
    replica.replicate(&masters[0]).unwrap();
    let urls = |servers: &[&RedisServer]| servers.iter().map(|s| s.url()).collect::<Vec<_>>();
    let with_replica = latchkey(
        &urls(&[&masters[0], &masters[1], &replica]),
        &["run", "job", "--", "true"],
    );
    assert_eq!(
        with_replica.status.code(),
        Some(64),
        "{}",
        stderr(&with_replica)
    );
    assert!(
        stderr(&with_replica).contains("replica"),
        "{}",
        stderr(&with_replica)
    );
    let twice = vec![
        masters[0].url(),
        masters[1].url(),
        format!("redis://localhost:{}", masters[0].port()),
    ];
    let output = latchkey(&twice, &["run", "job", "--", "true"]);
    assert_eq!(output.status.code(), Some(64), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("same server"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn the_readme_acl_line_is_enough_on_a_cluster() {
    let (user, password, rules) = readme_acl_line();
    let node = RedisServer::builder().user(&user, &password, &rules);
    let cluster = RedisCluster::start_with(node).unwrap();
    let seeds: Vec<String> = cluster
        .nodes()
        .iter()
        .map(|n| n.url_as(&user, &password))
        .collect();
    let seeds = seeds.join(",");
    let as_user = |args: &[&str]| latchkey_ok(&seeds, &[&["--cluster"], args].concat());
    as_user(&["--wait-replicas", "1", "run", "job", "--", "true"]);
    as_user(&["run", "{tagged}job", "--fair", "--", "true"]);
    as_user(&["list", "--json"]);
    as_user(&["status", "job", "--json"]);
    as_user(&["release", "job", "--force"]);
    as_user(&["throttle", "sms:1", "--limit", "1", "--per", "1m"]);
}

#[test]
fn every_command_works_through_sentinel() {
    let set = Sentinels::start().unwrap();
    every_command(
        &set.urls(),
        &["--sentinel", set.master_name()],
        &["alpha", "bravo"],
    );
}

#[test]
fn wait_replicas_confirms_or_fails_clearly() {
    let primary = RedisServer::start().unwrap();
    let replica = RedisServer::start().unwrap();
    replica.replicate(&primary).unwrap();
    let urls = [primary.url()];
    let ok = latchkey(
        &urls,
        &["--wait-replicas", "1", "run", "payout", "--", "true"],
    );
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    let too_many = latchkey(
        &urls,
        &[
            "--wait-replicas",
            "2",
            "run",
            "payout",
            "--wait",
            "2s",
            "--",
            "true",
        ],
    );
    assert_eq!(too_many.status.code(), Some(69), "{}", stderr(&too_many));
    assert!(
        stderr(&too_many).contains("fewer than the 2 asked for"),
        "{}",
        stderr(&too_many)
    );
    let too_long = latchkey(
        &urls,
        &[
            "--wait-replicas",
            "1",
            "--wait-timeout",
            "600ms",
            "status",
            "payout",
        ],
    );
    assert_eq!(too_long.status.code(), Some(64), "{}", stderr(&too_long));
}

#[test]
fn several_urls_are_a_quorum_of_an_odd_number() {
    let urls = [
        "redis://127.0.0.1:1".to_owned(),
        "redis://127.0.0.1:2".to_owned(),
    ];
    let output = latchkey(&urls, &["status", "job"]);
    assert_eq!(output.status.code(), Some(64), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("odd number, at least 3"),
        "{}",
        stderr(&output)
    );
    let output = latchkey(&[], &["--cluster", "--sentinel", "m", "status", "job"]);
    assert_eq!(output.status.code(), Some(64));
}

#[test]
fn every_lock_command_works_on_a_quorum_with_a_master_stopped() {
    let masters: Vec<RedisServer> = (0..3).map(|_| RedisServer::start().unwrap()).collect();
    let urls: Vec<String> = masters.iter().map(RedisServer::url).collect();
    masters[1].pause().unwrap();
    let ran = latchkey(
        &urls,
        &[
            "run",
            "report",
            "--",
            "sh",
            "-c",
            "echo fence=$LATCHKEY_FENCE",
        ],
    );
    assert_eq!(ran.status.code(), Some(0), "{}", stderr(&ran));
    assert!(stdout(&ran).contains("fence="), "{}", stdout(&ran));
    let mut holder = hold(&urls, &[], "report");
    let status = json(&latchkey(&urls, &["status", "report", "--json"]));
    assert_eq!(status["held"], true, "{status}");
    let listed = latchkey(&urls, &["list", "--json"]);
    assert!(
        stdout(&listed).contains("\"report\""),
        "{}",
        stdout(&listed)
    );
    let busy = latchkey(&urls, &["run", "report", "--no-wait", "--", "true"]);
    assert_eq!(busy.status.code(), Some(75), "{}", stderr(&busy));
    let released = latchkey(&urls, &["release", "report", "--force"]);
    assert_eq!(released.status.code(), Some(0), "{}", stderr(&released));
    assert_eq!(
        json(&latchkey(&urls, &["status", "report", "--json"]))["held"],
        false
    );
    let _ = holder.kill();
    let _ = holder.wait();
    masters[1].resume().unwrap();
}

#[test]
fn a_quorum_refuses_what_it_cannot_do_and_names_the_masters_it_lacks() {
    let masters: Vec<RedisServer> = (0..3).map(|_| RedisServer::start().unwrap()).collect();
    let urls: Vec<String> = masters.iter().map(RedisServer::url).collect();
    let fair = latchkey(&urls, &["run", "job", "--fair", "--", "true"]);
    assert_eq!(fair.status.code(), Some(64), "{}", stderr(&fair));
    assert!(stderr(&fair).contains("fair (FIFO)"), "{}", stderr(&fair));
    let throttled = latchkey(&urls, &["throttle", "sms:1", "--limit", "1", "--per", "1m"]);
    assert_eq!(throttled.status.code(), Some(64), "{}", stderr(&throttled));
    masters[0].pause().unwrap();
    masters[2].pause().unwrap();
    let lacking = latchkey(&urls, &["run", "job", "--wait", "300ms", "--", "true"]);
    assert_ne!(lacking.status.code(), Some(0));
    for master in [&masters[0], &masters[2]] {
        let port = master.port().to_string();
        assert!(stderr(&lacking).contains(&port), "{}", stderr(&lacking));
    }
    masters[0].resume().unwrap();
    masters[2].resume().unwrap();
}
