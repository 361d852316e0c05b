//! Latches (latch workload): every latch opens exactly once, and only at its last
//! count down; no waiter passes it before that count down was sent; a waiter that
//! was still waiting well after the opening was answered returned open; a wait
//! returns by its timeout.
//!
//! A latch whose life overlaps a fault that can lose data (a restart without the
//! last writes, a failover, a clock jump) is reported apart: its count may come
//! back older, and it may open again. The wake-up and timeout checks skip waits
//! near faults that cut the subscriber's connection, as the election checks do.

use std::collections::BTreeMap;

use serde::Serialize;

use super::leaders::disturbed;
use super::{Property, Verdict, data_loss_windows, ms, paused};
use crate::history::History;
use crate::record::{LatchCall, LatchCallKind};
use crate::worker::LATCH_COUNT;

/// How soon after the opening count down answered a waiter on another client must
/// have returned open: pub/sub, one read, scheduling on a loaded 2-core machine.
const WOKEN_WITHIN_US: u64 = 250_000;
/// How long past its timeout a wait may return.
const TIMEOUT_SLACK_US: u64 = 250_000;

#[derive(Debug, Default, Serialize)]
pub struct Stats {
    pub latches: usize,
    /// Latches whose opening count down answered.
    pub opened: usize,
    /// Latches touched by a fault that can lose data (not checked for opening once).
    pub after_data_loss: usize,
    pub count_downs: usize,
    pub waits: usize,
    /// Waits that returned open.
    pub woken: usize,
    /// Waits going when an opening was answered, away from faults: checked for
    /// returning within [`WOKEN_WITHIN_US`].
    pub wake_checked: usize,
}

pub fn check(history: &History, verdict: &mut Verdict) {
    let mut by_latch: BTreeMap<String, Vec<&LatchCall>> = BTreeMap::new();
    for call in &history.latches {
        by_latch.entry(call.latch()).or_default().push(call);
    }
    let losses = data_loss_windows(history);
    for (latch, calls) in by_latch {
        verdict.latches.latches += 1;
        let from = calls.iter().map(|c| c.sent_us).min().unwrap_or(0);
        let to = calls.iter().map(|c| c.recv_us).max().unwrap_or(0);
        check_timeouts(history, &latch, &calls, verdict);
        if losses.iter().any(|w| w.from_us <= to && from <= w.back_us) {
            verdict.latches.after_data_loss += 1;
            continue;
        }
        let opener = check_opens_once(&latch, &calls, verdict);
        check_waits(history, &latch, &calls, opener, verdict);
    }
}

/// The count downs' answers: at most one opened it, the one that left 0; no two
/// left the same count; enough answered count downs opened it. Returns the opener.
fn check_opens_once<'a>(
    latch: &str,
    calls: &[&'a LatchCall],
    verdict: &mut Verdict,
) -> Option<&'a LatchCall> {
    let mut openers = Vec::new();
    let mut lefts: BTreeMap<u64, usize> = BTreeMap::new();
    let (mut answered, mut failed) = (0, 0);
    for &call in calls {
        let LatchCallKind::CountDown { answer } = &call.call else {
            continue;
        };
        verdict.latches.count_downs += 1;
        let Some((left, opened)) = *answer else {
            failed += 1;
            continue;
        };
        answered += 1;
        if opened {
            openers.push(call);
            if left != 0 {
                verdict.violate(
                    Property::Latches,
                    format!("{latch}: a count down opened it with {left} left"),
                );
            }
        }
        if left > 0 {
            *lefts.entry(left).or_default() += 1;
        }
    }
    if openers.len() > 1 {
        verdict.violate(
            Property::Latches,
            format!("{latch}: opened {} times", openers.len()),
        );
    }
    for (left, times) in lefts.iter().filter(|(_, times)| **times > 1) {
        verdict.violate(
            Property::Latches,
            format!("{latch}: {times} count downs each left {left}"),
        );
    }
    if openers.is_empty() && failed == 0 && answered >= LATCH_COUNT {
        verdict.violate(
            Property::Latches,
            format!("{latch}: {answered} count downs answered, none opened it"),
        );
    }
    verdict.latches.opened += usize::from(!openers.is_empty());
    openers.first().copied()
}

