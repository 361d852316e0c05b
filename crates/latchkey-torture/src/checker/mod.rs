//! After the run: did every promise hold? Each property lives in its own module,
//! with unit tests that feed it a history violating it.

mod capacity;
mod exclusion;
mod fences;
mod fifo;
#[cfg(test)]
mod fixtures;
mod holds;
mod latches;
mod leaders;
mod liveness;
mod orphans;
mod rates;
mod resurrection;
mod transactions;
mod waits;

use std::collections::BTreeMap;

use serde::Serialize;

use crate::faults::Fault;
use crate::history::History;
use crate::record::Mode;

/// Example messages kept per property; every violation is counted.
const EXAMPLES_PER_PROPERTY: usize = 20;

/// A promise the checker holds the lock to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Property {
    /// No two holders' valid leases overlap (outside amnesia windows); for a
    /// semaphore, the valid leases never hold more than its permits.
    Exclusion,
    /// The fenced resource accepted strictly increasing tokens.
    Fencing,
    /// No fence handed out twice; a later acquisition gets a larger one.
    Fences,
    /// A holder whose lease ended under it heard of it.
    LostSignal,
    /// No call returned a guard whose lease had ended already (a grant whose reply
    /// came back after it).
    BornLost,
    /// Every acquisition of a live worker ended.
    Vanished,
    /// `lock_timeout(d)` returned within `d` plus the bound.
    BoundedWait,
    /// Every live worker took every lock in the quiet phase.
    Liveness,
    /// No request to a semaphore or read-write lock was served before one that
    /// stood in line ahead of it.
    Fifo,
    /// No lock held by a token nobody holds, beyond the bound.
    Orphan,
    /// No token set again after its guard was gone.
    Resurrection,
    /// No rate limit allowed more than its policy; every key expires.
    RateLimit,
    /// Every transaction's write landed once, or not at all when it said so.
    Transactions,
    /// Election observers were told of real leaders only, in the order of their
    /// terms.
    Leaders,
    /// A latch opened once, at its last count down, and its waiters heard of it.
    Latches,
}

/// One broken promise.
#[derive(Clone, Debug, Serialize)]
pub struct Violation {
    pub property: Property,
    pub detail: String,
}

/// What the checker found. `violations` must be empty.
#[derive(Debug, Default, Serialize)]
pub struct Verdict {
    /// Attempts by mode and outcome.
    pub attempts: BTreeMap<Mode, BTreeMap<String, usize>>,
    pub acquisitions: usize,
    pub released: usize,
    /// Releases aborted before they answered (the guard's drop frees the lock).
    pub release_aborted: usize,
    /// Releases that found the lease gone, or failed.
    pub expired_or_lost: usize,
    pub killed_mid_section: usize,
    pub writes_accepted: usize,
    pub writes_rejected: usize,
    /// Holders whose critical section ran on past their lease into the next holder's,
    /// and whose stale write fencing refused (the case Redlock's critics describe):
    /// reported, not a violation.
    pub overlaps_caught_by_fencing: usize,
    /// Overlapping valid leases inside an amnesia window (nothing can prevent them;
    /// fencing must still hold), by the fault that opened it: reported apart.
    pub overlaps_after_amnesia: BTreeMap<Fault, usize>,
    pub fences: fences::Stats,
    pub waits: waits::Stats,
    pub liveness: liveness::Stats,
    pub fifo: fifo::Stats,
    pub orphans: orphans::Stats,
    pub resurrections: resurrection::Stats,
    pub rates: rates::Stats,
    pub transactions: transactions::Stats,
    pub leaders: leaders::Stats,
    pub latches: latches::Stats,
    /// Violations by property.
    pub violations: BTreeMap<Property, usize>,
    /// The first few of each property.
    pub examples: Vec<Violation>,
}

impl Verdict {
    fn violate(&mut self, property: Property, detail: String) {
        let count = self.violations.entry(property).or_default();
        *count += 1;
        if *count <= EXAMPLES_PER_PROPERTY {
            self.examples.push(Violation { property, detail });
        }
    }

    /// How many violations, of every property.
    pub fn violation_count(&self) -> usize {
        self.violations.values().sum()
    }
}

pub use liveness::transaction_phase_needed;

/// Checks every promise against the history of a run.
pub fn check(history: &History) -> Verdict {
    let mut verdict = Verdict::default();
    holds::check(history, &mut verdict);
    exclusion::check(history, &mut verdict);
    capacity::check(history, &mut verdict);
    fences::check(history, &mut verdict);
    waits::check(history, &mut verdict);
    liveness::check(history, &mut verdict);
    fifo::check(history, &mut verdict);
    orphans::check(history, &mut verdict);
    resurrection::check(history, &mut verdict);
    rates::check(history, &mut verdict);
    transactions::check(history, &mut verdict);
    leaders::check(history, &mut verdict);
    latches::check(history, &mut verdict);
    verdict
}

/// A fault during which Redis may forget grants it made (wall µs): from the kill
/// until the server is back. A holder may believe in a lease granted just before
/// for three of its leases after that ([`in_amnesia`]).
struct Amnesia {
    from_us: u64,
    back_us: u64,
    fault: Fault,
}

fn amnesia_windows(history: &History) -> Vec<Amnesia> {
    let mut windows = windows_where(history, Fault::forgets);
    // With WAIT, a promoted replica has every grant a holder was told of.
    if history.facts.wait_replicas {
        windows.retain(|window| !window.fault.promotes_replica());
    }
    windows
}

/// The faults after which the server may hold an older state again (a snapshot, an
/// AOF, a promoted replica): a holder whose lock was gone may find it back. Fences
/// computed on demand are held to the order of holds outside these only: a lock
/// broken by an operator or a clock jump is gone for good, and its holder must be
/// refused a token.
fn restore_windows(history: &History) -> Vec<Amnesia> {
    windows_where(history, Fault::restores_older_state)
}

/// The faults during which the server may have lost data (not only grants): for
/// the workloads that keep data in it, rate limits and transactions.
fn data_loss_windows(history: &History) -> Vec<Amnesia> {
    windows_where(history, Fault::loses_data)
}

fn windows_where(history: &History, lost: fn(Fault) -> bool) -> Vec<Amnesia> {
    history
        .facts
        .faults
        .iter()
        .filter(|window| lost(window.fault))
        .map(|window| Amnesia {
            from_us: window.from_us,
            back_us: window.to_us,
            fault: window.fault,
        })
        .collect()
}

/// The amnesia window that `[from, to]` overlaps, if any, for a holder whose lease
/// is `ttl_us` (its window lasts three such leases after the server is back):
/// preferably the latest to open before `from` (the second grant), since the last
/// fault before it is the one that made Redis forget the first.
fn in_amnesia(windows: &[Amnesia], from: u64, to: u64, ttl_us: u64) -> Option<&Amnesia> {
    windows
        .iter()
        .filter(|window| from < window.back_us + 3 * ttl_us && to > window.from_us)
        .max_by_key(|window| (window.from_us <= from, window.from_us))
}

/// Whether worker slot `worker` was paused (SIGSTOP) at some time in `[from, to]`.
fn paused(history: &History, worker: usize, from: u64, to: u64) -> bool {
    history.facts.faults.iter().any(|window| {
        window.fault == Fault::PauseWorker
            && window.worker == Some(worker)
            && window.from_us <= to
            && from <= window.to_us
    })
}

/// µs as ms, for reports.
fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}
