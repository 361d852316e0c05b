//! `latchkey sem run` and `latchkey rw run`, and `status`, `list` and `release
//! --force` on every primitive: end to end through the built binary.

mod common;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{Running, SpawnRunning};
use latchkey_testkit::RedisServer;

fn latchkey(server: &RedisServer, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_latchkey"));
    command
        .env("LATCHKEY_REDIS", server.url())
        .env_remove("LATCHKEY_PREFIX")
        .args(args);
    command
}

fn output(server: &RedisServer, args: &[&str]) -> Output {
    latchkey(server, args).output().unwrap()
}

/// Starts `latchkey ARGS -- sh -c 'touch READY; sleep 30'` without waiting for it.
fn start(server: &RedisServer, args: &[&str], ready: &Path) -> Running {
    let script = format!("touch {}; exec sleep 30", ready.display());
    latchkey(server, args)
        .args(["--", "sh", "-c", &script])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn_running()
}

/// Starts `latchkey ARGS -- sh -c 'touch READY; sleep 30'` and returns once the
/// command runs, so what it takes is held.
fn hold(server: &RedisServer, args: &[&str], dir: &Path, tag: &str) -> Running {
    let ready = dir.join(tag);
    let running = start(server, args, &ready);
    wait_for(&ready);
    running
}

