//! Mutual exclusion and crash recovery across real OS processes.

mod common;

use std::io::{BufRead, BufReader};
use std::time::{Duration, Instant};

use latchkey::{Client, Error};
use latchkey_testkit::{RedisServer, worker};
use redis::AsyncCommands;

const PROCESSES: usize = 4;
const TASKS: usize = 16;
const ROUNDS: usize = 8;
const COUNTER: &str = "test:counter";

/// Each task increments a counter with a non-atomic GET then SET inside the lock.
/// Without mutual exclusion increments are lost and the total comes up short.
#[test]
#[ignore = "worker process, spawned by increments_from_many_processes_are_exact"]
fn increment_worker() {
    worker::serve("increment_worker", |url| async move {
        let client = Client::open(&url).await.unwrap();
        let mut tasks = Vec::new();
        for _ in 0..TASKS {
            let client = client.clone();
            let url = url.clone();
            tasks.push(tokio::spawn(async move {
                let mutex = client.mutex("counter-lock").unwrap();
                let mut conn = common::connect(&url).await;
                for _ in 0..ROUNDS {
                    let guard = mutex.lock_timeout(Duration::from_secs(60)).await.unwrap();
                    let value: i64 = conn
                        .get::<_, Option<i64>>(COUNTER)
                        .await
                        .unwrap()
                        .unwrap_or(0);
                    // Widen the race window: without the lock, others read the same value.
                    tokio::time::sleep(Duration::from_micros(200)).await;
                    let _: () = conn.set(COUNTER, value + 1).await.unwrap();
                    assert!(guard.release().await.unwrap(), "lease expired mid-section");
                }
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
    });
}

#[test]
fn increments_from_many_processes_are_exact() {
    let server = RedisServer::start().unwrap();
    let workers: Vec<_> = (0..PROCESSES)
        .map(|_| worker::spawn("increment_worker", &[("REDIS_URL", server.url())]).unwrap())
        .collect();
    workers.into_iter().for_each(worker::finish);
    let mut conn = server.connection().unwrap();
    let total: i64 = redis::Commands::get(&mut conn, COUNTER).unwrap();
    assert_eq!(total, (PROCESSES * TASKS * ROUNDS) as i64);
}

const CRASH_TTL: Duration = Duration::from_secs(3);

/// Takes the lock, says so on stdout, then hangs until killed.
#[test]
#[ignore = "worker process, spawned by a_killed_holder_blocks_until_its_ttl_and_no_longer"]
fn hold_forever_worker() {
    worker::serve("hold_forever_worker", |url| async move {
        let client = Client::open(&url).await.unwrap();
        let guard = common::fixed(&client, "crash-lock", CRASH_TTL);
        let guard = guard.try_lock().await.unwrap();
        println!("HELD {}", guard.fence().await.unwrap());
        // Long enough to be killed first; short enough that a broken test cannot hang CI.
        tokio::time::sleep(Duration::from_secs(60)).await;
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_holder_blocks_until_its_ttl_and_no_longer() {
    let server = RedisServer::start().unwrap();
    let mut holder = worker::spawn("hold_forever_worker", &[("REDIS_URL", server.url())]).unwrap();
    let stdout = holder.stdout.take().unwrap();
    let held_line = tokio::task::spawn_blocking(move || {
        BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            // libtest prints "test name ... " before our output, on the same line.
            .find_map(|line| line.split_once("HELD ").map(|(_, fence)| fence.to_owned()))
    })
    .await
    .unwrap()
    .expect("holder never took the lock");
    let held_seen = Instant::now();
    holder.kill().unwrap();
    holder.wait().unwrap();

    let client = Client::open(&server.url()).await.unwrap();
    let mutex = client.mutex("crash-lock").unwrap();
    // Well inside the TTL the dead holder still excludes us...
    tokio::time::sleep(CRASH_TTL / 2).await;
    match mutex.try_lock().await {
        Err(Error::Busy {
            retry_after: Some(left),
            ..
        }) => assert!(left <= CRASH_TTL),
        other => panic!("expected busy while the dead holder's lease runs, got {other:?}"),
    }
    // ...and once the TTL has run out the lock is free, without anyone releasing it.
    let guard = mutex.lock_timeout(CRASH_TTL * 2).await.unwrap();
    let waited_since_held = held_seen.elapsed();
    assert!(
        waited_since_held + Duration::from_millis(250) >= CRASH_TTL,
        "lock freed after {waited_since_held:?}, before the {CRASH_TTL:?} lease ended"
    );
    let dead_fence: u64 = held_line.trim().parse().unwrap();
    assert!(guard.fence().await.unwrap() > dead_fence);
}
