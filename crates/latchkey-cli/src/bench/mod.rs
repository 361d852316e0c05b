//! `latchkey bench`: latchkey against the lock users would write themselves, in one
//! run, against the same server, as ratios.
//!
//! Scenarios (more come with the benchmark issue):
//! - `contended`: 50 tasks on one key; critical section = GET then SET of a counter.
//! - `handoff`: 4 tasks on one key; critical section sleeps 2 ms.
//!
//! Implementations: `latchkey` (plain), `latchkey-fair` (FIFO), and `poll-10ms`: the
//! blog recipe of `SET NX PX` retried every 10 ms with a Lua compare-and-delete release.

mod contended;
mod stats;

use std::time::Duration;

use latchkey_testkit::RedisServer;

use crate::cli::{BenchArgs, BenchScenario};
use crate::exit::Failure;

pub async fn run(args: BenchArgs) -> Result<(), Failure> {
    let server = tokio::task::spawn_blocking(RedisServer::start)
        .await
        .map_err(|e| Failure::software(format!("could not start redis-server: {e}")))?
        .map_err(|e| Failure::unavailable(format!("could not start redis-server: {e}")))?;
    let scenarios = match args.scenario.is_empty() {
        true => vec![BenchScenario::Contended, BenchScenario::Handoff],
        false => args.scenario.clone(),
    };
    println!(
        "redis-server on 127.0.0.1:{} (private, no persistence); {:?} per run",
        server.port(),
        args.duration
    );
    for scenario in scenarios {
        let setup = match scenario {
            BenchScenario::Contended => contended::Setup {
                tasks: 50,
                section: contended::Section::GetSet,
            },
            BenchScenario::Handoff => contended::Setup {
                tasks: 4,
                section: contended::Section::Sleep(Duration::from_millis(2)),
            },
        };
        contended::run(&server.url(), scenario, setup, args.duration).await?;
    }
    Ok(())
}
