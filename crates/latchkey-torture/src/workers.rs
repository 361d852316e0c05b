//! The worker processes: started as `latchkey-torture worker …`, restarted after a kill.

use clap::ValueEnum;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use rand::Rng;
use serde::{Deserialize, Serialize};
use tokio::process::{Child, Command};

use crate::RunArgs;
use crate::record::now_us;

pub struct Workers {
    slots: Vec<Slot>,
    /// Every process started, in order, with when it was killed.
    incarnations: Vec<Incarnation>,
    dir: PathBuf,
    lock_url: String,
    resource_url: String,
    args: RunArgs,
}

struct Slot {
    child: Child,
    incarnation: usize,
}

/// One worker process: its slot, its number in the slot, and when it was killed
/// (by a fault, or at the end because it would not stop).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Incarnation {
    pub worker: usize,
    pub incarnation: usize,
    pub killed_us: Option<u64>,
}

impl Incarnation {
    /// Its log, in the run's directory.
    pub fn log(&self, dir: &Path) -> PathBuf {
        dir.join(format!("worker-{}-{}.jsonl", self.worker, self.incarnation))
    }

    /// Its standard error: latchkey's debug log with `LATCHKEY_TORTURE_TRACE=1`.
    pub fn stderr(&self, dir: &Path) -> PathBuf {
        dir.join(format!("worker-{}-{}.log", self.worker, self.incarnation))
    }
}

impl Workers {
    pub fn start(
        args: &RunArgs,
        dir: PathBuf,
        lock_url: String,
        resource_url: String,
    ) -> std::io::Result<Self> {
        let mut workers = Workers {
            slots: Vec::new(),
            incarnations: Vec::new(),
            dir,
            lock_url,
            resource_url,
            args: args.clone(),
        };
        for worker in 0..args.workers {
            let child = workers.spawn(worker, 0)?;
            workers.slots.push(Slot {
                child,
                incarnation: 0,
            });
        }
        Ok(workers)
    }

    fn spawn(&mut self, worker: usize, incarnation: usize) -> std::io::Result<Child> {
        let started = Incarnation {
            worker,
            incarnation,
            killed_us: None,
        };
        let child = Command::new(std::env::current_exe()?)
            .arg("worker")
            .args([
                "--lock-url",
                &self.lock_url,
                "--resource-url",
                &self.resource_url,
            ])
            .args([
                "--worker",
                &worker.to_string(),
                "--incarnation",
                &incarnation.to_string(),
            ])
            .args([
                "--tasks",
                &self.args.tasks.to_string(),
                "--locks",
                &self.args.locks.to_string(),
            ])
            .args(["--seed", &self.args.seed.unwrap_or_default().to_string()])
            .arg("--ttl")
            .arg(humantime::format_duration(self.args.ttl).to_string())
            .arg("--log")
            .arg(started.log(&self.dir))
            .arg("--workload")
            .arg(
                self.args
                    .workload
                    .to_possible_value()
                    .map_or("mutex".to_owned(), |v| v.get_name().to_owned()),
            )
            .args(self.args.wait_replicas.then_some("--wait-replicas"))
            .arg("--lock-delay")
            .arg(humantime::format_duration(self.args.lock_delay).to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(started.stderr(&self.dir))?)
            .kill_on_drop(true)
            .spawn()?;
        self.incarnations.push(started);
        Ok(child)
    }

    /// Every process started so far.
    pub fn incarnations(&self) -> &[Incarnation] {
        &self.incarnations
    }

    /// A random slot and its process id (if it runs).
    pub fn pick(&self, rng: &mut impl Rng) -> (usize, Option<u32>) {
        let worker = rng.random_range(0..self.slots.len());
        (worker, self.slots[worker].child.id())
    }

    /// SIGKILLs a random worker and starts a new one in its slot; returns the slot.
    pub async fn kill_one(&mut self, rng: &mut impl Rng) -> usize {
        let worker = rng.random_range(0..self.slots.len());
        self.kill(worker).await;
        let incarnation = self.slots[worker].incarnation + 1;
        if let Ok(child) = self.spawn(worker, incarnation) {
            self.slots[worker] = Slot { child, incarnation };
        }
        worker
    }

    async fn kill(&mut self, worker: usize) {
        let slot = &mut self.slots[worker];
        let _ = slot.child.kill().await;
        let killed_us = now_us();
        let incarnation = slot.incarnation;
        if let Some(killed) = self
            .incarnations
            .iter_mut()
            .find(|i| i.worker == worker && i.incarnation == incarnation)
        {
            killed.killed_us = Some(killed_us);
        }
    }

    /// Asks every worker to finish its critical sections and exit (SIGTERM); kills
    /// those that do not within `grace`.
    pub async fn stop(&mut self, grace: Duration) {
        for slot in &self.slots {
            if let Some(pid) = slot.child.id().and_then(|pid| i32::try_from(pid).ok()) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGTERM,
                );
            }
        }
        for worker in 0..self.slots.len() {
            if tokio::time::timeout(grace, self.slots[worker].child.wait())
                .await
                .is_err()
            {
                self.kill(worker).await;
            }
        }
    }
}
