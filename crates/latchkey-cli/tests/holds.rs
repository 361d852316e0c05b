//! `latchkey run` ends with its lock: the command's whole process group is stopped
//! when the lease is lost or latchkey is killed, and the release after the command
//! lands through a connection reset. Each test is the regression test of one defect
//! of issue "Holds that end cleanly", through the built binary.

mod common;

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Running, SpawnRunning};
use latchkey_testkit::RedisServer;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// `latchkey run ARGS -- sh -c SCRIPT` against `server`, in the background.
fn run(server: &RedisServer, args: &[&str], script: &str) -> Running {
    Command::new(env!("CARGO_BIN_EXE_latchkey"))
        .env("LATCHKEY_REDIS", server.url())
        .env_remove("LATCHKEY_PREFIX")
        .arg("run")
        .args(args)
        .args(["--", "sh", "-c", script])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn_running()
}

/// A command that starts a grandchild (`sleep 60` in the background), writes its
/// own pid and the grandchild's, and waits.
fn family(dir: &Path) -> (String, PathBuf, PathBuf) {
    let (child, grandchild) = (dir.join("child"), dir.join("grandchild"));
    let script = format!(
        "sleep 60 & echo $! > {g}.tmp; mv {g}.tmp {g}; echo $$ > {c}.tmp; mv {c}.tmp {c}; wait",
        g = grandchild.display(),
        c = child.display()
    );
    (script, child, grandchild)
}

/// The pid written in `path`, once it is there (10 s at most).
fn pid_in(path: &Path) -> Pid {
    let started = Instant::now();
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            return Pid::from_raw(text.trim().parse().unwrap());
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Whether `pid` is a live process (a zombie waiting for its parent counts as gone).
fn alive(pid: Pid) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z') && !rest.starts_with('X')),
        Err(_) => false,
    }
}

