//! `latchkey run NAME --and NAME2` through the built binary, against a real server:
//! the command runs holding every lock, with each lock's fencing token; a run that
//! cannot have them all holds none; runs naming the locks in opposite orders take
//! turns without deadlock.

mod common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{SpawnRunning, latchkey};
use latchkey_testkit::RedisServer;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// `latchkey run ARGS -- sh -c SCRIPT`: its exit status.
fn run_status(server: &RedisServer, args: &[&str], script: &str) -> Option<i32> {
    let mut full = vec!["run"];
    full.extend_from_slice(args);
    full.extend_from_slice(&["--", "sh", "-c", script]);
    let output = latchkey(&server.url(), &full).output().unwrap();
    output.status.code()
}

#[test]
fn run_and_holds_every_lock_with_its_fence_or_none() {
    let server = RedisServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let fences = dir.path().join("fences");
    let script = format!(
        "echo \"$LATCHKEY_FENCE|$LATCHKEY_FENCES\" > {f}.tmp; mv {f}.tmp {f}; sleep 30",
        f = fences.display()
    );
    let mut holding = latchkey(
        &server.url(),
        &["run", "b", "--and", "a", "--", "sh", "-c", &script],
    )
    .stderr(Stdio::piped())
    .spawn_running();
    let started = Instant::now();
    while !fences.exists() {
        assert!(started.elapsed() < Duration::from_secs(10), "never ran");
        std::thread::sleep(Duration::from_millis(10));
    }
    let seen = std::fs::read_to_string(&fences).unwrap();
    let (fence, all) = seen.trim().split_once('|').unwrap();
    let all: Vec<u64> = all.split(' ').map(|f| f.parse().unwrap()).collect();
    assert_eq!(all.len(), 2, "{seen}");
    assert_eq!(fence.parse::<u64>().unwrap(), all[0], "NAME's fence first");

    for name in ["a", "b"] {
        let status = run_status(&server, &[name, "--no-wait"], "true");
        assert_eq!(status, Some(75), "{name} was not held");
    }
    // A run that cannot have every lock holds none of them after it gives up.
    let status = run_status(&server, &["c", "--and", "a", "--wait", "200ms"], "true");
    assert_eq!(status, Some(75));
    assert_eq!(run_status(&server, &["c", "--no-wait"], "true"), Some(0));
    // A signal while it waits (in a's line: locks are taken in key order) names
    // every lock it waits for, and leaves none held.
    let waiting = latchkey(
        &server.url(),
        &["run", "c", "--and", "a", "--fair", "--", "true"],
    )
    .stderr(Stdio::piped())
    .spawn_running();
    let mut admin = server.connection().unwrap();
    let started = Instant::now();
    while redis::Commands::zcard::<_, u64>(&mut admin, "{a}:lk:queue").unwrap() == 0 {
        assert!(started.elapsed() < Duration::from_secs(10), "never queued");
        std::thread::sleep(Duration::from_millis(10));
    }
    kill(Pid::from_raw(waiting.id() as i32), Signal::SIGTERM).unwrap();
    let output = waiting.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(143), "{said}");
    assert!(
        said.contains("SIGTERM while waiting for \"c\" and \"a\""),
        "{said}"
    );
    assert_eq!(run_status(&server, &["c", "--no-wait"], "true"), Some(0));

    holding.kill().unwrap();
    let _ = holding.wait();
    // Killed: latchkey's guard is gone; the locks free themselves within the lease.
}

#[test]
fn runs_naming_the_locks_in_opposite_orders_take_turns() {
    let server = RedisServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    // Inside the section: a directory only one process at a time may create.
    let inside = dir.path().join("inside");
    let script = format!(
        "mkdir {d} || exit 99; sleep 0.05; rmdir {d}",
        d = inside.display()
    );
    let orders: [&[&str]; 3] = [
        &["x", "--and", "y"],
        &["y", "--and", "x"],
        &["y", "--and", "z", "--and", "x"],
    ];
    let started = Instant::now();
    std::thread::scope(|scope| {
        for order in orders {
            let (server, script) = (&server, &script);
            scope.spawn(move || {
                for _ in 0..4 {
                    let mut args = order.to_vec();
                    args.extend_from_slice(&["--wait", "60s"]);
                    assert_eq!(run_status(server, &args, script), Some(0), "{order:?}");
                }
            });
        }
    });
    assert!(started.elapsed() < Duration::from_secs(60));
}

/// A lease lost under the second lock is reported under that lock's name.
#[test]
fn a_lost_lease_names_the_lock_that_was_lost() {
    let server = RedisServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ready = dir.path().join("ready");
    let script = format!("touch {}; sleep 30", ready.display());
    let holding = latchkey(
        &server.url(),
        &[
            "run", "a", "--and", "b", "--ttl", "1s", "--", "sh", "-c", &script,
        ],
    )
    .stderr(Stdio::piped())
    .spawn_running();
    let started = Instant::now();
    while !ready.exists() {
        assert!(started.elapsed() < Duration::from_secs(10), "never ran");
        std::thread::sleep(Duration::from_millis(10));
    }
    let broke = latchkey(&server.url(), &["release", "b", "--force"])
        .output()
        .unwrap();
    assert!(broke.status.success());
    let output = holding.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(70), "{stderr}");
    assert!(stderr.contains("the lease on \"b\" was lost"), "{stderr}");
}
