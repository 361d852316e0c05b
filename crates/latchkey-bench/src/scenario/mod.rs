//! The scenarios: what runs, with how many tasks, on which keys.

pub mod cost;
mod deployments;
mod election;
mod latch;
mod multilock;
mod quorum;
pub(crate) mod ratelimit;
mod rwlock;
mod semaphore;
mod tasks;
mod timed;
mod waiters;
mod wakeup;
pub mod worker;
mod workload;

use std::time::Duration;

use indicatif::ProgressBar;
use serde::Serialize;

use crate::BenchError;
use crate::figures::Figures;
pub use tasks::Section;
use workload::Workload;

/// A benchmark scenario.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scenario {
    /// 50 tasks, each locking its own key: acquire + release in a loop.
    Uncontended,
    /// 50 tasks on one key; critical section = GET then SET of a counter (checked).
    Contended,
    /// 4 worker processes × 8 tasks on one key, GET then SET of a counter (checked):
    /// contention between processes, as between hosts.
    #[serde(rename = "contended-processes")]
    ContendedProcesses,
    /// 4 tasks on one key; the critical section sleeps 2 ms.
    Handoff,
    /// One task, its own key: the acquire + release cycle's latency.
    Latency,
    /// 10 000 tasks waiting on 1 000 locks (latchkey only).
    Waiters,
    /// One waiter, one holder: release → waiter holding, when the holder is latchkey
    /// and when it is another library (latchkey only).
    Wakeup,
    /// latchkey on one node, on a 3-primary cluster and with WAIT 1 for a replica,
    /// all started by the bench (latchkey only).
    Deployments,
    /// latchkey on a quorum of 5 masters, beside one of them alone and rslock's
    /// multi-node mode; then with one master stopped.
    Quorum,
    /// Rate-limit decisions (GCRA, fixed, sliding, cooldown) from 50 tasks, beside a
    /// trivial one-command EVALSHA (latchkey only).
    Ratelimit,
    /// A semaphore: uncontended round trips, and fairness under contention
    /// (latchkey only).
    Semaphore,
    /// Leader election: a campaign + resign cycle alone, and a resignation's
    /// takeover by a waiting candidate and news to an observer (latchkey only).
    Election,
    /// Count-down latches: one count down, and the last count down to a waiter's
    /// return (latchkey only).
    Latch,
    /// Several locks at once: one lock against two taken together, and four tasks
    /// naming two locks in opposite orders (latchkey only).
    Multilock,
    /// A read-write lock's trades: a writer's downgrade, an upgradeable read's
    /// upgrade (latchkey only).
    Rwlock,
    /// Instructions per uncontended acquire + release, server and client, counted
    /// by callgrind on a server of its own (skipped without valgrind).
    Cost,
}

impl Scenario {
    /// Every scenario, in report order.
    pub const ALL: [Scenario; 16] = [
        Scenario::Uncontended,
        Scenario::Contended,
        Scenario::ContendedProcesses,
        Scenario::Handoff,
        Scenario::Latency,
        Scenario::Waiters,
        Scenario::Wakeup,
        Scenario::Deployments,
        Scenario::Quorum,
        Scenario::Ratelimit,
        Scenario::Semaphore,
        Scenario::Election,
        Scenario::Latch,
        Scenario::Multilock,
        Scenario::Rwlock,
        Scenario::Cost,
    ];

    /// The name used on the command line, in tables and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Uncontended => "uncontended",
            Scenario::Contended => "contended",
            Scenario::ContendedProcesses => "contended-processes",
            Scenario::Latency => "latency",
            Scenario::Handoff => "handoff",
            Scenario::Waiters => "waiters",
            Scenario::Wakeup => "wakeup",
            Scenario::Deployments => "deployments",
            Scenario::Quorum => "quorum",
            Scenario::Ratelimit => "ratelimit",
            Scenario::Semaphore => "semaphore",
            Scenario::Election => "election",
            Scenario::Latch => "latch",
            Scenario::Multilock => "multilock",
            Scenario::Rwlock => "rwlock",
            Scenario::Cost => "cost",
        }
    }

    /// Progress-bar steps this scenario takes.
    pub(crate) fn steps(self) -> u64 {
        match self {
            Scenario::Waiters => 1,
            Scenario::Wakeup => 2,
            Scenario::Deployments => deployments::STEPS,
            Scenario::Quorum => quorum::STEPS,
            Scenario::Ratelimit => ratelimit::STEPS,
            Scenario::Semaphore => semaphore::STEPS,
            Scenario::Election => election::STEPS,
            Scenario::Latch => latch::STEPS,
            Scenario::Multilock => multilock::STEPS,
            Scenario::Rwlock => rwlock::STEPS,
            Scenario::Cost => cost::STEPS,
            _ => workload::steps(),
        }
    }

    pub(crate) async fn run(
        self,
        url: &str,
        duration: Duration,
        progress: &ProgressBar,
    ) -> Result<Vec<Figures>, BenchError> {
        let workload = |tasks, shared_key, section| Workload {
            scenario: self,
            processes: 1,
            tasks,
            shared_key,
            section,
        };
        match self {
            Scenario::Uncontended => {
                workload(50, false, Section::Nothing)
                    .run(url, duration, progress)
                    .await
            }
            Scenario::Contended => {
                workload(50, true, Section::GetSet)
                    .run(url, duration, progress)
                    .await
            }
            Scenario::ContendedProcesses => {
                let across = Workload {
                    processes: 4,
                    ..workload(8, true, Section::GetSet)
                };
                across.run(url, duration, progress).await
            }
            Scenario::Latency => {
                workload(1, false, Section::Nothing)
                    .run(url, duration, progress)
                    .await
            }
            Scenario::Handoff => {
                workload(4, true, Section::Sleep(Duration::from_millis(2)))
                    .run(url, duration, progress)
                    .await
            }
            Scenario::Waiters => waiters::run(url, progress).await,
            Scenario::Wakeup => wakeup::run(url, duration, progress).await,
            // Starts its own servers of every kind.
            Scenario::Deployments => deployments::run(duration, progress).await,
            Scenario::Quorum => quorum::run(duration, progress).await,
            Scenario::Ratelimit => ratelimit::run(url, duration, progress).await,
            Scenario::Semaphore => semaphore::run(url, duration, progress).await,
            Scenario::Election => election::run(url, duration, progress).await,
            Scenario::Latch => latch::run(url, duration, progress).await,
            Scenario::Multilock => multilock::run(url, duration, progress).await,
            Scenario::Rwlock => rwlock::run(url, duration, progress).await,
            // Counts instructions on a server of its own, under valgrind.
            Scenario::Cost => cost::run(progress).await,
        }
    }
}
