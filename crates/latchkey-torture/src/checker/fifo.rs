//! First come, first served (semaphores, read-write locks, and fair locks among their
//! fair requests): their line is strict, so a request that surely stood in line is
//! never overtaken by one that began after it, whatever their weights: a waiter that
//! does not fit blocks the ones behind it, and a waiting writer (who asks for every
//! permit) is not starved by readers. A fair lock's plain requests may barge, and
//! are not held to it.
//!
//! A waiter `a` surely stood in line [`IN_LINE_AFTER_US`] after its attempt began
//! (its first try, the subscription and the try that queues). Another request `b`
//! that began after that and was granted while `a` still waited overtook it. `a`
//! still waited if its attempt ended more than [`TOLD_WITHIN_US`] after `b`'s ended:
//! a release that served both in order may tell them in any order.
//!
//! Not checked while a fault hit Redis or the network (a restart, a failover or a
//! stall may drop the line or the waiter's lease), or until [`SETTLED_AFTER_US`]
//! after it (a waiter whose connection the fault broke retries with backoff, out of
//! line, while others already take the lock), or while an operator broke the lock, a
//! clock jump ended leases (a lock handed to `a` may end before `a` hears of it, and
//! `a` queues again, at the back) or `a`'s process was paused (it stopped renewing its
//! place): from `a`'s start to its end.

use std::collections::HashMap;

use serde::Serialize;

use super::{Property, Verdict, ms, paused};
use crate::Workload;
use crate::faults::Fault;
use crate::history::{Attempt, History};

/// How long after a waiter's attempt began it surely stands in line.
pub const IN_LINE_AFTER_US: u64 = 100_000;
/// How far apart two waiters one release served may hear of it (the wake-up, the
/// next attempt's round trip, a loaded 2-core machine's scheduling).
pub const TOLD_WITHIN_US: u64 = 250_000;

/// How long after a fault ended a waiter may still be out of line, or in line but
/// deaf to its turn: a request on a broken connection times out (1 s) and its
/// retries back off up to 1 s; and the wake-ups' subscriber connection, found dead
/// by its heartbeat (a PING every 1 s, 1 s to answer), reconnects with a backoff
/// capped at 2 s, so a waiter served meanwhile hears of it only when the subscriber
/// is back and wakes every waiter (CI seed 16277199128323295894: 13 waiters told
/// together 3.05 s after a black hole ended, of grants made in order).
pub const SETTLED_AFTER_US: u64 = 4_000_000;

#[derive(Debug, Default, Serialize)]
pub struct Stats {
    /// Waiters that stood in line undisturbed (no fault, no pause) while others began.
    pub waiters_checked: usize,
    /// Requests that began behind such a waiter, and were served after it.
    pub served_behind: usize,
    /// Of those waiters, overtaken by a later request.
    pub overtaken: usize,
}

pub fn check(history: &History, verdict: &mut Verdict) {
    // Who stands in one strict line: every request of a semaphore or a read-write
    // lock; of a lock, the fair ones (a plain one may take a free lock and be passed
    // it within its process, by design, and a multi-lock queues nowhere).
    let in_line: fn(bool) -> bool = match history.facts.workload {
        Workload::Semaphore | Workload::RwLock => |_| true,
        Workload::Mutex => |fair| fair,
        _ => return,
    };
    // Every acquisition's attempt by lock: (began, granted), by when it began.
    let mut granted: HashMap<&str, Vec<(u64, u64)>> = HashMap::new();
    for hold in history.holds.iter().filter(|hold| in_line(hold.fair)) {
        let lock = granted.entry(&hold.lock).or_default();
        lock.push((hold.attempt_start_us, hold.acquired_us));
    }
    for grants in granted.values_mut() {
        grants.sort_unstable();
    }
    for waiter in history
        .attempts
        .iter()
        .filter(|waiter| in_line(waiter.fair))
    {
        let in_line_us = waiter.start_us + IN_LINE_AFTER_US;
        if in_line_us + TOLD_WITHIN_US >= waiter.end_us || disturbed(history, waiter) {
            continue;
        }
        verdict.fifo.waiters_checked += 1;
        let Some(grants) = granted.get(waiter.lock.as_str()) else {
            continue;
        };
        let first_behind = grants.partition_point(|&(began, _)| began <= in_line_us);
        let behind = grants[first_behind..]
            .iter()
            .take_while(|&&(began, _)| began < waiter.end_us);
        let mut overtook = None;
        for &(began, got) in behind {
            match got + TOLD_WITHIN_US < waiter.end_us {
                true => overtook = overtook.or(Some((began, got))),
                false => verdict.fifo.served_behind += 1,
            }
        }
        let Some((began, got)) = overtook else {
            continue;
        };
        verdict.fifo.overtaken += 1;
        verdict.violate(
            Property::Fifo,
            format!(
                "{}: a request begun {} ms after worker {}'s wait began was served {} ms \
                 before that wait ended",
                waiter.lock,
                ms(began - waiter.start_us),
                waiter.holder.worker,
                ms(waiter.end_us - got),
            ),
        );
    }
}