/// No wait returned open before the opening count down was sent, and every wait
/// still going well after it was answered returned open (away from faults).
fn check_waits(
    history: &History,
    latch: &str,
    calls: &[&LatchCall],
    opener: Option<&LatchCall>,
    verdict: &mut Verdict,
) {
    let never_opened = opener.is_none()
        && calls.iter().all(|c| match c.call {
            LatchCallKind::CountDown { answer } => answer.is_some(),
            LatchCallKind::Wait { .. } => true,
        });
    for &call in calls {
        let LatchCallKind::Wait { open, .. } = call.call else {
            continue;
        };
        verdict.latches.waits += 1;
        verdict.latches.woken += usize::from(open == Some(true));
        let passed_closed = match (open, opener) {
            (Some(true), Some(opener)) => call.recv_us < opener.sent_us,
            (Some(true), None) => never_opened,
            _ => false,
        };
        if passed_closed {
            verdict.violate(
                Property::Latches,
                format!(
                    "{latch}: a wait of {:?} returned open before it opened",
                    call.holder
                ),
            );
        }
        let Some(opener) = opener else {
            continue;
        };
        // Waiting when the opening was answered: it must return within the bound.
        if open.is_none() || call.sent_us > opener.recv_us || call.recv_us < opener.recv_us {
            continue;
        }
        if disturbed(history, call.holder.worker, call.sent_us, call.recv_us) {
            continue;
        }
        verdict.latches.wake_checked += 1;
        if call.recv_us <= opener.recv_us + WOKEN_WITHIN_US {
            continue;
        }
        verdict.violate(
            Property::Latches,
            format!(
                "{latch}: a wait of {:?} returned (open: {open:?}) {} ms after the opening count down was answered",
                call.holder,
                ms(call.recv_us - opener.recv_us)
            ),
        );
    }
}

/// A wait returns by its timeout (plus slack), unless a fault or a pause of its
/// worker held it up.
fn check_timeouts(history: &History, latch: &str, calls: &[&LatchCall], verdict: &mut Verdict) {
    for &call in calls {
        let LatchCallKind::Wait { timeout_us, .. } = call.call else {
            continue;
        };
        let took = call.recv_us.saturating_sub(call.sent_us);
        if took <= timeout_us + TIMEOUT_SLACK_US {
            continue;
        }
        let worker = call.holder.worker;
        if disturbed(history, worker, call.sent_us, call.recv_us)
            || paused(history, worker, call.sent_us, call.recv_us)
        {
            continue;
        }
        verdict.violate(
            Property::Latches,
            format!(
                "{latch}: a wait of {} ms took {} ms",
                ms(timeout_us),
                ms(took)
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::*;
    use super::super::{Property, Verdict, check};
    use crate::record::{LatchCall, LatchCallKind, Record};

    fn count_down(worker: usize, at_us: u64, answer: Option<(u64, bool)>) -> Record {
        Record::Latch(LatchCall {
            holder: holder(worker, 1),
            lock: "l".into(),
            round: 1,
            sent_us: at_us,
            recv_us: at_us + 1_000,
            call: LatchCallKind::CountDown { answer },
        })
    }

    fn wait(worker: usize, (sent_us, recv_us): (u64, u64), open: bool) -> Record {
        Record::Latch(LatchCall {
            holder: holder(worker, 2),
            lock: "l".into(),
            round: 1,
            sent_us,
            recv_us,
            call: LatchCallKind::Wait {
                timeout_us: 2_000_000,
                open: Some(open),
            },
        })
    }

    fn latches(records: Vec<Record>) -> Verdict {
        check(&history(facts(), &[(None, records)]))
    }

    /// Four count downs, the last opening it; a waiter woken 50 ms after.
    fn opening() -> Vec<Record> {
        vec![
            count_down(0, 100_000, Some((3, false))),
            count_down(1, 200_000, Some((2, false))),
            count_down(0, 300_000, Some((1, false))),
            count_down(1, 400_000, Some((0, true))),
            count_down(0, 500_000, Some((0, false))),
            wait(2, (50_000, 451_000), true),
        ]
    }

    #[test]
    fn a_latch_that_opens_once_and_wakes_its_waiter_is_no_violation() {
        let v = latches(opening());
        assert!(v.violations.is_empty(), "{:?}", v.examples);
        assert_eq!((v.latches.opened, v.latches.wake_checked), (1, 1));
    }

    #[test]
    fn opening_twice_a_repeated_count_a_waiter_passing_early_or_woken_late_are_caught() {
        let mut twice = opening();
        twice[4] = count_down(0, 500_000, Some((0, true)));
        assert_eq!(latches(twice).violations[&Property::Latches], 1);
        let mut repeated = opening();
        repeated[2] = count_down(0, 300_000, Some((2, false)));
        assert_eq!(latches(repeated).violations[&Property::Latches], 1);
        let mut early = opening();
        early[5] = wait(2, (50_000, 350_000), true);
        assert_eq!(latches(early).violations[&Property::Latches], 1);
        let mut late = opening();
        late[5] = wait(2, (50_000, 900_000), true);
        assert_eq!(latches(late).violations[&Property::Latches], 1);
        let mut never = opening();
        never[3] = count_down(1, 400_000, Some((0, false)));
        never.truncate(4);
        assert_eq!(latches(never).violations[&Property::Latches], 1);
    }
}