/// Polls until none of `pids` is alive; false if some still are after `limit`.
fn all_gone_within(pids: &[Pid], limit: Duration) -> bool {
    let started = Instant::now();
    while started.elapsed() < limit {
        if !pids.iter().any(|&p| alive(p)) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

/// Kills whatever of `pids` is left, so a failing test leaves nothing running.
fn cleanup(pids: &[Pid]) {
    for &pid in pids {
        let _ = kill(pid, Signal::SIGKILL);
    }
}

#[test]
fn a_lost_lease_stops_the_commands_grandchildren_too() {
    let server = RedisServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (script, child, grandchild) = family(dir.path());
    let latchkey = run(
        &server,
        &["job", "--ttl", "1s", "--kill-after", "1s"],
        &script,
    );
    let pids = [pid_in(&child), pid_in(&grandchild)];
    // An operator breaks the lock: the next renewal finds it gone.
    let _: () = redis::cmd("DEL")
        .arg("job")
        .query(&mut server.connection().unwrap())
        .unwrap();
    let output = latchkey.wait_with_output().unwrap();
    let stopped = all_gone_within(&pids, Duration::from_secs(2));
    cleanup(&pids);
    assert_eq!(output.status.code(), Some(70));
    assert!(stopped, "the command's children outlived the lease");
}

#[test]
fn a_grandchild_that_ignores_sigterm_is_killed_after_kill_after() {
    let server = RedisServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let grandchild = dir.path().join("grandchild");
    let script = format!(
        "sh -c 'trap \"\" TERM; echo $$ > {g}.tmp; mv {g}.tmp {g}; while :; do sleep 0.05; done' & wait",
        g = grandchild.display()
    );
    let latchkey = run(
        &server,
        &["job", "--ttl", "1s", "--kill-after", "500ms"],
        &script,
    );
    let stubborn = pid_in(&grandchild);
    let _: () = redis::cmd("DEL")
        .arg("job")
        .query(&mut server.connection().unwrap())
        .unwrap();
    let output = latchkey.wait_with_output().unwrap();
    let stopped = all_gone_within(&[stubborn], Duration::from_secs(1));
    cleanup(&[stubborn]);
    assert_eq!(output.status.code(), Some(70));
    assert!(
        stopped,
        "a grandchild ignoring SIGTERM outlived --kill-after"
    );
}

/// A shell script that starts a worker in the background (which, as every `&` job
/// of a non-interactive shell, ignores INT and QUIT), writes the worker's pid, and
/// waits. (The worker writes nowhere: holding latchkey's output open, it would keep
/// a test reading that output waiting as long as it lives.)
fn with_worker(dir: &Path) -> (String, PathBuf) {
    let worker = dir.join("worker");
    let script = format!(
        "sh -c 'echo $$ > {w}.tmp; mv {w}.tmp {w}; while :; do sleep 0.05; done' > /dev/null 2>&1 & wait",
        w = worker.display()
    );
    (script, worker)
}

/// A command deaf to `signals` (as `trap` names them) that writes its pid and loops.
fn deaf_to(dir: &Path, signals: &str) -> (String, PathBuf) {
    let deaf = dir.join("deaf");
    let script = format!(
        "trap '' {signals}; echo $$ > {d}.tmp; mv {d}.tmp {d}; while :; do sleep 0.05; done",
        d = deaf.display()
    );
    (script, deaf)
}

/// Whether the lock `name` is held in `server`.
fn held(server: &RedisServer, name: &str) -> bool {
    redis::cmd("EXISTS")
        .arg(name)
        .query(&mut server.connection().unwrap())
        .unwrap()
}

/// Waits (10 s at most) for latchkey to exit; its status and what it said, or
/// `None` if it still runs. `check` runs at every poll meanwhile.
fn exit_of(latchkey: &mut Running, mut check: impl FnMut()) -> Option<(Option<i32>, String)> {
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(10) {
        check();
        if let Some(status) = latchkey.try_wait().unwrap() {
            let mut stderr = String::new();
            if let Some(mut pipe) = latchkey.stderr.take() {
                std::io::Read::read_to_string(&mut pipe, &mut stderr).unwrap();
            }
            return Some((status.code(), stderr));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    None
}

/// Told to stop (Ctrl-C), latchkey passes INT on; what the command left running
/// and deaf to INT is stopped (SIGTERM) before the lock is freed, so the next
/// holder never overlaps it.
#[test]
fn a_stop_signal_stops_what_the_command_left_running_before_the_lock_is_freed() {
    let server = RedisServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (script, worker) = with_worker(dir.path());
    let mut latchkey = run(&server, &["job", "--kill-after", "5s"], &script);
    let worker = pid_in(&worker);
    kill(Pid::from_raw(latchkey.id() as i32), Signal::SIGINT).unwrap();
    // Never the lock free while the worker runs: lock first, then the worker.
    let mut overlapped = false;
    let exited = exit_of(&mut latchkey, || {
        overlapped |= !held(&server, "job") && alive(worker);
    });
    let outlived = alive(worker);
    cleanup(&[worker]);
    let (code, stderr) = exited.expect("latchkey still runs");
    assert_eq!(code, Some(130), "{stderr}");
    assert!(!overlapped, "the lock was free while the worker ran");
    assert!(!outlived, "the command's worker outlived latchkey");
    assert!(!held(&server, "job"), "the lock outlived latchkey");
}

/// A command deaf to the signal that tells latchkey to stop gets SIGKILL after
/// `--kill-after`: the lock is not kept for ever by a command that ignores TERM.
#[test]
fn a_command_deaf_to_a_stop_signal_is_killed_after_kill_after() {
    let server = RedisServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (script, deaf) = deaf_to(dir.path(), "TERM");
    let mut latchkey = run(&server, &["job", "--kill-after", "300ms"], &script);
    let deaf = pid_in(&deaf);
    kill(Pid::from_raw(latchkey.id() as i32), Signal::SIGTERM).unwrap();
    let exited = exit_of(&mut latchkey, || {});
    let outlived = alive(deaf);
    cleanup(&[deaf]);
    let (code, stderr) = exited.expect("latchkey still runs");
    assert_eq!(code, Some(128 + 9), "{stderr}");
    assert!(!outlived, "the command outlived latchkey");
    assert!(!held(&server, "job"), "the lock outlived latchkey");
}

/// A second stop signal does not wait for `--kill-after`: the command deaf to the
/// first is killed at once. (INT, then TERM: two of one kind that arrive before
/// latchkey reads the first may be read as one.)
#[test]
fn a_second_stop_signal_kills_at_once() {
    let server = RedisServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (script, deaf) = deaf_to(dir.path(), "INT TERM");
    let mut latchkey = run(&server, &["job", "--kill-after", "60s"], &script);
    let deaf = pid_in(&deaf);
    let me = Pid::from_raw(latchkey.id() as i32);
    kill(me, Signal::SIGINT).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    kill(me, Signal::SIGTERM).unwrap();
    let exited = exit_of(&mut latchkey, || {});
    let outlived = alive(deaf);
    cleanup(&[deaf]);
    let (code, stderr) = exited.expect("latchkey still runs: the second signal waited");
    assert_eq!(code, Some(128 + 9), "{stderr}");
    assert!(!outlived, "the command outlived latchkey");
}

/// A lease lost while the command runs is reported (exit 70) even when the command
/// ends before a renewal noticed: the release finds the lock gone, and its work may
/// overlap the next holder's.
#[test]
fn a_lease_lost_before_the_command_ends_is_reported_by_the_release() {
    let server = RedisServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (started, go) = (dir.path().join("started"), dir.path().join("go"));
    // It ends once told to, after the lock is broken.
    let script = format!(
        "echo $$ > {s}.tmp; mv {s}.tmp {s}; while [ ! -e {g} ]; do sleep 0.02; done",
        s = started.display(),
        g = go.display()
    );
    let latchkey = run(&server, &["job", "--ttl", "30s"], &script);
    pid_in(&started);
    // An operator breaks the lock; the next renewal is 10 s away.
    let _: () = redis::cmd("DEL")
        .arg("job")
        .query(&mut server.connection().unwrap())
        .unwrap();
    std::fs::write(&go, "").unwrap();
    let output = latchkey.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(70), "{stderr}");
    assert!(
        stderr.contains("was lost before latchkey could release it"),
        "{stderr}"
    );
}

/// flock(1) semantics under SIGKILL: the command and its children die with
/// latchkey, before a second holder can start after the lease.
#[test]
fn a_killed_latchkey_takes_its_command_and_grandchildren_with_it() {
    let server = RedisServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (script, child, grandchild) = family(dir.path());
    let mut latchkey = run(&server, &["job", "--ttl", "1s"], &script);
    let pids = [pid_in(&child), pid_in(&grandchild)];
    kill(Pid::from_raw(latchkey.id() as i32), Signal::SIGKILL).unwrap();
    latchkey.wait().unwrap();
    let stopped = all_gone_within(&pids, Duration::from_millis(500));
    // The next holder gets the lock once the lease ends; nothing of the first is left.
    let next = Command::new(env!("CARGO_BIN_EXE_latchkey"))
        .env("LATCHKEY_REDIS", server.url())
        .args(["run", "job", "--wait", "10s", "--", "true"])
        .output()
        .unwrap();
    let still = pids.iter().filter(|&&p| alive(p)).count();
    cleanup(&pids);
    assert!(
        stopped,
        "the command outlived latchkey by more than 500 ms: {:?}",
        pids.map(|p| std::fs::read_to_string(format!("/proc/{p}/stat")))
    );
    assert!(next.status.success(), "{next:?}");
    assert_eq!(still, 0);
}

/// The release after the command meets a reset connection (a proxy resetting idle
/// sockets): it is retried, and the lock is free when latchkey exits, not 30 s later.
#[test]
fn the_release_after_the_command_rides_out_a_connection_reset() {
    let server = RedisServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ready = dir.path().join("ready");
    let latchkey = run(
        &server,
        &["job"],
        &format!("touch {}; sleep 0.5", ready.display()),
    );
    let started = Instant::now();
    while !ready.exists() {
        assert!(started.elapsed() < Duration::from_secs(10));
        std::thread::sleep(Duration::from_millis(10));
    }
    let killed: u64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("normal")
        .query(&mut server.connection().unwrap())
        .unwrap();
    assert!(killed >= 1);
    let output = latchkey.wait_with_output().unwrap();
    assert!(output.status.success(), "{output:?}");
    let held: bool = redis::cmd("EXISTS")
        .arg("job")
        .query(&mut server.connection().unwrap())
        .unwrap();
    assert!(
        !held,
        "the lock was left for its lease: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Runs `latchkey ARGS` with no Redis anywhere near and returns its exit status.
fn status_of(args: &[&str]) -> Option<i32> {
    Command::new(env!("CARGO_BIN_EXE_latchkey"))
        .args(args)
        .output()
        .unwrap()
        .status
        .code()
}

/// Issue "Holds that end cleanly", item 6: unavailability is 69, whatever the
/// deployment; arguments are checked before connecting (64 with no server up).
#[test]
fn unavailable_is_69_and_bad_arguments_are_64_before_connecting() {
    let nowhere = ["--redis", "redis://127.0.0.1:1"];
    let quorum = [
        "--redis",
        "redis://127.0.0.1:1,redis://127.0.0.1:2,redis://127.0.0.1:3",
        "run",
        "x",
        "--",
        "true",
    ];
    assert_eq!(status_of(&quorum), Some(69), "a quorum without a majority");
    let sentinel = [
        &nowhere[..],
        &["--sentinel", "mymaster", "run", "x", "--", "true"],
    ]
    .concat();
    assert_eq!(status_of(&sentinel), Some(69), "no Sentinel answers");
    let not_a_sentinel = RedisServer::start().unwrap();
    let url = not_a_sentinel.url();
    let wrong = [
        "--redis",
        &url,
        "--sentinel",
        "mymaster",
        "run",
        "x",
        "--",
        "true",
    ];
    assert_eq!(
        status_of(&wrong),
        Some(69),
        "a --sentinel URL that is a plain server"
    );
    let permits = [
        &nowhere[..],
        &[
            "sem",
            "run",
            "p",
            "--permits",
            "2000000000000000000",
            "--",
            "true",
        ],
    ]
    .concat();
    assert_eq!(status_of(&permits), Some(64), "--permits above the maximum");
    let replica_wait = [
        &nowhere[..],
        &[
            "--wait-replicas",
            "1",
            "--wait-timeout",
            "5s",
            "run",
            "x",
            "--",
            "true",
        ],
    ]
    .concat();
    assert_eq!(
        status_of(&replica_wait),
        Some(64),
        "--wait-timeout above 500ms"
    );
    let token = "00c384c8c930d5c728f5c5fc9acc9307:lk";
    let extension = [
        &nowhere[..],
        &["extend", "x", "--token", token, "--ttl", "1ms"],
    ]
    .concat();
    assert_eq!(status_of(&extension), Some(64), "an extension of 1ms");
}

/// Item 6: `--wait D` covers connecting: a run started while Redis is down (a
/// restart, a failover) takes the lock once Redis is back, within its wait.
#[test]
fn a_run_started_while_redis_is_down_waits_for_it_within_wait() {
    let port = latchkey_testkit::free_port().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ran = dir.path().join("ran");
    let latchkey = Command::new(env!("CARGO_BIN_EXE_latchkey"))
        .env("LATCHKEY_REDIS", format!("redis://127.0.0.1:{port}"))
        .args(["run", "job", "--wait", "20s", "--", "touch"])
        .arg(&ran)
        .stderr(Stdio::piped())
        .spawn_running();
    std::thread::sleep(Duration::from_millis(800));
    let server = RedisServer::builder().start_on(port).unwrap();
    let output = latchkey.wait_with_output().unwrap();
    drop(server);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(ran.exists());
    assert!(String::from_utf8_lossy(&output.stderr).contains("trying again until --wait runs out"));
}

/// With Redis down, `--wait D` retries until D runs out, not until one backoff pause
/// before it (a Redis back just before the end would be missed).
#[test]
fn an_unreachable_redis_is_retried_for_the_whole_wait() {
    let port = latchkey_testkit::free_port().unwrap();
    let waits: [&[&str]; 3] = [
        &["run", "job", "--wait", "1500ms", "--", "true"],
        &[
            "throttle", "sms", "--limit", "1", "--per", "1s", "--wait", "1500ms",
        ],
        &[
            "latch", "loaded", "--count", "2", "--arrive", "--wait", "1500ms",
        ],
    ];
    for args in waits {
        let started = Instant::now();
        let output = Command::new(env!("CARGO_BIN_EXE_latchkey"))
            .env("LATCHKEY_REDIS", format!("redis://127.0.0.1:{port}"))
            .args(args)
            .output()
            .unwrap();
        let waited = started.elapsed();
        assert_eq!(output.status.code(), Some(69), "{args:?}: {output:?}");
        assert!(
            waited >= Duration::from_millis(1500),
            "{args:?} gave up after {waited:?}"
        );
    }
}

/// `latch --arrive --wait D` waits D in all: an arrival that Redis held up (a
/// paused server) counts against the wait, which does not start again after it.
#[test]
fn a_latch_arrival_held_up_counts_against_the_wait() {
    let server = RedisServer::start().unwrap();
    let started = Instant::now();
    server.pause().unwrap();
    let barrier = Command::new(env!("CARGO_BIN_EXE_latchkey"))
        .env("LATCHKEY_REDIS", server.url())
        .args(["latch", "gate", "--count", "2", "--arrive", "--wait", "2s"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn_running();
    std::thread::sleep(Duration::from_millis(1500));
    server.resume().unwrap();
    let output = barrier.wait_with_output().unwrap();
    let waited = started.elapsed();
    assert_eq!(output.status.code(), Some(75), "{output:?}");
    assert!(
        waited < Duration::from_millis(3200),
        "a 2s wait took {waited:?} (the arrival took 1.5s)"
    );
    let left: String =
        redis::Commands::get(&mut server.connection().unwrap(), "{gate}:lk:latch").unwrap();
    assert!(left.starts_with("1:"), "{left}");
}

#[test]
fn max_hold_stops_a_command_that_runs_too_long_and_frees_the_lock() {
    let server = RedisServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (script, child, grandchild) = family(dir.path());
    let started = Instant::now();
    let latchkey = run(
        &server,
        &[
            "job",
            "--ttl",
            "1s",
            "--max-hold",
            "2s",
            "--kill-after",
            "1s",
        ],
        &script,
    );
    let pids = [pid_in(&child), pid_in(&grandchild)];
    let output = latchkey.wait_with_output().unwrap();
    let held = started.elapsed();
    let stopped = all_gone_within(&pids, Duration::from_secs(2));
    cleanup(&pids);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(70), "{stderr}");
    assert!(stderr.contains("--max-hold 2s"), "{stderr}");
    // Renewed past its 1 s lease, stopped at the limit.
    assert!(held >= Duration::from_secs(2), "stopped after {held:?}");
    assert!(stopped, "the command outlived --max-hold");
    let exists: bool = redis::cmd("EXISTS")
        .arg("job")
        .query(&mut server.connection().unwrap())
        .unwrap();
    assert!(!exists, "the lock outlived the command");
}

#[test]
fn a_max_hold_of_zero_is_a_usage_error() {
    let output = Command::new(env!("CARGO_BIN_EXE_latchkey"))
        .args([
            "run",
            "job",
            "--max-hold",
            "0s",
            "--redis",
            "redis://127.0.0.1:1",
        ])
        .args(["--", "true"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(64), "{stderr}");
    assert!(stderr.contains("hold limit"), "{stderr}");
}

#[test]
fn lock_delay_keeps_a_killed_latchkeys_lock_for_the_delay_after_its_lease() {
    let server = RedisServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ready = dir.path().join("ready");
    let mut latchkey = run(
        &server,
        &["job", "--ttl", "1s", "--lock-delay", "2s"],
        &format!("touch {}; sleep 30", ready.display()),
    );
    let started = Instant::now();
    while !ready.exists() {
        assert!(started.elapsed() < Duration::from_secs(10));
        std::thread::sleep(Duration::from_millis(10));
    }
    let killed = Instant::now();
    kill(Pid::from_raw(latchkey.id() as i32), Signal::SIGKILL).unwrap();
    latchkey.wait().unwrap();
    let next = Command::new(env!("CARGO_BIN_EXE_latchkey"))
        .env("LATCHKEY_REDIS", server.url())
        .args(["run", "job", "--wait", "10s", "--", "true"])
        .output()
        .unwrap();
    let waited = killed.elapsed();
    assert!(next.status.success(), "{next:?}");
    // Its lease (1 s, renewed every third) ended at most 1 s after the kill; the
    // delay kept the lock 2 s more.
    assert!(
        waited >= Duration::from_millis(2_000),
        "taken {waited:?} after the kill"
    );
}

/// Lines in `path` (0 before it exists).
fn lines_in(path: &Path) -> usize {
    std::fs::read_to_string(path).map_or(0, |text| text.lines().count())
}

/// Ctrl-Z (SIGTSTP) stops the command with latchkey: left running, it would go on
/// past its lease, which nothing renews while latchkey is stopped. Continued within
/// the lease, both go on; continued after it, the command (stopped since before the
/// lease ended, while another holder may have taken the lock) is killed before it
/// runs again, and latchkey exits 70.
#[test]
fn a_suspended_run_suspends_its_command_and_never_runs_it_past_the_lease() {
    let server = RedisServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let beats = dir.path().join("beats");
    let script = format!(
        "while :; do echo . >> {}; sleep 0.02; done",
        beats.display()
    );
    // A job of its own, as a shell with job control starts it (a stop in a group
    // nobody could continue is ignored, as the kernel ignores it).
    let mut latchkey = Command::new(env!("CARGO_BIN_EXE_latchkey"))
        .env("LATCHKEY_REDIS", server.url())
        .args(["run", "beat", "--ttl", "1s", "--", "sh", "-c", &script])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn_running();
    let me = Pid::from_raw(latchkey.id() as i32);
    let still = |what: &str| {
        let before = lines_in(&beats);
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(lines_in(&beats), before, "the command ran on {what}");
    };
    let started = Instant::now();
    while lines_in(&beats) == 0 {
        assert!(started.elapsed() < Duration::from_secs(10), "never ran");
        std::thread::sleep(Duration::from_millis(10));
    }
    // Stopped within the lease, then continued: the command goes on too.
    kill(me, Signal::SIGTSTP).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    still("while latchkey was stopped");
    kill(me, Signal::SIGCONT).unwrap();
    let resumed = lines_in(&beats);
    let started = Instant::now();
    while lines_in(&beats) == resumed {
        assert!(started.elapsed() < Duration::from_secs(5), "never resumed");
        std::thread::sleep(Duration::from_millis(10));
    }
    // Stopped past the lease: another holder takes the lock meanwhile.
    kill(me, Signal::SIGTSTP).unwrap();
    std::thread::sleep(Duration::from_millis(1_500));
    let other = Command::new(env!("CARGO_BIN_EXE_latchkey"))
        .env("LATCHKEY_REDIS", server.url())
        .args(["run", "beat", "--no-wait", "--", "true"])
        .status()
        .unwrap();
    assert!(other.success(), "the lease did not run out");
    let before = lines_in(&beats);
    kill(me, Signal::SIGCONT).unwrap();
    let (code, stderr) = exit_of(&mut latchkey, || {}).expect("latchkey still runs");
    assert_eq!(code, Some(70), "{stderr}");
    assert!(stderr.contains("past the lease"), "{stderr}");
    assert_eq!(lines_in(&beats), before, "the command ran past its lease");
}

/// A message latchkey cannot write (its stderr a pipe nobody reads, a terminal that
/// hung up) is dropped: latchkey goes on stopping the command's group, grandchildren
/// deaf to SIGTERM included, and exits 70, instead of panicking mid-hold and leaving
/// them running without the lock.
#[test]
fn a_broken_stderr_does_not_stop_latchkey_from_stopping_its_command() {
    let server = RedisServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    // A grandchild deaf to TERM: only latchkey (or its reaper) stops it.
    let (deaf, worker) = deaf_to(dir.path(), "TERM");
    let deaf_script = dir.path().join("deaf.sh");
    std::fs::write(&deaf_script, deaf).unwrap();
    let script = format!("sh {} > /dev/null 2>&1 & wait", deaf_script.display());
    let mut latchkey = Command::new(env!("CARGO_BIN_EXE_latchkey"))
        .env("LATCHKEY_REDIS", server.url())
        .args(["run", "mute", "--ttl", "1s", "--kill-after", "300ms"])
        .args(["--", "sh", "-c", &script])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn_running();
    let worker = pid_in(&worker);
    // Nobody reads stderr any more: writing to it fails (EPIPE).
    drop(latchkey.stderr.take());
    let broke: i32 = redis::cmd("DEL")
        .arg("mute")
        .query(&mut server.connection().unwrap())
        .unwrap();
    assert_eq!(broke, 1);
    let exited = exit_of(&mut latchkey, || {});
    let gone = all_gone_within(&[worker], Duration::from_secs(3));
    cleanup(&[worker]);
    let (code, _) = exited.expect("latchkey still runs");
    assert_eq!(code, Some(70));
    assert!(gone, "the command's worker outlived latchkey");
    // Its logs (-vv) into a pipe nobody reads do not end it either.
    let mut logging = Command::new(env!("CARGO_BIN_EXE_latchkey"))
        .env("LATCHKEY_REDIS", server.url())
        .args(["-vv", "run", "mute", "--", "true"])
        .stderr(Stdio::piped())
        .spawn_running();
    drop(logging.stderr.take());
    assert_eq!(logging.wait().unwrap().code(), Some(0));
}
