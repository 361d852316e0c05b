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
#[derive(Clone, Debug, Args)]
pub struct Global {
    /// Redis URL: `redis://[user:password@]host[:port][/db]`, `rediss://` for TLS
    /// [default: redis://127.0.0.1:6379; `bench`: a private redis-server]. Several
    /// (repeat the option or separate with commas) are a quorum of independent masters
    /// (Redlock: an odd number, at least 3), or with --cluster a cluster's seeds, with
    /// --sentinel the Sentinels.
    #[arg(
        long,
        global = true,
        env = "LATCHKEY_REDIS",
        value_delimiter = ',',
        hide_env_values = true
    )]
    pub redis: Vec<String>,

    /// The --redis URLs are seed nodes of a Redis Cluster (as `redis-cli -c`).
    #[arg(
        long,
        global = true,
        env = "LATCHKEY_CLUSTER",
        conflicts_with = "sentinel",
        // As the environment says yes: 1, true, yes, on (and 0, false, no, off).
        value_parser = clap::builder::BoolishValueParser::new()
    )]
    pub cluster: bool,

    /// The --redis URLs are Redis Sentinels; lock on the primary they name for MASTER.
    #[arg(long, global = true, value_name = "MASTER", env = "LATCHKEY_SENTINEL")]
    pub sentinel: Option<String>,

    /// Every grant and renewal waits until N replicas have it (WAIT), or fails.
    #[arg(long, global = true, value_name = "N", env = "LATCHKEY_WAIT_REPLICAS")]
    pub wait_replicas: Option<u32>,

    /// How long --wait-replicas waits for the replicas (at most 500ms).
    #[arg(long, global = true, value_name = "DURATION", default_value = "250ms", value_parser = humantime::parse_duration, requires = "wait_replicas")]
    pub wait_timeout: Duration,

    /// Key prefix for every lock name.
    #[arg(long, global = true, env = "LATCHKEY_PREFIX", default_value = "")]
    pub prefix: String,

    /// Trust this CA certificate (PEM) for a `rediss://` server, instead of the
    /// system's trust store.
    #[arg(long, global = true, value_name = "FILE", env = "LATCHKEY_TLS_CA")]
    pub tls_ca: Option<std::path::PathBuf>,

    /// Do not verify the `rediss://` server's certificate at all (testing only: anyone
    /// on the path can then impersonate the server).
    #[arg(long, global = true, conflicts_with = "tls_ca")]
    pub tls_insecure: bool,

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
    /// Show what is held under a name (a lock, a semaphore's permits, a read-write
    /// lock, rate-limit state, an election's leader, a latch's count): by whom
    /// (masked), for how long, who waits. Exit 0 if anything is held (a lock,
    /// permits, a leader), 1 if not, 65 if the name's key holds data latchkey did
    /// not write.
    Status(StatusArgs),
    /// List the locks, semaphores, read-write locks, rate limits, elections and
    /// latches in use under the prefix (SCAN, never KEYS).
    List(ListArgs),
    /// Break a lock (or a semaphore's permits, a read-write lock, an election's
    /// leader, with --kind a rate limit's state) whoever holds it; or, with --token,
    /// release a hold `acquire` printed.
    Release(ReleaseArgs),
    /// Take a lock and leave it held (for --ttl) after exiting: prints the hold's
    /// token, which `extend` and `release --token` take, from any process.
    Acquire(AcquireArgs),
    /// Reset the lease of a hold `acquire` printed: exit 0, or 70 if it was lost.
    Extend(ExtendArgs),
    /// Count one call against a rate limit: exit 0 if allowed, 1 if not.
    Throttle(ThrottleArgs),
    /// Run a command while this process leads an election: it waits its turn, leads
    /// with a new term, and the command is stopped (as `run` does) if leadership is lost.
    Elect(ElectArgs),
    /// Print who leads an election, and its term (exit 1 if nobody does); with
    /// --watch, every change as it happens.
    Leader(LeaderArgs),
    /// A count-down latch: --arrive counts it down, --wait D waits until it opens
    /// (exit 75 if it does not within D); alone, prints what is left (exit 1 if
    /// still closed).
    Latch(LatchArgs),
    /// Counting semaphores: `sem run NAME --permits N -- CMD`.
    Sem {
        #[command(subcommand)]
        command: SemCommand,
    },
    /// Read-write locks: `rw run NAME --read|--write -- CMD`.
    Rw {
        #[command(subcommand)]
        command: RwCommand,
    },
    /// A live view of the deployment, like top(1): locks held (holder masked, age,
    /// lease left, fence, waiters), semaphores and read-write locks (permits used,
    /// waiters), rate limits; sorted and filtered as you type. Each refresh walks a
    /// bounded stretch of the keyspace (SCAN COUNT --scan-count) and reads at most
    /// --reads names.
    #[cfg(feature = "top")]
    Top(TopArgs),
    /// Serve the deployment's state as Prometheus metrics on http://ADDR/metrics
    /// (locks held, oldest hold, waiters, semaphore use, rate-limit keys), in the
    /// style of redis_exporter: each scrape is one bounded refresh.
    #[cfg(feature = "exporter")]
    Exporter(ExporterArgs),
    /// Run a scenario from the blog posts latchkey grew from, for real, against Redis.
    #[cfg(feature = "demo")]
    Demo(DemoArgs),
    /// Benchmark latchkey against the raw Redis limit and rslock, side by side.
    #[cfg(feature = "bench")]
    Bench(BenchArgs),
    /// One worker process of `bench --scenario contended-processes` (internal).
    #[cfg(feature = "bench")]
    #[command(hide = true)]
    BenchWorker {
        /// The job, as JSON.
        job: String,
    },
    /// One client run of `bench --scenario cost`, under callgrind (internal).
    #[cfg(feature = "bench")]
    #[command(hide = true)]
    BenchCostClient {
        /// The job, as JSON.
        job: String,
    },
}

