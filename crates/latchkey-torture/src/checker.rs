//! After the run: did mutual exclusion and fencing hold?

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

use serde::Serialize;

use crate::faults::Amnesia;
use crate::record::{Holder, Record};

/// What the checker found. `violations` must be empty.
#[derive(Debug, Default, Serialize)]
pub struct Verdict {
    pub acquisitions: usize,
    pub released: usize,
    pub expired_or_lost: usize,
    pub killed_mid_section: usize,
    pub writes_accepted: usize,
    pub writes_rejected: usize,
    /// Holders whose critical section ran on past their lease into the next holder's,
    /// and whose stale write fencing refused (the case Redlock's critics describe):
    /// reported, not a violation.
    pub overlaps_caught_by_fencing: usize,
    /// Overlapping valid leases inside an immediate-restart window (nothing can
    /// prevent them; fencing must still hold): reported apart.
    pub overlaps_after_amnesia: usize,
    pub violations: Vec<String>,
}

struct Section {
    holder: Holder,
    fence: u64,
    valid: (u64, u64),
    section: (u64, u64),
    write_accepted: Option<bool>,
}

/// Reads every log and the resource's accepted tokens, and checks the promises.
pub fn check(
    logs: &[(PathBuf, bool)],
    accepted: &HashMap<String, Vec<u64>>,
    amnesia: &[Amnesia],
) -> Verdict {
    let mut verdict = Verdict::default();
    let mut open: HashMap<Holder, bool> = HashMap::new();
    let mut by_lock: HashMap<String, Vec<Section>> = HashMap::new();
    for (path, killed) in logs {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        for line in text.lines() {
            // A worker killed mid-write leaves a torn last line.
            let Ok(record) = serde_json::from_str::<Record>(line) else {
                continue;
            };
            match record {
                Record::Acquired { holder, .. } => {
                    verdict.acquisitions += 1;
                    open.insert(holder, *killed);
                }
                Record::Ended {
                    holder,
                    lock,
                    fence,
                    acquired_us,
                    section,
                    valid_until_us,
                    release_us,
                    released,
                    lost,
                    write_accepted,
                } => {
                    open.remove(&holder);
                    match released {
                        Some(true) => verdict.released += 1,
                        _ => verdict.expired_or_lost += 1,
                    }
                    match write_accepted {
                        Some(true) => verdict.writes_accepted += 1,
                        Some(false) => verdict.writes_rejected += 1,
                        None => {}
                    }
                    if released == Some(false)
                        && !lost
                        && !in_amnesia(amnesia, acquired_us, release_us)
                    {
                        verdict.violations.push(format!("{holder:?} on {lock}: the lease ended under the holder but `lost` never fired"));
                    }
                    let valid = (acquired_us, release_us.min(valid_until_us));
                    by_lock.entry(lock).or_default().push(Section {
                        holder,
                        fence,
                        valid,
                        section,
                        write_accepted,
                    });
                }
            }
        }
    }
    for (holder, killed) in open {
        match killed {
            true => verdict.killed_mid_section += 1,
            false => verdict.violations.push(format!(
                "{holder:?}: an acquisition vanished (no end in a live worker's log)"
            )),
        }
    }
    for (lock, tokens) in accepted {
        if let Some(pair) = tokens.windows(2).find(|w| w[0] >= w[1]) {
            verdict.violations.push(format!(
                "{lock}: fenced write {} accepted after {}",
                pair[1], pair[0]
            ));
        }
    }
    for (lock, mut sections) in by_lock {
        check_exclusion(&lock, &mut sections, amnesia, &mut verdict);
    }
    verdict
}

/// No two holders' valid leases overlap; sections that overlap by the wall clock
/// (a holder ran on past its lease) must have had the stale write refused.
fn check_exclusion(
    lock: &str,
    sections: &mut [Section],
    amnesia: &[Amnesia],
    verdict: &mut Verdict,
) {
    sections.sort_by_key(|s| s.valid.0);
    let mut stale_writers = HashSet::new();
    for (i, a) in sections.iter().enumerate() {
        let reach = a.valid.1.max(a.section.1);
        for b in sections[i + 1..].iter().take_while(|b| b.valid.0 < reach) {
            if overlap(a.valid, b.valid) {
                if in_amnesia(amnesia, b.valid.0, a.valid.1) {
                    verdict.overlaps_after_amnesia += 1;
                    continue;
                }
                verdict.violations.push(format!(
                    "{lock}: valid leases overlap: {:?} (fence {}) and {:?} (fence {})",
                    a.holder, a.fence, b.holder, b.fence
                ));
            } else if overlap(a.section, b.section) {
                let older = if a.fence < b.fence { a } else { b };
                if older.write_accepted == Some(false) && stale_writers.insert(older.holder) {
                    verdict.overlaps_caught_by_fencing += 1;
                }
            }
        }
    }
}

