//! No orphan holds: the harness sampled every lock key in Redis (GET and PTTL, every
//! 20 ms) and every token it saw must belong to a guard alive at that moment, from
//! its attempt's start to the end of its release. A token seen otherwise is an
//! orphan, and must be gone within [`ORPHAN_SLACK_US`] after the latest of:
//!
//! - its guard's release returning (a release, even an aborted one, frees the lock
//!   at once: in the release itself or in the guard's drop);
//! - if a fault hit Redis or the network from a lease before the release to a
//!   waiter lease after the fault ended: [`RELEASE_RETRY_US`] after the later of the
//!   release and the fault's end (a release is retried until it lands), but never
//!   later than the longest expiry latchkey sets (the waiter lease) after the
//!   release (retries stop once the lease has ended anyway);
//! - a restart or failover may bring back a key, with the expiry it had, that was
//!   released after the snapshot it loads or the last write the replica received
//!   (below);
//! - the longest expiry latchkey sets after a restart or failover that loads older
//!   state ended, for a key first seen while the server came back: such a restart
//!   may bring back a key released at any time since that state was written, with
//!   the expiry it had then;
//! - one lease after its process was killed, or after its release if its process
//!   was paused or killed right then (nothing renews the lease any more, and the
//!   guard's drop cannot free the lock in a frozen or dead process);
//! - for a token no guard ever had (a grant whose caller was cancelled or killed
//!   before `lock()` returned, a lock a multi-lock took and gave back, or a handover
//!   to a waiter that gave up or froze): the end of an attempt that could have sent
//!   the grant (it had started by then and its cleanup, below, had not ended), with
//!   the same allowances as a release: its attempts take the lock again under the
//!   same token while it waits (a retry after a lost reply; a handover's holder
//!   renewing what a release passed it), and its end undoes them. The history does
//!   not say which attempt a token was (the library draws it), so the latest such
//!   cleanup bounds it; or one lease after a worker was killed while it was there
//!   (an attempt in flight in a killed worker is never logged); or a lease after a
//!   restart or failover that may have brought it back. Once every possible owner
//!   is gone, nothing may hold it.

use std::collections::{HashMap, HashSet};

use serde::Serialize;

use super::{Property, Verdict, ms, paused};
use crate::history::{History, Hold};
use crate::record::{Mode, Outcome};
use crate::sampler::HoldRun;

/// How long past its deadline an orphan may still be seen: the guard's background
/// release, and scheduling on a loaded 2-core machine.
pub const ORPHAN_SLACK_US: u64 = 100_000;
/// How long after Redis answers again a release that met a fault lands: a request
/// stuck on a stalled connection times out (1 s, the reply timeout), and the next
/// try, on a fresh connection, comes within the longest retry pause (250 ms).
pub const RELEASE_RETRY_US: u64 = 1_250_000;

#[derive(Debug, Default, Serialize)]
pub struct Stats {
    pub slack_ms: f64,
    /// Runs of one token in one key over consecutive samples.
    pub runs: usize,
    /// Runs seen while no guard held their token.
    pub orphans: usize,
    /// Of those, tokens no guard ever had.
    pub unknown_tokens: usize,
    /// The longest any token was seen orphaned.
    pub longest_orphan_ms: f64,
    /// The latest any orphan was seen past its deadline (negative: all in time).
    pub worst_past_deadline_ms: f64,
    pub over_bound: usize,
}

pub fn check(history: &History, verdict: &mut Verdict) {
    verdict.orphans.slack_ms = ms(ORPHAN_SLACK_US);
    verdict.orphans.worst_past_deadline_ms = f64::NEG_INFINITY;
    let guards: HashSet<&str> = history.holds.iter().map(|h| h.owner.as_str()).collect();
    for (run, orphan) in orphan_runs(history) {
        verdict.orphans.runs += 1;
        let Some(Orphan {
            since_us,
            deadline_us,
        }) = orphan
        else {
            continue;
        };
        let stats = &mut verdict.orphans;
        stats.orphans += 1;
        stats.unknown_tokens += usize::from(!guards.contains(run.token.as_str()));
        stats.longest_orphan_ms = stats
            .longest_orphan_ms
            .max(ms(run.last_us.saturating_sub(since_us)));
        let past = run.last_us as f64 - (deadline_us + ORPHAN_SLACK_US) as f64;
        stats.worst_past_deadline_ms = stats.worst_past_deadline_ms.max(past / 1000.0);
        if past > 0.0 {
            stats.over_bound += 1;
            verdict.violate(
                Property::Orphan,
                format!(
                    "{}: token {}… held the lock {} ms with no guard, {} ms past its bound",
                    run.lock,
                    run.token.get(..8).unwrap_or(&run.token),
                    ms(run.last_us.saturating_sub(since_us)),
                    past / 1000.0
                ),
            );
        }
    }
    if verdict.orphans.orphans == 0 {
        verdict.orphans.worst_past_deadline_ms = 0.0;
    }
}