/// A lock's name: the first argument, or `--name NAME` for a name that starts
/// with '-' (which would otherwise read as an option).
#[derive(Debug, Args)]
pub struct LockName {
    /// The name (of the lock, semaphore, read-write lock, election or latch).
    #[arg(
        value_name = "NAME",
        required_unless_present = "name_option",
        conflicts_with = "name_option"
    )]
    name: Option<String>,

    /// The name, for one that starts with '-'.
    #[arg(long = "name", value_name = "NAME", allow_hyphen_values = true)]
    name_option: Option<String>,
}

impl LockName {
    pub fn as_str(&self) -> &str {
        // clap requires exactly one of the two.
        self.name_option
            .as_deref()
            .or(self.name.as_deref())
            .unwrap_or_default()
    }
}

/// What `run --help` adds after the options.
const RUN_HELP: &str = concat!(
    "\
The command's environment:
  LATCHKEY_FENCE  this hold's fencing token: send it with every write to the
                  protected resource, and have the resource refuse lower ones
  LATCHKEY_LOCK   the lock's name
  LATCHKEY_FENCES with --and: every lock's fencing token, space-separated, in the
                  order the locks are named (NAME first)
",
    hold_help!()
);

/// What `sem run --help` and `rw run --help` add after the options.
const SHARED_HOLD_HELP: &str = concat!(
    "\
The command's environment:
  LATCHKEY_FENCE  this hold's fencing token: send it with every write to the
                  protected resource, and have the resource refuse lower ones
  LATCHKEY_LOCK   the semaphore's or read-write lock's name
",
    hold_help!()
);

