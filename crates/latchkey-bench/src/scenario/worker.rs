//! A worker process of the `contended-processes` scenario: the bench starts several,
//! each with its own connections and tasks, as processes on different hosts would be.
//!
//! The bench runs its own executable with the job as JSON (the `latchkey` binary's
//! hidden `bench-worker` command); the worker prints its report as one JSON line.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::tasks::{Section, TaskLog, run_tasks};
use crate::BenchError;
use crate::impls::{Impl, Locker};
use crate::stats::{process_cpu, wall_us};

/// What one worker process runs.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Job {
    /// The lock implementation.
    pub implementation: Impl,
    /// The Redis server.
    pub url: String,
    /// The one key every task of every worker takes.
    pub key: String,
    /// Tasks in this process.
    pub tasks: usize,
    /// What a task does while it holds the lock.
    pub section: Section,
    /// When to start, in wall-clock µs (every worker starts together).
    pub start_us: u64,
    /// How long to run.
    pub run_for: Duration,
}

/// What one worker process measured.
#[derive(Debug, Serialize, Deserialize)]
pub struct WorkerReport {
    /// One log per task.
    pub logs: Vec<TaskLog>,
    /// The process's CPU time (user + system) while its tasks ran, in µs.
    pub cpu_us: u64,
}

/// Connects, waits for the common start, runs the tasks, and reports.
pub async fn run(job: Job) -> Result<WorkerReport, BenchError> {
    let locker = Locker::new(job.implementation, &job.url).await?;
    let wait = Duration::from_micros(job.start_us.saturating_sub(wall_us()));
    tokio::time::sleep(wait).await;
    let cpu = process_cpu();
    let stop = Instant::now() + job.run_for;
    let key = job.key.clone();
    let logs = run_tasks(
        &locker,
        &job.url,
        0..job.tasks,
        |_| key.clone(),
        job.section,
        stop,
    )
    .await?;
    let cpu_us = u64::try_from((process_cpu() - cpu).as_micros()).unwrap_or(u64::MAX);
    Ok(WorkerReport { logs, cpu_us })
}

/// Starts `processes` copies of this executable as workers of `job` and collects
/// their reports.
pub(crate) async fn run_processes(
    job: &Job,
    processes: usize,
) -> Result<Vec<WorkerReport>, BenchError> {
    let exe = std::env::current_exe()
        .map_err(|e| BenchError::Check(format!("cannot find the bench executable: {e}")))?;
    let spec = serde_json::to_string(job).map_err(|e| BenchError::Check(e.to_string()))?;
    let children: Vec<_> = (0..processes)
        .map(|_| {
            tokio::process::Command::new(&exe)
                .args(["bench-worker", &spec])
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::piped())
                .kill_on_drop(true)
                .spawn()
                .map_err(|e| BenchError::Check(format!("cannot start a worker process: {e}")))
        })
        .collect::<Result<_, _>>()?;
    let mut reports = Vec::with_capacity(processes);
    for child in children {
        let output = child
            .wait_with_output()
            .await
            .map_err(|e| BenchError::Check(format!("a worker process failed: {e}")))?;
        let line = String::from_utf8_lossy(&output.stdout);
        let report = serde_json::from_str(line.trim()).map_err(|e| {
            BenchError::Check(format!(
                "a worker process ({}) reported no figures: {e}",
                output.status
            ))
        })?;
        reports.push(report);
    }
    Ok(reports)
}
