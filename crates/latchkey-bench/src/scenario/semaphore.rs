//! A counting semaphore: what one acquire + release costs alone, and how evenly a
//! contended one serves its waiters.
//!
//! - `uncontended`: 50 tasks, each on a semaphore of its own (2 permits), taking
//!   and giving back one permit in a loop; round trips per cycle are counted as the
//!   server saw them (EVALSHA calls).
//! - `contended`: 16 tasks on one semaphore of 4 permits, each holding its permit
//!   2 ms; fairness is the fewest over the most permits one task got.

use std::time::{Duration, Instant};

use indicatif::ProgressBar;
use latchkey::{Client, Lease, Semaphore};

use super::timed::TimedRun;
use crate::BenchError;
use crate::figures::{Fairness, Figures};
use crate::stats::{commands_run, process_cpu, redis_cpu, script_calls};

const SCENARIO: &str = "semaphore";
const UNCONTENDED_TASKS: usize = 50;
const CONTENDED_TASKS: usize = 16;
const CONTENDED_PERMITS: u64 = 4;
const HOLD: Duration = Duration::from_millis(2);
const LEASE: Duration = Duration::from_secs(10);

/// Progress-bar steps: one per row.
pub(crate) const STEPS: u64 = 2;

pub(crate) async fn run(
    url: &str,
    duration: Duration,
    progress: &ProgressBar,
) -> Result<Vec<Figures>, BenchError> {
    let client = Client::open(url).await?;
    let mut admin = redis::Client::open(url)?
        .get_multiplexed_async_connection()
        .await?;
    let lease = Lease::fixed(LEASE)?;

    progress.set_message(format!("{SCENARIO}: uncontended"));
    let own: Vec<Semaphore> = (0..UNCONTENDED_TASKS)
        .map(|task| {
            Ok(client
                .semaphore(&format!("bench:sem:own:{task}"), 2)?
                .with_lease(lease))
        })
        .collect::<Result<_, BenchError>>()?;
    // Scripts loaded and subscribers up before counting.
    own[0].acquire(1).await?.release().await?;
    let (cpu, commands, scripts) = (
        redis_cpu(&mut admin).await?,
        commands_run(&mut admin).await?,
        script_calls(&mut admin).await?,
    );
    let alone = measure(own, Duration::ZERO, duration).await?;
    let scripts = script_calls(&mut admin).await?.saturating_sub(scripts);
    let commands = commands_run(&mut admin).await?.saturating_sub(commands + 2);
    let cpu = redis_cpu(&mut admin).await?.saturating_sub(cpu);
    let cycles = alone.run.latencies.len().max(1) as f64;
    let trips = scripts as f64 / cycles;
    let mut uncontended = alone.run.figures(SCENARIO, "uncontended");
    uncontended.redis_cmds_per_op = commands as f64 / cycles;
    uncontended.redis_cpu_us_per_op = Some(cpu.as_secs_f64() * 1e6 / cycles);
    progress.inc(1);

    progress.set_message(format!("{SCENARIO}: contended"));
    let shared = client
        .semaphore("bench:sem:shared", CONTENDED_PERMITS)?
        .with_lease(lease);
    let crowd = measure(vec![shared; CONTENDED_TASKS], HOLD, duration).await?;
    let (fewest, most) = (
        crowd.per_task.iter().copied().min().unwrap_or(0),
        crowd.per_task.iter().copied().max().unwrap_or(0),
    );
    let mut contended = crowd.run.figures(SCENARIO, "contended");
    contended.fairness = Some(Fairness {
        min: fewest,
        max: most,
    });
    progress.inc(1);

    println!("\n{SCENARIO}:");
    println!("  uncontended acquire + release: {trips:.2} round trips (target 2)");
    println!(
        "  contended ({CONTENDED_TASKS} tasks, {CONTENDED_PERMITS} permits, {} ms held): fairness {:.2} = fewest {fewest} / most {most} (target ≥ 0.9)",
        HOLD.as_millis(),
        fewest as f64 / most.max(1) as f64
    );
    Ok(vec![uncontended, contended])
}

/// A run's latencies, and how many permits each task got.
struct Crowd {
    run: TimedRun,
    per_task: Vec<usize>,
}

/// One task per semaphore handle, for `duration`: acquire one permit (timed), hold
/// it `hold`, release.
async fn measure(
    semaphores: Vec<Semaphore>,
    hold: Duration,
    duration: Duration,
) -> Result<Crowd, BenchError> {
    let started = Instant::now();
    let cpu_before = process_cpu();
    let stop = started + duration;
    let tasks: Vec<_> = semaphores
        .into_iter()
        .map(|semaphore| {
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                while Instant::now() < stop {
                    let asked = Instant::now();
                    let permit = semaphore.acquire(1).await?;
                    latencies.push(asked.elapsed());
                    if !hold.is_zero() {
                        tokio::time::sleep(hold).await;
                    }
                    permit.release().await?;
                }
                Ok::<_, BenchError>(latencies)
            })
        })
        .collect();
    let mut crowd = Crowd {
        run: TimedRun::default(),
        per_task: Vec::new(),
    };
    for task in tasks {
        let latencies = task
            .await
            .map_err(|e| BenchError::Check(format!("a task failed: {e}")))??;
        crowd.per_task.push(latencies.len());
        crowd.run.latencies.extend(latencies);
    }
    crowd.run.elapsed = started.elapsed();
    crowd.run.client_cpu = process_cpu().saturating_sub(cpu_before);
    Ok(crowd)
}
