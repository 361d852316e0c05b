//! The lock on one real Redis server: ownership, fencing, cancellation, interop, drop.

mod common;

use std::time::Duration;

use latchkey::store::{AcquireRequest, Attempt, LockStore, Pass};
use latchkey::{Client, Error, LockKey, OwnerToken, Prefix, Ttl};
use latchkey_testkit::RedisServer;
use redis::AsyncCommands;

async fn setup() -> (RedisServer, Client, redis::aio::MultiplexedConnection) {
    let (server, client) = common::start().await;
    let raw = common::connect(&server.url()).await;
    (server, client, raw)
}

async fn pttl(raw: &mut redis::aio::MultiplexedConnection, key: &str) -> i64 {
    redis::cmd("PTTL").arg(key).query_async(raw).await.unwrap()
}

/// Polls until `key` is gone; false if it is still there after `within`.
async fn freed_within(
    raw: &mut redis::aio::MultiplexedConnection,
    key: &str,
    within: Duration,
) -> bool {
    let deadline = tokio::time::Instant::now() + within;
    while tokio::time::Instant::now() < deadline {
        if !raw.exists::<_, bool>(key).await.unwrap() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    false
}

#[tokio::test]
async fn the_lock_key_holds_exactly_the_owner_token_with_a_px_expiry() {
    let (_server, client, mut raw) = setup().await;
    let mutex = common::fixed(&client, "layout", Duration::from_secs(7));
    let guard = mutex.try_lock().await.unwrap();
    let stored: String = raw.get("layout").await.unwrap();
    assert_eq!(stored, guard.owner().as_str());
    // 32 hex digits (128 bits) and the latchkey mark.
    let random = stored.strip_suffix(":lk").unwrap();
    assert_eq!(random.len(), 32);
    assert!(random.chars().all(|c| c.is_ascii_hexdigit()), "{stored}");
    let left = pttl(&mut raw, "layout").await;
    assert!(left > 6_000 && left <= 7_000, "pttl {left}");
    assert!(guard.validity() <= Duration::from_secs(7));
    assert!(guard.validity() > Duration::from_secs(6));
    assert!(guard.is_held().await.unwrap());
    assert!(guard.release().await.unwrap());
    assert!(!raw.exists::<_, bool>("layout").await.unwrap());
}

#[tokio::test]
async fn a_held_lock_is_busy_for_others() {
    let (_server, client, _raw) = setup().await;
    let mutex = client.mutex("busy").unwrap();
    let _guard = mutex.try_lock().await.unwrap();
    let error = mutex.try_lock().await.map(drop).unwrap_err();
    let Error::Busy {
        kind,
        name,
        key,
        waited,
        holder,
        retry_after,
    } = &error
    else {
        panic!("expected Busy, got {error:?}");
    };
    assert_eq!((*kind, name.as_str()), (latchkey::Kind::Lock, "busy"));
    assert_eq!(key, "busy");
    assert!(*waited < Duration::from_secs(1));
    assert!(retry_after.unwrap() <= Ttl::DEFAULT.as_duration());
    // The holder is named, masked: its first 4 characters only.
    let shown = _guard.owner().masked();
    assert_eq!(holder.as_deref(), Some(shown.as_str()));
    assert!(error.to_string().contains(&shown), "{error}");
    assert!(!error.to_string().contains(_guard.owner().as_str()));
    let waited = match mutex.lock_timeout(Duration::from_millis(300)).await {
        Err(Error::Busy { waited, .. }) => waited,
        other => panic!("expected Busy, got {other:?}"),
    };
    assert!(
        waited >= Duration::from_millis(300),
        "gave up after {waited:?}"
    );
    assert!(mutex.is_locked().await.unwrap());
}

#[tokio::test]
async fn a_waiter_gets_the_lock_when_the_holder_releases() {
    let (_server, client, _raw) = setup().await;
    let mutex = client.mutex("handover").unwrap();
    let guard = mutex.try_lock().await.unwrap();
    let waiter = {
        let mutex = mutex.clone();
        tokio::spawn(async move { mutex.lock_timeout(Duration::from_secs(10)).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    let first = guard.fence().await.unwrap();
    assert!(guard.release().await.unwrap());
    let second = waiter.await.unwrap().unwrap();
    assert!(second.fence().await.unwrap() > first);
}

#[tokio::test]
async fn release_and_extend_by_a_non_owner_are_refused_and_change_nothing() {
    let (_server, client, mut raw) = setup().await;
    let mutex = common::fixed(&client, "owned", Duration::from_secs(20));
    let guard = mutex.try_lock().await.unwrap();
    let key = mutex.key().clone();
    let stranger = OwnerToken::generate().unwrap();
    let store = client.store();
    let ttl_before = pttl(&mut raw, "owned").await;

    assert!(!store.release(&key, &stranger, None).await.unwrap());
    assert!(
        !store
            .extend(&key, &stranger, Ttl::new(Duration::from_secs(600)).unwrap())
            .await
            .unwrap()
    );

    let stored: String = raw.get("owned").await.unwrap();
    assert_eq!(stored, guard.owner().as_str());
    let ttl_after = pttl(&mut raw, "owned").await;
    assert!(
        ttl_after <= ttl_before,
        "a stranger's extend moved the expiry"
    );
    assert!(guard.release().await.unwrap());
}

#[tokio::test]
async fn a_holder_whose_lease_expired_cannot_release_or_extend_the_next_holders_lock() {
    let (_server, client, mut raw) = setup().await;
    let mutex = common::fixed(&client, "expired", Duration::from_millis(100));
    let stale = mutex.try_lock().await.unwrap();
    let stale_fence = stale.fence().await.unwrap();
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert_eq!(stale.validity(), Duration::ZERO);
    assert!(!stale.is_held().await.unwrap());

    let next = mutex
        .clone()
        .with_lease(latchkey::Lease::fixed(Duration::from_secs(30)).unwrap())
        .try_lock()
        .await
        .unwrap();
    assert!(next.fence().await.unwrap() > stale_fence);
    match stale.extend(Duration::from_secs(60)).await {
        Err(Error::LeaseLost { key, .. }) => assert_eq!(key, "expired"),
        other => panic!("expected LeaseLost, got {other:?}"),
    }
    assert!(!stale.release().await.unwrap());
    let stored: String = raw.get("expired").await.unwrap();
    assert_eq!(stored, next.owner().as_str());
    assert!(pttl(&mut raw, "expired").await <= 30_000);
}

#[tokio::test]
async fn extend_resets_the_lease_rather_than_adding_to_it() {
    let (_server, client, mut raw) = setup().await;
    let mutex = common::fixed(&client, "extend", Duration::from_secs(10));
    let guard = mutex.try_lock().await.unwrap();
    guard.extend(Duration::from_secs(4)).await.unwrap();
    let left = pttl(&mut raw, "extend").await;
    assert!(left > 3_000 && left <= 4_000, "pttl {left}");
    assert!(guard.validity() <= Duration::from_secs(4));
    assert!(matches!(
        guard.extend(Duration::ZERO).await,
        Err(Error::InvalidArgument(_))
    ));
}

#[tokio::test]
async fn fencing_tokens_strictly_increase_also_across_an_empty_restart() {
    let (mut server, client, _raw) = setup().await;
    let mutex = client.mutex("fenced").unwrap();
    let mut last = 0;
    for _ in 0..200 {
        let guard = mutex.try_lock().await.unwrap();
        assert!(
            guard.fence().await.unwrap() > last,
            "{} after {last}",
            guard.fence().await.unwrap()
        );
        last = guard.fence().await.unwrap();
        guard.release().await.unwrap();
    }
    // Nothing survives: no RDB, no AOF. The counter starts over from zero...
    server.restart().unwrap();
    let client = Client::open(&server.url()).await.unwrap();
    let mutex = client.mutex("fenced").unwrap();
    for _ in 0..20 {
        let guard = mutex.try_lock().await.unwrap();
        // ...yet tokens keep growing, floored at the server clock.
        assert!(
            guard.fence().await.unwrap() > last,
            "{} after restart, {last} before",
            guard.fence().await.unwrap()
        );
        last = guard.fence().await.unwrap();
        guard.release().await.unwrap();
    }
}

#[tokio::test]
async fn the_same_client_keeps_working_after_the_server_restarts() {
    let (mut server, client, _raw) = setup().await;
    let mutex = client.mutex("reconnect").unwrap();
    mutex.try_lock().await.unwrap().release().await.unwrap();
    server.restart().unwrap();
    // The first command after the restart may meet the dead socket; the next reconnects.
    let mut result = mutex.try_lock().await;
    for _ in 0..20 {
        if result.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        result = mutex.try_lock().await;
    }
    assert!(result.unwrap().release().await.unwrap());
}

#[tokio::test]
async fn a_dropped_guard_is_released_in_the_background() {
    let (_server, client, mut raw) = setup().await;
    let mutex = common::fixed(&client, "dropped", Duration::from_secs(60));
    drop(mutex.try_lock().await.unwrap());
    assert!(freed_within(&mut raw, "dropped", Duration::from_secs(2)).await);
}

#[tokio::test]
async fn a_cancelled_acquire_whose_set_lands_after_the_drop_leaves_nothing_held() {
    let (server, client, mut raw) = setup().await;
    let mutex = common::fixed(&client, "cancelled", Duration::from_secs(60));
    // Load the script first: a cold EVALSHA would only fetch NOSCRIPT, never set anything.
    mutex.try_lock().await.unwrap().release().await.unwrap();
    // Freeze Redis so the acquire is on the wire but unanswered when we drop it.
    server.pause().unwrap();
    let attempt = tokio::time::timeout(Duration::from_millis(100), mutex.lock()).await;
    assert!(
        attempt.is_err(),
        "acquire cannot finish while Redis is paused"
    );
    server.resume().unwrap();
    // Redis now runs the SET, then the background release queued behind it.
    assert!(freed_within(&mut raw, "cancelled", Duration::from_secs(2)).await);
    assert!(mutex.try_lock().await.is_ok());
}

#[tokio::test]
async fn lock_futures_dropped_at_random_points_never_leave_the_key_held() {
    let (_server, client, mut raw) = setup().await;
    let mutex = common::fixed(&client, "random-drop", Duration::from_secs(60));
    let mut landed = 0;
    for round in 0..300u64 {
        // Half the rounds race a free lock, half a lock that frees itself soon.
        if round % 2 == 1 {
            let _: () = redis::cmd("SET")
                .arg("random-drop")
                .arg("other")
                .arg("PX")
                .arg(3)
                .query_async(&mut raw)
                .await
                .unwrap();
        }
        let cancel_after = Duration::from_micros(rand_below(round, 1_500));
        if let Ok(Ok(guard)) = tokio::time::timeout(cancel_after, mutex.lock()).await {
            landed += 1;
            drop(guard);
        }
        assert!(
            freed_within(&mut raw, "random-drop", Duration::from_secs(2)).await,
            "round {round}: key still held after a cancelled acquire"
        );
    }
    println!("{landed} of 300 acquires completed before their cancellation");
}

/// A cheap deterministic spread of cancellation points.
fn rand_below(seed: u64, bound: u64) -> u64 {
    seed.wrapping_mul(6_364_136_223_846_793_005)
        .wrapping_add(1_442_695_040_888_963_407)
        % bound
}

#[tokio::test]
async fn a_plain_set_nx_px_holder_and_latchkey_exclude_each_other() {
    let (_server, client, mut raw) = setup().await;
    let mutex = client.mutex("shared").unwrap();
    // A latchkey holder came and went, leaving its fencing counter behind.
    assert!(mutex.try_lock().await.unwrap().release().await.unwrap());

    // Another library (redis-py's Lock, redsync, node-redlock) holds it...
    let taken = their_set_nx_px(&mut raw).await;
    assert!(taken.is_some());
    match mutex.try_lock().await {
        Err(Error::Busy {
            retry_after: Some(left),
            ..
        }) => assert!(left <= Duration::from_secs(5)),
        other => panic!("expected Busy, got {other:?}"),
    }
    // ...and `status` says so, without passing off an earlier latchkey holder's
    // fence as theirs...
    let status = mutex.status().await.unwrap();
    assert!(status.is_held() && !status.is_held_by_latchkey());
    assert_eq!(status.fence, None);
    // ...and releases it with its own compare-and-delete; now we get it...
    let _: i64 = raw.del("shared").await.unwrap();
    let guard = mutex.try_lock().await.unwrap();
    // ...and their SET NX PX fails while we hold it.
    let theirs = their_set_nx_px(&mut raw).await;
    assert!(theirs.is_none());
    assert!(guard.release().await.unwrap());
}

/// The plain `SET key token NX PX ttl` other libraries take a lock with.
async fn their_set_nx_px(raw: &mut redis::aio::MultiplexedConnection) -> Option<String> {
    redis::cmd("SET")
        .arg("shared")
        .arg("their-token")
        .arg("NX")
        .arg("PX")
        .arg(5_000)
        .query_async(raw)
        .await
        .unwrap()
}

#[tokio::test]
async fn prefixes_and_shared_connections_work() {
    let (server, _client, mut raw) = setup().await;
    let shared = redis::Client::open(server.url())
        .unwrap()
        .get_connection_manager()
        .await
        .unwrap();
    let client = Client::from_connection(shared).with_prefix("app:").unwrap();
    let guard = client.mutex("job").unwrap().try_lock().await.unwrap();
    assert_eq!(guard.key().as_str(), "app:job");
    assert!(raw.exists::<_, bool>("app:job").await.unwrap());
    let fence = guard.fence().await.unwrap();
    let counter: u64 = raw.get("{app:job}:lk:fence").await.unwrap();
    assert_eq!(counter, fence);
    guard.release().await.unwrap();

    let store = latchkey::store::RedisStore::open(&server.url())
        .await
        .unwrap();
    let key = LockKey::new(&Prefix::new("raw:").unwrap(), "k").unwrap();
    let owner = OwnerToken::generate().unwrap();
    let once = AcquireRequest::new(Ttl::DEFAULT);
    let attempt = store.try_acquire(&key, &owner, once).await.unwrap();
    assert!(matches!(attempt, Attempt::Acquired { .. }));
    let stranger = OwnerToken::generate().unwrap();
    let again = store.try_acquire(&key, &stranger, once).await.unwrap();
    assert!(matches!(again, Attempt::Busy { .. }));
}

#[tokio::test]
async fn a_pass_goes_ahead_of_plain_waiters_but_never_of_a_fair_one() {
    let server = RedisServer::start().unwrap();
    let store = latchkey::store::RedisStore::open(&server.url())
        .await
        .unwrap();
    let key = LockKey::new(&Prefix::default(), "ahead").unwrap();
    let once = AcquireRequest::new(Ttl::DEFAULT);
    let holder = OwnerToken::generate().unwrap();
    let Attempt::Acquired { queued, .. } = store.try_acquire(&key, &holder, once).await.unwrap()
    else {
        panic!("the lock was free");
    };
    assert_eq!(queued, 0);
    for fair in [false, true] {
        let waiter = OwnerToken::generate().unwrap();
        let queue = once
            .fair(fair)
            .queued(Some(Ttl::new(Duration::from_secs(5)).unwrap()));
        let waiting = store.try_acquire(&key, &waiter, queue).await.unwrap();
        assert!(matches!(waiting, Attempt::Busy { .. }), "{waiting:?}");
        let next = OwnerToken::generate().unwrap();
        // Not ahead: refused while anyone waits.
        let plain_pass = store.pass(&key, &holder, &next, Ttl::DEFAULT, false).await;
        assert_eq!(plain_pass.unwrap(), None);
        // Ahead: allowed past a plain waiter, refused before a fair one.
        let passed = store
            .pass(&key, &holder, &next, Ttl::DEFAULT, true)
            .await
            .unwrap();
        assert_eq!(passed.is_some(), !fair, "fair waiter: {fair}");
        if let Some(fence) = passed {
            // `next` holds it now; hand it back to the test's holder for the next round.
            let back = store
                .pass(&key, &next, &holder, Ttl::DEFAULT, true)
                .await
                .unwrap();
            assert!(back.unwrap() > fence);
        }
        assert!(!store.release(&key, &waiter, Some(queue.ttl)).await.unwrap());
    }
}

#[test]
fn a_guard_dropped_after_its_runtime_shut_down_does_not_panic() {
    let server = RedisServer::start().unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let guard = runtime.block_on(async {
        let client = Client::open(&server.url()).await.unwrap();
        client.mutex("orphan").unwrap().try_lock().await.unwrap()
    });
    drop(runtime);
    drop(guard);
}
