//! What a run measured, as plain data: the scenarios produce it; the tables, the
//! JSON and the chart read it. It depends on nothing that produces or shows it.

use serde::Serialize;

use crate::machine::Machine;
use crate::stats::Percentiles;

/// Everything one run measured. Its JSON form (`--json`) is stable: scripts read it.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// Where it ran.
    pub machine: Machine,
    /// One entry per (scenario, implementation).
    pub results: Vec<Figures>,
}

/// The figures of one implementation in one scenario.
#[derive(Clone, Debug, Serialize)]
pub struct Figures {
    /// `uncontended`, `contended`, `handoff` or `waiters`.
    pub scenario: String,
    /// `latchkey`, `latchkey-fair`, `raw`, `raw-fenced` or `rslock`.
    #[serde(rename = "impl")]
    pub implementation: String,
    /// Lock cycles (critical sections) per second; for `waiters`, grants per second.
    pub ops_per_sec: f64,
    /// Acquire (wait) latency in µs; for `latency`, the whole acquire + release
    /// cycle; for `waiters`, from the holders' release to each grant.
    pub latency_us: Percentiles,
    /// Redis commands per acquisition, scripts' inner calls included, the critical
    /// section's own commands excluded.
    pub redis_cmds_per_op: f64,
    /// CPU time (user + system) of the bench's lock-taking processes per
    /// acquisition, in µs, critical sections included.
    pub client_cpu_us_per_op: Option<f64>,
    /// CPU time (user + system) of redis-server per acquisition, in µs (INFO cpu),
    /// critical sections included.
    pub redis_cpu_us_per_op: Option<f64>,
    /// Fewest and most acquisitions of one task (one-key scenarios).
    pub fairness: Option<Fairness>,
    /// Release returned → next holder running, in µs (one-key scenarios).
    pub handoff_gap_us: Option<Gap>,
    /// PING round trip p50 in µs, for scale.
    pub ping_rtt_us: Option<u64>,
    /// Redis connections the waiting client opened (`waiters`).
    pub connections: Option<u64>,
    /// The bench process's resident memory while everyone waited (`waiters`).
    pub rss_bytes: Option<u64>,
    /// Instructions per acquire + release cycle, counted by callgrind (`cost`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instructions: Option<Instructions>,
}

/// Instructions one acquire + release cycle costs, each side.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Instructions {
    /// redis-server's.
    pub server: f64,
    /// The client process's (the library, its runtime and the connection).
    pub client: f64,
}

impl Figures {
    /// Figures with only a rate and latencies (the rest unmeasured).
    pub(crate) fn timed(
        scenario: &str,
        implementation: &str,
        ops_per_sec: f64,
        latency_us: Percentiles,
    ) -> Self {
        Figures {
            scenario: scenario.to_owned(),
            implementation: implementation.to_owned(),
            ops_per_sec,
            latency_us,
            redis_cmds_per_op: 0.0,
            client_cpu_us_per_op: None,
            redis_cpu_us_per_op: None,
            fairness: None,
            handoff_gap_us: None,
            ping_rtt_us: None,
            connections: None,
            rss_bytes: None,
            instructions: None,
        }
    }
}

/// Fewest and most acquisitions of one task.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Fairness {
    /// Fewest.
    pub min: usize,
    /// Most.
    pub max: usize,
}

/// Handoff gap percentiles in µs.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Gap {
    /// Median.
    pub p50: u64,
    /// 99th percentile.
    pub p99: u64,
}
