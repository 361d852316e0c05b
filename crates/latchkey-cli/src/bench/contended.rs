//! Many tasks on one key: throughput, waits, Redis work per acquisition, fairness
//! and the handoff gap.

use std::sync::Arc;
use std::time::{Duration, Instant};

use latchkey::Client;
use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;
use tokio::sync::Mutex as AsyncMutex;

use super::stats::{Percentiles, commands_run};
use crate::cli::BenchScenario;
use crate::exit::Failure;

const KEY: &str = "bench:lock";
const COUNTER: &str = "bench:counter";
const POLL_EVERY: Duration = Duration::from_millis(10);

#[derive(Clone, Copy, Debug)]
pub struct Setup {
    pub tasks: usize,
    pub section: Section,
}

#[derive(Clone, Copy, Debug)]
pub enum Section {
    /// GET then SET of a counter (checked at the end).
    GetSet,
    /// Hold the lock this long.
    Sleep(Duration),
}

impl Section {
    /// Redis commands the critical section itself runs; not the lock's doing.
    fn commands(self) -> f64 {
        match self {
            Section::GetSet => 2.0,
            Section::Sleep(_) => 0.0,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Impl {
    Latchkey,
    LatchkeyFair,
    Poll10ms,
}

impl Impl {
    fn name(self) -> &'static str {
        match self {
            Impl::Latchkey => "latchkey",
            Impl::LatchkeyFair => "latchkey-fair",
            Impl::Poll10ms => "poll-10ms",
        }
    }
}

/// What one task saw.
#[derive(Default)]
struct TaskLog {
    waits: Vec<Duration>,
    /// (acquired, release returned) per critical section.
    sections: Vec<(Instant, Instant)>,
}

struct Result {
    ops_per_sec: f64,
    waits: Percentiles,
    cmds_per_op: f64,
    fairness: (usize, usize),
    gap: Percentiles,
}

pub async fn run(
    url: &str,
    scenario: BenchScenario,
    setup: Setup,
    duration: Duration,
) -> std::result::Result<(), Failure> {
    let mut admin = connect(url).await?;
    let ping = ping_rtt(&mut admin).await?;
    println!(
        "\n{scenario:?}: {} tasks on one key; PING RTT p50 {} µs",
        setup.tasks, ping.p50
    );
    println!(
        "  {:<14} {:>10} {:>9} {:>9} {:>9} {:>10} {:>9} {:>9} {:>9}",
        "impl", "ops/s", "wait p50", "p99", "max", "lock cmds", "min/max", "gap p50", "gap p99"
    );
    let mut results = Vec::new();
    for which in [Impl::Latchkey, Impl::LatchkeyFair, Impl::Poll10ms] {
        let result = run_one(url, which, setup, duration, &mut admin).await?;
        println!(
            "  {:<14} {:>10.0} {:>9} {:>9} {:>9} {:>10.2} {:>9} {:>9} {:>9}",
            which.name(),
            result.ops_per_sec,
            result.waits.p50,
            result.waits.p99,
            result.waits.max,
            result.cmds_per_op,
            format!("{}/{}", result.fairness.0, result.fairness.1),
            result.gap.p50,
            result.gap.p99
        );
        results.push((which, result));
    }
    let poll = results
        .iter()
        .find(|(w, _)| *w == Impl::Poll10ms)
        .map(|(_, r)| r.ops_per_sec)
        .unwrap_or(1.0);
    for (which, result) in &results {
        let mean_cycle = 1e6 / result.ops_per_sec.max(1e-9);
        println!(
            "  {:<14} throughput ×{:.2} of poll-10ms; max wait = {:.2} × (tasks × mean cycle); fairness min/max {:.2}; gap p50 = {:.2} × PING",
            which.name(),
            result.ops_per_sec / poll,
            result.waits.max as f64 / (setup.tasks as f64 * mean_cycle),
            result.fairness.0 as f64 / result.fairness.1.max(1) as f64,
            result.gap.p50 as f64 / ping.p50.max(1) as f64
        );
    }
    Ok(())
}

async fn run_one(
    url: &str,
    which: Impl,
    setup: Setup,
    duration: Duration,
    admin: &mut MultiplexedConnection,
) -> std::result::Result<Result, Failure> {
    let _: () = admin.del(&[KEY, COUNTER]).await.map_err(redis_failure)?;
    let client = Client::open(url).await?;
    let conn = connect(url).await?;
    let before = commands_run(admin).await.map_err(redis_failure)?;
    let started = Instant::now();
    let stop = started + duration;
    let logs: Vec<_> = (0..setup.tasks)
        .map(|_| Arc::new(AsyncMutex::new(TaskLog::default())))
        .collect();
    let tasks: Vec<_> = logs
        .iter()
        .map(|log| {
            let (client, conn, log) = (client.clone(), conn.clone(), log.clone());
            tokio::spawn(async move { task(which, client, conn, setup.section, stop, log).await })
        })
        .collect();
    for task in tasks {
        task.await
            .map_err(|e| Failure::software(format!("bench task failed: {e}")))??;
    }
    let elapsed = started.elapsed();
    let after = commands_run(admin).await.map_err(redis_failure)?;
    let mut waits = Vec::new();
    let mut sections = Vec::new();
    let mut counts = Vec::new();
    for log in &logs {
        let log = log.lock().await;
        counts.push(log.sections.len());
        waits.extend_from_slice(&log.waits);
        sections.extend_from_slice(&log.sections);
    }
    let ops = sections.len();
    if matches!(setup.section, Section::GetSet) {
        let counter: Option<usize> = admin.get(COUNTER).await.map_err(redis_failure)?;
        if counter.unwrap_or(0) != ops {
            return Err(Failure::software(format!(
                "{}: counter {counter:?} after {ops} critical sections: exclusion failed",
                which.name()
            )));
        }
    }
    sections.sort_unstable_by_key(|(acquired, _)| *acquired);
    let mut gaps: Vec<Duration> = sections
        .windows(2)
        .map(|w| w[1].0.saturating_duration_since(w[0].1))
        .collect();
    Ok(Result {
        ops_per_sec: ops as f64 / elapsed.as_secs_f64(),
        waits: Percentiles::of(&mut waits),
        // Scripts' inner calls included; the critical section's own commands excluded.
        cmds_per_op: (after - before) as f64 / ops.max(1) as f64 - setup.section.commands(),
        fairness: (
            counts.iter().copied().min().unwrap_or(0),
            counts.iter().copied().max().unwrap_or(0),
        ),
        gap: Percentiles::of(&mut gaps),
    })
}

async fn task(
    which: Impl,
    client: Client,
    mut conn: MultiplexedConnection,
    section: Section,
    stop: Instant,
    log: Arc<AsyncMutex<TaskLog>>,
) -> std::result::Result<(), Failure> {
    let mutex = client.mutex(KEY)?.with_ttl(Duration::from_secs(30))?;
    let mutex = if which == Impl::LatchkeyFair {
        mutex.fair()
    } else {
        mutex
    };
    let release = redis::Script::new(
        "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0",
    );
    let mut log = log.lock().await;
    while Instant::now() < stop {
        let asked = Instant::now();
        let token = format!("{:032x}", rand_token());
        let guard = match which {
            Impl::Poll10ms => {
                loop {
                    let set: Option<String> = redis::cmd("SET")
                        .arg(KEY)
                        .arg(&token)
                        .arg("NX")
                        .arg("PX")
                        .arg(30_000)
                        .query_async(&mut conn)
                        .await
                        .map_err(redis_failure)?;
                    if set.is_some() {
                        break;
                    }
                    tokio::time::sleep(POLL_EVERY).await;
                }
                None
            }
            _ => Some(mutex.lock().await?),
        };
        let acquired = Instant::now();
        log.waits.push(acquired - asked);
        match section {
            Section::GetSet => {
                let n: Option<u64> = conn.get(COUNTER).await.map_err(redis_failure)?;
                let _: () = conn
                    .set(COUNTER, n.unwrap_or(0) + 1)
                    .await
                    .map_err(redis_failure)?;
            }
            Section::Sleep(pause) => tokio::time::sleep(pause).await,
        }
        match guard {
            Some(guard) => {
                guard.release().await?;
            }
            None => {
                let _: i64 = release
                    .key(KEY)
                    .arg(&token)
                    .invoke_async(&mut conn)
                    .await
                    .map_err(redis_failure)?;
            }
        }
        log.sections.push((acquired, Instant::now()));
    }
    Ok(())
}

fn rand_token() -> u128 {
    // Tokens of the polling recipe only need to differ between tasks here.
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    u128::from(NEXT.fetch_add(1, Ordering::Relaxed))
}

async fn ping_rtt(conn: &mut MultiplexedConnection) -> std::result::Result<Percentiles, Failure> {
    let mut samples = Vec::new();
    for _ in 0..200 {
        let sent = Instant::now();
        let _: String = redis::cmd("PING")
            .query_async(conn)
            .await
            .map_err(redis_failure)?;
        samples.push(sent.elapsed());
    }
    Ok(Percentiles::of(&mut samples))
}

async fn connect(url: &str) -> std::result::Result<MultiplexedConnection, Failure> {
    let client = redis::Client::open(url).map_err(redis_failure)?;
    client
        .get_multiplexed_async_connection()
        .await
        .map_err(redis_failure)
}

fn redis_failure(error: redis::RedisError) -> Failure {
    Failure::unavailable(format!("Redis failed during the benchmark: {error}"))
}
