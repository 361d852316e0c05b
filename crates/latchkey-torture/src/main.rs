//! `latchkey-torture`: runs worker processes through crashes, pauses, Redis restarts
//! and failovers, and network faults through a proxy it owns, then checks from their
//! logs, samples of the lock keys and a fenced resource that every promise held.
//! Exit status 1 on any violation.

mod attempt;
mod checker;
mod faults;
mod history;
mod lock_cluster;
mod lock_quorum;
mod lock_sentinel;
mod lock_servers;
mod ratelimits;
mod record;
mod report;
mod sampler;
mod servers;
mod transactions;
mod worker;
mod workers;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Args, Parser, Subcommand, ValueEnum};
use latchkey_testkit::RedisServer;
use rand::{Rng, SeedableRng};

use crate::faults::{Fault, FaultWindow};
use crate::history::{History, RunFacts};
use crate::lock_cluster::ClusterServers;
use crate::lock_quorum::QuorumServers;
use crate::lock_sentinel::SentinelServers;
use crate::lock_servers::LockServers;
use crate::record::{micros, now_us};
use crate::sampler::Sampler;
use crate::servers::Servers;
use crate::workers::Workers;

#[derive(Debug, Parser)]
#[command(
    name = "latchkey-torture",
    about = "Mutual exclusion, fencing, bounded waits, liveness and no orphan holds under crashes, pauses, Redis restarts, failovers and network faults"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// One worker process (started by the run itself).
    #[command(hide = true)]
    Worker(WorkerArgs),
    /// Checks a run kept after a violation again (e.g. after changing the checker).
    Check {
        /// The run's directory, as printed at its end.
        dir: PathBuf,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Options of a run.
#[derive(Clone, Debug, Args)]
pub struct RunArgs {
    /// How long to inject faults (e.g. 60s, 30m).
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    duration: Duration,
    /// How long to run on without faults afterwards, for the liveness check (0s: none).
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    quiet: Duration,
    /// The seed of the fault schedule; printed at start. Random when omitted.
    #[arg(long)]
    seed: Option<u64>,
    /// Worker processes.
    #[arg(long, default_value_t = 4)]
    workers: usize,
    /// Tasks per worker.
    #[arg(long, default_value_t = 8)]
    tasks: usize,
    /// Locks the tasks contend for.
    #[arg(long, default_value_t = 3)]
    locks: usize,
    /// Lease length (renewed by the watchdog, except for the sections that outlive it).
    #[arg(long, default_value = "300ms", value_parser = humantime::parse_duration)]
    ttl: Duration,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// Keep the run's logs even when every promise held (they are kept on a violation).
    #[arg(long)]
    keep: bool,
    /// Lock on a Redis Cluster (three primaries with a replica each) instead of a
    /// primary/replica pair behind the proxy; faults fail shards over.
    #[arg(long, conflicts_with = "quorum")]
    cluster: bool,
    /// Lock on a quorum of N independent masters (N odd, at least 3), each behind a
    /// proxy of its own; faults pause, kill and restart masters and cut the network
    /// to one of them.
    #[arg(long, value_name = "N", value_parser = quorum_size)]
    quorum: Option<usize>,
    /// Lock on a primary and its replica watched by three Sentinels, which the
    /// workers ask for the primary; faults make Sentinel fail over (asked for, or
    /// the primary killed or paused past its down-after time).
    #[arg(long, conflicts_with_all = ["cluster", "quorum"])]
    sentinel: bool,
    /// Every grant and renewal waits until the replica has it (`WAIT 1`, 100 ms;
    /// `Client::with_wait_replicas`). A promoted replica then knows every grant its
    /// holder was told of, so overlaps after a failover are violations, not excused
    /// (on one server or `--sentinel`; there the harness makes the old primary a
    /// replica as soon as the Sentinels name the new one, as an orchestrator would).
    #[arg(long, conflicts_with_all = ["cluster", "quorum"])]
    wait_replicas: bool,
    /// What the tasks contend for: locks, or weighted permits of semaphores (one
    /// Redis deployment: not with --quorum).
    #[arg(long, value_enum, default_value_t = Workload::Mutex, conflicts_with = "quorum")]
    workload: Workload,
    /// Give the odd-numbered locks this lock delay (`Lease::with_lock_delay`): after a
    /// lease that ended without a release, nobody else may hold them for this long,
    /// and the checker holds them to it (0s: no delay).
    #[arg(long, default_value = "0s", value_parser = humantime::parse_duration)]
    lock_delay: Duration,
    /// Inject only these faults (comma-separated, e.g. `clock-jump,pause-worker`);
    /// every fault the deployment can be given when omitted.
    #[arg(long, value_enum, value_delimiter = ',')]
    faults: Vec<Fault>,
}

/// What the workers' tasks contend for.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Workload {
    /// Locks (`Mutex`), each with a fenced write in its critical section.
    #[default]
    Mutex,
    /// Semaphores of 3, 1 and 8 permits (by lock index), each acquisition of a
    /// random weight; a fenced write only under the one-permit semaphore.
    Semaphore,
    /// Read-write locks: a third of the acquisitions write (and do the fenced
    /// write), the rest read.
    #[value(name = "rwlock")]
    #[serde(rename = "rwlock")]
    RwLock,
    /// Rate limits of the four algorithms (keys by lock index: cooldown, fixed
    /// window, sliding window, GCRA; at least four keys), `check(cost)` in a loop.
    #[value(name = "ratelimit")]
    #[serde(rename = "ratelimit")]
    RateLimit,
    /// Optimistic transactions incrementing a counter and logging their id, half of
    /// them under a lock (some after its lease ran out). One server: transactions
    /// are refused on a cluster.
    Transaction,
    /// Leader elections: campaigns (cancelled in every way an acquisition is), the
    /// term as the fenced write's token, resignations; in every worker an observer
    /// of each election logs the leaders it is told of.
    Election,
    /// Several locks at once: each acquisition takes two or three random locks
    /// together (`MultiLock`, in every mode a lock is taken, cancelled alike), then
    /// runs each lock's section, fenced write included, side by side. The lock
    /// checkers see each lock (exclusion, fences, orphans …); a failed acquisition
    /// is logged as a waiter on every lock of its set, and what it took is held to
    /// the orphan bound of a token no guard had.
    #[value(name = "multilock")]
    #[serde(rename = "multilock")]
    MultiLock,
    /// Count-down latches: a fresh latch of 4 per lock index every second, counted
    /// down in a loop by every task, and waited for (the next second's) with a
    /// timeout. A latch opens exactly once, no waiter passes it before it opened,
    /// and every waiter hears of the opening.
    Latch,
}

