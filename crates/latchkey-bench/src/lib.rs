//! latchkey's benchmarks: latchkey against the raw Redis limit and rslock, in one
//! run, against the same server, in alternating rounds, reported as ratios.
//!
//! The machine is shared and noisy, so absolute numbers drift; ratios measured side
//! by side in one run do not. Run it as `latchkey bench`; see `docs/benchmarks.md`.
//!
//! ```no_run
//! # async fn demo() -> Result<(), latchkey_bench::BenchError> {
//! let options = latchkey_bench::Options::quick(vec![latchkey_bench::Scenario::Uncontended]);
//! let report = latchkey_bench::run(&options).await?;
//! println!("{}", report.results.len());
//! # Ok(()) }
//! ```

mod budget;
mod chart;
mod figures;
mod files;
mod impls;
mod machine;
mod progress;
mod report;
mod scenario;
mod stats;

use std::path::PathBuf;
use std::time::Duration;

use latchkey_testkit::RedisServer;

pub use figures::{Fairness, Figures, Gap, Instructions, Report};
pub use impls::Impl;
pub use machine::Machine;
pub use scenario::{Scenario, Section, cost, worker};
pub use stats::Percentiles;

/// What to run and where to write it.
#[derive(Clone, Debug)]
pub struct Options {
    /// Scenarios to run, in order.
    pub scenarios: Vec<Scenario>,
    /// Time per implementation per scenario, split over the rounds.
    pub duration: Duration,
    /// A server to use; `None` starts a private `redis-server`.
    pub redis: Option<String>,
    /// Write every figure here as JSON.
    pub json: Option<PathBuf>,
    /// Draw the throughput ratios here as SVG.
    pub chart: Option<PathBuf>,
    /// Show a progress bar on stderr.
    pub progress: bool,
    /// Fail when the `cost` scenario's counts exceed the budget in this file.
    pub cost_budget: Option<PathBuf>,
}

impl Options {
    /// Short runs of `scenarios` on a private server, no files, no progress bar.
    pub fn quick(scenarios: Vec<Scenario>) -> Self {
        Options {
            scenarios,
            duration: Duration::from_millis(500),
            redis: None,
            json: None,
            chart: None,
            progress: false,
            cost_budget: None,
        }
    }
}

/// Why a benchmark could not run or its result cannot be trusted.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// redis-server could not be started, or Redis failed mid-run.
    #[error("Redis: {0}")]
    Redis(String),
    /// latchkey itself failed.
    #[error(transparent)]
    Lock(#[from] latchkey::Error),
    /// rslock failed.
    #[error("rslock: {0}")]
    Rslock(String),
    /// A check on the results failed (e.g. a lost increment): the figures are void.
    #[error("check failed: {0}")]
    Check(String),
    /// The report could not be written.
    #[error("cannot write {path}: {source}")]
    Write {
        /// Where.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

impl From<redis::RedisError> for BenchError {
    fn from(error: redis::RedisError) -> Self {
        BenchError::Redis(error.to_string())
    }
}

/// A plain multiplexed connection to `url`: each scenario's own commands, and raw's lock.
pub(crate) async fn connect(url: &str) -> Result<redis::aio::MultiplexedConnection, BenchError> {
    Ok(redis::Client::open(url)?
        .get_multiplexed_async_connection()
        .await?)
}

/// Runs the benchmarks, prints the tables, and writes the files asked for.
pub async fn run(options: &Options) -> Result<Report, BenchError> {
    let private = match &options.redis {
        Some(_) => None,
        None => Some(
            tokio::task::spawn_blocking(RedisServer::start)
                .await
                .map_err(|e| BenchError::Redis(e.to_string()))?
                .map_err(|e| BenchError::Redis(format!("cannot start redis-server: {e}")))?,
        ),
    };
    let url = match (&options.redis, &private) {
        (Some(url), _) => url.clone(),
        (None, Some(server)) => server.url(),
        (None, None) => unreachable!("a private server is started when no URL is given"),
    };
    let machine = Machine::read(&url).await?;
    println!("{machine}");
    let progress = progress::bar(options);
    let mut results = Vec::new();
    for scenario in &options.scenarios {
        let figures = scenario.run(&url, options.duration, &progress).await?;
        report::print_table(scenario.name(), &figures);
        results.extend(figures);
    }
    progress.finish_and_clear();
    let report = Report { machine, results };
    files::write(&report, options)?;
    if let Some(budget) = &options.cost_budget {
        budget::check(budget, &report.results)?;
        println!("within the cost budget in {}", budget.display());
    }
    Ok(report)
}
