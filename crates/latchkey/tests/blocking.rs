//! The synchronous API, for callers without an async runtime.

use std::time::Duration;

use latchkey::Error;
use latchkey::blocking::Client;
use latchkey_testkit::RedisServer;
use redis::Commands;

#[test]
fn the_blocking_api_takes_extends_and_releases() {
    let server = RedisServer::start().unwrap();
    let client = Client::open(&server.url())
        .unwrap()
        .with_prefix("sync:")
        .unwrap();
    let mutex = client
        .mutex("job")
        .unwrap()
        .with_lease(latchkey::Lease::fixed(Duration::from_secs(10)).unwrap());
    let guard = mutex.lock_timeout(Duration::from_secs(1)).unwrap();
    assert_eq!(mutex.key().as_str(), "sync:job");
    assert!(matches!(mutex.try_lock(), Err(Error::Busy { .. })));
    guard.extend(Duration::from_secs(20)).unwrap();
    assert!(guard.validity() > Duration::from_secs(10));
    assert!(guard.is_held().unwrap());
    assert!(!guard.is_lost());
    assert!(mutex.status().unwrap().is_held());
    let fence = guard.fence().unwrap();
    assert!(guard.release().unwrap());

    let again = mutex.try_lock().unwrap();
    assert!(again.fence().unwrap() > fence);
    drop(again);
    // The blocking guard's drop releases before it returns.
    let mut admin = server.connection().unwrap();
    let held: bool = admin.exists("sync:job").unwrap();
    assert!(!held);
    assert!(!mutex.is_locked().unwrap());

    let fair = client
        .mutex("queue")
        .unwrap()
        .with_fairness(latchkey::Fairness::Fair)
        .with_lease(latchkey::Lease::renewed(Duration::from_millis(300)).unwrap());
    let held = fair.lock().unwrap();
    std::thread::sleep(Duration::from_millis(700));
    assert!(
        held.is_held().unwrap(),
        "the watchdog did not renew the lease"
    );
    assert!(held.release().unwrap());
}

/// Issue 9, item 7: tokio's recommended home for synchronous code is
/// `spawn_blocking`, where tokio's own `block_on` would panic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_blocking_api_works_inside_spawn_blocking() {
    let server = RedisServer::start().unwrap();
    let url = server.url();
    let fence = tokio::task::spawn_blocking(move || {
        let client = Client::open(&url).unwrap();
        let mutex = client.mutex("inside").unwrap();
        let guard = mutex.lock_timeout(Duration::from_secs(1)).unwrap();
        assert!(matches!(mutex.try_lock(), Err(Error::Busy { .. })));
        let fence = guard.fence().unwrap();
        assert!(guard.release().unwrap());
        // A guard dropped here releases before the drop returns.
        drop(mutex.try_lock().unwrap());
        assert!(!mutex.is_locked().unwrap());
        fence
    })
    .await
    .unwrap();
    assert!(fence > 0);
}

/// Called straight from async code the blocking API blocks that thread, as
/// `std::sync::Mutex` does, but it neither panics nor deadlocks, even on a
/// single-threaded runtime.
#[tokio::test]
async fn the_blocking_api_neither_panics_nor_deadlocks_inside_an_async_task() {
    let server = RedisServer::start().unwrap();
    let client = Client::open(&server.url()).unwrap();
    let mutex = client.mutex("inside").unwrap();
    let guard = mutex.try_lock().unwrap();
    assert!(mutex.is_locked().unwrap());
    drop(guard);
    assert!(!mutex.is_locked().unwrap());
    drop(mutex);
    drop(client);
}

#[test]
fn the_blocking_api_has_what_the_async_one_has() {
    let server = RedisServer::start().unwrap();
    let client = Client::open(&server.url()).unwrap();
    let mutex = client.mutex("parity").unwrap();

    // with_lock runs the closure under the lock and releases after.
    let fence = mutex.with_lock(|guard| guard.fence().unwrap()).unwrap();
    assert!(fence > 0);
    assert!(!mutex.is_locked().unwrap());

    // Re-entering: the lock goes with the last guard.
    let outer = mutex.try_lock().unwrap();
    let inner = outer.reenter();
    assert_eq!(outer.hold_count(), 2);
    assert!(inner.release().unwrap());
    assert!(mutex.is_locked().unwrap());
    let names: Vec<String> = client
        .list("*")
        .unwrap()
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(names, ["parity"]);
    let broken = mutex.force_release().unwrap().expect("it was held");
    assert_eq!(broken.masked_holder(), Some(outer.owner().masked()));
    assert!(!outer.is_held().unwrap());
    drop(outer);

    let policy = latchkey::ratelimit::Policy::cooldown(Duration::from_secs(60)).unwrap();
    let quota = client.rate_limiter("sms", policy).unwrap();
    assert!(quota.check(1).unwrap().allowed);
    assert!(!quota.peek().unwrap().allowed);
    assert!(!quota.check(1).unwrap().allowed);

    // On a plain thread, a fixed lease's lost token still fires when it runs out.
    let short = mutex.with_lease(latchkey::Lease::fixed(Duration::from_millis(200)).unwrap());
    let guard = short.try_lock().unwrap();
    let lost = guard.lost_token();
    std::thread::sleep(Duration::from_millis(600));
    assert!(guard.is_lost());
    assert!(lost.is_cancelled(), "the lost token never fired");
}

#[test]
fn the_blocking_api_keeps_hold_limits_and_lock_delays() {
    let server = RedisServer::start().unwrap();
    let client = Client::open(&server.url()).unwrap();
    let lease = latchkey::Lease::renewed(Duration::from_millis(300))
        .unwrap()
        .with_max_hold(Duration::from_millis(400))
        .unwrap()
        .with_lock_delay(Duration::from_secs(1))
        .unwrap();
    let mutex = client.mutex("capped").unwrap().with_lease(lease);
    let result = mutex.with_lock(|guard| {
        std::thread::sleep(Duration::from_millis(500));
        (guard.is_lost(), guard.hold_limit_reached())
    });
    // The limit ended the hold: with_lock says so, and the guard saw it.
    assert!(matches!(result, Err(Error::HoldLimit { .. })), "{result:?}");
    // The guard's release frees the lock at once, delay or not (unreleased, the
    // lease and the delay would keep it for more than a second).
    let mut conn = server.connection().unwrap();
    let freed = std::time::Instant::now();
    while conn.exists::<_, bool>("capped").unwrap() {
        assert!(freed.elapsed() < Duration::from_millis(300), "not released");
        std::thread::sleep(Duration::from_millis(10));
    }
}
