//! The command line surface.

use std::time::Duration;

// Only demo's and bench's arguments derive ValueEnum; a lean build has neither.
#[cfg_attr(not(any(feature = "bench", feature = "demo")), allow(unused_imports))]
use clap::{Args, Parser, Subcommand, ValueEnum};

/// Distributed locks on Redis that get the details right.
#[derive(Debug, Parser)]
#[command(name = "latchkey", version, about, propagate_version = true)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,

    #[command(subcommand)]
    pub command: Command,
}

/// Options every command takes.
#[derive(Debug, Args)]
pub struct Global {
    /// Redis URL: `redis://[user:password@]host[:port][/db]`, `rediss://` for TLS
    /// [default: redis://127.0.0.1:6379; `bench`: a private redis-server].
    /// Repeatable; several URLs (quorum mode) are not supported yet.
    #[arg(
        long,
        global = true,
        env = "LATCHKEY_REDIS",
        value_delimiter = ',',
        hide_env_values = true
    )]
    pub redis: Vec<String>,

    /// Key prefix for every lock name.
    #[arg(long, global = true, env = "LATCHKEY_PREFIX", default_value = "")]
    pub prefix: String,

    /// Print only results and errors.
    #[arg(short, long, global = true)]
    pub quiet: bool,

    /// Log what latchkey does to stderr (-vv for more).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a command while holding a lock (a distributed flock(1)).
    Run(RunArgs),
    /// Show whether a lock is held, by whom (masked), for how long, and who waits.
    Status(StatusArgs),
    /// List the locks under the prefix (SCAN, never KEYS).
    List(ListArgs),
    /// Break a lock whoever holds it.
    Release(ReleaseArgs),
    /// Count one call against a rate limit: exit 0 if allowed, 1 if not.
    Throttle(ThrottleArgs),
    /// Run a scenario from the blog posts latchkey grew from, for real, against Redis.
    #[cfg(feature = "demo")]
    Demo(DemoArgs),
    /// Benchmark latchkey against the raw Redis limit and rslock, side by side.
    #[cfg(feature = "bench")]
    Bench(BenchArgs),
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The lock's name.
    pub name: String,

    /// Lease length, renewed every third of it while the command runs.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    pub ttl: Duration,

    /// Give up (exit 75) if the lock stays busy this long; without it, wait as long as it takes.
    #[arg(long, value_parser = humantime::parse_duration, conflicts_with = "no_wait")]
    pub wait: Option<Duration>,

    /// Exit 75 at once if the lock is busy.
    #[arg(long)]
    pub no_wait: bool,

    /// Wait in line (FIFO) instead of racing other waiters.
    #[arg(long)]
    pub fair: bool,

    /// After the lease is lost: how long the command gets between SIGTERM and SIGKILL.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    pub kill_after: Duration,

    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<String>,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The lock's name.
    pub name: String,

    /// Print the result as one line of JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Only names matching this glob pattern.
    #[arg(long = "match", default_value = "*")]
    pub pattern: String,

    /// Print the result as one line of JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ReleaseArgs {
    /// The lock's name.
    pub name: String,

    /// Required: breaking someone else's lock is never done by accident.
    #[arg(long)]
    pub force: bool,

    /// Print the result as one line of JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ThrottleArgs {
    /// The rate-limited key (e.g. sms:+15551234567).
    pub key: String,

    /// Calls allowed per window.
    #[arg(long)]
    pub limit: u64,

    /// The window length.
    #[arg(long, value_parser = humantime::parse_duration)]
    pub per: Duration,

    /// Print the result as one line of JSON.
    #[arg(long)]
    pub json: bool,
}

#[cfg(feature = "demo")]
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Which scenario to run.
    #[arg(value_enum, default_value_t = Scenario::FlashSale)]
    pub scenario: Scenario,
}

#[cfg(feature = "demo")]
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Scenario {
    /// 10 buyers race for 5 items: first without a lock (oversold), then with latchkey.
    FlashSale,
}

#[cfg(feature = "bench")]
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Scenarios to run (repeatable); all when omitted.
    #[arg(long, value_enum)]
    pub scenario: Vec<BenchScenario>,

    /// Time per implementation per scenario (e.g. 500ms, 5s).
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    pub duration: Duration,

    /// Write every figure to this file as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<std::path::PathBuf>,

    /// Draw throughput to this SVG file.
    #[arg(long, value_name = "FILE.svg")]
    pub chart: Option<std::path::PathBuf>,
}

#[cfg(feature = "bench")]
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum BenchScenario {
    /// 50 tasks, each locking its own key.
    Uncontended,
    /// 50 tasks on one key; critical section GET then SET of a counter.
    Contended,
    /// 4 tasks on one key; critical section sleeps 2 ms.
    Handoff,
    /// 10 000 tasks waiting on 1 000 locks.
    Waiters,
}

#[cfg(feature = "bench")]
impl From<BenchScenario> for latchkey_bench::Scenario {
    fn from(scenario: BenchScenario) -> Self {
        match scenario {
            BenchScenario::Uncontended => latchkey_bench::Scenario::Uncontended,
            BenchScenario::Contended => latchkey_bench::Scenario::Contended,
            BenchScenario::Handoff => latchkey_bench::Scenario::Handoff,
            BenchScenario::Waiters => latchkey_bench::Scenario::Waiters,
        }
    }
}
