//! `latchkey acquire`, `extend` and `release --token`: a hold that outlives one
//! command, through the built binary.

mod common;

use common::SpawnRunning;

use std::process::Output;

use latchkey_testkit::RedisServer;

fn run(server: &RedisServer, args: &[&str]) -> Output {
    common::latchkey(&server.url(), args).output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).trim().to_owned()
}

#[test]
fn a_script_takes_extends_and_releases_a_lock_across_commands() {
    let server = RedisServer::start().unwrap();
    let acquired = run(&server, &["acquire", "deploy", "--ttl", "2s"]);
    assert_eq!(
        acquired.status.code(),
        Some(0),
        "{}",
        text(&acquired.stderr)
    );
    let token = text(&acquired.stdout);
    assert!(token.contains(":lk@"), "{token}");
    assert!(
        acquired.stderr.is_empty(),
        "nothing but the token: {}",
        text(&acquired.stderr)
    );

    // Held after the command exited: others are refused; status says so.
    assert_eq!(
        run(&server, &["acquire", "deploy", "--no-wait"])
            .status
            .code(),
        Some(75)
    );
    assert_eq!(run(&server, &["status", "deploy"]).status.code(), Some(0));

    let extended = run(
        &server,
        &["extend", "deploy", "--token", &token, "--ttl", "1m"],
    );
    assert_eq!(
        extended.status.code(),
        Some(0),
        "{}",
        text(&extended.stderr)
    );
    std::thread::sleep(std::time::Duration::from_millis(2200));
    assert_eq!(
        run(&server, &["status", "deploy"]).status.code(),
        Some(0),
        "extended"
    );

    // The token from the environment (kept out of `ps`).
    let released = common::latchkey(&server.url(), &["release", "deploy"])
        .env("LATCHKEY_TOKEN", &token)
        .output()
        .unwrap();
    assert_eq!(
        released.status.code(),
        Some(0),
        "{}",
        text(&released.stderr)
    );
    assert_eq!(
        run(&server, &["status", "deploy"]).status.code(),
        Some(1),
        "free"
    );

    // Spent: a second release or extend says the hold is gone, exit 70.
    for args in [
        &["release", "deploy", "--token", &token][..],
        &["extend", "deploy", "--token", &token],
    ] {
        let again = run(&server, args);
        let said = text(&again.stderr);
        assert_eq!(again.status.code(), Some(70), "{args:?}: {said}");
        assert!(said.contains("no longer held by this token"), "{said}");
        assert!(
            !said.contains(&token[..32]),
            "never echoes the token: {said}"
        );
    }
}

#[test]
fn bad_tokens_and_mixed_flags_are_usage_errors() {
    let server = RedisServer::start().unwrap();
    let json = run(&server, &["acquire", "job", "--json"]);
    let value: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(value["name"], "job");
    assert!(value["fence"].as_u64().unwrap() > 0);
    let token = value["token"].as_str().unwrap().to_owned();
    for args in [
        &["release", "job", "--token", "garbage"][..],
        &["extend", "job", "--token", "abc@1"],
        &["release", "job", "--token", &token, "--kind", "semaphore"],
        &["release", "job"],
    ] {
        let refused = run(&server, args);
        assert_eq!(
            refused.status.code(),
            Some(64),
            "{args:?}: {}",
            text(&refused.stderr)
        );
        assert_eq!(
            text(&refused.stderr).lines().count(),
            1,
            "{}",
            text(&refused.stderr)
        );
    }
    assert_eq!(
        run(&server, &["release", "job", "--token", &token])
            .status
            .code(),
        Some(0)
    );
}

/// A quorum's hold cannot be handed between processes: `acquire` on one is refused
/// before it connects, leaving nothing on any master.
#[test]
fn a_hold_token_on_a_quorum_is_refused_before_anything_is_taken() {
    let servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start().unwrap()).collect();
    let urls: Vec<String> = servers.iter().map(RedisServer::url).collect();
    let quorum = urls.join(",");
    let token = "0123456789abcdef0123456789abcdef:lk";
    for args in [
        &["acquire", "job"][..],
        &["extend", "job", "--token", token],
        &["release", "job", "--token", token],
    ] {
        let refused = common::latchkey(&quorum, args).output().unwrap();
        assert_eq!(
            refused.status.code(),
            Some(64),
            "{args:?}: {}",
            text(&refused.stderr)
        );
        assert!(
            text(&refused.stderr).contains("quorum"),
            "{}",
            text(&refused.stderr)
        );
    }
    for server in &servers {
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg("*")
            .query(&mut server.connection().unwrap())
            .unwrap();
        assert!(keys.is_empty(), "left on a master: {keys:?}");
    }
}

#[test]
fn a_signal_while_acquire_waits_leaves_the_queue() {
    let server = RedisServer::start().unwrap();
    let held = run(&server, &["acquire", "job", "--ttl", "30s"]);
    assert_eq!(held.status.code(), Some(0));
    let mut waiter = common::latchkey(
        &server.url(),
        &["acquire", "job", "--fair", "--wait", "20s"],
    )
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .spawn_running();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !text(&run(&server, &["status", "job"]).stdout).contains("1 waiting") {
        assert!(
            std::time::Instant::now() < deadline,
            "the waiter never queued"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let pid = nix::unistd::Pid::from_raw(i32::try_from(waiter.id()).unwrap());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    let status = waiter.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    assert!(text(&run(&server, &["status", "job"]).stdout).contains("0 waiting"));
    let token = text(&held.stdout);
    let json = run(&server, &["release", "job", "--token", &token, "--json"]);
    let value: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(value["released"], true);
}