/// The part of `run --help` that `sem run` and `rw run` share.
macro_rules! hold_help {
    () => {
        "
Signals: INT, TERM, HUP, QUIT, USR1, USR2 and ALRM are passed on to the command's
process group while it runs. INT, TERM and QUIT also stop it: the group gets
SIGKILL after --kill-after (at once on a second one), and what the command leaves
running when it ends gets SIGTERM, then SIGKILL, before the lock is released.
Received while waiting for the lock, they make latchkey leave the wait queue and
exit 128+N. TSTP (Ctrl-Z) stops the command's group (SIGSTOP) with latchkey;
continued after the lease ran out, the command is killed before it can run again,
and latchkey exits 70.

Durations: 500ms, 30s, 5m, 1h 30m. A name that starts with '-' goes after '--name'.

Exit status:
  the command's own (128+N if a signal N killed it)
  64   usage: a bad option or value (checked before connecting)
  65   the key holds something that is not a lock (WRONGTYPE)
  66   the --tls-ca file cannot be read or holds no certificate
  69   Redis unavailable, not Redis, TLS failed, credentials refused or ACL denied
  70   the lease was lost mid-run, or --max-hold ran out (the command got SIGTERM,
       then SIGKILL after --kill-after), or latchkey was stopped (Ctrl-Z) past the
       lease (the command, stopped with it, got SIGKILL), or the release after the
       command found the lock no longer held (lost before a renewal noticed), or an
       internal error
  75   the lock stayed busy for the whole wait (--wait, --no-wait)
  126  the command is not executable;  127  the command was not found
  128+N  latchkey received signal N while waiting for the lock"
    };
}
use hold_help;

#[derive(Debug, Args)]
#[command(after_help = RUN_HELP)]
pub struct RunArgs {
    #[command(flatten)]
    pub name: LockName,

    /// Wait in line (FIFO) instead of racing other waiters.
    #[arg(long)]
    pub fair: bool,

    /// Hold this lock too (repeat for more): all of them or none; it never waits
    /// while holding one, so runs naming the same locks in any order never deadlock.
    #[arg(long = "and", value_name = "NAME", allow_hyphen_values = true)]
    pub and: Vec<String>,

    #[command(flatten)]
    pub hold: HoldArgs,
}

/// How long `run`, `sem run`, `rw run` and `acquire` hold what they take, and
/// how long they wait for it.
#[derive(Debug, Args)]
pub struct TakeArgs {
    /// Lease length: renewed every third of it while the command runs (at least
    /// 100ms). (`acquire`: how long the lock stays held unless extended or
    /// released, at least 10ms.)
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration, allow_hyphen_values = true)]
    pub ttl: Duration,

    /// Give up (exit 75) if it stays busy this long; without it, wait as long as it takes.
    #[arg(long, value_parser = humantime::parse_duration, conflicts_with = "no_wait", allow_hyphen_values = true)]
    pub wait: Option<Duration>,

    /// Exit 75 at once if it is busy.
    #[arg(long)]
    pub no_wait: bool,
}

/// How `run`, `sem run` and `rw run` hold what they take, and what they run.
#[derive(Debug, Args)]
pub struct HoldArgs {
    #[command(flatten)]
    pub take: TakeArgs,

    /// After the lease is lost (SIGTERM), or INT, TERM or QUIT told latchkey to stop
    /// (passed on): how long the command's group gets before SIGKILL.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration, allow_hyphen_values = true)]
    pub kill_after: Duration,

    /// Hold for at most this long: then the command is stopped as when the lease is
    /// lost (SIGTERM, SIGKILL after --kill-after, exit 70). A cap on a command that
    /// hangs while latchkey keeps renewing its lease.
    #[arg(long, value_parser = humantime::parse_duration, allow_hyphen_values = true)]
    pub max_hold: Option<Duration>,

    /// If latchkey dies (or is cut off) without releasing, keep the lock from
    /// everyone for this long after its lease, so a command that outlived latchkey
    /// on a cut-off host finds no new holder in the middle of its work.
    #[arg(long, default_value = "0s", value_parser = humantime::parse_duration, allow_hyphen_values = true)]
    pub lock_delay: Duration,

    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// What `elect --help` adds after the options.
const ELECT_HELP: &str = "\
The command's environment:
  LATCHKEY_TERM    this leader's term: greater than every earlier leader's; send it
                   with every write, and have the resource refuse lower ones
  LATCHKEY_LEADER  the value this process campaigned with
  LATCHKEY_FENCE   the same number as LATCHKEY_TERM;  LATCHKEY_LOCK  the election's name

Signals, durations and exit statuses as for `latchkey run` (see `run --help`):
70 when leadership is lost mid-run (the command got SIGTERM, then SIGKILL after
--kill-after), 75 when another process still leads after --wait or with --no-wait.";

#[derive(Debug, Args)]
#[command(after_help = ELECT_HELP)]
pub struct ElectArgs {
    #[command(flatten)]
    pub name: LockName,