/// Every sampled run of a token in a lock key, with what made it an orphan (`None`
/// while its guard lived): since when, and until when it may stay.
pub fn orphan_runs(history: &History) -> impl Iterator<Item = (&HoldRun, Option<Orphan>)> {
    let guards: HashMap<&str, &Hold> = history
        .holds
        .iter()
        .map(|hold| (hold.owner.as_str(), hold))
        .collect();
    let waiters = unlogged_waiters(history);
    history.facts.samples.iter().map(move |run| {
        let orphan = match guards.get(run.token.as_str()) {
            Some(hold) => released_orphan(history, hold, run),
            None => {
                let waiters = waiters
                    .get(run.lock.as_str())
                    .map_or(&[][..], Vec::as_slice);
                Some(unknown_orphan(history, waiters, run))
            }
        };
        (run, orphan)
    })
}

/// A token seen with no guard: since when, and until when it may stay (before slack).
pub struct Orphan {
    pub since_us: u64,
    pub deadline_us: u64,
}

/// A known guard's token seen after the guard was gone; `None` while it lived.
fn released_orphan(history: &History, hold: &Hold, run: &HoldRun) -> Option<Orphan> {
    let gone = hold.gone_us()?;
    if run.last_us <= gone {
        return None;
    }
    // The longest expiry this holder's keys may have: its lease, or a handover's
    // waiter lease.
    let lease = hold.ttl_us.max(history.facts.waiter_lease_us);
    let deadline_us = match &hold.end {
        Some(_) => {
            let ended = Ended {
                gone,
                worker: hold.holder.worker,
                killed_us: hold.killed_us,
                ttl: hold.ttl_us,
            };
            ended.cleaned_up_by(history, lease)
        }
        None => gone + hold.ttl_us,
    };
    Some(Orphan {
        since_us: gone.max(run.first_us),
        deadline_us: deadline_us.max(restored_until(history, run.first_us, lease)),
    })
}

/// A hold or wait that ended at `gone` (a release returned, a waiter gave up), in
/// `worker`'s process, killed at `killed_us` if it was, with a lease of `ttl`.
struct Ended {
    gone: u64,
    worker: usize,
    killed_us: Option<u64>,
    ttl: u64,
}

impl Ended {
    /// When its keys must be gone, before slack: at once, as its release or undo
    /// frees them; a lease later if its process froze or died right then, before the
    /// drop could send it; and if a fault hit Redis around it, the release is retried
    /// until it lands (once Redis answers again, within one reply timeout and one
    /// retry pause), never later than the longest `lease` its keys may have (its own,
    /// or a handover's waiter lease) would have ended anyway.
    fn cleaned_up_by(&self, history: &History, lease: u64) -> u64 {
        let gone = self.gone;
        if let Some(back) = redis_back_after(history, gone, lease) {
            return (gone + lease).min(gone.max(back) + RELEASE_RETRY_US);
        }
        let cleanup_end = gone + ORPHAN_SLACK_US;
        let frozen = paused(history, self.worker, gone, cleanup_end)
            || self
                .killed_us
                .is_some_and(|killed| gone <= killed && killed <= cleanup_end);
        match frozen {
            true => gone + self.ttl,
            false => gone,
        }
    }
}

/// Until when a key first seen at `seen_us` may have been brought back by a restart
/// or failover that loaded older state (0 if none did): `lease`, the longest expiry
/// its holder's keys may have, after the server was back.
fn restored_until(history: &History, seen_us: u64, lease: u64) -> u64 {
    let facts = &history.facts;
    facts
        .faults
        .iter()
        .filter(|w| w.fault.restores_older_state())
        .filter(|w| w.from_us <= seen_us && seen_us <= w.to_us + lease)
        .map(|w| w.to_us + lease)
        .max()
        .unwrap_or(0)
}

