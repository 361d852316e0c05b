//! A lock over a quorum of 5 independent masters (Redlock), started here, beside
//! latchkey on one of them alone and beside rslock's multi-node mode on the same 5.
//!
//! - `latency`: one task, acquire (timed) + release in a loop: the time a quorum
//!   adds to one acquisition, with the machine otherwise idle;
//! - `acquire`: 50 tasks, each its own key, acquire (timed) + release in a loop: on
//!   a machine with fewer cores than masters this measures the work per acquisition
//!   (five servers each do what the single one does), not the waiting;
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

/// Progress-bar steps: the three side by side with one task and with 50, then the
/// stopped master.
pub(crate) const STEPS: u64 = 3;

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

    let lockers = [
        Locker::Latchkey(&single),
        Locker::Quorum(&quorum),
        Locker::Rslock(&rslock),
    ];
    let mut figures = Vec::new();
    for (tasks, what) in [(1, "latency"), (TASKS, "acquire")] {
        progress.set_message(format!(
            "{SCENARIO}: single, quorum-5 and rslock-5, {tasks} task(s)"
        ));
        let mut runs = [
            TimedRun::default(),
            TimedRun::default(),
            TimedRun::default(),
        ];
        for _ in 0..ROUNDS {
            for (run, locker) in runs.iter_mut().zip(&lockers) {
                run.add(measure(locker, duration / ROUNDS, tasks).await?);
            }
            // Keys are per implementation: one's leftovers never block another.
        }
        for (run, locker) in runs.into_iter().zip(&lockers) {
            figures.push(run.figures(SCENARIO, &format!("{what}/{}", locker.label())));
        }
        progress.inc(1);
    }

    progress.set_message(format!("{SCENARIO}: quorum-5 with one master stopped"));
    let signal = |e: std::io::Error| BenchError::Redis(format!("cannot signal a master: {e}"));
    masters[2].pause().map_err(signal)?;
    let stopped = measure(&Locker::Quorum(&quorum), duration, TASKS).await;
    masters[2].resume().map_err(signal)?;
    let stopped = stopped?;
    progress.inc(1);

    figures.push(stopped.figures(SCENARIO, "acquire/quorum-5-one-stopped"));
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
    /// The name of its figures and keys.
    fn label(&self) -> &'static str {
        match self {
            Locker::Latchkey(_) => "single",
            Locker::Quorum(_) => "quorum-5",
            Locker::Rslock(_) => "rslock-5",
        }
    }
}

/// `tasks` tasks, each on its own key, for `duration`: acquire (timed) and release.
async fn measure(
    locker: &Locker<'_>,
    duration: Duration,
    tasks: usize,
) -> Result<TimedRun, BenchError> {
    let started = Instant::now();
    let cpu_before = process_cpu();
    let stop = started + duration;
    let mut spawned = Vec::new();
    for task in 0..tasks {
        let key = format!("bench:quorum:{}:{task}", locker.label());
        spawned.push(match locker {
            Locker::Latchkey(client) => tokio::spawn(latchkey_loop((*client).clone(), key, stop)),
            Locker::Quorum(client) => tokio::spawn(latchkey_loop((*client).clone(), key, stop)),
            Locker::Rslock(manager) => tokio::spawn(rslock_loop((*manager).clone(), key, stop)),
        });
    }
    TimedRun::gather(spawned, started, cpu_before).await
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
    let ratio = |a: &str, b: &str| p50(a) / p50(b).max(1e-9);
    println!("\n{SCENARIO}, side by side (5 masters):");
    println!(
        "  one task: quorum-5 / single: acquire p50 ×{:.2} (target ≤ 1.5); quorum-5 / rslock-5 ×{:.2}",
        ratio("latency/quorum-5", "latency/single"),
        ratio("latency/quorum-5", "latency/rslock-5")
    );
    println!(
        "  {TASKS} tasks on their own keys: quorum-5 / single: acquire p50 ×{:.2}; quorum-5 / rslock-5 ×{:.2}",
        ratio("acquire/quorum-5", "acquire/single"),
        ratio("acquire/quorum-5", "acquire/rslock-5")
    );
    if let Some(stopped) = find("acquire/quorum-5-one-stopped") {
        println!(
            "  one master stopped: acquire p99 {} µs (target ≤ per-node deadline {} µs + 5 ms)",
            stopped.latency_us.p99,
            deadline.as_micros()
        );
    }
}
