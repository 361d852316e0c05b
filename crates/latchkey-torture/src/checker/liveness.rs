//! Liveness: once the faults stop, every live worker takes every lock again. In the
//! quiet phase each worker process must complete (attempt begun and release
//! returned inside the phase) at least one acquisition of every lock. A process
//! wedged behind a holder that no longer exists fails this. In the transaction
//! workload, a worker that tried to take a counter's transaction lock (a try begun
//! a lease and a second into the phase and ended by its end) must have taken it at
//! least once, and one that ran transactions without the lock must have committed
//! one (see [`Way`]). A lock a killed
//! holder's lease may still hold until less than [`MIN_FREE_US`] before the phase
//! ends (one acquisition in twenty takes a 10 s lease) is not checked: waiting out
//! a crashed holder's lease is the promise, not a wedge. The same goes for any
//! token held there with no guard (an orphan), such as a released lock that a
//! Sentinel failover brought back with its 10 s lease: the orphan check bounds how
//! long it may stay, this one what happens after. A multi-lock is granted all or
//! nothing: while one lock is held by the dead, every set that names it waits,
//! and the sets that do not all contend for what is left (in a run of 3 locks,
//! 32 tasks for one set). When most of the phase's tries named a lock held by the
//! dead all through the try, the phase cannot tell a wedge from a lack of
//! capacity, and the locks tried together with such a lock are not checked
//! either. With many locks few tries meet one, and every lock stays checked.

use std::collections::HashMap;

use serde::Serialize;

use super::orphans::orphan_runs;
use super::{Property, Verdict, ms};
use crate::Workload;
use crate::history::History;
use crate::record::{Holder, LatchCallKind, micros};
use crate::sampler::HoldRun;
use crate::transactions::{LOCK_TIMEOUT, TxOutcome};
use crate::workers::Incarnation;

#[derive(Debug, Default, Serialize)]
pub struct Stats {
    pub quiet_ms: f64,
    /// Worker processes alive through the quiet phase.
    pub live_workers: usize,
    /// The fewest times any live worker got what it asked for of any lock, one
    /// way (an acquisition; in the transaction workload, the transaction lock
    /// taken, or a commit without it).
    pub fewest: Option<usize>,
    /// (worker, lock, way) with none.
    pub starved: usize,
    /// (worker, lock, way) of transactions not checked: the phase left them less
    /// than a lock's timeout and a second after the lease and the second that
    /// holds left for nobody by the faults may take.
    pub too_short_to_check: usize,
    /// Locks not checked: a killed holder's lease, or an orphan, held them into the
    /// phase's end.
    pub held_by_the_dead: usize,
    /// Locks not checked because a try in the phase named them together with a
    /// lock held by the dead all through it (multi-locks).
    pub blocked_with_the_dead: usize,
}

/// How long a lock must be free of a killed holder's lease before the quiet phase
/// ends to be checked: time for many acquisitions.
pub const MIN_FREE_US: u64 = 1_000_000;

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
    let orphans_until = orphans_last_seen(history);
    let free: Vec<&String> = history
        .facts
        .locks
        .iter()
        .filter(|lock| held_by_the_dead_until(history, &orphans_until, lock) + MIN_FREE_US <= to)
        .collect();
    verdict.liveness.held_by_the_dead = history.facts.locks.len() - free.len();
    let dead = dead_spans(history);
    let tries = quiet_tries(history, &dead);
    let mostly_blocked = 2 * tries.iter().filter(|t| t.blocked).count() > tries.len();
    let checked: Vec<&String> = free
        .into_iter()
        .filter(|lock| !mostly_blocked || !tries.iter().any(|t| t.blocked_with(lock)))
        .collect();
    verdict.liveness.blocked_with_the_dead =
        history.facts.locks.len() - verdict.liveness.held_by_the_dead - checked.len();
    for incarnation in live {
        verdict.liveness.live_workers += 1;
        for &lock in &checked {
            for &way in Way::expected(history.facts.workload) {
                check_one(history, verdict, incarnation, lock, way);
            }
        }
    }
}

