//! Promises kept under faults: one regression test per defect of the reliability
//! review (issue "Keep every promise under faults"), each against real servers.

mod common;

use std::time::{Duration, Instant};

use latchkey::store::{AcquireRequest, Attempt, LockStore, Pass};
use latchkey::{Client, Error, OwnerToken, Ttl};
use latchkey_testkit::{FaultProxy, NewConnections, RedisServer, Restart};
use redis::AsyncCommands;

/// Takes and releases `lock` `n` times; returns the fencing tokens in order.
async fn fences(url: &str, lock: &str, n: usize) -> Vec<u64> {
    let client = Client::open(url).await.unwrap();
    let mutex = client.mutex(lock).unwrap();
    let mut tokens = Vec::new();
    for _ in 0..n {
        let guard = mutex.lock_timeout(Duration::from_secs(5)).await.unwrap();
        tokens.push(guard.fence().await.unwrap());
        guard.release().await.unwrap();
    }
    tokens
}

/// Item 1: a counter restored older than it was (an RDB snapshot taken before the
/// last grants) must not hand out tokens again: three tokens, SAVE, three more,
/// kill -9, restart from the snapshot, and the next ones exceed all six.
#[tokio::test]
async fn fences_keep_growing_after_a_restart_from_an_older_snapshot() {
    let mut server = RedisServer::start().unwrap();
    let mut before = fences(&server.url(), "snap", 3).await;
    server.save().unwrap();
    before.extend(fences(&server.url(), "snap", 3).await);
    server.restart_from(Restart::Snapshot).unwrap();
    let after = fences(&server.url(), "snap", 3).await;
    let last = before.iter().max().unwrap();
    assert!(after.iter().all(|f| f > last), "{before:?} then {after:?}");
}

/// Item 1, failover: a replica that missed the last grants is promoted; its counter
/// is older than the tokens already handed out, yet the next tokens exceed them.
#[tokio::test]
async fn fences_keep_growing_after_failover_to_a_replica_that_missed_writes() {
    let mut primary = RedisServer::start().unwrap();
    let replica = RedisServer::start().unwrap();
    replica.replicate(&primary).unwrap();
    let mut before = fences(&primary.url(), "failover", 3).await;
    let copies: u64 = redis::cmd("WAIT")
        .arg(1)
        .arg(5000)
        .query(&mut primary.connection().unwrap())
        .unwrap();
    assert_eq!(copies, 1, "the replica never got the first grants");
    // Detached, it misses everything from here on, as a lagging replica would.
    replica.promote().unwrap();
    before.extend(fences(&primary.url(), "failover", 3).await);
    primary.kill().unwrap();
    let after = fences(&replica.url(), "failover", 3).await;
    let last = before.iter().max().unwrap();
    assert!(after.iter().all(|f| f > last), "{before:?} then {after:?}");
}