    /// What observers see as the leader (`latchkey leader NAME`); by default this
    /// host's name and latchkey's process id, `host:pid`.
    #[arg(long, value_name = "V")]
    pub value: Option<String>,

    #[command(flatten)]
    pub hold: HoldArgs,
}

#[derive(Debug, Args)]
pub struct LeaderArgs {
    #[command(flatten)]
    pub name: LockName,

    /// Keep watching: print the leader now, then each change (a new leader, or
    /// "no leader"), until interrupted.
    #[arg(long)]
    pub watch: bool,
}

#[derive(Debug, Args)]
pub struct LatchArgs {
    #[command(flatten)]
    pub name: LockName,

    /// The latch's count: it opens after this many arrivals (every process must
    /// give the same number).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1 << 40))]
    pub count: u64,

    /// Count the latch down by one (arrive), printing what is left.
    #[arg(long)]
    pub arrive: bool,

    /// Wait at most this long for the latch to open: exit 0 if it did, 75 if not.
    #[arg(long, value_parser = humantime::parse_duration, allow_hyphen_values = true)]
    pub wait: Option<Duration>,
}

/// `latchkey sem …`.
#[derive(Debug, Subcommand)]
pub enum SemCommand {
    /// Run a command while holding permits of a counting semaphore (FIFO).
    #[command(after_help = SHARED_HOLD_HELP)]
    Run(SemRunArgs),
}

#[derive(Debug, Args)]
pub struct SemRunArgs {
    #[command(flatten)]
    pub name: LockName,

    /// The semaphore's permits (1 to 2^50): at most this many units held at once
    /// (every process must give the same number).
    // The range is checked before connecting, in the library's words.
    #[arg(long)]
    pub permits: u64,

    /// Permits this command holds (at most --permits).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    pub weight: u64,

    #[command(flatten)]
    pub hold: HoldArgs,
}

/// `latchkey rw …`.
#[derive(Debug, Subcommand)]
pub enum RwCommand {
    /// Run a command while holding a read-write lock, shared (--read) or alone (--write).
    #[command(after_help = SHARED_HOLD_HELP)]
    Run(RwRunArgs),
}

#[derive(Debug, Args)]
#[group(id = "mode", required = true, multiple = false)]
pub struct RwRunArgs {
    #[command(flatten)]
    pub name: LockName,

    /// Share the lock with other readers.
    #[arg(long, group = "mode")]
    pub read: bool,

    /// Hold the lock alone (writers go before readers that came after them).
    #[arg(long, group = "mode")]
    pub write: bool,

    #[command(flatten)]
    pub hold: HoldArgs,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub name: LockName,

    /// Print the result as JSON: one line, one object, for each primitive found
    /// under the name (a name can hold several kinds at once).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Only names matching this glob pattern.
    #[arg(long = "match", default_value = "*")]
    pub pattern: String,

    /// Also list string keys a latchkey client does not hold: other libraries'
    /// locks (redis-py, redsync …), and any other string key under the prefix.
    #[arg(long)]
    pub foreign: bool,

    /// Print the result as one line of JSON.
    #[arg(long)]
    pub json: bool,
}

/// What `top` and `exporter` ask of Redis per refresh.
#[cfg(any(feature = "top", feature = "exporter"))]
#[derive(Clone, Debug, Args)]
pub struct WatchArgs {
    /// Keys walked per refresh and server: the COUNT of one SCAN (on a cluster one
    /// per primary, on a quorum one per master). A larger keyspace is covered over
    /// several refreshes (1 to 1 000 000).
    #[arg(long, value_name = "KEYS", default_value_t = 500, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub scan_count: u64,

    /// Names read per refresh, at most (one script call each, reading that name's
    /// keys): half for the names in use, the rest for the names the walk found
    /// (every string key is read once per walk; the walk waits while they wait; at
    /// least 1).
    #[arg(long, value_name = "NAMES", default_value_t = 500, value_parser = at_least_one)]
    pub reads: usize,

