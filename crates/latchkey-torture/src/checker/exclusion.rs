//! Mutual exclusion: no two holders of one lock had overlapping *valid* leases (a
//! holder's window runs from when `lock()` returned to the earlier of its release
//! and the end of its lease by its own clock, and on for the lock delay if its
//! lease had one: a holder paused past its lease finds no new holder within the
//! delay). Sections that overlap by the wall
//! clock only because a holder ran on past its lease must have had the stale write
//! refused by the fenced resource; those are counted, not failed.

use std::collections::{BTreeMap, HashSet};

use super::{Property, Verdict, amnesia_windows, in_amnesia};
use crate::history::{History, Hold};

/// One ended acquisition, as exclusion sees it.
struct Window<'a> {
    hold: &'a Hold,
    valid: (u64, u64),
    section: (u64, u64),
    write_accepted: Option<bool>,
}

pub fn check(history: &History, verdict: &mut Verdict) {
    let mut by_lock: BTreeMap<&str, Vec<Window>> = BTreeMap::new();
    for hold in &history.holds {
        let (Some(valid), Some(end)) = (hold.exclusive(), &hold.end) else {
            continue;
        };
        // A semaphore of several permits: `capacity` checks it.
        if history.facts.capacity(&hold.lock) > 1 {
            continue;
        }
        by_lock.entry(&hold.lock).or_default().push(Window {
            hold,
            valid,
            section: end.section,
            write_accepted: end.write_accepted,
        });
    }
    let amnesia = amnesia_windows(history);
    for (lock, mut windows) in by_lock {
        windows.sort_by_key(|w| w.valid.0);
        let mut stale_writers = HashSet::new();
        for (i, a) in windows.iter().enumerate() {
            let reach = a.valid.1.max(a.section.1);
            for b in windows[i + 1..].iter().take_while(|b| b.valid.0 < reach) {
                if overlap(a.valid, b.valid) {
                    if let Some(window) = in_amnesia(&amnesia, b.valid.0, a.valid.1, a.hold.ttl_us)
                    {
                        *verdict
                            .overlaps_after_amnesia
                            .entry(window.fault)
                            .or_default() += 1;
                        continue;
                    }
                    // Past the lease, the overlap is with the lock delay after it.
                    let what = match a.hold.valid().is_some_and(|lease| lease.1 <= b.valid.0) {
                        true => "taken within the lock delay after the lease of",
                        false => "valid leases overlap:",
                    };
                    verdict.violate(
                        Property::Exclusion,
                        format!(
                            "{lock}: {what} {:?} (fence {:?}) and {:?} (fence {:?})",
                            a.hold.holder, a.hold.fence, b.hold.holder, b.hold.fence
                        ),
                    );
                } else if overlap(a.section, b.section) {
                    // The stale one of the two: its write was refused.
                    let refused = [a, b]
                        .into_iter()
                        .filter(|w| w.write_accepted == Some(false))
                        .min_by_key(|w| w.hold.fence);
                    if refused.is_some_and(|older| stale_writers.insert(older.hold.holder)) {
                        verdict.overlaps_caught_by_fencing += 1;
                    }
                }
            }
        }
    }
}

fn overlap(a: (u64, u64), b: (u64, u64)) -> bool {
    a.0 < a.1 && b.0 < b.1 && a.0 < b.1 && b.0 < a.1
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::*;
    use super::super::{Property, check};
    use crate::faults::Fault;

    #[test]
    fn clean_history_passes() {
        let v = check_logs(&[
            (None, held(0, 1, 1, (0, 10))),
            (None, held(1, 1, 2, (10, 20))),
        ]);
        assert!(v.violations.is_empty(), "{:?}", v.examples);
        assert_eq!(v.released, 2);
    }

    #[test]
    fn overlapping_valid_leases_are_a_violation_except_after_amnesia() {
        let logs = [
            (None, held(0, 1, 1, (0, 10))),
            (None, held(1, 1, 2, (5, 20))),
        ];
        assert_eq!(check_logs(&logs).violations[&Property::Exclusion], 1);
        let mut facts = facts();
        facts
            .faults
            .push(window(Fault::RestartFromSnapshot, 4, 6, None));
        let v = check(&history(facts, &logs));
        assert!(v.violations.is_empty(), "{:?}", v.examples);
        assert_eq!(v.overlaps_after_amnesia[&Fault::RestartFromSnapshot], 1);
    }

    #[test]
    fn nobody_may_hold_within_the_lock_delay_after_a_lease_that_ran_out() {
        // Holder 0's lease ended at 10 with a delay of 5; it released only at 30.
        let late = |next: (u64, u64), release_us: u64| {
            let mut history = history(
                facts(),
                &[(None, held(0, 1, 1, (0, 10))), (None, held(1, 1, 2, next))],
            );
            history.holds[0].lock_delay_us = 5;
            let end = history.holds[0].end.as_mut().unwrap();
            end.section = (0, 30);
            (end.release_us, end.released, end.lost) = (release_us, Some(false), true);
            check(&history)
        };
        // Taken within the delay: the paused holder may be writing.
        assert_eq!(late((12, 20), 30).violations[&Property::Exclusion], 1);
        // Taken once the delay is over, or after the holder released.
        for fine in [late((15, 20), 30), late((12, 20), 11)] {
            assert!(fine.violations.is_empty(), "{:?}", fine.examples);
        }
    }

    #[test]
    fn a_holder_past_its_lease_whose_write_was_refused_is_counted_not_failed() {
        // Holder 0's lease ended at 10 but its section ran to 25; holder 1 took over at 12.
        let mut history = history(
            facts(),
            &[
                (None, held(0, 1, 1, (0, 10))),
                (None, held(1, 1, 2, (12, 20))),
            ],
        );
        let late = history.holds[0].end.as_mut().unwrap();
        late.section = (0, 25);
        late.released = Some(false);
        late.lost = true;
        late.write_accepted = Some(false);
        let v = check(&history);
        assert!(v.violations.is_empty(), "{:?}", v.examples);
        assert_eq!(v.overlaps_caught_by_fencing, 1);
    }
}
