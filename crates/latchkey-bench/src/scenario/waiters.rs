//! 10 000 tasks waiting on 1 000 locks: connections, memory, and the time for every
//! task to get its turn. latchkey only: polling peers have no waiting to measure.

use std::time::{Duration, Instant};

use indicatif::ProgressBar;

use crate::BenchError;
use crate::figures::Figures;
use crate::impls::Impl;
use crate::stats::{Percentiles, commands_run, connected_clients, rss_bytes};

const LOCKS: usize = 1_000;
const WAITERS: usize = 10_000;

pub(crate) async fn run(url: &str, progress: &ProgressBar) -> Result<Vec<Figures>, BenchError> {
    progress.set_message("waiters: latchkey");
    let mut admin = crate::connect(url).await?;
    let holders = latchkey::Client::open(url).await?;
    let mut held = Vec::with_capacity(LOCKS);
    for i in 0..LOCKS {
        let mutex = holders
            .mutex(&format!("bench:waiters:{i}"))?
            .with_lease(latchkey::Lease::fixed(Duration::from_secs(60))?);
        held.push(mutex.try_lock().await?);
    }
    let before = connected_clients(&mut admin).await?;
    let waiting = latchkey::Client::open(url).await?;
    let (started_tx, mut started_rx) = tokio::sync::mpsc::unbounded_channel();
    let mut tasks = Vec::with_capacity(WAITERS);
    for i in 0..WAITERS {
        let mutex = waiting.mutex(&format!("bench:waiters:{}", i % LOCKS))?;
        let started_tx = started_tx.clone();
        tasks.push(tokio::spawn(async move {
            let _ = started_tx.send(());
            let guard = mutex.lock_timeout(Duration::from_secs(120)).await?;
            let got = Instant::now();
            guard.release().await?;
            Ok::<_, BenchError>(got)
        }));
    }
    for _ in 0..WAITERS {
        started_rx.recv().await;
    }
    // Let every waiter reach Redis or its process-local queue.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let connections = connected_clients(&mut admin).await? - before;
    let rss = rss_bytes();
    let commands_before = commands_run(&mut admin).await?;
    let released = Instant::now();
    for guard in held {
        guard.release().await?;
    }
    let mut waits = Vec::with_capacity(WAITERS);
    for task in tasks {
        let got = task
            .await
            .map_err(|e| BenchError::Check(format!("a waiter failed: {e}")))??;
        waits.push(got.saturating_duration_since(released));
    }
    let all_served = released.elapsed();
    let commands = commands_run(&mut admin).await? - commands_before;
    progress.inc(1);
    Ok(vec![Figures {
        scenario: "waiters".to_owned(),
        implementation: Impl::Latchkey.name().to_owned(),
        ops_per_sec: WAITERS as f64 / all_served.as_secs_f64().max(1e-9),
        latency_us: Percentiles::of(&mut waits),
        // The holders' releases included: one per lock, against ten acquisitions.
        redis_cmds_per_op: commands as f64 / WAITERS as f64,
        client_cpu_us_per_op: None,
        redis_cpu_us_per_op: None,
        fairness: None,
        handoff_gap_us: None,
        ping_rtt_us: None,
        connections: Some(connections),
        rss_bytes: rss,
        instructions: None,
    }])
}
