//! What one uncontended acquire + release costs, in instructions: on the server and
//! in the client, counted by valgrind's callgrind, which gives the same count
//! whatever else the machine is doing (wall-clock figures move ±30 % here).
//!
//! The scenario starts its own `redis-server` under callgrind (`hz 1`, so its
//! timer costs nearly nothing per cycle), and for every subject runs a client
//! process (this executable's hidden `bench-cost-client` command) under callgrind
//! too, twice: `CYCLES` and `2 × CYCLES` cycles of one task on its own key. The
//! difference between the two runs, over `CYCLES`, is the cost of one cycle:
//! start-up, connecting and loading scripts cancel out. The server's counters are
//! zeroed before each client run and dumped after it (`callgrind_control`); the
//! commands are counted the same way from `INFO commandstats`.
//!
//! The subjects: raw `SET NX PX` + compare-and-delete, raw with a fencing token,
//! rslock, latchkey plain and fair, latchkey's semaphore; and a GCRA rate-limit
//! decision beside the one-`INCR` script it is held to. Cycles and decisions are
//! both "per cycle" in the figures.
//!
//! Without valgrind the scenario says so and reports nothing.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use indicatif::ProgressBar;
use serde::{Deserialize, Serialize};

use super::ratelimit::Decider;
use crate::BenchError;
use crate::figures::{Figures, Instructions};
use crate::impls::{Impl, Locker};
use crate::stats::{Percentiles, commands_run};

const SCENARIO: &str = "cost";
/// Cycles of the shorter client run (the longer one runs twice as many).
const CYCLES: u64 = 2_000;
/// Cycles every client run makes first, untimed and uncounted apart: connecting,
/// loading scripts, warming caches.
const WARM_UP: u64 = 50;

/// What a client run exercises.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Subject {
    /// A lock of one implementation.
    Lock(Impl),
    /// latchkey's semaphore: one permit of two, taken and given back.
    Semaphore,
    /// A rate-limit decision (allowed), or the one-`INCR` script it is held to.
    RateLimit(Decider),
}

impl Subject {
    /// Every subject, in report order.
    const ALL: [Subject; 10] = [
        Subject::Lock(Impl::Raw),
        Subject::Lock(Impl::RawFenced),
        Subject::Lock(Impl::Rslock),
        Subject::Lock(Impl::Latchkey),
        Subject::Lock(Impl::LatchkeyFenced),
        Subject::Lock(Impl::LatchkeyFair),
        Subject::Semaphore,
        Subject::RateLimit(Decider::TrivialScript),
        Subject::RateLimit(Decider::ClockFloor),
        Subject::RateLimit(Decider::Gcra),
    ];

    fn name(self) -> &'static str {
        match self {
            Subject::Lock(implementation) => implementation.name(),
            Subject::Semaphore => "latchkey-semaphore",
            Subject::RateLimit(Decider::Gcra) => "latchkey-gcra",
            Subject::RateLimit(decider) => decider.name(),
        }
    }
}

/// One client run: what to cycle, where, how many times.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ClientJob {
    pub subject: Subject,
    pub url: String,
    pub cycles: u64,
}

/// The client side of a run (this executable's `bench-cost-client`): `WARM_UP` +
/// `cycles` acquire + release cycles, one task, its own key.
pub async fn client(job: ClientJob) -> Result<(), BenchError> {
    let key = format!("cost:{}", job.subject.name());
    match job.subject {
        Subject::Lock(implementation) => {
            let locker = Locker::new(implementation, &job.url).await?;
            for _ in 0..WARM_UP + job.cycles {
                let held = locker.lock(&key).await?;
                locker.unlock(held).await?;
            }
        }
        Subject::Semaphore => {
            let client = latchkey::Client::open(&job.url).await?;
            let semaphore = client
                .semaphore(&key, 2)?
                .with_lease(latchkey::Lease::fixed(Duration::from_secs(30))?);
            for _ in 0..WARM_UP + job.cycles {
                semaphore.acquire(1).await?.release().await?;
            }
        }
        Subject::RateLimit(decider) => match decider.policy()? {
            None => {
                let mut conn = crate::connect(&job.url).await?;
                for _ in 0..WARM_UP + job.cycles {
                    let call = decider.floor_script().key(&key);
                    call.invoke_async::<i64>(&mut conn).await?;
                }
            }
            Some(policy) => {
                let client = latchkey::Client::open(&job.url).await?;
                let limiter = client.rate_limiter(&key, policy)?;
                for _ in 0..WARM_UP + job.cycles {
                    limiter.check(1).await?;
                }
            }
        },
    }
    Ok(())
}

pub(crate) async fn run(progress: &ProgressBar) -> Result<Vec<Figures>, BenchError> {
    if !valgrind_installed().await {
        println!(
            "\ncost: skipped: valgrind is not installed (apt-get install valgrind); it counts \
             the instructions"
        );
        return Ok(Vec::new());
    }
    let server = CountedServer::start().await?;
    let mut figures = Vec::new();
    for subject in Subject::ALL {
        progress.set_message(format!("{SCENARIO}: {}", subject.name()));
        let short = server.measure(subject, CYCLES).await?;
        let long = server.measure(subject, 2 * CYCLES).await?;
        let per_cycle = |long: u64, short: u64| long.saturating_sub(short) as f64 / CYCLES as f64;
        let mut row = Figures::timed(SCENARIO, subject.name(), 0.0, Percentiles::default());
        row.redis_cmds_per_op = per_cycle(long.commands, short.commands);
        row.instructions = Some(Instructions {
            server: per_cycle(long.server, short.server),
            client: per_cycle(long.client, short.client),
        });
        figures.push(row);
        progress.inc(1);
    }
    Ok(figures)
}

