//! No resurrection: once a guard was gone (its release returned, or it was dropped),
//! or an operator broke its hold (`force_release`), its token never appears in a
//! lock key again. A sampled run of the token that
//! *starts* after that (its first sample was sent after the release had returned)
//! means something set the lock again under the old token: a renewal in flight at
//! the release taking the lock back, a late take-back after an operator's
//! `force_release`, a release retried as an acquire.
//!
//! Excused, since no client can prevent them: a restart or failover that loads older
//! state (the key comes back with the expiry it had), and, on one server or a
//! cluster, a request the network or a paused server delayed past the release (a
//! stall, a black hole, added latency, a paused server), from the hold's attempt to
//! its end. A quorum's masters remember the values released there, so a delayed
//! take or take-back sets nothing: there, nothing but a restore is excused.

use std::collections::HashMap;

use serde::Serialize;

use super::{Property, Verdict};
use crate::faults::Fault;
use crate::history::{History, Hold};
use crate::sampler::HoldRun;

/// How long a sample may take to be answered, for runs recorded before the send
/// time was: a run whose first sample was answered later than this after the
/// release may have been sent before it.
const SAMPLE_IN_FLIGHT_US: u64 = 100_000;

#[derive(Debug, Default, Serialize)]
pub struct Stats {
    /// Runs of a token that started after its guard was gone.
    pub reappeared: usize,
    /// Of those, explained by a restore of older state or a delayed request.
    pub excused: usize,
}

pub fn check(history: &History, verdict: &mut Verdict) {
    let guards: HashMap<&str, &Hold> = history
        .holds
        .iter()
        .map(|hold| (hold.owner.as_str(), hold))
        .collect();
    for run in &history.facts.samples {
        let Some(hold) = guards.get(run.token.as_str()) else {
            continue;
        };
        let Some(gone) = ended_us(history, hold) else {
            continue;
        };
        // Read after the hold ended only if the sample was sent after it.
        let sent = match run.first_sent_us {
            0 => run.first_us.saturating_sub(SAMPLE_IN_FLIGHT_US),
            sent => sent,
        };
        if sent <= gone {
            continue;
        }
        verdict.resurrections.reappeared += 1;
        if excused(history, hold, gone, run) {
            verdict.resurrections.excused += 1;
            continue;
        }
        verdict.violate(
            Property::Resurrection,
            format!(
                "{}: token {}… of {:?} set again {} ms after its hold ended (released or broken)",
                run.lock,
                run.token.get(..8).unwrap_or(&run.token),
                hold.holder,
                (run.first_us - gone) / 1000
            ),
        );
    }
}

/// When the hold surely ended in Redis: its release answered (the lock was freed
/// there, or was not ours any more), or an operator broke it after its holder was
/// told it held it. A release that failed or was cut off, and a holder killed, may
/// leave the lock to its lease (the orphan check bounds that), so they are not
/// counted here. Nor is a break while the attempt still waited: a grant (a hand-off
/// to the waiter) broken before the waiter saw it leaves the waiter waiting, and
/// its next try may take the free lock under the same token, a grant of its own.
fn ended_us(history: &History, hold: &Hold) -> Option<u64> {
    let broken = history
        .facts
        .faults
        .iter()
        .filter(|window| window.broke.as_deref() == Some(hold.owner.as_str()))
        .filter(|window| window.from_us >= hold.acquired_us)
        .map(|window| window.to_us)
        .min();
    let released = hold
        .end
        .as_ref()
        .filter(|end| end.released.is_some())
        .map(|end| end.release_end_us);
    match (released, broken) {
        (Some(released), Some(broken)) => Some(released.min(broken)),
        (released, broken) => released.or(broken),
    }
}

/// Whether a restore of older state, or a fault that delays requests during the
/// hold, explains the token's return.
fn excused(history: &History, hold: &Hold, gone: u64, run: &HoldRun) -> bool {
    let facts = &history.facts;
    let lease = hold.ttl_us.max(facts.waiter_lease_us);
    facts.faults.iter().any(|window| {
        let restored = window.fault.restores_older_state()
            && window.from_us <= run.first_us
            && run.first_us <= window.to_us + lease;
        let delayed = !facts.quorum
            && delays_requests(window.fault)
            && window.from_us <= gone
            && hold.attempt_start_us <= window.to_us;
        restored || delayed
    })
}

