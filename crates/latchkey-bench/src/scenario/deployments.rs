//! latchkey on each Redis deployment it supports, started here side by side: one
//! node, a Redis Cluster of three primaries (no replicas: on a 2-core machine, a
//! replica's work would be charged to the cluster), and a primary with a replica
//! that every grant waits for (WAIT 1). latchkey only: the peers know no cluster.
//!
//! - `cycle`: one task, its own key, acquire + release back to back (latency);
//! - `contended`: 8 clients × 4 tasks on one key, empty critical section;
//! - `acquire`: one task's acquire alone, with and without WAIT 1;
//! - after the cluster's runs, on which nodes releases published (SPUBLISH should
//!   reach only the lock's shard).

use std::time::{Duration, Instant};

use indicatif::ProgressBar;
use latchkey::Client;
use latchkey_testkit::{RedisCluster, RedisServer};

use super::timed::TimedRun;
use crate::BenchError;
use crate::figures::Figures;
use crate::stats::process_cpu;

const SCENARIO: &str = "deployments";
/// Contended: clients (each its own connections) × tasks each, on one key.
const CLIENTS: usize = 8;
const TASKS_PER_CLIENT: usize = 4;
/// How long a grant may wait for its replica.
const REPLICA_WAIT: Duration = Duration::from_millis(200);

/// Progress-bar steps: three pairs.
pub(crate) const STEPS: u64 = 3;
/// Alternating rounds per pair.
const ROUNDS: u32 = 4;

pub(crate) async fn run(
    duration: Duration,
    progress: &ProgressBar,
) -> Result<Vec<Figures>, BenchError> {
    let start = |what: &str| BenchError::Redis(format!("cannot start {what}"));
    let single = blocking(RedisServer::start)
        .await?
        .map_err(|e| BenchError::Redis(format!("{}: {e}", start("redis-server"))))?;
    let cluster = blocking(RedisCluster::start_primaries_only)
        .await?
        .map_err(|e| BenchError::Redis(format!("{}: {e}", start("a cluster"))))?;
    let (primary, replica) = blocking(|| {
        let primary = RedisServer::start()?;
        let replica = RedisServer::start()?;
        replica.replicate(&primary)?;
        Ok::<_, std::io::Error>((primary, replica))
    })
    .await?
    .map_err(|e| BenchError::Redis(format!("{}: {e}", start("a primary and replica"))))?;

    let before = publishes(&cluster)?;
    let (single_url, seeds) = (&single.url(), &cluster.seeds());
    let plain = Client::open(&primary.url()).await?;
    let pairs = [
        (
            Kind::Cycle,
            ("cycle/single", vec![Client::open(single_url).await?]),
            ("cycle/cluster", vec![Client::open_cluster(seeds).await?]),
        ),
        (
            Kind::Contended,
            (
                "contended/single",
                open_clients(move || Client::open(single_url)).await?,
            ),
            (
                "contended/cluster",
                open_clients(move || Client::open_cluster(seeds)).await?,
            ),
        ),
        (
            Kind::Acquire,
            ("acquire/no-wait", vec![plain.clone()]),
            (
                "acquire/wait-1",
                vec![plain.with_wait_replicas(1, REPLICA_WAIT)?],
            ),
        ),
    ];
    let mut figures = Vec::new();
    for (kind, (first, first_clients), (second, second_clients)) in pairs {
        progress.set_message(format!("{SCENARIO}: {first} and {second}"));
        // Alternating rounds, so drift on a shared machine hits both alike.
        let (mut a, mut b) = (TimedRun::default(), TimedRun::default());
        for _ in 0..ROUNDS {
            a.add(measure(kind, &first_clients, duration / ROUNDS).await?);
            b.add(measure(kind, &second_clients, duration / ROUNDS).await?);
        }
        figures.push(a.figures(SCENARIO, first));
        figures.push(b.figures(SCENARIO, second));
        progress.inc(1);
    }
    let after = publishes(&cluster)?;
    drop(replica);
    print_ratios(&figures, &before, &after, &cluster);
    Ok(figures)
}

async fn blocking<T: Send + 'static>(
    start: impl FnOnce() -> T + Send + 'static,
) -> Result<T, BenchError> {
    tokio::task::spawn_blocking(start)
        .await
        .map_err(|e| BenchError::Redis(e.to_string()))
}

