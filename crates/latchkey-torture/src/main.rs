//! `latchkey-torture`: runs worker processes through crashes, pauses and Redis
//! failures, then checks from their logs and a fenced resource that mutual exclusion
//! and fencing held. Exit status 1 on any violation.

mod checker;
mod faults;
mod record;
mod worker;
mod workers;

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Args, Parser, Subcommand};
use latchkey_testkit::RedisServer;
use rand::{Rng, SeedableRng};
use serde::Serialize;

use crate::faults::Fault;
use crate::workers::Workers;

#[derive(Debug, Parser)]
#[command(
    name = "latchkey-torture",
    about = "Mutual exclusion and fencing under crashes, pauses and Redis failures"
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
}

/// Options of a run.
#[derive(Clone, Debug, Args)]
pub struct RunArgs {
    /// How long to inject faults (e.g. 60s, 30m).
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    duration: Duration,
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
    log: std::path::PathBuf,
}

#[derive(Serialize)]
struct Report {
    seed: u64,
    duration_s: u64,
    faults: BTreeMap<String, usize>,
    verdict: checker::Verdict,
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
    match cli.command {
        Some(Command::Worker(args)) => {
            runtime.block_on(worker::run(args));
            ExitCode::SUCCESS
        }
        None => runtime
            .block_on(torture(cli.run))
            .unwrap_or_else(|message| {
                eprintln!("latchkey-torture: {message}");
                ExitCode::from(69)
            }),
    }
}

async fn torture(mut args: RunArgs) -> Result<ExitCode, String> {
    let seed = *args.seed.get_or_insert_with(rand::random);
    println!("seed {seed} (repeat with --seed {seed})");
    let start = || tokio::task::spawn_blocking(RedisServer::start);
    let mut lock_server = start()
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    let resource = start()
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    let dir = tempfile_dir()?;
    let mut workers = Workers::start(&args, dir.clone(), lock_server.url(), resource.url())
        .map_err(|e| e.to_string())?;

    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut faults: BTreeMap<String, usize> = BTreeMap::new();
    let mut amnesia = Vec::new();
    let progress = indicatif::ProgressBar::new(args.duration.as_secs().max(1));
    let started = Instant::now();
    while started.elapsed() < args.duration {
        tokio::time::sleep(Duration::from_millis(rng.random_range(300..1200))).await;
        let fault = Fault::pick(&mut rng);
        progress.set_message(format!("{fault:?}"));
        amnesia.extend(
            faults::inject(fault, args.ttl, &mut lock_server, &mut workers, &mut rng).await,
        );
        *faults.entry(format!("{fault:?}")).or_default() += 1;
        progress.set_position(started.elapsed().as_secs());
    }
    progress.finish_and_clear();
    let killed_at_stop = workers.stop(args.ttl * 4 + Duration::from_secs(3)).await;
    let mut logs = workers.logs();
    for (path, killed) in &mut logs {
        let slot_killed = killed_at_stop
            .iter()
            .any(|w| path.to_string_lossy().contains(&format!("worker-{w}-")));
        *killed |= slot_killed;
    }
    let accepted = accepted_tokens(&resource, args.locks)?;
    let verdict = checker::check(&logs, &accepted, &amnesia);
    let report = Report {
        seed,
        duration_s: started.elapsed().as_secs(),
        faults,
        verdict,
    };
    print_report(&report, args.json);
    if report.verdict.violations.is_empty() {
        let _ = std::fs::remove_dir_all(&dir);
        return Ok(ExitCode::SUCCESS);
    }
    eprintln!("logs kept in {}", dir.display());
    Ok(ExitCode::from(1))
}

fn accepted_tokens(
    resource: &RedisServer,
    locks: usize,
) -> Result<std::collections::HashMap<String, Vec<u64>>, String> {
    let mut conn = resource.connection().map_err(|e| e.to_string())?;
    let mut accepted = std::collections::HashMap::new();
    for lock in 0..locks {
        let name = format!("torture:{lock}");
        let tokens: Vec<u64> =
            redis::Commands::lrange(&mut conn, format!("resource:{name}:accepted"), 0, -1)
                .map_err(|e| e.to_string())?;
        accepted.insert(name, tokens);
    }
    Ok(accepted)
}

fn tempfile_dir() -> Result<std::path::PathBuf, String> {
    let dir = std::env::temp_dir().join(format!("latchkey-torture-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    Ok(dir)
}

fn print_report(report: &Report, json: bool) {
    if json {
        println!("{}", serde_json::to_string(report).unwrap_or_default());
        return;
    }
    let v = &report.verdict;
    println!("ran {} s with seed {}", report.duration_s, report.seed);
    println!(
        "faults: {}",
        report
            .faults
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!(
        "acquisitions {} (released {}, expired or lost {}, holder killed {})",
        v.acquisitions, v.released, v.expired_or_lost, v.killed_mid_section
    );
    println!(
        "fenced writes accepted {}, rejected {}",
        v.writes_accepted, v.writes_rejected
    );
    println!(
        "wall-clock overlaps caught by fencing {}; overlaps after an immediate empty restart {}",
        v.overlaps_caught_by_fencing, v.overlaps_after_amnesia
    );
    println!("violations {}", v.violations.len());
    for violation in v.violations.iter().take(20) {
        println!("  {violation}");
    }
}
