//! The `latchkey` binary, end to end, against real servers.

use std::process::{Command, Output};

#[cfg(feature = "demo")]
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

#[cfg(feature = "demo")]
#[test]
fn the_demo_starts_a_private_server_when_nothing_answers() {
    let port = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        probe.local_addr().unwrap().port()
    };
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