fn quorum_size(text: &str) -> Result<usize, String> {
    let count: usize = text.parse().map_err(|e| format!("{e}"))?;
    match count >= 3 && count % 2 == 1 {
        true => Ok(count),
        false => Err(format!(
            "a quorum of {count}: it must be odd and at least 3"
        )),
    }
}

/// Options of one worker process.
#[derive(Clone, Debug, Args)]
pub struct WorkerArgs {
    #[arg(long)]
    lock_url: String,
    #[arg(long)]
    resource_url: String,
    #[arg(long)]
    worker: usize,
    #[arg(long)]
    incarnation: usize,
    #[arg(long)]
    tasks: usize,
    #[arg(long)]
    locks: usize,
    #[arg(long)]
    seed: u64,
    #[arg(long, value_parser = humantime::parse_duration)]
    ttl: Duration,
    #[arg(long)]
    log: PathBuf,
    #[arg(long, value_enum, default_value_t = Workload::Mutex)]
    workload: Workload,
    #[arg(long, default_value = "0s", value_parser = humantime::parse_duration)]
    lock_delay: Duration,
    #[arg(long)]
    wait_replicas: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("latchkey-torture: cannot start the runtime: {error}");
            return ExitCode::from(70);
        }
    };
    let outcome = match cli.command {
        Some(Command::Worker(args)) => {
            trace_when_asked();
            runtime.block_on(worker::run(args));
            return ExitCode::SUCCESS;
        }
        Some(Command::Check { dir, json }) => check(&dir, json),
        None => runtime.block_on(torture(cli.run)),
    };
    outcome.unwrap_or_else(|message| {
        eprintln!("latchkey-torture: {message}");
        ExitCode::from(69)
    })
}

/// The fault-free phase at the end: `length` with no fault, injected or not. A
/// failover the servers make on their own during it (Sentinel's, seen in a run after
/// a killed primary) starts the phase again after it, at most three times.
async fn keep_quiet(servers: &Servers, injected: &[FaultWindow], length: Duration) -> (u64, u64) {
    let mut from = now_us();
    for _ in 0..3 {
        tokio::time::sleep(
            length.saturating_sub(Duration::from_micros(now_us().saturating_sub(from))),
        )
        .await;
        let last = servers
            .unasked_failovers(injected)
            .iter()
            .map(|window| window.to_us)
            .max();
        match last {
            Some(last) if last > from => from = last,
            _ => break,
        }
    }
    (from, now_us())
}

