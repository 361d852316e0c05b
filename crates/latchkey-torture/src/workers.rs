//! The worker processes: started as `latchkey-torture worker …`, restarted after a kill.

use std::path::PathBuf;
use std::process::Stdio;

use rand::Rng;
use tokio::process::{Child, Command};

use crate::RunArgs;

pub struct Workers {
    slots: Vec<Slot>,
    dir: PathBuf,
    lock_url: String,
    resource_url: String,
    args: RunArgs,
}

struct Slot {
    child: Child,
    incarnation: usize,
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

    fn spawn(&self, worker: usize, incarnation: usize) -> std::io::Result<Child> {
        Command::new(std::env::current_exe()?)
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
            .arg(self.log(worker, incarnation))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
    }

    pub fn log(&self, worker: usize, incarnation: usize) -> PathBuf {
        self.dir
            .join(format!("worker-{worker}-{incarnation}.jsonl"))
    }

    /// Every log written so far, with whether its process was killed mid-run.
    pub fn logs(&self) -> Vec<(PathBuf, bool)> {
        let mut logs = Vec::new();
        for (worker, slot) in self.slots.iter().enumerate() {
            for incarnation in 0..=slot.incarnation {
                logs.push((
                    self.log(worker, incarnation),
                    incarnation < slot.incarnation,
                ));
            }
        }
        logs
    }

    pub fn pick(&self, rng: &mut impl Rng) -> Option<u32> {
        let slot = self
            .slots
            .get(rng.random_range(0..self.slots.len().max(1)))?;
        slot.child.id()
    }

    pub async fn kill_one(&mut self, rng: &mut impl Rng) {
        let worker = rng.random_range(0..self.slots.len());
        let _ = self.slots[worker].child.kill().await;
        let incarnation = self.slots[worker].incarnation + 1;
        if let Ok(child) = self.spawn(worker, incarnation) {
            self.slots[worker] = Slot { child, incarnation };
        }
    }

    /// Asks every worker to finish its critical sections and exit (SIGTERM); kills
    /// those that do not within `grace`. Returns the slots that had to be killed.
    pub async fn stop(&mut self, grace: std::time::Duration) -> Vec<usize> {
        for slot in &self.slots {
            if let Some(pid) = slot.child.id() {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid as i32),
                    nix::sys::signal::Signal::SIGTERM,
                );
            }
        }
        let mut killed = Vec::new();
        for (worker, slot) in self.slots.iter_mut().enumerate() {
            if tokio::time::timeout(grace, slot.child.wait())
                .await
                .is_err()
            {
                let _ = slot.child.kill().await;
                killed.push(worker);
            }
        }
        killed
    }
}
