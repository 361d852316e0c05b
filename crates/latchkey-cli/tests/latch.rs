//! `latchkey latch` through the built binary against a real server: arrivals count
//! down, `--wait` returns when the last one lands (or 75 when it does not), and a
//! wrong count is a usage error.

mod common;

use std::process::Stdio;
use std::time::Duration;

use common::{SpawnRunning, latchkey};
use latchkey_testkit::RedisServer;

fn run(server: &RedisServer, args: &[&str]) -> (Option<i32>, String) {
    let output = latchkey(&server.url(), args).output().unwrap();
    let text = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    (output.status.code(), text)
}

#[test]
fn arrivals_open_the_latch_and_wake_a_waiting_process() {
    let server = RedisServer::start().unwrap();
    let mut waiting = latchkey(
        &server.url(),
        &["latch", "loaded", "--count", "2", "--wait", "20s"],
    )
    .stdout(Stdio::null())
    .spawn_running();
    assert_eq!(
        run(&server, &["latch", "loaded", "--count", "2"]),
        (Some(1), "loaded: 2 of 2 left".to_owned())
    );
    assert_eq!(
        run(&server, &["latch", "loaded", "--count", "2", "--arrive"]),
        (Some(0), "loaded: 1 of 2 left".to_owned())
    );
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        waiting.try_wait().unwrap().is_none(),
        "the waiter passed a closed latch"
    );
    assert_eq!(
        run(&server, &["latch", "loaded", "--count", "2", "--arrive"]),
        (Some(0), "loaded: open".to_owned())
    );
    assert_eq!(waiting.wait().unwrap().code(), Some(0));
    assert_eq!(
        run(&server, &["latch", "loaded", "--count", "2"]),
        (Some(0), "loaded: open".to_owned())
    );
}

#[test]
fn a_wait_that_runs_out_is_75_and_a_wrong_count_64() {
    let server = RedisServer::start().unwrap();
    let (status, _) = run(
        &server,
        &[
            "latch", "stage", "--count", "3", "--arrive", "--wait", "200ms",
        ],
    );
    assert_eq!(status, Some(75));
    let output = latchkey(
        &server.url(),
        &["latch", "stage", "--count", "4", "--arrive"],
    )
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(64), "{stderr}");
    assert!(stderr.contains("count 3"), "{stderr}");
    let (status, _) = run(&server, &["latch", "stage", "--count", "0"]);
    assert_eq!(status, Some(64));
}
