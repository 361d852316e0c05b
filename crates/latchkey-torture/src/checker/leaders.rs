//! Leader elections (election workload): what observers were told. An observer
//! sees terms only grow, never an older leader again (outside restores of older
//! state); every leader it reports was granted that term, campaigning as the
//! worker the value names, and had begun campaigning before it was seen; and an
//! observer that reported a leader reports a change within [`TOLD_GONE_WITHIN_US`]
//! of that leader's lock surely leaving Redis (a crash publishes nothing: the
//! observer must re-read when the lease would end), away from faults. One valid
//! leadership at a time and terms that grow from leader to leader are the lock's
//! own checks (`exclusion`, `fences`), run on the elections' holds.
//!
//! A campaign can be granted, and proclaim, and then be dropped (cancelled, or its
//! reply lost): it resigns, but observers may be told of it meanwhile, and no log
//! line names its term. Such a leader is excused when its term (the server's clock
//! at the grant, the machine's clock here) falls within such a campaign of the
//! worker it names, on that election.

use std::collections::HashMap;

use serde::Serialize;

use super::fifo::SETTLED_AFTER_US;
use super::{Property, Verdict, in_amnesia, restore_windows};
use crate::faults::Fault;
use crate::history::{History, Hold};
use crate::record::{Mode, Observed, Outcome};

/// How far a term may lie outside the campaign that was granted it: the server's
/// clock is the workers' (one machine), so only the rounding of the logs.
const TERM_SLACK_US: u64 = 50_000;
/// How long after a leader's lock surely left Redis an observer may still report
/// it: its re-read when the lease would end (every second while unsubscribed),
/// and scheduling on a loaded machine.
const TOLD_GONE_WITHIN_US: u64 = 1_250_000;

/// How long after a campaign returned its leadership every observer must have
/// reported it, if it still led then: the proclamation's message wakes them at
/// once (a second's re-read while a subscription is down is excused as a fault).
const TOLD_NEW_WITHIN_US: u64 = 250_000;

/// The longest a worker's campaign waits (its longest `lock_timeout`, 2 s), and
/// some: an unlogged grant of a killed worker came at most this long before.
const LONGEST_CAMPAIGN_US: u64 = 2_500_000;

#[derive(Debug, Default, Serialize)]
pub struct Stats {
    /// Changes observers returned.
    pub observed: usize,
    /// Of those, "nobody leads".
    pub nobody: usize,
    /// Leaders seen whose grant was never logged: their worker was killed soon
    /// after the grant (it may die between the grant and its log line).
    pub unlogged_of_killed: usize,
    /// Older leaders seen again after a restore of older state (excused).
    pub older_after_restore: usize,
    /// Leaders seen whose term fell within a campaign that was cancelled or
    /// failed after it could have proclaimed (excused: it resigned).
    pub of_dropped_campaigns: usize,
    /// Reported leaders whose lock left Redis away from faults, checked for the
    /// observer reporting a change in time.
    pub gone_checked: usize,
    /// (leader, observer) pairs checked for the observer reporting a new leader
    /// in time: the leader still led [`TOLD_NEW_WITHIN_US`] after its campaign
    /// returned, away from faults.
    pub new_checked: usize,
}

pub fn check(history: &History, verdict: &mut Verdict) {
    check_told(history, verdict);
    check_told_gone(history, verdict);
    check_told_new(history, verdict);
}

/// An observer: its worker slot, incarnation and task, and the election it watched.
type ObserverId<'a> = (usize, usize, usize, &'a str);

/// Each observer's reports, in the order it made them.
fn by_observer(history: &History) -> HashMap<ObserverId<'_>, Vec<&Observed>> {
    let mut reports: HashMap<ObserverId, Vec<&Observed>> = HashMap::new();
    for seen in &history.observed {
        let holder = seen.holder;
        let observer = (
            holder.worker,
            holder.incarnation,
            holder.task,
            seen.lock.as_str(),
        );
        reports.entry(observer).or_default().push(seen);
    }
    reports
}

/// Terms granted, by election: the holds that had them.
fn granted(history: &History) -> HashMap<(&str, u64), &Hold> {
    history
        .holds
        .iter()
        .filter_map(|hold| Some(((hold.lock.as_str(), hold.fence?), hold)))
        .collect()
}

