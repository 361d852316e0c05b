//! `latchkey demo`: the seed scenarios, run for real against Redis.

mod dashboard;
mod flash_sale;
mod throttle;
mod transfer;

use latchkey::{Client, Error};
use latchkey_testkit::RedisServer;

use crate::cli::{DemoArgs, Scenario};
use crate::exit::Failure;
use dashboard::Dashboard;

/// Runs the chosen scenario against `url`, or against a private server when nothing
/// answers there.
pub async fn run(url: &str, quiet: bool, args: DemoArgs) -> Result<(), Failure> {
    if args.semaphore.is_some() && args.scenario != Scenario::FlashSale {
        return Err(Failure::usage(
            "--semaphore applies to the flash-sale demo only".to_owned(),
        ));
    }
    let redis = DemoRedis::connect_or_start(url, quiet).await?;
    let url = redis.url.as_str();
    let dashboard = args.metrics.then(Dashboard::install).transpose()?;
    let ran = match (args.scenario, args.semaphore) {
        (Scenario::FlashSale, None) => flash_sale::run(url, quiet, args.unprotected).await,
        (Scenario::FlashSale, Some(lanes)) => {
            flash_sale::checkout(url, quiet, lanes, args.unprotected).await
        }
        (Scenario::Transfer, _) => transfer::run(url, quiet, args.unprotected).await,
        (Scenario::Throttle, _) => throttle::run(url, quiet, args.unprotected).await,
    };
    if let Some(dashboard) = dashboard {
        dashboard.print();
    }
    ran
}

/// Where a demo runs: the user's Redis, or a private `redis-server` for this run.
struct DemoRedis {
    url: String,
    // Killed (and its temp dir removed) when the demo ends.
    _private: Option<RedisServer>,
}

impl DemoRedis {
    async fn connect_or_start(url: &str, quiet: bool) -> Result<Self, Failure> {
        let node = match Client::open(url).await {
            Ok(_) => {
                return Ok(DemoRedis {
                    url: url.to_owned(),
                    _private: None,
                });
            }
            Err(Error::Unreachable { node, .. }) if latchkey_testkit::server_available() => node,
            Err(error) => return Err(error.into()),
        };
        let server = tokio::task::spawn_blocking(RedisServer::start)
            .await
            .map_err(|e| Failure::software(format!("could not start redis-server: {e}")))?
            .map_err(|e| {
                Failure::unavailable(format!(
                    "nothing answers at {node} and starting redis-server failed: {e}"
                ))
            })?;
        if !quiet {
            crate::output::outln!(
                "no Redis answered at {node}; started a private redis-server on 127.0.0.1:{} for this run",
                server.port()
            );
        }
        Ok(DemoRedis {
            url: server.url(),
            _private: Some(server),
        })
    }
}

/// A demo's own Redis commands fail like the library's do: unreachable is 69.
fn redis_failure(error: redis::RedisError) -> Failure {
    if error.is_io_error() || error.is_timeout() || error.is_connection_dropped() {
        return Failure::unavailable(format!("Redis became unreachable during the demo: {error}"));
    }
    Failure::software(format!(
        "Redis answered with an error during the demo: {error}"
    ))
}