/// Polls `check` every 10 ms until it holds; false if it still fails after `limit`.
async fn eventually(limit: Duration, mut check: impl AsyncFnMut() -> bool) -> bool {
    let started = Instant::now();
    while started.elapsed() < limit {
        if check().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    check().await
}

/// Item 2: a holder passes the lock to a local waiter in Redis, then tells it; the
/// waiting task is aborted before it reads the news. The lock must not stay in Redis
/// under the aborted waiter's token, and the process must not wait behind a ghost.
#[tokio::test]
async fn a_local_waiter_aborted_after_a_pass_leaves_nothing_held() {
    let (_server, client) = common::start().await;
    let mutex = common::fixed(&client, "passed", Duration::from_secs(30));
    let holder = mutex.try_lock().await.unwrap();
    let waiter = {
        let mutex = mutex.clone();
        tokio::spawn(async move { mutex.lock().await })
    };
    tokio::task::yield_now().await; // the waiter queues behind the holder, locally
    // One thread: between the pass (inside `release`) and the abort below, the waiter
    // task never runs, so it is dropped with the lock passed but unread.
    assert!(holder.release().await.unwrap());
    waiter.abort();
    assert!(waiter.await.unwrap_err().is_cancelled());
    assert!(
        eventually(Duration::from_secs(1), async || !mutex
            .is_locked()
            .await
            .unwrap())
        .await,
        "the lock stayed held under the aborted waiter's token"
    );
    let again = mutex.lock_timeout(Duration::from_secs(2)).await;
    assert!(again.is_ok(), "the process waits behind a ghost: {again:?}");
}

/// Item 2, the deadline variant: the waiter's deadline and the holder's pass become
/// ready at once. The waiter runs on a one-thread runtime whose `block_on` future
/// sleeps to the same deadline; the time driver fires both timers in one turn, and
/// `block_on` polls its own future first, which freezes the thread while the holder
/// passes the lock. The waiter then wakes with both ready. Whichever it picks, the
/// lock is returned or released: never left held by nobody.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_waiter_whose_deadline_meets_a_pass_gets_or_frees_the_lock() {
    let (_server, client) = common::start().await;
    for round in 0..10 {
        let mutex = common::fixed(
            &client,
            &format!("deadline:{round}"),
            Duration::from_secs(30),
        );
        let holder = mutex.try_lock().await.unwrap();
        let (frozen, frozen_rx) = std::sync::mpsc::channel();
        let waiter = {
            let mutex = mutex.clone();
            std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                runtime.block_on(async move {
                    let deadline = tokio::time::Instant::now() + Duration::from_millis(40);
                    let waiting = {
                        let mutex = mutex.clone();
                        tokio::spawn(
                            async move { mutex.lock_timeout(Duration::from_millis(40)).await },
                        )
                    };
                    tokio::time::sleep_until(deadline).await;
                    // Frozen, the waiter's timer fired, while the holder passes the lock.
                    frozen.send(()).unwrap();
                    std::thread::sleep(Duration::from_millis(150));
                    match waiting.await.unwrap() {
                        Ok(guard) => guard.release().await.map(|_| true),
                        Err(Error::Busy { .. }) => Ok(false),
                        Err(other) => Err(other),
                    }
                })
            })
        };
        tokio::task::spawn_blocking(move || frozen_rx.recv().unwrap())
            .await
            .unwrap();
        assert!(holder.release().await.unwrap());
        let got_it = tokio::task::spawn_blocking(move || waiter.join().unwrap())
            .await
            .unwrap();
        if !got_it.unwrap() {
            let freed = eventually(Duration::from_secs(1), async || {
                !mutex.is_locked().await.unwrap()
            });
            let status = mutex.status().await.unwrap();
            assert!(
                freed.await,
                "round {round}: Busy, yet the lock stayed held: {status:?}"
            );
        }
        let again = mutex.lock_timeout(Duration::from_secs(2)).await;
        assert!(
            again.is_ok(),
            "round {round}: the process waits behind a ghost: {again:?}"
        );
    }
}

