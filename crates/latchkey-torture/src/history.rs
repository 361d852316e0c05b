//! Everything a run leaves behind, read back for the checker: the workers' logs and
//! what the harness itself saw (`run.json`: faults, processes, lock samples, the
//! fenced resource).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::faults::FaultWindow;
use crate::record::HoldEnd;
use crate::record::{Holder, Mode, Outcome, Record};
use crate::sampler::HoldRun;
use crate::workers::Incarnation;

/// The harness's own file in the run's directory.
const RUN_FILE: &str = "run.json";

/// What the harness saw, saved beside the worker logs.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct RunFacts {
    pub seed: u64,
    /// Faults and quiet phase, in seconds.
    pub duration_s: u64,
    pub ttl_us: u64,
    pub waiter_lease_us: u64,
    /// A quorum of masters (`--quorum`): they remember released values, so a
    /// request delayed past its release sets nothing there.
    #[serde(default)]
    pub quorum: bool,
    /// Grants and renewals waited for the replica (`--wait-replicas`): a failover
    /// to it forgets none its holder was told of.
    #[serde(default)]
    pub wait_replicas: bool,
    /// What the tasks contended for.
    #[serde(default)]
    pub workload: crate::Workload,
    /// The permits of each semaphore (semaphore workload); a lock has 1.
    #[serde(default)]
    pub capacity: BTreeMap<String, u64>,
    /// The policy of each rate limit (rate-limit workload).
    #[serde(default)]
    pub rates: BTreeMap<String, crate::ratelimits::Rate>,
    /// Rate-limit keys left without an expiry after the run.
    #[serde(default)]
    pub rate_keys_without_expiry: Vec<String>,
    /// Each lock's counter and log of transaction ids after the run (transaction
    /// workload).
    #[serde(default)]
    pub tx_logs: BTreeMap<String, (i64, Vec<String>)>,
    pub locks: Vec<String>,
    /// The quiet phase after the faults (wall µs).
    pub quiet: (u64, u64),
    pub faults: Vec<FaultWindow>,
    pub incarnations: Vec<Incarnation>,
    pub samples: Vec<HoldRun>,
    /// The tokens the fenced resource accepted, per lock, in order.
    pub accepted: BTreeMap<String, Vec<u64>>,
}

impl RunFacts {
    /// How many permits `lock` has: its semaphore's, or 1 for a lock.
    pub fn capacity(&self, lock: &str) -> u64 {
        self.capacity.get(lock).copied().unwrap_or(1)
    }

    pub fn save(&self, dir: &Path) -> std::io::Result<()> {
        let json = serde_json::to_vec(self).map_err(std::io::Error::other)?;
        std::fs::write(dir.join(RUN_FILE), json)
    }
}

/// One attempt, as logged.
#[derive(Clone, Debug)]
pub struct Attempt {
    pub holder: Holder,
    pub lock: String,
    pub mode: Mode,
    pub start_us: u64,
    pub end_us: u64,
    pub timeout_us: Option<u64>,
    /// The lease it asked for.
    pub ttl_us: u64,
    pub outcome: Outcome,
    /// A fair lock's attempt: it stands in one strict line with every other.
    pub fair: bool,
    /// When its process was killed, if it was.
    pub killed_us: Option<u64>,
}

/// One acquisition, from `lock()` returning to the end of its release.
#[derive(Clone, Debug)]
pub struct Hold {
    pub holder: Holder,
    pub lock: String,
    pub owner: String,
    /// Its fencing token, if it had one (from the grant, or asked for).
    pub fence: Option<u64>,
    pub attempt_start_us: u64,
    pub acquired_us: u64,
    /// How long Redis keeps the lock: the lease it asked for and its lock delay.
    pub ttl_us: u64,
    /// Permits it held (1 for a lock).
    pub weight: u64,
    /// Its lease's lock delay: after a lease that ended without a release, nobody
    /// else may hold the lock for this long.
    pub lock_delay_us: u64,
    /// Taken by a fair lock's attempt of its own.
    pub fair: bool,
    /// `None`: its process was killed before it logged the end.
    pub end: Option<HoldEnd>,
    /// When its process was killed, if it was.
    pub killed_us: Option<u64>,
}

impl Hold {
    /// Until when the holder believed it held the lock: its release or the end of
    /// its lease by its own clock, whichever came first.
    pub fn valid(&self) -> Option<(u64, u64)> {
        let end = self.end.as_ref()?;
        Some((self.acquired_us, end.release_us.min(end.valid_until_us)))
    }