/// With `LATCHKEY_TORTURE_TRACE=1` in its environment a worker writes latchkey's
/// debug log (reconnections, failovers followed, releases retried) to its standard
/// error, kept beside its history as `worker-N-I.log`: what a violation's holders
/// were doing.
fn trace_when_asked() {
    if std::env::var_os("LATCHKEY_TORTURE_TRACE").is_none_or(|v| v != "1") {
        return;
    }
    let only_latchkey = tracing_subscriber::filter::Targets::new()
        .with_target("latchkey", tracing_subscriber::filter::LevelFilter::DEBUG);
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_ansi(false)
                .with_writer(std::io::stderr),
        )
        .with(only_latchkey)
        .init();
}

async fn torture(mut args: RunArgs) -> Result<ExitCode, String> {
    if args.workload == Workload::Transaction && args.cluster {
        return Err(
            "the transaction workload runs on one server: transactions are refused on a cluster"
                .to_owned(),
        );
    }
    let quiet_needed =
        Duration::from_micros(checker::transaction_phase_needed(record::micros(args.ttl)));
    if args.workload == Workload::Transaction && !args.quiet.is_zero() && args.quiet < quiet_needed
    {
        return Err(format!(
            "the transaction workload's liveness check needs --quiet of at least {} (--ttl, \
             a second for holds the faults left for nobody to end, then a {} s lock timeout \
             and a second), or 0s for none",
            humantime::format_duration(quiet_needed),
            transactions::LOCK_TIMEOUT.as_secs()
        ));
    }
    if args.workload == Workload::RateLimit {
        // One key of each algorithm at least.
        args.locks = args.locks.max(4);
    }
    let seed = *args.seed.get_or_insert_with(rand::random);
    println!("seed {seed} (repeat with --seed {seed})");
    let locks: Vec<String> = (0..args.locks).map(|l| format!("torture:{l}")).collect();
    let mut servers = tokio::task::block_in_place(|| match (args.cluster, args.quorum) {
        _ if args.sentinel => SentinelServers::start(args.wait_replicas).map(Servers::Sentinel),
        (true, _) => ClusterServers::start(locks.clone()).map(Servers::Cluster),
        (false, Some(count)) => QuorumServers::start(count).map(Servers::Quorum),
        (false, None) => LockServers::start().map(|servers| Servers::Single(Box::new(servers))),
    })
    .map_err(|e| format!("starting the lock servers: {e}"))?;
    let deployment_s = Fault::of(&servers);
    let offered: Vec<Fault> = match args.faults.is_empty() {
        true => deployment_s.to_vec(),
        false => args.faults.clone(),
    };
    if let Some(foreign) = offered.iter().find(|f| !deployment_s.contains(f)) {
        let name = |fault: &Fault| {
            fault
                .to_possible_value()
                .map_or_else(|| format!("{fault:?}"), |v| v.get_name().to_owned())
        };
        let names: Vec<String> = deployment_s.iter().map(name).collect();
        return Err(format!(
            "--faults: this deployment cannot be given {}; it can be given {}",
            name(foreign),
            names.join(",")
        ));
    }
    let resource = tokio::task::block_in_place(RedisServer::start)
        .map_err(|e| format!("starting the resource server: {e}"))?;
    let dir = run_dir()?;
    let mut workers = Workers::start(&args, dir.clone(), servers.url(), resource.url())
        .map_err(|e| format!("starting the workers: {e}"))?;
    let keys = sampler::Keys::of(args.workload);
    let sampler = Sampler::start(servers.sampled(), locks.clone(), keys);

    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut faults = Vec::new();
    let progress = indicatif::ProgressBar::new((args.duration + args.quiet).as_secs().max(1));
    let started = Instant::now();
    while started.elapsed() < args.duration {
        tokio::time::sleep(Duration::from_millis(rng.random_range(300..1200))).await;
        let fault = Fault::pick(&mut rng, &offered);
        progress.set_message(format!("{fault:?}"));
        let window = faults::inject(
            fault,
            (args.ttl, args.workload),
            &mut servers,
            &mut workers,
            &locks,
            &mut rng,
        )
        .await
        .map_err(|e| format!("injecting {fault:?}: {e}"))?;
        faults.push(window);
        progress.set_position(started.elapsed().as_secs());
    }
    progress.set_message("quiet");
    let quiet = keep_quiet(&servers, &faults, args.quiet).await;
    faults.extend(servers.unasked_failovers(&faults));
    faults.sort_by_key(|window| window.from_us);
    progress.finish_and_clear();
    workers.stop(args.ttl * 4 + Duration::from_secs(3)).await;

    let facts = RunFacts {
        seed,
        duration_s: started.elapsed().as_secs(),
        ttl_us: micros(args.ttl),
        waiter_lease_us: micros(worker::WAITER_LEASE),
        quorum: args.quorum.is_some(),
        wait_replicas: args.wait_replicas,
        workload: args.workload,
        capacity: match args.workload {
            Workload::Mutex | Workload::Election | Workload::MultiLock => Default::default(),
            Workload::Semaphore => (0..locks.len())
                .map(|l| (locks[l].clone(), worker::permits(l)))
                .collect(),
            Workload::RwLock => locks
                .iter()
                .map(|lock| (lock.clone(), worker::WRITER))
                .collect(),
            Workload::RateLimit | Workload::Transaction | Workload::Latch => Default::default(),
        },
        rates: match args.workload {
            Workload::RateLimit => (0..locks.len())
                .map(|l| (locks[l].clone(), ratelimits::Rate::of(l)))
                .collect(),
            _ => Default::default(),
        },
        rate_keys_without_expiry: match args.workload {
            Workload::RateLimit => without_expiry(&servers.url(), &locks).await,
            _ => Vec::new(),
        },
        tx_logs: match args.workload {
            Workload::Transaction => match servers.data_url() {
                Some(url) => transactions::read_logs(&url, &locks).await,
                None => Default::default(),
            },
            _ => Default::default(),
        },
        quiet,
        faults,
        incarnations: workers.incarnations().to_vec(),
        samples: sampler.stop().await,
        accepted: accepted_tokens(&resource, &locks)?,
        locks,
    };
    facts
        .save(&dir)
        .map_err(|e| format!("saving the run: {e}"))?;
    let status = check(&dir, args.json)?;
    match status == ExitCode::SUCCESS && !args.keep {
        true => {
            let _ = std::fs::remove_dir_all(&dir);
        }
        false => eprintln!("logs kept in {}", dir.display()),
    }
    Ok(status)
}

