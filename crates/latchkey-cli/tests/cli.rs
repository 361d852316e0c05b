//! The `latchkey` binary, end to end, against real servers.

use std::process::{Command, Output};

use latchkey_testkit::RedisServer;

fn latchkey(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_latchkey"))
        .args(args)
        .env_remove("LATCHKEY_REDIS")
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[cfg(feature = "demo")]
#[test]
fn the_flash_sale_demo_oversells_without_the_lock_and_never_with_it() {
    let server = RedisServer::start().unwrap();
    let output = latchkey(&["demo", "flash-sale", "--redis", &server.url()]);
    let stdout = text(&output.stdout);
    assert!(output.status.success(), "{stdout}{}", text(&output.stderr));
    assert!(
        stdout.contains("without a lock: sold 10, oversold 5"),
        "{stdout}"
    );
    assert_eq!(
        stdout.lines().last(),
        Some("sold 5, oversold 0"),
        "{stdout}"
    );
    assert_eq!(stdout.matches(" bought item ").count(), 15, "{stdout}");
    // The demo cleans up its data keys.
    let mut admin = server.connection().unwrap();
    let left: bool = redis::Commands::exists(&mut admin, "latchkey-demo:flash-sale:stock").unwrap();
    assert!(!left);
}

/// `--metrics` shows the library's own metrics after the run, as a dashboard would:
/// every buyer's acquisition granted, waits and holds recorded, no lease lost.
#[cfg(feature = "demo")]
#[test]
fn the_demo_shows_the_metrics_a_dashboard_would() {
    let server = RedisServer::start().unwrap();
    let output = latchkey(&["demo", "--metrics", "--quiet", "--redis", &server.url()]);
    let stdout = text(&output.stdout);
    assert!(output.status.success(), "{stdout}{}", text(&output.stderr));
    assert!(stdout.contains("sold 5, oversold 0"), "{stdout}");
    assert!(
        stdout.contains("lock acquisitions: granted 10\n"),
        "{stdout}"
    );
    let waits = stdout
        .lines()
        .find(|line| line.contains("lock waits (granted): p50 "))
        .unwrap_or_else(|| panic!("no waits panel: {stdout}"));
    assert!(waits.ends_with("(10 recorded)"), "{waits}");
    assert!(stdout.contains("lock holds: p50 "), "{stdout}");
    assert!(
        stdout.contains("leases lost 0, renewals failed 0"),
        "{stdout}"
    );
}

#[cfg(feature = "demo")]
#[test]
fn every_demo_keeps_its_invariant_and_breaks_it_with_unsafe() {
    let server = RedisServer::start().unwrap();
    let url = server.url();
    let cases: [(&[&str], &str); 3] = [
        (&["transfer"], "total 200 (opened with 200)"),
        (&["throttle"], "codes sent per phone [1, 1, 1]"),
        (
            &["flash-sale", "--semaphore", "3"],
            "at most 3 at checkout at once",
        ),
    ];
    for (scenario, invariant) in cases {
        let safe = latchkey(&[&["demo"], scenario, &["--redis", &url]].concat());
        let stdout = text(&safe.stdout);
        assert!(
            safe.status.success(),
            "{scenario:?}: {stdout}{}",
            text(&safe.stderr)
        );
        let last = stdout.lines().last().unwrap_or_default();
        assert!(
            last.starts_with("invariant held: "),
            "{scenario:?}: {stdout}"
        );
        assert!(last.contains(invariant), "{scenario:?}: {stdout}");
        let broken = latchkey(&[&["demo"], scenario, &["--unsafe", "--redis", &url]].concat());
        let stdout = text(&broken.stdout);
        assert!(
            broken.status.success(),
            "{scenario:?}: {stdout}{}",
            text(&broken.stderr)
        );
        let last = stdout.lines().last().unwrap_or_default();
        assert!(
            last.starts_with("invariant broken: "),
            "{scenario:?} --unsafe: {stdout}"
        );
    }
    let misuse = latchkey(&["demo", "transfer", "--semaphore", "2", "--redis", &url]);
    assert_eq!(misuse.status.code(), Some(64));
}

#[cfg(feature = "demo")]
#[test]
fn the_demo_starts_a_private_server_when_nothing_answers() {
    let port = latchkey_testkit::free_port().unwrap();
    let url = format!("redis://127.0.0.1:{port}");
    let output = latchkey(&["demo", "--redis", &url]);
    let stdout = text(&output.stdout);
    assert!(output.status.success(), "{stdout}{}", text(&output.stderr));
    assert!(stdout.starts_with(&format!(
        "no Redis answered at 127.0.0.1:{port}; started a private redis-server"
    )));
    assert_eq!(stdout.lines().last(), Some("sold 5, oversold 0"));
}

#[test]
fn misuse_exits_64_with_one_line() {
    for args in [
        &["demo", "--bogus"][..],
        &["demo", "no-such-scenario"],
        &["frobnicate"],
    ] {
        let output = latchkey(args);
        assert_eq!(output.status.code(), Some(64), "{args:?}");
        let stderr = text(&output.stderr);
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.starts_with("latchkey: "), "{stderr}");
    }
}

