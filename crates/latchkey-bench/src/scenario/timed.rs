//! One timed measurement's results, shared by the scenarios that time their own
//! loops (`deployments`, `quorum`).

use std::time::Duration;

use crate::figures::Figures;
use crate::stats::Percentiles;

/// Acquisitions and their latencies over some time, and the CPU the bench process
/// spent on them (the clients' share of the work).
#[derive(Default)]
pub(crate) struct TimedRun {
    pub(crate) elapsed: Duration,
    pub(crate) latencies: Vec<Duration>,
    pub(crate) client_cpu: Duration,
}

impl TimedRun {
    pub(crate) fn add(&mut self, other: TimedRun) {
        self.elapsed += other.elapsed;
        self.latencies.extend(other.latencies);
        self.client_cpu += other.client_cpu;
    }

    /// The figures of `scenario`'s row `name`.
    pub(crate) fn figures(mut self, scenario: &str, name: &str) -> Figures {
        let ops = self.latencies.len().max(1) as f64;
        let rate = self.latencies.len() as f64 / self.elapsed.as_secs_f64().max(1e-9);
        Figures {
            client_cpu_us_per_op: Some(self.client_cpu.as_secs_f64() * 1e6 / ops),
            ..Figures::timed(scenario, name, rate, Percentiles::of(&mut self.latencies))
        }
    }
}
