//! `latchkey bench`: runs latchkey-bench with the command line's options.

use latchkey_bench::{BenchError, Options, Scenario};

use crate::cli::{BenchArgs, Global};
use crate::exit::Failure;

pub async fn run(global: &Global, args: BenchArgs) -> Result<u8, Failure> {
    if global.cluster || global.sentinel.is_some() {
        return Err(Failure::usage(
            "bench runs against one server; `--scenario deployments` starts a cluster and a replica \
             of its own, `--scenario quorum` five masters"
                .to_owned(),
        ));
    }
    let redis = match global.redis.as_slice() {
        [] => None,
        [url] => Some(url.clone()),
        several => {
            return Err(Failure::usage(format!(
                "{} Redis URLs given; bench runs against one server (`--scenario quorum` starts five \
                 masters of its own)",
                several.len()
            )));
        }
    };
    let scenarios = match args.scenario.is_empty() {
        true => Scenario::ALL.to_vec(),
        false => args.scenario.into_iter().map(Scenario::from).collect(),
    };
    let options = Options {
        scenarios,
        duration: args.duration,
        redis,
        json: args.json,
        chart: args.chart,
        progress: !global.quiet,
        cost_budget: args.cost_budget,
    };
    latchkey_bench::run(&options).await.map_err(failure)?;
    Ok(0)
}

/// One worker process of a multi-process scenario: runs the job, prints its report
/// as one JSON line for the bench process that started it.
pub async fn worker(job: &str) -> Result<u8, Failure> {
    let job: latchkey_bench::worker::Job = serde_json::from_str(job)
        .map_err(|e| Failure::usage(format!("bench-worker: not a job: {e}")))?;
    let report = latchkey_bench::worker::run(job).await.map_err(failure)?;
    crate::output::json(&report)?;
    Ok(0)
}

/// One client run of the `cost` scenario (under callgrind, started by the bench).
pub async fn cost_client(job: &str) -> Result<u8, Failure> {
    let job: latchkey_bench::cost::ClientJob = serde_json::from_str(job)
        .map_err(|e| Failure::usage(format!("bench-cost-client: not a job: {e}")))?;
    latchkey_bench::cost::client(job).await.map_err(failure)?;
    Ok(0)
}

fn failure(error: BenchError) -> Failure {
    match error {
        BenchError::Lock(error) => error.into(),
        BenchError::Redis(message) => {
            Failure::unavailable(format!("Redis failed during the benchmark: {message}"))
        }
        other => Failure::software(other.to_string()),
    }
}
