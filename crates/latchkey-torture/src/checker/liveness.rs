//! Liveness: once the faults stop, every live worker takes every lock again. In the
//! quiet phase each worker process must complete (attempt begun and release
//! returned inside the phase) at least one acquisition of every lock. A process
//! wedged behind a holder that no longer exists fails this.

use serde::Serialize;

use super::{Property, Verdict, ms};
use crate::history::History;

#[derive(Debug, Default, Serialize)]
pub struct Stats {
    pub quiet_ms: f64,
    /// Worker processes alive through the quiet phase.
    pub live_workers: usize,
    /// The fewest completed acquisitions any live worker made of any lock.
    pub fewest: Option<usize>,
    /// (worker, lock) pairs with none.
    pub starved: usize,
}

pub fn check(history: &History, verdict: &mut Verdict) {
    let (from, to) = history.facts.quiet;
    verdict.liveness.quiet_ms = ms(to.saturating_sub(from));
    if from >= to {
        return;
    }
    // Killed at the very end only because it would not stop: it counts.
    let live = history
        .facts
        .incarnations
        .iter()
        .filter(|i| i.killed_us.is_none_or(|killed| killed >= to));
    for incarnation in live {
        verdict.liveness.live_workers += 1;
        for lock in &history.facts.locks {
            let completed = history
                .holds
                .iter()
                .filter(|hold| {
                    hold.holder.worker == incarnation.worker
                        && hold.holder.incarnation == incarnation.incarnation
                        && hold.lock == *lock
                        && hold.attempt_start_us >= from
                        && hold
                            .end
                            .as_ref()
                            .is_some_and(|end| end.release_end_us <= to)
                })
                .count()
                + allowed_calls(history, incarnation, lock, (from, to))
                + committed_txs(history, incarnation, lock, (from, to));
            let fewest = verdict.liveness.fewest.get_or_insert(completed);
            *fewest = (*fewest).min(completed);
            if completed == 0 {
                verdict.liveness.starved += 1;
                verdict.violate(
                    Property::Liveness,
                    format!(
                        "worker {} (incarnation {}) never took {lock} in the {} ms quiet phase",
                        incarnation.worker,
                        incarnation.incarnation,
                        ms(to - from)
                    ),
                );
            }
        }
    }
}

/// Rate-limit calls `incarnation` made on `lock` inside `[from, to]` and was
/// allowed: the rate-limit workload's way of taking a lock.
fn allowed_calls(
    history: &History,
    incarnation: &crate::workers::Incarnation,
    lock: &str,
    (from, to): (u64, u64),
) -> usize {
    history
        .calls
        .iter()
        .filter(|call| {
            call.holder.worker == incarnation.worker
                && call.holder.incarnation == incarnation.incarnation
                && call.lock == lock
                && call.allowed == Some(true)
                && call.sent_us >= from
                && call.recv_us <= to
        })
        .count()
}

/// Transactions `incarnation` committed on `lock` inside `[from, to]`: the
/// transaction workload's way of taking a lock.
fn committed_txs(
    history: &History,
    incarnation: &crate::workers::Incarnation,
    lock: &str,
    (from, to): (u64, u64),
) -> usize {
    history
        .txs
        .iter()
        .filter(|tx| {
            tx.holder.worker == incarnation.worker
                && tx.holder.incarnation == incarnation.incarnation
                && tx.lock == lock
                && tx.outcome == crate::transactions::TxOutcome::Committed
                && tx.sent_us >= from
                && tx.recv_us <= to
        })
        .count()
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::*;
    use super::super::{Property, check};
    use crate::workers::Incarnation;

    fn quiet_run(workers: usize) -> crate::history::RunFacts {
        let mut facts = facts();
        facts.quiet = (1_000, 5_000_000);
        facts.incarnations = (0..workers)
            .map(|worker| Incarnation {
                worker,
                incarnation: 0,
                killed_us: None,
            })
            .collect();
        facts
    }

    #[test]
    fn every_live_worker_taking_every_lock_passes() {
        let logs = [
            (None, held(0, 1, 1, (2_000, 3_000))),
            (None, held(1, 1, 2, (4_000, 5_000))),
        ];
        let v = check(&history(quiet_run(2), &logs));
        assert!(v.violations.is_empty(), "{:?}", v.examples);
        assert_eq!(v.liveness.fewest, Some(1));
    }

    #[test]
    fn a_worker_that_never_took_a_lock_in_the_quiet_phase_is_a_violation() {
        // Worker 1's only acquisition began before the quiet phase.
        let logs = [
            (None, held(0, 1, 1, (2_000, 3_000))),
            (None, held(1, 1, 2, (500, 900))),
        ];
        let v = check(&history(quiet_run(2), &logs));
        assert_eq!(v.violations[&Property::Liveness], 1);
        assert_eq!(v.liveness.starved, 1);
    }
}
