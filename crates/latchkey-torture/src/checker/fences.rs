//! Fencing tokens strictly increase across every kind of restart and failover:
//! no fence is handed out twice for one lock, and an acquisition whose attempt began
//! after another holder's release had returned gets a larger fence than that holder.
//! Plus the resource's view: the tokens it accepted strictly increase.
//!
//! Why "attempt began" and not "`lock()` returned": a grant can happen long before
//! its reply arrives (a stalled connection delivers it later), so only an attempt
//! that began after the release is surely granted after it.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use super::{Property, Verdict};
use crate::history::{History, Hold};

#[derive(Debug, Default, Serialize)]
pub struct Stats {
    /// Acquisitions whose fence was checked.
    pub checked: usize,
    /// Fences handed out a second time.
    pub repeated: usize,
    /// Acquisitions with a fence no larger than one released before they began.
    pub out_of_order: usize,
}

pub fn check(history: &History, verdict: &mut Verdict) {
    let mut by_lock: BTreeMap<&str, Vec<&Hold>> = BTreeMap::new();
    for hold in &history.holds {
        by_lock.entry(&hold.lock).or_default().push(hold);
    }
    for (lock, holds) in by_lock {
        verdict.fences.checked += holds.len();
        check_unique(lock, &holds, verdict);
        check_order(lock, &holds, verdict);
    }
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

fn check_unique(lock: &str, holds: &[&Hold], verdict: &mut Verdict) {
    let mut first: HashMap<u64, &Hold> = HashMap::new();
    for hold in holds {
        let Some(earlier) = first.insert(hold.fence, hold) else {
            continue;
        };
        verdict.fences.repeated += 1;
        verdict.violate(
            Property::Fences,
            format!(
                "{lock}: fence {} handed to {:?} and again to {:?}",
                hold.fence, earlier.holder, hold.holder
            ),
        );
    }
}

/// Sweeps the acquisitions by when their attempt began, keeping the largest fence of
/// those released before.
fn check_order(lock: &str, holds: &[&Hold], verdict: &mut Verdict) {
    let mut releases: Vec<(u64, &Hold)> = holds
        .iter()
        .filter_map(|hold| Some((hold.end.as_ref()?.release_end_us, *hold)))
        .collect();
    releases.sort_by_key(|(at, _)| *at);
    let mut starts: Vec<&Hold> = holds.to_vec();
    starts.sort_by_key(|hold| hold.attempt_start_us);
    let mut released = releases.iter().peekable();
    let mut largest: Option<&Hold> = None;
    for hold in starts {
        while let Some((_, before)) = released.next_if(|(at, _)| *at < hold.attempt_start_us) {
            if largest.is_none_or(|l| before.fence > l.fence) {
                largest = Some(before);
            }
        }
        let Some(before) = largest.filter(|before| hold.fence <= before.fence) else {
            continue;
        };
        verdict.fences.out_of_order += 1;
        verdict.violate(
            Property::Fences,
            format!(
                "{lock}: {:?} got fence {} though {:?} had released fence {} before it asked",
                hold.holder, hold.fence, before.holder, before.fence
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::*;
    use super::super::{Property, check};

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

    #[test]
    fn a_stale_accepted_token_is_a_violation() {
        let mut facts = facts();
        facts.accepted.insert("l".into(), vec![3, 2]);
        let v = check(&history(facts, &[]));
        assert_eq!(v.violations[&Property::Fencing], 1);
    }
}
