//! latchkey on each Redis deployment it supports, started here side by side: one
//! node, a Redis Cluster of three primaries (each with a replica), and a primary
//! with a replica that every grant waits for (WAIT 1). latchkey only: the peers
//! know no cluster.
//!
//! - `cycle`: one task, its own key, acquire + release back to back (latency);
//! - `contended`: 8 clients × 4 tasks on one key, empty critical section;
//! - `acquire`: one task's acquire alone, with and without WAIT 1;
//! - after the cluster's runs, on which nodes releases published (SPUBLISH should
//!   reach only the lock's shard: its primary and that primary's replica).

use std::time::{Duration, Instant};

use indicatif::ProgressBar;
use latchkey::Client;
use latchkey_testkit::{RedisCluster, RedisServer};

use crate::BenchError;
use crate::figures::Figures;
use crate::stats::Percentiles;

const SCENARIO: &str = "deployments";
/// Contended: clients (each its own connections) × tasks each, on one key.
const CLIENTS: usize = 8;
const TASKS_PER_CLIENT: usize = 4;
/// How long a grant may wait for its replica.
const REPLICA_WAIT: Duration = Duration::from_millis(200);

/// Progress-bar steps: five measurements.
pub(crate) const STEPS: u64 = 5;

pub(crate) async fn run(
    duration: Duration,
    progress: &ProgressBar,
) -> Result<Vec<Figures>, BenchError> {
    let start = |what: &str| BenchError::Redis(format!("cannot start {what}"));
    let single = blocking(RedisServer::start)
        .await?
        .map_err(|e| BenchError::Redis(format!("{}: {e}", start("redis-server"))))?;
    let cluster = blocking(RedisCluster::start)
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

    let on_single = Client::open(&single.url()).await?;
    let on_cluster = Client::open_cluster(&cluster.seeds()).await?;
    let mut figures = Vec::new();
    for (name, client) in [("cycle/single", &on_single), ("cycle/cluster", &on_cluster)] {
        progress.set_message(format!("{SCENARIO}: {name}"));
        figures.push(cycles(name, client, duration).await?);
        progress.inc(1);
    }
    let before = publishes(&cluster)?;
    let (single_url, seeds) = (&single.url(), &cluster.seeds());
    for (name, on_cluster) in [("contended/single", false), ("contended/cluster", true)] {
        progress.set_message(format!("{SCENARIO}: {name}"));
        let clients = match on_cluster {
            false => open_clients(move || Client::open(single_url)).await?,
            true => open_clients(move || Client::open_cluster(seeds)).await?,
        };
        figures.push(contended(name, clients, duration).await?);
    }
    progress.inc(1);
    let after = publishes(&cluster)?;
    let plain = Client::open(&primary.url()).await?;
    let waiting = plain.clone().with_wait_replicas(1, REPLICA_WAIT)?;
    for (name, client) in [("acquire/no-wait", &plain), ("acquire/wait-1", &waiting)] {
        progress.set_message(format!("{SCENARIO}: {name}"));
        figures.push(acquires(name, client, duration).await?);
        progress.inc(1);
    }
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

/// One task: acquire + release of its own key, back to back.
async fn cycles(name: &str, client: &Client, duration: Duration) -> Result<Figures, BenchError> {
    let mutex = client.mutex("bench:deploy:cycle")?;
    let started = Instant::now();
    let mut samples = Vec::new();
    while started.elapsed() < duration {
        let cycle = Instant::now();
        mutex.lock().await?.release().await?;
        samples.push(cycle.elapsed());
    }
    let rate = samples.len() as f64 / started.elapsed().as_secs_f64();
    Ok(Figures::timed(
        SCENARIO,
        name,
        rate,
        Percentiles::of(&mut samples),
    ))
}

/// One task: the acquire alone (the release is not timed).
async fn acquires(name: &str, client: &Client, duration: Duration) -> Result<Figures, BenchError> {
    let mutex = client.mutex("bench:deploy:acquire")?;
    let started = Instant::now();
    let mut samples = Vec::new();
    while started.elapsed() < duration {
        let asked = Instant::now();
        let guard = mutex.lock().await?;
        samples.push(asked.elapsed());
        guard.release().await?;
    }
    let rate = samples.len() as f64 / started.elapsed().as_secs_f64();
    Ok(Figures::timed(
        SCENARIO,
        name,
        rate,
        Percentiles::of(&mut samples),
    ))
}

/// Every client's tasks on one key until `duration` is over: acquisitions per
/// second, and each acquisition's wait.
async fn contended(
    name: &str,
    clients: Vec<Client>,
    duration: Duration,
) -> Result<Figures, BenchError> {
    let stop = Instant::now() + duration;
    let mut tasks = Vec::new();
    for client in &clients {
        for _ in 0..TASKS_PER_CLIENT {
            let mutex = client.mutex("bench:deploy:contended")?;
            tasks.push(tokio::spawn(async move {
                let mut waits = Vec::new();
                while Instant::now() < stop {
                    let asked = Instant::now();
                    let guard = mutex.lock().await?;
                    waits.push(asked.elapsed());
                    guard.release().await?;
                }
                Ok::<_, latchkey::Error>(waits)
            }));
        }
    }
    let started = Instant::now();
    let mut waits = Vec::new();
    for task in tasks {
        waits.extend(
            task.await
                .map_err(|e| BenchError::Check(format!("a task failed: {e}")))??,
        );
    }
    let rate = waits.len() as f64 / started.elapsed().as_secs_f64().max(duration.as_secs_f64());
    Ok(Figures::timed(
        SCENARIO,
        name,
        rate,
        Percentiles::of(&mut waits),
    ))
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
        "  cluster releases published on {} of {} nodes (the lock's shard is 2: primary and replica): {}",
        grew.len(),
        cluster.nodes().len(),
        described.join("; ")
    );
}
