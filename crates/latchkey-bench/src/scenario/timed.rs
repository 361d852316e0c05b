//! One timed measurement's results, shared by the scenarios that time their own
//! loops (`deployments`, `quorum`).

use std::time::{Duration, Instant};

use tokio::task::JoinHandle;

use crate::BenchError;
use crate::figures::Figures;
use crate::stats::{Percentiles, process_cpu};

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
