//! Redis Cluster: three primaries with a replica each, from real server processes.
//! Locks on different primaries exclude, wait, wake and fence; a release's wake-up
//! stays within its shard; listing walks every primary; a failover (manual, or a
//! primary killed) keeps holders' validity apart and fences growing.

mod common;

use std::time::{Duration, Instant};

use common::turns::{
    Holds, Turns, UnderLoad, assert_exclusive_and_fenced, assert_fair_order, assert_release_wakes,
    take_turns,
};
use latchkey::{Client, Lease};
use latchkey_testkit::{RedisCluster, RedisServer, worker};
use redis::AsyncCommands;

async fn client(cluster: &RedisCluster) -> Client {
    Client::open_cluster(&cluster.seeds()).await.unwrap()
}

/// Lock names whose slots live on three different primaries.
fn names_on_every_primary(cluster: &RedisCluster) -> Vec<String> {
    let mut names: Vec<(usize, String)> = Vec::new();
    for n in 0.. {
        let name = format!("job-{n}");
        let primary = cluster.primary_of(&name).unwrap();
        if names.iter().all(|(p, _)| *p != primary) {
            names.push((primary, name));
        }
        if names.len() == 3 {
            return names.into_iter().map(|(_, name)| name).collect();
        }
    }
    unreachable!()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_on_every_primary_exclude_and_fence() {
    let cluster = RedisCluster::start().unwrap();
    let mut tasks = Vec::new();
    let mut all = Vec::new();
    for (i, name) in names_on_every_primary(&cluster).into_iter().enumerate() {
        let holds = Holds::default();
        all.push(holds.clone());
        // The first lock is fair (queued FIFO), the others plain.
        let turns = Turns {
            name,
            fair: i == 0,
            rounds: 8,
            work: Duration::from_millis(2),
            ttl: Duration::from_secs(5),
        };
        for _ in 0..3 {
            let task = take_turns(client(&cluster).await, turns.clone(), holds.clone());
            tasks.push(tokio::spawn(task));
        }
    }
    for task in tasks {
        assert_eq!(task.await.unwrap(), 0, "a lock attempt failed");
    }
    for holds in &all {
        assert_eq!(holds.lock().unwrap().len(), 24);
        assert_exclusive_and_fenced(holds);
    }
}

/// Calls of `command` on `node` (inner calls of scripts included).
fn calls(cluster: &RedisCluster, node: usize, command: &str) -> u64 {
    let mut conn = cluster.nodes()[node].connection().unwrap();
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut conn)
        .unwrap();
    let prefix = format!("cmdstat_{command}:calls=");
    info.lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .and_then(|rest| rest.split(',').next())
        .map_or(0, |n| n.parse().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_wakes_its_waiter_within_its_shard_only() {
    let cluster = RedisCluster::start().unwrap();
    let name = names_on_every_primary(&cluster).remove(1);
    let owner = cluster.primary_of(&name).unwrap();
    assert_release_wakes(&client(&cluster).await, &client(&cluster).await, &name).await;
    for (node, server) in cluster.nodes().iter().enumerate() {
        assert_eq!(
            calls(&cluster, node, "publish"),
            0,
            "a classic PUBLISH on port {}",
            server.port()
        );
        let primary_elsewhere = node != owner && cluster.replica_of(&name).unwrap() != node;
        if primary_elsewhere {
            assert_eq!(
                calls(&cluster, node, "spublish"),
                0,
                "SPUBLISH reached port {}",
                server.port()
            );
        }
    }
    assert!(
        calls(&cluster, owner, "spublish") > 0,
        "the release published nothing"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fair_waiters_take_turns_in_order_on_every_primary() {
    let cluster = RedisCluster::start().unwrap();
    for name in names_on_every_primary(&cluster) {
        let mut waiters = Vec::new();
        for _ in 0..3 {
            waiters.push(client(&cluster).await);
        }
        assert_fair_order(&client(&cluster).await, waiters, &name).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watchdog_renews_on_every_primary() {
    let cluster = RedisCluster::start().unwrap();
    let holder = client(&cluster).await;
    let mut guards = Vec::new();
    for name in names_on_every_primary(&cluster) {
        let lease = Lease::renewed(Duration::from_millis(300)).unwrap();
        guards.push(
            holder
                .mutex(&name)
                .unwrap()
                .with_lease(lease)
                .try_lock()
                .await
                .unwrap(),
        );
    }
    // Five leases long: only renewals keep them.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let other = client(&cluster).await;
    for guard in guards {
        let name = guard.key().as_str().to_owned();
        assert!(
            other.mutex(&name).unwrap().try_lock().await.is_err(),
            "{name} expired"
        );
        assert!(!guard.is_lost());
        assert!(guard.release().await.unwrap());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_and_status_walk_every_primary() {
    let cluster = RedisCluster::start().unwrap();
    let client = client(&cluster).await.with_prefix("app:").unwrap();
    let names = names_on_every_primary(&cluster);
    let mut guards = Vec::new();
    for name in &names {
        guards.push(client.mutex(name).unwrap().try_lock().await.unwrap());
    }
    let listed: Vec<String> = client
        .list("*")
        .await
        .unwrap()
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    let mut expected = names.clone();
    expected.sort();
    assert_eq!(listed, expected);
    let fence = guards[0].fence().await.unwrap();
    let status = client.mutex(&names[0]).unwrap().status().await.unwrap();
    assert!(status.is_held_by_latchkey());
    assert_eq!(status.fence, Some(fence));
}

/// Locks under load while `fault` fails over the primary of the lock; every hold
/// stays exclusive, fences grow, and locks are taken again after the failover.
async fn under_failover(fault: impl FnOnce(&mut RedisCluster, usize, usize)) {
    let mut cluster = RedisCluster::start().unwrap();
    let name = names_on_every_primary(&cluster).remove(0);
    // Made before the failover: its subscriber connection must follow it.
    let waiter = client(&cluster).await;
    let mut clients = Vec::new();
    for _ in 0..3 {
        clients.push(client(&cluster).await);
    }
    let load = UnderLoad::start(clients, &name);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (primary, replica) = (
        cluster.primary_of(&name).unwrap(),
        cluster.replica_of(&name).unwrap(),
    );
    let failed_over_at = Instant::now();
    tokio::task::block_in_place(|| fault(&mut cluster, primary, replica));
    load.assert_survived(failed_over_at).await;
    assert_eq!(
        cluster.primary_of(&name).unwrap(),
        replica,
        "the replica took over"
    );
    assert_release_wakes(&client(&cluster).await, &waiter, &name).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manual_failover_keeps_holds_exclusive() {
    under_failover(|cluster, _, replica| {
        cluster.fail_over_to(replica).unwrap();
        cluster.wait_healthy().unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_primary_keeps_holds_exclusive() {
    under_failover(|cluster, primary, _| {
        cluster.nodes_mut()[primary].kill().unwrap();
        cluster.wait_healthy().unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_primary_is_left_behind() {
    // SIGSTOP keeps its sockets open: replies just stop coming, until the cluster
    // fails the node over. The connection to it must be replaced, not waited on.
    under_failover(|cluster, primary, replica| {
        cluster.nodes()[primary].pause().unwrap();
        cluster.wait_promoted(replica).unwrap();
        cluster.wait_healthy_without(primary).unwrap();
        // Requests still queued on the paused node would run there as it wakes,
        // before it learns it was demoted (Redis's own split brain, which no client
        // can see): resume it only once every client gave up on them (reply timeout).
        std::thread::sleep(Duration::from_millis(1_500));
        cluster.nodes()[primary].resume().unwrap();
        cluster.wait_healthy().unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_callers_cluster_connection_lists_every_primary() {
    let cluster = RedisCluster::start().unwrap();
    let conn = redis::cluster::ClusterClient::new(cluster.seeds())
        .unwrap()
        .get_async_connection()
        .await
        .unwrap();
    let client = Client::with_store(latchkey::store::RedisStore::from_connection(conn));
    let names = names_on_every_primary(&cluster);
    let mut guards = Vec::new();
    for name in &names {
        guards.push(client.mutex(name).unwrap().try_lock().await.unwrap());
    }
    assert_eq!(client.list("*").await.unwrap().len(), 3);
}

const PROCESSES: usize = 4;
const TASKS: usize = 4;
const ROUNDS: usize = 50;
const COUNTER: &str = "test:counter";

/// Each task increments a counter (on a server of its own) with a non-atomic GET
/// then SET inside the cluster lock, and the worker prints how many it made.
#[test]
#[ignore = "worker process, spawned by increments_from_many_processes_are_exact_through_a_failover"]
fn cluster_increment_worker() {
    worker::serve("cluster_increment_worker", |counter_url| async move {
        let seeds: Vec<String> = worker::env("SEEDS").split(',').map(str::to_owned).collect();
        let client = Client::open_cluster(&seeds).await.unwrap();
        let mut tasks = Vec::new();
        for _ in 0..TASKS {
            let mutex = client
                .mutex("counter-lock")
                .unwrap()
                .with_lease(Lease::renewed(Duration::from_secs(2)).unwrap());
            let mut conn = common::connect(&counter_url).await;
            tasks.push(tokio::spawn(async move {
                let mut made = 0;
                for _ in 0..ROUNDS {
                    // A failover in progress: try the round again.
                    let Ok(guard) = mutex.lock_timeout(Duration::from_secs(30)).await else {
                        continue;
                    };
                    let value: Option<i64> = conn.get(COUNTER).await.unwrap();
                    // Widen the race window: without the lock, others read the same value.
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    let _: () = conn.set(COUNTER, value.unwrap_or(0) + 1).await.unwrap();
                    made += 1;
                    let _ = guard.release().await;
                }
                made
            }));
        }
        let mut made = 0;
        for task in tasks {
            made += task.await.unwrap();
        }
        println!("MADE {made}");
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn increments_from_many_processes_are_exact_through_a_failover() {
    let cluster = RedisCluster::start().unwrap();
    let counter = RedisServer::start().unwrap();
    let seeds = cluster.seeds().join(",");
    let mut workers: Vec<_> = (0..PROCESSES)
        .map(|_| {
            let env = [("REDIS_URL", counter.url()), ("SEEDS", seeds.clone())];
            worker::spawn("cluster_increment_worker", &env).unwrap()
        })
        .collect();
    // A manual failover of the lock's shard while they work: it loses nothing, so
    // exclusion must hold throughout.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let replica = cluster.replica_of("counter-lock").unwrap();
    tokio::task::block_in_place(|| cluster.fail_over_to(replica).unwrap());
    let mut working = 0;
    for worker in &mut workers {
        working += usize::from(worker.try_wait().unwrap().is_none());
    }
    assert!(working > 0, "the workers were done before the failover");
    let made: i64 = tokio::task::block_in_place(|| {
        workers
            .into_iter()
            .map(|child| {
                let output = child.wait_with_output().unwrap();
                assert!(
                    output.status.success(),
                    "{}",
                    String::from_utf8_lossy(&output.stderr)
                );
                let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
                let made = stdout.split("MADE ").nth(1).expect("the worker reported");
                made.split_whitespace()
                    .next()
                    .unwrap()
                    .parse::<i64>()
                    .unwrap()
            })
            .sum()
    });
    let total: i64 = redis::Commands::get(&mut counter.connection().unwrap(), COUNTER).unwrap();
    assert_eq!(
        total, made,
        "increments were lost: two processes held the lock at once"
    );
    assert!(
        made > (PROCESSES * TASKS * ROUNDS / 2) as i64,
        "only {made} rounds succeeded"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semaphores_and_rate_limits_work_on_every_primary_and_transactions_say_why_not() {
    let cluster = RedisCluster::start().unwrap();
    let client = client(&cluster).await;
    for name in names_on_every_primary(&cluster) {
        let pool = client.semaphore(&name, 1).unwrap();
        let held = pool.acquire(1).await.unwrap();
        let waiter = tokio::spawn({
            let pool = pool.clone();
            async move { pool.acquire(1).await.unwrap() }
        });
        while pool.waiting().await.unwrap() == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        // The release's wake-up reaches the waiter through its shard (SPUBLISH).
        let released = Instant::now();
        held.release().await.unwrap();
        let got = waiter.await.unwrap();
        assert!(
            released.elapsed() < Duration::from_secs(2),
            "woken by a timer, not the release"
        );
        got.release().await.unwrap();

        let policy = latchkey::ratelimit::Policy::gcra(1, Duration::from_secs(60), 1).unwrap();
        let limiter = client.rate_limiter(&name, policy).unwrap();
        assert!(limiter.check(2).await.unwrap().allowed);
        assert!(!limiter.check(1).await.unwrap().allowed);
    }
    let tx = client.transaction(&["{t}:a"]).unwrap();
    let refused: latchkey::Result<Option<()>> = tx.run(|_| async { Ok(None) }).await;
    let error = refused.unwrap_err();
    assert!(
        matches!(error, latchkey::Error::InvalidArgument(_)),
        "{error:?}"
    );
    assert!(error.to_string().contains("cluster"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_all_finds_semaphores_and_rate_limits_on_every_primary() {
    let cluster = RedisCluster::start().unwrap();
    let client = client(&cluster).await.with_prefix("app:").unwrap();
    let names = names_on_every_primary(&cluster);
    let mut permits = Vec::new();
    for name in &names {
        permits.push(client.semaphore(name, 2).unwrap().acquire(1).await.unwrap());
    }
    let limiter = client
        .rate_limiter(
            "sms",
            latchkey::ratelimit::Policy::cooldown(Duration::from_secs(60)).unwrap(),
        )
        .unwrap();
    assert!(limiter.check(1).await.unwrap().allowed);
    let listed = common::listed(&client, "*").await;
    let mut expected: Vec<_> = names
        .iter()
        .map(|name| (name.clone(), latchkey::Kind::Semaphore))
        .chain([("sms".to_owned(), latchkey::Kind::RateLimit)])
        .collect();
    expected.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(listed, expected);
}

/// A survey walks every primary, one SCAN each per refresh, and finds what is
/// held on each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_survey_walks_every_primary() {
    let cluster = RedisCluster::start().unwrap();
    let client = client(&cluster).await;
    let names = names_on_every_primary(&cluster);
    let mut guards = Vec::new();
    for name in &names {
        guards.push(client.mutex(name).unwrap().lock().await.unwrap());
    }
    let pool = client.semaphore("pool", 2).unwrap();
    let _permit = pool.acquire(1).await.unwrap();
    let mut survey = client.survey();
    let done = survey.refresh().await.unwrap();
    assert!(done.walk_completed, "{done:?}");
    assert_eq!(done.scans, 3, "one SCAN per primary: {done:?}");
    let mut seen: Vec<(String, latchkey::Kind)> = survey
        .sightings()
        .map(|s| (s.name, s.primitive.kind()))
        .collect();
    seen.sort_by(|a, b| a.0.cmp(&b.0));
    let mut expected: Vec<_> = names
        .iter()
        .map(|name| (name.clone(), latchkey::Kind::Lock))
        .chain([("pool".to_owned(), latchkey::Kind::Semaphore)])
        .collect();
    expected.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(seen, expected);
    assert_eq!(survey.deployment(), "cluster");
}

/// While a lock's slot moves to another primary (its keys one `MIGRATE` at a time,
/// as `redis-cli --cluster reshard` does), a script on its keys meets `ASK` and
/// `TRYAGAIN`. `try_lock` and `release` must ride them out: only "busy" or "ours"
/// answers, never an error, and the lock works on its new primary afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slot_migration_is_ridden_out_by_try_lock_and_release() {
    let cluster = RedisCluster::start().unwrap();
    let client = client(&cluster).await;
    let mutex = client.mutex("moving").unwrap();
    // The lock's keys exist (queue and fence too) before the move starts.
    mutex.lock().await.unwrap().release().await.unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stopped = stop.clone();
    let hammer = tokio::spawn(async move {
        let (mut held, mut busy, mut errors) = (0, 0, Vec::new());
        while !stopped.load(std::sync::atomic::Ordering::Relaxed) {
            match mutex.try_lock().await {
                Ok(guard) => {
                    held += 1;
                    match guard.release().await {
                        Ok(true) => {}
                        Ok(false) => errors.push("release: the lock was not ours".into()),
                        Err(error) => errors.push(format!("release: {error}")),
                    }
                }
                Err(latchkey::Error::Busy { .. }) => busy += 1,
                Err(error) => errors.push(format!("try_lock: {error}")),
            }
        }
        (held, busy, errors)
    });
    let mut moved_to = 0;
    for _ in 0..6 {
        let pause = Duration::from_millis(40);
        (_, moved_to) =
            tokio::task::block_in_place(|| cluster.migrate_slot("moving", pause).unwrap());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (held, busy, errors) = hammer.await.unwrap();
    assert!(errors.is_empty(), "errors during the migration: {errors:?}");
    assert!(held > 50, "only {held} holds ({busy} busy)");
    let now = cluster.primary_of("moving").unwrap();
    assert_eq!(cluster.nodes()[now].port(), moved_to);
    drop(client.mutex("moving").unwrap().lock().await.unwrap());
}

/// An election on every primary: one leader each, observers woken through sharded
/// pub/sub (the proclamation's message stays within the election's shard).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elections_on_every_primary_lead_and_tell_their_observers() {
    let cluster = RedisCluster::start().unwrap();
    let (a, b) = (client(&cluster).await, client(&cluster).await);
    for name in names_on_every_primary(&cluster) {
        let mut observer = b.election(&name).unwrap().observe().unwrap();
        assert_eq!(observer.changed().await.unwrap(), None);
        let leading = a.election(&name).unwrap().campaign("host-a").await.unwrap();
        let seen = tokio::time::timeout(Duration::from_secs(3), observer.changed()).await;
        let seen = seen.expect("told of the new leader").unwrap().unwrap();
        assert_eq!((seen.value.as_str(), seen.term), ("host-a", leading.term()));
        let busy = b.election(&name).unwrap().try_campaign("host-b").await;
        assert!(busy.is_err());
        leading.resign().await.unwrap();
        let seen = tokio::time::timeout(Duration::from_secs(3), observer.changed()).await;
        assert_eq!(seen.expect("told of the resignation").unwrap(), None);
    }
}

/// A multi-lock whose locks live on three primaries: all or nothing across nodes,
/// and a waiter on another client is woken by the release of the lock it waits for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multi_lock_spans_every_primary() {
    let cluster = RedisCluster::start().unwrap();
    let (a, b) = (client(&cluster).await, client(&cluster).await);
    let names = names_on_every_primary(&cluster);
    let last = b.mutex(&names[2]).unwrap().lock().await.unwrap();
    let set = a.multi_lock(&names).unwrap();
    assert!(set.try_lock().await.is_err(), "one lock of the set is held");
    for name in &names[..2] {
        let deadline = Instant::now() + Duration::from_millis(500);
        while a.mutex(name).unwrap().is_locked().await.unwrap() {
            assert!(
                Instant::now() < deadline,
                "{name} left held by a failed try"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    let waiting = tokio::spawn(async move { set.lock().await.unwrap() });
    tokio::time::sleep(Duration::from_millis(200)).await;
    last.release().await.unwrap();
    let all = tokio::time::timeout(Duration::from_secs(3), waiting)
        .await
        .expect("woken by the release")
        .unwrap();
    assert_eq!(all.fences().await.unwrap().len(), 3);
    assert!(all.release().await.unwrap());
}