/// A token no guard ever had. Its owner was an attempt that did not log it: one
/// that ended without a guard (its undo frees it), a multi-lock that gave a lock
/// back on its way to a guard, the waiter an `AbortHandoff` release passed it to,
/// or an attempt in flight in a worker that was killed. So it must be gone by the
/// cleanup of the latest logged attempt that could have sent it, or one lease after
/// a kill while it was there, or, if a restart or failover may have brought it
/// back, a lease after that.
fn unknown_orphan(history: &History, waiters: &[Waiter], run: &HoldRun) -> Orphan {
    let expiry_us = u64::try_from(run.first_pttl_ms).unwrap_or(0) * 1000;
    // The longest expiry the owner's keys may have: the one first seen, the run's
    // lease, a queued waiter's lease.
    let lease = expiry_us
        .max(history.facts.ttl_us)
        .max(history.facts.waiter_lease_us);
    let owner_gone = waiters
        .iter()
        .filter(|waiter| waiter.start_us <= run.first_us)
        .map(|waiter| {
            waiter
                .ended
                .cleaned_up_by(history, lease.max(waiter.ended.ttl))
        })
        // Within the slack, a cleanup may still land after the token was first seen
        // (an aborted waiter that a release handed the lock to undoes it as it ends,
        // just after the release returned).
        .filter(|&cleaned| cleaned + ORPHAN_SLACK_US >= run.first_sent_us)
        .max()
        .unwrap_or(0);
    let killed_owner_gone = history
        .facts
        .incarnations
        .iter()
        .filter_map(|incarnation| incarnation.killed_us)
        // A worker killed before it was seen may have set it just before it died.
        .filter(|&killed| killed <= run.last_us && run.first_sent_us <= killed + lease)
        .map(|killed| killed + lease)
        .max()
        // Seen late (the sampler reconnecting after a fault), a lease it had when
        // first seen may end later than that.
        .map_or(0, |gone| gone.max(run.first_us + expiry_us));
    Orphan {
        since_us: run.first_us,
        deadline_us: owner_gone
            .max(killed_owner_gone)
            .max(restored(history, run, lease, expiry_us)),
    }
}

/// Until when a token first seen in `run` may have been brought back by a restart
/// or failover (0 if none could have): a `lease` after the server was back, or the
/// expiry it had when first seen, if the sampler saw it late.
fn restored(history: &History, run: &HoldRun, lease: u64, expiry_us: u64) -> u64 {
    match restored_until(history, run.first_us, lease) {
        0 => 0,
        until => until.max(run.first_us + expiry_us),
    }
}

/// A wait that logged no guard, so its token is not in the history: an attempt
/// that ended without one, or the waiter an `AbortHandoff` release passed the lock
/// to (aborted right after, or its guard dropped at once).
struct Waiter {
    start_us: u64,
    ended: Ended,
}

/// Every lock's attempts, and the waiters that logged no guard: whatever may have
/// owned a token no guard had. (An attempt that got its guard may have owned
/// another token of the lock on its way: a multi-lock gives back a lock it took
/// and takes it again later.)
fn unlogged_waiters(history: &History) -> HashMap<&str, Vec<Waiter>> {
    let mut waiters: HashMap<&str, Vec<Waiter>> = HashMap::new();
    let mut handing_off = HashSet::new();
    for attempt in &history.attempts {
        if attempt.outcome == Outcome::Acquired && attempt.mode == Mode::AbortHandoff {
            handing_off.insert(attempt.holder);
        }
        waiters.entry(&attempt.lock).or_default().push(Waiter {
            start_us: attempt.start_us,
            ended: Ended {
                gone: attempt.end_us,
                worker: attempt.holder.worker,
                killed_us: attempt.killed_us,
                ttl: attempt.ttl_us,
            },
        });
    }
    for hold in &history.holds {
        let Some(end) = hold
            .end
            .as_ref()
            .filter(|_| handing_off.contains(&hold.holder))
        else {
            continue;
        };
        waiters.entry(&hold.lock).or_default().push(Waiter {
            start_us: end.release_us,
            ended: Ended {
                gone: end.release_end_us,
                worker: hold.holder.worker,
                killed_us: hold.killed_us,
                ttl: hold.ttl_us,
            },
        });
    }
    waiters
}

