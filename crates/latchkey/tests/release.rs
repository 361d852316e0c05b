//! Holds that end cleanly: a release, a dropped guard and a cancelled wait free the
//! lock (or the place in the queue) at once, even when the connection they go out on
//! was reset in the meantime, and nothing sent before a release recreates the lock.
//! Each test is the regression test of one defect of issue "Holds that end cleanly".

mod common;

use std::time::{Duration, Instant};

use latchkey::{Client, Fairness};
use latchkey_testkit::RedisServer;

/// How long a release may take once the server answers again: retries pause at
/// most 250 ms, plus a round trip or two on a loaded machine.
const PROMPTLY: Duration = Duration::from_millis(600);

/// Whether `key` exists, on a connection of its own.
async fn exists(server: &RedisServer, key: &str) -> bool {
    let mut conn = common::connect(&server.url()).await;
    redis::cmd("EXISTS")
        .arg(key)
        .query_async::<u64>(&mut conn)
        .await
        .unwrap()
        == 1
}

/// Polls until `key` is gone; how long that took, or `None` after `limit`.
async fn gone_within(server: &RedisServer, key: &str, limit: Duration) -> Option<Duration> {
    let started = Instant::now();
    while started.elapsed() < limit {
        if !exists(server, key).await {
            return Some(started.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guard_dropped_after_a_connection_reset_frees_the_lock_at_once() {
    let (server, client) = common::start().await;
    let guard = common::renewed(&client, "dropped", Duration::from_secs(30))
        .lock()
        .await
        .unwrap();
    common::reset_connections(&server);
    drop(guard);
    let took = gone_within(&server, "dropped", Duration::from_secs(10)).await;
    assert!(
        took.is_some_and(|t| t < PROMPTLY),
        "the lock stayed held for nobody: {took:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_after_a_connection_reset_frees_the_lock_and_says_it_was_ours() {
    let (server, client) = common::start().await;
    let guard = common::fixed(&client, "explicit", Duration::from_secs(30))
        .lock()
        .await
        .unwrap();
    common::reset_connections(&server);
    let started = Instant::now();
    assert!(guard.release().await.unwrap());
    assert!(started.elapsed() < PROMPTLY, "{:?}", started.elapsed());
    assert!(!exists(&server, "explicit").await);
}

/// A cancelled fair waiter whose queue exit met a reset connection must not stay in
/// line: the next release would hand it the lock, held for nobody.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_waiter_leaves_the_queue_through_a_connection_reset() {
    let server = RedisServer::start().unwrap();
    let holder = Client::open(&server.url()).await.unwrap();
    let waiter = Client::open(&server.url()).await.unwrap();
    let fair = |client: &Client| {
        common::renewed(client, "line", Duration::from_secs(30)).with_fairness(Fairness::Fair)
    };
    let guard = fair(&holder).lock().await.unwrap();
    let waiting = {
        let mutex = fair(&waiter);
        tokio::spawn(async move { mutex.lock().await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    common::reset_connections(&server);
    waiting.abort();
    assert!(waiting.await.is_err_and(|e| e.is_cancelled()));
    assert!(latchkey::finish_background_releases(Duration::from_secs(5)).await);
    assert!(guard.release().await.unwrap());
    // Nobody waits any more: the release freed the lock instead of handing it over.
    let third = Client::open(&server.url()).await.unwrap();
    let started = Instant::now();
    let taken = fair(&third).lock_timeout(Duration::from_secs(10)).await;
    assert!(
        taken.is_ok() && started.elapsed() < PROMPTLY,
        "the lock went to the cancelled waiter: {:?} after {:?}",
        taken.map(|g| g.known_fence()),
        started.elapsed()
    );
}