async fn open_clients<F, Fut>(open: F) -> Result<Vec<Client>, BenchError>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = latchkey::Result<Client>>,
{
    let mut clients = Vec::with_capacity(CLIENTS);
    for _ in 0..CLIENTS {
        clients.push(open().await?);
    }
    Ok(clients)
}

/// What one measurement times.
#[derive(Clone, Copy)]
enum Kind {
    /// One task, its own key: acquire + release, back to back.
    Cycle,
    /// Every client's tasks on one key: the wait for each acquisition.
    Contended,
    /// One task, its own key: the acquire alone (the release is not timed).
    Acquire,
}

/// Runs `kind` on `clients` for `duration`.
async fn measure(
    kind: Kind,
    clients: &[Client],
    duration: Duration,
) -> Result<TimedRun, BenchError> {
    let (key, tasks_per_client) = match kind {
        Kind::Cycle => ("bench:deploy:cycle", 1),
        Kind::Contended => ("bench:deploy:contended", TASKS_PER_CLIENT),
        Kind::Acquire => ("bench:deploy:acquire", 1),
    };
    let started = Instant::now();
    let cpu_before = process_cpu();
    let stop = started + duration;
    let mut tasks = Vec::new();
    for client in clients {
        for _ in 0..tasks_per_client {
            let mutex = client.mutex(key)?;
            tasks.push(tokio::spawn(async move {
                let mut latencies = Vec::new();
                while Instant::now() < stop {
                    let asked = Instant::now();
                    let guard = mutex.lock().await?;
                    let acquired = asked.elapsed();
                    guard.release().await?;
                    latencies.push(match kind {
                        Kind::Cycle => asked.elapsed(),
                        Kind::Contended | Kind::Acquire => acquired,
                    });
                }
                Ok::<_, latchkey::Error>(latencies)
            }));
        }
    }
    TimedRun::gather(tasks, started, cpu_before).await
}

/// PUBLISH and SPUBLISH calls (scripts' included) so far, per cluster node.
fn publishes(cluster: &RedisCluster) -> Result<Vec<(u64, u64)>, BenchError> {
    cluster
        .nodes()
        .iter()
        .map(|node| {
            let mut conn = node.connection()?;
            let info: String = redis::cmd("INFO").arg("commandstats").query(&mut conn)?;
            let calls = |command: &str| {
                let prefix = format!("cmdstat_{command}:calls=");
                info.lines()
                    .find_map(|line| line.strip_prefix(&prefix))
                    .and_then(|rest| rest.split(',').next()?.parse().ok())
                    .unwrap_or(0)
            };
            Ok((calls("publish"), calls("spublish")))
        })
        .collect()
}

fn print_ratios(
    figures: &[Figures],
    before: &[(u64, u64)],
    after: &[(u64, u64)],
    cluster: &RedisCluster,
) {
    let find = |name: &str| figures.iter().find(|f| f.implementation == name);
    let ratio = |a: &str, b: &str, of: fn(&Figures) -> f64| match (find(a), find(b)) {
        (Some(a), Some(b)) => of(a) / of(b).max(1e-9),
        _ => f64::NAN,
    };
    println!("\n{SCENARIO}, side by side:");
    let p50 = |f: &Figures| f.latency_us.p50 as f64;
    let rate = |f: &Figures| f.ops_per_sec;
    println!(
        "  cluster / single: cycle p50 ×{:.2} (target ≤ 1.3)",
        ratio("cycle/cluster", "cycle/single", p50)
    );
    println!(
        "  cluster / single: contended throughput ×{:.2} (target ≥ 0.8)",
        ratio("contended/cluster", "contended/single", rate)
    );
    println!(
        "  wait-1 / no-wait: acquire p50 ×{:.2} (target ≤ 2)",
        ratio("acquire/wait-1", "acquire/no-wait", p50)
    );
    let grew: Vec<(u16, u64, u64)> = cluster
        .nodes()
        .iter()
        .zip(before.iter().zip(after))
        .map(|(node, (b, a))| (node.port(), a.0 - b.0, a.1 - b.1))
        .filter(|(_, publish, spublish)| publish + spublish > 0)
        .collect();
    let described: Vec<String> = grew
        .iter()
        .map(|(port, publish, spublish)| format!("{port}: {spublish} SPUBLISH, {publish} PUBLISH"))
        .collect();
    println!(
        "  cluster releases published on {} of {} primaries: {}",
        grew.len(),
        cluster.nodes().len(),
        described.join("; ")
    );
}