/// If a fault hit Redis or the network within a lease before `at`, or within
/// `lease` (the longest expiry the holder's keys may have) after it ended: when the
/// last such fault ended (Redis answering again).
fn redis_back_after(history: &History, at: u64, lease: u64) -> Option<u64> {
    let facts = &history.facts;
    facts
        .faults
        .iter()
        .filter(|window| {
            window.fault.hits_redis()
                && window.from_us.saturating_sub(facts.ttl_us) <= at
                && at <= window.to_us + lease
        })
        .map(|window| window.to_us)
        .max()
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::*;
    use super::super::{Property, check};
    use super::ORPHAN_SLACK_US;
    use crate::faults::Fault;
    use crate::history::RunFacts;
    use crate::record::{Mode, Outcome, Record};
    use crate::sampler::HoldRun;
    use crate::workers::Incarnation;

    fn seen(token: String, first_us: u64, last_us: u64, first_pttl_ms: i64) -> HoldRun {
        HoldRun {
            lock: "l".into(),
            token,
            first_us,
            first_sent_us: first_us,
            last_us,
            first_pttl_ms,
        }
    }

    /// Holder 0 released at 100 ms; its token was seen until `last_us`.
    fn after_release(facts: RunFacts, last_us: u64) -> super::super::Verdict {
        let mut facts = facts;
        facts.samples.push(seen(owner(0, 1), 1_000, last_us, 300));
        check(&history(facts, &[(None, held(0, 1, 1, (0, 100_000)))]))
    }

    #[test]
    fn a_token_seen_while_its_guard_lived_is_no_orphan() {
        let v = after_release(facts(), 100_000);
        assert!(v.violations.is_empty(), "{:?}", v.examples);
        assert_eq!(v.orphans.orphans, 0);
    }

    #[test]
    fn a_released_token_left_behind_is_a_violation() {
        let v = after_release(facts(), 100_000 + ORPHAN_SLACK_US / 2);
        assert!(v.violations.is_empty(), "{:?}", v.examples);
        assert_eq!(v.orphans.orphans, 1);
        let v = after_release(facts(), 100_000 + 2 * ORPHAN_SLACK_US);
        assert_eq!(v.violations[&Property::Orphan], 1);
    }

    #[test]
    fn a_fault_at_the_release_allows_the_longest_lease() {
        let mut facts = facts();
        facts
            .faults
            .push(window(Fault::Failover, 90_000, 990_000, None));
        let lease = facts.waiter_lease_us;
        let v = after_release(facts.clone(), 100_000 + lease);
        assert!(v.violations.is_empty(), "{:?}", v.examples);
        // Renewed by someone past the lease: no fault explains that.
        let v = after_release(facts, 100_000 + lease + 2 * ORPHAN_SLACK_US);
        assert_eq!(v.violations[&Property::Orphan], 1);
    }

    /// A release that met a short fault (a reset at 90–120 ms) is retried until it
    /// lands: an orphan that outlives the fault by more than a retry is a release
    /// tried once, even though the lease would allow more.
    #[test]
    fn a_release_that_met_a_short_fault_must_land_soon_after_it() {
        let mut facts = facts();
        facts.waiter_lease_us = 30_000_000;
        facts
            .faults
            .push(window(Fault::ResetConnections, 90_000, 120_000, None));
        let retried = 120_000 + super::RELEASE_RETRY_US;
        let v = after_release(facts.clone(), retried);
        assert!(v.violations.is_empty(), "{:?}", v.examples);
        let v = after_release(facts, retried + 2 * ORPHAN_SLACK_US);
        assert_eq!(v.violations[&Property::Orphan], 1);
    }

    /// Released at 100 ms; a restart at 2–2.1 s loads state written while it was held
    /// (as a replica's stored full sync can be), and its key is seen again.
    #[test]
    fn a_key_brought_back_by_a_restart_from_older_state_may_live_out_its_expiry() {
        let mut facts = facts();
        let lease = facts.waiter_lease_us;
        for fault in [Fault::RestartFromSnapshot, Fault::RestartRedisNow] {
            facts.faults = vec![window(fault, 2_000_000, 2_100_000, None)];
            let mut with_run = facts.clone();
            with_run
                .samples
                .push(seen(owner(0, 1), 2_150_000, 2_100_000 + lease, 300));
            let v = check(&history(with_run, &[(None, held(0, 1, 1, (0, 100_000)))]));
            // Only a restart that loads state can bring a key back.
            match fault.restores_older_state() {
                true => assert!(v.violations.is_empty(), "{fault:?}: {:?}", v.examples),
                false => assert_eq!(v.violations[&Property::Orphan], 1, "{fault:?}"),
            }
        }
        // Past the longest expiry latchkey sets, something renewed it: a violation.
        facts.faults[0].fault = Fault::RestartFromSnapshot;
        let late = 2_100_000 + lease + 2 * ORPHAN_SLACK_US;
        facts.samples.push(seen(owner(0, 1), 2_150_000, late, 300));
        let v = check(&history(facts, &[(None, held(0, 1, 1, (0, 100_000)))]));
        assert_eq!(v.violations[&Property::Orphan], 1);
    }

    #[test]
    fn a_pause_of_its_own_worker_right_after_the_release_allows_a_lease() {
        let mut facts = facts();
        facts
            .faults
            .push(window(Fault::PauseWorker, 105_000, 1_005_000, Some(0)));
        let v = after_release(facts.clone(), 100_000 + TTL);
        assert!(v.violations.is_empty(), "{:?}", v.examples);
        // Another worker's pause explains nothing.
        facts.faults[0].worker = Some(1);
        let v = after_release(facts, 100_000 + TTL);
        assert_eq!(v.violations[&Property::Orphan], 1);
    }

    #[test]
    fn a_kill_right_after_the_release_allows_a_lease() {
        let mut facts = facts();
        facts
            .samples
            .push(seen(owner(0, 1), 1_000, 100_000 + TTL, 300));
        let log = held(0, 1, 1, (0, 100_000));
        let v = check(&history(facts.clone(), &[(Some(110_000), log.clone())]));
        assert!(v.violations.is_empty(), "{:?}", v.examples);
        let v = check(&history(facts, &[(Some(900_000), log)]));
        assert_eq!(v.violations[&Property::Orphan], 1);
    }

    #[test]
    fn a_token_no_attempt_could_have_sent_is_an_orphan_unless_its_worker_died() {
        let mut facts = facts();
        facts.samples.push(seen("nobody".into(), 0, 900_000, 1_000));
        // No attempt had started, and no worker died: nothing may hold it.
        let v = check(&history(facts.clone(), &[]));
        assert_eq!(v.violations[&Property::Orphan], 1);
        assert_eq!(v.orphans.unknown_tokens, 1);
        // A worker killed with it in flight: it may live out its lease (the 1 s it
        // had when first seen) from the kill.
        facts.incarnations.push(Incarnation {
            worker: 3,
            incarnation: 0,
            killed_us: Some(50_000),
        });
        let v = check(&history(facts.clone(), &[]));
        assert!(v.violations.is_empty(), "{:?}", v.examples);
        // Still there after that lease: something renewed it.
        facts.samples[0].last_us = 1_050_000 + 2 * ORPHAN_SLACK_US;
        let v = check(&history(facts, &[]));
        assert_eq!(v.violations[&Property::Orphan], 1);
    }

    /// A waiter cancelled at 400 ms that logged no guard: its retries renewed its
    /// token (first seen at 100 ms with 300 ms left) until it gave up.
    fn cancelled_waiter(facts: &mut RunFacts, last_us: u64) -> super::super::Verdict {
        facts.samples = vec![seen("waiter's".into(), 100_000, last_us, 300)];
        let attempt = Record::Attempt {
            holder: holder(1, 1),
            lock: "l".into(),
            mode: Mode::Abort,
            start_us: 50_000,
            end_us: 400_000,
            timeout_us: None,
            ttl_us: TTL,
            outcome: Outcome::Cancelled,
            fair: false,
        };
        check(&history(facts.clone(), &[(None, vec![attempt])]))
    }

    #[test]
    fn a_token_no_guard_had_may_be_renewed_by_its_waiter_until_it_gives_up() {
        let mut facts = facts();
        // Its undo frees the lock at once.
        let v = cancelled_waiter(&mut facts, 400_000 + ORPHAN_SLACK_US / 2);
        assert!(v.violations.is_empty(), "{:?}", v.examples);
        let v = cancelled_waiter(&mut facts, 400_000 + 2 * ORPHAN_SLACK_US);
        assert_eq!(v.violations[&Property::Orphan], 1);
        // An undo that met a reset is retried once Redis answers (a long waiter
        // lease, so that bound, not the lease, is what counts).
        facts.waiter_lease_us = 30_000_000;
        facts
            .faults
            .push(window(Fault::ResetConnections, 390_000, 420_000, None));
        let retried = 420_000 + super::RELEASE_RETRY_US;
        let v = cancelled_waiter(&mut facts, retried);
        assert!(v.violations.is_empty(), "{:?}", v.examples);
        let v = cancelled_waiter(&mut facts, retried + 2 * ORPHAN_SLACK_US);
        assert_eq!(v.violations[&Property::Orphan], 1);
    }

    #[test]
    fn a_killed_holder_s_token_may_stay_one_lease() {
        let mut facts = facts();
        facts
            .samples
            .push(seen(owner(0, 1), 1_000, 50_000 + TTL, 300));
        let acquired = held(0, 1, 1, (0, 100_000))[1].clone();
        let v = check(&history(
            facts.clone(),
            &[(Some(50_000), vec![acquired.clone()])],
        ));
        assert!(v.violations.is_empty(), "{:?}", v.examples);
        facts.samples[0].last_us = 50_000 + TTL + 2 * ORPHAN_SLACK_US;
        let v = check(&history(facts, &[(Some(50_000), vec![acquired])]));
        assert_eq!(v.violations[&Property::Orphan], 1);
    }
}
