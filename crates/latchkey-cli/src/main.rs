//! `latchkey`: distributed locks on Redis from the command line.
//!
//! Exit statuses follow sysexits(3); see [`exit`].

#[cfg(feature = "bench")]
mod bench;
mod cli;
mod connect;
#[cfg(feature = "demo")]
mod demo;
mod election;
mod exit;
mod handoff;
mod inspect;
mod latch;
mod output;
mod run;
mod throttle;
#[cfg(any(feature = "top", feature = "exporter"))]
mod watch;

use std::process::ExitCode;

use clap::Parser;

use crate::cli::{Cli, Command, RwCommand, SemCommand};
use crate::exit::Failure;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => return exit::usage(error),
    };
    init_tracing(cli.global.verbose);
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(error) => {
            return Failure::software(format!("cannot start the async runtime: {error}")).report();
        }
    };
    let outcome = runtime.block_on(dispatch(cli));
    // Background releases and renewals must not keep a finished command alive.
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    match outcome {
        Ok(status) => ExitCode::from(status),
        Err(failure) => failure.report(),
    }
}

async fn dispatch(cli: Cli) -> Result<u8, Failure> {
    let global = &cli.global;
    match cli.command {
        Command::Run(args) => run::run(global, args).await,
        Command::Status(args) => inspect::status(global, args).await,
        Command::List(args) => inspect::list(global, args).await,
        Command::Release(args) => match (&args.token, args.force) {
            (Some(token), false) => handoff::release(global, &args, token).await,
            _ => inspect::release(global, args).await,
        },
        Command::Acquire(args) => handoff::acquire(global, args).await,
        Command::Extend(args) => handoff::extend(global, args).await,
        Command::Throttle(args) => throttle::throttle(global, args).await,
        Command::Elect(args) => election::elect(global, args).await,
        Command::Leader(args) => election::leader(global, args).await,
        Command::Latch(args) => latch::latch(global, args).await,
        Command::Sem {
            command: SemCommand::Run(args),
        } => run::sem_run(global, args).await,
        Command::Rw {
            command: RwCommand::Run(args),
        } => run::rw_run(global, args).await,
        #[cfg(feature = "top")]
        Command::Top(args) => watch::top::top(global, args).await,
        #[cfg(feature = "exporter")]
        Command::Exporter(args) => watch::exporter::serve(global, args).await,
        #[cfg(feature = "demo")]
        Command::Demo(args) => {
            let url = connect::single_url(global)?;
            demo::run(url, global.quiet, args).await.map(|()| 0)
        }
        #[cfg(feature = "bench")]
        Command::Bench(args) => bench::run(global, args).await,
        #[cfg(feature = "bench")]
        Command::BenchWorker { job } => bench::worker(&job).await,
        #[cfg(feature = "bench")]
        Command::BenchCostClient { job } => bench::cost_client(&job).await,
    }
}

/// Logs go to stderr; `-v` shows latchkey's debug events, `-vv` everything.
fn init_tracing(verbose: u8) {
    let level = match verbose {
        0 => return,
        1 => tracing::Level::DEBUG,
        _ => tracing::Level::TRACE,
    };
    tracing_subscriber::fmt()
        .with_max_level(level)
        .with_writer(std::io::stderr)
        // Its report of a failed write is an `eprintln!`, which panics on the
        // same broken stderr (see `output::errln!`).
        .log_internal_errors(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
}