/// Item 4: a connection blip while waiting (`CLIENT KILL` of every client) is retried
/// inside the deadline, not returned as `Unreachable`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_rides_out_a_killed_connection() {
    let (server, client) = common::start().await;
    let mut raw = common::connect(&server.url()).await;
    // Another library holds the lock for 1.5 s.
    let _: () = redis::cmd("SET")
        .arg("blip")
        .arg("someone-else")
        .arg("NX")
        .arg("PX")
        .arg(1500)
        .query_async(&mut raw)
        .await
        .unwrap();
    let mutex = client.mutex("blip").unwrap();
    let waiting = {
        let mutex = mutex.clone();
        tokio::spawn(async move { mutex.lock_timeout(Duration::from_secs(10)).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    common::reset_connections(&server);
    match waiting.await.unwrap() {
        Ok(guard) => assert!(guard.release().await.unwrap()),
        Err(error) => panic!("the wait gave up on a connection blip: {error}"),
    }
}

/// Item 4: a retry carries the same owner token and must find what its lost reply
/// did. A fair first try whose reply was lost finds its lock even though a fair
/// waiter queued since; a local pass whose reply was lost finds it done.
#[tokio::test]
async fn retried_requests_find_what_their_lost_replies_did() {
    let (server, client) = common::start().await;
    let mut raw = common::connect(&server.url()).await;
    let store = client.store();
    let key = client.mutex("retried").unwrap().key().clone();
    let token = || OwnerToken::generate().unwrap();
    let (me, other, next) = (token(), token(), token());
    let fair_once = AcquireRequest::new(Ttl::DEFAULT).fair(true);
    let queued = fair_once.queued(Some(Ttl::new(Duration::from_secs(5)).unwrap()));
    let first = store.try_acquire(&key, &me, fair_once).await.unwrap();
    assert!(
        matches!(first, Attempt::Acquired { .. }),
        "the lock was free: {first:?}"
    );
    let waiting = store.try_acquire(&key, &other, queued).await.unwrap();
    assert!(matches!(waiting, Attempt::Busy { .. }), "{waiting:?}");
    // Most of the lease gone: the retry must grant it afresh, not just answer.
    let _: () = raw.pexpire(key.as_str(), 5_000).await.unwrap();
    match store.try_acquire(&key, &me, fair_once).await.unwrap() {
        // Fenced on demand: the token comes when asked for, and only while ours.
        Attempt::Acquired { fence: None, .. } => {
            assert!(store.fence(&key, &me).await.unwrap().is_some());
        }
        other => panic!("the retry did not find its own lock: {other:?}"),
    }
    let pttl: i64 = raw.pttl(key.as_str()).await.unwrap();
    assert!(pttl > 5_000, "the retry left the lease at {pttl} ms");
    // The queued waiter leaves, so a pass is allowed; then the pass is retried.
    assert!(!store.release(&key, &other, Some(queued.ttl)).await.unwrap());
    let passed = store
        .pass(&key, &me, &next, Ttl::DEFAULT, false)
        .await
        .unwrap();
    let again = store
        .pass(&key, &me, &next, Ttl::DEFAULT, false)
        .await
        .unwrap();
    assert!(
        passed.is_some() && again > passed,
        "{passed:?} then {again:?}"
    );
    assert_eq!(
        client.store().owner(&key).await.unwrap().as_deref(),
        Some(next.as_str())
    );
    // A pass without a token, retried, finds it done; one by a holder no more does not.
    let last = token();
    for _ in 0..2 {
        let passed = store.pass_unfenced(&key, &next, &last, Ttl::DEFAULT, false);
        assert_eq!(passed.await.unwrap(), Some(None));
    }
    let stale = store.pass_unfenced(&key, &me, &next, Ttl::DEFAULT, false);
    assert_eq!(stale.await.unwrap(), None);
    assert_eq!(
        store.owner(&key).await.unwrap().as_deref(),
        Some(last.as_str())
    );
}

/// Item 5: every companion key expires, so per-entity locks leave nothing behind:
/// fencing counters, queues and leases of waiters that died in line included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_many_locks_no_key_is_left_without_an_expiry_and_all_disappear() {
    let (server, client) = common::start().await;
    let ttl = Duration::from_millis(300);
    for n in 0..40 {
        let name = format!("order:{n}");
        let mutex = common::fixed(&client, &name, ttl);
        let mutex = if n % 2 == 0 {
            mutex.with_fairness(latchkey::Fairness::Fair)
        } else {
            mutex
        };
        let guard = mutex.try_lock().await.unwrap();
        // Two waiters that queue once and never come back (crashed processes): the
        // release hands the lock to the first, the second stays in line.
        let queue = AcquireRequest::new(Ttl::new(ttl).unwrap())
            .fair(n % 2 == 0)
            .queued(Some(Ttl::new(Duration::from_millis(500)).unwrap()));
        for _ in 0..2 {
            let ghost = OwnerToken::generate().unwrap();
            client
                .store()
                .try_acquire(mutex.key(), &ghost, queue)
                .await
                .unwrap();
        }
        guard.release().await.unwrap();
    }
    let mut raw = common::connect(&server.url()).await;
    let keys: Vec<String> = raw.keys("*").await.unwrap();
    assert!(!keys.is_empty());
    for key in &keys {
        let left: i64 = raw.pttl(key).await.unwrap();
        assert!(left != -1, "{key} has no expiry");
    }
    let emptied = eventually(Duration::from_secs(5), async || {
        let size: u64 = redis::cmd("DBSIZE").query_async(&mut raw).await.unwrap();
        size == 0
    });
    assert!(emptied.await, "keys outlived every lease and waiter lease");
}

/// Item 6: a script that fails halfway is not rolled back. A fair first try used to
/// set the lock before reading the queue; a queue of another type then failed the
/// script with the lock set, held by nobody for a whole lease.
#[tokio::test]
async fn a_failing_script_writes_nothing() {
    let server = RedisServer::start().unwrap();
    let client = latchkey::Client::open(&server.url()).await.unwrap();
    let mut raw = common::connect(&server.url()).await;
    for companion in ["queue", "leases"] {
        let name = format!("typed-{companion}");
        let _: () = raw
            .set(format!("{{{name}}}:lk:{companion}"), "not a set")
            .await
            .unwrap();
        let mutex = client
            .mutex(&name)
            .unwrap()
            .with_fairness(latchkey::Fairness::Fair);
        if companion == "leases" {
            // With no queue, the waiters' leases do not matter: the uncontended
            // take does not read them. A waiter does, and is refused.
            let guard = mutex.try_lock().await.unwrap();
            let other = latchkey::Client::open(&server.url()).await.unwrap();
            let waiting = other
                .mutex(&name)
                .unwrap()
                .with_fairness(latchkey::Fairness::Fair)
                .lock_timeout(Duration::from_millis(200))
                .await;
            assert!(
                matches!(waiting, Err(Error::WrongType { .. })),
                "{waiting:?}"
            );
            assert!(guard.release().await.unwrap());
            continue;
        }
        for result in [
            mutex.try_lock().await,
            mutex.lock_timeout(Duration::from_millis(200)).await,
        ] {
            assert!(matches!(result, Err(Error::WrongType { .. })), "{result:?}");
            let held: bool = raw.exists(&name).await.unwrap();
            assert!(!held, "a failed {companion} read left the lock set");
        }
    }
}

/// A waiter joining a busy lock's queue checks the waiters' leases before its first
/// write and counts on the queue's own `ZADD` to fail first: a queue of another
/// type is refused with nothing written, not even the waiter's lease.
#[tokio::test]
async fn a_waiter_refused_by_a_queue_of_another_type_writes_nothing() {
    let server = RedisServer::start().unwrap();
    let client = latchkey::Client::open(&server.url()).await.unwrap();
    let mut raw = common::connect(&server.url()).await;
    let _: () = raw.set("busy", "another-library").await.unwrap();
    let _: () = raw.set("{busy}:lk:queue", "not a set").await.unwrap();
    for fairness in [latchkey::Fairness::Fair, latchkey::Fairness::Plain] {
        let waiting = client
            .mutex("busy")
            .unwrap()
            .with_fairness(fairness)
            .lock_timeout(Duration::from_millis(200))
            .await;
        assert!(
            matches!(waiting, Err(Error::WrongType { .. })),
            "{fairness:?}: {waiting:?}"
        );
        for companion in ["{busy}:lk:leases", "{busy}:lk:fence"] {
            let written: bool = raw.exists(companion).await.unwrap();
            assert!(!written, "{fairness:?}: a refused waiter wrote {companion}");
        }
    }
}

/// The same for a lock passed between two tasks of one process: a pass whose reply
/// comes back after the lease it set has ended is no hold. The waiter gives that
/// hold up and waits on in Redis, and its guard, when it comes, is one whose lease
/// lasts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_pass_whose_reply_comes_after_its_lease_is_no_hold() {
    let server = RedisServer::start().unwrap();
    let proxy = FaultProxy::start(server.port()).unwrap();
    let client = Client::open(&proxy.url()).await.unwrap();
    let mutex = common::fixed(&client, "late-pass", Duration::from_millis(150));
    // Once on time, so that Redis has the pass's script (loading it is two more
    // round trips, after which the lease would be gone, and nothing passed).
    let late = [Duration::ZERO, Duration::from_millis(250)];
    for latency in late {
        let holder = mutex.lock().await.unwrap();
        let waiting = tokio::spawn({
            let mutex = mutex.clone();
            async move {
                let guard = mutex.lock_timeout(Duration::from_secs(5)).await.unwrap();
                let lost_on_return = guard.is_lost();
                (lost_on_return, guard.release().await)
            }
        });
        // The waiter queues behind the holder in this process, then every reply
        // comes late: the pass lands in Redis at once, and is told 100 ms after
        // the 150 ms it gave the waiter have ended.
        tokio::time::sleep(Duration::from_millis(30)).await;
        proxy.set_latency(Duration::ZERO, latency);
        // (Its own lease ends before the reply too: whether it says the lock was
        // still its own is not what this test is about.)
        holder.release().await.unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        proxy.set_latency(Duration::ZERO, Duration::ZERO);
        let (lost_on_return, released) = waiting.await.unwrap();
        assert!(
            !lost_on_return,
            "{latency:?}: the waiter got a guard born lost"
        );
        released.unwrap();
    }
}