    /// Also show string keys a latchkey client does not hold: other libraries'
    /// locks (redis-py, redsync …), and any other string key under the prefix.
    #[arg(long)]
    pub foreign: bool,
}

#[cfg(feature = "top")]
#[derive(Debug, Args)]
pub struct TopArgs {
    #[command(flatten)]
    pub watch: WatchArgs,

    /// Time between refreshes (at least 100ms: each refresh reads Redis).
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = refresh_interval)]
    pub interval: Duration,

    /// Show only names containing this text (type / in the view to change it).
    #[arg(long, value_name = "TEXT", default_value = "")]
    pub filter: String,

    /// Sort by: age (oldest hold first), name, waiters (most first), used (most
    /// permits or rate-limit units used first: nearest their limit), left (least
    /// lease left first), kind. Press s in the view to cycle.
    #[arg(long, default_value = "age", value_parser = ["age", "name", "waiters", "used", "left", "kind"])]
    pub sort: String,
}

#[cfg(feature = "exporter")]
#[derive(Debug, Args)]
pub struct ExporterArgs {
    #[command(flatten)]
    pub watch: WatchArgs,

    /// Address to serve http://ADDR/metrics on.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:9650")]
    pub listen: std::net::SocketAddr,

    /// Names exported with a series of their own, at most (the oldest holds and
    /// longest lines first); the rest count only in the deployment's totals.
    #[arg(long, value_name = "N", default_value_t = 500)]
    pub max_names: usize,
}

#[derive(Debug, Args)]
pub struct AcquireArgs {
    #[command(flatten)]
    pub name: LockName,

    /// Wait in line (FIFO) instead of racing other waiters.
    #[arg(long)]
    pub fair: bool,

    #[command(flatten)]
    pub take: TakeArgs,

    /// Print the result as one line of JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ExtendArgs {
    #[command(flatten)]
    pub name: LockName,

    /// The hold `latchkey acquire` printed.
    #[arg(long, env = "LATCHKEY_TOKEN", hide_env_values = true)]
    pub token: String,

    /// The new lease, from now (at least 10ms).
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration, allow_hyphen_values = true)]
    pub ttl: Duration,
}

#[derive(Debug, Args)]
pub struct ReleaseArgs {
    #[command(flatten)]
    pub name: LockName,

    /// Required: breaking someone else's lock is never done by accident.
    #[arg(long)]
    pub force: bool,

    /// Release the hold `latchkey acquire` printed (or `MutexGuard::detach`
    /// made), from any process; exit 70 if the token no longer holds the lock.
    /// Ignored with --force (so an exported LATCHKEY_TOKEN does not get in its way).
    #[arg(long, env = "LATCHKEY_TOKEN", hide_env_values = true)]
    pub token: Option<String>,

    /// What to break under the name; default: every kind held there (a lock, a
    /// semaphore's permits, a read-write lock, an election's leader, deposed),
    /// each reported on a line of its own. A rate limit is reset only with `--kind
    /// rate-limit` (every algorithm's state at once).
    #[arg(long, value_enum)]
    pub kind: Option<KindArg>,

    /// Print the result as JSON: one line, one object, for each primitive broken
    /// under the name (a name can hold several kinds at once).
    #[arg(long)]
    pub json: bool,
}

/// A kind of primitive, as `release --kind` takes it.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum KindArg {
    Lock,
    Semaphore,
    RwLock,
    RateLimit,
    Election,
}

impl From<KindArg> for latchkey::Kind {
    fn from(kind: KindArg) -> Self {
        match kind {
            KindArg::Lock => latchkey::Kind::Lock,
            KindArg::Semaphore => latchkey::Kind::Semaphore,
            KindArg::RwLock => latchkey::Kind::RwLock,
            KindArg::RateLimit => latchkey::Kind::RateLimit,
            KindArg::Election => latchkey::Kind::Election,
        }
    }
}

#[derive(Debug, Args)]
pub struct ThrottleArgs {
    /// The rate-limited key (e.g. sms:+15551234567).
    pub key: String,