#[test]
fn help_lists_demo_and_bench_only_when_built_with_them() {
    let output = latchkey(&["--help"]);
    assert!(output.status.success());
    let help = text(&output.stdout);
    let lists = |command: &str| {
        help.lines()
            .any(|line| line.trim_start().starts_with(&format!("{command} ")))
    };
    assert!(lists("run") && lists("throttle"), "{help}");
    assert_eq!(lists("demo"), cfg!(feature = "demo"), "{help}");
    assert_eq!(lists("bench"), cfg!(feature = "bench"), "{help}");
}

#[cfg(feature = "demo")]
#[test]
fn an_unreachable_or_refusing_redis_exits_69_without_leaking_the_password() {
    let server = RedisServer::builder().password("right").start().unwrap();
    let wrong = format!("redis://:hunter2@127.0.0.1:{}", server.port());
    let output = latchkey(&["demo", "--redis", &wrong]);
    assert_eq!(output.status.code(), Some(69));
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("refused authentication") && !stderr.contains("hunter2"),
        "{stderr}"
    );

    // Nothing answers and no redis-server to fall back on.
    let output = Command::new(env!("CARGO_BIN_EXE_latchkey"))
        .args(["demo", "--redis", "redis://:hunter2@127.0.0.1:1"])
        .env("LATCHKEY_REDIS_SERVER", "/nonexistent/redis-server")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(69));
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("unreachable") && !stderr.contains("hunter2"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}

#[test]
fn bad_values_exit_64_before_connecting() {
    // Port 1: nothing listens, so a value checked only after connecting would give 69.
    let closed = "redis://127.0.0.1:1";
    for args in [
        &["run", "job", "--ttl", "0", "--", "true"][..],
        &["run", "job", "--ttl", "-5s", "--", "true"],
        &["run", "job", "--ttl", "1ms", "--", "true"],
        &["run", "bad\nname", "--", "true"],
        &["status", ""],
        &["throttle", "sms", "--limit", "0", "--per", "1m"],
        &["throttle", "sms", "--limit", "1", "--per", "0s"],
        &["--prefix", "with space", "status", "job"],
        &["--tls-ca", "/etc/hostname", "status", "job"],
    ] {
        let output = latchkey(&[&["--redis", closed], args].concat());
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(64), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
    }
    // A negative duration is a bad value, not the start of the command.
    let output = latchkey(&[
        "--redis", closed, "run", "job", "--ttl", "-5s", "--", "true",
    ]);
    assert!(
        text(&output.stderr).contains("--ttl"),
        "{}",
        text(&output.stderr)
    );
}

