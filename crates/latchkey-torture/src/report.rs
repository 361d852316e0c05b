//! The report of a run: text for people, or one JSON object (`--json`).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::checker::Verdict;
use crate::faults::Fault;
use crate::history::RunFacts;

#[derive(Serialize)]
struct Report<'a> {
    seed: u64,
    workload: crate::Workload,
    /// The permits of each semaphore (semaphore workload).
    capacity: &'a BTreeMap<String, u64>,
    duration_s: u64,
    quiet_s: f64,
    faults: BTreeMap<Fault, usize>,
    verdict: &'a Verdict,
}

pub fn print(facts: &RunFacts, verdict: &Verdict, json: bool) {
    let mut faults = BTreeMap::new();
    for window in &facts.faults {
        *faults.entry(window.fault).or_default() += 1;
    }
    let report = Report {
        seed: facts.seed,
        workload: facts.workload,
        capacity: &facts.capacity,
        duration_s: facts.duration_s,
        quiet_s: verdict.liveness.quiet_ms / 1000.0,
        faults,
        verdict,
    };
    match json {
        true => println!("{}", serde_json::to_string(&report).unwrap_or_default()),
        false => print_text(&report),
    }
}

fn print_text(report: &Report) {
    let v = report.verdict;
    println!(
        "ran {} s ({:.1} s quiet at the end) with seed {}, workload {:?}",
        report.duration_s, report.quiet_s, report.seed, report.workload
    );
    if !report.capacity.is_empty() {
        println!(
            "capacity (permits; a read-write lock's writer takes all): {}",
            list(report.capacity)
        );
    }
    println!("faults: {}", list(&report.faults));
    for (mode, outcomes) in &v.attempts {
        println!("attempts {mode:?}: {}", list(outcomes));
    }
    println!(
        "acquisitions {} (released {}, release aborted {}, expired, lost or failed {}, holder killed {})",
        v.acquisitions, v.released, v.release_aborted, v.expired_or_lost, v.killed_mid_section
    );
    println!(
        "fenced writes accepted {}, rejected {}; overlaps caught by fencing {}; overlaps after amnesia: {}",
        v.writes_accepted,
        v.writes_rejected,
        v.overlaps_caught_by_fencing,
        list(&v.overlaps_after_amnesia)
    );
    let t = &v.transactions;
    if t.committed + t.not_written + t.unknown > 0 {
        println!(
            "transactions: {} committed, {} wrote nothing, {} unknown ({} of those landed), {} commits lost to amnesia",
            t.committed, t.not_written, t.unknown, t.landed_unknown, t.lost_to_amnesia
        );
    }
    let l = &v.leaders;
    if l.observed > 0 {
        println!(
            "elections: observers told of {} changes ({} to no leader); {} leaders of dropped campaigns, {} of killed workers unlogged, {} older ones after a restore; {} gone leaders checked for being reported gone in time, {} new ones for being reported",
            l.observed,
            l.nobody,
            l.of_dropped_campaigns,
            l.unlogged_of_killed,
            l.older_after_restore,
            l.gone_checked,
            l.new_checked
        );
    }
    let c = &v.latches;
    if c.latches > 0 {
        println!(
            "latches: {} ({} seen opened, {} touched by data loss), {} count downs, {} waits ({} returned open, {} checked for hearing in time)",
            c.latches, c.opened, c.after_data_loss, c.count_downs, c.waits, c.woken, c.wake_checked
        );
    }
    if v.rates.calls > 0 {
        println!(
            "rate limits: {} calls, {} allowed, {} denied, {} failed; spans over the limit after amnesia {}",
            v.rates.calls,
            v.rates.allowed,
            v.rates.denied,
            v.rates.failed,
            v.rates.over_after_amnesia
        );
    }
    println!(
        "fences: {} checked, {} repeated, {} out of order; {} computed on demand, {} while another held the lock; {} stale writes accepted",
        v.fences.checked,
        v.fences.repeated,
        v.fences.out_of_order,
        v.fences.on_demand,
        v.fences.while_another_held,
        v.fences.stale_writes_accepted
    );
    println!(
        "bounded waits: {} timed waits, {} excused (own worker paused), longest {:.1} ms past the deadline (bound {} ms), {} over",
        v.waits.timed,
        v.waits.excused_by_pause,
        v.waits.longest_overrun_ms,
        v.waits.bound_ms,
        v.waits.over_bound
    );
    println!(
        "liveness: {} live workers over {} ms quiet, fewest acquisitions of a lock by one worker (or transaction takes or commits) {}, starved {}{}, locks not checked (held to the end by a killed holder's lease or an orphan) {}, or tried together with one such {}",
        v.liveness.live_workers,
        v.liveness.quiet_ms,
        v.liveness.fewest.map_or("-".into(), |n| n.to_string()),
        v.liveness.starved,
        match v.liveness.too_short_to_check {
            0 => String::new(),
            n => format!(" ({n} worker's transactions on a lock not checked: too short a phase)"),
        },
        v.liveness.held_by_the_dead,
        v.liveness.blocked_with_the_dead
    );
    if v.fifo.waiters_checked > 0 {
        println!(
            "first come, first served: {} waiters in line undisturbed, {} requests begun behind one served after it, {} waiters overtaken",
            v.fifo.waiters_checked, v.fifo.served_behind, v.fifo.overtaken
        );
    }
    println!(
        "orphan holds: {} runs sampled, {} orphans ({} tokens no guard had), longest {:.1} ms, worst {:.1} ms past its deadline (slack {} ms), {} over",
        v.orphans.runs,
        v.orphans.orphans,
        v.orphans.unknown_tokens,
        v.orphans.longest_orphan_ms,
        v.orphans.worst_past_deadline_ms,
        v.orphans.slack_ms,
        v.orphans.over_bound
    );
    println!(
        "resurrections: {} tokens set again after their release, {} explained by a restore or a delayed request",
        v.resurrections.reappeared, v.resurrections.excused
    );
    println!(
        "violations {}: {}",
        v.violation_count(),
        list(&v.violations)
    );
    for violation in &v.examples {
        println!("  {:?}: {}", violation.property, violation.detail);
    }
}

/// `a 1, b 2`.
fn list<K: std::fmt::Debug, V: std::fmt::Display>(counts: &BTreeMap<K, V>) -> String {
    counts
        .iter()
        .map(|(k, n)| format!("{k:?} {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}
