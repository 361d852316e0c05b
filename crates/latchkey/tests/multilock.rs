//! Several locks at once against a real server: a multi-lock holds every lock of its
//! set or none once its call returns (busy, timed out, cancelled) and holds none
//! while it waits; callers naming the same locks in opposite orders never deadlock
//! and never overlap; a waiter is woken by the release of the lock it waits for;
//! each lock has its own fence; a lease lost under one lock is reported by the
//! guard.

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex as StdMutex};
use std::time::{Duration, Instant};

use latchkey::{Client, Error, Lease, MultiLock};

/// Well under the 10 s a waiter's timers would take: a pass shows it was woken.
const WOKEN_WITHIN: Duration = Duration::from_secs(3);

/// Whether Redis holds `name` for anybody.
async fn held(client: &Client, name: &str) -> bool {
    client.mutex(name).unwrap().is_locked().await.unwrap()
}

/// Asserts `name` is free within `within` (a failed call gives back what it took
/// before it returns, given 50 ms; on a loaded machine, just after).
async fn free_within(client: &Client, name: &str, within: Duration) {
    let deadline = Instant::now() + within;
    while held(client, name).await {
        assert!(
            Instant::now() < deadline,
            "{name} still held after {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// How soon a failed call's locks must be free: its 50 ms, and a loaded machine.
const GIVEN_BACK: Duration = Duration::from_millis(500);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn try_lock_takes_every_lock_or_none() {
    let (server, client) = common::start().await;
    let other = Client::open(&server.url()).await.unwrap();
    let b = other.mutex("b").unwrap().lock().await.unwrap();

    let set = client.multi_lock(["c", "a", "b"]).unwrap();
    let keys: Vec<&str> = set.keys().map(|k| k.as_str()).collect();
    assert_eq!(keys, ["a", "b", "c"], "taken in key order");
    match set.try_lock().await {
        Err(Error::Busy { name, .. }) => assert_eq!(name, "b"),
        other => panic!("expected Busy on b, got {other:?}"),
    }
    // Nothing of the set is left held once the call returned.
    free_within(&client, "a", GIVEN_BACK).await;
    free_within(&client, "c", GIVEN_BACK).await;

    b.release().await.unwrap();
    let all = set.try_lock().await.unwrap();
    let mut redis = common::connect(&server.url()).await;
    for guard in all.guards() {
        let value: Option<String> = redis::cmd("GET")
            .arg(guard.key().as_str())
            .query_async(&mut redis)
            .await
            .unwrap();
        assert_eq!(value.as_deref(), Some(guard.owner().as_str()));
    }
    assert!(all.get("b").is_some() && all.get("nope").is_none());
    assert!(all.release().await.unwrap());
    for name in ["a", "b", "c"] {
        assert!(
            !held(&client, name).await,
            "{name} still held after release"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_out_multi_lock_gives_back_what_it_took() {
    let (server, client) = common::start().await;
    let other = Client::open(&server.url()).await.unwrap();
    let c = other.mutex("c").unwrap().lock().await.unwrap();

    let started = Instant::now();
    let set = client.multi_lock(["a", "b", "c"]).unwrap();
    match set.lock_timeout(Duration::from_millis(400)).await {
        Err(Error::Busy { name, waited, .. }) => {
            assert_eq!(name, "c");
            assert!(waited >= Duration::from_millis(400), "waited {waited:?}");
        }
        other => panic!("expected Busy on c, got {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(2));
    free_within(&client, "a", GIVEN_BACK).await;
    free_within(&client, "b", GIVEN_BACK).await;
    c.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_multi_lock_is_woken_and_a_cancelled_one_leaves_nothing() {
    let (server, client) = common::start().await;
    let other = Client::open(&server.url()).await.unwrap();
    let b = other.mutex("b").unwrap().lock().await.unwrap();

    // While it waits for b it holds nothing: a stays free for others.
    let set = client.multi_lock(["a", "b"]).unwrap();
    let waiting = {
        let set = set.clone();
        tokio::spawn(async move { set.lock().await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !held(&client, "a").await,
        "a waiter held a while it waited for b"
    );
    let a = other.mutex("a").unwrap().try_lock().await.unwrap();
    a.release().await.unwrap();
    waiting.abort();
    let _ = waiting.await;
    free_within(&client, "a", Duration::from_secs(1)).await;

    // A waiter on another client is woken by b's release.
    let third = Client::open(&server.url()).await.unwrap();
    let waiting = tokio::spawn(async move {
        let both = third.multi_lock(["b", "a"]).unwrap().lock().await.unwrap();
        let at = Instant::now();
        both.release().await.unwrap();
        at
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let released_at = Instant::now();
    b.release().await.unwrap();
    let got_at = tokio::time::timeout(Duration::from_secs(20), waiting)
        .await
        .expect("the waiter never got both")
        .unwrap();
    assert!(got_at - released_at < WOKEN_WITHIN);
    free_within(&client, "b", GIVEN_BACK).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opposite_orders_neither_deadlock_nor_overlap() {
    let (server, _client) = common::start().await;
    let names = ["x", "y", "z"];
    let sets: [&[&str]; 4] = [&["x", "y"], &["y", "x"], &["z", "y", "x"], &["y", "z"]];
    // Who holds each lock now, as the holders themselves say.
    let holders: Arc<StdMutex<HashMap<&str, usize>>> = Arc::default();
    let mut tasks = Vec::new();
    for task in 0..8 {
        // Four clients: each has its own local line and connection.
        let client = Client::open(&server.url()).await.unwrap();
        let holders = holders.clone();
        let set = sets[task % sets.len()];
        tasks.push(tokio::spawn(async move {
            let set = client.multi_lock(set.iter().copied()).unwrap();
            for _ in 0..15 {
                let guard = set.lock().await.unwrap();
                let mine: Vec<&str> = names
                    .into_iter()
                    .filter(|n| guard.get(n).is_some())
                    .collect();
                for name in &mine {
                    let was = holders.lock().unwrap().insert(name, task);
                    assert_eq!(was, None, "{name} held by {was:?} and {task}");
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
                for name in &mine {
                    holders.lock().unwrap().remove(name);
                }
                assert!(guard.release().await.unwrap());
            }
        }));
    }
    for task in tasks {
        tokio::time::timeout(Duration::from_secs(60), task)
            .await
            .expect("deadlock: a task never finished")
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_lock_has_its_own_growing_fence() {
    let (_server, client) = common::start().await;
    let set = client.multi_lock(["f1", "f2"]).unwrap();
    let first = set.lock().await.unwrap().fences().await.unwrap();
    // The guard was dropped: its locks are released in the background.
    let alone = client.mutex("f2").unwrap().lock().await.unwrap();
    let f2 = alone.fence().await.unwrap();
    assert!(f2 > first[1], "{f2} after {}", first[1]);
    alone.release().await.unwrap();
    let second = set.lock().await.unwrap();
    let again = second.fences().await.unwrap();
    assert!(
        again[0] > first[0] && again[1] > f2,
        "{again:?} after {first:?}"
    );
    second.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_broken_under_one_lock_is_reported() {
    let (_server, client) = common::start().await;
    let set = client
        .multi_lock(["l1", "l2"])
        .unwrap()
        .with_lease(Lease::renewed(Duration::from_millis(300)).unwrap());
    let guard = set.lock().await.unwrap();
    assert!(!guard.is_lost());
    let lost = guard.lost();
    client.mutex("l2").unwrap().force_release().await.unwrap();
    tokio::time::timeout(Duration::from_secs(2), lost)
        .await
        .expect("lost() did not fire");
    assert!(guard.is_lost());
    assert!(!guard.release().await.unwrap(), "l2 was not ours any more");
    free_within(&client, "l1", GIVEN_BACK).await;
}

/// An extend or a release that fails on one lock (a key of another type in its
/// place) must not hide another lock's lost lease: the loss is the answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_lease_is_reported_even_when_another_release_fails() {
    let (server, client) = common::start().await;
    let set = client
        .multi_lock(["la", "lb"])
        .unwrap()
        .with_lease(Lease::fixed(Duration::from_secs(30)).unwrap());
    let guard = set.lock().await.unwrap();
    let mut redis = common::connect(&server.url()).await;
    let _: () = redis::pipe()
        .del("la")
        .del("lb")
        .rpush("la", "not a lock")
        .query_async(&mut redis)
        .await
        .unwrap();
    let extended = guard.extend(Duration::from_secs(30)).await;
    assert!(
        matches!(extended, Err(Error::LeaseLost { .. })),
        "lb's lease was broken: {extended:?}"
    );
    let released = guard.release().await;
    assert!(
        matches!(released, Ok(false)),
        "lb's lease was broken: {released:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_set_is_validated_and_a_name_twice_is_one_lock() {
    let (_server, client) = common::start().await;
    assert!(matches!(
        client.multi_lock(Vec::<&str>::new()),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        client.multi_lock(["ok", ""]),
        Err(Error::InvalidArgument(_))
    ));
    let set = MultiLock::new([client.mutex("d").unwrap(), client.mutex("d").unwrap()]).unwrap();
    assert_eq!(set.keys().count(), 1);
    let guard = set.try_lock().await.unwrap();
    assert_eq!(guard.guards().len(), 1);
    guard.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fixed_lease_counts_from_the_calls_return() {
    let (server, client) = common::start().await;
    let other = Client::open(&server.url()).await.unwrap();
    let b = other.mutex("fb").unwrap().lock().await.unwrap();
    let lease = Duration::from_millis(400);
    let set = client
        .multi_lock(["fa", "fb"])
        .unwrap()
        .with_lease(Lease::fixed(lease).unwrap());
    let waiting = tokio::spawn(async move { set.lock().await });
    // Longer than the lease: "fa", taken first, would have expired by now.
    tokio::time::sleep(Duration::from_millis(700)).await;
    b.release().await.unwrap();
    let both = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("never got both")
        .unwrap()
        .unwrap();
    assert!(!both.is_lost(), "returned with a lease already lost");
    assert!(
        both.validity() > lease / 2,
        "validity {:?}",
        both.validity()
    );
    let mut redis = common::connect(&server.url()).await;
    let pttl: i64 = redis::cmd("PTTL")
        .arg("fa")
        .query_async(&mut redis)
        .await
        .unwrap();
    assert!(pttl > 200, "fa's lease in Redis: {pttl} ms");
    assert!(both.release().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_timeout_returns_in_time_when_redis_does_not_answer() {
    let (server, client) = common::start().await;
    let set = client.multi_lock(["pa", "pb"]).unwrap();
    // Connected and scripts loaded before the pause.
    set.lock().await.unwrap().release().await.unwrap();
    server.pause().unwrap();
    let started = Instant::now();
    let answer = set.lock_timeout(Duration::from_millis(300)).await;
    let took = started.elapsed();
    server.resume().unwrap();
    assert!(matches!(answer, Err(Error::Busy { .. })), "{answer:?}");
    // The deadline, leaving a queue (50 ms), giving back (50 ms), a loaded machine.
    assert!(took < Duration::from_millis(700), "returned after {took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_lock_runs_the_work_under_every_lock_and_cancels_it_on_a_lost_lease() {
    let (_server, client) = common::start().await;
    let set = client
        .multi_lock(["wa", "wb"])
        .unwrap()
        .with_lease(Lease::renewed(Duration::from_millis(300)).unwrap());
    let held_inside = set
        .with_lock(async |both| both.guards().len())
        .await
        .unwrap();
    assert_eq!(held_inside, 2);
    free_within(&client, "wa", GIVEN_BACK).await;
    let breaker = client.clone();
    let outcome = set
        .with_lock(async |_| {
            breaker.mutex("wb").unwrap().force_release().await.unwrap();
            tokio::time::sleep(Duration::from_secs(5)).await;
        })
        .await;
    assert!(
        matches!(outcome, Err(Error::LeaseLost { .. })),
        "{outcome:?}"
    );
    free_within(&client, "wa", GIVEN_BACK).await;
}

/// Keyspace events of `keys` (`set`, `del` …), as Redis publishes them.
async fn keyspace_events(url: &str, keys: &[&str]) -> tokio::sync::mpsc::UnboundedReceiver<String> {
    let mut admin = common::connect(url).await;
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("notify-keyspace-events")
        .arg("KA")
        .query_async(&mut admin)
        .await
        .unwrap();
    let mut pubsub = redis::Client::open(url)
        .unwrap()
        .get_async_pubsub()
        .await
        .unwrap();
    for key in keys {
        pubsub
            .subscribe(format!("__keyspace@0__:{key}"))
            .await
            .unwrap();
    }
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        use futures_util::StreamExt;
        let mut messages = pubsub.into_on_message();
        while let Some(message) = messages.next().await {
            let event: String = message.get_payload().unwrap();
            if tx
                .send(format!("{} {event}", message.get_channel_name()))
                .is_err()
            {
                return;
            }
        }
    });
    rx
}

/// On one server the first try is one step: a busy lock leaves the free ones
/// untouched (never set, then deleted), and a free set is taken whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_one_server_a_busy_lock_leaves_the_others_untouched() {
    let (server, client) = common::start().await;
    let mut events = keyspace_events(&server.url(), &["acct:1", "acct:2"]).await;
    let holder = client.mutex("acct:3").unwrap().lock().await.unwrap();
    // The subscription is live: an event on acct:1 is heard.
    let mut conn = common::connect(&server.url()).await;
    let _: () = redis::cmd("DEL")
        .arg("acct:1")
        .query_async(&mut conn)
        .await
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg("acct:1")
        .arg("x")
        .query_async(&mut conn)
        .await
        .unwrap();
    let _: () = redis::cmd("DEL")
        .arg("acct:1")
        .query_async(&mut conn)
        .await
        .unwrap();
    let heard = tokio::time::timeout(Duration::from_secs(2), events.recv()).await;
    assert!(heard.unwrap().unwrap().ends_with("acct:1 set"));
    tokio::time::sleep(Duration::from_millis(100)).await;
    while events.try_recv().is_ok() {}
    let set = client.multi_lock(["acct:1", "acct:2", "acct:3"]).unwrap();
    for _ in 0..20 {
        assert!(matches!(set.try_lock().await, Err(Error::Busy { .. })));
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut touched = Vec::new();
    while let Ok(event) = events.try_recv() {
        touched.push(event);
    }
    assert!(touched.is_empty(), "a failed try touched {touched:?}");
    assert!(!held(&client, "acct:1").await && !held(&client, "acct:2").await);
    holder.release().await.unwrap();
    let all = set.try_lock().await.unwrap();
    for name in ["acct:1", "acct:2", "acct:3"] {
        assert!(held(&client, name).await, "{name} not held");
    }
    all.release().await.unwrap();
}

/// The store's one step itself: all or none, the busy lock named, and `None` where
/// it cannot (a lock fenced on grant), so the caller tries one by one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_takes_a_set_in_one_step_or_says_it_cannot() {
    use latchkey::store::{AcquireRequest, AllOrNone, LockStore};
    let (server, client) = common::start().await;
    let store = client.store();
    let prefix = latchkey::Prefix::default();
    let keys: Vec<latchkey::LockKey> = ["s:1", "s:2"]
        .iter()
        .map(|name| latchkey::LockKey::new(&prefix, name).unwrap())
        .collect();
    let owners: Vec<latchkey::OwnerToken> = (0..2)
        .map(|_| latchkey::OwnerToken::generate().unwrap())
        .collect();
    let request = AcquireRequest::new(latchkey::Ttl::new(Duration::from_secs(5)).unwrap());
    let takes = [
        (&keys[0], &owners[0], request),
        (&keys[1], &owners[1], request),
    ];
    let other = latchkey::OwnerToken::generate().unwrap();
    let mut conn = common::connect(&server.url()).await;
    let _: () = redis::cmd("SET")
        .arg("s:2")
        .arg(other.as_str())
        .query_async(&mut conn)
        .await
        .unwrap();
    let busy = store.try_acquire_all(&takes).await.unwrap();
    assert!(
        matches!(&busy, Some(AllOrNone::Busy { index: 1, holder: Some(h), .. }) if h == other.as_str()),
        "{busy:?}"
    );
    let s1: Option<String> = redis::cmd("GET")
        .arg("s:1")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(s1, None);
    let _: () = redis::cmd("DEL")
        .arg("s:2")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(
        store.try_acquire_all(&takes).await.unwrap(),
        Some(AllOrNone::Taken)
    );
    for (key, owner) in keys.iter().zip(&owners) {
        let (value, pttl): (String, i64) = redis::pipe()
            .cmd("GET")
            .arg(key.as_str())
            .cmd("PTTL")
            .arg(key.as_str())
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(value, owner.as_str());
        assert!(pttl > 4_000 && pttl <= 5_000, "{pttl}");
    }
    // Already ours (a reply lost): left to the one-by-one tries, as a fenced take is.
    assert_eq!(store.try_acquire_all(&takes).await.unwrap(), None);
    let fenced = request.fenced(true);
    let takes = [
        (&keys[0], &owners[0], fenced),
        (&keys[1], &owners[1], fenced),
    ];
    assert_eq!(store.try_acquire_all(&takes).await.unwrap(), None);
}

/// A set of locks from two stores (here two databases of one server) is never
/// taken in one step on one of them: each lock is set where its own store keeps
/// it, and released there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_of_two_stores_are_each_taken_on_their_own() {
    let (server, zero) = common::start().await;
    let one = Client::open(&format!("{}/1", server.url())).await.unwrap();
    let set = MultiLock::new([zero.mutex("x").unwrap(), one.mutex("y").unwrap()]).unwrap();
    let both = set.lock().await.unwrap();
    assert!(held(&zero, "x").await && held(&one, "y").await);
    assert!(!held(&zero, "y").await && !held(&one, "x").await);
    both.release().await.unwrap();
    assert!(!held(&zero, "x").await && !held(&one, "y").await);
}

/// No call returns a set with a guard already lost: a lock taken first whose lease
/// runs out while the others are taken (replies slower than what is left of it)
/// makes the round fail, and the call gives everything back and goes again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_set_comes_back_with_a_lock_already_lost() {
    let server = latchkey_testkit::RedisServer::start().unwrap();
    let proxy = latchkey_testkit::FaultProxy::start(server.port()).unwrap();
    let slow = Client::open(&proxy.url()).await.unwrap();
    let direct = Client::open(&server.url()).await.unwrap();
    let lease = Lease::fixed(Duration::from_millis(150)).unwrap();
    let both = MultiLock::new(
        ["lost-a", "lost-b"].map(|name| slow.mutex(name).unwrap().with_lease(lease)),
    )
    .unwrap();
    // "lost-b" busy a while: the call waits for it, then takes "lost-a" in a round
    // trip that outlasts what is left of "lost-b"'s lease.
    let other = direct.mutex("lost-b").unwrap().lock().await.unwrap();
    let release = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        other.release().await.unwrap();
    });
    proxy.set_latency(Duration::ZERO, Duration::from_millis(100));
    match both.lock_timeout(Duration::from_millis(1500)).await {
        Ok(guards) => {
            for guard in guards.guards() {
                assert!(!guard.is_lost(), "{} came back lost", guard.key());
            }
        }
        Err(error) => assert!(
            error.is_transient() || matches!(error, Error::Busy { .. }),
            "{error}"
        ),
    }
    release.await.unwrap();
    // Both free: one script takes them at once, its reply slower than the lease.
    tokio::time::sleep(Duration::from_millis(300)).await;
    proxy.set_latency(Duration::ZERO, Duration::from_millis(250));
    let late = both
        .try_lock()
        .await
        .expect_err("a set whose leases had ended");
    assert!(
        late.to_string().contains("after its lease had ended"),
        "{late}"
    );
}