#[test]
fn a_server_that_is_not_redis_exits_69_with_one_line() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut socket in listener.incoming().flatten() {
            use std::io::Write;
            let _ = socket.write_all(b"HTTP/1.0 400 Bad Request\r\n\r\n");
        }
    });
    let url = format!("redis://127.0.0.1:{port}");
    let output = latchkey(&["--redis", &url, "status", "job"]);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(69), "{stderr}");
    assert!(stderr.contains("not a Redis server"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}

#[test]
fn tls_works_with_a_private_ca_and_says_when_the_server_is_plain() {
    let server = RedisServer::builder().tls().start().unwrap();
    let ca = server
        .tls_files()
        .unwrap()
        .ca_cert
        .to_str()
        .unwrap()
        .to_owned();
    let url = server.url();
    let output = latchkey(&["--redis", &url, "--tls-ca", &ca, "run", "job", "--", "true"]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let output = latchkey(&["--redis", &url, "--tls-insecure", "status", "job"]);
    assert_eq!(
        output.status.code(),
        Some(1),
        "free: {}",
        text(&output.stderr)
    );
    // Without the CA the certificate is refused, in one line.
    let output = latchkey(&["--redis", &url, "status", "job"]);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(69), "{stderr}");
    assert!(
        stderr.contains("TLS") && stderr.contains("certificate"),
        "{stderr}"
    );

    // A file with no certificate in it is refused before connecting.
    let empty = tempfile::NamedTempFile::new().unwrap();
    let empty = empty.path().to_str().unwrap();
    let output = latchkey(&["--redis", &url, "--tls-ca", empty, "status", "job"]);
    assert_eq!(output.status.code(), Some(66), "{}", text(&output.stderr));

    let plain = RedisServer::start().unwrap();
    let wrong = plain.url().replace("redis://", "rediss://");
    let output = latchkey(&["--redis", &wrong, "status", "job"]);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(69), "{stderr}");
    assert!(stderr.contains("TLS handshake"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}

/// Runs `latchkey args` with a stdout nobody reads (`latchkey … | head -0`).
fn with_stdout_closed(args: &[&str], server: Option<&RedisServer>) -> Output {
    let (reader, writer) = nix::unistd::pipe().unwrap();
    drop(reader);
    let mut command = Command::new(env!("CARGO_BIN_EXE_latchkey"));
    command.args(args).env_remove("LATCHKEY_REDIS");
    if let Some(server) = server {
        command.env("LATCHKEY_REDIS", server.url());
    }
    command.stdout(writer).output().unwrap()
}

#[test]
fn a_reader_that_goes_away_ends_the_output_quietly() {
    let output = with_stdout_closed(&["--help"], None);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(text(&output.stderr), "");

    // Any other failure to write is said, with EX_IOERR.
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_latchkey"))
        .arg("--help")
        .stdout(full)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(74));
    assert!(text(&output.stderr).contains("cannot write to standard output"));

    let server = RedisServer::start().unwrap();
    let held = Command::new(env!("CARGO_BIN_EXE_latchkey"))
        .args(["acquire", "report", "--redis", &server.url()])
        .output()
        .unwrap();
    assert!(held.status.success(), "{}", text(&held.stderr));
    for args in [&["list"][..], &["status", "report"], &["list", "--json"]] {
        let output = with_stdout_closed(args, Some(&server));
        assert!(
            output.status.success(),
            "{args:?}: {}",
            text(&output.stderr)
        );
        assert_eq!(text(&output.stderr), "", "{args:?}");
    }
}

/// Options the library refuses are named in the one-line error, with the limits a
/// user can act on; an environment's yes (`LATCHKEY_CLUSTER=1`) is a yes.
#[test]
fn refused_options_are_named_and_the_environment_says_yes_as_it_does() {
    for (args, says) in [
        (
            &["run", "j", "--max-hold", "999999999999h", "--", "true"][..],
            "--max-hold: ",
        ),
        (
            &["run", "j", "--lock-delay", "999999999999h", "--", "true"],
            "--lock-delay: ",
        ),
        (
            &["sem", "run", "p", "--permits", "0", "--", "true"],
            "1 to 2^50 permits",
        ),
    ] {
        let refused = latchkey(args);
        let stderr = text(&refused.stderr);
        assert_eq!(refused.status.code(), Some(64), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
    let server = RedisServer::start().unwrap();
    for (value, cluster) in [("1", true), ("yes", true), ("0", false), ("off", false)] {
        let output = Command::new(env!("CARGO_BIN_EXE_latchkey"))
            .args(["--redis", &server.url(), "status", "nothing"])
            .env("LATCHKEY_CLUSTER", value)
            .output()
            .unwrap();
        let stderr = text(&output.stderr);
        match cluster {
            true => assert!(
                stderr.contains("is not a Redis Cluster node"),
                "{value}: {stderr}"
            ),
            // Not a cluster: the plain server says nothing is held.
            false => assert_eq!(output.status.code(), Some(1), "{value}: {stderr}"),
        }
    }
}

/// `--wait-replicas` on a server with fewer replicas connected says so at once:
/// without `--wait`, every grant would fail in silence until enough connect.
#[test]
fn too_few_replicas_connected_is_said_at_once() {
    let server = RedisServer::start().unwrap();
    let output = latchkey(&[
        "--redis",
        &server.url(),
        "--wait-replicas",
        "1",
        "run",
        "job",
        "--no-wait",
        "--",
        "true",
    ]);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(69), "{stderr}");
    assert!(
        stderr.contains("but the server has 0 replica(s) connected"),
        "{stderr}"
    );
}
