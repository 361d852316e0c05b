//! Fencing tokens strictly increase across every kind of restart and failover:
//! no fence is handed out twice for one lock, and an acquisition whose attempt began
//! after another holder's release had returned gets a larger fence than that holder
//! (whether either token came with the grant or was computed on demand later in the
//! hold). Holds that never had a token are not checked. A token computed on demand
//! is computed only while the lock is the asker's: never while another holder's
//! valid lease surely covered the whole call. Plus the resource's view: the tokens
//! it accepted strictly increase, and it never accepted a holder's write sent after
//! the write of a holder that took the lock once the first one's lease had ended.
//!
//! Why "attempt began" and not "`lock()` returned": a grant can happen long before
//! its reply arrives (a stalled connection delivers it later), so only an attempt
//! that began after the release is surely granted after it.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use super::{Property, Verdict, amnesia_windows, in_amnesia, restore_windows};
use crate::history::{History, Hold};

#[derive(Debug, Default, Serialize)]
pub struct Stats {
    /// Acquisitions that had a fence, all checked.
    pub checked: usize,
    /// Fences handed out a second time.
    pub repeated: usize,
    /// Acquisitions with a fence no larger than one released before they began.
    pub out_of_order: usize,
    /// Tokens computed on demand, checked against the other holders' holds.
    pub on_demand: usize,
    /// Of those, tokens computed while another holder held the lock (outside
    /// restores of older state: a violation).
    pub while_another_held: usize,
    /// Writes accepted from a holder after a later holder's write (outside restores
    /// of older state: a violation).
    pub stale_writes_accepted: usize,
}

pub fn check(history: &History, verdict: &mut Verdict) {
    let mut by_lock: BTreeMap<&str, Vec<(u64, &Hold)>> = BTreeMap::new();
    for hold in &history.holds {
        if let Some(fence) = hold.fence {
            by_lock.entry(&hold.lock).or_default().push((fence, hold));
        }
    }
    for (lock, holds) in by_lock {
        verdict.fences.checked += holds.len();
        check_unique(lock, &holds, verdict);
        check_order(lock, &holds, verdict);
    }
    check_computed_while_held(history, verdict);
    check_stale_writes(history, verdict);
    for (lock, tokens) in &history.facts.accepted {
        if let Some(pair) = tokens.windows(2).find(|w| w[0] >= w[1]) {
            verdict.violate(
                Property::Fencing,
                format!(
                    "{lock}: fenced write {} accepted after {}",
                    pair[1], pair[0]
                ),
            );
        }
    }
}

fn check_unique(lock: &str, holds: &[(u64, &Hold)], verdict: &mut Verdict) {
    let mut first: HashMap<u64, &Hold> = HashMap::new();
    for &(fence, hold) in holds {
        let Some(earlier) = first.insert(fence, hold) else {
            continue;
        };
        verdict.fences.repeated += 1;
        verdict.violate(
            Property::Fences,
            format!(
                "{lock}: fence {fence} handed to {:?} and again to {:?}",
                earlier.holder, hold.holder
            ),
        );
    }
}

/// Sweeps the acquisitions by when their attempt began, keeping the largest fence of
/// those released before.
fn check_order(lock: &str, holds: &[(u64, &Hold)], verdict: &mut Verdict) {
    let mut releases: Vec<(u64, (u64, &Hold))> = holds
        .iter()
        .filter_map(|&(fence, hold)| Some((hold.end.as_ref()?.release_end_us, (fence, hold))))
        .collect();
    releases.sort_by_key(|(at, _)| *at);
    let mut starts: Vec<(u64, &Hold)> = holds.to_vec();
    starts.sort_by_key(|(_, hold)| hold.attempt_start_us);
    let mut released = releases.iter().peekable();
    let mut largest: Option<(u64, &Hold)> = None;
    for (fence, hold) in starts {
        while let Some((_, before)) = released.next_if(|(at, _)| *at < hold.attempt_start_us) {
            if largest.is_none_or(|(l, _)| before.0 > l) {
                largest = Some(*before);
            }
        }
        let Some((before_fence, before)) = largest.filter(|(before, _)| fence <= *before) else {
            continue;
        };
        verdict.fences.out_of_order += 1;
        verdict.violate(
            Property::Fences,
            format!(
                "{lock}: {:?} got fence {fence} though {:?} had released fence {before_fence} before it asked",
                hold.holder, before.holder
            ),
        );
    }
}

