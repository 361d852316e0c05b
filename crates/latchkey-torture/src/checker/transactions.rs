//! Optimistic transactions, from the log every transaction appends its id to in the
//! same MULTI/EXEC that writes the counter: every write that landed, exactly once.
//!
//! - No id twice in the log (a transaction applied twice, a retried EXEC).
//! - The counter equals the log's length (the two writes of one EXEC together; a
//!   lost update would leave the counter short).
//! - Every committed transaction's id is in the log, unless a fault that made the
//!   server forget came after it committed.
//! - No id of a transaction that wrote nothing (given up on conflicts, or run under a
//!   lock whose lease had ended) is in the log: the lock's fencing held.
//! - No id in the log that no transaction of a live worker logged (a phantom write);
//!   a worker killed mid-transaction may leave one.

use std::collections::{HashMap, HashSet};

use serde::Serialize;

use super::{Property, Verdict, data_loss_windows};
use crate::history::History;
use crate::transactions::{Tx, TxOutcome};

#[derive(Debug, Default, Serialize)]
pub struct Stats {
    pub committed: usize,
    pub not_written: usize,
    /// Under a lock whose lease had run out when the transaction began.
    pub unknown: usize,
    /// Committed ids missing from the log after a fault that made the server forget.
    pub lost_to_amnesia: usize,
    /// Ids in the log written by an unknown-outcome or killed transaction.
    pub landed_unknown: usize,
}

pub fn check(history: &History, verdict: &mut Verdict) {
    let mut by_id: HashMap<&str, &Tx> = HashMap::new();
    for tx in &history.txs {
        match tx.outcome {
            TxOutcome::Committed => verdict.transactions.committed += 1,
            TxOutcome::NotWritten => verdict.transactions.not_written += 1,
            TxOutcome::Unknown => verdict.transactions.unknown += 1,
        }
        by_id.insert(&tx.id, tx);
    }
    let killed: HashSet<(usize, usize)> = history
        .facts
        .incarnations
        .iter()
        .filter(|i| i.killed_us.is_some())
        .map(|i| (i.worker, i.incarnation))
        .collect();
    let amnesia = data_loss_windows(history);
    for (lock, (count, ids)) in &history.facts.tx_logs {
        let mut seen = HashSet::new();
        for id in ids {
            if !seen.insert(id.as_str()) {
                verdict.violate(
                    Property::Transactions,
                    format!("{lock}: transaction {id} applied twice"),
                );
            }
            match by_id.get(id.as_str()).map(|tx| tx.outcome) {
                Some(TxOutcome::Committed) => {}
                Some(TxOutcome::Unknown) => verdict.transactions.landed_unknown += 1,
                Some(TxOutcome::NotWritten) => verdict.violate(
                    Property::Transactions,
                    format!("{lock}: transaction {id} wrote though it reported writing nothing"),
                ),
                None if killed_mid(id, &killed) => verdict.transactions.landed_unknown += 1,
                None => verdict.violate(
                    Property::Transactions,
                    format!("{lock}: {id} in the log, written by no transaction of a live worker"),
                ),
            }
        }
        if usize::try_from(*count).ok() != Some(ids.len()) {
            verdict.violate(
                Property::Transactions,
                format!(
                    "{lock}: the counter is {count} but {} transactions landed",
                    ids.len()
                ),
            );
        }
        let committed = history
            .txs
            .iter()
            .filter(|tx| tx.lock == *lock && tx.outcome == TxOutcome::Committed);
        for tx in committed.filter(|tx| !seen.contains(tx.id.as_str())) {
            match amnesia
                .iter()
                .any(|w| w.back_us + stale_primary_us(w) > tx.sent_us)
            {
                true => verdict.transactions.lost_to_amnesia += 1,
                false => verdict.violate(
                    Property::Transactions,
                    format!("{lock}: committed transaction {} is not in the log", tx.id),
                ),
            }
        }
    }
}

/// How long after a fault a transaction may still commit on a server that was the
/// primary and loses the write: after a promotion, connections keep going to the
/// primary named at most 500 ms ago (the library's check-on-use window, as the
/// README says), plus 100 ms for the commit's round trip; none otherwise.
fn stale_primary_us(window: &super::Amnesia) -> u64 {
    match window.fault.promotes_replica() {
        true => 600_000,
        false => 0,
    }
}

/// Whether `id` (`worker.incarnation.task.seq`) belongs to an incarnation that was
/// killed: it may have written without logging.
fn killed_mid(id: &str, killed: &HashSet<(usize, usize)>) -> bool {
    let mut parts = id.split('.').map(str::parse::<usize>);
    match (parts.next(), parts.next()) {
        (Some(Ok(worker)), Some(Ok(incarnation))) => killed.contains(&(worker, incarnation)),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::*;
    use super::super::{Property, check};
    use crate::record::Record;
    use crate::transactions::{Tx, TxOutcome};

    fn tx(seq: u64, outcome: TxOutcome) -> Record {
        Record::Tx(Tx {
            holder: holder(0, seq),
            lock: "l".into(),
            id: format!("0.0.0.{seq}"),
            guarded: false,
            locked: None,
            sent_us: seq * 10,
            recv_us: seq * 10 + 5,
            outcome,
        })
    }

    fn run(log: &[&str], count: i64, txs: Vec<Record>) -> super::super::Verdict {
        let mut facts = facts();
        facts.tx_logs.insert(
            "l".into(),
            (count, log.iter().map(|s| s.to_string()).collect()),
        );
        check(&history(facts, &[(None, txs)]))
    }

    #[test]
    fn every_commit_once_passes() {
        let v = run(
            &["0.0.0.1", "0.0.0.3"],
            2,
            vec![
                tx(1, TxOutcome::Committed),
                tx(2, TxOutcome::NotWritten),
                tx(3, TxOutcome::Unknown),
            ],
        );
        assert!(v.violations.is_empty(), "{:?}", v.examples);
    }

    #[test]
    fn twice_lost_or_unfenced_writes_are_violations() {
        let twice = run(
            &["0.0.0.1", "0.0.0.1"],
            2,
            vec![tx(1, TxOutcome::Committed)],
        );
        assert_eq!(twice.violations[&Property::Transactions], 1);
        let lost = run(&[], 1, vec![tx(1, TxOutcome::Committed)]);
        assert_eq!(
            lost.violations[&Property::Transactions],
            2,
            "{:?}",
            lost.examples
        );
        let unfenced = run(&["0.0.0.2"], 1, vec![tx(2, TxOutcome::NotWritten)]);
        assert_eq!(unfenced.violations[&Property::Transactions], 1);
    }

    #[test]
    fn a_commit_lost_within_the_stale_primary_window_after_a_failover_is_excused() {
        // Sent 10 ms (seq 1), 700 ms (seq 70) after a Sentinel failover ended at 0.
        let lost = |seq: u64| {
            let mut facts = facts();
            facts
                .faults
                .push(window(crate::faults::Fault::SentinelFailover, 0, 0, None));
            let mut late = tx(seq, TxOutcome::Committed);
            if let Record::Tx(t) = &mut late {
                t.sent_us = seq * 10_000;
            }
            facts.tx_logs.insert("l".into(), (0, Vec::new()));
            check(&history(facts, &[(None, vec![late])]))
        };
        let within = lost(1);
        assert!(within.violations.is_empty(), "{:?}", within.examples);
        assert_eq!(within.transactions.lost_to_amnesia, 1);
        let after = lost(70);
        assert_eq!(after.violations[&Property::Transactions], 1);
    }
}
