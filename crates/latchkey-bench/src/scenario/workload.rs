//! Tasks taking locks in a loop, in this process or in several worker processes:
//! throughput, waits, Redis commands and CPU (client and server) per acquisition,
//! fairness and the handoff gap. Each implementation runs in every round, in
//! alternating order, against the same server; the figures add up the rounds.

use std::time::{Duration, Instant};

use indicatif::ProgressBar;
use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;

use super::Scenario;
use super::tasks::{COUNTER, Section, TaskLog, run_tasks};
use super::worker::{self, Job};
use crate::BenchError;
use crate::figures::{Fairness, Figures, Gap};
use crate::impls::{Impl, Locker};
use crate::stats::{Percentiles, commands_run, ping_rtt, process_cpu, redis_cpu, wall_us};

/// Rounds per implementation; the order of implementations flips every round.
const ROUNDS: usize = 2;
/// How long worker processes get to start and connect before they all begin.
const WORKER_START: Duration = Duration::from_millis(500);

pub(crate) fn steps() -> u64 {
    (ROUNDS * Impl::ALL.len()) as u64
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct Workload {
    pub(crate) scenario: Scenario,
    /// Processes taking locks: 1 runs the tasks in the bench process itself.
    pub(crate) processes: usize,
    /// Tasks per process.
    pub(crate) tasks: usize,
    pub(crate) shared_key: bool,
    pub(crate) section: Section,
}

/// What one or more runs of one implementation measured.
#[derive(Default)]
struct Sample {
    elapsed: Duration,
    commands: u64,
    client_cpu: Duration,
    redis_cpu: Duration,
    waits: Vec<Duration>,
    /// Whole cycles: the wait, the section and the release.
    cycles: Vec<Duration>,
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
        self.client_cpu += other.client_cpu;
        self.redis_cpu += other.redis_cpu;
        self.waits.extend(other.waits);
        self.cycles.extend(other.cycles);
        self.gaps.extend(other.gaps);
        if self.per_task.is_empty() {
            self.per_task = vec![0; other.per_task.len()];
        }
        self.per_task
            .iter_mut()
            .zip(&other.per_task)
            .for_each(|(a, b)| *a += b);
    }

    /// Waits, per-task counts and handoff gaps from the tasks' logs.
    fn from_logs(logs: Vec<TaskLog>) -> Self {
        let mut sample = Sample {
            per_task: logs.iter().map(|log| log.sections.len()).collect(),
            ..Sample::default()
        };
        let mut sections = Vec::new();
        for log in logs {
            for (wait, (acquired, released)) in log.waits_us.iter().zip(&log.sections) {
                let held = released.saturating_sub(*acquired);
                sample.cycles.push(Duration::from_micros(wait + held));
            }
            sample
                .waits
                .extend(log.waits_us.into_iter().map(Duration::from_micros));
            sections.extend(log.sections);
        }
        sections.sort_unstable_by_key(|(acquired, _)| *acquired);
        sample.gaps = sections
            .windows(2)
            .map(|w| Duration::from_micros(w[1].0.saturating_sub(w[0].1)))
            .collect();
        sample
    }
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
        let commands = commands_run(admin).await?;
        let server_cpu = redis_cpu(admin).await?;
        let (mut sample, elapsed) = match self.processes {
            1 => self.in_process(url, which, duration).await?,
            _ => self.in_workers(url, which, duration).await?,
        };
        sample.elapsed = elapsed;
        sample.commands = commands_run(admin).await? - commands;
        sample.redis_cpu = redis_cpu(admin).await? - server_cpu;
        self.check_counter(admin, which, sample.ops()).await?;
        Ok(sample)
    }

    async fn in_process(
        &self,
        url: &str,
        which: Impl,
        duration: Duration,
    ) -> Result<(Sample, Duration), BenchError> {
        let locker = Locker::new(which, url).await?;
        let shared = self.shared_key;
        let key = |task: usize| match shared {
            true => "bench:lock".to_owned(),
            false => format!("bench:lock:{task}"),
        };
        let cpu = process_cpu();
        let started = Instant::now();
        let logs = run_tasks(
            &locker,
            url,
            0..self.tasks,
            key,
            self.section,
            started + duration,
        )
        .await?;
        let elapsed = started.elapsed();
        let mut sample = Sample::from_logs(logs);
        sample.client_cpu = process_cpu() - cpu;
        Ok((sample, elapsed))
    }

    /// The tasks in worker processes, all on the one shared key.
    async fn in_workers(
        &self,
        url: &str,
        which: Impl,
        duration: Duration,
    ) -> Result<(Sample, Duration), BenchError> {
        let job = Job {
            implementation: which,
            url: url.to_owned(),
            key: "bench:lock".to_owned(),
            tasks: self.tasks,
            section: self.section,
            start_us: wall_us() + WORKER_START.as_micros() as u64,
            run_for: duration,
        };
        let reports = worker::run_processes(&job, self.processes).await?;
        let cpu: u64 = reports.iter().map(|r| r.cpu_us).sum();
        let last_release = reports
            .iter()
            .flat_map(|r| r.logs.iter().flat_map(|log| log.sections.last()))
            .map(|(_, released)| *released)
            .max()
            .unwrap_or(job.start_us);
        let elapsed = Duration::from_micros(last_release.saturating_sub(job.start_us));
        let logs = reports.into_iter().flat_map(|r| r.logs).collect();
        let mut sample = Sample::from_logs(logs);
        sample.client_cpu = Duration::from_micros(cpu);
        Ok((sample, elapsed.max(duration)))
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
        let per_op = |d: Duration| d.as_secs_f64() * 1e6 / ops as f64;
        let lock_commands = (sample.commands as f64 / ops as f64) - self.section.commands() as f64;
        let contended = self.shared_key;
        let gap = Percentiles::of(&mut sample.gaps);
        Figures {
            scenario: self.scenario.name().to_owned(),
            implementation: which.name().to_owned(),
            ops_per_sec: sample.ops() as f64 / sample.elapsed.as_secs_f64().max(1e-9),
            // `latency` is about the whole cycle; the others about the wait.
            latency_us: match self.scenario {
                Scenario::Latency => Percentiles::of(&mut sample.cycles),
                _ => Percentiles::of(&mut sample.waits),
            },
            redis_cmds_per_op: lock_commands,
            client_cpu_us_per_op: Some(per_op(sample.client_cpu)),
            redis_cpu_us_per_op: Some(per_op(sample.redis_cpu)),
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
            instructions: None,
        }
    }
}
