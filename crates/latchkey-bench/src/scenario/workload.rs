//! N tasks taking locks in a loop: throughput, waits, Redis work per acquisition,
//! fairness and the handoff gap. Each implementation runs in every round, in
//! alternating order, against the same server; the figures add up the rounds.

use std::time::{Duration, Instant};

use indicatif::ProgressBar;
use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;

use super::Scenario;
use crate::BenchError;
use crate::figures::{Fairness, Figures, Gap};
use crate::impls::{Impl, Locker};
use crate::stats::{Percentiles, commands_run, ping_rtt};

/// Rounds per implementation; the order of implementations flips every round.
const ROUNDS: usize = 2;
const COUNTER: &str = "bench:counter";

pub(crate) fn steps() -> u64 {
    (ROUNDS * Impl::ALL.len()) as u64
}

/// What each task does while it holds the lock.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Section {
    Nothing,
    /// GET then SET of a counter, checked against the number of sections.
    GetSet,
    Sleep(Duration),
}

impl Section {
    /// Redis commands the section itself runs: not the lock's doing.
    fn commands(self) -> u64 {
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

#[derive(Clone, Copy, Debug)]
pub(crate) struct Workload {
    pub(crate) scenario: Scenario,
    pub(crate) tasks: usize,
    pub(crate) shared_key: bool,
    pub(crate) section: Section,
}

/// What one or more runs of one implementation measured.
#[derive(Default)]
struct Sample {
    elapsed: Duration,
    commands: u64,
    waits: Vec<Duration>,
    gaps: Vec<Duration>,
    per_task: Vec<usize>,
}

impl Sample {
    fn ops(&self) -> usize {
        self.per_task.iter().sum()
    }

    fn add(&mut self, other: Sample) {
        self.elapsed += other.elapsed;
        self.commands += other.commands;
        self.waits.extend(other.waits);
        self.gaps.extend(other.gaps);
        if self.per_task.is_empty() {
            self.per_task = vec![0; other.per_task.len()];
        }
        self.per_task
            .iter_mut()
            .zip(&other.per_task)
            .for_each(|(a, b)| *a += b);
    }
}

/// One task's log: its waits and (acquired, release returned) per section.
#[derive(Default)]
struct TaskLog {
    waits: Vec<Duration>,
    sections: Vec<(Instant, Instant)>,
}

impl Workload {
    pub(crate) async fn run(
        self,
        url: &str,
        duration: Duration,
        progress: &ProgressBar,
    ) -> Result<Vec<Figures>, BenchError> {
        let mut admin = crate::connect(url).await?;
        let ping = ping_rtt(&mut admin).await?;
        let mut samples: Vec<(Impl, Sample)> =
            Impl::ALL.iter().map(|i| (*i, Sample::default())).collect();
        let slice = duration / ROUNDS as u32;
        for round in 0..ROUNDS {
            let mut order: Vec<usize> = (0..samples.len()).collect();
            if round % 2 == 1 {
                order.reverse();
            }
            for index in order {
                let which = samples[index].0;
                progress.set_message(format!(
                    "{}: {} (round {}/{ROUNDS})",
                    self.scenario.name(),
                    which.name(),
                    round + 1
                ));
                let sample = self.run_once(url, which, slice, &mut admin).await?;
                samples[index].1.add(sample);
                progress.inc(1);
            }
        }
        Ok(samples
            .into_iter()
            .map(|(which, sample)| self.figures(which, sample, ping.p50))
            .collect())
    }

    async fn run_once(
        &self,
        url: &str,
        which: Impl,
        duration: Duration,
        admin: &mut MultiplexedConnection,
    ) -> Result<Sample, BenchError> {
        let _: () = admin.del(COUNTER).await?;
        let locker = Locker::new(which, url).await?;
        let conn = crate::connect(url).await?;
        let before = commands_run(admin).await?;
        let started = Instant::now();
        let stop = started + duration;
        let tasks: Vec<_> = (0..self.tasks)
            .map(|task| {
                let key = match self.shared_key {
                    true => "bench:lock".to_owned(),
                    false => format!("bench:lock:{task}"),
                };
                tokio::spawn(task_loop(
                    locker.clone(),
                    key,
                    conn.clone(),
                    self.section,
                    stop,
                ))
            })
            .collect();
        let mut logs = Vec::with_capacity(tasks.len());
        for task in tasks {
            logs.push(
                task.await
                    .map_err(|e| BenchError::Check(format!("a task failed: {e}")))??,
            );
        }
        let elapsed = started.elapsed();
        let commands = commands_run(admin).await? - before;
        let mut sample = Sample {
            elapsed,
            commands,
            per_task: logs.iter().map(|log| log.sections.len()).collect(),
            ..Sample::default()
        };
        self.check_counter(admin, which, sample.ops()).await?;
        let mut sections: Vec<(Instant, Instant)> = Vec::new();
        for log in logs {
            sample.waits.extend(log.waits);
            sections.extend(log.sections);
        }
        sections.sort_unstable_by_key(|(acquired, _)| *acquired);
        sample.gaps = sections
            .windows(2)
            .map(|w| w[1].0.saturating_duration_since(w[0].1))
            .collect();
        Ok(sample)
    }

    async fn check_counter(
        &self,
        admin: &mut MultiplexedConnection,
        which: Impl,
        ops: usize,
    ) -> Result<(), BenchError> {
        if !matches!(self.section, Section::GetSet) {
            return Ok(());
        }
        let counter: Option<usize> = admin.get(COUNTER).await?;
        if counter.unwrap_or(0) != ops {
            return Err(BenchError::Check(format!(
                "{}: counter is {counter:?} after {ops} critical sections: mutual exclusion failed",
                which.name()
            )));
        }
        Ok(())
    }

    fn figures(&self, which: Impl, mut sample: Sample, ping_p50: u64) -> Figures {
        let ops = sample.ops().max(1);
        let lock_commands = (sample.commands as f64 / ops as f64) - self.section.commands() as f64;
        let contended = self.shared_key;
        let gap = Percentiles::of(&mut sample.gaps);
        Figures {
            scenario: self.scenario.name().to_owned(),
            implementation: which.name().to_owned(),
            ops_per_sec: sample.ops() as f64 / sample.elapsed.as_secs_f64().max(1e-9),
            latency_us: Percentiles::of(&mut sample.waits),
            redis_cmds_per_op: lock_commands,
            fairness: contended.then(|| Fairness {
                min: sample.per_task.iter().copied().min().unwrap_or(0),
                max: sample.per_task.iter().copied().max().unwrap_or(0),
            }),
            handoff_gap_us: contended.then_some(Gap {
                p50: gap.p50,
                p99: gap.p99,
            }),
            ping_rtt_us: Some(ping_p50),
            connections: None,
            rss_bytes: None,
        }
    }
}

async fn task_loop(
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
        let acquired = Instant::now();
        log.waits.push(acquired - asked);
        section.run(&mut conn).await?;
        locker.unlock(held).await?;
        log.sections.push((acquired, Instant::now()));
    }
    Ok(log)
}
