//! Fencing tokens strictly increase across every kind of restart and failover:
//! no fence is handed out twice for one lock, and an acquisition whose attempt began
//! after another holder's release had returned gets a larger fence than that holder
//! (whether either token came with the grant or was computed on demand later in the
//! hold). Holds that never had a token are not checked. Plus the resource's view: the
//! tokens it accepted strictly increase.
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
    /// Acquisitions that had a fence, all checked.
    pub checked: usize,
    /// Fences handed out a second time.
    pub repeated: usize,
    /// Acquisitions with a fence no larger than one released before they began.
    pub out_of_order: usize,
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
