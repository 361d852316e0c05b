//! `latchkey`: distributed locks on Redis from the command line.
//!
//! Exit statuses follow sysexits(3); see [`exit`].

mod bench;
mod cli;
mod demo;
mod exit;

use std::process::ExitCode;

use clap::Parser;

use crate::cli::{Cli, Command};
use crate::exit::Failure;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => return exit::usage(error),
    };
    init_tracing(cli.verbose);
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(error) => {
            return Failure::software(format!("cannot start the async runtime: {error}")).report();
        }
    };
    let outcome = runtime.block_on(run(cli));
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => failure.report(),
    }
}

async fn run(cli: Cli) -> Result<(), Failure> {
    match cli.command {
        Command::Demo(args) => demo::run(&cli.redis, cli.quiet, args).await,
        Command::Bench(args) => bench::run(args).await,
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
        .init();
}