/// Faults that hold requests back and let them run later.
fn delays_requests(fault: Fault) -> bool {
    matches!(
        fault,
        Fault::StallNetwork
            | Fault::BlackHole
            | Fault::Latency
            | Fault::PauseRedis
            | Fault::PausePrimary
    )
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::*;
    use super::super::{Property, check};
    use crate::faults::Fault;
    use crate::sampler::HoldRun;

    /// Holder 0 released at 100 ms; its token seen again from `first_us`.
    fn seen_again(facts: crate::history::RunFacts, first_us: u64) -> super::super::Verdict {
        let mut facts = facts;
        facts.samples.push(HoldRun {
            lock: "l".into(),
            token: owner(0, 1),
            first_us,
            first_sent_us: first_us - 5_000,
            last_us: first_us + 20_000,
            first_pttl_ms: 300,
        });
        check(&history(facts, &[(None, held(0, 1, 1, (0, 100_000)))]))
    }

    #[test]
    fn a_token_set_again_after_its_release_is_a_violation() {
        let v = seen_again(facts(), 400_000);
        assert_eq!(v.violations[&Property::Resurrection], 1);
    }

    #[test]
    fn a_sample_sent_before_the_release_returned_is_not() {
        let v = seen_again(facts(), 104_000);
        assert!(v.violations.is_empty(), "{:?}", v.examples);
    }

    /// Seen in a `--sentinel` run (seed 14): a lock handed to a waiter, broken by
    /// an operator before the waiter saw the grant, then taken by the same waiter's
    /// next try under the same token: one hold, granted after the break.
    #[test]
    fn a_break_while_the_attempt_still_waited_does_not_end_the_hold() {
        let mut facts = facts();
        let mut broken = window(Fault::ForceRelease, 140_000, 150_000, None);
        broken.broke = Some(owner(0, 1));
        facts.faults.push(broken);
        facts.samples.push(HoldRun {
            lock: "l".into(),
            token: owner(0, 1),
            first_us: 180_000,
            first_sent_us: 175_000,
            last_us: 290_000,
            first_pttl_ms: 300,
        });
        let v = check(&history(
            facts,
            &[(None, held(0, 1, 1, (200_000, 300_000)))],
        ));
        assert!(v.violations.is_empty(), "{:?}", v.examples);
    }

    #[test]
    fn a_restore_or_a_delayed_request_explains_it() {
        for (fault, from, to) in [
            (Fault::RestartFromSnapshot, 350_000, 380_000),
            (Fault::StallNetwork, 50_000, 350_000),
        ] {
            let mut facts = facts();
            facts.faults.push(window(fault, from, to, None));
            let v = seen_again(facts, 400_000);
            assert!(v.violations.is_empty(), "{fault:?}: {:?}", v.examples);
            assert_eq!(v.resurrections.excused, 1);
        }
        // A hold an operator broke at 50 ms, taken back by its holder while its
        // guard still lived (released at 100 ms... seen from 190 ms): not excused.
        let mut broken_facts = facts();
        let mut broken = window(Fault::ForceRelease, 40_000, 50_000, None);
        broken.broke = Some(owner(0, 1));
        broken_facts.faults.push(broken);
        let v = seen_again(broken_facts, 60_000);
        assert_eq!(v.violations[&Property::Resurrection], 1);
        // On a quorum, a delayed request sets nothing: no excuse.
        let mut on_quorum = facts();
        on_quorum.quorum = true;
        on_quorum
            .faults
            .push(window(Fault::StallNetwork, 50_000, 350_000, None));
        let v = seen_again(on_quorum, 400_000);
        assert_eq!(v.violations[&Property::Resurrection], 1);
        // A restart that empties Redis brings nothing back, and an operator's
        // force_release is never undone.
        for fault in [Fault::RestartRedisNow, Fault::ForceRelease] {
            let mut facts = facts();
            facts.faults.push(window(fault, 50_000, 350_000, None));
            let v = seen_again(facts, 400_000);
            assert_eq!(v.violations[&Property::Resurrection], 1, "{fault:?}");
        }
    }
}
