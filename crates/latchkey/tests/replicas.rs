//! A primary with replicas: with `with_wait_replicas`, every grant and renewal waits
//! until the replicas have it (WAIT), fails and undoes itself when too few confirm,
//! and a guard says how many did. Real primaries and replicas, single node and
//! cluster.

use std::time::Duration;

use latchkey::{Client, Error, Fairness};
use latchkey_testkit::{RedisCluster, RedisServer};
use redis::Commands;

const WAIT: Duration = Duration::from_millis(200);

/// A client of `primary` whose grants wait for `replicas` replicas.
async fn waiting_for(primary: &RedisServer, replicas: u32) -> Client {
    let client = Client::open(&primary.url()).await.unwrap();
    client.with_wait_replicas(replicas, WAIT).unwrap()
}

/// A primary and one replica that follows it.
fn primary_and_replica() -> (RedisServer, RedisServer) {
    let primary = RedisServer::start().unwrap();
    let replica = RedisServer::start().unwrap();
    replica.replicate(&primary).unwrap();
    (primary, replica)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_is_on_the_replica_when_the_lock_returns() {
    let (primary, replica) = primary_and_replica();
    let client = waiting_for(&primary, 1).await;
    let guard = client.mutex("payout").unwrap().lock().await.unwrap();
    assert_eq!(guard.replicas(), Some(1));
    // Read on the replica right away: WAIT returned only once it had the grant.
    let on_replica: Option<String> = replica.connection().unwrap().get("payout").unwrap();
    assert_eq!(on_replica.as_deref(), Some(guard.owner().as_str()));
    guard.extend(Duration::from_secs(60)).await.unwrap();
    assert!(guard.release().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_few_replicas_fail_the_grant_and_leave_the_lock_free() {
    let (primary, _replica) = primary_and_replica();
    let client = waiting_for(&primary, 2).await;
    let mutex = client.mutex("payout").unwrap();
    match mutex.try_lock().await {
        Err(Error::TooFewReplicas {
            wanted: 2,
            acked: 1,
            ..
        }) => {}
        other => panic!("expected TooFewReplicas, got {other:?}"),
    }
    assert!(
        !mutex.is_locked().await.unwrap(),
        "the unconfirmed grant was left in place"
    );
    // A wait retries, and reports why it could not take the lock.
    let err = mutex
        .lock_timeout(Duration::from_millis(600))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::TooFewReplicas { .. }), "{err}");
    assert!(err.is_transient());
    // The undo of a grant cut off at the deadline runs behind that grant's WAIT
    // (on its connection, so that it cannot run before it): free within the wait.
    tokio::time::sleep(WAIT + Duration::from_millis(100)).await;
    assert!(!mutex.is_locked().await.unwrap());
    assert_eq!(mutex.status().await.unwrap().waiters, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_a_paused_replica_cannot_confirm_is_an_error() {
    let (primary, replica) = primary_and_replica();
    let client = waiting_for(&primary, 1).await;
    let guard = client.mutex("payout").unwrap().try_lock().await.unwrap();
    replica.pause().unwrap();
    let err = guard.extend(Duration::from_secs(60)).await.unwrap_err();
    replica.resume().unwrap();
    assert!(
        matches!(err, Error::TooFewReplicas { acked: 0, .. }),
        "{err}"
    );
    assert!(guard.release().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_claims_a_handed_lock_so_its_grant_is_confirmed_too() {
    let (primary, _replica) = primary_and_replica();
    let client = waiting_for(&primary, 1).await;
    let held = client
        .mutex("queue")
        .unwrap()
        .with_fairness(Fairness::Fair)
        .try_lock()
        .await
        .unwrap();
    let other = waiting_for(&primary, 1).await;
    let waiter = other.mutex("queue").unwrap().with_fairness(Fairness::Fair);
    let waiting = tokio::spawn(async move { waiter.lock_timeout(Duration::from_secs(10)).await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let first_fence = held.fence().await.unwrap();
    assert!(held.release().await.unwrap());
    let guard = waiting.await.unwrap().unwrap();
    assert_eq!(guard.replicas(), Some(1));
    assert!(guard.fence().await.unwrap() > first_fence);
    assert!(guard.release().await.unwrap());
}

#[tokio::test]
async fn a_replica_wait_must_fit_in_the_reply_timeout() {
    let (primary, _replica) = primary_and_replica();
    let client = Client::open(&primary.url()).await.unwrap();
    let err = client
        .with_wait_replicas(1, Duration::from_millis(600))
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_grant_waits_for_the_shards_replica() {
    let cluster = RedisCluster::start().unwrap();
    let client = Client::open_cluster(&cluster.seeds())
        .await
        .unwrap()
        .with_wait_replicas(1, WAIT)
        .unwrap();
    let guard = client.mutex("payout").unwrap().lock().await.unwrap();
    assert_eq!(guard.replicas(), Some(1));
    let replica = &cluster.nodes()[cluster.replica_of("payout").unwrap()];
    let mut conn = replica.connection().unwrap();
    let _: () = redis::cmd("READONLY").query(&mut conn).unwrap();
    let on_replica: Option<String> = conn.get("payout").unwrap();
    assert_eq!(on_replica.as_deref(), Some(guard.owner().as_str()));
    assert!(guard.release().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_clone_gets_no_unconfirmed_lock_from_its_parent() {
    let (primary, _replica) = primary_and_replica();
    let plain = Client::open(&primary.url()).await.unwrap();
    let confirming = plain.clone().with_wait_replicas(1, WAIT).unwrap();
    let held = plain.mutex("payout").unwrap().try_lock().await.unwrap();
    let waiter = confirming.mutex("payout").unwrap();
    let waiting = tokio::spawn(async move { waiter.lock_timeout(Duration::from_secs(10)).await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(held.release().await.unwrap());
    let guard = waiting.await.unwrap().unwrap();
    assert_eq!(
        guard.replicas(),
        Some(1),
        "a lock passed in-process, unconfirmed"
    );
    guard.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permits_wait_for_replicas_too() {
    let (primary, _replica) = primary_and_replica();
    let confirmed = waiting_for(&primary, 1).await;
    let pool = confirmed.semaphore("pool", 2).unwrap();
    let permit = pool.acquire(1).await.unwrap();
    assert_eq!(permit.replicas(), Some(1));
    permit.extend(Duration::from_secs(60)).await.unwrap();
    assert!(permit.release().await.unwrap());
    // Two replicas wanted, one there: the grant is refused and undone.
    let unconfirmed = waiting_for(&primary, 2).await;
    let pool = unconfirmed.semaphore("pool", 2).unwrap();
    match pool.try_acquire(1).await {
        Err(Error::TooFewReplicas {
            wanted: 2,
            acked: 1,
            ..
        }) => {}
        other => panic!("expected TooFewReplicas, got {other:?}"),
    }
    assert_eq!(
        pool.available().await.unwrap(),
        2,
        "the unconfirmed permit was kept"
    );
}

/// A grant sent just as the primary froze, whose waiter gave up before the primary
/// woke: its undo must run after it, and so free the lock, however the woken server
/// orders its connections. (The undo once went on another connection than the
/// grant, ran first, found nothing, and the grant then held the lock for nobody for
/// its whole lease: `latchkey-torture --wait-replicas`, seed 982710591443319065.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_delayed_by_a_frozen_primary_is_undone_after_it_lands() {
    let (primary, _replica) = primary_and_replica();
    let client = waiting_for(&primary, 1).await;
    let mutex = client.mutex("payout").unwrap();
    // Connect and load the scripts first, so the try below is a single request.
    drop(mutex.try_lock().await.unwrap());
    tokio::time::sleep(Duration::from_millis(100)).await;
    for round in 0..5 {
        primary.pause().unwrap();
        // A read sent first makes the store's other connection the first the woken
        // server serves (its epoll lists connections in the order data came).
        let read = tokio::spawn({
            let mutex = mutex.clone();
            async move { mutex.is_locked().await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        let err = mutex
            .lock_timeout(Duration::from_millis(150))
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Unreachable { .. }), "{err}");
        // Woken before the requests time out (1 s): both are in its buffers.
        tokio::time::sleep(Duration::from_millis(300)).await;
        primary.resume().unwrap();
        let _ = read.await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        let held: Option<String> = primary.connection().unwrap().get("payout").unwrap();
        assert_eq!(
            held, None,
            "round {round}: the late grant holds the lock for nobody"
        );
    }
}