    /// How to count: one call per period (cooldown), calls per window starting at
    /// the first (fixed), calls in any window ending now (sliding), or a steady
    /// rate with bursts (gcra).
    #[arg(long, value_enum, default_value_t = Algo::Fixed)]
    pub algo: Algo,

    /// Calls allowed per period (1 to 2^50): the window's limit, or GCRA's rate.
    /// Not taken by --algo cooldown, which allows one.
    // The range is checked before connecting, in the library's words.
    #[arg(long)]
    pub limit: Option<u64>,

    /// The period: the window, the cooldown, or GCRA's rate period.
    #[arg(long, value_parser = humantime::parse_duration, allow_hyphen_values = true)]
    pub per: Duration,

    /// GCRA only: calls allowed at once beyond the steady rate.
    #[arg(long)]
    pub burst: Option<u64>,

    /// What this call costs, in units of the limit (a batch of N: --cost N).
    #[arg(long, default_value_t = 1)]
    pub cost: u64,

    /// Look without counting: what a call of cost 1 would get now.
    #[arg(long, conflicts_with = "cost")]
    pub peek: bool,

    /// Wait up to this long for the call to be allowed (sleeping until the limit
    /// says it may pass, no polling); exit 1 if it is still over the limit then.
    #[arg(long, value_parser = humantime::parse_duration, conflicts_with = "peek")]
    pub wait: Option<std::time::Duration>,

    /// Also print the HTTP headers for the decision (RateLimit, RateLimit-Policy,
    /// Retry-After).
    #[arg(long, conflicts_with = "json")]
    pub headers: bool,

    /// Print the result as one line of JSON.
    #[arg(long)]
    pub json: bool,
}

/// `throttle --algo`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Algo {
    /// One call per period.
    Cooldown,
    /// Up to --limit calls per window; a window starts at its first call.
    Fixed,
    /// Up to --limit calls in any window of --per ending now, counted exactly.
    Sliding,
    /// --limit calls per --per, spaced evenly, plus bursts of --burst.
    Gcra,
}

#[cfg(feature = "demo")]
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Which scenario to run.
    #[arg(value_enum, default_value_t = Scenario::FlashSale)]
    pub scenario: Scenario,

    /// Run it without latchkey, to see what goes wrong.
    #[arg(long = "unsafe")]
    pub unprotected: bool,

    /// flash-sale only: at most K buyers at checkout at once (a semaphore of K).
    #[arg(long, value_name = "K", value_parser = clap::value_parser!(u64).range(1..))]
    pub semaphore: Option<u64>,

    /// Record latchkey's metrics while it runs and show them after, as a dashboard
    /// over a Prometheus scrape would: waits and holds (p50, p99), outcomes, lost
    /// leases.
    #[arg(long)]
    pub metrics: bool,
}

#[cfg(feature = "demo")]
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Scenario {
    /// 10 buyers race for 5 items: first without a lock (oversold), then with latchkey.
    FlashSale,
    /// Concurrent transfers between accounts a and b: optimistic transactions, then the lock.
    Transfer,
    /// SMS codes for 3 phones (one per minute each) and downloads from 2 IPs (5 per 10 minutes).
    Throttle,
}

#[cfg(feature = "bench")]
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Scenarios to run (repeatable); all when omitted.
    #[arg(long, value_enum)]
    pub scenario: Vec<BenchScenario>,

    /// Time per implementation per scenario (e.g. 500ms, 5s; at least 100ms).
    #[arg(long, default_value = "5s", value_parser = bench_duration)]
    pub duration: Duration,

    /// Write every figure to this file as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<std::path::PathBuf>,

    /// Draw throughput to this SVG file.
    #[arg(long, value_name = "FILE.svg")]
    pub chart: Option<std::path::PathBuf>,

    /// Fail (exit 70) when `--scenario cost` counts more instructions or commands
    /// per cycle than this JSON budget allows (+5 %), e.g. docs/cost-budget.json.
    #[arg(long, value_name = "FILE.json")]
    pub cost_budget: Option<std::path::PathBuf>,
}

