//! Small histories for the checker's tests.

use super::{Verdict, check};
use crate::faults::{Fault, FaultWindow};
use crate::history::{History, RunFacts};
use crate::record::{HoldEnd, Holder, Mode, Outcome, Record};

/// The lease of every fixture lock, µs.
pub const TTL: u64 = 300_000;

/// `records` (from [`held`]) with their end changed by `change`.
pub fn ending(mut records: Vec<Record>, change: impl Fn(&mut HoldEnd)) -> Vec<Record> {
    for record in &mut records {
        if let Record::Ended { end, .. } = record {
            change(end);
        }
    }
    records
}

/// A run with one lock, `l`, and no faults.
pub fn facts() -> RunFacts {
    RunFacts {
        ttl_us: TTL,
        waiter_lease_us: 1_000_000,
        locks: vec!["l".into()],
        ..RunFacts::default()
    }
}

/// `fault` from `from_us` to `to_us`, on the whole run or on one `worker`.
pub fn window(fault: Fault, from_us: u64, to_us: u64, worker: Option<usize>) -> FaultWindow {
    FaultWindow {
        fault,
        from_us,
        to_us,
        worker,
        broke: None,
    }
}

pub fn holder(worker: usize, seq: u64) -> Holder {
    Holder {
        worker,
        incarnation: 0,
        task: 0,
        seq,
    }
}

/// The owner token of a fixture holder.
pub fn owner(worker: usize, seq: u64) -> String {
    format!("w{worker}s{seq}")
}

/// `l` taken by `worker` with `fence` from `valid.0` (when its attempt started too)
/// and released cleanly at `valid.1`: the attempt, `Acquired` and `Ended`.
pub fn held(worker: usize, seq: u64, fence: u64, valid: (u64, u64)) -> Vec<Record> {
    let holder = holder(worker, seq);
    vec![
        Record::Attempt {
            holder,
            lock: "l".into(),
            mode: Mode::Select,
            start_us: valid.0,
            end_us: valid.0,
            timeout_us: None,
            ttl_us: TTL,
            outcome: Outcome::Acquired,
            fair: false,
        },
        Record::Acquired {
            holder,
            lock: "l".into(),
            owner: owner(worker, seq),
            fence: Some(fence),
            attempt_start_us: valid.0,
            at_us: valid.0,
            ttl_us: TTL,
            weight: 1,
            lock_delay_us: 0,
            fair: false,
        },
        Record::Ended {
            holder,
            lock: "l".into(),
            fence: Some(fence),
            end: HoldEnd {
                section: valid,
                valid_until_us: valid.1,
                release_us: valid.1,
                release_end_us: valid.1,
                released: Some(true),
                release_aborted: false,
                lost: false,
                write_accepted: Some(true),
                fence_computed: None,
                write_sent_us: Some(valid.1),
            },
        },
    ]
}

/// A history from each process's records (and when it was killed), through the
/// same parser as a real run's logs.
pub fn history(facts: RunFacts, logs: &[(Option<u64>, Vec<Record>)]) -> History {
    let texts: Vec<(Option<u64>, String)> = logs
        .iter()
        .map(|(killed, records)| {
            let lines: Vec<String> = records
                .iter()
                .map(|r| serde_json::to_string(r).unwrap())
                .collect();
            (*killed, lines.join("\n"))
        })
        .collect();
    History::from_logs(facts, &texts)
}

/// Checks the logs of a fault-free run of `l`.
pub fn check_logs(logs: &[(Option<u64>, Vec<Record>)]) -> Verdict {
    check(&history(facts(), logs))
}