/// Each observer's reports are of granted terms, in order, as the right worker.
fn check_told(history: &History, verdict: &mut Verdict) {
    let granted = granted(history);
    let restores = restore_windows(history);
    let dropped = dropped_campaigns(history);
    for reports in by_observer(history).into_values() {
        let mut last_term = None;
        for seen in reports {
            verdict.leaders.observed += 1;
            let Some((value, term)) = &seen.leader else {
                verdict.leaders.nobody += 1;
                continue;
            };
            if let Some(before) = last_term.replace(*term).filter(|before| term <= before) {
                match in_amnesia(&restores, seen.at_us, seen.at_us, history.facts.ttl_us) {
                    Some(_) => verdict.leaders.older_after_restore += 1,
                    None => verdict.violate(
                        Property::Leaders,
                        format!(
                            "{}: an observer of worker {} was told of term {term} after term {before}",
                            seen.lock, seen.holder.worker
                        ),
                    ),
                }
            }
            match granted.get(&(seen.lock.as_str(), *term)) {
                Some(hold) => check_grant(seen, value, *term, hold, verdict),
                None if killed(history, value, *term) => verdict.leaders.unlogged_of_killed += 1,
                None if within(&dropped, &seen.lock, value, *term) => {
                    verdict.leaders.of_dropped_campaigns += 1;
                }
                None => verdict.violate(
                    Property::Leaders,
                    format!(
                        "{}: an observer was told {value} leads in term {term}, a term no campaign was granted",
                        seen.lock
                    ),
                ),
            }
        }
    }
}

/// An observer that reported a leader reported a change (another leader, or none)
/// within [`TOLD_GONE_WITHIN_US`] of that leader's lock surely leaving Redis.
/// Not checked where a fault (other than the crash of a leader's worker) or a
/// pause of the observer's own worker overlapped, nor past the observer's life.
fn check_told_gone(history: &History, verdict: &mut Verdict) {
    let granted = granted(history);
    for ((worker, incarnation, _, lock), reports) in by_observer(history) {
        let life_end = observer_end(history, worker, incarnation);
        for (i, seen) in reports.iter().enumerate() {
            let Some((value, term)) = &seen.leader else {
                continue;
            };
            let Some(gone) = granted
                .get(&(lock, *term))
                .and_then(|hold| surely_gone(hold))
            else {
                continue;
            };
            let told_by = gone + TOLD_GONE_WITHIN_US;
            let next = reports.get(i + 1).map(|next| next.at_us);
            if seen.at_us >= gone || told_by > life_end {
                continue;
            }
            if disturbed(
                history,
                worker,
                gone.saturating_sub(history.facts.ttl_us),
                told_by,
            ) {
                continue;
            }
            verdict.leaders.gone_checked += 1;
            if next.is_none_or(|next| next > told_by) {
                verdict.violate(
                    Property::Leaders,
                    format!(
                        "{lock}: an observer of worker {worker} still reported {value} (term {term}) {} ms after its lock left Redis",
                        super::ms(next.unwrap_or(life_end) - gone)
                    ),
                );
            }
        }
    }
}

/// Every observer alive and undisturbed reported a leader that still led
/// [`TOLD_NEW_WITHIN_US`] after its campaign returned, by then.
fn check_told_new(history: &History, verdict: &mut Verdict) {
    let reports = by_observer(history);
    for hold in &history.holds {
        let (Some(term), Some(end)) = (hold.fence, &hold.end) else {
            continue;
        };
        let told_by = hold.acquired_us + TOLD_NEW_WITHIN_US;
        if end.lost || end.release_us.min(end.valid_until_us) <= told_by {
            continue;
        }
        for (&(worker, incarnation, _, lock), told) in &reports {
            let watched_from = told.first().map_or(u64::MAX, |seen| seen.at_us);
            let watched = watched_from < hold.attempt_start_us
                && observer_end(history, worker, incarnation) > told_by;
            if lock != hold.lock
                || !watched
                || disturbed(history, worker, hold.attempt_start_us, told_by)
            {
                continue;
            }
            verdict.leaders.new_checked += 1;
            let in_time = told.iter().any(|seen| {
                seen.at_us <= told_by && seen.leader.as_ref().is_some_and(|(_, t)| *t == term)
            });
            if !in_time {
                verdict.violate(
                    Property::Leaders,
                    format!(
                        "{lock}: an observer of worker {worker} was not told within {} ms that w{} leads (term {term})",
                        super::ms(TOLD_NEW_WITHIN_US),
                        hold.holder.worker
                    ),
                );
            }
        }
    }
}