fn overlap(a: (u64, u64), b: (u64, u64)) -> bool {
    a.0 < a.1 && b.0 < b.1 && a.0 < b.1 && b.0 < a.1
}

fn in_amnesia(amnesia: &[Amnesia], from: u64, to: u64) -> bool {
    amnesia
        .iter()
        .any(|(start, end)| from < *end && to > *start)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holder(worker: usize, seq: u64) -> Holder {
        Holder {
            worker,
            incarnation: 0,
            task: 0,
            seq,
        }
    }

    fn ended(
        h: Holder,
        fence: u64,
        valid: (u64, u64),
        released: bool,
        lost: bool,
        accepted: bool,
    ) -> Record {
        Record::Ended {
            holder: h,
            lock: "l".into(),
            fence,
            acquired_us: valid.0,
            section: valid,
            valid_until_us: valid.1,
            release_us: valid.1,
            released: Some(released),
            lost,
            write_accepted: Some(accepted),
        }
    }

    fn run(records: &[Record], killed: bool, accepted: &[u64], amnesia: &[Amnesia]) -> Verdict {
        let dir = std::env::temp_dir().join(format!(
            "latchkey-checker-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("log.jsonl");
        let lines: Vec<String> = records
            .iter()
            .map(|r| serde_json::to_string(r).unwrap())
            .collect();
        std::fs::write(&path, lines.join("\n")).unwrap();
        let accepted = HashMap::from([("l".to_owned(), accepted.to_vec())]);
        let verdict = check(&[(path, killed)], &accepted, amnesia);
        let _ = std::fs::remove_dir_all(&dir);
        verdict
    }

    #[test]
    fn clean_history_passes() {
        let v = run(
            &[
                ended(holder(0, 1), 1, (0, 10), true, false, true),
                ended(holder(1, 1), 2, (10, 20), true, false, true),
            ],
            false,
            &[1, 2],
            &[],
        );
        assert!(v.violations.is_empty(), "{:?}", v.violations);
        assert_eq!(v.released, 2);
    }

    #[test]
    fn overlapping_valid_leases_are_a_violation_except_after_amnesia() {
        let records = [
            ended(holder(0, 1), 1, (0, 10), true, false, true),
            ended(holder(1, 1), 2, (5, 20), true, false, true),
        ];
        assert_eq!(run(&records, false, &[1, 2], &[]).violations.len(), 1);
        let v = run(&records, false, &[1, 2], &[(4, 30)]);
        assert!(v.violations.is_empty());
        assert_eq!(v.overlaps_after_amnesia, 1);
    }

    #[test]
    fn a_stale_accepted_token_is_a_violation() {
        let v = run(&[], false, &[3, 2], &[]);
        assert_eq!(v.violations.len(), 1);
    }

    #[test]
    fn a_lease_lost_without_the_signal_is_a_violation() {
        let v = run(
            &[ended(holder(0, 1), 1, (0, 10), false, false, true)],
            false,
            &[1],
            &[],
        );
        assert_eq!(v.violations.len(), 1);
    }

    #[test]
    fn an_acquisition_without_an_end_vanished_unless_its_worker_was_killed() {
        let acquired = Record::Acquired {
            holder: holder(0, 1),
            lock: "l".into(),
            fence: 1,
            at_us: 0,
        };
        assert_eq!(
            run(std::slice::from_ref(&acquired), false, &[], &[])
                .violations
                .len(),
            1
        );
        let v = run(&[acquired], true, &[], &[]);
        assert!(v.violations.is_empty());
        assert_eq!(v.killed_mid_section, 1);
    }

    #[test]
    fn a_holder_past_its_lease_whose_write_was_refused_is_counted_not_failed() {
        // Holder 0's lease ended at 10 but its section ran to 25; holder 1 took over at 12.
        let mut late = ended(holder(0, 1), 1, (0, 10), false, true, false);
        if let Record::Ended { section, .. } = &mut late {
            *section = (0, 25);
        }
        let v = run(
            &[late, ended(holder(1, 1), 2, (12, 20), true, false, true)],
            false,
            &[2],
            &[],
        );
        assert!(v.violations.is_empty(), "{:?}", v.violations);
        assert_eq!(v.overlaps_caught_by_fencing, 1);
    }
}
