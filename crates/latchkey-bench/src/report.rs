//! The figures, as tables with ratios, JSON and a chart.

use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;

use crate::chart;
use crate::machine::Machine;
use crate::scenario::Scenario;
use crate::stats::Percentiles;
use crate::{BenchError, Options};

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
    /// `latchkey`, `latchkey-fair`, `raw` or `rslock`.
    #[serde(rename = "impl")]
    pub implementation: String,
    /// Lock cycles (critical sections) per second; for `waiters`, grants per second.
    pub ops_per_sec: f64,
    /// Acquire (wait) latency in µs; for `waiters`, from the holders' release to each grant.
    pub latency_us: Percentiles,
    /// Redis commands per acquisition, scripts' inner calls included, the critical
    /// section's own commands excluded.
    pub redis_cmds_per_op: f64,
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

impl Report {
    /// Writes the JSON and the chart, if asked for.
    pub(crate) fn write(&self, options: &Options) -> Result<(), BenchError> {
        if let Some(path) = &options.json {
            let json =
                serde_json::to_string_pretty(self).map_err(|e| BenchError::Check(e.to_string()))?;
            std::fs::write(path, json + "\n").map_err(|source| BenchError::Write {
                path: path.clone(),
                source,
            })?;
        }
        if let Some(path) = &options.chart {
            std::fs::write(path, chart::svg(&self.results)).map_err(|source| {
                BenchError::Write {
                    path: path.clone(),
                    source,
                }
            })?;
        }
        Ok(())
    }
}

/// A progress bar on stderr over every step of the chosen scenarios (hidden if not asked for).
pub(crate) fn progress(options: &Options) -> ProgressBar {
    if !options.progress {
        return ProgressBar::hidden();
    }
    let steps = options.scenarios.iter().map(|s| s.steps()).sum();
    let bar = ProgressBar::new(steps);
    if let Ok(style) = ProgressStyle::with_template("{bar:30} {pos}/{len} {elapsed_precise} {msg}")
    {
        bar.set_style(style);
    }
    bar
}

/// One scenario's figures as a table, then latchkey's ratios to the others.
pub(crate) fn print_table(scenario: Scenario, figures: &[Figures]) {
    println!("\n{}", scenario.name());
    println!(
        "  {:<13} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "impl", "ops/s", "p50 µs", "p99 µs", "max µs", "cmds/op", "min/max", "gap p50", "extra"
    );
    for f in figures {
        let fairness = f
            .fairness
            .map_or("-".to_owned(), |x| format!("{}/{}", x.min, x.max));
        let gap = f
            .handoff_gap_us
            .map_or("-".to_owned(), |g| g.p50.to_string());
        let extra = match (f.connections, f.rss_bytes, f.ping_rtt_us) {
            (Some(c), Some(rss), _) => format!("{c} conns, {} MiB", rss >> 20),
            (_, _, Some(ping)) => format!("ping {ping}"),
            _ => String::new(),
        };
        println!(
            "  {:<13} {:>10.0} {:>9} {:>9} {:>9} {:>9.2} {:>9} {:>9} {:>9}",
            f.implementation,
            f.ops_per_sec,
            f.latency_us.p50,
            f.latency_us.p99,
            f.latency_us.max,
            f.redis_cmds_per_op,
            fairness,
            gap,
            extra
        );
    }
    let (ours, peers): (Vec<&Figures>, Vec<&Figures>) = figures
        .iter()
        .partition(|f| f.implementation.starts_with("latchkey"));
    for ours in &ours {
        for peer in &peers {
            println!(
                "  {} / {}: throughput ×{:.2}, max wait ×{:.2}",
                ours.implementation,
                peer.implementation,
                ours.ops_per_sec / peer.ops_per_sec.max(1e-9),
                ours.latency_us.max as f64 / peer.latency_us.max.max(1) as f64,
            );
        }
    }
}