/// A token computed on demand while another holder surely held the lock was handed
/// to a holder that no longer held it: the fence script must refuse that. "Surely
/// held" for the whole call (from before it was sent to after its answer): within
/// the other's valid lease (from when its `lock()` returned to the earlier of its
/// release and its lease's end by its clock), whose release found the lock still
/// its own. Excused: a fault that restored older state (the asker's token may be
/// back), and one that broke or wiped the other's hold after it began (an operator,
/// a clock jump, a restart: a late request of the other's own acquisition may then
/// have set its token again after the asker's turn). Locks of one holder only:
/// several permits are held at once.
fn check_computed_while_held(history: &History, verdict: &mut Verdict) {
    let restored = restore_windows(history);
    let broken = amnesia_windows(history);
    let mut by_lock: BTreeMap<&str, Vec<&Hold>> = BTreeMap::new();
    for hold in &history.holds {
        if history.facts.capacity(&hold.lock) == 1 {
            by_lock.entry(&hold.lock).or_default().push(hold);
        }
    }
    for (lock, holds) in by_lock {
        for asker in &holds {
            let Some((asked, answered)) = asker.end.as_ref().and_then(|end| end.fence_computed)
            else {
                continue;
            };
            verdict.fences.on_demand += 1;
            let held_by = holds.iter().find(|other| {
                let released = other.end.as_ref().is_some_and(|e| e.released == Some(true));
                let covered = other
                    .valid()
                    .is_some_and(|(from, to)| from < asked && answered < to);
                let broken_since = broken
                    .iter()
                    .any(|w| (other.acquired_us..=answered).contains(&w.from_us));
                other.holder != asker.holder
                    && released
                    && covered
                    && !broken_since
                    && in_amnesia(&restored, other.acquired_us, answered, other.ttl_us).is_none()
            });
            let Some(other) = held_by else {
                continue;
            };
            verdict.fences.while_another_held += 1;
            verdict.violate(
                Property::Fences,
                format!(
                    "{lock}: {:?} got fence {:?} computed while {:?} held the lock",
                    asker.holder, asker.fence, other.holder
                ),
            );
        }
    }
}

