//! `latchkey top` and `latchkey exporter`, as a person and a Prometheus server use
//! them: the view driven in tmux and read off the screen (capture-pane), the
//! exporter scraped over HTTP, against a real server whose locks are taken and
//! released by other `latchkey` processes.
#![cfg(all(feature = "top", feature = "exporter"))]

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::SpawnRunning;
use latchkey_testkit::RedisServer;

/// Runs `latchkey ARGS` on `server` and asserts it succeeded; its standard output.
fn succeeded(server: &RedisServer, args: &[&str]) -> String {
    let out = common::latchkey(&server.url(), args).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{args:?}: {stderr}");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// `latchkey acquire NAME` (held for 60 s after it exits); the hold's token.
fn acquire(server: &RedisServer, name: &str) -> String {
    succeeded(server, &["acquire", name, "--ttl", "60s"])
}

fn release(server: &RedisServer, name: &str, token: &str) {
    succeeded(server, &["release", name, "--token", token]);
}

/// Polls `check` every 100 ms for up to 10 s; its last result.
fn eventually<T>(mut check: impl FnMut() -> (bool, T)) -> (bool, T) {
    let started = Instant::now();
    loop {
        let (ok, value) = check();
        if ok || started.elapsed() > Duration::from_secs(10) {
            return (ok, value);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `deploy:prod` held (its hold token returned), a waiter in line behind it, and
/// a semaphore `pool` of 3 with a permit out; the processes that wait and hold.
fn busy(server: &RedisServer) -> (String, [common::Running; 2]) {
    let deploy = acquire(server, "deploy:prod");
    let waiter = [
        "run",
        "deploy:prod",
        "--fair",
        "--wait",
        "60s",
        "--",
        "true",
    ];
    let pool = ["sem", "run", "pool", "--permits", "3", "--", "sleep", "60"];
    let others = [waiter.as_slice(), pool.as_slice()]
        .map(|args| common::latchkey(&server.url(), args).spawn_running());
    (deploy, others)
}

/// A tmux server of the test's own (its own socket), killed when dropped.
struct Tmux {
    socket: String,
}

impl Tmux {
    /// Starts `command` in a detached 160×30 session; when it exits, the shell
    /// prints its exit status and waits, so the screen after it can be read.
    fn start(socket: &str, command: &str) -> Tmux {
        let tmux = Tmux {
            socket: socket.to_owned(),
        };
        let shell = format!("{command}; echo \"top exited $?\"; sleep 30");
        tmux.run(&[
            "new-session",
            "-d",
            "-s",
            "view",
            "-x",
            "160",
            "-y",
            "30",
            &shell,
        ]);
        tmux
    }

    fn run(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .args(["-L", &self.socket])
            .args(args)
            .output()
            .expect("tmux is installed (scripts/ensure-redis.sh installs it)");
        assert!(
            out.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn screen(&self) -> String {
        self.run(&["capture-pane", "-p", "-t", "view"])
    }

    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "view"];
        args.extend_from_slice(keys);
        self.run(&args);
    }

    /// The screen once it contains `text` (within 10 s), or a failure showing it.
    fn wait_for(&self, text: &str) -> String {
        let (ok, screen) = eventually(|| {
            let screen = self.screen();
            (screen.contains(text), screen)
        });
        assert!(ok, "{text:?} never showed:\n{screen}");
        screen
    }

    fn wait_until_gone(&self, text: &str) -> String {
        let (ok, screen) = eventually(|| {
            let screen = self.screen();
            (!screen.contains(text), screen)
        });
        assert!(ok, "{text:?} stayed:\n{screen}");
        screen
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .output();
    }
}

/// The row of the screen that names `name`.
fn row<'s>(screen: &'s str, name: &str) -> &'s str {
    screen
        .lines()
        .find(|line| line.split_whitespace().nth(1) == Some(name))
        .unwrap_or_else(|| panic!("no row for {name}:\n{screen}"))
}

#[test]
fn top_shows_holds_as_they_come_and_go_and_quits_cleanly() {
    let server = RedisServer::start().unwrap();
    let (deploy, _others) = busy(&server);
    let socket = format!("latchkey-top-{}", std::process::id());
    let command = format!(
        "{} --redis {} top --interval 200ms",
        env!("CARGO_BIN_EXE_latchkey"),
        server.url()
    );
    let tmux = Tmux::start(&socket, &command);

    let screen = tmux.wait_for("pool");
    let screen = match row(&screen, "deploy:prod").ends_with(" 1") {
        true => screen,
        false => tmux.wait_for("1 waiting;"),
    };
    let lock = row(&screen, "deploy:prod");
    let words: Vec<&str> = lock.split_whitespace().collect();
    assert_eq!(words[0], "lock", "{lock}");
    // The holder is masked: its first 4 characters and an ellipsis.
    let (owner, _) = deploy.split_once('@').unwrap_or((&deploy, ""));
    assert!(!screen.contains(owner), "a holder shown whole:\n{screen}");
    assert!(
        words[2].ends_with('…') && words[2].chars().count() == 5,
        "{lock}"
    );
    assert!(words[3].ends_with('s'), "an age: {lock}");
    assert!(words[4].ends_with('s'), "lease left: {lock}");
    assert!(words[5].parse::<u64>().is_ok(), "a fence: {lock}");
    assert_eq!(words.last(), Some(&"1"), "one waiter: {lock}");
    let pool = row(&screen, "pool");
    assert!(pool.starts_with("semaphore"), "{pool}");
    assert!(pool.contains("1 holder") && pool.contains("1/3"), "{pool}");
    assert!(screen.contains("1 lock held"), "{screen}");

    // Filtered as typed: only names with "po".
    tmux.keys(&["/", "p", "o"]);
    let screen = tmux.wait_until_gone("deploy:prod");
    assert!(screen.contains("pool"), "{screen}");
    tmux.keys(&["Escape"]);
    tmux.wait_for("deploy:prod");

    // Released: the waiter takes it and is done; the name leaves the view.
    release(&server, "deploy:prod", &deploy);
    tmux.wait_until_gone("deploy:prod");

    // q gives the terminal back and exits 0.
    tmux.keys(&["q"]);
    let screen = tmux.wait_for("top exited 0");
    assert!(
        !screen.contains("KIND"),
        "the view stayed on screen:\n{screen}"
    );
}

#[test]
fn top_refuses_to_run_without_a_terminal() {
    let server = RedisServer::start().unwrap();
    let out = common::latchkey(&server.url(), &["top"])
        .stdout(Stdio::piped())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("needs a terminal"), "{stderr}");
    // Refreshes closer than 100 ms apart would be a load on Redis.
    let out = common::latchkey(&server.url(), &["top", "--interval", "10ms"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("the least is 100ms"), "{stderr}");
}

/// One HTTP/1.1 GET; the status line and the body.
fn get(port: u16, path: &str) -> (String, String) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    (
        head.lines().next().unwrap_or("").to_owned(),
        body.to_owned(),
    )
}

/// The value of the sample `series` (name and labels, as printed) in `body`.
fn sample(body: &str, series: &str) -> Option<f64> {
    body.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// `latchkey exporter` on `redis`, on a free port; the process and the port.
fn exporter(redis: &str) -> (common::Running, u16) {
    let mut exporter = common::latchkey(redis, &["exporter", "--listen", "127.0.0.1:0"])
        .stderr(Stdio::piped())
        .spawn_running();
    // The line that gives the address (whatever else it logs first).
    let banner = BufReader::new(exporter.stderr.take().unwrap())
        .lines()
        .map_while(Result::ok)
        .find(|line| line.contains("http://"))
        .unwrap_or_default();
    let port: u16 = banner
        .split("http://127.0.0.1:")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .and_then(|port| port.parse().ok())
        .unwrap_or_else(|| panic!("no address in {banner:?}"));
    (exporter, port)
}

#[test]
fn the_exporter_serves_the_deployment_s_state_to_a_scrape() {
    let server = RedisServer::start().unwrap();
    let (deploy, _others) = busy(&server);
    let throttled = common::latchkey(
        &server.url(),
        &["throttle", "sms:+1555", "--limit", "5", "--per", "1m"],
    )
    .output()
    .unwrap();
    assert!(throttled.status.success());

    let (mut exporter, port) = exporter(&server.url());

    let (ok, body) = eventually(|| {
        let (_, body) = get(port, "/metrics");
        let waiting = sample(
            &body,
            r#"latchkey_state_name_waiters{deployment="single",name="deploy:prod",kind="lock"}"#,
        );
        let pool = sample(
            &body,
            r#"latchkey_state_permits_used{deployment="single",name="pool",kind="semaphore"}"#,
        );
        (waiting == Some(1.0) && pool == Some(1.0), body)
    });
    assert!(ok, "{body}");
    let (status, _) = get(port, "/metrics");
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert_eq!(
        sample(&body, r#"latchkey_state_up{deployment="single"}"#),
        Some(1.0)
    );
    assert_eq!(
        sample(&body, r#"latchkey_state_locks_held{deployment="single"}"#),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &body,
            r#"latchkey_state_held{deployment="single",name="deploy:prod",kind="lock"}"#
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &body,
            r#"latchkey_state_permits{deployment="single",name="pool",kind="semaphore"}"#
        ),
        Some(3.0)
    );
    assert_eq!(
        sample(
            &body,
            r#"latchkey_state_ratelimit_keys{deployment="single",algorithm="fixed"}"#
        ),
        Some(1.0)
    );
    let left = sample(
        &body,
        r#"latchkey_state_lease_left_seconds{deployment="single",name="deploy:prod",kind="lock"}"#,
    );
    assert!(left.is_some_and(|s| s > 0.0 && s <= 60.0), "{body}");
    assert_eq!(
        sample(&body, r#"latchkey_exporter_scans{deployment="single"}"#),
        Some(1.0)
    );
    // Every sample has its HELP and TYPE.
    for line in body.lines().filter(|l| !l.starts_with('#')) {
        let name = line.split(['{', ' ']).next().unwrap();
        assert!(
            body.contains(&format!("# TYPE {name} ")),
            "{name} has no TYPE"
        );
    }
    // No token is exported, masked or not.
    let (owner, _) = deploy.split_once('@').unwrap_or((&deploy, ""));
    assert!(!body.contains(&owner[..8]), "{body}");

    // The oldest hold grows from scrape to scrape.
    let first = sample(
        &body,
        r#"latchkey_state_oldest_hold_seconds{deployment="single"}"#,
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let (_, later) = get(port, "/metrics");
    let second = sample(
        &later,
        r#"latchkey_state_oldest_hold_seconds{deployment="single"}"#,
    )
    .unwrap();
    assert!(second >= first + 0.25, "{first} then {second}");

    // Released: its waiter runs and is gone; the lock leaves the scrape.
    release(&server, "deploy:prod", &deploy);
    let (ok, body) = eventually(|| {
        let (_, body) = get(port, "/metrics");
        (!body.contains("deploy:prod"), body)
    });
    assert!(ok, "{body}");
    assert_eq!(
        sample(&body, r#"latchkey_state_locks_held{deployment="single"}"#),
        Some(0.0)
    );

    assert_eq!(get(port, "/nothing").0, "HTTP/1.1 404 Not Found");
    // SIGTERM ends it cleanly.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(exporter.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = exporter.wait().unwrap();
    assert_eq!(status.code(), Some(0));
}

/// On a quorum of three masters the exporter shows its locks, one master down.
#[test]
fn the_exporter_serves_a_quorum_s_locks() {
    let mut servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start().unwrap()).collect();
    let urls = servers
        .iter()
        .map(RedisServer::url)
        .collect::<Vec<_>>()
        .join(",");
    let _holder =
        common::latchkey(&urls, &["run", "deploy:prod", "--", "sleep", "60"]).spawn_running();
    servers[0].kill().unwrap();
    let (mut exporter, port) = exporter(&urls);
    let (ok, body) = eventually(|| {
        let (_, body) = get(port, "/metrics");
        let held = sample(
            &body,
            r#"latchkey_state_held{deployment="quorum",name="deploy:prod",kind="lock"}"#,
        );
        (held == Some(1.0), body)
    });
    assert!(ok, "{body}");
    assert_eq!(
        sample(&body, r#"latchkey_exporter_scans{deployment="quorum"}"#),
        Some(2.0)
    );
    exporter.kill().unwrap();
}

/// Idle clients cannot take the exporter down: connections beyond its limit are
/// closed at once, an idle one is closed once it has sent no request for 10 s, and
/// scrapes are served again then. A method other than GET and HEAD is refused with
/// the methods allowed.
#[test]
fn the_exporter_outlasts_idle_clients() {
    let server = RedisServer::start().unwrap();
    let (mut exporter, port) = exporter(&server.url());
    let idle: Vec<TcpStream> = (0..80)
        .map(|_| TcpStream::connect(("127.0.0.1", port)).unwrap())
        .collect();
    // Refused (closed at once) while the idle ones fill every slot; served once
    // they are closed.
    let scrape = || -> std::io::Result<String> {
        let mut stream = TcpStream::connect(("127.0.0.1", port))?;
        write!(
            stream,
            "GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
        )?;
        let mut response = String::new();
        stream.read_to_string(&mut response)?;
        Ok(response)
    };
    let started = Instant::now();
    loop {
        let response = scrape();
        if response
            .as_ref()
            .is_ok_and(|r| r.starts_with("HTTP/1.1 200 OK"))
        {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "no scrape served: {response:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // Every idle connection was closed by the exporter (a read finds the end).
    for mut stream in idle {
        stream
            .set_read_timeout(Some(Duration::from_secs(15)))
            .unwrap();
        let mut rest = Vec::new();
        let read = stream.read_to_end(&mut rest);
        assert!(read.is_ok(), "an idle connection stayed open: {read:?}");
    }
    let mut post = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        post,
        "POST /metrics HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    post.read_to_string(&mut response).unwrap();
    assert!(response.starts_with("HTTP/1.1 405"), "{response}");
    assert!(
        response.to_lowercase().contains("allow: get, head"),
        "{response}"
    );
    exporter.kill().unwrap();
    let _ = exporter.wait();
}

/// An ACL user that lost a command the survey reads with makes the scrape fail
/// (`latchkey_state_up 0`, the reason on stderr) instead of report nothing held.
#[test]
fn the_exporter_is_down_not_empty_when_the_acl_refuses_a_read() {
    let server = RedisServer::builder()
        .user("app", "pw", "~* &* +@all")
        .start()
        .unwrap();
    acquire(&server, "held");
    let (mut exporter, at) = exporter(&server.url_as("app", "pw"));
    let (up, held) = (
        r#"latchkey_state_up{deployment="single"}"#,
        r#"latchkey_state_locks_held{deployment="single"}"#,
    );
    let (ok, body) = eventually(|| {
        let (_, body) = get(at, "/metrics");
        (sample(&body, held) == Some(1.0), body)
    });
    assert!(ok, "{body}");
    let mut admin = server.connection().unwrap();
    let _: () = redis::cmd("ACL")
        .arg(&["SETUSER", "app", "-zcard"])
        .query(&mut admin)
        .unwrap();
    let (ok, body) = eventually(|| {
        let (_, body) = get(at, "/metrics");
        (sample(&body, up) == Some(0.0), body)
    });
    exporter.kill().unwrap();
    let _ = exporter.wait();
    assert!(ok, "{body}");
    assert_eq!(sample(&body, held), None, "{body}");
}

/// Started while Redis is down, the exporter serves `latchkey_state_up 0` (as
/// redis_exporter does) instead of refusing to start, and reads the deployment
/// once Redis is up.
#[test]
fn the_exporter_starts_before_redis_and_reads_it_once_up() {
    let port = latchkey_testkit::free_port().unwrap();
    let (mut exporter, at) = exporter(&format!("redis://127.0.0.1:{port}"));
    let up = r#"latchkey_state_up{deployment="single"}"#;
    let (status, body) = get(at, "/metrics");
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert_eq!(sample(&body, up), Some(0.0), "{body}");
    let server = RedisServer::builder().start_on(port).unwrap();
    let (ok, body) = eventually(|| {
        let (_, body) = get(at, "/metrics");
        (sample(&body, up) == Some(1.0), body)
    });
    drop(server);
    exporter.kill().unwrap();
    let _ = exporter.wait();
    assert!(ok, "{body}");
}