/// Whether `incarnation` got what it asked for of `lock`, `way`, in the phase.
fn check_one(
    history: &History,
    verdict: &mut Verdict,
    incarnation: &Incarnation,
    lock: &str,
    way: Way,
) {
    let (from, to) = way.window(history);
    let (quiet_from, quiet_to) = history.facts.quiet;
    let too_short = quiet_to - quiet_from < transaction_phase_needed(history.facts.ttl_us);
    if way.needs_a_request() && too_short {
        // Too short for a try that times out to end inside it: a wedge would
        // leave no request to judge, and pass unseen.
        verdict.liveness.too_short_to_check += 1;
        return;
    }
    let asked: Vec<Request> = requests(history)
        .filter(|request| {
            request.holder.worker == incarnation.worker
                && request.holder.incarnation == incarnation.incarnation
                && request.lock == lock
                && request.way == way
                && request.start_us >= from
                && request.end_us <= to
        })
        .collect();
    if way.needs_a_request() && asked.is_empty() {
        return;
    }
    let got = asked.iter().filter(|request| request.got).count();
    let fewest = verdict.liveness.fewest.get_or_insert(got);
    *fewest = (*fewest).min(got);
    if got > 0 {
        return;
    }
    verdict.liveness.starved += 1;
    verdict.violate(
        Property::Liveness,
        format!(
            "worker {} (incarnation {}) never {} {lock} in the {} ms quiet phase{}",
            incarnation.worker,
            incarnation.incarnation,
            way.verb(),
            ms(quiet_to - quiet_from),
            match asked.len() {
                0 => String::new(),
                n => format!(" ({n} tries from {} ms into it)", ms(from - quiet_from)),
            }
        ),
    );
}

/// The shortest quiet phase (µs) in which the transaction workload's requests can
/// be judged, with leases of `ttl_us`: the start of [`Way::window`], then room for
/// a try that times out and a second.
pub fn transaction_phase_needed(ttl_us: u64) -> u64 {
    ttl_us + MIN_FREE_US + micros(LOCK_TIMEOUT) + MIN_FREE_US
}

/// What a worker must have done with every lock in the quiet phase. In the
/// transaction workload, a transaction run under the lock and one run without it
/// are checked apart: a lock left held for nobody stops only the first kind, and
/// the second alone would hide it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Way {
    /// Took it: an acquisition through its release, an allowed rate-limit call, an
    /// answered count down.
    Took,
    /// Took its transaction lock ([`crate::transactions::tx_lock`]) for a
    /// transaction on its counter (one in five then lets the lease run out: what
    /// is checked is the take).
    TookTheTransactionLock,
    /// Committed a transaction on its counter without a lock.
    CommittedWithoutTheLock,
}

impl Way {
    fn expected(workload: Workload) -> &'static [Way] {
        match workload {
            Workload::Transaction => &[Way::TookTheTransactionLock, Way::CommittedWithoutTheLock],
            _ => &[Way::Took],
        }
    }

    fn verb(self) -> &'static str {
        match self {
            Way::Took => "took",
            Way::TookTheTransactionLock => "took the transaction lock of",
            Way::CommittedWithoutTheLock => "committed a transaction without the lock on",
        }
    }

    /// Whether only a worker that asked in this way in the phase must have got it:
    /// so for transactions, which run under a lock or not by chance (with few
    /// tasks and many locks a worker may never ask one way). A lock's takes are
    /// checked by what they got alone (its failed attempts are not needed).
    fn needs_a_request(self) -> bool {
        self != Way::Took
    }

    /// The part of the quiet phase whose requests count. A transaction's requests
    /// count once a lease and [`MIN_FREE_US`] have passed: the harness logs no
    /// holds of the transaction lock, so a hold its faults left for nobody (a
    /// killed holder's, a release a failover threw away) cannot be told apart and
    /// excused as a lock's is, but it ends within its lease of the faults' end (a
    /// release sent up to 500 ms into the phase, to an old primary not yet
    /// demoted, may still be lost: the second's margin covers it).
    fn window(self, history: &History) -> (u64, u64) {
        let (from, to) = history.facts.quiet;
        match self {
            Way::Took => (from, to),
            _ => (from + history.facts.ttl_us + MIN_FREE_US, to),
        }
    }
}

