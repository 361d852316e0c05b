//! The command line surface.

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Distributed locks on Redis that get the details right.
#[derive(Debug, Parser)]
#[command(name = "latchkey", version, about, propagate_version = true)]
pub struct Cli {
    /// Redis URL (redis://[user:password@]host[:port][/db], rediss:// for TLS).
    #[arg(
        long,
        global = true,
        env = "LATCHKEY_REDIS",
        default_value = "redis://127.0.0.1:6379",
        hide_env_values = true
    )]
    pub redis: String,

    /// Print only results and errors.
    #[arg(short, long, global = true)]
    pub quiet: bool,

    /// Log what latchkey does to stderr (-vv for more).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a scenario from the blog posts latchkey grew from, for real, against Redis.
    Demo(DemoArgs),
    /// Benchmark latchkey against a polling SET NX lock on a private redis-server.
    Bench(BenchArgs),
}

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Scenarios to run (repeatable); all when omitted.
    #[arg(long, value_enum)]
    pub scenario: Vec<BenchScenario>,

    /// How long each implementation runs per scenario (e.g. 500ms, 5s).
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    pub duration: std::time::Duration,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum BenchScenario {
    /// 50 tasks on one key; critical section GET then SET of a counter.
    Contended,
    /// 4 tasks on one key; critical section sleeps 2 ms.
    Handoff,
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Which scenario to run.
    #[arg(value_enum, default_value_t = Scenario::FlashSale)]
    pub scenario: Scenario,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Scenario {
    /// 10 buyers race for 5 items: first without a lock (oversold), then with latchkey.
    FlashSale,
}