/// A release dropped while its pass to a local waiter is in flight (sent, its
/// reply late), and the waiter then cancelled before it heard anything: the pass
/// lands under the waiter's token with the waiter's long lease, and must not stay
/// there for nobody. The background release sees the pass through (the waiter was
/// kept, not dropped with the release's future), finds the waiter gone and frees
/// the lock; when even its pass again gets no reply in time (1.3 s, past the
/// response timeout), it keeps the waiter and passes once more, for as long as the
/// waiter's lease, not the holder's, could keep the lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_dropped_while_its_local_pass_is_in_flight_leaves_no_orphan() {
    let server = RedisServer::start().unwrap();
    let proxy = FaultProxy::start(server.port()).unwrap();
    let client = Client::open(&proxy.url()).await.unwrap();
    let mut admin = server.connection().unwrap();
    let short = common::renewed(&client, "in-flight", Duration::from_millis(600));
    let long = common::renewed(&client, "in-flight", Duration::from_secs(10));
    // Once on time, so that Redis has the pass's script before replies come late.
    let late = [None, Some(300), Some(1_300)];
    for latency in late.map(|ms| ms.map(Duration::from_millis)) {
        let holder = short.lock().await.unwrap();
        let waiter = tokio::spawn({
            let long = long.clone();
            async move { long.lock().await }
        });
        // The waiter queues behind the holder in this process.
        tokio::time::sleep(Duration::from_millis(30)).await;
        let Some(latency) = latency else {
            drop(holder);
            waiter.await.unwrap().unwrap().release().await.unwrap();
            continue;
        };
        proxy.set_latency(Duration::ZERO, latency);
        let release = tokio::spawn(async move { holder.release().await });
        // The pass has landed; its reply is on its way. Both callers give up.
        tokio::time::sleep(Duration::from_millis(100)).await;
        release.abort();
        waiter.abort();
        let _ = release.await;
        let _ = waiter.await;
        tokio::time::sleep(latency + Duration::from_millis(100)).await;
        proxy.set_latency(Duration::ZERO, Duration::ZERO);
        let freed_by = Instant::now() + Duration::from_secs(3);
        loop {
            let pttl: i64 = redis::cmd("PTTL")
                .arg("in-flight")
                .query(&mut admin)
                .unwrap();
            if pttl == -2 {
                break;
            }
            assert!(
                Instant::now() < freed_by,
                "{latency:?}: the lock stayed held for nobody ({pttl} ms left)"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// A client that reaches `server` through a fault proxy; its command connection is
/// the proxy's connection 0 and its subscriber (opened by the first wait) the next.
async fn proxied(server: &RedisServer) -> (FaultProxy, Client) {
    let proxy = FaultProxy::start(server.port()).unwrap();
    let client = Client::open(&proxy.url()).await.unwrap();
    assert_eq!(proxy.accepted(), 1);
    (proxy, client)
}

/// A wait whose every request went unanswered reports Redis as unreachable, not the
/// lock as busy: it never learned whether the lock was held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_that_never_got_a_reply_says_unreachable_not_busy() {
    let (server, _direct) = common::start().await;
    let (proxy, client) = proxied(&server).await;
    proxy.stall_all();
    proxy.set_new_connections(NewConnections::Stall);
    let mutex = client.mutex("silent").unwrap();
    let result = mutex.lock_timeout(Duration::from_millis(300)).await;
    match result {
        Err(error @ Error::Unreachable { .. }) => {
            assert!(error.to_string().contains("no reply"), "{error}");
        }
        other => panic!("expected Unreachable, got {other:?}"),
    }
}

/// Item 3: a subscriber connection that is accepted but never answers must not hold
/// a wait past its deadline; waiters fall back to timer re-checks and, once the path
/// is back, a new subscriber connection wakes them again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_black_holed_subscriber_never_holds_a_wait_past_its_deadline() {
    let (server, direct) = common::start().await;
    let (proxy, client) = proxied(&server).await;
    let held = common::fixed(&direct, "stalled", Duration::from_secs(30));
    let holder = held.try_lock().await.unwrap();
    proxy.set_new_connections(NewConnections::BlackHole);
    let mutex = client.mutex("stalled").unwrap();
    let started = Instant::now();
    let result = mutex.lock_timeout(Duration::from_secs(1)).await;
    let waited = started.elapsed();
    assert!(matches!(result, Err(Error::Busy { .. })), "{result:?}");
    assert!(
        waited < Duration::from_millis(1500),
        "lock_timeout(1s) returned after {waited:?}"
    );

    // Without wake-ups, a waiter still sees the release on its timer.
    let waiting = {
        let mutex = mutex.clone();
        tokio::spawn(async move { mutex.lock_timeout(Duration::from_secs(10)).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    holder.release().await.unwrap();
    waiting.await.unwrap().unwrap().release().await.unwrap();

    // The path comes back: a new subscriber connection is made and confirmed.
    proxy.set_new_connections(NewConnections::Forward);
    let holder = held.try_lock().await.unwrap();
    let waiting = {
        let mutex = mutex.clone();
        tokio::spawn(async move { mutex.lock_timeout(Duration::from_secs(10)).await })
    };
    let mut raw = common::connect(&server.url()).await;
    let subscribed = eventually(Duration::from_secs(8), async || {
        let counts: Vec<(String, u64)> = redis::cmd("PUBSUB")
            .arg("NUMSUB")
            .arg("{stalled}:lk:wake")
            .query_async(&mut raw)
            .await
            .unwrap();
        counts[0].1 == 1
    });
    assert!(subscribed.await, "the subscriber never came back");
    holder.release().await.unwrap();
    waiting.await.unwrap().unwrap().release().await.unwrap();
}

/// Item 3: a subscriber connection that stalls after it was set up (no close, no
/// reset) is found by its heartbeat and replaced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_subscriber_connection_is_replaced() {
    let (server, direct) = common::start().await;
    let (proxy, client) = proxied(&server).await;
    let held = common::fixed(&direct, "frozen", Duration::from_secs(30));
    let holder = held.try_lock().await.unwrap();
    let mutex = client.mutex("frozen").unwrap();
    // The first wait opens the subscriber: the proxy's connection 1.
    let result = mutex.lock_timeout(Duration::from_millis(200)).await;
    assert!(matches!(result, Err(Error::Busy { .. })), "{result:?}");
    assert_eq!(proxy.accepted(), 2);
    proxy.stall_connection(1);
    let replaced = eventually(Duration::from_secs(8), async || proxy.accepted() > 2);
    assert!(replaced.await, "the stalled subscriber was never replaced");
    let started = Instant::now();
    let result = mutex.lock_timeout(Duration::from_secs(1)).await;
    assert!(matches!(result, Err(Error::Busy { .. })), "{result:?}");
    assert!(started.elapsed() < Duration::from_millis(1500));
    holder.release().await.unwrap();
}

/// Item 8: a live waiter whose command connection stalls for longer than its
/// renewal period keeps its place in line: the stalled request times out, the
/// connection is replaced and the retry renews the waiter lease in time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_waiter_keeps_its_place_through_a_stalled_reply() {
    let (server, direct) = common::start().await;
    let (proxy, client) = proxied(&server).await;
    let holder = common::fixed(&direct, "line", Duration::from_secs(30))
        .with_fairness(latchkey::Fairness::Fair)
        .try_lock()
        .await
        .unwrap();
    let raw = common::connect(&server.url()).await;
    let queued = |n: u64| {
        let mut raw = raw.clone();
        async move {
            let queued = eventually(Duration::from_secs(5), async || {
                raw.zcard::<_, u64>("{line}:lk:queue").await.unwrap() == n
            });
            assert!(queued.await, "the queue never reached {n}");
        }
    };
    let fair_waiter = |client: &Client| {
        let mutex = client
            .mutex("line")
            .unwrap()
            .with_fairness(latchkey::Fairness::Fair);
        tokio::spawn(async move { mutex.lock().await })
    };
    let first = fair_waiter(&client);
    queued(1).await;
    let second = fair_waiter(&direct);
    queued(2).await;
    proxy.stall_connection(0);
    tokio::time::sleep(Duration::from_millis(3500)).await;
    proxy.resume_all();
    holder.release().await.unwrap();
    let guard = first.await.unwrap().expect("the proxied waiter gave up");
    assert!(!second.is_finished(), "the later waiter went first");
    guard.release().await.unwrap();
    second.await.unwrap().unwrap().release().await.unwrap();
}

/// Scripts run by SHA: a server that lost them (`SCRIPT FLUSH`, as a restart without
/// persistence does) gets each one again, whether the call goes alone or in a
/// pipeline with `WAIT` behind it (which does not load a script by itself), and
/// the call then does what it was sent to do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_call_loads_its_script_again_after_a_script_flush() {
    let primary = RedisServer::start().unwrap();
    let replica = RedisServer::start().unwrap();
    replica.replicate(&primary).unwrap();
    let flush = || {
        let _: () = redis::cmd("SCRIPT")
            .arg("FLUSH")
            .query(&mut primary.connection().unwrap())
            .unwrap();
    };
    let alone = Client::open(&primary.url()).await.unwrap();
    let confirmed = alone
        .clone()
        .with_wait_replicas(1, Duration::from_millis(500))
        .unwrap();
    for (client, name) in [(&alone, "flushed"), (&confirmed, "flushed-confirmed")] {
        let fair = client
            .mutex(name)
            .unwrap()
            .with_fairness(latchkey::Fairness::Fair);
        flush();
        let guard = fair.try_lock().await.unwrap();
        flush();
        assert!(guard.fence().await.unwrap() > 0);
        flush();
        guard.extend(Duration::from_secs(30)).await.unwrap();
        flush();
        assert!(guard.release().await.unwrap(), "{name}: the release");
        assert!(!fair.is_locked().await.unwrap(), "{name}: still held");

        let permits = client.semaphore(name, 2).unwrap();
        flush();
        let permit = permits.try_acquire(1).await.unwrap();
        flush();
        assert!(permit.release().await.unwrap(), "{name}: the permit");

        let policy = latchkey::ratelimit::Policy::fixed_window(1, Duration::from_secs(60)).unwrap();
        let limiter = client.rate_limiter(name, policy).unwrap();
        flush();
        assert!(
            limiter.check(1).await.unwrap().allowed,
            "{name}: the first call"
        );
        flush();
        assert!(
            !limiter.check(1).await.unwrap().allowed,
            "{name}: over the limit"
        );
    }
}

/// A grant whose reply comes back after the lease it granted has ended (counted from
/// when the request was sent, as every lease is) is no hold: its guard would be
/// born lost, and a fenced write from it could land after a later holder's. Behind
/// a proxy that delays every reply longer than the lease, no call returns a guard:
/// each says why, and the lock is left to others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_whose_reply_comes_after_its_lease_is_no_hold() {
    let server = RedisServer::start().unwrap();
    let proxy = FaultProxy::start(server.port()).unwrap();
    let client = Client::open(&proxy.url()).await.unwrap();
    let mutex = common::fixed(&client, "late", Duration::from_millis(150));
    proxy.set_latency(Duration::ZERO, Duration::from_millis(250));
    let tries = [
        mutex.try_lock().await,
        mutex.lock_timeout(Duration::from_millis(900)).await,
    ];
    for result in tries {
        let error = result.expect_err("a guard whose lease had ended");
        assert!(
            error.to_string().contains("after its lease had ended"),
            "{error}"
        );
        assert!(error.is_transient(), "{error}");
    }
    proxy.set_latency(Duration::ZERO, Duration::ZERO);
    // Released by the wait as it gave up, or run out: free within its lease.
    let started = Instant::now();
    let mut conn = server.connection().unwrap();
    while redis::Commands::exists::<_, bool>(&mut conn, "late").unwrap() {
        assert!(started.elapsed() < Duration::from_secs(1), "still held");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Replies on time again, once those still held back (the undo's) have gone by.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let guard = mutex.try_lock().await.unwrap();
    assert!(!guard.is_lost());
    assert!(guard.release().await.unwrap());

    // With a lock delay Redis keeps the key longer than the holder counts on: the
    // lease the guard would have had is what must not have ended.
    let lease = latchkey::Lease::fixed(Duration::from_millis(150)).unwrap();
    let delayed = client
        .mutex("late-delayed")
        .unwrap()
        .with_lease(lease.with_lock_delay(Duration::from_secs(2)).unwrap());
    proxy.set_latency(Duration::ZERO, Duration::from_millis(250));
    let error = delayed
        .try_lock()
        .await
        .expect_err("a guard whose lease had ended");
    assert!(
        error.to_string().contains("after its lease had ended"),
        "{error}"
    );
}