/// Until when nobody alive may have held `lock`: a holder killed while holding it,
/// until its lease from its last renewal ended (the kill at the latest); or any
/// token sampled there while no guard held it (a killed attempt's grant, a key a
/// failover or restart brought back with the lease it had), until it was last seen.
/// The orphan check holds each such token to its own bound.
fn held_by_the_dead_until(history: &History, orphans: &HashMap<&str, u64>, lock: &str) -> u64 {
    let logged = history
        .holds
        .iter()
        .filter(|hold| hold.lock == lock && hold.end.is_none())
        .filter_map(|hold| Some(hold.killed_us? + hold.ttl_us));
    logged.chain(orphans.get(lock).copied()).max().unwrap_or(0)
}

/// When each lock was held by nobody alive for at least [`MIN_FREE_US`] (a
/// killed holder's lease, an orphan): the spans that may block a try.
fn dead_spans(history: &History) -> HashMap<&str, Vec<(u64, u64)>> {
    let mut spans: HashMap<&str, Vec<(u64, u64)>> = HashMap::new();
    let killed = history.holds.iter().filter(|hold| hold.end.is_none());
    for hold in killed {
        let Some(killed_us) = hold.killed_us else {
            continue;
        };
        let span = (hold.acquired_us, killed_us + hold.ttl_us);
        spans.entry(hold.lock.as_str()).or_default().push(span);
    }
    let blocking = |run: &HoldRun| run.last_us.saturating_sub(run.first_us) >= MIN_FREE_US;
    let orphans = orphan_runs(history).filter(|(run, orphan)| orphan.is_some() && blocking(run));
    for (run, _) in orphans {
        let span = (run.first_us, run.last_us);
        spans.entry(run.lock.as_str()).or_default().push(span);
    }
    spans
}

/// One try in the quiet phase: the locks it named (several for a multi-lock), and
/// which of them the dead held all through it.
struct Try<'h> {
    locks: Vec<&'h str>,
    dead: Vec<&'h str>,
    blocked: bool,
}

impl Try<'_> {
    /// Whether it named `lock` together with another lock the dead held.
    fn blocked_with(&self, lock: &str) -> bool {
        self.locks.contains(&lock) && self.dead.iter().any(|dead| *dead != lock)
    }
}

/// Every try begun in the quiet phase, its attempts on each lock gathered.
fn quiet_tries<'h>(history: &'h History, dead: &HashMap<&str, Vec<(u64, u64)>>) -> Vec<Try<'h>> {
    let (from, to) = history.facts.quiet;
    let mut tries: HashMap<(Holder, u64), Try<'h>> = HashMap::new();
    let quiet = history
        .attempts
        .iter()
        .filter(|a| a.start_us >= from && a.start_us < to);
    for attempt in quiet {
        let held_dead = dead.get(attempt.lock.as_str()).is_some_and(|spans| {
            spans
                .iter()
                .any(|&(f, u)| f <= attempt.start_us && u >= attempt.end_us)
        });
        let entry = tries
            .entry((attempt.holder, attempt.start_us))
            .or_insert_with(|| Try {
                locks: Vec::new(),
                dead: Vec::new(),
                blocked: false,
            });
        entry.locks.push(attempt.lock.as_str());
        if held_dead {
            entry.dead.push(attempt.lock.as_str());
            entry.blocked = true;
        }
    }
    tries.into_values().collect()
}