#[cfg(feature = "bench")]
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum BenchScenario {
    /// 50 tasks, each locking its own key.
    Uncontended,
    /// 50 tasks on one key; critical section GET then SET of a counter.
    Contended,
    /// 4 processes × 8 tasks on one key; critical section GET then SET of a counter.
    ContendedProcesses,
    /// One task, its own key: the acquire + release cycle.
    Latency,
    /// 4 tasks on one key; critical section sleeps 2 ms.
    Handoff,
    /// 10 000 tasks waiting on 1 000 locks.
    Waiters,
    /// Release → waiter holding, after a latchkey holder and after another library's.
    Wakeup,
    /// latchkey on one node, a 3-primary cluster, and with WAIT 1 (servers of its own).
    Deployments,
    /// A quorum of 5 masters beside one of them alone and rslock-5; then one master
    /// stopped (servers of its own).
    Quorum,
    /// Rate-limit decisions from 50 tasks beside a trivial one-command EVALSHA.
    Ratelimit,
    /// A semaphore: uncontended round trips, and fairness under contention.
    Semaphore,
    /// Leader election: campaign + resign alone; a resignation's takeover by a waiting
    /// candidate, and an observer told of it.
    Election,
    /// Count-down latches: one count down; the last count down to a waiter's return.
    Latch,
    /// Several locks at once: one lock against two taken together, and four tasks
    /// naming two locks in opposite orders.
    Multilock,
    /// A read-write lock's trades: a writer's downgrade, an upgradeable read's upgrade.
    Rwlock,
    /// Instructions per uncontended acquire + release, server and client (callgrind;
    /// skipped without valgrind).
    Cost,
}

#[cfg(feature = "bench")]
impl From<BenchScenario> for latchkey_bench::Scenario {
    fn from(scenario: BenchScenario) -> Self {
        match scenario {
            BenchScenario::Uncontended => latchkey_bench::Scenario::Uncontended,
            BenchScenario::Contended => latchkey_bench::Scenario::Contended,
            BenchScenario::ContendedProcesses => latchkey_bench::Scenario::ContendedProcesses,
            BenchScenario::Latency => latchkey_bench::Scenario::Latency,
            BenchScenario::Handoff => latchkey_bench::Scenario::Handoff,
            BenchScenario::Waiters => latchkey_bench::Scenario::Waiters,
            BenchScenario::Wakeup => latchkey_bench::Scenario::Wakeup,
            BenchScenario::Deployments => latchkey_bench::Scenario::Deployments,
            BenchScenario::Quorum => latchkey_bench::Scenario::Quorum,
            BenchScenario::Ratelimit => latchkey_bench::Scenario::Ratelimit,
            BenchScenario::Semaphore => latchkey_bench::Scenario::Semaphore,
            BenchScenario::Election => latchkey_bench::Scenario::Election,
            BenchScenario::Latch => latchkey_bench::Scenario::Latch,
            BenchScenario::Multilock => latchkey_bench::Scenario::Multilock,
            BenchScenario::Rwlock => latchkey_bench::Scenario::Rwlock,
            BenchScenario::Cost => latchkey_bench::Scenario::Cost,
        }
    }
}

/// A bench duration: long enough to measure anything.
#[cfg(feature = "bench")]
fn bench_duration(text: &str) -> Result<Duration, String> {
    let duration = humantime::parse_duration(text).map_err(|e| e.to_string())?;
    if duration < Duration::from_millis(100) {
        return Err("a bench needs at least 100ms per implementation".to_owned());
    }
    Ok(duration)
}

/// A count of at least 1 (`--reads`: a refresh that may read nothing shows nothing).
#[cfg(any(feature = "top", feature = "exporter"))]
fn at_least_one(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(0) => Err("at least 1".to_owned()),
        Ok(n) => Ok(n),
        Err(error) => Err(error.to_string()),
    }
}

/// `top --interval`: a duration of at least 100 ms, so that the view cannot turn
/// into a load on Redis (each refresh sends a SCAN and reads names).
#[cfg(feature = "top")]
fn refresh_interval(text: &str) -> Result<Duration, String> {
    let interval = humantime::parse_duration(text).map_err(|e| e.to_string())?;
    if interval < Duration::from_millis(100) {
        return Err(format!("{text} is too short; the least is 100ms"));
    }
    Ok(interval)
}