fn wait_for(path: &Path) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn stop(running: Running) {
    drop(running);
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `latchkey ARGS --json`, parsed: one JSON value per line.
fn json(server: &RedisServer, args: &[&str]) -> (Option<i32>, Vec<serde_json::Value>) {
    let out = output(server, &[args, &["--json"]].concat());
    let values = text(&out.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    (out.status.code(), values)
}

#[test]
fn status_list_and_release_see_a_semaphore_its_holders_and_waiters() {
    let server = RedisServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let sem = ["sem", "run", "pool", "--permits", "3", "--ttl", "1s"];
    let mut holder = hold(
        &server,
        &[&sem[..], &["--weight", "2"]].concat(),
        dir.path(),
        "a",
    );
    let waiter_ready = dir.path().join("w");
    let _waiter = start(
        &server,
        &[&sem[..], &["--weight", "3", "--wait", "30s"]].concat(),
        &waiter_ready,
    );
    wait_until(|| text(&output(&server, &["status", "pool"]).stdout).contains("1 waiting"));

    let status = output(&server, &["status", "pool"]);
    let shown = text(&status.stdout);
    assert_eq!(status.status.code(), Some(0), "held: exit 0; {shown}");
    assert!(
        shown.starts_with("pool: semaphore, 2 of 3 permits held by 1 holder, 1 waiting"),
        "{shown}"
    );
    assert!(shown.contains("holds 2 ("), "{shown}");
    assert!(!shown.contains(":lk:"), "no internal key: {shown}");

    let (code, views) = json(&server, &["status", "pool"]);
    assert_eq!(code, Some(0));
    let [view] = &views[..] else {
        panic!("one primitive: {views:?}")
    };
    assert_eq!(view["name"], "pool");
    assert_eq!(view["kind"], "semaphore");
    assert_eq!(view["held"], true);
    assert_eq!(view["permits"], 3);
    assert_eq!(view["used"], 2);
    assert_eq!(view["waiters"], 1);
    assert_eq!(view["holders"][0]["weight"], 2);
    let masked = view["holders"][0]["holder"].as_str().unwrap();
    assert!(
        masked.ends_with('…') && masked.chars().count() == 5,
        "masked: {masked}"
    );

    let listed = text(&output(&server, &["list"]).stdout);
    assert!(
        listed.contains("pool: semaphore, 2 of 3 permits held"),
        "{listed}"
    );
    let (_, lists) = json(&server, &["list"]);
    assert_eq!(lists[0][0]["kind"], "semaphore", "{lists:?}");

    // A full semaphore says so, naming it, not its keys.
    let busy = output(
        &server,
        &[&sem[..], &["--weight", "2", "--no-wait", "--", "true"]].concat(),
    );
    let said = text(&busy.stderr);
    assert_eq!(busy.status.code(), Some(75), "{said}");
    assert!(said.contains("semaphore \"pool\" is busy"), "{said}");
    assert!(
        !said.contains(":lk:") && !said.contains("queued waiter"),
        "{said}"
    );

    // Broken: the line is served at once, and the holder learns it lost its permits.
    let broke = output(&server, &["release", "pool", "--force"]);
    let said = text(&broke.stdout);
    assert!(
        said.starts_with("broke semaphore pool: dropped 2 permits of 1 holder ("),
        "{said}"
    );
    wait_for(&waiter_ready);
    let lost = holder.wait().unwrap();
    assert_eq!(lost.code(), Some(70), "the broken holder's lease is lost");
}

#[test]
fn status_and_release_see_a_read_write_lock_and_a_rate_limit() {
    let server = RedisServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let free = output(&server, &["status", "config"]);
    assert_eq!(free.status.code(), Some(1), "free: exit 1");
    assert_eq!(
        text(&free.stdout).trim(),
        "config: free (no fence, 0 waiting)"
    );

    let writer = hold(
        &server,
        &["rw", "run", "config", "--write", "--ttl", "5s"],
        dir.path(),
        "w",
    );
    let shown = text(&output(&server, &["status", "config"]).stdout);
    assert!(
        shown.starts_with("config: read-write lock, written by "),
        "{shown}"
    );
    let (code, views) = json(&server, &["status", "config"]);
    assert_eq!(
        (code, &views[0]["kind"]),
        (Some(0), &serde_json::json!("rw_lock"))
    );
    let busy = output(
        &server,
        &["rw", "run", "config", "--read", "--no-wait", "--", "true"],
    );
    let said = text(&busy.stderr);
    assert!(
        said.contains("read-write lock \"config\" is busy"),
        "{said}"
    );
    let (_, broke) = json(&server, &["release", "config", "--force"]);
    assert_eq!(broke[0]["kind"], "rw_lock");
    assert_eq!(broke[0]["broken"], true);
    stop(writer);

    let throttle = ["throttle", "sms:1", "--algo", "cooldown", "--per", "1h"];
    assert!(output(&server, &throttle).status.success());
    assert_eq!(
        output(&server, &throttle).status.code(),
        Some(1),
        "over the limit"
    );
    let shown = text(&output(&server, &["status", "sms:1"]).stdout);
    assert!(
        shown.starts_with("sms:1: rate limit (cooldown), 1 used, full again in 59m"),
        "{shown}"
    );
    // A count is not a hold: only --kind rate-limit resets it.
    let kept = text(&output(&server, &["release", "sms:1", "--force"]).stdout);
    assert_eq!(
        kept.trim(),
        "nothing held under sms:1; it keeps a rate limit's state (reset it with --kind rate-limit)"
    );
    // State of a second algorithm under the name: the reset clears and names both.
    let gcra = [
        "throttle", "sms:1", "--algo", "gcra", "--limit", "1", "--per", "1h",
    ];
    assert!(output(&server, &gcra).status.success());
    let reset = output(
        &server,
        &["release", "sms:1", "--force", "--kind", "rate-limit"],
    );
    let reset = text(&reset.stdout);
    assert!(
        reset.starts_with("reset rate limit sms:1 (cooldown)"),
        "{reset}"
    );
    assert!(reset.contains("reset rate limit sms:1 (gcra)"), "{reset}");
    assert!(output(&server, &throttle).status.success(), "allowed again");
    assert!(output(&server, &gcra).status.success(), "allowed again");
}

/// Waits (up to 10 s) until `done` holds.
fn wait_until(mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "timed out");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn sem_run_holds_at_most_the_permits_and_gives_them_back() {
    let server = RedisServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let sem = ["sem", "run", "pool", "--permits", "3", "--ttl", "1s"];
    let two = hold(
        &server,
        &[&sem[..], &["--weight", "2"]].concat(),
        dir.path(),
        "a",
    );
    let one = hold(&server, &sem, dir.path(), "b");
    let full = output(&server, &[&sem[..], &["--no-wait", "--", "true"]].concat());
    assert_eq!(
        full.status.code(),
        Some(75),
        "{}",
        String::from_utf8_lossy(&full.stderr)
    );
    // A killed holder's permits come back within its lease (1 s).
    stop(two);
    let back = output(
        &server,
        &[
            &sem[..],
            &[
                "--weight",
                "2",
                "--wait",
                "5s",
                "--",
                "sh",
                "-c",
                "echo $LATCHKEY_FENCE",
            ],
        ]
        .concat(),
    );
    assert!(
        back.status.success(),
        "{}",
        String::from_utf8_lossy(&back.stderr)
    );
    let fence: u64 = String::from_utf8_lossy(&back.stdout)
        .trim()
        .parse()
        .unwrap();
    assert!(fence > 0);
    stop(one);
    let too_heavy = output(
        &server,
        &[&sem[..], &["--weight", "4", "--", "true"]].concat(),
    );
    assert_eq!(too_heavy.status.code(), Some(64));
}

#[test]
fn rw_run_shares_reads_and_writes_alone() {
    let server = RedisServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let reader = hold(
        &server,
        &["rw", "run", "config", "--read", "--ttl", "1s"],
        dir.path(),
        "r",
    );
    let also = output(
        &server,
        &["rw", "run", "config", "--read", "--no-wait", "--", "true"],
    );
    assert!(
        also.status.success(),
        "{}",
        String::from_utf8_lossy(&also.stderr)
    );
    let writer = output(
        &server,
        &["rw", "run", "config", "--write", "--no-wait", "--", "true"],
    );
    assert_eq!(writer.status.code(), Some(75));
    stop(reader);
    let write = hold(
        &server,
        &["rw", "run", "config", "--write", "--ttl", "1s"],
        dir.path(),
        "w",
    );
    let read = output(
        &server,
        &["rw", "run", "config", "--read", "--no-wait", "--", "true"],
    );
    assert_eq!(read.status.code(), Some(75));
    stop(write);
    for args in [
        &["rw", "run", "config", "--", "true"][..],
        &["rw", "run", "config", "--read", "--write", "--", "true"],
    ] {
        assert_eq!(output(&server, args).status.code(), Some(64), "{args:?}");
    }
}

/// An election's leader and a latch's count show in `status` and `list`, in text
/// and JSON; `release --force` deposes the leader and leaves the latch alone.
#[test]
fn status_list_and_release_see_an_election_and_a_latch() {
    let server = RedisServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let leading = hold(
        &server,
        &["elect", "nightly", "--value", "host-a"],
        dir.path(),
        "leading",
    );
    let arrived = output(&server, &["latch", "gate", "--count", "3", "--arrive"]);
    assert!(arrived.status.success(), "{}", text(&arrived.stderr));

    let out = output(&server, &["status", "nightly"]);
    assert_eq!(out.status.code(), Some(0), "an election's leader is a hold");
    let line = text(&out.stdout);
    assert!(
        line.starts_with("nightly: election, led by \"host-a\" (term "),
        "{line}"
    );
    let (code, views) = json(&server, &["status", "gate"]);
    assert_eq!(code, Some(1), "a latch is a count, not a hold");
    assert_eq!(
        views,
        [serde_json::json!({
            "name": "gate", "kind": "latch", "held": false,
            "left": 2, "count": 3, "open": false,
        })]
    );
    let out = output(&server, &["list"]);
    let listed = text(&out.stdout);
    let lines: Vec<&str> = listed.lines().collect();
    assert_eq!(lines.len(), 2, "{listed}");
    assert_eq!(
        lines[0],
        "gate: latch of 3, closed, 2 of 3 count downs to go"
    );
    assert!(
        lines[1].starts_with("nightly: election, led by"),
        "{listed}"
    );
    let (_, views) = json(&server, &["list"]);
    let election = &views[0][1];
    assert_eq!(election["kind"], "election");
    assert_eq!(election["leader"], "host-a");
    assert!(
        election["term"].as_u64().is_some_and(|t| t > 0),
        "{election}"
    );

    let out = output(&server, &["release", "nightly", "--force"]);
    let said = text(&out.stdout);
    assert!(
        said.starts_with("deposed the leader of election nightly: \"host-a\""),
        "{said}"
    );
    let out = output(&server, &["release", "gate", "--force"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout).trim(),
        "nothing held under gate; it keeps a latch's count (not a hold: nothing to break)"
    );
    let (_, views) = json(&server, &["status", "gate"]);
    assert_eq!(views[0]["left"], 2, "the latch was left alone");
    stop(leading);
}

/// A leader record another client wrote with escape sequences in its value is
/// printed with them replaced, not sent to the terminal.
#[test]
fn leader_prints_a_foreign_value_without_its_escape_sequences() {
    let server = RedisServer::start().unwrap();
    let mut admin = server.connection().unwrap();
    let sha: String = redis::cmd("EVAL")
        .arg("return redis.sha1hex(ARGV[1])")
        .arg(0)
        .arg("owner")
        .query(&mut admin)
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg("{evil}:lk:elect")
        .arg("owner")
        .query(&mut admin)
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg("{evil}:lk:elect:lk:leader")
        .arg(format!("{sha}:5:\x1b[2J\x1b]0;owned\x07host"))
        .query(&mut admin)
        .unwrap();
    let out = output(&server, &["leader", "evil"]);
    let shown = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        !shown.contains('\x1b') && !shown.contains('\x07'),
        "{shown:?}"
    );
    assert!(shown.ends_with("host term 5\n"), "{shown:?}");
}
