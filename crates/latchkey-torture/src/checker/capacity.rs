//! A semaphore's exclusion: at no moment did the *valid* leases of its holders (as
//! `exclusion` defines them, lock delays included) hold more permits than it has. A lock is the case of
//! one permit, which `exclusion` checks with fencing's view of the overlaps.
//! Inside an amnesia window (a fault that made Redis forget grants, or an operator
//! who broke the permits) too many holders are expected and counted apart.

use std::collections::BTreeMap;

use super::{Property, Verdict, amnesia_windows, in_amnesia};
use crate::history::{History, Hold};

/// A hold and its valid window.
type Valid<'a> = (&'a Hold, (u64, u64));

pub fn check(history: &History, verdict: &mut Verdict) {
    let mut by_lock: BTreeMap<&str, Vec<Valid>> = BTreeMap::new();
    for hold in &history.holds {
        let Some(valid) = hold.exclusive() else {
            continue;
        };
        if history.facts.capacity(&hold.lock) > 1 && valid.0 < valid.1 {
            by_lock.entry(&hold.lock).or_default().push((hold, valid));
        }
    }
    let amnesia = amnesia_windows(history);
    for (lock, mut windows) in by_lock {
        let permits = history.facts.capacity(lock);
        windows.sort_by_key(|(_, valid)| valid.0);
        let mut active: Vec<Valid> = Vec::new();
        for (hold, valid) in windows {
            active.retain(|(_, other)| other.1 > valid.0);
            let held: u64 = active.iter().map(|(h, _)| h.weight).sum::<u64>() + hold.weight;
            if held > permits {
                let excused = active
                    .iter()
                    .find_map(|(a, other)| in_amnesia(&amnesia, valid.0, other.1, a.ttl_us));
                match excused {
                    Some(window) => {
                        *verdict
                            .overlaps_after_amnesia
                            .entry(window.fault)
                            .or_default() += 1;
                    }
                    None => verdict.violate(
                        Property::Exclusion,
                        format!(
                            "{lock}: {held} of {permits} permits held at once when {:?} (fence {:?}, weight {}) got its own",
                            hold.holder, hold.fence, hold.weight
                        ),
                    ),
                }
            }
            active.push((hold, valid));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::*;
    use super::super::{Property, check};
    use crate::faults::Fault;

    /// A history on a semaphore of 3 permits: holds of `weights` over `valid`.
    fn semaphore(holds: &[(u64, (u64, u64))]) -> crate::history::History {
        let mut facts = facts();
        facts.capacity.insert("l".into(), 3);
        let logs: Vec<_> = holds
            .iter()
            .enumerate()
            .map(|(i, (weight, valid))| {
                let mut records = held(i, 1, i as u64 + 1, *valid);
                if let crate::record::Record::Acquired { weight: w, .. } = &mut records[1] {
                    *w = *weight;
                }
                (None, records)
            })
            .collect();
        history(facts, &logs)
    }

    #[test]
    fn holders_within_the_permits_pass() {
        let v = check(&semaphore(&[(1, (0, 10)), (2, (5, 15)), (3, (20, 30))]));
        assert!(v.violations.is_empty(), "{:?}", v.examples);
    }

    #[test]
    fn more_weight_than_permits_is_a_violation_except_after_amnesia() {
        let history = semaphore(&[(2, (0, 10)), (2, (5, 15))]);
        let v = check(&history);
        assert_eq!(v.violations[&Property::Exclusion], 1);
        let mut forgot = history;
        forgot
            .facts
            .faults
            .push(window(Fault::RestartRedisNow, 1, 4, None));
        let v = check(&forgot);
        assert!(v.violations.is_empty(), "{:?}", v.examples);
    }
}