/// When an orphan (see [`held_by_the_dead_until`]) that held a lock for at least
/// [`MIN_FREE_US`] was last seen there: the orphan check's runs, read once for
/// every lock. Shorter ones (a lock a multi-lock took and gave back, a grant whose
/// caller was cancelled) end well within the phase and excuse nothing.
fn orphans_last_seen(history: &History) -> HashMap<&str, u64> {
    let mut last: HashMap<&str, u64> = HashMap::new();
    let blocking = |run: &HoldRun| run.last_us.saturating_sub(run.first_us) >= MIN_FREE_US;
    let orphans = orphan_runs(history).filter(|(run, orphan)| orphan.is_some() && blocking(run));
    for (run, _) in orphans {
        let seen = last.entry(run.lock.as_str()).or_default();
        *seen = (*seen).max(run.last_us);
    }
    last
}

/// One time a worker asked for something of a lock, from its start to its end
/// (wall µs), and whether it got it.
struct Request<'h> {
    holder: Holder,
    lock: &'h str,
    way: Way,
    start_us: u64,
    end_us: u64,
    got: bool,
}

/// What workers asked for of locks: every acquisition through its release, every
/// allowed rate-limit call, every answered count down (each workload's way of
/// taking a lock; the harness's tries that failed are not needed there), and every
/// transaction, whether it got its lock or committed or not.
fn requests(history: &History) -> impl Iterator<Item = Request<'_>> {
    let took = |holder, lock, start_us, end_us| Request {
        holder,
        lock,
        way: Way::Took,
        start_us,
        end_us,
        got: true,
    };
    let holds = history.holds.iter().filter_map(move |hold| {
        let end = hold.end.as_ref()?.release_end_us;
        Some(took(hold.holder, &hold.lock, hold.attempt_start_us, end))
    });
    let calls = history
        .calls
        .iter()
        .filter(|call| call.allowed == Some(true))
        .map(move |call| took(call.holder, &call.lock, call.sent_us, call.recv_us));
    // A guarded transaction logged without `locked` (an older log) says nothing
    // of its lock: one that wrote nothing may or may not have taken it.
    let txs = history.txs.iter().filter_map(|tx| {
        let (way, got) = match tx.guarded {
            true => (Way::TookTheTransactionLock, tx.locked?),
            false => (
                Way::CommittedWithoutTheLock,
                tx.outcome == TxOutcome::Committed,
            ),
        };
        Some(Request {
            holder: tx.holder,
            lock: &tx.lock,
            way,
            start_us: tx.sent_us,
            end_us: tx.recv_us,
            got,
        })
    });
    let latches = history
        .latches
        .iter()
        .filter(|call| match call.call {
            LatchCallKind::CountDown { answer } => answer.is_some(),
            LatchCallKind::Wait { .. } => false,
        })
        .map(move |call| took(call.holder, &call.lock, call.sent_us, call.recv_us));
    holds.chain(calls).chain(txs).chain(latches)
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::*;
    use super::super::{Property, check};
    use crate::faults::Fault;
    use crate::sampler::HoldRun;
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

    /// Transactions: a worker that tried to take a counter's transaction lock in
    /// the phase (once a lease and a second passed) and never did is starved of
    /// it, whatever its transactions without the lock did; likewise for those.
    #[test]
    fn transactions_must_take_the_lock_and_commit_without_it_when_they_try() {
        use crate::record::Record;
        use crate::transactions::{Tx, TxOutcome};
        // A transaction sent `at_ms` into the phase: under the lock (taken or not),
        // or without it (committed or not).
        let tx = |seq: u64, at_ms: u64, guarded: bool, got: bool| {
            let sent_us = 1_000 + at_ms * 1_000;
            let outcome = match got && !guarded {
                true => TxOutcome::Committed,
                false => TxOutcome::NotWritten,
            };
            Record::Tx(Tx {
                holder: holder(0, seq),
                lock: "l".into(),
                id: format!("0.0.0.{seq}"),
                guarded,
                locked: guarded.then_some(got),
                sent_us,
                recv_us: sent_us + 5,
                outcome,
            })
        };
        let starved = |txs: Vec<Record>| {
            let mut facts = quiet_run(1);
            facts.workload = crate::Workload::Transaction;
            let verdict = check(&history(facts, &[(None, txs)]));
            let examples = format!("{:?}", verdict.examples);
            (
                verdict.violations.get(&Property::Liveness).copied(),
                examples,
            )
        };
        let commits = || vec![tx(1, 2_000, false, true), tx(2, 3_000, false, true)];
        // Tries under the lock, none taken: starved.
        let (count, examples) = starved([commits(), vec![tx(3, 2_000, true, false)]].concat());
        assert_eq!(count, Some(1));
        assert!(
            examples.contains("took the transaction lock of l"),
            "{examples}"
        );
        // Taken (even by a transaction that then wrote nothing): fine.
        assert_eq!(
            starved([commits(), vec![tx(3, 2_000, true, true)]].concat()).0,
            None
        );
        // Never tried under the lock, or only before the lease and a second had
        // passed (a hold left for nobody by the faults may still block it): fine.
        assert_eq!(starved(commits()).0, None);
        assert_eq!(
            starved([commits(), vec![tx(3, 500, true, false)]].concat()).0,
            None
        );
        // Tried without the lock and never committed: starved.
        let failed = vec![tx(1, 2_000, false, false), tx(3, 2_000, true, true)];
        assert_eq!(starved(failed).0, Some(1));
        // A guarded transaction from a log that did not record `locked`: no try.
        let mut unknown = tx(3, 2_000, true, false);
        if let Record::Tx(t) = &mut unknown {
            t.locked = None;
        }
        assert_eq!(starved([commits(), vec![unknown]].concat()).0, None);
    }

    /// A phase that leaves less than a lock's timeout and a second after the
    /// lease and a second: the transactions' ways are not checked, and say so.
    #[test]
    fn a_phase_too_short_for_a_transaction_try_is_not_checked() {
        use crate::record::Record;
        use crate::transactions::{Tx, TxOutcome};
        let failed_try = Record::Tx(Tx {
            holder: holder(0, 1),
            lock: "l".into(),
            id: "0.0.0.1".into(),
            guarded: true,
            locked: Some(false),
            sent_us: 1_400_000,
            recv_us: 2_000_000,
            outcome: TxOutcome::NotWritten,
        });
        let mut facts = quiet_run(1);
        facts.workload = crate::Workload::Transaction;
        facts.quiet = (1_000, 3_000_000);
        let verdict = check(&history(facts, &[(None, vec![failed_try])]));
        assert_eq!(verdict.violations.get(&Property::Liveness), None);
        assert_eq!(verdict.liveness.too_short_to_check, 2);
    }

    /// A worker killed holding the lock: its lease may block everyone until it
    /// ends. Ending less than `MIN_FREE_US` before the phase does: not checked.
    #[test]
    fn a_lock_a_killed_holder_s_lease_blocks_to_the_end_is_not_checked() {
        let killed_holding = |killed_us: u64| {
            let mut facts = quiet_run(2);
            facts.incarnations[0].killed_us = Some(killed_us);
            let acquired = held(0, 1, 1, (killed_us - 10, 0))[1].clone();
            check(&history(facts, &[(Some(killed_us), vec![acquired])]))
        };
        let late = killed_holding(4_000_000);
        assert!(late.violations.is_empty(), "{:?}", late.examples);
        assert_eq!(late.liveness.held_by_the_dead, 1);
        // Killed early: the lease ended long before; worker 1 never took it.
        let early = killed_holding(100_000);
        assert_eq!(early.violations[&Property::Liveness], 1);
    }

    /// A released lock a failover brought back with a 10 s lease (a token no guard
    /// had): nobody may take it until it ends. Ending less than `MIN_FREE_US` before
    /// the phase does: not checked; ending earlier: checked.
    #[test]
    fn a_lock_an_orphan_blocks_to_the_end_is_not_checked() {
        let brought_back_until = |last_us: u64| {
            let mut facts = quiet_run(2);
            facts.faults = vec![window(Fault::SentinelFailover, 0, 900, None)];
            facts.samples.push(HoldRun {
                lock: "l".into(),
                token: "brought back".into(),
                first_us: 950,
                first_sent_us: 950,
                last_us,
                first_pttl_ms: 10_000,
            });
            check(&history(
                facts,
                &[(None, held(0, 1, 1, (4_700_000, 4_800_000)))],
            ))
        };
        let late = brought_back_until(4_500_000);
        assert!(late.violations.is_empty(), "{:?}", late.examples);
        assert_eq!(late.liveness.held_by_the_dead, 1);
        // Gone 3 s before the end: worker 1 had time to take it and never did.
        let early = brought_back_until(2_000_000);
        assert_eq!(
            early.violations[&Property::Liveness],
            1,
            "{:?}",
            early.examples
        );
        // Seen for only 0.5 s at the end (a lock given back, a cancelled grant): it
        // blocked nobody for long, so the lock is checked.
        let mut facts = quiet_run(2);
        facts.samples.push(HoldRun {
            lock: "l".into(),
            token: "given back".into(),
            first_us: 4_400_000,
            first_sent_us: 4_400_000,
            last_us: 4_900_000,
            first_pttl_ms: 300,
        });
        let logs = [(None, held(0, 1, 1, (4_950_000, 4_960_000)))];
        let short = check(&history(facts, &logs));
        assert_eq!(short.liveness.held_by_the_dead, 0);
        assert_eq!(
            short.violations[&Property::Liveness],
            1,
            "{:?}",
            short.examples
        );
    }

    /// A multi-lock run where lock "m" was brought back with a long lease: every
    /// set naming it waits. When most tries of the phase were blocked so, a lock
    /// tried together with "m" is not checked; when most were not (many locks,
    /// few tries meet "m"), or "l" was never tried with it, "l" still is.
    #[test]
    fn a_lock_tried_together_with_one_held_by_the_dead_is_not_checked() {
        use crate::record::{Mode, Outcome, Record};
        // Worker 1's tries, each at its own time: with "m" or alone; worker 0 takes
        // "l" once (a try of its own, not blocked).
        let run = |tries: &[bool]| {
            let mut facts = quiet_run(2);
            facts.locks = vec!["l".into(), "m".into()];
            facts.faults = vec![window(Fault::SentinelFailover, 0, 400_000, None)];
            facts.samples.push(HoldRun {
                lock: "m".into(),
                token: "brought back".into(),
                first_us: 500_000,
                first_sent_us: 500_000,
                last_us: 4_900_000,
                first_pttl_ms: 10_000,
            });
            let mut worker_1 = Vec::new();
            for (seq, &with_m) in tries.iter().enumerate() {
                let start_us = 1_000_000 + 500_000 * seq as u64;
                let tried = |lock: &str| Record::Attempt {
                    holder: super::super::fixtures::holder(1, 10 + seq as u64),
                    lock: lock.into(),
                    mode: Mode::Timeout,
                    start_us,
                    end_us: start_us + 400_000,
                    timeout_us: Some(400_000),
                    ttl_us: 300_000,
                    outcome: Outcome::Busy,
                    fair: false,
                };
                worker_1.push(tried("l"));
                if with_m {
                    worker_1.push(tried("m"));
                }
            }
            let logs = [
                (None, held(0, 1, 1, (2_000_000, 2_100_000))),
                (None, worker_1),
            ];
            check(&history(facts, &logs))
        };
        let mostly_blocked = run(&[true, true, true]);
        assert!(
            mostly_blocked.violations.is_empty(),
            "{:?}",
            mostly_blocked.examples
        );
        assert_eq!(mostly_blocked.liveness.held_by_the_dead, 1);
        assert_eq!(mostly_blocked.liveness.blocked_with_the_dead, 1);
        // Most tries free of "m": a worker that never got "l" starved on it.
        let mostly_free = run(&[true, false, false, false]);
        assert_eq!(mostly_free.liveness.blocked_with_the_dead, 0);
        assert_eq!(mostly_free.violations[&Property::Liveness], 1);
        // Never tried with "m": checked.
        let alone = run(&[false, false]);
        assert_eq!(alone.liveness.blocked_with_the_dead, 0);
        assert_eq!(
            alone.violations[&Property::Liveness],
            1,
            "{:?}",
            alone.examples
        );
    }
}
