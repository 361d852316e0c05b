//! Rate limits, over the whole history: no span of calls that surely lasted less
//! than one period had more units allowed than the policy can allow in it (a
//! sliding window its limit, a fixed window two windows' worth across a boundary, a
//! cooldown one call, GCRA its burst and one unit per emission interval begun).
//! The server decides each call at some moment between when it was sent and when
//! its answer came, so a span's length is bounded by the first call's send and the
//! latest answer. A fault that made the server forget (a restart, a failover, an
//! operator's reset) within a period of the span excuses it: the state is gone.
//! And every key expires once its limit is full again.

use std::collections::BTreeMap;

use serde::Serialize;

use super::{Property, Verdict, data_loss_windows};
use crate::history::History;
use crate::record::Call;

#[derive(Debug, Default, Serialize)]
pub struct Stats {
    pub calls: usize,
    pub allowed: usize,
    pub denied: usize,
    pub failed: usize,
    /// Spans over the limit explained by a fault that made the server forget.
    pub over_after_amnesia: usize,
}

pub fn check(history: &History, verdict: &mut Verdict) {
    let mut allowed: BTreeMap<&str, Vec<&Call>> = BTreeMap::new();
    for call in &history.calls {
        verdict.rates.calls += 1;
        match call.allowed {
            Some(true) => {
                verdict.rates.allowed += 1;
                allowed.entry(&call.lock).or_default().push(call);
            }
            Some(false) => verdict.rates.denied += 1,
            None => verdict.rates.failed += 1,
        }
    }
    let amnesia = data_loss_windows(history);
    for (key, calls) in allowed {
        let Some(rate) = history.facts.rates.get(key) else {
            continue;
        };
        let per = rate.per_us();
        for (i, first) in calls.iter().enumerate() {
            let (mut units, mut latest) = (0, 0);
            for call in &calls[i..] {
                latest = latest.max(call.recv_us);
                let span = latest.saturating_sub(first.sent_us);
                if span >= per {
                    break;
                }
                units += call.cost;
                if units <= rate.most_in(span) {
                    continue;
                }
                let from = first.sent_us.saturating_sub(per);
                let forgot = amnesia
                    .iter()
                    .any(|w| w.from_us < latest && from < w.back_us);
                match forgot {
                    true => verdict.rates.over_after_amnesia += 1,
                    false => verdict.violate(
                        Property::RateLimit,
                        format!(
                            "{key}: {units} units allowed within {:.1} ms ({rate:?} allows {})",
                            span as f64 / 1000.0,
                            rate.most_in(span)
                        ),
                    ),
                }
                break;
            }
        }
    }
    for key in &history.facts.rate_keys_without_expiry {
        verdict.violate(
            Property::RateLimit,
            format!("{key}: its state has no expiry after the run"),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::*;
    use super::super::{Property, check};
    use crate::faults::Fault;
    use crate::ratelimits::Rate;
    use crate::record::{Call, Record};

    /// Calls on a sliding window of 2 per 100 ms, at these (sent, answered) µs.
    fn calls(at: &[(u64, u64)]) -> crate::history::History {
        let mut facts = facts();
        facts.rates.insert(
            "l".into(),
            Rate::Sliding {
                limit: 2,
                per_us: 100_000,
            },
        );
        let records = at
            .iter()
            .enumerate()
            .map(|(i, (sent, recv))| {
                Record::Call(Call {
                    holder: holder(0, i as u64),
                    lock: "l".into(),
                    sent_us: *sent,
                    recv_us: *recv,
                    cost: 1,
                    allowed: Some(true),
                })
            })
            .collect();
        history(facts, &[(None, records)])
    }

    #[test]
    fn calls_within_the_limit_pass() {
        let v = check(&calls(&[
            (0, 10),
            (20, 30),
            (120_000, 120_010),
            (200_000, 200_010),
        ]));
        assert!(v.violations.is_empty(), "{:?}", v.examples);
        // Three in a span that may have lasted a period: not surely over.
        let v = check(&calls(&[(0, 10), (50_000, 50_010), (99_000, 100_005)]));
        assert!(v.violations.is_empty(), "{:?}", v.examples);
    }

    #[test]
    fn more_than_the_limit_in_a_period_is_a_violation_except_after_amnesia() {
        let history = calls(&[(0, 10), (20_000, 20_010), (40_000, 40_010)]);
        assert_eq!(check(&history).violations[&Property::RateLimit], 1);
        let mut forgot = history;
        forgot
            .facts
            .faults
            .push(window(Fault::RestartRedisNow, 15_000, 16_000, None));
        let v = check(&forgot);
        assert!(v.violations.is_empty(), "{:?}", v.examples);
        assert_eq!(v.rates.over_after_amnesia, 1);
    }
}