    /// The span nobody else may hold the lock in: its valid lease, and for the lock
    /// delay after it unless a release (sent by then) ended the hold first.
    pub fn exclusive(&self) -> Option<(u64, u64)> {
        let end = self.end.as_ref()?;
        let delayed = end.valid_until_us + self.lock_delay_us;
        Some((self.acquired_us, end.release_us.min(delayed)))
    }

    /// When the guard stopped existing: its release returned, or its process died.
    pub fn gone_us(&self) -> Option<u64> {
        self.end
            .as_ref()
            .map(|end| end.release_end_us)
            .or(self.killed_us)
    }
}

/// A whole run.
#[derive(Clone, Debug, Default)]
pub struct History {
    pub facts: RunFacts,
    pub attempts: Vec<Attempt>,
    pub holds: Vec<Hold>,
    /// Rate-limit calls (rate-limit workload), by when they were sent.
    pub calls: Vec<crate::record::Call>,
    /// Transactions (transaction workload).
    pub txs: Vec<crate::transactions::Tx>,
    /// What elections' observers saw (election workload), in each log's order.
    pub observed: Vec<crate::record::Observed>,
    /// Count downs and waits (latch workload).
    pub latches: Vec<crate::record::LatchCall>,
}

impl History {
    /// Reads `run.json` and every worker log in `dir`.
    pub fn load(dir: &Path) -> std::io::Result<History> {
        let facts: RunFacts = serde_json::from_slice(&std::fs::read(dir.join(RUN_FILE))?)
            .map_err(std::io::Error::other)?;
        let logs = facts
            .incarnations
            .iter()
            .map(|incarnation| {
                // A worker killed before it wrote anything has no log.
                let text = std::fs::read_to_string(incarnation.log(dir)).unwrap_or_default();
                (incarnation.killed_us, text)
            })
            .collect::<Vec<_>>();
        Ok(History::from_logs(facts, &logs))
    }

    /// Builds the history from each process's log text and when it was killed.
    pub fn from_logs(facts: RunFacts, logs: &[(Option<u64>, String)]) -> History {
        let mut history = History {
            facts,
            ..History::default()
        };
        for (killed_us, text) in logs {
            // A task's acquisition may hold several locks (a multi-lock).
            let mut holds: HashMap<(Holder, String), Hold> = HashMap::new();
            // A worker killed mid-write leaves a torn last line.
            for record in text.lines().filter_map(|l| serde_json::from_str(l).ok()) {
                history.add(record, *killed_us, &mut holds);
            }
            history.holds.extend(holds.into_values());
        }
        history.holds.sort_by_key(|hold| hold.acquired_us);
        history.calls.sort_by_key(|call| call.sent_us);
        history
    }

    /// A logged lease, or the run's for logs from before leases were logged (0).
    fn ttl_or_the_run_s(&self, ttl_us: u64) -> u64 {
        match ttl_us {
            0 => self.facts.ttl_us,
            logged => logged,
        }
    }

    fn add(
        &mut self,
        record: Record,
        killed_us: Option<u64>,
        holds: &mut HashMap<(Holder, String), Hold>,
    ) {
        match record {
            Record::Attempt {
                holder,
                lock,
                mode,
                start_us,
                end_us,
                timeout_us,
                ttl_us,
                outcome,
                fair,
            } => self.attempts.push(Attempt {
                holder,
                lock,
                mode,
                start_us,
                end_us,
                timeout_us,
                ttl_us: self.ttl_or_the_run_s(ttl_us),
                outcome,
                fair,
                killed_us,
            }),
            Record::Acquired {
                holder,
                lock,
                owner,
                fence,
                attempt_start_us,
                at_us,
                ttl_us,
                weight,
                lock_delay_us,
                fair,
            } => {
                let ttl_us = self.ttl_or_the_run_s(ttl_us);
                holds.insert(
                    (holder, lock.clone()),
                    Hold {
                        holder,
                        lock,
                        owner,
                        fence,
                        attempt_start_us,
                        acquired_us: at_us,
                        ttl_us,
                        weight,
                        lock_delay_us,
                        fair,
                        end: None,
                        killed_us,
                    },
                );
            }
            Record::Call(call) => self.calls.push(call),
            Record::Tx(tx) => self.txs.push(tx),
            Record::Observed(observed) => self.observed.push(observed),
            Record::Latch(call) => self.latches.push(call),
            Record::Ended {
                holder,
                lock,
                end,
                fence,
            } => {
                if let Some(hold) = holds.get_mut(&(holder, lock)) {
                    hold.end = Some(end);
                    hold.fence = hold.fence.or(fence);
                }
            }
        }
    }
}
