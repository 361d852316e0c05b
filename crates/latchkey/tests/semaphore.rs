//! Semaphores and read-write locks against a real server: bounds across processes,
//! weights in FIFO order, crashed holders, live counts, round trips, writers first.

mod common;

use std::io::{BufRead, BufReader};
use std::time::{Duration, Instant};

use latchkey::{Error, Lease};
use latchkey_testkit::{RedisServer, worker};
use redis::AsyncCommands;

const PROCESSES: usize = 3;
const TASKS: usize = 6;
const ROUNDS: usize = 10;
const PERMITS: u64 = 2;

/// One worker: `TASKS` tasks take a permit `ROUNDS` times each and, inside, count
/// themselves in and out of a Redis counter, recording the most seen at once.
#[test]
#[ignore = "worker process, spawned by permits_bound_holders_across_processes"]
fn permit_worker() {
    worker::serve("permit_worker", |url| async move {
        let client = latchkey::Client::open(&url).await.unwrap();
        let pool = client.semaphore("pool", PERMITS).unwrap();
        let mut tasks = Vec::new();
        for _ in 0..TASKS {
            let (pool, url) = (pool.clone(), url.clone());
            tasks.push(tokio::spawn(async move {
                let mut conn = common::connect(&url).await;
                for _ in 0..ROUNDS {
                    let permit = pool.acquire(1).await.unwrap();
                    let inside: i64 = conn.incr("inside", 1).await.unwrap();
                    let _: () = redis::cmd("EVAL")
                        .arg("local m = tonumber(redis.call('GET', KEYS[1]) or 0) if tonumber(ARGV[1]) > m then redis.call('SET', KEYS[1], ARGV[1]) end")
                        .arg(1)
                        .arg("most")
                        .arg(inside)
                        .query_async(&mut conn)
                        .await
                        .unwrap();
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    let _: i64 = conn.decr("inside", 1).await.unwrap();
                    assert!(permit.release().await.unwrap(), "a permit's lease was lost");
                }
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
    });
}

#[test]
fn permits_bound_holders_across_processes() {
    let server = RedisServer::start().unwrap();
    let workers: Vec<_> = (0..PROCESSES)
        .map(|_| worker::spawn("permit_worker", &[("REDIS_URL", server.url())]).unwrap())
        .collect();
    workers.into_iter().for_each(worker::finish);
    let mut conn = server.connection().unwrap();
    let most: u64 = redis::Commands::get(&mut conn, "most").unwrap();
    assert!(
        most <= PERMITS,
        "{most} holders at once with {PERMITS} permits"
    );
    assert_eq!(
        most, PERMITS,
        "the permits were never all used: the test proves nothing"
    );
}

#[tokio::test]
async fn a_large_request_is_served_before_later_small_ones() {
    let (_server, client) = common::start().await;
    let pool = client.semaphore("weights", 3).unwrap();
    let first = pool.acquire(2).await.unwrap();
    let big = tokio::spawn({
        let pool = pool.clone();
        async move { pool.acquire(2).await.unwrap() }
    });
    wait_for(|| async { pool.waiting().await.unwrap() == 1 }).await;
    // One permit is free, but the request for 2 came first: a newcomer for 1 waits.
    let small = pool.try_acquire(1).await.unwrap_err();
    assert!(matches!(small, Error::Busy { .. }), "{small:?}");
    let small = tokio::spawn({
        let pool = pool.clone();
        async move { pool.acquire(1).await.unwrap() }
    });
    wait_for(|| async { pool.waiting().await.unwrap() == 2 }).await;
    assert_eq!(pool.available().await.unwrap(), 1);
    first.release().await.unwrap();
    let (big, small) = (big.await.unwrap(), small.await.unwrap());
    assert!(
        big.fence().await.unwrap() < small.fence().await.unwrap(),
        "served out of order"
    );
    assert_eq!(pool.available().await.unwrap(), 0);
    assert!(matches!(
        pool.acquire(4).await,
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        pool.acquire(0).await,
        Err(Error::InvalidArgument(_))
    ));
}

#[tokio::test]
async fn available_counts_live_leases_only() {
    let (_server, client) = common::start().await;
    let fixed = Lease::fixed(Duration::from_millis(300)).unwrap();
    let pool = client.semaphore("live", 3).unwrap().with_lease(fixed);
    let held = pool.acquire(2).await.unwrap();
    assert_eq!(pool.available().await.unwrap(), 1);
    // Its lease runs out unrenewed: nobody cleans up, yet the count is right.
    std::mem::forget(held);
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(pool.available().await.unwrap(), 3);
    let mut fences = Vec::new();
    for _ in 0..3 {
        let permit = pool.acquire(1).await.unwrap();
        fences.push(permit.fence().await.unwrap());
    }
    assert!(fences.windows(2).all(|w| w[0] < w[1]), "{fences:?}");
}

#[tokio::test]
async fn an_uncontended_acquire_and_release_take_two_round_trips() {
    let (server, client) = common::start().await;
    let pool = client.semaphore("trips", 2).unwrap();
    // Load the scripts and the subscriber first.
    pool.acquire(1).await.unwrap().release().await.unwrap();
    let mut admin = common::connect(&server.url()).await;
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(&mut admin)
        .await
        .unwrap();
    let permit = pool.acquire(1).await.unwrap();
    assert!(permit.release().await.unwrap());
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut admin)
        .await
        .unwrap();
    let calls = |name: &str| {
        stats
            .lines()
            .find_map(|l| l.strip_prefix(&format!("cmdstat_{name}:calls=")))
            .and_then(|rest| rest.split(',').next()?.parse::<u64>().ok())
            .unwrap_or(0)
    };
    assert_eq!(calls("evalsha"), 2, "{stats}");
    // Commands a script cannot run: had they been sent, they were round trips too.
    let others: u64 = ["eval", "subscribe", "ssubscribe", "ping", "script|load"]
        .map(calls)
        .iter()
        .sum();
    assert_eq!(others, 0, "{stats}");
}

/// A worker that takes every permit with a 1 s lease, says so, and hangs until killed.
#[test]
#[ignore = "worker process, spawned by a_killed_holders_permits_come_back_within_its_lease"]
fn hoarder_worker() {
    worker::serve("hoarder_worker", |url| async move {
        let client = latchkey::Client::open(&url).await.unwrap();
        let lease = Lease::renewed(Duration::from_secs(1)).unwrap();
        let pool = client.semaphore("hoard", 2).unwrap().with_lease(lease);
        let _permit = pool.acquire(2).await.unwrap();
        println!("holding");
        tokio::time::sleep(Duration::from_secs(600)).await;
    });
}

#[test]
fn a_killed_holders_permits_come_back_within_its_lease() {
    let server = RedisServer::start().unwrap();
    let mut hoarder = worker::spawn("hoarder_worker", &[("REDIS_URL", server.url())]).unwrap();
    let mut lines = BufReader::new(hoarder.stdout.take().unwrap()).lines();
    assert!(lines.any(|l| l.unwrap().contains("holding")));
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let client = latchkey::Client::open(&server.url()).await.unwrap();
        let pool = client.semaphore("hoard", 2).unwrap();
        assert_eq!(pool.available().await.unwrap(), 0);
        // Renewed while it lives: still held after two leases.
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(
            pool.available().await.unwrap(),
            0,
            "the watchdog did not renew"
        );
        hoarder.kill().unwrap();
        hoarder.wait().unwrap();
        let killed = Instant::now();
        let permit = pool
            .acquire_timeout(1, Duration::from_secs(5))
            .await
            .unwrap();
        let waited = killed.elapsed();
        assert!(
            waited <= Duration::from_millis(1500),
            "waited {waited:?} for a 1 s lease"
        );
        permit.release().await.unwrap();
    });
}

#[tokio::test]
async fn a_dropped_wait_leaves_the_line_and_takes_nothing() {
    let (_server, client) = common::start().await;
    let pool = client.semaphore("cancel", 1).unwrap();
    let held = pool.acquire(1).await.unwrap();
    let gave_up = tokio::time::timeout(Duration::from_millis(200), pool.acquire(1)).await;
    assert!(gave_up.is_err());
    wait_for(|| async { pool.waiting().await.unwrap() == 0 }).await;
    held.release().await.unwrap();
    assert_eq!(pool.available().await.unwrap(), 1);
    assert!(pool.try_acquire(1).await.is_ok());
}

#[tokio::test]
async fn readers_share_and_a_waiting_writer_goes_before_later_readers() {
    let (_server, client) = common::start().await;
    let config = client.rw_lock("config").unwrap();
    let first = config.read().await.unwrap();
    let second = config.try_read().await.unwrap();
    assert_eq!(config.readers().await.unwrap(), 2);
    assert!(matches!(config.try_write().await, Err(Error::Busy { .. })));
    let writer = tokio::spawn({
        let config = config.clone();
        async move { config.write().await.unwrap() }
    });
    wait_for(|| async { config.waiting().await.unwrap() == 1 }).await;
    // A writer waits: a new reader queues behind it instead of joining the others.
    assert!(matches!(config.try_read().await, Err(Error::Busy { .. })));
    let late_reader = tokio::spawn({
        let config = config.clone();
        async move { config.read().await.unwrap() }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(
        !late_reader.is_finished(),
        "a reader overtook a waiting writer"
    );
    first.release().await.unwrap();
    assert!(!writer.is_finished());
    second.release().await.unwrap();
    let write = writer.await.unwrap();
    assert_eq!(config.readers().await.unwrap(), u64::MAX);
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(
        !late_reader.is_finished(),
        "a reader got in beside the writer"
    );
    let write_fence = write.fence().await.unwrap();
    write.release().await.unwrap();
    let read = late_reader.await.unwrap();
    assert!(
        read.fence().await.unwrap() > write_fence,
        "a reader cannot tell the writer came first"
    );
}

/// Issue 26 item 4: a writer becomes a reader with no writer in between; the
/// readers queued behind it come in at once, the writer queued behind them waits.
#[tokio::test]
async fn a_downgraded_writer_lets_readers_in_but_no_writer_between() {
    let (server, client) = common::start().await;
    let config = client.rw_lock("config").unwrap();
    let write = config.write().await.unwrap();
    let fence = write.fence().await.unwrap();
    let other = latchkey::Client::open(&server.url()).await.unwrap();
    let theirs = other.rw_lock("config").unwrap();
    // In line behind the writer: a reader, then a writer, then a reader.
    let reader = tokio::spawn({
        let theirs = theirs.clone();
        async move { theirs.read().await.unwrap() }
    });
    wait_for(|| async { config.waiting().await.unwrap() == 1 }).await;
    let writer = tokio::spawn({
        let theirs = theirs.clone();
        async move { theirs.write().await.unwrap() }
    });
    wait_for(|| async { config.waiting().await.unwrap() == 2 }).await;

    let read = config.downgrade(write).await.unwrap();
    assert_eq!(
        read.known_fence(),
        Some(fence),
        "the write's token orders the read"
    );
    // The queued reader comes in beside us, woken by the downgrade.
    let theirs_read = tokio::time::timeout(Duration::from_secs(3), reader)
        .await
        .expect("the queued reader was not let in")
        .unwrap();
    assert_eq!(config.readers().await.unwrap(), 2);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!writer.is_finished(), "a writer got in beside the readers");
    // The read is a live guard of its own: renewed, released.
    assert!(read.is_held().await.unwrap());
    assert!(read.release().await.unwrap());
    theirs_read.release().await.unwrap();
    let write = tokio::time::timeout(Duration::from_secs(3), writer)
        .await
        .expect("the writer never came in")
        .unwrap();
    assert!(write.fence().await.unwrap() > fence);
    // A read guard cannot be downgraded; a lost write cannot either.
    write.release().await.unwrap();
    let read = config.read().await.unwrap();
    assert!(matches!(
        config.downgrade(read).await,
        Err(Error::InvalidArgument(_))
    ));
    let write = config.write().await.unwrap();
    client
        .force_release("config", latchkey::Kind::RwLock)
        .await
        .unwrap();
    assert!(matches!(
        config.downgrade(write).await,
        Err(Error::LeaseLost { .. })
    ));
}

/// Issue 26 item 4: an upgradeable read shares with readers but not with a writer
/// or another upgradeable read; its upgrade waits for the readers at the head of
/// the line, ahead of a writer that queued first (no deadlock), and then holds the
/// lock alone; a downgrade lets readers in again.
#[tokio::test]
async fn an_upgradeable_read_upgrades_ahead_of_a_waiting_writer() {
    let (server, client) = common::start().await;
    let config = client.rw_lock("config").unwrap();
    let mut upgradeable = config.upgradeable_read().await.unwrap();
    let read_fence = upgradeable.fence().await.unwrap();
    let reader = config.try_read().await.unwrap();
    assert_eq!(config.readers().await.unwrap(), 2);
    assert!(matches!(config.try_write().await, Err(Error::Busy { .. })));
    assert!(matches!(
        config.try_upgradeable_read().await,
        Err(Error::Busy { .. })
    ));
    // A writer queues first (on another client).
    let other = latchkey::Client::open(&server.url()).await.unwrap();
    let writer = tokio::spawn({
        let theirs = other.rw_lock("config").unwrap();
        async move { theirs.write().await.unwrap() }
    });
    wait_for(|| async { config.waiting().await.unwrap() == 1 }).await;
    // The upgrade waits for the reader, ahead of the writer.
    let upgraded = tokio::spawn(async move {
        upgradeable.upgrade().await.unwrap();
        upgradeable
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!upgraded.is_finished(), "upgraded beside a reader");
    reader.release().await.unwrap();
    let mut upgradeable = tokio::time::timeout(Duration::from_secs(3), upgraded)
        .await
        .expect("the upgrade was not served when the reader left")
        .unwrap();
    assert!(upgradeable.is_upgraded());
    assert_eq!(config.readers().await.unwrap(), u64::MAX);
    assert!(upgradeable.fence().await.unwrap() > read_fence);
    assert!(matches!(config.try_read().await, Err(Error::Busy { .. })));
    assert!(
        !writer.is_finished(),
        "a writer got in beside the upgraded read"
    );
    // Back to reading: still no writer beside it.
    upgradeable.downgrade().await.unwrap();
    assert!(!upgradeable.is_upgraded());
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        !writer.is_finished(),
        "a writer got in beside the upgradeable read"
    );
    assert!(upgradeable.release().await.unwrap());
    let write = tokio::time::timeout(Duration::from_secs(3), writer)
        .await
        .expect("the writer never came in")
        .unwrap();
    write.release().await.unwrap();
    assert_eq!(config.readers().await.unwrap(), 0);
}

/// A dropped upgrade leaves a read; a timed-out one too.
#[tokio::test]
async fn an_upgrade_that_times_out_or_is_dropped_leaves_the_read() {
    let (_server, client) = common::start().await;
    let config = client.rw_lock("config").unwrap();
    let mut upgradeable = config.upgradeable_read().await.unwrap();
    let reader = config.read().await.unwrap();
    let timed_out = upgradeable
        .upgrade_timeout(Duration::from_millis(200))
        .await;
    assert!(
        matches!(timed_out, Err(Error::Busy { .. })),
        "{timed_out:?}"
    );
    let dropped = tokio::time::timeout(Duration::from_millis(50), upgradeable.upgrade()).await;
    assert!(dropped.is_err());
    assert!(!upgradeable.is_upgraded());
    // The line is clear again: a new reader comes in beside both.
    wait_for(|| async { config.waiting().await.unwrap() == 0 }).await;
    let another = config.try_read().await.unwrap();
    assert_eq!(config.readers().await.unwrap(), 3);
    drop((reader, another));
    upgradeable
        .upgrade_timeout(Duration::from_secs(3))
        .await
        .unwrap();
    assert!(upgradeable.release().await.unwrap());
}

/// A downgraded read renews its new lease, and a renewal of the write in flight
/// when it was traded changes nothing.
#[tokio::test]
async fn a_downgraded_read_is_renewed_and_released_on_drop() {
    let (_server, client) = common::start().await;
    let config = client
        .rw_lock("short")
        .unwrap()
        .with_lease(Lease::renewed(Duration::from_millis(300)).unwrap());
    let write = config.write().await.unwrap();
    // Trade just as a renewal is due.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let read = config.downgrade(write).await.unwrap();
    tokio::time::sleep(Duration::from_millis(900)).await;
    assert!(!read.is_lost(), "the read's lease was lost");
    assert_eq!(config.readers().await.unwrap(), 1);
    drop(read);
    wait_for(|| async { config.readers().await.unwrap() == 0 }).await;
}

#[tokio::test]
async fn a_semaphore_a_rw_lock_and_a_lock_of_one_name_are_independent() {
    let (_server, client) = common::start().await;
    let lock = client.mutex("shared").unwrap().try_lock().await.unwrap();
    let permit = client
        .semaphore("shared", 1)
        .unwrap()
        .try_acquire(1)
        .await
        .unwrap();
    let write = client.rw_lock("shared").unwrap().try_write().await.unwrap();
    let listed = client.list("*").await.unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert!(permit.is_held().await.unwrap() && write.is_held().await.unwrap());
    for released in [
        lock.release().await,
        permit.release().await,
        write.release().await,
    ] {
        assert!(released.unwrap());
    }
}

/// Polls `check` every 10 ms for up to 5 s; panics if it never holds.
async fn wait_for<F, Fut>(mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(5);
    while !check().await {
        assert!(Instant::now() < deadline, "condition never held");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A worker that takes one of two permits with a 1 s lease and then keeps
/// reporting whether it knows its lease lost, until killed.
#[test]
#[ignore = "worker process, spawned by a_paused_holder_loses_its_permit_and_knows_it"]
fn sleeper_worker() {
    worker::serve("sleeper_worker", |url| async move {
        let client = latchkey::Client::open(&url).await.unwrap();
        let lease = Lease::renewed(Duration::from_secs(1)).unwrap();
        let pool = client.semaphore("paused", 1).unwrap().with_lease(lease);
        let permit = pool.acquire(1).await.unwrap();
        println!("holding");
        permit.lost().await;
        println!("lost");
        tokio::time::sleep(Duration::from_secs(600)).await;
    });
}

#[test]
fn a_paused_holder_loses_its_permit_and_knows_it() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;

    let server = RedisServer::start().unwrap();
    let mut sleeper = worker::spawn("sleeper_worker", &[("REDIS_URL", server.url())]).unwrap();
    let pid = Pid::from_raw(sleeper.id() as i32);
    let mut lines = BufReader::new(sleeper.stdout.take().unwrap()).lines();
    assert!(lines.any(|l| l.unwrap().contains("holding")));
    // A stop-the-world pause (GC, swap, SIGSTOP) longer than the lease.
    kill(pid, Signal::SIGSTOP).unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let taken = runtime.block_on(async {
        let client = latchkey::Client::open(&server.url()).await.unwrap();
        let pool = client.semaphore("paused", 1).unwrap();
        pool.acquire_timeout(1, Duration::from_secs(5))
            .await
            .unwrap()
    });
    kill(pid, Signal::SIGCONT).unwrap();
    // Back from the pause, the old holder learns its lease is gone.
    assert!(lines.any(|l| l.unwrap().contains("lost")));
    runtime.block_on(async { assert!(taken.is_held().await.unwrap()) });
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
}

#[tokio::test]
async fn a_waiter_gets_its_permit_after_its_connections_were_killed() {
    let (server, client) = common::start().await;
    let pool = client.semaphore("reset", 1).unwrap();
    let held = pool.acquire(1).await.unwrap();
    let waiter = tokio::spawn({
        let pool = pool.clone();
        async move { pool.acquire(1).await.unwrap() }
    });
    wait_for(|| async { pool.waiting().await.unwrap() == 1 }).await;
    // Every connection, the subscriber's included, is reset under the waiter.
    let mut admin = common::connect(&server.url()).await;
    for kind in ["pubsub", "normal"] {
        let _: i64 = redis::cmd("CLIENT")
            .arg("KILL")
            .arg("TYPE")
            .arg(kind)
            .arg("SKIPME")
            .arg("yes")
            .query_async(&mut admin)
            .await
            .unwrap();
    }
    // The release may meet the reset connection (Unreachable); the dropped hold
    // then releases again in the background.
    if let Err(error) = held.release().await {
        assert!(error.is_transient(), "{error:?}");
    }
    let got = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("the waiter never got the permit after the reset")
        .unwrap();
    assert!(got.release().await.unwrap());
}

#[tokio::test]
async fn waits_dropped_at_any_point_leave_no_permit_and_no_place_behind() {
    let (_server, client) = common::start().await;
    let pool = client.semaphore("cancelled", 2).unwrap();
    let holders: Vec<_> = (0..4)
        .map(|task| {
            let pool = pool.clone();
            tokio::spawn(async move {
                for round in 0..30u64 {
                    // Cut off at every stage: before the reply, queued, just granted.
                    let patience = Duration::from_micros(100 + (task * 37 + round * 211) % 3000);
                    if let Ok(Ok(permit)) = tokio::time::timeout(patience, pool.acquire(1)).await {
                        tokio::time::sleep(Duration::from_micros(300)).await;
                        drop(permit);
                    }
                }
            })
        })
        .collect();
    for holder in holders {
        holder.await.unwrap();
    }
    assert!(latchkey::finish_background_releases(Duration::from_secs(5)).await);
    wait_for(|| async {
        pool.available().await.unwrap() == 2 && pool.waiting().await.unwrap() == 0
    })
    .await;
    let both = pool.try_acquire(2).await.unwrap();
    both.release().await.unwrap();
}

#[tokio::test]
async fn the_weight_held_survives_a_lost_tally_and_ended_leases() {
    let (server, client) = common::start().await;
    let fixed = Lease::fixed(Duration::from_millis(300)).unwrap();
    let pool = client.semaphore("tally", 3).unwrap().with_lease(fixed);
    std::mem::forget(pool.acquire(1).await.unwrap());
    std::mem::forget(pool.acquire(1).await.unwrap());
    // The sum kept beside the holders is evicted: it is counted again from them.
    let mut admin = common::connect(&server.url()).await;
    let removed: i64 = admin.del("{tally}:lk:sem:lk:used").await.unwrap();
    assert_eq!(
        removed, 1,
        "the semaphore keeps no weight sum where expected"
    );
    assert_eq!(pool.available().await.unwrap(), 1);
    assert!(matches!(pool.try_acquire(2).await, Err(Error::Busy { .. })));
    // Both leases end unreleased; the whole semaphore is free again.
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(pool.available().await.unwrap(), 3);
    let all = pool.try_acquire(3).await.unwrap();
    all.release().await.unwrap();
    let keys: Vec<String> = admin.keys("*").await.unwrap();
    for key in keys {
        let pttl: i64 = admin.pttl(&key).await.unwrap();
        assert!(pttl > 0, "{key} has no expiry");
    }
}

/// A weight sum written by hand ("-5", "nan") is counted again from the holders,
/// never trusted: it would let more holders in than there are permits.
#[tokio::test]
async fn a_weight_sum_that_is_not_a_count_is_counted_again() {
    let (server, client) = common::start().await;
    let pool = client.semaphore("odd", 1).unwrap();
    let held = pool.try_acquire(1).await.unwrap();
    let mut admin = common::connect(&server.url()).await;
    for stored in ["-5", "nan", "0.5", "inf"] {
        let _: () = admin.set("{odd}:lk:sem:lk:used", stored).await.unwrap();
        let second = pool.try_acquire(1).await;
        assert!(
            matches!(second, Err(Error::Busy { .. })),
            "{stored}: {second:?}"
        );
        assert_eq!(pool.available().await.unwrap(), 0, "{stored}");
    }
    assert!(held.release().await.unwrap());
}

/// A holder another writer left in the holders set (no weight, a weight of 0, past
/// 2^53 or past 2^64) counts for nothing, ended or live, when a call must count
/// the holders again (their sum was lost): never summed into a wrong count, never
/// a script error. `inspect` skips it too.
#[tokio::test]
async fn a_holder_latchkey_did_not_write_counts_for_nothing() {
    let (server, client) = common::start().await;
    let pool = client.semaphore("odd", 3).unwrap();
    let held = pool.try_acquire(1).await.unwrap();
    let mut admin = common::connect(&server.url()).await;
    let holders = "{odd}:lk:sem";
    for member in [
        "-5*x",
        "0*x",
        "3*",
        "9007199254740993*x",
        "99999999999999999999*x",
    ] {
        for score in [1.0, 9e13] {
            let _: () = admin.zadd(holders, member, score).await.unwrap();
            let _: () = admin.del("{odd}:lk:sem:lk:used").await.unwrap();
            let second = pool.try_acquire(2).await;
            let second = second.unwrap_or_else(|e| panic!("{member} at {score}: {e:?}"));
            let seen = client.inspect("odd").await.unwrap();
            let Some(latchkey::inspect::Primitive::Semaphore(permits)) = seen.first() else {
                panic!("{member}: {seen:?}");
            };
            assert_eq!((permits.used, permits.holders.len()), (3, 2), "{member}");
            assert!(matches!(pool.try_acquire(1).await, Err(Error::Busy { .. })));
            assert!(second.release().await.unwrap());
            let _: () = admin.zrem(holders, member).await.unwrap();
        }
    }
    assert_eq!(pool.available().await.unwrap(), 2);
    assert!(held.release().await.unwrap());
}

/// Waiter entries another writer left at the head of a semaphore's line (no weight
/// latchkey writes, a lease far ahead) wait for nothing: the release that reaches
/// them drops them and serves the waiter behind them, instead of a line blocked
/// until their lease ends.
#[tokio::test]
async fn a_waiter_latchkey_did_not_write_is_dropped_from_the_line() {
    let (server, client) = common::start().await;
    let pool = client.semaphore("odd-line", 2).unwrap();
    let held = pool.acquire(2).await.unwrap();
    let mut admin = common::connect(&server.url()).await;
    let (queue, leases) = ("{odd-line}:lk:sem:lk:queue", "{odd-line}:lk:sem:lk:leases");
    let waiter = tokio::spawn({
        let pool = pool.clone();
        async move { pool.acquire(1).await }
    });
    let queued = Instant::now();
    while admin.zcard::<_, usize>(queue).await.unwrap() == 0 {
        assert!(queued.elapsed() < Duration::from_secs(5), "never queued");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Ahead of the waiter (it arrived after 1 µs), alive for centuries.
    for member in [
        "f30000/0*x",
        "f30000/-5*x",
        "P30000/99999999999999999999*x",
        "f30000/junk",
    ] {
        let _: () = admin.zadd(queue, member, 1).await.unwrap();
        let _: () = admin.zadd(leases, member, 9e13).await.unwrap();
    }
    assert!(held.release().await.unwrap());
    let served = tokio::time::timeout(Duration::from_secs(5), waiter).await;
    let permit = served
        .expect("the line stayed blocked behind entries nobody will take")
        .unwrap()
        .unwrap();
    let left: Vec<String> = admin.zrange(queue, 0, -1).await.unwrap();
    assert!(left.is_empty(), "{left:?}");
    assert_eq!(pool.available().await.unwrap(), 1);
    assert!(permit.release().await.unwrap());
}

/// Issue "A newcomer's second hour", item 5: the permit count is stored with the
/// semaphore while it is in use. A caller that says 2 where the holders said 1 is
/// refused, instead of becoming a second holder of a one-permit semaphore; once
/// nobody holds or waits, a new count is taken.
#[tokio::test]
async fn a_caller_with_another_permit_count_is_refused_while_in_use() {
    let (_server, client) = common::start().await;
    let one = client.semaphore("gate", 1).unwrap();
    let two = client.semaphore("gate", 2).unwrap();
    let held = one.acquire(1).await.unwrap();
    let refused = two.try_acquire(1).await.unwrap_err();
    match &refused {
        Error::InvalidArgument(message) => {
            assert!(
                message.contains("\"gate\" is in use with 1 permits, not 2"),
                "{message}"
            )
        }
        other => panic!("not refused as a misuse: {other}"),
    }
    assert!(
        two.acquire_timeout(1, Duration::from_millis(200))
            .await
            .is_err()
    );
    assert_eq!(one.available().await.unwrap(), 0);
    assert!(held.release().await.unwrap());
    // Idle now: the new count is taken, and then it is the one that holds.
    let first = two.acquire(1).await.unwrap();
    let second = two.try_acquire(1).await.unwrap();
    assert!(matches!(
        one.try_acquire(1).await,
        Err(Error::InvalidArgument(_))
    ));
    first.release().await.unwrap();
    second.release().await.unwrap();
}

#[tokio::test]
async fn inspect_list_and_force_release_see_every_primitive() {
    use latchkey::Kind;
    use latchkey::inspect::Primitive;
    let server = RedisServer::start().unwrap();
    let client = latchkey::Client::open(&server.url())
        .await
        .unwrap()
        .with_prefix("app:")
        .unwrap();
    let lease = Lease::renewed(Duration::from_secs(1)).unwrap();
    let pool = client.semaphore("pool", 3).unwrap().with_lease(lease);
    let two = pool.acquire(2).await.unwrap();
    let one = pool.acquire(1).await.unwrap();
    let config = client.rw_lock("config").unwrap();
    let reader = config.read().await.unwrap();
    let _lock = client.mutex("job").unwrap().lock().await.unwrap();

    // Busy messages name the primitive and its name, never an internal key.
    let full = pool.try_acquire(1).await.map(drop).unwrap_err().to_string();
    assert!(
        full.starts_with(
            "semaphore \"app:pool\" is busy: no permit free; the first lease to end ("
        ),
        "{full}"
    );
    assert!(!full.contains(":lk:"), "{full}");
    let write = config.try_write().await.map(drop).unwrap_err().to_string();
    assert!(
        write.starts_with("read-write lock \"app:config\" is busy"),
        "{write}"
    );

    let found = client.inspect("pool").await.unwrap();
    let [Primitive::Semaphore(status)] = &found[..] else {
        panic!("{found:?}")
    };
    assert_eq!(
        (status.permits, status.used, status.live, status.available()),
        (Some(3), 3, 2, Some(0))
    );
    let mut weights: Vec<u64> = status.holders.iter().map(|h| h.weight).collect();
    weights.sort();
    assert_eq!(weights, [1, 2]);
    for holder in &status.holders {
        assert!(
            holder.ttl > Duration::ZERO && holder.ttl <= Duration::from_secs(1),
            "{holder:?}"
        );
        assert_eq!(holder.masked_owner(), format!("{}…", &holder.owner[..4]));
    }
    assert!(client.inspect("nothing").await.unwrap().is_empty());

    let listed = common::listed(&client, "*").await;
    let expected = [
        ("config", Kind::RwLock),
        ("job", Kind::Lock),
        ("pool", Kind::Semaphore),
    ];
    assert_eq!(listed, expected.map(|(n, k)| (n.to_owned(), k)));
    assert_eq!(client.list_all("p*").await.unwrap().len(), 1);

    // Broken: every permit dropped, their guards learn it, the permits are free.
    let was = client.force_release("pool", Kind::Semaphore).await.unwrap();
    let Some(Primitive::Semaphore(was)) = was else {
        panic!("{was:?}")
    };
    assert_eq!((was.used, was.live), (3, 2));
    assert_eq!(pool.available().await.unwrap(), 3);
    tokio::time::timeout(Duration::from_secs(10), two.lost())
        .await
        .unwrap();
    let lost = one
        .extend(Duration::from_secs(1))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        lost.starts_with("semaphore \"app:pool\" is no longer held"),
        "{lost}"
    );
    assert!(!one.release().await.unwrap(), "its permit was broken");
    assert!(
        client
            .force_release("pool", Kind::Semaphore)
            .await
            .unwrap()
            .is_none()
    );
    drop(reader);
}

#[tokio::test]
async fn list_all_finds_tagged_names_and_survives_foreign_keys() {
    use latchkey::inspect::Primitive;
    let server = RedisServer::start().unwrap();
    let client = latchkey::Client::open(&server.url()).await.unwrap();
    let _pool = client
        .semaphore("{u1}:pool", 2)
        .unwrap()
        .acquire(1)
        .await
        .unwrap();
    let _open = client
        .semaphore("x{y", 2)
        .unwrap()
        .acquire(1)
        .await
        .unwrap();
    let sms = latchkey::ratelimit::Policy::cooldown(Duration::from_secs(60)).unwrap();
    assert!(
        client
            .rate_limiter("{u4}:sms", sms)
            .unwrap()
            .check(1)
            .await
            .unwrap()
            .allowed
    );
    let _held = client.mutex("x").unwrap().lock().await.unwrap();
    // Another application's data: bytes that are no text, a counter that is no
    // number, a companion key of the wrong type.
    let mut raw = server.connection().unwrap();
    let _: () = redis::cmd("SET")
        .arg("blob")
        .arg(&b"\xff\xfe\x00"[..])
        .query(&mut raw)
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg("{real}:lk:fence")
        .arg("abc")
        .query(&mut raw)
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg("{x}:lk:sem")
        .arg("foo")
        .query(&mut raw)
        .unwrap();

    let listed: Vec<String> = client
        .list_all("*")
        .await
        .unwrap()
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    for name in ["{u1}:pool", "x{y", "{u4}:sms", "x", "blob"] {
        assert!(
            listed.iter().any(|n| n == name),
            "{name} missing from {listed:?}"
        );
    }
    let x = client.inspect("x").await.unwrap();
    assert!(
        matches!(&x[..], [Primitive::Lock(status)] if status.is_held_by_latchkey()),
        "{x:?}"
    );
    let blob = client.inspect("blob").await.unwrap();
    assert!(
        matches!(&blob[..], [Primitive::Lock(status)] if !status.is_held_by_latchkey()),
        "{blob:?}"
    );
}

/// A semaphore's first permit writes four keys with no read before some of them
/// (the idle path of `acquire_alone.lua`). A key of another type where one of them
/// goes is a clear error, and nothing is written: no permit held by nobody.
#[tokio::test]
async fn a_key_of_another_type_fails_an_acquire_with_nothing_written() {
    let (server, client) = common::start().await;
    let mut raw = common::connect(&server.url()).await;
    for key in ["", ":lk:used", ":lk:permits"] {
        let name = format!("typed{}", key.replace(':', "-"));
        let holders = format!("{{{name}}}:lk:sem");
        let typed = format!("{holders}{key}");
        let _: () = raw.rpush(&typed, "not a string").await.unwrap();
        let semaphore = client.semaphore(&name, 2).unwrap();
        for result in [
            semaphore.try_acquire(1).await,
            semaphore
                .acquire_timeout(1, Duration::from_millis(200))
                .await,
        ] {
            assert!(
                matches!(result, Err(Error::WrongType { .. })),
                "{typed}: {result:?}"
            );
        }
        let keys: Vec<String> = raw.keys(format!("{{{name}}}*")).await.unwrap();
        assert_eq!(keys, [typed], "a failed acquire wrote beside the typed key");
    }
}
