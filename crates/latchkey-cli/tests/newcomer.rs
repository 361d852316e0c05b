//! Issue "A newcomer's second hour", through the built binary: messages written for
//! an operator (no library internals), scripts without `#!`, bad data as bad data.

mod common;

use std::process::{Command, Output};

use common::SpawnRunning;
use latchkey_testkit::RedisServer;

fn latchkey(redis: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_latchkey"))
        .env("LATCHKEY_REDIS", redis)
        .env_remove("LATCHKEY_PREFIX")
        .args(args)
        .output()
        .unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// A message is one line, and names no Rust item, Debug print or Lua internals.
fn for_an_operator(message: &str) {
    assert_eq!(message.trim_end().lines().count(), 1, "{message}");
    for internal in [
        "()",
        "RedisStore",
        "{ ",
        "user_script",
        "InvalidClientConfig",
        ":;",
    ] {
        assert!(!message.contains(internal), "{internal:?} in {message}");
    }
}

#[test]
fn a_script_without_a_shebang_runs_with_bin_sh() {
    let server = RedisServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("job");
    std::fs::write(&script, "echo fence=$LATCHKEY_FENCE\nexit 3\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let output = latchkey(
        &server.url(),
        &["run", "job", "--", script.to_str().unwrap()],
    );
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    assert!(String::from_utf8_lossy(&output.stdout).starts_with("fence="));
}

#[test]
fn missing_arguments_are_listed_without_a_stray_semicolon() {
    let output = latchkey("redis://127.0.0.1:1", &["run"]);
    assert_eq!(output.status.code(), Some(64));
    let message = stderr(&output);
    assert!(message.contains("provided: <NAME>"), "{message}");
    for_an_operator(&message);
}

#[test]
fn a_plain_server_given_as_a_sentinel_is_named_as_such() {
    let server = RedisServer::start().unwrap();
    let output = latchkey(&server.url(), &["--sentinel", "mymaster", "status", "job"]);
    assert_eq!(output.status.code(), Some(69));
    let message = stderr(&output);
    assert!(message.contains("is not a Redis Sentinel"), "{message}");
    for_an_operator(&message);
}

/// A rate-limit key someone overwrote with text is bad data (65), said in words.
#[test]
fn a_rate_key_overwritten_with_text_is_a_data_error() {
    let server = RedisServer::start().unwrap();
    let mut conn = server.connection().unwrap();
    for (algo, kind) in [("fixed", "rate"), ("gcra", "gcra")] {
        let key = format!("{{api}}:lk:{kind}");
        let _: () = redis::cmd("SET")
            .arg(&key)
            .arg("garbage")
            .query(&mut conn)
            .unwrap();
        let output = latchkey(
            &server.url(),
            &[
                "throttle", "api", "--algo", algo, "--limit", "5", "--per", "1m",
            ],
        );
        assert_eq!(
            output.status.code(),
            Some(65),
            "{algo}: {}",
            stderr(&output)
        );
        for_an_operator(&stderr(&output));
    }
}

#[test]
fn impossible_costs_are_explained_in_words_before_connecting() {
    let server = "redis://127.0.0.1:1";
    let args = [
        "throttle", "api", "--algo", "gcra", "--limit", "5", "--per", "1m",
    ];
    let zero = latchkey(
        server,
        &[&args[..], &["--burst", "2", "--cost", "0"]].concat(),
    );
    assert_eq!(zero.status.code(), Some(64), "{}", stderr(&zero));
    for_an_operator(&stderr(&zero));
    let huge = latchkey(
        server,
        &[&args[..], &["--burst", "2", "--cost", "9"]].concat(),
    );
    assert_eq!(huge.status.code(), Some(64), "{}", stderr(&huge));
    assert!(
        stderr(&huge).contains("GCRA with a burst of 2"),
        "{}",
        stderr(&huge)
    );
    for_an_operator(&stderr(&huge));
}

/// Item 5: `sem run --permits 2` beside holders that said 1 is refused (64), not let
/// in as a second holder.
#[test]
fn a_semaphore_caller_with_another_count_is_refused() {
    let server = RedisServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ready = dir.path().join("ready");
    let script = format!("touch {}; exec sleep 30", ready.display());
    let mut holder = Command::new(env!("CARGO_BIN_EXE_latchkey"))
        .env("LATCHKEY_REDIS", server.url())
        .args([
            "sem",
            "run",
            "pool",
            "--permits",
            "1",
            "--",
            "sh",
            "-c",
            &script,
        ])
        .spawn_running();
    while !ready.exists() {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let other = latchkey(
        &server.url(),
        &[
            "sem",
            "run",
            "pool",
            "--permits",
            "2",
            "--no-wait",
            "--",
            "true",
        ],
    );
    let _ = holder.kill();
    let _ = holder.wait();
    assert_eq!(other.status.code(), Some(64), "{}", stderr(&other));
    let message = stderr(&other);
    assert!(
        message.contains("\"pool\" is in use with 1 permits, not 2"),
        "{message}"
    );
    for_an_operator(&message);
}

/// Item 10: `throttle --wait D` waits for the limit, and exits 1 if it cannot pass
/// within D.
#[test]
fn throttle_can_wait_for_the_limit() {
    let server = RedisServer::start().unwrap();
    let args = ["throttle", "sms:1", "--limit", "1", "--per", "600ms"];
    assert_eq!(latchkey(&server.url(), &args).status.code(), Some(0));
    let hasty = latchkey(&server.url(), &[&args[..], &["--wait", "100ms"]].concat());
    assert_eq!(hasty.status.code(), Some(1), "{}", stderr(&hasty));
    let started = std::time::Instant::now();
    let patient = latchkey(&server.url(), &[&args[..], &["--wait", "5s"]].concat());
    assert_eq!(patient.status.code(), Some(0), "{}", stderr(&patient));
    assert!(started.elapsed() >= std::time::Duration::from_millis(300));
}

/// Item 4: `list` shows what latchkey clients hold; any other string key (a user's
/// name, another library's lock) only with `--foreign`.
#[test]
fn list_shows_latchkey_locks_and_other_keys_only_when_asked() {
    let server = RedisServer::start().unwrap();
    let mut conn = server.connection().unwrap();
    let _: () = redis::cmd("SET")
        .arg("user:1:name")
        .arg("Alice")
        .query(&mut conn)
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ready = dir.path().join("ready");
    let script = format!("touch {}; exec sleep 30", ready.display());
    let mut holder = Command::new(env!("CARGO_BIN_EXE_latchkey"))
        .env("LATCHKEY_REDIS", server.url())
        .args(["run", "nightly", "--", "sh", "-c", &script])
        .spawn_running();
    while !ready.exists() {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let ours = latchkey(&server.url(), &["list"]);
    let all = latchkey(&server.url(), &["list", "--foreign"]);
    let _ = holder.kill();
    let _ = holder.wait();
    let (ours, all) = (
        String::from_utf8_lossy(&ours.stdout).into_owned(),
        String::from_utf8_lossy(&all.stdout).into_owned(),
    );
    assert!(
        ours.contains("nightly") && !ours.contains("user:1:name"),
        "{ours}"
    );
    assert!(
        all.contains("nightly") && all.contains("user:1:name"),
        "{all}"
    );
}
