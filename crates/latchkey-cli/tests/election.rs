//! `latchkey elect` and `latchkey leader` through the built binary, against a real
//! server: the command runs as leader with its term, one leader at a time, a lost
//! leadership stops the command, and `leader --watch` prints every change.

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{SpawnRunning, latchkey};
use latchkey_testkit::RedisServer;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// Waits until `path` exists (10 s at most) and returns what it holds.
fn written(path: &Path) -> String {
    let started = Instant::now();
    loop {
        if let Ok(text) = std::fs::read_to_string(path)
            && text.ends_with('\n')
        {
            return text.trim().to_owned();
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{} never written",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `latchkey leader NAME`: its exit status and what it printed.
fn leader(server: &RedisServer, name: &str) -> (Option<i32>, String) {
    let output = latchkey(&server.url(), &["leader", name]).output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    (output.status.code(), stdout)
}

#[test]
fn elect_runs_the_command_as_the_one_leader_with_its_term() {
    let server = RedisServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let term_file = dir.path().join("term");
    let script = format!(
        "echo \"$LATCHKEY_TERM $LATCHKEY_LEADER $LATCHKEY_FENCE\" > {}; sleep 30",
        term_file.display()
    );
    let mut leading = latchkey(
        &server.url(),
        &[
            "elect", "jobs", "--value", "host-a", "--", "sh", "-c", &script,
        ],
    )
    .stderr(Stdio::piped())
    .spawn_running();
    let seen = written(&term_file);
    let mut words = seen.split(' ');
    let term: u64 = words.next().unwrap().parse().unwrap();
    assert_eq!(words.next(), Some("host-a"));
    assert_eq!(
        words.next(),
        Some(term.to_string().as_str()),
        "LATCHKEY_FENCE is the term"
    );
    assert_eq!(
        leader(&server, "jobs"),
        (Some(0), format!("host-a term {term}"))
    );

    let second = latchkey(&server.url(), &["elect", "jobs", "--no-wait", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(second.status.code(), Some(75), "{second:?}");

    // TERM goes to the command, which ends; latchkey resigns on its way out.
    kill(Pid::from_raw(leading.id() as i32), Signal::SIGTERM).unwrap();
    let status = leading.wait().unwrap();
    assert_eq!(status.code(), Some(128 + 15));
    assert_eq!(leader(&server, "jobs"), (Some(1), "no leader".to_owned()));
}

#[test]
fn a_lost_leadership_stops_the_command() {
    let server = RedisServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ready = dir.path().join("ready");
    let script = format!("echo > {}; sleep 30", ready.display());
    let leading = latchkey(
        &server.url(),
        &[
            "elect",
            "jobs",
            "--ttl",
            "1s",
            "--kill-after",
            "1s",
            "--",
            "sh",
            "-c",
            &script,
        ],
    )
    .stderr(Stdio::piped())
    .spawn_running();
    written(&ready);
    // An operator breaks the election's lock: the next renewal finds it gone.
    let _: () = redis::cmd("DEL")
        .arg("{jobs}:lk:elect")
        .query(&mut server.connection().unwrap())
        .unwrap();
    let output = leading.wait_with_output().unwrap();
    assert_eq!(
        output.status.code(),
        Some(70),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn leader_watch_prints_every_change() {
    let server = RedisServer::start().unwrap();
    let mut watching = latchkey(&server.url(), &["leader", "jobs", "--watch"])
        .stdout(Stdio::piped())
        .spawn_running();
    let mut lines = BufReader::new(watching.stdout.take().unwrap()).lines();
    let mut next = || lines.next().unwrap().unwrap();
    assert_eq!(next(), "no leader");
    for value in ["host-a", "host-b"] {
        let status = latchkey(
            &server.url(),
            &["elect", "jobs", "--value", value, "--", "sleep", "0.5"],
        )
        .status()
        .unwrap();
        assert!(status.success());
    }
    let a = next();
    assert!(a.starts_with("host-a term "), "{a}");
    assert_eq!(next(), "no leader");
    let b = next();
    assert!(b.starts_with("host-b term "), "{b}");
    assert_eq!(next(), "no leader");
    let term = |line: &str| line.rsplit(' ').next().unwrap().parse::<u64>().unwrap();
    assert!(term(&b) > term(&a), "{b} after {a}");
    kill(Pid::from_raw(watching.id() as i32), Signal::SIGINT).unwrap();
    assert_eq!(watching.wait().unwrap().code(), Some(128 + 2));
}

#[test]
fn an_election_on_a_quorum_is_a_usage_error() {
    let urls = "redis://127.0.0.1:1,redis://127.0.0.1:2,redis://127.0.0.1:3";
    let output = latchkey(urls, &["leader", "jobs"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(64), "{stderr}");
    assert!(stderr.contains("one Redis deployment"), "{stderr}");
}
