//! `latchkey run`, `status`, `list`, `release`, `throttle`: end to end through the
//! built binary against real servers.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::{Running, SpawnRunning};
use common::{latchkey_ok, readme_acl_line};
use latchkey_testkit::RedisServer;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

fn latchkey(server: &RedisServer) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_latchkey"));
    command
        .env("LATCHKEY_REDIS", server.url())
        .env_remove("LATCHKEY_PREFIX");
    command
}

fn output(server: &RedisServer, args: &[&str]) -> Output {
    latchkey(server).args(args).output().unwrap()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Starts `latchkey run NAME -- sh -c SCRIPT` in the background.
fn run_in_background(server: &RedisServer, extra: &[&str], script: &str) -> Running {
    latchkey(server)
        .arg("run")
        .args(extra)
        .args(["--", "sh", "-c", script])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn_running()
}

/// Starts `latchkey run ARGS -- sleep 30` and returns once the command runs, so the
/// lock is held.
fn hold_in_background(server: &RedisServer, args: &[&str]) -> Running {
    let dir = tempfile::tempdir().unwrap();
    let ready = dir.path().join("ready");
    let holder = run_in_background(
        server,
        args,
        &format!("touch {}; exec sleep 30", ready.display()),
    );
    wait_for_file(&ready);
    holder
}

/// Waits until `path` exists; panics after 10 s.
fn wait_for_file(path: &Path) {
    let started = Instant::now();
    while !path.exists() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn json(output: &Output) -> serde_json::Value {
    serde_json::from_str(stdout(output).trim())
        .unwrap_or_else(|e| panic!("{e}: {}", stdout(output)))
}

#[test]
fn eight_concurrent_runs_increment_a_file_exactly_eight_times() {
    let server = RedisServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let counter = dir.path().join("counter");
    std::fs::write(&counter, "0").unwrap();
    let script = format!(
        "n=$(cat {0}); sleep 0.05; echo $((n + 1)) > {0}",
        counter.display()
    );
    let runs: Vec<_> = (0..8)
        .map(|_| run_in_background(&server, &["job"], &script))
        .collect();
    for run in runs {
        let output = run.wait_with_output().unwrap();
        assert!(output.status.success(), "{}", stderr(&output));
    }
    assert_eq!(std::fs::read_to_string(&counter).unwrap().trim(), "8");
}

#[test]
fn no_wait_while_held_exits_75() {
    let server = RedisServer::start().unwrap();
    let mut holder = hold_in_background(&server, &["job"]);
    let busy = output(&server, &["run", "job", "--no-wait", "--", "true"]);
    assert_eq!(busy.status.code(), Some(75), "{}", stderr(&busy));
    // One line naming the holder (masked) and how long its lease has left.
    let message = stderr(&busy);
    assert!(message.contains("busy: held by "), "{message}");
    assert!(
        message.contains("… ") || message.contains("…;"),
        "{message}"
    );
    assert!(message.contains("lease has "), "{message}");
    assert_eq!(message.lines().count(), 1, "{message}");
    let waited = output(&server, &["run", "job", "--wait", "300ms", "--", "true"]);
    assert_eq!(waited.status.code(), Some(75));
    assert!(
        stderr(&waited).contains("after waiting 3"),
        "{}",
        stderr(&waited)
    );
    holder.kill().unwrap();
    holder.wait().unwrap();
}

#[test]
fn a_command_that_outlives_a_lease_it_cannot_renew_is_stopped_and_exits_70() {
    let server = RedisServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let started = dir.path().join("started");
    let run = run_in_background(
        &server,
        &["job", "--ttl", "1s", "--kill-after", "1s"],
        &format!("touch {}; exec sleep 30", started.display()),
    );
    wait_for_file(&started);
    server.pause().unwrap();
    let output = run.wait_with_output().unwrap();
    server.resume().unwrap();
    assert_eq!(output.status.code(), Some(70), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("lease on \"job\" was lost"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn sigterm_reaches_the_command_and_the_lock_is_freed() {
    let server = RedisServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (ready, got) = (dir.path().join("ready"), dir.path().join("got"));
    let script = format!(
        "trap 'touch {}; exit 3' TERM; touch {}; while :; do sleep 0.05; done",
        got.display(),
        ready.display()
    );
    let run = run_in_background(&server, &["job"], &script);
    wait_for_file(&ready);
    kill(Pid::from_raw(run.id() as i32), Signal::SIGTERM).unwrap();
    let output = run.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    assert!(got.exists(), "the command never saw SIGTERM");
    let status = json(&output_of_status(&server));
    assert_eq!(status["held"], false);
}

fn output_of_status(server: &RedisServer) -> Output {
    output(server, &["status", "job", "--json"])
}

#[test]
fn latchkey_fence_strictly_increases_over_successive_runs() {
    let server = RedisServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let fences = dir.path().join("fences");
    let script = format!(
        "echo $LATCHKEY_LOCK $LATCHKEY_FENCE >> {}",
        fences.display()
    );
    for _ in 0..4 {
        let run = output(&server, &["run", "job", "--", "sh", "-c", &script]);
        assert!(run.status.success(), "{}", stderr(&run));
    }
    let seen: Vec<u64> = std::fs::read_to_string(&fences)
        .unwrap()
        .lines()
        .map(|line| line.strip_prefix("job ").unwrap().parse().unwrap())
        .collect();
    assert_eq!(seen.len(), 4);
    assert!(seen.windows(2).all(|w| w[0] < w[1]), "{seen:?}");
}

/// A name whose key holds another application's data is not "free": `run` would
/// refuse it, and `status` says why, as `run` does (exit 65); so for a companion
/// key's data, as `throttle`, `latch` and `sem run` would refuse it.
#[test]
fn status_of_a_key_latchkey_did_not_write_says_so() {
    let server = RedisServer::start().unwrap();
    let _: () = redis::Commands::rpush(&mut server.connection().unwrap(), "jobs", "x").unwrap();
    let status = output(&server, &["status", "jobs"]);
    assert_eq!(status.status.code(), Some(65), "{}", stdout(&status));
    assert!(
        stderr(&status).contains("did not write"),
        "{}",
        stderr(&status)
    );
    // The same for the keys beside it where a rate limit, a latch or a
    // semaphore keeps its state: the one that is not latchkey's is named.
    let mut admin = server.connection().unwrap();
    let foreign: [(&str, &[&str]); 4] = [
        ("rl", &["SET", "{rl}:lk:rate", "text"]),
        ("neg", &["SET", "{neg}:lk:gcra", "-5"]),
        ("lt", &["SET", "{lt}:lk:latch", "garbage"]),
        ("sm", &["LPUSH", "{sm}:lk:sem:lk:permits", "x"]),
    ];
    for (name, write) in foreign {
        let _: () = redis::cmd(write[0])
            .arg(&write[1..])
            .query(&mut admin)
            .unwrap();
        let status = output(&server, &["status", name]);
        assert_eq!(
            status.status.code(),
            Some(65),
            "{name}: {}",
            stdout(&status)
        );
        assert!(stderr(&status).contains(write[1]), "{}", stderr(&status));
        // A break finds nothing of latchkey's to break there, and says so; but a
        // semaphore's own key that is not latchkey's stops a semaphore's break.
        for kind in [&[][..], &["--kind", "semaphore"], &["--kind", "rate-limit"]] {
            let args = [&["release", "--force", name][..], kind].concat();
            let broken = output(&server, &args);
            let refused = name == "sm" && kind.contains(&"semaphore");
            let expected = if refused { 65 } else { 0 };
            assert_eq!(
                broken.status.code(),
                Some(expected),
                "{args:?}: {}",
                stderr(&broken)
            );
        }
    }
    let free = output(&server, &["status", "other"]);
    assert_eq!(free.status.code(), Some(1), "{}", stderr(&free));
    assert!(
        stdout(&free).starts_with("other: free"),
        "{}",
        stdout(&free)
    );
}

#[test]
fn status_list_and_release_in_text_and_json() {
    let server = RedisServer::start().unwrap();
    let mut holder = hold_in_background(&server, &["deploy", "--prefix", "ops:"]);
    let token: String =
        redis::Commands::get(&mut server.connection().unwrap(), "ops:deploy").unwrap();

    let text = output(&server, &["status", "deploy", "--prefix", "ops:"]);
    assert!(
        stdout(&text).starts_with("deploy: held by "),
        "{}",
        stdout(&text)
    );
    assert!(
        !stdout(&text).contains(&token),
        "status printed the full owner token"
    );
    let status = json(&output(
        &server,
        &["status", "deploy", "--prefix", "ops:", "--json"],
    ));
    assert_eq!(status["held"], true);
    assert_eq!(status["holder"], format!("{}…", &token[..4]));
    assert!(status["fence"].as_u64().unwrap() > 0);
    assert!(status["ttl_ms"].as_u64().unwrap() <= 30_000);
    assert_eq!(status["waiters"], 0);

    let listed = output(&server, &["list", "--prefix", "ops:"]);
    assert_eq!(stdout(&listed).lines().count(), 1, "{}", stdout(&listed));
    let listed = json(&output(
        &server,
        &["list", "--prefix", "ops:", "--match", "dep*", "--json"],
    ));
    assert_eq!(listed.as_array().unwrap().len(), 1);
    assert_eq!(listed[0]["name"], "deploy");
    let none = json(&output(
        &server,
        &["list", "--prefix", "ops:", "--match", "x*", "--json"],
    ));
    assert!(none.as_array().unwrap().is_empty());

    let refused = output(&server, &["release", "deploy", "--prefix", "ops:"]);
    assert_eq!(refused.status.code(), Some(64));
    let broken = output(
        &server,
        &["release", "deploy", "--prefix", "ops:", "--force"],
    );
    assert!(
        stdout(&broken).starts_with(&format!("broke lock deploy held by {}…", &token[..4])),
        "{}",
        stdout(&broken)
    );
    let again = json(&output(
        &server,
        &["release", "deploy", "--prefix", "ops:", "--force", "--json"],
    ));
    assert_eq!(again["broken"], false);
    let status = output(&server, &["status", "deploy", "--prefix", "ops:"]);
    assert!(
        stdout(&status).starts_with("deploy: free"),
        "{}",
        stdout(&status)
    );
    holder.kill().unwrap();
    holder.wait().unwrap();
}

#[test]
fn throttle_allows_up_to_the_limit_then_exits_1_with_retry_after() {
    let server = RedisServer::start().unwrap();
    for _ in 0..2 {
        let allowed = output(
            &server,
            &["throttle", "sms:+1555", "--limit", "2", "--per", "60s"],
        );
        assert_eq!(allowed.status.code(), Some(0), "{}", stderr(&allowed));
        assert!(stdout(&allowed).starts_with("allowed"));
    }
    let denied = output(
        &server,
        &["throttle", "sms:+1555", "--limit", "2", "--per", "60s"],
    );
    assert_eq!(denied.status.code(), Some(1));
    assert!(
        stdout(&denied).contains("retry after"),
        "{}",
        stdout(&denied)
    );
    let report = json(&output(
        &server,
        &[
            "throttle",
            "sms:+1555",
            "--limit",
            "2",
            "--per",
            "60s",
            "--json",
        ],
    ));
    assert_eq!(report["allowed"], false);
    assert_eq!(report["remaining"], 0);
    assert!(report["retry_after_ms"].as_u64().unwrap() <= 60_000);
}

#[test]
fn throttle_runs_every_algorithm_with_costs_peeks_and_headers() {
    let server = RedisServer::start().unwrap();
    let throttle = |args: &[&str]| output(&server, &[&["throttle"], args].concat());
    let sms = ["sms:+1555", "--algo", "cooldown", "--per", "60s"];
    assert_eq!(throttle(&sms).status.code(), Some(0));
    let again = throttle(&sms);
    assert_eq!(again.status.code(), Some(1));
    assert!(stdout(&again).contains("retry after"), "{}", stdout(&again));

    let gcra = [
        "api", "--algo", "gcra", "--limit", "10", "--per", "1s", "--burst", "4",
    ];
    let batch = throttle(&[&gcra[..], &["--cost", "5", "--json"]].concat());
    let report = json(&batch);
    assert_eq!(report["allowed"], true, "{report}");
    assert_eq!(report["limit"], 5);
    assert_eq!(report["remaining"], 0);
    let too_big = throttle(&[&gcra[..], &["--cost", "6"]].concat());
    assert_eq!(too_big.status.code(), Some(64), "{}", stderr(&too_big));
    assert!(
        stderr(&too_big).contains("can never pass"),
        "{}",
        stderr(&too_big)
    );

    let window = [
        "dl:10.0.0.7",
        "--algo",
        "sliding",
        "--limit",
        "5",
        "--per",
        "10m",
    ];
    let look = throttle(&[&window[..], &["--peek", "--headers"]].concat());
    assert_eq!(look.status.code(), Some(0));
    let text = stdout(&look);
    assert!(text.starts_with("would be allowed: 5 of 5 left"), "{text}");
    assert!(
        text.contains("RateLimit-Policy: \"default\";q=5;w=600"),
        "{text}"
    );
    assert!(text.contains("RateLimit: \"default\";r=5;t=0"), "{text}");
    assert!(!text.contains("Retry-After"), "{text}");
}

#[test]
fn throttle_flags_that_do_not_fit_the_algorithm_are_usage_errors() {
    let server = RedisServer::start().unwrap();
    let cases: [&[&str]; 4] = [
        &[
            "throttle", "k", "--algo", "cooldown", "--limit", "2", "--per", "1m",
        ],
        &["throttle", "k", "--algo", "fixed", "--per", "1m"],
        &[
            "throttle", "k", "--limit", "2", "--per", "1m", "--burst", "3",
        ],
        &[
            "throttle", "k", "--limit", "2", "--per", "1m", "--cost", "0",
        ],
    ];
    for args in cases {
        let result = output(&server, args);
        assert_eq!(
            result.status.code(),
            Some(64),
            "{args:?}: {}",
            stderr(&result)
        );
        assert_eq!(
            stderr(&result).trim().lines().count(),
            1,
            "{}",
            stderr(&result)
        );
    }
}

#[test]
fn every_misuse_is_one_line_and_a_documented_status() {
    let server = RedisServer::start().unwrap();
    let cases: [(&[&str], i32); 9] = [
        (&["throttle", "k", "--limit", "3", "--per", "1000000d"], 64),
        (&["elect", "e", "--value", "", "--", "true"], 64),
        (&["run", "job", "true"], 64),
        (&["run", "job"], 64),
        (&["run", "job", "--wait", "5x", "--", "true"], 64),
        (&["run", "job", "--ttl", "0s", "--", "true"], 64),
        (
            &["run", "job", "--wait", "1s", "--no-wait", "--", "true"],
            64,
        ),
        (&["throttle", "k", "--limit", "0", "--per", "1s"], 64),
        (&["status", "job", "--redis", "redis://127.0.0.1:1"], 69),
    ];
    for (args, code) in cases {
        let result = output(&server, args);
        assert_eq!(
            result.status.code(),
            Some(code),
            "{args:?}: {}",
            stderr(&result)
        );
        assert_eq!(
            stderr(&result).lines().count(),
            1,
            "{args:?}: {}",
            stderr(&result)
        );
    }
    let locked = RedisServer::builder().password("pw").start().unwrap();
    let wrong = format!("redis://:nope@127.0.0.1:{}", locked.port());
    let refused = output(&server, &["status", "job", "--redis", &wrong]);
    assert_eq!(refused.status.code(), Some(69));
    assert!(!stderr(&refused).contains("nope"));
}

#[cfg(feature = "bench")]
#[test]
fn bench_writes_its_json_and_chart() {
    let dir = tempfile::tempdir().unwrap();
    let (json_path, chart_path) = (dir.path().join("b.json"), dir.path().join("b.svg"));
    let output = Command::new(env!("CARGO_BIN_EXE_latchkey"))
        .args([
            "bench",
            "--scenario",
            "contended",
            "--scenario",
            "contended-processes",
            "--duration",
            "300ms",
            "-q",
        ])
        .arg("--json")
        .arg(&json_path)
        .arg("--chart")
        .arg(&chart_path)
        .env_remove("LATCHKEY_REDIS")
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stdout(&output).contains("latchkey / rslock: throughput"),
        "{}",
        stdout(&output)
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    let impls: Vec<&str> = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["impl"].as_str().unwrap())
        .collect();
    let each = ["latchkey", "latchkey-fair", "raw", "raw-fenced", "rslock"];
    assert_eq!(impls, [each, each].concat());
    // The worker processes reported: every figure has a cost per acquisition.
    for result in report["results"].as_array().unwrap() {
        assert!(
            result["client_cpu_us_per_op"].as_f64().unwrap() > 0.0,
            "{result}"
        );
        assert!(
            result["redis_cpu_us_per_op"].as_f64().unwrap() > 0.0,
            "{result}"
        );
        assert!(result["ops_per_sec"].as_f64().unwrap() > 0.0, "{result}");
    }
    assert!(
        std::fs::read_to_string(&chart_path)
            .unwrap()
            .contains("<rect")
    );
}

/// Commands latchkey's Rust code (and redis-rs under it) sends itself, beside the
/// ones its Lua scripts call: connecting (`HELLO`, `SELECT`, `PING`, and `INFO`,
/// which tells a cluster node given as one server), loading and
/// running scripts, listening for wake-ups, `list`, `--wait-replicas`, Cluster slot
/// maps, and optimistic transactions.
const SENT_BY_THE_CLIENT: [&str; 20] = [
    "hello",
    "select",
    "ping",
    "info",
    "evalsha",
    "script|load",
    "subscribe",
    "unsubscribe",
    "ssubscribe",
    "sunsubscribe",
    "scan",
    "get",
    "pttl",
    "wait",
    "cluster|slots",
    "watch",
    "unwatch",
    "multi",
    "exec",
    "client|id",
];

/// Every command every Lua script under `crates/latchkey/src/scripts` calls, read
/// from the scripts themselves (`redis.call('X'` and `redis.pcall(... 'X' ...`).
fn commands_the_scripts_call() -> std::collections::BTreeSet<String> {
    fn walk(dir: &Path, found: &mut std::collections::BTreeSet<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, found);
                continue;
            }
            if path.extension().is_none_or(|e| e != "lua") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            // The command is what comes before the first comma of a call: a quoted
            // name, or a choice of two (`sharded and 'SPUBLISH' or 'PUBLISH'`).
            for call in text.split("call(").skip(1) {
                let name = call.split([',', ')']).next().unwrap_or_default();
                for word in name.split('\'').skip(1).step_by(2) {
                    found.insert(word.to_ascii_lowercase());
                }
            }
        }
    }
    let scripts = Path::new(env!("CARGO_MANIFEST_DIR")).join("../latchkey/src/scripts");
    let mut found = std::collections::BTreeSet::new();
    walk(&scripts, &mut found);
    found
}

/// The README's ACL line allows every command the scripts call and the client
/// sends: a script that starts calling a new command fails this test until the
/// line says so.
#[test]
fn the_readme_acl_line_covers_every_command_latchkey_sends() {
    let (_, _, rules) = readme_acl_line();
    let allowed: Vec<&str> = rules
        .split_whitespace()
        .filter_map(|rule| rule.strip_prefix('+'))
        .collect();
    let line: Vec<&str> = rules
        .split_whitespace()
        .filter(|rule| *rule != "on" && !rule.starts_with('>'))
        .collect();
    let expected = latchkey::ACL_RULES.replace('P', "myapp:");
    assert_eq!(
        line.join(" "),
        expected,
        "the README's line is not ACL_RULES"
    );
    let scripts = commands_the_scripts_call();
    assert!(
        scripts.contains("zadd") && scripts.contains("publish"),
        "{scripts:?}"
    );
    let missing: Vec<String> = scripts
        .iter()
        .map(String::as_str)
        .chain(SENT_BY_THE_CLIENT)
        .filter(|command| !allowed.contains(command))
        .map(|command| format!("+{command}"))
        .collect();
    assert!(
        missing.is_empty(),
        "the README's ACL line lacks {}",
        missing.join(" ")
    );
}

#[test]
fn every_command_works_for_a_user_made_by_the_readme_acl_line() {
    let (user, password, rules) = readme_acl_line();
    let server = RedisServer::builder()
        .user(&user, &password, &rules)
        .start()
        .unwrap();
    let url = server.url_as(&user, &password);
    let as_user = |args: &[&str]| latchkey_ok(&url, args);
    // A holder, and a fair waiter queued behind it that the release wakes.
    let holder = common::in_myapp(&url, &["run", "job", "--", "sleep", "1"]).spawn_running();
    wait_until_held(&server, "myapp:job");
    as_user(&["run", "job", "--fair", "--wait", "10s", "--", "true"]);
    as_user(&["run", "{tagged}job", "--", "true"]);
    let listed = as_user(&["list", "--json"]);
    assert!(stdout(&listed).starts_with('['));
    as_user(&["status", "job", "--json"]);
    as_user(&["release", "job", "--force"]);
    for algo in ["cooldown", "fixed", "sliding", "gcra"] {
        let key = format!("sms:{algo}");
        let limit: &[&str] = match algo {
            "cooldown" => &[],
            _ => &["--limit", "3"],
        };
        as_user(&[&["throttle", &key, "--algo", algo, "--per", "1m"], limit].concat());
        let peek = [
            &["throttle", &key, "--algo", algo, "--per", "1m", "--peek"],
            limit,
        ]
        .concat();
        let peeked = common::in_myapp(&url, &peek).output().unwrap();
        // Allowed (0) or over the limit (1), never refused by the ACL (69).
        assert!(
            matches!(peeked.status.code(), Some(0 | 1)),
            "{peek:?}: {}",
            stderr(&peeked)
        );
    }
    as_user(&[
        "sem",
        "run",
        "pool",
        "--permits",
        "2",
        "--weight",
        "2",
        "--",
        "true",
    ]);
    as_user(&["rw", "run", "doc", "--read", "--", "true"]);
    as_user(&["rw", "run", "doc", "--write", "--", "true"]);
    as_user(&["status", "pool", "--json"]);
    as_user(&["elect", "nightly", "--value", "host-a", "--", "true"]);
    as_user(&["leader", "nightly"]);
    as_user(&[
        "latch", "loaded", "--count", "1", "--arrive", "--wait", "5s",
    ]);
    as_user(&["latch", "loaded", "--count", "1"]);
    wait_for_exit(holder);
    // Nothing was refused on the way, even where latchkey goes on without it (a
    // wake-up its release could not publish, a probe it does without).
    let mut admin = server.connection().unwrap();
    let refused: Vec<redis::Value> = redis::cmd("ACL").arg("LOG").query(&mut admin).unwrap();
    assert!(refused.is_empty(), "the ACL refused: {refused:?}");
    // A user that lacks a command `list` reads with is told so (69), not shown an
    // empty list while a lock is held.
    let holder = common::in_myapp(&url, &["run", "job", "--", "sleep", "2"]).spawn_running();
    wait_until_held(&server, "myapp:job");
    let _: () = redis::cmd("ACL")
        .arg(&["SETUSER", user.as_str(), "-zcard"])
        .query(&mut admin)
        .unwrap();
    for listing in [&["list"][..], &["list", "--json"]] {
        let listed = common::in_myapp(&url, listing).output().unwrap();
        assert_eq!(
            listed.status.code(),
            Some(69),
            "{listing:?}: {}",
            stderr(&listed)
        );
        assert!(
            stderr(&listed).contains("denied a command by ACL"),
            "{}",
            stderr(&listed)
        );
    }
    wait_for_exit(holder);
}

/// What the demos need beside the README's line, for their own data; the README
/// says so.
#[cfg(feature = "demo")]
const DEMO_DATA_RULES: &str = "+incr +incrby +decr +decrby +mget +mset +rpush +llen +expire";

/// The demos keep their keys outside any prefix: the README's line with `~* &*`,
/// as it says for no prefix, and the demos' data commands run each of them.
#[cfg(feature = "demo")]
#[test]
fn every_demo_works_for_a_user_made_by_the_readme_acl_line_without_a_prefix() {
    let (user, password, rules) = readme_acl_line();
    let rules = rules
        .split_whitespace()
        .map(|rule| match rule {
            r if r.starts_with('~') => "~*",
            r if r.starts_with('&') => "&*",
            r => r,
        })
        .collect::<Vec<_>>()
        .join(" ");
    assert!(include_str!("../../../README.md").contains(DEMO_DATA_RULES));
    let rules = format!("{rules} {DEMO_DATA_RULES}");
    let server = RedisServer::builder()
        .user(&user, &password, &rules)
        .start()
        .unwrap();
    let url = server.url_as(&user, &password);
    for demo in [
        &["demo", "flash-sale", "--quiet"][..],
        &["demo", "flash-sale", "--semaphore", "3", "--quiet"],
        &["demo", "transfer", "--quiet"],
        &["demo", "throttle", "--quiet"],
    ] {
        let output = Command::new(env!("CARGO_BIN_EXE_latchkey"))
            .env("LATCHKEY_REDIS", &url)
            .env_remove("LATCHKEY_PREFIX")
            .args(demo)
            .output()
            .unwrap();
        assert!(output.status.success(), "{demo:?}: {}", stderr(&output));
        let shown = stdout(&output);
        // The plain flash-sale ends as the README's quick start shows; the others
        // with an invariant line.
        let held = shown.contains("invariant held") || shown.trim_end().ends_with("oversold 0");
        assert!(held, "{demo:?}: {shown}");
    }
}

#[test]
fn a_user_missing_a_command_gets_exit_69_naming_the_rules() {
    let (user, password, rules) = readme_acl_line();
    let server = RedisServer::builder()
        .user(&user, &password, &format!("{rules} -zadd"))
        .start()
        .unwrap();
    let holder = common::in_myapp(
        &server.url_as(&user, &password),
        &["run", "job", "--", "sleep", "1"],
    )
    .spawn_running();
    wait_until_held(&server, "myapp:job");
    // Queueing calls ZADD inside the script.
    let waiter = common::in_myapp(
        &server.url_as(&user, &password),
        &["run", "job", "--wait", "5s", "--", "true"],
    )
    .output()
    .unwrap();
    assert_eq!(waiter.status.code(), Some(69), "{}", stderr(&waiter));
    let message = stderr(&waiter);
    assert!(
        message.contains("ACL") && message.contains("+zadd"),
        "{message}"
    );
    assert_eq!(message.lines().count(), 1, "{message}");
    wait_for_exit(holder);
}

/// Polls until `key` exists; panics after 10 s.
fn wait_until_held(server: &RedisServer, key: &str) {
    let mut admin = server.connection().unwrap();
    let started = Instant::now();
    while !redis::Commands::exists::<_, bool>(&mut admin, key).unwrap() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{key} never held"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn wait_for_exit(mut child: Running) {
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
}

#[test]
fn a_signal_while_queued_leaves_the_queue_and_exits_128_plus_n() {
    let server = RedisServer::start().unwrap();
    let mut holder = hold_in_background(&server, &["job"]);
    let mut admin = server.connection().unwrap();
    for (signal, status) in [
        (Signal::SIGINT, 130),
        (Signal::SIGTERM, 143),
        (Signal::SIGUSR1, 138),
    ] {
        let waiter = run_in_background(&server, &["job", "--fair"], "true");
        let started = Instant::now();
        while redis::Commands::zcard::<_, u64>(&mut admin, "{job}:lk:queue").unwrap() == 0 {
            assert!(started.elapsed() < Duration::from_secs(10), "never queued");
            std::thread::sleep(Duration::from_millis(10));
        }
        kill(Pid::from_raw(waiter.id() as i32), signal).unwrap();
        let output = waiter.wait_with_output().unwrap();
        assert_eq!(output.status.code(), Some(status), "{}", stderr(&output));
        assert!(
            stderr(&output).contains("left the wait queue"),
            "{}",
            stderr(&output)
        );
        // Gone at once, not when its waiter lease runs out.
        let queued: u64 = redis::Commands::zcard(&mut admin, "{job}:lk:queue").unwrap();
        assert_eq!(queued, 0);
    }
    holder.kill().unwrap();
    holder.wait().unwrap();
}

#[test]
fn names_starting_with_a_dash_and_commands_that_cannot_run() {
    let server = RedisServer::start().unwrap();
    let ran = output(
        &server,
        &[
            "run",
            "--name",
            "-dash",
            "--",
            "sh",
            "-c",
            "echo $LATCHKEY_LOCK",
        ],
    );
    assert!(ran.status.success(), "{}", stderr(&ran));
    assert_eq!(stdout(&ran).trim(), "-dash");
    let status = output(&server, &["status", "--name", "-dash"]);
    assert!(
        stdout(&status).starts_with("-dash: free"),
        "{}",
        stdout(&status)
    );

    let dir = tempfile::tempdir().unwrap();
    let not_executable = dir.path().join("script.sh");
    std::fs::write(&not_executable, "#!/bin/sh\ntrue\n").unwrap();
    let path = not_executable.to_str().unwrap();
    let denied = output(&server, &["run", "job", "--", path]);
    assert_eq!(denied.status.code(), Some(126), "{}", stderr(&denied));
    let missing = output(&server, &["run", "job", "--", "/nonexistent/cmd"]);
    assert_eq!(missing.status.code(), Some(127), "{}", stderr(&missing));
    // Neither left the lock held.
    let free = output(&server, &["status", "job"]);
    assert!(stdout(&free).starts_with("job: free"), "{}", stdout(&free));
}

#[test]
fn a_rate_limit_and_a_lock_of_the_same_name_do_not_collide() {
    let server = RedisServer::start().unwrap();
    let counted = output(
        &server,
        &["throttle", "deploy", "--limit", "5", "--per", "30s"],
    );
    assert!(counted.status.success(), "{}", stderr(&counted));
    // Status shows the count; the lock is free (exit 1: nothing is held).
    let status = output(&server, &["status", "deploy"]);
    assert_eq!(status.status.code(), Some(1));
    assert!(
        stdout(&status).starts_with("deploy: rate limit (fixed), 1 used, full again in"),
        "{}",
        stdout(&status)
    );
    let ran = output(&server, &["run", "deploy", "--no-wait", "--", "true"]);
    assert!(ran.status.success(), "{}", stderr(&ran));
    // The listing shows the rate limit, and no lock (it was released).
    let listed = stdout(&output(&server, &["list"]));
    assert_eq!(listed.lines().count(), 1, "{listed}");
    assert!(listed.starts_with("deploy: rate limit (fixed)"), "{listed}");
}