/// Reads the run in `dir`, checks it and prints the report.
fn check(dir: &Path, json: bool) -> Result<ExitCode, String> {
    let history = History::load(dir).map_err(|e| format!("reading {}: {e}", dir.display()))?;
    let verdict = checker::check(&history);
    report::print(&history.facts, &verdict, json);
    match verdict.violation_count() {
        0 => Ok(ExitCode::SUCCESS),
        _ => Ok(ExitCode::from(1)),
    }
}

fn accepted_tokens(
    resource: &RedisServer,
    locks: &[String],
) -> Result<std::collections::BTreeMap<String, Vec<u64>>, String> {
    let mut conn = resource.connection().map_err(|e| e.to_string())?;
    let mut accepted = std::collections::BTreeMap::new();
    for lock in locks {
        let tokens: Vec<u64> =
            redis::Commands::lrange(&mut conn, format!("resource:{lock}:accepted"), 0, -1)
                .map_err(|e| e.to_string())?;
        accepted.insert(lock.clone(), tokens);
    }
    Ok(accepted)
}

/// A fresh directory for this run's logs. Named by the process id, which the OS
/// reuses: a directory an earlier run kept (after a violation) is cleared first,
/// or its logs, appended to, would be checked again as this run's.
fn run_dir() -> Result<PathBuf, String> {
    let dir = std::env::temp_dir().join(format!("latchkey-torture-{}", std::process::id()));
    match std::fs::remove_dir_all(&dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(format!("clearing {}: {e}", dir.display()));
        }
        _ => {}
    }
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    Ok(dir)
}

/// The rate-limit keys that have state without an expiry after the run: every key
/// must expire once its limit is full again. A server that cannot be read now says
/// nothing (the run's other checks still stand).
async fn without_expiry(url: &str, locks: &[String]) -> Vec<String> {
    let Ok(client) = worker::open(url).await else {
        return Vec::new();
    };
    let mut kept = Vec::new();
    for lock in locks {
        let Ok(found) = client.inspect(lock).await else {
            continue;
        };
        let forever = found.iter().any(|primitive| {
            matches!(primitive, latchkey::inspect::Primitive::RateLimit(state) if state.resets_in.is_none())
        });
        if forever {
            kept.push(lock.clone());
        }
    }
    kept
}