/// Whether something could have cost `waiter` its place in line while it waited.
fn disturbed(history: &History, waiter: &Attempt) -> bool {
    let (from, to) = (waiter.start_us, waiter.end_us);
    paused(history, waiter.holder.worker, from, to)
        || history.facts.faults.iter().any(|window| {
            (window.fault.hits_redis()
                || matches!(window.fault, Fault::ForceRelease | Fault::ClockJump))
                && window.from_us <= to
                && from <= window.to_us + SETTLED_AFTER_US
        })
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::*;
    use super::super::{Property, check};
    use super::SETTLED_AFTER_US;
    use crate::Workload;
    use crate::faults::Fault;
    use crate::record::{Mode, Outcome, Record};

    /// When the waiter begins.
    const BASE: u64 = 5_000_000;

    /// Worker 0 waits on `l` from `BASE` for 2 s and times out; worker 1 begins at
    /// `began` and holds `l` from `got` to `got` + 10 ms (after `BASE`).
    fn behind(began: u64, got: u64) -> Vec<(Option<u64>, Vec<Record>)> {
        let (began, got) = (BASE + began, BASE + got);
        let waiter = Record::Attempt {
            holder: holder(0, 1),
            lock: "l".into(),
            mode: Mode::Timeout,
            start_us: BASE,
            end_us: BASE + 2_000_000,
            timeout_us: Some(2_000_000),
            ttl_us: TTL,
            outcome: Outcome::Busy,
            fair: false,
        };
        let mut later = held(1, 1, 1, (got, got + 10_000));
        let Record::Attempt { start_us, .. } = &mut later[0] else {
            unreachable!()
        };
        *start_us = began;
        let Record::Acquired {
            attempt_start_us, ..
        } = &mut later[1]
        else {
            unreachable!()
        };
        *attempt_start_us = began;
        vec![(None, vec![waiter]), (None, later)]
    }

    fn semaphore() -> crate::history::RunFacts {
        let mut facts = facts();
        facts.workload = Workload::Semaphore;
        facts
    }

    #[test]
    fn a_request_begun_behind_a_waiter_and_served_first_is_a_violation() {
        let v = check(&history(semaphore(), &behind(500_000, 900_000)));
        assert_eq!(v.violations[&Property::Fifo], 1, "{:?}", v.examples);
        assert_eq!(v.fifo.overtaken, 1);
    }

    #[test]
    fn one_begun_before_the_waiter_stood_in_line_or_served_with_it_is_not() {
        // Began before the waiter surely queued.
        let v = check(&history(semaphore(), &behind(50_000, 900_000)));
        assert!(v.violations.is_empty(), "{:?}", v.examples);
        // Served about when the waiter's wait ended (one release served both).
        let v = check(&history(semaphore(), &behind(500_000, 1_900_000)));
        assert!(v.violations.is_empty(), "{:?}", v.examples);
        assert_eq!(v.fifo.served_behind, 1);
    }

    #[test]
    fn a_fault_or_a_pause_of_the_waiter_excuses_it() {
        for (fault, worker) in [
            (Fault::RestartRedisNow, None),
            (Fault::ForceRelease, None),
            (Fault::PauseWorker, Some(0)),
        ] {
            let mut facts = semaphore();
            let (from, to) = (BASE + 300_000, BASE + 400_000);
            facts.faults.push(window(fault, from, to, worker));
            let v = check(&history(facts, &behind(500_000, 900_000)));
            assert!(v.violations.is_empty(), "{fault:?}: {:?}", v.examples);
        }
        // Another worker's pause costs the waiter nothing.
        let mut facts = semaphore();
        let (from, to) = (BASE + 300_000, BASE + 400_000);
        facts
            .faults
            .push(window(Fault::PauseWorker, from, to, Some(1)));
        let v = check(&history(facts, &behind(500_000, 900_000)));
        assert_eq!(v.violations[&Property::Fifo], 1);
    }

    /// A fault that ended before the wait began may still have it retrying a broken
    /// connection, out of line: for a while.
    #[test]
    fn a_fault_just_before_the_wait_excuses_it_and_an_older_one_not() {
        for (ended_before, excused) in [
            (SETTLED_AFTER_US - 100_000, true),
            (SETTLED_AFTER_US + 100_000, false),
        ] {
            let mut facts = semaphore();
            let to = BASE - ended_before;
            facts
                .faults
                .push(window(Fault::ResetConnections, to - 1_000, to, None));
            let v = check(&history(facts, &behind(500_000, 900_000)));
            assert_eq!(
                v.violations.is_empty(),
                excused,
                "{ended_before}: {:?}",
                v.examples
            );
        }
    }

    /// Marks the attempts and acquisitions of `worker` in `logs` as a fair lock's.
    fn fair(
        mut logs: Vec<(Option<u64>, Vec<Record>)>,
        worker: usize,
    ) -> Vec<(Option<u64>, Vec<Record>)> {
        for record in logs.iter_mut().flat_map(|(_, records)| records) {
            match record {
                Record::Attempt { holder, fair, .. } | Record::Acquired { holder, fair, .. }
                    if holder.worker == worker =>
                {
                    *fair = true
                }
                _ => {}
            }
        }
        logs
    }

    /// A lock's fair waiter is held to it against fair requests only: plain ones may
    /// barge.
    #[test]
    fn a_lock_is_held_to_it_between_fair_requests() {
        let plain = behind(500_000, 900_000);
        let v = check(&history(facts(), &plain));
        assert!(v.violations.is_empty(), "{:?}", v.examples);
        let fair_waiter = fair(plain, 0);
        let v = check(&history(facts(), &fair_waiter));
        assert!(v.violations.is_empty(), "{:?}", v.examples);
        let both_fair = fair(fair_waiter, 1);
        let v = check(&history(facts(), &both_fair));
        assert_eq!(v.violations[&Property::Fifo], 1, "{:?}", v.examples);
    }
}
