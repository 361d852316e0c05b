//! A lock over a quorum of 5 independent masters (Redlock), started here, beside
//! latchkey on one of them alone and beside rslock's multi-node mode on the same 5.
//!
//! - `acquire`: 50 tasks, each its own key, acquire (timed) + release in a loop;
//! - `acquire/one-stopped`: the same on the quorum while one master is SIGSTOPped
//!   (a stopped master answers nothing and closes nothing: the worst kind of slow).
//!
//! rslock is not run with a stopped master: it has no per-node deadline of its own,
//! so its acquisitions would wait for the connection's timeout.

use std::sync::Arc;
use std::time::{Duration, Instant};

use indicatif::ProgressBar;
use latchkey::quorum::QuorumStore;
use latchkey::store::{Pass, WakeUps};
use latchkey::{Client, Lease};
use latchkey_testkit::RedisServer;

use super::timed::TimedRun;
use crate::BenchError;
use crate::figures::Figures;
use crate::stats::process_cpu;

const SCENARIO: &str = "quorum";
const MASTERS: usize = 5;
const TASKS: usize = 50;
/// Alternating rounds per pair.
const ROUNDS: u32 = 4;
/// The lease every implementation asks for.
const TTL: Duration = Duration::from_secs(10);

/// Progress-bar steps: the three side by side, then the stopped master.
pub(crate) const STEPS: u64 = 2;

pub(crate) async fn run(
    duration: Duration,
    progress: &ProgressBar,
) -> Result<Vec<Figures>, BenchError> {
    let masters = tokio::task::spawn_blocking(|| {
        (0..MASTERS)
            .map(|_| RedisServer::start())
            .collect::<std::io::Result<Vec<_>>>()
    })
    .await
    .map_err(|e| BenchError::Redis(e.to_string()))?
    .map_err(|e| BenchError::Redis(format!("cannot start {MASTERS} redis-servers: {e}")))?;
    let urls: Vec<String> = masters.iter().map(RedisServer::url).collect();
    let single = Client::open(&urls[0]).await?;
    let quorum = Client::open_quorum(&urls).await?;
    let rslock = Arc::new(rslock::LockManager::new(urls.clone()));

    progress.set_message(format!("{SCENARIO}: single, quorum-5 and rslock-5"));
    let (mut on_one, mut on_five, mut peer) = (
        TimedRun::default(),
        TimedRun::default(),
        TimedRun::default(),
    );
    for _ in 0..ROUNDS {
        let slice = duration / ROUNDS;
        on_one.add(measure(&Locker::Latchkey(&single), slice).await?);
        on_five.add(measure(&Locker::Quorum(&quorum), slice).await?);
        peer.add(measure(&Locker::Rslock(&rslock), slice).await?);
        // Keys are per implementation: one's leftovers never block another.
    }
    progress.inc(1);

    progress.set_message(format!("{SCENARIO}: quorum-5 with one master stopped"));
    let signal = |e: std::io::Error| BenchError::Redis(format!("cannot signal a master: {e}"));
    masters[2].pause().map_err(signal)?;
    let stopped = measure(&Locker::Quorum(&quorum), duration).await;
    masters[2].resume().map_err(signal)?;
    let stopped = stopped?;
    progress.inc(1);

    let figures = vec![
        on_one.figures(SCENARIO, "acquire/single"),
        on_five.figures(SCENARIO, "acquire/quorum-5"),
        peer.figures(SCENARIO, "acquire/rslock-5"),
        stopped.figures(SCENARIO, "acquire/quorum-5-one-stopped"),
    ];
    let deadline = quorum.store().node_deadline(latchkey::Ttl::new(TTL)?);
    print_ratios(&figures, deadline);
    Ok(figures)
}

/// The implementations measured.
enum Locker<'a> {
    Latchkey(&'a Client),
    Quorum(&'a Client<QuorumStore>),
    Rslock(&'a Arc<rslock::LockManager>),
}

impl Locker<'_> {
    fn name(&self) -> &'static str {
        match self {
            Locker::Latchkey(_) => "single",
            Locker::Quorum(_) => "quorum",
            Locker::Rslock(_) => "rslock",
        }
    }
}

/// 50 tasks, each on its own key, for `duration`: acquire (timed) and release.
async fn measure(locker: &Locker<'_>, duration: Duration) -> Result<TimedRun, BenchError> {
    let started = Instant::now();
    let cpu_before = process_cpu();
    let stop = started + duration;
    let mut tasks = Vec::new();
    for task in 0..TASKS {
        let key = format!("bench:quorum:{}:{task}", locker.name());
        tasks.push(match locker {
            Locker::Latchkey(client) => tokio::spawn(latchkey_loop((*client).clone(), key, stop)),
            Locker::Quorum(client) => tokio::spawn(latchkey_loop((*client).clone(), key, stop)),
            Locker::Rslock(manager) => tokio::spawn(rslock_loop((*manager).clone(), key, stop)),
        });
    }
    TimedRun::gather(tasks, started, cpu_before).await
}

async fn latchkey_loop<S: Pass + WakeUps>(
    client: Client<S>,
    key: String,
    stop: Instant,
) -> Result<Vec<Duration>, BenchError> {
    let mutex = client.mutex(&key)?.with_lease(Lease::fixed(TTL)?);
    let mut latencies = Vec::new();
    while Instant::now() < stop {
        let asked = Instant::now();
        let guard = mutex.lock().await?;
        latencies.push(asked.elapsed());
        guard.release().await?;
    }
    Ok(latencies)
}

async fn rslock_loop(
    manager: Arc<rslock::LockManager>,
    key: String,
    stop: Instant,
) -> Result<Vec<Duration>, BenchError> {
    let mut latencies = Vec::new();
    while Instant::now() < stop {
        let asked = Instant::now();
        let lock = manager
            .acquire_no_guard(key.as_bytes(), TTL)
            .await
            .map_err(|e| BenchError::Rslock(e.to_string()))?;
        latencies.push(asked.elapsed());
        manager.unlock(&lock).await;
    }
    Ok(latencies)
}

fn print_ratios(figures: &[Figures], deadline: Duration) {
    let find = |name: &str| figures.iter().find(|f| f.implementation == name);
    let p50 = |name: &str| find(name).map_or(f64::NAN, |f| f.latency_us.p50 as f64);
    println!("\n{SCENARIO}, side by side (5 masters, {TASKS} tasks on their own keys):");
    println!(
        "  quorum-5 / single: acquire p50 ×{:.2} (target ≤ 1.5)",
        p50("acquire/quorum-5") / p50("acquire/single").max(1e-9)
    );
    println!(
        "  quorum-5 / rslock-5: acquire p50 ×{:.2}",
        p50("acquire/quorum-5") / p50("acquire/rslock-5").max(1e-9)
    );
    if let Some(stopped) = find("acquire/quorum-5-one-stopped") {
        println!(
            "  one master stopped: acquire p99 {} µs (target ≤ per-node deadline {} µs + 5 ms)",
            stopped.latency_us.p99,
            deadline.as_micros()
        );
    }
}
