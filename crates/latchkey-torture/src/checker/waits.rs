//! Bounded waits: `lock_timeout(d)` returns within `d` plus [`WAIT_BOUND_US`], whatever
//! Redis and the network do, except while its own process was frozen (a paused
//! worker cannot return from anything).

use serde::Serialize;

use super::{Property, Verdict, ms, paused};
use crate::history::History;

/// How long past its deadline a timed wait may return: one round trip to leave the
/// wait queue after the deadline, plus scheduling on a loaded 2-core machine.
pub const WAIT_BOUND_US: u64 = 250_000;

#[derive(Debug, Default, Serialize)]
pub struct Stats {
    pub bound_ms: f64,
    /// Timed attempts checked.
    pub timed: usize,
    /// Timed attempts left out: their worker was paused meanwhile.
    pub excused_by_pause: usize,
    /// The latest any checked attempt returned after its deadline.
    pub longest_overrun_ms: f64,
    pub over_bound: usize,
}

pub fn check(history: &History, verdict: &mut Verdict) {
    verdict.waits.bound_ms = ms(WAIT_BOUND_US);
    for attempt in &history.attempts {
        let Some(timeout) = attempt.timeout_us else {
            continue;
        };
        if paused(
            history,
            attempt.holder.worker,
            attempt.start_us,
            attempt.end_us,
        ) {
            verdict.waits.excused_by_pause += 1;
            continue;
        }
        verdict.waits.timed += 1;
        let waited = attempt.end_us.saturating_sub(attempt.start_us);
        let overrun = waited.saturating_sub(timeout);
        verdict.waits.longest_overrun_ms = verdict.waits.longest_overrun_ms.max(ms(overrun));
        if overrun > WAIT_BOUND_US {
            verdict.waits.over_bound += 1;
            verdict.violate(
                Property::BoundedWait,
                format!(
                    "{:?} on {}: lock_timeout({} ms) returned after {} ms ({:?})",
                    attempt.holder,
                    attempt.lock,
                    ms(timeout),
                    ms(waited),
                    attempt.outcome
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::*;
    use super::super::{Property, check};
    use super::WAIT_BOUND_US;
    use crate::faults::Fault;
    use crate::record::{Mode, Outcome, Record};

    fn timed_wait(worker: usize, waited: u64) -> Record {
        Record::Attempt {
            holder: holder(worker, 1),
            lock: "l".into(),
            mode: Mode::Timeout,
            start_us: 1_000,
            end_us: 1_000 + waited,
            timeout_us: Some(100_000),
            ttl_us: TTL,
            outcome: Outcome::Busy,
            fair: false,
        }
    }

    #[test]
    fn a_wait_past_its_deadline_and_the_bound_is_a_violation() {
        let v = check_logs(&[(None, vec![timed_wait(0, 100_000 + WAIT_BOUND_US + 1)])]);
        assert_eq!(v.violations[&Property::BoundedWait], 1);
        let v = check_logs(&[(None, vec![timed_wait(0, 100_000 + WAIT_BOUND_US)])]);
        assert!(v.violations.is_empty(), "{:?}", v.examples);
    }

    #[test]
    fn a_wait_its_own_worker_was_paused_in_is_excused() {
        let mut facts = facts();
        facts
            .faults
            .push(window(Fault::PauseWorker, 2_000, 902_000, Some(0)));
        let logs = [(None, vec![timed_wait(0, 1_000_000)])];
        let v = check(&history(facts.clone(), &logs));
        assert!(v.violations.is_empty(), "{:?}", v.examples);
        assert_eq!(v.waits.excused_by_pause, 1);
        // Another worker's pause excuses nothing.
        facts.faults[0].worker = Some(1);
        let v = check(&history(facts, &logs));
        assert_eq!(v.violations[&Property::BoundedWait], 1);
    }
}