/// When `hold`'s lock was surely no longer in Redis: its release answered, or its
/// lease (renewed until its holder's validity, or its worker's death) ran out.
fn surely_gone(hold: &Hold) -> Option<u64> {
    let Some(end) = &hold.end else {
        return Some(hold.killed_us? + hold.ttl_us + hold.lock_delay_us);
    };
    match end.released {
        Some(true) => Some(end.release_end_us),
        _ => Some(end.valid_until_us + hold.ttl_us + hold.lock_delay_us),
    }
}

/// Until when the observer of worker slot `worker`'s incarnation `incarnation`
/// ran: its kill, or the end of the quiet phase.
fn observer_end(history: &History, worker: usize, incarnation: usize) -> u64 {
    history
        .facts
        .incarnations
        .iter()
        .find(|i| i.worker == worker && i.incarnation == incarnation)
        .and_then(|i| i.killed_us)
        .unwrap_or(history.facts.quiet.1)
}

/// Whether a fault that may keep an observer from hearing or reading overlapped
/// `[from, to]`, or ended less than [`SETTLED_AFTER_US`] before (a subscriber
/// connection the fault broke may look live until its heartbeat finds it dead,
/// and is then made again with a backoff; meanwhile the observer hears nothing and
/// re-reads only on its timers): any fault but a worker's crash, an operator's
/// break and another worker's pause.
pub(super) fn disturbed(history: &History, observer: usize, from: u64, to: u64) -> bool {
    history.facts.faults.iter().any(|window| {
        let relevant = match window.fault {
            // A leader's crash, and an operator deposing it (the withdrawal tells
            // observers), are what the checks are about.
            Fault::KillWorker | Fault::ForceRelease => false,
            Fault::PauseWorker => window.worker == Some(observer),
            _ => true,
        };
        relevant && window.from_us <= to && from <= window.to_us + SETTLED_AFTER_US
    })
}

/// The leader `seen` names is the holder granted `term`, seen once it campaigned.
fn check_grant(seen: &Observed, value: &str, term: u64, hold: &Hold, verdict: &mut Verdict) {
    let campaigner = format!("w{}", hold.holder.worker);
    if value != campaigner {
        verdict.violate(
            Property::Leaders,
            format!(
                "{}: term {term} was told as {value}'s, but {campaigner} was granted it",
                seen.lock
            ),
        );
    }
    if seen.at_us < hold.attempt_start_us {
        verdict.violate(
            Property::Leaders,
            format!(
                "{}: {value} (term {term}) was told as leader {} µs before it began to campaign",
                seen.lock,
                hold.attempt_start_us - seen.at_us
            ),
        );
    }
}

/// The worker slot a leader's value names (`w<slot>`).
fn slot(value: &str) -> Option<usize> {
    value.strip_prefix('w').and_then(|n| n.parse().ok())
}

/// Whether the worker a leader's value names was killed at most a campaign after
/// `term` (a worker killed between a grant and its log line, or mid-attempt,
/// leaves the grant unlogged).
fn killed(history: &History, value: &str, term: u64) -> bool {
    let Some(slot) = slot(value) else {
        return false;
    };
    history.facts.incarnations.iter().any(|incarnation| {
        incarnation.worker == slot
            && incarnation.killed_us.is_some_and(|killed| {
                killed.saturating_sub(LONGEST_CAMPAIGN_US) <= term && term <= killed + TERM_SLACK_US
            })
    })
}

/// Spans of campaigns by election and worker slot.
type Spans<'a> = HashMap<(&'a str, usize), Vec<(u64, u64)>>;

/// When campaigns that no log line gives a term to were under way, by election and
/// worker slot: attempts cancelled or failed, and the waiter an `AbortHandoff`
/// release hands the election to and aborts (from the release to its end).
fn dropped_campaigns(history: &History) -> Spans<'_> {
    let mut spans: Spans = HashMap::new();
    let mut handoffs = std::collections::HashSet::new();
    for attempt in &history.attempts {
        let key = (attempt.lock.as_str(), attempt.holder.worker);
        match (&attempt.outcome, attempt.mode) {
            (Outcome::Cancelled | Outcome::Error { .. }, _) => {
                spans
                    .entry(key)
                    .or_default()
                    .push((attempt.start_us, attempt.end_us));
            }
            (Outcome::Acquired, Mode::AbortHandoff) => {
                handoffs.insert(attempt.holder);
            }
            _ => {}
        }
    }
    for hold in history
        .holds
        .iter()
        .filter(|hold| handoffs.contains(&hold.holder))
    {
        if let Some(end) = &hold.end {
            let key = (hold.lock.as_str(), hold.holder.worker);
            spans
                .entry(key)
                .or_default()
                .push((end.release_us, end.release_end_us));
        }
    }
    spans
}

