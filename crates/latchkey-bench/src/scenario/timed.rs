//! One timed measurement's results, shared by the scenarios that time their own
//! loops (`deployments`, `quorum`), and the loop of one call timed back to back
//! (`election`, `latch`, `multilock`).

use std::time::{Duration, Instant};

use tokio::task::JoinHandle;

use crate::BenchError;
use crate::figures::Figures;
use crate::stats::{Percentiles, commands_run, process_cpu};

/// Acquisitions and their latencies over some time, and the CPU the bench process
/// spent on them (the clients' share of the work).
#[derive(Default)]
pub(crate) struct TimedRun {
    pub(crate) elapsed: Duration,
    pub(crate) latencies: Vec<Duration>,
    pub(crate) client_cpu: Duration,
}

impl TimedRun {
    /// The run of `tasks` (each returning its latencies), started at `started`
    /// when the process had used `cpu_before`.
    pub(crate) async fn gather<E>(
        tasks: Vec<JoinHandle<Result<Vec<Duration>, E>>>,
        started: Instant,
        cpu_before: Duration,
    ) -> Result<TimedRun, BenchError>
    where
        BenchError: From<E>,
    {
        let mut run = TimedRun::default();
        for task in tasks {
            let latencies = task
                .await
                .map_err(|e| BenchError::Check(format!("a task failed: {e}")))??;
            run.latencies.extend(latencies);
        }
        run.elapsed = started.elapsed();
        run.client_cpu = process_cpu().saturating_sub(cpu_before);
        Ok(run)
    }

    pub(crate) fn add(&mut self, other: TimedRun) {
        self.elapsed += other.elapsed;
        self.latencies.extend(other.latencies);
        self.client_cpu += other.client_cpu;
    }

    /// The figures of `scenario`'s row `name`.
    pub(crate) fn figures(mut self, scenario: &str, name: &str) -> Figures {
        let ops = self.latencies.len().max(1) as f64;
        let rate = self.latencies.len() as f64 / self.elapsed.as_secs_f64().max(1e-9);
        Figures {
            client_cpu_us_per_op: Some(self.client_cpu.as_secs_f64() * 1e6 / ops),
            ..Figures::timed(scenario, name, rate, Percentiles::of(&mut self.latencies))
        }
    }
}

/// Runs `op` back to back for `duration` on one task: row `name` of `scenario`,
/// with the Redis commands each call took (counted on `url`'s server, so nothing
/// else may use it meanwhile).
pub(crate) async fn counted_loop<Fut>(
    url: &str,
    duration: Duration,
    (scenario, name): (&str, &str),
    mut op: impl FnMut() -> Fut,
) -> Result<Figures, BenchError>
where
    Fut: Future<Output = Result<(), BenchError>>,
{
    let mut admin = crate::connect(url).await?;
    let commands_before = commands_run(&mut admin).await?;
    let started = Instant::now();
    let mut samples = Vec::new();
    while started.elapsed() < duration {
        let began = Instant::now();
        op().await?;
        samples.push(began.elapsed());
    }
    let commands = commands_run(&mut admin).await? - commands_before;
    let count = samples.len();
    let rate = count as f64 / started.elapsed().as_secs_f64().max(1e-9);
    Ok(Figures {
        redis_cmds_per_op: commands as f64 / count.max(1) as f64,
        ..Figures::timed(scenario, name, rate, Percentiles::of(&mut samples))
    })
}
