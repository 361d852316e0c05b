//! Count-down latches and barriers against a real server: a latch opens exactly
//! once, when its last count down lands; waiters on other clients are woken by it
//! (well within their 10 s re-read); every caller must give the same count; an
//! unused latch expires.

mod common;

use std::time::{Duration, Instant};

use latchkey::{Client, Error};
use redis::Commands;

/// Well under a waiter's 10 s re-read: a pass shows it was woken, not that it polled.
const WOKEN_WITHIN: Duration = Duration::from_secs(3);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_latch_opens_once_when_its_last_count_down_lands() {
    let (server, client) = common::start().await;
    let mut waiters = Vec::new();
    for _ in 0..2 {
        let other = Client::open(&server.url()).await.unwrap();
        let latch = other.latch("loaded", 3).unwrap();
        waiters.push(tokio::spawn(async move {
            latch.wait_timeout(Duration::from_secs(20)).await.unwrap()
        }));
    }
    let latch = client.latch("loaded", 3).unwrap();
    assert_eq!(latch.left().await.unwrap(), 3);
    for left in [2, 1] {
        let counted = latch.count_down().await.unwrap();
        assert_eq!((counted.left, counted.opened), (left, false));
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        waiters.iter().all(|w| !w.is_finished()),
        "a waiter passed a closed latch"
    );
    let opened_at = Instant::now();
    let counted = latch.count_down().await.unwrap();
    assert_eq!((counted.left, counted.opened), (0, true));
    for waiter in waiters {
        assert!(waiter.await.unwrap());
    }
    assert!(
        opened_at.elapsed() < WOKEN_WITHIN,
        "woken after {:?}",
        opened_at.elapsed()
    );
    // Open stays open; nobody else opens it.
    let counted = latch.count_down().await.unwrap();
    assert_eq!((counted.left, counted.opened), (0, false));
    assert!(latch.wait_timeout(Duration::ZERO).await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_count_downs_open_it_exactly_once() {
    let (server, _client) = common::start().await;
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let client = Client::open(&server.url()).await.unwrap();
        for _ in 0..5 {
            let latch = client.latch("crowd", 20).unwrap();
            tasks.push(tokio::spawn(
                async move { latch.count_down().await.unwrap() },
            ));
        }
    }
    let mut opened = 0;
    for task in tasks {
        opened += usize::from(task.await.unwrap().opened);
    }
    assert_eq!(opened, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_caller_must_give_the_same_count() {
    let (_server, client) = common::start().await;
    client
        .latch("agreed", 3)
        .unwrap()
        .count_down()
        .await
        .unwrap();
    let other = client.latch("agreed", 4).unwrap();
    let err = other.count_down().await.unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    assert!(err.to_string().contains("count 3"), "{err}");
    assert!(matches!(other.left().await, Err(Error::InvalidArgument(_))));
    assert_eq!(client.latch("agreed", 3).unwrap().left().await.unwrap(), 2);
    assert!(matches!(
        client.latch("zero", 0),
        Err(Error::InvalidArgument(_))
    ));
}

/// A latch key written by hand with more left than its count, a count of 0 or
/// one past 2^40 (which no latch has) is data latchkey did not write: a count down
/// and a look name it in the error, never count on it or show it as a latch.
#[tokio::test]
async fn a_latch_with_more_left_than_its_count_is_refused() {
    let (server, client) = common::start().await;
    let mut admin = server.connection().unwrap();
    let latch = client.latch("odd", 3).unwrap();
    for stored in ["99999999999999999999:3", "4:3", "0:0", "1:2000000000000"] {
        let _: () = admin.set("{odd}:lk:latch", stored).unwrap();
        let results = [
            latch.count_down().await.map(drop),
            latch.left().await.map(drop),
            client.inspect("odd").await.map(drop),
        ];
        for result in results {
            match result {
                Err(Error::WrongType { key }) => assert_eq!(key, "{odd}:lk:latch"),
                other => panic!("{stored}: expected WrongType, got {other:?}"),
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_latch_times_out_and_its_key_expires_after_its_lifetime() {
    let (server, client) = common::start().await;
    let lifetime = Duration::from_secs(90);
    let latch = client
        .latch("short", 2)
        .unwrap()
        .with_lifetime(lifetime)
        .unwrap();
    latch.count_down().await.unwrap();
    let started = Instant::now();
    assert!(
        !latch
            .wait_timeout(Duration::from_millis(200))
            .await
            .unwrap()
    );
    assert!(started.elapsed() >= Duration::from_millis(200));
    assert!(!latch.wait_timeout(Duration::ZERO).await.unwrap());
    let pttl: i64 = server
        .connection()
        .unwrap()
        .pttl("{short}:lk:latch")
        .unwrap();
    assert!(pttl > 80_000 && pttl <= 90_000, "PTTL {pttl}");
    for refused in [Duration::from_millis(300), Duration::MAX] {
        assert!(matches!(
            client.latch("short", 2).unwrap().with_lifetime(refused),
            Err(Error::InvalidArgument(_))
        ));
    }
    let _: () = server
        .connection()
        .unwrap()
        .del("{short}:lk:latch")
        .unwrap();
    assert_eq!(
        latch.left().await.unwrap(),
        2,
        "a latch without its key starts from its count"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_rides_out_a_restart_of_redis() {
    let (mut server, client) = common::start().await;
    let latch = client.latch("restarted", 1).unwrap();
    let waiting = {
        let latch = latch.clone();
        tokio::spawn(async move { latch.wait_timeout(Duration::from_secs(20)).await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    tokio::task::block_in_place(|| server.restart().unwrap());
    let started = Instant::now();
    loop {
        match latch.count_down().await {
            Ok(_) => break,
            Err(e) if e.is_transient() && started.elapsed() < Duration::from_secs(10) => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("{e}"),
        }
    }
    assert!(
        waiting.await.unwrap().unwrap(),
        "the wait ended before the latch opened"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_barrier_returns_once_every_party_arrived() {
    let (server, _client) = common::start().await;
    let mut parties = Vec::new();
    for _ in 0..4 {
        let client = Client::open(&server.url()).await.unwrap();
        let barrier = client.barrier("stage-1", 5).unwrap();
        parties.push(tokio::spawn(async move {
            barrier
                .arrive_and_wait_timeout(Duration::from_secs(20))
                .await
                .unwrap()
        }));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        parties.iter().all(|p| !p.is_finished()),
        "passed before all arrived"
    );
    let last = Client::open(&server.url())
        .await
        .unwrap()
        .barrier("stage-1", 5)
        .unwrap();
    let arrived = Instant::now();
    assert!(
        last.arrive_and_wait_timeout(Duration::from_secs(1))
            .await
            .unwrap()
    );
    for party in parties {
        assert!(party.await.unwrap());
    }
    assert!(arrived.elapsed() < WOKEN_WITHIN);
    assert_eq!(last.latch().left().await.unwrap(), 0);
}
