//! `latchkey sem run` and `latchkey rw run`: end to end through the built binary.

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

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

/// Starts `latchkey ARGS -- sh -c 'touch READY; sleep 30'` and returns once the
/// command runs, so what it takes is held.
fn hold(server: &RedisServer, args: &[&str], dir: &Path, tag: &str) -> Child {
    let ready = dir.join(tag);
    let script = format!("touch {}; exec sleep 30", ready.display());
    let child = latchkey(server, args)
        .args(["--", "sh", "-c", &script])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(&ready);
    child
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

fn stop(mut child: Child) {
    child.kill().unwrap();
    child.wait().unwrap();
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