/// Progress-bar steps: one per subject.
pub(crate) const STEPS: u64 = Subject::ALL.len() as u64;

async fn valgrind_installed() -> bool {
    let found = |tool: &'static str| async move {
        tokio::process::Command::new(tool)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .await
            .is_ok_and(|status| status.success())
    };
    found("valgrind").await && found("callgrind_control").await
}

/// What one client run cost.
struct Counted {
    server: u64,
    client: u64,
    commands: u64,
}

/// A `redis-server` under callgrind, on a port of its own, in a directory of its
/// own that goes with it.
struct CountedServer {
    child: tokio::process::Child,
    pid: u32,
    url: String,
    dir: tempfile::TempDir,
    dumps: std::sync::atomic::AtomicU32,
}

impl CountedServer {
    async fn start() -> Result<Self, BenchError> {
        let failed = |what: String| {
            BenchError::Redis(format!("cannot start redis-server under valgrind: {what}"))
        };
        let dir = tempfile::tempdir().map_err(|e| failed(e.to_string()))?;
        let port = latchkey_testkit::free_port().map_err(|e| failed(e.to_string()))?;
        let child = tokio::process::Command::new("valgrind")
            .arg("--tool=callgrind")
            .arg(format!(
                "--callgrind-out-file={}",
                dir.path().join("server.out").display()
            ))
            .args([
                "redis-server",
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
            ])
            .args(["--save", "", "--appendonly", "no", "--hz", "1"])
            .arg("--dir")
            .arg(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| failed(e.to_string()))?;
        let pid = child
            .id()
            .ok_or_else(|| failed("it exited at once".into()))?;
        let url = format!("redis://127.0.0.1:{port}");
        let server = CountedServer {
            child,
            pid,
            url,
            dir,
            dumps: std::sync::atomic::AtomicU32::new(0),
        };
        server.wait_ready().await?;
        Ok(server)
    }

    /// valgrind starts a server in seconds, not milliseconds.
    async fn wait_ready(&self) -> Result<(), BenchError> {
        for _ in 0..300 {
            if let Ok(mut conn) = crate::connect(&self.url).await {
                if redis::cmd("PING")
                    .query_async::<String>(&mut conn)
                    .await
                    .is_ok()
                {
                    return Ok(());
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(BenchError::Redis(
            "redis-server under valgrind did not answer within 30 s".into(),
        ))
    }

    /// Runs `cycles` of `subject` in a client process under callgrind: what the
    /// server, the client and the commands cost, start-up included.
    async fn measure(&self, subject: Subject, cycles: u64) -> Result<Counted, BenchError> {
        let mut admin = crate::connect(&self.url).await?;
        self.callgrind_control("-z").await?;
        let commands_before = commands_run(&mut admin).await?;
        let client_out = self
            .dir
            .path()
            .join(format!("client.{}.{cycles}.out", subject.name()));
        let job = ClientJob {
            subject,
            url: self.url.clone(),
            cycles,
        };
        run_client(&job, &client_out).await?;
        let commands = commands_run(&mut admin).await? - commands_before;
        self.callgrind_control("-d").await?;
        let dump = self
            .dumps
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1;
        let server = instructions(&self.dir.path().join(format!("server.out.{dump}")))?;
        Ok(Counted {
            server,
            client: instructions(&client_out)?,
            commands,
        })
    }

    async fn callgrind_control(&self, action: &str) -> Result<(), BenchError> {
        let status = tokio::process::Command::new("callgrind_control")
            .arg(action)
            .arg(self.pid.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .await
            .map_err(|e| BenchError::Check(format!("callgrind_control {action}: {e}")))?;
        match status.success() {
            true => Ok(()),
            false => Err(BenchError::Check(format!(
                "callgrind_control {action}: {status}"
            ))),
        }
    }
}

impl Drop for CountedServer {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

/// Runs `job` in this executable under callgrind, its counts into `out`.
async fn run_client(job: &ClientJob, out: &Path) -> Result<(), BenchError> {
    let exe: PathBuf = std::env::current_exe()
        .map_err(|e| BenchError::Check(format!("cannot find the bench executable: {e}")))?;
    let spec = serde_json::to_string(job).map_err(|e| BenchError::Check(e.to_string()))?;
    let output = tokio::process::Command::new("valgrind")
        .arg("--tool=callgrind")
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg(&exe)
        .args(["bench-cost-client", &spec])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|e| BenchError::Check(format!("cannot start a client under valgrind: {e}")))?;
    match output.status.success() {
        true => Ok(()),
        false => Err(BenchError::Check(format!(
            "a client run of {} failed ({}): {}",
            job.subject.name(),
            output.status,
            String::from_utf8_lossy(&output.stderr)
                .lines()
                .last()
                .unwrap_or("")
        ))),
    }
}

/// The instructions a callgrind output file counted (its `summary:` line).
fn instructions(file: &Path) -> Result<u64, BenchError> {
    let unreadable = |why: String| BenchError::Check(format!("{}: {why}", file.display()));
    let text = std::fs::read_to_string(file).map_err(|e| unreadable(e.to_string()))?;
    text.lines()
        .find_map(|line| line.strip_prefix("summary:"))
        .and_then(|count| count.trim().parse().ok())
        .ok_or_else(|| unreadable("no `summary:` line".into()))
}
