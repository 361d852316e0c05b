//! The faults: chosen at random from a printed seed, injected into real processes.

use std::time::Duration;

use latchkey_testkit::RedisServer;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use rand::Rng;
use serde::Serialize;

use crate::workers::Workers;

/// A kind of fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Fault {
    /// SIGKILL a worker and start a new one in its slot.
    KillWorker,
    /// SIGSTOP a worker for three leases, then SIGCONT.
    PauseWorker,
    /// SIGSTOP the lock server for three leases, then SIGCONT.
    PauseRedis,
    /// Kill the lock server and restart it empty after the documented delay
    /// (longer than the largest lease).
    RestartRedisLate,
    /// Kill the lock server and restart it empty at once.
    RestartRedisNow,
    /// CLIENT KILL every worker connection (commands and subscribers).
    ClientKill,
}

impl Fault {
    pub const ALL: [Fault; 6] = [
        Fault::KillWorker,
        Fault::PauseWorker,
        Fault::PauseRedis,
        Fault::RestartRedisLate,
        Fault::RestartRedisNow,
        Fault::ClientKill,
    ];

    pub fn pick(rng: &mut impl Rng) -> Fault {
        Fault::ALL[rng.random_range(0..Fault::ALL.len())]
    }
}

/// A window of time (wall µs) during which Redis held nothing it had granted, as
/// after an immediate empty restart: overlaps there are counted apart.
pub type Amnesia = (u64, u64);

/// Injects `fault`; returns the amnesia window it opened, if any.
pub async fn inject(
    fault: Fault,
    ttl: Duration,
    lock_server: &mut RedisServer,
    workers: &mut Workers,
    rng: &mut impl Rng,
) -> Option<Amnesia> {
    let long = ttl * 3;
    match fault {
        Fault::KillWorker => workers.kill_one(rng).await,
        Fault::PauseWorker => {
            if let Some(pid) = workers.pick(rng) {
                let pid = Pid::from_raw(pid as i32);
                let _ = kill(pid, Signal::SIGSTOP);
                tokio::time::sleep(long).await;
                let _ = kill(pid, Signal::SIGCONT);
            }
        }
        Fault::PauseRedis => {
            let _ = lock_server.pause();
            tokio::time::sleep(long).await;
            let _ = lock_server.resume();
        }
        Fault::RestartRedisLate => {
            let _ = lock_server.kill();
            tokio::time::sleep(long).await;
            restart(lock_server).await;
        }
        Fault::RestartRedisNow => {
            let from = crate::record::now_us();
            let _ = lock_server.kill();
            restart(lock_server).await;
            // Leases granted before the restart may still be believed for a lease.
            let until = crate::record::now_us() + u64::try_from(ttl.as_micros()).unwrap_or(0) * 3;
            return Some((from, until));
        }
        Fault::ClientKill => {
            if let Ok(mut admin) = lock_server.connection() {
                for kind in ["normal", "pubsub"] {
                    let _: redis::RedisResult<u64> = redis::cmd("CLIENT")
                        .arg("KILL")
                        .arg("TYPE")
                        .arg(kind)
                        .query(&mut admin);
                }
            }
        }
    }
    None
}

async fn restart(server: &mut RedisServer) {
    for _ in 0..20 {
        if server.restart().is_ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the lock server would not restart");
}
