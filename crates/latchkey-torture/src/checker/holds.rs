//! Counts of attempts and acquisitions, and two promises about each acquisition:
//! it ends (unless its process was killed), and a holder whose lease ended under it
//! heard of it (`lost` fired).

use super::{Property, Verdict, amnesia_windows, in_amnesia};
use crate::history::History;
use crate::record::Outcome;

pub fn check(history: &History, verdict: &mut Verdict) {
    for attempt in &history.attempts {
        let outcome = match &attempt.outcome {
            Outcome::Acquired => "acquired".to_owned(),
            Outcome::Busy => "busy".to_owned(),
            Outcome::Cancelled => "cancelled".to_owned(),
            Outcome::Error { error } => format!("error: {error}"),
        };
        *verdict
            .attempts
            .entry(attempt.mode)
            .or_default()
            .entry(outcome)
            .or_default() += 1;
    }
    let amnesia = amnesia_windows(history);
    for hold in &history.holds {
        verdict.acquisitions += 1;
        let Some(end) = &hold.end else {
            match hold.killed_us {
                Some(_) => verdict.killed_mid_section += 1,
                None => verdict.violate(
                    Property::Vanished,
                    format!(
                        "{:?}: an acquisition vanished (no end in a live worker's log)",
                        hold.holder
                    ),
                ),
            }
            continue;
        };
        match (end.released, end.release_aborted) {
            (Some(true), _) => verdict.released += 1,
            (None, true) => verdict.release_aborted += 1,
            _ => verdict.expired_or_lost += 1,
        }
        match end.write_accepted {
            Some(true) => verdict.writes_accepted += 1,
            Some(false) => verdict.writes_rejected += 1,
            None => {}
        }
        if end.released == Some(false)
            && !end.lost
            && in_amnesia(&amnesia, hold.acquired_us, end.release_us, hold.ttl_us).is_none()
        {
            verdict.violate(
                Property::LostSignal,
                format!(
                    "{:?} on {}: the lease ended under the holder but `lost` never fired",
                    hold.holder, hold.lock
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::*;
    use super::super::{Property, check};

    #[test]
    fn a_lease_lost_without_the_signal_is_a_violation() {
        let mut history = history(facts(), &[(None, held(0, 1, 1, (0, 10)))]);
        history.holds[0].end.as_mut().unwrap().released = Some(false);
        let v = check(&history);
        assert_eq!(v.violations[&Property::LostSignal], 1);
    }

    #[test]
    fn an_acquisition_without_an_end_vanished_unless_its_worker_was_killed() {
        let acquired = held(0, 1, 1, (0, 10))[1].clone();
        let v = check_logs(&[(None, vec![acquired.clone()])]);
        assert_eq!(v.violations[&Property::Vanished], 1);
        let v = check_logs(&[(Some(20), vec![acquired])]);
        assert!(v.violations.is_empty(), "{:?}", v.examples);
        assert_eq!(v.killed_mid_section, 1);
    }
}