/// A holder `a` whose write the resource accepted although a later holder `b` (whose
/// attempt began after `a`'s valid lease had ended, so `b`'s hold came after
/// `a`'s) had its own write accepted before `a`'s was sent: the stale write that
/// fencing exists to refuse. A fault that restored older state in between excuses
/// it.
fn check_stale_writes(history: &History, verdict: &mut Verdict) {
    let restored = restore_windows(history);
    let mut by_lock: BTreeMap<&str, Vec<(&Hold, u64)>> = BTreeMap::new();
    for hold in &history.holds {
        let Some(end) = hold
            .end
            .as_ref()
            .filter(|end| end.write_accepted == Some(true))
        else {
            continue;
        };
        if let Some(sent) = end.write_sent_us {
            by_lock.entry(&hold.lock).or_default().push((hold, sent));
        }
    }
    for (lock, writes) in by_lock {
        for &(a, a_sent) in &writes {
            let Some((_, a_valid_end)) = a.valid() else {
                continue;
            };
            if in_amnesia(&restored, a.acquired_us, a_sent, a.ttl_us).is_some() {
                continue;
            }
            let later = writes.iter().find(|&&(b, _)| {
                b.attempt_start_us > a_valid_end
                    && b.end.as_ref().is_some_and(|end| end.section.1 < a_sent)
            });
            let Some((b, _)) = later else {
                continue;
            };
            verdict.fences.stale_writes_accepted += 1;
            verdict.violate(
                Property::Fencing,
                format!(
                    "{lock}: {:?}'s write (fence {:?}) was accepted after {:?} (fence {:?}), which took the lock after {:?}'s lease ended",
                    a.holder, a.fence, b.holder, b.fence, a.holder
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::*;
    use super::super::{Property, check};
    use crate::faults::Fault;
    use crate::record::Record;

    #[test]
    fn a_fence_handed_out_twice_is_a_violation() {
        // As after a restart from an older snapshot: the counter starts over from 7.
        let v = check_logs(&[
            (None, held(0, 1, 7, (0, 10))),
            (None, held(1, 1, 7, (5, 8))),
        ]);
        assert_eq!(v.fences.repeated, 1);
        assert!(v.violations[&Property::Fences] >= 1);
    }

    #[test]
    fn a_smaller_fence_after_a_release_is_a_violation() {
        let v = check_logs(&[
            (None, held(0, 1, 9, (0, 10))),
            (None, held(1, 1, 8, (11, 20))),
        ]);
        assert_eq!(v.fences.out_of_order, 1);
        assert_eq!(v.violations[&Property::Fences], 1);
    }

    #[test]
    fn a_smaller_fence_granted_before_the_release_is_fine() {
        // Holder 1 asked before holder 0 released: its grant may have come first.
        let v = check_logs(&[
            (None, held(0, 1, 9, (0, 10))),
            (None, held(1, 1, 8, (9, 20))),
        ]);
        assert_eq!(v.fences.out_of_order, 0);
    }

    /// `records` (from `held`) with the holder's token computed on demand, asked
    /// at `asked` and answered at `answered`.
    fn computed_at(records: Vec<Record>, asked: u64, answered: u64) -> Vec<Record> {
        ending(records, |end| end.fence_computed = Some((asked, answered)))
    }

    #[test]
    fn a_token_computed_while_another_held_the_lock_is_a_violation() {
        // Holder 0's lease ended at 10 (it stalled); holder 1 held from 11 to 20,
        // and holder 0 then asked for a token and got one, at 12-13.
        let v = check_logs(&[
            (None, held(0, 1, 9, (0, 10))),
            (None, computed_at(held(1, 1, 5, (11, 20)), 14, 15)),
            (None, computed_at(held(0, 2, 30, (0, 10)), 12, 13)),
        ]);
        assert_eq!(v.fences.on_demand, 2);
        assert_eq!(v.fences.while_another_held, 1);
        assert!(v.violations[&Property::Fences] >= 1);
    }

    #[test]
    fn a_token_computed_as_another_took_over_or_after_a_fault_is_fine() {
        // Asked before holder 1's `lock()` returned: the script may have run first.
        let racing = check_logs(&[
            (None, held(1, 1, 5, (11, 20))),
            (None, computed_at(held(0, 1, 4, (0, 10)), 10, 12)),
        ]);
        assert_eq!(racing.fences.while_another_held, 0);
        // Redis forgot holder 1's grant (a restart from an older snapshot).
        let mut facts = facts();
        facts
            .faults
            .push(window(Fault::RestartFromSnapshot, 12, 13, None));
        let forgot = check(&history(
            facts,
            &[
                (None, held(1, 1, 5, (11, 20))),
                (None, computed_at(held(0, 1, 30, (0, 10)), 14, 15)),
            ],
        ));
        assert_eq!(forgot.fences.while_another_held, 0);
        // An operator broke holder 1's lock during its hold: a late request of its
        // own acquisition may have set its token again after holder 0's turn.
        let broken = |at: u64| {
            let mut with_break = super::super::fixtures::facts();
            with_break
                .faults
                .push(window(Fault::ForceRelease, at, at, None));
            check(&history(
                with_break,
                &[
                    (None, held(1, 1, 5, (11, 20))),
                    (None, computed_at(held(0, 1, 30, (0, 10)), 14, 15)),
                ],
            ))
        };
        assert_eq!(broken(13).fences.while_another_held, 0);
        // Broken before holder 1 took it (holder 0's own lock, say): no excuse.
        assert_eq!(broken(5).fences.while_another_held, 1);
    }

    #[test]
    fn a_stale_write_accepted_after_a_later_holders_is_a_violation() {
        // Holder 0's lease ended at 10; holder 1 took the lock at 11 and wrote by 20;
        // holder 0 wrote at 25 (its section ran on) and the resource took it.
        let stale = ending(held(0, 1, 30, (0, 10)), |end| end.write_sent_us = Some(25));
        let v = check_logs(&[(None, held(1, 1, 20, (11, 20))), (None, stale)]);
        assert_eq!(v.fences.stale_writes_accepted, 1);
        assert_eq!(v.violations[&Property::Fencing], 1);
        // In order, the writes are fine.
        let v = check_logs(&[
            (None, held(0, 1, 10, (0, 10))),
            (None, held(1, 1, 20, (11, 20))),
        ]);
        assert_eq!(v.fences.stale_writes_accepted, 0);
    }

    #[test]
    fn a_stale_accepted_token_is_a_violation() {
        let mut facts = facts();
        facts.accepted.insert("l".into(), vec![3, 2]);
        let v = check(&history(facts, &[]));
        assert_eq!(v.violations[&Property::Fencing], 1);
    }
}