/// Whether `term` falls within a dropped campaign of the worker `value` names.
fn within(dropped: &Spans, lock: &str, value: &str, term: u64) -> bool {
    let Some(spans) = slot(value).and_then(|slot| dropped.get(&(lock, slot))) else {
        return false;
    };
    spans
        .iter()
        .any(|&(from, to)| from.saturating_sub(TERM_SLACK_US) <= term && term <= to + TERM_SLACK_US)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::fixtures::*;
    use crate::record::Record;

    /// What observer task `task` of worker 9 was told at `at_us`.
    fn observed(task: usize, at_us: u64, leader: Option<(&str, u64)>) -> Record {
        let mut observer = holder(9, 0);
        observer.task = task;
        Record::Observed(Observed {
            holder: observer,
            lock: "l".into(),
            at_us,
            leader: leader.map(|(value, term)| (value.to_owned(), term)),
        })
    }

    /// Worker 1 leads in term 5 from 10 to 20, worker 2 in term 9 from 30 to 40;
    /// worker 9 observes.
    fn leaders_then(observations: Vec<Record>) -> Verdict {
        check_logs(&[
            (None, held(1, 1, 5, (10, 20))),
            (None, held(2, 1, 9, (30, 40))),
            (None, observations),
        ])
    }

    #[test]
    fn an_older_term_an_unknown_one_or_the_wrong_leader_is_caught() {
        let verdict = leaders_then(vec![
            observed(0, 12, Some(("w1", 5))),
            observed(0, 25, None),
            observed(0, 32, Some(("w2", 9))),
            // Back to the older leader: a stale record counted.
            observed(0, 45, Some(("w1", 5))),
            // A term nobody was granted.
            observed(1, 33, Some(("w2", 11))),
        ]);
        assert_eq!(
            verdict.violations.get(&Property::Leaders),
            Some(&2),
            "{:?}",
            verdict.examples
        );
        assert_eq!(verdict.leaders.observed, 5);
        assert_eq!(verdict.leaders.nobody, 1);
        // The right term, told as another worker's; and before its campaign began.
        let verdict = leaders_then(vec![observed(0, 32, Some(("w1", 9)))]);
        assert_eq!(
            verdict.violations.get(&Property::Leaders),
            Some(&1),
            "{:?}",
            verdict.examples
        );
        let verdict = leaders_then(vec![observed(0, 25, Some(("w2", 9)))]);
        assert_eq!(
            verdict.violations.get(&Property::Leaders),
            Some(&1),
            "{:?}",
            verdict.examples
        );
    }

    #[test]
    fn what_observers_were_told_in_order_is_no_violation() {
        let verdict = leaders_then(vec![
            observed(0, 12, Some(("w1", 5))),
            observed(0, 32, Some(("w2", 9))),
            observed(1, 33, Some(("w2", 9))),
            observed(1, 45, None),
        ]);
        assert!(verdict.violations.is_empty(), "{:?}", verdict.examples);
    }

    #[test]
    fn an_observer_that_goes_on_reporting_a_gone_leader_is_caught() {
        let run = |next_at: u64| {
            let mut facts = facts();
            facts.quiet = (0, 10_000_000);
            let verdict = crate::checker::check(&history(
                facts,
                &[
                    (None, held(1, 1, 5, (10, 20))),
                    (
                        None,
                        vec![observed(0, 12, Some(("w1", 5))), observed(0, next_at, None)],
                    ),
                ],
            ));
            (
                verdict.violations.get(&Property::Leaders).copied(),
                verdict.leaders.gone_checked,
            )
        };
        // Released at 20 µs: told of it 2 s later is too late; 0.5 s is in time.
        assert_eq!(run(2_000_020), (Some(1), 1));
        assert_eq!(run(500_020), (None, 1));
    }
}
