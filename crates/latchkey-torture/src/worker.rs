//! A worker process: T tasks contend for a few locks, do a fenced write to the
//! resource in each critical section, and log every acquisition.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use latchkey::{Client, Error};
use rand::{Rng, SeedableRng};
use redis::aio::MultiplexedConnection;

use crate::WorkerArgs;
use crate::record::{Holder, Record, now_us, wall_us};

/// Share of acquisitions that take a fixed lease and then outlive it, as a process
/// stalled by a long GC pause would.
const OUTLIVE_SHARE: f64 = 0.1;

static FENCED_WRITE: std::sync::LazyLock<redis::Script> =
    std::sync::LazyLock::new(|| redis::Script::new(include_str!("fenced_write.lua")));

pub async fn run(args: WorkerArgs) {
    let client = connect(&args.lock_url).await;
    let resource = redis::Client::open(args.resource_url.as_str())
        .expect("resource URL")
        .get_multiplexed_async_connection()
        .await
        .expect("the resource server is never faulted");
    let log = Arc::new(StdMutex::new(
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&args.log)
            .expect("log file"),
    ));
    let stopping = Arc::new(AtomicBool::new(false));
    let tasks: Vec<_> = (0..args.tasks)
        .map(|task| {
            let holder = Holder {
                worker: args.worker,
                incarnation: args.incarnation,
                task,
                seq: 0,
            };
            let context = (
                client.clone(),
                resource.clone(),
                log.clone(),
                stopping.clone(),
            );
            tokio::spawn(task_loop(context, holder, args.clone()))
        })
        .collect();
    // SIGTERM: finish the sections under way, log them, exit.
    if let Ok(mut terminate) =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
    {
        terminate.recv().await;
    }
    stopping.store(true, Ordering::Relaxed);
    for task in tasks {
        let _ = task.await;
    }
}

type Context = (
    Client,
    MultiplexedConnection,
    Arc<StdMutex<std::fs::File>>,
    Arc<AtomicBool>,
);

/// Redis may be down (a restart fault) when a worker starts: keep trying.
async fn connect(url: &str) -> Client {
    loop {
        match Client::open(url).await {
            Ok(client) => return client,
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

async fn task_loop(context: Context, mut holder: Holder, args: WorkerArgs) {
    let (client, mut resource, log, stopping) = context;
    let seed = (args.seed ^ (holder.worker as u64) << 32)
        ^ ((holder.incarnation as u64) << 16)
        ^ holder.task as u64;
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    while !stopping.load(Ordering::Relaxed) {
        holder.seq += 1;
        let lock = format!("torture:{}", rng.random_range(0..args.locks));
        let outlive = rng.random_bool(OUTLIVE_SHARE);
        let Ok(mutex) = client.mutex(&lock) else {
            return;
        };
        let mutex = match outlive {
            true => mutex.with_ttl(args.ttl),
            false => mutex.with_watchdog(args.ttl),
        };
        let Ok(mutex) = mutex else { return };
        let guard = match mutex.lock_timeout(Duration::from_secs(2)).await {
            Ok(guard) => guard,
            Err(Error::Busy { .. }) => continue,
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let acquired_us = now_us();
        let fence = guard.fence();
        write(
            &log,
            &Record::Acquired {
                holder,
                lock: lock.clone(),
                fence,
                at_us: acquired_us,
            },
        );
        let section_start = now_us();
        let hold = match outlive {
            true => args.ttl * 2,
            false => Duration::from_millis(rng.random_range(1..20)),
        };
        tokio::time::sleep(hold).await;
        let write_accepted = fenced_write(&mut resource, &lock, fence).await;
        let section_end = now_us();
        let valid_until = guard.valid_until();
        let lost_token = guard.lost_token();
        let release_us = now_us();
        let released = guard.release().await.ok();
        // Lost: the signal fired, or the lease had run out by the holder's clock.
        let lost = lost_token.is_cancelled() || std::time::Instant::now() >= valid_until;
        let valid_until_us = wall_us(valid_until);
        write(
            &log,
            &Record::Ended {
                holder,
                lock,
                fence,
                acquired_us,
                section: (section_start, section_end),
                valid_until_us,
                release_us,
                released,
                lost,
                write_accepted,
            },
        );
    }
}

async fn fenced_write(
    resource: &mut MultiplexedConnection,
    lock: &str,
    fence: u64,
) -> Option<bool> {
    let accepted: redis::RedisResult<i64> = FENCED_WRITE
        .key(format!("resource:{lock}:last"))
        .key(format!("resource:{lock}:accepted"))
        .arg(fence)
        .invoke_async(resource)
        .await;
    accepted.ok().map(|n| n == 1)
}

fn write(log: &StdMutex<std::fs::File>, record: &Record) {
    let Ok(line) = serde_json::to_string(record) else {
        return;
    };
    if let Ok(mut file) = log.lock() {
        let _ = writeln!(file, "{line}");
    }
}
