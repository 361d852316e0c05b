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
