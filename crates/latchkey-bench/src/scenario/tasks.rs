//! What one task of a lock workload does, in the bench process or in a worker
//! process: take the lock, run the critical section, release, log the times.

use std::time::{Duration, Instant};

use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;
use serde::{Deserialize, Serialize};

use crate::BenchError;
use crate::impls::Locker;
use crate::stats::wall_us;

/// The counter the `GetSet` section increments, checked against the sections run.
pub(crate) const COUNTER: &str = "bench:counter";

/// What each task does while it holds the lock.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub enum Section {
    /// Nothing: acquire and release back to back.
    Nothing,
    /// GET then SET of a counter, checked against the number of sections.
    GetSet,
    /// Sleep this long.
    Sleep(Duration),
}

impl Section {
    /// Redis commands the section itself runs: not the lock's doing.
    pub(crate) fn commands(self) -> u64 {
        match self {
            Section::GetSet => 2,
            Section::Nothing | Section::Sleep(_) => 0,
        }
    }

    async fn run(self, conn: &mut MultiplexedConnection) -> Result<(), BenchError> {
        match self {
            Section::Nothing => {}
            Section::GetSet => {
                let n: Option<u64> = conn.get(COUNTER).await?;
                let _: () = conn.set(COUNTER, n.unwrap_or(0) + 1).await?;
            }
            Section::Sleep(pause) => tokio::time::sleep(pause).await,
        }
        Ok(())
    }
}

/// One task's log: its waits (µs) and, per section, when it acquired the lock and
/// when its release returned (wall-clock µs, a timeline all bench processes share).
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct TaskLog {
    pub(crate) waits_us: Vec<u64>,
    pub(crate) sections: Vec<(u64, u64)>,
}

/// Takes `key` in a loop until `stop`.
pub(crate) async fn task_loop(
    locker: Locker,
    key: String,
    mut conn: MultiplexedConnection,
    section: Section,
    stop: Instant,
) -> Result<TaskLog, BenchError> {
    let mut log = TaskLog::default();
    while Instant::now() < stop {
        let asked = Instant::now();
        let held = locker.lock(&key).await?;
        let waited = asked.elapsed();
        let acquired = wall_us();
        section.run(&mut conn).await?;
        locker.unlock(held).await?;
        log.waits_us
            .push(u64::try_from(waited.as_micros()).unwrap_or(u64::MAX));
        log.sections.push((acquired, wall_us()));
    }
    Ok(log)
}

/// Runs `tasks` tasks of one locker until `stop`, each on `key(task)`.
pub(crate) async fn run_tasks(
    locker: &Locker,
    url: &str,
    tasks: std::ops::Range<usize>,
    key: impl Fn(usize) -> String,
    section: Section,
    stop: Instant,
) -> Result<Vec<TaskLog>, BenchError> {
    let conn = crate::connect(url).await?;
    let running: Vec<_> = tasks
        .map(|task| {
            tokio::spawn(task_loop(
                locker.clone(),
                key(task),
                conn.clone(),
                section,
                stop,
            ))
        })
        .collect();
    let mut logs = Vec::with_capacity(running.len());
    for task in running {
        logs.push(
            task.await
                .map_err(|e| BenchError::Check(format!("a task failed: {e}")))??,
        );
    }
    Ok(logs)
}
